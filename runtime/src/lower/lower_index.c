// Indexing and joining: cat, gather / scatter and their relatives, advanced
// indexing, masked ops, nonzero with a known size, padding, flips, rolls,
// triangles and repeats.
//
// XLA clamps out-of-range gather indices and drops out-of-range scatter
// updates where PyTorch raises, so every lowering that reads indices checks
// them with a device-side assertion (raised at the next synchronization, at
// the op in debug mode) before using them.
//
// Shapes are tracked here from the arguments' metadata (never read back from
// IR values, which are invalid once a builder has failed).
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "lower/lower.h"

//===--- helpers ---===//

static const int64_t all_dims[TPU_MAX_RANK] = {0, 1, 2, 3, 4, 5, 6, 7};

static tpu_val_t zeros(tpu_graph_t* g, tpu_dtype_t t, const int64_t* d, int n) {
  return tpu_ir_const(g, t, 0, d, n);
}

static tpu_val_t splat_i64(tpu_graph_t* g, int64_t v, const int64_t* d, int n) {
  return tpu_ir_const_i(g, TPU_I64, v, d, n);
}

// A 0-d bool: true when any element of the bool value b is.
static tpu_val_t any_true(tpu_graph_t* g, tpu_val_t b, int rank) {
  return tpu_ir_reduce(g, b, tpu_ir_const_i(g, TPU_BOOL, 0, NULL, 0), all_dims, rank,
                       TPU_BODY_OR);
}

// Sum of a bool value's true elements as a 0-d i64.
static tpu_val_t count_true(tpu_graph_t* g, tpu_val_t b, int rank) {
  return tpu_ir_reduce(g, tpu_ir_convert(g, b, TPU_I64), tpu_ir_const_i(g, TPU_I64, 0, NULL, 0),
                       all_dims, rank, TPU_BODY_ADD);
}

static tpu_val_t flat(tpu_graph_t* g, tpu_val_t x, const int64_t* d, int n) {
  int64_t len = tpu_numel(d, n);
  return tpu_ir_reshape(g, x, &len, 1);
}

// x != 0 as bool (x itself when bool).
static tpu_val_t nonzero_mask(tpu_graph_t* g, tpu_val_t x, tpu_dtype_t t, const int64_t* d,
                              int n) {
  if (t == TPU_BOOL) return x;
  return tpu_ir_compare(g, TPU_CMP_NE, x, tpu_ir_const(g, t, 0, d, n));
}

// Index values (i32/i64, shape d) as i64, asserting every one lies in
// [-size, size) when negatives wrap, else in [0, size); negatives are
// wrapped. The message goes with `code` when an index is out of range.
static tpu_val_t checked_index(tpu_lower_ctx_t* cx, tpu_val_t idx, const int64_t* d, int n,
                               int64_t size, bool wrap, tpu_code_t code, const char* fmt, ...)
    TPU_PRINTF(8, 9);
static tpu_val_t checked_index(tpu_lower_ctx_t* cx, tpu_val_t idx, const int64_t* d, int n,
                               int64_t size, bool wrap, tpu_code_t code, const char* fmt, ...) {
  tpu_graph_t* g = cx->g;
  char msg[256];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  idx = tpu_ir_convert(g, idx, TPU_I64);
  tpu_val_t lo = splat_i64(g, wrap ? -size : 0, d, n);
  tpu_val_t hi = splat_i64(g, size, d, n);
  tpu_val_t bad = tpu_ir_binary(g, TPU_IR_OR, tpu_ir_compare(g, TPU_CMP_LT, idx, lo),
                                tpu_ir_compare(g, TPU_CMP_GE, idx, hi));
  tpu_lower_assert(cx, any_true(g, bad, n), code, "%s", msg);
  if (wrap)
    idx = tpu_ir_select(g, tpu_ir_compare(g, TPU_CMP_LT, idx, splat_i64(g, 0, d, n)),
                        tpu_ir_binary(g, TPU_IR_ADD, idx, hi), idx);
  return idx;
}

static bool is_index_dtype(tpu_dtype_t t) { return t == TPU_I64 || t == TPU_I32; }

// Row-major strides of a contiguous shape.
static void strides_of(const int64_t* d, int n, int64_t* st) {
  int64_t s = 1;
  for (int i = n - 1; i >= 0; --i) {
    st[i] = s;
    s *= d[i];
  }
}

// Gathers elements of a 1-D value at i64 offsets of any shape (result: the
// offsets' shape).
static tpu_val_t gather_flat(tpu_graph_t* g, tpu_val_t x, tpu_val_t off, int off_rank) {
  tpu_gather_dims_t dn;
  memset(&dn, 0, sizeof dn);
  dn.n_collapsed = 1;
  dn.n_start_map = 1;
  dn.index_vector_dim = off_rank;  // each offset is a scalar index
  int64_t one = 1;
  return tpu_ir_gather(g, x, off, &dn, &one);
}

// Scatters updates (the offsets' shape) into a 1-D value at i64 offsets.
static tpu_val_t scatter_flat(tpu_graph_t* g, tpu_val_t x, tpu_val_t off, tpu_val_t upd,
                              int off_rank, tpu_body_t body) {
  tpu_scatter_dims_t dn;
  memset(&dn, 0, sizeof dn);
  dn.n_inserted = 1;
  dn.n_to_operand = 1;
  dn.index_vector_dim = off_rank;
  return tpu_ir_scatter(g, x, off, upd, &dn, body);
}

// Inclusive prefix sum along the last dim of x (shape d, rank n), by
// log2(len) shifted adds (Hillis-Steele).
static tpu_val_t scan_last(tpu_graph_t* g, tpu_val_t x, const int64_t* d, int n,
                           tpu_dtype_t t) {
  tpu_val_t zero = tpu_ir_const(g, t, 0, NULL, 0);
  int64_t len = d[n - 1];
  for (int64_t s = 1; s < len; s *= 2) {
    int64_t start[TPU_MAX_RANK] = {0}, limit[TPU_MAX_RANK], lo[TPU_MAX_RANK] = {0},
            hi[TPU_MAX_RANK] = {0};
    memcpy(limit, d, sizeof(int64_t) * (size_t)n);
    limit[n - 1] = len - s;
    lo[n - 1] = s;
    tpu_val_t shifted = tpu_ir_pad(g, tpu_ir_slice(g, x, start, limit, NULL), zero, lo, hi,
                                   NULL);
    x = tpu_ir_binary(g, TPU_IR_ADD, x, shifted);
  }
  return x;
}

// Inclusive prefix sum of a 1-D integer value of n entries, blocked: scans
// within blocks of 128 (7 shifted adds over the data), then adds the
// scanned block totals (recursively). Static shapes and O(n) work; a plain
// Hillis-Steele scan costs log2(n) passes over the data, and a full-width
// reduce_window O(n^2) on CPU.
static tpu_val_t prefix_sum(tpu_graph_t* g, tpu_val_t x, int64_t n, tpu_dtype_t t) {
  enum { BLOCK = 128 };
  if (n <= BLOCK) return scan_last(g, x, &n, 1, t);
  int64_t rows = (n + BLOCK - 1) / BLOCK, len = rows * BLOCK, zero = 0, extra = len - n;
  x = tpu_ir_pad(g, x, tpu_ir_const(g, t, 0, NULL, 0), &zero, &extra, NULL);
  int64_t d[2] = {rows, BLOCK};
  tpu_val_t blocks = scan_last(g, tpu_ir_reshape(g, x, d, 2), d, 2, t);
  int64_t start[2] = {0, BLOCK - 1};
  tpu_val_t totals = tpu_ir_reshape(g, tpu_ir_slice(g, blocks, start, d, NULL), &rows, 1);
  tpu_val_t before = tpu_ir_binary(g, TPU_IR_SUB, prefix_sum(g, totals, rows, t), totals);
  int64_t bd = 0;
  blocks = tpu_ir_binary(g, TPU_IR_ADD, blocks, tpu_ir_broadcast(g, before, d, 2, &bd));
  return tpu_ir_slice(g, tpu_ir_reshape(g, blocks, &len, 1), &zero, &n, NULL);
}

// The dtype for counting up to n (i32 where it fits: TPUs have no native
// 64-bit integers).
static tpu_dtype_t count_dtype(int64_t n) { return n < ((int64_t)1 << 31) ? TPU_I32 : TPU_I64; }

// Flat positions (i64, `size` entries) of the first `size` true elements of
// the 1-D bool m (n entries), in order; -1 past the last one.
static tpu_val_t compact_positions(tpu_graph_t* g, tpu_val_t m, int64_t n, int64_t size) {
  if (n == 0 || size == 0) return splat_i64(g, -1, &size, 1);
  tpu_dtype_t ct = count_dtype(n + size + 1);
  tpu_val_t rank = prefix_sum(g, tpu_ir_convert(g, m, ct), n, ct);  // 1-based
  tpu_val_t slot = tpu_ir_binary(g, TPU_IR_SUB, rank, tpu_ir_const(g, ct, 1, &n, 1));
  // Elements that are false, or past `size`, go to a spare last slot.
  tpu_val_t trash = tpu_ir_const_i(g, ct, size, &n, 1);
  tpu_val_t keep = tpu_ir_binary(g, TPU_IR_AND, m, tpu_ir_compare(g, TPU_CMP_LT, slot, trash));
  slot = tpu_ir_select(g, keep, slot, trash);
  int64_t len = size + 1, start = 0;
  tpu_val_t buf = splat_i64(g, -1, &len, 1);
  buf = scatter_flat(g, buf, slot, tpu_ir_iota(g, TPU_I64, &n, 1, 0), 1, TPU_BODY_REPLACE);
  return tpu_ir_slice(g, buf, &start, &size, NULL);
}

//===--- narrow_copy ---===//

// narrow_copy(Tensor self, int dim, SymInt start, SymInt length)
tpu_status_t tpu_lower_narrow_copy(tpu_lower_ctx_t* cx) {
  int rank = tpu_arg_rank(cx, 0);
  if (rank == 0) return tpu_invalid("narrow() cannot be applied to a 0-dim tensor.");
  int64_t dim;
  TPU_RETURN_IF_ERROR(tpu_wrap_dim(tpu_arg_int(cx, 1, 0), rank, &dim));
  const int64_t* sizes = tpu_arg_sizes(cx, 0);
  int64_t size = sizes[dim], start = tpu_arg_int(cx, 2, 0), length = tpu_arg_int(cx, 3, 0);
  if (start < -size || start > size)
    return tpu_status_make(TPU_CODE_OUT_OF_RANGE, "start out of range (expected to be in range "
                           "of [%lld, %lld], but got %lld)", (long long)-size, (long long)size,
                           (long long)start);
  if (start < 0) start += size;
  if (length < 0 || start + length > size)
    return tpu_invalid("start (%lld) + length (%lld) exceeds dimension size (%lld).",
                       (long long)start, (long long)length, (long long)size);
  int64_t lo[TPU_MAX_RANK] = {0}, hi[TPU_MAX_RANK];
  for (int i = 0; i < rank; ++i) hi[i] = sizes[i];
  lo[dim] = start;
  hi[dim] = start + length;
  tpu_lower_out(cx, 0, tpu_ir_slice(cx->g, tpu_lower_tensor(cx, 0), lo, hi, NULL));
  return TPU_OK;
}

//===--- cat ---===//

// cat(Tensor[] tensors, int dim=0)
tpu_status_t tpu_lower_cat(tpu_lower_ctx_t* cx) {
  tpu_graph_t* g = cx->g;
  int n = tpu_arg_count(cx, 0);
  if (n == 0)
    return TPU_LOWER_ERROR(TPU_CODE_INVALID_ARGUMENT,
                           "torch.cat(): expected a non-empty list of Tensors");
  tpu_dtype_t t = TPU_DTYPE_INVALID;
  const tpu_view_t* first = NULL;  // the first tensor that takes part
  for (int i = 0; i < n; ++i) {
    const tpu_view_t* v = tpu_arg_tensor_at(cx, 0, i);
    if (!v) return TPU_LOWER_ERROR(TPU_CODE_INVALID_ARGUMENT, "torch.cat(): undefined tensor");
    if (v->rank == 0)
      return TPU_LOWER_ERROR(TPU_CODE_INVALID_ARGUMENT,
                             "zero-dimensional tensor (at position %d) cannot be concatenated",
                             i);
    t = tpu_promote_types(t, v->dtype);
    if (t == TPU_DTYPE_INVALID)
      return TPU_LOWER_ERROR(TPU_CODE_INVALID_ARGUMENT,
                             "torch.cat(): could not promote the input dtypes");
    // PyTorch still skips legacy empty tensors (1-D, size 0) of any shape.
    bool legacy_empty = v->rank == 1 && v->sizes[0] == 0;
    if (!first && !legacy_empty) first = v;
  }
  if (!first) {
    int64_t zero = 0;
    tpu_lower_out(cx, 0, zeros(g, t, &zero, 1));
    return TPU_OK;
  }
  int rank = first->rank;
  int64_t dim;
  TPU_RETURN_IF_ERROR(tpu_wrap_dim(tpu_arg_int(cx, 1, 0), rank, &dim));
  int64_t out[TPU_MAX_RANK];
  memcpy(out, first->sizes, sizeof(int64_t) * (size_t)rank);
  out[dim] = 0;
  tpu_val_t* parts = tpu_graph_alloc(g, sizeof *parts * (size_t)n);
  if (!parts) return TPU_LOWER_ERROR(TPU_CODE_RESOURCE_EXHAUSTED, "out of memory");
  int np = 0;
  for (int i = 0; i < n; ++i) {
    const tpu_view_t* v = tpu_arg_tensor_at(cx, 0, i);
    if (v->rank == 1 && v->sizes[0] == 0) continue;
    if (v->rank != rank)
      return TPU_LOWER_ERROR(TPU_CODE_INVALID_ARGUMENT,
                             "Tensors must have same number of dimensions: got %d and %d",
                             rank, v->rank);
    for (int d = 0; d < rank; ++d)
      if (d != dim && v->sizes[d] != first->sizes[d])
        return TPU_LOWER_ERROR(TPU_CODE_INVALID_ARGUMENT,
                               "Sizes of tensors must match except in dimension %lld. "
                               "Expected size %lld but got size %lld for tensor number %d "
                               "in the list.", (long long)dim, (long long)first->sizes[d],
                               (long long)v->sizes[d], i);
    out[dim] += v->sizes[dim];
    if (v->sizes[dim] == 0) continue;  // adds nothing
    parts[np++] = tpu_ir_convert(g, tpu_lower_tensor_at(cx, 0, i), t);
  }
  if (np == 0 || tpu_numel(out, rank) == 0) {
    tpu_lower_out(cx, 0, zeros(g, t, out, rank));
    return TPU_OK;
  }
  tpu_lower_out(cx, 0, tpu_ir_concat(g, parts, np, (int)dim));
  return TPU_OK;
}

//===--- index_select and the index_* family ---===//

// A 0-d or 1-d index argument as a 1-D i64 value of *m entries.
static tpu_val_t index_vector(tpu_lower_ctx_t* cx, int arg, int64_t* m) {
  *m = tpu_numel(tpu_arg_sizes(cx, arg), tpu_arg_rank(cx, arg));
  return tpu_ir_reshape(cx->g, tpu_lower_input(cx, arg, TPU_I64), m, 1);
}

// The shape that index ops treat a tensor as: 0-d counts as 1-d of size 1.
static int nonempty_shape(const tpu_lower_ctx_t* cx, int arg, int64_t* d) {
  int n = tpu_arg_rank(cx, arg);
  if (n == 0) {
    d[0] = 1;
    return 1;
  }
  memcpy(d, tpu_arg_sizes(cx, arg), sizeof(int64_t) * (size_t)n);
  return n;
}

// index_select(Tensor self, int dim, Tensor index)
tpu_status_t tpu_lower_index_select(tpu_lower_ctx_t* cx) {
  tpu_graph_t* g = cx->g;
  int64_t dim;
  TPU_RETURN_IF_ERROR(tpu_wrap_dim(tpu_arg_int(cx, 1, 0), tpu_arg_rank(cx, 0), &dim));
  if (!is_index_dtype(tpu_arg_value_dtype(cx, 2)))
    return TPU_LOWER_ERROR(TPU_CODE_INVALID_ARGUMENT,
                           "index_select(): Expected dtype int32 or int64 for index");
  if (tpu_arg_rank(cx, 2) > 1)
    return TPU_LOWER_ERROR(TPU_CODE_OUT_OF_RANGE,
                           "index_select(): Index is supposed to be a vector");
  int64_t d[TPU_MAX_RANK], m;
  int r0 = tpu_arg_rank(cx, 0), n = nonempty_shape(cx, 0, d);
  tpu_val_t idx = index_vector(cx, 2, &m);
  if (r0 == 0 && m != 1)
    return TPU_LOWER_ERROR(TPU_CODE_INVALID_ARGUMENT,
                           "index_select(): Index to scalar can have only 1 value, got %lld "
                           "value(s)", (long long)m);
  int64_t size = d[dim];
  idx = checked_index(cx, idx, &m, 1, size, false, TPU_CODE_OUT_OF_RANGE,
                      "index out of range in self");
  int64_t out[TPU_MAX_RANK];
  memcpy(out, d, sizeof(int64_t) * (size_t)n);
  out[dim] = m;
  tpu_dtype_t t = tpu_arg_value_dtype(cx, 0);
  tpu_val_t r;
  if (tpu_numel(out, n) == 0 || size == 0) {
    r = zeros(g, t, out, n);
  } else {
    tpu_val_t x = tpu_ir_reshape(g, tpu_lower_tensor(cx, 0), d, n);
    r = tpu_gather_along(g, x, d, n, (int)dim, idx);
  }
  tpu_lower_out(cx, 0, tpu_ir_reshape(g, r, r0 ? out : NULL, r0));
  return TPU_OK;
}

// Shared checks of index_add / index_copy: a vector index whose length is
// source's size along dim, and source shaped like self elsewhere.
// PyTorch raises `shape_code` for a shape mismatch (it differs by op).
static tpu_status_t check_index_source(tpu_lower_ctx_t* cx, const char* op, int64_t dim,
                                       int64_t m, tpu_code_t shape_code) {
  if (tpu_arg_rank(cx, 2) > 1)
    return TPU_LOWER_ERROR(TPU_CODE_OUT_OF_RANGE,
                           "%s(): Index is supposed to be a vector", op);
  int64_t sd[TPU_MAX_RANK], xd[TPU_MAX_RANK];
  int sn = nonempty_shape(cx, 3, sd), xn = nonempty_shape(cx, 0, xd);
  bool ok = sn == xn && sd[dim] == m;
  for (int i = 0; ok && i < xn; ++i) ok = i == dim || sd[i] == xd[i];
  if (!ok) {
    char a[128], b[128];
    return TPU_LOWER_ERROR(shape_code,
                           "%s(): source %s does not fit self %s along dimension %lld with "
                           "an index of %lld entries", op, tpu_shape_str(sd, sn, a, sizeof a),
                           tpu_shape_str(xd, xn, b, sizeof b), (long long)dim, (long long)m);
  }
  if (tpu_arg_value_dtype(cx, 3) != tpu_arg_value_dtype(cx, 0))
    return TPU_LOWER_ERROR(TPU_CODE_INVALID_ARGUMENT,
                           "%s(): self (%s) and source (%s) must have the same scalar type",
                           op, tpu_dtype_torch_name(tpu_arg_value_dtype(cx, 0)),
                           tpu_dtype_torch_name(tpu_arg_value_dtype(cx, 3)));
  return TPU_OK;
}

// index_add(Tensor self, int dim, Tensor index, Tensor source, *, Scalar alpha=1)
tpu_status_t tpu_lower_index_add(tpu_lower_ctx_t* cx) {
  tpu_graph_t* g = cx->g;
  int64_t dim;
  TPU_RETURN_IF_ERROR(tpu_wrap_dim(tpu_arg_int(cx, 1, 0), tpu_arg_rank(cx, 0), &dim));
  if (!is_index_dtype(tpu_arg_value_dtype(cx, 2)))
    return TPU_LOWER_ERROR(TPU_CODE_INVALID_ARGUMENT,
                           "index_add_(): Expected dtype int32/int64 for index");
  int64_t m = tpu_numel(tpu_arg_sizes(cx, 2), tpu_arg_rank(cx, 2));
  TPU_RETURN_IF_ERROR(check_index_source(cx, "index_add_", dim, m, TPU_CODE_INVALID_ARGUMENT));
  int64_t d[TPU_MAX_RANK];
  int r0 = tpu_arg_rank(cx, 0), n = nonempty_shape(cx, 0, d);
  tpu_dtype_t t = tpu_arg_value_dtype(cx, 0);
  tpu_val_t idx = index_vector(cx, 2, &m);
  // PyTorch raises IndexError past the end and RuntimeError below zero.
  tpu_val_t neg = tpu_ir_compare(g, TPU_CMP_LT, idx, splat_i64(g, 0, &m, 1));
  tpu_lower_assert(cx, any_true(g, neg, 1), TPU_CODE_INVALID_ARGUMENT,
                   "index is out of bounds for dimension %lld with size %lld (negative)",
                   (long long)dim, (long long)d[dim]);
  idx = checked_index(cx, idx, &m, 1, d[dim], true, TPU_CODE_OUT_OF_RANGE,
                      "index is out of bounds for dimension %lld with size %lld",
                      (long long)dim, (long long)d[dim]);
  tpu_val_t x = tpu_lower_tensor(cx, 0);
  if (m == 0 || tpu_numel(d, n) == 0) {
    tpu_lower_out(cx, 0, x);
    return TPU_OK;
  }
  int64_t sd[TPU_MAX_RANK];
  nonempty_shape(cx, 3, sd);
  tpu_val_t src = tpu_ir_reshape(g, tpu_lower_tensor(cx, 3), sd, n);
  const tpu_arg_t* alpha = tpu_arg(cx, 4);
  if (alpha->kind == TPU_ARG_SCALAR && tpu_arg_number(cx, 4, 1) != 1) {
    tpu_dtype_t ct = tpu_opmath(t);
    tpu_val_t a = tpu_ir_broadcast(g, tpu_lower_scalar(cx, &alpha->scalar, ct), sd, n, NULL);
    src = tpu_ir_convert(g, tpu_ir_binary(g, TPU_IR_MUL, tpu_ir_convert(g, src, ct), a), t);
  }
  x = tpu_ir_reshape(g, x, d, n);
  x = tpu_scatter_along(g, x, n, (int)dim, idx, src, TPU_BODY_ADD);
  tpu_lower_out(cx, 0, tpu_ir_reshape(g, x, r0 ? d : NULL, r0));
  return TPU_OK;
}

// index_copy(Tensor self, int dim, Tensor index, Tensor source)
tpu_status_t tpu_lower_index_copy(tpu_lower_ctx_t* cx) {
  tpu_graph_t* g = cx->g;
  int64_t dim;
  TPU_RETURN_IF_ERROR(tpu_wrap_dim(tpu_arg_int(cx, 1, 0), tpu_arg_rank(cx, 0), &dim));
  if (tpu_arg_value_dtype(cx, 2) != TPU_I64)
    return TPU_LOWER_ERROR(TPU_CODE_INVALID_ARGUMENT,
                           "index_copy_(): Expected a long tensor for index, but got %s",
                           tpu_dtype_torch_name(tpu_arg_value_dtype(cx, 2)));
  int64_t m = tpu_numel(tpu_arg_sizes(cx, 2), tpu_arg_rank(cx, 2));
  TPU_RETURN_IF_ERROR(check_index_source(cx, "index_copy_", dim, m, TPU_CODE_OUT_OF_RANGE));
  int64_t d[TPU_MAX_RANK];
  int r0 = tpu_arg_rank(cx, 0), n = nonempty_shape(cx, 0, d);
  tpu_val_t idx = index_vector(cx, 2, &m);
  idx = checked_index(cx, idx, &m, 1, d[dim], false, TPU_CODE_OUT_OF_RANGE,
                      "index_copy_(): index is out of bounds for dimension %lld with size %lld",
                      (long long)dim, (long long)d[dim]);
  tpu_val_t x = tpu_lower_tensor(cx, 0);
  if (m == 0 || tpu_numel(d, n) == 0) {
    tpu_lower_out(cx, 0, x);
    return TPU_OK;
  }
  int64_t sd[TPU_MAX_RANK];
  nonempty_shape(cx, 3, sd);
  tpu_val_t src = tpu_ir_reshape(g, tpu_lower_tensor(cx, 3), sd, n);
  x = tpu_scatter_along(g, tpu_ir_reshape(g, x, d, n), n, (int)dim, idx, src, TPU_BODY_REPLACE);
  tpu_lower_out(cx, 0, tpu_ir_reshape(g, x, r0 ? d : NULL, r0));
  return TPU_OK;
}

// index_fill(Tensor self, int dim, Tensor index, Scalar|Tensor value)
tpu_status_t tpu_lower_index_fill(tpu_lower_ctx_t* cx) {
  tpu_graph_t* g = cx->g;
  int64_t dim;
  TPU_RETURN_IF_ERROR(tpu_wrap_dim(tpu_arg_int(cx, 1, 0), tpu_arg_rank(cx, 0), &dim));
  if (tpu_arg_value_dtype(cx, 2) != TPU_I64)
    return TPU_LOWER_ERROR(TPU_CODE_OUT_OF_RANGE,
                           "index_fill_(): Expected dtype int64 for index.");
  if (tpu_arg_rank(cx, 2) > 1)
    return TPU_LOWER_ERROR(TPU_CODE_INVALID_ARGUMENT,
                           "Index has to be a vector/scalar");
  if (tpu_arg_is_tensor(cx, 3) && tpu_arg_rank(cx, 3) != 0)
    return TPU_LOWER_ERROR(TPU_CODE_INVALID_ARGUMENT,
                           "index_fill_ only supports a 0-dimensional value tensor, but got "
                           "tensor with %d dimension(s).", tpu_arg_rank(cx, 3));
  int64_t d[TPU_MAX_RANK], m;
  int r0 = tpu_arg_rank(cx, 0), n = nonempty_shape(cx, 0, d);
  tpu_dtype_t t = tpu_arg_value_dtype(cx, 0);
  tpu_val_t idx = index_vector(cx, 2, &m);
  int64_t size = d[dim];
  idx = checked_index(cx, idx, &m, 1, size, true, TPU_CODE_OUT_OF_RANGE,
                      "index is out of bounds for dimension %lld with size %lld",
                      (long long)dim, (long long)size);
  tpu_val_t x = tpu_lower_tensor(cx, 0);
  if (m == 0 || tpu_numel(d, n) == 0) {
    tpu_lower_out(cx, 0, x);
    return TPU_OK;
  }
  // Which positions along dim are hit, broadcast over the other dims.
  tpu_val_t hit = tpu_ir_const_i(g, TPU_BOOL, 0, &size, 1);
  hit = scatter_flat(g, hit, idx, tpu_ir_const_i(g, TPU_BOOL, 1, &m, 1), 1, TPU_BODY_REPLACE);
  int64_t bd = dim;
  hit = tpu_ir_broadcast(g, hit, d, n, &bd);
  tpu_val_t v = tpu_ir_broadcast(g, tpu_lower_input(cx, 3, t), d, n, NULL);
  x = tpu_ir_select(g, hit, v, tpu_ir_reshape(g, x, d, n));
  tpu_lower_out(cx, 0, tpu_ir_reshape(g, x, r0 ? d : NULL, r0));
  return TPU_OK;
}

//===--- gather and scatter along a dim ---===//

// Flat offsets, into a contiguous array of shape xd (rank n), of the elements
// that an index of shape id (rank n) addresses along dim: position i of the
// index names element (i_0, ..., index[i], ..., i_{n-1}).
static tpu_val_t along_offsets(tpu_graph_t* g, tpu_val_t idx, const int64_t* id,
                               const int64_t* xd, int n, int dim) {
  int64_t st[TPU_MAX_RANK];
  strides_of(xd, n, st);
  tpu_val_t off = tpu_ir_binary(g, TPU_IR_MUL, idx, splat_i64(g, st[dim], id, n));
  for (int i = 0; i < n; ++i) {
    if (i == dim || id[i] == 1) continue;
    tpu_val_t io = tpu_ir_iota(g, TPU_I64, id, n, i);
    if (st[i] != 1) io = tpu_ir_binary(g, TPU_IR_MUL, io, splat_i64(g, st[i], id, n));
    off = tpu_ir_binary(g, TPU_IR_ADD, off, io);
  }
  return off;
}

// gather(Tensor self, int dim, Tensor index, *, bool sparse_grad=False)
tpu_status_t tpu_lower_gather(tpu_lower_ctx_t* cx) {
  tpu_graph_t* g = cx->g;
  int64_t dim;
  TPU_RETURN_IF_ERROR(tpu_wrap_dim(tpu_arg_int(cx, 1, 0), tpu_arg_rank(cx, 0), &dim));
  // An empty index reads nothing: CPU checks neither its dtype nor its rank.
  if (tpu_numel(tpu_arg_sizes(cx, 2), tpu_arg_rank(cx, 2)) == 0) {
    tpu_lower_out(cx, 0, zeros(g, tpu_arg_value_dtype(cx, 0), tpu_arg_sizes(cx, 2),
                               tpu_arg_rank(cx, 2)));
    return TPU_OK;
  }
  if (!is_index_dtype(tpu_arg_value_dtype(cx, 2)))
    return TPU_LOWER_ERROR(TPU_CODE_INVALID_ARGUMENT,
                           "gather(): Expected dtype int32/int64 for index");
  int64_t xd[TPU_MAX_RANK], id[TPU_MAX_RANK];
  int n = nonempty_shape(cx, 0, xd), ni = nonempty_shape(cx, 2, id);
  if (ni != n)
    return TPU_LOWER_ERROR(TPU_CODE_INVALID_ARGUMENT,
                           "Index tensor must have the same number of dimensions as input "
                           "tensor");
  for (int i = 0; i < n; ++i)
    if (i != dim && id[i] > xd[i]) {
      char a[128], b[128];
      return TPU_LOWER_ERROR(TPU_CODE_INVALID_ARGUMENT,
                             "Size does not match at dimension %d expected index %s to be no "
                             "larger than self %s apart from dimension %lld", i,
                             tpu_shape_str(id, n, a, sizeof a), tpu_shape_str(xd, n, b, sizeof b),
                             (long long)dim);
    }
  tpu_dtype_t t = tpu_arg_value_dtype(cx, 0);
  int ri = tpu_arg_rank(cx, 2);
  const int64_t* out = tpu_arg_sizes(cx, 2);
  tpu_val_t idx = tpu_ir_reshape(g, tpu_lower_input(cx, 2, TPU_I64), id, n);
  idx = checked_index(cx, idx, id, n, xd[dim], false, TPU_CODE_INVALID_ARGUMENT,
                      "index is out of bounds for dimension %lld with size %lld",
                      (long long)dim, (long long)xd[dim]);
  if (tpu_numel(id, n) == 0 || tpu_numel(xd, n) == 0) {
    tpu_lower_out(cx, 0, zeros(g, t, out, ri));
    return TPU_OK;
  }
  tpu_val_t off = along_offsets(g, idx, id, xd, n, (int)dim);
  tpu_val_t x = flat(g, tpu_lower_tensor(cx, 0), xd, n);
  tpu_lower_out(cx, 0, tpu_ir_reshape(g, gather_flat(g, x, off, n), out, ri));
  return TPU_OK;
}

// The scatter family's common part: self, dim, index at args 0-2; updates
// come from `upd` (a tensor or scalar argument, sliced or broadcast to the
// index's shape). Writes the checked offsets and the updates.
static tpu_status_t scatter_prepare(tpu_lower_ctx_t* cx, const char* op, int upd, int64_t* dim,
                                    tpu_val_t* off, tpu_val_t* updates, int* off_rank,
                                    bool* empty) {
  tpu_graph_t* g = cx->g;
  TPU_RETURN_IF_ERROR(tpu_wrap_dim(tpu_arg_int(cx, 1, 0), tpu_arg_rank(cx, 0), dim));
  if (!is_index_dtype(tpu_arg_value_dtype(cx, 2)))
    return TPU_LOWER_ERROR(TPU_CODE_INVALID_ARGUMENT,
                           "%s(): Expected dtype int32/int64 for index", op);
  tpu_dtype_t t = tpu_arg_value_dtype(cx, 0);
  bool src_tensor = tpu_arg_is_tensor(cx, upd);
  if (src_tensor && tpu_arg_value_dtype(cx, upd) != t)
    return TPU_LOWER_ERROR(TPU_CODE_INVALID_ARGUMENT,
                           "%s(): Expected self.dtype to be equal to src.dtype", op);
  int64_t xd[TPU_MAX_RANK], id[TPU_MAX_RANK], sd[TPU_MAX_RANK];
  int n = nonempty_shape(cx, 0, xd), ni = nonempty_shape(cx, 2, id);
  int64_t icount = tpu_numel(tpu_arg_sizes(cx, 2), tpu_arg_rank(cx, 2));
  *off_rank = n;
  *empty = icount == 0;
  if (*empty) return TPU_OK;  // PyTorch checks nothing more for an empty index
  if (ni != n)
    return TPU_LOWER_ERROR(TPU_CODE_INVALID_ARGUMENT,
                           "Index tensor must have the same number of dimensions as self "
                           "tensor");
  if (src_tensor) {
    int ns = nonempty_shape(cx, upd, sd);
    if (ns != n)
      return TPU_LOWER_ERROR(TPU_CODE_INVALID_ARGUMENT,
                             "Index tensor must have the same number of dimensions as src "
                             "tensor");
  }
  for (int i = 0; i < n; ++i)
    if ((i != *dim && id[i] > xd[i]) || (src_tensor && id[i] > sd[i])) {
      char a[128], b[128], c[128];
      return TPU_LOWER_ERROR(TPU_CODE_INVALID_ARGUMENT,
                             "Expected index %s to be no larger than self %s apart from "
                             "dimension %lld and to be no larger size than src %s",
                             tpu_shape_str(id, n, a, sizeof a), tpu_shape_str(xd, n, b, sizeof b),
                             (long long)*dim,
                             src_tensor ? tpu_shape_str(sd, n, c, sizeof c) : "(a scalar)");
    }
  tpu_val_t idx = tpu_ir_reshape(g, tpu_lower_input(cx, 2, TPU_I64), id, n);
  idx = checked_index(cx, idx, id, n, xd[*dim], false, TPU_CODE_INVALID_ARGUMENT,
                      "index is out of bounds for dimension %lld with size %lld",
                      (long long)*dim, (long long)xd[*dim]);
  *off = along_offsets(g, idx, id, xd, n, (int)*dim);
  if (src_tensor) {
    int64_t zero[TPU_MAX_RANK] = {0};
    tpu_val_t s = tpu_ir_reshape(g, tpu_lower_tensor(cx, upd), sd, n);
    *updates = tpu_ir_slice(g, s, zero, id, NULL);
  } else {
    *updates = tpu_ir_broadcast(g, tpu_lower_input(cx, upd, t), id, n, NULL);
  }
  return TPU_OK;
}

// self scattered with `body` at the prepared offsets, shaped as self.
static tpu_val_t scatter_into_self(tpu_lower_ctx_t* cx, tpu_val_t off, tpu_val_t upd, int n,
                                   tpu_body_t body) {
  tpu_graph_t* g = cx->g;
  int r0 = tpu_arg_rank(cx, 0);
  const int64_t* xd = tpu_arg_sizes(cx, 0);
  tpu_val_t x = flat(g, tpu_lower_tensor(cx, 0), xd, r0);
  x = scatter_flat(g, x, off, upd, n, body);
  return tpu_ir_reshape(g, x, xd, r0);
}

// scatter.src / .value (self, dim, index, src|value) and .reduce /
// .value_reduce (..., *, str reduce)
tpu_status_t tpu_lower_scatter(tpu_lower_ctx_t* cx) {
  const char* reduce = tpu_arg_string(cx, 4, NULL);
  tpu_body_t body = TPU_BODY_REPLACE;
  if (reduce) {
    if (!strcmp(reduce, "add")) body = TPU_BODY_ADD;
    else if (!strcmp(reduce, "multiply")) body = TPU_BODY_MUL;
    else
      return TPU_LOWER_ERROR(TPU_CODE_INVALID_ARGUMENT,
                             "reduce argument must be either add or multiply.");
  }
  int64_t dim;
  tpu_val_t off = TPU_VAL_NONE, upd = TPU_VAL_NONE;
  int n;
  bool empty;
  TPU_RETURN_IF_ERROR(scatter_prepare(cx, "scatter", 3, &dim, &off, &upd, &n, &empty));
  if (empty || tpu_numel(tpu_arg_sizes(cx, 0), tpu_arg_rank(cx, 0)) == 0) {
    tpu_lower_out(cx, 0, tpu_lower_tensor(cx, 0));
    return TPU_OK;
  }
  tpu_lower_out(cx, 0, scatter_into_self(cx, off, upd, n, body));
  return TPU_OK;
}

// scatter_add(Tensor self, int dim, Tensor index, Tensor src)
tpu_status_t tpu_lower_scatter_add(tpu_lower_ctx_t* cx) {
  int64_t dim;
  tpu_val_t off = TPU_VAL_NONE, upd = TPU_VAL_NONE;
  int n;
  bool empty;
  TPU_RETURN_IF_ERROR(scatter_prepare(cx, "scatter_add", 3, &dim, &off, &upd, &n, &empty));
  if (empty || tpu_numel(tpu_arg_sizes(cx, 0), tpu_arg_rank(cx, 0)) == 0) {
    tpu_lower_out(cx, 0, tpu_lower_tensor(cx, 0));
    return TPU_OK;
  }
  tpu_lower_out(cx, 0, scatter_into_self(cx, off, upd, n, TPU_BODY_ADD));
  return TPU_OK;
}

// The identity of a reduction in dtype t, splatted to d.
static tpu_val_t reduce_identity(tpu_graph_t* g, tpu_body_t body, tpu_dtype_t t,
                                 const int64_t* d, int n) {
  switch (body) {
    case TPU_BODY_MUL: return tpu_ir_const(g, t, 1, d, n);
    case TPU_BODY_MAX:
    case TPU_BODY_MIN: {
      bool max = body == TPU_BODY_MAX;
      if (t == TPU_BOOL) return tpu_ir_const_i(g, t, max ? 0 : 1, d, n);
      if (tpu_dtype_is_float(t)) return tpu_ir_const(g, t, max ? -INFINITY : INFINITY, d, n);
      int bits = (int)tpu_dtype_size(t) * 8;
      if (tpu_dtype_kind(t) == TPU_KIND_UINT)
        return tpu_ir_const_bits(g, t, max ? 0 : (bits == 64 ? ~0ull : (1ull << bits) - 1), d, n);
      int64_t hi = bits == 64 ? INT64_MAX : ((int64_t)1 << (bits - 1)) - 1;
      return tpu_ir_const_i(g, t, max ? -hi - 1 : hi, d, n);
    }
    default: return tpu_ir_const(g, t, 0, d, n);
  }
}

// Integer floor division and float division of a sum by a count (mean
// reductions, in self's dtype as PyTorch counts).
static tpu_val_t divide_mean(tpu_graph_t* g, tpu_val_t x, tpu_val_t count, tpu_dtype_t t) {
  const tpu_type_t* ty = tpu_ir_type(g, x);
  tpu_val_t zero = tpu_ir_const(g, t, 0, ty->dims, ty->rank);
  tpu_val_t one = tpu_ir_const(g, t, 1, ty->dims, ty->rank);
  count = tpu_ir_select(g, tpu_ir_compare(g, TPU_CMP_EQ, count, zero), one, count);
  if (tpu_dtype_is_integral(t, true)) {
    tpu_val_t q = tpu_ir_binary(g, TPU_IR_DIV, x, count);
    tpu_val_t r = tpu_ir_binary(g, TPU_IR_REM, x, count);
    tpu_val_t fix = tpu_ir_binary(g, TPU_IR_AND, tpu_ir_compare(g, TPU_CMP_NE, r, zero),
                                  tpu_ir_compare(g, TPU_CMP_LT, r, zero));
    return tpu_ir_select(g, fix, tpu_ir_binary(g, TPU_IR_SUB, q, one), q);
  }
  tpu_dtype_t ct = tpu_opmath(t);
  return tpu_ir_convert(g, tpu_ir_binary(g, TPU_IR_DIV, tpu_ir_convert(g, x, ct),
                                         tpu_ir_convert(g, count, ct)), t);
}

// scatter_reduce.two(Tensor self, int dim, Tensor index, Tensor src, str reduce, *,
//                    bool include_self=True)
tpu_status_t tpu_lower_scatter_reduce(tpu_lower_ctx_t* cx) {
  tpu_graph_t* g = cx->g;
  const char* reduce = tpu_arg_string(cx, 4, "");
  bool include_self = tpu_arg_bool(cx, 5, true);
  tpu_body_t body;
  bool mean = false;
  if (!strcmp(reduce, "sum")) body = TPU_BODY_ADD;
  else if (!strcmp(reduce, "prod")) body = TPU_BODY_MUL;
  else if (!strcmp(reduce, "mean")) body = TPU_BODY_ADD, mean = true;
  else if (!strcmp(reduce, "amax") || !strcmp(reduce, "max")) body = TPU_BODY_MAX;
  else if (!strcmp(reduce, "amin") || !strcmp(reduce, "min")) body = TPU_BODY_MIN;
  else
    return TPU_LOWER_ERROR(TPU_CODE_INVALID_ARGUMENT,
                           "reduce argument must be either sum, prod, mean, amax or amin, got "
                           "%s", reduce);
  int64_t dim;
  tpu_val_t off = TPU_VAL_NONE, upd = TPU_VAL_NONE;
  int n;
  bool empty;
  TPU_RETURN_IF_ERROR(scatter_prepare(cx, "scatter_reduce", 3, &dim, &off, &upd, &n, &empty));
  int r0 = tpu_arg_rank(cx, 0);
  const int64_t* xd = tpu_arg_sizes(cx, 0);
  int64_t len = tpu_numel(xd, r0);
  if (empty || len == 0) {
    tpu_lower_out(cx, 0, tpu_lower_tensor(cx, 0));
    return TPU_OK;
  }
  tpu_dtype_t t = tpu_arg_value_dtype(cx, 0);
  int64_t id[TPU_MAX_RANK];
  nonempty_shape(cx, 2, id);
  tpu_val_t x = flat(g, tpu_lower_tensor(cx, 0), xd, r0);
  if (!include_self) {
    // Positions that receive an update start from the identity.
    tpu_val_t hit = tpu_ir_const_i(g, TPU_BOOL, 0, &len, 1);
    hit = scatter_flat(g, hit, off, tpu_ir_const_i(g, TPU_BOOL, 1, id, n), n, TPU_BODY_REPLACE);
    x = tpu_ir_select(g, hit, reduce_identity(g, body, t, &len, 1), x);
  }
  x = scatter_flat(g, x, off, upd, n, body);
  if (mean) {
    // PyTorch counts in self's dtype, with self counted once when included,
    // and divides (floor division for integers) where the count is not 0.
    tpu_val_t count = tpu_ir_const(g, t, include_self ? 1 : 0, &len, 1);
    count = scatter_flat(g, count, off, tpu_ir_const(g, t, 1, id, n), n, TPU_BODY_ADD);
    x = divide_mean(g, x, count, t);
  }
  tpu_lower_out(cx, 0, tpu_ir_reshape(g, x, xd, r0));
  return TPU_OK;
}

// index_reduce(Tensor self, int dim, Tensor index, Tensor source, str reduce, *,
//              bool include_self=True): scatter_reduce with one index per slice.
tpu_status_t tpu_lower_index_reduce(tpu_lower_ctx_t* cx) {
  tpu_graph_t* g = cx->g;
  const char* reduce = tpu_arg_string(cx, 4, "");
  bool include_self = tpu_arg_bool(cx, 5, true), mean = !strcmp(reduce, "mean");
  tpu_body_t body;
  if (!strcmp(reduce, "prod")) body = TPU_BODY_MUL;
  else if (mean) body = TPU_BODY_ADD;
  else if (!strcmp(reduce, "amax")) body = TPU_BODY_MAX;
  else if (!strcmp(reduce, "amin")) body = TPU_BODY_MIN;
  else
    return tpu_invalid("index_reduce(): Expected reduce to be one of prod, mean, amax or amin "
                       "but got %s.", reduce);
  int64_t dim;
  TPU_RETURN_IF_ERROR(tpu_wrap_dim(tpu_arg_int(cx, 1, 0), tpu_arg_rank(cx, 0), &dim));
  if (!is_index_dtype(tpu_arg_value_dtype(cx, 2)))
    return tpu_invalid("index_reduce_(): Expected dtype int32/int64 for index but got: %s",
                       tpu_dtype_torch_name(tpu_arg_value_dtype(cx, 2)));
  int64_t m = tpu_numel(tpu_arg_sizes(cx, 2), tpu_arg_rank(cx, 2));
  TPU_RETURN_IF_ERROR(check_index_source(cx, "index_reduce_", dim, m, TPU_CODE_INVALID_ARGUMENT));
  int64_t d[TPU_MAX_RANK], sd[TPU_MAX_RANK];
  int r0 = tpu_arg_rank(cx, 0), n = nonempty_shape(cx, 0, d);
  nonempty_shape(cx, 3, sd);
  tpu_dtype_t t = tpu_arg_value_dtype(cx, 0);
  tpu_val_t idx = checked_index(cx, index_vector(cx, 2, &m), &m, 1, d[dim], false,
                                TPU_CODE_OUT_OF_RANGE, "index out of range in self");
  tpu_val_t x = tpu_lower_tensor(cx, 0);
  if (m == 0 || tpu_numel(d, n) == 0) {
    tpu_lower_out(cx, 0, x);
    return TPU_OK;
  }
  x = tpu_ir_reshape(g, x, d, n);
  tpu_val_t src = tpu_ir_reshape(g, tpu_lower_tensor(cx, 3), sd, n);
  if (!include_self) {  // slices that receive an update start from the identity
    tpu_val_t hit = tpu_scatter_along(g, tpu_ir_const_i(g, TPU_BOOL, 0, d, n), n, (int)dim, idx,
                                tpu_ir_const_i(g, TPU_BOOL, 1, sd, n), TPU_BODY_REPLACE);
    x = tpu_ir_select(g, hit, reduce_identity(g, body, t, d, n), x);
  }
  x = tpu_scatter_along(g, x, n, (int)dim, idx, src, body);
  if (mean) {
    tpu_val_t count = tpu_scatter_along(g, tpu_ir_const(g, t, include_self ? 1 : 0, d, n), n,
                                  (int)dim, idx, tpu_ir_const(g, t, 1, sd, n), TPU_BODY_ADD);
    x = divide_mean(g, x, count, t);
  }
  tpu_lower_out(cx, 0, tpu_ir_reshape(g, x, r0 ? d : NULL, r0));
  return TPU_OK;
}

// take(Tensor self, Tensor index)
tpu_status_t tpu_lower_take(tpu_lower_ctx_t* cx) {
  tpu_graph_t* g = cx->g;
  if (tpu_arg_value_dtype(cx, 1) != TPU_I64)
    return TPU_LOWER_ERROR(TPU_CODE_INVALID_ARGUMENT,
                           "take(): Expected a long tensor for index, but got %s",
                           tpu_dtype_torch_name(tpu_arg_value_dtype(cx, 1)));
  int r0 = tpu_arg_rank(cx, 0), ri = tpu_arg_rank(cx, 1);
  const int64_t* id = tpu_arg_sizes(cx, 1);
  int64_t len = tpu_numel(tpu_arg_sizes(cx, 0), r0);
  tpu_val_t idx = checked_index(cx, tpu_lower_tensor(cx, 1), id, ri, len, true,
                                TPU_CODE_OUT_OF_RANGE,
                                "out of range: tried to access an index out of [%lld, %lld) on "
                                "a tensor of %lld elements.", (long long)-len, (long long)len,
                                (long long)len);
  tpu_dtype_t t = tpu_arg_value_dtype(cx, 0);
  if (tpu_numel(id, ri) == 0 || len == 0) {
    tpu_lower_out(cx, 0, zeros(g, t, id, ri));
    return TPU_OK;
  }
  tpu_val_t x = flat(g, tpu_lower_tensor(cx, 0), tpu_arg_sizes(cx, 0), r0);
  tpu_lower_out(cx, 0, gather_flat(g, x, idx, ri));
  return TPU_OK;
}

// put(Tensor self, Tensor index, Tensor source, bool accumulate=False)
tpu_status_t tpu_lower_put(tpu_lower_ctx_t* cx) {
  tpu_graph_t* g = cx->g;
  if (tpu_arg_value_dtype(cx, 1) != TPU_I64)
    return TPU_LOWER_ERROR(TPU_CODE_INVALID_ARGUMENT,
                           "put_(): Expected a long tensor for index, but got %s",
                           tpu_dtype_torch_name(tpu_arg_value_dtype(cx, 1)));
  tpu_dtype_t t = tpu_arg_value_dtype(cx, 0);
  if (tpu_arg_value_dtype(cx, 2) != t)
    return TPU_LOWER_ERROR(TPU_CODE_INVALID_ARGUMENT,
                           "put_(): self and source expected to have the same dtype, but got "
                           "self.dtype = %s and source.dtype = %s", tpu_dtype_torch_name(t),
                           tpu_dtype_torch_name(tpu_arg_value_dtype(cx, 2)));
  int r0 = tpu_arg_rank(cx, 0), ri = tpu_arg_rank(cx, 1);
  const int64_t* xd = tpu_arg_sizes(cx, 0);
  int64_t len = tpu_numel(xd, r0), m = tpu_numel(tpu_arg_sizes(cx, 1), ri);
  int64_t ms = tpu_numel(tpu_arg_sizes(cx, 2), tpu_arg_rank(cx, 2));
  if (m != ms)
    return TPU_LOWER_ERROR(TPU_CODE_OUT_OF_RANGE,
                           "put_(): Expected source and index to have the same number of "
                           "elements, but got source.numel() = %lld, index.numel() = %lld",
                           (long long)ms, (long long)m);
  tpu_val_t idx = tpu_ir_reshape(g, tpu_lower_tensor(cx, 1), &m, 1);
  idx = checked_index(cx, idx, &m, 1, len, true, TPU_CODE_OUT_OF_RANGE,
                      "out of range: tried to access an index out of [%lld, %lld) on a tensor "
                      "of %lld elements.", (long long)-len, (long long)len, (long long)len);
  tpu_val_t x = tpu_lower_tensor(cx, 0);
  if (m == 0 || len == 0) {
    tpu_lower_out(cx, 0, x);
    return TPU_OK;
  }
  tpu_val_t src = tpu_ir_reshape(g, tpu_lower_tensor(cx, 2), &m, 1);
  bool acc = tpu_arg_bool(cx, 3, false);
  x = scatter_flat(g, flat(g, x, xd, r0), idx, src, 1, acc ? TPU_BODY_ADD : TPU_BODY_REPLACE);
  tpu_lower_out(cx, 0, tpu_ir_reshape(g, x, xd, r0));
  return TPU_OK;
}

// embedding_dense_backward(Tensor grad_output, Tensor indices, SymInt num_weights,
//                          SymInt padding_idx, bool scale_grad_by_freq)
tpu_status_t tpu_lower_embedding_dense_backward(tpu_lower_ctx_t* cx) {
  tpu_graph_t* g = cx->g;
  if (!is_index_dtype(tpu_arg_value_dtype(cx, 1)))
    return TPU_LOWER_ERROR(TPU_CODE_INVALID_ARGUMENT,
                           "embedding_dense_backward(): Expected dtype int32/int64 for indices");
  int rg = tpu_arg_rank(cx, 0), ri = tpu_arg_rank(cx, 1);
  const int64_t* gd = tpu_arg_sizes(cx, 0);
  int64_t m = tpu_numel(tpu_arg_sizes(cx, 1), ri);
  int64_t nw = tpu_arg_int(cx, 2, 0), pad = tpu_arg_int(cx, 3, -1);
  int64_t width = rg ? gd[rg - 1] : 1;
  if (rg != ri + 1 || tpu_numel(gd, rg) != m * width)
    return TPU_LOWER_ERROR(TPU_CODE_INVALID_ARGUMENT,
                           "embedding_dense_backward(): grad_output must have the indices' "
                           "shape and one more dimension");
  tpu_dtype_t t = tpu_arg_value_dtype(cx, 0), acc = tpu_opmath(t);
  int64_t out[2] = {nw, width};
  tpu_val_t idx = tpu_ir_reshape(g, tpu_lower_input(cx, 1, TPU_I64), &m, 1);
  idx = checked_index(cx, idx, &m, 1, nw, false, TPU_CODE_OUT_OF_RANGE,
                      "index out of range in self");
  if (m == 0 || nw == 0 || width == 0) {
    tpu_lower_out(cx, 0, zeros(g, t, out, 2));
    return TPU_OK;
  }
  int64_t rows[2] = {m, width};
  tpu_val_t grad = tpu_ir_convert(g, tpu_ir_reshape(g, tpu_lower_tensor(cx, 0), rows, 2), acc);
  int64_t zero_bd = 0;
  if (pad >= 0) {
    tpu_val_t keep = tpu_ir_compare(g, TPU_CMP_NE, idx, splat_i64(g, pad, &m, 1));
    grad = tpu_ir_select(g, tpu_ir_broadcast(g, keep, rows, 2, &zero_bd), grad,
                         zeros(g, acc, rows, 2));
  }
  if (tpu_arg_bool(cx, 4, false)) {
    // Each row's gradient is divided by how often its index occurs.
    tpu_val_t counts = scatter_flat(g, zeros(g, acc, &nw, 1), idx, tpu_ir_const(g, acc, 1, &m, 1),
                                    1, TPU_BODY_ADD);
    tpu_val_t freq = gather_flat(g, counts, idx, 1);
    grad = tpu_ir_binary(g, TPU_IR_DIV, grad, tpu_ir_broadcast(g, freq, rows, 2, &zero_bd));
  }
  tpu_val_t w = tpu_scatter_along(g, zeros(g, acc, out, 2), 2, 0, idx, grad, TPU_BODY_ADD);
  tpu_lower_out(cx, 0, tpu_ir_convert(g, w, t));
  return TPU_OK;
}

//===--- advanced indexing ---===//

// The tensors of an indices list (Tensor?[] at arg `arg`) after PyTorch's
// rules: index tensors broadcast to one shape B; indexed dims `dims[0..k)`;
// the result has B where the first indexed dim was when the indexed dims are
// adjacent, else in front.
typedef struct adv_index {
  int k;                     // number of index tensors
  int64_t dims[TPU_MAX_RANK];  // the self dim each one indexes
  int list[TPU_MAX_RANK];    // its position in the list
  int64_t b[TPU_MAX_RANK];   // broadcast shape B
  int nb;
  int pos;                   // where B goes in the result
  int64_t out[TPU_MAX_RANK];  // result shape
  int nout;
} adv_index_t;

static tpu_status_t adv_index_plan(tpu_lower_ctx_t* cx, int arg, adv_index_t* p) {
  memset(p, 0, sizeof *p);
  int rank = tpu_arg_rank(cx, 0), count = tpu_arg_count(cx, arg);
  const int64_t* xd = tpu_arg_sizes(cx, 0);
  if (count > rank)
    return TPU_LOWER_ERROR(TPU_CODE_OUT_OF_RANGE,
                           "too many indices for tensor of dimension %d (got %d)", rank, count);
  bool gap = false;
  for (int i = 0; i < count; ++i) {
    const tpu_view_t* v = tpu_arg_tensor_at(cx, arg, i);
    if (!v) {
      if (p->k) gap = true;
      continue;
    }
    if (!is_index_dtype(v->dtype))
      return TPU_LOWER_ERROR(TPU_CODE_OUT_OF_RANGE,
                             "tensors used as indices must be long, int, byte or bool tensors");
    if (p->k && gap) p->pos = -1;  // not adjacent
    int64_t nb[TPU_MAX_RANK];
    int r;
    tpu_status_t s = tpu_broadcast_shapes(p->b, p->nb, v->sizes, v->rank, nb, &r);
    if (s) {
      tpu_status_free(s);
      return TPU_LOWER_ERROR(TPU_CODE_OUT_OF_RANGE,
                             "shape mismatch: indexing tensors could not be broadcast together");
    }
    memcpy(p->b, nb, sizeof(int64_t) * (size_t)r);
    p->nb = r;
    if (p->k == 0) p->pos = i;
    p->dims[p->k] = i;
    p->list[p->k++] = i;
  }
  if (p->pos < 0) p->pos = 0;
  int rest = rank - p->k;
  if (p->nb + rest > TPU_MAX_RANK)
    return TPU_LOWER_ERROR(TPU_CODE_INVALID_ARGUMENT, "index: result has too many dimensions");
  // Result: non-indexed dims before pos, B, then the other non-indexed dims.
  int o = 0, seen = 0;
  for (int i = 0; i < rank; ++i) {
    bool indexed = false;
    for (int j = 0; j < p->k; ++j) indexed |= p->dims[j] == i;
    if (indexed) continue;
    if (seen++ == p->pos) {
      memcpy(p->out + o, p->b, sizeof(int64_t) * (size_t)p->nb);
      o += p->nb;
    }
    p->out[o++] = xd[i];
  }
  if (seen <= p->pos) {
    memcpy(p->out + o, p->b, sizeof(int64_t) * (size_t)p->nb);
    o += p->nb;
  }
  p->nout = o;
  return TPU_OK;
}

// The plan's index tensors, broadcast, checked, wrapped, flattened to
// [NB, k] i64 (NB = numel of B).
static tpu_val_t adv_index_values(tpu_lower_ctx_t* cx, int arg, const adv_index_t* p) {
  tpu_graph_t* g = cx->g;
  const int64_t* xd = tpu_arg_sizes(cx, 0);
  int64_t nb = tpu_numel(p->b, p->nb);
  int64_t col[2] = {nb, 1};
  tpu_val_t cols[TPU_MAX_RANK];
  for (int j = 0; j < p->k; ++j) {
    tpu_val_t v = tpu_ir_convert(g, tpu_lower_tensor_at(cx, arg, p->list[j]), TPU_I64);
    v = tpu_lower_expand(cx, v, p->b, p->nb);
    int64_t size = xd[p->dims[j]];
    v = checked_index(cx, v, p->b, p->nb, size, true, TPU_CODE_OUT_OF_RANGE,
                      "index is out of bounds for dimension %lld with size %lld",
                      (long long)p->dims[j], (long long)size);
    cols[j] = tpu_ir_reshape(g, v, col, 2);
  }
  return tpu_ir_concat(g, cols, p->k, 1);
}

// Gather/scatter dimension numbers of the plan, over self and a result in
// the collapsed form [non-indexed dims before pos, NB, the others].
static void adv_gather_dims(const adv_index_t* p, int rank, tpu_gather_dims_t* dn,
                            int64_t* slice, const int64_t* xd) {
  memset(dn, 0, sizeof *dn);
  int rest = rank - p->k;
  for (int i = 0; i < rest + 1; ++i)
    if (i != p->pos) dn->offset_dims[dn->n_offset++] = i;
  for (int j = 0; j < p->k; ++j) {
    dn->collapsed_slice_dims[j] = p->dims[j];
    dn->start_index_map[j] = p->dims[j];
  }
  dn->n_collapsed = dn->n_start_map = p->k;
  // Collapsed dims must be ascending; the list order is ascending already.
  dn->index_vector_dim = 1;
  memcpy(slice, xd, sizeof(int64_t) * (size_t)rank);
  for (int j = 0; j < p->k; ++j) slice[p->dims[j]] = 1;
}

// The collapsed shape [non-indexed before pos, NB, other non-indexed].
static int adv_collapsed_shape(const adv_index_t* p, int rank, const int64_t* xd, int64_t* cd) {
  int o = 0, seen = 0;
  int64_t nb = tpu_numel(p->b, p->nb);
  for (int i = 0; i < rank; ++i) {
    bool indexed = false;
    for (int j = 0; j < p->k; ++j) indexed |= p->dims[j] == i;
    if (indexed) continue;
    if (seen++ == p->pos) cd[o++] = nb;
    cd[o++] = xd[i];
  }
  if (seen <= p->pos) cd[o++] = nb;
  return o;
}

// index(Tensor self, Tensor?[] indices): integer index tensors only (the
// binding turns boolean masks into integer indices first).
tpu_status_t tpu_lower_index(tpu_lower_ctx_t* cx) {
  tpu_graph_t* g = cx->g;
  adv_index_t p;
  TPU_RETURN_IF_ERROR(adv_index_plan(cx, 1, &p));
  tpu_val_t x = tpu_lower_tensor(cx, 0);
  if (p.k == 0) {
    tpu_lower_out(cx, 0, x);
    return TPU_OK;
  }
  int rank = tpu_arg_rank(cx, 0);
  const int64_t* xd = tpu_arg_sizes(cx, 0);
  tpu_dtype_t t = tpu_arg_value_dtype(cx, 0);
  // PyTorch checks indices as it visits result elements: none when empty.
  if (tpu_numel(p.out, p.nout) == 0) {
    tpu_lower_out(cx, 0, zeros(g, t, p.out, p.nout));
    return TPU_OK;
  }
  tpu_val_t idx = adv_index_values(cx, 1, &p);
  bool empty_dim = false;
  for (int j = 0; j < p.k; ++j) empty_dim |= xd[p.dims[j]] == 0;
  if (empty_dim) {  // every index is out of range: the assertion fails
    tpu_lower_out(cx, 0, zeros(g, t, p.out, p.nout));
    return TPU_OK;
  }
  tpu_gather_dims_t dn;
  int64_t slice[TPU_MAX_RANK];
  adv_gather_dims(&p, rank, &dn, slice, xd);
  tpu_val_t r = tpu_ir_gather(g, x, idx, &dn, slice);
  tpu_lower_out(cx, 0, tpu_ir_reshape(g, r, p.out, p.nout));
  return TPU_OK;
}

static tpu_status_t value_shape_error(tpu_lower_ctx_t* cx, int varg, const int64_t* rs,
                                      int nrs) {
  char a[128], b[128];
  return TPU_LOWER_ERROR(TPU_CODE_INVALID_ARGUMENT,
                         "shape mismatch: value tensor of shape %s cannot be broadcast to "
                         "indexing result of shape %s",
                         tpu_shape_str(tpu_arg_sizes(cx, varg), tpu_arg_rank(cx, varg), a, sizeof a),
                         tpu_shape_str(rs, nrs, b, sizeof b));
}

// self with `v` (self's shape) written where the bool `m` (self's shape)
// holds: replaced, or added when accumulating.
static tpu_val_t put_where(tpu_graph_t* g, tpu_val_t x, tpu_val_t m, tpu_val_t v, tpu_dtype_t t,
                           const int64_t* d, int n, bool accumulate) {
  if (!accumulate) return tpu_ir_select(g, m, v, x);
  tpu_dtype_t ct = tpu_opmath(t);
  tpu_val_t sum = t == TPU_BOOL ? tpu_ir_binary(g, TPU_IR_OR, x, v)
                                : tpu_ir_convert(g, tpu_ir_binary(g, TPU_IR_ADD,
                                                                  tpu_ir_convert(g, x, ct),
                                                                  tpu_ir_convert(g, v, ct)), t);
  return tpu_ir_select(g, m, sum, x);
}

// index_put with one boolean mask as its only index tensor: the result keeps
// self's shape, so no host sync is needed. The mask covers self's dims
// [p, p + k); values broadcast to [self before p, count, self after].
static tpu_status_t index_put_mask(tpu_lower_ctx_t* cx, int p, bool accumulate) {
  tpu_graph_t* g = cx->g;
  const tpu_view_t* mv = tpu_arg_tensor_at(cx, 1, p);
  int rank = tpu_arg_rank(cx, 0), k = mv->rank;
  const int64_t* xd = tpu_arg_sizes(cx, 0);
  tpu_dtype_t t = tpu_arg_value_dtype(cx, 0);
  if (p + k > rank)
    return TPU_LOWER_ERROR(TPU_CODE_OUT_OF_RANGE,
                           "too many indices for tensor of dimension %d (got %d)", rank, p + k);
  for (int j = 0; j < k; ++j)
    if (mv->sizes[j] != xd[p + j]) {
      char a[128], b[128];
      return TPU_LOWER_ERROR(TPU_CODE_OUT_OF_RANGE,
                             "The shape of the mask %s at index %d does not match the shape of "
                             "the indexed tensor %s at index %d",
                             tpu_shape_str(mv->sizes, k, a, sizeof a), j,
                             tpu_shape_str(xd, rank, b, sizeof b), p + j);
    }
  // The indexing result's shape with the mask's count as -1 (unknown).
  int64_t rs[TPU_MAX_RANK];
  int nrs = 0;
  for (int i = 0; i < p; ++i) rs[nrs++] = xd[i];
  rs[nrs++] = -1;
  for (int i = p + k; i < rank; ++i) rs[nrs++] = xd[i];
  int nv = tpu_arg_rank(cx, 2);
  const int64_t* vd = tpu_arg_sizes(cx, 2);
  if (nv > nrs) return value_shape_error(cx, 2, rs, nrs);
  int64_t vr[TPU_MAX_RANK];  // values' shape aligned to rs
  for (int i = 0; i < nrs; ++i) {
    int j = i - (nrs - nv);
    vr[i] = j >= 0 ? vd[j] : 1;
    if (i != p && vr[i] != 1 && vr[i] != rs[i]) return value_shape_error(cx, 2, rs, nrs);
  }
  tpu_val_t x = tpu_lower_tensor(cx, 0);
  int64_t len = tpu_numel(xd, rank);
  if (len == 0) {
    tpu_lower_out(cx, 0, x);
    return TPU_OK;
  }
  tpu_val_t mask = tpu_ir_convert(g, tpu_lower_tensor_at(cx, 1, p), TPU_BOOL);
  tpu_val_t vals = tpu_ir_reshape(g, tpu_lower_tensor(cx, 2), vr, nrs);
  int64_t mb[TPU_MAX_RANK];  // mask dims at their place in self
  for (int j = 0; j < k; ++j) mb[j] = p + j;
  tpu_val_t m = tpu_ir_broadcast(g, mask, xd, rank, mb);
  tpu_val_t v;
  if (vr[p] == 1) {
    // One value per position outside the mask: spread over the mask's dims.
    int64_t vs[TPU_MAX_RANK];
    int nvs = 0;
    for (int i = 0; i < p; ++i) vs[nvs++] = vr[i];
    for (int j = 0; j < k; ++j) vs[nvs++] = 1;
    for (int i = p + 1; i < nrs; ++i) vs[nvs++] = vr[i];
    v = tpu_lower_expand(cx, tpu_ir_reshape(g, vals, vs, nvs), xd, rank);
  } else {
    // The i-th true element of the mask takes value i along the count dim;
    // the count must be exactly that dim's size.
    int64_t c = vr[p], mn = tpu_numel(mv->sizes, k);
    tpu_val_t mf = tpu_ir_reshape(g, mask, &mn, 1);
    tpu_lower_assert(cx, tpu_ir_compare(g, TPU_CMP_NE, count_true(g, mf, 1),
                                        tpu_ir_const_i(g, TPU_I64, c, NULL, 0)),
                     TPU_CODE_INVALID_ARGUMENT,
                     "shape mismatch: value tensor of shape %s cannot be broadcast to indexing "
                     "result (the mask has a different number of true elements)",
                     tpu_shape_str(vd, nv, (char[128]){0}, 128));
    tpu_dtype_t ct = count_dtype(mn + 1);
    tpu_val_t rank_m = prefix_sum(g, tpu_ir_convert(g, mf, ct), mn, ct);
    rank_m = tpu_ir_binary(g, TPU_IR_SUB, rank_m, tpu_ir_const(g, ct, 1, &mn, 1));
    rank_m = tpu_ir_clamp(g, tpu_ir_const(g, ct, 0, NULL, 0), rank_m,
                          tpu_ir_const(g, ct, (double)(c - 1), NULL, 0));
    rank_m = tpu_ir_reshape(g, tpu_ir_convert(g, rank_m, TPU_I64), mv->sizes, k);
    int64_t full[TPU_MAX_RANK];  // values broadcast to rs with count c
    memcpy(full, rs, sizeof(int64_t) * (size_t)nrs);
    full[p] = c;
    tpu_val_t vf = tpu_lower_expand(cx, vals, full, nrs);
    tpu_gather_dims_t dn;
    memset(&dn, 0, sizeof dn);
    for (int i = 0; i < rank; ++i)
      if (i < p || i >= p + k) dn.offset_dims[dn.n_offset++] = i;
    dn.n_collapsed = dn.n_start_map = 1;
    dn.collapsed_slice_dims[0] = dn.start_index_map[0] = p;
    dn.index_vector_dim = k;
    int64_t slice[TPU_MAX_RANK];
    memcpy(slice, full, sizeof(int64_t) * (size_t)nrs);
    slice[p] = 1;
    v = tpu_ir_gather(g, vf, rank_m, &dn, slice);
  }
  tpu_lower_out(cx, 0, put_where(g, x, m, tpu_ir_convert(g, v, t), t, xd, rank, accumulate));
  return TPU_OK;
}

// index_put(Tensor self, Tensor?[] indices, Tensor values, bool accumulate=False)
// (also _index_put_impl_'s leading arguments): integer index tensors, or one
// boolean mask alone (the binding turns other masks into integer indices).
tpu_status_t tpu_lower_index_put(tpu_lower_ctx_t* cx) {
  tpu_graph_t* g = cx->g;
  tpu_dtype_t t = tpu_arg_value_dtype(cx, 0);
  if (tpu_arg_value_dtype(cx, 2) != t)
    return TPU_LOWER_ERROR(TPU_CODE_INVALID_ARGUMENT,
                           "Index put requires the source and destination dtypes match, got %s "
                           "for the destination and %s for the source.",
                           tpu_dtype_torch_name(t),
                           tpu_dtype_torch_name(tpu_arg_value_dtype(cx, 2)));
  bool accumulate = tpu_arg_bool(cx, 3, false);
  int count = tpu_arg_count(cx, 1), masks = 0, tensors = 0, mask_at = -1;
  for (int i = 0; i < count; ++i) {
    const tpu_view_t* v = tpu_arg_tensor_at(cx, 1, i);
    if (!v) continue;
    ++tensors;
    if (v->dtype == TPU_BOOL || v->dtype == TPU_U8) {
      ++masks;
      mask_at = i;
    }
  }
  if (masks == 1 && tensors == 1) return index_put_mask(cx, mask_at, accumulate);
  if (masks)
    return TPU_LOWER_ERROR(TPU_CODE_INTERNAL,
                           "index_put: boolean masks must be converted to indices first");
  adv_index_t p;
  TPU_RETURN_IF_ERROR(adv_index_plan(cx, 1, &p));
  int rank = tpu_arg_rank(cx, 0);
  const int64_t* xd = tpu_arg_sizes(cx, 0);
  // values must broadcast to the indexing result.
  int64_t bs[TPU_MAX_RANK];
  int nbs;
  tpu_status_t s = tpu_broadcast_shapes(p.out, p.nout, tpu_arg_sizes(cx, 2), tpu_arg_rank(cx, 2),
                                        bs, &nbs);
  bool ok = !s && nbs == p.nout;
  tpu_status_free(s);
  for (int i = 0; ok && i < nbs; ++i) ok = bs[i] == p.out[i];
  if (!ok) return value_shape_error(cx, 2, p.out, p.nout);
  tpu_val_t x = tpu_lower_tensor(cx, 0);
  if (p.k == 0) {
    // No index tensor: the values are written to (or added to) all of self.
    tpu_val_t v = tpu_lower_expand(cx, tpu_lower_tensor(cx, 2), xd, rank);
    tpu_val_t all = tpu_ir_const_i(g, TPU_BOOL, 1, xd, rank);
    tpu_lower_out(cx, 0, put_where(g, x, all, v, t, xd, rank, accumulate));
    return TPU_OK;
  }
  if (tpu_numel(p.out, p.nout) == 0) {
    tpu_lower_out(cx, 0, x);
    return TPU_OK;
  }
  tpu_val_t idx = adv_index_values(cx, 1, &p);
  if (tpu_numel(xd, rank) == 0) {
    tpu_lower_out(cx, 0, x);
    return TPU_OK;
  }
  int64_t cd[TPU_MAX_RANK];
  int ncd = adv_collapsed_shape(&p, rank, xd, cd);
  tpu_val_t upd = tpu_lower_expand(cx, tpu_lower_tensor(cx, 2), p.out, p.nout);
  upd = tpu_ir_reshape(g, upd, cd, ncd);
  tpu_gather_dims_t gd;
  int64_t slice[TPU_MAX_RANK];
  adv_gather_dims(&p, rank, &gd, slice, xd);
  tpu_scatter_dims_t dn;
  memset(&dn, 0, sizeof dn);
  dn.n_update_window = gd.n_offset;
  memcpy(dn.update_window_dims, gd.offset_dims, sizeof gd.offset_dims);
  dn.n_inserted = dn.n_to_operand = p.k;
  for (int j = 0; j < p.k; ++j)
    dn.inserted_window_dims[j] = dn.scatter_dims_to_operand_dims[j] = p.dims[j];
  dn.index_vector_dim = 1;
  if (accumulate && t != tpu_opmath(t)) {
    // Half precision accumulates in float, rounded once.
    tpu_dtype_t ct = tpu_opmath(t);
    tpu_val_t r = tpu_ir_scatter(g, tpu_ir_convert(g, x, ct), idx, tpu_ir_convert(g, upd, ct),
                                 &dn, TPU_BODY_ADD);
    tpu_lower_out(cx, 0, tpu_ir_convert(g, r, t));
    return TPU_OK;
  }
  tpu_lower_out(cx, 0, tpu_ir_scatter(g, x, idx, upd, &dn,
                                      accumulate ? TPU_BODY_ADD : TPU_BODY_REPLACE));
  return TPU_OK;
}

//===--- masks ---===//

// masked_fill.Scalar / .Tensor (Tensor self, Tensor mask, Scalar|Tensor value)
tpu_status_t tpu_lower_masked_fill(tpu_lower_ctx_t* cx) {
  tpu_graph_t* g = cx->g;
  tpu_dtype_t mt = tpu_arg_value_dtype(cx, 1);
  if (mt != TPU_BOOL)
    return TPU_LOWER_ERROR(TPU_CODE_INVALID_ARGUMENT,
                           "masked_fill_ only supports boolean masks, but got mask with dtype "
                           "%s", tpu_dtype_torch_name(mt));
  if (tpu_arg_is_tensor(cx, 2) && tpu_arg_rank(cx, 2) != 0)
    return TPU_LOWER_ERROR(TPU_CODE_INVALID_ARGUMENT,
                           "masked_fill_ only supports a 0-dimensional value tensor, but got "
                           "tensor with %d dimension(s).", tpu_arg_rank(cx, 2));
  tpu_dtype_t t = tpu_arg_value_dtype(cx, 0);
  int64_t d[TPU_MAX_RANK];
  int n;
  TPU_RETURN_IF_ERROR(tpu_broadcast_shapes(tpu_arg_sizes(cx, 0), tpu_arg_rank(cx, 0),
                                           tpu_arg_sizes(cx, 1), tpu_arg_rank(cx, 1), d, &n));
  tpu_val_t x = tpu_lower_expand(cx, tpu_lower_tensor(cx, 0), d, n);
  tpu_val_t m = tpu_lower_expand(cx, tpu_lower_tensor(cx, 1), d, n);
  tpu_val_t v = tpu_ir_broadcast(g, tpu_lower_input(cx, 2, t), d, n, NULL);
  tpu_lower_out(cx, 0, tpu_ir_select(g, m, v, x));
  return TPU_OK;
}

// masked_scatter(Tensor self, Tensor mask, Tensor source): the i-th true
// element of the (broadcast) mask takes source's i-th element.
tpu_status_t tpu_lower_masked_scatter(tpu_lower_ctx_t* cx) {
  tpu_graph_t* g = cx->g;
  tpu_dtype_t mt = tpu_arg_value_dtype(cx, 1);
  if (mt != TPU_BOOL)
    return TPU_LOWER_ERROR(TPU_CODE_INVALID_ARGUMENT,
                           "masked_scatter_ only supports boolean masks, but got mask with "
                           "dtype %s", tpu_dtype_torch_name(mt));
  tpu_dtype_t t = tpu_arg_value_dtype(cx, 0);
  if (tpu_arg_value_dtype(cx, 2) != t)
    return TPU_LOWER_ERROR(TPU_CODE_INVALID_ARGUMENT,
                           "masked_scatter_: expected self and source to have same dtypes but "
                           "got %s and %s", tpu_dtype_torch_name(t),
                           tpu_dtype_torch_name(tpu_arg_value_dtype(cx, 2)));
  int64_t d[TPU_MAX_RANK];
  int n;
  TPU_RETURN_IF_ERROR(tpu_broadcast_shapes(tpu_arg_sizes(cx, 0), tpu_arg_rank(cx, 0),
                                           tpu_arg_sizes(cx, 1), tpu_arg_rank(cx, 1), d, &n));
  int64_t len = tpu_numel(d, n), ns = tpu_numel(tpu_arg_sizes(cx, 2), tpu_arg_rank(cx, 2));
  tpu_val_t x = tpu_lower_expand(cx, tpu_lower_tensor(cx, 0), d, n);
  if (len == 0) {
    tpu_lower_out(cx, 0, x);
    return TPU_OK;
  }
  tpu_val_t mf = flat(g, tpu_lower_expand(cx, tpu_lower_tensor(cx, 1), d, n), d, n);
  tpu_lower_assert(cx, tpu_ir_compare(g, TPU_CMP_GT, count_true(g, mf, 1),
                                      tpu_ir_const_i(g, TPU_I64, ns, NULL, 0)),
                   TPU_CODE_INVALID_ARGUMENT,
                   "Number of elements of source < number of ones in mask");
  tpu_val_t v;
  if (ns == 0) {
    v = zeros(g, t, &len, 1);
  } else {
    tpu_dtype_t ct = count_dtype(len + 1);
    tpu_val_t r = prefix_sum(g, tpu_ir_convert(g, mf, ct), len, ct);
    r = tpu_ir_binary(g, TPU_IR_SUB, r, tpu_ir_const(g, ct, 1, &len, 1));
    r = tpu_ir_clamp(g, tpu_ir_const(g, ct, 0, NULL, 0), r,
                     tpu_ir_const(g, ct, (double)(ns - 1), NULL, 0));
    tpu_val_t src = flat(g, tpu_lower_tensor(cx, 2), tpu_arg_sizes(cx, 2), tpu_arg_rank(cx, 2));
    v = gather_flat(g, src, tpu_ir_convert(g, r, TPU_I64), 1);
  }
  tpu_val_t r = tpu_ir_select(g, mf, v, flat(g, x, d, n));
  tpu_lower_out(cx, 0, tpu_ir_reshape(g, r, d, n));
  return TPU_OK;
}

// nonzero_count(Tensor self) -> 0-d int64: how many elements are not zero
// (what the binding reads back before a nonzero).
tpu_status_t tpu_lower_nonzero_count(tpu_lower_ctx_t* cx) {
  tpu_graph_t* g = cx->g;
  int n = tpu_arg_rank(cx, 0);
  const int64_t* d = tpu_arg_sizes(cx, 0);
  tpu_val_t m = nonzero_mask(g, tpu_lower_tensor(cx, 0), tpu_arg_value_dtype(cx, 0), d, n);
  tpu_lower_out(cx, 0, count_true(g, m, n));
  return TPU_OK;
}

// nonzero_static(Tensor self, *, SymInt size, int fill_value=-1): the
// coordinates of the first `size` nonzero elements, rows of fill_value after
// the last one.
tpu_status_t tpu_lower_nonzero_static(tpu_lower_ctx_t* cx) {
  tpu_graph_t* g = cx->g;
  int64_t size = tpu_arg_int(cx, 1, 0), fill = tpu_arg_int(cx, 2, -1);
  if (size < 0)
    return TPU_LOWER_ERROR(TPU_CODE_INVALID_ARGUMENT,
                           "nonzero_static: 'size' must be an non-negative integer");
  tpu_dtype_t t = tpu_arg_value_dtype(cx, 0);
  if (tpu_dtype_is_complex(t))
    return TPU_LOWER_ERROR(TPU_CODE_UNIMPLEMENTED,
                           "nonzero is not supported for complex tensors on tpu");
  int n = tpu_arg_rank(cx, 0);
  const int64_t* d = tpu_arg_sizes(cx, 0);
  int64_t out[2] = {size, n};
  if (n == 0 || size == 0) {
    tpu_lower_out(cx, 0, zeros(g, TPU_I64, out, 2));
    return TPU_OK;
  }
  int64_t len = tpu_numel(d, n);
  if (len == 0) {  // nothing is nonzero (and the coordinate math would divide by 0)
    tpu_lower_out(cx, 0, splat_i64(g, fill, out, 2));
    return TPU_OK;
  }
  tpu_val_t m = flat(g, nonzero_mask(g, tpu_lower_tensor(cx, 0), t, d, n), d, n);
  tpu_val_t pos = compact_positions(g, m, len, size);
  tpu_val_t valid = tpu_ir_compare(g, TPU_CMP_GE, pos, splat_i64(g, 0, &size, 1));
  int64_t st[TPU_MAX_RANK], col[2] = {size, 1};
  strides_of(d, n, st);
  tpu_val_t cols[TPU_MAX_RANK];
  for (int i = 0; i < n; ++i) {
    tpu_val_t c = pos;
    if (st[i] != 1) c = tpu_ir_binary(g, TPU_IR_DIV, c, splat_i64(g, st[i], &size, 1));
    if (i > 0) c = tpu_ir_binary(g, TPU_IR_REM, c, splat_i64(g, d[i], &size, 1));
    c = tpu_ir_select(g, valid, c, splat_i64(g, fill, &size, 1));
    cols[i] = tpu_ir_reshape(g, c, col, 2);
  }
  tpu_lower_out(cx, 0, tpu_ir_concat(g, cols, n, 1));
  return TPU_OK;
}

//===--- unique ---===//

// The flattened values of self (n entries) in the order unique groups them
// (sorted, stably, unless consecutive), with their original positions and
// the group number (from 0) of each.
typedef struct unique_groups {
  tpu_val_t values, positions, group;
} unique_groups_t;

static unique_groups_t unique_groups(tpu_lower_ctx_t* cx, int64_t n, bool consecutive) {
  tpu_graph_t* g = cx->g;
  unique_groups_t u;
  u.values = tpu_ir_reshape(g, tpu_lower_tensor(cx, 0), &n, 1);
  u.positions = tpu_ir_iota(g, TPU_I64, &n, 1, 0);
  if (!consecutive) {  // NaN last, each NaN its own group (NaN != NaN), as CPU
    tpu_val_t ops[2] = {u.values, u.positions};
    tpu_val_t sorted = tpu_ir_sort(g, ops, 2, 0, TPU_SORT_ASCENDING, true);
    u.values = tpu_ir_result(g, sorted, 0);
    u.positions = tpu_ir_result(g, sorted, 1);
  }
  // A group starts where a value differs from the one before it.
  int64_t zero = 0, one = 1, rest = n - 1;
  tpu_val_t first = tpu_ir_const_i(g, TPU_I64, 1, &one, 1);
  tpu_val_t prev = tpu_ir_slice(g, u.values, &zero, &rest, NULL);
  tpu_val_t next = tpu_ir_slice(g, u.values, &one, &n, NULL);
  tpu_val_t starts = tpu_ir_convert(g, tpu_ir_compare(g, TPU_CMP_NE, next, prev), TPU_I64);
  tpu_val_t parts[2] = {first, starts};
  tpu_val_t begins = tpu_ir_concat(g, parts, 2, 0);
  u.group = tpu_ir_binary(g, TPU_IR_SUB, prefix_sum(g, begins, n, TPU_I64), splat_i64(g, 1, &n, 1));
  return u;
}

// unique_count(Tensor self, bool consecutive): the number of groups, 0-d.
tpu_status_t tpu_lower_unique_count(tpu_lower_ctx_t* cx) {
  tpu_graph_t* g = cx->g;
  int64_t n = tpu_numel(tpu_arg_sizes(cx, 0), tpu_arg_rank(cx, 0));
  if (n == 0) {
    tpu_lower_out(cx, 0, tpu_ir_const_i(g, TPU_I64, 0, NULL, 0));
    return TPU_OK;
  }
  unique_groups_t u = unique_groups(cx, n, tpu_arg_bool(cx, 1, false));
  tpu_val_t last = tpu_ir_slice(g, u.group, (int64_t[]){n - 1}, &n, NULL);
  tpu_lower_out(cx, 0, tpu_ir_binary(g, TPU_IR_ADD, tpu_ir_reshape(g, last, NULL, 0),
                                     tpu_ir_const_i(g, TPU_I64, 1, NULL, 0)));
  return TPU_OK;
}

// unique_static(Tensor self, bool consecutive, int size): the `size` unique
// values (the count the binding read back), the inverse indices (self's
// shape) and the counts.
tpu_status_t tpu_lower_unique_static(tpu_lower_ctx_t* cx) {
  tpu_graph_t* g = cx->g;
  tpu_dtype_t t = tpu_arg_value_dtype(cx, 0);
  if (tpu_dtype_is_complex(t))
    return tpu_status_make(TPU_CODE_UNIMPLEMENTED, "\"unique\" not implemented for '%s'",
                           tpu_dtype_torch_name(t));
  int rank = tpu_arg_rank(cx, 0);
  const int64_t* d = tpu_arg_sizes(cx, 0);
  int64_t n = tpu_numel(d, rank), size = tpu_arg_int(cx, 2, 0);
  if (n == 0) {
    tpu_lower_out(cx, 0, zeros(g, t, &size, 1));
    tpu_lower_out(cx, 1, zeros(g, TPU_I64, d, rank));
    tpu_lower_out(cx, 2, zeros(g, TPU_I64, &size, 1));
    return TPU_OK;
  }
  unique_groups_t u = unique_groups(cx, n, tpu_arg_bool(cx, 1, false));
  tpu_val_t values = scatter_flat(g, zeros(g, t, &size, 1), u.group, u.values, 1, TPU_BODY_REPLACE);
  tpu_val_t counts = scatter_flat(g, zeros(g, TPU_I64, &size, 1), u.group,
                                  splat_i64(g, 1, &n, 1), 1, TPU_BODY_ADD);
  tpu_val_t inverse = scatter_flat(g, zeros(g, TPU_I64, &n, 1), u.positions, u.group, 1,
                                   TPU_BODY_REPLACE);
  tpu_lower_out(cx, 0, values);
  tpu_lower_out(cx, 1, tpu_ir_reshape(g, inverse, d, rank));
  tpu_lower_out(cx, 2, counts);
  return TPU_OK;
}

// masked_select_static(Tensor self, Tensor mask, int size): the elements of
// self (broadcast with mask) where mask holds, `size` of them (the count the
// binding read back).
tpu_status_t tpu_lower_masked_select_static(tpu_lower_ctx_t* cx) {
  tpu_graph_t* g = cx->g;
  if (tpu_arg_value_dtype(cx, 1) != TPU_BOOL)
    return TPU_LOWER_ERROR(TPU_CODE_INVALID_ARGUMENT,
                           "masked_select: expected BoolTensor for mask");
  int64_t size = tpu_arg_int(cx, 2, 0);
  int64_t d[TPU_MAX_RANK];
  int n;
  TPU_RETURN_IF_ERROR(tpu_broadcast_shapes(tpu_arg_sizes(cx, 0), tpu_arg_rank(cx, 0),
                                           tpu_arg_sizes(cx, 1), tpu_arg_rank(cx, 1), d, &n));
  tpu_dtype_t t = tpu_arg_value_dtype(cx, 0);
  int64_t len = tpu_numel(d, n);
  if (size == 0 || len == 0) {
    tpu_lower_out(cx, 0, zeros(g, t, &size, 1));
    return TPU_OK;
  }
  tpu_val_t m = flat(g, tpu_lower_expand(cx, tpu_lower_tensor(cx, 1), d, n), d, n);
  tpu_val_t x = flat(g, tpu_lower_expand(cx, tpu_lower_tensor(cx, 0), d, n), d, n);
  tpu_val_t pos = compact_positions(g, m, len, size);
  // Rows past the real count (none when size is the count) read element 0.
  pos = tpu_ir_binary(g, TPU_IR_MAX, pos, splat_i64(g, 0, &size, 1));
  tpu_lower_out(cx, 0, gather_flat(g, x, pos, 1));
  return TPU_OK;
}

//===--- shape ops ---===//

// flip(Tensor self, int[] dims)
tpu_status_t tpu_lower_flip(tpu_lower_ctx_t* cx) {
  const int64_t* list;
  int count = tpu_arg_ints(cx, 1, &list), rank = tpu_arg_rank(cx, 0);
  bool seen[TPU_MAX_RANK] = {0};
  for (int i = 0; i < count; ++i) {
    int64_t d;
    TPU_RETURN_IF_ERROR(tpu_wrap_dim(list[i], rank, &d));
    if (rank == 0) continue;
    if (seen[d])
      return TPU_LOWER_ERROR(TPU_CODE_INVALID_ARGUMENT,
                             "dim %lld appears multiple times in the list of dims", (long long)d);
    seen[d] = true;
  }
  int64_t sorted[TPU_MAX_RANK];
  int k = 0;
  for (int i = 0; i < rank; ++i)
    if (seen[i] && tpu_arg_sizes(cx, 0)[i] > 1) sorted[k++] = i;
  tpu_lower_out(cx, 0, tpu_ir_reverse(cx->g, tpu_lower_tensor(cx, 0), sorted, k));
  return TPU_OK;
}

// x rolled by s (0 <= s < size) along dim.
static tpu_val_t roll_dim(tpu_graph_t* g, tpu_val_t x, const int64_t* d, int n, int dim,
                          int64_t s) {
  if (s == 0) return x;
  int64_t start[TPU_MAX_RANK] = {0}, limit[TPU_MAX_RANK];
  memcpy(limit, d, sizeof(int64_t) * (size_t)n);
  int64_t size = d[dim];
  start[dim] = size - s;
  tpu_val_t tail = tpu_ir_slice(g, x, start, limit, NULL);
  start[dim] = 0;
  limit[dim] = size - s;
  tpu_val_t head = tpu_ir_slice(g, x, start, limit, NULL);
  tpu_val_t parts[2] = {tail, head};
  return tpu_ir_concat(g, parts, 2, dim);
}

// roll(Tensor self, SymInt[1] shifts, int[1] dims=[])
tpu_status_t tpu_lower_roll(tpu_lower_ctx_t* cx) {
  tpu_graph_t* g = cx->g;
  const int64_t *shifts, *dims;
  int ns = tpu_arg_ints(cx, 1, &shifts), nd = tpu_arg_ints(cx, 2, &dims);
  if (ns == 0) return TPU_LOWER_ERROR(TPU_CODE_INVALID_ARGUMENT, "`shifts` required");
  if (!(nd == 0 && ns == 1) && ns != nd)
    return TPU_LOWER_ERROR(TPU_CODE_INVALID_ARGUMENT,
                           "shifts and dimensions must align. shifts: %d, dims:%d", ns, nd);
  int rank = tpu_arg_rank(cx, 0);
  const int64_t* xd = tpu_arg_sizes(cx, 0);
  tpu_val_t x = tpu_lower_tensor(cx, 0);
  int64_t len = tpu_numel(xd, rank);
  if (len == 0) {
    tpu_lower_out(cx, 0, x);
    return TPU_OK;
  }
  if (nd == 0) {  // roll the flattened tensor
    int64_t s = ((shifts[0] % len) + len) % len;
    x = roll_dim(g, flat(g, x, xd, rank), &len, 1, 0, s);
    tpu_lower_out(cx, 0, tpu_ir_reshape(g, x, xd, rank));
    return TPU_OK;
  }
  for (int i = 0; i < nd; ++i) {
    int64_t d;
    TPU_RETURN_IF_ERROR(tpu_wrap_dim(dims[i], rank, &d));
    if (rank == 0) continue;
    int64_t size = xd[d];
    x = roll_dim(g, x, xd, rank, (int)d, ((shifts[i] % size) + size) % size);
  }
  tpu_lower_out(cx, 0, x);
  return TPU_OK;
}

// tril / triu (Tensor self, SymInt diagonal=0): zero above / below the
// diagonal of the last two dims.
static tpu_status_t triangle(tpu_lower_ctx_t* cx, bool lower) {
  tpu_graph_t* g = cx->g;
  int rank = tpu_arg_rank(cx, 0);
  if (rank < 2)
    return TPU_LOWER_ERROR(TPU_CODE_INVALID_ARGUMENT,
                           "%s: input tensor must have at least 2 dimensions",
                           lower ? "tril" : "triu");
  const int64_t* xd = tpu_arg_sizes(cx, 0);
  int64_t diag = tpu_arg_int(cx, 1, 0);
  int64_t md[2] = {xd[rank - 2], xd[rank - 1]}, bd[2] = {rank - 2, rank - 1};
  tpu_val_t col_minus_row = tpu_ir_binary(g, TPU_IR_SUB, tpu_ir_iota(g, TPU_I64, md, 2, 1),
                                          tpu_ir_iota(g, TPU_I64, md, 2, 0));
  tpu_val_t keep = tpu_ir_compare(g, lower ? TPU_CMP_LE : TPU_CMP_GE, col_minus_row,
                                  splat_i64(g, diag, md, 2));
  tpu_dtype_t t = tpu_arg_value_dtype(cx, 0);
  tpu_val_t x = tpu_lower_tensor(cx, 0);
  tpu_lower_out(cx, 0, tpu_ir_select(g, tpu_ir_broadcast(g, keep, xd, rank, bd), x,
                                     zeros(g, t, xd, rank)));
  return TPU_OK;
}

tpu_status_t tpu_lower_tril(tpu_lower_ctx_t* cx) { return triangle(cx, true); }
tpu_status_t tpu_lower_triu(tpu_lower_ctx_t* cx) { return triangle(cx, false); }

// constant_pad_nd(Tensor self, SymInt[] pad, Scalar value=0): pairs of
// (before, after) from the last dim backwards; negative pads crop.
tpu_status_t tpu_lower_constant_pad_nd(tpu_lower_ctx_t* cx) {
  tpu_graph_t* g = cx->g;
  const int64_t* pad;
  int np = tpu_arg_ints(cx, 1, &pad), rank = tpu_arg_rank(cx, 0);
  if (np % 2)
    return TPU_LOWER_ERROR(TPU_CODE_INVALID_ARGUMENT,
                           "Padding length must be divisible by 2 (got %d)", np);
  if (np / 2 > rank)
    return TPU_LOWER_ERROR(TPU_CODE_INVALID_ARGUMENT,
                           "Length of pad should be no more than twice the number of dimensions "
                           "of the input. Pad length is %d while the input has %d dimensions.",
                           np, rank);
  const int64_t* xd = tpu_arg_sizes(cx, 0);
  int64_t lo[TPU_MAX_RANK] = {0}, hi[TPU_MAX_RANK] = {0}, out[TPU_MAX_RANK];
  memcpy(out, xd, sizeof(int64_t) * (size_t)rank);
  for (int i = 0; i < np / 2; ++i) {
    int d = rank - 1 - i;
    lo[d] = pad[2 * i];
    hi[d] = pad[2 * i + 1];
    out[d] = xd[d] + lo[d] + hi[d];
    if (out[d] < 0)
      return TPU_LOWER_ERROR(TPU_CODE_INVALID_ARGUMENT,
                             "The input size %lld, plus negative padding %lld and %lld resulted "
                             "in a negative output size, which is invalid. Check dimension %d "
                             "of your input.", (long long)xd[d], (long long)lo[d],
                             (long long)hi[d], d);
  }
  tpu_dtype_t t = tpu_arg_value_dtype(cx, 0);
  if (tpu_numel(out, rank) == 0) {
    tpu_lower_out(cx, 0, zeros(g, t, out, rank));
    return TPU_OK;
  }
  tpu_val_t x = tpu_lower_tensor(cx, 0);
  tpu_val_t v = tpu_lower_input(cx, 2, t);
  if (tpu_numel(xd, rank) == 0) {  // nothing left of self: all padding
    tpu_lower_out(cx, 0, tpu_ir_broadcast(g, v, out, rank, NULL));
    return TPU_OK;
  }
  tpu_lower_out(cx, 0, tpu_ir_pad(g, x, v, lo, hi, NULL));
  return TPU_OK;
}

// repeat(Tensor self, SymInt[] repeats)
tpu_status_t tpu_lower_repeat(tpu_lower_ctx_t* cx) {
  tpu_graph_t* g = cx->g;
  const int64_t* reps;
  int nr = tpu_arg_ints(cx, 1, &reps), rank = tpu_arg_rank(cx, 0);
  if (nr < rank)
    return TPU_LOWER_ERROR(TPU_CODE_INVALID_ARGUMENT,
                           "Number of dimensions of repeat dims can not be smaller than number "
                           "of dimensions of tensor");
  if (nr > TPU_MAX_RANK)
    return TPU_LOWER_ERROR(TPU_CODE_INVALID_ARGUMENT, "repeat: too many dimensions");
  int64_t d[TPU_MAX_RANK], out[TPU_MAX_RANK];
  for (int i = 0; i < nr; ++i) {
    int j = i - (nr - rank);
    d[i] = j >= 0 ? tpu_arg_sizes(cx, 0)[j] : 1;
    out[i] = d[i] * reps[i];
    if (reps[i] < 0) {
      char a[128];
      return TPU_LOWER_ERROR(TPU_CODE_INVALID_ARGUMENT,
                             "Trying to create tensor with negative dimension %lld: %s",
                             (long long)reps[i], tpu_shape_str(reps, nr, a, sizeof a));
    }
  }
  tpu_dtype_t t = tpu_arg_value_dtype(cx, 0);
  if (tpu_numel(out, nr) == 0) {
    tpu_lower_out(cx, 0, zeros(g, t, out, nr));
    return TPU_OK;
  }
  tpu_val_t x = tpu_ir_reshape(g, tpu_lower_tensor(cx, 0), d, nr);
  int64_t cur[TPU_MAX_RANK];
  memcpy(cur, d, sizeof cur);
  for (int i = 0; i < nr; ++i) {
    if (reps[i] == 1) continue;
    if (nr < TPU_MAX_RANK) {
      // [.., d_i, ..] -> [.., r_i, d_i, ..] -> [.., r_i * d_i, ..]
      int64_t big[TPU_MAX_RANK], bd[TPU_MAX_RANK];
      for (int j = 0, o = 0; j < nr; ++j) {
        if (j == i) big[o++] = reps[i];
        bd[j] = o;
        big[o++] = cur[j];
      }
      x = tpu_ir_broadcast(g, x, big, nr + 1, bd);
      cur[i] *= reps[i];
      x = tpu_ir_reshape(g, x, cur, nr);
    } else {
      tpu_val_t* parts = tpu_graph_alloc(g, sizeof *parts * (size_t)reps[i]);
      if (!parts) return TPU_LOWER_ERROR(TPU_CODE_RESOURCE_EXHAUSTED, "out of memory");
      for (int64_t k = 0; k < reps[i]; ++k) parts[k] = x;
      x = tpu_ir_concat(g, parts, (int)reps[i], i);
      cur[i] *= reps[i];
    }
  }
  tpu_lower_out(cx, 0, x);
  return TPU_OK;
}

// unfold_backward(Tensor grad_in, SymInt[] input_sizes, int dim, int size, int step):
// the gradient of unfold(dim, size, step): window i, element j of grad_in
// adds to position i * step + j along dim.
tpu_status_t tpu_lower_unfold_backward(tpu_lower_ctx_t* cx) {
  tpu_graph_t* g = cx->g;
  const int64_t* in;
  int rank = tpu_arg_ints(cx, 1, &in);
  int64_t size = tpu_arg_int(cx, 3, 1), step = tpu_arg_int(cx, 4, 1);
  int64_t d[TPU_MAX_RANK];
  int n = rank ? rank : 1;
  if (rank) memcpy(d, in, sizeof(int64_t) * (size_t)rank);
  else d[0] = 1;
  int64_t dim;
  TPU_RETURN_IF_ERROR(tpu_wrap_dim(tpu_arg_int(cx, 2, 0), rank, &dim));
  int gr = tpu_arg_rank(cx, 0);
  const int64_t* gd = tpu_arg_sizes(cx, 0);
  if (rank == 0 && gr == 1 && gd[0] == 1 && size == 1) {  // a 0-d input unfolds to [1]
    tpu_lower_out(cx, 0, tpu_ir_reshape(g, tpu_lower_tensor(cx, 0), NULL, 0));
    return TPU_OK;
  }
  if (gr != n + 1 || gd[n] != size || step < 1)
    return TPU_LOWER_ERROR(TPU_CODE_INVALID_ARGUMENT,
                           "unfold_backward: grad_in does not have unfold's result shape");
  int64_t windows = gd[dim];
  tpu_dtype_t t = tpu_arg_value_dtype(cx, 0), acc = tpu_opmath(t);
  tpu_val_t grad = tpu_ir_convert(g, tpu_lower_tensor(cx, 0), acc);
  if (tpu_numel(d, n) == 0 || windows * size == 0) {
    tpu_lower_out(cx, 0, zeros(g, t, in, rank));
    return TPU_OK;
  }
  // Move the window-element dim next to dim and merge the two.
  int64_t perm[TPU_MAX_RANK], td[TPU_MAX_RANK];
  for (int i = 0, o = 0; i < n; ++i) {
    perm[o++] = i;
    if (i == dim) perm[o++] = n;
  }
  for (int i = 0; i < n + 1; ++i) td[i] = gd[perm[i]];
  grad = tpu_ir_transpose(g, grad, perm);
  int64_t md[TPU_MAX_RANK];
  for (int i = 0, o = 0; i < n + 1; ++i) {
    if (i == dim + 1) continue;
    md[o++] = i == dim ? td[i] * td[i + 1] : td[i];
  }
  grad = tpu_ir_reshape(g, grad, md, n);
  int64_t m = windows * size;
  tpu_val_t pos = tpu_ir_iota(g, TPU_I64, &m, 1, 0);
  tpu_val_t win = tpu_ir_binary(g, TPU_IR_DIV, pos, splat_i64(g, size, &m, 1));
  tpu_val_t elem = tpu_ir_binary(g, TPU_IR_REM, pos, splat_i64(g, size, &m, 1));
  tpu_val_t idx = tpu_ir_binary(g, TPU_IR_ADD, tpu_ir_binary(g, TPU_IR_MUL, win,
                                                             splat_i64(g, step, &m, 1)), elem);
  tpu_val_t r = tpu_scatter_along(g, zeros(g, acc, d, n), n, (int)dim, idx, grad, TPU_BODY_ADD);
  tpu_lower_out(cx, 0, tpu_ir_reshape(g, tpu_ir_convert(g, r, t), in, rank));
  return TPU_OK;
}
