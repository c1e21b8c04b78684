// gcd and lcm of integers, elementwise (with PyTorch's promotion; bool and
// floating point refused, as on CPU).
#include "lower/elementwise.h"

// Euclid's algorithm on |a| and |b|, unrolled: (a, b) <- (b % a, a) while
// a != 0. No pair of the dtype's values takes more steps than consecutive
// Fibonacci numbers, about 1.44 per bit; a finished pair stays as it is.
static tpu_val_t gcd_fn(tpu_lower_ctx_t* cx, tpu_val_t a, tpu_val_t b) {
  tpu_graph_t* g = cx->g;
  if (!tpu_graph_ok(g)) return TPU_VAL_NONE;
  tpu_dtype_t t = tpu_ir_dtype(g, a);
  int steps = 8 * (int)tpu_dtype_size(t) * 3 / 2 + 2;
  if (tpu_dtype_kind(t) == TPU_KIND_INT) {
    a = tpu_ir_unary(g, TPU_IR_ABS, a);
    b = tpu_ir_unary(g, TPU_IR_ABS, b);
  }
  tpu_val_t zero = tpu_lower_const_like(cx, a, 0), one = tpu_lower_const_like(cx, a, 1);
  for (int i = 0; i < steps; ++i) {
    tpu_val_t more = tpu_ir_compare(g, TPU_CMP_NE, a, zero);
    tpu_val_t r = tpu_ir_binary(g, TPU_IR_REM, b, tpu_ir_select(g, more, a, one));
    b = tpu_ir_select(g, more, a, b);
    a = tpu_ir_select(g, more, r, a);
  }
  return b;
}
tpu_status_t tpu_lower_gcd(tpu_lower_ctx_t* cx) {
  return tpu_ew_binary_ex(cx, TPU_RULE_INTEGER, gcd_fn, TPU_EW_STORAGE);
}

// lcm: |a / gcd * b|, 0 when the gcd is; computed as C++ computes it
// (8- and 16-bit values in int, wider ones wrapping in their own width).
static tpu_val_t lcm_fn(tpu_lower_ctx_t* cx, tpu_val_t a, tpu_val_t b) {
  tpu_graph_t* g = cx->g;
  if (!tpu_graph_ok(g)) return TPU_VAL_NONE;
  tpu_dtype_t t = tpu_ir_dtype(g, a), w = tpu_dtype_size(t) < 4 ? TPU_I32 : t;
  tpu_val_t d = gcd_fn(cx, a, b), zero = tpu_lower_const_like(cx, d, 0);
  tpu_val_t none = tpu_ir_compare(g, TPU_CMP_EQ, d, zero);  // a and b are 0
  tpu_val_t dw = tpu_ir_convert(g, tpu_ir_select(g, none, tpu_lower_const_like(cx, d, 1), d), w);
  tpu_val_t q = tpu_ir_binary(g, TPU_IR_DIV, tpu_ir_convert(g, a, w), dw);
  tpu_val_t l = tpu_ir_binary(g, TPU_IR_MUL, q, tpu_ir_convert(g, b, w));
  if (tpu_dtype_kind(w) == TPU_KIND_INT) l = tpu_ir_unary(g, TPU_IR_ABS, l);
  return tpu_ir_select(g, none, zero, tpu_ir_convert(g, l, t));
}
tpu_status_t tpu_lower_lcm(tpu_lower_ctx_t* cx) {
  return tpu_ew_binary_ex(cx, TPU_RULE_INTEGER, lcm_fn, TPU_EW_STORAGE);
}
