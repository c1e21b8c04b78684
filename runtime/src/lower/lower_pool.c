// Pooling as windows over the input: max (with indices), average and
// adaptive average pooling, and their backward.
//
// Max pooling gathers each output's window into a trailing dim (from a
// table of positions per spatial dim) together with the flat index of each
// position, and reduces (value, index) pairs: the maximum wins, then the
// lowest index (CPU's scan order), NaN over everything; padding has the
// lowest value and the largest index, so it never wins a window that holds
// an element. The backward scatter-adds the output gradient at the saved
// indices (flat per plane, as CPU's). Average pooling is a window sum
// (reduce_window) divided per output by its window size; its backward
// spreads the divided gradient back with the transposed window (interior
// padding by the stride). Adaptive average pooling contracts each spatial
// dim with a 0/1 matrix of its windows.
#include <stdio.h>
#include <string.h>

#include "lower/pool.h"

static const char* const count_names[4] = {"", "one", "two", "three"};

typedef struct pool {
  int n;     // spatial dims
  int lead;  // dims before them ([C] or [N, C])
  int64_t in[3], out[3], k[3], s[3], p[3], d[3];
} pool_t;

tpu_val_t tpu_pool_lowest(tpu_graph_t* g, tpu_dtype_t t) {
  switch (t) {
    case TPU_F16: return tpu_ir_const_bits(g, t, 0xFC00, NULL, 0);
    case TPU_BF16: return tpu_ir_const_bits(g, t, 0xFF80, NULL, 0);
    case TPU_F32: return tpu_ir_const_bits(g, t, 0xFF800000u, NULL, 0);
    case TPU_F64: return tpu_ir_const_bits(g, t, 0xFFF0000000000000ull, NULL, 0);
    case TPU_I8: return tpu_ir_const_i(g, t, INT8_MIN, NULL, 0);
    case TPU_I16: return tpu_ir_const_i(g, t, INT16_MIN, NULL, 0);
    case TPU_I32: return tpu_ir_const_i(g, t, INT32_MIN, NULL, 0);
    case TPU_I64: return tpu_ir_const_i(g, t, INT64_MIN, NULL, 0);
    default: return tpu_ir_const_i(g, t, 0, NULL, 0);  // unsigned
  }
}

// CPU's pooling_output_shape: floor or ceil, and the last window must start
// inside the input or its left padding.
static int64_t pool_out_size(int64_t in, int64_t k, int64_t pad, int64_t s, int64_t dil,
                             bool ceil_mode) {
  int64_t num = in + 2 * pad - dil * (k - 1) - 1 + (ceil_mode ? s - 1 : 0);
  int64_t q = num / s - ((num % s != 0) && ((num < 0) != (s < 0)));  // rounds down
  int64_t out = q + 1;
  if (ceil_mode && (out - 1) * s >= in + pad) --out;
  return out;
}

// Reads kernel_size, stride, padding, dilation (arg -1: none) and checks them
// and the input as CPU's max_pool / avg_pool do; fills the pool.
static tpu_status_t read_pool(tpu_lower_ctx_t* cx, const char* name, int x, int n, int ka,
                              int sa, int pa, int da, bool ceil_mode, pool_t* pl) {
  memset(pl, 0, sizeof *pl);
  pl->n = n;
  const char* cnt = count_names[n];
  const int64_t* v;
  int c = tpu_arg_ints(cx, ka, &v);
  if (c != 1 && c != n)
    return tpu_invalid("%s: kernel_size must either be a single int, or a tuple of %s ints", name, cnt);
  for (int i = 0; i < n; ++i) pl->k[i] = v[c == 1 ? 0 : i];
  c = tpu_arg_ints(cx, sa, &v);
  if (c != 0 && c != 1 && c != n)
    return tpu_invalid("%s: stride must either be omitted, a single int, or a tuple of %s ints",
                       name, cnt);
  for (int i = 0; i < n; ++i) pl->s[i] = c == 0 ? pl->k[i] : v[c == 1 ? 0 : i];
  c = tpu_arg_ints(cx, pa, &v);
  if (c != 1 && c != n)
    return tpu_invalid("%s: padding must either be a single int, or a tuple of %s ints", name, cnt);
  for (int i = 0; i < n; ++i) pl->p[i] = v[c == 1 ? 0 : i];
  for (int i = 0; i < n; ++i) pl->d[i] = 1;
  if (da >= 0) {
    c = tpu_arg_ints(cx, da, &v);
    if (c != 1 && c != n)
      return tpu_invalid("%s: dilation must be either a single int, or a tuple of %s ints", name,
                         cnt);
    for (int i = 0; i < n; ++i) pl->d[i] = v[c == 1 ? 0 : i];
  }
  int rank = tpu_arg_rank(cx, x);
  const int64_t* xs = tpu_arg_sizes(cx, x);
  if (rank != n + 1 && rank != n + 2)
    return tpu_invalid("non-empty %dD or %dD (batch mode) tensor expected for input", n + 1, n + 2);
  pl->lead = rank - n;
  for (int i = 0; i < n; ++i) pl->in[i] = xs[pl->lead + i];
  for (int i = 0; i < n; ++i) {
    if (pl->s[i] == 0) return tpu_invalid("stride should not be zero");
    if (pl->p[i] < 0) return tpu_invalid("pad must be non-negative, but got pad: %lld",
                                         (long long)pl->p[i]);
    int64_t eff = (pl->k[i] - 1) * pl->d[i] + 1;
    if (pl->p[i] > eff / 2)
      return tpu_invalid("pad should be at most half of effective kernel size, but got pad=%lld, "
                         "kernel_size=%lld and dilation=%lld", (long long)pl->p[i],
                         (long long)pl->k[i], (long long)pl->d[i]);
    pl->out[i] = pool_out_size(pl->in[i], pl->k[i], pl->p[i], pl->s[i], pl->d[i], ceil_mode);
  }
  // CPU's pool2d/pool3d_shape_check, in its words.
  static const char* const axes[3][3] = {{"W"}, {"H", "W"}, {"T", "H", "W"}};
  const int64_t* checks[3] = {pl->k, pl->s, pl->d};
  static const char* const what[3] = {"kernel size", "stride", "dilation"};
  static const char* const prefix[3] = {"k", "d", "dilation"};
  for (int c = 0; c < 3; ++c) {
    bool bad = false;
    for (int i = 0; i < n; ++i) bad |= checks[c][i] <= 0;
    if (!bad) continue;
    char msg[160];
    size_t m = 0;
    for (int i = 0; i < n; ++i)
      m += (size_t)snprintf(msg + m, sizeof msg - m, "%s%s%s: %lld", i ? " " : "", prefix[c],
                            axes[n - 1][i], (long long)checks[c][i]);
    return tpu_invalid("%s should be greater than zero, but got %s", what[c], msg);
  }
  for (int i = 0; i < rank; ++i)
    if (xs[i] == 0 && !(i == 0 && rank == n + 2)) {
      char a[128];
      tpu_dims_str(xs, rank, ", ", a, sizeof a);
      return tpu_invalid("Expected %dD or %dD (batch mode) tensor with optional 0 dim batch size "
                         "for input, but got:[%s]", n + 1, n + 2, a);
    }
  for (int i = 0; i < n; ++i)
    if (pl->out[i] < 1) {
      int64_t a[4], b[4];
      a[0] = b[0] = xs[pl->lead - 1];
      for (int j = 0; j < n; ++j) {
        a[1 + j] = pl->in[j];
        b[1 + j] = pl->out[j];
      }
      char sa_[128], sb[128];
      tpu_dims_str(a, n + 1, "x", sa_, sizeof sa_);
      tpu_dims_str(b, n + 1, "x", sb, sizeof sb);
      return tpu_invalid("Given input size: (%s). Calculated output size: (%s). Output size is too "
                         "small", sa_, sb);
    }
  return TPU_OK;
}

// The result shape [lead..., out...].
static int out_shape(const tpu_lower_ctx_t* cx, int x, const pool_t* pl, int64_t* dims) {
  const int64_t* xs = tpu_arg_sizes(cx, x);
  for (int i = 0; i < pl->lead; ++i) dims[i] = xs[i];
  for (int i = 0; i < pl->n; ++i) dims[pl->lead + i] = pl->out[i];
  return pl->lead + pl->n;
}

// Window positions of one spatial dim: for output o and window element j,
// pos[o * k + j] indexes the (padded) input.
typedef struct wtable {
  int64_t out, k, pad_lo, pad_hi;
  int64_t* pos;
} wtable_t;

static bool fixed_table(tpu_graph_t* g, const pool_t* pl, int i, wtable_t* t) {
  t->out = pl->out[i];
  t->k = pl->k[i];
  t->pad_lo = pl->p[i];
  t->pos = tpu_graph_alloc(g, sizeof(int64_t) * (size_t)(t->out * t->k));
  if (!t->pos) return false;
  int64_t last = 0;
  for (int64_t o = 0; o < t->out; ++o)
    for (int64_t j = 0; j < t->k; ++j) {
      t->pos[o * t->k + j] = o * pl->s[i] + j * pl->d[i];
      if (t->pos[o * t->k + j] > last) last = t->pos[o * t->k + j];
    }
  t->pad_hi = last + 1 - pl->in[i] - pl->p[i];
  if (t->pad_hi < 0) t->pad_hi = 0;
  return true;
}

// Adaptive windows: [floor(o * in / out), ceil((o + 1) * in / out)); shorter
// windows repeat their last element, which changes neither the maximum nor
// its index.
static int64_t adaptive_start(int64_t o, int64_t in, int64_t out) { return o * in / out; }
static int64_t adaptive_end(int64_t o, int64_t in, int64_t out) {
  return ((o + 1) * in + out - 1) / out;
}

static bool adaptive_table(tpu_graph_t* g, int64_t in, int64_t out, wtable_t* t) {
  t->out = out;
  t->k = 1;
  t->pad_lo = t->pad_hi = 0;
  for (int64_t o = 0; o < out; ++o) {
    int64_t len = adaptive_end(o, in, out) - adaptive_start(o, in, out);
    if (len > t->k) t->k = len;
  }
  t->pos = tpu_graph_alloc(g, sizeof(int64_t) * (size_t)(out * t->k));
  if (!t->pos) return false;
  for (int64_t o = 0; o < out; ++o) {
    int64_t a = adaptive_start(o, in, out), b = adaptive_end(o, in, out);
    for (int64_t j = 0; j < t->k; ++j) t->pos[o * t->k + j] = a + j < b ? a + j : b - 1;
  }
  return true;
}

// v [lead..., in...] -> [lead..., out..., K]: each output's window, padded
// with `pad`.
static tpu_val_t gather_windows(tpu_graph_t* g, tpu_val_t v, int lead, int n,
                                const wtable_t* tb, tpu_val_t pad) {
  int64_t lo[TPU_MAX_RANK] = {0}, hi[TPU_MAX_RANK] = {0};
  for (int i = 0; i < n; ++i) {
    lo[lead + i] = tb[i].pad_lo;
    hi[lead + i] = tb[i].pad_hi;
  }
  v = tpu_ir_pad(g, v, pad, lo, hi, NULL);
  for (int i = 0; i < n && tpu_graph_ok(g); ++i) {
    tpu_val_t idx = tpu_ir_const_i64_array(g, tb[i].pos, tb[i].out * tb[i].k);
    const tpu_type_t* t = tpu_ir_type(g, v);  // after adding idx: nodes may move
    v = tpu_gather_along(g, v, t->dims, t->rank, lead + i, idx);
  }
  if (!tpu_graph_ok(g)) return TPU_VAL_NONE;
  // [lead..., o1*k1, ...] -> [lead..., o1, k1, ...] -> [lead..., o..., k...]
  const int64_t* vd = tpu_ir_dims(g, v);
  int64_t split[TPU_MAX_RANK], perm[TPU_MAX_RANK], flat[TPU_MAX_RANK];
  int r = 0;
  for (int i = 0; i < lead; ++i) split[r++] = vd[i];
  for (int i = 0; i < n; ++i) {
    split[r++] = tb[i].out;
    split[r++] = tb[i].k;
  }
  v = tpu_ir_reshape(g, v, split, r);
  int q = 0;
  for (int i = 0; i < lead; ++i) perm[q++] = i;
  for (int i = 0; i < n; ++i) perm[q++] = lead + 2 * i;
  for (int i = 0; i < n; ++i) perm[q++] = lead + 2 * i + 1;
  v = tpu_ir_transpose(g, v, perm);
  int64_t kk = 1;
  q = 0;
  for (int i = 0; i < lead; ++i) flat[q++] = vd[i];
  for (int i = 0; i < n; ++i) {
    flat[q++] = tb[i].out;
    kk *= tb[i].k;
  }
  flat[q++] = kk;
  return tpu_ir_reshape(g, v, flat, q);
}

// Max over windows with CPU's indices: results (values, int64 indices).
static void max_windows(tpu_lower_ctx_t* cx, int x, int lead, int n, const int64_t* in,
                        const wtable_t* tb) {
  tpu_graph_t* g = cx->g;
  tpu_dtype_t t = tpu_arg_value_dtype(cx, x);
  tpu_val_t vals = gather_windows(g, tpu_lower_tensor(cx, x), lead, n, tb, tpu_pool_lowest(g, t));
  // The flat index of every input position, padding the largest.
  int64_t stride = 1;
  tpu_val_t flat = tpu_ir_const_i(g, TPU_I64, 0, in, n);
  for (int i = n - 1; i >= 0; --i) {
    tpu_val_t io = tpu_ir_iota(g, TPU_I64, in, n, i);
    flat = tpu_ir_binary(g, TPU_IR_ADD, flat,
                         tpu_ir_binary(g, TPU_IR_MUL, io,
                                       tpu_ir_const_i(g, TPU_I64, stride, in, n)));
    stride *= in[i];
  }
  tpu_val_t big = tpu_ir_const_i(g, TPU_I64, INT64_MAX, NULL, 0);
  tpu_val_t idx = gather_windows(g, flat, 0, n, tb, big);
  if (!tpu_graph_ok(g)) return;
  const tpu_type_t* vt = tpu_ir_type(g, vals);
  int64_t bd[TPU_MAX_RANK];
  for (int i = 0; i <= n; ++i) bd[i] = lead + i;
  idx = tpu_ir_broadcast(g, idx, vt->dims, vt->rank, bd);
  tpu_val_t v, i;
  tpu_pool_argmax(g, vals, idx, &v, &i);
  tpu_lower_out(cx, 0, v);
  tpu_lower_out(cx, 1, i);
}

void tpu_pool_argmax(tpu_graph_t* g, tpu_val_t vals, tpu_val_t idx, tpu_val_t* out_vals,
                     tpu_val_t* out_idx) {
  *out_vals = *out_idx = TPU_VAL_NONE;
  if (!tpu_graph_ok(g)) return;
  const tpu_type_t* vt = tpu_ir_type(g, vals);
  tpu_dtype_t t = vt->dtype;
  tpu_val_t big = tpu_ir_const_i(g, TPU_I64, INT64_MAX, NULL, 0);
  // The reduction takes the lowest index: NaNs carry their index mirrored,
  // and the winner's is mirrored back.
  bool is_float = tpu_dtype_is_float(t);
  tpu_val_t mirror = tpu_ir_const_i(g, TPU_I64, INT64_MAX - 1, vt->dims, vt->rank);
  if (is_float)
    idx = tpu_ir_select(g, tpu_ir_compare(g, TPU_CMP_NE, vals, vals),
                        tpu_ir_binary(g, TPU_IR_SUB, mirror, idx), idx);
  tpu_val_t r = tpu_ir_reduce_arg(g, vals, idx, tpu_pool_lowest(g, t), big, vt->rank - 1,
                                  TPU_BODY_ARGMAX);
  tpu_val_t v = tpu_ir_result(g, r, 0), i = tpu_ir_result(g, r, 1);
  if (is_float && tpu_graph_ok(g)) {
    const tpu_type_t* rt = tpu_ir_type(g, v);
    tpu_val_t m = tpu_ir_const_i(g, TPU_I64, INT64_MAX - 1, rt->dims, rt->rank);
    i = tpu_ir_select(g, tpu_ir_compare(g, TPU_CMP_NE, v, v), tpu_ir_binary(g, TPU_IR_SUB, m, i), i);
  }
  *out_vals = v;
  *out_idx = i;
}

static tpu_status_t check_pool_dtype(tpu_dtype_t t, const char* name, bool integers) {
  if (t == TPU_BOOL || tpu_dtype_is_complex(t) || (!integers && !tpu_dtype_is_float(t)))
    return tpu_not_implemented(name, t);
  return TPU_OK;
}

// max_pool{2,3}d_with_indices(self, kernel_size, stride, padding, dilation,
//                             ceil_mode) -> (values, indices)
static tpu_status_t max_pool(tpu_lower_ctx_t* cx, int n, const char* name) {
  pool_t pl;
  TPU_RETURN_IF_ERROR(read_pool(cx, name, 0, n, 1, 2, 3, 4, tpu_arg_bool(cx, 5, false), &pl));
  TPU_RETURN_IF_ERROR(check_pool_dtype(tpu_arg_value_dtype(cx, 0), name, true));
  wtable_t tb[3];
  for (int i = 0; i < n; ++i)
    if (!fixed_table(cx->g, &pl, i, &tb[i]))
      return tpu_status_make(TPU_CODE_RESOURCE_EXHAUSTED, "out of memory");
  max_windows(cx, 0, pl.lead, n, pl.in, tb);
  return TPU_OK;
}

tpu_status_t tpu_lower_max_pool2d(tpu_lower_ctx_t* cx) { return max_pool(cx, 2, "max_pool2d"); }
tpu_status_t tpu_lower_max_pool3d(tpu_lower_ctx_t* cx) { return max_pool(cx, 3, "max_pool3d"); }

tpu_status_t tpu_pool_scatter_grad(tpu_lower_ctx_t* cx, int dy_arg, int x_arg, int idx_arg, int n) {
  tpu_graph_t* g = cx->g;
  int rank = tpu_arg_rank(cx, x_arg), lead = rank - n;
  const int64_t *xs = tpu_arg_sizes(cx, x_arg), *ds = tpu_arg_sizes(cx, dy_arg);
  if (tpu_arg_rank(cx, dy_arg) != rank || tpu_arg_rank(cx, idx_arg) != rank)
    return tpu_invalid("max pooling backward: grad_output and indices must have the input's rank");
  for (int i = 0; i < rank; ++i)
    if (tpu_arg_sizes(cx, idx_arg)[i] != ds[i])
      return tpu_invalid("max pooling backward: indices and grad_output shapes differ");
  for (int i = 0; i < lead; ++i)
    if (ds[i] != xs[i])
      return tpu_invalid("max pooling backward: grad_output and input batch dims differ");
  tpu_dtype_t t = tpu_arg_value_dtype(cx, x_arg), acc = tpu_opmath(t);
  int64_t b = tpu_numel(xs, lead), plane = tpu_numel(xs + lead, n), m = tpu_numel(ds + lead, n);
  int64_t total = b * plane, upd = b * m, bm[2] = {b, m}, um[2] = {upd, 1};
  tpu_val_t dy = tpu_ir_reshape(g, tpu_lower_input(cx, dy_arg, acc), &upd, 1);
  tpu_val_t idx = tpu_ir_reshape(g, tpu_lower_input(cx, idx_arg, TPU_I64), bm, 2);
  tpu_val_t base = tpu_ir_binary(g, TPU_IR_MUL, tpu_ir_iota(g, TPU_I64, bm, 2, 0),
                                 tpu_ir_const_i(g, TPU_I64, plane, bm, 2));
  idx = tpu_ir_reshape(g, tpu_ir_binary(g, TPU_IR_ADD, idx, base), um, 2);
  tpu_val_t r = tpu_scatter_flat(g, tpu_ir_const(g, acc, 0, &total, 1), idx, dy, 1, TPU_BODY_ADD);
  tpu_lower_out(cx, 0, tpu_ir_convert(g, tpu_ir_reshape(g, r, xs, rank), t));
  return TPU_OK;
}

// max_pool{2,3}d_with_indices_backward(grad_output, self, kernel_size,
//     stride, padding, dilation, ceil_mode, indices)
tpu_status_t tpu_lower_max_pool2d_backward(tpu_lower_ctx_t* cx) {
  return tpu_pool_scatter_grad(cx, 0, 1, 7, 2);
}
tpu_status_t tpu_lower_max_pool3d_backward(tpu_lower_ctx_t* cx) {
  return tpu_pool_scatter_grad(cx, 0, 1, 7, 3);
}

// The divisor of each output of an average pool, [out...] in dtype `t`.
static tpu_val_t avg_divisor(tpu_lower_ctx_t* cx, const pool_t* pl, bool include_pad,
                             int divisor_arg, tpu_dtype_t t) {
  tpu_graph_t* g = cx->g;
  if (tpu_arg_present(cx, divisor_arg))
    return tpu_ir_const(g, t, (double)tpu_arg_int(cx, divisor_arg, 1), pl->out, pl->n);
  tpu_val_t div = TPU_VAL_NONE;
  for (int i = 0; i < pl->n; ++i) {
    int64_t* c = tpu_graph_alloc(g, sizeof(int64_t) * (size_t)pl->out[i]);
    if (!c) return TPU_VAL_NONE;
    for (int64_t o = 0; o < pl->out[i]; ++o) {
      int64_t a = o * pl->s[i] - pl->p[i], b = a + pl->k[i];
      if (b > pl->in[i] + pl->p[i]) b = pl->in[i] + pl->p[i];
      int64_t size = b - a;
      if (a < 0) a = 0;
      if (b > pl->in[i]) b = pl->in[i];
      c[o] = include_pad ? size : b - a;
    }
    int64_t bd = i;
    tpu_val_t ci = tpu_ir_convert(g, tpu_ir_const_i64_array(g, c, pl->out[i]), t);
    ci = tpu_ir_broadcast(g, ci, pl->out, pl->n, &bd);
    div = div == TPU_VAL_NONE ? ci : tpu_ir_binary(g, TPU_IR_MUL, div, ci);
  }
  return div;
}

// The checks of avg_pool's divisor_override.
static tpu_status_t check_divisor(tpu_lower_ctx_t* cx, int arg) {
  if (tpu_arg_present(cx, arg) && tpu_arg_int(cx, arg, 1) == 0)
    return tpu_invalid("divisor must be not zero");
  return TPU_OK;
}

static tpu_status_t read_avg_pool(tpu_lower_ctx_t* cx, int x, int n, const char* name,
                                  pool_t* pl) {
  // avg_pool{2,3}d(self, kernel_size, stride, padding, ceil_mode,
  //                count_include_pad, divisor_override), shifted by x.
  int rank = tpu_arg_rank(cx, x);
  if (n == 3 && rank != 4 && rank != 5)  // CPU checks the 3-d rank first
    return TPU_LOWER_ERROR(TPU_CODE_INVALID_ARGUMENT,
                           "non-empty 4D or 5D (batch mode) tensor expected for input");
  int64_t dim;  // and for 2-d reads input.size(-3) first
  TPU_RETURN_IF_ERROR(tpu_wrap_dim(-n - 1, rank, &dim));
  TPU_RETURN_IF_ERROR(read_pool(cx, name, x, n, x + 1, x + 2, x + 3, -1,
                                tpu_arg_bool(cx, x + 4, false), pl));
  TPU_RETURN_IF_ERROR(check_divisor(cx, x + 6));
  return check_pool_dtype(tpu_arg_value_dtype(cx, x), name, true);
}

// avg_pool{2,3}d(self, kernel_size, stride, padding, ceil_mode,
//                count_include_pad, divisor_override)
static tpu_status_t avg_pool(tpu_lower_ctx_t* cx, int n, const char* name) {
  pool_t pl;
  TPU_RETURN_IF_ERROR(read_avg_pool(cx, 0, n, name, &pl));
  tpu_graph_t* g = cx->g;
  tpu_dtype_t t = tpu_arg_value_dtype(cx, 0), acc = tpu_opmath(t);
  int lead = pl.lead;
  tpu_val_t x = tpu_lower_input(cx, 0, acc);
  int64_t lo[TPU_MAX_RANK] = {0}, hi[TPU_MAX_RANK] = {0};
  tpu_window_t w;
  memset(&w, 0, sizeof w);
  for (int i = 0; i < lead + n; ++i) w.dims[i] = 1;
  for (int i = 0; i < n; ++i) {
    lo[lead + i] = pl.p[i];
    hi[lead + i] = (pl.out[i] - 1) * pl.s[i] + pl.k[i] - pl.in[i] - pl.p[i];
    w.dims[lead + i] = pl.k[i];
    w.strides[lead + i] = pl.s[i];
  }
  tpu_val_t zero = tpu_ir_const(g, acc, 0, NULL, 0);
  tpu_val_t sum = tpu_ir_reduce_window(g, tpu_ir_pad(g, x, zero, lo, hi, NULL), zero, &w,
                                       TPU_BODY_ADD);
  int64_t dims[TPU_MAX_RANK], bd[3];
  int rank = out_shape(cx, 0, &pl, dims);
  for (int i = 0; i < n; ++i) bd[i] = lead + i;
  tpu_val_t div = avg_divisor(cx, &pl, tpu_arg_bool(cx, 5, true), 6, acc);
  div = tpu_ir_broadcast(g, div, dims, rank, bd);
  tpu_lower_out(cx, 0, tpu_ir_convert(g, tpu_ir_binary(g, TPU_IR_DIV, sum, div), t));
  return TPU_OK;
}

tpu_status_t tpu_lower_avg_pool2d(tpu_lower_ctx_t* cx) { return avg_pool(cx, 2, "avg_pool2d"); }
tpu_status_t tpu_lower_avg_pool3d(tpu_lower_ctx_t* cx) { return avg_pool(cx, 3, "avg_pool3d"); }

// avg_pool{2,3}d_backward(grad_output, self, kernel_size, stride, padding,
//                         ceil_mode, count_include_pad, divisor_override)
static tpu_status_t avg_pool_backward(tpu_lower_ctx_t* cx, int n, const char* name) {
  pool_t pl;
  TPU_RETURN_IF_ERROR(read_avg_pool(cx, 1, n, name, &pl));
  tpu_graph_t* g = cx->g;
  tpu_dtype_t t = tpu_arg_value_dtype(cx, 1), acc = tpu_opmath(t);
  int lead = pl.lead;
  int64_t dims[TPU_MAX_RANK], bd[3];
  int rank = out_shape(cx, 1, &pl, dims);
  const int64_t* ds = tpu_arg_sizes(cx, 0);
  bool same = tpu_arg_rank(cx, 0) == rank;
  for (int i = 0; same && i < rank; ++i) same = ds[i] == dims[i];
  if (!same) return tpu_invalid("%s_backward: grad_output has the wrong shape", name);
  for (int i = 0; i < n; ++i) bd[i] = lead + i;
  tpu_val_t div = avg_divisor(cx, &pl, tpu_arg_bool(cx, 6, true), 7, acc);
  tpu_val_t gy = tpu_ir_binary(g, TPU_IR_DIV, tpu_lower_input(cx, 0, acc),
                               tpu_ir_broadcast(g, div, dims, rank, bd));
  // Each output's gradient goes to the k positions of its window: dilate by
  // the stride, then sum windows of k over the padded input's coordinates.
  int64_t lo[TPU_MAX_RANK] = {0}, hi[TPU_MAX_RANK] = {0}, in[TPU_MAX_RANK] = {0};
  tpu_window_t w;
  memset(&w, 0, sizeof w);
  for (int i = 0; i < rank; ++i) w.dims[i] = 1;
  for (int i = 0; i < n; ++i) {
    lo[lead + i] = hi[lead + i] = pl.k[i] - 1;
    in[lead + i] = pl.s[i] - 1;
    w.dims[lead + i] = pl.k[i];
  }
  tpu_val_t zero = tpu_ir_const(g, acc, 0, NULL, 0);
  tpu_val_t r = tpu_ir_reduce_window(g, tpu_ir_pad(g, gy, zero, lo, hi, in), zero, &w,
                                     TPU_BODY_ADD);
  // r covers padded coordinates [0, (out - 1) * s + k): keep [p, p + in).
  for (int i = 0; i < n; ++i) {
    lo[lead + i] = -pl.p[i];
    hi[lead + i] = pl.in[i] + pl.p[i] - ((pl.out[i] - 1) * pl.s[i] + pl.k[i]);
    in[lead + i] = 0;
  }
  r = tpu_ir_pad(g, r, zero, lo, hi, NULL);
  tpu_lower_out(cx, 0, tpu_ir_convert(g, r, t));
  return TPU_OK;
}

tpu_status_t tpu_lower_avg_pool2d_backward(tpu_lower_ctx_t* cx) {
  return avg_pool_backward(cx, 2, "avg_pool2d");
}
tpu_status_t tpu_lower_avg_pool3d_backward(tpu_lower_ctx_t* cx) {
  return avg_pool_backward(cx, 3, "avg_pool3d");
}

// Checks the input and output_size of an adaptive pool; fills out[].
static tpu_status_t read_adaptive(tpu_lower_ctx_t* cx, int x, int size_arg, int n,
                                  const char* name, bool is_max, int64_t* out) {
  int rank = tpu_arg_rank(cx, x);
  const int64_t* xs = tpu_arg_sizes(cx, x);
  char a[128];  // the input's sizes, for messages (formatted on failure only)
  if (rank != n + 1 && rank != n + 2) {
    tpu_dims_str(xs, rank, ", ", a, sizeof a);
    return tpu_invalid("%s(): Expected %dD or %dD tensor, but got%s [%s]", name, n + 1, n + 2,
                       is_max ? ":" : "", a);
  }
  for (int i = 1; i < rank; ++i)
    if (xs[i] == 0) {
      tpu_dims_str(xs, rank, ", ", a, sizeof a);
      return tpu_invalid("%s(): Expected input to have non-zero size for non-batch dimensions, "
                         "but input has sizes [%s] with dimension %d being empty", name, a, i);
    }
  if (size_arg < 0) return TPU_OK;
  const int64_t* v;
  int c = tpu_arg_ints(cx, size_arg, &v);
  if (c != n) {
    if (is_max)
      return tpu_invalid("%s(): internal error: output_size.size() must be %d", name, n);
    return tpu_invalid("%s: output_size must be %d", name, n);
  }
  for (int i = 0; i < n; ++i) {
    if (v[i] < 0)
      return tpu_invalid("%s: elements of output_size must be greater than or equal to 0", name);
    out[i] = v[i];
  }
  return TPU_OK;
}

// Contracts the spatial dims of v (starting at `lead`) one by one with the
// 0/1 window matrices [out, in]; backward contracts the out dims instead.
static tpu_val_t adaptive_contract(tpu_graph_t* g, tpu_val_t v, int lead, int n,
                                   const int64_t* in, const int64_t* out, bool backward,
                                   tpu_dtype_t acc) {
  tpu_dtype_t t = tpu_ir_dtype(g, v);
  for (int i = 0; i < n && tpu_graph_ok(g); ++i) {
    // m[o, j] = start(o) <= j < end(o), built in the program (a constant
    // would be out * in elements of program text).
    int64_t md[2] = {out[i], in[i]};
    tpu_val_t o = tpu_ir_iota(g, TPU_I64, md, 2, 0), j = tpu_ir_iota(g, TPU_I64, md, 2, 1);
    tpu_val_t vin = tpu_ir_const_i(g, TPU_I64, in[i], md, 2);
    tpu_val_t vout = tpu_ir_const_i(g, TPU_I64, out[i] > 0 ? out[i] : 1, md, 2);
    tpu_val_t start = tpu_ir_binary(g, TPU_IR_DIV, tpu_ir_binary(g, TPU_IR_MUL, o, vin), vout);
    tpu_val_t o1 = tpu_ir_binary(g, TPU_IR_ADD, o, tpu_ir_const_i(g, TPU_I64, 1, md, 2));
    tpu_val_t end = tpu_ir_binary(
        g, TPU_IR_DIV,
        tpu_ir_binary(g, TPU_IR_ADD, tpu_ir_binary(g, TPU_IR_MUL, o1, vin),
                      tpu_ir_binary(g, TPU_IR_SUB, vout, tpu_ir_const_i(g, TPU_I64, 1, md, 2))),
        vout);
    tpu_val_t mat = tpu_ir_binary(g, TPU_IR_AND, tpu_ir_compare(g, TPU_CMP_GE, j, start),
                                  tpu_ir_compare(g, TPU_CMP_LT, j, end));
    tpu_dot_dims_t dn;
    memset(&dn, 0, sizeof dn);
    dn.n_contract = 1;
    dn.lhs_contract[0] = lead;  // earlier spatial dims moved to the end
    dn.rhs_contract[0] = backward ? 0 : 1;
    v = tpu_ir_dot(g, v, tpu_ir_convert(g, mat, t), &dn, acc);
    t = acc;
  }
  return v;
}

// The window sizes of an adaptive average pool, [out...] in `t`.
static tpu_val_t adaptive_counts(tpu_graph_t* g, int n, const int64_t* in, const int64_t* out,
                                 tpu_dtype_t t) {
  tpu_val_t div = TPU_VAL_NONE;
  for (int i = 0; i < n; ++i) {
    int64_t* c = tpu_graph_alloc(g, sizeof(int64_t) * (size_t)(out[i] ? out[i] : 1));
    if (!c) return TPU_VAL_NONE;
    for (int64_t o = 0; o < out[i]; ++o)
      c[o] = adaptive_end(o, in[i], out[i]) - adaptive_start(o, in[i], out[i]);
    int64_t bd = i;
    tpu_val_t ci = out[i] ? tpu_ir_convert(g, tpu_ir_const_i64_array(g, c, out[i]), t)
                          : tpu_ir_const(g, t, 1, &out[i], 1);
    ci = tpu_ir_broadcast(g, ci, out, n, &bd);
    div = div == TPU_VAL_NONE ? ci : tpu_ir_binary(g, TPU_IR_MUL, div, ci);
  }
  return div;
}

// v (its trailing n dims are the windows) divided by the number of input
// elements each window averages.
static tpu_val_t divide_by_counts(tpu_graph_t* g, tpu_val_t v, int lead, int n,
                                  const int64_t* in, const int64_t* out, tpu_dtype_t acc) {
  tpu_type_t vt = *tpu_ir_type(g, v);  // a copy: building nodes may move the table
  int64_t bd[3] = {lead, lead + 1, lead + 2};
  tpu_val_t counts = tpu_ir_broadcast(g, adaptive_counts(g, n, in, out, acc), vt.dims, vt.rank, bd);
  return tpu_ir_binary(g, TPU_IR_DIV, v, counts);
}

// _adaptive_avg_pool{2,3}d(self, output_size)
static tpu_status_t adaptive_avg_pool(tpu_lower_ctx_t* cx, int n, const char* name) {
  int64_t out[3];
  TPU_RETURN_IF_ERROR(read_adaptive(cx, 0, 1, n, name, false, out));
  tpu_dtype_t t = tpu_arg_value_dtype(cx, 0), acc = tpu_opmath(t);
  TPU_RETURN_IF_ERROR(check_pool_dtype(t, name, false));
  tpu_graph_t* g = cx->g;
  int rank = tpu_arg_rank(cx, 0), lead = rank - n;
  const int64_t* in = tpu_arg_sizes(cx, 0) + lead;
  tpu_val_t s = adaptive_contract(g, tpu_lower_tensor(cx, 0), lead, n, in, out, false, acc);
  if (!tpu_graph_ok(g)) return TPU_OK;
  tpu_lower_out(cx, 0, tpu_ir_convert(g, divide_by_counts(g, s, lead, n, in, out, acc), t));
  return TPU_OK;
}

tpu_status_t tpu_lower_adaptive_avg_pool2d(tpu_lower_ctx_t* cx) {
  return adaptive_avg_pool(cx, 2, "adaptive_avg_pool2d");
}
tpu_status_t tpu_lower_adaptive_avg_pool3d(tpu_lower_ctx_t* cx) {
  return adaptive_avg_pool(cx, 3, "adaptive_avg_pool3d");
}

// _adaptive_avg_pool{2,3}d_backward(grad_output, self)
static tpu_status_t adaptive_avg_pool_backward(tpu_lower_ctx_t* cx, int n, const char* name) {
  TPU_RETURN_IF_ERROR(read_adaptive(cx, 1, -1, n, name, false, NULL));
  tpu_dtype_t t = tpu_arg_value_dtype(cx, 1), acc = tpu_opmath(t);
  TPU_RETURN_IF_ERROR(check_pool_dtype(t, name, false));
  tpu_graph_t* g = cx->g;
  int rank = tpu_arg_rank(cx, 1), lead = rank - n;
  if (tpu_arg_rank(cx, 0) != rank) return tpu_invalid("%s_backward: grad_output has the wrong rank", name);
  const int64_t *in = tpu_arg_sizes(cx, 1) + lead, *out = tpu_arg_sizes(cx, 0) + lead;
  tpu_val_t gy = tpu_lower_input(cx, 0, acc);
  if (!tpu_graph_ok(g)) return TPU_OK;
  gy = divide_by_counts(g, gy, lead, n, in, out, acc);
  tpu_val_t r = adaptive_contract(g, gy, lead, n, in, out, true, acc);
  tpu_lower_out(cx, 0, tpu_ir_convert(g, r, t));
  return TPU_OK;
}

tpu_status_t tpu_lower_adaptive_avg_pool2d_backward(tpu_lower_ctx_t* cx) {
  return adaptive_avg_pool_backward(cx, 2, "adaptive_avg_pool2d");
}
tpu_status_t tpu_lower_adaptive_avg_pool3d_backward(tpu_lower_ctx_t* cx) {
  return adaptive_avg_pool_backward(cx, 3, "adaptive_avg_pool3d");
}

// adaptive_max_pool{2,3}d(self, output_size) -> (values, indices)
static tpu_status_t adaptive_max_pool(tpu_lower_ctx_t* cx, int n, const char* name) {
  int64_t out[3];
  TPU_RETURN_IF_ERROR(read_adaptive(cx, 0, 1, n, name, true, out));
  tpu_dtype_t t = tpu_arg_value_dtype(cx, 0);
  TPU_RETURN_IF_ERROR(check_pool_dtype(t, name, false));
  tpu_graph_t* g = cx->g;
  int rank = tpu_arg_rank(cx, 0), lead = rank - n;
  const int64_t* in = tpu_arg_sizes(cx, 0) + lead;
  if (tpu_numel(out, n) == 0) {  // no windows
    int64_t dims[TPU_MAX_RANK];
    memcpy(dims, tpu_arg_sizes(cx, 0), sizeof(int64_t) * (size_t)lead);
    memcpy(dims + lead, out, sizeof(int64_t) * (size_t)n);
    tpu_lower_out(cx, 0, tpu_ir_const(g, t, 0, dims, rank));
    tpu_lower_out(cx, 1, tpu_ir_const(g, TPU_I64, 0, dims, rank));
    return TPU_OK;
  }
  wtable_t tb[3];
  for (int i = 0; i < n; ++i)
    if (!adaptive_table(g, in[i], out[i], &tb[i]))
      return tpu_status_make(TPU_CODE_RESOURCE_EXHAUSTED, "out of memory");
  max_windows(cx, 0, lead, n, in, tb);
  return TPU_OK;
}

tpu_status_t tpu_lower_adaptive_max_pool2d(tpu_lower_ctx_t* cx) {
  return adaptive_max_pool(cx, 2, "adaptive_max_pool2d");
}
tpu_status_t tpu_lower_adaptive_max_pool3d(tpu_lower_ctx_t* cx) {
  return adaptive_max_pool(cx, 3, "adaptive_max_pool3d");
}

// adaptive_max_pool{2,3}d_backward(grad_output, self, indices)
tpu_status_t tpu_lower_adaptive_max_pool2d_backward(tpu_lower_ctx_t* cx) {
  return tpu_pool_scatter_grad(cx, 0, 1, 2, 2);
}
tpu_status_t tpu_lower_adaptive_max_pool3d_backward(tpu_lower_ctx_t* cx) {
  return tpu_pool_scatter_grad(cx, 0, 1, 2, 3);
}
