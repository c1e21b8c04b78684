// Helpers shared by the elementwise lowerings (lower_elementwise.c,
// lower_special.c, lower_activation.c and others): dtype rules, the generic
// unary/binary drivers, and short builders for arithmetic on values of one
// type.
#ifndef TPU_LOWER_ELEMENTWISE_H_
#define TPU_LOWER_ELEMENTWISE_H_

#include "lower/lower.h"

// Checks dtype rule `rule` for the (promoted) dtype t; the result dtype goes
// to *out. Refusals use PyTorch's words with the row's name.
TPU_MUST_USE tpu_status_t tpu_ew_rule(tpu_lower_ctx_t* cx, tpu_rule_t rule,
                                      tpu_dtype_t t, tpu_dtype_t* out);

// op(x) or op(a, b) computed on values of the compute dtype (opmath of the
// result dtype); the driver converts the value to the result dtype.
typedef tpu_val_t (*tpu_ew_fn1)(tpu_lower_ctx_t* cx, tpu_val_t x);
typedef tpu_val_t (*tpu_ew_fn2)(tpu_lower_ctx_t* cx, tpu_val_t a, tpu_val_t b);

// Argument 0 under `rule`, computed with fn.
TPU_MUST_USE tpu_status_t tpu_ew_unary(tpu_lower_ctx_t* cx, tpu_rule_t rule,
                                       tpu_ew_fn1 fn);
// The same with TPU_EW_* flags (below).
TPU_MUST_USE tpu_status_t tpu_ew_unary_ex(tpu_lower_ctx_t* cx, tpu_rule_t rule,
                                          tpu_ew_fn1 fn, int flags);
// Arguments 0 and 1 promoted, checked under `rule`, broadcast, computed with fn.
// Like PyTorch's TensorIterator, operands (numbers too) are first converted
// to the common dtype, then widened to the compute dtype.
TPU_MUST_USE tpu_status_t tpu_ew_binary(tpu_lower_ctx_t* cx, tpu_rule_t rule,
                                        tpu_ew_fn2 fn);
enum {
  TPU_EW_STORAGE = 1,      // compute in the common dtype itself: CPU kernels
                           // that round every step of f16 / bf16 math
  TPU_EW_EXACT_OTHER = 2,  // a number in arg 1 keeps its full precision
  TPU_EW_REAL = 4,         // complex operands refused (NotImplementedError)
};
TPU_MUST_USE tpu_status_t tpu_ew_binary_ex(tpu_lower_ctx_t* cx, tpu_rule_t rule,
                                           tpu_ew_fn2 fn, int flags);
// Arguments args[0..n) (absent ones give TPU_VAL_NONE) broadcast to one
// shape, each converted to `common` and then to `compute`; numbers whose
// bit k is set in `exact` go straight to `compute`.
TPU_MUST_USE tpu_status_t tpu_ew_inputs(tpu_lower_ctx_t* cx, const int* args,
                                        int n, tpu_dtype_t common,
                                        tpu_dtype_t compute, unsigned exact,
                                        tpu_val_t* out);

// NaN-propagating maximum / minimum (XLA's CPU max/min drop a NaN in the
// second operand; PyTorch's propagate either).
tpu_val_t tpu_ew_max(tpu_lower_ctx_t* cx, tpu_val_t a, tpu_val_t b);
tpu_val_t tpu_ew_min(tpu_lower_ctx_t* cx, tpu_val_t a, tpu_val_t b);

static inline tpu_val_t tpu_ew_add(tpu_graph_t* g, tpu_val_t a, tpu_val_t b) {
  return tpu_ir_binary(g, TPU_IR_ADD, a, b);
}
static inline tpu_val_t tpu_ew_sub(tpu_graph_t* g, tpu_val_t a, tpu_val_t b) {
  return tpu_ir_binary(g, TPU_IR_SUB, a, b);
}
static inline tpu_val_t tpu_ew_mul(tpu_graph_t* g, tpu_val_t a, tpu_val_t b) {
  return tpu_ir_binary(g, TPU_IR_MUL, a, b);
}
static inline tpu_val_t tpu_ew_div(tpu_graph_t* g, tpu_val_t a, tpu_val_t b) {
  return tpu_ir_binary(g, TPU_IR_DIV, a, b);
}
static inline tpu_val_t tpu_ew_isnan(tpu_graph_t* g, tpu_val_t x) {
  return tpu_ir_compare(g, TPU_CMP_NE, x, x);
}
// a <cmp> constant c (c splatted to a's type).
static inline tpu_val_t tpu_ew_cmp_k(tpu_lower_ctx_t* cx, tpu_cmp_t cmp,
                                     tpu_val_t a, double c) {
  return tpu_ir_compare(cx->g, cmp, a, tpu_lower_const_like(cx, a, c));
}
// PyTorch's error when arguments a and b have no common dtype (the unsigned
// 16-64 bit integers promote with nothing else).
TPU_MUST_USE tpu_status_t tpu_ew_promotion_error(tpu_lower_ctx_t* cx, int a, int b);
// Whether v has a floating-point dtype (false once the graph failed).
bool tpu_ew_is_float(tpu_graph_t* g, tpu_val_t v);
// The same-width integer type of a float type (for bit manipulation).
tpu_dtype_t tpu_ew_bits_dtype(tpu_dtype_t t);
// x's bits as `dtype` (of the same width).
tpu_val_t tpu_ew_bitcast(tpu_graph_t* g, tpu_val_t x, tpu_dtype_t dtype);
// x rounded toward zero (zero: a zero like x).
tpu_val_t tpu_ew_trunc(tpu_graph_t* g, tpu_val_t x, tpu_val_t zero);
// |a| with the sign bit of b (also of -0.0 and NaN).
tpu_val_t tpu_ew_copysign(tpu_lower_ctx_t* cx, tpu_val_t a, tpu_val_t b);
// a ** b of one dtype (pow and _foreach_pow). Integers by squaring over
// every bit of b, wrapping like C (XLA's integer power reads only b's low
// 6 bits: 3 ** 64 gave 1); negative exponents follow PyTorch's powi: 1 for
// base 1, ±1 for base -1, else 0. Complex 0 ** b is 0 for Re(b) > 0, as
// on CPU (XLA's exp(b log a) gave NaN).
tpu_val_t tpu_ew_pow(tpu_lower_ctx_t* cx, tpu_val_t a, tpu_val_t b);
// lerp(self, end, w) of values of one dtype, real or complex, as PyTorch
// computes it (lower_ternary.c; lerp and _foreach_lerp).
tpu_val_t tpu_ew_lerp(tpu_lower_ctx_t* cx, tpu_val_t self, tpu_val_t end, tpu_val_t w);
// torch.sgn of a value: sign for real numbers ((0 < x) - (x < 0), so NaN
// and -0.0 give 0), z / |z| (0 at 0) for complex ones (lower_unary.c).
tpu_val_t tpu_ew_sgn(tpu_lower_ctx_t* cx, tpu_val_t z);
// A 0-d number input of x's dtype broadcast to x's shape (numbers are
// inputs, so a new value does not recompile).
tpu_val_t tpu_ew_number_like(tpu_lower_ctx_t* cx, tpu_val_t x, double value);
// Scalar argument i (dflt when absent) as an input of x's dtype broadcast
// to x's shape.
tpu_val_t tpu_ew_arg_like(tpu_lower_ctx_t* cx, int i, tpu_val_t x, double dflt);

// The exact GELU, 0.5 * x * (1 + erf(x / sqrt(2))), of x in its own dtype
// (lower_activation.c).
tpu_val_t tpu_ew_gelu_erf(tpu_lower_ctx_t* cx, tpu_val_t x);

// tpu_lower_<name> from <name>_fn, an elementwise function of one value.
#define TPU_EW_UNARY(name, rule)                          \
  tpu_status_t tpu_lower_##name(tpu_lower_ctx_t* cx) {    \
    return tpu_ew_unary(cx, TPU_RULE_##rule, name##_fn);  \
  }
// The same for ops PyTorch defines for real numbers only.
#define TPU_EW_UNARY_REAL(name, rule)                                      \
  tpu_status_t tpu_lower_##name(tpu_lower_ctx_t* cx) {                     \
    return tpu_ew_unary_ex(cx, TPU_RULE_##rule, name##_fn, TPU_EW_REAL);   \
  }

#endif  // TPU_LOWER_ELEMENTWISE_H_
