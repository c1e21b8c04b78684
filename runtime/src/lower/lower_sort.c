// Sorting and selection: sort, topk, kthvalue.
//
// sort and kthvalue sort (value, position) pairs stably along the dim with
// stablehlo.sort, whose comparator puts NaN last ascending and first
// descending as torch.sort does. A stable sort makes ties come out in their
// original order, which is what PyTorch's stable sort returns and a valid
// answer for kthvalue (whose tie order PyTorch leaves open). topk uses
// stablehlo's top_k, which also keeps ties in index order.
#include <math.h>
#include <string.h>

#include "lower/lower.h"

// Sorts x (shape d, rank n >= 1) along dim; values and i64 positions.
static void sort_pairs(tpu_lower_ctx_t* cx, tpu_val_t x, const int64_t* d, int n, int dim,
                       bool descending, tpu_val_t* values, tpu_val_t* indices) {
  tpu_graph_t* g = cx->g;
  tpu_val_t ops[2] = {x, tpu_ir_iota(g, TPU_I64, d, n, dim)};
  tpu_val_t s = tpu_ir_sort(g, ops, 2, dim,
                            descending ? TPU_SORT_DESCENDING : TPU_SORT_ASCENDING, true);
  *values = tpu_ir_result(g, s, 0);
  *indices = tpu_ir_result(g, s, 1);
}

static tpu_status_t check_sortable(tpu_lower_ctx_t* cx, const char* op) {
  tpu_dtype_t t = tpu_arg_value_dtype(cx, 0);
  if (!tpu_dtype_is_complex(t)) return TPU_OK;
  // CPU's and CUDA's errors: kthvalue has no complex kernel, sort and topk refuse.
  if (!strcmp(op, "kthvalue")) return tpu_not_implemented(op, t);
  return tpu_invalid("%s does not support complex dtypes on tpu",
                     !strcmp(op, "sort") ? "Sort" : op);
}

// x along dim, sliced to [start, start + len).
static tpu_val_t slice_dim(tpu_graph_t* g, tpu_val_t x, const int64_t* d, int n, int dim,
                           int64_t start, int64_t len) {
  int64_t lo[TPU_MAX_RANK] = {0}, hi[TPU_MAX_RANK];
  memcpy(hi, d, sizeof(int64_t) * (size_t)n);
  lo[dim] = start;
  hi[dim] = start + len;
  return tpu_ir_slice(g, x, lo, hi, NULL);
}

// sort.stable(Tensor self, *, bool? stable, int dim=-1, bool descending=False)
tpu_status_t tpu_lower_sort(tpu_lower_ctx_t* cx) {
  tpu_graph_t* g = cx->g;
  TPU_RETURN_IF_ERROR(check_sortable(cx, "sort"));
  int rank = tpu_arg_rank(cx, 0);
  int64_t dim;
  TPU_RETURN_IF_ERROR(tpu_wrap_dim(tpu_arg_int(cx, 2, -1), rank, &dim));
  bool descending = tpu_arg_bool(cx, 3, false);
  const int64_t* d = tpu_arg_sizes(cx, 0);
  tpu_val_t x = tpu_lower_tensor(cx, 0);
  if (rank == 0 || tpu_numel(d, rank) == 0 || d[dim] == 1) {
    tpu_lower_out(cx, 0, x);
    tpu_lower_out(cx, 1, tpu_ir_const_i(g, TPU_I64, 0, d, rank));
    return TPU_OK;
  }
  tpu_val_t v, i;
  sort_pairs(cx, x, d, rank, (int)dim, descending, &v, &i);
  tpu_lower_out(cx, 0, v);
  tpu_lower_out(cx, 1, i);
  return TPU_OK;
}

// The sort key of topk for stablehlo's top_k, which picks the largest k
// under the IEEE total order (-NaN < -inf < ... < -0 < +0 < ... < +NaN)
// with ties in index order: PyTorch ranks every NaN above everything and
// -0 equal to +0, so floats are canonicalized (in float for half
// precision); smallest-k reverses the order (negation for floats, bitwise
// not for integers, which cannot overflow).
static tpu_val_t topk_key(tpu_graph_t* g, tpu_val_t x, tpu_dtype_t t, const int64_t* d, int n,
                          bool largest) {
  if (!tpu_dtype_is_float(t)) return largest ? x : tpu_ir_unary(g, TPU_IR_NOT, x);
  tpu_dtype_t kt = tpu_opmath(t);
  tpu_val_t k = tpu_ir_convert(g, x, kt);
  tpu_val_t zero = tpu_ir_const(g, kt, 0, d, n);
  tpu_val_t is_nan = tpu_ir_compare(g, TPU_CMP_NE, k, k);
  k = tpu_ir_select(g, tpu_ir_compare(g, TPU_CMP_EQ, k, zero), zero, k);
  if (!largest) k = tpu_ir_unary(g, TPU_IR_NEG, k);
  uint64_t nan = kt == TPU_F64 ? 0x7ff8000000000000ull : 0x7fc00000ull;
  uint64_t sign = kt == TPU_F64 ? 0x8000000000000000ull : 0x80000000ull;
  tpu_val_t top = tpu_ir_const_bits(g, kt, largest ? nan : nan | sign, d, n);
  return tpu_ir_select(g, is_nan, top, k);
}

// topk(Tensor self, SymInt k, int dim=-1, bool largest=True, bool sorted=True):
// stablehlo's top_k over the last dim (the dim moved there), which is far
// cheaper than a full sort when k is small. The results come out sorted
// either way (PyTorch leaves the order open for sorted=False).
tpu_status_t tpu_lower_topk(tpu_lower_ctx_t* cx) {
  tpu_graph_t* g = cx->g;
  TPU_RETURN_IF_ERROR(check_sortable(cx, "topk"));
  int rank = tpu_arg_rank(cx, 0);
  int64_t dim;
  TPU_RETURN_IF_ERROR(tpu_wrap_dim(tpu_arg_int(cx, 2, -1), rank, &dim));
  int64_t k = tpu_arg_int(cx, 1, 0);
  bool largest = tpu_arg_bool(cx, 3, true);
  int64_t d[TPU_MAX_RANK];
  int n = rank ? rank : 1;
  if (rank) memcpy(d, tpu_arg_sizes(cx, 0), sizeof(int64_t) * (size_t)rank);
  else d[0] = 1;
  if (k < 0 || k > d[dim])
    return TPU_LOWER_ERROR(TPU_CODE_INVALID_ARGUMENT, "selected index k out of range");
  if (tpu_arg_value_dtype(cx, 0) == TPU_BOOL)  // as PyTorch's CPU and CUDA kernels
    return TPU_LOWER_ERROR(TPU_CODE_INVALID_ARGUMENT, "topk does not support bool dtypes");
  int64_t out[TPU_MAX_RANK];
  memcpy(out, d, sizeof out);
  out[dim] = k;
  tpu_dtype_t t = tpu_arg_value_dtype(cx, 0);
  if (tpu_numel(out, n) == 0) {
    tpu_lower_out(cx, 0, tpu_ir_const(g, t, 0, out, rank));
    tpu_lower_out(cx, 1, tpu_ir_const_i(g, TPU_I64, 0, out, rank));
    return TPU_OK;
  }
  // Move dim last: perm swaps it with the last dim (its own inverse).
  int64_t perm[TPU_MAX_RANK], td[TPU_MAX_RANK];
  for (int i = 0; i < n; ++i) perm[i] = i;
  perm[dim] = n - 1;
  perm[n - 1] = dim;
  for (int i = 0; i < n; ++i) td[i] = d[perm[i]];
  tpu_val_t x = tpu_ir_reshape(g, tpu_lower_tensor(cx, 0), d, n);
  if (dim != n - 1) x = tpu_ir_transpose(g, x, perm);
  tpu_val_t r = tpu_ir_top_k(g, topk_key(g, x, t, td, n, largest), k);
  tpu_val_t idx = tpu_ir_convert(g, tpu_ir_result(g, r, 1), TPU_I64);
  // Values are read from x at the chosen positions (the key lost NaN
  // payloads and the sign of zero).
  int64_t len = td[n - 1], rows = tpu_numel(td, n - 1), flat_len = rows * len;
  int64_t rk[2] = {rows, k}, tk[TPU_MAX_RANK];
  memcpy(tk, td, sizeof tk);
  tk[n - 1] = k;
  tpu_val_t off = tpu_ir_binary(g, TPU_IR_ADD,
                                tpu_ir_binary(g, TPU_IR_MUL, tpu_ir_iota(g, TPU_I64, rk, 2, 0),
                                              tpu_ir_const_i(g, TPU_I64, len, rk, 2)),
                                tpu_ir_reshape(g, idx, rk, 2));
  tpu_gather_dims_t dn;
  memset(&dn, 0, sizeof dn);
  dn.n_collapsed = dn.n_start_map = 1;
  dn.index_vector_dim = 2;
  int64_t one = 1;
  tpu_val_t v = tpu_ir_gather(g, tpu_ir_reshape(g, x, &flat_len, 1), off, &dn, &one);
  v = tpu_ir_reshape(g, v, tk, n);
  if (dim != n - 1) {
    v = tpu_ir_transpose(g, v, perm);
    idx = tpu_ir_transpose(g, idx, perm);
  }
  tpu_lower_out(cx, 0, tpu_ir_reshape(g, v, out, rank));
  tpu_lower_out(cx, 1, tpu_ir_reshape(g, idx, out, rank));
  return TPU_OK;
}

// kthvalue(Tensor self, SymInt k, int dim=-1, bool keepdim=False): the k-th
// smallest (NaN counts as the largest).
tpu_status_t tpu_lower_kthvalue(tpu_lower_ctx_t* cx) {
  tpu_graph_t* g = cx->g;
  TPU_RETURN_IF_ERROR(check_sortable(cx, "kthvalue"));
  if (tpu_arg_value_dtype(cx, 0) == TPU_BOOL)  // no bool kernel on CPU or CUDA
    return tpu_not_implemented("kthvalue", TPU_BOOL);
  if (cx->num_out_dtypes == 2 && cx->out_dtypes[0] != tpu_arg_value_dtype(cx, 0))
    return TPU_LOWER_ERROR(TPU_CODE_INVALID_ARGUMENT, "output values must be of same type as input");
  if (cx->num_out_dtypes == 2 && cx->out_dtypes[1] != TPU_I64)
    return TPU_LOWER_ERROR(TPU_CODE_INVALID_ARGUMENT, "output indices must be of scalar type Long");
  int rank = tpu_arg_rank(cx, 0);
  int64_t dim;
  TPU_RETURN_IF_ERROR(tpu_wrap_dim(tpu_arg_int(cx, 2, -1), rank, &dim));
  int64_t k = tpu_arg_int(cx, 1, 0);
  bool keepdim = tpu_arg_bool(cx, 3, false);
  int64_t d[TPU_MAX_RANK];
  int n = rank ? rank : 1;
  if (rank) memcpy(d, tpu_arg_sizes(cx, 0), sizeof(int64_t) * (size_t)rank);
  else d[0] = 1;
  if (d[dim] == 0)  // an IndexError, as on CPU
    return TPU_LOWER_ERROR(TPU_CODE_OUT_OF_RANGE,
                           "kthvalue(): Expected reduction dim %lld to have non-zero size.",
                           (long long)dim);
  if (k < 1 || k > d[dim])
    return TPU_LOWER_ERROR(TPU_CODE_INVALID_ARGUMENT,
                           "kthvalue(): selected number k out of range for dimension %lld",
                           (long long)dim);
  // Result: dim dropped, or kept with size 1.
  int64_t out[TPU_MAX_RANK];
  int nout = 0;
  for (int i = 0; i < rank; ++i)
    if (i != dim || keepdim) out[nout++] = i == dim ? 1 : d[i];
  tpu_val_t x = tpu_ir_reshape(g, tpu_lower_tensor(cx, 0), d, n);
  tpu_val_t v, i;
  sort_pairs(cx, x, d, n, (int)dim, false, &v, &i);
  v = slice_dim(g, v, d, n, (int)dim, k - 1, 1);
  i = slice_dim(g, i, d, n, (int)dim, k - 1, 1);
  tpu_lower_out(cx, 0, tpu_ir_reshape(g, v, out, nout));
  tpu_lower_out(cx, 1, tpu_ir_reshape(g, i, out, nout));
  return TPU_OK;
}

//===--- bucketize / searchsorted ---===//

// (i / per_row) * n for i < count: where the row of n elements that
// element i (of rows of per_row) searches starts in a flat sequence.
static tpu_val_t row_starts(tpu_graph_t* g, int64_t count, int64_t per_row, int64_t n) {
  tpu_val_t row = tpu_ir_binary(g, TPU_IR_DIV, tpu_ir_iota(g, TPU_I64, &count, 1, 0),
                                tpu_ir_const_i(g, TPU_I64, per_row, &count, 1));
  return tpu_ir_binary(g, TPU_IR_MUL, row, tpu_ir_const_i(g, TPU_I64, n, &count, 1));
}

// The insertion points of values in sequences by CPU's binary search
// (cus_lower_bound / cus_upper_bound): lo moves past mid while
// !(seq[mid] >= v) (left) or !(seq[mid] > v) (right). It runs its
// bit_length(n) halvings for every value at once, each a gather of one
// boundary per value, so a sequence with NaNs (torch.sort puts them last)
// gives CPU's answer, and memory grows with the values, not values times
// boundaries. `seq` has rank sr (1: shared by every value; else its
// leading dims match the values'); `sorter` (TPU_VAL_NONE: none) orders
// each row; the values `vals` have shape vd/vr.
static tpu_val_t insertion_points(tpu_lower_ctx_t* cx, tpu_val_t seq, int sr, tpu_val_t sorter,
                                  tpu_val_t vals, const int64_t* vd, int vr, bool right,
                                  tpu_dtype_t out) {
  tpu_graph_t* g = cx->g;
  if (!tpu_graph_ok(g)) return TPU_VAL_NONE;
  const int64_t* sd = tpu_ir_dims(g, seq);
  int64_t n = sd[sr - 1], total = tpu_numel(sd, sr), count = tpu_numel(vd, vr);
  tpu_val_t lo = tpu_ir_const_i(g, TPU_I64, 0, &count, 1);
  if (n == 0 || count == 0) return tpu_ir_convert(g, tpu_ir_reshape(g, lo, vd, vr), out);
  tpu_val_t flat = tpu_ir_reshape(g, seq, &total, 1);
  if (sorter != TPU_VAL_NONE)  // each row in its sorted order
    flat = tpu_gather_flat(g, flat, tpu_ir_binary(g, TPU_IR_ADD, row_starts(g, total, n, n),
                                                  tpu_ir_reshape(g, sorter, &total, 1)), 1);
  tpu_val_t base = row_starts(g, count, sr == 1 ? count : vd[vr - 1], n);
  tpu_val_t v = tpu_ir_reshape(g, vals, &count, 1);
  tpu_val_t hi = tpu_ir_const_i(g, TPU_I64, n, &count, 1);
  tpu_val_t one = tpu_ir_const_i(g, TPU_I64, 1, &count, 1);
  tpu_val_t last = tpu_ir_const_i(g, TPU_I64, n - 1, &count, 1);
  for (int64_t k = n; k > 0; k >>= 1) {
    tpu_val_t active = tpu_ir_compare(g, TPU_CMP_LT, lo, hi);
    tpu_val_t mid = tpu_ir_binary(g, TPU_IR_ADD, lo,
                                  tpu_ir_binary(g, TPU_IR_SHR_A, tpu_ir_binary(g, TPU_IR_SUB, hi, lo),
                                                one));
    tpu_val_t at = tpu_gather_flat(
        g, flat, tpu_ir_binary(g, TPU_IR_ADD, base, tpu_ir_binary(g, TPU_IR_MIN, mid, last)), 1);
    tpu_val_t past = tpu_ir_unary(g, TPU_IR_NOT,
                                  tpu_ir_compare(g, right ? TPU_CMP_GT : TPU_CMP_GE, at, v));
    lo = tpu_ir_select(g, tpu_ir_binary(g, TPU_IR_AND, active, past),
                       tpu_ir_binary(g, TPU_IR_ADD, mid, one), lo);
    hi = tpu_ir_select(g, tpu_ir_binary(g, TPU_IR_AND, active, tpu_ir_unary(g, TPU_IR_NOT, past)),
                       mid, hi);
  }
  return tpu_ir_convert(g, tpu_ir_reshape(g, lo, vd, vr), out);
}

// repeat_interleave.Tensor(repeats, output_size) with the output size known
// (binding/dynamic.cpp reads it back when it is not given): output i is the
// index of the repeat it falls in, the insertion point of i after
// cumsum(repeats).
tpu_status_t tpu_lower_repeat_interleave(tpu_lower_ctx_t* cx) {
  if (tpu_arg_rank(cx, 0) != 1)
    return tpu_invalid("repeat_interleave only accept 1D vector as repeat");
  tpu_dtype_t t = tpu_arg_value_dtype(cx, 0);
  if (t != TPU_I32 && t != TPU_I64) return tpu_not_implemented("repeat_interleave_cpu", t);
  tpu_graph_t* g = cx->g;
  int64_t n = tpu_arg_sizes(cx, 0)[0], m = tpu_arg_int(cx, 1, 0);
  tpu_val_t r = tpu_lower_input(cx, 0, TPU_I64);
  int64_t all = 0;
  tpu_val_t below = tpu_ir_compare(g, TPU_CMP_LT, r, tpu_lower_const_like(cx, r, 0));
  tpu_lower_assert(cx, tpu_ir_reduce(g, below, tpu_ir_const_i(g, TPU_BOOL, 0, NULL, 0), &all, 1,
                                     TPU_BODY_OR),
                   TPU_CODE_INVALID_ARGUMENT, "repeats can not be negative");
  tpu_val_t total = tpu_ir_reduce(g, r, tpu_ir_const_i(g, TPU_I64, 0, NULL, 0), &all, 1,
                                  TPU_BODY_ADD);
  tpu_lower_assert(cx, tpu_ir_compare(g, TPU_CMP_NE, total, tpu_ir_const_i(g, TPU_I64, m, NULL, 0)),
                   TPU_CODE_INVALID_ARGUMENT, "allocated size does not match required size");
  tpu_val_t ends = tpu_lower_scan(cx, r, 0, TPU_IR_ADD, 0);
  tpu_val_t i = tpu_ir_iota(g, TPU_I64, &m, 1, 0);
  tpu_lower_out(cx, 0, n ? insertion_points(cx, ends, 1, TPU_VAL_NONE, i, &m, 1, true, t)
                         : tpu_ir_const_i(g, t, 0, &m, 1));
  return TPU_OK;
}

// bincount(self, weights?, size) with the length known (binding/dynamic.cpp
// reads the largest value back and checks the input on the host): counts, or
// sums of weights, scatter-added into `size` bins. float32 weights sum in
// float, other weights in double, counts in int64, as on CPU.
tpu_status_t tpu_lower_bincount(tpu_lower_ctx_t* cx) {
  if (tpu_arg_rank(cx, 0) != 1)
    return tpu_invalid("bincount only supports 1-d non-negative integral inputs.");
  tpu_dtype_t t = tpu_arg_value_dtype(cx, 0);
  if (!tpu_dtype_is_integral(t, false)) return tpu_not_implemented("bincount_cpu", t);
  int64_t m = tpu_arg_sizes(cx, 0)[0], size = tpu_arg_int(cx, 2, 0);
  bool weighted = tpu_arg_is_tensor(cx, 1);
  if (weighted && (tpu_arg_rank(cx, 1) != 1 || tpu_arg_sizes(cx, 1)[0] != m))
    return tpu_invalid("weights should be 1-d and have the same length as input");
  tpu_dtype_t out = !weighted || m == 0 ? TPU_I64
                    : tpu_arg_value_dtype(cx, 1) == TPU_F32 ? TPU_F32 : TPU_F64;
  tpu_graph_t* g = cx->g;
  tpu_val_t bins = tpu_ir_const(g, out, 0, &size, 1);
  if (m == 0) {
    tpu_lower_out(cx, 0, bins);
    return TPU_OK;
  }
  tpu_val_t add = weighted ? tpu_lower_input(cx, 1, out) : tpu_ir_const(g, out, 1, &m, 1);
  tpu_lower_out(cx, 0, tpu_scatter_flat(g, bins, tpu_lower_input(cx, 0, TPU_I64), add, 1,
                                        TPU_BODY_ADD));
  return TPU_OK;
}

// bucketize.Tensor / .Scalar (self, Tensor boundaries, *, bool out_int32, bool right)
tpu_status_t tpu_lower_bucketize(tpu_lower_ctx_t* cx) {
  if (tpu_arg_rank(cx, 1) != 1)
    return tpu_invalid("boundaries tensor must be 1 dimension, but got dim(%d)", tpu_arg_rank(cx, 1));
  int args[2] = {0, 1};
  tpu_dtype_t t = tpu_lower_result_type(cx, args, 2);
  tpu_dtype_t out = tpu_arg_bool(cx, 2, false) ? TPU_I32 : TPU_I64;
  tpu_val_t seq = tpu_lower_input(cx, 1, t), vals = tpu_lower_input(cx, 0, t);
  tpu_lower_out(cx, 0, insertion_points(cx, seq, 1, TPU_VAL_NONE, vals, tpu_arg_sizes(cx, 0),
                                        tpu_arg_rank(cx, 0), tpu_arg_bool(cx, 3, false), out));
  return TPU_OK;
}

// searchsorted.Tensor / .Scalar (Tensor sorted_sequence, self, *, bool out_int32,
//                                bool right, str? side, Tensor? sorter)
tpu_status_t tpu_lower_searchsorted(tpu_lower_ctx_t* cx) {
  tpu_graph_t* g = cx->g;
  int sr = tpu_arg_rank(cx, 0), vr = tpu_arg_rank(cx, 1);
  const int64_t *sd = tpu_arg_sizes(cx, 0), *vd = tpu_arg_sizes(cx, 1);
  if (sr == 0)
    return tpu_invalid("torch.searchsorted(): boundaries tensor should have positive dimension, "
                       "but got 0 dimension");
  bool match = sr == 1 || (vr == sr);
  for (int i = 0; match && sr > 1 && i < sr - 1; ++i) match = sd[i] == vd[i];
  if (!match) {
    char a[256], b[256];
    tpu_dims_str(sd, sr, ", ", a, sizeof a);
    tpu_dims_str(vd, vr, ", ", b, sizeof b);
    return tpu_invalid("torch.searchsorted(): boundaries tensor should be 1 dimension or the first "
                       "N-1 dimensions of boundaries tensor and input value tensor must match, "
                       "but we got boundaries tensor [%s] and input value tensor [%s]", a, b);
  }
  bool right = tpu_arg_bool(cx, 3, false);
  const char* side = tpu_arg_string(cx, 4, NULL);
  if (side) {
    bool side_right = !strcmp(side, "right");
    if (!side_right && strcmp(side, "left"))
      return tpu_invalid("torch.searchsorted(): side can only be 'left' or 'right' but got %s", side);
    if (right && !side_right)
      return tpu_invalid("torch.searchsorted(): side and right can't be set to opposites, got side "
                         "of left while right was True");
    right = side_right;
  }
  tpu_val_t sorter = TPU_VAL_NONE;
  if (tpu_arg_is_tensor(cx, 5)) {
    if (tpu_arg_value_dtype(cx, 5) != TPU_I64)
      return tpu_invalid("torch.searchsorted(): sorter must be a tensor of long dtype but got %s",
                         tpu_dtype_torch_name(tpu_arg_value_dtype(cx, 5)));
    bool same = tpu_arg_rank(cx, 5) == sr;
    for (int i = 0; same && i < sr; ++i) same = tpu_arg_sizes(cx, 5)[i] == sd[i];
    if (!same) return tpu_invalid("torch.searchsorted(): boundary and sorter must have the same size");
    sorter = tpu_lower_tensor(cx, 5);
    int64_t all[TPU_MAX_RANK];
    for (int i = 0; i < sr; ++i) all[i] = i;
    tpu_val_t bad = tpu_ir_binary(
        g, TPU_IR_OR, tpu_ir_compare(g, TPU_CMP_LT, sorter, tpu_lower_const_like(cx, sorter, 0)),
        tpu_ir_compare(g, TPU_CMP_GE, sorter, tpu_lower_const_like(cx, sorter, (double)sd[sr - 1])));
    tpu_lower_assert(cx, tpu_ir_reduce(g, bad, tpu_ir_const_i(g, TPU_BOOL, 0, NULL, 0), all, sr,
                                       TPU_BODY_OR),
                     TPU_CODE_INVALID_ARGUMENT, "torch.searchsorted(): sorter index out of range");
  }
  int args[2] = {0, 1};
  tpu_dtype_t t = tpu_lower_result_type(cx, args, 2);
  tpu_dtype_t out = tpu_arg_bool(cx, 2, false) ? TPU_I32 : TPU_I64;
  tpu_val_t seq = tpu_lower_input(cx, 0, t), vals = tpu_lower_input(cx, 1, t);
  tpu_lower_out(cx, 0, insertion_points(cx, seq, sr, sorter, vals, vd, vr, right, out));
  return TPU_OK;
}

//===--- histc ---===//

// histc(Tensor self, int bins=100, Scalar min=0, Scalar max=0): equal-width
// bins over [min, max] (the data's range when both are 0; widened by 1 on
// each side when empty), counted in self's dtype. Values outside the range
// and NaN are not counted; the top edge belongs to the last bin.
tpu_status_t tpu_lower_histc(tpu_lower_ctx_t* cx) {
  tpu_graph_t* g = cx->g;
  tpu_dtype_t t = tpu_arg_value_dtype(cx, 0);
  if (!tpu_dtype_is_float(t) || tpu_dtype_is_complex(t))
    return tpu_not_implemented("histogram_cpu", t);
  int64_t bins = tpu_arg_int(cx, 1, 100);
  if (bins <= 0)
    return tpu_invalid("torch.histogram(): bins must be > 0, but got %lld for dimension 0",
                       (long long)bins);
  double mn = tpu_arg_number(cx, 2, 0), mx = tpu_arg_number(cx, 3, 0);
  if (mn > mx) return tpu_invalid("torch.histc: max must be larger than min");
  int64_t n = tpu_numel(tpu_arg_sizes(cx, 0), tpu_arg_rank(cx, 0)), zero = 0;
  tpu_dtype_t acc = tpu_opmath(t);
  tpu_val_t x = tpu_ir_reshape(g, tpu_lower_input(cx, 0, acc), &n, 1);
  tpu_val_t lo = tpu_lower_number(cx, mn, acc), hi = tpu_lower_number(cx, mx, acc);
  if (mn == mx && n > 0) {  // the data's range, which must be finite
    lo = tpu_ir_reduce(g, x, tpu_ir_const(g, acc, INFINITY, NULL, 0), &zero, 1, TPU_BODY_MIN);
    hi = tpu_ir_reduce(g, x, tpu_ir_const(g, acc, -INFINITY, NULL, 0), &zero, 1, TPU_BODY_MAX);
    tpu_val_t finite = tpu_ir_compare(g, TPU_CMP_LT, tpu_ir_unary(g, TPU_IR_ABS, x),
                                      tpu_ir_const(g, acc, INFINITY, &n, 1));  // NaN: false
    tpu_val_t bad = tpu_ir_reduce(g, tpu_ir_unary(g, TPU_IR_NOT, finite),
                                  tpu_ir_const_i(g, TPU_BOOL, 0, NULL, 0), &zero, 1, TPU_BODY_OR);
    tpu_lower_assert(cx, bad, TPU_CODE_INVALID_ARGUMENT, "torch.histc: range of [min, max] is not finite");
  }
  tpu_val_t one = tpu_ir_const(g, acc, 1, NULL, 0);
  tpu_val_t empty = tpu_ir_compare(g, TPU_CMP_EQ, lo, hi);
  lo = tpu_ir_select(g, empty, tpu_ir_binary(g, TPU_IR_SUB, lo, one), lo);
  hi = tpu_ir_select(g, empty, tpu_ir_binary(g, TPU_IR_ADD, hi, one), hi);
  tpu_val_t lo_n = tpu_ir_broadcast(g, lo, &n, 1, NULL), hi_n = tpu_ir_broadcast(g, hi, &n, 1, NULL);
  // pos = (x - lo) * bins / (hi - lo), each step rounded to self's dtype as
  // CPU computes half precision.
#define R(v) tpu_ir_convert(g, tpu_ir_convert(g, (v), t), acc)
  tpu_val_t width = tpu_ir_broadcast(g, R(tpu_ir_binary(g, TPU_IR_SUB, hi, lo)), &n, 1, NULL);
  tpu_val_t pos = R(tpu_ir_binary(g, TPU_IR_MUL, R(tpu_ir_binary(g, TPU_IR_SUB, x, lo_n)),
                                  tpu_ir_const(g, acc, (double)bins, &n, 1)));
  pos = tpu_ir_convert(g, R(tpu_ir_binary(g, TPU_IR_DIV, pos, width)), TPU_I64);
#undef R
  tpu_val_t last = tpu_ir_const_i(g, TPU_I64, bins - 1, &n, 1);
  pos = tpu_ir_binary(g, TPU_IR_MIN, pos, last);  // the top edge
  tpu_val_t inside = tpu_ir_binary(g, TPU_IR_AND, tpu_ir_compare(g, TPU_CMP_GE, x, lo_n),
                                   tpu_ir_compare(g, TPU_CMP_LE, x, hi_n));
  pos = tpu_ir_select(g, inside, pos, tpu_ir_const_i(g, TPU_I64, bins, &n, 1));  // a spare bin
  int64_t nb = bins + 1;
  tpu_scatter_dims_t dn = {0};
  dn.n_inserted = 1;
  dn.n_to_operand = 1;
  dn.index_vector_dim = 1;
  tpu_val_t counts = tpu_ir_scatter(g, tpu_ir_const(g, t, 0, &nb, 1),
                                    pos,
                                    tpu_ir_const(g, t, 1, &n, 1), &dn, TPU_BODY_ADD);
  tpu_lower_out(cx, 0, tpu_ir_slice(g, counts, &zero, &bins, NULL));
  return TPU_OK;
}
