// Indexing and joining: cat, index_select and the index_* family, take /
// put, embedding backward; and the helpers of index.h. Gather / scatter
// along a dim and index_reduce (lower_scatter.c), advanced indexing, masks
// and shape ops have files of their own.
//
// XLA clamps out-of-range gather indices and drops out-of-range scatter
// updates where PyTorch raises, so every lowering that reads indices checks
// them with a device-side assertion (raised at the next synchronization, at
// the op in debug mode) before using them.
//
// Shapes are tracked here from the arguments' metadata (never read back from
// IR values, which are invalid once a builder has failed).
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "lower/index.h"

//===--- helpers ---===//

// A 0-d bool: true when any element of the bool value b is.
static tpu_val_t any_true(tpu_graph_t* g, tpu_val_t b, int rank) {
  return tpu_ir_reduce(g, b, tpu_ir_const_i(g, TPU_BOOL, 0, NULL, 0), tpu_all_dims, rank,
                       TPU_BODY_OR);
}

// Sum of a bool value's true elements as a 0-d i64.
tpu_val_t tpu_ix_count_true(tpu_graph_t* g, tpu_val_t b, int rank) {
  return tpu_ir_reduce(g, tpu_ir_convert(g, b, TPU_I64), tpu_ir_const_i(g, TPU_I64, 0, NULL, 0),
                       tpu_all_dims, rank, TPU_BODY_ADD);
}

// x != 0 as bool (x itself when bool).
tpu_val_t tpu_ix_nonzero_mask(tpu_graph_t* g, tpu_val_t x, tpu_dtype_t t, const int64_t* d, int n) {
  if (t == TPU_BOOL) return x;
  return tpu_ir_compare(g, TPU_CMP_NE, x, tpu_ir_const(g, t, 0, d, n));
}

// Index values (i32/i64, shape d) as i64, asserting every one lies in
// [-size, size) when negatives wrap, else in [0, size); negatives are
// wrapped. The message goes with `code` when an index is out of range.
tpu_val_t tpu_ix_checked_index(tpu_lower_ctx_t* cx, tpu_val_t idx, const int64_t* d, int n,
                               int64_t size, bool wrap, tpu_code_t code, const char* fmt, ...) {
  tpu_graph_t* g = cx->g;
  char msg[256];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  idx = tpu_ir_convert(g, idx, TPU_I64);
  tpu_val_t lo = tpu_ix_splat_i64(g, wrap ? -size : 0, d, n);
  tpu_val_t hi = tpu_ix_splat_i64(g, size, d, n);
  tpu_val_t bad = tpu_ir_binary(g, TPU_IR_OR, tpu_ir_compare(g, TPU_CMP_LT, idx, lo),
                                tpu_ir_compare(g, TPU_CMP_GE, idx, hi));
  tpu_val_t first = strstr(msg, "{value}") ? tpu_lower_first_where(g, bad, idx, d, n) : TPU_VAL_NONE;
  tpu_lower_assert_value(cx, any_true(g, bad, n), first, TPU_VAL_NONE, code, "%s", msg);
  if (wrap)
    idx = tpu_ir_select(g, tpu_ir_compare(g, TPU_CMP_LT, idx, tpu_ix_splat_i64(g, 0, d, n)),
                        tpu_ir_binary(g, TPU_IR_ADD, idx, hi), idx);
  return idx;
}

// Row-major strides of a contiguous shape.
void tpu_ix_strides_of(const int64_t* d, int n, int64_t* st) {
  int64_t s = 1;
  for (int i = n - 1; i >= 0; --i) {
    st[i] = s;
    s *= d[i];
  }
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
tpu_val_t tpu_ix_prefix_sum(tpu_graph_t* g, tpu_val_t x, int64_t n, tpu_dtype_t t) {
  enum { BLOCK = 128 };
  if (n <= BLOCK) return scan_last(g, x, &n, 1, t);
  int64_t rows = (n + BLOCK - 1) / BLOCK, len = rows * BLOCK, zero = 0, extra = len - n;
  x = tpu_ir_pad(g, x, tpu_ir_const(g, t, 0, NULL, 0), &zero, &extra, NULL);
  int64_t d[2] = {rows, BLOCK};
  tpu_val_t blocks = scan_last(g, tpu_ir_reshape(g, x, d, 2), d, 2, t);
  int64_t start[2] = {0, BLOCK - 1};
  tpu_val_t totals = tpu_ir_reshape(g, tpu_ir_slice(g, blocks, start, d, NULL), &rows, 1);
  tpu_val_t before = tpu_ir_binary(g, TPU_IR_SUB, tpu_ix_prefix_sum(g, totals, rows, t), totals);
  int64_t bd = 0;
  blocks = tpu_ir_binary(g, TPU_IR_ADD, blocks, tpu_ir_broadcast(g, before, d, 2, &bd));
  return tpu_ir_slice(g, tpu_ir_reshape(g, blocks, &len, 1), &zero, &n, NULL);
}

// Flat positions (i64, `size` entries) of the first `size` true elements of
// the 1-D bool m (n entries), in order; -1 past the last one.
tpu_val_t tpu_ix_compact_positions(tpu_graph_t* g, tpu_val_t m, int64_t n, int64_t size) {
  if (n == 0 || size == 0) return tpu_ix_splat_i64(g, -1, &size, 1);
  tpu_dtype_t ct = tpu_ix_count_dtype(n + size + 1);
  tpu_val_t rank = tpu_ix_prefix_sum(g, tpu_ir_convert(g, m, ct), n, ct);  // 1-based
  tpu_val_t slot = tpu_ir_binary(g, TPU_IR_SUB, rank, tpu_ir_const(g, ct, 1, &n, 1));
  // Elements that are false, or past `size`, go to a spare last slot.
  tpu_val_t trash = tpu_ir_const_i(g, ct, size, &n, 1);
  tpu_val_t keep = tpu_ir_binary(g, TPU_IR_AND, m, tpu_ir_compare(g, TPU_CMP_LT, slot, trash));
  slot = tpu_ir_select(g, keep, slot, trash);
  int64_t len = size + 1, start = 0;
  tpu_val_t buf = tpu_ix_splat_i64(g, -1, &len, 1);
  buf = tpu_scatter_flat(g, buf, slot, tpu_ir_iota(g, TPU_I64, &n, 1, 0), 1, TPU_BODY_REPLACE);
  return tpu_ir_slice(g, buf, &start, &size, NULL);
}

//===--- narrow_copy ---===//

// narrow_copy(Tensor self, int dim, SymInt start, SymInt length)
tpu_status_t tpu_lower_narrow_copy(tpu_lower_ctx_t* cx) {
  int rank = tpu_arg_rank(cx, 0);
  if (rank == 0) return tpu_invalid("narrow() cannot be applied to a 0-dim tensor.");
  int64_t dim;
  if (tpu_arg_int(cx, 1, 0) >= rank)  // CPU's own check, before wrapping
    return tpu_invalid("Expected dim < static_cast<int64_t>(self_sizes.size()) to be true, but "
                       "got false.  (Could this error message be improved?  If so, please "
                       "report an enhancement request to PyTorch.)");
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
  // out=: PyTorch checks the cast before the shapes (stack's message too).
  if (cx->num_out_dtypes && !tpu_dtype_can_cast(t, tpu_lower_out_dtype(cx, 0, t)))
    return TPU_LOWER_ERROR(TPU_CODE_TYPE,
                           "torch.cat(): input types can't be cast to the desired output type %s",
                           tpu_dtype_torch_name(tpu_lower_out_dtype(cx, 0, t)));
  if (!first) {
    int64_t zero = 0;
    tpu_lower_out(cx, 0, tpu_ix_zeros(g, t, &zero, 1));
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
    tpu_lower_out(cx, 0, tpu_ix_zeros(g, t, out, rank));
    return TPU_OK;
  }
  tpu_lower_out(cx, 0, tpu_ir_concat(g, parts, np, (int)dim));
  return TPU_OK;
}

//===--- index_select and the index_* family ---===//

// A 0-d or 1-d index argument as a 1-D i64 value of *m entries.
tpu_val_t tpu_ix_index_vector(tpu_lower_ctx_t* cx, int arg, int64_t* m) {
  *m = tpu_numel(tpu_arg_sizes(cx, arg), tpu_arg_rank(cx, arg));
  return tpu_ir_reshape(cx->g, tpu_lower_input(cx, arg, TPU_I64), m, 1);
}

// The shape that index ops treat a tensor as: 0-d counts as 1-d of size 1.
int tpu_ix_nonempty_shape(const tpu_lower_ctx_t* cx, int arg, int64_t* d) {
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
  if (!tpu_ix_is_index_dtype(tpu_arg_value_dtype(cx, 2)))
    return TPU_LOWER_ERROR(TPU_CODE_INVALID_ARGUMENT,
                           "index_select(): Expected dtype int32 or int64 for index");
  if (tpu_arg_rank(cx, 2) > 1)
    return TPU_LOWER_ERROR(TPU_CODE_OUT_OF_RANGE,
                           "index_select(): Index is supposed to be a vector");
  int64_t d[TPU_MAX_RANK], m;
  int r0 = tpu_arg_rank(cx, 0), n = tpu_ix_nonempty_shape(cx, 0, d);
  tpu_val_t idx = tpu_ix_index_vector(cx, 2, &m);
  if (r0 == 0 && m != 1)
    return TPU_LOWER_ERROR(TPU_CODE_INVALID_ARGUMENT,
                           "index_select(): Index to scalar can have only 1 value, got %lld "
                           "value(s)", (long long)m);
  int64_t size = d[dim];
  // CPU's shape check, before any index is read: a RuntimeError, where an
  // index past a non-empty dimension is an IndexError.
  if (r0 > 0 && size == 0 && m > 0)
    return TPU_LOWER_ERROR(TPU_CODE_INVALID_ARGUMENT,
                           "index_select(): self indexing axis dim should be positive");
  idx = tpu_ix_checked_index(cx, idx, &m, 1, size, false, TPU_CODE_OUT_OF_RANGE,
                             "index out of range in self");
  int64_t out[TPU_MAX_RANK];
  memcpy(out, d, sizeof(int64_t) * (size_t)n);
  out[dim] = m;
  tpu_dtype_t t = tpu_arg_value_dtype(cx, 0);
  tpu_val_t r;
  if (tpu_numel(out, n) == 0 || size == 0) {
    r = tpu_ix_zeros(g, t, out, n);
  } else {
    tpu_val_t x = tpu_ir_reshape(g, tpu_lower_tensor(cx, 0), d, n);
    r = tpu_gather_along(g, x, d, n, (int)dim, idx);
  }
  tpu_lower_out(cx, 0, tpu_ir_reshape(g, r, r0 ? out : NULL, r0));
  return TPU_OK;
}

// The sizes of a shape, less the one along `dim` when `drop`.
static int sizes_but(const int64_t* d, int n, int64_t dim, bool drop, int64_t* out) {
  int k = 0;
  for (int i = 0; i < n; ++i)
    if (!drop || i != dim) out[k++] = d[i];
  return k;
}

static bool same_sizes(const int64_t* a, int na, const int64_t* b, int nb) {
  return na == nb && (na == 0 || !memcmp(a, b, sizeof *a * (size_t)na));
}

tpu_status_t tpu_ix_check_index_source(tpu_lower_ctx_t* cx, const char* op, int64_t dim,
                                       int64_t m) {
  int xr = tpu_arg_rank(cx, 0), sr = tpu_arg_rank(cx, 3);
  const int64_t *xd = tpu_arg_sizes(cx, 0), *sd = tpu_arg_sizes(cx, 3);
  if (tpu_arg_rank(cx, 2) > 1)
    return TPU_LOWER_ERROR(TPU_CODE_OUT_OF_RANGE, "%s(): Index is supposed to be a vector", op);
  tpu_dtype_t xt = tpu_arg_value_dtype(cx, 0), st = tpu_arg_value_dtype(cx, 3);
  if (xt != st)
    return TPU_LOWER_ERROR(TPU_CODE_INVALID_ARGUMENT,
                           "%s(): self (%s) and source (%s) must have the same scalar type", op,
                           tpu_dtype_torch_name(xt), tpu_dtype_torch_name(st));
  int64_t along = sr == 0 ? 1 : dim < sr ? sd[dim] : 0;
  if (m != along && sr == 0)  // (CPU's message asks a 0-d source for its size)
    return TPU_LOWER_ERROR(TPU_CODE_OUT_OF_RANGE,
                           "Dimension specified as %lld but tensor has no dimensions",
                           (long long)dim);
  if (m != along)
    return TPU_LOWER_ERROR(TPU_CODE_INVALID_ARGUMENT, "%s(): Number of indices (%lld) should be "
                           "equal to source.size(dim): (%lld), for dim: %lld", op, (long long)m,
                           (long long)along, (long long)dim);
  int64_t xs[TPU_MAX_RANK], ss[TPU_MAX_RANK];
  bool whole = xr == 0 || sr == 0;  // (then whole shapes are compared)
  int xn = sizes_but(xd, xr, dim, !whole, xs), sn = sizes_but(sd, sr, dim, !whole, ss);
  if (!same_sizes(xs, xn, ss, sn)) {
    char a[128], b[128];
    return TPU_LOWER_ERROR(TPU_CODE_INVALID_ARGUMENT,
                           "source tensor shape must match self tensor shape, excluding the "
                           "specified dimension. Got self.shape = %s source.shape = %s",
                           tpu_shape_str(xd, xr, a, sizeof a), tpu_shape_str(sd, sr, b, sizeof b));
  }
  return TPU_OK;
}

// index_copy's checks of index and source: its own, in CPU's order and
// with its messages.
static tpu_status_t check_index_copy_source(tpu_lower_ctx_t* cx, int64_t dim, int64_t m) {
  int xr = tpu_arg_rank(cx, 0), sr = tpu_arg_rank(cx, 3);
  const int64_t *xd = tpu_arg_sizes(cx, 0), *sd = tpu_arg_sizes(cx, 3);
  if (tpu_arg_rank(cx, 2) > 1)
    return TPU_LOWER_ERROR(TPU_CODE_OUT_OF_RANGE,
                           "index_copy_(): Index is supposed to be a vector");
  if (sr == 0 && m != 1)
    return TPU_LOWER_ERROR(TPU_CODE_OUT_OF_RANGE, "index_copy_(): When source is scalar, index "
                           "should have one element (got %lld)", (long long)m);
  if (sr != xr && sr != 0 && xr != 0)
    return TPU_LOWER_ERROR(TPU_CODE_OUT_OF_RANGE, "index_copy_(): When source and destination are "
                           "not scalars, their dimensionality must match. Source dimensionality "
                           "(%d), destination dimensionality (%d)", sr, xr);
  tpu_dtype_t xt = tpu_arg_value_dtype(cx, 0), st = tpu_arg_value_dtype(cx, 3);
  if (xt != st)
    return TPU_LOWER_ERROR(TPU_CODE_INVALID_ARGUMENT, "index_copy_(): self and source expected to "
                           "have the same dtype, but got (self) %s and (source) %s",
                           tpu_dtype_torch_name(xt), tpu_dtype_torch_name(st));
  int64_t xs[TPU_MAX_RANK], ss[TPU_MAX_RANK];
  int xn = sizes_but(xd, xr, dim, true, xs), sn = sizes_but(sd, sr, dim, true, ss);
  if (!same_sizes(xs, xn, ss, sn)) {
    char a[128], b[128];
    tpu_dims_str(xs, xn, " ", a, sizeof a);
    tpu_dims_str(ss, sn, " ", b, sizeof b);
    return TPU_LOWER_ERROR(TPU_CODE_INVALID_ARGUMENT,
                           "index_copy_(): Source/destination tensor must have same slice shapes. "
                           "Destination slice shape: %s at dimension %lld and source slice shape: "
                           "%s at dimension 0.", a, (long long)dim, b);
  }
  if (sr != 0 && m != sd[dim])
    return TPU_LOWER_ERROR(TPU_CODE_OUT_OF_RANGE, "index_copy_(): Number of indices (%lld) should "
                           "be equal to source.size(dim) (%lld)", (long long)m, (long long)sd[dim]);
  return TPU_OK;
}

// index_add(Tensor self, int dim, Tensor index, Tensor source, *, Scalar alpha=1)
tpu_status_t tpu_lower_index_add(tpu_lower_ctx_t* cx) {
  tpu_graph_t* g = cx->g;
  int64_t dim;
  TPU_RETURN_IF_ERROR(tpu_wrap_dim(tpu_arg_int(cx, 1, 0), tpu_arg_rank(cx, 0), &dim));
  if (!tpu_ix_is_index_dtype(tpu_arg_value_dtype(cx, 2)))
    return TPU_LOWER_ERROR(TPU_CODE_INVALID_ARGUMENT,
                           "index_add_(): Expected dtype int32/int64 for index but got: %s",
                           tpu_dtype_torch_name(tpu_arg_value_dtype(cx, 2)));
  int64_t m = tpu_numel(tpu_arg_sizes(cx, 2), tpu_arg_rank(cx, 2));
  TPU_RETURN_IF_ERROR(tpu_ix_check_index_source(cx, "index_add_", dim, m));
  int64_t d[TPU_MAX_RANK];
  int r0 = tpu_arg_rank(cx, 0), n = tpu_ix_nonempty_shape(cx, 0, d);
  tpu_dtype_t t = tpu_arg_value_dtype(cx, 0);
  tpu_val_t idx = tpu_ix_index_vector(cx, 2, &m);
  // Negative indices are out of range too. PyTorch's kernel for a 1-D self
  // raises IndexError without the index, the other RuntimeError with it.
  if (r0 <= 1)
    idx = tpu_ix_checked_index(cx, idx, &m, 1, d[dim], false, TPU_CODE_OUT_OF_RANGE,
                               "index out of range in self");
  else
    idx = tpu_ix_checked_index(cx, idx, &m, 1, d[dim], false, TPU_CODE_INVALID_ARGUMENT,
                               "index {value} is out of bounds for dimension %lld with size %lld",
                               (long long)dim, (long long)d[dim]);
  tpu_val_t x = tpu_lower_tensor(cx, 0);
  if (m == 0 || tpu_numel(d, n) == 0) {
    tpu_lower_out(cx, 0, x);
    return TPU_OK;
  }
  int64_t sd[TPU_MAX_RANK];
  tpu_ix_nonempty_shape(cx, 3, sd);
  tpu_val_t src = tpu_ir_reshape(g, tpu_lower_tensor(cx, 3), sd, n);
  const tpu_arg_t* alpha = tpu_arg(cx, 4);
  // (complex: always, as CPU, whose 1 + 0j makes an infinite part's partner NaN)
  if (alpha->kind == TPU_ARG_SCALAR &&
      (tpu_dtype_is_complex(t) || !tpu_arg_number_is(cx, 4, 1, 1))) {
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
  TPU_RETURN_IF_ERROR(check_index_copy_source(cx, dim, m));
  int64_t d[TPU_MAX_RANK];
  int r0 = tpu_arg_rank(cx, 0), n = tpu_ix_nonempty_shape(cx, 0, d);
  tpu_val_t idx = tpu_ix_index_vector(cx, 2, &m);
  idx = tpu_ix_checked_index(
      cx, idx, &m, 1, d[dim], false, TPU_CODE_OUT_OF_RANGE,
      "index_copy_(): index {value} is out of bounds for dimension %lld with size %lld", (long long)dim,
      (long long)d[dim]);
  tpu_val_t x = tpu_lower_tensor(cx, 0);
  if (m == 0 || tpu_numel(d, n) == 0) {
    tpu_lower_out(cx, 0, x);
    return TPU_OK;
  }
  int64_t sd[TPU_MAX_RANK];
  tpu_ix_nonempty_shape(cx, 3, sd);
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
  if (!tpu_arg_is_tensor(cx, 3) && tpu_dtype_is_complex(tpu_arg_value_dtype(cx, 3)) &&
      !tpu_dtype_is_complex(tpu_arg_value_dtype(cx, 0)))
    return TPU_LOWER_ERROR(TPU_CODE_INVALID_ARGUMENT,
                           "index_fill_(): Converting complex Scalar to non-complex type is not "
                           "supported");
  int64_t d[TPU_MAX_RANK], m;
  int r0 = tpu_arg_rank(cx, 0), n = tpu_ix_nonempty_shape(cx, 0, d);
  tpu_dtype_t t = tpu_arg_value_dtype(cx, 0);
  tpu_val_t idx = tpu_ix_index_vector(cx, 2, &m);
  int64_t size = d[dim];
  idx = tpu_ix_checked_index(cx, idx, &m, 1, size, true, TPU_CODE_OUT_OF_RANGE,
                             "index {value} is out of bounds for dimension %lld with size %lld",
                             (long long)dim, (long long)size);
  tpu_val_t x = tpu_lower_tensor(cx, 0);
  if (m == 0 || tpu_numel(d, n) == 0) {
    tpu_lower_out(cx, 0, x);
    return TPU_OK;
  }
  // Which positions along dim are hit, broadcast over the other dims.
  tpu_val_t hit = tpu_ir_const_i(g, TPU_BOOL, 0, &size, 1);
  hit = tpu_scatter_flat(g, hit, idx, tpu_ir_const_i(g, TPU_BOOL, 1, &m, 1), 1, TPU_BODY_REPLACE);
  int64_t bd = dim;
  hit = tpu_ir_broadcast(g, hit, d, n, &bd);
  tpu_val_t v = tpu_ir_broadcast(g, tpu_lower_fill_value(cx, 3, t, true), d, n, NULL);
  x = tpu_ir_select(g, hit, v, tpu_ir_reshape(g, x, d, n));
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
  tpu_val_t idx =
      tpu_ix_checked_index(cx, tpu_lower_tensor(cx, 1), id, ri, len, true, TPU_CODE_OUT_OF_RANGE,
                           "out of range: tried to access index {value} on a tensor of %lld "
                           "elements.", (long long)len);
  tpu_dtype_t t = tpu_arg_value_dtype(cx, 0);
  if (tpu_numel(id, ri) == 0 || len == 0) {
    tpu_lower_out(cx, 0, tpu_ix_zeros(g, t, id, ri));
    return TPU_OK;
  }
  tpu_val_t x = tpu_ix_flat(g, tpu_lower_tensor(cx, 0), tpu_arg_sizes(cx, 0), r0);
  tpu_lower_out(cx, 0, tpu_gather_flat(g, x, idx, ri));
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
  idx =
      tpu_ix_checked_index(cx, idx, &m, 1, len, true, TPU_CODE_OUT_OF_RANGE,
                           "out of range: tried to access index {value} on a tensor of %lld "
                           "elements.", (long long)len);
  tpu_val_t x = tpu_lower_tensor(cx, 0);
  if (m == 0 || len == 0) {
    tpu_lower_out(cx, 0, x);
    return TPU_OK;
  }
  tpu_val_t src = tpu_ir_reshape(g, tpu_lower_tensor(cx, 2), &m, 1);
  bool acc = tpu_arg_bool(cx, 3, false);
  x = tpu_scatter_flat(g, tpu_ix_flat(g, x, xd, r0), idx, src, 1,
                       acc ? TPU_BODY_ADD : TPU_BODY_REPLACE);
  tpu_lower_out(cx, 0, tpu_ir_reshape(g, x, xd, r0));
  return TPU_OK;
}

// embedding_dense_backward(Tensor grad_output, Tensor indices, SymInt num_weights,
//                          SymInt padding_idx, bool scale_grad_by_freq)
tpu_status_t tpu_lower_embedding_dense_backward(tpu_lower_ctx_t* cx) {
  tpu_graph_t* g = cx->g;
  if (!tpu_ix_is_index_dtype(tpu_arg_value_dtype(cx, 1)))
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
  idx = tpu_ix_checked_index(cx, idx, &m, 1, nw, false, TPU_CODE_OUT_OF_RANGE,
                             "index out of range in self");
  if (m == 0 || nw == 0 || width == 0) {
    tpu_lower_out(cx, 0, tpu_ix_zeros(g, t, out, 2));
    return TPU_OK;
  }
  int64_t rows[2] = {m, width};
  tpu_val_t grad = tpu_ir_convert(g, tpu_ir_reshape(g, tpu_lower_tensor(cx, 0), rows, 2), acc);
  int64_t zero_bd = 0;
  if (pad >= 0) {
    tpu_val_t keep = tpu_ir_compare(g, TPU_CMP_NE, idx, tpu_ix_splat_i64(g, pad, &m, 1));
    grad = tpu_ir_select(g, tpu_ir_broadcast(g, keep, rows, 2, &zero_bd), grad,
                         tpu_ix_zeros(g, acc, rows, 2));
  }
  if (tpu_arg_bool(cx, 4, false)) {
    // Each row's gradient is divided by how often its index occurs.
    tpu_val_t counts = tpu_scatter_flat(g, tpu_ix_zeros(g, acc, &nw, 1), idx,
                                        tpu_ir_const(g, acc, 1, &m, 1), 1, TPU_BODY_ADD);
    tpu_val_t freq = tpu_gather_flat(g, counts, idx, 1);
    grad = tpu_ir_binary(g, TPU_IR_DIV, grad, tpu_ir_broadcast(g, freq, rows, 2, &zero_bd));
  }
  tpu_val_t w = tpu_scatter_along(g, tpu_ix_zeros(g, acc, out, 2), 2, 0, idx, grad, TPU_BODY_ADD);
  tpu_lower_out(cx, 0, tpu_ir_convert(g, w, t));
  return TPU_OK;
}
