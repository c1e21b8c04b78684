// More math: heaviside, logaddexp(2), nextafter, frexp, xlog1py,
// hardshrink / softshrink and their backward, prelu, rrelu_with_noise,
// equal, linalg_cross, channel_shuffle, embedding_renorm_.
//
// As in lower_elementwise.c, half-precision math runs in float and rounds
// once, except where CPU's kernel rounds a step (noted). Ops that work on
// the bits of a float (nextafter, frexp) do so with integer arithmetic only,
// so that subnormal numbers come out exact whatever the backend does with
// them in float arithmetic.
#include <float.h>
#include <math.h>
#include <stdio.h>

#include "lower/elementwise.h"

static tpu_val_t k(tpu_lower_ctx_t* cx, tpu_val_t like, double c) {
  return tpu_lower_const_like(cx, like, c);
}

static tpu_val_t sel(tpu_lower_ctx_t* cx, tpu_val_t pred, tpu_val_t a, tpu_val_t b) {
  return tpu_ir_select(cx->g, pred, a, b);
}

static tpu_val_t and2(tpu_lower_ctx_t* cx, tpu_val_t a, tpu_val_t b) {
  return tpu_ir_binary(cx->g, TPU_IR_AND, a, b);
}

static tpu_val_t or2(tpu_lower_ctx_t* cx, tpu_val_t a, tpu_val_t b) {
  return tpu_ir_binary(cx->g, TPU_IR_OR, a, b);
}

// The promoted dtype of arguments a and b.
static tpu_status_t promote(tpu_lower_ctx_t* cx, int a, int b, tpu_dtype_t* t) {
  int ab[2] = {a, b};
  *t = tpu_lower_result_type(cx, ab, 2);
  return *t == TPU_DTYPE_INVALID ? tpu_ew_promotion_error(cx, a, b) : TPU_OK;
}

//===--- bits of floats ---===//

// The layout of a float dtype's bits (f16 / bf16 are widened to f32 first:
// exactly, and their results are exact in them again).
typedef struct float_bits {
  tpu_dtype_t it;    // the same-width integer type
  int width, mant;   // total and mantissa bits
  int64_t bias;
} float_bits_t;

static float_bits_t bits_of(tpu_dtype_t ft) {
  switch (ft) {
    case TPU_F64: return (float_bits_t){TPU_I64, 64, 52, 1023};
    case TPU_F16: return (float_bits_t){TPU_I16, 16, 10, 15};
    case TPU_BF16: return (float_bits_t){TPU_I16, 16, 7, 127};
    default: return (float_bits_t){TPU_I32, 32, 23, 127};
  }
}

static tpu_val_t bitcast_to(tpu_graph_t* g, tpu_val_t x, tpu_dtype_t dtype) {
  if (!tpu_graph_ok(g)) return TPU_VAL_NONE;
  tpu_type_t t = *tpu_ir_type(g, x);
  t.dtype = dtype;
  return tpu_ir_bitcast(g, x, &t);
}

// An integer constant given by its bits, shaped like v.
static tpu_val_t kbits(tpu_lower_ctx_t* cx, tpu_val_t like, uint64_t bits) {
  if (!tpu_graph_ok(cx->g)) return TPU_VAL_NONE;
  const tpu_type_t* t = tpu_ir_type(cx->g, like);
  return tpu_ir_const_bits(cx->g, t->dtype, bits, t->dims, t->rank);
}

//===--- heaviside ---===//

// heaviside(self, values): values where self == 0, else self > 0 (NaN gives
// 0). PyTorch wants both operands (and out=) of one real dtype.
static tpu_val_t heaviside_fn(tpu_lower_ctx_t* cx, tpu_val_t a, tpu_val_t b) {
  tpu_graph_t* g = cx->g;
  if (!tpu_graph_ok(g)) return TPU_VAL_NONE;
  tpu_val_t zero = k(cx, a, 0);
  tpu_val_t pos = tpu_ir_convert(g, tpu_ir_compare(g, TPU_CMP_GT, a, zero), tpu_ir_dtype(g, a));
  return sel(cx, tpu_ir_compare(g, TPU_CMP_EQ, a, zero), b, pos);
}
tpu_status_t tpu_lower_heaviside(tpu_lower_ctx_t* cx) {
  tpu_dtype_t a = tpu_arg_value_dtype(cx, 0), b = tpu_arg_value_dtype(cx, 1);
  tpu_dtype_t out = tpu_lower_out_dtype(cx, 0, a);
  if (tpu_dtype_is_complex(a) || tpu_dtype_is_complex(b) || tpu_dtype_is_complex(out))
    return tpu_status_make(TPU_CODE_INVALID_ARGUMENT,
                           "heaviside is not yet implemented for complex tensors.");
  if (a != b || out != a)
    return tpu_status_make(TPU_CODE_INVALID_ARGUMENT,
                           "heaviside is not yet implemented for tensors with different "
                           "dtypes.");
  return tpu_ew_binary_ex(cx, TPU_RULE_SAME, heaviside_fn, TPU_EW_STORAGE);
}

//===--- logaddexp, logaddexp2 ---===//

// max(a, b) + log1p(exp(-|a - b|)) (exp2 and a factor 1 / ln 2 for
// logaddexp2), and a itself where a == b is infinite.
static tpu_val_t logaddexp_real(tpu_lower_ctx_t* cx, tpu_val_t a, tpu_val_t b, bool base2) {
  tpu_graph_t* g = cx->g;
  tpu_val_t m = tpu_ew_max(cx, a, b);
  tpu_val_t d = tpu_ir_unary(g, TPU_IR_NEG, tpu_ir_unary(g, TPU_IR_ABS, tpu_ew_sub(g, a, b)));
  tpu_val_t e = base2 ? tpu_ir_binary(g, TPU_IR_POW, k(cx, d, 2), d) : tpu_ir_unary(g, TPU_IR_EXP, d);
  tpu_val_t l = tpu_ir_unary(g, TPU_IR_LOG1P, e);
  if (base2) l = tpu_ew_mul(g, l, k(cx, l, 1.0 / M_LN2));
  tpu_val_t inf = tpu_ir_binary(g, TPU_IR_AND, tpu_ir_compare(g, TPU_CMP_EQ, a, b),
                                tpu_ew_cmp_k(cx, TPU_CMP_EQ, tpu_ir_unary(g, TPU_IR_ABS, a),
                                             INFINITY));
  return sel(cx, inf, a, tpu_ew_add(g, m, l));
}

// Complex logaddexp, as CPU's: min and max by real part; NaN anywhere gives
// NaN + NaN i; equal infinite real parts give min (-inf) or
// log(exp(min) + exp(max)) (+inf); else max + log1p(exp(min - max)).
static tpu_val_t logaddexp_complex(tpu_lower_ctx_t* cx, tpu_val_t a, tpu_val_t b) {
  tpu_graph_t* g = cx->g;
  tpu_val_t ar = tpu_ir_unary(g, TPU_IR_REAL, a), br = tpu_ir_unary(g, TPU_IR_REAL, b);
  tpu_val_t nan = or2(cx, tpu_ew_isnan(g, a), tpu_ew_isnan(g, b));  // either part
  tpu_val_t a_lt = tpu_ir_compare(g, TPU_CMP_LT, ar, br);
  tpu_val_t lo = sel(cx, a_lt, a, b), hi = sel(cx, a_lt, b, a);
  tpu_val_t lo_r = sel(cx, a_lt, ar, br), hi_r = sel(cx, a_lt, br, ar);
  tpu_val_t general = tpu_ew_add(g, tpu_ir_unary(g, TPU_IR_LOG1P,
                                                 tpu_ir_unary(g, TPU_IR_EXP, tpu_ew_sub(g, lo, hi))),
                                 hi);
  tpu_val_t both_pos = tpu_ir_unary(g, TPU_IR_LOG, tpu_ew_add(g, tpu_ir_unary(g, TPU_IR_EXP, lo),
                                                              tpu_ir_unary(g, TPU_IR_EXP, hi)));
  tpu_val_t same_inf = and2(cx, tpu_ir_compare(g, TPU_CMP_EQ, lo_r, hi_r),
                            tpu_ew_cmp_k(cx, TPU_CMP_EQ, tpu_ir_unary(g, TPU_IR_ABS, lo_r),
                                         INFINITY));
  tpu_val_t r = sel(cx, same_inf, sel(cx, tpu_ew_cmp_k(cx, TPU_CMP_LT, lo_r, 0), lo, both_pos),
                    general);
  return sel(cx, nan, k(cx, r, NAN), r);
}

static tpu_val_t logaddexp_fn(tpu_lower_ctx_t* cx, tpu_val_t a, tpu_val_t b) {
  if (tpu_graph_ok(cx->g) && tpu_dtype_is_complex(tpu_ir_dtype(cx->g, a)))
    return logaddexp_complex(cx, a, b);
  return logaddexp_real(cx, a, b, false);
}
static tpu_val_t logaddexp2_fn(tpu_lower_ctx_t* cx, tpu_val_t a, tpu_val_t b) {
  return logaddexp_real(cx, a, b, true);
}

// logaddexp takes real and complex floats, logaddexp2 real ones.
static tpu_status_t logaddexp_impl(tpu_lower_ctx_t* cx, bool base2) {
  tpu_dtype_t t;
  TPU_RETURN_IF_ERROR(promote(cx, 0, 1, &t));
  if (!tpu_dtype_is_float(t) && (base2 || !tpu_dtype_is_complex(t)))
    return tpu_not_implemented(base2 ? "logaddexp2_cpu" : "logaddexp_cpu", t);
  return tpu_ew_binary(cx, TPU_RULE_SAME, base2 ? logaddexp2_fn : logaddexp_fn);
}
tpu_status_t tpu_lower_logaddexp(tpu_lower_ctx_t* cx) { return logaddexp_impl(cx, false); }
tpu_status_t tpu_lower_logaddexp2(tpu_lower_ctx_t* cx) { return logaddexp_impl(cx, true); }

//===--- nextafter ---===//

// The next float after a toward b, on the bits: NaN when either is; b when
// they compare equal (so nextafter(0, -0) is -0); the smallest subnormal
// with b's sign from zero; else one step of the magnitude, up when moving
// away from zero. Comparisons use the sign-magnitude bits as ordered
// integers, so subnormals compare exactly.
static tpu_val_t nextafter_fn(tpu_lower_ctx_t* cx, tpu_val_t a, tpu_val_t b) {
  tpu_graph_t* g = cx->g;
  if (!tpu_graph_ok(g)) return TPU_VAL_NONE;
  tpu_dtype_t ft = tpu_ir_dtype(g, a);
  float_bits_t fb = bits_of(ft);
  uint64_t sign = (uint64_t)1 << (fb.width - 1);
  uint64_t inf = (((uint64_t)1 << (fb.width - 1 - fb.mant)) - 1) << fb.mant;
  tpu_val_t ia = bitcast_to(g, a, fb.it), ib = bitcast_to(g, b, fb.it);
  tpu_val_t mag_mask = kbits(cx, ia, sign - 1);
  tpu_val_t ma = and2(cx, ia, mag_mask), mb = and2(cx, ib, mag_mask);
  tpu_val_t nan = or2(cx, tpu_ir_compare(g, TPU_CMP_GT, ma, kbits(cx, ma, inf)),
                      tpu_ir_compare(g, TPU_CMP_GT, mb, kbits(cx, mb, inf)));
  tpu_val_t zero = k(cx, ia, 0);
  tpu_val_t a_neg = tpu_ir_compare(g, TPU_CMP_LT, ia, zero);
  tpu_val_t ka = sel(cx, a_neg, tpu_ir_unary(g, TPU_IR_NEG, ma), ma);
  tpu_val_t kb = sel(cx, tpu_ir_compare(g, TPU_CMP_LT, ib, zero), tpu_ir_unary(g, TPU_IR_NEG, mb), mb);
  tpu_val_t up = tpu_ir_compare(g, TPU_CMP_LT, ka, kb);
  tpu_val_t grow = tpu_ir_compare(g, TPU_CMP_NE, up, a_neg);  // the magnitude grows
  tpu_val_t one = k(cx, ia, 1);
  tpu_val_t step = sel(cx, grow, tpu_ew_add(g, ia, one), tpu_ew_sub(g, ia, one));
  tpu_val_t tiny = or2(cx, and2(cx, ib, kbits(cx, ib, sign)), one);
  tpu_val_t r = sel(cx, tpu_ir_compare(g, TPU_CMP_EQ, ma, zero), tiny, step);
  r = sel(cx, tpu_ir_compare(g, TPU_CMP_EQ, ka, kb), ib, r);
  return sel(cx, nan, tpu_ew_add(g, a, b), bitcast_to(g, r, ft));
}
tpu_status_t tpu_lower_nextafter(tpu_lower_ctx_t* cx) {
  tpu_dtype_t t;
  TPU_RETURN_IF_ERROR(promote(cx, 0, 1, &t));
  if (!tpu_dtype_is_float(t)) return tpu_not_implemented("nextafter_cpu", t);
  return tpu_ew_binary_ex(cx, TPU_RULE_SAME, nextafter_fn, TPU_EW_STORAGE);
}

//===--- frexp ---===//

// frexp.Tensor(self) -> (mantissa, exponent): x = mantissa * 2^exponent with
// |mantissa| in [0.5, 1); zeros, infinities and NaN give (x, 0), as C's
// frexp. Normal numbers take the exponent field; subnormals normalize their
// fraction by its leading bit (count_leading_zeros).
tpu_status_t tpu_lower_frexp(tpu_lower_ctx_t* cx) {
  tpu_dtype_t t = tpu_arg_value_dtype(cx, 0);
  if (!tpu_dtype_is_float(t))
    return tpu_status_make(TPU_CODE_INVALID_ARGUMENT,
                           "torch.frexp() only supports floating-point dtypes");
  tpu_dtype_t mo = tpu_lower_out_dtype(cx, 0, t), eo = tpu_lower_out_dtype(cx, 1, TPU_I32);
  if (mo != t)
    return tpu_status_make(TPU_CODE_INVALID_ARGUMENT,
                           "torch.frexp() expects mantissa to have dtype %s but got %s",
                           tpu_dtype_cpp_name(t), tpu_dtype_cpp_name(mo));
  if (eo != TPU_I32)
    return tpu_status_make(TPU_CODE_INVALID_ARGUMENT,
                           "torch.frexp() expects exponent to have int dtype but got %s",
                           tpu_dtype_cpp_name(eo));
  tpu_graph_t* g = cx->g;
  tpu_dtype_t ft = t == TPU_F64 ? TPU_F64 : TPU_F32;
  float_bits_t fb = bits_of(ft);
  tpu_val_t x = tpu_lower_input(cx, 0, ft);
  tpu_val_t bits = bitcast_to(g, x, fb.it);
  uint64_t sign = (uint64_t)1 << (fb.width - 1);
  uint64_t frac_mask = ((uint64_t)1 << fb.mant) - 1;
  uint64_t half_exp = (uint64_t)(fb.bias - 1) << fb.mant;  // the exponent of 0.5
  tpu_val_t mag = and2(cx, bits, kbits(cx, bits, sign - 1));
  tpu_val_t field = tpu_ir_binary(g, TPU_IR_SHR_L, mag, k(cx, mag, fb.mant));
  tpu_val_t frac = and2(cx, bits, kbits(cx, bits, frac_mask));
  tpu_val_t sign_bits = and2(cx, bits, kbits(cx, bits, sign));
  // normal: exponent field - (bias - 1), fraction kept
  tpu_val_t e_norm = tpu_ew_sub(g, field, k(cx, field, (double)(fb.bias - 1)));
  tpu_val_t m_norm = or2(cx, or2(cx, sign_bits, frac), kbits(cx, bits, half_exp));
  // subnormal: p = index of the fraction's top bit; x = frac * 2^(1 - bias - mant)
  tpu_val_t p = tpu_ew_sub(g, k(cx, frac, fb.width - 1), tpu_ir_unary(g, TPU_IR_CLZ, frac));
  tpu_val_t e_sub = tpu_ew_add(g, p, k(cx, p, (double)(2 - fb.bias - fb.mant)));
  tpu_val_t shifted = tpu_ir_binary(g, TPU_IR_SHL, frac, tpu_ew_sub(g, k(cx, p, fb.mant), p));
  tpu_val_t m_sub = or2(cx, or2(cx, sign_bits, and2(cx, shifted, kbits(cx, bits, frac_mask))),
                        kbits(cx, bits, half_exp));
  tpu_val_t zero = k(cx, field, 0);
  tpu_val_t is_sub = tpu_ir_compare(g, TPU_CMP_EQ, field, zero);
  tpu_val_t special = or2(cx, tpu_ir_compare(g, TPU_CMP_EQ, mag, zero),
                          tpu_ir_compare(g, TPU_CMP_EQ, field,
                                         k(cx, field, (double)(2 * fb.bias + 1))));
  tpu_val_t e = sel(cx, special, zero, sel(cx, is_sub, e_sub, e_norm));
  tpu_val_t m = sel(cx, special, bits, sel(cx, is_sub, m_sub, m_norm));
  tpu_lower_out(cx, 0, tpu_ir_convert(g, bitcast_to(g, m, ft), t));
  tpu_lower_out(cx, 1, tpu_ir_convert(g, e, TPU_I32));
  return TPU_OK;
}

//===--- xlog1py ---===//

// special_xlog1py: x * log1p(y), 0 where x == 0 unless y is NaN. CPU rounds
// log1p(y) and the product to f16 / bf16 separately.
static tpu_val_t xlog1py_fn(tpu_lower_ctx_t* cx, tpu_val_t x, tpu_val_t y) {
  tpu_graph_t* g = cx->g;
  tpu_val_t r = tpu_ew_mul(g, x, tpu_ir_unary(g, TPU_IR_LOG1P, y));
  r = sel(cx, tpu_ew_cmp_k(cx, TPU_CMP_EQ, x, 0), k(cx, x, 0), r);
  return sel(cx, tpu_ew_isnan(g, y), y, r);
}
tpu_status_t tpu_lower_xlog1py(tpu_lower_ctx_t* cx) {
  tpu_dtype_t t;
  TPU_RETURN_IF_ERROR(promote(cx, 0, 1, &t));
  if (tpu_dtype_is_complex(t)) return tpu_not_implemented("xlog1py_cpu", t);
  return tpu_ew_binary_ex(cx, TPU_RULE_FLOAT, xlog1py_fn, TPU_EW_STORAGE);
}

//===--- hardshrink, softshrink ---===//

// The float dtype of arg i, or CPU's refusal.
static tpu_status_t float_arg(tpu_lower_ctx_t* cx, int i, const char* kernel, tpu_dtype_t* t) {
  *t = tpu_arg_value_dtype(cx, i);
  if (!tpu_dtype_is_float(*t)) return tpu_not_implemented(kernel, *t);
  return TPU_OK;
}

// Scalar lambd (arg i) rounded to `storage`, as a value like x.
static tpu_val_t lambd_like(tpu_lower_ctx_t* cx, int i, tpu_dtype_t storage, tpu_val_t x) {
  if (!tpu_graph_ok(cx->g)) return TPU_VAL_NONE;
  const tpu_type_t* t = tpu_ir_type(cx->g, x);
  tpu_val_t v = tpu_ir_convert(cx->g, tpu_lower_input(cx, i, storage), t->dtype);
  return tpu_ir_broadcast(cx->g, v, t->dims, t->rank, NULL);
}

// -lambd <= x <= lambd (false for NaN)
static tpu_val_t inside(tpu_lower_ctx_t* cx, tpu_val_t x, tpu_val_t l) {
  tpu_graph_t* g = cx->g;
  return and2(cx, tpu_ir_compare(g, TPU_CMP_GE, x, tpu_ir_unary(g, TPU_IR_NEG, l)),
              tpu_ir_compare(g, TPU_CMP_LE, x, l));
}

// hardshrink(self, lambd=0.5): 0 inside [-lambd, lambd], else x; lambd is
// rounded to the tensor's dtype first, as CPU does.
tpu_status_t tpu_lower_hardshrink(tpu_lower_ctx_t* cx) {
  tpu_dtype_t t;
  TPU_RETURN_IF_ERROR(float_arg(cx, 0, "hardshrink_cpu", &t));
  tpu_val_t x = tpu_lower_input(cx, 0, tpu_opmath(t));
  tpu_val_t l = tpu_arg_present(cx, 1) ? lambd_like(cx, 1, t, x) : k(cx, x, 0.5);
  tpu_lower_out(cx, 0, tpu_ir_convert(cx->g, sel(cx, inside(cx, x, l), k(cx, x, 0), x), t));
  return TPU_OK;
}

// hardshrink_backward / softshrink_backward(grad, self, lambd): grad outside
// [-lambd, lambd], else 0 (CPU's shrink_backward, lambd in the dtype). A NaN
// self gives 0, as in CPU's vectorized loop (its scalar loop, which handles
// the last few elements of a tensor, gives grad).
tpu_status_t tpu_lower_shrink_backward(tpu_lower_ctx_t* cx) {
  tpu_dtype_t t;
  TPU_RETURN_IF_ERROR(promote(cx, 0, 1, &t));
  if (!tpu_dtype_is_float(t)) return tpu_not_implemented("shrink_backward_cpu", t);
  int args[2] = {0, 1};
  tpu_val_t v[2];
  TPU_RETURN_IF_ERROR(tpu_ew_inputs(cx, args, 2, t, tpu_opmath(t), 0, v));
  tpu_val_t l = lambd_like(cx, 2, t, v[1]);
  tpu_graph_t* g = cx->g;
  tpu_val_t outside = or2(cx, tpu_ir_compare(g, TPU_CMP_GT, v[1], l),
                          tpu_ir_compare(g, TPU_CMP_LT, v[1], tpu_ir_unary(g, TPU_IR_NEG, l)));
  tpu_val_t r = sel(cx, outside, v[0], k(cx, v[0], 0));
  tpu_lower_out(cx, 0, tpu_ir_convert(g, r, t));
  return TPU_OK;
}

// The largest finite value of a float dtype.
static double float_max(tpu_dtype_t t) {
  switch (t) {
    case TPU_F16: return 65504.0;
    case TPU_BF16: return 3.3895313892515355e38;
    case TPU_F64: return DBL_MAX;
    default: return FLT_MAX;
  }
}

// softshrink(self, lambd=0.5): x - lambd above lambd, x + lambd below
// -lambd, else x * 0 (NaN stays NaN). lambd must lie in [0, max of dtype];
// it is taken in the compute dtype (float for f16 / bf16).
tpu_status_t tpu_lower_softshrink(tpu_lower_ctx_t* cx) {
  tpu_dtype_t t;
  TPU_RETURN_IF_ERROR(float_arg(cx, 0, "softshrink_check", &t));
  double lambd = tpu_arg_number(cx, 1, 0.5);
  if (!(lambd >= 0 && lambd <= float_max(t)))
    return tpu_status_make(TPU_CODE_INVALID_ARGUMENT,
                           "lambda must be in range [0, %g] for input dtype %s, but found %g",
                           float_max(t), tpu_dtype_torch_name(t), lambd);
  tpu_graph_t* g = cx->g;
  tpu_val_t x = tpu_lower_input(cx, 0, tpu_opmath(t));
  tpu_val_t l = tpu_arg_present(cx, 1) ? lambd_like(cx, 1, tpu_opmath(t), x) : k(cx, x, 0.5);
  tpu_val_t r = sel(cx, tpu_ir_compare(g, TPU_CMP_LT, x, tpu_ir_unary(g, TPU_IR_NEG, l)),
                    tpu_ew_add(g, x, l), tpu_ew_mul(g, x, k(cx, x, 0)));
  r = sel(cx, tpu_ir_compare(g, TPU_CMP_GT, x, l), tpu_ew_sub(g, x, l), r);
  tpu_lower_out(cx, 0, tpu_ir_convert(g, r, t));
  return TPU_OK;
}

//===--- prelu ---===//

// _prelu_kernel's operands share one float dtype (TensorIterator's check).
static tpu_status_t prelu_dtypes(tpu_lower_ctx_t* cx, int first, int n, tpu_dtype_t* t) {
  *t = tpu_arg_value_dtype(cx, first);
  for (int i = first + 1; i < first + n; ++i)
    if (tpu_arg_value_dtype(cx, i) != *t)
      return tpu_status_make(TPU_CODE_INVALID_ARGUMENT, "Found dtype %s but expected %s",
                             tpu_dtype_torch_name(tpu_arg_value_dtype(cx, i)),
                             tpu_dtype_torch_name(*t));
  if (!tpu_dtype_is_float(*t)) return tpu_not_implemented("prelu_cpu", *t);
  return TPU_OK;
}

// _prelu_kernel(self, weight): x > 0 ? x : weight * x, weight broadcast
// (prelu has already shaped it to the channel dim).
tpu_status_t tpu_lower_prelu(tpu_lower_ctx_t* cx) {
  tpu_dtype_t t;
  TPU_RETURN_IF_ERROR(prelu_dtypes(cx, 0, 2, &t));
  int args[2] = {0, 1};
  tpu_val_t v[2];
  TPU_RETURN_IF_ERROR(tpu_ew_inputs(cx, args, 2, t, tpu_opmath(t), 0, v));
  tpu_graph_t* g = cx->g;
  tpu_val_t r = sel(cx, tpu_ew_cmp_k(cx, TPU_CMP_GT, v[0], 0), v[0], tpu_ew_mul(g, v[1], v[0]));
  tpu_lower_out(cx, 0, tpu_ir_convert(g, r, t));
  return TPU_OK;
}

// _prelu_kernel_backward(grad_output, self, weight) -> (grad_self,
// grad_weight), both of the broadcast shape (autograd sums grad_weight down
// to the weight's): x > 0 ? (dy, 0) : (weight * dy, x * dy).
tpu_status_t tpu_lower_prelu_backward(tpu_lower_ctx_t* cx) {
  tpu_dtype_t t;
  TPU_RETURN_IF_ERROR(prelu_dtypes(cx, 0, 3, &t));
  int args[3] = {0, 1, 2};
  tpu_val_t v[3];
  TPU_RETURN_IF_ERROR(tpu_ew_inputs(cx, args, 3, t, tpu_opmath(t), 0, v));
  tpu_graph_t* g = cx->g;
  tpu_val_t dy = v[0], x = v[1], w = v[2];
  tpu_val_t pos = tpu_ew_cmp_k(cx, TPU_CMP_GT, x, 0);
  tpu_val_t gx = sel(cx, pos, dy, tpu_ew_mul(g, w, dy));
  tpu_val_t gw = sel(cx, pos, k(cx, dy, 0), tpu_ew_mul(g, x, dy));
  tpu_lower_out(cx, 0, tpu_ir_convert(g, gx, t));
  tpu_lower_out(cx, 1, tpu_ir_convert(g, gw, t));
  return TPU_OK;
}

//===--- equal ---===//

// equal(self, other) -> bool, as a 0-d bool value: every element equal
// (NaN never is) in the promoted dtype. The binding (dynamic.cpp) checks the
// sizes first (different sizes are unequal, not broadcast) and reads the
// value back.
tpu_status_t tpu_lower_equal(tpu_lower_ctx_t* cx) {
  tpu_dtype_t t;
  TPU_RETURN_IF_ERROR(promote(cx, 0, 1, &t));
  int args[2] = {0, 1};
  tpu_val_t v[2];
  TPU_RETURN_IF_ERROR(tpu_lower_broadcast_inputs(cx, args, 2, t, v));
  tpu_graph_t* g = cx->g;
  int rank = tpu_arg_rank(cx, 0);
  int64_t dims[TPU_MAX_RANK];
  for (int i = 0; i < rank; ++i) dims[i] = i;
  tpu_val_t eq = tpu_ir_compare(g, TPU_CMP_EQ, v[0], v[1]);
  tpu_lower_out(cx, 0, tpu_ir_reduce(g, eq, tpu_ir_const_i(g, TPU_BOOL, 1, NULL, 0), dims, rank,
                                     TPU_BODY_AND));
  return TPU_OK;
}

//===--- linalg_cross ---===//

// Component i (of 3) of v along dim.
static tpu_val_t component(tpu_lower_ctx_t* cx, tpu_val_t v, int dim, int i) {
  if (!tpu_graph_ok(cx->g)) return TPU_VAL_NONE;
  const tpu_type_t* t = tpu_ir_type(cx->g, v);
  int64_t start[TPU_MAX_RANK] = {0}, limit[TPU_MAX_RANK];
  for (int d = 0; d < t->rank; ++d) limit[d] = t->dims[d];
  start[dim] = i;
  limit[dim] = i + 1;
  return tpu_ir_slice(cx->g, v, start, limit, NULL);
}

// linalg_cross(self, other, *, dim=-1): operands of one dtype and rank,
// length 3 along dim, other dims broadcast. CPU computes in the dtype itself
// (each f16 / bf16 product and difference rounded).
tpu_status_t tpu_lower_linalg_cross(tpu_lower_ctx_t* cx) {
  int rank = tpu_arg_rank(cx, 0);
  int64_t dim;
  TPU_RETURN_IF_ERROR(tpu_wrap_dim(tpu_arg_int(cx, 2, -1), rank, &dim));
  if (tpu_arg_rank(cx, 1) != rank)
    return tpu_status_make(TPU_CODE_INVALID_ARGUMENT,
                           "linalg.cross: inputs must have the same number of dimensions.");
  int64_t na = tpu_arg_sizes(cx, 0)[dim], nb = tpu_arg_sizes(cx, 1)[dim];
  if (na != 3 || nb != 3)
    return tpu_status_make(TPU_CODE_INVALID_ARGUMENT,
                           "linalg.cross: inputs dimension %lld must have length 3. Got %lld "
                           "and %lld", (long long)tpu_arg_int(cx, 2, -1), (long long)na,
                           (long long)nb);
  tpu_dtype_t t = tpu_arg_value_dtype(cx, 0), o = tpu_arg_value_dtype(cx, 1);
  if (o != t)
    return tpu_status_make(TPU_CODE_INVALID_ARGUMENT, "expected scalar type %s but found %s",
                           tpu_dtype_torch_name(t), tpu_dtype_torch_name(o));
  if (t == TPU_BOOL) return tpu_not_implemented("cross", t);
  int args[2] = {0, 1};
  tpu_val_t v[2];
  TPU_RETURN_IF_ERROR(tpu_lower_broadcast_inputs(cx, args, 2, t, v));
  tpu_graph_t* g = cx->g;
  tpu_val_t a[3], b[3], r[3];
  for (int i = 0; i < 3; ++i) {
    a[i] = component(cx, v[0], (int)dim, i);
    b[i] = component(cx, v[1], (int)dim, i);
  }
  for (int i = 0; i < 3; ++i) {
    int j = (i + 1) % 3, l = (i + 2) % 3;
    r[i] = tpu_ew_sub(g, tpu_ew_mul(g, a[j], b[l]), tpu_ew_mul(g, a[l], b[j]));
  }
  tpu_lower_out(cx, 0, tpu_ir_concat(g, r, 3, (int)dim));
  return TPU_OK;
}

//===--- channel_shuffle ---===//

// channel_shuffle(self, groups): channels [g, c/g] read as [c/g, g], a
// reshape, transpose and reshape back.
tpu_status_t tpu_lower_channel_shuffle(tpu_lower_ctx_t* cx) {
  int rank = tpu_arg_rank(cx, 0);
  const int64_t* sizes = tpu_arg_sizes(cx, 0);
  if (rank <= 2) {
    char buf[256] = "";
    size_t n = 0;
    for (int i = 0; i < rank && n < sizeof buf; ++i)
      n += (size_t)snprintf(buf + n, sizeof buf - n, "%s%lld", i ? ", " : "", (long long)sizes[i]);
    return tpu_status_make(TPU_CODE_INVALID_ARGUMENT,
                           "channel_shuffle expects input with > 2 dims, but got input with "
                           "sizes [%s]", buf);
  }
  int64_t groups = tpu_arg_int(cx, 1, 1);
  if (groups <= 0)
    return tpu_status_make(TPU_CODE_INVALID_ARGUMENT,
                           "Number of groups to divide channels in must be positive. Value of "
                           "groups:%lld", (long long)groups);
  int64_t c = sizes[1];
  if (c % groups)
    return tpu_status_make(TPU_CODE_INVALID_ARGUMENT,
                           "Number of channels must be divisible by groups. Got %lld channels "
                           "and %lld groups.", (long long)c, (long long)groups);
  if (rank + 1 > TPU_MAX_RANK)
    return tpu_status_make(TPU_CODE_UNIMPLEMENTED, "channel_shuffle: too many dimensions");
  tpu_graph_t* g = cx->g;
  int64_t split[TPU_MAX_RANK], perm[TPU_MAX_RANK];
  split[0] = sizes[0];
  split[1] = groups;
  split[2] = c / groups;
  for (int i = 2; i < rank; ++i) split[i + 1] = sizes[i];
  for (int i = 0; i <= rank; ++i) perm[i] = i;
  perm[1] = 2;
  perm[2] = 1;
  tpu_val_t x = tpu_ir_reshape(g, tpu_lower_tensor(cx, 0), split, rank + 1);
  x = tpu_ir_transpose(g, x, perm);
  tpu_lower_out(cx, 0, tpu_ir_reshape(g, x, sizes, rank));
  return TPU_OK;
}

//===--- embedding_renorm_ ---===//

// The p-norm of each row of |x| (rank 2, real `mag` values), as [rows].
static tpu_val_t row_norms(tpu_lower_ctx_t* cx, tpu_val_t mag, double p) {
  tpu_graph_t* g = cx->g;
  if (!tpu_graph_ok(g)) return TPU_VAL_NONE;
  tpu_dtype_t t = tpu_ir_dtype(g, mag);
  int64_t d1 = 1;
  tpu_val_t zero = tpu_ir_const(g, t, 0, NULL, 0);
  if (isinf(p))
    return tpu_ir_reduce(g, mag, tpu_ir_const(g, t, p > 0 ? 0 : INFINITY, NULL, 0), &d1, 1,
                         p > 0 ? TPU_BODY_MAX : TPU_BODY_MIN);
  if (p == 0)
    return tpu_ir_reduce(g, tpu_ir_convert(g, tpu_ew_cmp_k(cx, TPU_CMP_NE, mag, 0), t), zero,
                         &d1, 1, TPU_BODY_ADD);
  if (p == 1) return tpu_ir_reduce(g, mag, zero, &d1, 1, TPU_BODY_ADD);
  if (p == 2)
    return tpu_ir_unary(g, TPU_IR_SQRT,
                        tpu_ir_reduce(g, tpu_ew_mul(g, mag, mag), zero, &d1, 1, TPU_BODY_ADD));
  tpu_val_t s = tpu_ir_reduce(g, tpu_ir_binary(g, TPU_IR_POW, mag, k(cx, mag, p)), zero, &d1, 1,
                              TPU_BODY_ADD);
  return tpu_ir_binary(g, TPU_IR_POW, s, k(cx, s, 1.0 / p));
}

// embedding_renorm_(self, indices, max_norm, norm_type): each row of self
// that indices name (once, however often named; negative indices count
// from the end) whose norm exceeds max_norm is scaled by
// max_norm / (norm + 1e-7), that factor computed in double as on CPU and
// rounded to self's dtype.
tpu_status_t tpu_lower_embedding_renorm(tpu_lower_ctx_t* cx) {
  if (tpu_arg_rank(cx, 0) != 2)
    return tpu_status_make(TPU_CODE_INVALID_ARGUMENT,
                           "Expected 2-dimensional tensor, but got %d-dimensional tensor for "
                           "argument #1 'self' (while checking arguments for embedding_renorm_)",
                           tpu_arg_rank(cx, 0));
  tpu_dtype_t it = tpu_arg_value_dtype(cx, 1), t = tpu_arg_value_dtype(cx, 0);
  if (it != TPU_I64 && it != TPU_I32)
    return tpu_status_make(TPU_CODE_INVALID_ARGUMENT,
                           "Expected tensor for argument #2 'indices' to have one of the "
                           "following scalar types: Long, Int; but got %s instead (while "
                           "checking arguments for embedding_renorm_)",
                           tpu_dtype_torch_name(it));
  if (!tpu_dtype_is_float(t) && !tpu_dtype_is_complex(t))
    return tpu_status_make(TPU_CODE_INVALID_ARGUMENT,
                           "norm(): input dtype should be either floating point or complex. "
                           "Got %s instead.", tpu_dtype_torch_name(t));
  tpu_graph_t* g = cx->g;
  const int64_t* sizes = tpu_arg_sizes(cx, 0);
  int64_t rows = sizes[0];
  tpu_dtype_t ct = tpu_opmath(t);
  tpu_dtype_t rt = ct == TPU_C64 ? TPU_F32 : ct == TPU_C128 ? TPU_F64 : ct;
  tpu_val_t x = tpu_lower_input(cx, 0, ct);
  tpu_val_t idx = tpu_lower_input(cx, 1, TPU_I64);
  int irank = tpu_arg_rank(cx, 1);
  tpu_val_t n = k(cx, idx, (double)rows);
  tpu_val_t bad = or2(cx, tpu_ew_cmp_k(cx, TPU_CMP_LT, idx, (double)-rows),
                      tpu_ir_compare(g, TPU_CMP_GE, idx, n));
  if (tpu_graph_ok(g) && irank > 0) {
    int64_t all[TPU_MAX_RANK];
    for (int i = 0; i < irank; ++i) all[i] = i;
    bad = tpu_ir_reduce(g, bad, tpu_ir_const_i(g, TPU_BOOL, 0, NULL, 0), all, irank, TPU_BODY_OR);
  }
  tpu_lower_assert(cx, bad, TPU_CODE_OUT_OF_RANGE,
                   "select(): index out of range for tensor of size [%lld, %lld] at dimension 0",
                   (long long)rows, (long long)sizes[1]);
  idx = sel(cx, tpu_ew_cmp_k(cx, TPU_CMP_LT, idx, 0), tpu_ew_add(g, idx, n), idx);
  tpu_val_t named = tpu_ir_const_i(g, TPU_BOOL, 0, &rows, 1);
  if (tpu_graph_ok(g)) {
    const tpu_type_t* ity = tpu_ir_type(g, idx);
    tpu_val_t ones = tpu_ir_const_i(g, TPU_BOOL, 1, ity->dims, ity->rank);
    tpu_scatter_dims_t dn = {0};
    dn.n_inserted = 1;
    dn.n_to_operand = 1;
    dn.index_vector_dim = irank;
    named = tpu_ir_scatter(g, named, idx, ones, &dn, TPU_BODY_OR);
  }
  tpu_val_t mag = tpu_ir_convert(g, tpu_ir_unary(g, TPU_IR_ABS, x), rt);
  tpu_dtype_t st = t == TPU_C64 ? TPU_F32 : t == TPU_C128 ? TPU_F64 : t;
  tpu_val_t norm = tpu_ir_convert(g, row_norms(cx, mag, tpu_arg_float(cx, 3, 2)), st);
  // CPU reads the norm (rounded to self's real dtype) as a double
  tpu_val_t nd = tpu_ir_convert(g, norm, TPU_F64);
  tpu_val_t max_norm = tpu_ew_number_like(cx, nd, tpu_arg_float(cx, 2, 0));
  tpu_val_t scale = tpu_ew_div(g, max_norm, tpu_ew_add(g, nd, k(cx, nd, 1e-7)));
  tpu_val_t scale_rows = and2(cx, named, tpu_ir_compare(g, TPU_CMP_GT, nd, max_norm));
  scale = sel(cx, scale_rows, scale, k(cx, scale, 1));
  // CPU multiplies by that factor rounded to self's dtype (bfloat16 and
  // float16 too, not their float32 opmath; bit for bit on random rows)
  scale = tpu_ir_convert(g, tpu_ir_convert(g, scale, st), ct);
  int64_t bdim = 0;
  tpu_val_t r = tpu_ew_mul(g, x, tpu_ir_broadcast(g, scale, sizes, 2, &bdim));
  tpu_lower_out(cx, 0, tpu_ir_convert(g, sel(cx, tpu_ir_broadcast(g, scale_rows, sizes, 2, &bdim),
                                             r, x),
                                      t));
  return TPU_OK;
}

//===--- rrelu_with_noise ---===//

// This call's generator argument (the binding turns `Generator?` into one).
static const tpu_arg_t* rng_arg(const tpu_lower_ctx_t* cx) {
  for (int i = 0; i < cx->num_args; ++i)
    if (cx->args[i].kind == TPU_ARG_RNG) return &cx->args[i];
  return NULL;
}

// Uniform floats in [0, 1) of x's shape and `compute` dtype from the call's
// Philox stream, laid out as lower_rng.c lays out its own (the generator's
// key, then its counter as the high half of the 128-bit block counter), on
// the grid of 2^-digits so that 1 is never reached.
static tpu_val_t unit_uniform(tpu_lower_ctx_t* cx, tpu_val_t like, tpu_dtype_t compute) {
  tpu_graph_t* g = cx->g;
  const tpu_arg_t* a = rng_arg(cx);
  if (!a) {
    tpu_graph_fail(g, tpu_status_make(TPU_CODE_INTERNAL, "%s: no generator argument",
                                      cx->row->name));
    return TPU_VAL_NONE;
  }
  if (!tpu_graph_ok(g)) return TPU_VAL_NONE;
  const tpu_type_t* t = tpu_ir_type(g, like);
  bool wide = compute == TPU_F64;
  int bits = wide ? 64 : 32, digits = wide ? 53 : 24;
  tpu_type_t wt = tpu_type_make(wide ? TPU_U64 : TPU_U32, t->dims, t->rank);
  if (tpu_type_numel(&wt) == 0) return tpu_ir_const(g, compute, 0, t->dims, t->rank);
  uint64_t state[3] = {a->rng[0], 0, a->rng[1]};
  int64_t n = 3;
  tpu_val_t s = tpu_lower_bytes(cx, TPU_U64, &n, 1, state);
  tpu_val_t words = tpu_ir_result(g, tpu_ir_rng_bits(g, s, &wt), 1);
  tpu_val_t top = tpu_ir_binary(g, TPU_IR_SHR_L, words, k(cx, words, bits - digits));
  return tpu_ew_mul(g, tpu_ir_convert(g, top, compute), k(cx, like, ldexp(1, -digits)));
}

// rrelu_with_noise(self, noise, lower, upper, training, generator):
// evaluation is leaky_relu with slope (lower + upper) / 2 (in double, then
// the compute dtype). Training draws a slope r ~ U[lower, upper) for each
// x <= 0 (x * r, noise = r) and sets noise = 1 elsewhere; noise is written
// in place. The in-place form (rrelu_with_noise_) has self and noise as its
// targets and the functional one returns new tensors, so both get (result,
// noise) as results (the functional caller drops the second); the out=
// form writes only out.
tpu_status_t tpu_lower_rrelu_with_noise(tpu_lower_ctx_t* cx) {
  tpu_dtype_t t = tpu_arg_value_dtype(cx, 0);
  bool training = tpu_arg_bool(cx, 4, false);
  if (!tpu_dtype_is_float(t))
    return tpu_not_implemented(training ? "rrelu_with_noise_out_cpu" : "leaky_relu_cpu", t);
  int rank = tpu_arg_rank(cx, 0), nrank = tpu_arg_rank(cx, 1);
  const int64_t* xs = tpu_arg_sizes(cx, 0);
  const int64_t* ns = tpu_arg_sizes(cx, 1);
  bool same = rank == nrank;
  for (int i = 0; same && i < rank; ++i) same = xs[i] == ns[i];
  if (!same) {
    char a[256] = "", b[256] = "";
    size_t na = 0, nb = 0;
    for (int i = 0; i < rank && na < sizeof a; ++i)
      na += (size_t)snprintf(a + na, sizeof a - na, "%s%lld", i ? ", " : "", (long long)xs[i]);
    for (int i = 0; i < nrank && nb < sizeof b; ++i)
      nb += (size_t)snprintf(b + nb, sizeof b - nb, "%s%lld", i ? ", " : "", (long long)ns[i]);
    return tpu_status_make(TPU_CODE_INVALID_ARGUMENT,
                           "noise tensor shape must match self tensor shape. Got self.shape = "
                           "[%s] noise.shape = [%s]", a, b);
  }
  if (training && tpu_arg_value_dtype(cx, 1) != t)
    return tpu_status_make(TPU_CODE_INVALID_ARGUMENT, "expected scalar type %s but found %s",
                           tpu_dtype_torch_name(t),
                           tpu_dtype_torch_name(tpu_arg_value_dtype(cx, 1)));
  tpu_graph_t* g = cx->g;
  tpu_dtype_t ct = tpu_opmath(t);
  double lower = tpu_arg_number(cx, 2, 0.125), upper = tpu_arg_number(cx, 3, 1.0 / 3.0);
  tpu_val_t x = tpu_lower_input(cx, 0, ct);
  tpu_val_t noise = tpu_lower_tensor(cx, 1);
  tpu_val_t r, new_noise = noise;
  tpu_val_t pos = tpu_ew_cmp_k(cx, TPU_CMP_GT, x, 0);
  if (!training) {
    tpu_val_t slope = tpu_ew_number_like(cx, x, (lower + upper) / 2);
    r = sel(cx, pos, x, tpu_ew_mul(g, x, slope));
  } else {
    // CPU draws only for x <= 0, where lower > upper fails
    if (lower > upper && tpu_graph_ok(g)) {
      int64_t all[TPU_MAX_RANK];
      for (int i = 0; i < rank; ++i) all[i] = i;
      tpu_val_t any = tpu_ir_reduce(g, tpu_ew_cmp_k(cx, TPU_CMP_LE, x, 0),
                                    tpu_ir_const_i(g, TPU_BOOL, 0, NULL, 0), all, rank,
                                    TPU_BODY_OR);
      tpu_lower_assert(cx, any, TPU_CODE_INVALID_ARGUMENT,
                       "Expected from <= to to be true, but got false.  (Could this error "
                       "message be improved?  If so, please report an enhancement request "
                       "to PyTorch.)");
    }
    tpu_val_t lo = tpu_ew_number_like(cx, x, lower), hi = tpu_ew_number_like(cx, x, upper);
    tpu_val_t slope = tpu_ew_add(g, lo, tpu_ew_mul(g, unit_uniform(cx, x, ct),
                                                    tpu_ew_sub(g, hi, lo)));
    // NaN takes the x > 0 branch, as CPU's x <= 0 test is false for it
    tpu_val_t le = tpu_ew_cmp_k(cx, TPU_CMP_LE, x, 0);
    r = sel(cx, le, tpu_ew_mul(g, x, slope), x);
    new_noise = tpu_ir_convert(g, sel(cx, le, slope, k(cx, slope, 1)), tpu_arg_value_dtype(cx, 1));
    tpu_lower_write_arg(cx, 1, new_noise);
  }
  tpu_lower_out(cx, 0, tpu_ir_convert(g, r, t));
  // The functional and in-place forms return (or write) the noise too; the
  // out= form has one target and updates the noise as an input.
  if (cx->num_out_dtypes != 1) tpu_lower_out(cx, 1, new_noise);
  return TPU_OK;
}
