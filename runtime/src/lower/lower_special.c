// Special functions of the gamma family (lgamma, digamma, trigamma,
// polygamma, mvlgamma) and sinc / logit, written out so that they agree
// with CPU's kernels where XLA's (chlo's) approximations do not: at the
// roots and poles, and for negative arguments.
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

// sinc: sin(pi x) / (pi x), 1 at 0.
static tpu_val_t sinc_fn(tpu_lower_ctx_t* cx, tpu_val_t x) {
  tpu_graph_t* g = cx->g;
  tpu_val_t px = tpu_ew_mul(g, x, tpu_lower_const_like(cx, x, M_PI));
  return tpu_ir_select(g, tpu_ew_cmp_k(cx, TPU_CMP_EQ, x, 0), tpu_lower_const_like(cx, x, 1),
                       tpu_ew_div(g, tpu_ir_unary(g, TPU_IR_SIN, px), px));
}
TPU_EW_UNARY_REAL(sinc, FLOAT)

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
// CPU refuses p < 1 and any x <= (p-1)/2 (a check on the data).
static tpu_val_t mvlgamma_fn(tpu_lower_ctx_t* cx, tpu_val_t x) {
  tpu_graph_t* g = cx->g;
  int64_t p = tpu_arg_int(cx, 1, 1);
  if (!tpu_graph_ok(g)) return TPU_VAL_NONE;
  int rank = tpu_ir_rank(g, x);
  int64_t dims[TPU_MAX_RANK];
  for (int i = 0; i < rank; ++i) dims[i] = i;
  tpu_val_t low = tpu_ew_cmp_k(cx, TPU_CMP_LE, x, (double)(p - 1) / 2);
  tpu_lower_assert(cx, tpu_ir_reduce(g, low, tpu_ir_const_i(g, TPU_BOOL, 0, NULL, 0), dims, rank,
                                     TPU_BODY_OR),
                   TPU_CODE_INVALID_ARGUMENT, "All elements must be greater than (p-1)/2");
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
  tpu_dtype_t out = tpu_to_float(t), acc = tpu_opmath(out);
  tpu_graph_t* g = cx->g;
  tpu_val_t x = tpu_lower_input(cx, 1, acc);
  tpu_val_t r = n == 0   ? digamma_fn(cx, x)
               : n == 1 ? trigamma_fn(cx, x)
                        : polygamma_fn(cx, n, x);
  tpu_lower_out(cx, 0, tpu_ir_convert(g, r, out));
  return TPU_OK;
}
