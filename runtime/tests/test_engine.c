// The engine: slots, views, ops, copies, modes, device-side errors.
#include <sys/wait.h>
#include <unistd.h>

#include "eager/eager.h"
#include "pjrt/pjrt_internal.h"
#include "test.h"

// prepare callback: fresh contiguous slots for every result.
typedef struct fresh {
  tpu_slot_t* slots[4];
  int n;
} fresh_t;

static tpu_status_t make_fresh(void* user, int count, const tpu_result_type_t* types,
                               tpu_view_t* targets) {
  fresh_t* f = user;
  for (int k = 0; k < count; ++k) {
    int64_t n = 1;
    for (int i = 0; i < types[k].rank; ++i) n *= types[k].sizes[i];
    TPU_RETURN_IF_ERROR(tpu_slot_create(0, (size_t)n * tpu_dtype_size(types[k].dtype), &f->slots[k]));
    targets[k] = tpu_view_contiguous(f->slots[k], types[k].dtype, types[k].sizes, types[k].rank);
    f->n = k + 1;
  }
  return TPU_OK;
}

// prepare callback: write into the given views.
static tpu_status_t into(void* user, int count, const tpu_result_type_t* types, tpu_view_t* targets) {
  const tpu_view_t* v = user;
  targets[0] = *v;
  return TPU_OK;
}

static tpu_status_t call_op(const char* name, const tpu_arg_t* args, tpu_write_mode_t mode,
                            tpu_prepare_fn prepare, void* user) {
  tpu_call_t c = {tpu_op_lookup(name), -1, args, 2, mode, NULL, 0, prepare, user,
                  TPU_PRECISION_HIGHEST, TPU_F32};
  return tpu_op_call(&c);
}

static tpu_slot_t* upload_as(tpu_dtype_t t, const void* data, int64_t n) {
  tpu_slot_t* s = NULL;
  CHECK_OK(tpu_slot_create(0, (size_t)n * tpu_dtype_size(t), &s));
  tpu_view_t v = tpu_view_contiguous(s, t, &n, 1);
  CHECK_OK(tpu_copy_from_host(&v, data));
  return s;
}

static tpu_slot_t* upload(const float* data, int64_t n) { return upload_as(TPU_F32, data, n); }

static tpu_arg_t tensor_arg(const tpu_view_t* v) {
  tpu_arg_t a = {TPU_ARG_TENSOR, 0, {0}};
  a.tensor = v;
  return a;
}

void test_engine_add_views(void) {
  CHECK_OK(tpu_runtime_init());
  float a[6] = {1, 2, 3, 4, 5, 6}, b[3] = {10, 20, 30}, out[6];
  tpu_slot_t *sa = upload(a, 6), *sb = upload(b, 3);
  int64_t d23[2] = {2, 3}, d3[1] = {3};
  tpu_view_t va = tpu_view_contiguous(sa, TPU_F32, d23, 2), vb = tpu_view_contiguous(sb, TPU_F32, d3, 1);
  tpu_arg_t args[2] = {tensor_arg(&va), tensor_arg(&vb)};
  fresh_t f = {0};
  CHECK_OK(call_op("add", args, TPU_WRITE_NEW, make_fresh, &f));
  tpu_view_t vr = tpu_view_contiguous(f.slots[0], TPU_F32, d23, 2);
  CHECK_OK(tpu_copy_to_host(&vr, out, sizeof out));
  for (int i = 0; i < 6; ++i) CHECK(out[i] == a[i] + b[i % 3]);
  // Transposed view (3x2 of a 2x3) read, then written in place through it.
  tpu_view_t vt = va;
  vt.sizes[0] = 3; vt.sizes[1] = 2; vt.strides[0] = 1; vt.strides[1] = 3;
  float t[6];
  CHECK_OK(tpu_copy_to_host(&vt, t, sizeof t));
  CHECK(t[0] == 1 && t[1] == 4 && t[2] == 2 && t[5] == 6);
  // Column 1 of the 2x3 (offset 1, stride 3) gets += 100 via add with INTO.
  tpu_view_t col = va;
  col.rank = 1; col.sizes[0] = 2; col.strides[0] = 3; col.offset = 1;
  tpu_arg_t cargs[2];
  cargs[0] = tensor_arg(&col);
  cargs[1].kind = TPU_ARG_SCALAR;
  cargs[1].scalar = (tpu_scalar_t){TPU_I64, TPU_TIER_WRAPPED, {0}};
  cargs[1].scalar.i = 100;
  CHECK_OK(call_op("add", cargs, TPU_WRITE_INTO, into, &col));
  CHECK_OK(tpu_copy_to_host(&va, out, sizeof out));
  float want[6] = {1, 102, 3, 4, 105, 6};
  for (int i = 0; i < 6; ++i) CHECK_MSG(out[i] == want[i], "out[%d] = %g", i, out[i]);
  tpu_slot_release(f.slots[0]);
  tpu_slot_release(sa);
  tpu_slot_release(sb);
}

void test_engine_errors(void) {
  CHECK_OK(tpu_runtime_init());
  float a[6] = {0}, b[4] = {0};
  tpu_slot_t *sa = upload(a, 6), *sb = upload(b, 4);
  int64_t d23[2] = {2, 3}, d4[1] = {4};
  tpu_view_t va = tpu_view_contiguous(sa, TPU_F32, d23, 2), vb = tpu_view_contiguous(sb, TPU_F32, d4, 1);
  tpu_arg_t args[2] = {tensor_arg(&va), tensor_arg(&vb)};
  fresh_t f = {0};
  CHECK_ERROR(call_op("add", args, TPU_WRITE_NEW, make_fresh, &f),
              TPU_CODE_INVALID_ARGUMENT, "must match the size of tensor b (4) at non-singleton dimension 1");
  CHECK(f.n == 0);
  // In-place with a result that cannot be cast: float into int64.
  tpu_slot_t* si = NULL;
  CHECK_OK(tpu_slot_create(0, 48, &si));
  tpu_view_t vi = tpu_view_contiguous(si, TPU_I64, d23, 2);
  tpu_arg_t iargs[2] = {tensor_arg(&vi), tensor_arg(&va)};
  CHECK_ERROR(call_op("add", iargs, TPU_WRITE_INTO, into, &vi),
              TPU_CODE_INVALID_ARGUMENT, "result type Float can't be cast to the desired output type Long");
  // The device still works after the errors.
  tpu_arg_t ok[2] = {tensor_arg(&va), tensor_arg(&va)};
  CHECK_OK(call_op("add", ok, TPU_WRITE_NEW, make_fresh, &f));
  tpu_slot_release(f.slots[0]);
  tpu_slot_release(si);
  tpu_slot_release(sa);
  tpu_slot_release(sb);
}

static void chain(int steps, float* result) {
  float a[4] = {1, 2, 3, 4};
  tpu_slot_t* s = upload(a, 4);
  int64_t d4[1] = {4};
  tpu_view_t v = tpu_view_contiguous(s, TPU_F32, d4, 1);
  for (int i = 0; i < steps; ++i) {  // v = v * 2 + 1, in place
    tpu_arg_t m[2] = {tensor_arg(&v), {TPU_ARG_SCALAR, 0, {0}}};
    m[1].scalar = (tpu_scalar_t){TPU_F64, TPU_TIER_WRAPPED, {0}};
    m[1].scalar.f = 2.0;
    CHECK_OK(call_op("mul", m, TPU_WRITE_INTO, into, &v));
    m[1].scalar.f = 1.0;
    CHECK_OK(call_op("add", m, TPU_WRITE_INTO, into, &v));
  }
  CHECK_OK(tpu_copy_to_host(&v, result, 16));
  tpu_slot_release(s);
}

void test_engine_modes_agree(void) {
  CHECK_OK(tpu_runtime_init());
  float strict[4], fused[4], debug[4];
  tpu_mode_set(TPU_MODE_STRICT);
  chain(5, strict);
  tpu_metrics_t m0, m1;
  tpu_metrics_get(&m0);
  tpu_mode_set(TPU_MODE_FUSED);
  chain(5, fused);
  tpu_metrics_get(&m1);
  CHECK_MSG(m1.executions - m0.executions == 1, "fused mode ran %lld executions",
            (long long)(m1.executions - m0.executions));
  tpu_mode_set(TPU_MODE_DEBUG);
  chain(5, debug);
  for (int i = 0; i < 4; ++i) {
    float want = (float)(i + 1);
    for (int k = 0; k < 5; ++k) want = want * 2 + 1;
    CHECK(strict[i] == want && fused[i] == want && debug[i] == want);
  }
  tpu_mode_set(TPU_MODE_STRICT);
}

// Points in a device's work (torch events): reached once what was launched
// before them has ended, in time order; in fused mode recording launches.
void test_engine_points(void) {
  CHECK_OK(tpu_runtime_init());
  tpu_point_t *first, *second;
  CHECK_OK(tpu_point_record(0, &first));
  float r[4];
  tpu_mode_set(TPU_MODE_FUSED);
  float a[4] = {1, 2, 3, 4};
  tpu_slot_t* s = upload(a, 4);
  int64_t d4[1] = {4};
  tpu_view_t v = tpu_view_contiguous(s, TPU_F32, d4, 1);
  tpu_arg_t m[2] = {tensor_arg(&v), {TPU_ARG_SCALAR, 0, {0}}};
  m[1].scalar = (tpu_scalar_t){TPU_F64, TPU_TIER_WRAPPED, {0}};
  m[1].scalar.f = 3.0;
  CHECK_OK(call_op("mul", m, TPU_WRITE_INTO, into, &v));
  tpu_metrics_t m0, m1;
  tpu_metrics_get(&m0);
  CHECK_OK(tpu_point_record(0, &second));
  CHECK_OK(tpu_point_wait(second));
  tpu_metrics_get(&m1);  // launched by the compile thread, before the point is reached
  CHECK(m1.executions == m0.executions + 1);
  CHECK(tpu_point_reached(first) && tpu_point_reached(second));
  CHECK(tpu_point_elapsed_ms(first, second) >= 0);
  CHECK_OK(tpu_copy_to_host(&v, r, sizeof r));
  CHECK(r[3] == 12);
  tpu_point_t* none = first;
  CHECK_ERROR(tpu_point_record(99, &none), TPU_CODE_INVALID_ARGUMENT, "device");
  CHECK(none == NULL);
  tpu_point_release(first);
  tpu_point_release(second);
  tpu_slot_release(s);
  tpu_mode_set(TPU_MODE_STRICT);
}

void test_engine_cache_hits(void) {
  CHECK_OK(tpu_runtime_init());
  float r[4];
  chain(1, r);
  tpu_metrics_t m0, m1;
  tpu_metrics_get(&m0);
  chain(3, r);  // same programs, new Python numbers would not recompile
  tpu_metrics_get(&m1);
  CHECK(m1.compiles == m0.compiles);
  CHECK(m1.cache_hits - m0.cache_hits >= 6);
}

// acc += x.index_select(0, index): an op with a device-side check; waits
// until it ran, without reading the check.
static tpu_status_t add_selected(const tpu_view_t* acc, const tpu_view_t* x,
                                 const tpu_view_t* index) {
  tpu_arg_t args[3] = {tensor_arg(x), {TPU_ARG_INT, 0, {0}}, tensor_arg(index)};
  fresh_t f = {0};
  tpu_call_t c = {tpu_op_lookup("index_select"), -1, args, 3, TPU_WRITE_NEW, NULL, 0,
                  make_fresh, &f, TPU_PRECISION_HIGHEST, TPU_F32};
  CHECK_OK(tpu_op_call(&c));
  tpu_view_t y = tpu_view_contiguous(f.slots[0], TPU_F32, acc->sizes, 1);
  tpu_arg_t add[2] = {tensor_arg(acc), tensor_arg(&y)};
  tpu_status_t s = call_op("add", add, TPU_WRITE_INTO, into, (void*)acc);
  tpu_slot_release(f.slots[0]);
  if (!s) CHECK_OK(tpu_buffer_await(acc->slot->buffer));
  return s;
}

// Failures found before a sync wait for syncs, one each, oldest first; one
// that says what a kept one says (another op's check of the same data) is
// raised once, and so is one that a sync's own failure says again. Past 16,
// the others are dropped (logged): memory stays bounded.
void test_engine_failures_wait_for_syncs(void) {
  CHECK_OK(tpu_runtime_init());
  tpu_dev_t* d;
  CHECK_OK(tpu_dev_get(0, &d));
  CHECK_OK(tpu_synchronize(0));
  tpu_dev_lock(d);
  for (int i = 0; i < 20; ++i) {
    tpu_dev_report(d, tpu_status_make(TPU_CODE_OUT_OF_RANGE,
                                      "index %d is out of bounds\n(checked on the device by "
                                      "gather)", i));
    if (i == 1)
      tpu_dev_report(d, tpu_status_make(TPU_CODE_OUT_OF_RANGE, "index 1 is out of bounds\n"
                                        "(checked on the device by scatter_add)"));
  }
  tpu_dev_unlock(d);
  for (int i = 0; i < 16; ++i) {
    char want[32];
    snprintf(want, sizeof want, "index %d is out", i);
    CHECK_ERROR(tpu_synchronize(0), TPU_CODE_OUT_OF_RANGE, want);
  }
  CHECK_OK(tpu_synchronize(0));
  tpu_dev_lock(d);
  tpu_dev_report(d, tpu_status_make(TPU_CODE_RESOURCE_EXHAUSTED, "out of memory"));
  tpu_dev_report(d, tpu_status_make(TPU_CODE_OUT_OF_RANGE, "index 7 is out of bounds"));
  tpu_status_t own = tpu_status_make(TPU_CODE_RESOURCE_EXHAUSTED,
                                     "this tensor holds the result of a computation that "
                                     "failed: out of memory");
  CHECK_ERROR(tpu_dev_check(d, own), TPU_CODE_RESOURCE_EXHAUSTED, "holds the result");
  tpu_dev_unlock(d);
  CHECK_ERROR(tpu_synchronize(0), TPU_CODE_OUT_OF_RANGE, "index 7 is out");
  CHECK_OK(tpu_synchronize(0));
}

// A loop that never reads back: checks that finished are read as new ones
// are queued, so the set of checks a value depends on stays small; a
// failure read that way is raised at the next sync, and then poisons what
// was computed from the failed op since.
void test_engine_unread_checks(void) {
  CHECK_OK(tpu_runtime_init());
  tpu_mode_set(TPU_MODE_STRICT);
  float a[4] = {1, 2, 3, 4}, zero[2] = {0, 0}, out[2];
  int64_t good[2] = {0, 3}, bad[2] = {0, 9}, n2 = 2, n4 = 4;
  tpu_slot_t *sx = upload(a, 4), *sacc = upload(zero, 2);
  tpu_slot_t *sgood = upload_as(TPU_I64, good, 2), *sbad = upload_as(TPU_I64, bad, 2);
  tpu_view_t x = tpu_view_contiguous(sx, TPU_F32, &n4, 1);
  tpu_view_t acc = tpu_view_contiguous(sacc, TPU_F32, &n2, 1);
  tpu_view_t vgood = tpu_view_contiguous(sgood, TPU_I64, &n2, 1);
  tpu_view_t vbad = tpu_view_contiguous(sbad, TPU_I64, &n2, 1);
  tpu_dev_t* d;
  CHECK_OK(tpu_dev_get(0, &d));
  for (int i = 0; i < 50; ++i) CHECK_OK(add_selected(&acc, &x, &vgood));
  int depends_on = sacc->suspicion ? sacc->suspicion->n : 0, unread = 0;
  for (tpu_pending_check_t* c = d->checks; c; c = c->next) ++unread;
  CHECK_MSG(depends_on <= 2 && unread <= 2, "after 50 steps: %d unread checks, a value of %d",
            unread, depends_on);
  CHECK_OK(tpu_synchronize(0));
  CHECK_OK(tpu_copy_to_host(&acc, out, sizeof out));
  CHECK(out[0] == 50 && out[1] == 200);
  CHECK_OK(add_selected(&acc, &x, &vbad));
  // The next ops read the failed check (it is done), and go on: the error
  // is raised at the sync, as it would be had they not read it.
  for (int i = 0; i < 3; ++i) CHECK_OK(add_selected(&acc, &x, &vgood));
  CHECK(d->checks && !d->checks->next);  // only the last index_select's
  CHECK_ERROR(tpu_synchronize(0), TPU_CODE_OUT_OF_RANGE, "index out of range");
  CHECK_OK(tpu_synchronize(0));  // raised once
  CHECK_ERROR(tpu_copy_to_host(&acc, out, sizeof out), TPU_CODE_OUT_OF_RANGE,
              "holds the result of a computation that failed: index out of range");
  tpu_slot_release(sx);
  tpu_slot_release(sacc);
  tpu_slot_release(sgood);
  tpu_slot_release(sbad);
}

// Fused mode's loop cuts (loop.c), as the op sequence drives them: a
// prefix, then a body of 5 ops repeated; the first cut comes at a search
// (256 ops), then one every 35 ops (7 periods), each graph beginning at the
// same op of the body; an op out of the period ends it, and so does any
// other flush.
void test_engine_loop_cuts(void) {
  tpu_loop_t l;
  memset(&l, 0, sizeof l);
  const int body[5] = {3, 9, 9, 4, -1};
  int n = 0, op_index = 0, cuts[8], num_cuts = 0, first_ops[8];
  for (int i = 0; i < 3; ++i) CHECK(!tpu_loop_record(&l, 100 + i, ++n));  // the prefix
  for (int i = 0; num_cuts < 8; ++i) {
    if (n == 0) first_ops[num_cuts - 1] = body[op_index % 5];
    bool cut = tpu_loop_record(&l, body[op_index++ % 5], ++n);
    if (cut) {
      cuts[num_cuts++] = n;
      tpu_loop_flushed(&l);
      n = 0;
    }
    CHECK(i < 2000);
  }
  CHECK(cuts[0] == 256);
  for (int k = 1; k < 8; ++k) CHECK(cuts[k] == 35);
  for (int k = 1; k < 7; ++k) CHECK(first_ops[k] == first_ops[0]);
  // An op that breaks the period: no cut at 35.
  for (int i = 0; i < 10; ++i) CHECK(!tpu_loop_record(&l, body[op_index++ % 5], ++n));
  CHECK(!tpu_loop_record(&l, 77, ++n));
  for (int i = 0; i < 40; ++i) CHECK(!tpu_loop_record(&l, body[op_index++ % 5], ++n));
  // Another flush ends the period too.
  tpu_loop_flushed(&l);
  n = 0;
  CHECK(l.period == 0);
  // A sequence without a period is never cut.
  for (int i = 0; i < 1024; ++i) CHECK(!tpu_loop_record(&l, (i * 7919) % 1009, ++n));
  tpu_loop_free(&l);
}

// A child forked after the runtime started has none of its threads: every
// use fails at once with the 'spawn' advice, releases and shutdown return
// without waiting for them, and the parent's device goes on working.
void test_engine_forked_child(void) {
  CHECK_OK(tpu_runtime_init());
  float a[4] = {1, 2, 3, 4}, out[4];
  int64_t d4[1] = {4};
  tpu_slot_t* sa = upload(a, 4);
  tpu_view_t va = tpu_view_contiguous(sa, TPU_F32, d4, 1);
  CHECK(!tpu_forked_child());
  pid_t pid = fork();
  CHECK(pid >= 0);
  if (pid == 0) {
    alarm(60);  // a hang ends the child with SIGALRM, which fails the test
    CHECK(tpu_forked_child());
    tpu_slot_t* s = NULL;
    CHECK_ERROR(tpu_slot_create(0, 16, &s), TPU_CODE_FAILED_PRECONDITION, "'spawn' start method");
    CHECK_ERROR(tpu_copy_to_host(&va, out, sizeof out), TPU_CODE_FAILED_PRECONDITION, "forked");
    CHECK_ERROR(tpu_synchronize(0), TPU_CODE_FAILED_PRECONDITION, "forked");
    CHECK_ERROR(tpu_runtime_init(), TPU_CODE_FAILED_PRECONDITION, "forked");
    tpu_wait_compiles();
    tpu_slot_release(sa);  // its buffer stays the parent's: the plugin is not called
    tpu_runtime_shutdown();
    _exit(0);
  }
  int status = 0;
  CHECK(waitpid(pid, &status, 0) == pid);
  CHECK_MSG(WIFEXITED(status) && WEXITSTATUS(status) == 0, "forked child: status %d", status);
  CHECK_OK(tpu_copy_to_host(&va, out, sizeof out));
  CHECK(out[3] == 4);
  tpu_slot_release(sa);
}

// Where a slot's values live (the CPU plugin's buffers are host memory).
static const void* address_of(tpu_slot_t* s) {
  CHECK_OK(tpu_buffer_await(s->buffer));
  PJRT_ARGS(Buffer_UnsafePointer, p);
  p.buffer = s->buffer->handle;
  CHECK_OK(PJRT_CALL(s->buffer->client->api, Buffer_UnsafePointer, p));
  return (const void*)p.buffer_pointer;
}

// A graph that updates two tensors in place, the second-read one first,
// gives each its own buffer back (donated), not the other's: swapped, XLA
// would copy both to keep the old values readable.
void test_engine_donates_own_buffer(void) {
  CHECK_OK(tpu_runtime_init());
  tpu_mode_set(TPU_MODE_FUSED);
  float a[4] = {1, 2, 3, 4}, b[4] = {10, 20, 30, 40}, ra[4], rb[4];
  int64_t d4[1] = {4};
  tpu_slot_t *sx = upload(a, 4), *sy = upload(b, 4);
  CHECK_OK(tpu_synchronize(0));
  const void *x0 = address_of(sx), *y0 = address_of(sy);
  tpu_view_t x = tpu_view_contiguous(sx, TPU_F32, d4, 1), y = tpu_view_contiguous(sy, TPU_F32, d4, 1);
  tpu_arg_t xy[2] = {tensor_arg(&x), tensor_arg(&y)}, xx[2] = {tensor_arg(&x), tensor_arg(&x)};
  CHECK_OK(call_op("add", xy, TPU_WRITE_INTO, into, &y));  // y = x + y (reads x first)
  CHECK_OK(call_op("mul", xx, TPU_WRITE_INTO, into, &x));  // x = x * x
  CHECK_OK(tpu_synchronize(0));
  CHECK(address_of(sx) == x0 && address_of(sy) == y0);
  CHECK_OK(tpu_copy_to_host(&x, ra, sizeof ra));
  CHECK_OK(tpu_copy_to_host(&y, rb, sizeof rb));
  for (int i = 0; i < 4; ++i) CHECK(ra[i] == a[i] * a[i] && rb[i] == a[i] + b[i]);
  tpu_slot_release(sx);
  tpu_slot_release(sy);
  tpu_mode_set(TPU_MODE_STRICT);
}
