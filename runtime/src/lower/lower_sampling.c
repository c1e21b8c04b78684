// Gathers and scatters at computed positions: grid sampling
// (grid_sampler_2d / 3d and their backward) and max unpooling. (Embedding
// bags: lower_embedding_bag.c; embedding_renorm_: lower_math_extra.c.)
//
// Grid sampling is one generic lowering over S = 2 or 3 spatial dims. The grid's coordinates
// become source positions (unnormalized, then clipped or reflected by the
// padding mode, as PyTorch's GridSampler helpers do); each interpolation
// mode is a separable set of taps per spatial dim (nearest: 1, bilinear: 2,
// bicubic: 4), each with an integer position, a weight and the weight's
// derivative. Every tap combination is one gather from the input laid out as
// [N * spatial, C], weighted and masked where the tap lies outside the input
// (zeros padding, as PyTorch reads nothing there). The backward scatters the
// weighted output gradient back at the same positions and forms the grid
// gradient from the weights' derivatives and the coordinate transform's.
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "lower/lower.h"

enum { GS_BILINEAR = 0, GS_NEAREST = 1, GS_BICUBIC = 2 };
enum { GS_ZEROS = 0, GS_BORDER = 1, GS_REFLECTION = 2 };

// Bicubic convolution constant (PyTorch's A).
#define GS_CUBIC_A (-0.75)

typedef struct gs {
  tpu_lower_ctx_t* cx;
  tpu_graph_t* g;
  int s;                  // spatial dims
  int64_t n, c, m;        // batch, channels, output points (grid's spatial product)
  int64_t in_sp[3];       // input spatial sizes, in the input's order
  int64_t out_sp[3];      // grid's spatial sizes
  int64_t p;              // input spatial product
  int interp, pad;
  bool align;
  tpu_dtype_t t, acc;
  int64_t d2[2];          // [N, M]
} gs_t;

static tpu_val_t cst(gs_t* z, double v) { return tpu_ir_const(z->g, z->acc, v, z->d2, 2); }
static tpu_val_t add(gs_t* z, tpu_val_t a, tpu_val_t b) {
  return tpu_ir_binary(z->g, TPU_IR_ADD, a, b);
}
static tpu_val_t sub(gs_t* z, tpu_val_t a, tpu_val_t b) {
  return tpu_ir_binary(z->g, TPU_IR_SUB, a, b);
}
static tpu_val_t mul(gs_t* z, tpu_val_t a, tpu_val_t b) {
  return tpu_ir_binary(z->g, TPU_IR_MUL, a, b);
}
static tpu_val_t cmp(gs_t* z, tpu_cmp_t c, tpu_val_t a, tpu_val_t b) {
  return tpu_ir_compare(z->g, c, a, b);
}
static tpu_val_t sel(gs_t* z, tpu_val_t p, tpu_val_t a, tpu_val_t b) {
  return tpu_ir_select(z->g, p, a, b);
}

// Clipped to [0, size - 1]; *grad (when given) is multiplied by the clip's
// derivative (1 strictly inside, else 0).
static tpu_val_t clip(gs_t* z, tpu_val_t x, int64_t size, tpu_val_t* grad) {
  tpu_val_t hi = cst(z, (double)(size - 1)), lo = cst(z, 0);
  if (grad) {
    tpu_val_t inside = tpu_ir_binary(z->g, TPU_IR_AND, cmp(z, TPU_CMP_GT, x, lo),
                                     cmp(z, TPU_CMP_LT, x, hi));
    *grad = sel(z, inside, *grad, lo);
  }
  return tpu_ir_binary(z->g, TPU_IR_MIN, tpu_ir_binary(z->g, TPU_IR_MAX, x, lo), hi);
}

// PyTorch's reflect_coordinates over [twice_low / 2, twice_high / 2], with
// the derivative's sign folded into *grad.
static tpu_val_t reflect(gs_t* z, tpu_val_t x, int64_t twice_low, int64_t twice_high,
                         tpu_val_t* grad) {
  if (twice_low == twice_high) {
    if (grad) *grad = cst(z, 0);
    return cst(z, 0);
  }
  double min = twice_low / 2.0, span = (twice_high - twice_low) / 2.0;
  tpu_val_t in = sub(z, x, cst(z, min));
  tpu_val_t neg = cmp(z, TPU_CMP_LT, in, cst(z, 0));
  in = tpu_ir_unary(z->g, TPU_IR_ABS, in);
  tpu_val_t extra = tpu_ir_binary(z->g, TPU_IR_REM, in, cst(z, span));
  tpu_val_t flips = tpu_ir_unary(z->g, TPU_IR_FLOOR, tpu_ir_binary(z->g, TPU_IR_DIV, in, cst(z, span)));
  tpu_val_t half = tpu_ir_unary(z->g, TPU_IR_FLOOR, mul(z, flips, cst(z, 0.5)));
  tpu_val_t even = cmp(z, TPU_CMP_EQ, flips, mul(z, half, cst(z, 2)));
  if (grad) {
    tpu_val_t sign = sel(z, neg, cst(z, -1), cst(z, 1));
    *grad = mul(z, *grad, sel(z, even, sign, tpu_ir_unary(z->g, TPU_IR_NEG, sign)));
  }
  return sel(z, even, add(z, extra, cst(z, min)), add(z, sub(z, cst(z, span), extra), cst(z, min)));
}

// The padding mode's transform of a source coordinate (compute_coordinates),
// then non-finite or huge values made -100 (out of bounds) as PyTorch does
// before converting to integers.
static tpu_val_t pad_coord(gs_t* z, tpu_val_t x, int64_t size, tpu_val_t* grad) {
  if (z->pad == GS_BORDER) {
    x = clip(z, x, size, grad);
  } else if (z->pad == GS_REFLECTION) {
    x = z->align ? reflect(z, x, 0, 2 * (size - 1), grad) : reflect(z, x, -1, 2 * size - 1, grad);
    x = clip(z, x, size, grad);
  }
  tpu_val_t ok = tpu_ir_binary(
      z->g, TPU_IR_AND, tpu_ir_unary(z->g, TPU_IR_IS_FINITE, x),
      tpu_ir_binary(z->g, TPU_IR_AND, cmp(z, TPU_CMP_LE, x, cst(z, 2147483646.0)),
                    cmp(z, TPU_CMP_GE, x, cst(z, -2147483648.0))));
  return sel(z, ok, x, cst(z, -100));
}

// A grid coordinate in [-1, 1] as a source position (unnormalize); *scale is
// its derivative.
static tpu_val_t unnormalize(gs_t* z, tpu_val_t x, int64_t size, tpu_val_t* scale) {
  if (z->align) {
    *scale = cst(z, (double)(size - 1) / 2);
    return mul(z, mul(z, add(z, x, cst(z, 1)), cst(z, 0.5)), cst(z, (double)(size - 1)));
  }
  *scale = cst(z, (double)size / 2);
  return mul(z, sub(z, mul(z, add(z, x, cst(z, 1)), cst(z, (double)size)), cst(z, 1)), cst(z, 0.5));
}

// The taps of one spatial dim: positions (integer-valued floats), weights and
// their derivatives w.r.t. the source position; *mult the derivative of the
// source position w.r.t. the grid coordinate.
typedef struct gs_taps {
  int k;
  tpu_val_t pos[4], w[4], dw[4];
  tpu_val_t mult;
} gs_taps_t;

// cubic_convolution1 / 2 of PyTorch's bicubic upsampling and their
// derivatives (for x = 1 - t style arguments the caller flips the sign).
static tpu_val_t cubic1(gs_t* z, tpu_val_t x) {  // ((A + 2) x - (A + 3)) x x + 1
  const double a = GS_CUBIC_A;
  tpu_val_t r = sub(z, mul(z, cst(z, a + 2), x), cst(z, a + 3));
  return add(z, mul(z, mul(z, r, x), x), cst(z, 1));
}
static tpu_val_t cubic2(gs_t* z, tpu_val_t x) {  // ((A x - 5A) x + 8A) x - 4A
  const double a = GS_CUBIC_A;
  tpu_val_t r = sub(z, mul(z, cst(z, a), x), cst(z, 5 * a));
  r = add(z, mul(z, r, x), cst(z, 8 * a));
  return sub(z, mul(z, r, x), cst(z, 4 * a));
}

static void taps_of(gs_t* z, tpu_val_t coord, int64_t size, gs_taps_t* tp) {
  tpu_graph_t* g = z->g;
  tpu_val_t scale;
  tpu_val_t x = unnormalize(z, coord, size, &scale);
  if (z->interp == GS_BICUBIC) {
    tp->mult = scale;
    tpu_val_t base = tpu_ir_unary(g, TPU_IR_FLOOR, x);
    tpu_val_t t = sub(z, x, base);
    const double a = GS_CUBIC_A;
    // weights at t + 1, t, 1 - t, 2 - t; derivatives from PyTorch's
    // get_cubic_coefficients_grad
    tp->w[0] = cubic2(z, add(z, t, cst(z, 1)));
    tp->w[1] = cubic1(z, t);
    tp->w[2] = cubic1(z, sub(z, cst(z, 1), t));
    tp->w[3] = cubic2(z, sub(z, cst(z, 2), t));
    tpu_val_t u = sub(z, cst(z, -1), t);  // (-3A u - 10A) u - 8A
    tp->dw[0] = sub(z, mul(z, sub(z, mul(z, cst(z, -3 * a), u), cst(z, 10 * a)), u), cst(z, 8 * a));
    u = tpu_ir_unary(g, TPU_IR_NEG, t);  // (-3(A+2) u - 2(A+3)) u
    tp->dw[1] = mul(z, sub(z, mul(z, cst(z, -3 * (a + 2)), u), cst(z, 2 * (a + 3))), u);
    u = sub(z, cst(z, 1), t);  // (3(A+2) u - 2(A+3)) u
    tp->dw[2] = mul(z, sub(z, mul(z, cst(z, 3 * (a + 2)), u), cst(z, 2 * (a + 3))), u);
    u = sub(z, cst(z, 2), t);  // (3A u - 10A) u + 8A
    tp->dw[3] = add(z, mul(z, sub(z, mul(z, cst(z, 3 * a), u), cst(z, 10 * a)), u), cst(z, 8 * a));
    // (those are derivatives w.r.t. -t: PyTorch subtracts them)
    for (int i = 0; i < 4; ++i) tp->dw[i] = tpu_ir_unary(g, TPU_IR_NEG, tp->dw[i]);
    tp->k = 4;
    for (int i = 0; i < 4; ++i)
      tp->pos[i] = pad_coord(z, add(z, base, cst(z, i - 1)), size, NULL);
    return;
  }
  tpu_val_t grad = scale;
  x = pad_coord(z, x, size, &grad);
  tp->mult = grad;
  if (z->interp == GS_NEAREST) {
    tp->k = 1;
    tp->pos[0] = tpu_ir_unary(g, TPU_IR_ROUND_EVEN, x);
    tp->w[0] = cst(z, 1);
    tp->dw[0] = cst(z, 0);
    return;
  }
  tpu_val_t base = tpu_ir_unary(g, TPU_IR_FLOOR, x);
  tpu_val_t next = add(z, base, cst(z, 1));
  tp->k = 2;
  tp->pos[0] = base;
  tp->pos[1] = next;
  tp->w[0] = sub(z, next, x);
  tp->w[1] = sub(z, x, base);
  tp->dw[0] = cst(z, -1);
  tp->dw[1] = cst(z, 1);
}

// A tap combination: its row in the [N * P, C] input, whether it lies inside
// the input, and its weight.
typedef struct gs_tap {
  tpu_val_t row, inside, w;
  tpu_val_t part[3];  // the weight's partial derivative per spatial dim
} gs_tap_t;

static void tap_combo(gs_t* z, const gs_taps_t* tp, const int* pick, gs_tap_t* out) {
  tpu_graph_t* g = z->g;
  int64_t stride = 1;
  tpu_val_t zero_i = tpu_ir_const_i(g, TPU_I64, 0, z->d2, 2);
  tpu_val_t row = tpu_ir_binary(g, TPU_IR_MUL, tpu_ir_iota(g, TPU_I64, z->d2, 2, 0),
                                tpu_ir_const_i(g, TPU_I64, z->p, z->d2, 2));
  tpu_val_t inside = tpu_ir_const_i(g, TPU_BOOL, 1, z->d2, 2);
  tpu_val_t w = cst(z, 1);
  for (int i = 0; i < z->s; ++i) out->part[i] = cst(z, 1);
  for (int i = z->s - 1; i >= 0; --i) {
    const gs_taps_t* t = &tp[i];
    int k = pick[i];
    tpu_val_t pos = t->pos[k];
    tpu_val_t in = tpu_ir_binary(g, TPU_IR_AND, cmp(z, TPU_CMP_GE, pos, cst(z, 0)),
                                 cmp(z, TPU_CMP_LT, pos, cst(z, (double)z->in_sp[i])));
    inside = tpu_ir_binary(g, TPU_IR_AND, inside, in);
    tpu_val_t ip = sel(z, in, tpu_ir_convert(g, pos, TPU_I64), zero_i);
    row = tpu_ir_binary(g, TPU_IR_ADD, row,
                        tpu_ir_binary(g, TPU_IR_MUL, ip,
                                      tpu_ir_const_i(g, TPU_I64, stride, z->d2, 2)));
    stride *= z->in_sp[i];
    w = mul(z, w, t->w[k]);
    for (int j = 0; j < z->s; ++j) out->part[j] = mul(z, out->part[j], j == i ? t->dw[k] : t->w[k]);
  }
  out->row = row;
  out->inside = inside;
  out->w = sel(z, inside, w, cst(z, 0));
}

// Iterates tap combinations: advances pick (mixed radix); false when done.
static bool next_pick(const gs_taps_t* tp, int s, int* pick) {
  for (int i = s - 1; i >= 0; --i) {
    if (++pick[i] < tp[i].k) return true;
    pick[i] = 0;
  }
  return false;
}

static tpu_status_t gs_plan(tpu_lower_ctx_t* cx, int in_arg, int grid_arg, int mode_arg, int s,
                            gs_t* z) {
  memset(z, 0, sizeof *z);
  z->cx = cx;
  z->g = cx->g;
  z->s = s;
  int ri = tpu_arg_rank(cx, in_arg), rg = tpu_arg_rank(cx, grid_arg);
  const int64_t* di = tpu_arg_sizes(cx, in_arg);
  const int64_t* dg = tpu_arg_sizes(cx, grid_arg);
  char a[96], b[96];
  size_t ka = 0, kb = 0;
  ka += (size_t)snprintf(a, sizeof a, "[");
  for (int i = 0; i < ri && ka < sizeof a; ++i)
    ka += (size_t)snprintf(a + ka, sizeof a - ka, "%s%lld", i ? ", " : "", (long long)di[i]);
  if (ka < sizeof a) snprintf(a + ka, sizeof a - ka, "]");
  kb += (size_t)snprintf(b, sizeof b, "[");
  for (int i = 0; i < rg && kb < sizeof b; ++i)
    kb += (size_t)snprintf(b + kb, sizeof b - kb, "%s%lld", i ? ", " : "", (long long)dg[i]);
  if (kb < sizeof b) snprintf(b + kb, sizeof b - kb, "]");
  if (ri < 1 || rg < 1 || di[0] != dg[0])
    return TPU_LOWER_ERROR(TPU_CODE_INVALID_ARGUMENT,
                           "grid_sampler(): expected grid and input to have same batch size, "
                           "but got input with sizes %s and grid with sizes %s", a, b);
  if (dg[rg - 1] != ri - 2)
    return TPU_LOWER_ERROR(TPU_CODE_INVALID_ARGUMENT,
                           "grid_sampler(): expected grid to have size %d in last dimension, "
                           "but got grid with sizes %s", ri - 2, b);
  for (int i = 2; i < ri; ++i)
    if (di[i] <= 0)
      return TPU_LOWER_ERROR(TPU_CODE_INVALID_ARGUMENT,
                             "grid_sampler(): expected input to have non-empty spatial "
                             "dimensions, but input has sizes %s with dimension %d being empty",
                             a, i);
  if (ri != s + 2 || rg != ri)
    return TPU_LOWER_ERROR(TPU_CODE_INVALID_ARGUMENT,
                           "grid_sampler(): expected %dD input and grid with same number of "
                           "dimensions, but got input with sizes %s and grid with sizes %s",
                           s + 2, a, b);
  z->interp = (int)tpu_arg_int(cx, mode_arg, 0);
  z->pad = (int)tpu_arg_int(cx, mode_arg + 1, 0);
  z->align = tpu_arg_bool(cx, mode_arg + 2, false);
  if (s == 3 && z->interp == GS_BICUBIC)
    return TPU_LOWER_ERROR(TPU_CODE_INVALID_ARGUMENT,
                           "grid_sampler(): bicubic interpolation only supports 4D input");
  if (z->interp < 0 || z->interp > 2 || z->pad < 0 || z->pad > 2)
    return TPU_LOWER_ERROR(TPU_CODE_INVALID_ARGUMENT,
                           "grid_sampler(): unknown interpolation mode %d or padding mode %d",
                           z->interp, z->pad);
  tpu_dtype_t ti = tpu_arg_value_dtype(cx, in_arg), tg = tpu_arg_value_dtype(cx, grid_arg);
  if (ti != tg)
    return TPU_LOWER_ERROR(TPU_CODE_INVALID_ARGUMENT, "expected scalar type %s but found %s",
                           tpu_dtype_torch_name(ti), tpu_dtype_torch_name(tg));
  if (!tpu_dtype_is_float(ti) || tpu_dtype_is_complex(ti))
    return TPU_LOWER_ERROR(TPU_CODE_UNIMPLEMENTED, "\"grid_sampler_%dd_cpu\" not implemented for '%s'",
                           s, tpu_dtype_torch_name(ti));
  z->t = ti;
  z->acc = tpu_opmath(ti);
  z->n = di[0];
  z->c = di[1];
  z->p = 1;
  z->m = 1;
  for (int i = 0; i < s; ++i) {
    z->in_sp[i] = di[2 + i];
    z->out_sp[i] = dg[1 + i];
    z->p *= z->in_sp[i];
    z->m *= z->out_sp[i];
  }
  z->d2[0] = z->n;
  z->d2[1] = z->m;
  return TPU_OK;
}

// The taps of every spatial dim from the grid argument.
static void gs_taps(gs_t* z, int grid_arg, gs_taps_t* tp) {
  tpu_graph_t* g = z->g;
  int64_t d3[3] = {z->n, z->m, z->s};
  tpu_val_t grid = tpu_ir_reshape(g, tpu_lower_input(z->cx, grid_arg, z->acc), d3, 3);
  for (int i = 0; i < z->s; ++i) {
    // grid component k indexes spatial dim s - 1 - k (x is the last dim)
    int64_t k = z->s - 1 - i;
    int64_t lo[3] = {0, 0, k}, hi[3] = {z->n, z->m, k + 1};
    tpu_val_t coord = tpu_ir_reshape(g, tpu_ir_slice(g, grid, lo, hi, NULL), z->d2, 2);
    taps_of(z, coord, z->in_sp[i], &tp[i]);
  }
}

// The input as [N * P, C] in the compute dtype.
static tpu_val_t input_rows(gs_t* z, int arg) {
  tpu_graph_t* g = z->g;
  int64_t d[3] = {z->n, z->c, z->p}, perm[3] = {0, 2, 1}, r[2] = {z->n * z->p, z->c};
  tpu_val_t x = tpu_ir_reshape(g, tpu_lower_input(z->cx, arg, z->acc), d, 3);
  return tpu_ir_reshape(g, tpu_ir_transpose(g, x, perm), r, 2);
}

static tpu_val_t bcast_c(gs_t* z, tpu_val_t v) {
  static const int64_t bd[2] = {0, 1};
  int64_t d[3] = {z->n, z->m, z->c};
  return tpu_ir_broadcast(z->g, v, d, 3, bd);
}

static void out_shape(const gs_t* z, int64_t* out) {
  out[0] = z->n;
  out[1] = z->c;
  for (int i = 0; i < z->s; ++i) out[2 + i] = z->out_sp[i];
}

// grid_sampler_2d / 3d(Tensor input, Tensor grid, int interpolation_mode,
//                      int padding_mode, bool align_corners)
static tpu_status_t grid_sampler(tpu_lower_ctx_t* cx, int s) {
  gs_t z;
  TPU_RETURN_IF_ERROR(gs_plan(cx, 0, 1, 2, s, &z));
  tpu_graph_t* g = cx->g;
  int64_t out[5];
  out_shape(&z, out);
  if (z.n == 0 || z.m == 0 || z.c == 0) {
    tpu_lower_out(cx, 0, tpu_ir_const(g, z.t, 0, out, s + 2));
    return TPU_OK;
  }
  gs_taps_t tp[3];
  gs_taps(&z, 1, tp);
  tpu_val_t x = input_rows(&z, 0);
  int64_t d3[3] = {z.n, z.m, z.c};
  tpu_val_t acc = tpu_ir_const(g, z.acc, 0, d3, 3);
  int pick[3] = {0, 0, 0};
  do {
    gs_tap_t tap;
    tap_combo(&z, tp, pick, &tap);
    tpu_val_t v =
        tpu_ir_binary(g, TPU_IR_MUL, tpu_gather_rows(g, x, tap.row, 2, z.c), bcast_c(&z, tap.w));
    // out-of-bounds taps read nothing (their clamped row may hold inf / NaN)
    v = tpu_ir_select(g, bcast_c(&z, tap.inside), v, tpu_ir_const(g, z.acc, 0, d3, 3));
    acc = tpu_ir_binary(g, TPU_IR_ADD, acc, v);
  } while (next_pick(tp, s, pick));
  int64_t perm[3] = {0, 2, 1};
  tpu_val_t r = tpu_ir_reshape(g, tpu_ir_transpose(g, acc, perm), out, s + 2);
  tpu_lower_out(cx, 0, tpu_ir_convert(g, r, z.t));
  return TPU_OK;
}

tpu_status_t tpu_lower_grid_sampler_2d(tpu_lower_ctx_t* cx) { return grid_sampler(cx, 2); }
tpu_status_t tpu_lower_grid_sampler_3d(tpu_lower_ctx_t* cx) { return grid_sampler(cx, 3); }

static bool mask_bit(const tpu_lower_ctx_t* cx, int i, int j) {
  const tpu_arg_t* a = tpu_arg(cx, i);
  return a->kind == TPU_ARG_BOOLS && j < a->count ? a->bools[j] : true;
}

// grid_sampler_2d / 3d_backward(Tensor grad_output, Tensor input, Tensor grid,
//   int interpolation_mode, int padding_mode, bool align_corners,
//   bool[2] output_mask): (grad_input, or undefined when output_mask[0] is
//   false, as CPU's kernel; grad_grid).
static tpu_status_t grid_sampler_backward(tpu_lower_ctx_t* cx, int s) {
  gs_t z;
  TPU_RETURN_IF_ERROR(gs_plan(cx, 1, 2, 3, s, &z));
  tpu_graph_t* g = cx->g;
  bool want_input = mask_bit(cx, 6, 0);
  const int64_t* di = tpu_arg_sizes(cx, 1);
  const int64_t* dgr = tpu_arg_sizes(cx, 2);
  int64_t out[5];
  out_shape(&z, out);
  const int64_t* dgo = tpu_arg_sizes(cx, 0);
  if (tpu_arg_rank(cx, 0) != s + 2 || memcmp(dgo, out, sizeof(int64_t) * (size_t)(s + 2)) != 0)
    return TPU_LOWER_ERROR(TPU_CODE_INVALID_ARGUMENT,
                           "grid_sampler backward: grad_output must have the output's shape");
  if (z.n == 0 || z.m == 0 || z.c == 0) {
    tpu_lower_out(cx, 0, want_input ? tpu_ir_const(g, z.t, 0, di, s + 2) : TPU_VAL_NONE);
    tpu_lower_out(cx, 1, tpu_ir_const(g, z.t, 0, dgr, s + 2));
    return TPU_OK;
  }
  gs_taps_t tp[3];
  gs_taps(&z, 2, tp);
  tpu_val_t x = input_rows(&z, 1);
  int64_t d3[3] = {z.n, z.m, z.c}, dflat[3] = {z.n, z.c, z.m}, perm[3] = {0, 2, 1};
  tpu_val_t go = tpu_ir_reshape(g, tpu_lower_input(cx, 0, z.acc), dflat, 3);
  go = tpu_ir_transpose(g, go, perm);  // [N, M, C]
  tpu_val_t zero3 = tpu_ir_const(g, z.acc, 0, d3, 3);
  int64_t rows[2] = {z.n * z.p, z.c};
  tpu_val_t gin = tpu_ir_const(g, z.acc, 0, rows, 2);
  tpu_val_t gg[3];
  for (int i = 0; i < s; ++i) gg[i] = cst(&z, 0);
  static const int64_t over_c = 2;
  int pick[3] = {0, 0, 0};
  do {
    gs_tap_t tap;
    tap_combo(&z, tp, pick, &tap);
    tpu_val_t inside = bcast_c(&z, tap.inside);
    if (want_input) {
      tpu_val_t upd = tpu_ir_select(
          g, inside, tpu_ir_binary(g, TPU_IR_MUL, go, bcast_c(&z, tap.w)), zero3);
      tpu_scatter_dims_t dn;
      memset(&dn, 0, sizeof dn);
      dn.n_update_window = 1;
      dn.update_window_dims[0] = 2;
      dn.n_inserted = 1;
      dn.n_to_operand = 1;
      dn.index_vector_dim = 2;
      gin = tpu_ir_scatter(g, gin, tap.row, upd, &dn, TPU_BODY_ADD);
    }
    if (z.interp != GS_NEAREST) {
      // sum over channels of value * output gradient at this tap
      tpu_val_t vg = tpu_ir_select(
          g, inside, tpu_ir_binary(g, TPU_IR_MUL, tpu_gather_rows(g, x, tap.row, 2, z.c), go),
          zero3);
      vg = tpu_ir_reduce(g, vg, tpu_ir_const(g, z.acc, 0, NULL, 0), &over_c, 1, TPU_BODY_ADD);
      for (int i = 0; i < s; ++i) gg[i] = add(&z, gg[i], mul(&z, vg, tap.part[i]));
    }
  } while (next_pick(tp, s, pick));
  if (want_input) {
    int64_t dsp[3] = {z.n, z.p, z.c};
    tpu_val_t r = tpu_ir_transpose(g, tpu_ir_reshape(g, gin, dsp, 3), perm);
    tpu_lower_out(cx, 0, tpu_ir_convert(g, tpu_ir_reshape(g, r, di, s + 2), z.t));
  } else {
    tpu_lower_out(cx, 0, TPU_VAL_NONE);
  }
  // grid component k is spatial dim s - 1 - k
  tpu_val_t comps[3];
  int64_t d31[3] = {z.n, z.m, 1};
  for (int k = 0; k < s; ++k) {
    int i = s - 1 - k;
    tpu_val_t v = z.interp == GS_NEAREST ? cst(&z, 0) : mul(&z, gg[i], tp[i].mult);
    comps[k] = tpu_ir_reshape(g, v, d31, 3);
  }
  tpu_val_t grid_grad = tpu_ir_reshape(g, tpu_ir_concat(g, comps, s, 2), dgr, s + 2);
  tpu_lower_out(cx, 1, tpu_ir_convert(g, grid_grad, z.t));
  return TPU_OK;
}

tpu_status_t tpu_lower_grid_sampler_2d_backward(tpu_lower_ctx_t* cx) {
  return grid_sampler_backward(cx, 2);
}
tpu_status_t tpu_lower_grid_sampler_3d_backward(tpu_lower_ctx_t* cx) {
  return grid_sampler_backward(cx, 3);
}

//===--- max unpooling ---===//
//
// Each plane's values go to the flat output positions their indices name.
// Where indices repeat, CPU's sequential writes leave the last one: a
// scatter-max of positions picks that writer per output slot, and a gather
// reads its value (a plain scatter would pick an arbitrary writer).

static const char* const unpool_kernel[4] = {"", "", "max_unpool2d", "max_unpool3d"};

// self, indices: [.., C, spatial...] with `s` spatial dims; out_sp the output
// spatial sizes.
static tpu_status_t max_unpool(tpu_lower_ctx_t* cx, int s, const int64_t* out_sp) {
  tpu_graph_t* g = cx->g;
  int rank = tpu_arg_rank(cx, 0);
  const int64_t* d = tpu_arg_sizes(cx, 0);
  tpu_dtype_t t = tpu_arg_value_dtype(cx, 0);
  if (!tpu_dtype_is_float(t) || tpu_dtype_is_complex(t))
    return tpu_not_implemented(unpool_kernel[s], t);
  int64_t out[TPU_MAX_RANK], lead = 1, l = 1, o = 1;
  for (int i = 0; i < rank - s; ++i) {
    out[i] = d[i];
    lead *= d[i];
  }
  for (int i = 0; i < s; ++i) {
    out[rank - s + i] = out_sp[i];
    l *= d[rank - s + i];
    o *= out_sp[i];
  }
  int64_t pl[2] = {lead, l}, po[2] = {lead, o};
  if (lead * o == 0 || l == 0) {
    tpu_lower_out(cx, 0, tpu_ir_const(g, t, 0, out, rank));
    return TPU_OK;
  }
  tpu_val_t idx = tpu_ir_reshape(g, tpu_lower_tensor(cx, 1), pl, 2);
  tpu_val_t bad = tpu_ir_binary(g, TPU_IR_OR,
                                tpu_ir_compare(g, TPU_CMP_LT, idx, tpu_ir_const_i(g, TPU_I64, 0, pl, 2)),
                                tpu_ir_compare(g, TPU_CMP_GE, idx, tpu_ir_const_i(g, TPU_I64, o, pl, 2)));
  static const int64_t both[2] = {0, 1};
  char sizes[64];
  size_t k = 0;
  for (int i = 0; i < s && k < sizeof sizes; ++i)
    k += (size_t)snprintf(sizes + k, sizeof sizes - k, "%s%lld", i ? "x" : "", (long long)out_sp[i]);
  tpu_lower_assert(cx, tpu_ir_reduce(g, bad, tpu_ir_const_i(g, TPU_BOOL, 0, NULL, 0), both, 2, TPU_BODY_OR),
                   TPU_CODE_INVALID_ARGUMENT,
                   "Found an invalid max index (output volumes are of size %s)", sizes);
  tpu_val_t win = tpu_scatter_points(g, tpu_ir_const_i(g, TPU_I64, -1, po, 2),
                                     tpu_ir_iota(g, TPU_I64, pl, 2, 0), idx,
                                     tpu_ir_iota(g, TPU_I64, pl, 2, 1), TPU_BODY_MAX);
  // read the winner's value: flat offset plane * l + position
  tpu_val_t has = tpu_ir_compare(g, TPU_CMP_GE, win, tpu_ir_const_i(g, TPU_I64, 0, po, 2));
  tpu_val_t off = tpu_ir_binary(
      g, TPU_IR_ADD,
      tpu_ir_binary(g, TPU_IR_MUL, tpu_ir_iota(g, TPU_I64, po, 2, 0),
                    tpu_ir_const_i(g, TPU_I64, l, po, 2)),
      tpu_ir_binary(g, TPU_IR_MAX, win, tpu_ir_const_i(g, TPU_I64, 0, po, 2)));
  int64_t flat = lead * l;
  tpu_val_t v = tpu_gather_flat(g, tpu_ir_reshape(g, tpu_lower_tensor(cx, 0), &flat, 1), off, 2);
  v = tpu_ir_select(g, has, v, tpu_ir_const(g, t, 0, po, 2));
  tpu_lower_out(cx, 0, tpu_ir_reshape(g, v, out, rank));
  return TPU_OK;
}

static tpu_status_t unpool_common_checks(tpu_lower_ctx_t* cx, int s, int nsize) {
  const char* names = s == 2 ? "two elements (height, width)" : "three elements (depth, height, width)";
  if (tpu_arg_value_dtype(cx, 1) != TPU_I64)
    return TPU_LOWER_ERROR(TPU_CODE_INVALID_ARGUMENT,
                           "elements in indices should be type int64 but got: %s",
                           tpu_dtype_torch_name(tpu_arg_value_dtype(cx, 1)));
  if (nsize != s)
    return TPU_LOWER_ERROR(TPU_CODE_INVALID_ARGUMENT,
                           "There should be exactly %s in output_size, but got %d elements.", names,
                           nsize);
  int rank = tpu_arg_rank(cx, 0);
  if (rank != s + 1 && rank != s + 2)
    return TPU_LOWER_ERROR(TPU_CODE_INVALID_ARGUMENT,
                           "Input to max_unpooling%dd should be a %dd or %dd Tensor, but got a "
                           "tensor with %d dimensions.", s, s + 1, s + 2, rank);
  if (tpu_arg_rank(cx, 1) != rank ||
      memcmp(tpu_arg_sizes(cx, 0), tpu_arg_sizes(cx, 1), sizeof(int64_t) * (size_t)rank) != 0)
    return TPU_LOWER_ERROR(TPU_CODE_INVALID_ARGUMENT,
                           "Expected shape of indices to be same as that of the input tensor");
  const int64_t* d = tpu_arg_sizes(cx, 0);
  for (int i = 1; i < rank; ++i)
    if (d[i] <= 0)
      return TPU_LOWER_ERROR(TPU_CODE_INVALID_ARGUMENT,
                             "max_unpooling%dd_forward_out_cpu(): Expected input to have non-zero "
                             "size for non-batch dimensions, but got an empty dimension %d",
                             s, i);
  return TPU_OK;
}

// max_unpool2d(Tensor self, Tensor indices, SymInt[2] output_size)
tpu_status_t tpu_lower_max_unpool2d(tpu_lower_ctx_t* cx) {
  const int64_t* os = NULL;
  int n = tpu_arg_ints(cx, 2, &os);
  TPU_RETURN_IF_ERROR(unpool_common_checks(cx, 2, n));
  return max_unpool(cx, 2, os);
}

// max_unpool3d(Tensor self, Tensor indices, SymInt[3] output_size,
//              int[3] stride, int[3] padding)
tpu_status_t tpu_lower_max_unpool3d(tpu_lower_ctx_t* cx) {
  const int64_t *os = NULL, *st = NULL, *pd = NULL;
  int n = tpu_arg_ints(cx, 2, &os);
  int ns = tpu_arg_ints(cx, 3, &st), np = tpu_arg_ints(cx, 4, &pd);
  TPU_RETURN_IF_ERROR(unpool_common_checks(cx, 3, n));
  if (ns != 3)
    return TPU_LOWER_ERROR(TPU_CODE_INVALID_ARGUMENT,
                           "There should be exactly three elements (depth, height, width) in "
                           "stride, but got: %d elements.", ns);
  if (np != 3)
    return TPU_LOWER_ERROR(TPU_CODE_INVALID_ARGUMENT,
                           "There should be exactly three elements (depth, height, width) in "
                           "padding, but got: %d elements.", np);
  for (int i = 0; i < 3; ++i)
    if (st[i] <= 0)
      return TPU_LOWER_ERROR(TPU_CODE_INVALID_ARGUMENT,
                             "strides should be greater than zero, but got stride: %lld",
                             (long long)st[i]);
  return max_unpool(cx, 3, os);
}
