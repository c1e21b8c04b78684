// Normalization layers and their backward: layer norm, batch norm (with
// the running-statistics update PyTorch does in place), group norm and RMS
// norm.
//
// Statistics and the normalized result are computed in float for half
// precision (double for double) and rounded once, as CPU's kernels do; the
// variance is the mean squared deviation from the mean (two passes). When a
// half-precision input comes with float parameters, the saved statistics are
// float too (CPU's mixed-type rule).
//
// Backward of a normalization over a set of dims, with xhat = (x - mean) *
// rstd and g = dy * weight:
//   dx = rstd * (g - mean(g) - xhat * mean(g * xhat))
//   dweight = sum(dy * xhat), dbias = sum(dy) over the other dims.
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "lower/lower.h"

static bool is_half(tpu_dtype_t t) { return t == TPU_F16 || t == TPU_BF16; }

// The dtype of saved statistics: float for a half-precision input with a
// float parameter (the first present of args), else the input's.
static tpu_dtype_t stat_dtype(const tpu_lower_ctx_t* cx, int x, const int* params, int n) {
  tpu_dtype_t t = tpu_arg_value_dtype(cx, x);
  if (!is_half(t)) return t;
  for (int i = 0; i < n; ++i)
    if (tpu_arg_is_tensor(cx, params[i]))
      return tpu_arg_value_dtype(cx, params[i]) == TPU_F32 ? TPU_F32 : t;
  return t;
}

// Normalizations are defined for floating-point inputs only.
static tpu_status_t check_float(const tpu_lower_ctx_t* cx, int x, const char* kernel) {
  tpu_dtype_t t = tpu_arg_value_dtype(cx, x);
  if (tpu_dtype_is_float(t)) return TPU_OK;
  return tpu_not_implemented(kernel, t);
}

static tpu_val_t sum_dims(tpu_graph_t* g, tpu_val_t x, const int64_t* dims, int n) {
  tpu_dtype_t t = tpu_ir_dtype(g, x);
  return tpu_ir_reduce(g, x, tpu_ir_const(g, t, 0, NULL, 0), dims, n, TPU_BODY_ADD);
}

// Broadcasts a reduced value back to `like`'s shape; bdims[i] is where its
// dim i goes.
static tpu_val_t expand_as(tpu_graph_t* g, tpu_val_t v, tpu_val_t like, const int64_t* bdims) {
  if (!tpu_graph_ok(g)) return TPU_VAL_NONE;
  const tpu_type_t* t = tpu_ir_type(g, like);
  return tpu_ir_broadcast(g, v, t->dims, t->rank, bdims);
}

static tpu_val_t mul(tpu_graph_t* g, tpu_val_t a, tpu_val_t b) {
  return tpu_ir_binary(g, TPU_IR_MUL, a, b);
}
static tpu_val_t sub(tpu_graph_t* g, tpu_val_t a, tpu_val_t b) {
  return tpu_ir_binary(g, TPU_IR_SUB, a, b);
}
static tpu_val_t add(tpu_graph_t* g, tpu_val_t a, tpu_val_t b) {
  return tpu_ir_binary(g, TPU_IR_ADD, a, b);
}
// v * (1 / count), with count known at the call.
static tpu_val_t scale(tpu_graph_t* g, tpu_val_t v, double factor) {
  if (!tpu_graph_ok(g)) return TPU_VAL_NONE;
  const tpu_type_t* t = tpu_ir_type(g, v);
  return tpu_ir_binary(g, TPU_IR_DIV, v, tpu_ir_const(g, t->dtype, factor, t->dims, t->rank));
}

// rsqrt(var + eps) with eps argument `eps_arg`.
static tpu_val_t rstd_of(tpu_lower_ctx_t* cx, tpu_val_t var, int eps_arg) {
  tpu_graph_t* g = cx->g;
  tpu_val_t eps = tpu_lower_input(cx, eps_arg, tpu_ir_dtype(g, var));
  return tpu_ir_unary(g, TPU_IR_RSQRT, add(g, var, tpu_lower_splat_like(cx, eps, var)));
}

// The per-element backward of a normalization over `rd` (the statistics
// broadcast with bdims over the other dims): dx from dy, x, mean, rstd and
// g = dy * weight, all in opmath. mean may be NONE (RMS norm: no centering).
static tpu_val_t norm_input_grad(tpu_graph_t* g, tpu_val_t gy, tpu_val_t xhat, tpu_val_t rstd_b,
                                 const int64_t* rd, int nrd, const int64_t* bdims, double count,
                                 bool centered) {
  tpu_val_t proj = scale(g, sum_dims(g, mul(g, gy, xhat), rd, nrd), count);
  tpu_val_t r = sub(g, gy, mul(g, xhat, expand_as(g, proj, xhat, bdims)));
  if (centered) r = sub(g, r, expand_as(g, scale(g, sum_dims(g, gy, rd, nrd), count), xhat, bdims));
  return mul(g, rstd_b, r);
}

//===--- layer norm and RMS norm ---===//

// Checks normalized_shape (argument ns) and the parameters against the input;
// *axis is the first normalized dim.
static tpu_status_t check_layer_norm(tpu_lower_ctx_t* cx, int x, int ns, const int* params,
                                     int np, int* axis) {
  const int64_t* shape;
  int nn = tpu_arg_ints(cx, ns, &shape);
  int rank = tpu_arg_rank(cx, x);
  const int64_t* xs = tpu_arg_sizes(cx, x);
  char a[128], b[128];  // for messages (formatted on failure only)
  if (nn < 1)
    return tpu_invalid("Expected normalized_shape to be at least 1-dimensional, i.e., containing at "
                       "least one element, but got normalized_shape = []");
  static const char* const names[2] = {"weight", "bias"};
  for (int k = 0; k < np; ++k) {
    if (!tpu_arg_is_tensor(cx, params[k])) continue;
    int r = tpu_arg_rank(cx, params[k]);
    const int64_t* ps = tpu_arg_sizes(cx, params[k]);
    bool same = r == nn;
    for (int i = 0; same && i < nn; ++i) same = ps[i] == shape[i];
    if (!same) {
      tpu_dims_str(shape, nn, ", ", a, sizeof a);
      tpu_dims_str(ps, r, ", ", b, sizeof b);
      return tpu_invalid("Expected %s to be of same shape as normalized_shape, but got %s of shape "
                         "[%s] and normalized_shape = [%s]", names[k], names[k], b, a);
    }
  }
  bool ok = rank >= nn;
  for (int i = 0; ok && i < nn; ++i) ok = xs[rank - nn + i] == shape[i];
  if (!ok) {
    char s[160];
    size_t m = (size_t)snprintf(s, sizeof s, "[*");
    for (int i = 0; i < nn && m < sizeof s; ++i)
      m += (size_t)snprintf(s + m, sizeof s - m, ", %lld", (long long)shape[i]);
    if (m < sizeof s) snprintf(s + m, sizeof s - m, "]");
    tpu_dims_str(shape, nn, ", ", a, sizeof a);
    tpu_dims_str(xs, rank, ", ", b, sizeof b);
    return tpu_invalid("Given normalized_shape=[%s], expected input with shape %s, but got input of "
                       "size[%s]", a, s, b);
  }
  *axis = rank - nn;
  return TPU_OK;
}

// The statistics' shape: the input's with normalized dims set to 1.
static void stat_shape(const tpu_lower_ctx_t* cx, int x, int axis, int64_t* dims) {
  int rank = tpu_arg_rank(cx, x);
  const int64_t* xs = tpu_arg_sizes(cx, x);
  for (int i = 0; i < rank; ++i) dims[i] = i < axis ? xs[i] : 1;
}

// Weight or bias (normalized shape) broadcast to the input's shape in `acc`.
static tpu_val_t inner_param(tpu_lower_ctx_t* cx, int arg, tpu_val_t like, int axis,
                             tpu_dtype_t acc) {
  tpu_graph_t* g = cx->g;
  int64_t bd[TPU_MAX_RANK];
  int rank = tpu_ir_rank(g, like);
  for (int i = axis; i < rank; ++i) bd[i - axis] = i;
  return expand_as(g, tpu_lower_input(cx, arg, acc), like, bd);
}

// How a layer/RMS norm splits its input at `axis`: the normalized (inner)
// dims it reduces over, the outer dims its statistics keep, and the count
// of elements each statistic covers.
typedef struct norm_split {
  int nrd;                    // number of normalized dims
  int64_t rd[TPU_MAX_RANK];   // the normalized dims: axis..rank-1
  int64_t bd[TPU_MAX_RANK];   // the outer dims: 0..axis-1
  int64_t odims[TPU_MAX_RANK];  // the outer sizes
  double count;
} norm_split_t;

static void norm_split(const tpu_lower_ctx_t* cx, int x, int axis, norm_split_t* n) {
  int rank = tpu_arg_rank(cx, x);
  const int64_t* xs = tpu_arg_sizes(cx, x);
  n->nrd = rank - axis;
  n->count = 1;
  for (int i = 0; i < n->nrd; ++i) {
    n->rd[i] = axis + i;
    n->count *= (double)xs[axis + i];
  }
  for (int i = 0; i < axis; ++i) {
    n->bd[i] = i;
    n->odims[i] = xs[i];
  }
}

// native_layer_norm(input, normalized_shape, weight?, bias?, eps)
//   -> (out, mean, rstd)
tpu_status_t tpu_lower_layer_norm(tpu_lower_ctx_t* cx) {
  int params[2] = {2, 3}, axis;
  TPU_RETURN_IF_ERROR(check_layer_norm(cx, 0, 1, params, 2, &axis));
  TPU_RETURN_IF_ERROR(check_float(cx, 0, "LayerNormKernelImpl"));
  tpu_graph_t* g = cx->g;
  tpu_dtype_t t = tpu_arg_value_dtype(cx, 0), acc = tpu_opmath(t);
  tpu_dtype_t st = stat_dtype(cx, 0, params, 2);
  int rank = tpu_arg_rank(cx, 0);
  norm_split_t n;
  norm_split(cx, 0, axis, &n);
  int64_t sdims[TPU_MAX_RANK];
  tpu_val_t x = tpu_lower_input(cx, 0, acc);
  tpu_val_t mean = scale(g, sum_dims(g, x, n.rd, n.nrd), n.count);
  tpu_val_t xc = sub(g, x, expand_as(g, mean, x, n.bd));
  tpu_val_t var = scale(g, sum_dims(g, mul(g, xc, xc), n.rd, n.nrd), n.count);
  tpu_val_t rstd = rstd_of(cx, var, 4);
  tpu_val_t y = mul(g, xc, expand_as(g, rstd, x, n.bd));
  if (tpu_arg_is_tensor(cx, 2)) y = mul(g, y, inner_param(cx, 2, x, axis, acc));
  if (tpu_arg_is_tensor(cx, 3)) y = add(g, y, inner_param(cx, 3, x, axis, acc));
  stat_shape(cx, 0, axis, sdims);
  tpu_lower_out(cx, 0, tpu_ir_convert(g, y, t));
  tpu_lower_out(cx, 1, tpu_ir_convert(g, tpu_ir_reshape(g, mean, sdims, rank), st));
  tpu_lower_out(cx, 2, tpu_ir_convert(g, tpu_ir_reshape(g, rstd, sdims, rank), st));
  return TPU_OK;
}

// Sums of dy and dy * xhat over the leading (non-normalized) dims, for the
// weight and bias gradients of layer and RMS norm.
static tpu_val_t outer_sum(tpu_graph_t* g, tpu_val_t v, int axis) {
  int64_t od[TPU_MAX_RANK];
  for (int i = 0; i < axis; ++i) od[i] = i;
  return sum_dims(g, v, od, axis);
}

// native_layer_norm_backward(grad_out, input, normalized_shape, mean, rstd,
//                            weight?, bias?, output_mask)
tpu_status_t tpu_lower_layer_norm_backward(tpu_lower_ctx_t* cx) {
  int params[2] = {5, 6}, axis;
  TPU_RETURN_IF_ERROR(check_layer_norm(cx, 1, 2, params, 2, &axis));
  TPU_RETURN_IF_ERROR(check_float(cx, 1, "LayerNormBackwardKernelImpl"));
  tpu_graph_t* g = cx->g;
  tpu_dtype_t t = tpu_arg_value_dtype(cx, 1), acc = tpu_opmath(t);
  norm_split_t n;
  norm_split(cx, 1, axis, &n);
  tpu_val_t x = tpu_lower_input(cx, 1, acc), dy = tpu_lower_input(cx, 0, acc);
  // mean and rstd arrive with the statistics' shape (or any shape of as
  // many elements); flatten them to the outer dims.
  tpu_val_t mean = tpu_ir_reshape(g, tpu_lower_input(cx, 3, acc), n.odims, axis);
  tpu_val_t rstd = tpu_ir_reshape(g, tpu_lower_input(cx, 4, acc), n.odims, axis);
  tpu_val_t rstd_b = expand_as(g, rstd, x, n.bd);
  tpu_val_t xhat = mul(g, sub(g, x, expand_as(g, mean, x, n.bd)), rstd_b);
  bool has_w = tpu_arg_is_tensor(cx, 5);
  tpu_val_t gi = TPU_VAL_NONE, gw = TPU_VAL_NONE, gb = TPU_VAL_NONE;
  if (tpu_arg_mask_bit(cx, 7, 0)) {
    tpu_val_t gy = has_w ? mul(g, dy, inner_param(cx, 5, x, axis, acc)) : dy;
    gi = tpu_ir_convert(g, norm_input_grad(g, gy, xhat, rstd_b, n.rd, n.nrd, n.bd, n.count, true), t);
  }
  tpu_dtype_t pt = has_w ? tpu_arg_value_dtype(cx, 5)
                         : tpu_arg_is_tensor(cx, 6) ? tpu_arg_value_dtype(cx, 6) : t;
  if (tpu_arg_mask_bit(cx, 7, 1)) gw = tpu_ir_convert(g, outer_sum(g, mul(g, dy, xhat), axis), pt);
  if (tpu_arg_mask_bit(cx, 7, 2)) {
    tpu_dtype_t bt = tpu_arg_is_tensor(cx, 6) ? tpu_arg_value_dtype(cx, 6) : pt;
    gb = tpu_ir_convert(g, outer_sum(g, dy, axis), bt);
  }
  tpu_lower_out(cx, 0, gi);
  tpu_lower_out(cx, 1, gw);
  tpu_lower_out(cx, 2, gb);
  return TPU_OK;
}

// _fused_rms_norm(input, normalized_shape, weight?, eps?) -> (out, rstd):
// rstd = rsqrt(mean(x^2) + eps), eps defaulting to the compute type's
// epsilon; rstd stays in the compute type, as rms_norm_composite's.
tpu_status_t tpu_lower_rms_norm(tpu_lower_ctx_t* cx) {
  int params[1] = {2}, axis;
  TPU_RETURN_IF_ERROR(check_layer_norm(cx, 0, 1, params, 1, &axis));
  tpu_graph_t* g = cx->g;
  TPU_RETURN_IF_ERROR(check_float(cx, 0, "rms_norm"));
  tpu_dtype_t t = tpu_arg_value_dtype(cx, 0), acc = tpu_opmath(t);
  int rank = tpu_arg_rank(cx, 0);
  norm_split_t n;
  norm_split(cx, 0, axis, &n);
  int64_t sdims[TPU_MAX_RANK];
  tpu_val_t x = tpu_lower_input(cx, 0, acc);
  tpu_val_t ms = scale(g, sum_dims(g, mul(g, x, x), n.rd, n.nrd), n.count);
  tpu_val_t rstd;
  if (tpu_arg_present(cx, 3)) {
    rstd = rstd_of(cx, ms, 3);
  } else {
    double eps = acc == TPU_F64 ? 2.220446049250313e-16 : 1.1920928955078125e-07;
    tpu_val_t e = tpu_lower_number(cx, eps, acc);
    rstd = tpu_ir_unary(g, TPU_IR_RSQRT, add(g, ms, tpu_lower_splat_like(cx, e, ms)));
  }
  tpu_val_t y = mul(g, x, expand_as(g, rstd, x, n.bd));
  if (tpu_arg_is_tensor(cx, 2)) y = mul(g, y, inner_param(cx, 2, x, axis, acc));
  stat_shape(cx, 0, axis, sdims);
  tpu_lower_out(cx, 0, tpu_ir_convert(g, y, t));
  tpu_lower_out(cx, 1, tpu_ir_reshape(g, rstd, sdims, rank));
  return TPU_OK;
}

// _fused_rms_norm_backward(grad_out, input, normalized_shape, rstd, weight?,
//                          output_mask) -> (grad_input, grad_weight)
tpu_status_t tpu_lower_rms_norm_backward(tpu_lower_ctx_t* cx) {
  int params[1] = {4}, axis;
  TPU_RETURN_IF_ERROR(check_layer_norm(cx, 1, 2, params, 1, &axis));
  TPU_RETURN_IF_ERROR(check_float(cx, 1, "rms_norm_backward"));
  tpu_graph_t* g = cx->g;
  tpu_dtype_t t = tpu_arg_value_dtype(cx, 1), acc = tpu_opmath(t);
  norm_split_t n;
  norm_split(cx, 1, axis, &n);
  tpu_val_t x = tpu_lower_input(cx, 1, acc), dy = tpu_lower_input(cx, 0, acc);
  tpu_val_t rstd = tpu_ir_reshape(g, tpu_lower_input(cx, 3, acc), n.odims, axis);
  tpu_val_t rstd_b = expand_as(g, rstd, x, n.bd);
  tpu_val_t xhat = mul(g, x, rstd_b);
  bool has_w = tpu_arg_is_tensor(cx, 4);
  tpu_val_t gi = TPU_VAL_NONE, gw = TPU_VAL_NONE;
  if (tpu_arg_mask_bit(cx, 5, 0)) {
    tpu_val_t gy = has_w ? mul(g, dy, inner_param(cx, 4, x, axis, acc)) : dy;
    gi = tpu_ir_convert(g, norm_input_grad(g, gy, xhat, rstd_b, n.rd, n.nrd, n.bd, n.count, false), t);
  }
  if (tpu_arg_mask_bit(cx, 5, 1) && has_w)
    gw = tpu_ir_convert(g, outer_sum(g, mul(g, dy, xhat), axis), tpu_arg_value_dtype(cx, 4));
  tpu_lower_out(cx, 0, gi);
  tpu_lower_out(cx, 1, gw);
  return TPU_OK;
}

//===--- batch norm ---===//

// Per-channel statistics over every dim but 1.
typedef struct bn_dims {
  int rank;
  int64_t channels, rd[TPU_MAX_RANK];
  int nrd;
  double count;  // elements per channel
} bn_dims_t;

static tpu_status_t bn_setup(const tpu_lower_ctx_t* cx, int x, bn_dims_t* b) {
  b->rank = tpu_arg_rank(cx, x);
  int64_t d;
  TPU_RETURN_IF_ERROR(tpu_wrap_dim(1, b->rank, &d));  // CPU reads input.size(1)
  const int64_t* xs = tpu_arg_sizes(cx, x);
  b->channels = xs[1];
  b->nrd = 0;
  b->count = 1;
  for (int i = 0; i < b->rank; ++i)
    if (i != 1) {
      b->rd[b->nrd++] = i;
      b->count *= (double)xs[i];
    }
  return TPU_OK;
}

// Checks that the present per-channel arguments have `channels` elements.
static tpu_status_t bn_check_params(const tpu_lower_ctx_t* cx, const int* args, int n,
                                    const char* const* names, int64_t channels) {
  for (int i = 0; i < n; ++i) {
    if (!tpu_arg_is_tensor(cx, args[i])) continue;
    int r = tpu_arg_rank(cx, args[i]);
    const int64_t* s = tpu_arg_sizes(cx, args[i]);
    int64_t numel = 1;
    for (int k = 0; k < r; ++k) numel *= s[k];
    if (numel != channels)
      return tpu_invalid("%s should contain %lld elements not %lld", names[i], (long long)channels,
                         (long long)numel);
  }
  return TPU_OK;
}

// A per-channel argument as [C] in `acc`, broadcast along dim 1 of `like`.
static tpu_val_t channel_param(tpu_lower_ctx_t* cx, int arg, int64_t channels, tpu_val_t like,
                               tpu_dtype_t acc) {
  tpu_graph_t* g = cx->g;
  int64_t one = 1;
  tpu_val_t v = tpu_ir_reshape(g, tpu_lower_input(cx, arg, acc), &channels, 1);
  return expand_as(g, v, like, &one);
}

// Batch norm forward with the arguments at (input 0, weight 1, bias 2,
// running_mean rm, running_var rv, momentum, eps) and training as given;
// `reserve` adds the empty uint8 reserve result of _batch_norm_with_update.
static tpu_status_t batch_norm(tpu_lower_ctx_t* cx, int rm, int rv, bool training, int momentum,
                               int eps, bool reserve) {
  bn_dims_t b;
  TPU_RETURN_IF_ERROR(bn_setup(cx, 0, &b));
  int pargs[4] = {1, 2, rm, rv};
  static const char* const pnames[4] = {"weight", "bias", "running_mean", "running_var"};
  TPU_RETURN_IF_ERROR(bn_check_params(cx, pargs, rm >= 0 ? 4 : 2, pnames, b.channels));
  bool has_rm = rm >= 0 && tpu_arg_is_tensor(cx, rm), has_rv = rv >= 0 && tpu_arg_is_tensor(cx, rv);
  if (!training && !(has_rm && has_rv))
    return tpu_invalid("running_mean and running_var must be defined in evaluation mode");
  tpu_graph_t* g = cx->g;
  TPU_RETURN_IF_ERROR(check_float(cx, 0, "batch_norm"));
  tpu_dtype_t t = tpu_arg_value_dtype(cx, 0), acc = tpu_opmath(t);
  int sp[3] = {1, 2, rm};
  tpu_dtype_t st = stat_dtype(cx, 0, sp, rm >= 0 ? 3 : 2);
  int64_t one = 1;
  tpu_val_t x = tpu_lower_input(cx, 0, acc);
  tpu_val_t mean, invstd, var = TPU_VAL_NONE, sq = TPU_VAL_NONE;
  if (training) {
    mean = scale(g, sum_dims(g, x, b.rd, b.nrd), b.count);
    tpu_val_t xc = sub(g, x, expand_as(g, mean, x, &one));
    sq = sum_dims(g, mul(g, xc, xc), b.rd, b.nrd);
    var = scale(g, sq, b.count);
    invstd = rstd_of(cx, var, eps);
  } else {
    mean = tpu_ir_reshape(g, tpu_lower_input(cx, rm, acc), &b.channels, 1);
    invstd = rstd_of(cx, tpu_ir_reshape(g, tpu_lower_input(cx, rv, acc), &b.channels, 1), eps);
  }
  tpu_val_t y = mul(g, sub(g, x, expand_as(g, mean, x, &one)), expand_as(g, invstd, x, &one));
  if (tpu_arg_is_tensor(cx, 1)) y = mul(g, y, channel_param(cx, 1, b.channels, x, acc));
  if (tpu_arg_is_tensor(cx, 2)) y = add(g, y, channel_param(cx, 2, b.channels, x, acc));
  tpu_lower_out(cx, 0, tpu_ir_convert(g, y, t));
  if (training) {
    tpu_lower_out(cx, 1, tpu_ir_convert(g, mean, st));
    tpu_lower_out(cx, 2, tpu_ir_convert(g, invstd, st));
  } else {  // evaluation saves nothing: empty statistics, as CPU
    int64_t zero = 0;
    tpu_lower_out(cx, 1, tpu_ir_const(g, st, 0, &zero, 1));
    tpu_lower_out(cx, 2, tpu_ir_const(g, st, 0, &zero, 1));
  }
  if (reserve) {
    int64_t zero = 0;
    tpu_lower_out(cx, 3, tpu_ir_const(g, TPU_U8, 0, &zero, 1));
  }
  if (training && (has_rm || has_rv)) {
    // running = (1 - momentum) * running + momentum * batch statistic, the
    // variance unbiased (divided by count - 1). Written into the arguments,
    // as PyTorch's kernels do in place.
    tpu_val_t m = tpu_ir_broadcast(g, tpu_lower_input(cx, momentum, acc), &b.channels, 1, NULL);
    tpu_val_t keep = sub(g, tpu_ir_const(g, acc, 1, &b.channels, 1), m);
    tpu_val_t unbiased = scale(g, sq, b.count - 1);
    const int rs[2] = {rm, rv};
    const bool has[2] = {has_rm, has_rv};
    tpu_val_t stat[2] = {mean, unbiased};
    tpu_val_t upd[2];
    for (int i = 0; i < 2; ++i) {
      if (!has[i]) continue;
      tpu_val_t old = tpu_ir_reshape(g, tpu_lower_input(cx, rs[i], acc), &b.channels, 1);
      upd[i] = add(g, mul(g, keep, old), mul(g, m, stat[i]));
    }
    for (int i = 0; i < 2 && tpu_graph_ok(g); ++i) {
      if (!has[i]) continue;
      const tpu_view_t* v = tpu_arg(cx, rs[i])->tensor;
      tpu_lower_write_arg(cx, rs[i], tpu_ir_reshape(g, upd[i], v->sizes, v->rank));
    }
  }
  return TPU_OK;
}

// native_batch_norm(input, weight?, bias?, running_mean?, running_var?,
//                   training, momentum, eps) -> (out, save_mean, save_invstd)
// and _native_batch_norm_legit, the same with running stats required.
tpu_status_t tpu_lower_batch_norm(tpu_lower_ctx_t* cx) {
  return batch_norm(cx, 3, 4, tpu_arg_bool(cx, 5, false), 6, 7, false);
}

// _native_batch_norm_legit.no_stats(input, weight?, bias?, training,
//                                   momentum, eps)
tpu_status_t tpu_lower_batch_norm_no_stats(tpu_lower_ctx_t* cx) {
  return batch_norm(cx, -1, -1, tpu_arg_bool(cx, 3, false), 4, 5, false);
}

// _batch_norm_with_update(input, weight?, bias?, running_mean, running_var,
//                         momentum, eps) -> (out, save_mean, save_invstd,
//                         reserve)
tpu_status_t tpu_lower_batch_norm_with_update(tpu_lower_ctx_t* cx) {
  return batch_norm(cx, 3, 4, true, 5, 6, true);
}

// _batch_norm_no_update(input, weight?, bias?, running_mean?, running_var?,
//                       momentum, eps) -> (out, save_mean, save_invstd,
//                       reserve): evaluation with the running statistics
//                       (batch statistics without them), nothing updated.
tpu_status_t tpu_lower_batch_norm_no_update(tpu_lower_ctx_t* cx) {
  bool stats = tpu_arg_is_tensor(cx, 3) && tpu_arg_is_tensor(cx, 4);
  return batch_norm(cx, stats ? 3 : -1, stats ? 4 : -1, !stats, 5, 6, true);
}

// native_batch_norm_backward(grad_out, input, weight?, running_mean?,
//     running_var?, save_mean?, save_invstd?, train, eps, output_mask)
// and batch_norm_backward(..., update, eps, output_mask, reserve), whose
// save_var is the saved invstd too.
tpu_status_t tpu_lower_batch_norm_backward(tpu_lower_ctx_t* cx) {
  bn_dims_t b;
  TPU_RETURN_IF_ERROR(bn_setup(cx, 1, &b));
  TPU_RETURN_IF_ERROR(check_float(cx, 1, "batch_norm_backward"));
  bool train = tpu_arg_bool(cx, 7, false);
  int ma = train ? 5 : 3, sa = train ? 6 : 4;
  if (!tpu_arg_is_tensor(cx, ma) || !tpu_arg_is_tensor(cx, sa))
    return tpu_invalid(train ? "save_mean and save_invstd must be defined in training mode"
                             : "running_mean and running_var must be defined in evaluation mode");
  int pargs[3] = {2, ma, sa};
  static const char* const tnames[3] = {"weight", "save_mean", "save_invstd"};
  static const char* const enames[3] = {"weight", "running_mean", "running_var"};
  TPU_RETURN_IF_ERROR(bn_check_params(cx, pargs, 3, train ? tnames : enames, b.channels));
  tpu_graph_t* g = cx->g;
  tpu_dtype_t t = tpu_arg_value_dtype(cx, 1), acc = tpu_opmath(t);
  int64_t one = 1;
  tpu_val_t x = tpu_lower_input(cx, 1, acc), dy = tpu_lower_input(cx, 0, acc);
  tpu_val_t mean = tpu_ir_reshape(g, tpu_lower_input(cx, ma, acc), &b.channels, 1);
  tpu_val_t invstd = tpu_ir_reshape(g, tpu_lower_input(cx, sa, acc), &b.channels, 1);
  if (!train) invstd = rstd_of(cx, invstd, 8);
  tpu_val_t inv_b = expand_as(g, invstd, x, &one);
  tpu_val_t xhat = mul(g, sub(g, x, expand_as(g, mean, x, &one)), inv_b);
  bool has_w = tpu_arg_is_tensor(cx, 2);
  tpu_val_t gi = TPU_VAL_NONE, gw = TPU_VAL_NONE, gb = TPU_VAL_NONE;
  if (tpu_arg_mask_bit(cx, 9, 0)) {
    tpu_val_t gy = has_w ? mul(g, dy, channel_param(cx, 2, b.channels, x, acc)) : dy;
    gi = train ? norm_input_grad(g, gy, xhat, inv_b, b.rd, b.nrd, &one, b.count, true)
               : mul(g, gy, inv_b);
    gi = tpu_ir_convert(g, gi, t);
  }
  tpu_dtype_t pt = has_w ? tpu_arg_value_dtype(cx, 2) : t;
  if (tpu_arg_mask_bit(cx, 9, 1)) gw = tpu_ir_convert(g, sum_dims(g, mul(g, dy, xhat), b.rd, b.nrd), pt);
  if (tpu_arg_mask_bit(cx, 9, 2)) gb = tpu_ir_convert(g, sum_dims(g, dy, b.rd, b.nrd), pt);
  tpu_lower_out(cx, 0, gi);
  tpu_lower_out(cx, 1, gw);
  tpu_lower_out(cx, 2, gb);
  return TPU_OK;
}

//===--- group norm ---===//

// Reads (N, C, HxW, group) at args first..first+3 and checks the input.
static tpu_status_t group_setup(const tpu_lower_ctx_t* cx, int x, int first, int64_t* n,
                                int64_t* c, int64_t* hw, int64_t* groups) {
  *n = tpu_arg_int(cx, first, 0);
  *c = tpu_arg_int(cx, first + 1, 0);
  *hw = tpu_arg_int(cx, first + 2, 0);
  *groups = tpu_arg_int(cx, first + 3, 1);
  int rank = tpu_arg_rank(cx, x);
  const int64_t* xs = tpu_arg_sizes(cx, x);
  int64_t numel = 1;
  for (int i = 0; i < rank; ++i) numel *= xs[i];
  if (*groups <= 0 || *c % *groups != 0)
    return tpu_invalid("Expected number of channels in input to be divisible by num_groups, but "
                       "got input of shape [%lld, ...] and num_groups=%lld", (long long)*c,
                       (long long)*groups);
  if (numel != *n * *c * *hw)
    return tpu_invalid("Expected the input to have %lld elements, but got %lld",
                       (long long)(*n * *c * *hw), (long long)numel);
  return TPU_OK;
}

// A per-channel parameter [C] broadcast to [N, C, HxW].
static tpu_val_t group_param(tpu_lower_ctx_t* cx, int arg, int64_t c, tpu_val_t like,
                             tpu_dtype_t acc) {
  tpu_graph_t* g = cx->g;
  int64_t one = 1;
  tpu_val_t v = tpu_ir_reshape(g, tpu_lower_input(cx, arg, acc), &c, 1);
  return expand_as(g, v, like, &one);
}

// native_group_norm(input, weight?, bias?, N, C, HxW, group, eps)
//   -> (out, mean [N, group], rstd [N, group])
tpu_status_t tpu_lower_group_norm(tpu_lower_ctx_t* cx) {
  int64_t n, c, hw, groups;
  TPU_RETURN_IF_ERROR(group_setup(cx, 0, 3, &n, &c, &hw, &groups));
  TPU_RETURN_IF_ERROR(check_float(cx, 0, "GroupNormKernelImpl"));
  static const char* const names[2] = {"weight", "bias"};
  for (int k = 1; k <= 2; ++k) {
    if (!tpu_arg_is_tensor(cx, k)) continue;
    int r = tpu_arg_rank(cx, k);
    if (r != 1 || tpu_arg_sizes(cx, k)[0] != c) {
      char a[128], b[128];
      tpu_dims_str(tpu_arg_sizes(cx, k), r, ", ", a, sizeof a);
      tpu_dims_str(tpu_arg_sizes(cx, 0), tpu_arg_rank(cx, 0), ", ", b, sizeof b);
      return tpu_invalid("Expected %s to be a vector of size equal to the number of channels in "
                         "input, but got %s of shape [%s] and input of shape [%s]", names[k - 1],
                         names[k - 1], a, b);
    }
  }
  tpu_graph_t* g = cx->g;
  tpu_dtype_t t = tpu_arg_value_dtype(cx, 0), acc = tpu_opmath(t);
  int params[2] = {1, 2};
  tpu_dtype_t st = stat_dtype(cx, 0, params, 2);
  int64_t gd[3] = {n, groups, (c / groups) * hw}, cd[3] = {n, c, hw}, rd = 2, bd[2] = {0, 1};
  double count = (double)gd[2];
  tpu_val_t x = tpu_ir_reshape(g, tpu_lower_input(cx, 0, acc), gd, 3);
  tpu_val_t mean = scale(g, sum_dims(g, x, &rd, 1), count);
  tpu_val_t xc = sub(g, x, expand_as(g, mean, x, bd));
  tpu_val_t rstd = rstd_of(cx, scale(g, sum_dims(g, mul(g, xc, xc), &rd, 1), count), 7);
  tpu_val_t y = tpu_ir_reshape(g, mul(g, xc, expand_as(g, rstd, x, bd)), cd, 3);
  if (tpu_arg_is_tensor(cx, 1)) y = mul(g, y, group_param(cx, 1, c, y, acc));
  if (tpu_arg_is_tensor(cx, 2)) y = add(g, y, group_param(cx, 2, c, y, acc));
  y = tpu_ir_reshape(g, y, tpu_arg_sizes(cx, 0), tpu_arg_rank(cx, 0));
  tpu_lower_out(cx, 0, tpu_ir_convert(g, y, t));
  tpu_lower_out(cx, 1, tpu_ir_convert(g, mean, st));
  tpu_lower_out(cx, 2, tpu_ir_convert(g, rstd, st));
  return TPU_OK;
}

// native_group_norm_backward(grad_out, input, mean, rstd, weight?, N, C,
//                            HxW, group, output_mask)
tpu_status_t tpu_lower_group_norm_backward(tpu_lower_ctx_t* cx) {
  int64_t n, c, hw, groups;
  TPU_RETURN_IF_ERROR(group_setup(cx, 1, 5, &n, &c, &hw, &groups));
  TPU_RETURN_IF_ERROR(check_float(cx, 1, "GroupNormBackwardKernelImpl"));
  tpu_graph_t* g = cx->g;
  tpu_dtype_t t = tpu_arg_value_dtype(cx, 1), acc = tpu_opmath(t);
  int64_t gd[3] = {n, groups, (c / groups) * hw}, cd[3] = {n, c, hw}, sd[2] = {n, groups};
  int64_t rd = 2, bd[2] = {0, 1}, nh[2] = {0, 2};
  double count = (double)gd[2];
  tpu_val_t x = tpu_ir_reshape(g, tpu_lower_input(cx, 1, acc), gd, 3);
  tpu_val_t dy = tpu_ir_reshape(g, tpu_lower_input(cx, 0, acc), cd, 3);
  tpu_val_t mean = tpu_ir_reshape(g, tpu_lower_input(cx, 2, acc), sd, 2);
  tpu_val_t rstd_b = expand_as(g, tpu_ir_reshape(g, tpu_lower_input(cx, 3, acc), sd, 2), x, bd);
  tpu_val_t xhat = mul(g, sub(g, x, expand_as(g, mean, x, bd)), rstd_b);
  tpu_val_t xhat_c = tpu_ir_reshape(g, xhat, cd, 3);  // [N, C, HxW]
  bool has_w = tpu_arg_is_tensor(cx, 4);
  tpu_val_t gi = TPU_VAL_NONE, gw = TPU_VAL_NONE, gb = TPU_VAL_NONE;
  if (tpu_arg_mask_bit(cx, 9, 0)) {
    tpu_val_t gy = has_w ? mul(g, dy, group_param(cx, 4, c, dy, acc)) : dy;
    gy = tpu_ir_reshape(g, gy, gd, 3);
    gi = norm_input_grad(g, gy, xhat, rstd_b, &rd, 1, bd, count, true);
    gi = tpu_ir_reshape(g, gi, tpu_arg_sizes(cx, 1), tpu_arg_rank(cx, 1));
    gi = tpu_ir_convert(g, gi, t);
  }
  tpu_dtype_t pt = has_w ? tpu_arg_value_dtype(cx, 4) : t;
  if (tpu_arg_mask_bit(cx, 9, 1)) gw = tpu_ir_convert(g, sum_dims(g, mul(g, dy, xhat_c), nh, 2), pt);
  if (tpu_arg_mask_bit(cx, 9, 2)) gb = tpu_ir_convert(g, sum_dims(g, dy, nh, 2), pt);
  tpu_lower_out(cx, 0, gi);
  tpu_lower_out(cx, 1, gw);
  tpu_lower_out(cx, 2, gb);
  return TPU_OK;
}
