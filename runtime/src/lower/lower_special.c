// Special functions: the gamma family (lgamma, digamma, trigamma,
// polygamma, mvlgamma), erfinv, sinc / logit, and the modified Bessel functions
// i0 / i0e / i1 / i1e with the Kaiser window built on i0. They are written
// out so that they agree with CPU's kernels where XLA's (chlo's)
// approximations do not: at the roots and poles, for negative arguments.
#include <math.h>

#include "lower/elementwise.h"

// lgamma: exactly 0 at 1 and 2, as CPU's (chlo's approximation is off by
// a few ulps of 1 there).
static tpu_val_t lgamma_fn(tpu_lower_ctx_t* cx, tpu_val_t x) {
  tpu_graph_t* g = cx->g;
  tpu_val_t root = tpu_ir_binary(g, TPU_IR_OR, tpu_ew_cmp_k(cx, TPU_CMP_EQ, x, 1),
                                 tpu_ew_cmp_k(cx, TPU_CMP_EQ, x, 2));
  return tpu_ir_select(g, root, tpu_lower_const_like(cx, x, 0), tpu_ir_unary(g, TPU_IR_LGAMMA, x));
}
TPU_EW_UNARY_REAL(lgamma, FLOAT)

// erfinv: chlo's float32 approximation is off by up to ~50 ulps near
// ±1 (10 at |x| ~ 0.999), which erfinv's derivative, sqrt(pi)/2
// exp(y^2), carries into gradients; CPU's is within an ulp. One Newton
// step on erf(y) = x fixes it: the residual x - erf(y) is taken as
// erfc(|y|) - (1 - |x|) for |x| >= 1/2, where 1 - |x| is exact and erfc
// keeps its relative precision (x - erf(y) would cancel to nothing near
// 1). Measured on a dense grid of (-1, 1): at most 2.4 ulps (chlo's erf
// and erfc, a few ulps themselves), 0.7 at |x| > 0.999. ±1 (y infinite)
// and NaN keep chlo's result. float64 keeps chlo's, a rational
// approximation of its own.
static tpu_val_t erfinv_fn(tpu_lower_ctx_t* cx, tpu_val_t x) {
  tpu_graph_t* g = cx->g;
  tpu_val_t y = tpu_ir_unary(g, TPU_IR_ERF_INV, x);
  if (!tpu_graph_ok(g) || tpu_ir_dtype(g, x) != TPU_F32) return y;
  tpu_val_t a = tpu_ir_unary(g, TPU_IR_ABS, x), ya = tpu_ir_unary(g, TPU_IR_ABS, y);
  tpu_val_t tail = tpu_ew_sub(g, tpu_ir_unary(g, TPU_IR_ERFC, ya),
                              tpu_ew_sub(g, tpu_lower_const_like(cx, a, 1), a));
  tpu_val_t central = tpu_ew_sub(g, a, tpu_ir_unary(g, TPU_IR_ERF, ya));
  tpu_val_t residual = tpu_ir_select(g, tpu_ew_cmp_k(cx, TPU_CMP_GE, a, 0.5), tail, central);
  // residual / erf'(|y|), erf'(y) = 2/sqrt(pi) exp(-y^2)
  tpu_val_t half_sqrt_pi = tpu_lower_const_like(cx, a, 0.5 * sqrt(M_PI));
  tpu_val_t step = tpu_ew_mul(g, tpu_ew_mul(g, residual, half_sqrt_pi),
                              tpu_ir_unary(g, TPU_IR_EXP, tpu_ew_mul(g, ya, ya)));
  tpu_val_t refined = tpu_ew_copysign(cx, tpu_ew_add(g, ya, step), x);  // (-0 stays -0)
  return tpu_ir_select(g, tpu_ir_unary(g, TPU_IR_IS_FINITE, y), refined, y);
}
TPU_EW_UNARY_REAL(erfinv, FLOAT)

// digamma and trigamma follow CPU's algorithms (reflection below 0 or 1/2,
// recurrence up to 10 or 6 steps, then the asymptotic series), so that
// negative arguments match: chlo's digamma is far off there.
static tpu_val_t k_like(tpu_lower_ctx_t* cx, tpu_val_t x, double v) {
  return tpu_lower_const_like(cx, x, v);
}

// digamma: -inf at +0, +inf at -0, NaN at negative integers.
static tpu_val_t digamma_fn(tpu_lower_ctx_t* cx, tpu_val_t x) {
  tpu_graph_t* g = cx->g;
  if (!tpu_graph_ok(g)) return TPU_VAL_NONE;
  tpu_dtype_t t = tpu_ir_dtype(g, x);
  tpu_val_t neg = tpu_ew_cmp_k(cx, TPU_CMP_LT, x, 0);
  tpu_val_t y = tpu_ir_select(g, neg, tpu_ew_sub(g, k_like(cx, x, 1), x), x);
  tpu_val_t result = k_like(cx, x, 0);
  for (int i = 0; i < 10; ++i) {  // push y to 10 or more
    tpu_val_t small = tpu_ew_cmp_k(cx, TPU_CMP_LT, y, 10);
    result = tpu_ir_select(g, small, tpu_ew_sub(g, result, tpu_ew_div(g, k_like(cx, x, 1), y)), result);
    y = tpu_ir_select(g, small, tpu_ew_add(g, y, k_like(cx, x, 1)), y);
  }
  static const double A[] = {8.33333333333333333333E-2, -2.10927960927960927961E-2,
                             7.57575757575757575758E-3, -4.16666666666666666667E-3,
                             3.96825396825396825397E-3, -8.33333333333333333333E-3,
                             8.33333333333333333333E-2};
  tpu_val_t z = tpu_ew_div(g, k_like(cx, x, 1), tpu_ew_mul(g, y, y));
  tpu_val_t poly = k_like(cx, x, A[0]);
  for (int i = 1; i < 7; ++i) poly = tpu_ew_add(g, tpu_ew_mul(g, poly, z), k_like(cx, x, A[i]));
  tpu_val_t tail = tpu_ir_select(g, tpu_ew_cmp_k(cx, TPU_CMP_LT, y, 1e17), tpu_ew_mul(g, z, poly),
                                 k_like(cx, x, 0));
  tpu_val_t asym = tpu_ew_sub(g, tpu_ew_sub(g, tpu_ir_unary(g, TPU_IR_LOG, y),
                                            tpu_ew_div(g, k_like(cx, x, 0.5), y)), tail);
  tpu_val_t r = tpu_ew_add(g, result, tpu_ir_select(g, tpu_ew_cmp_k(cx, TPU_CMP_EQ, y, 10),
                                                    k_like(cx, x, 2.25175258906672110764), asym));
  // Reflection, with pi / tan(pi * frac(x)) in double as CPU.
  tpu_val_t xd = tpu_ir_convert(g, x, TPU_F64);
  tpu_val_t whole = tpu_ir_select(g, tpu_ew_cmp_k(cx, TPU_CMP_LT, xd, 0),
                                  tpu_ir_unary(g, TPU_IR_CEIL, xd), tpu_ir_unary(g, TPU_IR_FLOOR, xd));
  tpu_val_t pix = tpu_ew_mul(g, k_like(cx, xd, M_PI), tpu_ew_sub(g, xd, whole));
  tpu_val_t refl = tpu_ir_convert(g, tpu_ew_div(g, k_like(cx, xd, M_PI),
                                                tpu_ir_unary(g, TPU_IR_TAN, pix)), t);
  r = tpu_ir_select(g, neg, tpu_ew_sub(g, r, refl), r);
  tpu_val_t integer = tpu_ir_compare(g, TPU_CMP_EQ, x, tpu_ir_unary(g, TPU_IR_FLOOR, x));
  r = tpu_ir_select(g, tpu_ir_binary(g, TPU_IR_AND, neg, integer), k_like(cx, x, NAN), r);
  tpu_val_t pole = tpu_ew_copysign(cx, k_like(cx, x, INFINITY), tpu_ir_unary(g, TPU_IR_NEG, x));
  return tpu_ir_select(g, tpu_ew_cmp_k(cx, TPU_CMP_EQ, x, 0), pole, r);
}

// trigamma (polygamma(1, x)).
static tpu_val_t trigamma_fn(tpu_lower_ctx_t* cx, tpu_val_t x) {
  tpu_graph_t* g = cx->g;
  tpu_val_t low = tpu_ew_cmp_k(cx, TPU_CMP_LT, x, 0.5);
  tpu_val_t s = tpu_ir_unary(g, TPU_IR_SIN, tpu_ew_mul(g, k_like(cx, x, M_PI), x));
  tpu_val_t result = tpu_ir_select(g, low, tpu_ir_unary(g, TPU_IR_NEG,
                                                        tpu_ew_div(g, k_like(cx, x, M_PI * M_PI),
                                                                   tpu_ew_mul(g, s, s))),
                                   k_like(cx, x, 0));
  tpu_val_t y = tpu_ir_select(g, low, tpu_ew_sub(g, k_like(cx, x, 1), x), x);
  for (int i = 0; i < 6; ++i) {
    result = tpu_ew_add(g, result, tpu_ew_div(g, k_like(cx, x, 1), tpu_ew_mul(g, y, y)));
    y = tpu_ew_add(g, y, k_like(cx, x, 1));
  }
  tpu_val_t ixx = tpu_ew_div(g, k_like(cx, x, 1), tpu_ew_mul(g, y, y));
  tpu_val_t series = tpu_ew_sub(g, k_like(cx, x, 1.0 / 30), tpu_ew_mul(g, ixx, k_like(cx, x, 1.0 / 42)));
  series = tpu_ew_sub(g, k_like(cx, x, 1.0 / 6), tpu_ew_mul(g, ixx, series));
  series = tpu_ew_add(g, tpu_ew_add(g, k_like(cx, x, 1), tpu_ew_div(g, k_like(cx, x, 1),
                                                                     tpu_ew_mul(g, k_like(cx, x, 2), y))),
                      tpu_ew_mul(g, ixx, series));
  result = tpu_ew_add(g, result, tpu_ew_div(g, series, y));
  return tpu_ir_select(g, low, tpu_ir_unary(g, TPU_IR_NEG, result), result);
}
TPU_EW_UNARY_REAL(digamma, FLOAT)

// sinc: sin(pi x) / (pi x), 1 at 0. Complex x too, as CPU's kernel: pi as
// a complex number times x, complex sin and division, 1 only at 0 + 0j.
static tpu_val_t sinc_fn(tpu_lower_ctx_t* cx, tpu_val_t x) {
  tpu_graph_t* g = cx->g;
  tpu_val_t px = tpu_ew_mul(g, x, tpu_lower_const_like(cx, x, M_PI));
  return tpu_ir_select(g, tpu_ew_cmp_k(cx, TPU_CMP_EQ, x, 0), tpu_lower_const_like(cx, x, 1),
                       tpu_ew_div(g, tpu_ir_unary(g, TPU_IR_SIN, px), px));
}
TPU_EW_UNARY(sinc, FLOAT)

// special_entr: -x log(x) for x > 0, 0 at 0, -inf below 0; NaN stays. CPU's
// half-precision kernels round log(x) to the input's dtype before the
// product.
static tpu_val_t entr_fn(tpu_lower_ctx_t* cx, tpu_val_t x) {
  tpu_graph_t* g = cx->g;
  tpu_dtype_t in = tpu_arg_value_dtype(cx, 0);
  tpu_val_t log_x = tpu_ir_unary(g, TPU_IR_LOG, x);
  if (in == TPU_F16 || in == TPU_BF16)
    log_x = tpu_ir_convert(g, tpu_ir_convert(g, log_x, in), tpu_ir_dtype(g, x));
  tpu_val_t r = tpu_ir_unary(g, TPU_IR_NEG, tpu_ew_mul(g, x, log_x));
  r = tpu_ir_select(g, tpu_ew_cmp_k(cx, TPU_CMP_EQ, x, 0), tpu_lower_const_like(cx, x, 0), r);
  return tpu_ir_select(g, tpu_ew_cmp_k(cx, TPU_CMP_LT, x, 0),
                       tpu_lower_const_like(cx, x, -INFINITY), r);
}
TPU_EW_UNARY_REAL(entr, FLOAT)

// The x of logit(x, eps): clamped to [eps, 1 - eps] when eps (argument
// `arg`) is given.
static tpu_val_t logit_input(tpu_lower_ctx_t* cx, tpu_val_t x, int arg) {
  if (!tpu_arg_present(cx, arg)) return x;
  tpu_val_t eps = tpu_ew_arg_like(cx, arg, x, 0);
  tpu_val_t hi = tpu_ew_sub(cx->g, tpu_lower_const_like(cx, x, 1), eps);
  return tpu_ew_min(cx, tpu_ew_max(cx, x, eps), hi);  // NaN stays NaN
}

// logit(x, eps?): log(x / (1 - x)).
static tpu_val_t logit_fn(tpu_lower_ctx_t* cx, tpu_val_t x) {
  tpu_graph_t* g = cx->g;
  x = logit_input(cx, x, 1);
  return tpu_ir_unary(g, TPU_IR_LOG,
                      tpu_ew_div(g, x, tpu_ew_sub(g, tpu_lower_const_like(cx, x, 1), x)));
}
TPU_EW_UNARY_REAL(logit, FLOAT)

// logit_backward(grad, x, eps?): grad / (x (1 - x)); 0 where eps clamped x.
static tpu_val_t logit_backward_fn(tpu_lower_ctx_t* cx, tpu_val_t dy, tpu_val_t x) {
  tpu_graph_t* g = cx->g;
  tpu_val_t one = tpu_lower_const_like(cx, x, 1);
  tpu_val_t r = tpu_ew_div(g, dy, tpu_ew_mul(g, x, tpu_ew_sub(g, one, x)));
  if (!tpu_arg_present(cx, 2)) return r;
  tpu_val_t eps = tpu_ew_arg_like(cx, 2, x, 0);
  tpu_val_t out = tpu_ir_binary(g, TPU_IR_OR, tpu_ir_compare(g, TPU_CMP_LT, x, eps),
                                tpu_ir_compare(g, TPU_CMP_GT, x, tpu_ew_sub(g, one, eps)));
  return tpu_ir_select(g, out, tpu_lower_const_like(cx, x, 0), r);
}
tpu_status_t tpu_lower_logit_backward(tpu_lower_ctx_t* cx) {
  return tpu_ew_binary_ex(cx, TPU_RULE_FLOAT, logit_backward_fn, TPU_EW_REAL);
}

// mvlgamma(x, p): sum over i < p of lgamma(x - i/2), plus p(p-1)/4 log(pi).
// CPU refuses p < 1 but (the pinned torch 2.13) does not check the data: an
// x <= (p-1)/2 gets the same sum of lgammas (inf at a pole), so no check
// here either (a device-side assert raised where CPU computes).
static tpu_val_t mvlgamma_fn(tpu_lower_ctx_t* cx, tpu_val_t x) {
  tpu_graph_t* g = cx->g;
  int64_t p = tpu_arg_int(cx, 1, 1);
  if (!tpu_graph_ok(g)) return TPU_VAL_NONE;
  tpu_val_t sum = tpu_lower_const_like(cx, x, (double)(p * (p - 1)) / 4 * log(M_PI));
  for (int64_t i = 0; i < p; ++i)
    sum = tpu_ew_add(g, sum, tpu_ir_unary(g, TPU_IR_LGAMMA,
                                          tpu_ew_sub(g, x, tpu_lower_const_like(cx, x, i / 2.0))));
  return sum;
}
tpu_status_t tpu_lower_mvlgamma(tpu_lower_ctx_t* cx) {
  if (tpu_arg_int(cx, 1, 1) < 1) return tpu_invalid("p has to be greater than or equal to 1");
  return tpu_ew_unary_ex(cx, TPU_RULE_FLOAT, mvlgamma_fn, TPU_EW_REAL);
}

// polygamma(n, x) for n >= 2: (-1)^(n+1) n! zeta(n+1, x). chlo's zeta is
// good for x >= 10; below, the first terms of the Hurwitz series are summed
// (zeta(s, x) = sum over k < m of (x+k)^-s + zeta(s, x+m)) for up to
// SHIFTS terms, as CPU's series does; further below 0 the result is NaN
// rather than a wrong number. Integers <= 0 are poles (inf, signed as CPU).
static tpu_val_t polygamma_fn(tpu_lower_ctx_t* cx, int64_t n, tpu_val_t x) {
  enum { SHIFTS = 64 };
  tpu_graph_t* g = cx->g;
  tpu_val_t s = k_like(cx, x, (double)(n + 1));
  tpu_val_t m = tpu_ir_select(g, tpu_ew_cmp_k(cx, TPU_CMP_LT, x, 10),
                              tpu_ir_unary(g, TPU_IR_CEIL, tpu_ew_sub(g, k_like(cx, x, 10), x)),
                              k_like(cx, x, 0));
  tpu_val_t sum = k_like(cx, x, 0);
  for (int k = 0; k < SHIFTS; ++k) {
    tpu_val_t term = tpu_ir_binary(g, TPU_IR_POW, tpu_ew_add(g, x, k_like(cx, x, k)),
                                   tpu_ir_unary(g, TPU_IR_NEG, s));
    sum = tpu_ew_add(g, sum, tpu_ir_select(g, tpu_ew_cmp_k(cx, TPU_CMP_GT, m, k), term,
                                           k_like(cx, x, 0)));
  }
  tpu_val_t zeta = tpu_ew_add(g, sum, tpu_ir_binary(g, TPU_IR_ZETA, s, tpu_ew_add(g, x, m)));
  zeta = tpu_ir_select(g, tpu_ew_cmp_k(cx, TPU_CMP_GT, m, SHIFTS), k_like(cx, x, NAN), zeta);
  tpu_val_t pole = tpu_ir_binary(g, TPU_IR_AND, tpu_ew_cmp_k(cx, TPU_CMP_LE, x, 0),
                                 tpu_ir_compare(g, TPU_CMP_EQ, x, tpu_ir_unary(g, TPU_IR_FLOOR, x)));
  zeta = tpu_ir_select(g, pole, k_like(cx, x, INFINITY), zeta);
  double scale = (n % 2 ? 1.0 : -1.0) * exp(lgamma((double)n + 1.0));
  return tpu_ew_mul(g, k_like(cx, x, scale), zeta);
}

// polygamma(int n, Tensor x).
tpu_status_t tpu_lower_polygamma(tpu_lower_ctx_t* cx) {
  static const char* const names[] = {"digamma", "trigamma"};
  int64_t n = tpu_arg_int(cx, 0, 0);
  if (n < 0) return tpu_invalid("polygamma(n, x) does not support negative n.");
  tpu_dtype_t t = tpu_arg_value_dtype(cx, 1);
  if (tpu_dtype_is_complex(t))
    return tpu_not_implemented(n < 2 ? names[n] : "polygamma", t);
  tpu_dtype_t out = tpu_to_float(cx, t), acc = tpu_opmath(out);
  tpu_graph_t* g = cx->g;
  tpu_val_t x = tpu_lower_input(cx, 1, acc);
  tpu_val_t r = n == 0   ? digamma_fn(cx, x)
               : n == 1 ? trigamma_fn(cx, x)
                        : polygamma_fn(cx, n, x);
  tpu_lower_out(cx, 0, tpu_ir_convert(g, r, out));
  return TPU_OK;
}

//===--- modified Bessel functions: i0, i0e, i1, i1e ---===//

// I_nu(|x|) for nu = 0 or 1, in f64 (f32 and narrower inputs are computed
// in f64 and rounded once, which keeps them within an ulp or so of the true
// value), optionally scaled by exp(-|x|):
//  - |x| < 20: the power series I_nu(x) = (x/2)^nu sum_k q^k / (k! (k+nu)!),
//    q = x^2 / 4, in Horner form (all terms positive, so no cancellation;
//    50 terms reach double precision at |x| = 20);
//  - |x| >= 20: the asymptotic series exp(x) / sqrt(2 pi x) *
//    sum_k (-1)^k a_k(nu) / x^k, a_k(nu) = prod_{j<=k} (4 nu^2 - (2j-1)^2)
//    / (k! 8^k), whose terms keep shrinking past k = 30 there.
// At infinities CPU's i0 / i1 give NaN (its exp(x) / sqrt(x) is inf / inf),
// i0e / i1e 0; both are spelled out.
enum { kSeriesTerms = 50, kAsymptoticTerms = 30 };
static const double kBesselSplit = 20.0;

static tpu_val_t bessel_abs(tpu_lower_ctx_t* cx, tpu_val_t ax, int nu, bool scaled) {
  tpu_graph_t* g = cx->g;
  // series, at min(|x|, split) so the unused branch stays finite
  tpu_val_t xs = tpu_ew_min(cx, ax, k_like(cx, ax, kBesselSplit));
  tpu_val_t q = tpu_ew_mul(g, tpu_ew_mul(g, xs, xs), k_like(cx, xs, 0.25));
  tpu_val_t s = k_like(cx, xs, 1);
  for (int j = kSeriesTerms; j >= 1; --j)
    s = tpu_ew_add(g, k_like(cx, s, 1), tpu_ew_mul(g, s, tpu_ew_div(g, q, k_like(cx, q, (double)j * (j + nu)))));
  if (nu == 1) s = tpu_ew_mul(g, s, tpu_ew_mul(g, xs, k_like(cx, xs, 0.5)));
  if (scaled) s = tpu_ew_mul(g, s, tpu_ir_unary(g, TPU_IR_EXP, tpu_ir_unary(g, TPU_IR_NEG, xs)));
  // asymptotic, at max(|x|, split)
  tpu_val_t xa = tpu_ew_max(cx, ax, k_like(cx, ax, kBesselSplit));
  tpu_val_t inv = tpu_ew_div(g, k_like(cx, xa, 1), xa);
  double coef[kAsymptoticTerms + 1];
  coef[0] = 1;
  for (int j = 1; j <= kAsymptoticTerms; ++j) {
    double f = 4.0 * nu * nu - (double)(2 * j - 1) * (2 * j - 1);
    coef[j] = -coef[j - 1] * f / (8.0 * j);  // (-1)^k a_k(nu)
  }
  tpu_val_t a = k_like(cx, xa, coef[kAsymptoticTerms]);
  for (int j = kAsymptoticTerms - 1; j >= 0; --j)
    a = tpu_ew_add(g, k_like(cx, a, coef[j]), tpu_ew_mul(g, a, inv));
  tpu_val_t root = tpu_ir_unary(g, TPU_IR_SQRT, tpu_ew_mul(g, xa, k_like(cx, xa, 2 * M_PI)));
  a = tpu_ew_div(g, a, root);
  if (!scaled) a = tpu_ew_mul(g, tpu_ir_unary(g, TPU_IR_EXP, xa), a);
  tpu_val_t r = tpu_ir_select(cx->g, tpu_ew_cmp_k(cx, TPU_CMP_LT, ax, kBesselSplit), s, a);
  tpu_val_t inf = tpu_ew_cmp_k(cx, TPU_CMP_EQ, ax, INFINITY);
  return tpu_ir_select(cx->g, inf, k_like(cx, r, scaled ? 0 : NAN), r);
}

// i0 and i0e are even, i1 and i1e odd. Integers and bool become the default
// float, as on CPU.
static tpu_status_t bessel(tpu_lower_ctx_t* cx, int nu, bool scaled, const char* kernel) {
  tpu_dtype_t in = tpu_arg_value_dtype(cx, 0);
  if (tpu_dtype_is_complex(in)) return tpu_not_implemented(kernel, in);
  tpu_dtype_t t = tpu_to_float(cx, in);
  tpu_graph_t* g = cx->g;
  tpu_val_t x = tpu_lower_input(cx, 0, TPU_F64);
  tpu_val_t r = bessel_abs(cx, tpu_ir_unary(g, TPU_IR_ABS, x), nu, scaled);
  if (nu == 1) r = tpu_ir_select(cx->g, tpu_ew_cmp_k(cx, TPU_CMP_LT, x, 0), tpu_ir_unary(g, TPU_IR_NEG, r), r);
  tpu_lower_out(cx, 0, tpu_ir_convert(g, r, t));
  return TPU_OK;
}
tpu_status_t tpu_lower_i0(tpu_lower_ctx_t* cx) { return bessel(cx, 0, false, "i0_vml_cpu"); }
tpu_status_t tpu_lower_i0e(tpu_lower_ctx_t* cx) { return bessel(cx, 0, true, "i0e_cpu"); }
tpu_status_t tpu_lower_i1(tpu_lower_ctx_t* cx) { return bessel(cx, 1, false, "i1_cpu"); }
tpu_status_t tpu_lower_i1e(tpu_lower_ctx_t* cx) { return bessel(cx, 1, true, "i1e_cpu"); }

//===--- kaiser_window ---===//

// kaiser_window.beta(window_length, periodic, beta, *, dtype, layout,
// device, pin_memory): i0(beta * sqrt(|1 - ((n - a) / a)^2|)) / i0(beta),
// a = (N - 1) / 2, over n = 0..N-1 (N = length + 1 when periodic, the last
// point dropped). n comes from arange in the window's dtype, as on CPU; the
// Bessel functions run in f64 (see bessel_abs).
// kaiser_window(window_length, *, dtype, ...) and kaiser_window.periodic
// (window_length, periodic, *, dtype, ...) take periodic = true and beta =
// 12; `dtype_arg` is where each overload has its dtype.
static tpu_status_t kaiser_window(tpu_lower_ctx_t* cx, bool periodic, double beta,
                                  int dtype_arg) {
  int64_t len = tpu_arg_int(cx, 0, 0);
  tpu_dtype_t t = tpu_arg_dtype(cx, dtype_arg, tpu_default_float(cx));
  if (!tpu_dtype_is_float(t))
    return tpu_status_make(TPU_CODE_INVALID_ARGUMENT,
                           "kaiser_window expects floating point dtypes, got: %s",
                           tpu_dtype_torch_name(t));
  if (len < 0)
    return tpu_status_make(TPU_CODE_INVALID_ARGUMENT,
                           "kaiser_window requires non-negative window_length, got "
                           "window_length=%lld", (long long)len);
  tpu_graph_t* g = cx->g;
  if (len <= 1) {
    tpu_lower_out(cx, 0, tpu_ir_const(g, t, 1, &len, 1));
    return TPU_OK;
  }
  int64_t n = periodic ? len + 1 : len;
  tpu_dtype_t ct = tpu_opmath(t);
  tpu_val_t i = tpu_ir_convert(g, tpu_ir_convert(g, tpu_ir_iota(g, TPU_I64, &n, 1, 0), t), ct);
  tpu_val_t alpha = tpu_ew_number_like(cx, i, (double)(n - 1) / 2.0);
  tpu_val_t b = tpu_ew_number_like(cx, i, beta);
  tpu_val_t r = tpu_ew_div(g, tpu_ew_sub(g, i, alpha), alpha);
  tpu_val_t arg = tpu_ew_mul(g, b, tpu_ir_unary(g, TPU_IR_SQRT,
                                                tpu_ir_unary(g, TPU_IR_ABS,
                                                             tpu_ew_sub(g, k_like(cx, r, 1),
                                                                        tpu_ew_mul(g, r, r)))));
  tpu_val_t num = bessel_abs(cx, tpu_ir_unary(g, TPU_IR_ABS, tpu_ir_convert(g, arg, TPU_F64)), 0,
                             false);
  tpu_val_t den = bessel_abs(cx, tpu_ir_unary(g, TPU_IR_ABS, tpu_ir_convert(g, b, TPU_F64)), 0,
                             false);
  tpu_val_t w = tpu_ir_convert(g, tpu_ew_div(g, num, den), t);
  if (periodic) {
    int64_t start = 0;
    w = tpu_ir_slice(g, w, &start, &len, NULL);
  }
  tpu_lower_out(cx, 0, w);
  return TPU_OK;
}
tpu_status_t tpu_lower_kaiser_window(tpu_lower_ctx_t* cx) {
  return kaiser_window(cx, tpu_arg_bool(cx, 1, true), tpu_arg_float(cx, 2, 12.0), 3);
}
tpu_status_t tpu_lower_kaiser_window_periodic(tpu_lower_ctx_t* cx) {
  return kaiser_window(cx, tpu_arg_bool(cx, 1, true), 12.0, 2);
}
tpu_status_t tpu_lower_kaiser_window_default(tpu_lower_ctx_t* cx) {
  return kaiser_window(cx, true, 12.0, 1);
}
