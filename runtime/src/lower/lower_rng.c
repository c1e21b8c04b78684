// Random numbers: the distributions behind torch.rand / randn / randint /
// bernoulli / dropout / randperm / multinomial.
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
#include <stdlib.h>
#include <string.h>

#include "lower/lower.h"

//===--- words and unit floats ---===//

// The generator argument of this call.
static const tpu_arg_t* rng_arg(const tpu_lower_ctx_t* cx) {
  for (int i = 0; i < cx->num_args; ++i)
    if (cx->args[i].kind == TPU_ARG_RNG) return &cx->args[i];
  return NULL;
}

// Random words of `dtype` (U32 or U64) and shape `dims`, this op's stream.
static tpu_val_t rng_words(tpu_lower_ctx_t* cx, tpu_dtype_t dtype,
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
static int float_digits(tpu_dtype_t t) {
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
static tpu_dtype_t words_for(tpu_dtype_t compute) {
  return compute == TPU_F64 ? TPU_U64 : TPU_U32;
}

// A 0-d value broadcast to the shape of `like`.
static tpu_val_t splat(tpu_lower_ctx_t* cx, tpu_val_t scalar, tpu_val_t like) {
  if (!tpu_graph_ok(cx->g)) return TPU_VAL_NONE;
  const tpu_type_t* t = tpu_ir_type(cx->g, like);
  return tpu_ir_broadcast(cx->g, scalar, t->dims, t->rank, NULL);
}

static tpu_val_t bin(tpu_lower_ctx_t* cx, tpu_ir_op_t op, tpu_val_t a, double b) {
  return tpu_ir_binary(cx->g, op, a, tpu_lower_const_like(cx, a, b));
}

// Uniform in [0, 1) on the grid of 2^-digits, from the top `digits` bits of
// each word, in `compute` (exact: digits fit its significand).
static tpu_val_t unit_closed_open(tpu_lower_ctx_t* cx, tpu_val_t words,
                                  tpu_dtype_t compute, int digits) {
  tpu_graph_t* g = cx->g;
  if (!tpu_graph_ok(g)) return TPU_VAL_NONE;
  int w = word_bits(tpu_ir_dtype(g, words));
  tpu_val_t top = bin(cx, TPU_IR_SHR_L, words, w - digits);
  return bin(cx, TPU_IR_MUL, tpu_ir_convert(g, top, compute), ldexp(1, -digits));
}

// Uniform in (0, 1] from every bit of the words (the smallest values reach
// 2^-32 or 2^-64, so logs of it keep long tails): (w + 1) * 2^-bits.
static tpu_val_t unit_open_closed(tpu_lower_ctx_t* cx, tpu_val_t words,
                                  tpu_dtype_t compute) {
  tpu_graph_t* g = cx->g;
  if (!tpu_graph_ok(g)) return TPU_VAL_NONE;
  int w = word_bits(tpu_ir_dtype(g, words));
  tpu_val_t f = bin(cx, TPU_IR_ADD, tpu_ir_convert(g, words, compute), 1);
  return bin(cx, TPU_IR_MUL, f, ldexp(1, -w));
}

// v[k] of a [2, dims...] value, as a value of shape dims.
static tpu_val_t plane(tpu_lower_ctx_t* cx, tpu_val_t v, int k, const int64_t* dims,
                       int rank) {
  int64_t start[TPU_MAX_RANK + 1] = {0}, limit[TPU_MAX_RANK + 1], strides[TPU_MAX_RANK + 1];
  start[0] = k;
  limit[0] = k + 1;
  strides[0] = 1;
  for (int i = 0; i < rank; ++i) {
    limit[i + 1] = dims[i];
    strides[i + 1] = 1;
  }
  return tpu_ir_reshape(cx->g, tpu_ir_slice(cx->g, v, start, limit, strides), dims, rank);
}

// Standard normals in `compute` of shape dims (Box-Muller).
static tpu_val_t normals(tpu_lower_ctx_t* cx, tpu_dtype_t compute,
                         const int64_t* dims, int rank) {
  tpu_graph_t* g = cx->g;
  int64_t wd[TPU_MAX_RANK + 1];
  wd[0] = 2;
  memcpy(wd + 1, dims, sizeof(int64_t) * (size_t)rank);
  tpu_val_t words = rng_words(cx, words_for(compute), wd, rank + 1);
  tpu_val_t w1 = plane(cx, words, 0, dims, rank), w2 = plane(cx, words, 1, dims, rank);
  tpu_val_t u1 = unit_open_closed(cx, w1, compute);
  tpu_val_t u2 = unit_closed_open(cx, w2, compute, float_digits(compute));
  tpu_val_t r = tpu_ir_unary(g, TPU_IR_SQRT, bin(cx, TPU_IR_MUL, tpu_ir_unary(g, TPU_IR_LOG, u1), -2));
  tpu_val_t c = tpu_ir_unary(g, TPU_IR_COS, bin(cx, TPU_IR_MUL, u2, 2 * M_PI));
  return tpu_ir_binary(g, TPU_IR_MUL, r, c);
}

// The argument tensor that in-place random ops fill (self).
static const tpu_view_t* self_view(const tpu_lower_ctx_t* cx) {
  return tpu_arg(cx, 0)->tensor;
}

// Splits a [2, dims...] real value into the complex value of shape dims.
static tpu_val_t to_complex(tpu_lower_ctx_t* cx, tpu_val_t pair,
                            const int64_t* dims, int rank) {
  return tpu_ir_binary(cx->g, TPU_IR_COMPLEX, plane(cx, pair, 0, dims, rank),
                       plane(cx, pair, 1, dims, rank));
}

// The shape random values are drawn in for `self`: its own, or [2, ...] for
// complex dtypes (real and imaginary parts).
static int draw_shape(const tpu_view_t* self, int64_t* dims) {
  bool cplx = tpu_dtype_is_complex(self->dtype);
  int rank = 0;
  if (cplx) dims[rank++] = 2;
  for (int i = 0; i < self->rank; ++i) dims[rank++] = self->sizes[i];
  return rank;
}

static tpu_val_t finish_draw(tpu_lower_ctx_t* cx, const tpu_view_t* self, tpu_val_t v) {
  if (tpu_dtype_is_complex(self->dtype)) return to_complex(cx, v, self->sizes, self->rank);
  return v;
}

//===--- uniform_ ---===//

static double dtype_max(tpu_dtype_t t) {
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
  const tpu_view_t* self = self_view(cx);
  tpu_dtype_t real = real_of(self->dtype);
  if (!tpu_dtype_is_float(real)) return tpu_not_implemented("check_uniform_bounds", self->dtype);
  double from = tpu_arg_float(cx, 1, 0), to = tpu_arg_float(cx, 2, 1);
  if (!(from <= to))
    return tpu_status_make(TPU_CODE_INVALID_ARGUMENT,
                           "uniform_ expects to return a [from, to) range, but found "
                           "from=%g > to=%g", from, to);
  if (!(to - from <= dtype_max(real)))
    return tpu_status_make(TPU_CODE_INVALID_ARGUMENT,
                           "uniform_ expects to-from <= std::numeric_limits<%s>::max(), "
                           "but found to=%g and from=%g which result in to-from to "
                           "exceed the limit", tpu_dtype_torch_name(real), to, from);
  tpu_dtype_t compute = tpu_opmath(real);
  int64_t dims[TPU_MAX_RANK + 1];
  int rank = draw_shape(self, dims);
  tpu_val_t x = unit_closed_open(cx, rng_words(cx, words_for(compute), dims, rank), compute,
                                 float_digits(real));
  // x * (to - from) + from, the difference taken in the compute dtype as
  // PyTorch does.
  tpu_val_t lo = tpu_lower_number(cx, from, compute), hi = tpu_lower_number(cx, to, compute);
  tpu_val_t span = tpu_ir_binary(g, TPU_IR_SUB, hi, lo);
  tpu_val_t r = tpu_ir_binary(g, TPU_IR_ADD, tpu_ir_binary(g, TPU_IR_MUL, x, splat(cx, span, x)),
                              splat(cx, lo, x));
  r = tpu_ir_convert(g, r, real);
  // Rounding (to the dtype, or of x * span + from) may reach `to`: take the
  // value just below it instead, so the range stays [from, to).
  tpu_val_t top = tpu_ir_convert(g, hi, real);
  tpu_val_t below = tpu_ir_binary(g, TPU_IR_NEXTAFTER, top, tpu_ir_const(g, real, -INFINITY, NULL, 0));
  below = tpu_ir_binary(g, TPU_IR_MAX, below, tpu_ir_convert(g, lo, real));
  r = tpu_ir_select(g, tpu_ir_compare(g, TPU_CMP_GE, r, splat(cx, top, r)), splat(cx, below, r), r);
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
  int64_t dims[TPU_MAX_RANK + 1];
  dims[0] = 2;
  memcpy(dims + 1, sizes, sizeof(int64_t) * (size_t)rank);
  tpu_val_t z = bin(cx, TPU_IR_MUL, normals(cx, real_of(dtype), dims, rank + 1), M_SQRT1_2);
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
  const tpu_view_t* self = self_view(cx);
  TPU_RETURN_IF_ERROR(check_normal_dtype(self->dtype));
  double mean = tpu_arg_float(cx, 1, 0), std = tpu_arg_float(cx, 2, 1);
  TPU_RETURN_IF_ERROR(check_std(std));
  tpu_dtype_t compute = compute_of(self->dtype);
  tpu_val_t z = std_normals(cx, self->dtype, self->sizes, self->rank);
  tpu_lower_out(cx, 0, affine(cx, z, splat(cx, tpu_lower_number(cx, std, compute), z),
                              splat(cx, tpu_lower_number(cx, mean, compute), z), self->dtype));
  return TPU_OK;
}

// Asserts (on the device) that every element of std is >= 0.
static void assert_std(tpu_lower_ctx_t* cx, tpu_val_t std) {
  tpu_graph_t* g = cx->g;
  if (!tpu_graph_ok(g)) return;
  int rank = tpu_ir_rank(g, std);
  int64_t all[TPU_MAX_RANK];
  for (int i = 0; i < rank; ++i) all[i] = i;
  tpu_val_t ok = tpu_ir_compare(g, TPU_CMP_GE, std, tpu_lower_const_like(cx, std, 0));
  tpu_val_t bad = tpu_ir_reduce(g, tpu_ir_unary(g, TPU_IR_NOT, ok),
                                tpu_ir_const(g, TPU_BOOL, 0, NULL, 0), all, rank, TPU_BODY_OR);
  tpu_lower_assert(cx, bad, TPU_CODE_INVALID_ARGUMENT,
                   "normal expects all elements of std >= 0.0");
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
  if (std_t) assert_std(cx, tpu_lower_tensor(cx, 1));
  TPU_RETURN_IF_ERROR(tpu_lower_broadcast_inputs(cx, ms, 2, compute, v));
  tpu_val_t z = std_normals(cx, out, shape, rank);
  tpu_lower_out(cx, 0, affine(cx, z, v[1], v[0], out));
  return TPU_OK;
}

// log_normal_(self, float mean=1, float std=2, *, Generator? generator)
tpu_status_t tpu_lower_log_normal(tpu_lower_ctx_t* cx) {
  const tpu_view_t* self = self_view(cx);
  if (!tpu_dtype_is_float(self->dtype)) return tpu_not_implemented("log_normal_cpu", self->dtype);
  double mean = tpu_arg_float(cx, 1, 1), std = tpu_arg_float(cx, 2, 2);
  if (!(std > 0.0))
    return tpu_status_make(TPU_CODE_INVALID_ARGUMENT,
                           "log_normal_ expects std > 0.0, but found std=%g", std);
  tpu_dtype_t compute = tpu_opmath(self->dtype);
  tpu_val_t z = normals(cx, compute, self->sizes, self->rank);
  tpu_val_t x = affine(cx, z, splat(cx, tpu_lower_number(cx, std, compute), z),
                       splat(cx, tpu_lower_number(cx, mean, compute), z), compute);
  tpu_lower_out(cx, 0, tpu_ir_convert(cx->g, tpu_ir_unary(cx->g, TPU_IR_EXP, x), self->dtype));
  return TPU_OK;
}

//===--- exponential_, cauchy_, geometric_ ---===//

// PyTorch's spelling of C++ type names in some messages.
static const char* c_type_name(tpu_dtype_t t) {
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
static tpu_val_t exp1(tpu_lower_ctx_t* cx, tpu_dtype_t compute, const int64_t* dims, int rank) {
  tpu_graph_t* g = cx->g;
  tpu_dtype_t w = words_for(compute);
  tpu_val_t u = unit_open_closed(cx, rng_words(cx, w, dims, rank), compute);
  tpu_val_t e = tpu_ir_unary(g, TPU_IR_NEG, tpu_ir_unary(g, TPU_IR_LOG, u));
  tpu_val_t one = tpu_ir_compare(g, TPU_CMP_GE, u, tpu_lower_const_like(cx, u, 1));
  return tpu_ir_select(g, one, tpu_lower_const_like(cx, e, ldexp(1, -word_bits(w) - 1)), e);
}

// exponential_(self, float lambd=1, *, Generator? generator)
tpu_status_t tpu_lower_exponential(tpu_lower_ctx_t* cx) {
  const tpu_view_t* self = self_view(cx);
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
  tpu_val_t e = exp1(cx, compute, self->sizes, self->rank);
  tpu_val_t l = splat(cx, tpu_lower_number(cx, lambd, compute), e);
  tpu_lower_out(cx, 0, tpu_ir_convert(cx->g, tpu_ir_binary(cx->g, TPU_IR_DIV, e, l), self->dtype));
  return TPU_OK;
}

// cauchy_(self, float median=0, float sigma=1, *, Generator? generator)
tpu_status_t tpu_lower_cauchy(tpu_lower_ctx_t* cx) {
  tpu_graph_t* g = cx->g;
  const tpu_view_t* self = self_view(cx);
  if (!tpu_dtype_is_float(self->dtype))
    return tpu_status_make(TPU_CODE_INVALID_ARGUMENT,
                           "Cauchy distribution is a continuous probability "
                           "distribution. dtype must be a floating point but you "
                           "specified %s", c_type_name(self->dtype));
  double median = tpu_arg_float(cx, 1, 0), sigma = tpu_arg_float(cx, 2, 1);
  if (!(sigma > 0.0))
    return tpu_status_make(TPU_CODE_INVALID_ARGUMENT,
                           "cauchy_ expects sigma > 0.0, but found sigma=%g", sigma);
  tpu_dtype_t compute = tpu_opmath(self->dtype);
  tpu_val_t u = unit_closed_open(cx, rng_words(cx, words_for(compute), self->sizes, self->rank),
                                 compute, float_digits(compute));
  tpu_val_t t = tpu_ir_unary(g, TPU_IR_TAN, bin(cx, TPU_IR_MUL, bin(cx, TPU_IR_SUB, u, 0.5), M_PI));
  tpu_lower_out(cx, 0, affine(cx, t, splat(cx, tpu_lower_number(cx, sigma, compute), t),
                              splat(cx, tpu_lower_number(cx, median, compute), t), self->dtype));
  return TPU_OK;
}

// geometric_(self, float p, *, Generator? generator): trials up to the first
// success, ceil(log(u) / log1p(-p)) >= 1.
tpu_status_t tpu_lower_geometric(tpu_lower_ctx_t* cx) {
  tpu_graph_t* g = cx->g;
  const tpu_view_t* self = self_view(cx);
  tpu_dtype_t t = self->dtype;
  if (t == TPU_BOOL || tpu_dtype_is_complex(t) || t == TPU_U16 || t == TPU_U32 || t == TPU_U64)
    return tpu_not_implemented("geometric_cpu", t);
  double p = tpu_arg_float(cx, 1, 0);
  if (!(p > 0 && p < 1))
    return tpu_status_make(TPU_CODE_INVALID_ARGUMENT,
                           "geometric_ expects p to be in (0, 1), but got p=%g", p);
  tpu_dtype_t compute = t == TPU_F64 ? TPU_F64 : TPU_F32;
  tpu_val_t e = exp1(cx, compute, self->sizes, self->rank);  // -log(u)
  tpu_val_t k = tpu_ir_binary(g, TPU_IR_DIV, e,
                              splat(cx, tpu_lower_number(cx, -log1p(-p), compute), e));
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
  tpu_val_t w = tpu_ir_convert(g, rng_words(cx, TPU_U32, dims, rank), TPU_U64);
  tpu_val_t bound = tpu_ir_convert(g, tpu_ir_unary(g, TPU_IR_CEIL, bin(cx, TPU_IR_MUL, p, 4294967296.0)),
                                   TPU_U64);
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
  const tpu_view_t* self = self_view(cx);
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
  const tpu_view_t* self = self_view(cx);
  tpu_dtype_t t = self->dtype;
  if (tpu_dtype_is_complex(t) || t == TPU_U16 || t == TPU_U32 || t == TPU_U64)
    return tpu_not_implemented("bernoulli_tensor_cpu_self_", t);
  return bernoulli_tensor(cx, 1, self->sizes, self->rank, t);
}

// bernoulli(Tensor self, *, Generator? generator): self holds the
// probabilities; the result has its shape and dtype.
tpu_status_t tpu_lower_bernoulli(tpu_lower_ctx_t* cx) {
  const tpu_view_t* self = self_view(cx);
  return bernoulli_tensor(cx, 0, self->sizes, self->rank, self->dtype);
}

//===--- dropout ---===//

// native_dropout(Tensor input, float p, bool? train) -> (output, mask)
tpu_status_t tpu_lower_native_dropout(tpu_lower_ctx_t* cx) {
  tpu_graph_t* g = cx->g;
  const tpu_view_t* x = self_view(cx);
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
  y = tpu_ir_binary(g, TPU_IR_MUL, y, splat(cx, tpu_lower_number(cx, scale, compute), y));
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
  tpu_dtype_t out = tpu_dtype_is_integral(t, true) ? tpu_default_float() : t;
  tpu_dtype_t compute = tpu_opmath(out);
  tpu_val_t v[2];
  TPU_RETURN_IF_ERROR(tpu_lower_broadcast_inputs(cx, gm, 2, t, v));
  tpu_val_t y = tpu_ir_convert(g, tpu_ir_binary(g, t == TPU_BOOL ? TPU_IR_AND : TPU_IR_MUL, v[0], v[1]),
                               compute);
  y = tpu_ir_binary(g, TPU_IR_MUL, y, splat(cx, tpu_lower_input(cx, 2, compute), y));
  tpu_lower_out(cx, 0, tpu_ir_convert(g, y, out));
  return TPU_OK;
}

//===--- random_ ---===//

// A float's value rounded to dtype `t` (round to nearest even), on the host.
static double round_to(double v, tpu_dtype_t t) {
  if (t == TPU_F64 || !isfinite(v) || v == 0) return v;
  int digits = float_digits(t);
  int e;
  double m = frexp((double)(float)v, &e);
  double r = ldexp(nearbyint(ldexp(m, digits)), e - digits);
  if (t == TPU_F16 && fabs(r) > 65504) return copysign(INFINITY, r);
  return r;
}

static int64_t to_int64(double v) {  // static_cast<int64_t> without UB
  if (!(v == v)) return 0;
  if (v >= 9223372036854775807.0) return INT64_MAX;
  if (v <= -9223372036854775808.0) return INT64_MIN;
  return (int64_t)v;
}

// PyTorch's update_from / update_to: bounds moved onto the dtype's grid.
static int64_t update_from(int64_t from, tpu_dtype_t t) {
  int64_t plus1 = to_int64(round_to((double)(from + 1), t));
  if (plus1 < from) {
    int64_t f = llabs(from + 1);
    int n = 0;
    while (f >>= 1) ++n;
    from = plus1 + ((int64_t)1 << (n - float_digits(t) + 1));
  }
  return from;
}

static int64_t update_to(int64_t to, tpu_dtype_t t) {
  int64_t minus1 = to_int64(round_to((double)(to - 1), t));
  if (minus1 >= to) {
    int64_t f = llabs(to - 1);
    int n = 0;
    while (f >>= 1) ++n;
    to = minus1 - ((int64_t)1 << (n - float_digits(t) + 1));
  }
  return to;
}

// The integer range of dtype t (as int64; uint64's max wraps to -1, as in
// PyTorch's static_cast).
static void int_limits(tpu_dtype_t t, int64_t* lo, int64_t* hi) {
  switch (t) {
    case TPU_BOOL: *lo = 0; *hi = 1; break;
    case TPU_U8: *lo = 0; *hi = 255; break;
    case TPU_I8: *lo = -128; *hi = 127; break;
    case TPU_I16: *lo = -32768; *hi = 32767; break;
    case TPU_U16: *lo = 0; *hi = 65535; break;
    case TPU_I32: *lo = INT32_MIN; *hi = INT32_MAX; break;
    case TPU_U32: *lo = 0; *hi = UINT32_MAX; break;
    case TPU_U64: *lo = 0; *hi = -1; break;
    default: *lo = INT64_MIN; *hi = INT64_MAX; break;
  }
}

static tpu_status_t check_from_to_in_range(int64_t from, int64_t to_inc, tpu_dtype_t t) {
  double fmin, fmax;
  int64_t imin, imax;
  bool is_float = tpu_dtype_is_float(t);
  if (is_float) {
    fmax = dtype_max(t);
    fmin = -fmax;
  } else if (t == TPU_U64) {
    imin = 0;
    imax = INT64_MAX;
  } else {
    int_limits(t, &imin, &imax);
  }
  const char* names[2] = {"from", "to - 1"};
  int64_t vals[2] = {from, to_inc};
  for (int k = 0; k < 2; ++k) {
    bool ok = is_float ? (double)vals[k] >= fmin && (double)vals[k] <= fmax
                       : vals[k] >= imin && vals[k] <= imax;
    if (!ok)
      return tpu_status_make(TPU_CODE_INVALID_ARGUMENT, "%s is out of bounds for %s",
                             names[k], c_type_name(t));
  }
  return TPU_OK;
}

// Fills self with from + (word mod range), the words 64 bits wide unless 32
// bits are exact (a power of two) or biased by at most 2^-16 (range 0 means
// 2^64: the words themselves).
static void random_fill(tpu_lower_ctx_t* cx, uint64_t range, int64_t from) {
  tpu_graph_t* g = cx->g;
  const tpu_view_t* self = self_view(cx);
  bool pow2 = range && !(range & (range - 1));
  bool narrow = range && (range <= (1u << 16) || (pow2 && range <= ((uint64_t)1 << 32)));
  tpu_val_t w = rng_words(cx, narrow ? TPU_U32 : TPU_U64, self->sizes, self->rank);
  w = tpu_ir_convert(g, w, TPU_U64);
  if (range) {
    tpu_scalar_t r;
    memset(&r, 0, sizeof r);
    r.dtype = TPU_I64;
    r.tier = TPU_TIER_WRAPPED;
    r.i = (int64_t)range;  // the bits of the uint64 range
    w = tpu_ir_binary(g, TPU_IR_REM, w, splat(cx, tpu_lower_scalar(cx, &r, TPU_U64), w));
  }
  tpu_type_t it = tpu_type_make(TPU_I64, self->sizes, self->rank);
  tpu_val_t v = tpu_ir_bitcast(g, w, &it);  // wraps, as the uint64 -> int64 cast
  tpu_scalar_t f;
  memset(&f, 0, sizeof f);
  f.dtype = TPU_I64;
  f.tier = TPU_TIER_WRAPPED;
  f.i = from;
  v = tpu_ir_binary(g, TPU_IR_ADD, v, splat(cx, tpu_lower_scalar(cx, &f, TPU_I64), v));
  tpu_lower_out(cx, 0, tpu_ir_convert(g, v, self->dtype));
}

static bool random_dtype_ok(tpu_dtype_t t) {
  return t == TPU_BOOL || t == TPU_U8 || t == TPU_I8 || t == TPU_I16 || t == TPU_I32 ||
         t == TPU_I64 || t == TPU_F16 || t == TPU_BF16 || t == TPU_F32 || t == TPU_F64;
}

// random_.from(self, int from, int? to, *, Generator? generator): [from, to),
// or up to the dtype's largest exact integer when to is None.
static tpu_status_t random_from_to(tpu_lower_ctx_t* cx, int64_t from, bool has_to, int64_t to) {
  const tpu_view_t* self = self_view(cx);
  tpu_dtype_t t = self->dtype;
  bool is_float = tpu_dtype_is_float(t);
  if (!is_float && !tpu_dtype_is_integral(t, true))
    return tpu_status_make(TPU_CODE_INVALID_ARGUMENT,
                           "random_from_to_impl handles only integral, floating-point "
                           "and boolean types");
  uint64_t range;
  if (has_to) {
    if (from >= to)
      return tpu_status_make(TPU_CODE_INVALID_ARGUMENT,
                             "random_ expects 'from' to be less than 'to', but got "
                             "from=%lld >= to=%lld", (long long)from, (long long)to);
    if (is_float) {
      from = update_from(from, t);
      to = update_to(to, t);
      if (from >= to)
        return tpu_status_make(TPU_CODE_INVALID_ARGUMENT,
                               "random_ expects 'from' casted to dtype to be less than "
                               "'to' casted to dtype, but got from=%lld >= to=%lld",
                               (long long)from, (long long)to);
    }
    TPU_RETURN_IF_ERROR(check_from_to_in_range(from, to - 1, t));
    range = (uint64_t)to - (uint64_t)from;
  } else if (from != INT64_MIN) {
    int64_t to_inc, lo;
    if (is_float) {
      to_inc = t == TPU_F64 ? (int64_t)1 << 53 : (int64_t)1 << float_digits(t);
      from = update_from(from, t);
      if (from >= to_inc)
        return tpu_status_make(TPU_CODE_INVALID_ARGUMENT,
                               "random_ expects 'from' casted to dtype to be less than "
                               "or equal to 'to_inc' casted to dtype, but got from=%lld "
                               "> to_inc=%lld", (long long)from, (long long)to_inc);
    } else {
      int_limits(t, &lo, &to_inc);
    }
    TPU_RETURN_IF_ERROR(check_from_to_in_range(from, to_inc, t));
    range = (uint64_t)to_inc - (uint64_t)from + 1;
  } else {
    if (t != TPU_I64 && t != TPU_F64 && t != TPU_F32 && t != TPU_BF16)
      return tpu_status_make(TPU_CODE_INVALID_ARGUMENT,
                             "random_full_64_bits_range_kernel_cpu handles only int64, "
                             "double, float and bfloat16");
    range = 0;  // 2^64
  }
  random_fill(cx, range, from);
  return TPU_OK;
}

tpu_status_t tpu_lower_random_from(tpu_lower_ctx_t* cx) {
  bool has_to = tpu_arg(cx, 2)->kind == TPU_ARG_INT;
  return random_from_to(cx, tpu_arg_int(cx, 1, 0), has_to, tpu_arg_int(cx, 2, 0));
}

// random_.to(self, int to, *, Generator? generator): [0, to).
tpu_status_t tpu_lower_random_to(tpu_lower_ctx_t* cx) {
  return random_from_to(cx, 0, true, tpu_arg_int(cx, 1, 0));
}

// random_(self, *, Generator? generator): [0, 2^digits] for floats, [0, max]
// for integers.
tpu_status_t tpu_lower_random(tpu_lower_ctx_t* cx) {
  tpu_dtype_t t = self_view(cx)->dtype;
  if (!random_dtype_ok(t)) return tpu_not_implemented("random_kernel_cpu", t);
  uint64_t range;
  if (tpu_dtype_is_float(t)) {
    range = ((uint64_t)1 << float_digits(t)) + 1;
  } else {
    int64_t lo, hi;
    int_limits(t, &lo, &hi);
    range = (uint64_t)hi + 1;
  }
  random_fill(cx, range, 0);
  return TPU_OK;
}

//===--- randperm, multinomial ---===//

// randperm.generator_out(SymInt n, *, Generator? generator, Tensor(a!) out):
// the order that sorting random keys puts 0..n-1 in.
tpu_status_t tpu_lower_randperm(tpu_lower_ctx_t* cx) {
  tpu_graph_t* g = cx->g;
  int64_t n = tpu_arg_int(cx, 0, 0);
  tpu_dtype_t t = tpu_lower_out_dtype(cx, 0, TPU_I64);
  if (n < 0)
    return tpu_status_make(TPU_CODE_INVALID_ARGUMENT, "n must be non-negative, got%lld",
                           (long long)n);
  if (t == TPU_BOOL || tpu_dtype_is_complex(t)) return tpu_not_implemented("randperm", t);
  if (tpu_dtype_is_float(t)) {
    int64_t most = ((int64_t)1 << float_digits(t)) + 1;
    if (n > most)
      return tpu_status_make(TPU_CODE_INVALID_ARGUMENT, "n cannot be greater than %lld for %s type.",
                             (long long)most, tpu_dtype_torch_name(t));
  }
  // 64-bit keys once 32-bit ones would often tie (ties keep index order).
  tpu_dtype_t kt = n > 4096 ? TPU_U64 : TPU_U32;
  tpu_val_t keys = rng_words(cx, kt, &n, 1);
  tpu_val_t idx = tpu_ir_iota(g, TPU_I64, &n, 1, 0);
  tpu_val_t xs[2] = {keys, idx};
  tpu_val_t sorted = n > 0 ? tpu_ir_result(g, tpu_ir_sort(g, xs, 2, 0, TPU_SORT_ASCENDING, false), 1)
                           : idx;
  tpu_lower_out(cx, 0, tpu_ir_convert(g, sorted, t));
  return TPU_OK;
}

// For each t[r, s], the number of entries of the nondecreasing row cdf[r]
// at or below it: a binary search of ceil(log2(k + 1)) gathers, so memory
// stays O(rows * samples) however many categories there are.
static tpu_val_t count_at_or_below(tpu_lower_ctx_t* cx, tpu_val_t cdf, tpu_val_t t) {
  tpu_graph_t* g = cx->g;
  if (!tpu_graph_ok(g)) return TPU_VAL_NONE;
  int64_t rows = tpu_ir_dims(g, cdf)[0], k = tpu_ir_dims(g, cdf)[1];
  int64_t ns = tpu_ir_dims(g, t)[1], sd[2] = {rows, ns}, flat = rows * k, m = rows * ns;
  tpu_val_t table = tpu_ir_reshape(g, cdf, &flat, 1);
  tpu_val_t base = bin(cx, TPU_IR_MUL, tpu_ir_iota(g, TPU_I64, sd, 2, 0), (double)k);
  tpu_val_t lo = tpu_ir_const(g, TPU_I64, 0, sd, 2), hi = tpu_ir_const(g, TPU_I64, (double)k, sd, 2);
  tpu_gather_dims_t dn;
  memset(&dn, 0, sizeof dn);
  dn.n_collapsed = 1;
  dn.collapsed_slice_dims[0] = 0;
  dn.n_start_map = 1;
  dn.start_index_map[0] = 0;
  dn.index_vector_dim = 1;
  int64_t one = 1, col[2] = {m, 1};
  for (int64_t span = k; span > 0; span >>= 1) {  // ceil(log2(k + 1)) steps
    tpu_val_t open = tpu_ir_compare(g, TPU_CMP_LT, lo, hi);
    tpu_val_t mid = bin(cx, TPU_IR_SHR_A, tpu_ir_binary(g, TPU_IR_ADD, lo, hi), 1);
    tpu_val_t at = tpu_ir_binary(g, TPU_IR_MIN, mid, tpu_lower_const_like(cx, mid, (double)(k - 1)));
    tpu_val_t idx = tpu_ir_reshape(g, tpu_ir_binary(g, TPU_IR_ADD, base, at), col, 2);
    tpu_val_t v = tpu_ir_reshape(g, tpu_ir_gather(g, table, idx, &dn, &one), sd, 2);
    tpu_val_t right = tpu_ir_binary(g, TPU_IR_AND, open, tpu_ir_compare(g, TPU_CMP_LE, v, t));
    tpu_val_t left = tpu_ir_binary(g, TPU_IR_AND, open, tpu_ir_unary(g, TPU_IR_NOT, right));
    lo = tpu_ir_select(g, right, bin(cx, TPU_IR_ADD, mid, 1), lo);
    hi = tpu_ir_select(g, left, mid, hi);
  }
  return lo;
}

// multinomial(Tensor self, SymInt num_samples, bool replacement=False, *,
// Generator? generator). Without replacement: the top num_samples of
// p / Exp(1) (PyTorch's own method); with: inverse CDF lookups.
tpu_status_t tpu_lower_multinomial(tpu_lower_ctx_t* cx) {
  tpu_graph_t* g = cx->g;
  const tpu_view_t* self = self_view(cx);
  int64_t ns = tpu_arg_int(cx, 1, 0);
  bool repl = tpu_arg_bool(cx, 2, false);
  int rank = self->rank;
  if (rank != 1 && rank != 2)
    return tpu_status_make(TPU_CODE_INVALID_ARGUMENT, "prob_dist must be 1 or 2 dim");
  if (!tpu_dtype_is_float(self->dtype))
    return tpu_status_make(TPU_CODE_INVALID_ARGUMENT,
                           "multinomial only supports floating-point dtypes for input, "
                           "got: %s", tpu_dtype_torch_name(self->dtype));
  if (ns <= 0)
    return tpu_status_make(TPU_CODE_INVALID_ARGUMENT, "cannot sample n_sample <= 0 samples");
  int64_t k = self->sizes[rank - 1];
  if (!repl && ns > k)
    return tpu_status_make(TPU_CODE_INVALID_ARGUMENT,
                           "cannot sample n_sample > prob_dist.size(-1) samples without "
                           "replacement");
  if (k > ((int64_t)1 << 24))
    return tpu_status_make(TPU_CODE_INVALID_ARGUMENT, "number of categories cannot exceed 2^24");
  int64_t rows = rank == 2 ? self->sizes[0] : 1;
  if (rows == 0 || k == 0) {
    if (k == 0)
      return tpu_status_make(TPU_CODE_INVALID_ARGUMENT,
                             "aminmax(): cannot compute aminmax over an empty dimension as "
                             "the operation has no identity.");
    int64_t od[2] = {0, ns};
    tpu_lower_out(cx, 0, tpu_ir_const(g, TPU_I64, 0, od, 2));
    return TPU_OK;
  }
  tpu_dtype_t compute = self->dtype == TPU_F64 ? TPU_F64 : TPU_F32;
  int64_t pd[2] = {rows, k};
  tpu_val_t p = tpu_ir_reshape(g, tpu_lower_input(cx, 0, compute), pd, 2);
  // Device-side checks, in PyTorch's words.
  int64_t both[2] = {0, 1}, last[1] = {1};
  tpu_val_t zero = tpu_lower_const_like(cx, p, 0);
  tpu_val_t good = tpu_ir_binary(g, TPU_IR_AND, tpu_ir_unary(g, TPU_IR_IS_FINITE, p),
                                 tpu_ir_compare(g, TPU_CMP_GE, p, zero));
  tpu_val_t f = tpu_ir_const(g, TPU_BOOL, 0, NULL, 0);
  tpu_lower_assert(cx, tpu_ir_reduce(g, tpu_ir_unary(g, TPU_IR_NOT, good), f, both, 2, TPU_BODY_OR),
                   TPU_CODE_INVALID_ARGUMENT,
                   "probability tensor contains either `inf`, `nan` or element < 0");
  tpu_val_t sums = tpu_ir_reduce(g, p, tpu_ir_const(g, compute, 0, NULL, 0), last, 1, TPU_BODY_ADD);
  tpu_lower_assert(cx, tpu_ir_reduce(g, tpu_ir_compare(g, TPU_CMP_LE, sums, tpu_lower_const_like(cx, sums, 0)),
                                     f, both, 1, TPU_BODY_OR),
                   TPU_CODE_INVALID_ARGUMENT,
                   "invalid multinomial distribution (sum of probabilities <= 0)");
  tpu_val_t out;
  if (!repl) {
    tpu_val_t q = exp1(cx, compute, pd, 2);
    tpu_val_t keys = tpu_ir_binary(g, TPU_IR_DIV, p, q);
    out = tpu_ir_result(g, tpu_ir_top_k(g, keys, ns), 1);
  } else {
    // cdf[r, j] = sum of p[r, 0..j]; a sample is the number of cdf entries
    // at or below u * total (a binary search), capped at the last category
    // with p > 0 (so rounding never picks a category of probability 0).
    tpu_window_t w;
    memset(&w, 0, sizeof w);
    w.dims[0] = 1;
    w.dims[1] = k;
    for (int i = 0; i < 2; ++i) {
      w.strides[i] = 1;
      w.base_dilations[i] = 1;
      w.window_dilations[i] = 1;
    }
    w.pad_lo[1] = k - 1;
    tpu_val_t cdf = tpu_ir_reduce_window(g, p, tpu_ir_const(g, compute, 0, NULL, 0), &w, TPU_BODY_ADD);
    int64_t sd[2] = {rows, ns};
    tpu_val_t u = unit_closed_open(cx, rng_words(cx, words_for(compute), sd, 2), compute,
                                   float_digits(compute));
    int64_t start[2] = {0, k - 1}, limit[2] = {rows, k}, one[2] = {1, 1};
    tpu_val_t total = tpu_ir_slice(g, cdf, start, limit, one);  // [rows, 1]
    int64_t bd[2] = {0, 1};
    u = tpu_ir_binary(g, TPU_IR_MUL, u, tpu_ir_broadcast(g, tpu_ir_reshape(g, total, &rows, 1), sd, 2, bd));
    tpu_val_t cnt = count_at_or_below(cx, cdf, u);
    tpu_val_t iota = tpu_ir_iota(g, TPU_I64, pd, 2, 1);
    tpu_val_t lastnz = tpu_ir_select(g, tpu_ir_compare(g, TPU_CMP_GT, p, zero), iota,
                                     tpu_lower_const_like(cx, iota, 0));
    lastnz = tpu_ir_reduce(g, lastnz, tpu_ir_const(g, TPU_I64, 0, NULL, 0), last, 1, TPU_BODY_MAX);
    out = tpu_ir_binary(g, TPU_IR_MIN, cnt, tpu_ir_broadcast(g, lastnz, sd, 2, bd));
  }
  out = tpu_ir_convert(g, out, TPU_I64);
  if (rank == 1) out = tpu_ir_reshape(g, out, &ns, 1);
  tpu_lower_out(cx, 0, out);
  return TPU_OK;
}
