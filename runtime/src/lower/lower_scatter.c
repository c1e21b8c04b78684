// Gather and scatter along a dimension and their reductions: gather,
// scatter, scatter_add, scatter_reduce, index_reduce. Indices are checked on
// the device as everywhere in lower_index.c.
#include <math.h>
#include <string.h>

#include "lower/index.h"

//===--- gather and scatter along a dim ---===//

// Flat offsets, into a contiguous array of shape xd (rank n), of the elements
// that an index of shape id (rank n) addresses along dim: position i of the
// index names element (i_0, ..., index[i], ..., i_{n-1}).
static tpu_val_t along_offsets(tpu_graph_t* g, tpu_val_t idx, const int64_t* id,
                               const int64_t* xd, int n, int dim) {
  int64_t st[TPU_MAX_RANK];
  tpu_ix_strides_of(xd, n, st);
  tpu_val_t off = tpu_ir_binary(g, TPU_IR_MUL, idx, tpu_ix_splat_i64(g, st[dim], id, n));
  for (int i = 0; i < n; ++i) {
    if (i == dim || id[i] == 1) continue;
    tpu_val_t io = tpu_ir_iota(g, TPU_I64, id, n, i);
    if (st[i] != 1) io = tpu_ir_binary(g, TPU_IR_MUL, io, tpu_ix_splat_i64(g, st[i], id, n));
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
    tpu_lower_out(
        cx, 0,
        tpu_ix_zeros(g, tpu_arg_value_dtype(cx, 0), tpu_arg_sizes(cx, 2), tpu_arg_rank(cx, 2)));
    return TPU_OK;
  }
  if (!tpu_ix_is_index_dtype(tpu_arg_value_dtype(cx, 2)))
    return TPU_LOWER_ERROR(TPU_CODE_INVALID_ARGUMENT,
                           "gather(): Expected dtype int32/int64 for index");
  int64_t xd[TPU_MAX_RANK], id[TPU_MAX_RANK];
  int n = tpu_ix_nonempty_shape(cx, 0, xd), ni = tpu_ix_nonempty_shape(cx, 2, id);
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
  idx = tpu_ix_checked_index(cx, idx, id, n, xd[dim], false, TPU_CODE_INVALID_ARGUMENT,
                             "index {value} is out of bounds for dimension %lld with size %lld",
                             (long long)dim, (long long)xd[dim]);
  if (tpu_numel(id, n) == 0 || tpu_numel(xd, n) == 0) {
    tpu_lower_out(cx, 0, tpu_ix_zeros(g, t, out, ri));
    return TPU_OK;
  }
  tpu_val_t off = along_offsets(g, idx, id, xd, n, (int)dim);
  tpu_val_t x = tpu_ix_flat(g, tpu_lower_tensor(cx, 0), xd, n);
  tpu_lower_out(cx, 0, tpu_ir_reshape(g, tpu_gather_flat(g, x, off, n), out, ri));
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
  int64_t icount = tpu_numel(tpu_arg_sizes(cx, 2), tpu_arg_rank(cx, 2));
  // Like CPU, an empty index of any dtype scatters nothing.
  if (icount != 0 && !tpu_ix_is_index_dtype(tpu_arg_value_dtype(cx, 2)))
    return TPU_LOWER_ERROR(TPU_CODE_INVALID_ARGUMENT, "%s(): Expected dtype int32/int64 for index",
                           op);
  tpu_dtype_t t = tpu_arg_value_dtype(cx, 0);
  bool src_tensor = tpu_arg_is_tensor(cx, upd);
  if (src_tensor && tpu_arg_value_dtype(cx, upd) != t)
    return TPU_LOWER_ERROR(TPU_CODE_INVALID_ARGUMENT,
                           "%s(): Expected self.dtype to be equal to src.dtype", op);
  int64_t xd[TPU_MAX_RANK], id[TPU_MAX_RANK], sd[TPU_MAX_RANK];
  int n = tpu_ix_nonempty_shape(cx, 0, xd), ni = tpu_ix_nonempty_shape(cx, 2, id);
  *off_rank = n;
  *empty = icount == 0;
  if (*empty) return TPU_OK;  // PyTorch checks nothing more for an empty index
  if (ni != n)
    return TPU_LOWER_ERROR(TPU_CODE_INVALID_ARGUMENT,
                           "Index tensor must have the same number of dimensions as self "
                           "tensor");
  if (src_tensor) {
    int ns = tpu_ix_nonempty_shape(cx, upd, sd);
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
  idx = tpu_ix_checked_index(cx, idx, id, n, xd[*dim], false, TPU_CODE_INVALID_ARGUMENT,
                             "index {value} is out of bounds for dimension %lld with size %lld",
                             (long long)*dim, (long long)xd[*dim]);
  *off = along_offsets(g, idx, id, xd, n, (int)*dim);
  if (src_tensor) {
    int64_t zero[TPU_MAX_RANK] = {0};
    tpu_val_t s = tpu_ir_reshape(g, tpu_lower_tensor(cx, upd), sd, n);
    *updates = tpu_ir_slice(g, s, zero, id, NULL);
  } else {
    // A number that does not fit self's dtype fails as CPU's Scalar::to<T>().
    *updates = tpu_ir_broadcast(g, tpu_lower_fill_value(cx, upd, t, false), id, n, NULL);
  }
  return TPU_OK;
}

// self scattered with `body` at the prepared offsets, shaped as self.
static tpu_val_t scatter_into_self(tpu_lower_ctx_t* cx, tpu_val_t off, tpu_val_t upd, int n,
                                   tpu_body_t body) {
  tpu_graph_t* g = cx->g;
  int r0 = tpu_arg_rank(cx, 0);
  const int64_t* xd = tpu_arg_sizes(cx, 0);
  tpu_val_t x = tpu_ix_flat(g, tpu_lower_tensor(cx, 0), xd, r0);
  x = tpu_scatter_flat(g, x, off, upd, n, body);
  return tpu_ir_reshape(g, x, xd, r0);
}

// scatter's and scatter_add's common part: self scattered with `body`.
static tpu_status_t scatter_along(tpu_lower_ctx_t* cx, const char* name, tpu_body_t body) {
  int64_t dim;
  tpu_val_t off = TPU_VAL_NONE, upd = TPU_VAL_NONE;
  int n;
  bool empty;
  TPU_RETURN_IF_ERROR(scatter_prepare(cx, name, 3, &dim, &off, &upd, &n, &empty));
  if (empty || tpu_numel(tpu_arg_sizes(cx, 0), tpu_arg_rank(cx, 0)) == 0) {
    tpu_lower_out(cx, 0, tpu_lower_tensor(cx, 0));
    return TPU_OK;
  }
  tpu_lower_out(cx, 0, scatter_into_self(cx, off, upd, n, body));
  return TPU_OK;
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
  return scatter_along(cx, "scatter", body);
}

// scatter_add(Tensor self, int dim, Tensor index, Tensor src)
tpu_status_t tpu_lower_scatter_add(tpu_lower_ctx_t* cx) {
  return scatter_along(cx, "scatter_add", TPU_BODY_ADD);
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

// XLA's CPU backend drops NaNs in a scatter's max and min, as in reductions
// (lower_reduce.c): the callers set the positions that a NaN was scattered
// into to NaN after, as PyTorch's amax and amin give.
static bool drops_nans(tpu_graph_t* g, tpu_val_t x, tpu_body_t body) {
  return (body == TPU_BODY_MAX || body == TPU_BODY_MIN) && tpu_dtype_is_float(tpu_ir_dtype(g, x));
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
  tpu_ix_nonempty_shape(cx, 2, id);
  tpu_val_t x = tpu_ix_flat(g, tpu_lower_tensor(cx, 0), xd, r0);
  if (!include_self) {
    // Positions that receive an update start from the identity.
    tpu_val_t hit = tpu_ir_const_i(g, TPU_BOOL, 0, &len, 1);
    hit = tpu_scatter_flat(g, hit, off, tpu_ir_const_i(g, TPU_BOOL, 1, id, n), n, TPU_BODY_REPLACE);
    x = tpu_ir_select(g, hit, reduce_identity(g, body, t, &len, 1), x);
  }
  if (drops_nans(g, x, body)) {
    tpu_val_t nan_hit = tpu_scatter_flat(g, tpu_ir_const_i(g, TPU_BOOL, 0, &len, 1), off,
                                         tpu_ir_compare(g, TPU_CMP_NE, upd, upd), n, TPU_BODY_OR);
    x = tpu_ir_select(g, nan_hit, tpu_lower_const_like(cx, x, NAN),
                      tpu_scatter_flat(g, x, off, upd, n, body));
  } else {
    x = tpu_scatter_flat(g, x, off, upd, n, body);
  }
  if (mean) {
    // PyTorch counts in self's dtype, with self counted once when included,
    // and divides (floor division for integers) where the count is not 0.
    tpu_val_t count = tpu_ir_const(g, t, include_self ? 1 : 0, &len, 1);
    count = tpu_scatter_flat(g, count, off, tpu_ir_const(g, t, 1, id, n), n, TPU_BODY_ADD);
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
  if (!tpu_ix_is_index_dtype(tpu_arg_value_dtype(cx, 2)))
    return tpu_invalid("index_reduce_(): Expected dtype int32/int64 for index but got: %s",
                       tpu_dtype_torch_name(tpu_arg_value_dtype(cx, 2)));
  int64_t m = tpu_numel(tpu_arg_sizes(cx, 2), tpu_arg_rank(cx, 2));
  TPU_RETURN_IF_ERROR(tpu_ix_check_index_source(cx, "index_reduce_", dim, m));
  int64_t d[TPU_MAX_RANK], sd[TPU_MAX_RANK];
  int r0 = tpu_arg_rank(cx, 0), n = tpu_ix_nonempty_shape(cx, 0, d);
  tpu_ix_nonempty_shape(cx, 3, sd);
  tpu_dtype_t t = tpu_arg_value_dtype(cx, 0);
  tpu_val_t idx = tpu_ix_checked_index(cx, tpu_ix_index_vector(cx, 2, &m), &m, 1, d[dim], false,
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
  if (drops_nans(g, x, body)) {
    tpu_val_t nan_hit = tpu_scatter_along(g, tpu_ir_const_i(g, TPU_BOOL, 0, d, n), n, (int)dim,
                                          idx, tpu_ir_compare(g, TPU_CMP_NE, src, src),
                                          TPU_BODY_OR);
    x = tpu_ir_select(g, nan_hit, tpu_lower_const_like(cx, x, NAN),
                      tpu_scatter_along(g, x, n, (int)dim, idx, src, body));
  } else {
    x = tpu_scatter_along(g, x, n, (int)dim, idx, src, body);
  }
  if (mean) {
    tpu_val_t count = tpu_scatter_along(g, tpu_ir_const(g, t, include_self ? 1 : 0, d, n), n,
                                  (int)dim, idx, tpu_ir_const(g, t, 1, sd, n), TPU_BODY_ADD);
    x = divide_mean(g, x, count, t);
  }
  tpu_lower_out(cx, 0, tpu_ir_reshape(g, x, r0 ? d : NULL, r0));
  return TPU_OK;
}
