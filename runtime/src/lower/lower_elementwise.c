// Elementwise ops: the generic UNARY / BINARY / COMPARE rows and the binary
// math that needs more than one IR op (math of one value: lower_unary.c).
//
// PyTorch computes half-precision elementwise math in float ("opmath") and
// rounds once at the end; so do we, which keeps bf16/f16 results equal to
// CPU's. Where CPU's kernels special-case NaN, infinities or signed zeros,
// the lowering spells the same cases out: XLA's own ops differ there (its
// CPU max/min drop a NaN second operand, for one).
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
    case TPU_RULE_FLOAT: *out = tpu_to_float(cx, t); return TPU_OK;
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
  int rank;
  TPU_RETURN_IF_ERROR(tpu_args_broadcast_shape(cx, args, n, shape, &rank));
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

bool tpu_ew_is_float(tpu_graph_t* g, tpu_val_t v) {
  return tpu_graph_ok(g) && tpu_dtype_is_float(tpu_ir_dtype(g, v));
}

tpu_val_t tpu_ew_max(tpu_lower_ctx_t* cx, tpu_val_t a, tpu_val_t b) {
  tpu_graph_t* g = cx->g;
  if (tpu_graph_ok(g) && tpu_ir_dtype(g, a) == TPU_BOOL) return tpu_ir_binary(g, TPU_IR_OR, a, b);
  tpu_val_t m = tpu_ir_binary(g, TPU_IR_MAX, a, b);
  if (!tpu_ew_is_float(g, a)) return m;
  return tpu_ir_select(g, tpu_ew_isnan(g, a), a, tpu_ir_select(g, tpu_ew_isnan(g, b), b, m));
}

tpu_val_t tpu_ew_min(tpu_lower_ctx_t* cx, tpu_val_t a, tpu_val_t b) {
  tpu_graph_t* g = cx->g;
  if (tpu_graph_ok(g) && tpu_ir_dtype(g, a) == TPU_BOOL) return tpu_ir_binary(g, TPU_IR_AND, a, b);
  tpu_val_t m = tpu_ir_binary(g, TPU_IR_MIN, a, b);
  if (!tpu_ew_is_float(g, a)) return m;
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
tpu_dtype_t tpu_ew_bits_dtype(tpu_dtype_t t) {
  switch (t) {
    case TPU_F64: return TPU_I64;
    case TPU_F16:
    case TPU_BF16: return TPU_I16;
    default: return TPU_I32;
  }
}

tpu_val_t tpu_ew_bitcast(tpu_graph_t* g, tpu_val_t x, tpu_dtype_t dtype) {
  if (!tpu_graph_ok(g)) return TPU_VAL_NONE;
  tpu_type_t t = *tpu_ir_type(g, x);
  t.dtype = dtype;
  return tpu_ir_bitcast(g, x, &t);
}

tpu_val_t tpu_ew_copysign(tpu_lower_ctx_t* cx, tpu_val_t a, tpu_val_t b) {
  tpu_graph_t* g = cx->g;
  if (!tpu_graph_ok(g)) return TPU_VAL_NONE;
  tpu_dtype_t ft = tpu_ir_dtype(g, a), it = tpu_ew_bits_dtype(ft);
  const tpu_type_t* ty = tpu_ir_type(g, a);
  uint64_t sign = (uint64_t)1 << (8 * tpu_dtype_size(it) - 1);
  tpu_val_t sign_mask = tpu_ir_const_bits(g, it, sign, ty->dims, ty->rank);
  tpu_val_t mag_mask = tpu_ir_const_bits(g, it, sign - 1, ty->dims, ty->rank);
  tpu_val_t bits = tpu_ir_binary(g, TPU_IR_OR,
                                 tpu_ir_binary(g, TPU_IR_AND, tpu_ew_bitcast(g, a, it), mag_mask),
                                 tpu_ir_binary(g, TPU_IR_AND, tpu_ew_bitcast(g, b, it), sign_mask));
  return tpu_ew_bitcast(g, bits, ft);
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
  // alpha 1 skips the multiply, one program input and one op fewer in
  // every a + b: exact for real dtypes (1 * y is y, NaN, infinity and -0
  // included). Not for complex ones: CPU multiplies by 1 + 0j, which makes
  // an infinite part's partner NaN (0 * inf), so they always multiply, by
  // alpha as an input (no program of their own at alpha 1).
  const tpu_arg_t* alpha = tpu_arg(cx, 2);
  bool has_alpha = alpha->kind == TPU_ARG_SCALAR &&
                   (tpu_dtype_is_complex(t) || !tpu_arg_number_is(cx, 2, 1, 1));
  if (alpha->kind == TPU_ARG_SCALAR) {
    tpu_dtype_kind_t k = tpu_dtype_kind(alpha->scalar.dtype);
    if (tpu_dtype_is_integral(t, true) && (k == TPU_KIND_FLOAT || k == TPU_KIND_COMPLEX))
      return tpu_status_make(TPU_CODE_INVALID_ARGUMENT,
                             "For integral input tensors, argument alpha must "
                             "not be a floating point number.");
    if (t != TPU_BOOL && k == TPU_KIND_BOOL)
      return tpu_status_make(TPU_CODE_INVALID_ARGUMENT,
                             "Boolean alpha only supported for Boolean results.");
    if (!tpu_lower_number_fits(cx, 2, t)) return TPU_OK;  // the graph's error
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

tpu_val_t tpu_ew_trunc(tpu_graph_t* g, tpu_val_t x, tpu_val_t zero) {
  return tpu_ir_select(g, tpu_ir_compare(g, TPU_CMP_LT, x, zero),
                       tpu_ir_unary(g, TPU_IR_CEIL, x), tpu_ir_unary(g, TPU_IR_FLOOR, x));
}

// div with rounding_mode NULL (true division), "trunc" or "floor".
static tpu_status_t div_impl(tpu_lower_ctx_t* cx, const char* mode) {
  tpu_dtype_t t;
  TPU_RETURN_IF_ERROR(promote2(cx, &t));
  tpu_graph_t* g = cx->g;
  if (!mode) {  // true division, in float
    tpu_dtype_t out = tpu_to_float(cx, t);
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
    q = tpu_ew_trunc(g, d, tpu_lower_const_like(cx, d, 0));
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

static tpu_val_t int_pow(tpu_lower_ctx_t* cx, tpu_val_t a, tpu_val_t b) {
  tpu_graph_t* g = cx->g;
  if (!tpu_graph_ok(g)) return TPU_VAL_NONE;
  tpu_dtype_t t = tpu_ir_dtype(g, a);
  bool is_signed = tpu_dtype_kind(t) != TPU_KIND_UINT;
  tpu_val_t zero = tpu_lower_const_like(cx, a, 0), one = tpu_lower_const_like(cx, a, 1);
  tpu_val_t p = one, square = a;
  for (int bit = 0; bit < 8 * (int)tpu_dtype_size(t) - is_signed; ++bit) {
    tpu_val_t set = tpu_ir_compare(
        g, TPU_CMP_NE, tpu_ir_binary(g, TPU_IR_AND, b, tpu_lower_const_like(cx, b, ldexp(1, bit))),
        zero);
    p = tpu_ir_select(g, set, tpu_ir_binary(g, TPU_IR_MUL, p, square), p);
    square = tpu_ir_binary(g, TPU_IR_MUL, square, square);
  }
  if (!is_signed) return p;
  tpu_val_t minus_one = tpu_lower_const_like(cx, a, -1);
  tpu_val_t odd = tpu_ir_compare(g, TPU_CMP_NE, tpu_ir_binary(g, TPU_IR_AND, b, one), zero);
  tpu_val_t neg = tpu_ir_select(g, tpu_ir_compare(g, TPU_CMP_EQ, a, one), one,
                                tpu_ir_select(g, tpu_ir_compare(g, TPU_CMP_EQ, a, minus_one),
                                              tpu_ir_select(g, odd, minus_one, one), zero));
  return tpu_ir_select(g, tpu_ir_compare(g, TPU_CMP_LT, b, zero), neg, p);
}

tpu_val_t tpu_ew_pow(tpu_lower_ctx_t* cx, tpu_val_t a, tpu_val_t b) {
  tpu_graph_t* g = cx->g;
  if (tpu_graph_ok(g) && tpu_dtype_is_integral(tpu_ir_dtype(g, a), false))
    return int_pow(cx, a, b);
  tpu_val_t p = tpu_ir_binary(g, TPU_IR_POW, a, b);
  if (!tpu_graph_ok(g) || !tpu_dtype_is_complex(tpu_ir_dtype(g, a))) return p;
  tpu_val_t zero = tpu_lower_const_like(cx, a, 0), re = tpu_ir_unary(g, TPU_IR_REAL, b);
  tpu_val_t vanishes = tpu_ir_binary(g, TPU_IR_AND, tpu_ir_compare(g, TPU_CMP_EQ, a, zero),
                                     tpu_ew_cmp_k(cx, TPU_CMP_GT, re, 0));
  return tpu_ir_select(g, vanishes, zero, p);
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
  const tpu_arg_t* e = tpu_arg(cx, 1);
  bool scalar_exp = e->kind == TPU_ARG_SCALAR && e->scalar.tier == TPU_TIER_WRAPPED &&
                    tpu_arg_is_tensor(cx, 0);
  if (t == TPU_BOOL) {
    // CPU answers x ** 0 and x ** 1 before it looks at the dtype, so a
    // bool tensor takes those two (a fill of ones, a copy) and no other power.
    double v = scalar_exp ? tpu_arg_number(cx, 1, 0) : -1;
    if (v != 0 && v != 1) return tpu_not_implemented(cx->row->name, t);
    tpu_val_t x = tpu_lower_input(cx, 0, t);
    tpu_lower_out(cx, 0, v == 0 ? tpu_lower_const_like(cx, x, 1) : x);
    return TPU_OK;
  }
  if (scalar_exp && tpu_dtype_is_integral(tpu_arg_value_dtype(cx, 0), true) &&
      tpu_dtype_is_integral(e->scalar.dtype, true) && tpu_arg_number(cx, 1, 0) < 0)
    return tpu_status_make(TPU_CODE_INVALID_ARGUMENT,
                           "Integers to negative integer powers are not allowed.");
  // CPU takes a float or double tensor's exponent as a double; other
  // dtypes' exponent must fit the dtype (half ** 1e6 raises).
  if (scalar_exp && t != TPU_F32 && t != TPU_F64 && !tpu_dtype_is_complex(t) &&
      !tpu_lower_number_fits(cx, 1, t))
    return TPU_OK;  // the graph's error
  if (scalar_exp && tpu_dtype_is_float(t) && pow_special(cx, t, tpu_arg_number(cx, 1, 0)))
    return TPU_OK;
  return tpu_ew_binary(cx, TPU_RULE_SAME, tpu_ew_pow);
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
  if (!tpu_ew_is_float(g, a)) return m;
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

// Exact in any width, so computed in the result's own: in float32, XLA's
// CPU backend lost the sign of an integer converted to bfloat16 on the way.
tpu_status_t tpu_lower_copysign(tpu_lower_ctx_t* cx) {
  return tpu_ew_binary_ex(cx, TPU_RULE_FLOAT, tpu_ew_copysign, TPU_EW_REAL | TPU_EW_STORAGE);
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
