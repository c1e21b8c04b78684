// im2col and col2im (unfold / fold): each kernel offset of a 2-d sliding
// window reads (or, for col2im, scatter-adds) a strided slice of the
// padded image.
#include <string.h>

#include "lower/lower.h"

// The 2-D window parameters of im2col / col2im, checked as CPU checks them.
typedef struct window2d {
  int64_t k[2], dil[2], pad[2], stride[2];
} window2d_t;

static tpu_status_t read_pair(tpu_lower_ctx_t* cx, int arg, const char* name, int64_t* v) {
  const int64_t* p;
  int n = tpu_arg_ints(cx, arg, &p);
  if (n != 2)
    return TPU_LOWER_ERROR(TPU_CODE_INVALID_ARGUMENT,
                           "It is expected %s equals to 2, but got size %d", name, n);
  v[0] = p[0];
  v[1] = p[1];
  return TPU_OK;
}

// kernel_size, dilation, padding, stride from argument `first` on.
static tpu_status_t read_window(tpu_lower_ctx_t* cx, int first, window2d_t* w) {
  TPU_RETURN_IF_ERROR(read_pair(cx, first, "kernel_size", w->k));
  TPU_RETURN_IF_ERROR(read_pair(cx, first + 1, "dilation", w->dil));
  TPU_RETURN_IF_ERROR(read_pair(cx, first + 2, "padding", w->pad));
  TPU_RETURN_IF_ERROR(read_pair(cx, first + 3, "stride", w->stride));
  if (w->k[0] <= 0 || w->k[1] <= 0)
    return TPU_LOWER_ERROR(TPU_CODE_INVALID_ARGUMENT,
                           "kernel size should be greater than zero, but got kernel_height: "
                           "%lld kernel_width: %lld", (long long)w->k[0], (long long)w->k[1]);
  if (w->dil[0] <= 0 || w->dil[1] <= 0)
    return TPU_LOWER_ERROR(TPU_CODE_INVALID_ARGUMENT,
                           "dilation should be greater than zero, but got dilation_height: "
                           "%lld dilation_width: %lld", (long long)w->dil[0],
                           (long long)w->dil[1]);
  if (w->pad[0] < 0 || w->pad[1] < 0)
    return TPU_LOWER_ERROR(TPU_CODE_INVALID_ARGUMENT,
                           "padding should be non-negative, but got pad_height: %lld "
                           "pad_width: %lld", (long long)w->pad[0], (long long)w->pad[1]);
  if (w->stride[0] <= 0 || w->stride[1] <= 0)
    return TPU_LOWER_ERROR(TPU_CODE_INVALID_ARGUMENT,
                           "stride should be greater than zero, but got stride_height: %lld "
                           "stride_width: %lld", (long long)w->stride[0],
                           (long long)w->stride[1]);
  return TPU_OK;
}

// Number of window positions along spatial dim s of size `size`.
static int64_t blocks(const window2d_t* w, int s, int64_t size) {
  int64_t span = w->dil[s] * (w->k[s] - 1) + 1;
  int64_t padded = size + 2 * w->pad[s];
  return padded < span ? 0 : (padded - span) / w->stride[s] + 1;
}

static bool im2col_dtype_ok(tpu_dtype_t t) {
  return t == TPU_F32 || t == TPU_F64 || t == TPU_BF16 || t == TPU_F16 || t == TPU_BOOL ||
         t == TPU_C64 || t == TPU_C128;
}

// im2col(Tensor self, int[2] kernel_size, int[2] dilation, int[2] padding,
// int[2] stride): (N, C, H, W) -> (N, C*kh*kw, L), one strided slice of the
// zero-padded input per kernel position.
tpu_status_t tpu_lower_im2col(tpu_lower_ctx_t* cx) {
  tpu_graph_t* g = cx->g;
  window2d_t w;
  memset(&w, 0, sizeof w);
  TPU_RETURN_IF_ERROR(read_window(cx, 1, &w));
  int n = tpu_arg_rank(cx, 0);
  const int64_t* xd = tpu_arg_sizes(cx, 0);
  bool ok = n == 3 || n == 4;
  for (int i = n == 4 ? 1 : 0; ok && i < n; ++i) ok = xd[i] != 0;
  if (!ok) {
    char a[128];
    return TPU_LOWER_ERROR(TPU_CODE_INVALID_ARGUMENT,
                           "Expected 3D or 4D (batch mode) tensor with possibly 0 batch size "
                           "and other non-zero dimensions for input, but got: %s",
                           tpu_shape_str(xd, n, a, sizeof a));
  }
  int64_t N = n == 4 ? xd[0] : 1, C = xd[n - 3], H = xd[n - 2], W = xd[n - 1];
  int64_t oh = blocks(&w, 0, H), ow = blocks(&w, 1, W);
  if (oh < 1 || ow < 1)
    return TPU_LOWER_ERROR(TPU_CODE_INVALID_ARGUMENT,
                           "Given input with spatial size (%lld, %lld), kernel_size=(%lld, %lld), "
                           "dilation=(%lld, %lld), padding=(%lld, %lld), calculated shape of the "
                           "array of sliding blocks as (%lld, %lld), but its components must be "
                           "at least one.", (long long)H, (long long)W, (long long)w.k[0],
                           (long long)w.k[1], (long long)w.dil[0], (long long)w.dil[1],
                           (long long)w.pad[0], (long long)w.pad[1], (long long)oh, (long long)ow);
  tpu_dtype_t t = tpu_arg_value_dtype(cx, 0);
  if (!im2col_dtype_ok(t)) return tpu_not_implemented("im2col", t);
  int64_t kk = w.k[0] * w.k[1];
  int64_t od[3] = {N, C * kk, oh * ow};
  int orank = n == 4 ? 3 : 2;
  const int64_t* ods = n == 4 ? od : od + 1;
  if (N == 0) {
    tpu_lower_out(cx, 0, tpu_ir_const(g, t, 0, ods, orank));
    return TPU_OK;
  }
  int64_t d4[4] = {N, C, H, W};
  tpu_val_t x = tpu_ir_reshape(g, tpu_lower_tensor(cx, 0), d4, 4);
  int64_t lo[4] = {0, 0, w.pad[0], w.pad[1]}, hi[4] = {0, 0, w.pad[0], w.pad[1]};
  x = tpu_ir_pad(g, x, tpu_ir_const(g, t, 0, NULL, 0), lo, hi, NULL);
  tpu_val_t* parts = tpu_graph_alloc(g, (size_t)kk * sizeof(tpu_val_t));
  if (!parts) return TPU_LOWER_ERROR(TPU_CODE_RESOURCE_EXHAUSTED, "out of memory");
  int64_t pd[5] = {N, C, 1, oh, ow};
  for (int64_t i = 0; i < w.k[0]; ++i)
    for (int64_t j = 0; j < w.k[1]; ++j) {
      int64_t s0 = i * w.dil[0], s1 = j * w.dil[1];
      int64_t start[4] = {0, 0, s0, s1};
      int64_t limit[4] = {N, C, s0 + (oh - 1) * w.stride[0] + 1, s1 + (ow - 1) * w.stride[1] + 1};
      int64_t st[4] = {1, 1, w.stride[0], w.stride[1]};
      parts[i * w.k[1] + j] = tpu_ir_reshape(g, tpu_ir_slice(g, x, start, limit, st), pd, 5);
    }
  tpu_val_t r = kk == 1 ? parts[0] : tpu_ir_concat(g, parts, (int)kk, 2);
  tpu_lower_out(cx, 0, tpu_ir_reshape(g, r, ods, orank));
  return TPU_OK;
}

// col2im(Tensor self, SymInt[2] output_size, int[2] kernel_size,
// int[2] dilation, int[2] padding, int[2] stride): the transpose of im2col.
// Each kernel position's blocks are spread back (interior padding by the
// stride) and summed in kernel order, in the input's dtype, as CPU adds them
// (bool: or).
tpu_status_t tpu_lower_col2im(tpu_lower_ctx_t* cx) {
  tpu_graph_t* g = cx->g;
  int64_t os[2] = {0, 0};
  TPU_RETURN_IF_ERROR(read_pair(cx, 1, "output_size", os));
  window2d_t w;
  memset(&w, 0, sizeof w);
  TPU_RETURN_IF_ERROR(read_window(cx, 2, &w));
  int n = tpu_arg_rank(cx, 0);
  const int64_t* xd = tpu_arg_sizes(cx, 0);
  bool ok = n == 2 || n == 3;
  for (int i = n == 3 ? 1 : 0; ok && i < n; ++i) ok = xd[i] != 0;
  if (!ok) {
    char a[128];
    return TPU_LOWER_ERROR(TPU_CODE_INVALID_ARGUMENT,
                           "Expected 2D or 3D (batch mode) tensor for input with possibly 0 "
                           "batch size and non-zero dimensions for input, but got: %s",
                           tpu_shape_str(xd, n, a, sizeof a));
  }
  int64_t kk = w.k[0] * w.k[1];
  int64_t N = n == 3 ? xd[0] : 1, CK = xd[n - 2], L = xd[n - 1];
  if (CK % kk)
    return TPU_LOWER_ERROR(TPU_CODE_INVALID_ARGUMENT,
                           "Expected size of input's dimension 1 to be divisible by the product "
                           "of kernel_size, but got input.size(1)=%lld and kernel_size=(%lld, "
                           "%lld).", (long long)CK, (long long)w.k[0], (long long)w.k[1]);
  int64_t oh = blocks(&w, 0, os[0]), ow = blocks(&w, 1, os[1]);
  if (oh * ow != L || oh < 1 || ow < 1)
    return TPU_LOWER_ERROR(TPU_CODE_INVALID_ARGUMENT,
                           "Given output_size=(%lld, %lld), kernel_size=(%lld, %lld), "
                           "dilation=(%lld, %lld), padding=(%lld, %lld), stride=(%lld, %lld), "
                           "expected size of input's dimension 2 to match the calculated number "
                           "of sliding blocks %lld * %lld = %lld, but got input.size(2)=%lld.",
                           (long long)os[0], (long long)os[1], (long long)w.k[0],
                           (long long)w.k[1], (long long)w.dil[0], (long long)w.dil[1],
                           (long long)w.pad[0], (long long)w.pad[1], (long long)w.stride[0],
                           (long long)w.stride[1], (long long)oh, (long long)ow,
                           (long long)(oh * ow), (long long)L);
  tpu_dtype_t t = tpu_arg_value_dtype(cx, 0);
  if (!im2col_dtype_ok(t)) return tpu_not_implemented("col2im", t);
  int64_t C = CK / kk;
  int64_t od[4] = {N, C, os[0], os[1]};
  int orank = n == 3 ? 4 : 3;
  const int64_t* ods = n == 3 ? od : od + 1;
  if (N == 0) {
    tpu_lower_out(cx, 0, tpu_ir_const(g, t, 0, ods, orank));
    return TPU_OK;
  }
  int64_t d5[5] = {N, C, kk, oh, ow};
  tpu_val_t x = tpu_ir_reshape(g, tpu_lower_tensor(cx, 0), d5, 5);
  int64_t ph = os[0] + 2 * w.pad[0], pw = os[1] + 2 * w.pad[1];
  tpu_val_t zero = tpu_ir_const(g, t, 0, NULL, 0);
  tpu_val_t acc = TPU_VAL_NONE;
  int64_t pd[4] = {N, C, oh, ow};
  for (int64_t i = 0; i < w.k[0]; ++i)
    for (int64_t j = 0; j < w.k[1]; ++j) {
      int64_t p = i * w.k[1] + j;
      int64_t start[5] = {0, 0, p, 0, 0}, limit[5] = {N, C, p + 1, oh, ow};
      tpu_val_t part = tpu_ir_reshape(g, tpu_ir_slice(g, x, start, limit, NULL), pd, 4);
      int64_t s0 = i * w.dil[0], s1 = j * w.dil[1];
      int64_t e0 = s0 + (oh - 1) * w.stride[0] + 1, e1 = s1 + (ow - 1) * w.stride[1] + 1;
      int64_t lo[4] = {0, 0, s0, s1}, hi[4] = {0, 0, ph - e0, pw - e1};
      int64_t in[4] = {0, 0, w.stride[0] - 1, w.stride[1] - 1};
      part = tpu_ir_pad(g, part, zero, lo, hi, in);
      acc = p == 0 ? part : tpu_ir_binary(g, t == TPU_BOOL ? TPU_IR_OR : TPU_IR_ADD, acc, part);
    }
  int64_t start[4] = {0, 0, w.pad[0], w.pad[1]};
  int64_t limit[4] = {N, C, w.pad[0] + os[0], w.pad[1] + os[1]};
  acc = tpu_ir_slice(g, acc, start, limit, NULL);
  tpu_lower_out(cx, 0, tpu_ir_reshape(g, acc, ods, orank));
  return TPU_OK;
}
