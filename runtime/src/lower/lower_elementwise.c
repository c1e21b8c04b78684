// Elementwise ops: the generic UNARY / BINARY / COMPARE rows and the math
// that needs more than one IR op.
//
// PyTorch computes half-precision elementwise math in float ("opmath") and
// rounds once at the end; so do we, which keeps bf16/f16 results equal to
// CPU's. Where CPU's kernels special-case NaN, infinities or signed zeros,
// the lowering spells the same cases out: XLA's own ops differ there (its
// CPU max/min drop a NaN second operand, for one).
#include <float.h>
#include <math.h>
#include <string.h>

#include "lower/elementwise.h"

tpu_status_t tpu_ew_promotion_error(tpu_lower_ctx_t* cx, int a, int b) {
  return tpu_status_make(TPU_CODE_INVALID_ARGUMENT,
                         "Promotion for uint16, uint32, uint64 types is not "
                         "supported, attempted to promote %s and %s",
                         tpu_dtype_torch_name(tpu_arg_value_dtype(cx, a)),
                         tpu_dtype_torch_name(tpu_arg_value_dtype(cx, b)));
}

tpu_status_t tpu_ew_rule(tpu_lower_ctx_t* cx, tpu_rule_t rule, tpu_dtype_t t,
                         tpu_dtype_t* out) {
  switch (rule) {
    case TPU_RULE_FLOAT: *out = tpu_to_float(t); return TPU_OK;
    case TPU_RULE_BOOL: *out = TPU_BOOL; return TPU_OK;
    case TPU_RULE_INTEGRAL:
      if (!tpu_dtype_is_integral(t, true)) return tpu_not_implemented(cx->row->name, t);
      break;
    case TPU_RULE_INTEGER:
      if (!tpu_dtype_is_integral(t, false)) return tpu_not_implemented(cx->row->name, t);
      break;
    case TPU_RULE_FLOATING:
      if (!tpu_dtype_is_float(t)) return tpu_not_implemented(cx->row->name, t);
      break;
    case TPU_RULE_NOT_BOOL:
      if (t == TPU_BOOL) return tpu_not_implemented(cx->row->name, t);
      break;
    case TPU_RULE_NOT_COMPLEX:
      if (tpu_dtype_is_complex(t))
        return tpu_status_make(TPU_CODE_INVALID_ARGUMENT,
                               "%s not implemented for complex tensors.", cx->row->name);
      break;
    case TPU_RULE_SAME: break;
  }
  *out = t;
  return TPU_OK;
}

// The dtype math runs in: opmath of the result, or of the inputs when the
// result is bool.
static tpu_dtype_t compute_dtype(tpu_rule_t rule, tpu_dtype_t in, tpu_dtype_t out) {
  return tpu_opmath(rule == TPU_RULE_BOOL ? in : out);
}

tpu_status_t tpu_ew_unary_ex(tpu_lower_ctx_t* cx, tpu_rule_t rule, tpu_ew_fn1 fn,
                             int flags) {
  tpu_dtype_t in = tpu_arg_value_dtype(cx, 0), out;
  if ((flags & TPU_EW_REAL) && tpu_dtype_is_complex(in)) return tpu_not_implemented(cx->row->name, in);
  TPU_RETURN_IF_ERROR(tpu_ew_rule(cx, rule, in, &out));
  tpu_val_t x = tpu_lower_input(cx, 0, compute_dtype(rule, in, out));
  tpu_lower_out(cx, 0, tpu_ir_convert(cx->g, fn(cx, x), out));
  return TPU_OK;
}

tpu_status_t tpu_ew_unary(tpu_lower_ctx_t* cx, tpu_rule_t rule, tpu_ew_fn1 fn) {
  return tpu_ew_unary_ex(cx, rule, fn, 0);
}

// Promotes args a and b; the common dtype goes to *t.
static tpu_status_t promote2(tpu_lower_ctx_t* cx, tpu_dtype_t* t) {
  int ab[2] = {0, 1};
  *t = tpu_lower_result_type(cx, ab, 2);
  if (*t == TPU_DTYPE_INVALID) return tpu_ew_promotion_error(cx, 0, 1);
  return TPU_OK;
}

tpu_status_t tpu_ew_inputs(tpu_lower_ctx_t* cx, const int* args, int n,
                           tpu_dtype_t common, tpu_dtype_t compute, unsigned exact,
                           tpu_val_t* out) {
  int64_t shape[TPU_MAX_RANK];
  int rank = 0;
  for (int k = 0; k < n; ++k) {
    if (!tpu_arg_present(cx, args[k])) continue;
    int64_t next[TPU_MAX_RANK];
    TPU_RETURN_IF_ERROR(tpu_broadcast_shapes(shape, rank, tpu_arg_sizes(cx, args[k]),
                                             tpu_arg_rank(cx, args[k]), next, &rank));
    memcpy(shape, next, sizeof(int64_t) * (size_t)rank);
  }
  for (int k = 0; k < n; ++k) {
    out[k] = TPU_VAL_NONE;
    if (!tpu_arg_present(cx, args[k])) continue;
    bool keep = (exact >> k & 1) && !tpu_arg_is_tensor(cx, args[k]);
    tpu_val_t v = tpu_lower_input(cx, args[k], keep ? compute : common);
    out[k] = tpu_lower_expand(cx, tpu_ir_convert(cx->g, v, compute), shape, rank);
  }
  return TPU_OK;
}

// a and b (args 0 and 1) as values of `compute`, rounded to `common` first
// (numbers in `exact` excepted) and broadcast to one shape.
static tpu_status_t binary_inputs(tpu_lower_ctx_t* cx, tpu_dtype_t common,
                                  tpu_dtype_t compute, unsigned exact,
                                  tpu_val_t* a, tpu_val_t* b) {
  int ab[2] = {0, 1};
  tpu_val_t v[2];
  TPU_RETURN_IF_ERROR(tpu_ew_inputs(cx, ab, 2, common, compute, exact, v));
  *a = v[0];
  *b = v[1];
  return TPU_OK;
}

tpu_status_t tpu_ew_binary_ex(tpu_lower_ctx_t* cx, tpu_rule_t rule, tpu_ew_fn2 fn,
                              int flags) {
  tpu_dtype_t t, out;
  TPU_RETURN_IF_ERROR(promote2(cx, &t));
  if ((flags & TPU_EW_REAL) && tpu_dtype_is_complex(t)) return tpu_not_implemented(cx->row->name, t);
  TPU_RETURN_IF_ERROR(tpu_ew_rule(cx, rule, t, &out));
  tpu_dtype_t common = rule == TPU_RULE_BOOL ? t : out;
  tpu_dtype_t compute = flags & TPU_EW_STORAGE ? common : tpu_opmath(common);
  tpu_val_t a, b;
  TPU_RETURN_IF_ERROR(binary_inputs(cx, common, compute,
                                    flags & TPU_EW_EXACT_OTHER ? 2u : 0u, &a, &b));
  tpu_lower_out(cx, 0, tpu_ir_convert(cx->g, fn(cx, a, b), out));
  return TPU_OK;
}

tpu_status_t tpu_ew_binary(tpu_lower_ctx_t* cx, tpu_rule_t rule, tpu_ew_fn2 fn) {
  return tpu_ew_binary_ex(cx, rule, fn, 0);
}

tpu_val_t tpu_ew_number_like(tpu_lower_ctx_t* cx, tpu_val_t x, double value) {
  if (!tpu_graph_ok(cx->g)) return TPU_VAL_NONE;
  const tpu_type_t* t = tpu_ir_type(cx->g, x);
  tpu_val_t v = tpu_lower_number(cx, value, t->dtype);
  return tpu_ir_broadcast(cx->g, v, t->dims, t->rank, NULL);
}

tpu_val_t tpu_ew_arg_like(tpu_lower_ctx_t* cx, int i, tpu_val_t x, double dflt) {
  if (!tpu_arg_present(cx, i)) return tpu_ew_number_like(cx, x, dflt);
  if (!tpu_graph_ok(cx->g)) return TPU_VAL_NONE;
  const tpu_type_t* t = tpu_ir_type(cx->g, x);
  tpu_val_t v = tpu_lower_input(cx, i, t->dtype);
  return tpu_ir_broadcast(cx->g, v, t->dims, t->rank, NULL);
}

static bool is_float(tpu_graph_t* g, tpu_val_t v) {
  return tpu_graph_ok(g) && tpu_dtype_is_float(tpu_ir_dtype(g, v));
}

tpu_val_t tpu_ew_max(tpu_lower_ctx_t* cx, tpu_val_t a, tpu_val_t b) {
  tpu_graph_t* g = cx->g;
  if (tpu_graph_ok(g) && tpu_ir_dtype(g, a) == TPU_BOOL) return tpu_ir_binary(g, TPU_IR_OR, a, b);
  tpu_val_t m = tpu_ir_binary(g, TPU_IR_MAX, a, b);
  if (!is_float(g, a)) return m;
  return tpu_ir_select(g, tpu_ew_isnan(g, a), a, tpu_ir_select(g, tpu_ew_isnan(g, b), b, m));
}

tpu_val_t tpu_ew_min(tpu_lower_ctx_t* cx, tpu_val_t a, tpu_val_t b) {
  tpu_graph_t* g = cx->g;
  if (tpu_graph_ok(g) && tpu_ir_dtype(g, a) == TPU_BOOL) return tpu_ir_binary(g, TPU_IR_AND, a, b);
  tpu_val_t m = tpu_ir_binary(g, TPU_IR_MIN, a, b);
  if (!is_float(g, a)) return m;
  return tpu_ir_select(g, tpu_ew_isnan(g, a), a, tpu_ir_select(g, tpu_ew_isnan(g, b), b, m));
}

// Raises PyTorch's integer "ZeroDivisionError" when any element of b is 0.
static void assert_nonzero(tpu_lower_ctx_t* cx, tpu_val_t b) {
  tpu_graph_t* g = cx->g;
  if (!tpu_graph_ok(g)) return;
  int rank = tpu_ir_rank(g, b);
  int64_t dims[TPU_MAX_RANK];
  for (int i = 0; i < rank; ++i) dims[i] = i;
  tpu_val_t zero = tpu_lower_const_like(cx, b, 0);
  tpu_lower_assert(cx, tpu_ir_reduce(g, tpu_ir_compare(g, TPU_CMP_EQ, b, zero),
                                     tpu_ir_const_i(g, TPU_BOOL, 0, NULL, 0), dims,
                                     rank, TPU_BODY_OR),
                   TPU_CODE_INVALID_ARGUMENT, "ZeroDivisionError");
}

// The same-width integer type of a float type (for bit manipulation).
static tpu_dtype_t bits_dtype(tpu_dtype_t t) {
  switch (t) {
    case TPU_F64: return TPU_I64;
    case TPU_F16:
    case TPU_BF16: return TPU_I16;
    default: return TPU_I32;
  }
}

static tpu_val_t bitcast_to(tpu_graph_t* g, tpu_val_t x, tpu_dtype_t dtype) {
  if (!tpu_graph_ok(g)) return TPU_VAL_NONE;
  tpu_type_t t = *tpu_ir_type(g, x);
  t.dtype = dtype;
  return tpu_ir_bitcast(g, x, &t);
}

tpu_val_t tpu_ew_copysign(tpu_lower_ctx_t* cx, tpu_val_t a, tpu_val_t b) {
  tpu_graph_t* g = cx->g;
  if (!tpu_graph_ok(g)) return TPU_VAL_NONE;
  tpu_dtype_t ft = tpu_ir_dtype(g, a), it = bits_dtype(ft);
  const tpu_type_t* ty = tpu_ir_type(g, a);
  uint64_t sign = (uint64_t)1 << (8 * tpu_dtype_size(it) - 1);
  tpu_val_t sign_mask = tpu_ir_const_bits(g, it, sign, ty->dims, ty->rank);
  tpu_val_t mag_mask = tpu_ir_const_bits(g, it, sign - 1, ty->dims, ty->rank);
  tpu_val_t bits = tpu_ir_binary(g, TPU_IR_OR,
                                 tpu_ir_binary(g, TPU_IR_AND, bitcast_to(g, a, it), mag_mask),
                                 tpu_ir_binary(g, TPU_IR_AND, bitcast_to(g, b, it), sign_mask));
  return bitcast_to(g, bits, ft);
}
//===--- generic rows ---===//

static tpu_val_t row_unary(tpu_lower_ctx_t* cx, tpu_val_t x) {
  return tpu_ir_unary(cx->g, cx->row->ir_op, x);
}

static tpu_val_t row_binary(tpu_lower_ctx_t* cx, tpu_val_t a, tpu_val_t b) {
  return tpu_ir_binary(cx->g, cx->row->ir_op, a, b);
}

static tpu_val_t row_compare(tpu_lower_ctx_t* cx, tpu_val_t a, tpu_val_t b) {
  return tpu_ir_compare(cx->g, (tpu_cmp_t)cx->row->ir_op, a, b);
}

// Whether PyTorch defines a generic row's op for complex numbers (chlo's
// erf family and lgamma take none; complex numbers have no order).
static int complex_flags(const tpu_op_row_t* row, bool compare) {
  if (compare)
    return row->ir_op == (tpu_ir_op_t)TPU_CMP_EQ || row->ir_op == (tpu_ir_op_t)TPU_CMP_NE
               ? 0 : TPU_EW_REAL;
  switch (row->ir_op) {
    case TPU_IR_ERF: case TPU_IR_ERFC: case TPU_IR_ERF_INV: case TPU_IR_LGAMMA:
    case TPU_IR_ATAN2: return TPU_EW_REAL;
    default: return 0;
  }
}

tpu_status_t tpu_lower_unary(tpu_lower_ctx_t* cx) {
  return tpu_ew_unary_ex(cx, cx->row->rule, row_unary, complex_flags(cx->row, false));
}

tpu_status_t tpu_lower_binary(tpu_lower_ctx_t* cx) {
  return tpu_ew_binary_ex(cx, cx->row->rule, row_binary, complex_flags(cx->row, false));
}

tpu_status_t tpu_lower_compare(tpu_lower_ctx_t* cx) {
  return tpu_ew_binary_ex(cx, TPU_RULE_BOOL, row_compare, complex_flags(cx->row, true));
}

//===--- arithmetic ---===//

// add / sub: a ± alpha * b, with PyTorch's checks on alpha; rsub (swap):
// b - alpha * a.
static tpu_status_t add_sub(tpu_lower_ctx_t* cx, tpu_ir_op_t op, bool swap) {
  tpu_dtype_t t;
  TPU_RETURN_IF_ERROR(promote2(cx, &t));
  bool bool_a = tpu_arg_value_dtype(cx, 0) == TPU_BOOL, bool_b = tpu_arg_value_dtype(cx, 1) == TPU_BOOL;
  if (op == TPU_IR_SUB && bool_a && bool_b)
    return tpu_status_make(TPU_CODE_INVALID_ARGUMENT,
                           "Subtraction, the `-` operator, with two bool tensors "
                           "is not supported. Use the `^` or `logical_xor()` "
                           "operator instead.");
  if (op == TPU_IR_SUB && (bool_a || bool_b))
    return tpu_status_make(TPU_CODE_INVALID_ARGUMENT,
                           "Subtraction, the `-` operator, with a bool tensor is not supported. "
                           "If you are trying to invert a mask, use the `~` or `logical_not()` "
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
  TPU_RETURN_IF_ERROR(binary_inputs(cx, t, compute, 0, &a, &b));
  if (swap) {
    tpu_val_t self = a;
    a = b;
    b = self;
  }
  if (has_alpha) {  // alpha is rounded to the tensors' dtype, as on CPU
    tpu_val_t s = tpu_ir_convert(cx->g, tpu_lower_scalar(cx, &alpha->scalar, t), compute);
    const tpu_type_t* bt = tpu_ir_type(cx->g, b);
    b = tpu_ir_binary(cx->g, TPU_IR_MUL, b, tpu_ir_broadcast(cx->g, s, bt->dims, bt->rank, NULL));
  }
  tpu_ir_op_t ir = t == TPU_BOOL ? TPU_IR_OR : op;
  tpu_lower_out(cx, 0, tpu_ir_convert(cx->g, tpu_ir_binary(cx->g, ir, a, b), t));
  return TPU_OK;
}

tpu_status_t tpu_lower_add(tpu_lower_ctx_t* cx) { return add_sub(cx, TPU_IR_ADD, false); }
tpu_status_t tpu_lower_sub(tpu_lower_ctx_t* cx) { return add_sub(cx, TPU_IR_SUB, false); }
tpu_status_t tpu_lower_rsub(tpu_lower_ctx_t* cx) { return add_sub(cx, TPU_IR_SUB, true); }

// mul: bool * bool is logical and.
static tpu_val_t mul_fn(tpu_lower_ctx_t* cx, tpu_val_t a, tpu_val_t b) {
  tpu_graph_t* g = cx->g;
  if (tpu_graph_ok(g) && tpu_ir_dtype(g, a) == TPU_BOOL) return tpu_ir_binary(g, TPU_IR_AND, a, b);
  return tpu_ew_mul(g, a, b);
}
// A number `other` keeps its full precision (CPU's mul and div kernels read
// the original scalar), unlike in other ops.
tpu_status_t tpu_lower_mul(tpu_lower_ctx_t* cx) {
  return tpu_ew_binary_ex(cx, TPU_RULE_SAME, mul_fn, TPU_EW_EXACT_OTHER);
}

// Float division rounded toward -inf, as PyTorch's div_floor: floor((a -
// fmod(a, b)) / b), corrected by one where fmod and b differ in sign, and
// the plain quotient where b is 0 (inf or nan).
static tpu_val_t float_floor_div(tpu_lower_ctx_t* cx, tpu_val_t a, tpu_val_t b) {
  tpu_graph_t* g = cx->g;
  tpu_val_t d = tpu_ew_div(g, a, b);
  tpu_val_t m = tpu_ir_binary(g, TPU_IR_REM, a, b);
  tpu_val_t div = tpu_ew_div(g, tpu_ew_sub(g, a, m), b);
  tpu_val_t zero = tpu_lower_const_like(cx, m, 0);
  tpu_val_t fix = tpu_ir_binary(g, TPU_IR_AND, tpu_ir_compare(g, TPU_CMP_NE, m, zero),
                                tpu_ir_compare(g, TPU_CMP_NE,
                                               tpu_ir_compare(g, TPU_CMP_LT, b, zero),
                                               tpu_ir_compare(g, TPU_CMP_LT, m, zero)));
  div = tpu_ir_select(g, fix, tpu_ew_sub(g, div, tpu_lower_const_like(cx, div, 1)), div);
  tpu_val_t fl = tpu_ir_unary(g, TPU_IR_FLOOR, div);
  tpu_val_t half = tpu_lower_const_like(cx, div, 0.5);
  fl = tpu_ir_select(g, tpu_ir_compare(g, TPU_CMP_GT, tpu_ew_sub(g, div, fl), half),
                     tpu_ew_add(g, fl, tpu_lower_const_like(cx, fl, 1)), fl);
  // A zero quotient takes the sign of a / b.
  tpu_val_t z = tpu_lower_const_like(cx, fl, 0);
  fl = tpu_ir_select(g, tpu_ir_compare(g, TPU_CMP_EQ, div, z), tpu_ew_copysign(cx, z, d), fl);
  return tpu_ir_select(g, tpu_ir_compare(g, TPU_CMP_EQ, b, tpu_lower_const_like(cx, b, 0)), d, fl);
}

// Integer division rounded toward -inf (b checked non-zero).
static tpu_val_t int_floor_div(tpu_lower_ctx_t* cx, tpu_val_t a, tpu_val_t b) {
  tpu_graph_t* g = cx->g;
  tpu_val_t q = tpu_ew_div(g, a, b);  // truncates
  if (!tpu_graph_ok(g) || tpu_dtype_kind(tpu_ir_dtype(g, a)) == TPU_KIND_UINT) return q;
  // Step down when the remainder is non-zero and the signs differ.
  tpu_val_t zero = tpu_lower_const_like(cx, b, 0);
  tpu_val_t r = tpu_ir_binary(g, TPU_IR_REM, a, b);
  tpu_val_t nz = tpu_ir_compare(g, TPU_CMP_NE, r, zero);
  tpu_val_t neg = tpu_ir_compare(g, TPU_CMP_NE, tpu_ir_compare(g, TPU_CMP_LT, r, zero),
                                 tpu_ir_compare(g, TPU_CMP_LT, b, zero));
  return tpu_ir_select(g, tpu_ir_binary(g, TPU_IR_AND, nz, neg),
                       tpu_ew_sub(g, q, tpu_lower_const_like(cx, q, 1)), q);
}

static tpu_val_t trunc_value(tpu_graph_t* g, tpu_val_t x, tpu_val_t zero) {
  return tpu_ir_select(g, tpu_ir_compare(g, TPU_CMP_LT, x, zero),
                       tpu_ir_unary(g, TPU_IR_CEIL, x), tpu_ir_unary(g, TPU_IR_FLOOR, x));
}

// div with rounding_mode NULL (true division), "trunc" or "floor".
static tpu_status_t div_impl(tpu_lower_ctx_t* cx, const char* mode) {
  tpu_dtype_t t;
  TPU_RETURN_IF_ERROR(promote2(cx, &t));
  tpu_graph_t* g = cx->g;
  if (!mode) {  // true division, in float
    tpu_dtype_t out = tpu_to_float(t);
    tpu_val_t a, b;
    TPU_RETURN_IF_ERROR(binary_inputs(cx, out, tpu_opmath(out), 2, &a, &b));
    tpu_lower_out(cx, 0, tpu_ir_convert(g, tpu_ew_div(g, a, b), out));
    return TPU_OK;
  }
  if (t == TPU_BOOL || tpu_dtype_is_complex(t))
    return tpu_status_make(TPU_CODE_UNIMPLEMENTED,
                           "\"div_%s_cpu\" not implemented for '%s'", mode,
                           tpu_dtype_torch_name(t));
  // CPU rounds each step of these to the tensors' dtype (f16 / bf16 math),
  // except with a number divisor: then it works in float with the number's
  // full value.
  bool by_number = !tpu_arg_is_tensor(cx, 1) && tpu_opmath(t) != t;
  tpu_val_t a, b;
  TPU_RETURN_IF_ERROR(binary_inputs(cx, t, by_number ? tpu_opmath(t) : t, by_number ? 2 : 0,
                                    &a, &b));
  tpu_val_t q;
  bool floor = !strcmp(mode, "floor");
  if (tpu_dtype_is_integral(t, false)) {
    assert_nonzero(cx, b);
    q = floor ? int_floor_div(cx, a, b) : tpu_ew_div(g, a, b);
  } else if (floor) {
    q = float_floor_div(cx, a, b);
  } else {
    tpu_val_t d = tpu_ew_div(g, a, b);
    q = trunc_value(g, d, tpu_lower_const_like(cx, d, 0));
  }
  tpu_lower_out(cx, 0, tpu_ir_convert(g, q, t));
  return TPU_OK;
}

// div(self, other, *, rounding_mode=None)
tpu_status_t tpu_lower_div(tpu_lower_ctx_t* cx) {
  const char* mode = tpu_arg_string(cx, 2, NULL);
  if (mode && strcmp(mode, "trunc") && strcmp(mode, "floor"))
    return tpu_status_make(TPU_CODE_INVALID_ARGUMENT,
                           "div expected rounding_mode to be one of None, "
                           "'trunc', or 'floor' but found '%s'", mode);
  return div_impl(cx, mode);
}

// floor_divide(self, other)
tpu_status_t tpu_lower_floor_divide(tpu_lower_ctx_t* cx) { return div_impl(cx, "floor"); }

// remainder: the sign of the divisor (Python's %).
static tpu_val_t remainder_fn(tpu_lower_ctx_t* cx, tpu_val_t a, tpu_val_t b) {
  tpu_graph_t* g = cx->g;
  if (!tpu_graph_ok(g)) return TPU_VAL_NONE;
  tpu_dtype_t t = tpu_ir_dtype(g, a);
  if (tpu_dtype_is_integral(t, false)) assert_nonzero(cx, b);
  tpu_val_t m = tpu_ir_binary(g, TPU_IR_REM, a, b);  // fmod: the sign of a
  if (tpu_dtype_kind(t) == TPU_KIND_UINT) return m;
  tpu_val_t zero = tpu_lower_const_like(cx, m, 0);
  tpu_val_t fix = tpu_ir_binary(g, TPU_IR_AND, tpu_ir_compare(g, TPU_CMP_NE, m, zero),
                                tpu_ir_compare(g, TPU_CMP_NE,
                                               tpu_ir_compare(g, TPU_CMP_LT, b, zero),
                                               tpu_ir_compare(g, TPU_CMP_LT, m, zero)));
  return tpu_ir_select(g, fix, tpu_ew_add(g, m, b), m);
}
tpu_status_t tpu_lower_remainder(tpu_lower_ctx_t* cx) {
  return tpu_ew_binary_ex(cx, TPU_RULE_NOT_BOOL, remainder_fn, TPU_EW_REAL);
}

// fmod: C's fmod / %, the sign of the dividend.
static tpu_val_t fmod_fn(tpu_lower_ctx_t* cx, tpu_val_t a, tpu_val_t b) {
  tpu_graph_t* g = cx->g;
  if (tpu_graph_ok(g) && tpu_dtype_is_integral(tpu_ir_dtype(g, a), false)) assert_nonzero(cx, b);
  return tpu_ir_binary(g, TPU_IR_REM, a, b);
}
tpu_status_t tpu_lower_fmod(tpu_lower_ctx_t* cx) {
  return tpu_ew_binary_ex(cx, TPU_RULE_NOT_BOOL, fmod_fn, TPU_EW_REAL);
}

//===--- pow ---===//

// Integer power by squaring, wrapping like C; negative exponents follow
// PyTorch's powi (1 for base 1, ±1 for base -1, else 0).
static tpu_val_t int_pow(tpu_lower_ctx_t* cx, tpu_val_t a, tpu_val_t b) {
  tpu_graph_t* g = cx->g;
  tpu_val_t p = tpu_ir_binary(g, TPU_IR_POW, a, b);
  if (!tpu_graph_ok(g) || tpu_dtype_kind(tpu_ir_dtype(g, a)) == TPU_KIND_UINT) return p;
  tpu_val_t zero = tpu_lower_const_like(cx, a, 0), one = tpu_lower_const_like(cx, a, 1);
  tpu_val_t minus_one = tpu_lower_const_like(cx, a, -1);
  tpu_val_t odd = tpu_ir_compare(g, TPU_CMP_NE, tpu_ir_binary(g, TPU_IR_AND, b, one), zero);
  tpu_val_t neg = tpu_ir_select(g, tpu_ir_compare(g, TPU_CMP_EQ, a, one), one,
                                tpu_ir_select(g, tpu_ir_compare(g, TPU_CMP_EQ, a, minus_one),
                                              tpu_ir_select(g, odd, minus_one, one), zero));
  return tpu_ir_select(g, tpu_ir_compare(g, TPU_CMP_LT, b, zero), neg, p);
}

static tpu_val_t pow_fn(tpu_lower_ctx_t* cx, tpu_val_t a, tpu_val_t b) {
  if (tpu_graph_ok(cx->g) && tpu_dtype_is_integral(tpu_ir_dtype(cx->g, a), false))
    return int_pow(cx, a, b);
  return tpu_ir_binary(cx->g, TPU_IR_POW, a, b);
}

// pow(x, e) for a Python number e, following CPU's pow_tensor_scalar
// kernel: x*x, x*x*x, 1/(x*x), sqrt, rsqrt and 1/x for some exponents (in
// f16 / bf16 math where CPU uses it), else pow with e in the tensor's dtype.
// The program depends on the exponent only for those special values.
static bool pow_special(tpu_lower_ctx_t* cx, tpu_dtype_t t, double v) {
  tpu_graph_t* g = cx->g;
  bool wide = t == TPU_F32 || t == TPU_F64;
  bool unary = (wide || t == TPU_BF16) && (v == 0.5 || v == -0.5 || v == -1);
  bool arith = (wide || t == TPU_BF16) && (v == 2 || v == 3 || v == -2);
  if (!unary && !arith) return false;
  // sqrt, rsqrt and 1/x round once (opmath); the products round each step
  // for bf16 (CPU's bf16 arithmetic).
  tpu_val_t x = tpu_lower_input(cx, 0, unary ? tpu_opmath(t) : t), r;
  tpu_val_t one = tpu_lower_const_like(cx, x, 1);
  if (v == 0.5) r = tpu_ir_unary(g, TPU_IR_SQRT, x);
  else if (v == -0.5) r = tpu_ir_unary(g, TPU_IR_RSQRT, x);
  else if (v == -1) r = tpu_ew_div(g, one, x);
  else if (v == 2) r = tpu_ew_mul(g, x, x);
  else if (v == 3) r = tpu_ew_mul(g, tpu_ew_mul(g, x, x), x);
  else r = tpu_ew_div(g, one, tpu_ew_mul(g, x, x));
  tpu_lower_out(cx, 0, tpu_ir_convert(g, r, t));
  return true;
}

// pow.Tensor_Tensor(self, exponent), pow.Tensor_Scalar(self, exponent),
// pow.Scalar(self, exponent).
tpu_status_t tpu_lower_pow(tpu_lower_ctx_t* cx) {
  tpu_dtype_t t;
  TPU_RETURN_IF_ERROR(promote2(cx, &t));
  if (t == TPU_BOOL) return tpu_not_implemented(cx->row->name, t);
  const tpu_arg_t* e = tpu_arg(cx, 1);
  bool scalar_exp = e->kind == TPU_ARG_SCALAR && e->scalar.tier == TPU_TIER_WRAPPED &&
                    tpu_arg_is_tensor(cx, 0);
  if (scalar_exp && tpu_dtype_is_integral(tpu_arg_value_dtype(cx, 0), true) &&
      tpu_dtype_is_integral(e->scalar.dtype, true) && tpu_arg_number(cx, 1, 0) < 0)
    return tpu_status_make(TPU_CODE_INVALID_ARGUMENT,
                           "Integers to negative integer powers are not allowed.");
  if (scalar_exp && tpu_dtype_is_float(t) && pow_special(cx, t, tpu_arg_number(cx, 1, 0)))
    return TPU_OK;
  return tpu_ew_binary(cx, TPU_RULE_SAME, pow_fn);
}

//===--- more binary math ---===//

static tpu_val_t maximum_fn(tpu_lower_ctx_t* cx, tpu_val_t a, tpu_val_t b) {
  return tpu_ew_max(cx, a, b);
}
static tpu_val_t minimum_fn(tpu_lower_ctx_t* cx, tpu_val_t a, tpu_val_t b) {
  return tpu_ew_min(cx, a, b);
}
tpu_status_t tpu_lower_maximum(tpu_lower_ctx_t* cx) {
  return tpu_ew_binary(cx, TPU_RULE_NOT_COMPLEX, maximum_fn);
}
tpu_status_t tpu_lower_minimum(tpu_lower_ctx_t* cx) {
  return tpu_ew_binary(cx, TPU_RULE_NOT_COMPLEX, minimum_fn);
}

// fmax / fmin: a NaN operand gives the other one.
static tpu_val_t fmax_fmin(tpu_lower_ctx_t* cx, tpu_val_t a, tpu_val_t b, bool max) {
  tpu_graph_t* g = cx->g;
  tpu_val_t m = max ? tpu_ew_max(cx, a, b) : tpu_ew_min(cx, a, b);
  if (!is_float(g, a)) return m;
  return tpu_ir_select(g, tpu_ew_isnan(g, a), b, tpu_ir_select(g, tpu_ew_isnan(g, b), a, m));
}
static tpu_val_t fmax_fn(tpu_lower_ctx_t* cx, tpu_val_t a, tpu_val_t b) {
  return fmax_fmin(cx, a, b, true);
}
static tpu_val_t fmin_fn(tpu_lower_ctx_t* cx, tpu_val_t a, tpu_val_t b) {
  return fmax_fmin(cx, a, b, false);
}
tpu_status_t tpu_lower_fmax(tpu_lower_ctx_t* cx) {
  return tpu_ew_binary(cx, TPU_RULE_NOT_COMPLEX, fmax_fn);
}
tpu_status_t tpu_lower_fmin(tpu_lower_ctx_t* cx) {
  return tpu_ew_binary(cx, TPU_RULE_NOT_COMPLEX, fmin_fn);
}

// hypot: scaled so that squares neither overflow nor underflow; an infinite
// operand wins over NaN, as in C's hypot.
static tpu_val_t hypot_fn(tpu_lower_ctx_t* cx, tpu_val_t a, tpu_val_t b) {
  tpu_graph_t* g = cx->g;
  tpu_val_t x = tpu_ir_unary(g, TPU_IR_ABS, a), y = tpu_ir_unary(g, TPU_IR_ABS, b);
  tpu_val_t big = tpu_ew_max(cx, x, y), small = tpu_ew_min(cx, x, y);
  tpu_val_t zero = tpu_lower_const_like(cx, x, 0), one = tpu_lower_const_like(cx, x, 1);
  tpu_val_t is_zero = tpu_ir_compare(g, TPU_CMP_EQ, big, zero);
  tpu_val_t r = tpu_ew_div(g, small, tpu_ir_select(g, is_zero, one, big));
  tpu_val_t root = tpu_ir_unary(g, TPU_IR_SQRT, tpu_ew_add(g, one, tpu_ew_mul(g, r, r)));
  tpu_val_t h = tpu_ew_mul(g, big, root);
  h = tpu_ir_select(g, is_zero, zero, h);
  tpu_val_t inf = tpu_lower_const_like(cx, x, INFINITY);
  tpu_val_t any_inf = tpu_ir_binary(g, TPU_IR_OR, tpu_ir_compare(g, TPU_CMP_EQ, x, inf),
                                    tpu_ir_compare(g, TPU_CMP_EQ, y, inf));
  return tpu_ir_select(g, any_inf, inf, h);
}
tpu_status_t tpu_lower_hypot(tpu_lower_ctx_t* cx) {
  return tpu_ew_binary(cx, TPU_RULE_FLOATING, hypot_fn);
}

tpu_status_t tpu_lower_copysign(tpu_lower_ctx_t* cx) {
  return tpu_ew_binary_ex(cx, TPU_RULE_FLOAT, tpu_ew_copysign, TPU_EW_REAL);
}

// xlogy: x * log(y), 0 where x == 0 unless y is NaN.
static tpu_val_t xlogy_fn(tpu_lower_ctx_t* cx, tpu_val_t x, tpu_val_t y) {
  tpu_graph_t* g = cx->g;
  tpu_val_t r = tpu_ew_mul(g, x, tpu_ir_unary(g, TPU_IR_LOG, y));
  r = tpu_ir_select(g, tpu_ew_cmp_k(cx, TPU_CMP_EQ, x, 0), tpu_lower_const_like(cx, x, 0), r);
  return tpu_ir_select(g, tpu_ew_isnan(g, y), y, r);
}
// CPU rounds log(y) and the product to f16 / bf16 separately.
tpu_status_t tpu_lower_xlogy(tpu_lower_ctx_t* cx) {
  return tpu_ew_binary_ex(cx, TPU_RULE_FLOAT, xlogy_fn, TPU_EW_STORAGE | TPU_EW_REAL);
}

// Logical ops: operands compared with zero in their promoted dtype.
static tpu_val_t logical(tpu_lower_ctx_t* cx, tpu_val_t a, tpu_val_t b, tpu_ir_op_t op) {
  tpu_val_t x = tpu_ew_cmp_k(cx, TPU_CMP_NE, a, 0), y = tpu_ew_cmp_k(cx, TPU_CMP_NE, b, 0);
  return tpu_ir_binary(cx->g, op, x, y);
}
static tpu_val_t and_fn(tpu_lower_ctx_t* cx, tpu_val_t a, tpu_val_t b) {
  return logical(cx, a, b, TPU_IR_AND);
}
static tpu_val_t or_fn(tpu_lower_ctx_t* cx, tpu_val_t a, tpu_val_t b) {
  return logical(cx, a, b, TPU_IR_OR);
}
static tpu_val_t xor_fn(tpu_lower_ctx_t* cx, tpu_val_t a, tpu_val_t b) {
  return logical(cx, a, b, TPU_IR_XOR);
}
tpu_status_t tpu_lower_logical_and(tpu_lower_ctx_t* cx) {
  return tpu_ew_binary(cx, TPU_RULE_BOOL, and_fn);
}
tpu_status_t tpu_lower_logical_or(tpu_lower_ctx_t* cx) {
  return tpu_ew_binary(cx, TPU_RULE_BOOL, or_fn);
}
tpu_status_t tpu_lower_logical_xor(tpu_lower_ctx_t* cx) {
  return tpu_ew_binary(cx, TPU_RULE_BOOL, xor_fn);
}

// Shifts: StableHLO's shifts treat the amount as unsigned and give 0 (or
// the sign fill, right-shifting signed values) past the width, which is
// PyTorch's rule for amounts < 0 or >= the width.
static tpu_val_t lshift_fn(tpu_lower_ctx_t* cx, tpu_val_t a, tpu_val_t b) {
  return tpu_ir_binary(cx->g, TPU_IR_SHL, a, b);
}
static tpu_val_t rshift_fn(tpu_lower_ctx_t* cx, tpu_val_t a, tpu_val_t b) {
  tpu_graph_t* g = cx->g;
  bool is_unsigned = tpu_graph_ok(g) && tpu_dtype_kind(tpu_ir_dtype(g, a)) == TPU_KIND_UINT;
  return tpu_ir_binary(g, is_unsigned ? TPU_IR_SHR_L : TPU_IR_SHR_A, a, b);
}
tpu_status_t tpu_lower_lshift(tpu_lower_ctx_t* cx) {
  return tpu_ew_binary(cx, TPU_RULE_INTEGER, lshift_fn);
}
tpu_status_t tpu_lower_rshift(tpu_lower_ctx_t* cx) {
  return tpu_ew_binary(cx, TPU_RULE_INTEGER, rshift_fn);
}

//===--- unary math ---===//

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

// abs: identity on unsigned integers (StableHLO's abs takes signed ones);
// the magnitude, a real number, of complex ones.
static tpu_val_t abs_fn(tpu_lower_ctx_t* cx, tpu_val_t x) {
  tpu_graph_t* g = cx->g;
  if (tpu_graph_ok(g) && tpu_dtype_kind(tpu_ir_dtype(g, x)) == TPU_KIND_UINT) return x;
  return tpu_ir_unary(g, TPU_IR_ABS, x);
}
tpu_status_t tpu_lower_abs(tpu_lower_ctx_t* cx) {
  if (tpu_dtype_is_complex(tpu_arg_value_dtype(cx, 0))) {
    tpu_lower_out(cx, 0, tpu_ir_unary(cx->g, TPU_IR_ABS, tpu_lower_tensor(cx, 0)));
    return TPU_OK;
  }
  return tpu_ew_unary(cx, TPU_RULE_NOT_BOOL, abs_fn);
}

static tpu_val_t exp2_fn(tpu_lower_ctx_t* cx, tpu_val_t x) {
  return tpu_ir_binary(cx->g, TPU_IR_POW, tpu_lower_const_like(cx, x, 2), x);
}
TPU_EW_UNARY(exp2, FLOAT)

// log2: exponent + log2(mantissa) for normal numbers, so that powers of two
// give exact integers as CPU's log2 does (log(x) / log(2) is off by an ulp
// for some); zeros, infinities, NaN and negatives take log(x) / log(2).
static tpu_val_t log2_fn(tpu_lower_ctx_t* cx, tpu_val_t x) {
  tpu_graph_t* g = cx->g;
  if (!tpu_graph_ok(g)) return TPU_VAL_NONE;
  tpu_dtype_t ft = tpu_ir_dtype(g, x);
  tpu_val_t ln2 = tpu_lower_const_like(cx, x, M_LN2);
  tpu_val_t plain = tpu_ew_div(g, tpu_ir_unary(g, TPU_IR_LOG, x), ln2);
  if (ft != TPU_F32 && ft != TPU_F64) return plain;
  bool wide = ft == TPU_F64;
  tpu_dtype_t it = wide ? TPU_I64 : TPU_I32;
  int mant = wide ? 52 : 23;
  uint64_t mant_mask = ((uint64_t)1 << mant) - 1;
  uint64_t one_bits = wide ? 0x3ff0000000000000ull : 0x3f800000u;
  const tpu_type_t* ty = tpu_ir_type(g, x);
  tpu_val_t bits = bitcast_to(g, x, it);
  tpu_val_t biased = tpu_ir_binary(g, TPU_IR_SHR_A, bits, tpu_lower_const_like(cx, bits, mant));
  tpu_val_t e = tpu_ew_sub(g, biased, tpu_lower_const_like(cx, bits, wide ? 1023 : 127));
  tpu_val_t frac_bits = tpu_ir_binary(g, TPU_IR_AND, bits,
                                      tpu_ir_const_bits(g, it, mant_mask, ty->dims, ty->rank));
  tpu_val_t m_bits = tpu_ir_binary(g, TPU_IR_OR, frac_bits,
                                   tpu_ir_const_bits(g, it, one_bits, ty->dims, ty->rank));
  tpu_val_t m = bitcast_to(g, m_bits, ft);  // in [1, 2)
  tpu_val_t big = tpu_ew_cmp_k(cx, TPU_CMP_GT, m, M_SQRT2);  // keep log(m) small
  m = tpu_ir_select(g, big, tpu_ew_mul(g, m, tpu_lower_const_like(cx, m, 0.5)), m);
  e = tpu_ir_select(g, big, tpu_ew_add(g, e, tpu_lower_const_like(cx, e, 1)), e);
  tpu_val_t r = tpu_ew_add(g, tpu_ir_convert(g, e, ft),
                           tpu_ew_div(g, tpu_ir_unary(g, TPU_IR_LOG, m), ln2));
  tpu_val_t normal = tpu_ir_binary(g, TPU_IR_AND,
                                   tpu_ew_cmp_k(cx, TPU_CMP_GE, x, wide ? DBL_MIN : FLT_MIN),
                                   tpu_ew_cmp_k(cx, TPU_CMP_LT, x, INFINITY));
  return tpu_ir_select(g, normal, r, plain);
}
TPU_EW_UNARY(log2, FLOAT)

static tpu_val_t log10_fn(tpu_lower_ctx_t* cx, tpu_val_t x) {
  tpu_graph_t* g = cx->g;
  return tpu_ew_div(g, tpu_ir_unary(g, TPU_IR_LOG, x), tpu_lower_const_like(cx, x, M_LN10));
}
TPU_EW_UNARY(log10, FLOAT)

static tpu_val_t reciprocal_fn(tpu_lower_ctx_t* cx, tpu_val_t x) {
  return tpu_ew_div(cx->g, tpu_lower_const_like(cx, x, 1), x);
}
TPU_EW_UNARY(reciprocal, FLOAT)

// sign / sgn (real): (0 < x) - (x < 0), so NaN and -0.0 give 0.
static tpu_val_t sign_fn(tpu_lower_ctx_t* cx, tpu_val_t x) {
  tpu_graph_t* g = cx->g;
  if (!tpu_graph_ok(g)) return TPU_VAL_NONE;
  tpu_dtype_t t = tpu_ir_dtype(g, x);
  if (t == TPU_BOOL) return x;
  tpu_val_t pos = tpu_ir_convert(g, tpu_ew_cmp_k(cx, TPU_CMP_GT, x, 0), t);
  if (tpu_dtype_kind(t) == TPU_KIND_UINT) return pos;
  return tpu_ew_sub(g, pos, tpu_ir_convert(g, tpu_ew_cmp_k(cx, TPU_CMP_LT, x, 0), t));
}
tpu_status_t tpu_lower_sign(tpu_lower_ctx_t* cx) {
  if (tpu_dtype_is_complex(tpu_arg_value_dtype(cx, 0)))
    return tpu_status_make(TPU_CODE_UNIMPLEMENTED,
                           "Unlike NumPy, torch.sign is not intended to support complex "
                           "numbers. Please use torch.sgn instead.");
  return tpu_ew_unary(cx, TPU_RULE_SAME, sign_fn);
}

// sgn: sign for real numbers, z / |z| (0 at 0) for complex ones.
tpu_status_t tpu_lower_sgn(tpu_lower_ctx_t* cx) {
  tpu_dtype_t t = tpu_arg_value_dtype(cx, 0);
  if (!tpu_dtype_is_complex(t)) return tpu_ew_unary(cx, TPU_RULE_SAME, sign_fn);
  tpu_graph_t* g = cx->g;
  tpu_val_t z = tpu_lower_tensor(cx, 0);
  tpu_val_t r = tpu_ir_unary(g, TPU_IR_ABS, z);
  tpu_val_t zero = tpu_lower_const_like(cx, r, 0);
  tpu_val_t q = tpu_ew_div(g, z, tpu_ir_binary(g, TPU_IR_COMPLEX, r, zero));
  tpu_lower_out(cx, 0, tpu_ir_select(g, tpu_ir_compare(g, TPU_CMP_EQ, r, zero),
                                     tpu_lower_const_like(cx, z, 0), q));
  return TPU_OK;
}

// complex(real, imag) / polar(abs, angle): two float tensors of one dtype,
// broadcast, to the complex dtype of that precision.
static tpu_status_t complex_parts(tpu_lower_ctx_t* cx, tpu_val_t* re, tpu_val_t* im) {
  tpu_dtype_t a = tpu_arg_value_dtype(cx, 0), b = tpu_arg_value_dtype(cx, 1);
  if (a != TPU_F16 && a != TPU_F32 && a != TPU_F64)
    return tpu_invalid("Expected both inputs to be Half, Float or Double tensors but got %s and %s",
                       tpu_dtype_torch_name(a), tpu_dtype_torch_name(b));
  if (b != a)
    return tpu_invalid("Expected object of scalar type %s but got scalar type %s for second "
                       "argument", tpu_dtype_torch_name(a), tpu_dtype_torch_name(b));
  int args[2] = {0, 1};
  tpu_val_t v[2];
  TPU_RETURN_IF_ERROR(tpu_lower_broadcast_inputs(cx, args, 2, a == TPU_F64 ? a : TPU_F32, v));
  *re = v[0];
  *im = v[1];
  return TPU_OK;
}

tpu_status_t tpu_lower_complex(tpu_lower_ctx_t* cx) {
  tpu_val_t re, im;
  TPU_RETURN_IF_ERROR(complex_parts(cx, &re, &im));
  tpu_lower_out(cx, 0, tpu_ir_binary(cx->g, TPU_IR_COMPLEX, re, im));
  return TPU_OK;
}

// angle: the argument of a complex number (a real result); of a real
// number, pi below 0 and 0 otherwise (NaN stays NaN), as a float.
tpu_status_t tpu_lower_angle(tpu_lower_ctx_t* cx) {
  tpu_graph_t* g = cx->g;
  tpu_dtype_t t = tpu_arg_value_dtype(cx, 0);
  if (tpu_dtype_is_complex(t)) {
    tpu_val_t z = tpu_lower_tensor(cx, 0);
    tpu_lower_out(cx, 0, tpu_ir_binary(g, TPU_IR_ATAN2, tpu_ir_unary(g, TPU_IR_IMAG, z),
                                       tpu_ir_unary(g, TPU_IR_REAL, z)));
    return TPU_OK;
  }
  tpu_dtype_t out = tpu_to_float(t);
  tpu_val_t x = tpu_lower_input(cx, 0, tpu_opmath(out));
  tpu_val_t r = tpu_ir_select(g, tpu_ew_cmp_k(cx, TPU_CMP_LT, x, 0), tpu_lower_const_like(cx, x, M_PI),
                              tpu_lower_const_like(cx, x, 0));
  tpu_lower_out(cx, 0, tpu_ir_convert(g, tpu_ir_select(g, tpu_ew_isnan(g, x), x, r), out));
  return TPU_OK;
}

tpu_status_t tpu_lower_polar(tpu_lower_ctx_t* cx) {
  tpu_graph_t* g = cx->g;
  tpu_val_t r, theta;
  TPU_RETURN_IF_ERROR(complex_parts(cx, &r, &theta));
  tpu_lower_out(cx, 0, tpu_ir_binary(g, TPU_IR_COMPLEX,
                                     tpu_ew_mul(g, r, tpu_ir_unary(g, TPU_IR_COS, theta)),
                                     tpu_ew_mul(g, r, tpu_ir_unary(g, TPU_IR_SIN, theta))));
  return TPU_OK;
}

// _conj_physical / conj_physical_ / conj_physical.out: the conjugate,
// materialized; real tensors are their own conjugate.
tpu_status_t tpu_lower_conj_physical(tpu_lower_ctx_t* cx) {
  tpu_graph_t* g = cx->g;
  tpu_val_t z = tpu_lower_tensor(cx, 0);
  if (tpu_dtype_is_complex(tpu_arg_value_dtype(cx, 0)))
    z = tpu_ir_binary(g, TPU_IR_COMPLEX, tpu_ir_unary(g, TPU_IR_REAL, z),
                      tpu_ir_unary(g, TPU_IR_NEG, tpu_ir_unary(g, TPU_IR_IMAG, z)));
  tpu_lower_out(cx, 0, z);
  return TPU_OK;
}

// Rounding: the identity on integers.
static tpu_val_t rounding(tpu_lower_ctx_t* cx, tpu_val_t x, tpu_ir_op_t op) {
  if (!is_float(cx->g, x)) return x;
  return tpu_ir_unary(cx->g, op, x);
}
static tpu_val_t floor_fn(tpu_lower_ctx_t* cx, tpu_val_t x) {
  return rounding(cx, x, TPU_IR_FLOOR);
}
static tpu_val_t ceil_fn(tpu_lower_ctx_t* cx, tpu_val_t x) {
  return rounding(cx, x, TPU_IR_CEIL);
}
static tpu_val_t round_fn(tpu_lower_ctx_t* cx, tpu_val_t x) {  // half to even
  return rounding(cx, x, TPU_IR_ROUND_EVEN);
}
static tpu_val_t trunc_fn(tpu_lower_ctx_t* cx, tpu_val_t x) {
  if (!is_float(cx->g, x)) return x;
  return trunc_value(cx->g, x, tpu_lower_const_like(cx, x, 0));
}
TPU_EW_UNARY_REAL(floor, NOT_BOOL)
TPU_EW_UNARY_REAL(ceil, NOT_BOOL)
TPU_EW_UNARY_REAL(trunc, NOT_BOOL)

static tpu_val_t frac_fn(tpu_lower_ctx_t* cx, tpu_val_t x) {
  return tpu_ew_sub(cx->g, x, trunc_fn(cx, x));
}
TPU_EW_UNARY(frac, FLOATING)

// round(self) and round.decimals(self, *, decimals): PyTorch scales by
// 10^|decimals| (a float of the compute type), rounds half to even, and
// scales back.
static tpu_val_t round_decimals_fn(tpu_lower_ctx_t* cx, tpu_val_t x) {
  tpu_graph_t* g = cx->g;
  int64_t d = tpu_arg_int(cx, 1, 0);
  bool neg = d < 0;
  if (neg) d = -d;
  double scale = pow(10.0, (double)d);
  if (tpu_graph_ok(g) && tpu_ir_dtype(g, x) != TPU_F64) scale = (float)scale;
  tpu_val_t s = tpu_ew_number_like(cx, x, scale);
  if (neg) return tpu_ew_mul(g, tpu_ir_unary(g, TPU_IR_ROUND_EVEN, tpu_ew_div(g, x, s)), s);
  return tpu_ew_div(g, tpu_ir_unary(g, TPU_IR_ROUND_EVEN, tpu_ew_mul(g, x, s)), s);
}
tpu_status_t tpu_lower_round(tpu_lower_ctx_t* cx) {
  if (tpu_arg_present(cx, 1)) return tpu_ew_unary(cx, TPU_RULE_FLOATING, round_decimals_fn);
  return tpu_ew_unary_ex(cx, TPU_RULE_NOT_BOOL, round_fn, TPU_EW_REAL);
}

// Predicates: bool results, computed in the input's own dtype.
static tpu_status_t predicate(tpu_lower_ctx_t* cx, tpu_ew_fn1 fn, bool complex_ok) {
  tpu_dtype_t t = tpu_arg_value_dtype(cx, 0);
  if (!complex_ok && tpu_dtype_is_complex(t)) {
    if (!strcmp(cx->row->name, "signbit"))
      return tpu_status_make(TPU_CODE_UNIMPLEMENTED,
                             "signbit is not implemented for complex tensors.");
    return tpu_status_make(TPU_CODE_INVALID_ARGUMENT, "%s does not support complex inputs.",
                           cx->row->name);
  }
  tpu_val_t x = tpu_lower_tensor(cx, 0);
  tpu_lower_out(cx, 0, fn(cx, x));
  return TPU_OK;
}

static tpu_val_t all_false(tpu_lower_ctx_t* cx, tpu_val_t x) {
  if (!tpu_graph_ok(cx->g)) return TPU_VAL_NONE;
  const tpu_type_t* t = tpu_ir_type(cx->g, x);
  return tpu_ir_const_i(cx->g, TPU_BOOL, 0, t->dims, t->rank);
}

static tpu_val_t logical_not_fn(tpu_lower_ctx_t* cx, tpu_val_t x) {
  return tpu_ew_cmp_k(cx, TPU_CMP_EQ, x, 0);
}
// A float or complex value (NaN and infinities exist).
static bool has_nan(tpu_graph_t* g, tpu_val_t v) {
  return tpu_graph_ok(g) && (tpu_dtype_is_float(tpu_ir_dtype(g, v)) ||
                             tpu_dtype_is_complex(tpu_ir_dtype(g, v)));
}
// Complex: NaN / infinite when either part is.
static tpu_val_t isnan_fn(tpu_lower_ctx_t* cx, tpu_val_t x) {
  return has_nan(cx->g, x) ? tpu_ew_isnan(cx->g, x) : all_false(cx, x);
}
static tpu_val_t isinf_fn(tpu_lower_ctx_t* cx, tpu_val_t x) {
  if (!has_nan(cx->g, x)) return all_false(cx, x);
  return tpu_ew_cmp_k(cx, TPU_CMP_EQ, tpu_ir_unary(cx->g, TPU_IR_ABS, x), INFINITY);
}
static tpu_val_t isposinf_fn(tpu_lower_ctx_t* cx, tpu_val_t x) {
  return is_float(cx->g, x) ? tpu_ew_cmp_k(cx, TPU_CMP_EQ, x, INFINITY) : all_false(cx, x);
}
static tpu_val_t isneginf_fn(tpu_lower_ctx_t* cx, tpu_val_t x) {
  return is_float(cx->g, x) ? tpu_ew_cmp_k(cx, TPU_CMP_EQ, x, -INFINITY) : all_false(cx, x);
}
// signbit: the sign bit itself, so -0.0 and -NaN count as negative.
static tpu_val_t signbit_fn(tpu_lower_ctx_t* cx, tpu_val_t x) {
  tpu_graph_t* g = cx->g;
  if (!tpu_graph_ok(g)) return TPU_VAL_NONE;
  tpu_dtype_t t = tpu_ir_dtype(g, x);
  if (t == TPU_BOOL || tpu_dtype_kind(t) == TPU_KIND_UINT) return all_false(cx, x);
  if (tpu_dtype_is_float(t)) x = bitcast_to(g, x, bits_dtype(t));
  return tpu_ew_cmp_k(cx, TPU_CMP_LT, x, 0);
}

tpu_status_t tpu_lower_logical_not(tpu_lower_ctx_t* cx) {
  return predicate(cx, logical_not_fn, true);
}
tpu_status_t tpu_lower_isnan(tpu_lower_ctx_t* cx) { return predicate(cx, isnan_fn, true); }
tpu_status_t tpu_lower_isinf(tpu_lower_ctx_t* cx) { return predicate(cx, isinf_fn, true); }
tpu_status_t tpu_lower_isposinf(tpu_lower_ctx_t* cx) { return predicate(cx, isposinf_fn, false); }
tpu_status_t tpu_lower_isneginf(tpu_lower_ctx_t* cx) { return predicate(cx, isneginf_fn, false); }
tpu_status_t tpu_lower_signbit(tpu_lower_ctx_t* cx) { return predicate(cx, signbit_fn, false); }

// The largest finite value of a float dtype.
static double float_max(tpu_dtype_t t) {
  switch (t) {
    case TPU_F16: return 65504.0;
    case TPU_BF16: return 3.3895313892515355e38;  // 0x7f7f
    case TPU_F64: return DBL_MAX;
    default: return FLT_MAX;
  }
}

// nan_to_num(self, nan=None, posinf=None, neginf=None): replacements are
// inputs of the tensor's dtype; the defaults are 0 and the dtype's extremes.
tpu_status_t tpu_lower_nan_to_num(tpu_lower_ctx_t* cx) {
  tpu_graph_t* g = cx->g;
  tpu_val_t x = tpu_lower_tensor(cx, 0);
  tpu_dtype_t t = tpu_arg_value_dtype(cx, 0);
  if (tpu_dtype_is_complex(t)) return tpu_not_implemented(cx->row->name, t);
  if (!tpu_dtype_is_float(t)) {
    tpu_lower_out(cx, 0, x);
    return TPU_OK;
  }
  double big = float_max(t);
  tpu_val_t nan = tpu_ew_arg_like(cx, 1, x, 0);
  tpu_val_t pos = tpu_ew_arg_like(cx, 2, x, big);
  tpu_val_t neg = tpu_ew_arg_like(cx, 3, x, -big);
  tpu_val_t r = tpu_ir_select(g, tpu_ew_cmp_k(cx, TPU_CMP_EQ, x, INFINITY), pos, x);
  r = tpu_ir_select(g, tpu_ew_cmp_k(cx, TPU_CMP_EQ, x, -INFINITY), neg, r);
  tpu_lower_out(cx, 0, tpu_ir_select(g, tpu_ew_isnan(g, x), nan, r));
  return TPU_OK;
}
