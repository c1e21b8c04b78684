// The PJRT layer against a real plugin: XLA's CPU plugin unless
// TORCHTPU_PLUGIN names another.
#include <threads.h>

#include "test.h"

void test_plugin_load(void) {
  bool cpu = !strcmp(test_plugin(), "cpu");  // another plugin has the devices it finds
  tpu_client_t* c = test_client(cpu ? 2 : 1);
  CHECK(!cpu || tpu_client_device_count(c) == 2);
  CHECK(!cpu || !strcmp(tpu_client_platform(c), "cpu"));
  CHECK(tpu_client_api_minor(c) >= 40);
  printf("  plugin %s\n  platform %s %s, PJRT API 0.%d, xla_version %lld, "
         "device kind '%s'\n", tpu_client_plugin_path(c), tpu_client_platform(c),
         tpu_client_platform_version(c), tpu_client_api_minor(c),
         (long long)tpu_client_xla_version(c), tpu_client_device_kind(c, 0));
  int64_t v[3];
  tpu_client_stablehlo_version(c, v);
  printf("  StableHLO %lld.%lld.%lld\n", (long long)v[0], (long long)v[1], (long long)v[2]);
  tpu_client_release(c);
}

void test_plugin_errors(void) {
  tpu_client_t* c = NULL;
  tpu_client_options_t missing = {"/nonexistent/plugin.so", 1};
  CHECK_ERROR(tpu_client_create(&missing, &c), TPU_CODE_NOT_FOUND, "/nonexistent/plugin.so");
  CHECK(c == NULL);
  tpu_client_options_t not_plugin = {"/bin/sh", 1};
  CHECK_ERROR(tpu_client_create(&not_plugin, &c), TPU_CODE_INVALID_ARGUMENT, "/bin/sh");
  // A real shared library without GetPjrtApi.
  tpu_client_options_t libm = {"/lib/x86_64-linux-gnu/libm.so.6", 1};
  CHECK_ERROR(tpu_client_create(&libm, &c), TPU_CODE_INVALID_ARGUMENT, "GetPjrtApi");
  tpu_client_options_t bad_name = {"gpu9", 1};
  CHECK_ERROR(tpu_client_create(&bad_name, &c), TPU_CODE_INVALID_ARGUMENT, "gpu9");
}

// Fills n bytes with a pattern that is a valid value for every dtype
// (bool must be 0/1).
static void fill(unsigned char* p, size_t n, tpu_dtype_t t) {
  for (size_t i = 0; i < n; ++i) p[i] = t == TPU_BOOL ? (unsigned char)(i % 3 == 0) : (unsigned char)(i * 37 + 11);
}

void test_roundtrip_dtypes(void) {
  tpu_client_t* c = test_client(1);
  int64_t dims[2] = {3, 5};
  for (int t = 0; t < TPU_DTYPE_COUNT; ++t) {
    size_t n = 15 * tpu_dtype_size((tpu_dtype_t)t);
    unsigned char src[15 * 16], dst[15 * 16];
    fill(src, n, (tpu_dtype_t)t);
    memset(dst, 0xee, sizeof dst);
    tpu_buffer_t* b = NULL;
    CHECK_OK(tpu_buffer_from_host(c, 0, (tpu_dtype_t)t, dims, 2, src, NULL, &b));
    CHECK(tpu_buffer_nbytes(b) == n);
    CHECK(tpu_buffer_dtype(b) == (tpu_dtype_t)t);
    CHECK_OK(tpu_buffer_to_host(b, dst, sizeof dst));
    CHECK_MSG(!memcmp(src, dst, n), "round trip of %s changed the bytes", tpu_dtype_name((tpu_dtype_t)t));
    tpu_buffer_release(b);
  }
  tpu_memory_stats_t ms;
  tpu_client_memory_stats(c, 0, &ms);
  CHECK(ms.bytes_in_use == 0 && ms.peak_bytes_in_use > 0);
  tpu_client_release(c);
}

void test_roundtrip_strided(void) {
  tpu_client_t* c = test_client(1);
  // A 4x3 column-major view of 12 floats: element (i, j) at i + 4j.
  float host[12], out[12];
  for (int i = 0; i < 12; ++i) host[i] = (float)i;
  int64_t dims[2] = {4, 3}, strides[2] = {4, 16};
  tpu_buffer_t* b = NULL;
  CHECK_OK(tpu_buffer_from_host(c, 0, TPU_F32, dims, 2, host, strides, &b));
  CHECK_OK(tpu_buffer_to_host(b, out, sizeof out));
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 3; ++j) CHECK(out[i * 3 + j] == host[i + 4 * j]);
  tpu_buffer_release(b);
  tpu_client_release(c);
}

static const char* add_program =
    "module @add {\n"
    "  func.func public @main(%a: tensor<2x3xf32>, %b: tensor<2x3xf32>) -> tensor<2x3xf32> {\n"
    "    %0 = stablehlo.add %a, %b : tensor<2x3xf32>\n"
    "    return %0 : tensor<2x3xf32>\n"
    "  }\n"
    "}\n";

void test_compile_and_run_add(void) {
  tpu_client_t* c = test_client(2);
  tpu_executable_t* e = test_compile(c, add_program);
  CHECK(tpu_executable_num_outputs(e) == 1);
  float a[6] = {1, 2, 3, 4, 5, 6}, b[6] = {10, 20, 30, 40, 50, 60}, r[6];
  int64_t dims[2] = {2, 3};
  for (int dev = 0; dev < 2; ++dev) {  // one executable runs on either device
    tpu_buffer_t *ba, *bb, *out;
    CHECK_OK(tpu_buffer_from_host(c, dev, TPU_F32, dims, 2, a, NULL, &ba));
    CHECK_OK(tpu_buffer_from_host(c, dev, TPU_F32, dims, 2, b, NULL, &bb));
    tpu_buffer_t* args[2] = {ba, bb};
    CHECK_OK(tpu_executable_execute(e, dev, args, 2, NULL, 0, &out, 1, NULL));
    CHECK(tpu_buffer_device(out) == dev);
    CHECK_OK(tpu_buffer_to_host(out, r, sizeof r));
    for (int i = 0; i < 6; ++i) CHECK(r[i] == a[i] + b[i]);
    tpu_buffer_release(ba);
    tpu_buffer_release(bb);
    tpu_buffer_release(out);
  }
  tpu_executable_release(e);
  tpu_client_release(c);
}

void test_compile_errors(void) {
  tpu_client_t* c = test_client(1);
  tpu_executable_t* e = NULL;
  const char* bad = "module { func.func public @main(%a: tensor<2xf32>) -> tensor<2xf32> { %0 = stablehlo.bogus %a : tensor<2xf32> return %0 : tensor<2xf32> } }";
  CHECK_ERROR(tpu_executable_compile(c, bad, strlen(bad), 1, &e), TPU_CODE_INVALID_ARGUMENT, "bogus");
  CHECK(e == NULL);
  const char* type_error = "module { func.func public @main(%a: tensor<2xf32>, %b: tensor<3xf32>) -> tensor<2xf32> { %0 = stablehlo.add %a, %b : (tensor<2xf32>, tensor<3xf32>) -> tensor<2xf32> return %0 : tensor<2xf32> } }";
  tpu_status_t s = tpu_executable_compile(c, type_error, strlen(type_error), 1, &e);
  CHECK(s != NULL && tpu_status_code(s) == TPU_CODE_INVALID_ARGUMENT);
  tpu_status_free(s);
  CHECK_ERROR(tpu_executable_compile(c, "", 0, 1, &e), TPU_CODE_INVALID_ARGUMENT, "");
  tpu_client_release(c);
}

void test_execute_errors(void) {
  tpu_client_t* c = test_client(1);
  tpu_executable_t* e = test_compile(c, add_program);
  float a[6] = {0};
  int64_t dims[2] = {2, 3}, dims_wrong[2] = {3, 2};
  tpu_buffer_t *f, *i, *w, *out = NULL;
  CHECK_OK(tpu_buffer_from_host(c, 0, TPU_F32, dims, 2, a, NULL, &f));
  CHECK_OK(tpu_buffer_from_host(c, 0, TPU_I32, dims, 2, a, NULL, &i));
  CHECK_OK(tpu_buffer_from_host(c, 0, TPU_F32, dims_wrong, 2, a, NULL, &w));
  tpu_buffer_t* one[1] = {f};
  CHECK_ERROR(tpu_executable_execute(e, 0, one, 1, NULL, 0, &out, 1, NULL), TPU_CODE_INVALID_ARGUMENT, "takes 2 arguments");
  tpu_buffer_t* mixed[2] = {f, i};
  CHECK_ERROR(tpu_executable_execute(e, 0, mixed, 2, NULL, 0, &out, 1, NULL), TPU_CODE_INVALID_ARGUMENT, "dtype I32");
  tpu_buffer_t* shaped[2] = {f, w};
  CHECK_ERROR(tpu_executable_execute(e, 0, shaped, 2, NULL, 0, &out, 1, NULL), TPU_CODE_INVALID_ARGUMENT, "argument 1");
  CHECK(out == NULL);
  tpu_buffer_t* ok[2] = {f, f};
  CHECK_OK(tpu_executable_execute(e, 0, ok, 2, NULL, 0, &out, 1, NULL));  // still usable
  tpu_buffer_release(out);
  tpu_buffer_release(f);
  tpu_buffer_release(i);
  tpu_buffer_release(w);
  tpu_executable_release(e);
  tpu_client_release(c);
}

void test_transfer_too_small(void) {
  tpu_client_t* c = test_client(1);
  float a[6] = {0}, small[2];
  int64_t dims[1] = {6};
  tpu_buffer_t* b;
  CHECK_OK(tpu_buffer_from_host(c, 0, TPU_F32, dims, 1, a, NULL, &b));
  CHECK_ERROR(tpu_buffer_to_host(b, small, sizeof small), TPU_CODE_INVALID_ARGUMENT, "too small");
  tpu_buffer_t* none = NULL;
  CHECK_ERROR(tpu_buffer_from_host(c, 5, TPU_F32, dims, 1, a, NULL, &none), TPU_CODE_INVALID_ARGUMENT, "device 5");
  tpu_buffer_release(b);
  tpu_client_release(c);
}

// A memory cap refuses a transfer that would pass it, before it is made.
void test_memory_cap(void) {
  tpu_client_t* c = test_client(1);
  float a[6] = {0};
  int64_t dims[1] = {6};
  tpu_buffer_t *b, *more = NULL;
  CHECK_OK(tpu_buffer_from_host(c, 0, TPU_F32, dims, 1, a, NULL, &b));
  tpu_memory_stats_t m;
  tpu_client_memory_stats(c, 0, &m);
  tpu_client_set_memory_cap(c, 0, m.bytes_in_use + 20);
  CHECK_ERROR(tpu_buffer_from_host(c, 0, TPU_F32, dims, 1, a, NULL, &more),
              TPU_CODE_RESOURCE_EXHAUSTED, "tpu:0 out of memory: tried to allocate 24 bytes");
  CHECK(more == NULL);
  tpu_client_memory_stats(c, 0, &m);
  CHECK(m.num_ooms == 1 && m.bytes_cap > 0);
  tpu_client_set_memory_cap(c, 0, 0);
  CHECK_OK(tpu_buffer_from_host(c, 0, TPU_F32, dims, 1, a, NULL, &more));
  tpu_buffer_release(more);
  tpu_buffer_release(b);
  tpu_client_release(c);
}

// XLA's buffer assignment gives a program scratch memory for what it
// computes between its arguments and its outputs (here the first product,
// 64 floats), which the memory checks count (tpu_executable_temp_bytes).
void test_scratch_memory(void) {
  tpu_client_t* c = test_client(1);
  const char* two_products =
      "module @two {\n"
      "  func.func public @main(%a: tensor<64x64xf32>) -> tensor<64x64xf32> {\n"
      "    %0 = stablehlo.dot %a, %a : (tensor<64x64xf32>, tensor<64x64xf32>) -> tensor<64x64xf32>\n"
      "    %1 = stablehlo.dot %0, %0 : (tensor<64x64xf32>, tensor<64x64xf32>) -> tensor<64x64xf32>\n"
      "    return %1 : tensor<64x64xf32>\n"
      "  }\n"
      "}\n";
  tpu_executable_t* e = test_compile(c, two_products);
  int64_t temp = tpu_executable_temp_bytes(e);
  if (strcmp(test_plugin(), "cpu"))  // seen: the CUDA plugin of jax 0.11.2 reports less
    test_skip("the %s plugin reports %lld bytes of scratch; the check knows the CPU plugin's",
              test_plugin(), (long long)temp);
  CHECK(temp >= 64 * 64 * 4);
  tpu_executable_release(e);
  tpu_client_release(c);
}

// A program whose argument 0 aliases its result: executing it donates the
// argument (it becomes unreadable) unless the call keeps it.
void test_donation_and_keep(void) {
  tpu_client_t* c = test_client(1);
  const char* inc =
      "module @inc {\n"
      "  func.func public @main(%a: tensor<4xf32> {tf.aliasing_output = 0 : i32}) -> tensor<4xf32> {\n"
      "    %one = stablehlo.constant dense<1.0> : tensor<4xf32>\n"
      "    %0 = stablehlo.add %a, %one : tensor<4xf32>\n"
      "    return %0 : tensor<4xf32>\n"
      "  }\n"
      "}\n";
  tpu_executable_t* e = test_compile(c, inc);
  float host[4] = {1, 2, 3, 4}, r[4];
  int64_t dims[1] = {4}, keep[1] = {0};
  tpu_buffer_t *a, *out;
  CHECK_OK(tpu_buffer_from_host(c, 0, TPU_F32, dims, 1, host, NULL, &a));
  CHECK_OK(tpu_executable_execute(e, 0, &a, 1, keep, 1, &out, 1, NULL));
  CHECK_OK(tpu_buffer_to_host(a, r, sizeof r));  // kept: still readable
  for (int i = 0; i < 4; ++i) CHECK(r[i] == host[i]);
  CHECK_OK(tpu_buffer_to_host(out, r, sizeof r));
  for (int i = 0; i < 4; ++i) CHECK(r[i] == host[i] + 1);
  tpu_buffer_release(out);
  CHECK_OK(tpu_executable_execute(e, 0, &a, 1, NULL, 0, &out, 1, NULL));
  tpu_status_t s = tpu_buffer_to_host(a, r, sizeof r);  // donated: gone
  CHECK(s != NULL);
  tpu_status_free(s);
  CHECK_OK(tpu_buffer_to_host(out, r, sizeof r));
  for (int i = 0; i < 4; ++i) CHECK(r[i] == host[i] + 1);
  tpu_buffer_release(out);
  tpu_buffer_release(a);
  tpu_executable_release(e);
  tpu_client_release(c);
}

// A promise settled by another thread once the test lets it.
typedef struct settler {
  mtx_t mu;
  cnd_t cv;
  bool go;
  tpu_executable_t* exe;  // NULL: break the promise
  tpu_buffer_t* args[2];
  tpu_promise_t* promise;
  tpu_buffer_t* out;
} settler_t;

static int settle_when_told(void* arg) {
  settler_t* t = arg;
  mtx_lock(&t->mu);
  while (!t->go) cnd_wait(&t->cv, &t->mu);
  mtx_unlock(&t->mu);
  if (!t->exe) {
    tpu_promise_settle(t->promise, tpu_status_make(TPU_CODE_INTERNAL, "it did not compile"),
                       NULL, &t->out, 1, NULL);
    return 0;
  }
  tpu_buffer_t* made = NULL;
  tpu_event_t* done = NULL;
  tpu_status_t s = tpu_executable_execute(t->exe, 0, t->args, 2, NULL, 0, &made, 1, &done);
  tpu_promise_settle(t->promise, s, &made, &t->out, 1, done);
  return 0;
}

static void go(settler_t* t) {
  mtx_lock(&t->mu);
  t->go = true;
  cnd_signal(&t->cv);
  mtx_unlock(&t->mu);
}

static void count_ended(void* user, tpu_status_t s) {
  ++*(int*)user;
  tpu_status_free(s);
}

void test_promises(void) {
  tpu_client_t* c = test_client(1);
  tpu_executable_t* e = test_compile(c, add_program);
  float a[6] = {1, 2, 3, 4, 5, 6}, r[6];
  int64_t dims[2] = {2, 3};
  tpu_buffer_t* ba;
  CHECK_OK(tpu_buffer_from_host(c, 0, TPU_F32, dims, 2, a, NULL, &ba));
  tpu_memory_stats_t before, after;
  tpu_client_memory_stats(c, 0, &before);
  for (int broken = 0; broken < 2; ++broken) {
    settler_t t = {.exe = broken ? NULL : e, .args = {ba, ba}};
    mtx_init(&t.mu, mtx_plain);
    cnd_init(&t.cv);
    tpu_event_t* done;
    CHECK_OK(tpu_promise_create(c, &t.promise));
    CHECK_OK(tpu_buffer_promised(t.promise, 0, TPU_F32, dims, 2, &t.out));
    CHECK_OK(tpu_event_promised(t.promise, &done));
    tpu_memory_stats_t promised;
    tpu_client_memory_stats(c, 0, &promised);  // counted from now, once
    CHECK(promised.bytes_in_use == before.bytes_in_use + (int64_t)sizeof a);
    int ended = 0;
    CHECK_OK(tpu_event_on_ready(done, count_ended, &ended));
    thrd_t thread;
    CHECK(thrd_create(&thread, settle_when_told, &t) == thrd_success);
    CHECK(!tpu_buffer_is_ready(t.out) && !tpu_event_is_ready(done));
    CHECK(tpu_buffer_failure(t.out) == NULL);  // not settled: no failure yet
    // A later execution takes the promised buffer now and waits for it.
    go(&t);
    tpu_buffer_t* args[2] = {t.out, ba};
    tpu_buffer_t* sum = NULL;
    tpu_status_t s = tpu_executable_execute(e, 0, args, 2, NULL, 0, &sum, 1, NULL);
    thrd_join(thread, NULL);
    if (!broken) {
      CHECK_OK(s);
      CHECK_OK(tpu_buffer_to_host(sum, r, sizeof r));
      for (int i = 0; i < 6; ++i) CHECK(r[i] == 3 * a[i]);
      CHECK_OK(tpu_event_await(done));
      CHECK(tpu_buffer_failure(t.out) == NULL);
      tpu_client_memory_stats(c, 0, &after);
      CHECK(after.bytes_in_use == before.bytes_in_use + 2 * (int64_t)sizeof a);
    } else {
      CHECK(s && strstr(tpu_status_message(s), "it did not compile"));
      tpu_status_free(s);
      CHECK(tpu_buffer_is_ready(t.out));
      CHECK_ERROR(tpu_buffer_to_host(t.out, r, sizeof r), TPU_CODE_INTERNAL, "did not compile");
      CHECK_ERROR(tpu_event_await(done), TPU_CODE_INTERNAL, "did not compile");
      // Raised from a buffer, the failure is no longer the event's.
      CHECK_ERROR(tpu_buffer_failure(t.out), TPU_CODE_INTERNAL, "did not compile");
      CHECK_OK(tpu_event_await(done));
    }
    CHECK(ended == 1);
    tpu_buffer_release(sum);
    tpu_buffer_release(t.out);
    tpu_event_destroy(done);
    tpu_promise_release(t.promise);
    cnd_destroy(&t.cv);
    mtx_destroy(&t.mu);
    tpu_client_memory_stats(c, 0, &after);
    CHECK(after.bytes_in_use == before.bytes_in_use);
  }
  tpu_buffer_release(ba);
  tpu_executable_release(e);
  tpu_client_release(c);
}
