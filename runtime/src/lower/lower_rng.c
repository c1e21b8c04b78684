// Random numbers: this op's random words and the distributions behind
// torch.rand / randn / bernoulli / dropout (random_, randperm and
// multinomial: lower_rng_discrete.c).
//
// Every op whose schema has a `Generator?` receives a TPU_ARG_RNG argument:
// the generator's (seed, counter) for this call, the counter advancing by one
// per random op. The op draws its words from stablehlo.rng_bit_generator
// (Philox 4x32-10) with the seed as key and the counter as the high 64 bits
// of Philox's 128-bit block counter: XLA counts blocks up from the state it
// is given, so each op owns a stream of 2^64 blocks that no other op
// reaches. Results depend only on the seed and the order of random ops, not
// on the mode (debug, strict, fused) or on what else a program holds.
//
// Values need not equal CPU's (CUDA's do not either); distributions, bounds
// and dtypes follow PyTorch: uniform floats take as many bits as the dtype
// has digits (so [0, 1) never rounds up to 1), normals come from Box-Muller,
// integers in a range from 64-bit words where a 32-bit remainder would be
// visibly biased.
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "lower/rng.h"

//===--- words and unit floats ---===//

// The generator argument of this call.
static const tpu_arg_t* rng_arg(const tpu_lower_ctx_t* cx) {
  for (int i = 0; i < cx->num_args; ++i)
    if (cx->args[i].kind == TPU_ARG_RNG) return &cx->args[i];
  return NULL;
}

// Random words of `dtype` (U32 or U64) and shape `dims`, this op's stream.
tpu_val_t tpu_rng_words(tpu_lower_ctx_t* cx, tpu_dtype_t dtype,
                           const int64_t* dims, int rank) {
  const tpu_arg_t* a = rng_arg(cx);
  if (!a) {
    tpu_graph_fail(cx->g, tpu_status_make(TPU_CODE_INTERNAL,
                                          "%s: no generator argument", cx->row->name));
    return TPU_VAL_NONE;
  }
  int64_t numel = 1;
  for (int i = 0; i < rank; ++i) numel *= dims[i];
  if (numel == 0) return tpu_ir_const(cx->g, dtype, 0, dims, rank);
  // Philox state for XLA: key, then the 128-bit block counter (low, high).
  uint64_t state[3] = {a->rng[0], 0, a->rng[1]};
  int64_t n = 3;
  tpu_val_t s = tpu_lower_bytes(cx, TPU_U64, &n, 1, state);
  tpu_type_t t = tpu_type_make(dtype, dims, rank);
  return tpu_ir_result(cx->g, tpu_ir_rng_bits(cx->g, s, &t), 1);
}

static int word_bits(tpu_dtype_t w) { return w == TPU_U64 ? 64 : 32; }

// Significand bits of a float dtype (numeric_limits<T>::digits).
int tpu_rng_float_digits(tpu_dtype_t t) {
  switch (t) {
    case TPU_F16: return 11;
    case TPU_BF16: return 8;
    case TPU_F64: return 53;
    default: return 24;
  }
}

// The real dtype of a complex one (itself otherwise).
static tpu_dtype_t real_of(tpu_dtype_t t) {
  return t == TPU_C64 ? TPU_F32 : t == TPU_C128 ? TPU_F64 : t;
}

// Words wide enough for floats computed in `compute`.
tpu_dtype_t tpu_rng_words_for(tpu_dtype_t compute) {
  return compute == TPU_F64 ? TPU_U64 : TPU_U32;
}

// Uniform in [0, 1) on the grid of 2^-digits, from the top `digits` bits of
// each word, in `compute` (exact: digits fit its significand).
tpu_val_t tpu_rng_unit_closed_open(tpu_lower_ctx_t* cx, tpu_val_t words,
                                  tpu_dtype_t compute, int digits) {
  tpu_graph_t* g = cx->g;
  if (!tpu_graph_ok(g)) return TPU_VAL_NONE;
  int w = word_bits(tpu_ir_dtype(g, words));
  tpu_val_t top = tpu_rng_bin(cx, TPU_IR_SHR_L, words, w - digits);
  return tpu_rng_bin(cx, TPU_IR_MUL, tpu_ir_convert(g, top, compute), ldexp(1, -digits));
}

// Uniform in (0, 1] from every bit of the words (the smallest values reach
// 2^-32 or 2^-64, so logs of it keep long tails): (w + 1) * 2^-bits.
tpu_val_t tpu_rng_unit_open_closed(tpu_lower_ctx_t* cx, tpu_val_t words,
                                  tpu_dtype_t compute) {
  tpu_graph_t* g = cx->g;
  if (!tpu_graph_ok(g)) return TPU_VAL_NONE;
  int w = word_bits(tpu_ir_dtype(g, words));
  tpu_val_t f = tpu_rng_bin(cx, TPU_IR_ADD, tpu_ir_convert(g, words, compute), 1);
  return tpu_rng_bin(cx, TPU_IR_MUL, f, ldexp(1, -w));
}

// v[k] of a [m, ...] value, as a value of shape dims.
tpu_val_t tpu_rng_plane(tpu_lower_ctx_t* cx, tpu_val_t v, int k, const int64_t* dims,
                       int rank) {
  if (!tpu_graph_ok(cx->g)) return TPU_VAL_NONE;
  int vr = tpu_ir_rank(cx->g, v);
  int64_t start[TPU_MAX_RANK] = {0}, limit[TPU_MAX_RANK];
  memcpy(limit, tpu_ir_dims(cx->g, v), sizeof(int64_t) * (size_t)vr);
  start[0] = k;
  limit[0] = k + 1;
  return tpu_ir_reshape(cx->g, tpu_ir_slice(cx->g, v, start, limit, NULL), dims, rank);
}

// The planes are drawn flat, [m, numel]: [m, dims...] has no room for a
// rank-8 tensor's dims. The words come in the same order either way.
tpu_val_t tpu_rng_word_planes(tpu_lower_ctx_t* cx, int m, tpu_dtype_t compute,
                              const int64_t* dims, int rank) {
  int64_t wd[2] = {m, tpu_numel(dims, rank)};
  return tpu_rng_words(cx, tpu_rng_words_for(compute), wd, 2);
}

void tpu_rng_polar(tpu_lower_ctx_t* cx, tpu_val_t w1, tpu_val_t w2, tpu_dtype_t compute,
                   tpu_val_t* radius, tpu_val_t* angle) {
  tpu_graph_t* g = cx->g;
  tpu_val_t u1 = tpu_rng_unit_open_closed(cx, w1, compute);
  tpu_val_t u2 = tpu_rng_unit_closed_open(cx, w2, compute, tpu_rng_float_digits(compute));
  *radius = tpu_ir_unary(g, TPU_IR_SQRT,
                         tpu_rng_bin(cx, TPU_IR_MUL, tpu_ir_unary(g, TPU_IR_LOG, u1), -2));
  *angle = tpu_rng_bin(cx, TPU_IR_MUL, u2, 2 * M_PI);
}

// Standard normals in `compute` of shape dims (Box-Muller).
static tpu_val_t normals(tpu_lower_ctx_t* cx, tpu_dtype_t compute,
                         const int64_t* dims, int rank) {
  tpu_val_t words = tpu_rng_word_planes(cx, 2, compute, dims, rank);
  tpu_val_t r, angle;
  tpu_rng_polar(cx, tpu_rng_plane(cx, words, 0, dims, rank),
                tpu_rng_plane(cx, words, 1, dims, rank), compute, &r, &angle);
  return tpu_ir_binary(cx->g, TPU_IR_MUL, r, tpu_ir_unary(cx->g, TPU_IR_COS, angle));
}

// Splits a [2, ...] real value into the complex value of shape dims.
static tpu_val_t to_complex(tpu_lower_ctx_t* cx, tpu_val_t pair,
                            const int64_t* dims, int rank) {
  return tpu_ir_binary(cx->g, TPU_IR_COMPLEX, tpu_rng_plane(cx, pair, 0, dims, rank),
                       tpu_rng_plane(cx, pair, 1, dims, rank));
}

// The shape random values are drawn in for `self`: its own, or [2, numel]
// for complex dtypes (real and imaginary parts; flat, as a rank-8 tensor's
// [2, sizes...] would not fit).
static int draw_shape(const tpu_view_t* self, int64_t* dims) {
  if (tpu_dtype_is_complex(self->dtype)) {
    dims[0] = 2;
    dims[1] = tpu_numel(self->sizes, self->rank);
    return 2;
  }
  memcpy(dims, self->sizes, sizeof(int64_t) * (size_t)self->rank);
  return self->rank;
}

static tpu_val_t finish_draw(tpu_lower_ctx_t* cx, const tpu_view_t* self, tpu_val_t v) {
  if (tpu_dtype_is_complex(self->dtype)) return to_complex(cx, v, self->sizes, self->rank);
  return v;
}

//===--- uniform_ ---===//

double tpu_rng_dtype_max(tpu_dtype_t t) {
  switch (t) {
    case TPU_F16: return 65504.0;
    case TPU_BF16: return 3.3895313892515355e38;
    case TPU_F32: return 3.4028234663852886e38;
    default: return 1.7976931348623157e308;
  }
}

// uniform_(self, float from=0, float to=1, *, Generator? generator)
tpu_status_t tpu_lower_uniform(tpu_lower_ctx_t* cx) {
  tpu_graph_t* g = cx->g;
  const tpu_view_t* self = tpu_rng_self(cx);
  tpu_dtype_t real = real_of(self->dtype);
  if (!tpu_dtype_is_float(real)) return tpu_not_implemented("check_uniform_bounds", self->dtype);
  double from = tpu_arg_float(cx, 1, 0), to = tpu_arg_float(cx, 2, 1);
  if (!(from <= to))
    return tpu_status_make(TPU_CODE_INVALID_ARGUMENT,
                           "uniform_ expects to return a [from, to) range, but found "
                           "from=%g > to=%g", from, to);
  if (!(to - from <= tpu_rng_dtype_max(real)))
    return tpu_status_make(TPU_CODE_INVALID_ARGUMENT,
                           "uniform_ expects to-from <= std::numeric_limits<%s>::max(), "
                           "but found to=%g and from=%g which result in to-from to "
                           "exceed the limit", tpu_dtype_torch_name(real), to, from);
  tpu_dtype_t compute = tpu_opmath(real);
  int64_t dims[TPU_MAX_RANK + 1];
  int rank = draw_shape(self, dims);
  tpu_val_t x =
      tpu_rng_unit_closed_open(cx, tpu_rng_words(cx, tpu_rng_words_for(compute), dims, rank),
                               compute, tpu_rng_float_digits(real));
  // x * (to - from) + from, the difference taken in the compute dtype as
  // PyTorch does.
  tpu_val_t lo = tpu_lower_number(cx, from, compute), hi = tpu_lower_number(cx, to, compute);
  tpu_val_t span = tpu_ir_binary(g, TPU_IR_SUB, hi, lo);
  tpu_val_t r = tpu_ir_binary(g, TPU_IR_ADD,
                              tpu_ir_binary(g, TPU_IR_MUL, x, tpu_lower_splat_like(cx, span, x)),
                              tpu_lower_splat_like(cx, lo, x));
  r = tpu_ir_convert(g, r, real);
  // Rounding (to the dtype, or of x * span + from) may reach `to`: take the
  // value just below it instead, so the range stays [from, to).
  tpu_val_t top = tpu_ir_convert(g, hi, real);
  tpu_val_t below = tpu_ir_binary(g, TPU_IR_NEXTAFTER, top, tpu_ir_const(g, real, -INFINITY, NULL, 0));
  below = tpu_ir_binary(g, TPU_IR_MAX, below, tpu_ir_convert(g, lo, real));
  r = tpu_ir_select(g, tpu_ir_compare(g, TPU_CMP_GE, r, tpu_lower_splat_like(cx, top, r)),
                    tpu_lower_splat_like(cx, below, r), r);
  tpu_lower_out(cx, 0, finish_draw(cx, self, r));
  return TPU_OK;
}

//===--- normal ---===//

// Standard normals of `dtype` (its opmath for real dtypes; complex ones get
// independent parts of variance 1/2 each, as PyTorch's complex normal).
static tpu_val_t std_normals(tpu_lower_ctx_t* cx, tpu_dtype_t dtype,
                             const int64_t* sizes, int rank) {
  if (!tpu_dtype_is_complex(dtype))
    return normals(cx, tpu_opmath(dtype), sizes, rank);
  int64_t dims[2] = {2, tpu_numel(sizes, rank)};  // flat, as draw_shape's
  tpu_val_t z = tpu_rng_bin(cx, TPU_IR_MUL, normals(cx, real_of(dtype), dims, 2), M_SQRT1_2);
  return to_complex(cx, z, sizes, rank);
}

static tpu_status_t check_normal_dtype(tpu_dtype_t t) {
  if (!tpu_dtype_is_float(t) && !tpu_dtype_is_complex(t))
    return tpu_not_implemented("normal_kernel_cpu", t);
  return TPU_OK;
}

static tpu_status_t check_std(double std) {
  if (!(std >= 0.0))
    return tpu_status_make(TPU_CODE_INVALID_ARGUMENT,
                           "normal expects std >= 0.0, but found std %g", std);
  return TPU_OK;
}

// z * std + mean in the opmath of `out`, rounded once to `out`. std and
// mean are values of that compute dtype, already of z's shape.
static tpu_val_t affine(tpu_lower_ctx_t* cx, tpu_val_t z, tpu_val_t std,
                        tpu_val_t mean, tpu_dtype_t out) {
  tpu_graph_t* g = cx->g;
  return tpu_ir_convert(g, tpu_ir_binary(g, TPU_IR_ADD, tpu_ir_binary(g, TPU_IR_MUL, z, std), mean),
                        out);
}

static tpu_dtype_t compute_of(tpu_dtype_t t) {
  return tpu_dtype_is_complex(t) ? t : tpu_opmath(t);
}

// normal_(self, float mean=0, float std=1, *, Generator? generator)
tpu_status_t tpu_lower_normal_(tpu_lower_ctx_t* cx) {
  const tpu_view_t* self = tpu_rng_self(cx);
  TPU_RETURN_IF_ERROR(check_normal_dtype(self->dtype));
  double mean = tpu_arg_float(cx, 1, 0), std = tpu_arg_float(cx, 2, 1);
  TPU_RETURN_IF_ERROR(check_std(std));
  tpu_dtype_t compute = compute_of(self->dtype);
  tpu_val_t z = std_normals(cx, self->dtype, self->sizes, self->rank);
  tpu_lower_out(
      cx, 0,
      affine(cx, z, tpu_lower_splat_like(cx, tpu_lower_number(cx, std, compute), z),
             tpu_lower_splat_like(cx, tpu_lower_number(cx, mean, compute), z), self->dtype));
  return TPU_OK;
}

void tpu_rng_assert_nonnegative(tpu_lower_ctx_t* cx, tpu_val_t v, const char* message) {
  tpu_graph_t* g = cx->g;
  if (!tpu_graph_ok(g)) return;
  tpu_val_t ok = tpu_rng_cmp(cx, TPU_CMP_GE, v, 0);
  tpu_val_t bad = tpu_ir_reduce(g, tpu_ir_unary(g, TPU_IR_NOT, ok),
                                tpu_ir_const(g, TPU_BOOL, 0, NULL, 0), tpu_all_dims,
                                tpu_ir_rank(g, v), TPU_BODY_OR);
  tpu_lower_assert(cx, bad, TPU_CODE_INVALID_ARGUMENT, message);
}

// normal.Tensor_float(Tensor mean, float std=1, *, Generator? generator)
// normal.float_Tensor(float mean, Tensor std, *, Generator? generator)
// normal.Tensor_Tensor(Tensor mean, Tensor std, *, Generator? generator)
// The result has the broadcast shape and the dtype of the tensor mean (of
// std when mean is a number).
tpu_status_t tpu_lower_normal(tpu_lower_ctx_t* cx) {
  bool mean_t = tpu_arg_is_tensor(cx, 0), std_t = tpu_arg_is_tensor(cx, 1);
  tpu_dtype_t out = tpu_arg_value_dtype(cx, mean_t ? 0 : 1);
  if (std_t && tpu_dtype_is_complex(tpu_arg_value_dtype(cx, 1)))
    return tpu_status_make(TPU_CODE_INVALID_ARGUMENT,
                           "normal expects standard deviation to be non-complex");
  if (!std_t) TPU_RETURN_IF_ERROR(check_std(tpu_arg_float(cx, 1, 1)));
  TPU_RETURN_IF_ERROR(check_normal_dtype(out));
  tpu_dtype_t compute = compute_of(out);
  int ms[2] = {0, 1};
  tpu_val_t v[2];
  int64_t shape[TPU_MAX_RANK];
  int rank;
  TPU_RETURN_IF_ERROR(tpu_broadcast_shapes(tpu_arg_sizes(cx, 0), tpu_arg_rank(cx, 0),
                                           tpu_arg_sizes(cx, 1), tpu_arg_rank(cx, 1), shape,
                                           &rank));
  if (std_t)
    tpu_rng_assert_nonnegative(cx, tpu_lower_tensor(cx, 1),
                               "normal expects all elements of std >= 0.0");
  TPU_RETURN_IF_ERROR(tpu_lower_broadcast_inputs(cx, ms, 2, compute, v));
  tpu_val_t z = std_normals(cx, out, shape, rank);
  tpu_lower_out(cx, 0, affine(cx, z, v[1], v[0], out));
  return TPU_OK;
}

// log_normal_(self, float mean=1, float std=2, *, Generator? generator)
tpu_status_t tpu_lower_log_normal(tpu_lower_ctx_t* cx) {
  const tpu_view_t* self = tpu_rng_self(cx);
  if (!tpu_dtype_is_float(self->dtype)) return tpu_not_implemented("log_normal_cpu", self->dtype);
  double mean = tpu_arg_float(cx, 1, 1), std = tpu_arg_float(cx, 2, 2);
  if (!(std > 0.0))
    return tpu_status_make(TPU_CODE_INVALID_ARGUMENT,
                           "log_normal_ expects std > 0.0, but found std=%g", std);
  tpu_dtype_t compute = tpu_opmath(self->dtype);
  tpu_val_t z = normals(cx, compute, self->sizes, self->rank);
  tpu_val_t x = affine(cx, z, tpu_lower_splat_like(cx, tpu_lower_number(cx, std, compute), z),
                       tpu_lower_splat_like(cx, tpu_lower_number(cx, mean, compute), z), compute);
  tpu_lower_out(cx, 0, tpu_ir_convert(cx->g, tpu_ir_unary(cx->g, TPU_IR_EXP, x), self->dtype));
  return TPU_OK;
}

//===--- exponential_, cauchy_, geometric_ ---===//

// PyTorch's spelling of C++ type names in some messages.
const char* tpu_rng_c_type_name(tpu_dtype_t t) {
  switch (t) {
    case TPU_BOOL: return "bool";
    case TPU_U8: return "unsigned char";
    case TPU_I8: return "signed char";
    case TPU_I16: return "short int";
    case TPU_I32: return "int";
    case TPU_I64: return "long int";
    case TPU_U16: return "short unsigned int";
    case TPU_U32: return "unsigned int";
    case TPU_U64: return "long unsigned int";
    case TPU_F16: return "c10::Half";
    case TPU_BF16: return "c10::BFloat16";
    case TPU_F32: return "float";
    case TPU_F64: return "double";
    case TPU_C64: return "c10::complex<float>";
    case TPU_C128: return "c10::complex<double>";
    default: return tpu_dtype_torch_name(t);
  }
}

// -log(u) for u in (0, 1]: Exp(1) variates, never 0 (u rounded up to 1
// stands for the values just below it).
tpu_val_t tpu_rng_exp1(tpu_lower_ctx_t* cx, tpu_dtype_t compute, const int64_t* dims, int rank) {
  tpu_graph_t* g = cx->g;
  tpu_dtype_t w = tpu_rng_words_for(compute);
  tpu_val_t u = tpu_rng_unit_open_closed(cx, tpu_rng_words(cx, w, dims, rank), compute);
  tpu_val_t e = tpu_ir_unary(g, TPU_IR_NEG, tpu_ir_unary(g, TPU_IR_LOG, u));
  tpu_val_t one = tpu_ir_compare(g, TPU_CMP_GE, u, tpu_lower_const_like(cx, u, 1));
  return tpu_ir_select(g, one, tpu_lower_const_like(cx, e, ldexp(1, -word_bits(w) - 1)), e);
}

// exponential_(self, float lambd=1, *, Generator? generator)
tpu_status_t tpu_lower_exponential(tpu_lower_ctx_t* cx) {
  const tpu_view_t* self = tpu_rng_self(cx);
  if (!tpu_dtype_is_float(self->dtype))
    return tpu_status_make(TPU_CODE_INVALID_ARGUMENT,
                           "Exponential distribution is a continuous probability "
                           "distribution. dtype must be a floating point but you "
                           "specified %s", tpu_dtype_torch_name(self->dtype));
  double lambd = tpu_arg_float(cx, 1, 1);
  if (!(lambd > 0.0))
    return tpu_status_make(TPU_CODE_INVALID_ARGUMENT,
                           "exponential_ expects lambda > 0.0, but found lambda=%g", lambd);
  tpu_dtype_t compute = tpu_opmath(self->dtype);
  tpu_val_t e = tpu_rng_exp1(cx, compute, self->sizes, self->rank);
  tpu_val_t l = tpu_lower_splat_like(cx, tpu_lower_number(cx, lambd, compute), e);
  tpu_lower_out(cx, 0, tpu_ir_convert(cx->g, tpu_ir_binary(cx->g, TPU_IR_DIV, e, l), self->dtype));
  return TPU_OK;
}

// cauchy_(self, float median=0, float sigma=1, *, Generator? generator)
tpu_status_t tpu_lower_cauchy(tpu_lower_ctx_t* cx) {
  tpu_graph_t* g = cx->g;
  const tpu_view_t* self = tpu_rng_self(cx);
  if (!tpu_dtype_is_float(self->dtype))
    return tpu_status_make(TPU_CODE_INVALID_ARGUMENT,
                           "Cauchy distribution is a continuous probability "
                           "distribution. dtype must be a floating point but you "
                           "specified %s", tpu_rng_c_type_name(self->dtype));
  double median = tpu_arg_float(cx, 1, 0), sigma = tpu_arg_float(cx, 2, 1);
  if (!(sigma > 0.0))
    return tpu_status_make(TPU_CODE_INVALID_ARGUMENT,
                           "cauchy_ expects sigma > 0.0, but found sigma=%g", sigma);
  tpu_dtype_t compute = tpu_opmath(self->dtype);
  tpu_val_t u = tpu_rng_unit_closed_open(
      cx, tpu_rng_words(cx, tpu_rng_words_for(compute), self->sizes, self->rank), compute,
      tpu_rng_float_digits(compute));
  tpu_val_t t = tpu_ir_unary(
      g, TPU_IR_TAN, tpu_rng_bin(cx, TPU_IR_MUL, tpu_rng_bin(cx, TPU_IR_SUB, u, 0.5), M_PI));
  tpu_lower_out(
      cx, 0,
      affine(cx, t, tpu_lower_splat_like(cx, tpu_lower_number(cx, sigma, compute), t),
             tpu_lower_splat_like(cx, tpu_lower_number(cx, median, compute), t), self->dtype));
  return TPU_OK;
}

// geometric_(self, float p, *, Generator? generator): trials up to the first
// success, ceil(log(u) / log1p(-p)) >= 1.
tpu_status_t tpu_lower_geometric(tpu_lower_ctx_t* cx) {
  tpu_graph_t* g = cx->g;
  const tpu_view_t* self = tpu_rng_self(cx);
  tpu_dtype_t t = self->dtype;
  if (t == TPU_BOOL || tpu_dtype_is_complex(t) || t == TPU_U16 || t == TPU_U32 || t == TPU_U64)
    return tpu_not_implemented("geometric_cpu", t);
  double p = tpu_arg_float(cx, 1, 0);
  if (!(p > 0 && p < 1))
    return tpu_status_make(TPU_CODE_INVALID_ARGUMENT,
                           "geometric_ expects p to be in (0, 1), but got p=%g", p);
  tpu_dtype_t compute = t == TPU_F64 ? TPU_F64 : TPU_F32;
  tpu_val_t e = tpu_rng_exp1(cx, compute, self->sizes, self->rank);  // -log(u)
  tpu_val_t k = tpu_ir_binary(
      g, TPU_IR_DIV, e, tpu_lower_splat_like(cx, tpu_lower_number(cx, -log1p(-p), compute), e));
  k = tpu_ir_binary(g, TPU_IR_MAX, tpu_ir_unary(g, TPU_IR_CEIL, k), tpu_lower_const_like(cx, k, 1));
  tpu_lower_out(cx, 0, tpu_ir_convert(g, k, t));
  return TPU_OK;
}

//===--- bernoulli ---===//

// Bernoulli(p) draws of shape dims as bool: a 32-bit word below
// ceil(p * 2^32), so that tiny p keep their odds and p = 1 always hits.
// `p` is a value of compute dtype (F32 or F64) of shape dims.
static tpu_val_t bernoulli_mask(tpu_lower_ctx_t* cx, tpu_val_t p, const int64_t* dims, int rank) {
  tpu_graph_t* g = cx->g;
  tpu_val_t w = tpu_ir_convert(g, tpu_rng_words(cx, TPU_U32, dims, rank), TPU_U64);
  tpu_val_t bound = tpu_ir_convert(
      g, tpu_ir_unary(g, TPU_IR_CEIL, tpu_rng_bin(cx, TPU_IR_MUL, p, 4294967296.0)), TPU_U64);
  return tpu_ir_compare(g, TPU_CMP_LT, w, bound);
}

static tpu_status_t check_bernoulli_p(double p) {
  if (!(p >= 0 && p <= 1))
    return tpu_status_make(TPU_CODE_INVALID_ARGUMENT,
                           "bernoulli_ expects p to be in [0, 1], but got p=%g", p);
  return TPU_OK;
}

// bernoulli_.float(self, float p=0.5, *, Generator? generator)
tpu_status_t tpu_lower_bernoulli_float(tpu_lower_ctx_t* cx) {
  const tpu_view_t* self = tpu_rng_self(cx);
  tpu_dtype_t t = self->dtype;
  if (tpu_dtype_is_complex(t) || t == TPU_U16 || t == TPU_U32 || t == TPU_U64)
    return tpu_not_implemented("bernoulli_scalar_cpu_", t);
  double p = tpu_arg_float(cx, 1, 0.5);
  TPU_RETURN_IF_ERROR(check_bernoulli_p(p));
  tpu_val_t pv = tpu_lower_number(cx, p, TPU_F64);
  pv = tpu_ir_broadcast(cx->g, pv, self->sizes, self->rank, NULL);
  tpu_lower_out(cx, 0, tpu_ir_convert(cx->g, bernoulli_mask(cx, pv, self->sizes, self->rank), t));
  return TPU_OK;
}

// Bernoulli draws with probabilities from tensor argument `pi`, broadcast to
// `dims` (p must expand to them), written as `out`.
static tpu_status_t bernoulli_tensor(tpu_lower_ctx_t* cx, int pi, const int64_t* dims, int rank,
                                     tpu_dtype_t out) {
  tpu_graph_t* g = cx->g;
  tpu_dtype_t pt = tpu_arg_value_dtype(cx, pi);
  if (!tpu_dtype_is_float(pt)) return tpu_not_implemented("bernoulli_tensor_cpu_p_", pt);
  int pr = tpu_arg_rank(cx, pi);
  const int64_t* ps = tpu_arg_sizes(cx, pi);
  bool ok = pr <= rank;
  for (int i = 0; ok && i < pr; ++i) {
    int64_t want = dims[rank - pr + i];
    if (ps[i] != want && ps[i] != 1) {
      char target[256] = "", have[256] = "";
      size_t nt = 0, nh = 0;
      for (int j = 0; j < rank; ++j)
        nt += (size_t)snprintf(target + nt, sizeof target - nt, "%s%lld", j ? ", " : "",
                               (long long)dims[j]);
      for (int j = 0; j < pr; ++j)
        nh += (size_t)snprintf(have + nh, sizeof have - nh, "%s%lld", j ? ", " : "",
                               (long long)ps[j]);
      return tpu_status_make(TPU_CODE_INVALID_ARGUMENT,
                             "The expanded size of the tensor (%lld) must match the "
                             "existing size (%lld) at non-singleton dimension %d.  "
                             "Target sizes: [%s].  Tensor sizes: [%s]",
                             (long long)want, (long long)ps[i], rank - pr + i, target, have);
    }
  }
  if (!ok)
    return tpu_status_make(TPU_CODE_INVALID_ARGUMENT,
                           "expand: the number of sizes provided (%d) must be greater or "
                           "equal to the number of dimensions in the tensor (%d)", rank, pr);
  tpu_dtype_t compute = pt == TPU_F64 ? TPU_F64 : TPU_F32;
  tpu_val_t p = tpu_lower_input(cx, pi, compute);
  int64_t all[TPU_MAX_RANK];
  for (int i = 0; i < pr; ++i) all[i] = i;
  tpu_val_t in = tpu_ir_binary(g, TPU_IR_AND,
                               tpu_ir_compare(g, TPU_CMP_GE, p, tpu_lower_const_like(cx, p, 0)),
                               tpu_ir_compare(g, TPU_CMP_LE, p, tpu_lower_const_like(cx, p, 1)));
  tpu_lower_assert(cx, tpu_ir_reduce(g, tpu_ir_unary(g, TPU_IR_NOT, in),
                                     tpu_ir_const(g, TPU_BOOL, 0, NULL, 0), all, pr, TPU_BODY_OR),
                   TPU_CODE_INVALID_ARGUMENT,
                   "Expected p_in >= 0 && p_in <= 1 to be true, but got false.  (Could "
                   "this error message be improved?  If so, please report an "
                   "enhancement request to PyTorch.)");
  p = tpu_lower_expand(cx, p, dims, rank);
  tpu_lower_out(cx, 0, tpu_ir_convert(g, bernoulli_mask(cx, p, dims, rank), out));
  return TPU_OK;
}

// bernoulli_.Tensor(self, Tensor p, *, Generator? generator)
tpu_status_t tpu_lower_bernoulli_tensor(tpu_lower_ctx_t* cx) {
  const tpu_view_t* self = tpu_rng_self(cx);
  tpu_dtype_t t = self->dtype;
  if (tpu_dtype_is_complex(t) || t == TPU_U16 || t == TPU_U32 || t == TPU_U64)
    return tpu_not_implemented("bernoulli_tensor_cpu_self_", t);
  return bernoulli_tensor(cx, 1, self->sizes, self->rank, t);
}

// bernoulli(Tensor self, *, Generator? generator): self holds the
// probabilities; the result has its shape and dtype.
tpu_status_t tpu_lower_bernoulli(tpu_lower_ctx_t* cx) {
  const tpu_view_t* self = tpu_rng_self(cx);
  return bernoulli_tensor(cx, 0, self->sizes, self->rank, self->dtype);
}

//===--- dropout ---===//

// native_dropout(Tensor input, float p, bool? train) -> (output, mask)
tpu_status_t tpu_lower_native_dropout(tpu_lower_ctx_t* cx) {
  tpu_graph_t* g = cx->g;
  const tpu_view_t* x = tpu_rng_self(cx);
  tpu_dtype_t t = x->dtype;
  double p = tpu_arg_float(cx, 1, 0.5);
  bool train = tpu_arg_bool(cx, 2, true);
  if (!train) {  // identity, all kept
    tpu_lower_out(cx, 0, tpu_lower_tensor(cx, 0));
    tpu_lower_out(cx, 1, tpu_ir_const(g, TPU_BOOL, 1, x->sizes, x->rank));
    return TPU_OK;
  }
  if (tpu_dtype_is_complex(t)) return tpu_not_implemented("bernoulli_scalar_cpu_", t);
  double keep = 1.0 - p;
  TPU_RETURN_IF_ERROR(check_bernoulli_p(keep));
  if (!tpu_dtype_is_float(t))
    return tpu_status_make(TPU_CODE_INVALID_ARGUMENT,
                           "result type Float can't be cast to the desired output type %s",
                           tpu_dtype_torch_name(t));
  double scale = keep == 0 ? 0 : 1 / keep;
  tpu_val_t kv = tpu_ir_broadcast(g, tpu_lower_number(cx, keep, TPU_F64), x->sizes, x->rank, NULL);
  tpu_val_t mask = bernoulli_mask(cx, kv, x->sizes, x->rank);
  // input * mask * scale, as PyTorch multiplies (NaN * 0 stays NaN).
  tpu_dtype_t compute = tpu_opmath(t);
  tpu_val_t in = tpu_lower_input(cx, 0, compute);
  tpu_val_t y = tpu_ir_binary(g, TPU_IR_MUL, in, tpu_ir_convert(g, mask, compute));
  y = tpu_ir_binary(g, TPU_IR_MUL, y,
                    tpu_lower_splat_like(cx, tpu_lower_number(cx, scale, compute), y));
  tpu_lower_out(cx, 0, tpu_ir_convert(g, y, t));
  tpu_lower_out(cx, 1, mask);
  return TPU_OK;
}

// native_dropout_backward(Tensor grad_output, Tensor mask, float scale):
// grad_output * mask * scale.
tpu_status_t tpu_lower_native_dropout_backward(tpu_lower_ctx_t* cx) {
  tpu_graph_t* g = cx->g;
  int gm[2] = {0, 1};
  tpu_dtype_t t = tpu_lower_result_type(cx, gm, 2);
  if (t == TPU_DTYPE_INVALID)
    return tpu_status_make(TPU_CODE_INVALID_ARGUMENT, "native_dropout_backward: bad dtypes");
  tpu_dtype_t out = tpu_dtype_is_integral(t, true) ? tpu_default_float(cx) : t;
  tpu_dtype_t compute = tpu_opmath(out);
  tpu_val_t v[2];
  TPU_RETURN_IF_ERROR(tpu_lower_broadcast_inputs(cx, gm, 2, t, v));
  tpu_val_t y = tpu_ir_convert(g, tpu_ir_binary(g, t == TPU_BOOL ? TPU_IR_AND : TPU_IR_MUL, v[0], v[1]),
                               compute);
  y = tpu_ir_binary(g, TPU_IR_MUL, y, tpu_lower_splat_like(cx, tpu_lower_input(cx, 2, compute), y));
  tpu_lower_out(cx, 0, tpu_ir_convert(g, y, out));
  return TPU_OK;
}
