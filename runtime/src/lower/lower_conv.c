// Convolutions (forward, transposed, and both gradients) as
// stablehlo.convolution (pooling: lower_pool.c).
//
// For a backend that is not CPU or CUDA, at::_convolution checks the shapes
// and calls convolution_overrideable with 4-d (1-d convolutions viewed as
// 2-d) or 5-d tensors; convolution_backward calls
// convolution_backward_overrideable the same way. Both gradients are
// convolutions themselves:
//  - the input gradient convolves the output gradient, dilated by the
//    stride, with the spatially flipped kernel whose in/out features are
//    swapped (a transposed convolution is exactly this);
//  - the weight gradient convolves the input with the output gradient,
//    batch and features swapped, the stride becoming the kernel dilation;
//    groups become batch groups.
// Half precision convolves into a float result and rounds once.
#include <stdio.h>
#include <string.h>

#include "lower/lower.h"

// Reads an int list argument of `n` values; one value stands for all.
static tpu_status_t int_list(const tpu_lower_ctx_t* cx, int i, int n, const char* name,
                             int64_t dflt, int64_t* out) {
  const int64_t* v;
  int count = tpu_arg_ints(cx, i, &v);
  for (int k = 0; k < n; ++k) out[k] = count == 0 ? dflt : count == 1 ? v[0] : v[k < count ? k : 0];
  if (count > 1 && count != n)
    return tpu_invalid("expected %s to be a single integer value or a list of %d values to match "
                       "the convolution dimensions, but got %s of length %d", name, n, name, count);
  return TPU_OK;
}

//===--- convolution ---===//

typedef struct conv_params {
  int n;  // spatial dims
  int64_t stride[3], pad[3], dil[3], out_pad[3];
  int64_t groups;
  bool transposed;
} conv_params_t;

// Reads (stride, padding, dilation, transposed, output_padding, groups)
// starting at argument `first`.
static tpu_status_t read_params(const tpu_lower_ctx_t* cx, int first, int n,
                                conv_params_t* p) {
  memset(p, 0, sizeof *p);
  p->n = n;
  TPU_RETURN_IF_ERROR(int_list(cx, first, n, "stride", 1, p->stride));
  TPU_RETURN_IF_ERROR(int_list(cx, first + 1, n, "padding", 0, p->pad));
  TPU_RETURN_IF_ERROR(int_list(cx, first + 2, n, "dilation", 1, p->dil));
  p->transposed = tpu_arg_bool(cx, first + 3, false);
  TPU_RETURN_IF_ERROR(int_list(cx, first + 4, n, "output_padding", 0, p->out_pad));
  p->groups = tpu_arg_int(cx, first + 5, 1);
  for (int i = 0; i < n; ++i) {
    if (p->stride[i] <= 0) return tpu_invalid("non-positive stride is not supported");
    if (p->pad[i] < 0) return tpu_invalid("negative padding is not supported");
    if (p->dil[i] <= 0) return tpu_invalid("dilation should be greater than zero");
    if (p->out_pad[i] < 0) return tpu_invalid("negative output_padding is not supported");
  }
  if (p->groups <= 0) return tpu_invalid("non-positive groups is not supported");
  return TPU_OK;
}

// The kernel [O, I/g, k...] as the kernel of the transposed convolution:
// [I, O/g, k...], spatially flipped.
static tpu_val_t transpose_kernel(tpu_graph_t* g, tpu_val_t w, int n, int64_t groups) {
  const int64_t* d = tpu_ir_dims(g, w);
  int64_t o = d[0], i = d[1];
  int64_t flip[3] = {2, 3, 4};
  w = tpu_ir_reverse(g, w, flip, n);
  int64_t shape[TPU_MAX_RANK], perm[TPU_MAX_RANK];
  shape[0] = groups;
  shape[1] = o / groups;
  shape[2] = i;
  for (int k = 0; k < n; ++k) shape[3 + k] = d[2 + k];
  w = tpu_ir_reshape(g, w, shape, n + 3);
  perm[0] = 0;
  perm[1] = 2;
  perm[2] = 1;
  for (int k = 0; k < n; ++k) perm[3 + k] = 3 + k;
  w = tpu_ir_transpose(g, w, perm);
  shape[0] = i * groups;
  shape[1] = o / groups;
  for (int k = 0; k < n; ++k) shape[2 + k] = d[2 + k];
  return tpu_ir_reshape(g, w, shape, n + 2);
}

// y = conv(x, w): x [N, I, ...], w [O, I/g, k...] -> [N, O, ...] in `out`.
static tpu_val_t conv_forward(tpu_graph_t* g, tpu_val_t x, tpu_val_t w,
                              const conv_params_t* p, tpu_dtype_t out) {
  tpu_conv_attrs_t a;
  tpu_conv_attrs_default(&a, p->n);
  for (int i = 0; i < p->n; ++i) {
    a.strides[i] = p->stride[i];
    a.pad_lo[i] = a.pad_hi[i] = p->pad[i];
    a.rhs_dilation[i] = p->dil[i];
  }
  a.feature_groups = p->groups;
  return tpu_ir_conv(g, x, w, &a, out);
}

// The gradient of conv(x, w) with respect to x, for the output gradient dy
// [N, O, ...]: x's spatial sizes are `in`. Also the transposed convolution
// of dy (in then includes output_padding).
static tpu_val_t conv_input_grad(tpu_graph_t* g, tpu_val_t dy, tpu_val_t w,
                                 const int64_t* in, const conv_params_t* p, tpu_dtype_t out) {
  if (!tpu_graph_ok(g)) return TPU_VAL_NONE;
  const int64_t *dd = tpu_ir_dims(g, dy), *wd = tpu_ir_dims(g, w);
  tpu_conv_attrs_t a;
  tpu_conv_attrs_default(&a, p->n);
  for (int i = 0; i < p->n; ++i) {
    int64_t k = p->dil[i] * (wd[2 + i] - 1) + 1, o = dd[2 + i];
    a.lhs_dilation[i] = p->stride[i];
    a.rhs_dilation[i] = p->dil[i];
    a.pad_lo[i] = k - 1 - p->pad[i];
    a.pad_hi[i] = in[i] - (o - 1) * p->stride[i] - 1 + p->pad[i];
  }
  a.feature_groups = p->groups;
  return tpu_ir_conv(g, dy, transpose_kernel(g, w, p->n, p->groups), &a, out);
}

// The gradient of conv(x, w) with respect to w [O, I/g, k...] (spatial
// sizes k): x and dy swap batch and features, dy is the kernel.
static tpu_val_t conv_weight_grad(tpu_graph_t* g, tpu_val_t x, tpu_val_t dy,
                                  const int64_t* k, const conv_params_t* p, tpu_dtype_t out) {
  if (!tpu_graph_ok(g)) return TPU_VAL_NONE;
  const int64_t *xd = tpu_ir_dims(g, x), *dd = tpu_ir_dims(g, dy);
  tpu_conv_attrs_t a;
  tpu_conv_attrs_default(&a, p->n);
  a.in_batch = 1;
  a.in_feature = 0;
  a.k_out = 1;
  a.k_in = 0;
  a.out_batch = 1;
  a.out_feature = 0;
  for (int i = 0; i < p->n; ++i) {
    int64_t kd = p->dil[i] * (k[i] - 1) + 1, od = (dd[2 + i] - 1) * p->stride[i] + 1;
    a.strides[i] = p->dil[i];
    a.rhs_dilation[i] = p->stride[i];
    a.pad_lo[i] = p->pad[i];
    a.pad_hi[i] = od - xd[2 + i] + kd - p->pad[i] - 1;
  }
  a.batch_groups = p->groups;
  return tpu_ir_conv(g, x, dy, &a, out);
}

static tpu_status_t check_conv_dtypes(tpu_lower_ctx_t* cx, int x, int w, int b) {
  tpu_dtype_t tx = tpu_arg_value_dtype(cx, x), tw = tpu_arg_value_dtype(cx, w);
  if (tx != tw)
    return tpu_invalid("expected scalar type %s but found %s", tpu_dtype_torch_name(tx),
                       tpu_dtype_torch_name(tw));
  if (b >= 0 && tpu_arg_present(cx, b) && tpu_arg_value_dtype(cx, b) != tx)
    return tpu_invalid("Input type (%s) and bias type (%s) should be the same", tpu_dtype_cpp_name(tx),
                       tpu_dtype_cpp_name(tpu_arg_value_dtype(cx, b)));
  if (tx == TPU_BOOL || tpu_dtype_is_complex(tx))
    return tpu_not_implemented("convolution", tx);
  return TPU_OK;
}

static tpu_status_t spatial_dims(tpu_lower_ctx_t* cx, int x, int w, int* n) {
  int rw = tpu_arg_rank(cx, w);
  *n = rw - 2;
  if (*n < 1 || *n > 3)
    return tpu_invalid("weight should have at least three dimensions");
  if (tpu_arg_rank(cx, x) != rw)
    return tpu_invalid("Expected %d-dimensional input for %d-dimensional weight, but got "
                       "%d-dimensional input", rw, rw, tpu_arg_rank(cx, x));
  return TPU_OK;
}

// convolution_overrideable(input, weight, bias?, stride, padding, dilation,
//                          transposed, output_padding, groups)
tpu_status_t tpu_lower_convolution(tpu_lower_ctx_t* cx) {
  int n;
  TPU_RETURN_IF_ERROR(spatial_dims(cx, 0, 1, &n));
  TPU_RETURN_IF_ERROR(check_conv_dtypes(cx, 0, 1, 2));
  conv_params_t p;
  TPU_RETURN_IF_ERROR(read_params(cx, 3, n, &p));
  tpu_graph_t* g = cx->g;
  tpu_dtype_t t = tpu_arg_value_dtype(cx, 0), acc = tpu_opmath(t);
  const int64_t *xs = tpu_arg_sizes(cx, 0), *ws = tpu_arg_sizes(cx, 1);
  tpu_val_t x = tpu_lower_tensor(cx, 0), w = tpu_lower_tensor(cx, 1);
  tpu_val_t y;
  if (p.transposed) {
    bool bad = false;
    for (int i = 0; i < n; ++i) bad |= p.out_pad[i] >= p.stride[i] && p.out_pad[i] >= p.dil[i];
    if (bad) {  // CPU's wording, dims named from the last (width)
      static const char* const names[3] = {"depth", "height", "width"};
      const int64_t* v[3] = {p.out_pad, p.stride, p.dil};
      static const char* const what[3] = {"output_padding", "stride", "dilation"};
      char msg[384];
      size_t m = 0;
      for (int k = 0; k < 3; ++k)
        for (int i = 0; i < n; ++i)
          m += (size_t)snprintf(msg + m, sizeof msg - m, "%s%s_%s: %lld", m ? " " : "", what[k],
                                names[3 - n + i], (long long)v[k][i]);
      return tpu_invalid("output padding must be smaller than either stride or dilation, but got %s",
                         msg);
    }
    if (xs[1] != ws[0])
      return tpu_invalid("Given transposed=1, weight of size [%lld, ...], expected input to have "
                         "%lld channels, but got %lld channels instead", (long long)ws[0],
                         (long long)ws[0], (long long)xs[1]);
    int64_t out[3];
    for (int i = 0; i < n; ++i)
      out[i] = (xs[2 + i] - 1) * p.stride[i] - 2 * p.pad[i] + p.dil[i] * (ws[2 + i] - 1) +
               p.out_pad[i] + 1;
    y = conv_input_grad(g, x, w, out, &p, acc);
  } else {
    if (xs[1] != ws[1] * p.groups)
      return tpu_invalid("Given groups=%lld, expected input to have %lld channels, but got %lld "
                         "channels instead", (long long)p.groups, (long long)(ws[1] * p.groups),
                         (long long)xs[1]);
    y = conv_forward(g, x, w, &p, acc);
  }
  if (tpu_arg_present(cx, 2) && tpu_graph_ok(g)) {
    const tpu_type_t* yt = tpu_ir_type(g, y);
    int64_t one = 1;
    tpu_val_t b = tpu_ir_broadcast(g, tpu_lower_input(cx, 2, acc), yt->dims, yt->rank, &one);
    y = tpu_ir_binary(g, TPU_IR_ADD, y, b);
  }
  tpu_lower_out(cx, 0, tpu_ir_convert(g, y, t));
  return TPU_OK;
}

// convolution_backward_overrideable(grad_output, input, weight, stride,
//     padding, dilation, transposed, output_padding, groups, output_mask)
//   -> (grad_input, grad_weight, grad_bias)
tpu_status_t tpu_lower_convolution_backward(tpu_lower_ctx_t* cx) {
  int n;
  TPU_RETURN_IF_ERROR(spatial_dims(cx, 1, 2, &n));
  TPU_RETURN_IF_ERROR(check_conv_dtypes(cx, 1, 2, -1));
  if (tpu_arg_rank(cx, 0) != n + 2)
    return tpu_invalid("Expected input and grad_output to have the same number of dimensions, "
                       "but got: %d and %d", n + 2, tpu_arg_rank(cx, 0));
  conv_params_t p;
  TPU_RETURN_IF_ERROR(read_params(cx, 3, n, &p));
  tpu_graph_t* g = cx->g;
  tpu_dtype_t t = tpu_arg_value_dtype(cx, 1), acc = tpu_opmath(t);
  tpu_dtype_t tdy = tpu_arg_value_dtype(cx, 0);
  const int64_t *xs = tpu_arg_sizes(cx, 1), *ws = tpu_arg_sizes(cx, 2);
  tpu_val_t dy = tpu_lower_input(cx, 0, t);
  tpu_val_t x = tpu_lower_tensor(cx, 1), w = tpu_lower_tensor(cx, 2);
  tpu_val_t gx = TPU_VAL_NONE, gw = TPU_VAL_NONE, gb = TPU_VAL_NONE;
  if (tpu_arg_mask_bit(cx, 9, 0)) {
    gx = p.transposed ? conv_forward(g, dy, w, &p, acc)
                      : conv_input_grad(g, dy, w, xs + 2, &p, acc);
    if (p.transposed && tpu_graph_ok(g)) {
      // An output_padding of a stride or more (allowed below the dilation)
      // adds rows that no input position produced: the plain convolution of
      // dy then has them too; x's gradient is its first xs rows.
      const tpu_type_t* gt = tpu_ir_type(g, gx);
      int64_t start[TPU_MAX_RANK] = {0}, limit[TPU_MAX_RANK], one[TPU_MAX_RANK];
      bool crop = false;
      for (int i = 0; i < gt->rank; ++i) {
        limit[i] = i < 2 ? gt->dims[i] : xs[i];
        one[i] = 1;
        crop |= limit[i] != gt->dims[i];
      }
      if (crop) gx = tpu_ir_slice(g, gx, start, limit, one);
    }
    gx = tpu_ir_convert(g, gx, t);
  }
  if (tpu_arg_mask_bit(cx, 9, 1)) {
    gw = p.transposed ? conv_weight_grad(g, dy, x, ws + 2, &p, acc)
                      : conv_weight_grad(g, x, dy, ws + 2, &p, acc);
    gw = tpu_ir_convert(g, gw, tpu_arg_value_dtype(cx, 2));
  }
  if (tpu_arg_mask_bit(cx, 9, 2)) {
    tpu_dtype_t bacc = tpu_opmath(tdy);
    int64_t dims[4] = {0, 2, 3, 4};
    gb = tpu_ir_reduce(g, tpu_lower_input(cx, 0, bacc), tpu_ir_const(g, bacc, 0, NULL, 0), dims,
                       n + 1, TPU_BODY_ADD);
    gb = tpu_ir_convert(g, gb, tdy);
  }
  tpu_lower_out(cx, 0, gx);
  tpu_lower_out(cx, 1, gw);
  tpu_lower_out(cx, 2, gb);
  return TPU_OK;
}
