// linalg_matrix_exp by scaling and squaring: A / 2^s with s = ceil(log2
// (|A|_1 / theta)) (0 when the norm is at most theta), the Taylor series of
// that matrix to degree 18, whose remainder is at most theta^19 / 19!
// e^(2 theta) of the result's norm (theta = 1 in double precision: 6e-17;
// 2 in single: 2e-10, one squaring less), then squared s times
// (tpu_ir_squarings, a loop of as many steps as the largest s of the
// batch). The scale is an exact power of two, so the only errors are the
// series' rounding and the squarings', as in CPU's method (another
// polynomial, the same scaling).
#include "lower/linalg.h"

// 2^-s for i32 s in [0, 1022] ([0, 126] for f32), built from its bits.
static tpu_val_t exp2_neg(tpu_graph_t* g, tpu_val_t s, tpu_dtype_t t) {
  tpu_type_t st;
  if (!tpu_linalg_type(g, s, &st)) return TPU_VAL_NONE;
  bool wide = t == TPU_F64;
  tpu_dtype_t it = wide ? TPU_I64 : TPU_I32;
  tpu_val_t e = tpu_ir_binary(g, TPU_IR_SUB, tpu_ir_const_i(g, it, wide ? 1023 : 127, st.dims, st.rank),
                              tpu_ir_convert(g, s, it));
  tpu_val_t bits = tpu_ir_binary(g, TPU_IR_SHL, e,
                                 tpu_ir_const_i(g, it, wide ? 52 : 23, st.dims, st.rank));
  tpu_type_t ft = st;
  ft.dtype = t;
  return tpu_ir_bitcast(g, bits, &ft);
}

// linalg_matrix_exp(Tensor self)
tpu_status_t tpu_lower_linalg_matrix_exp(tpu_lower_ctx_t* cx) {
  tpu_graph_t* g = cx->g;
  TPU_RETURN_IF_ERROR(tpu_linalg_check_square(cx, 0, "linalg.matrix_exp", "A"));
  tpu_dtype_t t = tpu_arg_value_dtype(cx, 0);
  if (!tpu_dtype_is_float(t) && !tpu_dtype_is_complex(t))
    return tpu_invalid("linalg.matrix_exp: Expected a floating point or complex tensor as "
                       "input. Got %s", tpu_dtype_torch_name(t));
  int r = tpu_arg_rank(cx, 0);
  const int64_t* d = tpu_arg_sizes(cx, 0);
  tpu_dtype_t ct = tpu_opmath(t);  // half precision in f32
  tpu_val_t a = tpu_ir_convert(g, tpu_lower_tensor(cx, 0), ct);
  if (tpu_numel(d, r) == 0) {
    tpu_lower_out(cx, 0, tpu_lower_tensor(cx, 0));
    return TPU_OK;
  }
  bool single = ct == TPU_F32 || ct == TPU_C64;
  tpu_dtype_t rt = single ? TPU_F32 : TPU_F64;
  double theta = single ? 2 : 1;
  // |A|_1: the largest column sum of magnitudes (batch shape).
  int64_t rows = r - 2, cols = r - 2;  // (the columns' dim once the rows are summed)
  tpu_val_t sums = tpu_ir_reduce(g, tpu_ir_unary(g, TPU_IR_ABS, a), tpu_ir_const(g, rt, 0, NULL, 0),
                                 &rows, 1, TPU_BODY_ADD);
  tpu_val_t norm = tpu_ir_reduce(g, sums, tpu_ir_const(g, rt, 0, NULL, 0), &cols, 1, TPU_BODY_MAX);
  tpu_val_t over = tpu_ir_binary(g, TPU_IR_DIV, norm, tpu_lower_const_like(cx, norm, theta));
  tpu_val_t log2 = tpu_ir_binary(g, TPU_IR_DIV, tpu_ir_unary(g, TPU_IR_LOG, over),
                                 tpu_lower_const_like(cx, norm, 0.69314718055994530942));
  // s = 0 for a non-finite norm (the result is not finite either way), at
  // most 126 (f32) or 1022 (f64), where 2^-s is still a normal number.
  tpu_val_t scaled = tpu_ir_binary(g, TPU_IR_AND, tpu_ir_unary(g, TPU_IR_IS_FINITE, norm),
                                   tpu_ir_compare(g, TPU_CMP_GT, over,
                                                  tpu_lower_const_like(cx, norm, 1)));
  tpu_val_t s = tpu_ir_select(g, scaled, tpu_ir_unary(g, TPU_IR_CEIL, log2),
                              tpu_lower_const_like(cx, norm, 0));
  s = tpu_ir_clamp(g, tpu_ir_const(g, rt, 0, NULL, 0), s,
                   tpu_ir_const(g, rt, single ? 126 : 1022, NULL, 0));
  s = tpu_ir_convert(g, s, TPU_I32);
  tpu_val_t scale = tpu_ir_convert(g, exp2_neg(g, s, rt), ct);
  int64_t bd[TPU_MAX_RANK];
  for (int i = 0; i < r - 2; ++i) bd[i] = i;
  tpu_type_t at;
  if (!tpu_linalg_type(g, a, &at)) return TPU_OK;  // (the graph's error is raised)
  tpu_val_t x = tpu_ir_binary(g, TPU_IR_MUL, a, tpu_ir_broadcast(g, scale, at.dims, r, bd));
  // Horner: P = I + X/1 (I + X/2 (... (I + X/deg))).
  tpu_val_t eye = tpu_linalg_eye_like(g, x), p = eye;
  for (int k = 18; k >= 1; --k)
    p = tpu_ir_binary(g, TPU_IR_ADD, eye,
                      tpu_ir_binary(g, TPU_IR_DIV, tpu_lower_matmul_values(cx, x, p, r - 2, ct),
                                    tpu_lower_const_like(cx, x, k)));
  tpu_lower_out(cx, 0, tpu_ir_convert(g, tpu_ir_squarings(g, p, s), t));
  return TPU_OK;
}
