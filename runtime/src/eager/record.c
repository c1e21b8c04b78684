// Recording into a device's graph: slot values, view reads and writes,
// parameters, assertions. Every function here runs with the device lock held.
#include <string.h>

#include "eager/eager.h"

bool tpu_dev_grow(void** array, int* cap, int need, size_t elem) {
  if (need <= *cap) return true;
  int n = *cap ? *cap * 2 : 16;
  while (n < need) n *= 2;
  void* p = tpu_realloc(*array, elem * (size_t)n);
  if (!p) return false;
  *array = p;
  *cap = n;
  return true;
}

static void oom(tpu_graph_t* g) {
  tpu_graph_fail(g, tpu_status_make(TPU_CODE_RESOURCE_EXHAUSTED, "out of host memory"));
}

static tpu_val_t add_param(tpu_dev_t* d, tpu_buffer_t* b, bool number) {
  tpu_graph_t* g = d->graph;
  if (!tpu_graph_ok(g)) return TPU_VAL_NONE;
  if (!tpu_dev_grow((void**)&d->params, &d->params_cap, d->num_params + 1, sizeof *d->params) ||
      !tpu_dev_grow((void**)&d->param_is_number, &d->param_is_number_cap, d->num_params + 1,
                    sizeof *d->param_is_number)) {
    oom(g);
    return TPU_VAL_NONE;
  }
  tpu_type_t t = tpu_type_make(tpu_buffer_dtype(b), tpu_buffer_dims(b), tpu_buffer_rank(b));
  tpu_val_t v = tpu_ir_param(g, &t);
  if (v == TPU_VAL_NONE) return v;
  tpu_buffer_retain(b);
  d->param_is_number[d->num_params] = number;
  d->params[d->num_params++] = b;
  return v;
}

tpu_val_t tpu_dev_param(tpu_dev_t* d, tpu_buffer_t* b) { return add_param(d, b, false); }
tpu_val_t tpu_dev_number_param(tpu_dev_t* d, tpu_buffer_t* b) { return add_param(d, b, true); }

static tpu_val_t reinterpret(tpu_graph_t* g, tpu_val_t v, tpu_dtype_t to);

// Complex values have no bits in StableHLO (bitcast_convert refuses them):
// they are read and written as their parts, interleaved (re, im) as in
// memory.
static tpu_val_t reinterpret_complex(tpu_graph_t* g, tpu_val_t v, tpu_dtype_t to) {
  if (!tpu_graph_ok(g)) return TPU_VAL_NONE;
  tpu_dtype_t from = tpu_ir_dtype(g, v);
  int64_t n = tpu_ir_dims(g, v)[0];
  if (tpu_dtype_is_complex(from)) {
    int64_t col[2] = {n, 1}, m = 2 * n;
    tpu_val_t parts[2] = {tpu_ir_reshape(g, tpu_ir_unary(g, TPU_IR_REAL, v), col, 2),
                          tpu_ir_reshape(g, tpu_ir_unary(g, TPU_IR_IMAG, v), col, 2)};
    tpu_val_t flat = tpu_ir_reshape(g, tpu_ir_concat(g, parts, 2, 1), &m, 1);
    return tpu_graph_ok(g) ? reinterpret(g, flat, to) : TPU_VAL_NONE;
  }
  tpu_val_t r = reinterpret(g, v, to == TPU_C128 ? TPU_F64 : TPU_F32);
  if (!tpu_graph_ok(g)) return TPU_VAL_NONE;
  int64_t m = tpu_ir_dims(g, r)[0] / 2, pairs[2] = {m, 2};
  r = tpu_ir_reshape(g, r, pairs, 2);
  int64_t lo[2] = {0, 0}, hi[2] = {m, 1}, one[2] = {1, 1};
  tpu_val_t re = tpu_ir_reshape(g, tpu_ir_slice(g, r, lo, hi, one), &m, 1);
  lo[1] = 1;
  hi[1] = 2;
  tpu_val_t im = tpu_ir_reshape(g, tpu_ir_slice(g, r, lo, hi, one), &m, 1);
  return tpu_ir_binary(g, TPU_IR_COMPLEX, re, im);
}

// Reinterprets a flat array's bits as another dtype (like Tensor.view(dtype)).
static tpu_val_t reinterpret(tpu_graph_t* g, tpu_val_t v, tpu_dtype_t to) {
  tpu_dtype_t from = tpu_ir_dtype(g, v);
  if (from == to) return v;
  if (tpu_dtype_is_complex(from) || tpu_dtype_is_complex(to))
    return reinterpret_complex(g, v, to);
  int64_t n = tpu_ir_dims(g, v)[0];
  if (from == TPU_BOOL || to == TPU_BOOL) {
    // bool is one byte on the host; its bits are 0 or 1.
    if (to == TPU_BOOL) {
      tpu_val_t bytes = reinterpret(g, v, TPU_U8);
      return tpu_ir_compare(g, TPU_CMP_NE, bytes, tpu_ir_const(g, TPU_U8, 0, &n, 1));
    }
    return reinterpret(g, tpu_ir_convert(g, v, TPU_U8), to);
  }
  size_t a = tpu_dtype_size(from), b = tpu_dtype_size(to);
  if (a == b) {
    tpu_type_t t = tpu_type_make(to, &n, 1);
    return tpu_ir_bitcast(g, v, &t);
  }
  if (a > b) {
    int64_t dims[2] = {n, (int64_t)(a / b)}, m = n * (int64_t)(a / b);
    tpu_type_t t = tpu_type_make(to, dims, 2);
    return tpu_ir_reshape(g, tpu_ir_bitcast(g, v, &t), &m, 1);
  }
  int64_t r = (int64_t)(b / a);
  if (n % r) {
    tpu_graph_fail(g, tpu_status_make(TPU_CODE_INVALID_ARGUMENT,
                                      "cannot view %lld elements of %s as %s",
                                      (long long)n, tpu_dtype_name(from),
                                      tpu_dtype_name(to)));
    return TPU_VAL_NONE;
  }
  int64_t dims[2] = {n / r, r}, m = n / r;
  tpu_type_t t = tpu_type_make(to, &m, 1);
  return tpu_ir_bitcast(g, tpu_ir_reshape(g, v, dims, 2), &t);
}

tpu_val_t tpu_dev_slot_value(tpu_dev_t* d, tpu_slot_t* s, tpu_dtype_t dtype) {
  tpu_graph_t* g = d->graph;
  if (!tpu_graph_ok(g)) return TPU_VAL_NONE;
  if (s->device != d->index) {
    tpu_graph_fail(g, tpu_status_make(TPU_CODE_INVALID_ARGUMENT,
                                      "Expected all tensors to be on the same "
                                      "device, but found at least two devices, "
                                      "tpu:%d and tpu:%d!", d->index, s->device));
    return TPU_VAL_NONE;
  }
  tpu_val_t v;
  if (s->pending_gen != d->gen && tpu_dev_poison(d, s)) {
    tpu_graph_fail(g, tpu_status_annotate(tpu_status_clone(s->poison),
                                          "this tensor holds the result of a "
                                          "computation that failed"));
    return TPU_VAL_NONE;
  }
  if (s->pending_gen == d->gen) {
    v = s->pending;
  } else if (s->buffer) {
    if (s->param_gen != d->gen || s->param_epoch != d->param_epoch) {
      s->param = tpu_dev_param(d, s->buffer);
      s->param_gen = d->gen;
      s->param_epoch = d->param_epoch;
      tpu_dev_inherit(d, s, s->param);
    }
    v = s->param;
  } else {  // never written: reads as zeros
    int64_t n = (int64_t)(s->nbytes / tpu_dtype_size(dtype));
    return tpu_ir_const(g, dtype, 0, &n, 1);
  }
  return reinterpret(g, v, dtype);
}

// A contiguous view that is not its whole slot is read and written at a
// runtime offset: with the offset a constant, a loop over rows or elements
// (x[i], `for v in t`, printing with profile="full") compiled a program per
// element in strict mode, and in fused mode a graph per cut of the loop
// (1,000 rows of `out[i] = x[i] * 2`: 56 compiles).
static tpu_val_t runtime_offset(tpu_dev_t* d, const tpu_view_t* v) {
  if (!tpu_view_is_contiguous(v) || tpu_view_is_whole(v) || tpu_view_numel(v) == 0)
    return TPU_VAL_NONE;  // (an empty view reads nothing and writes nothing)
  return tpu_dev_scalar(d, TPU_I64, &v->offset);
}

tpu_val_t tpu_dev_read(tpu_dev_t* d, const tpu_view_t* v) {
  tpu_val_t flat = tpu_dev_slot_value(d, v->slot, v->dtype);
  return tpu_view_lower_read(d->graph, flat, v, runtime_offset(d, v));
}

void tpu_dev_write(tpu_dev_t* d, const tpu_view_t* v, tpu_val_t value) {
  tpu_graph_t* g = d->graph;
  tpu_slot_t* s = v->slot;
  if (!tpu_graph_ok(g)) return;
  value = tpu_ir_convert(g, value, v->dtype);
  tpu_val_t flat;
  if (tpu_view_is_whole(v)) {
    int64_t n = tpu_view_numel(v);
    flat = tpu_ir_reshape(g, value, &n, 1);
  } else {
    flat = tpu_view_lower_write(g, tpu_dev_slot_value(d, s, v->dtype), v, value,
                                runtime_offset(d, v));
  }
  if (!tpu_graph_ok(g)) return;
  if (s->pending_gen != d->gen) {
    if (!tpu_dev_grow((void**)&d->written, &d->written_cap, d->num_written + 1,
                      sizeof *d->written)) {
      oom(g);
      return;
    }
    tpu_slot_retain(s);
    d->written[d->num_written++] = s;
  } else {
    if (!tpu_dev_grow((void**)&d->undo, &d->undo_cap, d->num_undo + 1, sizeof *d->undo)) {
      oom(g);
      return;
    }
    d->undo[d->num_undo++] = (tpu_undo_t){s, s->pending, s->dtype};
  }
  s->pending = flat;
  s->pending_gen = d->gen;
  s->dtype = v->dtype;
}

void tpu_dev_set_buffer(tpu_dev_t* d, tpu_slot_t* s, tpu_buffer_t* b) {
  tpu_buffer_retain(b);
  tpu_buffer_release(s->buffer);
  s->buffer = b;
  s->dtype = tpu_buffer_dtype(b);
  s->pending_gen = 0;  // a later write than anything recorded
  s->param_gen = 0;
  tpu_status_free(s->poison);
  s->poison = NULL;
  tpu_suspicion_release(s->suspicion);
  s->suspicion = NULL;
}

void tpu_dev_assert(tpu_dev_t* d, tpu_val_t bad, tpu_val_t numbers, tpu_status_t status) {
  if (!tpu_graph_ok(d->graph) ||
      !tpu_dev_grow((void**)&d->asserts, &d->asserts_cap, d->num_asserts + 1, sizeof *d->asserts)) {
    tpu_status_free(status);
    return;
  }
  d->asserts[d->num_asserts++] = (tpu_assert_t){bad, numbers, status};
}

static void suspect(tpu_dev_t* d, tpu_val_t v) {
  if (tpu_dev_grow((void**)&d->suspects, &d->suspects_cap, d->num_suspects + 1,
                   sizeof *d->suspects))
    d->suspects[d->num_suspects++] = v;
  else
    d->suspect_all = true;
}

void tpu_dev_suspect_writes(tpu_dev_t* d, const tpu_mark_t* m) {
  for (int i = m->num_written; i < d->num_written; ++i) suspect(d, d->written[i]->pending);
  for (int i = 0; i < d->num_undo; ++i) suspect(d, d->undo[i].slot->pending);
}

tpu_status_t tpu_slot_resize(tpu_slot_t* s, size_t nbytes) {
  tpu_dev_t* d;
  TPU_RETURN_IF_ERROR(tpu_dev_get(s->device, &d));
  tpu_dev_lock(d);
  tpu_status_t st = TPU_OK;
  if (nbytes != s->nbytes) {
    bool has_value = s->buffer || s->pending_gen == d->gen;
    if (has_value) {
      // Keep the common prefix, as bytes.
      tpu_graph_t* g = d->graph;
      tpu_mark_t mark;
      tpu_dev_begin(d, &mark);
      tpu_val_t old = tpu_dev_slot_value(d, s, TPU_U8);
      int64_t n_old = (int64_t)s->nbytes, n_new = (int64_t)nbytes, zero = 0;
      int64_t keep = n_old < n_new ? n_old : n_new, hi = n_new - keep;
      tpu_val_t v = tpu_ir_slice(g, old, &zero, &keep, NULL);
      v = tpu_ir_pad(g, v, tpu_ir_const(g, TPU_U8, 0, NULL, 0), &zero, &hi, NULL);
      s->nbytes = nbytes;
      tpu_view_t whole = tpu_view_contiguous(s, TPU_U8, &n_new, 1);
      tpu_dev_write(d, &whole, v);
      st = tpu_graph_take_error(g);
      if (st) {
        tpu_dev_rollback(d, &mark);
        s->nbytes = (size_t)n_old;
      } else {
        st = tpu_dev_after_op(d, -1);
      }
    } else {
      s->nbytes = nbytes;
    }
  }
  tpu_dev_unlock(d);
  return st;
}
