// Private to the random-number lowerings (lower_rng*.c):
// this op's random words and the floats and variates made from them.
#ifndef TPU_LOWER_RNG_H_
#define TPU_LOWER_RNG_H_

#include "lower/lower.h"

// Random words of `dtype` (U32 or U64) and shape `dims`, this op's stream.
tpu_val_t tpu_rng_words(tpu_lower_ctx_t* cx, tpu_dtype_t dtype, const int64_t* dims, int rank);
// Significand bits of a float dtype (numeric_limits<T>::digits).
int tpu_rng_float_digits(tpu_dtype_t t);
// Words wide enough for floats computed in `compute`.
tpu_dtype_t tpu_rng_words_for(tpu_dtype_t compute);
// Uniform in [0, 1) on the grid of 2^-digits, from the top `digits` bits of
// each word, in `compute` (exact: digits fit its significand).
tpu_val_t tpu_rng_unit_closed_open(tpu_lower_ctx_t* cx, tpu_val_t words, tpu_dtype_t compute,
                                   int digits);
// Words for floats computed in `compute`, of shape [m, numel of dims]: m
// planes of shape dims (tpu_rng_plane), for ops that need several draws per
// element.
tpu_val_t tpu_rng_word_planes(tpu_lower_ctx_t* cx, int m, tpu_dtype_t compute,
                              const int64_t* dims, int rank);
// Box-Muller from two planes of words: the radius sqrt(-2 log u1) and the
// angle 2 pi u2; r cos(angle) and r sin(angle) are independent normals.
void tpu_rng_polar(tpu_lower_ctx_t* cx, tpu_val_t w1, tpu_val_t w2, tpu_dtype_t compute,
                   tpu_val_t* radius, tpu_val_t* angle);
// Asserts on the device that every element of v is >= 0 (NaN fails).
void tpu_rng_assert_nonnegative(tpu_lower_ctx_t* cx, tpu_val_t v, const char* message);
// Uniform in (0, 1] from every bit of the words.
tpu_val_t tpu_rng_unit_open_closed(tpu_lower_ctx_t* cx, tpu_val_t words, tpu_dtype_t compute);
// v[k] of a [m, ...] value, as a value of shape dims.
tpu_val_t tpu_rng_plane(tpu_lower_ctx_t* cx, tpu_val_t v, int k, const int64_t* dims, int rank);
// -log(u) for u in (0, 1]: Exp(1) variates, never 0.
tpu_val_t tpu_rng_exp1(tpu_lower_ctx_t* cx, tpu_dtype_t compute, const int64_t* dims, int rank);
// The largest finite value of a float dtype.
double tpu_rng_dtype_max(tpu_dtype_t t);
// PyTorch's spelling of C++ type names in some messages.
const char* tpu_rng_c_type_name(tpu_dtype_t t);

// a <op> the constant b (b splatted to a's shape).
static inline tpu_val_t tpu_rng_bin(tpu_lower_ctx_t* cx, tpu_ir_op_t op, tpu_val_t a, double b) {
  return tpu_ir_binary(cx->g, op, a, tpu_lower_const_like(cx, a, b));
}

// a <cmp> the constant b.
static inline tpu_val_t tpu_rng_cmp(tpu_lower_ctx_t* cx, tpu_cmp_t c, tpu_val_t a, double b) {
  return tpu_ir_compare(cx->g, c, a, tpu_lower_const_like(cx, a, b));
}

// The argument tensor that in-place random ops fill (self).
static inline const tpu_view_t* tpu_rng_self(const tpu_lower_ctx_t* cx) {
  return tpu_arg(cx, 0)->tensor;
}

#endif  // TPU_LOWER_RNG_H_
