// Elementwise math of one value: sign and rounding, predicates (isnan,
// signbit, ...), complex parts, nan_to_num. Binary arithmetic and the
// generic rows are in lower_elementwise.c.
#include <float.h>
#include <math.h>
#include <string.h>

#include "lower/elementwise.h"

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

// log(x) / ln_base. A complex x's parts are divided apart: a complex
// divisor would make an infinite real part's 0 * inf a NaN (log2(0j) is
// -inf + 0j on CPU).
static tpu_val_t log_over(tpu_lower_ctx_t* cx, tpu_val_t x, double ln_base) {
  tpu_graph_t* g = cx->g;
  tpu_val_t l = tpu_ir_unary(g, TPU_IR_LOG, x);
  if (!tpu_graph_ok(g) || !tpu_dtype_is_complex(tpu_ir_dtype(g, l)))
    return tpu_ew_div(g, l, tpu_lower_const_like(cx, l, ln_base));
  tpu_val_t re = tpu_ir_unary(g, TPU_IR_REAL, l), im = tpu_ir_unary(g, TPU_IR_IMAG, l);
  tpu_val_t k = tpu_lower_const_like(cx, re, ln_base);
  return tpu_ir_binary(g, TPU_IR_COMPLEX, tpu_ew_div(g, re, k), tpu_ew_div(g, im, k));
}

// log2: exponent + log2(mantissa) for normal numbers, so that powers of two
// give exact integers as CPU's log2 does (log(x) / log(2) is off by an ulp
// for some); zeros, infinities, NaN and negatives take log(x) / log(2).
static tpu_val_t log2_fn(tpu_lower_ctx_t* cx, tpu_val_t x) {
  tpu_graph_t* g = cx->g;
  if (!tpu_graph_ok(g)) return TPU_VAL_NONE;
  tpu_dtype_t ft = tpu_ir_dtype(g, x);
  tpu_val_t plain = log_over(cx, x, M_LN2);
  if (ft != TPU_F32 && ft != TPU_F64) return plain;
  bool wide = ft == TPU_F64;
  tpu_dtype_t it = wide ? TPU_I64 : TPU_I32;
  int mant = wide ? 52 : 23;
  uint64_t mant_mask = ((uint64_t)1 << mant) - 1;
  uint64_t one_bits = wide ? 0x3ff0000000000000ull : 0x3f800000u;
  const tpu_type_t* ty = tpu_ir_type(g, x);
  tpu_val_t bits = tpu_ew_bitcast(g, x, it);
  tpu_val_t biased = tpu_ir_binary(g, TPU_IR_SHR_A, bits, tpu_lower_const_like(cx, bits, mant));
  tpu_val_t e = tpu_ew_sub(g, biased, tpu_lower_const_like(cx, bits, wide ? 1023 : 127));
  tpu_val_t frac_bits = tpu_ir_binary(g, TPU_IR_AND, bits,
                                      tpu_ir_const_bits(g, it, mant_mask, ty->dims, ty->rank));
  tpu_val_t m_bits = tpu_ir_binary(g, TPU_IR_OR, frac_bits,
                                   tpu_ir_const_bits(g, it, one_bits, ty->dims, ty->rank));
  tpu_val_t m = tpu_ew_bitcast(g, m_bits, ft);  // in [1, 2)
  tpu_val_t big = tpu_ew_cmp_k(cx, TPU_CMP_GT, m, M_SQRT2);  // keep log(m) small
  m = tpu_ir_select(g, big, tpu_ew_mul(g, m, tpu_lower_const_like(cx, m, 0.5)), m);
  e = tpu_ir_select(g, big, tpu_ew_add(g, e, tpu_lower_const_like(cx, e, 1)), e);
  tpu_val_t r = tpu_ew_add(g, tpu_ir_convert(g, e, ft),
                           tpu_ew_div(g, tpu_ir_unary(g, TPU_IR_LOG, m),
                                      tpu_lower_const_like(cx, m, M_LN2)));
  tpu_val_t normal = tpu_ir_binary(g, TPU_IR_AND,
                                   tpu_ew_cmp_k(cx, TPU_CMP_GE, x, wide ? DBL_MIN : FLT_MIN),
                                   tpu_ew_cmp_k(cx, TPU_CMP_LT, x, INFINITY));
  return tpu_ir_select(g, normal, r, plain);
}
TPU_EW_UNARY(log2, FLOAT)

static tpu_val_t log10_fn(tpu_lower_ctx_t* cx, tpu_val_t x) {
  return log_over(cx, x, M_LN10);
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

tpu_val_t tpu_ew_sgn(tpu_lower_ctx_t* cx, tpu_val_t z) {
  tpu_graph_t* g = cx->g;
  if (!tpu_graph_ok(g) || !tpu_dtype_is_complex(tpu_ir_dtype(g, z))) return sign_fn(cx, z);
  tpu_val_t r = tpu_ir_unary(g, TPU_IR_ABS, z);
  tpu_val_t zero = tpu_lower_const_like(cx, r, 0);
  tpu_val_t q = tpu_ew_div(g, z, tpu_ir_binary(g, TPU_IR_COMPLEX, r, zero));
  return tpu_ir_select(g, tpu_ir_compare(g, TPU_CMP_EQ, r, zero), tpu_lower_const_like(cx, z, 0),
                       q);
}

// sgn: sign for real numbers, z / |z| (0 at 0) for complex ones.
tpu_status_t tpu_lower_sgn(tpu_lower_ctx_t* cx) {
  tpu_dtype_t t = tpu_arg_value_dtype(cx, 0);
  if (!tpu_dtype_is_complex(t)) return tpu_ew_unary(cx, TPU_RULE_SAME, sign_fn);
  tpu_lower_out(cx, 0, tpu_ew_sgn(cx, tpu_lower_tensor(cx, 0)));
  return TPU_OK;
}

static bool half_float_or_double(tpu_dtype_t t) {
  return t == TPU_F16 || t == TPU_F32 || t == TPU_F64;
}

// complex(real, imag) / polar(abs, angle): two float tensors of one dtype,
// broadcast, to the complex dtype of that precision.
static tpu_status_t complex_parts(tpu_lower_ctx_t* cx, tpu_val_t* re, tpu_val_t* im) {
  tpu_dtype_t a = tpu_arg_value_dtype(cx, 0), b = tpu_arg_value_dtype(cx, 1);
  if (!half_float_or_double(a) || !half_float_or_double(b))
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
  tpu_dtype_t want = tpu_ir_dtype(cx->g, re) == TPU_F64 ? TPU_C128 : TPU_C64;
  tpu_dtype_t out = tpu_lower_out_dtype(cx, 0, want);
  if (out != want)
    return TPU_LOWER_ERROR(TPU_CODE_INVALID_ARGUMENT,
                           "Expected object of scalar type %s but got scalar type %s for "
                           "argument 'out'", tpu_dtype_torch_name(want),
                           tpu_dtype_torch_name(out));
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
  tpu_dtype_t out = tpu_to_float(cx, t);
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
  if (!tpu_ew_is_float(cx->g, x)) return x;
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
  if (!tpu_ew_is_float(cx->g, x)) return x;
  return tpu_ew_trunc(cx->g, x, tpu_lower_const_like(cx, x, 0));
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
  return tpu_ew_is_float(cx->g, x) ? tpu_ew_cmp_k(cx, TPU_CMP_EQ, x, INFINITY) : all_false(cx, x);
}
static tpu_val_t isneginf_fn(tpu_lower_ctx_t* cx, tpu_val_t x) {
  return tpu_ew_is_float(cx->g, x) ? tpu_ew_cmp_k(cx, TPU_CMP_EQ, x, -INFINITY) : all_false(cx, x);
}
// signbit: the sign bit itself, so -0.0 and -NaN count as negative.
static tpu_val_t signbit_fn(tpu_lower_ctx_t* cx, tpu_val_t x) {
  tpu_graph_t* g = cx->g;
  if (!tpu_graph_ok(g)) return TPU_VAL_NONE;
  tpu_dtype_t t = tpu_ir_dtype(g, x);
  if (t == TPU_BOOL || tpu_dtype_kind(t) == TPU_KIND_UINT) return all_false(cx, x);
  if (tpu_dtype_is_float(t)) x = tpu_ew_bitcast(g, x, tpu_ew_bits_dtype(t));
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
