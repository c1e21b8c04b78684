// Random integers, permutations, categorical and Poisson draws: random_,
// randperm, multinomial, poisson. The random words they start from: lower_rng.c.
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "lower/rng.h"

//===--- random_ ---===//

// A float's value rounded to dtype `t` (round to nearest even), on the host.
static double round_to(double v, tpu_dtype_t t) {
  if (t == TPU_F64 || !isfinite(v) || v == 0) return v;
  int digits = tpu_rng_float_digits(t);
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
    from = plus1 + ((int64_t)1 << (n - tpu_rng_float_digits(t) + 1));
  }
  return from;
}

static int64_t update_to(int64_t to, tpu_dtype_t t) {
  int64_t minus1 = to_int64(round_to((double)(to - 1), t));
  if (minus1 >= to) {
    int64_t f = llabs(to - 1);
    int n = 0;
    while (f >>= 1) ++n;
    to = minus1 - ((int64_t)1 << (n - tpu_rng_float_digits(t) + 1));
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
    fmax = tpu_rng_dtype_max(t);
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
                             names[k], tpu_rng_c_type_name(t));
  }
  return TPU_OK;
}

// Fills self with from + (word mod range), the words 64 bits wide unless 32
// bits are exact (a power of two) or biased by at most 2^-16 (range 0 means
// 2^64: the words themselves).
static void random_fill(tpu_lower_ctx_t* cx, uint64_t range, int64_t from) {
  tpu_graph_t* g = cx->g;
  const tpu_view_t* self = tpu_rng_self(cx);
  bool pow2 = range && !(range & (range - 1));
  bool narrow = range && (range <= (1u << 16) || (pow2 && range <= ((uint64_t)1 << 32)));
  tpu_val_t w = tpu_rng_words(cx, narrow ? TPU_U32 : TPU_U64, self->sizes, self->rank);
  w = tpu_ir_convert(g, w, TPU_U64);
  if (range) {
    tpu_scalar_t r;
    memset(&r, 0, sizeof r);
    r.dtype = TPU_I64;
    r.tier = TPU_TIER_WRAPPED;
    r.i = (int64_t)range;  // the bits of the uint64 range
    w = tpu_ir_binary(g, TPU_IR_REM, w,
                      tpu_lower_splat_like(cx, tpu_lower_scalar(cx, &r, TPU_U64), w));
  }
  tpu_type_t it = tpu_type_make(TPU_I64, self->sizes, self->rank);
  tpu_val_t v = tpu_ir_bitcast(g, w, &it);  // wraps, as the uint64 -> int64 cast
  tpu_scalar_t f;
  memset(&f, 0, sizeof f);
  f.dtype = TPU_I64;
  f.tier = TPU_TIER_WRAPPED;
  f.i = from;
  v = tpu_ir_binary(g, TPU_IR_ADD, v,
                    tpu_lower_splat_like(cx, tpu_lower_scalar(cx, &f, TPU_I64), v));
  tpu_lower_out(cx, 0, tpu_ir_convert(g, v, self->dtype));
}

static bool random_dtype_ok(tpu_dtype_t t) {
  return t == TPU_BOOL || t == TPU_U8 || t == TPU_I8 || t == TPU_I16 || t == TPU_I32 ||
         t == TPU_I64 || t == TPU_F16 || t == TPU_BF16 || t == TPU_F32 || t == TPU_F64;
}

// random_.from(self, int from, int? to, *, Generator? generator): [from, to),
// or up to the dtype's largest exact integer when to is None.
static tpu_status_t random_from_to(tpu_lower_ctx_t* cx, int64_t from, bool has_to, int64_t to) {
  const tpu_view_t* self = tpu_rng_self(cx);
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
      to_inc = t == TPU_F64 ? (int64_t)1 << 53 : (int64_t)1 << tpu_rng_float_digits(t);
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
  tpu_dtype_t t = tpu_rng_self(cx)->dtype;
  if (!random_dtype_ok(t)) return tpu_not_implemented("random_kernel_cpu", t);
  uint64_t range;
  if (tpu_dtype_is_float(t)) {
    range = ((uint64_t)1 << tpu_rng_float_digits(t)) + 1;
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
  if (!tpu_lower_count_fits(cx, n - 1, t)) return TPU_OK;  // the graph's error
  if (tpu_dtype_is_float(t)) {
    int64_t most = ((int64_t)1 << tpu_rng_float_digits(t)) + 1;
    if (n > most)
      return tpu_status_make(TPU_CODE_INVALID_ARGUMENT, "n cannot be greater than %lld for %s type.",
                             (long long)most, tpu_dtype_torch_name(t));
  }
  // 64-bit keys once 32-bit ones would often tie (ties keep index order).
  tpu_dtype_t kt = n > 4096 ? TPU_U64 : TPU_U32;
  tpu_val_t keys = tpu_rng_words(cx, kt, &n, 1);
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
  tpu_val_t base = tpu_rng_bin(cx, TPU_IR_MUL, tpu_ir_iota(g, TPU_I64, sd, 2, 0), (double)k);
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
    tpu_val_t mid = tpu_rng_bin(cx, TPU_IR_SHR_A, tpu_ir_binary(g, TPU_IR_ADD, lo, hi), 1);
    tpu_val_t at = tpu_ir_binary(g, TPU_IR_MIN, mid, tpu_lower_const_like(cx, mid, (double)(k - 1)));
    tpu_val_t idx = tpu_ir_reshape(g, tpu_ir_binary(g, TPU_IR_ADD, base, at), col, 2);
    tpu_val_t v = tpu_ir_reshape(g, tpu_ir_gather(g, table, idx, &dn, &one), sd, 2);
    tpu_val_t right = tpu_ir_binary(g, TPU_IR_AND, open, tpu_ir_compare(g, TPU_CMP_LE, v, t));
    tpu_val_t left = tpu_ir_binary(g, TPU_IR_AND, open, tpu_ir_unary(g, TPU_IR_NOT, right));
    lo = tpu_ir_select(g, right, tpu_rng_bin(cx, TPU_IR_ADD, mid, 1), lo);
    hi = tpu_ir_select(g, left, mid, hi);
  }
  return lo;
}

// multinomial(Tensor self, SymInt num_samples, bool replacement=False, *,
// Generator? generator). Without replacement: the top num_samples of
// p / Exp(1) (PyTorch's own method); with: inverse CDF lookups.
tpu_status_t tpu_lower_multinomial(tpu_lower_ctx_t* cx) {
  tpu_graph_t* g = cx->g;
  const tpu_view_t* self = tpu_rng_self(cx);
  int64_t ns = tpu_arg_int(cx, 1, 0);
  bool repl = tpu_arg_bool(cx, 2, false);
  int rank = self->rank;
  if (rank != 1 && rank != 2)
    return tpu_status_make(TPU_CODE_INVALID_ARGUMENT, "prob_dist must be 1 or 2 dim");
  if (!tpu_dtype_is_float(self->dtype))
    return tpu_status_make(TPU_CODE_INVALID_ARGUMENT,
                           "multinomial only supports floating-point dtypes for input, "
                           "got: %s", tpu_dtype_torch_name(self->dtype));
  tpu_dtype_t out_dtype = tpu_lower_out_dtype(cx, 0, TPU_I64);
  if (out_dtype != TPU_I64)
    return tpu_status_make(TPU_CODE_INVALID_ARGUMENT, "multinomial expects Long tensor out, got: %s",
                           tpu_dtype_torch_name(out_dtype));
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
    tpu_val_t q = tpu_rng_exp1(cx, compute, pd, 2);
    tpu_val_t keys = tpu_ir_binary(g, TPU_IR_DIV, p, q);
    out = tpu_ir_result(g, tpu_ir_top_k(g, keys, ns), 1);
  } else {
    // cdf[r, j] = sum of p[r, 0..j] / total; a sample is the number of cdf
    // entries at or below u (a binary search), capped at the last category
    // with p > 0 (so rounding never picks a category of probability 0).
    // The cdf is divided rather than u multiplied: XLA regroups u * total
    // as the draw's integer times 2^-24 * total, which for weights near
    // 1e-35 is subnormal, flushed to 0, and always picked category 0.
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
    tpu_val_t u = tpu_rng_unit_closed_open(cx, tpu_rng_words(cx, tpu_rng_words_for(compute), sd, 2),
                                           compute, tpu_rng_float_digits(compute));
    int64_t start[2] = {0, k - 1}, limit[2] = {rows, k}, one[2] = {1, 1};
    tpu_val_t total = tpu_ir_slice(g, cdf, start, limit, one);  // [rows, 1]
    int64_t bd[2] = {0, 1};
    cdf = tpu_ir_binary(g, TPU_IR_DIV, cdf, tpu_ir_broadcast(g, tpu_ir_reshape(g, total, &rows, 1), pd, 2, bd));
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

//===--- poisson ---===//

enum {
  POISSON_TERMS = 64,   // inversion: P(X >= 64) < 1e-25 for rates below 10
  POISSON_ROUNDS = 24,  // rejection: each proposal accepted with p > 0.89
};

// Rates below 10: inversion. X = #{k : P(X > k) > v} for one v in (0, 1],
// with P(X > k) summed from the small terms up (no rounding near 1).
static tpu_val_t poisson_inversion(tpu_lower_ctx_t* cx, tpu_val_t lam, tpu_val_t v,
                                   const int64_t* dims, int rank) {
  tpu_graph_t* g = cx->g;
  tpu_dtype_t t = tpu_ir_dtype(g, lam);
  // The terms over [terms, numel]: [terms, dims...] has no room for a rank-8
  // tensor's dims.
  int64_t n = tpu_numel(dims, rank);
  int64_t td[2] = {POISSON_TERMS, n}, bd[1] = {1};
  lam = tpu_ir_reshape(g, lam, &n, 1);
  v = tpu_ir_reshape(g, v, &n, 1);
  // term[i] = P(X = i + 1) = exp((i + 1) log lam - lam - lgamma(i + 2))
  tpu_val_t j = tpu_rng_bin(cx, TPU_IR_ADD, tpu_ir_iota(g, t, td, 2, 0), 1);
  tpu_val_t loglam = tpu_ir_broadcast(g, tpu_ir_unary(g, TPU_IR_LOG, lam), td, 2, bd);
  tpu_val_t lamb = tpu_ir_broadcast(g, lam, td, 2, bd);
  tpu_val_t e = tpu_ir_binary(g, TPU_IR_SUB, tpu_ir_binary(g, TPU_IR_MUL, j, loglam), lamb);
  e = tpu_ir_binary(g, TPU_IR_SUB, e,
                    tpu_ir_unary(g, TPU_IR_LGAMMA, tpu_rng_bin(cx, TPU_IR_ADD, j, 1)));
  tpu_val_t term = tpu_ir_unary(g, TPU_IR_EXP, e);
  int64_t axis = 0;
  tpu_val_t tail = tpu_ir_reverse(g, tpu_lower_scan(cx, tpu_ir_reverse(g, term, &axis, 1), 0,
                                                    TPU_IR_ADD, 0),
                                  &axis, 1);  // tail[k] = P(X > k)
  tpu_val_t above = tpu_ir_compare(g, TPU_CMP_GT, tail, tpu_ir_broadcast(g, v, td, 2, bd));
  tpu_val_t ones = tpu_ir_convert(g, above, t);
  tpu_val_t r = tpu_ir_reduce(g, ones, tpu_ir_const(g, t, 0, NULL, 0), &axis, 1, TPU_BODY_ADD);
  return tpu_ir_reshape(g, r, dims, rank);
}

// Rates of 10 and more: Hoermann's transformed rejection (PTRS), as
// PyTorch's kernels use it, with a fixed number of proposals; the first
// accepted one wins.
static tpu_val_t poisson_rejection(tpu_lower_ctx_t* cx, tpu_val_t lam, tpu_val_t words,
                                   const int64_t* dims, int rank) {
  tpu_graph_t* g = cx->g;
  tpu_dtype_t t = tpu_ir_dtype(g, lam);
  int digits = tpu_rng_float_digits(t);
  tpu_val_t slam = tpu_ir_unary(g, TPU_IR_SQRT, lam);
  tpu_val_t loglam = tpu_ir_unary(g, TPU_IR_LOG, lam);
  tpu_val_t b = tpu_rng_bin(cx, TPU_IR_ADD, tpu_rng_bin(cx, TPU_IR_MUL, slam, 2.53), 0.931);
  tpu_val_t a = tpu_rng_bin(cx, TPU_IR_ADD, tpu_rng_bin(cx, TPU_IR_MUL, b, 0.02483), -0.059);
  tpu_val_t one = tpu_lower_const_like(cx, lam, 1);
  tpu_val_t invalpha = tpu_rng_bin(
      cx, TPU_IR_ADD,
      tpu_rng_bin(cx, TPU_IR_MUL,
                  tpu_ir_binary(g, TPU_IR_DIV, one, tpu_rng_bin(cx, TPU_IR_SUB, b, 3.4)), 1.1328),
      1.1239);
  tpu_val_t vr = tpu_rng_bin(
      cx, TPU_IR_ADD,
      tpu_rng_bin(cx, TPU_IR_MUL,
                  tpu_ir_binary(g, TPU_IR_DIV, one, tpu_rng_bin(cx, TPU_IR_SUB, b, 2)), -3.6224),
      0.9277);
  tpu_val_t result = tpu_ir_unary(g, TPU_IR_FLOOR, lam);  // all rejected: p < 1e-23
  for (int r = POISSON_ROUNDS - 1; r >= 0; --r) {
    tpu_val_t u = tpu_rng_bin(cx, TPU_IR_SUB,
                              tpu_rng_unit_closed_open(
                                  cx, tpu_rng_plane(cx, words, 1 + 2 * r, dims, rank), t, digits),
                              0.5);
    tpu_val_t v = tpu_rng_unit_closed_open(cx, tpu_rng_plane(cx, words, 2 + 2 * r, dims, rank), t,
                                           digits);
    tpu_val_t us = tpu_ir_binary(g, TPU_IR_SUB, tpu_lower_const_like(cx, u, 0.5),
                                 tpu_ir_unary(g, TPU_IR_ABS, u));
    // k = floor((2a / us + b) u + lam + 0.43)
    tpu_val_t k = tpu_ir_binary(
        g, TPU_IR_MUL,
        tpu_ir_binary(g, TPU_IR_ADD,
                      tpu_ir_binary(g, TPU_IR_DIV, tpu_rng_bin(cx, TPU_IR_MUL, a, 2), us), b),
        u);
    k = tpu_ir_unary(g, TPU_IR_FLOOR,
                     tpu_rng_bin(cx, TPU_IR_ADD, tpu_ir_binary(g, TPU_IR_ADD, k, lam), 0.43));
    tpu_val_t quick = tpu_ir_binary(g, TPU_IR_AND, tpu_rng_cmp(cx, TPU_CMP_GE, us, 0.07),
                                    tpu_ir_compare(g, TPU_CMP_LE, v, vr));
    tpu_val_t reject = tpu_ir_binary(
        g, TPU_IR_OR, tpu_rng_cmp(cx, TPU_CMP_LT, k, 0),
        tpu_ir_binary(g, TPU_IR_AND, tpu_rng_cmp(cx, TPU_CMP_LT, us, 0.013),
                      tpu_ir_compare(g, TPU_CMP_GT, v, us)));
    // log v + log invalpha - log(a / us^2 + b) <= -lam + k log lam - lgamma(k + 1)
    tpu_val_t lhs = tpu_ir_binary(
        g, TPU_IR_SUB,
        tpu_ir_binary(g, TPU_IR_ADD, tpu_ir_unary(g, TPU_IR_LOG, v),
                      tpu_ir_unary(g, TPU_IR_LOG, invalpha)),
        tpu_ir_unary(g, TPU_IR_LOG,
                     tpu_ir_binary(g, TPU_IR_ADD,
                                   tpu_ir_binary(g, TPU_IR_DIV, a,
                                                 tpu_ir_binary(g, TPU_IR_MUL, us, us)),
                                   b)));
    tpu_val_t rhs = tpu_ir_binary(
        g, TPU_IR_SUB,
        tpu_ir_binary(g, TPU_IR_SUB, tpu_ir_binary(g, TPU_IR_MUL, k, loglam), lam),
        tpu_ir_unary(g, TPU_IR_LGAMMA, tpu_rng_bin(cx, TPU_IR_ADD, k, 1)));
    tpu_val_t slow = tpu_ir_binary(g, TPU_IR_AND, tpu_ir_unary(g, TPU_IR_NOT, reject),
                                   tpu_ir_compare(g, TPU_CMP_LE, lhs, rhs));
    result = tpu_ir_select(g, tpu_ir_binary(g, TPU_IR_OR, quick, slow), k, result);
  }
  return result;
}

// poisson(Tensor self, Generator? generator) -> Tensor
tpu_status_t tpu_lower_poisson(tpu_lower_ctx_t* cx) {
  tpu_graph_t* g = cx->g;
  tpu_dtype_t out = tpu_arg_value_dtype(cx, 0);
  if (!tpu_dtype_is_float(out)) return tpu_not_implemented("poisson", out);
  // In double whatever the dtype, as CPU samples: in float32 the rejection
  // test k log lam - lam - lgamma(k + 1) cancels for rates past 1e6 (the
  // variance came out 0.9 to 1.65 times the rate).
  tpu_dtype_t t = TPU_F64;
  const int64_t* dims = tpu_arg_sizes(cx, 0);
  int rank = tpu_arg_rank(cx, 0);
  tpu_val_t lam = tpu_ir_convert(g, tpu_lower_tensor(cx, 0), t);
  tpu_rng_assert_nonnegative(cx, lam, "invalid Poisson rate, expected rate to be non-negative");
  // Words: one for the inversion, two per rejection proposal.
  tpu_val_t words = tpu_rng_word_planes(cx, 1 + 2 * POISSON_ROUNDS, t, dims, rank);
  // The rejection branch computes on rates of at least 10 only.
  tpu_val_t big = tpu_rng_cmp(cx, TPU_CMP_GE, lam, 10);
  tpu_val_t big_lam = tpu_ir_select(g, big, lam, tpu_lower_const_like(cx, lam, 10));
  tpu_val_t small_lam = tpu_ir_select(g, big, tpu_lower_const_like(cx, lam, 0), lam);
  tpu_val_t v = tpu_rng_unit_open_closed(cx, tpu_rng_plane(cx, words, 0, dims, rank), t);
  tpu_val_t x = tpu_ir_select(g, big, poisson_rejection(cx, big_lam, words, dims, rank),
                              poisson_inversion(cx, small_lam, v, dims, rank));
  x = tpu_ir_select(g, tpu_rng_cmp(cx, TPU_CMP_EQ, lam, INFINITY), lam, x);
  tpu_lower_out(cx, 0, tpu_ir_convert(g, x, out));
  return TPU_OK;
}
