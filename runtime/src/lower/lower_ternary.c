// Elementwise ops of three operands (lerp, addcmul / addcdiv, clamp,
// where) and fill_.
#include "lower/elementwise.h"

//===--- ternary ops ---===//

// self + w * (end - self) for a small weight, else end - (end - self) * (1 - w):
// PyTorch's lerp, exact at both ends. A complex weight is small when
// re^2 + im^2 < 0.25, CPU's test (no square root), else |w| < 0.5.
tpu_val_t tpu_ew_lerp(tpu_lower_ctx_t* cx, tpu_val_t self, tpu_val_t end, tpu_val_t w) {
  tpu_graph_t* g = cx->g;
  if (!tpu_graph_ok(g)) return TPU_VAL_NONE;
  tpu_val_t small;
  if (tpu_dtype_is_complex(tpu_ir_dtype(g, w))) {
    tpu_val_t re = tpu_ir_unary(g, TPU_IR_REAL, w), im = tpu_ir_unary(g, TPU_IR_IMAG, w);
    tpu_val_t abs2 = tpu_ew_add(g, tpu_ew_mul(g, re, re), tpu_ew_mul(g, im, im));
    small = tpu_ew_cmp_k(cx, TPU_CMP_LT, abs2, 0.25);
  } else {
    small = tpu_ew_cmp_k(cx, TPU_CMP_LT, tpu_ir_unary(g, TPU_IR_ABS, w), 0.5);
  }
  tpu_val_t diff = tpu_ew_sub(g, end, self);
  tpu_val_t lo = tpu_ew_add(g, self, tpu_ew_mul(g, w, diff));
  tpu_val_t rest = tpu_ew_sub(g, tpu_lower_const_like(cx, w, 1), w);
  tpu_val_t hi = tpu_ew_sub(g, end, tpu_ew_mul(g, diff, rest));
  return tpu_ir_select(g, small, lo, hi);
}

// lerp.Scalar(self, end, weight) / lerp.Tensor(self, end, weight): floating
// and complex dtypes, as on CPU.
tpu_status_t tpu_lower_lerp(tpu_lower_ctx_t* cx) {
  tpu_dtype_t t = tpu_arg_value_dtype(cx, 0);
  tpu_dtype_t e = tpu_arg_value_dtype(cx, 1);
  if (e != t)
    return tpu_status_make(TPU_CODE_INVALID_ARGUMENT,
                           "expected dtype %s for `end` but got dtype %s",
                           tpu_dtype_cpp_name(t), tpu_dtype_cpp_name(e));
  // A 0-d weight may have another dtype (it is a scalar to PyTorch).
  if (tpu_arg_is_tensor(cx, 2) && tpu_arg_rank(cx, 2) > 0 && tpu_arg_value_dtype(cx, 2) != t)
    return tpu_status_make(TPU_CODE_INVALID_ARGUMENT,
                           "expected dtype %s for `weight` but got dtype %s",
                           tpu_dtype_cpp_name(t), tpu_dtype_cpp_name(tpu_arg_value_dtype(cx, 2)));
  if (!tpu_dtype_is_float(t) && !tpu_dtype_is_complex(t))
    return tpu_not_implemented(cx->row->name, t);
  int args[3] = {0, 1, 2};
  tpu_val_t v[3];
  TPU_RETURN_IF_ERROR(tpu_lower_broadcast_inputs(cx, args, 3, tpu_opmath(t), v));
  tpu_lower_out(cx, 0, tpu_ir_convert(cx->g, tpu_ew_lerp(cx, v[0], v[1], v[2]), t));
  return TPU_OK;
}

// addcmul / addcdiv(self, tensor1, tensor2, *, value=1):
// self + value * tensor1 (* or /) tensor2, in that order.
static tpu_status_t addc(tpu_lower_ctx_t* cx, tpu_ir_op_t op) {
  int args[3] = {0, 1, 2};
  tpu_dtype_t t = tpu_lower_result_type(cx, args, 3);
  if (t == TPU_DTYPE_INVALID) return tpu_ew_promotion_error(cx, 1, 2);
  if (op == TPU_IR_DIV && tpu_dtype_is_integral(tpu_arg_value_dtype(cx, 1), true) &&
      tpu_dtype_is_integral(tpu_arg_value_dtype(cx, 2), true))
    return tpu_status_make(
        TPU_CODE_INVALID_ARGUMENT,
        "Integer division with addcdiv is no longer supported, and in a future  "
        "release addcdiv will perform a true division of tensor1 and tensor2. The "
        "historic addcdiv behavior can be implemented as (input + value * "
        "torch.trunc(tensor1 / tensor2)).to(input.dtype) if both inputs are integer "
        "tensors and using (input + value * tensor1 / tensor2) otherwise.");
  if (t == TPU_BOOL) return tpu_not_implemented(cx->row->name, t);
  // (value is converted to the computation type: float for half types)
  if (tpu_arg_present(cx, 3) && !tpu_lower_number_fits(cx, 3, tpu_opmath(t))) return TPU_OK;
  tpu_graph_t* g = cx->g;
  tpu_val_t v[3];
  TPU_RETURN_IF_ERROR(tpu_ew_inputs(cx, args, 3, t, tpu_opmath(t), 0, v));
  tpu_val_t scaled = v[1];
  // (complex: always, as CPU, whose 1 + 0j makes an infinite part's partner NaN)
  if (tpu_arg_present(cx, 3) && (tpu_dtype_is_complex(t) || !tpu_arg_number_is(cx, 3, 1, 1)))
    scaled = tpu_ew_mul(g, tpu_ew_arg_like(cx, 3, v[1], 1), v[1]);
  tpu_val_t r = tpu_ew_add(g, v[0], tpu_ir_binary(g, op, scaled, v[2]));
  tpu_lower_out(cx, 0, tpu_ir_convert(g, r, t));
  return TPU_OK;
}
tpu_status_t tpu_lower_addcmul(tpu_lower_ctx_t* cx) { return addc(cx, TPU_IR_MUL); }
tpu_status_t tpu_lower_addcdiv(tpu_lower_ctx_t* cx) { return addc(cx, TPU_IR_DIV); }

// clamp(self, min, max) with Scalar or Tensor bounds (either may be None):
// min(max(x, lo), hi), NaN in any operand giving NaN.
static tpu_status_t clamp_impl(tpu_lower_ctx_t* cx, int lo_arg, int hi_arg) {
  bool has_lo = tpu_arg_present(cx, lo_arg), has_hi = tpu_arg_present(cx, hi_arg);
  if (!has_lo && !has_hi)
    return tpu_status_make(TPU_CODE_INVALID_ARGUMENT,
                           "torch.clamp: At least one of 'min' or 'max' must not be None");
  int args[3] = {0, lo_arg, hi_arg};
  tpu_dtype_t t = tpu_lower_result_type(cx, args, 3);
  if (t == TPU_DTYPE_INVALID) return tpu_ew_promotion_error(cx, 0, has_lo ? lo_arg : hi_arg);
  if (tpu_dtype_is_complex(t)) return tpu_not_implemented(cx->row->name, t);
  if (t == TPU_BOOL && !tpu_arg_is_tensor(cx, has_lo ? lo_arg : hi_arg))
    return tpu_not_implemented(cx->row->name, t);
  if ((has_lo && !tpu_lower_number_fits(cx, lo_arg, t)) ||
      (has_hi && !tpu_lower_number_fits(cx, hi_arg, t)))
    return TPU_OK;  // the graph's error
  tpu_val_t v[3];
  TPU_RETURN_IF_ERROR(tpu_ew_inputs(cx, args, 3, t, tpu_opmath(t), 6, v));
  tpu_val_t r = v[0];
  if (has_lo) r = tpu_ew_max(cx, r, v[1]);
  if (has_hi) r = tpu_ew_min(cx, r, v[2]);
  tpu_lower_out(cx, 0, tpu_ir_convert(cx->g, r, t));
  return TPU_OK;
}
tpu_status_t tpu_lower_clamp(tpu_lower_ctx_t* cx) { return clamp_impl(cx, 1, 2); }
tpu_status_t tpu_lower_clamp_min(tpu_lower_ctx_t* cx) { return clamp_impl(cx, 1, -1); }
tpu_status_t tpu_lower_clamp_max(tpu_lower_ctx_t* cx) { return clamp_impl(cx, -1, 1); }

//===--- selection and filling ---===//

// where(condition, self, other)
tpu_status_t tpu_lower_where(tpu_lower_ctx_t* cx) {
  int xy[2] = {1, 2};
  tpu_dtype_t t = tpu_lower_result_type(cx, xy, 2);
  if (t == TPU_DTYPE_INVALID) return tpu_ew_promotion_error(cx, 1, 2);
  tpu_dtype_t c = tpu_arg_value_dtype(cx, 0);
  if (c != TPU_BOOL && c != TPU_U8)
    return tpu_status_make(TPU_CODE_INVALID_ARGUMENT,
                           "where expected condition to be a boolean tensor, "
                           "but got a tensor with dtype %s", tpu_dtype_torch_name(c));
  int all[3] = {0, 1, 2};
  tpu_val_t v[3];
  TPU_RETURN_IF_ERROR(tpu_lower_broadcast_inputs(cx, all, 3, t, v));
  // The condition is read as bool itself (complex values have no convert
  // to bool).
  const tpu_type_t* ty = tpu_graph_ok(cx->g) ? tpu_ir_type(cx->g, v[1]) : NULL;
  tpu_val_t cond = ty ? tpu_lower_expand(cx, tpu_lower_input(cx, 0, TPU_BOOL), ty->dims, ty->rank)
                      : TPU_VAL_NONE;
  tpu_lower_out(cx, 0, tpu_ir_select(cx->g, cond, v[1], v[2]));
  return TPU_OK;
}

// fill_(self, value): value is a number or a 0-d tensor.
tpu_status_t tpu_lower_fill(tpu_lower_ctx_t* cx) {
  const tpu_arg_t* self = tpu_arg(cx, 0);
  if (tpu_arg_is_tensor(cx, 1) && tpu_arg_rank(cx, 1) != 0)
    return tpu_status_make(TPU_CODE_INVALID_ARGUMENT,
                           "fill_ only supports 0-dimension value tensor but got "
                           "tensor with %d dimensions.", tpu_arg_rank(cx, 1));
  tpu_val_t v = tpu_lower_fill_value(cx, 1, self->tensor->dtype, false);
  tpu_lower_out(cx, 0, tpu_ir_broadcast(cx->g, v, self->tensor->sizes, self->tensor->rank, NULL));
  return TPU_OK;
}
