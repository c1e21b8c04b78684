// Resampling and padding: reflection and replication padding, nearest,
// (bi/tri)linear and bicubic upsampling and their backward ops (im2col /
// col2im: lower_fold.c).
//
// All of these are separable: along each padded or resampled dimension,
// output position o reads a few input positions ("taps") with weights, and
// the taps and weights depend only on the sizes and the op's arguments. They
// are computed here on the host with PyTorch's CPU index math, in the
// precision CPU uses (its float/double rounding decides which input a
// nearest output reads), so the program only gathers along one dimension at
// a time and sums the weighted taps. Backward ops apply the transpose: a
// scatter-add of the weighted output gradient at the same taps.
//
// Selection-only ops (padding, nearest) gather in the tensor's own dtype, so
// every dtype is exact; weighted ones compute in float (double for double)
// and round once, as CPU does, except uint8 images, which follow CPU's
// fixed-point path (see u8_taps).
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lower/lower.h"

#define MAX_TAPS 4

// The taps of one dimension: output position o reads input idx[k][o] with
// weight w[k][o] (no weights: plain selection).
typedef struct taps {
  int64_t in, out;
  int k;  // taps per output position
  int64_t* idx[MAX_TAPS];
  double* w[MAX_TAPS];  // NULL for selection
} taps_t;

//===--- helpers ---===//

// Taps with `k` index (and, when weighted, weight) arrays of `out` entries,
// in the graph's scratch memory (freed with the graph).
static bool taps_alloc(tpu_graph_t* g, taps_t* t, int64_t in, int64_t out, int k,
                       bool weighted) {
  memset(t, 0, sizeof *t);
  t->in = in;
  t->out = out;
  t->k = k;
  size_t n = (size_t)(out > 0 ? out : 1);
  for (int j = 0; j < k; ++j) {
    t->idx[j] = tpu_graph_alloc(g, n * sizeof(int64_t));
    if (!t->idx[j]) return false;
    if (weighted) {
      t->w[j] = tpu_graph_alloc(g, n * sizeof(double));
      if (!t->w[j]) return false;
    }
  }
  return true;
}

static tpu_status_t oom(void) {
  return TPU_LOWER_ERROR(TPU_CODE_RESOURCE_EXHAUSTED, "out of memory building index tables");
}

// Gathers slices of x (shape d, rank n) along `dim` at the constant indices
// idx (m entries): x's shape with dim of size m.
static tpu_val_t take(tpu_graph_t* g, tpu_val_t x, const int64_t* d, int n, int dim,
                      const int64_t* idx, int64_t m) {
  return tpu_gather_along(g, x, d, n, dim, tpu_ir_const_i64_array(g, idx, m));
}

// Adds slices of upd (x's shape with dim of size m) into x along `dim` at
// the constant indices idx (m entries).
static tpu_val_t put_add(tpu_graph_t* g, tpu_val_t x, int n, int dim, const int64_t* idx,
                         int64_t m, tpu_val_t upd) {
  return tpu_scatter_along(g, x, n, dim, tpu_ir_const_i64_array(g, idx, m), upd, TPU_BODY_ADD);
}

// Weights w (m entries) as a constant of dtype `t` (F32 or F64), broadcast
// along `dim` of shape d. The values travel as their bit patterns in an
// integer constant so they are exact and part of the program.
static tpu_val_t weights(tpu_graph_t* g, const double* w, int64_t m, tpu_dtype_t t,
                         const int64_t* d, int n, int dim) {
  int64_t* bits = tpu_graph_alloc(g, (size_t)m * sizeof(int64_t));
  if (!bits) return TPU_VAL_NONE;
  for (int64_t i = 0; i < m; ++i) {
    if (t == TPU_F64) {
      memcpy(&bits[i], &w[i], sizeof(double));
    } else {
      float f = (float)w[i];
      int32_t b;
      memcpy(&b, &f, sizeof b);
      bits[i] = b;
    }
  }
  tpu_val_t v = tpu_ir_const_i64_array(g, bits, m);
  if (t != TPU_F64) v = tpu_ir_convert(g, v, TPU_I32);
  tpu_type_t ty = tpu_type_make(t, &m, 1);
  v = tpu_ir_bitcast(g, v, &ty);
  int64_t bd = dim;
  return tpu_ir_broadcast(g, v, d, n, &bd);
}

// Applies the taps of dimension `dim` to x (shape d, rank n; updated to the
// result's shape). Weighted taps compute in `ct`, summing tap by tap in
// CPU's order (t0 * w0 + t1 * w1 + ...).
static tpu_val_t apply(tpu_graph_t* g, tpu_val_t x, int64_t* d, int n, int dim,
                       const taps_t* t, tpu_dtype_t ct) {
  int64_t od[TPU_MAX_RANK];
  memcpy(od, d, sizeof(int64_t) * (size_t)n);
  od[dim] = t->out;
  tpu_val_t r = TPU_VAL_NONE;
  for (int j = 0; j < t->k; ++j) {
    tpu_val_t v = take(g, x, d, n, dim, t->idx[j], t->out);
    if (t->w[j]) v = tpu_ir_binary(g, TPU_IR_MUL, v, weights(g, t->w[j], t->out, ct, od, n, dim));
    r = j ? tpu_ir_binary(g, TPU_IR_ADD, r, v) : v;
  }
  d[dim] = t->out;
  return r;
}

// The transpose of `apply`: gradient y (shape d, dim of size t->out) to the
// input's gradient (dim of size t->in), in `ct`.
static tpu_val_t apply_t(tpu_graph_t* g, tpu_val_t y, int64_t* d, int n, int dim,
                         const taps_t* t, tpu_dtype_t ct) {
  int64_t id[TPU_MAX_RANK];
  memcpy(id, d, sizeof(int64_t) * (size_t)n);
  id[dim] = t->in;
  tpu_val_t r = tpu_ir_const(g, ct, 0, id, n);
  for (int j = 0; j < t->k; ++j) {
    tpu_val_t v = y;
    if (t->w[j]) v = tpu_ir_binary(g, TPU_IR_MUL, v, weights(g, t->w[j], t->out, ct, d, n, dim));
    r = put_add(g, r, n, dim, t->idx[j], t->out, v);
  }
  d[dim] = t->in;
  return r;
}

// Runs taps[0..ns) over the last ns dims of tensor argument `arg` (shape d,
// rank n): forward (selection in the tensor's dtype, weights in opmath) or
// transposed (in opmath); the result is converted back to the tensor's dtype.
// Dimensions are applied last first, which is CPU's nesting order for
// weighted interpolation.
static tpu_val_t run_taps(tpu_lower_ctx_t* cx, int arg, const taps_t* taps, int ns,
                          bool transpose) {
  tpu_graph_t* g = cx->g;
  int n = tpu_arg_rank(cx, arg);
  int64_t d[TPU_MAX_RANK];
  memcpy(d, tpu_arg_sizes(cx, arg), sizeof(int64_t) * (size_t)n);
  tpu_dtype_t t = tpu_arg_value_dtype(cx, arg);
  bool weighted = taps[0].w[0] != NULL;
  // Weighted sums and gradients run in float (double for double).
  tpu_dtype_t ct = !(weighted || transpose) ? t : t == TPU_F64 ? TPU_F64 : TPU_F32;
  int64_t od[TPU_MAX_RANK];
  memcpy(od, d, sizeof od);
  for (int s = 0; s < ns; ++s) od[n - ns + s] = transpose ? taps[s].in : taps[s].out;
  if (tpu_numel(od, n) == 0) return tpu_ir_const(g, t, 0, od, n);
  if (tpu_numel(d, n) == 0) return tpu_ir_const(g, t, 0, od, n);  // transposed: all zero
  tpu_val_t x = tpu_ir_convert(g, tpu_lower_tensor(cx, arg), ct);
  for (int s = ns - 1; s >= 0; --s)
    x = transpose ? apply_t(g, x, d, n, n - ns + s, &taps[s], ct)
                  : apply(g, x, d, n, n - ns + s, &taps[s], ct);
  return tpu_ir_convert(g, x, t);
}

//===--- reflection and replication padding ---===//

// Padding pairs (last dim first, as PyTorch lists them) to taps of the last
// ns dims of `in` (rank n). Output position o reads source o - lo, reflected
// about the edges (reflect) or clamped to them (replicate).
static tpu_status_t pad_taps(tpu_lower_ctx_t* cx, bool reflect, int ns, const int64_t* in,
                             int n, const int64_t* pad, taps_t* taps) {
  char a[128];
  for (int s = 0; s < ns; ++s) {
    int dim = n - ns + s;
    int64_t lo = pad[2 * (ns - 1 - s)], hi = pad[2 * (ns - 1 - s) + 1], size = in[dim];
    if (reflect && (lo >= size || hi >= size))
      return TPU_LOWER_ERROR(TPU_CODE_INVALID_ARGUMENT,
                             "Argument #%d: Padding size should be less than the corresponding "
                             "input dimension, but got: padding (%lld, %lld) at dimension %d of "
                             "input %s", 2 + 2 * ns, (long long)lo, (long long)hi, dim,
                             tpu_shape_str(in, n, a, sizeof a));
    int64_t out = size + lo + hi;
    if (out < 1) {
      static const char* names[3][3] = {{"W"}, {"H", "W"}, {"D", "H", "W"}};
      const char* nm = names[ns - 1][s];
      return TPU_LOWER_ERROR(TPU_CODE_INVALID_ARGUMENT,
                             "input (%s: %lld) is too small. Calculated output %s: %lld", nm,
                             (long long)size, nm, (long long)out);
    }
    if (!taps_alloc(cx->g, &taps[s], size, out, 1, false)) return oom();
    for (int64_t o = 0; o < out; ++o) {
      int64_t j = o - lo;
      if (reflect) {
        if (j < 0) j = -j;
        if (j >= size) j = 2 * (size - 1) - j;
      } else {
        j = j < 0 ? 0 : j >= size ? size - 1 : j;
      }
      taps[s].idx[0][o] = j;
    }
  }
  return TPU_OK;
}

// Shared checks: rank ns+1 or ns+2 (batch), non-zero sizes past the batch
// dim, a padding list of 2*ns entries, no bool.
static tpu_status_t pad_check(tpu_lower_ctx_t* cx, const char* op, int arg, int ns,
                              int padarg, const int64_t** pad) {
  int np = tpu_arg_ints(cx, padarg, pad);
  if (np != 2 * ns)
    return TPU_LOWER_ERROR(TPU_CODE_INVALID_ARGUMENT,
                           "padding size is expected to be %d, but got: %d", 2 * ns, np);
  int n = tpu_arg_rank(cx, arg);
  const int64_t* d = tpu_arg_sizes(cx, arg);
  bool ok = n == ns + 1 || n == ns + 2;
  for (int i = n == ns + 2 ? 1 : 0; ok && i < n; ++i) ok = d[i] != 0;
  if (!ok) {
    char a[128];
    return TPU_LOWER_ERROR(TPU_CODE_INVALID_ARGUMENT,
                           "Expected %dD or %dD (batch mode) tensor with possibly 0 batch size "
                           "and other non-zero dimensions for input, but got: %s", ns + 1,
                           ns + 2, tpu_shape_str(d, n, a, sizeof a));
  }
  if (tpu_arg_value_dtype(cx, arg) == TPU_BOOL)
    return tpu_not_implemented(op, TPU_BOOL);
  return TPU_OK;
}

// reflection_padNd / replication_padNd(Tensor self, SymInt[2N] padding)
static tpu_status_t pad_forward(tpu_lower_ctx_t* cx, const char* op, bool reflect, int ns) {
  const int64_t* pad;
  TPU_RETURN_IF_ERROR(pad_check(cx, op, 0, ns, 1, &pad));
  taps_t taps[3];
  TPU_RETURN_IF_ERROR(pad_taps(cx, reflect, ns, tpu_arg_sizes(cx, 0), tpu_arg_rank(cx, 0),
                               pad, taps));
  tpu_lower_out(cx, 0, run_taps(cx, 0, taps, ns, false));
  return TPU_OK;
}

// reflection_padNd_backward / replication_padNd_backward(Tensor grad_output,
// Tensor self, SymInt[2N] padding)
static tpu_status_t pad_backward(tpu_lower_ctx_t* cx, const char* op, bool reflect, int ns) {
  const int64_t* pad;
  TPU_RETURN_IF_ERROR(pad_check(cx, op, 1, ns, 2, &pad));
  int n = tpu_arg_rank(cx, 1);
  const int64_t* in = tpu_arg_sizes(cx, 1);
  const int64_t* gd = tpu_arg_sizes(cx, 0);
  taps_t taps[3];
  TPU_RETURN_IF_ERROR(pad_taps(cx, reflect, ns, in, n, pad, taps));
  bool ok = tpu_arg_rank(cx, 0) == n;
  for (int i = 0; ok && i < n; ++i) ok = gd[i] == (i < n - ns ? in[i] : taps[i - (n - ns)].out);
  if (!ok) {
    char a[128], b[128];
    int64_t want[TPU_MAX_RANK];
    memcpy(want, in, sizeof(int64_t) * (size_t)n);
    for (int s = 0; s < ns; ++s) want[n - ns + s] = taps[s].out;
    return TPU_LOWER_ERROR(TPU_CODE_INVALID_ARGUMENT,
                           "%s: grad_output of shape %s, expected %s", op,
                           tpu_shape_str(gd, tpu_arg_rank(cx, 0), a, sizeof a),
                           tpu_shape_str(want, n, b, sizeof b));
  }
  tpu_lower_out(cx, 0, run_taps(cx, 0, taps, ns, true));
  return TPU_OK;
}

#define PAD_LOWERINGS(NAME, REFLECT, NS)                                       \
  tpu_status_t tpu_lower_##NAME(tpu_lower_ctx_t* cx) {                         \
    return pad_forward(cx, #NAME, REFLECT, NS);                                \
  }                                                                            \
  tpu_status_t tpu_lower_##NAME##_backward(tpu_lower_ctx_t* cx) {              \
    return pad_backward(cx, #NAME "_backward", REFLECT, NS);                   \
  }
PAD_LOWERINGS(reflection_pad1d, true, 1)
PAD_LOWERINGS(reflection_pad2d, true, 2)
PAD_LOWERINGS(reflection_pad3d, true, 3)
PAD_LOWERINGS(replication_pad1d, false, 1)
PAD_LOWERINGS(replication_pad2d, false, 2)
PAD_LOWERINGS(replication_pad3d, false, 3)

//===--- upsampling: index math ---===//

// CPU's scale of one dimension: 1/scale when a positive scale is given,
// else in/out (in float, as CPU computes it for nearest).
static float scale_f(double scale, int64_t in, int64_t out) {
  return scale > 0 ? (float)(1.0 / scale) : (float)in / (float)out;
}
static double scale_d(double scale, int64_t in, int64_t out) {
  return scale > 0 ? 1.0 / scale : (double)in / (double)out;
}

static int64_t min_i64(int64_t a, int64_t b) { return a < b ? a : b; }

// Nearest taps. CPU's forward and backward kernels round differently (the
// backward one copies when sizes match or doubles them, ignoring scale),
// and nearest-exact computes its forward scale in double for double inputs;
// each is followed exactly.
static void nearest_taps(taps_t* t, double scale, bool exact, bool backward, bool dbl) {
  int64_t in = t->in, out = t->out;
  for (int64_t o = 0; o < out; ++o) {
    int64_t j;
    if (backward && !exact && out == in) {
      j = o;
    } else if (backward && !exact && out == 2 * in) {
      j = o >> 1;
    } else if (exact) {
      double s = (dbl && !backward) ? scale_d(scale, in, out) : (double)scale_f(scale, in, out);
      j = (int64_t)floorf((float)(((double)o + 0.5) * s));
    } else if (backward) {
      j = (int64_t)floorf((float)o * scale_f(scale, in, out));
    } else {
      float s = out > 1 ? scale_f(scale, in, out) : 0.0f;
      j = (int64_t)floorf(s * (float)o);
    }
    t->idx[0][o] = min_i64(j, in - 1);
  }
}

// Source position of output o for linear and cubic modes (CPU's
// area_pixel_compute_source_index), in float or double.
static double src_pos(double ratio, int64_t o, bool align, bool cubic, bool dbl) {
  if (dbl) {
    if (align) return ratio * (double)o;
    double s = ratio * ((double)o + 0.5) - 0.5;
    return (!cubic && s < 0) ? 0.0 : s;
  }
  float r = (float)ratio;
  if (align) return (double)(r * (float)o);
  float s = (float)((double)r * ((double)o + 0.5) - 0.5);
  return (!cubic && s < 0) ? 0.0 : (double)s;
}

// CPU's ratio: (in-1)/(out-1) with align_corners (0 for a single output),
// else the scale.
static double ratio_of(int64_t in, int64_t out, bool align, double scale, bool dbl) {
  if (align) {
    if (out <= 1) return 0;
    return dbl ? (double)(in - 1) / (double)(out - 1)
               : (double)((float)(in - 1) / (float)(out - 1));
  }
  return dbl ? scale_d(scale, in, out) : (double)scale_f(scale, in, out);
}

// Linear taps: two neighbours with weights 1 - l and l.
static void linear_taps(taps_t* t, double scale, bool align, bool dbl) {
  int64_t in = t->in, out = t->out;
  double ratio = ratio_of(in, out, align, scale, dbl);
  for (int64_t o = 0; o < out; ++o) {
    int64_t i0, i1;
    double l0, l1;
    if (out == in) {  // CPU copies when the sizes match, whatever the scale
      i0 = i1 = o;
      l0 = 1;
      l1 = 0;
    } else {
      double r = src_pos(ratio, o, align, false, dbl);
      i0 = min_i64((int64_t)floor(r), in - 1);
      double l = r - (double)i0;
      if (!dbl) l = (double)(float)l;
      l1 = l < 0 ? 0 : l > 1 ? 1 : l;
      i1 = i0 + (i0 < in - 1 ? 1 : 0);
      l0 = dbl ? 1.0 - l1 : (double)(1.0f - (float)l1);
    }
    t->idx[0][o] = i0;
    t->idx[1][o] = i1;
    t->w[0][o] = l0;
    t->w[1][o] = l1;
  }
}

// Cubic convolution weights (A = -0.75) for fraction x, in float or double.
static void cubic_weights(double x, bool dbl, double* c) {
  if (dbl) {
    const double A = -0.75;
    double x1 = x + 1, x2 = 1 - x, x3 = 2 - x;
    c[0] = ((A * x1 - 5 * A) * x1 + 8 * A) * x1 - 4 * A;
    c[1] = ((A + 2) * x - (A + 3)) * x * x + 1;
    c[2] = ((A + 2) * x2 - (A + 3)) * x2 * x2 + 1;
    c[3] = ((A * x3 - 5 * A) * x3 + 8 * A) * x3 - 4 * A;
    return;
  }
  const float A = -0.75f;
  float t = (float)x, x1 = t + 1.0f, x2 = 1.0f - t, x3 = x2 + 1.0f;
  c[0] = ((A * x1 - 5 * A) * x1 + 8 * A) * x1 - 4 * A;
  c[1] = ((A + 2) * t - (A + 3)) * t * t + 1;
  c[2] = ((A + 2) * x2 - (A + 3)) * x2 * x2 + 1;
  c[3] = ((A * x3 - 5 * A) * x3 + 8 * A) * x3 - 4 * A;
}

// Cubic taps: four neighbours (clamped to the edges).
static void cubic_taps(taps_t* t, double scale, bool align, bool dbl) {
  int64_t in = t->in, out = t->out;
  double ratio = ratio_of(in, out, align, scale, dbl);
  for (int64_t o = 0; o < out; ++o) {
    double r = src_pos(ratio, o, align, true, dbl);
    int64_t i = (int64_t)floor(r);
    double l = r - (double)i;
    if (!dbl) l = (double)(float)l;
    double c[4];
    cubic_weights(l, dbl, c);
    for (int k = 0; k < 4; ++k) {
      int64_t j = i - 1 + k;
      t->idx[k][o] = j < 0 ? 0 : j > in - 1 ? in - 1 : j;
      t->w[k][o] = c[k];
    }
  }
}

//===--- upsampling: uint8 images ---===//

// CPU resizes uint8 images (bilinear, bicubic) in fixed point, one dimension
// at a time (the last first), rounding to uint8 after each: per output, a
// few int16 weights (the float weights, with taps past an edge folded into
// the edge tap, scaled by 2^precision) multiply the pixels, and the sum is
// rounded, shifted back and saturated. This follows that computation so the
// results are the same integers.

static double filter_linear(double x) {
  x = fabs(x);
  return x < 1.0 ? 1.0 - x : 0.0;
}

static double filter_cubic(double x) {  // A = -0.75, as CPU without antialias
  const double a = -0.75;
  x = fabs(x);
  if (x < 1.0) return ((a + 2) * x - (a + 3)) * x * x + 1;
  if (x < 2.0) return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a;
  return 0.0;
}

// Integer taps of one dimension; returns the weights' precision (bits).
static int u8_taps(taps_t* t, double opt_scale, bool align, bool cubic) {
  int64_t in = t->in, out = t->out;
  int isz = cubic ? 4 : 2;
  int64_t support = isz / 2;
  double scale = align ? (out > 1 ? (double)(in - 1) / (double)(out - 1) : 0.0)
                       : scale_d(opt_scale, in, out);
  double wmax = 0;
  for (int64_t o = 0; o < out; ++o) {
    double r = align ? scale * (double)o : scale * ((double)o + 0.5) - 0.5;
    if (!cubic && r < 0) r = 0;
    int64_t i0 = min_i64((int64_t)floor(r), in - 1);
    double l = r - (double)i0;
    l = l < 0 ? 0 : l > 1 ? 1 : l;
    int64_t umin = i0 - support + 1, umax = i0 + support + 1;
    int64_t imin = umin > 0 ? umin : 0;
    int64_t isize = min_i64(umax, in) - imin;
    isize = isize < 0 ? 0 : isize > isz ? isz : isize;
    double w[4] = {0, 0, 0, 0};
    int64_t wi = 0;
    for (int j = 0; j < isz; ++j) {
      double f = (cubic ? filter_cubic : filter_linear)((double)(j + 1 - support) - l);
      if (umin + j <= 0)
        wi = 0;
      else if (umin + j >= in - 1)
        wi = isize - 1;
      if (wi >= 0 && wi < isz) {
        w[wi] += f;
        if (w[wi] > wmax) wmax = w[wi];
      }
      ++wi;
    }
    for (int j = 0; j < isz; ++j) {
      t->idx[j][o] = min_i64(imin + j, in - 1);
      t->w[j][o] = j < isize ? w[j] : 0.0;  // CPU reads only isize taps
    }
  }
  int p = 0;
  for (p = 0; p < 22; ++p)
    if ((int)(0.5 + wmax * (double)(1 << (p + 1))) >= (1 << 15)) break;
  for (int j = 0; j < isz; ++j)
    for (int64_t o = 0; o < out; ++o) {
      double v = t->w[j][o] * (double)(1 << p);
      t->w[j][o] = (double)(int16_t)(v < 0 ? (int)(-0.5 + v) : (int)(0.5 + v));
    }
  return p;
}

// One fixed-point pass along `dim` of the uint8 value x (shape d).
static tpu_val_t u8_pass(tpu_graph_t* g, tpu_val_t x, int64_t* d, int n, int dim,
                         const taps_t* t, int p) {
  int64_t od[TPU_MAX_RANK];
  memcpy(od, d, sizeof(int64_t) * (size_t)n);
  od[dim] = t->out;
  int64_t* wi = tpu_graph_alloc(g, (size_t)t->out * sizeof(int64_t));
  if (!wi) return TPU_VAL_NONE;
  tpu_val_t xi = tpu_ir_convert(g, x, TPU_I32);
  tpu_val_t acc = tpu_ir_const_i(g, TPU_I32, (int64_t)1 << (p - 1), od, n);
  for (int j = 0; j < t->k; ++j) {
    for (int64_t o = 0; o < t->out; ++o) wi[o] = (int64_t)t->w[j][o];
    int64_t bd = dim;
    tpu_val_t w = tpu_ir_broadcast(
        g, tpu_ir_convert(g, tpu_ir_const_i64_array(g, wi, t->out), TPU_I32), od, n, &bd);
    tpu_val_t v = take(g, xi, d, n, dim, t->idx[j], t->out);
    acc = tpu_ir_binary(g, TPU_IR_ADD, acc, tpu_ir_binary(g, TPU_IR_MUL, v, w));
  }
  acc = tpu_ir_binary(g, TPU_IR_SHR_A, acc, tpu_ir_const_i(g, TPU_I32, p, od, n));
  acc = tpu_ir_binary(g, TPU_IR_MAX, acc, tpu_ir_const_i(g, TPU_I32, 0, od, n));
  acc = tpu_ir_binary(g, TPU_IR_MIN, acc, tpu_ir_const_i(g, TPU_I32, 255, od, n));
  d[dim] = t->out;
  return tpu_ir_convert(g, acc, TPU_U8);
}

// upsample_bilinear2d / upsample_bicubic2d of a uint8 tensor (argument 0).
static tpu_status_t u8_resize(tpu_lower_ctx_t* cx, bool cubic, const int64_t* osz,
                              const double* scale, bool align) {
  tpu_graph_t* g = cx->g;
  int n = tpu_arg_rank(cx, 0);
  int64_t d[TPU_MAX_RANK];
  memcpy(d, tpu_arg_sizes(cx, 0), sizeof(int64_t) * (size_t)n);
  int64_t od[TPU_MAX_RANK];
  memcpy(od, d, sizeof od);
  od[n - 2] = osz[0];
  od[n - 1] = osz[1];
  if (tpu_numel(od, n) == 0) {
    tpu_lower_out(cx, 0, tpu_ir_const(g, TPU_U8, 0, od, n));
    return TPU_OK;
  }
  tpu_val_t x = tpu_lower_tensor(cx, 0);
  for (int s = 1; s >= 0; --s) {  // width first, as CPU
    int dim = n - 2 + s;
    if (d[dim] == osz[s]) continue;  // CPU skips dimensions that keep their size
    taps_t t;
    if (!taps_alloc(g, &t, d[dim], osz[s], cubic ? 4 : 2, true)) return oom();
    int p = u8_taps(&t, scale[s], align, cubic);
    x = u8_pass(g, x, d, n, dim, &t, p);
  }
  tpu_lower_out(cx, 0, x);
  return TPU_OK;
}

//===--- upsampling: lowerings ---===//

typedef enum mode { NEAREST, NEAREST_EXACT, LINEAR, CUBIC } interp_mode_t;

// Which dtypes CPU accepts: nearest reads any float or uint8 forward,
// interpolation floats (and uint8 for the 2-D bilinear and bicubic), and
// every backward floats only.
static bool dtype_ok(tpu_dtype_t t, interp_mode_t m, int ns, bool backward) {
  bool fl = t == TPU_F32 || t == TPU_F64 || t == TPU_BF16 || t == TPU_F16;
  if (fl) return true;
  return !backward && t == TPU_U8 && (m == NEAREST || m == NEAREST_EXACT || ns == 2);
}

// Reads the optional scales (arguments first..first+ns) into scale[]: -1
// when absent.
static void read_scales(tpu_lower_ctx_t* cx, int first, int ns, double* scale) {
  for (int s = 0; s < ns; ++s)
    scale[s] = tpu_arg_present(cx, first + s) ? tpu_arg_float(cx, first + s, -1) : -1;
}

static tpu_status_t size_check(int ns, const int64_t* in, const int64_t* out) {
  bool ok = true;
  for (int s = 0; s < ns; ++s) ok = ok && in[s] > 0 && out[s] > 0;
  if (ok) return TPU_OK;
  static const char* names[3][3] = {{"W"}, {"H", "W"}, {"D", "H", "W"}};
  char a[96] = "", b[96] = "";
  size_t ka = 0, kb = 0;
  for (int s = 0; s < ns; ++s) {
    ka += (size_t)snprintf(a + ka, sizeof a - ka, "%s%s: %lld", s ? ", " : "", names[ns - 1][s],
                           (long long)in[s]);
    kb += (size_t)snprintf(b + kb, sizeof b - kb, "%s%s: %lld", s ? ", " : "", names[ns - 1][s],
                           (long long)out[s]);
  }
  return TPU_LOWER_ERROR(TPU_CODE_INVALID_ARGUMENT,
                         "Input and output sizes should be greater than 0, but got input (%s) "
                         "output (%s)", a, b);
}

// Builds the taps of the ns resampled dims from input sizes `in` to `out`.
static tpu_status_t upsample_taps(tpu_lower_ctx_t* cx, interp_mode_t m, int ns, const int64_t* in,
                                  const int64_t* out, const double* scale, bool align,
                                  bool backward, bool dbl, taps_t* taps) {
  for (int s = 0; s < ns; ++s) {
    int k = m == LINEAR ? 2 : m == CUBIC ? 4 : 1;
    if (!taps_alloc(cx->g, &taps[s], in[s], out[s], k, k > 1)) return oom();
    switch (m) {
      case NEAREST: nearest_taps(&taps[s], scale[s], false, backward, dbl); break;
      case NEAREST_EXACT: nearest_taps(&taps[s], scale[s], true, backward, dbl); break;
      case LINEAR: linear_taps(&taps[s], scale[s], align, dbl); break;
      case CUBIC: cubic_taps(&taps[s], scale[s], align, dbl); break;
    }
  }
  return TPU_OK;
}

// upsample_*(Tensor self, SymInt[N] output_size, [bool align_corners,]
// float? scales...)
static tpu_status_t upsample_forward(tpu_lower_ctx_t* cx, const char* op, interp_mode_t m, int ns) {
  bool interp = m == LINEAR || m == CUBIC;
  const int64_t* osz;
  int no = tpu_arg_ints(cx, 1, &osz);
  int n = tpu_arg_rank(cx, 0);
  const int64_t* d = tpu_arg_sizes(cx, 0);
  if (no != ns)
    return TPU_LOWER_ERROR(TPU_CODE_INVALID_ARGUMENT,
                           "It is expected output_size equals to %d, but got size %d", ns, no);
  if (n != ns + 2)
    return TPU_LOWER_ERROR(TPU_CODE_INVALID_ARGUMENT,
                           "It is expected input_size equals to %d, but got size %d", ns + 2, n);
  TPU_RETURN_IF_ERROR(size_check(ns, d + 2, osz));
  if (d[1] == 0) {
    char a[128];
    return TPU_LOWER_ERROR(TPU_CODE_INVALID_ARGUMENT,
                           "Non-empty %dD data tensor expected but got a tensor with sizes %s",
                           n, tpu_shape_str(d, n, a, sizeof a));
  }
  tpu_dtype_t t = tpu_arg_value_dtype(cx, 0);
  if (!dtype_ok(t, m, ns, false)) return tpu_not_implemented(op, t);
  bool align = interp && tpu_arg_bool(cx, 2, false);
  double scale[3];
  read_scales(cx, interp ? 3 : 2, ns, scale);
  if (t == TPU_U8 && interp) return u8_resize(cx, m == CUBIC, osz, scale, align);
  taps_t taps[3];
  TPU_RETURN_IF_ERROR(
      upsample_taps(cx, m, ns, d + 2, osz, scale, align, false, t == TPU_F64, taps));
  tpu_lower_out(cx, 0, run_taps(cx, 0, taps, ns, false));
  return TPU_OK;
}

// upsample_*_backward(Tensor grad_output, SymInt[N] output_size,
// SymInt[N+2] input_size, [bool align_corners,] float? scales...)
static tpu_status_t upsample_backward(tpu_lower_ctx_t* cx, const char* op, interp_mode_t m,
                                      int ns) {
  bool interp = m == LINEAR || m == CUBIC;
  const int64_t *osz, *isz;
  int no = tpu_arg_ints(cx, 1, &osz), ni = tpu_arg_ints(cx, 2, &isz);
  if (no != ns)
    return TPU_LOWER_ERROR(TPU_CODE_INVALID_ARGUMENT,
                           "It is expected output_size equals to %d, but got size %d", ns, no);
  if (ni != ns + 2)
    return TPU_LOWER_ERROR(TPU_CODE_INVALID_ARGUMENT,
                           "It is expected input_size equals to %d, but got size %d", ns + 2, ni);
  TPU_RETURN_IF_ERROR(size_check(ns, isz + 2, osz));
  int n = tpu_arg_rank(cx, 0);
  const int64_t* gd = tpu_arg_sizes(cx, 0);
  if (n != ns + 2)
    return TPU_LOWER_ERROR(TPU_CODE_INVALID_ARGUMENT,
                           "Expected grad_output to be a tensor of dimension %d but got: "
                           "dimension %d", ns + 2, n);
  for (int i = 0; i < n; ++i) {
    int64_t want = i < 2 ? isz[i] : osz[i - 2];
    if (gd[i] != want)
      return TPU_LOWER_ERROR(TPU_CODE_INVALID_ARGUMENT,
                             "Expected grad_output to have the same shape as output; "
                             "output.size(%d) = %lld but got grad_output.size(%d) = %lld", i,
                             (long long)want, i, (long long)gd[i]);
  }
  tpu_dtype_t t = tpu_arg_value_dtype(cx, 0);
  if (!dtype_ok(t, m, ns, true)) return tpu_not_implemented(op, t);
  bool align = interp && tpu_arg_bool(cx, 3, false);
  double scale[3];
  read_scales(cx, interp ? 4 : 3, ns, scale);
  taps_t taps[3];
  TPU_RETURN_IF_ERROR(
      upsample_taps(cx, m, ns, isz + 2, osz, scale, align, true, t == TPU_F64, taps));
  tpu_lower_out(cx, 0, run_taps(cx, 0, taps, ns, true));
  return TPU_OK;
}

#define UPSAMPLE_FORWARD(NAME, MODE, NS)                                       \
  tpu_status_t tpu_lower_##NAME(tpu_lower_ctx_t* cx) {                         \
    return upsample_forward(cx, #NAME, MODE, NS);                              \
  }
#define UPSAMPLE_BACKWARD(NAME, MODE, NS)                                      \
  tpu_status_t tpu_lower_##NAME##_backward(tpu_lower_ctx_t* cx) {              \
    return upsample_backward(cx, #NAME "_backward", MODE, NS);                 \
  }
#define UPSAMPLE_LOWERINGS(NAME, MODE, NS) \
  UPSAMPLE_FORWARD(NAME, MODE, NS)         \
  UPSAMPLE_BACKWARD(NAME, MODE, NS)
UPSAMPLE_LOWERINGS(upsample_nearest1d, NEAREST, 1)
UPSAMPLE_LOWERINGS(upsample_nearest2d, NEAREST, 2)
UPSAMPLE_LOWERINGS(upsample_nearest3d, NEAREST, 3)
UPSAMPLE_LOWERINGS(_upsample_nearest_exact1d, NEAREST_EXACT, 1)
UPSAMPLE_LOWERINGS(_upsample_nearest_exact2d, NEAREST_EXACT, 2)
UPSAMPLE_LOWERINGS(_upsample_nearest_exact3d, NEAREST_EXACT, 3)
UPSAMPLE_LOWERINGS(upsample_linear1d, LINEAR, 1)
UPSAMPLE_LOWERINGS(upsample_trilinear3d, LINEAR, 3)
UPSAMPLE_LOWERINGS(upsample_bilinear2d, LINEAR, 2)
UPSAMPLE_LOWERINGS(upsample_bicubic2d, CUBIC, 2)
