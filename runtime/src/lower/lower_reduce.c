// Reductions. PyTorch accumulates half-precision inputs in float; integer
// and bool sums are int64.
#include <string.h>

#include "lower/lower.h"

// The dims to reduce (sorted, distinct, wrapped) from an optional int list;
// an absent or empty list means all dims.
static tpu_status_t reduce_dims(tpu_lower_ctx_t* cx, int arg, int rank,
                                int64_t* dims, int* n) {
  const int64_t* list;
  int count = tpu_arg_ints(cx, arg, &list);
  bool seen[TPU_MAX_RANK] = {0};
  *n = 0;
  if (count == 0) {
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

// Reshapes a reduced value back to rank with size-1 dims (keepdim=True).
static tpu_val_t keep_dims(tpu_lower_ctx_t* cx, tpu_val_t v, const int64_t* in_dims,
                           int rank, const int64_t* dims, int n) {
  int64_t shape[TPU_MAX_RANK];
  for (int i = 0; i < rank; ++i) shape[i] = in_dims[i];
  for (int i = 0; i < n; ++i) shape[dims[i]] = 1;
  return tpu_ir_reshape(cx->g, v, shape, rank);
}

// sum(self, dims, keepdim, dtype) with args at the given positions (-1 = absent).
static tpu_status_t sum_impl(tpu_lower_ctx_t* cx, int dim_arg, int keep_arg, int dtype_arg) {
  tpu_dtype_t in = tpu_arg_value_dtype(cx, 0);
  tpu_dtype_t out = tpu_dtype_is_integral(in, true) ? TPU_I64 : in;
  out = tpu_arg_dtype(cx, dtype_arg, out);
  int rank = tpu_arg_rank(cx, 0);
  int64_t dims[TPU_MAX_RANK];
  int n;
  TPU_RETURN_IF_ERROR(reduce_dims(cx, dim_arg, rank, dims, &n));
  tpu_dtype_t acc = tpu_opmath(out);
  tpu_val_t x = tpu_lower_input(cx, 0, acc);
  tpu_val_t r = tpu_ir_reduce(cx->g, x, tpu_ir_const(cx->g, acc, 0, NULL, 0), dims, n, TPU_BODY_ADD);
  if (tpu_arg_bool(cx, keep_arg, false))
    r = keep_dims(cx, r, tpu_arg_sizes(cx, 0), rank, dims, n);
  tpu_lower_out(cx, 0, tpu_ir_convert(cx->g, r, out));
  return TPU_OK;
}

// sum.dim_IntList(self, dim, keepdim=False, *, dtype=None)
tpu_status_t tpu_lower_sum(tpu_lower_ctx_t* cx) { return sum_impl(cx, 1, 2, 3); }
// sum(self, *, dtype=None)
tpu_status_t tpu_lower_sum_all(tpu_lower_ctx_t* cx) { return sum_impl(cx, -1, -1, 1); }
