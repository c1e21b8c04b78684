// Reductions and softmax (scans: lower_scan.c). PyTorch accumulates
// half-precision inputs in float and rounds once; integer and bool sums and
// products are int64.
// Errors (empty reductions, bad dims, dtypes) use PyTorch's wording.
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "lower/lower.h"

//===--- helpers ---===//

// The dims to reduce (sorted, distinct, wrapped) from an optional int list.
// An absent list means all dims; an empty one means all dims too, unless
// `empty_is_none` (any/all.dims reduce nothing then).
static tpu_status_t reduce_dims_ex(tpu_lower_ctx_t* cx, int arg, int rank,
                                   bool empty_is_none, int64_t* dims, int* n) {
  const int64_t* list;
  int count = tpu_arg_ints(cx, arg, &list);
  bool seen[TPU_MAX_RANK] = {0};
  *n = 0;
  if (count == 0) {
    if (empty_is_none && tpu_arg_present(cx, arg)) return TPU_OK;
    for (int i = 0; i < rank; ++i) dims[(*n)++] = i;
    return TPU_OK;
  }
  for (int i = 0; i < count; ++i) {
    int64_t d;
    TPU_RETURN_IF_ERROR(tpu_wrap_dim(list[i], rank, &d));
    if (rank == 0) continue;
    if (seen[d])
      return tpu_status_make(TPU_CODE_INVALID_ARGUMENT,
                             "dim %lld appears multiple times in the list of dims",
                             (long long)d);
    seen[d] = true;
  }
  for (int i = 0; i < rank; ++i)
    if (seen[i]) dims[(*n)++] = i;
  return TPU_OK;
}

static tpu_status_t reduce_dims(tpu_lower_ctx_t* cx, int arg, int rank,
                                int64_t* dims, int* n) {
  return reduce_dims_ex(cx, arg, rank, false, dims, n);
}

// Reshapes a reduced value back to rank with size-1 dims (keepdim=True).
static tpu_val_t keep_dims(tpu_lower_ctx_t* cx, tpu_val_t v, const int64_t* in_dims,
                           int rank, const int64_t* dims, int n) {
  int64_t shape[TPU_MAX_RANK];
  for (int i = 0; i < rank; ++i) shape[i] = in_dims[i];
  for (int i = 0; i < n; ++i) shape[dims[i]] = 1;
  return tpu_ir_reshape(cx->g, v, shape, rank);
}

// A reduced value broadcast back over the reduced dims of `like`'s shape.
static tpu_val_t unreduce(tpu_lower_ctx_t* cx, tpu_val_t v, tpu_val_t like,
                          const int64_t* dims, int n) {
  const tpu_type_t* t = tpu_ir_type(cx->g, like);
  tpu_type_t shape = *t;
  bool reduced[TPU_MAX_RANK] = {0};
  for (int i = 0; i < n; ++i) reduced[dims[i]] = true;
  int64_t bdims[TPU_MAX_RANK];
  int k = 0;
  for (int i = 0; i < shape.rank; ++i)
    if (!reduced[i]) bdims[k++] = i;
  return tpu_ir_broadcast(cx->g, v, shape.dims, shape.rank, bdims);
}

tpu_val_t tpu_lower_extreme(tpu_graph_t* g, tpu_dtype_t t, bool high) {
  int bits = (int)tpu_dtype_size(t) * 8;
  switch (tpu_dtype_kind(t)) {
    case TPU_KIND_BOOL: return tpu_ir_const_i(g, t, high, NULL, 0);
    case TPU_KIND_UINT:
      return tpu_ir_const_i(g, t, high ? (int64_t)(UINT64_MAX >> (64 - bits)) : 0, NULL, 0);
    case TPU_KIND_INT:
      return tpu_ir_const_i(g, t, high ? (int64_t)(UINT64_MAX >> (65 - bits))
                                       : -(int64_t)(UINT64_MAX >> (65 - bits)) - 1,
                            NULL, 0);
    default: return tpu_ir_const(g, t, high ? INFINITY : -INFINITY, NULL, 0);
  }
}

// The init value of a reduction body for dtype t.
static tpu_val_t body_init(tpu_graph_t* g, tpu_body_t body, tpu_dtype_t t) {
  switch (body) {
    case TPU_BODY_MUL: return tpu_ir_const(g, t, 1, NULL, 0);
    case TPU_BODY_MAX: return tpu_lower_extreme(g, t, false);
    case TPU_BODY_MIN: return tpu_lower_extreme(g, t, true);
    case TPU_BODY_AND: return tpu_ir_const_i(g, t, 1, NULL, 0);
    default: return tpu_ir_const(g, t, 0, NULL, 0);
  }
}

static tpu_val_t reduce(tpu_lower_ctx_t* cx, tpu_val_t x, const int64_t* dims, int n,
                        tpu_body_t body) {
  if (!tpu_graph_ok(cx->g)) return TPU_VAL_NONE;
  return tpu_ir_reduce(cx->g, x, body_init(cx->g, body, tpu_ir_dtype(cx->g, x)), dims, n,
                       body);
}

// max / min over `dims` with NaN propagation. XLA's CPU backend drops NaNs
// in a reduce with a maximum/minimum body (elementwise maximum keeps them),
// so a NaN in the reduced elements is applied afterwards.
static tpu_val_t reduce_extreme(tpu_lower_ctx_t* cx, tpu_val_t x, const int64_t* dims, int n,
                                bool is_max) {
  tpu_val_t r = reduce(cx, x, dims, n, is_max ? TPU_BODY_MAX : TPU_BODY_MIN);
  if (!tpu_graph_ok(cx->g) || !tpu_dtype_is_float(tpu_ir_dtype(cx->g, x)) || n == 0) return r;
  tpu_graph_t* g = cx->g;
  tpu_val_t has_nan = reduce(cx, tpu_ir_compare(g, TPU_CMP_NE, x, x), dims, n, TPU_BODY_OR);
  return tpu_ir_select(g, has_nan, tpu_lower_const_like(cx, r, NAN), r);
}

static int64_t reduced_count(const int64_t* sizes, const int64_t* dims, int n) {
  int64_t c = 1;
  for (int i = 0; i < n; ++i) c *= sizes[dims[i]];
  return c;
}

// The real dtype of a complex one (others unchanged).
static tpu_dtype_t real_of(tpu_dtype_t t) {
  return t == TPU_C64 ? TPU_F32 : t == TPU_C128 ? TPU_F64 : t;
}

static bool is_float_or_complex(tpu_dtype_t t) {
  return tpu_dtype_is_float(t) || tpu_dtype_is_complex(t);
}

// |x| as a real value (abs of a complex value by its parts).
static tpu_val_t magnitude(tpu_graph_t* g, tpu_val_t x) {
  if (!tpu_graph_ok(g)) return TPU_VAL_NONE;
  if (!tpu_dtype_is_complex(tpu_ir_dtype(g, x))) return tpu_ir_unary(g, TPU_IR_ABS, x);
  tpu_val_t re = tpu_ir_unary(g, TPU_IR_REAL, x), im = tpu_ir_unary(g, TPU_IR_IMAG, x);
  return tpu_ir_unary(g, TPU_IR_SQRT, tpu_ir_binary(g, TPU_IR_ADD, tpu_ir_binary(g, TPU_IR_MUL, re, re),
                                                    tpu_ir_binary(g, TPU_IR_MUL, im, im)));
}

// |x|^2 as a real value.
static tpu_val_t magnitude_sq(tpu_graph_t* g, tpu_val_t x) {
  if (!tpu_graph_ok(g)) return TPU_VAL_NONE;
  if (!tpu_dtype_is_complex(tpu_ir_dtype(g, x))) return tpu_ir_binary(g, TPU_IR_MUL, x, x);
  tpu_val_t re = tpu_ir_unary(g, TPU_IR_REAL, x), im = tpu_ir_unary(g, TPU_IR_IMAG, x);
  return tpu_ir_binary(g, TPU_IR_ADD, tpu_ir_binary(g, TPU_IR_MUL, re, re),
                       tpu_ir_binary(g, TPU_IR_MUL, im, im));
}

//===--- sum, nansum, prod, mean ---===//

enum { XLA_TREE_WINDOW = 32 };  // XLA's CPU tree_reduction_rewriter window

// A sum or product of `x`, an integer value converted up to int64 (from
// int8, say). XLA's CPU backend rewrites a reduction over a dim longer than
// its window into a reduce-window, which takes no producer into its kernel,
// so the int64 copy of the whole input was materialized as scratch memory
// (8 times an int8 tensor, where CPU PyTorch accumulates in place). Each
// long reduced dim is split into [size / window, window] (padded with the
// body's identity: integer sums and products come out the same in any
// order) and the windows are reduced first, a reduction that XLA leaves
// alone and fuses the conversion into; the rest, a window's share of the
// elements, is reduced as usual, after a barrier (an int8 sum's scratch: a quarter of its
// input instead of 8 times it).
static tpu_val_t reduce_widened(tpu_lower_ctx_t* cx, tpu_val_t x, const int64_t* dims, int n,
                                tpu_body_t body) {
  tpu_graph_t* g = cx->g;
  const tpu_type_t* t = tpu_graph_ok(g) ? tpu_ir_type(g, x) : NULL;
  if (!t) return reduce(cx, x, dims, n, body);
  tpu_type_t in = *t;
  if (n == in.rank && in.rank > 1) {  // all of it: as one dim
    int64_t numel = tpu_type_numel(&in), zero = 0;
    return reduce_widened(cx, tpu_ir_reshape(g, x, &numel, 1), &zero, 1, body);
  }
  int64_t shape[TPU_MAX_RANK], windows[TPU_MAX_RANK], rest[TPU_MAX_RANK],
          lo[TPU_MAX_RANK] = {0}, hi[TPU_MAX_RANK] = {0}, interior[TPU_MAX_RANK] = {0};
  int rank = 0, nw = 0, nr = 0, k = 0;
  bool padded = false;
  for (int i = 0; i < in.rank; ++i) {
    bool reduced = k < n && dims[k] == i;
    k += reduced;
    int64_t size = in.dims[i];
    bool split = reduced && size > XLA_TREE_WINDOW;
    if (rank + 1 + split > TPU_MAX_RANK) return reduce(cx, x, dims, n, body);
    if (reduced) rest[nr++] = rank - nw;  // its index once the windows are gone
    if (!split) {
      shape[rank++] = size;
      continue;
    }
    int64_t rows = (size + XLA_TREE_WINDOW - 1) / XLA_TREE_WINDOW;
    hi[i] = rows * XLA_TREE_WINDOW - size;
    padded |= hi[i] > 0;
    shape[rank++] = rows;
    windows[nw++] = rank;
    shape[rank++] = XLA_TREE_WINDOW;
  }
  if (nw == 0) return reduce(cx, x, dims, n, body);
  if (padded) x = tpu_ir_pad(g, x, body_init(g, body, in.dtype), lo, hi, interior);
  tpu_val_t partial = reduce(cx, tpu_ir_reshape(g, x, shape, rank), windows, nw, body);
  // (XLA's simplifier merges a reduction of a reduction into one.)
  return reduce(cx, tpu_ir_barrier(g, partial), rest, nr, body);
}

typedef enum { ACC_SUM, ACC_NANSUM, ACC_PROD, ACC_MEAN } acc_kind_t;

// op(self, dims, keepdim, dtype) with args at the given positions (-1 = absent).
static tpu_status_t accumulate(tpu_lower_ctx_t* cx, acc_kind_t kind, int dim_arg,
                               int keep_arg, int dtype_arg) {
  tpu_dtype_t in = tpu_arg_value_dtype(cx, 0), out;
  if (kind == ACC_MEAN) {
    if (tpu_arg_present(cx, dtype_arg)) {
      out = tpu_arg_dtype(cx, dtype_arg, in);
      if (!is_float_or_complex(out))
        return tpu_status_make(TPU_CODE_INVALID_ARGUMENT,
                               "mean(): could not infer output dtype. Optional dtype "
                               "must be either a floating point or complex dtype. Got: %s",
                               tpu_dtype_torch_name(out));
    } else {
      out = in;
      if (!is_float_or_complex(out))
        return tpu_status_make(TPU_CODE_INVALID_ARGUMENT,
                               "mean(): could not infer output dtype. Input dtype must "
                               "be either a floating point or complex dtype. Got: %s",
                               tpu_dtype_torch_name(out));
    }
  } else {
    out = tpu_dtype_is_integral(in, true) ? TPU_I64 : in;
    // An out= tensor's dtype is the computation's when none is given, as
    // on CPU (sum(1.7, out=int) adds 1, not 1.7); nansum's CPU kernel has
    // no integer variant to follow.
    if (kind != ACC_NANSUM) out = tpu_lower_out_dtype(cx, 0, out);
    out = tpu_arg_dtype(cx, dtype_arg, out);
  }
  int rank = tpu_arg_rank(cx, 0);
  const int64_t* sizes = tpu_arg_sizes(cx, 0);
  int64_t dims[TPU_MAX_RANK];
  int n;
  TPU_RETURN_IF_ERROR(reduce_dims(cx, dim_arg, rank, dims, &n));
  tpu_graph_t* g = cx->g;
  tpu_dtype_t acc = tpu_opmath(out);
  // sum/prod(dtype=) of a narrower float round the input to it first, as
  // CPU's self.to(dtype) (sum(dtype=torch.bfloat16) of float32 adds the
  // rounded values); mean(dtype=) does not, on CPU either.
  bool rounds_first = kind != ACC_MEAN && out != acc;
  tpu_val_t x = rounds_first ? tpu_ir_convert(cx->g, tpu_lower_input(cx, 0, out), acc)
                             : tpu_lower_input(cx, 0, acc);
  if (kind == ACC_NANSUM && is_float_or_complex(acc))
    x = tpu_ir_select(g, tpu_ir_compare(g, TPU_CMP_NE, x, x), tpu_lower_const_like(cx, x, 0), x);
  tpu_body_t body = kind == ACC_PROD ? TPU_BODY_MUL : TPU_BODY_ADD;
  tpu_val_t r = acc == TPU_I64 && in != TPU_I64 && tpu_dtype_is_integral(in, true)
                    ? reduce_widened(cx, x, dims, n, body)
                    : reduce(cx, x, dims, n, body);
  if (kind == ACC_MEAN) {
    const tpu_type_t* t = tpu_ir_type(g, r);
    if (t) {
      double count = (double)reduced_count(sizes, dims, n);
      r = tpu_ir_binary(g, TPU_IR_DIV, r, tpu_ir_const(g, acc, count, t->dims, t->rank));
    }
  }
  if (tpu_arg_bool(cx, keep_arg, false)) r = keep_dims(cx, r, sizes, rank, dims, n);
  tpu_lower_out(cx, 0, tpu_ir_convert(g, r, out));
  return TPU_OK;
}

// sum.dim_IntList(self, dim, keepdim=False, *, dtype=None)
tpu_status_t tpu_lower_sum(tpu_lower_ctx_t* cx) { return accumulate(cx, ACC_SUM, 1, 2, 3); }
// sum(self, *, dtype=None)
tpu_status_t tpu_lower_sum_all(tpu_lower_ctx_t* cx) { return accumulate(cx, ACC_SUM, -1, -1, 1); }
// nansum(self, dim=None, keepdim=False, *, dtype=None)
tpu_status_t tpu_lower_nansum(tpu_lower_ctx_t* cx) {
  if (tpu_dtype_is_complex(tpu_arg_value_dtype(cx, 0)))
    return tpu_status_make(TPU_CODE_INVALID_ARGUMENT,
                           "nansum on CPU does not support complex inputs");
  return accumulate(cx, ACC_NANSUM, 1, 2, 3);
}
// mean.dim(self, dim, keepdim=False, *, dtype=None)
tpu_status_t tpu_lower_mean(tpu_lower_ctx_t* cx) { return accumulate(cx, ACC_MEAN, 1, 2, 3); }
// mean(self, *, dtype=None)
tpu_status_t tpu_lower_mean_all(tpu_lower_ctx_t* cx) { return accumulate(cx, ACC_MEAN, -1, -1, 1); }
// prod.dim_int(self, dim, keepdim=False, *, dtype=None)
tpu_status_t tpu_lower_prod(tpu_lower_ctx_t* cx) {
  int64_t d;
  TPU_RETURN_IF_ERROR(tpu_wrap_dim(tpu_arg_int(cx, 1, 0), tpu_arg_rank(cx, 0), &d));
  return accumulate(cx, ACC_PROD, 1, 2, 3);
}
// prod(self, *, dtype=None)
tpu_status_t tpu_lower_prod_all(tpu_lower_ctx_t* cx) { return accumulate(cx, ACC_PROD, -1, -1, 1); }

// trace(self): the sum of a matrix's diagonal, typed as sum types it
// (integers give int64; bool is refused, as on CPU).
tpu_status_t tpu_lower_trace(tpu_lower_ctx_t* cx) {
  int rank = tpu_arg_rank(cx, 0);
  if (rank != 2)
    return tpu_status_make(TPU_CODE_INVALID_ARGUMENT,
                           "trace: expected a matrix, but got tensor with dim %d", rank);
  tpu_dtype_t t = tpu_arg_value_dtype(cx, 0);
  if (t == TPU_BOOL) return tpu_not_implemented("trace", t);
  tpu_dtype_t out = tpu_dtype_is_integral(t, false) ? TPU_I64 : t, acc = tpu_opmath(out);
  tpu_graph_t* g = cx->g;
  const int64_t* d = tpu_arg_sizes(cx, 0);
  tpu_val_t x = tpu_lower_input(cx, 0, acc);
  tpu_val_t diag = tpu_ir_compare(g, TPU_CMP_EQ, tpu_ir_iota(g, TPU_I64, d, 2, 0),
                                  tpu_ir_iota(g, TPU_I64, d, 2, 1));
  x = tpu_ir_select(g, diag, x, tpu_lower_const_like(cx, x, 0.0));
  int64_t both[2] = {0, 1};
  tpu_val_t r = tpu_ir_reduce(g, x, tpu_ir_const(g, acc, 0, NULL, 0), both, 2, TPU_BODY_ADD);
  tpu_lower_out(cx, 0, tpu_ir_convert(g, r, out));
  return TPU_OK;
}

//===--- amax, amin, max, min, aminmax ---===//

// PyTorch's checks of a max/min over `dims`: a reduction over nothing needs
// elements, and each reduced dim must be non-empty.
static tpu_status_t check_nonempty(tpu_lower_ctx_t* cx, const char* name, bool dims_given,
                                   const int64_t* dims, int n) {
  int rank = tpu_arg_rank(cx, 0);
  const int64_t* sizes = tpu_arg_sizes(cx, 0);
  if (!dims_given) {
    if (tpu_numel(sizes, rank) == 0)
      return tpu_status_make(TPU_CODE_INVALID_ARGUMENT,
                             "%s(): Expected reduction dim to be specified for "
                             "input.numel() == 0. Specify the reduction dim with the "
                             "'dim' argument.", name);
    return TPU_OK;
  }
  for (int i = 0; i < n; ++i)
    if (sizes[dims[i]] == 0)
      return tpu_status_make(TPU_CODE_OUT_OF_RANGE,
                             "%s(): Expected reduction dim %lld to have non-zero size.",
                             name, (long long)dims[i]);
  return TPU_OK;
}

// amax / amin(self, dim=[], keepdim=False)
static tpu_status_t amax_amin(tpu_lower_ctx_t* cx, bool is_max) {
  const char* name = is_max ? "amax" : "amin";
  tpu_dtype_t in = tpu_arg_value_dtype(cx, 0);
  if (tpu_dtype_is_complex(in)) return tpu_not_implemented(is_max ? "max_values_cpu" : "min_values_cpu", in);
  int rank = tpu_arg_rank(cx, 0);
  int64_t dims[TPU_MAX_RANK];
  int n;
  TPU_RETURN_IF_ERROR(reduce_dims(cx, 1, rank, dims, &n));
  const int64_t* listed;
  bool dims_given = tpu_arg_ints(cx, 1, &listed) > 0;
  TPU_RETURN_IF_ERROR(check_nonempty(cx, name, dims_given, dims, n));
  tpu_val_t r = reduce_extreme(cx, tpu_lower_tensor(cx, 0), dims, n, is_max);
  if (tpu_arg_bool(cx, 2, false)) r = keep_dims(cx, r, tpu_arg_sizes(cx, 0), rank, dims, n);
  tpu_lower_out(cx, 0, r);
  return TPU_OK;
}

tpu_status_t tpu_lower_amax(tpu_lower_ctx_t* cx) { return amax_amin(cx, true); }
tpu_status_t tpu_lower_amin(tpu_lower_ctx_t* cx) { return amax_amin(cx, false); }

// max / min(self): the whole tensor.
static tpu_status_t max_min_all(tpu_lower_ctx_t* cx, bool is_max) {
  tpu_dtype_t in = tpu_arg_value_dtype(cx, 0);
  if (tpu_dtype_is_complex(in)) return tpu_not_implemented(is_max ? "max_all" : "min_all", in);
  TPU_RETURN_IF_ERROR(check_nonempty(cx, is_max ? "max" : "min", false, NULL, 0));
  int rank = tpu_arg_rank(cx, 0);
  int64_t dims[TPU_MAX_RANK];
  for (int i = 0; i < rank; ++i) dims[i] = i;
  tpu_lower_out(cx, 0, reduce_extreme(cx, tpu_lower_tensor(cx, 0), dims, rank, is_max));
  return TPU_OK;
}

tpu_status_t tpu_lower_max_all(tpu_lower_ctx_t* cx) { return max_min_all(cx, true); }
tpu_status_t tpu_lower_min_all(tpu_lower_ctx_t* cx) { return max_min_all(cx, false); }

// aminmax(self, *, dim=None, keepdim=False) -> (min, max)
tpu_status_t tpu_lower_aminmax(tpu_lower_ctx_t* cx) {
  tpu_dtype_t in = tpu_arg_value_dtype(cx, 0);
  if (tpu_dtype_is_complex(in)) return tpu_not_implemented("aminmax_cpu", in);
  int rank = tpu_arg_rank(cx, 0);
  const int64_t* sizes = tpu_arg_sizes(cx, 0);
  int64_t dims[TPU_MAX_RANK];
  int n = 0;
  if (tpu_arg_present(cx, 1)) {
    TPU_RETURN_IF_ERROR(tpu_wrap_dim(tpu_arg_int(cx, 1, 0), rank, &dims[0]));
    if (rank > 0) {
      n = 1;
      if (sizes[dims[0]] == 0)
        return tpu_status_make(TPU_CODE_OUT_OF_RANGE,
                               "aminmax: Expected reduction dim %lld to have non-zero size.",
                               (long long)dims[0]);
    }
  } else {
    if (tpu_numel(sizes, rank) == 0)
      return tpu_status_make(TPU_CODE_INVALID_ARGUMENT,
                             "aminmax(): cannot compute aminmax over an empty dimension "
                             "as the operation has no identity.");
    for (int i = 0; i < rank; ++i) dims[n++] = i;
  }
  tpu_val_t x = tpu_lower_tensor(cx, 0);
  tpu_val_t lo = reduce_extreme(cx, x, dims, n, false), hi = reduce_extreme(cx, x, dims, n, true);
  if (tpu_arg_bool(cx, 2, false)) {
    lo = keep_dims(cx, lo, sizes, rank, dims, n);
    hi = keep_dims(cx, hi, sizes, rank, dims, n);
  }
  tpu_lower_out(cx, 0, lo);
  tpu_lower_out(cx, 1, hi);
  return TPU_OK;
}

//===--- max.dim, min.dim, argmax, argmin ---===//

// (value, index) of the max (min) along `dim` of x: NaN wins, then the
// lowest index, as PyTorch's CPU kernels. Returns the two-result node.
static tpu_val_t arg_reduce(tpu_lower_ctx_t* cx, tpu_val_t x, int64_t dim, bool is_max) {
  tpu_graph_t* g = cx->g;
  const tpu_type_t* t = tpu_ir_type(g, x);
  tpu_type_t shape = *t;
  tpu_val_t index = tpu_ir_iota(g, TPU_I64, shape.dims, shape.rank, (int)dim);
  return tpu_ir_reduce_arg(g, x, index, tpu_lower_extreme(g, shape.dtype, !is_max),
                           tpu_ir_const_i(g, TPU_I64, INT64_MAX, NULL, 0), dim,
                           is_max ? TPU_BODY_ARGMAX : TPU_BODY_ARGMIN);
}

// max.dim / min.dim(self, dim, keepdim=False) -> (values, indices)
static tpu_status_t max_min_dim(tpu_lower_ctx_t* cx, bool is_max) {
  const char* name = is_max ? "max" : "min";
  tpu_dtype_t in = tpu_arg_value_dtype(cx, 0);
  if (tpu_dtype_is_complex(in)) return tpu_not_implemented(is_max ? "max_cpu" : "min_cpu", in);
  int rank = tpu_arg_rank(cx, 0);
  const int64_t* sizes = tpu_arg_sizes(cx, 0);
  int64_t dim;
  TPU_RETURN_IF_ERROR(tpu_wrap_dim(tpu_arg_int(cx, 1, 0), rank, &dim));
  tpu_graph_t* g = cx->g;
  tpu_val_t x = tpu_lower_tensor(cx, 0);
  if (rank == 0) {
    tpu_lower_out(cx, 0, x);
    tpu_lower_out(cx, 1, tpu_ir_const_i(g, TPU_I64, 0, NULL, 0));
    return TPU_OK;
  }
  TPU_RETURN_IF_ERROR(check_nonempty(cx, name, true, &dim, 1));
  // Bool compares as an unsigned byte; the body's NaN rule is for floats.
  tpu_val_t node = arg_reduce(cx, tpu_ir_convert(g, x, in == TPU_BOOL ? TPU_U8 : in), dim, is_max);
  tpu_val_t v = tpu_ir_convert(g, tpu_ir_result(g, node, 0), in), i = tpu_ir_result(g, node, 1);
  if (tpu_arg_bool(cx, 2, false)) {
    v = keep_dims(cx, v, sizes, rank, &dim, 1);
    i = keep_dims(cx, i, sizes, rank, &dim, 1);
  }
  tpu_lower_out(cx, 0, v);
  tpu_lower_out(cx, 1, i);
  return TPU_OK;
}

tpu_status_t tpu_lower_max_dim(tpu_lower_ctx_t* cx) { return max_min_dim(cx, true); }
tpu_status_t tpu_lower_min_dim(tpu_lower_ctx_t* cx) { return max_min_dim(cx, false); }

// argmax / argmin(self, dim=None, keepdim=False)
static tpu_status_t argmax_argmin(tpu_lower_ctx_t* cx, bool is_max) {
  const char* name = is_max ? "argmax" : "argmin";
  tpu_dtype_t in = tpu_arg_value_dtype(cx, 0);
  if (in == TPU_BOOL)
    return tpu_status_make(TPU_CODE_INVALID_ARGUMENT, "%s(): does not support bool input", name);
  if (tpu_dtype_is_complex(in)) return tpu_not_implemented(is_max ? "argmax_cpu" : "argmin_cpu", in);
  int rank = tpu_arg_rank(cx, 0);
  const int64_t* sizes = tpu_arg_sizes(cx, 0);
  bool keep = tpu_arg_bool(cx, 2, false);
  tpu_graph_t* g = cx->g;
  tpu_val_t x = tpu_lower_tensor(cx, 0);
  int64_t ones[TPU_MAX_RANK];
  for (int i = 0; i < rank; ++i) ones[i] = 1;
  if (!tpu_arg_present(cx, 1)) {  // over the flattened tensor
    int64_t total = tpu_numel(sizes, rank);
    if (total == 0)
      return tpu_status_make(TPU_CODE_OUT_OF_RANGE,
                             "%s(): Expected reduction dim to be specified for "
                             "input.numel() == 0.", name);
    tpu_val_t node = arg_reduce(cx, tpu_ir_reshape(g, x, &total, 1), 0, is_max);
    tpu_val_t i = tpu_ir_result(g, node, 1);
    tpu_lower_out(cx, 0, keep ? tpu_ir_reshape(g, i, ones, rank) : i);
    return TPU_OK;
  }
  int64_t dim;
  TPU_RETURN_IF_ERROR(tpu_wrap_dim(tpu_arg_int(cx, 1, 0), rank, &dim));
  if (rank == 0) {
    tpu_lower_out(cx, 0, tpu_ir_const_i(g, TPU_I64, 0, NULL, 0));
    return TPU_OK;
  }
  if (sizes[dim] == 0)
    return tpu_status_make(TPU_CODE_OUT_OF_RANGE,
                           "%s(): Expected reduction dim %lld to have non-zero size.",
                           name, (long long)dim);
  tpu_val_t i = tpu_ir_result(g, arg_reduce(cx, x, dim, is_max), 1);
  if (keep) i = keep_dims(cx, i, sizes, rank, &dim, 1);
  tpu_lower_out(cx, 0, i);
  return TPU_OK;
}

tpu_status_t tpu_lower_argmax(tpu_lower_ctx_t* cx) { return argmax_argmin(cx, true); }
tpu_status_t tpu_lower_argmin(tpu_lower_ctx_t* cx) { return argmax_argmin(cx, false); }

//===--- var, std, var_mean, std_mean ---===//

// var / std (.correction)(self, dim=None, *, correction=None, keepdim=False),
// optionally with the mean as a second result. Two passes (mean, then the
// squared deviations) in float for half precision; the divisor is
// max(0, N - correction) as in PyTorch, so N <= correction gives inf or nan.
static tpu_status_t variance(tpu_lower_ctx_t* cx, bool take_sqrt, bool with_mean) {
  tpu_dtype_t in = tpu_arg_value_dtype(cx, 0);
  if (!is_float_or_complex(in))
    return tpu_status_make(TPU_CODE_INVALID_ARGUMENT,
                           "std and var only support floating point and complex dtypes");
  int rank = tpu_arg_rank(cx, 0);
  const int64_t* sizes = tpu_arg_sizes(cx, 0);
  int64_t dims[TPU_MAX_RANK];
  int n;
  TPU_RETURN_IF_ERROR(reduce_dims(cx, 1, rank, dims, &n));
  double correction = tpu_arg_number(cx, 2, 1);
  bool keep = tpu_arg_bool(cx, 3, false);
  tpu_graph_t* g = cx->g;
  tpu_dtype_t acc = tpu_opmath(in);
  double count = (double)reduced_count(sizes, dims, n);
  double divisor = count - correction > 0 ? count - correction : 0;
  tpu_val_t x = tpu_lower_input(cx, 0, acc);
  tpu_val_t sum = reduce(cx, x, dims, n, TPU_BODY_ADD);
  tpu_val_t mean = tpu_ir_binary(g, TPU_IR_DIV, sum, tpu_lower_const_like(cx, sum, count));
  tpu_val_t d = tpu_ir_binary(g, TPU_IR_SUB, x, unreduce(cx, mean, x, dims, n));
  tpu_val_t m2 = reduce(cx, magnitude_sq(g, d), dims, n, TPU_BODY_ADD);
  tpu_val_t var = tpu_ir_binary(g, TPU_IR_DIV, m2, tpu_lower_const_like(cx, m2, divisor));
  if (take_sqrt) var = tpu_ir_unary(g, TPU_IR_SQRT, var);
  if (keep) {
    var = keep_dims(cx, var, sizes, rank, dims, n);
    mean = keep_dims(cx, mean, sizes, rank, dims, n);
  }
  tpu_lower_out(cx, 0, tpu_ir_convert(g, var, real_of(in)));
  if (with_mean) tpu_lower_out(cx, 1, tpu_ir_convert(g, mean, in));
  return TPU_OK;
}

tpu_status_t tpu_lower_var(tpu_lower_ctx_t* cx) { return variance(cx, false, false); }
tpu_status_t tpu_lower_std(tpu_lower_ctx_t* cx) { return variance(cx, true, false); }
tpu_status_t tpu_lower_var_mean(tpu_lower_ctx_t* cx) { return variance(cx, false, true); }
tpu_status_t tpu_lower_std_mean(tpu_lower_ctx_t* cx) { return variance(cx, true, true); }

//===--- vector norms ---===//

// linalg_vector_norm(self, ord=2, dim=None, keepdim=False, *, dtype=None) and
// norm.ScalarOpt_dim(_dtype)(self, p, dim, keepdim, *, dtype): the same layout.
static tpu_status_t vector_norm(tpu_lower_ctx_t* cx, bool is_norm) {
  tpu_dtype_t in = tpu_arg_value_dtype(cx, 0);
  if (!is_float_or_complex(in))
    return is_norm ? tpu_status_make(TPU_CODE_INVALID_ARGUMENT,
                                     "norm(): input dtype should be either floating point "
                                     "or complex. Got %s instead.", tpu_dtype_torch_name(in))
                   : tpu_status_make(TPU_CODE_INVALID_ARGUMENT,
                                     "linalg.vector_norm: Expected a floating point or "
                                     "complex tensor as input. Got %s",
                                     tpu_dtype_torch_name(in));
  tpu_dtype_t c = in;
  if (tpu_arg_present(cx, 4)) {
    c = tpu_arg_dtype(cx, 4, in);
    if (!is_float_or_complex(c))
      return tpu_status_make(TPU_CODE_INVALID_ARGUMENT,
                             "linalg.vector_norm: dtype should be floating point or "
                             "complex, but got %s", tpu_dtype_torch_name(c));
    if (tpu_dtype_is_complex(in) != tpu_dtype_is_complex(c))
      return tpu_status_make(TPU_CODE_INVALID_ARGUMENT,
                             "linalg.vector_norm: dtype should be %s for %s inputs, but "
                             "got %s", tpu_dtype_is_complex(in) ? "complex" : "real",
                             tpu_dtype_is_complex(in) ? "complex" : "real",
                             tpu_dtype_torch_name(c));
    if (tpu_promote_types(in, c) != c)
      return tpu_status_make(TPU_CODE_INVALID_ARGUMENT,
                             "linalg.vector_norm: the dtype of the input (%s) should be "
                             "convertible without narrowing to the specified dtype (%s)",
                             tpu_dtype_torch_name(in), tpu_dtype_torch_name(c));
  }
  double p = tpu_arg_number(cx, 1, 2);
  int rank = tpu_arg_rank(cx, 0);
  const int64_t* sizes = tpu_arg_sizes(cx, 0);
  int64_t dims[TPU_MAX_RANK];
  int n;
  TPU_RETURN_IF_ERROR(reduce_dims(cx, 2, rank, dims, &n));
  if (p < 0 || isinf(p)) {  // max, min and negative powers have no identity
    char ord[32];
    snprintf(ord, sizeof ord, "%g", p);
    const int64_t* listed;
    if (tpu_arg_ints(cx, 2, &listed) == 0 && tpu_numel(sizes, rank) == 0)
      return tpu_status_make(TPU_CODE_INVALID_ARGUMENT,
                             "linalg.vector_norm cannot compute the %s norm on an empty "
                             "tensor because the operation does not have an identity", ord);
    for (int i = 0; i < n; ++i)
      if (sizes[dims[i]] == 0)
        return tpu_status_make(TPU_CODE_INVALID_ARGUMENT,
                               "linalg.vector_norm cannot compute the %s norm on the "
                               "dimension %lld because this dimension is empty and the "
                               "operation does not have an identity", ord, (long long)dims[i]);
  }
  tpu_graph_t* g = cx->g;
  tpu_dtype_t acc = tpu_opmath(c);
  tpu_val_t x = tpu_lower_input(cx, 0, acc);
  tpu_val_t r;
  if (p == 2) {
    r = tpu_ir_unary(g, TPU_IR_SQRT, reduce(cx, magnitude_sq(g, x), dims, n, TPU_BODY_ADD));
  } else {
    tpu_val_t a = magnitude(g, x);
    if (p == 1) {
      r = reduce(cx, a, dims, n, TPU_BODY_ADD);
    } else if (p == 0) {
      tpu_val_t nz = tpu_ir_compare(g, TPU_CMP_NE, a, tpu_lower_const_like(cx, a, 0));
      r = reduce(cx, tpu_ir_convert(g, nz, real_of(acc)), dims, n, TPU_BODY_ADD);
    } else if (isinf(p)) {
      r = reduce_extreme(cx, a, dims, n, p > 0);
    } else {
      tpu_val_t s = reduce(cx, tpu_ir_binary(g, TPU_IR_POW, a, tpu_lower_const_like(cx, a, p)),
                           dims, n, TPU_BODY_ADD);
      r = tpu_ir_binary(g, TPU_IR_POW, s, tpu_lower_const_like(cx, s, 1.0 / p));
    }
  }
  if (tpu_arg_bool(cx, 3, false)) r = keep_dims(cx, r, sizes, rank, dims, n);
  tpu_lower_out(cx, 0, tpu_ir_convert(g, r, real_of(c)));
  return TPU_OK;
}

tpu_status_t tpu_lower_vector_norm(tpu_lower_ctx_t* cx) { return vector_norm(cx, false); }
tpu_status_t tpu_lower_norm(tpu_lower_ctx_t* cx) { return vector_norm(cx, true); }

//===--- logsumexp ---===//

// logsumexp(self, dim, keepdim=False): max-shifted, with infinite maxima
// shifted by 0 (as PyTorch) so that all -inf gives -inf and +inf gives inf.
// Complex tensors are shifted by the maximum of their real parts (CPU's
// choice: exp(x - m) then has modulus at most 1).
tpu_status_t tpu_lower_logsumexp(tpu_lower_ctx_t* cx) {
  tpu_dtype_t in = tpu_arg_value_dtype(cx, 0);
  tpu_dtype_t out = tpu_to_float(cx, in);
  int rank = tpu_arg_rank(cx, 0);
  const int64_t* sizes = tpu_arg_sizes(cx, 0);
  int64_t dims[TPU_MAX_RANK];
  int n;
  TPU_RETURN_IF_ERROR(reduce_dims(cx, 1, rank, dims, &n));
  tpu_graph_t* g = cx->g;
  tpu_val_t x = tpu_lower_input(cx, 0, tpu_opmath(out));
  bool complex = tpu_dtype_is_complex(out);
  tpu_val_t m = reduce(cx, complex ? tpu_ir_unary(g, TPU_IR_REAL, x) : x, dims, n, TPU_BODY_MAX);
  tpu_val_t inf = tpu_lower_const_like(cx, m, INFINITY);
  m = tpu_ir_select(g, tpu_ir_compare(g, TPU_CMP_EQ, tpu_ir_unary(g, TPU_IR_ABS, m), inf),
                    tpu_lower_const_like(cx, m, 0), m);
  if (complex) m = tpu_ir_convert(g, m, tpu_opmath(out));  // (m + 0j)
  tpu_val_t e = tpu_ir_unary(g, TPU_IR_EXP, tpu_ir_binary(g, TPU_IR_SUB, x, unreduce(cx, m, x, dims, n)));
  tpu_val_t r = tpu_ir_binary(g, TPU_IR_ADD,
                              tpu_ir_unary(g, TPU_IR_LOG, reduce(cx, e, dims, n, TPU_BODY_ADD)), m);
  if (tpu_arg_bool(cx, 2, false)) r = keep_dims(cx, r, sizes, rank, dims, n);
  tpu_lower_out(cx, 0, tpu_ir_convert(g, r, out));
  return TPU_OK;
}

//===--- any, all, count_nonzero ---===//

// x != 0 as bool (NaN counts as non-zero).
static tpu_val_t nonzero(tpu_lower_ctx_t* cx, tpu_val_t x) {
  if (!tpu_graph_ok(cx->g) || tpu_ir_dtype(cx->g, x) == TPU_BOOL) return x;
  return tpu_ir_compare(cx->g, TPU_CMP_NE, x, tpu_lower_const_like(cx, x, 0));
}

// any / all over `dims` (arg dim_arg, -1 = all); bool results, uint8 for
// uint8 input (as CPU).
static tpu_status_t any_all(tpu_lower_ctx_t* cx, bool is_all, int dim_arg, int keep_arg) {
  tpu_dtype_t in = tpu_arg_value_dtype(cx, 0);
  int rank = tpu_arg_rank(cx, 0);
  int64_t dims[TPU_MAX_RANK];
  int n;
  TPU_RETURN_IF_ERROR(reduce_dims_ex(cx, dim_arg, rank, true, dims, &n));
  tpu_val_t b = nonzero(cx, tpu_lower_tensor(cx, 0));
  tpu_val_t r = reduce(cx, b, dims, n, is_all ? TPU_BODY_AND : TPU_BODY_OR);
  if (tpu_arg_bool(cx, keep_arg, false)) r = keep_dims(cx, r, tpu_arg_sizes(cx, 0), rank, dims, n);
  tpu_lower_out(cx, 0, tpu_ir_convert(cx->g, r, in == TPU_U8 ? TPU_U8 : TPU_BOOL));
  return TPU_OK;
}

// any / all(self)
tpu_status_t tpu_lower_any(tpu_lower_ctx_t* cx) { return any_all(cx, false, -1, -1); }
tpu_status_t tpu_lower_all(tpu_lower_ctx_t* cx) { return any_all(cx, true, -1, -1); }
// any / all .dim(self, int dim, keepdim) and .dims(self, int[]? dim, keepdim)
tpu_status_t tpu_lower_any_dim(tpu_lower_ctx_t* cx) { return any_all(cx, false, 1, 2); }
tpu_status_t tpu_lower_all_dim(tpu_lower_ctx_t* cx) { return any_all(cx, true, 1, 2); }

// count_nonzero.dim_IntList(self, int[] dim): int64 counts.
tpu_status_t tpu_lower_count_nonzero(tpu_lower_ctx_t* cx) {
  int rank = tpu_arg_rank(cx, 0);
  int64_t dims[TPU_MAX_RANK];
  int n;
  TPU_RETURN_IF_ERROR(reduce_dims(cx, 1, rank, dims, &n));
  tpu_val_t b = tpu_ir_convert(cx->g, nonzero(cx, tpu_lower_tensor(cx, 0)), TPU_I64);
  tpu_lower_out(cx, 0, reduce(cx, b, dims, n, TPU_BODY_ADD));
  return TPU_OK;
}

//===--- softmax ---===//

// log_softmax of x (in its compute type) along dim: shifted - log(sum(exp(
// shifted))), shifted = x - max. Softmax is exp of it, not exp(shifted) /
// sum: XLA's CPU backend then computes exp twice (once inside the sum's
// loop) instead of materializing it for two users, a kernel LLVM unrolls
// into hundreds of KB of code: a masked softmax compiled in 4.2 s, now in
// 0.5 s (docs/modes.md). *max, when asked for, gets the maximum.
tpu_val_t tpu_lower_log_softmax_values(tpu_lower_ctx_t* cx, tpu_val_t x, int64_t dim,
                                       tpu_val_t* max) {
  tpu_graph_t* g = cx->g;
  if (max) *max = TPU_VAL_NONE;
  if (!tpu_graph_ok(g)) return TPU_VAL_NONE;
  int n = tpu_ir_rank(g, x) > 0 ? 1 : 0;
  tpu_val_t m = reduce(cx, x, &dim, n, TPU_BODY_MAX);
  if (max) *max = m;
  tpu_val_t shifted = tpu_ir_binary(g, TPU_IR_SUB, x, unreduce(cx, m, x, &dim, n));
  tpu_val_t sum = reduce(cx, tpu_ir_unary(g, TPU_IR_EXP, shifted), &dim, n, TPU_BODY_ADD);
  return tpu_ir_binary(g, TPU_IR_SUB, shifted,
                       unreduce(cx, tpu_ir_unary(g, TPU_IR_LOG, sum), x, &dim, n));
}

// _softmax / _log_softmax(self, dim, half_to_float). half_to_float (which
// PyTorch's CUDA kernels accept for half input) gives a float result.
static tpu_status_t softmax(tpu_lower_ctx_t* cx, bool is_log) {
  tpu_dtype_t in = tpu_arg_value_dtype(cx, 0);
  if (!tpu_dtype_is_float(in))
    return tpu_not_implemented(is_log ? "log_softmax_lastdim_kernel_impl"
                                  : "softmax_lastdim_kernel_impl", in);
  tpu_dtype_t out = in;
  if (tpu_arg_bool(cx, 2, false)) {
    if (in != TPU_F16 && in != TPU_BF16)
      return tpu_status_make(TPU_CODE_INVALID_ARGUMENT, "conversion is supported for Half type only");
    out = TPU_F32;
  }
  int rank = tpu_arg_rank(cx, 0);
  int64_t dim;
  TPU_RETURN_IF_ERROR(tpu_wrap_dim(tpu_arg_int(cx, 1, 0), rank, &dim));
  tpu_graph_t* g = cx->g;
  tpu_val_t x = tpu_lower_input(cx, 0, tpu_opmath(in));
  tpu_val_t r = tpu_lower_log_softmax_values(cx, x, dim, NULL);
  if (!is_log) r = tpu_ir_unary(g, TPU_IR_EXP, r);
  tpu_lower_out(cx, 0, tpu_ir_convert(g, r, out));
  return TPU_OK;
}

tpu_status_t tpu_lower_softmax(tpu_lower_ctx_t* cx) { return softmax(cx, false); }
tpu_status_t tpu_lower_log_softmax(tpu_lower_ctx_t* cx) { return softmax(cx, true); }

// _softmax_backward_data / _log_softmax_backward_data(grad_output, output,
// dim, input_dtype): the result has input_dtype (float grads of a
// half_to_float softmax give half, as on CUDA).
static tpu_status_t softmax_backward(tpu_lower_ctx_t* cx, bool is_log) {
  tpu_dtype_t gt = tpu_arg_value_dtype(cx, 0);
  tpu_dtype_t out = tpu_arg_dtype(cx, 3, gt);
  if (!tpu_dtype_is_float(gt))
    return tpu_not_implemented(is_log ? "log_softmax_backward_lastdim_kernel_impl"
                                  : "softmax_backward_lastdim_kernel_impl", gt);
  if (gt != out && !(gt == TPU_F32 && (out == TPU_F16 || out == TPU_BF16)))
    return tpu_status_make(TPU_CODE_INVALID_ARGUMENT,
                           "expected input and grad types to match, or input to be "
                           "at::Half and grad to be at::Float");
  int rank = tpu_arg_rank(cx, 0);
  const int64_t* gs = tpu_arg_sizes(cx, 0);
  const int64_t* os = tpu_arg_sizes(cx, 1);
  bool same = rank == tpu_arg_rank(cx, 1);
  for (int i = 0; same && i < rank; ++i) same = gs[i] == os[i];
  if (!same)
    return tpu_status_make(TPU_CODE_INVALID_ARGUMENT,
                           "grad_output and output must have the same shape");
  int64_t dim;
  TPU_RETURN_IF_ERROR(tpu_wrap_dim(tpu_arg_int(cx, 2, 0), rank, &dim));
  int n = rank > 0 ? 1 : 0;
  tpu_graph_t* g = cx->g;
  tpu_dtype_t acc = tpu_opmath(gt);
  tpu_val_t gr = tpu_lower_input(cx, 0, acc), y = tpu_lower_input(cx, 1, acc);
  tpu_val_t r;
  if (is_log) {  // g - exp(y) * sum(g)
    tpu_val_t s = unreduce(cx, reduce(cx, gr, &dim, n, TPU_BODY_ADD), gr, &dim, n);
    r = tpu_ir_binary(g, TPU_IR_SUB, gr, tpu_ir_binary(g, TPU_IR_MUL, tpu_ir_unary(g, TPU_IR_EXP, y), s));
  } else {  // y * (g - sum(g * y))
    tpu_val_t gy = tpu_ir_binary(g, TPU_IR_MUL, gr, y);
    tpu_val_t s = unreduce(cx, reduce(cx, gy, &dim, n, TPU_BODY_ADD), gr, &dim, n);
    r = tpu_ir_binary(g, TPU_IR_MUL, y, tpu_ir_binary(g, TPU_IR_SUB, gr, s));
  }
  tpu_lower_out(cx, 0, tpu_ir_convert(g, r, out));
  return TPU_OK;
}

tpu_status_t tpu_lower_softmax_backward(tpu_lower_ctx_t* cx) { return softmax_backward(cx, false); }
tpu_status_t tpu_lower_log_softmax_backward(tpu_lower_ctx_t* cx) { return softmax_backward(cx, true); }
