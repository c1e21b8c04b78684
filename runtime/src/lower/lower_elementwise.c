// Elementwise ops: the generic UNARY / BINARY / COMPARE rows and the
// arithmetic that needs more than one IR op.
//
// PyTorch computes half-precision elementwise math in float ("opmath") and
// rounds once at the end; so do we, which keeps bf16/f16 results equal to
// CPU's.
#include <string.h>

#include "lower/lower.h"

static tpu_status_t promotion_error(tpu_lower_ctx_t* cx, int a, int b) {
  return tpu_status_make(TPU_CODE_INVALID_ARGUMENT,
                         "Promotion for uint16, uint32, uint64 types is not "
                         "supported, attempted to promote %s and %s",
                         tpu_dtype_torch_name(tpu_arg_value_dtype(cx, a)),
                         tpu_dtype_torch_name(tpu_arg_value_dtype(cx, b)));
}

// Checks a row's dtype rule; returns the result dtype in *out.
static tpu_status_t apply_rule(tpu_lower_ctx_t* cx, tpu_dtype_t t, tpu_dtype_t* out) {
  const char* name = cx->row->name;
  switch (cx->row->rule) {
    case TPU_RULE_FLOAT: *out = tpu_to_float(t); return TPU_OK;
    case TPU_RULE_BOOL: *out = TPU_BOOL; return TPU_OK;
    case TPU_RULE_INTEGRAL:
      if (!tpu_dtype_is_integral(t, true))
        return tpu_status_make(TPU_CODE_UNIMPLEMENTED, "\"%s\" not implemented for '%s'",
                               name, tpu_dtype_torch_name(t));
      break;
    case TPU_RULE_NOT_BOOL:
      if (t == TPU_BOOL)
        return tpu_status_make(TPU_CODE_UNIMPLEMENTED, "\"%s\" not implemented for 'Bool'", name);
      break;
    case TPU_RULE_NOT_COMPLEX:
      if (tpu_dtype_is_complex(t))
        return tpu_status_make(TPU_CODE_INVALID_ARGUMENT,
                               "%s not implemented for complex tensors.", name);
      break;
    case TPU_RULE_SAME: break;
  }
  *out = t;
  return TPU_OK;
}

tpu_status_t tpu_lower_unary(tpu_lower_ctx_t* cx) {
  tpu_dtype_t in = tpu_arg_value_dtype(cx, 0), out;
  TPU_RETURN_IF_ERROR(apply_rule(cx, in, &out));
  tpu_dtype_t compute = tpu_opmath(out);
  tpu_val_t x = tpu_lower_input(cx, 0, compute);
  tpu_lower_out(cx, 0, tpu_ir_convert(cx->g, tpu_ir_unary(cx->g, cx->row->ir_op, x), out));
  return TPU_OK;
}

// Promotes args a and b; the common dtype goes to *t.
static tpu_status_t promote2(tpu_lower_ctx_t* cx, tpu_dtype_t* t) {
  int ab[2] = {0, 1};
  *t = tpu_lower_result_type(cx, ab, 2);
  if (*t == TPU_DTYPE_INVALID) return promotion_error(cx, 0, 1);
  return TPU_OK;
}

// op(a, b) computed in `compute`, both broadcast to a common shape.
static tpu_status_t binary_inputs(tpu_lower_ctx_t* cx, tpu_dtype_t compute,
                                  tpu_val_t* a, tpu_val_t* b) {
  int ab[2] = {0, 1};
  tpu_val_t v[2];
  TPU_RETURN_IF_ERROR(tpu_lower_broadcast_inputs(cx, ab, 2, compute, v));
  *a = v[0];
  *b = v[1];
  return TPU_OK;
}

tpu_status_t tpu_lower_binary(tpu_lower_ctx_t* cx) {
  tpu_dtype_t t, out;
  TPU_RETURN_IF_ERROR(promote2(cx, &t));
  TPU_RETURN_IF_ERROR(apply_rule(cx, t, &out));
  tpu_val_t a, b;
  TPU_RETURN_IF_ERROR(binary_inputs(cx, tpu_opmath(out), &a, &b));
  tpu_lower_out(cx, 0, tpu_ir_convert(cx->g, tpu_ir_binary(cx->g, cx->row->ir_op, a, b), out));
  return TPU_OK;
}

tpu_status_t tpu_lower_compare(tpu_lower_ctx_t* cx) {
  tpu_dtype_t t;
  TPU_RETURN_IF_ERROR(promote2(cx, &t));
  tpu_val_t a, b;
  TPU_RETURN_IF_ERROR(binary_inputs(cx, tpu_opmath(t), &a, &b));
  tpu_lower_out(cx, 0, tpu_ir_compare(cx->g, (tpu_cmp_t)cx->row->ir_op, a, b));
  return TPU_OK;
}

// add / sub: a ± alpha * b, with PyTorch's checks on alpha.
static tpu_status_t add_sub(tpu_lower_ctx_t* cx, tpu_ir_op_t op) {
  tpu_dtype_t t;
  TPU_RETURN_IF_ERROR(promote2(cx, &t));
  if (op == TPU_IR_SUB && t == TPU_BOOL)
    return tpu_status_make(TPU_CODE_INVALID_ARGUMENT,
                           "Subtraction, the `-` operator, with two bool tensors "
                           "is not supported. Use the `^` or `logical_xor()` "
                           "operator instead.");
  const tpu_arg_t* alpha = tpu_arg(cx, 2);
  bool has_alpha = alpha->kind == TPU_ARG_SCALAR && tpu_arg_number(cx, 2, 1) != 1;
  if (alpha->kind == TPU_ARG_SCALAR) {
    tpu_dtype_kind_t k = tpu_dtype_kind(alpha->scalar.dtype);
    if (tpu_dtype_is_integral(t, true) && (k == TPU_KIND_FLOAT || k == TPU_KIND_COMPLEX))
      return tpu_status_make(TPU_CODE_INVALID_ARGUMENT,
                             "For integral input tensors, argument alpha must "
                             "not be a floating point number.");
    if (t != TPU_BOOL && k == TPU_KIND_BOOL)
      return tpu_status_make(TPU_CODE_INVALID_ARGUMENT,
                             "Boolean alpha only supported for Boolean results.");
  }
  tpu_dtype_t compute = tpu_opmath(t);
  tpu_val_t a, b;
  TPU_RETURN_IF_ERROR(binary_inputs(cx, compute, &a, &b));
  if (has_alpha) {
    tpu_val_t s = tpu_lower_scalar(cx, &alpha->scalar, compute);
    const tpu_type_t* bt = tpu_ir_type(cx->g, b);
    b = tpu_ir_binary(cx->g, TPU_IR_MUL, b, tpu_ir_broadcast(cx->g, s, bt->dims, bt->rank, NULL));
  }
  tpu_ir_op_t ir = t == TPU_BOOL ? TPU_IR_OR : op;
  tpu_lower_out(cx, 0, tpu_ir_convert(cx->g, tpu_ir_binary(cx->g, ir, a, b), t));
  return TPU_OK;
}

tpu_status_t tpu_lower_add(tpu_lower_ctx_t* cx) { return add_sub(cx, TPU_IR_ADD); }
tpu_status_t tpu_lower_sub(tpu_lower_ctx_t* cx) { return add_sub(cx, TPU_IR_SUB); }

// div: true division, or rounded with rounding_mode "trunc" / "floor".
tpu_status_t tpu_lower_div(tpu_lower_ctx_t* cx) {
  tpu_dtype_t t;
  TPU_RETURN_IF_ERROR(promote2(cx, &t));
  const char* mode = tpu_arg_string(cx, 2, NULL);
  if (mode && strcmp(mode, "trunc") && strcmp(mode, "floor"))
    return tpu_status_make(TPU_CODE_INVALID_ARGUMENT,
                           "div expected rounding_mode to be one of None, "
                           "'trunc', or 'floor' but found '%s'", mode);
  tpu_graph_t* g = cx->g;
  if (!mode) {  // true division, in float
    tpu_dtype_t out = tpu_to_float(t);
    tpu_val_t a, b;
    TPU_RETURN_IF_ERROR(binary_inputs(cx, tpu_opmath(out), &a, &b));
    tpu_lower_out(cx, 0, tpu_ir_convert(g, tpu_ir_binary(g, TPU_IR_DIV, a, b), out));
    return TPU_OK;
  }
  tpu_dtype_t compute = tpu_opmath(t);
  tpu_val_t a, b;
  TPU_RETURN_IF_ERROR(binary_inputs(cx, compute, &a, &b));
  tpu_val_t q;
  if (tpu_dtype_is_integral(t, true)) {
    tpu_val_t zero = tpu_lower_const_like(cx, b, 0);
    tpu_lower_assert(cx, tpu_ir_reduce(g, tpu_ir_compare(g, TPU_CMP_EQ, b, zero),
                                       tpu_ir_const_i(g, TPU_BOOL, 0, NULL, 0),
                                       (int64_t[]){0, 1, 2, 3, 4, 5, 6, 7},
                                       tpu_ir_rank(g, b), TPU_BODY_OR),
                     TPU_CODE_INVALID_ARGUMENT, "ZeroDivisionError");
    q = tpu_ir_binary(g, TPU_IR_DIV, a, b);  // truncates
    if (!strcmp(mode, "floor")) {
      // Round toward -inf: step down when the remainder is non-zero and the
      // signs differ.
      tpu_val_t r = tpu_ir_binary(g, TPU_IR_REM, a, b);
      tpu_val_t nz = tpu_ir_compare(g, TPU_CMP_NE, r, zero);
      tpu_val_t neg = tpu_ir_compare(g, TPU_CMP_NE, tpu_ir_compare(g, TPU_CMP_LT, r, zero),
                                     tpu_ir_compare(g, TPU_CMP_LT, b, zero));
      tpu_val_t one = tpu_lower_const_like(cx, q, 1);
      q = tpu_ir_select(g, tpu_ir_binary(g, TPU_IR_AND, nz, neg),
                        tpu_ir_binary(g, TPU_IR_SUB, q, one), q);
    }
  } else {
    tpu_val_t d = tpu_ir_binary(g, TPU_IR_DIV, a, b);
    if (!strcmp(mode, "trunc")) {
      tpu_val_t zero = tpu_lower_const_like(cx, d, 0);
      q = tpu_ir_select(g, tpu_ir_compare(g, TPU_CMP_LT, d, zero),
                        tpu_ir_unary(g, TPU_IR_CEIL, d), tpu_ir_unary(g, TPU_IR_FLOOR, d));
    } else {
      // PyTorch's floor division: floor((a - fmod(a, b)) / b), corrected.
      tpu_val_t m = tpu_ir_binary(g, TPU_IR_REM, a, b);
      tpu_val_t div = tpu_ir_binary(g, TPU_IR_DIV, tpu_ir_binary(g, TPU_IR_SUB, a, m), b);
      tpu_val_t zero = tpu_lower_const_like(cx, m, 0);
      tpu_val_t fix = tpu_ir_binary(g, TPU_IR_AND, tpu_ir_compare(g, TPU_CMP_NE, m, zero),
                                    tpu_ir_compare(g, TPU_CMP_NE,
                                                   tpu_ir_compare(g, TPU_CMP_LT, b, zero),
                                                   tpu_ir_compare(g, TPU_CMP_LT, m, zero)));
      div = tpu_ir_select(g, fix, tpu_ir_binary(g, TPU_IR_SUB, div, tpu_lower_const_like(cx, div, 1)), div);
      tpu_val_t fl = tpu_ir_unary(g, TPU_IR_FLOOR, div);
      tpu_val_t half = tpu_lower_const_like(cx, div, 0.5);
      fl = tpu_ir_select(g, tpu_ir_compare(g, TPU_CMP_GT, tpu_ir_binary(g, TPU_IR_SUB, div, fl), half),
                         tpu_ir_binary(g, TPU_IR_ADD, fl, tpu_lower_const_like(cx, fl, 1)), fl);
      // b == 0 gives a / b (inf or nan), as PyTorch.
      q = tpu_ir_select(g, tpu_ir_compare(g, TPU_CMP_EQ, b, tpu_lower_const_like(cx, b, 0)), d, fl);
    }
  }
  tpu_lower_out(cx, 0, tpu_ir_convert(g, q, t));
  return TPU_OK;
}

tpu_status_t tpu_lower_neg(tpu_lower_ctx_t* cx) {
  tpu_dtype_t t = tpu_arg_value_dtype(cx, 0);
  if (t == TPU_BOOL)
    return tpu_status_make(TPU_CODE_INVALID_ARGUMENT,
                           "Negation, the `-` operator, on a bool tensor is not "
                           "supported. If you are trying to invert a mask, use "
                           "the `~` or `logical_not()` operator instead.");
  tpu_lower_out(cx, 0, tpu_ir_unary(cx->g, TPU_IR_NEG, tpu_lower_tensor(cx, 0)));
  return TPU_OK;
}

// where(condition, self, other)
tpu_status_t tpu_lower_where(tpu_lower_ctx_t* cx) {
  int xy[2] = {1, 2};
  tpu_dtype_t t = tpu_lower_result_type(cx, xy, 2);
  if (t == TPU_DTYPE_INVALID) return promotion_error(cx, 1, 2);
  tpu_dtype_t c = tpu_arg_value_dtype(cx, 0);
  if (c != TPU_BOOL && c != TPU_U8)
    return tpu_status_make(TPU_CODE_INVALID_ARGUMENT,
                           "where expected condition to be a boolean tensor, "
                           "but got a tensor with dtype %s", tpu_dtype_torch_name(c));
  int all[3] = {0, 1, 2};
  tpu_val_t v[3];
  TPU_RETURN_IF_ERROR(tpu_lower_broadcast_inputs(cx, all, 3, t, v));
  tpu_val_t cond = tpu_ir_convert(cx->g, v[0], TPU_BOOL);
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
  tpu_val_t v = tpu_lower_input(cx, 1, self->tensor->dtype);
  tpu_lower_out(cx, 0, tpu_ir_broadcast(cx->g, v, self->tensor->sizes, self->tensor->rank, NULL));
  return TPU_OK;
}
