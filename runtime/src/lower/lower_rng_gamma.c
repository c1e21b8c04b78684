// Gamma variates (_standard_gamma) and the Dirichlet samples made from them
// (_sample_dirichlet): Marsaglia and Tsang's rejection method, as PyTorch's
// kernels use it, with a fixed number of proposals per element instead of a
// loop. Each proposal is accepted with probability above 0.95 (alpha >= 1;
// smaller alphas are boosted by one), so all 16 are rejected with
// probability below 1e-20.
#include <float.h>
#include <math.h>

#include "lower/rng.h"

enum { ROUNDS = 16 };  // proposals per element (even: normals come in pairs)

// Uniform in (0, 1] from plane k of the words.
static tpu_val_t uniform(tpu_lower_ctx_t* cx, tpu_val_t words, int k, const int64_t* dims,
                         int rank, tpu_dtype_t compute) {
  return tpu_rng_unit_open_closed(cx, tpu_rng_plane(cx, words, k, dims, rank), compute);
}

// Standard gamma variates of the concentrations `alpha` (shape dims, dtype
// compute), from this op's random words.
static tpu_val_t gamma_variates(tpu_lower_ctx_t* cx, tpu_val_t alpha, tpu_dtype_t compute,
                                const int64_t* dims, int rank) {
  tpu_graph_t* g = cx->g;
  // Words: ROUNDS for the normals (Box-Muller, two per pair), ROUNDS for
  // the acceptance uniforms, one for the boost.
  tpu_val_t words = tpu_rng_word_planes(cx, 2 * ROUNDS + 1, compute, dims, rank);

  // alpha < 1: Gamma(alpha) = Gamma(alpha + 1) * U^(1 / alpha).
  tpu_val_t small = tpu_rng_cmp(cx, TPU_CMP_LT, alpha, 1);
  tpu_val_t inv_alpha = tpu_ir_binary(g, TPU_IR_DIV, tpu_lower_const_like(cx, alpha, 1), alpha);
  tpu_val_t boost = tpu_ir_binary(
      g, TPU_IR_POW, uniform(cx, words, 2 * ROUNDS, dims, rank, compute), inv_alpha);
  tpu_val_t scale = tpu_ir_select(g, small, boost, tpu_lower_const_like(cx, alpha, 1));
  tpu_val_t a = tpu_ir_select(g, small, tpu_rng_bin(cx, TPU_IR_ADD, alpha, 1), alpha);
  tpu_val_t d = tpu_rng_bin(cx, TPU_IR_SUB, a, 1.0 / 3.0);
  tpu_val_t c = tpu_ir_unary(g, TPU_IR_RSQRT, tpu_rng_bin(cx, TPU_IR_MUL, d, 9));

  tpu_val_t result = d;  // if every proposal were rejected (p < 1e-20)
  tpu_val_t x[ROUNDS];
  for (int k = 0; k < ROUNDS; k += 2) {
    tpu_val_t r, angle;
    tpu_rng_polar(cx, tpu_rng_plane(cx, words, k, dims, rank),
                  tpu_rng_plane(cx, words, k + 1, dims, rank), compute, &r, &angle);
    x[k] = tpu_ir_binary(g, TPU_IR_MUL, r, tpu_ir_unary(g, TPU_IR_COS, angle));
    x[k + 1] = tpu_ir_binary(g, TPU_IR_MUL, r, tpu_ir_unary(g, TPU_IR_SIN, angle));
  }
  // The first accepted proposal wins: select from the last one back.
  for (int k = ROUNDS - 1; k >= 0; --k) {
    tpu_val_t y = tpu_rng_bin(cx, TPU_IR_ADD, tpu_ir_binary(g, TPU_IR_MUL, c, x[k]), 1);
    tpu_val_t v = tpu_ir_binary(g, TPU_IR_MUL, tpu_ir_binary(g, TPU_IR_MUL, y, y), y);
    tpu_val_t u = uniform(cx, words, ROUNDS + k, dims, rank, compute);
    tpu_val_t xx = tpu_ir_binary(g, TPU_IR_MUL, x[k], x[k]);
    // Squeeze: u < 1 - 0.0331 x^4; else log u < x^2 / 2 + d (1 - v + log v).
    tpu_val_t squeeze = tpu_ir_compare(
        g, TPU_CMP_LT, u,
        tpu_rng_bin(cx, TPU_IR_ADD,
                    tpu_rng_bin(cx, TPU_IR_MUL, tpu_ir_binary(g, TPU_IR_MUL, xx, xx), -0.0331),
                    1));
    tpu_val_t bound = tpu_ir_binary(
        g, TPU_IR_ADD, tpu_rng_bin(cx, TPU_IR_MUL, xx, 0.5),
        tpu_ir_binary(g, TPU_IR_MUL, d,
                      tpu_ir_binary(g, TPU_IR_ADD,
                                    tpu_ir_binary(g, TPU_IR_SUB, tpu_lower_const_like(cx, v, 1), v),
                                    tpu_ir_unary(g, TPU_IR_LOG, v))));
    tpu_val_t accept = tpu_ir_binary(
        g, TPU_IR_AND, tpu_rng_cmp(cx, TPU_CMP_GT, y, 0),
        tpu_ir_binary(g, TPU_IR_OR, squeeze,
                      tpu_ir_compare(g, TPU_CMP_LT, tpu_ir_unary(g, TPU_IR_LOG, u), bound)));
    result = tpu_ir_select(g, accept, tpu_ir_binary(g, TPU_IR_MUL, d, v), result);
  }
  result = tpu_ir_binary(g, TPU_IR_MUL, result, scale);
  // As on CPU: alpha = inf gives inf; alpha <= 0 or NaN, and samples that
  // underflow, give the smallest normal number.
  tpu_val_t inf = tpu_rng_cmp(cx, TPU_CMP_EQ, alpha, INFINITY);
  result = tpu_ir_select(g, inf, alpha, result);
  double tiny = compute == TPU_F64 ? DBL_MIN : FLT_MIN;
  tpu_val_t ok = tpu_ir_binary(g, TPU_IR_AND, tpu_rng_cmp(cx, TPU_CMP_GT, alpha, 0),
                               tpu_rng_cmp(cx, TPU_CMP_GE, result, tiny));
  return tpu_ir_select(g, ok, result, tpu_lower_const_like(cx, result, tiny));
}

static tpu_status_t check_float(tpu_lower_ctx_t* cx, const char* kernel) {
  tpu_dtype_t t = tpu_arg_value_dtype(cx, 0);
  return tpu_dtype_is_float(t) ? TPU_OK : tpu_not_implemented(kernel, t);
}

// _standard_gamma(Tensor self, Generator? generator) -> Tensor
tpu_status_t tpu_lower_standard_gamma(tpu_lower_ctx_t* cx) {
  TPU_RETURN_IF_ERROR(check_float(cx, "gamma"));
  tpu_dtype_t out = tpu_arg_value_dtype(cx, 0), compute = tpu_opmath(out);
  tpu_val_t alpha = tpu_ir_convert(cx->g, tpu_lower_tensor(cx, 0), compute);
  tpu_val_t s = gamma_variates(cx, alpha, compute, tpu_arg_sizes(cx, 0), tpu_arg_rank(cx, 0));
  tpu_lower_out(cx, 0, tpu_ir_convert(cx->g, s, out));
  return TPU_OK;
}

// _sample_dirichlet(Tensor self, Generator? generator) -> Tensor: gamma
// variates normalized along the last dimension.
tpu_status_t tpu_lower_sample_dirichlet(tpu_lower_ctx_t* cx) {
  TPU_RETURN_IF_ERROR(check_float(cx, "dirichlet"));
  tpu_graph_t* g = cx->g;
  tpu_dtype_t out = tpu_arg_value_dtype(cx, 0), compute = tpu_opmath(out);
  const int64_t* dims = tpu_arg_sizes(cx, 0);
  int rank = tpu_arg_rank(cx, 0);
  tpu_val_t alpha = tpu_ir_convert(g, tpu_lower_tensor(cx, 0), compute);
  tpu_val_t s = gamma_variates(cx, alpha, compute, dims, rank);
  if (rank > 0) {
    int64_t last = rank - 1;
    tpu_val_t sum = tpu_ir_reduce(g, s, tpu_lower_number(cx, 0, compute), &last, 1,
                                  TPU_BODY_ADD);
    s = tpu_ir_binary(g, TPU_IR_DIV, s, tpu_ir_broadcast(g, sum, dims, rank, tpu_all_dims));
  } else {
    s = tpu_lower_const_like(cx, s, 1);
  }
  tpu_lower_out(cx, 0, tpu_ir_convert(g, s, out));
  return TPU_OK;
}
