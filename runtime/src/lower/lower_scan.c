// Scans: cumsum and cumprod, and the scan other lowerings build on
// (tpu_lower_scan). Integer and bool inputs accumulate in int64, as in
// PyTorch's sums (lower_reduce.c).
#include <string.h>

#include "lower/lower.h"

// Hillis-Steele: each of log2(n) steps combines x with itself shifted by
// 2^k, padded with the identity. O(n log n) work with no quadratic window,
// on any backend.
tpu_val_t tpu_lower_scan(tpu_lower_ctx_t* cx, tpu_val_t x, int dim, tpu_ir_op_t op,
                         double identity) {
  tpu_graph_t* g = cx->g;
  const tpu_type_t* t = tpu_ir_type(g, x);
  tpu_type_t shape = *t;
  int64_t len = shape.dims[dim];
  tpu_val_t id = tpu_ir_const(g, shape.dtype, identity, NULL, 0);
  int64_t start[TPU_MAX_RANK] = {0}, limit[TPU_MAX_RANK], lo[TPU_MAX_RANK] = {0},
          hi[TPU_MAX_RANK] = {0};
  for (int64_t k = 1; k < len; k <<= 1) {
    memcpy(limit, shape.dims, sizeof(int64_t) * (size_t)shape.rank);
    limit[dim] = len - k;
    lo[dim] = k;
    tpu_val_t shifted = tpu_ir_pad(g, tpu_ir_slice(g, x, start, limit, NULL), id, lo, hi, NULL);
    x = tpu_ir_binary(g, op, x, shifted);
  }
  return x;
}

// cumsum / cumprod(self, dim, *, dtype=None)
static tpu_status_t cumulative(tpu_lower_ctx_t* cx, bool is_prod) {
  tpu_dtype_t in = tpu_arg_value_dtype(cx, 0);
  tpu_dtype_t out = tpu_dtype_is_integral(in, true) ? TPU_I64 : in;
  out = tpu_arg_dtype(cx, 2, tpu_lower_out_dtype(cx, 0, out));  // as in accumulate()
  if (out == TPU_BOOL)  // CPU's and CUDA's scans have no bool kernel
    return tpu_not_implemented(is_prod ? "cumprod" : "cumsum", out);
  int rank = tpu_arg_rank(cx, 0);
  int64_t dim;
  TPU_RETURN_IF_ERROR(tpu_wrap_dim(tpu_arg_int(cx, 1, 0), rank, &dim));
  tpu_dtype_t acc = tpu_opmath(out);
  tpu_val_t x = tpu_lower_input(cx, 0, acc);
  if (rank > 0)
    x = tpu_lower_scan(cx, x, (int)dim, is_prod ? TPU_IR_MUL : TPU_IR_ADD, is_prod ? 1 : 0);
  tpu_lower_out(cx, 0, tpu_ir_convert(cx->g, x, out));
  return TPU_OK;
}

tpu_status_t tpu_lower_cumsum(tpu_lower_ctx_t* cx) { return cumulative(cx, false); }
tpu_status_t tpu_lower_cumprod(tpu_lower_ctx_t* cx) { return cumulative(cx, true); }
