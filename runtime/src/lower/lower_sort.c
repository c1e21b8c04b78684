// Sorting and selection: sort, topk, kthvalue.
//
// All three sort (value, position) pairs stably along the dim with
// stablehlo.sort, whose comparator puts NaN last ascending and first
// descending as torch.sort does. A stable sort makes ties come out in their
// original order, which is what PyTorch's stable sort returns and a valid
// answer for topk and kthvalue (whose tie order PyTorch leaves open).
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

static int64_t numel(const int64_t* d, int n) {
  int64_t p = 1;
  for (int i = 0; i < n; ++i) p *= d[i];
  return p;
}

static tpu_status_t check_sortable(tpu_lower_ctx_t* cx, const char* op) {
  tpu_dtype_t t = tpu_arg_value_dtype(cx, 0);
  if (tpu_dtype_is_complex(t))
    return TPU_LOWER_ERROR(TPU_CODE_UNIMPLEMENTED, "\"%s\" not implemented for '%s'", op,
                           tpu_dtype_torch_name(t));
  return TPU_OK;
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
  if (rank == 0 || numel(d, rank) == 0 || d[dim] == 1) {
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

// topk(Tensor self, SymInt k, int dim=-1, bool largest=True, bool sorted=True)
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
  int64_t out[TPU_MAX_RANK];
  memcpy(out, d, sizeof out);
  out[dim] = k;
  tpu_dtype_t t = tpu_arg_value_dtype(cx, 0);
  if (numel(out, n) == 0) {
    tpu_lower_out(cx, 0, tpu_ir_const(g, t, 0, out, rank));
    tpu_lower_out(cx, 1, tpu_ir_const_i(g, TPU_I64, 0, out, rank));
    return TPU_OK;
  }
  tpu_val_t x = tpu_ir_reshape(g, tpu_lower_tensor(cx, 0), d, n);
  tpu_val_t v, i;
  sort_pairs(cx, x, d, n, (int)dim, largest, &v, &i);
  v = slice_dim(g, v, d, n, (int)dim, 0, k);
  i = slice_dim(g, i, d, n, (int)dim, 0, k);
  tpu_lower_out(cx, 0, tpu_ir_reshape(g, v, out, rank));
  tpu_lower_out(cx, 1, tpu_ir_reshape(g, i, out, rank));
  return TPU_OK;
}

// kthvalue(Tensor self, SymInt k, int dim=-1, bool keepdim=False): the k-th
// smallest (NaN counts as the largest).
tpu_status_t tpu_lower_kthvalue(tpu_lower_ctx_t* cx) {
  tpu_graph_t* g = cx->g;
  TPU_RETURN_IF_ERROR(check_sortable(cx, "kthvalue"));
  int rank = tpu_arg_rank(cx, 0);
  int64_t dim;
  TPU_RETURN_IF_ERROR(tpu_wrap_dim(tpu_arg_int(cx, 2, -1), rank, &dim));
  int64_t k = tpu_arg_int(cx, 1, 0);
  bool keepdim = tpu_arg_bool(cx, 3, false);
  int64_t d[TPU_MAX_RANK];
  int n = rank ? rank : 1;
  if (rank) memcpy(d, tpu_arg_sizes(cx, 0), sizeof(int64_t) * (size_t)rank);
  else d[0] = 1;
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
