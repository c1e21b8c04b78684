// FFTs: _fft_r2c, _fft_c2r, _fft_c2c on stablehlo.fft.
//
// stablehlo.fft transforms the trailing 1..3 dims, so each group of at most
// three requested dims is transposed to the end (in the requested order),
// transformed, and transposed back. A multi-dim transform is separable, so
// more than three dims are done as several groups: the real-input (or
// real-output) transform takes the last group, which holds the halved dim
// (the last requested one), and plain complex transforms do the rest (first
// for c2r, as PocketFFT does, so the Hermitian last dim is read last).
//
// XLA's inverse transforms divide by N; PyTorch's normalization mode
// (0: none, 1: 1/sqrt(N), 2: 1/N, N = the signal's element count over the
// transformed dims) is applied afterwards as one multiply, undoing XLA's 1/N
// for inverse transforms.
#include <math.h>
#include <string.h>

#include "lower/lower.h"

typedef struct fft_dims {
  int64_t d[TPU_MAX_RANK];  // requested dims, wrapped, in order
  int n;
} fft_dims_t;

// The dim list argument i, wrapped and checked for repeats.
static tpu_status_t read_dims(tpu_lower_ctx_t* cx, int i, int rank, fft_dims_t* out) {
  const int64_t* v;
  out->n = tpu_arg_ints(cx, i, &v);
  if (out->n > rank)
    return TPU_LOWER_ERROR(TPU_CODE_INVALID_ARGUMENT, "FFT dims must be unique");
  for (int k = 0; k < out->n; ++k) {
    TPU_RETURN_IF_ERROR(tpu_wrap_dim(v[k], rank, &out->d[k]));
    for (int j = 0; j < k; ++j)
      if (out->d[j] == out->d[k])
        return TPU_LOWER_ERROR(TPU_CODE_INVALID_ARGUMENT, "FFT dims must be unique");
  }
  return TPU_OK;
}

// CPU's (MKL/PocketFFT) refusal of other dtypes, in its words.
static tpu_status_t check_dtype(tpu_lower_ctx_t* cx, bool complex_in) {
  tpu_dtype_t t = tpu_arg_value_dtype(cx, 0);
  bool ok = complex_in ? (t == TPU_C64 || t == TPU_C128) : (t == TPU_F32 || t == TPU_F64);
  if (ok) return TPU_OK;
  return TPU_LOWER_ERROR(TPU_CODE_INVALID_ARGUMENT, "MKL FFT doesn't support tensors of type: %s",
                         tpu_dtype_torch_name(t));
}

// One stablehlo.fft over dims[0..n) of x (n <= 3): those dims go last in
// order, are transformed with `lengths`, and go back to their places.
static tpu_val_t fft_group(tpu_graph_t* g, tpu_val_t x, const int64_t* dims, int n,
                           tpu_fft_type_t type, const int64_t* lengths) {
  if (!tpu_graph_ok(g)) return TPU_VAL_NONE;
  int rank = tpu_ir_rank(g, x);
  int64_t perm[TPU_MAX_RANK], inv[TPU_MAX_RANK];
  bool picked[TPU_MAX_RANK] = {0};
  for (int i = 0; i < n; ++i) picked[dims[i]] = true;
  int k = 0;
  for (int i = 0; i < rank; ++i)
    if (!picked[i]) perm[k++] = i;
  for (int i = 0; i < n; ++i) perm[k++] = dims[i];
  for (int i = 0; i < rank; ++i) inv[perm[i]] = i;
  tpu_val_t y = tpu_ir_fft(g, tpu_ir_transpose(g, x, perm), type, lengths, n);
  return tpu_ir_transpose(g, y, inv);
}

// Complex transforms over dims[0..n) in groups of three (current sizes).
static tpu_val_t fft_c2c_dims(tpu_graph_t* g, tpu_val_t x, const int64_t* dims, int n,
                              bool forward) {
  for (int start = 0; start < n && tpu_graph_ok(g); start += 3) {
    int m = n - start < 3 ? n - start : 3;
    int64_t len[3];
    for (int i = 0; i < m; ++i) len[i] = tpu_ir_dims(g, x)[dims[start + i]];
    x = fft_group(g, x, dims + start, m, forward ? TPU_FFT_FFT : TPU_FFT_IFFT, len);
  }
  return x;
}

// Multiplies y by the normalization of mode `norm` over `count` elements,
// times `extra` (which undoes XLA's 1/N of inverse transforms).
static tpu_val_t normalize(tpu_lower_ctx_t* cx, tpu_val_t y, int64_t norm, double count,
                           double extra) {
  double s = norm == 1 ? 1 / sqrt(count) : norm == 2 ? 1 / count : 1;
  s *= extra;
  if (s == 1) return y;
  return tpu_ir_binary(cx->g, TPU_IR_MUL, y, tpu_lower_const_like(cx, y, s));
}

static tpu_status_t check_norm(int64_t norm) {
  if (norm < 0 || norm > 2)
    return TPU_LOWER_ERROR(TPU_CODE_INVALID_ARGUMENT, "Unsupported normalization type %lld",
                           (long long)norm);
  return TPU_OK;
}

static tpu_dtype_t complex_of(tpu_dtype_t t) { return t == TPU_F64 ? TPU_C128 : TPU_C64; }
static tpu_dtype_t real_of(tpu_dtype_t t) { return t == TPU_C128 ? TPU_F64 : TPU_F32; }

// _fft_r2c(Tensor self, int[] dim, int normalization, bool onesided)
tpu_status_t tpu_lower_fft_r2c(tpu_lower_ctx_t* cx) {
  tpu_graph_t* g = cx->g;
  TPU_RETURN_IF_ERROR(check_dtype(cx, false));
  int rank = tpu_arg_rank(cx, 0);
  fft_dims_t fd;
  TPU_RETURN_IF_ERROR(read_dims(cx, 1, rank, &fd));
  int64_t norm = tpu_arg_int(cx, 2, 0);
  TPU_RETURN_IF_ERROR(check_norm(norm));
  bool onesided = tpu_arg_bool(cx, 3, true);
  if (fd.n == 0)
    return TPU_LOWER_ERROR(TPU_CODE_INVALID_ARGUMENT, "_fft_r2c needs at least one dim");
  const int64_t* in = tpu_arg_sizes(cx, 0);
  tpu_dtype_t ct = complex_of(tpu_arg_value_dtype(cx, 0));
  int64_t out[TPU_MAX_RANK];
  memcpy(out, in, sizeof(int64_t) * (size_t)rank);
  int64_t last = fd.d[fd.n - 1];
  if (onesided) out[last] = in[last] / 2 + 1;
  if (tpu_numel(in, rank) == 0) {
    tpu_lower_out(cx, 0, tpu_ir_const(g, ct, 0, out, rank));
    return TPU_OK;
  }
  double count = 1;
  for (int i = 0; i < fd.n; ++i) count *= (double)in[fd.d[i]];
  tpu_val_t x = tpu_lower_tensor(cx, 0), y;
  if (!onesided) {
    // The full spectrum: a complex transform of the real signal.
    y = tpu_ir_binary(g, TPU_IR_COMPLEX, x, tpu_lower_const_like(cx, x, 0));
    y = fft_c2c_dims(g, y, fd.d, fd.n, true);
  } else {
    int m = fd.n < 3 ? fd.n : 3;
    const int64_t* tail = fd.d + fd.n - m;
    int64_t len[3];
    for (int i = 0; i < m; ++i) len[i] = in[tail[i]];
    y = fft_group(g, x, tail, m, TPU_FFT_RFFT, len);
    y = fft_c2c_dims(g, y, fd.d, fd.n - m, true);
  }
  tpu_lower_out(cx, 0, normalize(cx, y, norm, count, 1));
  return TPU_OK;
}

// _fft_c2c(Tensor self, SymInt[] dim, int normalization, bool forward)
tpu_status_t tpu_lower_fft_c2c(tpu_lower_ctx_t* cx) {
  TPU_RETURN_IF_ERROR(check_dtype(cx, true));
  int rank = tpu_arg_rank(cx, 0);
  fft_dims_t fd;
  TPU_RETURN_IF_ERROR(read_dims(cx, 1, rank, &fd));
  int64_t norm = tpu_arg_int(cx, 2, 0);
  TPU_RETURN_IF_ERROR(check_norm(norm));
  bool forward = tpu_arg_bool(cx, 3, true);
  const int64_t* in = tpu_arg_sizes(cx, 0);
  tpu_val_t x = tpu_lower_tensor(cx, 0);
  if (tpu_numel(in, rank) == 0) {
    tpu_lower_out(cx, 0, x);
    return TPU_OK;
  }
  double count = 1;
  for (int i = 0; i < fd.n; ++i) count *= (double)in[fd.d[i]];
  tpu_val_t y = fft_c2c_dims(cx->g, x, fd.d, fd.n, forward);
  tpu_lower_out(cx, 0, normalize(cx, y, norm, count, forward ? 1 : count));
  return TPU_OK;
}

// _fft_c2r(Tensor self, int[] dim, int normalization, SymInt last_dim_size):
// the last dim holds the first last_dim_size/2+1 coefficients of a
// Hermitian signal (more are ignored, as PocketFFT ignores them).
tpu_status_t tpu_lower_fft_c2r(tpu_lower_ctx_t* cx) {
  tpu_graph_t* g = cx->g;
  TPU_RETURN_IF_ERROR(check_dtype(cx, true));
  int rank = tpu_arg_rank(cx, 0);
  fft_dims_t fd;
  TPU_RETURN_IF_ERROR(read_dims(cx, 1, rank, &fd));
  int64_t norm = tpu_arg_int(cx, 2, 0);
  TPU_RETURN_IF_ERROR(check_norm(norm));
  int64_t lds = tpu_arg_int(cx, 3, 0);
  if (fd.n == 0)
    return TPU_LOWER_ERROR(TPU_CODE_INVALID_ARGUMENT, "_fft_c2r needs at least one dim");
  if (lds < 1)
    return TPU_LOWER_ERROR(TPU_CODE_INVALID_ARGUMENT,
                           "Invalid number of data points (%lld) specified", (long long)lds);
  const int64_t* in = tpu_arg_sizes(cx, 0);
  int64_t last = fd.d[fd.n - 1], half = lds / 2 + 1;
  if (in[last] < half)
    return TPU_LOWER_ERROR(TPU_CODE_INVALID_ARGUMENT,
                           "_fft_c2r: dim %lld has %lld coefficients, a real signal of %lld "
                           "points needs %lld", (long long)last, (long long)in[last],
                           (long long)lds, (long long)half);
  int64_t out[TPU_MAX_RANK];
  memcpy(out, in, sizeof(int64_t) * (size_t)rank);
  out[last] = lds;
  tpu_dtype_t rt = real_of(tpu_arg_value_dtype(cx, 0));
  if (tpu_numel(out, rank) == 0) {
    tpu_lower_out(cx, 0, tpu_ir_const(g, rt, 0, out, rank));
    return TPU_OK;
  }
  tpu_val_t x = tpu_lower_tensor(cx, 0);
  int64_t lo[TPU_MAX_RANK] = {0}, hi[TPU_MAX_RANK];
  memcpy(hi, in, sizeof(int64_t) * (size_t)rank);
  hi[last] = half;
  x = tpu_ir_slice(g, x, lo, hi, NULL);
  int m = fd.n < 3 ? fd.n : 3;
  x = fft_c2c_dims(g, x, fd.d, fd.n - m, false);
  const int64_t* tail = fd.d + fd.n - m;
  int64_t len[3];
  for (int i = 0; i < m; ++i) len[i] = out[tail[i]];
  tpu_val_t y = fft_group(g, x, tail, m, TPU_FFT_IRFFT, len);
  double count = 1;
  for (int i = 0; i < fd.n; ++i) count *= (double)out[fd.d[i]];
  tpu_lower_out(cx, 0, normalize(cx, y, norm, count, count));
  return TPU_OK;
}
