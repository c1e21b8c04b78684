// Fractional max pooling (nn.FractionalMaxPool2d/3d): windows of a fixed
// size whose starts, per plane and spatial dim, come from a random sample u
// in [0, 1): start(i) = int((i + u) * alpha) - int(u * alpha) with alpha =
// (in - k) / (out - 1), and the last window ends at the input's end. The
// starts are computed on the device in the input's dtype, rounding after each
// step as CPU's kernel does, so the same samples pick the same windows. Each
// output's window is gathered with its flat indices and reduced as max
// pooling reduces (pool.h); the backward is max pooling's.
#include <stdio.h>
#include <string.h>

#include "lower/pool.h"

static const char* const dim_names[2][3] = {
    {"height", "width"}, {"time", "height", "width"}};

// CPU's checks, in its order and words. Arguments: self 0, kernel_size 1,
// output_size 2, random_samples 3. Gives the kernel and output sizes.
static tpu_status_t check(tpu_lower_ctx_t* cx, int n, const char* name, int64_t* k,
                          int64_t* out) {
  const char* fn = n == 2 ? "fractional_max_pool2d()" : "fractional_max_pool3d_out()";
  const int64_t* v;
  if (tpu_arg_ints(cx, 1, &v) != n)
    return tpu_invalid("%s: kernel_size must either be a single Int or tuple of Ints", name);
  memcpy(k, v, sizeof *k * (size_t)n);
  if (tpu_arg_ints(cx, 2, &v) != n)
    return tpu_invalid("%s: output_size must either be a single Int or tuple of Ints", name);
  memcpy(out, v, sizeof *out * (size_t)n);
  int rank = tpu_arg_rank(cx, 0);
  const int64_t* xs = tpu_arg_sizes(cx, 0);
  char shape[128];
  if (rank != n + 1 && rank != n + 2)
    return tpu_invalid("%s: Expected %dD or %dD tensor, but got: %s", fn, n + 1, n + 2,
                       tpu_shape_str(xs, rank, shape, sizeof shape));
  for (int i = 1; i < rank; ++i)
    if (xs[i] == 0)
      return tpu_invalid("%s: Expected input to have non-zero size for non-batch dimensions, "
                         "but got%s with dimension %d being empty.", fn,
                         tpu_shape_str(xs, rank, shape, sizeof shape), i);
  tpu_dtype_t t = tpu_arg_value_dtype(cx, 0);
  if (tpu_arg_value_dtype(cx, 3) != t)
    return tpu_invalid("Expect _random_samples to have the same dtype as input");
  if (tpu_arg_rank(cx, 3) != 3)
    return tpu_invalid("Expect _random_samples to have 3 dimensions, got %d", tpu_arg_rank(cx, 3));
  const int64_t* ss = tpu_arg_sizes(cx, 3);
  int lead = rank - n;
  if (ss[0] < (lead == 2 ? xs[0] : 1))
    return tpu_invalid("Expect _random_samples.size(0) no less then input batch size.");
  if (ss[1] != xs[lead - 1])
    return tpu_invalid("Expect _random_samples.size(1) equals to input channel size.");
  if (ss[2] != n)
    return tpu_invalid("Expect _random_samples.size(2) equals to %d; got %lld.", n,
                       (long long)ss[2]);
  for (int i = 0; i < n; ++i)
    if (out[i] + k[i] - 1 > xs[lead + i])
      return tpu_invalid("%s: pool %s %lld too large relative to input %s %lld", fn,
                         dim_names[n - 2][i], (long long)k[i], dim_names[n - 2][i],
                         (long long)xs[lead + i]);
  if (!tpu_dtype_is_float(t)) {
    char kernel[64];
    snprintf(kernel, sizeof kernel, "%s_out_frame", name);
    return tpu_not_implemented(kernel, t);
  }
  return TPU_OK;
}

// a op b in `t`'s precision: computed in float, rounded to t (CPU's
// arithmetic on Half and BFloat16 values).
static tpu_val_t op_in(tpu_graph_t* g, tpu_ir_op_t op, tpu_val_t a, tpu_val_t b, tpu_dtype_t t) {
  tpu_dtype_t acc = tpu_opmath(t);
  tpu_val_t r = tpu_ir_binary(g, op, tpu_ir_convert(g, a, acc), tpu_ir_convert(g, b, acc));
  return tpu_ir_convert(g, r, t);
}

// The window starts of one spatial dim for every plane: u [P] (dtype t) ->
// [P, out] int64.
static tpu_val_t starts(tpu_graph_t* g, tpu_val_t u, int64_t planes, int64_t in, int64_t k,
                        int64_t out, tpu_dtype_t t) {
  int64_t p1[2] = {planes, 1}, zero = 0;
  tpu_val_t last = tpu_ir_const_i(g, TPU_I64, in - k, p1, 2);
  if (out == 1) return last;
  tpu_val_t alpha = op_in(g, TPU_IR_DIV, tpu_ir_const(g, t, (double)(in - k), NULL, 0),
                          tpu_ir_const(g, t, (double)(out - 1), NULL, 0), t);
  int64_t pm[2] = {planes, out - 1};
  tpu_val_t ub = tpu_ir_broadcast(g, u, pm, 2, &zero);
  tpu_val_t alphab = tpu_ir_broadcast(g, alpha, pm, 2, NULL);
  tpu_val_t i = tpu_ir_convert(g, tpu_ir_iota(g, TPU_I64, pm, 2, 1), t);
  tpu_val_t hi = op_in(g, TPU_IR_MUL, op_in(g, TPU_IR_ADD, i, ub, t), alphab, t);
  tpu_val_t lo = op_in(g, TPU_IR_MUL, ub, alphab, t);
  tpu_val_t seq = tpu_ir_binary(g, TPU_IR_SUB, tpu_ir_convert(g, hi, TPU_I64),
                                tpu_ir_convert(g, lo, TPU_I64));
  tpu_val_t parts[2] = {seq, last};
  return tpu_ir_concat(g, parts, 2, 1);
}

// fractional_max_pool{2,3}d(self, kernel_size, output_size, random_samples)
// -> (output, indices)
static tpu_status_t fractional_max_pool(tpu_lower_ctx_t* cx, int n, const char* name) {
  int64_t k[3], out[3];
  TPU_RETURN_IF_ERROR(check(cx, n, name, k, out));
  tpu_graph_t* g = cx->g;
  tpu_dtype_t t = tpu_arg_value_dtype(cx, 0);
  int rank = tpu_arg_rank(cx, 0), lead = rank - n;
  const int64_t *xs = tpu_arg_sizes(cx, 0), *in = xs + lead;
  int64_t planes = tpu_numel(xs, lead), plane = tpu_numel(in, n);
  int64_t result[TPU_MAX_RANK];
  memcpy(result, xs, sizeof *result * (size_t)lead);
  memcpy(result + lead, out, sizeof *result * (size_t)n);
  if (planes == 0 || tpu_numel(out, n) == 0) {
    tpu_lower_out(cx, 0, tpu_ir_const(g, t, 0, result, rank));
    tpu_lower_out(cx, 1, tpu_ir_const_i(g, TPU_I64, 0, result, rank));
    return TPU_OK;
  }
  // The samples of the batch's planes, [planes, n]; column n-1-i belongs to
  // spatial dim i in 2-D (CPU reads width first), column i in 3-D.
  const int64_t* ss = tpu_arg_sizes(cx, 3);
  int64_t s_lo[3] = {0, 0, 0}, s_hi[3] = {planes / ss[1], ss[1], n}, pn[2] = {planes, n};
  tpu_val_t samples = tpu_ir_reshape(g, tpu_ir_slice(g, tpu_lower_tensor(cx, 3), s_lo, s_hi, NULL),
                                     pn, 2);
  // Shape [planes, out..., window...]: each output's window positions, as
  // flat indices into its plane. A window of size 0 (CPU allows it) keeps
  // its start as the index and takes no value.
  int64_t shape[1 + 2 * 3], win[3];
  int r = 1 + 2 * n;
  shape[0] = planes;
  for (int i = 0; i < n; ++i) {
    win[i] = k[i] > 0 ? k[i] : 1;
    shape[1 + i] = out[i];
    shape[1 + n + i] = win[i];
  }
  tpu_val_t flat = tpu_ir_const_i(g, TPU_I64, 0, shape, r);
  int64_t stride = plane;
  for (int i = 0; i < n; ++i) {
    stride /= in[i];
    int col = n == 2 ? n - 1 - i : i;
    int64_t c_lo[2] = {0, col}, c_hi[2] = {planes, col + 1};
    tpu_val_t u = tpu_ir_reshape(g, tpu_ir_slice(g, samples, c_lo, c_hi, NULL), &planes, 1);
    int64_t bd[2] = {0, 1 + i}, jd = 1 + n + i;
    tpu_val_t pos = tpu_ir_binary(g, TPU_IR_ADD,
                                  tpu_ir_broadcast(g, starts(g, u, planes, in[i], k[i], out[i], t),
                                                   shape, r, bd),
                                  tpu_ir_broadcast(g, tpu_ir_iota(g, TPU_I64, &win[i], 1, 0),
                                                   shape, r, &jd));
    flat = tpu_ir_binary(g, TPU_IR_ADD, flat,
                         tpu_ir_binary(g, TPU_IR_MUL, pos,
                                       tpu_ir_const_i(g, TPU_I64, stride, shape, r)));
  }
  int64_t windows[TPU_MAX_RANK];
  windows[0] = planes;
  memcpy(windows + 1, out, sizeof *out * (size_t)n);
  windows[1 + n] = tpu_numel(win, n);
  tpu_val_t idx = tpu_ir_reshape(g, flat, windows, n + 2);
  // Gather from all planes at once: each plane's indices offset by its start.
  tpu_val_t base = tpu_ir_binary(g, TPU_IR_MUL, tpu_ir_iota(g, TPU_I64, windows, n + 2, 0),
                                 tpu_ir_const_i(g, TPU_I64, plane, windows, n + 2));
  int64_t total = planes * plane;
  tpu_val_t x = tpu_ir_reshape(g, tpu_lower_tensor(cx, 0), &total, 1);
  tpu_val_t vals = tpu_gather_flat(g, x, tpu_ir_binary(g, TPU_IR_ADD, idx, base), n + 2);
  if (tpu_numel(k, n) == 0)
    vals = tpu_ir_broadcast(g, tpu_pool_lowest(g, t), windows, n + 2, NULL);
  tpu_val_t v, i;
  tpu_pool_argmax(g, vals, idx, &v, &i);
  // [planes, out...] -> [lead..., out...]
  tpu_lower_out(cx, 0, tpu_ir_reshape(g, v, result, rank));
  tpu_lower_out(cx, 1, tpu_ir_reshape(g, i, result, rank));
  return TPU_OK;
}

tpu_status_t tpu_lower_fractional_max_pool2d(tpu_lower_ctx_t* cx) {
  return fractional_max_pool(cx, 2, "fractional_max_pool2d");
}
tpu_status_t tpu_lower_fractional_max_pool3d(tpu_lower_ctx_t* cx) {
  return fractional_max_pool(cx, 3, "fractional_max_pool3d");
}

// fractional_max_pool{2,3}d_backward(grad_output, self, kernel_size,
// output_size, indices)
tpu_status_t tpu_lower_fractional_max_pool2d_backward(tpu_lower_ctx_t* cx) {
  return tpu_pool_scatter_grad(cx, 0, 1, 4, 2);
}
tpu_status_t tpu_lower_fractional_max_pool3d_backward(tpu_lower_ctx_t* cx) {
  return tpu_pool_scatter_grad(cx, 0, 1, 4, 3);
}
