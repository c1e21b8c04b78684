// Weight normalization (torch.nn.utils.parametrizations.weight_norm, used by
// the positional convolution of wav2vec2-style audio encoders): w = g * v /
// ||v||, the norm taken over every dim but `dim`. PyTorch's fused kernels
// accept only the first or the last dim (torch._weight_norm decomposes the
// others); half-precision inputs are computed in float and the norms stay
// float, as in PyTorch's CPU kernel.
#include <string.h>

#include "lower/lower.h"

// Checks the arguments shared by forward and backward: v (argument iv), g
// (argument ig), dim (argument idim); gives the per-channel dim.
static tpu_status_t check(tpu_lower_ctx_t* cx, int iv, int ig, int idim, const char* vname,
                          int64_t* dim) {
  tpu_dtype_t vt = tpu_arg_value_dtype(cx, iv), gt = tpu_arg_value_dtype(cx, ig);
  int rank = tpu_arg_rank(cx, iv);
  *dim = tpu_arg_int(cx, idim, 0);
  if (*dim != 0 && *dim != rank - 1)
    return tpu_status_make(TPU_CODE_INVALID_ARGUMENT,
                           "dim == 0 || dim == %s.dim() - 1 INTERNAL ASSERT FAILED: fused "
                           "kernels can only be applied for first or last dim", vname);
  if (!tpu_dtype_is_float(vt))
    return tpu_not_implemented("weight_norm_kernel", vt);
  if (gt != vt)
    return tpu_status_make(TPU_CODE_INVALID_ARGUMENT, "expected scalar type %s but found %s",
                           tpu_dtype_torch_name(vt), tpu_dtype_torch_name(gt));
  int64_t channels = rank > 0 ? tpu_arg_sizes(cx, iv)[*dim] : 1;
  int grank = tpu_arg_rank(cx, ig);
  int64_t gn = 1;
  for (int i = 0; i < grank; ++i) gn *= tpu_arg_sizes(cx, ig)[i];
  if (gn != channels)
    return tpu_status_make(TPU_CODE_INVALID_ARGUMENT,
                           "weight_norm: g must have one element per slice of v along dim "
                           "(%lld), got %lld", (long long)channels, (long long)gn);
  return TPU_OK;
}

// Sum over every dim of x (v's shape) but `dim`: a (channels) vector.
static tpu_val_t sum_except(tpu_lower_ctx_t* cx, tpu_val_t x, int rank, int64_t dim,
                            tpu_dtype_t t) {
  int64_t dims[TPU_MAX_RANK];
  int n = 0;
  for (int i = 0; i < rank; ++i)
    if (i != dim) dims[n++] = i;
  if (n == 0) return x;
  return tpu_ir_reduce(cx->g, x, tpu_ir_const(cx->g, t, 0.0, NULL, 0), dims, n, TPU_BODY_ADD);
}

// A per-channel value (any shape with `channels` elements) broadcast over
// v's shape along `dim`.
static tpu_val_t spread(tpu_lower_ctx_t* cx, tpu_val_t c, const int64_t* vdims, int rank,
                        int64_t dim) {
  int64_t n = rank > 0 ? vdims[dim] : 1;
  tpu_val_t flat = tpu_ir_reshape(cx->g, c, &n, 1);
  if (rank == 0) return tpu_ir_reshape(cx->g, flat, NULL, 0);
  return tpu_ir_broadcast(cx->g, flat, vdims, rank, &dim);
}

// _weight_norm_interface(v, g, dim) -> (w, norms): norms has g's shape.
tpu_status_t tpu_lower_weight_norm(tpu_lower_ctx_t* cx) {
  int64_t dim;
  TPU_RETURN_IF_ERROR(check(cx, 0, 1, 2, "v", &dim));
  tpu_graph_t* g = cx->g;
  tpu_dtype_t vt = tpu_arg_value_dtype(cx, 0), t = tpu_opmath(vt);
  int rank = tpu_arg_rank(cx, 0);
  const int64_t* vdims = tpu_arg_sizes(cx, 0);
  tpu_val_t v = tpu_lower_input(cx, 0, t);
  tpu_val_t norm = tpu_ir_unary(g, TPU_IR_SQRT, sum_except(cx, tpu_ir_binary(g, TPU_IR_MUL, v, v),
                                                           rank, dim, t));
  int64_t n = rank > 0 ? vdims[dim] : 1;
  tpu_val_t gv = tpu_ir_reshape(g, tpu_lower_input(cx, 1, t), &n, 1);
  tpu_val_t factor = tpu_ir_binary(g, TPU_IR_DIV, gv, tpu_ir_reshape(g, norm, &n, 1));
  tpu_val_t w = tpu_ir_binary(g, TPU_IR_MUL, v, spread(cx, factor, vdims, rank, dim));
  tpu_lower_out(cx, 0, tpu_ir_convert(g, w, vt));
  tpu_lower_out(cx, 1, tpu_ir_reshape(g, norm, tpu_arg_sizes(cx, 1), tpu_arg_rank(cx, 1)));
  return TPU_OK;
}

// _weight_norm_interface_backward(grad_w, saved_v, saved_g, saved_norms, dim)
// -> (grad_v, grad_g). With s = sum(grad_w * v) over the slice:
// grad_g = s / norm, grad_v = (g / norm) * (grad_w - v * s / norm^2).
tpu_status_t tpu_lower_weight_norm_backward(tpu_lower_ctx_t* cx) {
  int64_t dim;
  TPU_RETURN_IF_ERROR(check(cx, 1, 2, 4, "saved_v", &dim));
  tpu_graph_t* g = cx->g;
  tpu_dtype_t vt = tpu_arg_value_dtype(cx, 1), gt = tpu_arg_value_dtype(cx, 2);
  tpu_dtype_t t = tpu_opmath(vt);
  int rank = tpu_arg_rank(cx, 1);
  const int64_t* vdims = tpu_arg_sizes(cx, 1);
  int64_t n = rank > 0 ? vdims[dim] : 1;
  tpu_val_t gw = tpu_lower_input(cx, 0, t), v = tpu_lower_input(cx, 1, t);
  tpu_val_t gv = tpu_ir_reshape(g, tpu_lower_input(cx, 2, t), &n, 1);
  tpu_val_t norm = tpu_ir_reshape(g, tpu_lower_input(cx, 3, t), &n, 1);
  tpu_val_t s = tpu_ir_reshape(g, sum_except(cx, tpu_ir_binary(g, TPU_IR_MUL, gw, v), rank, dim, t),
                               &n, 1);
  tpu_val_t grad_g = tpu_ir_binary(g, TPU_IR_DIV, s, norm);
  tpu_val_t coef = tpu_ir_binary(g, TPU_IR_DIV, s, tpu_ir_binary(g, TPU_IR_MUL, norm, norm));
  tpu_val_t inner = tpu_ir_binary(g, TPU_IR_SUB, gw,
                                  tpu_ir_binary(g, TPU_IR_MUL, v, spread(cx, coef, vdims, rank, dim)));
  tpu_val_t grad_v = tpu_ir_binary(g, TPU_IR_MUL, spread(cx, tpu_ir_binary(g, TPU_IR_DIV, gv, norm),
                                                         vdims, rank, dim), inner);
  tpu_lower_out(cx, 0, tpu_ir_convert(g, grad_v, vt));
  tpu_lower_out(cx, 1, tpu_ir_convert(g, tpu_ir_reshape(g, grad_g, tpu_arg_sizes(cx, 2),
                                                        tpu_arg_rank(cx, 2)), gt));
  return TPU_OK;
}
