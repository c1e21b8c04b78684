// Gathers and scatters at computed positions: grid sampling
// (grid_sampler_2d / 3d and their backward), embedding bags, max
// unpooling. (embedding_renorm_ is in lower_math_extra.c.)
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

// Rows of x [N * P, C] at row [N, M] -> [N, M, C].
static tpu_val_t gather_rows(gs_t* z, tpu_val_t x, tpu_val_t row) {
  tpu_gather_dims_t dn;
  memset(&dn, 0, sizeof dn);
  dn.n_offset = 1;
  dn.offset_dims[0] = 2;
  dn.n_collapsed = 1;
  dn.n_start_map = 1;
  dn.index_vector_dim = 2;
  int64_t sizes[2] = {1, z->c};
  return tpu_ir_gather(z->g, x, row, &dn, sizes);
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
    tpu_val_t v = tpu_ir_binary(g, TPU_IR_MUL, gather_rows(&z, x, tap.row), bcast_c(&z, tap.w));
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
          g, inside, tpu_ir_binary(g, TPU_IR_MUL, gather_rows(&z, x, tap.row), go), zero3);
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

//===--- embedding bags ---===//
//
// A bag is a run of indices between consecutive offsets. Each index's bag
// (offset2bag) is a count of the offsets at or before its position: ones
// scattered at the offsets, then a prefix sum. Rows of the weight are
// gathered per index and scatter-reduced into their bags (add for sum and
// mean; max, then the first position reaching it for max mode's indices).
// Indices equal to padding_idx are masked out (and not counted in a bag's
// size). The auxiliary results follow CPU's shapes: offset2bag is empty on
// CPU's fast sum path, and bag_size / max_indices are placeholders of the
// bags' (forward_only: the offsets') shape in sum mode, which nothing
// reads.

enum { EB_SUM = 0, EB_MEAN = 1, EB_MAX = 2 };

// Rows of x [V, D] at idx [L] -> [L, D].
static tpu_val_t eb_gather_rows(tpu_graph_t* g, tpu_val_t x, tpu_val_t idx, int64_t d) {
  tpu_gather_dims_t dn;
  memset(&dn, 0, sizeof dn);
  dn.n_offset = 1;
  dn.offset_dims[0] = 1;
  dn.n_collapsed = 1;
  dn.n_start_map = 1;
  dn.index_vector_dim = 1;
  int64_t sizes[2] = {1, d};
  return tpu_ir_gather(g, x, idx, &dn, sizes);
}

// Elements of a 1-D x at i64 indices of rank r (result: the indices' shape).
static tpu_val_t eb_gather_1d(tpu_graph_t* g, tpu_val_t x, tpu_val_t idx, int r) {
  tpu_gather_dims_t dn;
  memset(&dn, 0, sizeof dn);
  dn.n_collapsed = 1;
  dn.n_start_map = 1;
  dn.index_vector_dim = r;
  int64_t one = 1;
  return tpu_ir_gather(g, x, idx, &dn, &one);
}

// into [B, D] combined with upd [L, D] at rows idx [L].
static tpu_val_t eb_scatter_rows(tpu_graph_t* g, tpu_val_t into, tpu_val_t idx, tpu_val_t upd,
                                 tpu_body_t body) {
  tpu_scatter_dims_t dn;
  memset(&dn, 0, sizeof dn);
  dn.n_update_window = 1;
  dn.update_window_dims[0] = 1;
  dn.n_inserted = 1;
  dn.n_to_operand = 1;
  dn.index_vector_dim = 1;
  return tpu_ir_scatter(g, into, idx, upd, &dn, body);
}

// 1-D into [K] combined with upd [L] at idx [L]; out-of-range updates drop.
static tpu_val_t eb_scatter_1d(tpu_graph_t* g, tpu_val_t into, tpu_val_t idx, tpu_val_t upd,
                               tpu_body_t body) {
  tpu_scatter_dims_t dn;
  memset(&dn, 0, sizeof dn);
  dn.n_inserted = 1;
  dn.n_to_operand = 1;
  dn.index_vector_dim = 1;
  return tpu_ir_scatter(g, into, idx, upd, &dn, body);
}

// Inclusive prefix sum of a 1-D i64 value of length n (Hillis-Steele).
static tpu_val_t eb_prefix_sum(tpu_graph_t* g, tpu_val_t x, int64_t n) {
  tpu_val_t zero = tpu_ir_const_i(g, TPU_I64, 0, NULL, 0);
  int64_t start = 0, interior = 0, hi = 0;
  for (int64_t k = 1; k < n; k <<= 1) {
    int64_t limit = n - k, lo = k;
    tpu_val_t shifted = tpu_ir_pad(g, tpu_ir_slice(g, x, &start, &limit, NULL), zero, &lo, &hi,
                                   &interior);
    x = tpu_ir_binary(g, TPU_IR_ADD, x, shifted);
  }
  return x;
}

// The bag of each of l positions from the first nb of the offsets [o] (i64):
// how many of them are <= the position, minus one.
static tpu_val_t eb_offset2bag(tpu_graph_t* g, tpu_val_t off, int64_t o, int64_t nb, int64_t l) {
  int64_t start = 0, len = l + 1;
  tpu_val_t first = nb < o ? tpu_ir_slice(g, off, &start, &nb, NULL) : off;
  tpu_val_t marks = eb_scatter_1d(g, tpu_ir_const_i(g, TPU_I64, 0, &len, 1), first,
                                  tpu_ir_const_i(g, TPU_I64, 1, &nb, 1), TPU_BODY_ADD);
  tpu_val_t c = tpu_ir_slice(g, eb_prefix_sum(g, marks, len), &start, &l, NULL);
  return tpu_ir_binary(g, TPU_IR_SUB, c, tpu_ir_const_i(g, TPU_I64, 1, &l, 1));
}

// A 0-d bool: any element of the 1-D bool b.
static tpu_val_t eb_any(tpu_graph_t* g, tpu_val_t b) {
  static const int64_t d0 = 0;
  return tpu_ir_reduce(g, b, tpu_ir_const_i(g, TPU_BOOL, 0, NULL, 0), &d0, 1, TPU_BODY_OR);
}

static bool eb_index_dtype(tpu_dtype_t t) { return t == TPU_I64 || t == TPU_I32; }

static tpu_status_t eb_check_weight(tpu_lower_ctx_t* cx, int i) {
  tpu_dtype_t t = tpu_arg_value_dtype(cx, i);
  if (!tpu_dtype_is_float(t) || tpu_dtype_is_complex(t) || tpu_arg_rank(cx, i) != 2)
    return TPU_LOWER_ERROR(TPU_CODE_INVALID_ARGUMENT,
                           "Expected tensor for argument #1 'weight' to have one of the following "
                           "scalar types: Half, BFloat16, Float, Double; but got %s (2-D) instead "
                           "(while checking arguments for embedding_bag)",
                           tpu_dtype_torch_name(t));
  return TPU_OK;
}

// Indices [L] as i64, asserted within [0, v).
static tpu_val_t eb_indices(tpu_lower_ctx_t* cx, int arg, int64_t l, int64_t v) {
  tpu_graph_t* g = cx->g;
  tpu_val_t idx = tpu_ir_convert(g, tpu_lower_tensor(cx, arg), TPU_I64);
  tpu_val_t bad = tpu_ir_binary(
      g, TPU_IR_OR, tpu_ir_compare(g, TPU_CMP_LT, idx, tpu_ir_const_i(g, TPU_I64, 0, &l, 1)),
      tpu_ir_compare(g, TPU_CMP_GE, idx, tpu_ir_const_i(g, TPU_I64, v, &l, 1)));
  tpu_lower_assert(cx, eb_any(g, bad), TPU_CODE_INVALID_ARGUMENT,
                   "embedding_bag: an index of input is not in the valid range [0, %lld)",
                   (long long)v);
  return idx;
}

// Indices not equal to padding_idx (all when it is negative).
static tpu_val_t eb_valid(tpu_graph_t* g, tpu_val_t idx, int64_t l, int64_t pad) {
  if (pad < 0) return tpu_ir_const_i(g, TPU_BOOL, 1, &l, 1);
  return tpu_ir_compare(g, TPU_CMP_NE, idx, tpu_ir_const_i(g, TPU_I64, pad, &l, 1));
}

// _embedding_bag / _embedding_bag_forward_only(Tensor weight, Tensor indices,
//   Tensor offsets, bool scale_grad_by_freq=False, int mode=0,
//   bool sparse=False, Tensor? per_sample_weights=None,
//   bool include_last_offset=False, int padding_idx=-1)
//   -> (output, offset2bag, bag_size, max_indices)
// forward_only: CPU sizes sum mode's placeholders by the offsets, not the
// bags.
static tpu_status_t embedding_bag(tpu_lower_ctx_t* cx, bool forward_only) {
  tpu_graph_t* g = cx->g;
  TPU_RETURN_IF_ERROR(eb_check_weight(cx, 0));
  if (tpu_arg_rank(cx, 1) != 1)
    return TPU_LOWER_ERROR(TPU_CODE_INVALID_ARGUMENT,
                           "input has to be a 1D Tensor, but got Tensor of dimension %d",
                           tpu_arg_rank(cx, 1));
  if (tpu_arg_rank(cx, 2) != 1)
    return TPU_LOWER_ERROR(TPU_CODE_INVALID_ARGUMENT,
                           "offsets has to be a 1D Tensor, but got Tensor of dimension %d",
                           tpu_arg_rank(cx, 2));
  tpu_dtype_t it = tpu_arg_value_dtype(cx, 1), ot = tpu_arg_value_dtype(cx, 2);
  if (!eb_index_dtype(it) || !eb_index_dtype(ot))
    return TPU_LOWER_ERROR(TPU_CODE_INVALID_ARGUMENT,
                           "embedding_bag: expected indices and offsets of dtype int32 or int64");
  // the auxiliary results take the promoted index dtype (CPU promotes
  // indices and offsets together)
  if (it == TPU_I64) ot = TPU_I64;
  int64_t mode = tpu_arg_int(cx, 4, 0), pad = tpu_arg_int(cx, 8, -1);
  bool incl = tpu_arg_bool(cx, 7, false), has_psw = tpu_arg_present(cx, 6);
  if (mode < 0 || mode > 2)
    return TPU_LOWER_ERROR(TPU_CODE_INVALID_ARGUMENT, "embedding_bag: unknown mode %lld",
                           (long long)mode);
  if (has_psw && mode != EB_SUM)
    return TPU_LOWER_ERROR(TPU_CODE_INVALID_ARGUMENT,
                           "embedding_bag: per_sample_weights only supported with mode='sum'");
  const int64_t* wd = tpu_arg_sizes(cx, 0);
  int64_t v = wd[0], d = wd[1], l = tpu_arg_sizes(cx, 1)[0], o = tpu_arg_sizes(cx, 2)[0];
  if (incl && o < 1)
    return TPU_LOWER_ERROR(TPU_CODE_INVALID_ARGUMENT,
                           "include_last_offset: number of offset should be at least 1");
  int64_t nb = incl ? o - 1 : o;
  if (has_psw && (tpu_arg_rank(cx, 6) != 1 || tpu_arg_sizes(cx, 6)[0] != l))
    return TPU_LOWER_ERROR(TPU_CODE_INVALID_ARGUMENT,
                           "embedding_bag: per_sample_weights has to be 1D with as many elements "
                           "as input");
  tpu_dtype_t t = tpu_arg_value_dtype(cx, 0), acc = tpu_opmath(t);
  if (has_psw && tpu_arg_value_dtype(cx, 6) != t)
    return TPU_LOWER_ERROR(TPU_CODE_INVALID_ARGUMENT, "expected scalar type %s but found %s",
                           tpu_dtype_torch_name(t),
                           tpu_dtype_torch_name(tpu_arg_value_dtype(cx, 6)));
  bool fast_sum = mode == EB_SUM && t != TPU_F64 && pad < 0;
  // data checks: the offsets start at 0 and stay within the input
  tpu_val_t off = tpu_ir_convert(g, tpu_lower_tensor(cx, 2), TPU_I64);
  if (o > 0) {
    int64_t z0 = 0, z1 = 1, last = o - 1;
    tpu_val_t first = tpu_ir_reshape(g, tpu_ir_slice(g, off, &z0, &z1, NULL), NULL, 0);
    tpu_lower_assert(cx, tpu_ir_compare(g, TPU_CMP_NE, first, tpu_ir_const_i(g, TPU_I64, 0, NULL, 0)),
                     TPU_CODE_INVALID_ARGUMENT,
                     "offsets[0] has to be 0, i.e., the first sequence in the mini-batch has to "
                     "start from position 0.");
    tpu_val_t lastv = tpu_ir_reshape(g, tpu_ir_slice(g, off, &last, &o, NULL), NULL, 0);
    tpu_lower_assert(cx, tpu_ir_compare(g, TPU_CMP_GT, lastv, tpu_ir_const_i(g, TPU_I64, l, NULL, 0)),
                     TPU_CODE_INVALID_ARGUMENT,
                     "offsets[-1] can not be greater than input's length %lld", (long long)l);
  }
  int64_t od[2] = {nb, d}, zero_len = 0;
  tpu_val_t out, bag = TPU_VAL_NONE, count = TPU_VAL_NONE, maxidx = TPU_VAL_NONE;
  if (l == 0 || nb <= 0 || d == 0 || v == 0) {
    if (l > 0 && v > 0) (void)eb_indices(cx, 1, l, v);
    out = tpu_ir_const(g, acc, 0, od, 2);
    bag = tpu_ir_const_i(g, TPU_I64, 0, &l, 1);
    count = tpu_ir_const_i(g, TPU_I64, 0, &nb, 1);
    maxidx = tpu_ir_const_i(g, TPU_I64, 0, od, 2);
    if (l > 0 && nb > 0) {
      bag = eb_offset2bag(g, off, o, nb, l);
      if (v > 0) {
        tpu_val_t valid = eb_valid(g, eb_indices(cx, 1, l, v), l, pad);
        count = eb_scatter_1d(g, count, bag, tpu_ir_convert(g, valid, TPU_I64), TPU_BODY_ADD);
      }
    }
  } else {
    tpu_val_t idx = eb_indices(cx, 1, l, v);
    tpu_val_t valid = eb_valid(g, idx, l, pad);
    bag = eb_offset2bag(g, off, o, nb, l);
    count = eb_scatter_1d(g, tpu_ir_const_i(g, TPU_I64, 0, &nb, 1), bag,
                          tpu_ir_convert(g, valid, TPU_I64), TPU_BODY_ADD);
    int64_t ld[2] = {l, d};
    static const int64_t b0 = 0;
    tpu_val_t valid2 = tpu_ir_broadcast(g, valid, ld, 2, &b0);
    tpu_val_t rows = eb_gather_rows(g, tpu_ir_convert(g, tpu_lower_tensor(cx, 0), acc), idx, d);
    if (has_psw)
      rows = tpu_ir_binary(g, TPU_IR_MUL, rows,
                           tpu_ir_broadcast(g, tpu_lower_input(cx, 6, acc), ld, 2, &b0));
    if (mode != EB_MAX) {
      out = eb_scatter_rows(g, tpu_ir_const(g, acc, 0, od, 2), bag,
                            tpu_ir_select(g, valid2, rows, tpu_ir_const(g, acc, 0, ld, 2)),
                            TPU_BODY_ADD);
      if (mode == EB_MEAN) {
        tpu_val_t n = tpu_ir_binary(g, TPU_IR_MAX, count, tpu_ir_const_i(g, TPU_I64, 1, &nb, 1));
        out = tpu_ir_binary(g, TPU_IR_DIV, out,
                            tpu_ir_broadcast(g, tpu_ir_convert(g, n, acc), od, 2, &b0));
      }
    } else {
      tpu_val_t ninf = tpu_ir_const(g, acc, -INFINITY, ld, 2);
      tpu_val_t bmax = eb_scatter_rows(g, tpu_ir_const(g, acc, -INFINITY, od, 2), bag,
                                       tpu_ir_select(g, valid2, rows, ninf), TPU_BODY_MAX);
      // the first position of each bag and column that reaches the maximum
      tpu_val_t hit = tpu_ir_binary(
          g, TPU_IR_AND, valid2,
          tpu_ir_compare(g, TPU_CMP_EQ, rows, eb_gather_rows(g, bmax, bag, d)));
      tpu_val_t pos = tpu_ir_select(g, hit, tpu_ir_iota(g, TPU_I64, ld, 2, 0),
                                    tpu_ir_const_i(g, TPU_I64, l, ld, 2));
      tpu_val_t first = eb_scatter_rows(g, tpu_ir_const_i(g, TPU_I64, l, od, 2), bag, pos,
                                        TPU_BODY_MIN);
      tpu_val_t has = tpu_ir_compare(g, TPU_CMP_LT, first, tpu_ir_const_i(g, TPU_I64, l, od, 2));
      out = tpu_ir_select(g, has, bmax, tpu_ir_const(g, acc, 0, od, 2));
      tpu_val_t at = tpu_ir_binary(g, TPU_IR_MIN, first, tpu_ir_const_i(g, TPU_I64, l - 1, od, 2));
      maxidx = tpu_ir_select(g, has, eb_gather_1d(g, idx, at, 2),
                             tpu_ir_const_i(g, TPU_I64, 0, od, 2));
    }
  }
  tpu_lower_out(cx, 0, tpu_ir_convert(g, out, t));
  tpu_lower_out(cx, 1, fast_sum ? tpu_ir_const_i(g, ot, 0, &zero_len, 1) : tpu_ir_convert(g, bag, ot));
  if (mode == EB_SUM) {
    int64_t* ph = forward_only ? &o : &nb;
    tpu_lower_out(cx, 2, tpu_ir_const_i(g, ot, 0, ph, 1));
    tpu_lower_out(cx, 3, tpu_ir_const_i(g, ot, 0, ph, 1));
  } else {
    tpu_lower_out(cx, 2, tpu_ir_convert(g, count, ot));
    // (mean mode: CPU's max_indices holds a copy of bag_size)
    tpu_lower_out(cx, 3, tpu_ir_convert(g, mode == EB_MAX ? maxidx : count, ot));
  }
  return TPU_OK;
}

tpu_status_t tpu_lower_embedding_bag(tpu_lower_ctx_t* cx) { return embedding_bag(cx, false); }
tpu_status_t tpu_lower_embedding_bag_forward_only(tpu_lower_ctx_t* cx) {
  return embedding_bag(cx, true);
}


// Argument positions of the two backward forms.
typedef struct eb_bwd_args {
  int grad, indices, offsets, offset2bag, bag_size, max_indices, num_weights, freq, mode, psw,
      pad;
} eb_bwd_args_t;

static tpu_status_t eb_backward(tpu_lower_ctx_t* cx, const eb_bwd_args_t* a) {
  tpu_graph_t* g = cx->g;
  int64_t v = tpu_arg_int(cx, a->num_weights, 0), mode = tpu_arg_int(cx, a->mode, 0);
  int64_t pad = tpu_arg_int(cx, a->pad, -1);
  bool freq = tpu_arg_bool(cx, a->freq, false), has_psw = tpu_arg_present(cx, a->psw);
  if (tpu_arg_rank(cx, a->grad) != 2 || tpu_arg_rank(cx, a->indices) != 1)
    return TPU_LOWER_ERROR(TPU_CODE_INVALID_ARGUMENT,
                           "embedding_bag backward: expected 2-D grad and 1-D indices");
  const int64_t* gd = tpu_arg_sizes(cx, a->grad);
  int64_t nb = gd[0], d = gd[1], l = tpu_arg_sizes(cx, a->indices)[0];
  tpu_dtype_t t = tpu_arg_value_dtype(cx, a->grad), acc = tpu_opmath(t);
  int64_t wd[2] = {v, d}, ld[2] = {l, d};
  static const int64_t b0 = 0;
  tpu_val_t gw = tpu_ir_const(g, acc, 0, wd, 2);
  if (v == 0 || d == 0 || nb == 0 || (mode != EB_MAX && l == 0)) {
    tpu_lower_out(cx, 0, tpu_ir_convert(g, gw, t));
    return TPU_OK;
  }
  tpu_val_t grad = tpu_lower_input(cx, a->grad, acc);
  if (mode == EB_MAX) {
    // each bag's maximum row per column gets that column's gradient
    if (tpu_arg_rank(cx, a->max_indices) != 2 || tpu_arg_rank(cx, a->bag_size) != 1 ||
        tpu_arg_sizes(cx, a->bag_size)[0] != nb)
      return TPU_LOWER_ERROR(TPU_CODE_INVALID_ARGUMENT,
                             "embedding_bag backward: expected 2-D maximum_indices and a bag "
                             "size per bag");
    tpu_val_t mi = tpu_ir_convert(g, tpu_lower_tensor(cx, a->max_indices), TPU_I64);
    tpu_val_t nonempty =
        tpu_ir_compare(g, TPU_CMP_NE, tpu_ir_convert(g, tpu_lower_tensor(cx, a->bag_size), TPU_I64),
                       tpu_ir_const_i(g, TPU_I64, 0, &nb, 1));
    int64_t od[2] = {nb, d}, od3[3] = {nb, d, 1};
    tpu_val_t upd = tpu_ir_select(g, tpu_ir_broadcast(g, nonempty, od, 2, &b0), grad,
                                  tpu_ir_const(g, acc, 0, od, 2));
    tpu_val_t ij[2] = {tpu_ir_reshape(g, mi, od3, 3),
                       tpu_ir_reshape(g, tpu_ir_iota(g, TPU_I64, od, 2, 1), od3, 3)};
    tpu_scatter_dims_t dn;
    memset(&dn, 0, sizeof dn);
    dn.n_inserted = 2;
    dn.inserted_window_dims[1] = 1;
    dn.n_to_operand = 2;
    dn.scatter_dims_to_operand_dims[1] = 1;
    dn.index_vector_dim = 2;
    gw = tpu_ir_scatter(g, gw, tpu_ir_concat(g, ij, 2, 2), upd, &dn, TPU_BODY_ADD);
    tpu_lower_out(cx, 0, tpu_ir_convert(g, gw, t));
    return TPU_OK;
  }
  tpu_val_t idx = eb_indices(cx, a->indices, l, v);
  int64_t o2b = tpu_numel(tpu_arg_sizes(cx, a->offset2bag), tpu_arg_rank(cx, a->offset2bag));
  tpu_val_t bag;
  if (o2b == 0 && a->offsets >= 0) {
    // CPU's fast sum path left offset2bag empty: rebuilt from the offsets
    if (tpu_arg_rank(cx, a->offsets) != 1)
      return TPU_LOWER_ERROR(TPU_CODE_INVALID_ARGUMENT, "offsets has to be a 1D Tensor");
    int64_t o = tpu_arg_sizes(cx, a->offsets)[0];
    bag = eb_offset2bag(g, tpu_ir_convert(g, tpu_lower_tensor(cx, a->offsets), TPU_I64), o, o, l);
  } else {
    if (o2b != l)
      return TPU_LOWER_ERROR(TPU_CODE_INVALID_ARGUMENT,
                             "embedding_bag backward: offset2bag must match the indices");
    bag = tpu_ir_reshape(g, tpu_ir_convert(g, tpu_lower_tensor(cx, a->offset2bag), TPU_I64), &l, 1);
  }
  tpu_val_t scale = tpu_ir_const(g, acc, 1, &l, 1);
  if (has_psw) scale = tpu_ir_binary(g, TPU_IR_MUL, scale, tpu_lower_input(cx, a->psw, acc));
  if (mode == EB_MEAN) {
    tpu_val_t bs = eb_gather_1d(g, tpu_ir_convert(g, tpu_lower_tensor(cx, a->bag_size), acc), bag, 1);
    tpu_val_t z = tpu_ir_const(g, acc, 0, &l, 1);
    scale = tpu_ir_select(g, tpu_ir_compare(g, TPU_CMP_NE, bs, z),
                          tpu_ir_binary(g, TPU_IR_DIV, scale, bs), scale);
  }
  if (freq) {
    tpu_val_t counts = eb_scatter_1d(g, tpu_ir_const(g, acc, 0, &v, 1), idx,
                                     tpu_ir_const(g, acc, 1, &l, 1), TPU_BODY_ADD);
    scale = tpu_ir_binary(g, TPU_IR_DIV, scale, eb_gather_1d(g, counts, idx, 1));
  }
  scale = tpu_ir_select(g, eb_valid(g, idx, l, pad), scale, tpu_ir_const(g, acc, 0, &l, 1));
  tpu_val_t rows = tpu_ir_binary(g, TPU_IR_MUL, eb_gather_rows(g, grad, bag, d),
                                 tpu_ir_broadcast(g, scale, ld, 2, &b0));
  gw = eb_scatter_rows(g, gw, idx, rows, TPU_BODY_ADD);
  tpu_lower_out(cx, 0, tpu_ir_convert(g, gw, t));
  return TPU_OK;
}

// _embedding_bag_dense_backward(Tensor grad, Tensor indices, Tensor offset2bag,
//   Tensor bag_size, Tensor maximum_indices, SymInt num_weights,
//   bool scale_grad_by_freq, int mode, Tensor? per_sample_weights,
//   int padding_idx=-1)
tpu_status_t tpu_lower_embedding_bag_dense_backward(tpu_lower_ctx_t* cx) {
  static const eb_bwd_args_t a = {0, 1, -1, 2, 3, 4, 5, 6, 7, 8, 9};
  return eb_backward(cx, &a);
}

// _embedding_bag_backward(Tensor grad, Tensor indices, Tensor offsets,
//   Tensor offset2bag, Tensor bag_size, Tensor maximum_indices,
//   SymInt num_weights, bool scale_grad_by_freq, int mode, bool sparse,
//   Tensor? per_sample_weights, int padding_idx=-1): the dense gradient; a
// sparse one is not supported on this device.
tpu_status_t tpu_lower_embedding_bag_backward(tpu_lower_ctx_t* cx) {
  static const eb_bwd_args_t a = {0, 1, 2, 3, 4, 5, 6, 7, 8, 10, 11};
  if (tpu_arg_bool(cx, 9, false))
    return TPU_LOWER_ERROR(TPU_CODE_UNIMPLEMENTED,
                           "embedding_bag: sparse gradients are not supported on tpu");
  return eb_backward(cx, &a);
}

// _embedding_bag_per_sample_weights_backward(Tensor grad, Tensor weight,
//   Tensor indices, Tensor offsets, Tensor offset2bag, int mode,
//   int padding_idx=-1): each index's grad row dotted with its weight row.
tpu_status_t tpu_lower_embedding_bag_psw_backward(tpu_lower_ctx_t* cx) {
  tpu_graph_t* g = cx->g;
  if (tpu_arg_int(cx, 5, 0) != EB_SUM)
    return TPU_LOWER_ERROR(TPU_CODE_INVALID_ARGUMENT,
                           "embedding_bag_backward: Currently only support mode='sum' for "
                           "per_sample_weights.");
  TPU_RETURN_IF_ERROR(eb_check_weight(cx, 1));
  if (tpu_arg_rank(cx, 0) != 2 || tpu_arg_rank(cx, 2) != 1 || tpu_arg_rank(cx, 3) != 1)
    return TPU_LOWER_ERROR(TPU_CODE_INVALID_ARGUMENT,
                           "embedding_bag_backward: expected 2-D grad, 1-D indices and offsets");
  int64_t pad = tpu_arg_int(cx, 6, -1);
  const int64_t* wd = tpu_arg_sizes(cx, 1);
  int64_t v = wd[0], d = wd[1], l = tpu_arg_sizes(cx, 2)[0], o = tpu_arg_sizes(cx, 3)[0];
  int64_t nb = tpu_arg_sizes(cx, 0)[0];
  int64_t o2b = tpu_numel(tpu_arg_sizes(cx, 4), tpu_arg_rank(cx, 4));
  tpu_dtype_t t = tpu_arg_value_dtype(cx, 0), acc = tpu_opmath(t);
  if (l == 0 || d == 0 || nb == 0 || v == 0) {
    tpu_lower_out(cx, 0, tpu_ir_const(g, t, 0, &l, 1));
    return TPU_OK;
  }
  tpu_val_t idx = eb_indices(cx, 2, l, v);
  tpu_val_t bag = o2b == 0 ? eb_offset2bag(g, tpu_ir_convert(g, tpu_lower_tensor(cx, 3), TPU_I64),
                                           o, o, l)
                           : tpu_ir_convert(g, tpu_lower_tensor(cx, 4), TPU_I64);
  tpu_val_t prodv = tpu_ir_binary(
      g, TPU_IR_MUL, eb_gather_rows(g, tpu_lower_input(cx, 0, acc), bag, d),
      eb_gather_rows(g, tpu_lower_input(cx, 1, acc), idx, d));
  static const int64_t over_d = 1;
  tpu_val_t r = tpu_ir_reduce(g, prodv, tpu_ir_const(g, acc, 0, NULL, 0), &over_d, 1, TPU_BODY_ADD);
  r = tpu_ir_select(g, eb_valid(g, idx, l, pad), r, tpu_ir_const(g, acc, 0, &l, 1));
  tpu_lower_out(cx, 0, tpu_ir_convert(g, r, t));
  return TPU_OK;
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
    return TPU_LOWER_ERROR(TPU_CODE_UNIMPLEMENTED, "\"%s\" not implemented for '%s'",
                           unpool_kernel[s], tpu_dtype_torch_name(t));
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
  int64_t pl1[3] = {lead, l, 1};
  tpu_val_t ij[2] = {tpu_ir_reshape(g, tpu_ir_iota(g, TPU_I64, pl, 2, 0), pl1, 3),
                     tpu_ir_reshape(g, idx, pl1, 3)};
  tpu_val_t at = tpu_ir_concat(g, ij, 2, 2);
  tpu_scatter_dims_t dn;
  memset(&dn, 0, sizeof dn);
  dn.n_inserted = 2;
  dn.inserted_window_dims[1] = 1;
  dn.n_to_operand = 2;
  dn.scatter_dims_to_operand_dims[1] = 1;
  dn.index_vector_dim = 2;
  tpu_val_t win = tpu_ir_scatter(g, tpu_ir_const_i(g, TPU_I64, -1, po, 2), at,
                                 tpu_ir_iota(g, TPU_I64, pl, 2, 1), &dn, TPU_BODY_MAX);
  // read the winner's value: flat offset plane * l + position
  tpu_val_t has = tpu_ir_compare(g, TPU_CMP_GE, win, tpu_ir_const_i(g, TPU_I64, 0, po, 2));
  tpu_val_t off = tpu_ir_binary(
      g, TPU_IR_ADD,
      tpu_ir_binary(g, TPU_IR_MUL, tpu_ir_iota(g, TPU_I64, po, 2, 0),
                    tpu_ir_const_i(g, TPU_I64, l, po, 2)),
      tpu_ir_binary(g, TPU_IR_MAX, win, tpu_ir_const_i(g, TPU_I64, 0, po, 2)));
  int64_t flat = lead * l;
  tpu_val_t v = eb_gather_1d(g, tpu_ir_reshape(g, tpu_lower_tensor(cx, 0), &flat, 1), off, 2);
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
