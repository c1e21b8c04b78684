// Factories: zero_, arange, linspace, logspace, eye, tril/triu_indices.
//
// torch.arange / linspace / logspace / eye reach the backend only as out=
// variants (their functional forms make an empty tensor of the requested
// dtype and call the out= form); the out tensor's dtype decides the length
// and the arithmetic (tpu_lower_out_dtype). Numbers (start, step, ...) are 0-d
// inputs, so only the length and dtype shape the program. Arithmetic follows
// PyTorch's CPU kernels: integers in int64 (arange) or double (linspace,
// logspace), floats in the dtype's opmath.
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "lower/lower.h"

// Scalar argument i converted as c10::Scalar::to<int64_t> / to<double> do.
static int64_t scalar_i64(const tpu_lower_ctx_t* cx, int i) {
  const tpu_arg_t* a = tpu_arg(cx, i);
  if (a->kind == TPU_ARG_SCALAR) {
    switch (tpu_dtype_kind(a->scalar.dtype)) {
      case TPU_KIND_BOOL: return a->scalar.b;
      case TPU_KIND_INT:
      case TPU_KIND_UINT: return a->scalar.i;
      default: break;
    }
  }
  double v = tpu_arg_number(cx, i, 0);
  if (!(v == v)) return 0;
  if (v >= 9223372036854775807.0) return INT64_MAX;
  if (v <= -9223372036854775808.0) return INT64_MIN;
  return (int64_t)v;
}

static double scalar_f64(const tpu_lower_ctx_t* cx, int i) {
  return tpu_arg_number(cx, i, 0);
}

static tpu_val_t number(tpu_lower_ctx_t* cx, double v, tpu_dtype_t t) {
  return tpu_lower_number(cx, v, t);
}

static tpu_val_t empty1d(tpu_lower_ctx_t* cx, tpu_dtype_t t) {
  int64_t zero = 0;
  return tpu_ir_const(cx->g, t, 0, &zero, 1);
}

//===--- zero_ ---===//

// zero_(self)
tpu_status_t tpu_lower_zero(tpu_lower_ctx_t* cx) {
  const tpu_view_t* self = tpu_arg(cx, 0)->tensor;
  tpu_lower_out(cx, 0, tpu_ir_const(cx->g, self->dtype, 0, self->sizes, self->rank));
  return TPU_OK;
}

//===--- arange ---===//

static bool arange_dtype_ok(tpu_dtype_t t) {
  switch (t) {
    case TPU_U8: case TPU_I8: case TPU_I16: case TPU_I32: case TPU_I64:
    case TPU_F16: case TPU_BF16: case TPU_F32: case TPU_F64:
      return true;
    default:
      return false;
  }
}

// arange.start_out(Scalar start, Scalar end, Scalar step=1, *, Tensor(a!) out)
tpu_status_t tpu_lower_arange(tpu_lower_ctx_t* cx) {
  tpu_graph_t* g = cx->g;
  tpu_dtype_t t = tpu_lower_out_dtype(cx, 0, TPU_I64);
  if (!arange_dtype_ok(t)) return tpu_not_implemented("arange_cpu", t);
  bool integral = tpu_dtype_is_integral(t, false);
  double start = scalar_f64(cx, 0), end = scalar_f64(cx, 1), step = scalar_f64(cx, 2);
  if (!(step > 0 || step < 0))
    return tpu_status_make(TPU_CODE_INVALID_ARGUMENT, "step must be nonzero");
  if (!isfinite(start) || !isfinite(end))
    return tpu_status_make(TPU_CODE_INVALID_ARGUMENT, "unsupported range: %g -> %g", start, end);
  if (!((step > 0 && end >= start) || (step < 0 && end <= start)))
    return tpu_status_make(TPU_CODE_INVALID_ARGUMENT,
                           "upper bound and lower bound inconsistent with step sign");
  double size_d;
  if (t == TPU_I64) {  // in int64 (more precise than double), numbers truncated
    int64_t xstart = scalar_i64(cx, 0), xend = scalar_i64(cx, 1), xstep = scalar_i64(cx, 2);
    if (xstep == 0)  // PyTorch's ValueError
      return tpu_status_make(TPU_CODE_VALUE, "step must be nonzero");
    int64_t sgn = (xstep > 0) - (xstep < 0);
    size_d = (double)((xend - xstart + xstep - sgn) / xstep);
  } else {
    size_d = ceil((end - start) / step);
  }
  if (!(size_d >= 0 && size_d <= 9223372036854775807.0))
    return tpu_status_make(TPU_CODE_INVALID_ARGUMENT, "invalid size, possible overflow?");
  int64_t n = (int64_t)size_d;
  if (n == 0) {
    tpu_lower_out(cx, 0, empty1d(cx, t));
    return TPU_OK;
  }
  tpu_dtype_t compute = integral ? TPU_I64 : tpu_opmath(t);
  tpu_val_t idx = tpu_ir_iota(g, compute, &n, 1, 0);
  // start + step * i in accscalar (int64 for integers: the numbers truncate)
  tpu_val_t sv = tpu_lower_input(cx, 0, compute), dv = tpu_lower_input(cx, 2, compute);
  tpu_val_t v = tpu_ir_binary(g, TPU_IR_ADD, tpu_lower_splat_like(cx, sv, idx),
                              tpu_ir_binary(g, TPU_IR_MUL, tpu_lower_splat_like(cx, dv, idx), idx));
  tpu_lower_out(cx, 0, tpu_ir_convert(g, v, t));
  return TPU_OK;
}

//===--- linspace, logspace ---===//

// start + step * i for i < steps / 2, end - step * (steps - 1 - i) after
// (PyTorch's symmetric form: both ends come out exact), in `compute`, each
// step rounded to `round_to` (CPU computes half precision in half
// precision: the step and every product and sum are rounded).
static tpu_val_t spaced(tpu_lower_ctx_t* cx, tpu_val_t start, tpu_val_t end, int64_t steps,
                        tpu_dtype_t compute, tpu_dtype_t round_to) {
  tpu_graph_t* g = cx->g;
#define R(v) tpu_ir_convert(g, tpu_ir_convert(g, (v), round_to), compute)
  tpu_val_t idx = tpu_ir_iota(g, compute, &steps, 1, 0);
  // (steps - 1) is an input, not a constant: XLA turns a division by a
  // constant into a multiplication by its inexact reciprocal.
  tpu_val_t step = R(tpu_ir_binary(g, TPU_IR_DIV, R(tpu_ir_binary(g, TPU_IR_SUB, end, start)),
                                   tpu_lower_number(cx, (double)(steps - 1), compute)));
  tpu_val_t sv = tpu_lower_splat_like(cx, step, idx);
  tpu_val_t lo = R(tpu_ir_binary(g, TPU_IR_ADD, tpu_lower_splat_like(cx, start, idx),
                                 R(tpu_ir_binary(g, TPU_IR_MUL, sv, idx))));
  tpu_val_t back = tpu_ir_binary(g, TPU_IR_SUB, tpu_ir_const(g, compute, (double)(steps - 1), &steps, 1),
                                 idx);
  tpu_val_t hi = R(tpu_ir_binary(g, TPU_IR_SUB, tpu_lower_splat_like(cx, end, idx),
                                 R(tpu_ir_binary(g, TPU_IR_MUL, sv, back))));
#undef R
  tpu_val_t first = tpu_ir_compare(g, TPU_CMP_LT, idx,
                                   tpu_ir_const(g, compute, (double)(steps / 2), &steps, 1));
  return tpu_ir_select(g, first, lo, hi);
}

static tpu_status_t check_steps(int64_t steps) {
  if (steps < 0)
    return tpu_status_make(TPU_CODE_INVALID_ARGUMENT, "number of steps must be non-negative");
  return TPU_OK;
}

static bool space_dtype_ok(tpu_dtype_t t) {
  return t != TPU_BOOL && t != TPU_U16 && t != TPU_U32 && t != TPU_U64 && t != TPU_F8E5M2 &&
         t != TPU_F8E4M3FN;
}

// The complex value of scalar argument i, parts as doubles.
static void scalar_c(const tpu_lower_ctx_t* cx, int i, double* re, double* im) {
  const tpu_arg_t* a = tpu_arg(cx, i);
  *re = tpu_arg_number(cx, i, 0);
  *im = a->kind == TPU_ARG_SCALAR && tpu_dtype_is_complex(a->scalar.dtype) ? a->scalar.c[1] : 0;
}

static tpu_dtype_t real_of(tpu_dtype_t t) {
  return t == TPU_C64 ? TPU_F32 : t == TPU_C128 ? TPU_F64 : t;
}

// Complex linspace parts: start/end split into real and imaginary lines.
static tpu_val_t complex_spaced(tpu_lower_ctx_t* cx, int64_t steps, tpu_dtype_t t) {
  double sr, si, er, ei;
  scalar_c(cx, 0, &sr, &si);
  scalar_c(cx, 1, &er, &ei);
  tpu_dtype_t r = real_of(t);
  tpu_val_t re = spaced(cx, number(cx, sr, r), number(cx, er, r), steps, r, r);
  tpu_val_t im = spaced(cx, number(cx, si, r), number(cx, ei, r), steps, r, r);
  return tpu_ir_binary(cx->g, TPU_IR_COMPLEX, re, im);
}

// linspace.out(Scalar start, Scalar end, int steps, *, Tensor(a!) out)
tpu_status_t tpu_lower_linspace(tpu_lower_ctx_t* cx) {
  tpu_graph_t* g = cx->g;
  tpu_dtype_t t = tpu_lower_out_dtype(cx, 0, tpu_default_float(cx));
  int64_t steps = tpu_arg_int(cx, 2, 0);
  TPU_RETURN_IF_ERROR(check_steps(steps));
  if (!space_dtype_ok(t)) return tpu_not_implemented("linspace_cpu", t);
  if (steps == 0) {
    tpu_lower_out(cx, 0, empty1d(cx, t));
    return TPU_OK;
  }
  if (steps == 1) {  // fill_(start)
    tpu_lower_out(cx, 0, tpu_ir_broadcast(g, tpu_lower_input(cx, 0, t), &steps, 1, NULL));
    return TPU_OK;
  }
  tpu_val_t v;
  if (tpu_dtype_is_complex(t)) {
    v = complex_spaced(cx, steps, t);
  } else if (tpu_dtype_is_integral(t, false)) {
    // start and end convert to the dtype first (truncating); the step and
    // the points are doubles, truncated again at the end.
    double s = (double)scalar_i64(cx, 0), e = (double)scalar_i64(cx, 1);
    v = spaced(cx, number(cx, s, TPU_F64), number(cx, e, TPU_F64), steps, TPU_F64, TPU_F64);
  } else {
    tpu_dtype_t c = tpu_opmath(t);
    // start and end are rounded to the dtype before the arithmetic.
    tpu_val_t s = tpu_ir_convert(g, tpu_lower_input(cx, 0, t), c);
    tpu_val_t e = tpu_ir_convert(g, tpu_lower_input(cx, 1, t), c);
    v = spaced(cx, s, e, steps, c, t);
  }
  tpu_lower_out(cx, 0, tpu_ir_convert(g, v, t));
  return TPU_OK;
}

// logspace.out(Scalar start, Scalar end, int steps, float base=10, *,
// Tensor(a!) out): base ** linspace(start, end).
tpu_status_t tpu_lower_logspace(tpu_lower_ctx_t* cx) {
  tpu_graph_t* g = cx->g;
  tpu_dtype_t t = tpu_lower_out_dtype(cx, 0, tpu_default_float(cx));
  int64_t steps = tpu_arg_int(cx, 2, 0);
  double base = tpu_arg_float(cx, 3, 10);
  TPU_RETURN_IF_ERROR(check_steps(steps));
  if (!space_dtype_ok(t)) return tpu_not_implemented("logspace_cpu", t);
  if (steps == 0) {
    tpu_lower_out(cx, 0, empty1d(cx, t));
    return TPU_OK;
  }
  tpu_val_t v;
  if (tpu_dtype_is_complex(t)) {
    // base ** z = exp(z * log(base)), z on the complex line.
    tpu_val_t z;
    if (steps == 1) {
      double re, im;
      scalar_c(cx, 0, &re, &im);
      tpu_dtype_t r = real_of(t);
      z = tpu_ir_broadcast(g, tpu_ir_binary(g, TPU_IR_COMPLEX, number(cx, re, r), number(cx, im, r)),
                           &steps, 1, NULL);
    } else {
      z = complex_spaced(cx, steps, t);
    }
    tpu_val_t lb = tpu_ir_convert(g, number(cx, log(base), real_of(t)), t);
    v = tpu_ir_unary(g, TPU_IR_EXP,
                     tpu_ir_binary(g, TPU_IR_MUL, z, tpu_lower_splat_like(cx, lb, z)));
    tpu_lower_out(cx, 0, v);
    return TPU_OK;
  }
  bool integral = tpu_dtype_is_integral(t, false);
  tpu_dtype_t c = integral || t == TPU_F64 ? TPU_F64 : TPU_F32;
  tpu_val_t x;
  if (steps == 1) {  // fill_(pow(base, start)), in double
    c = TPU_F64;
    x = tpu_ir_broadcast(g, tpu_lower_input(cx, 0, c), &steps, 1, NULL);
  } else if (integral) {
    double s = (double)scalar_i64(cx, 0), e = (double)scalar_i64(cx, 1);
    x = spaced(cx, number(cx, s, c), number(cx, e, c), steps, c, c);
    base = (float)base;  // PyTorch takes an integral logspace's base as float
  } else {
    tpu_val_t s = tpu_ir_convert(g, tpu_lower_input(cx, 0, t), c);
    tpu_val_t e = tpu_ir_convert(g, tpu_lower_input(cx, 1, t), c);
    x = spaced(cx, s, e, steps, c, c);
  }
  v = tpu_ir_binary(g, TPU_IR_POW, tpu_lower_splat_like(cx, number(cx, base, c), x), x);
  tpu_lower_out(cx, 0, tpu_ir_convert(g, v, t));
  return TPU_OK;
}

//===--- eye ---===//

// eye.out(SymInt n, *, Tensor(a!) out) / eye.m_out(SymInt n, SymInt m, *, out)
tpu_status_t tpu_lower_eye(tpu_lower_ctx_t* cx) {
  tpu_graph_t* g = cx->g;
  int64_t n = tpu_arg_int(cx, 0, 0), m = tpu_arg_int(cx, 1, n);
  if (n < 0)
    return tpu_status_make(TPU_CODE_INVALID_ARGUMENT, "n must be greater or equal to 0, got %lld",
                           (long long)n);
  if (m < 0)
    return tpu_status_make(TPU_CODE_INVALID_ARGUMENT, "m must be greater or equal to 0, got %lld",
                           (long long)m);
  tpu_dtype_t t = tpu_lower_out_dtype(cx, 0, tpu_default_float(cx));
  int64_t dims[2] = {n, m};
  tpu_val_t diag = tpu_ir_compare(g, TPU_CMP_EQ, tpu_ir_iota(g, TPU_I64, dims, 2, 0),
                                  tpu_ir_iota(g, TPU_I64, dims, 2, 1));
  tpu_lower_out(cx, 0, tpu_ir_select(g, diag, tpu_ir_const(g, t, 1, dims, 2),
                                     tpu_ir_const(g, t, 0, dims, 2)));
  return TPU_OK;
}

//===--- tril_indices, triu_indices ---===//

// tril_indices / triu_indices(int row, int col, int offset=0, *,
// ScalarType? dtype=long, ...): the coordinates, computed on the host (they
// depend only on the three numbers) and uploaded.
static tpu_status_t tri_indices(tpu_lower_ctx_t* cx, bool lower, const char* name) {
  int64_t row = tpu_arg_int(cx, 0, 0), col = tpu_arg_int(cx, 1, 0), off = tpu_arg_int(cx, 2, 0);
  tpu_dtype_t t = tpu_arg_dtype(cx, 3, TPU_I64);
  if (row < 0)
    return tpu_status_make(TPU_CODE_INVALID_ARGUMENT, "row must be non-negative, got%lld",
                           (long long)row);
  if (col < 0)
    return tpu_status_make(TPU_CODE_INVALID_ARGUMENT, "col must be non-negative, got%lld",
                           (long long)col);
  if (t != TPU_I64 && t != TPU_I32) return tpu_not_implemented(name, t);
  int64_t count = 0;
  for (int64_t r = 0; r < row; ++r) {
    int64_t lo = lower ? 0 : r + off, hi = lower ? r + off + 1 : col;  // [lo, hi)
    if (lo < 0) lo = 0;
    if (hi > col) hi = col;
    if (hi > lo) count += hi - lo;
  }
  int64_t dims[2] = {2, count};
  if (count == 0) {
    tpu_lower_out(cx, 0, tpu_ir_const(cx->g, t, 0, dims, 2));
    return TPU_OK;
  }
  int64_t* data = malloc(sizeof(int64_t) * 2 * (size_t)count);
  if (!data) return tpu_status_make(TPU_CODE_RESOURCE_EXHAUSTED, "out of host memory");
  int64_t k = 0;
  for (int64_t r = 0; r < row; ++r) {
    int64_t lo = lower ? 0 : r + off, hi = lower ? r + off + 1 : col;
    if (lo < 0) lo = 0;
    if (hi > col) hi = col;
    for (int64_t c = lo; c < hi; ++c, ++k) {
      data[k] = r;
      data[count + k] = c;
    }
  }
  tpu_val_t v = tpu_lower_bytes(cx, TPU_I64, dims, 2, data);
  free(data);
  tpu_lower_out(cx, 0, tpu_ir_convert(cx->g, v, t));
  return TPU_OK;
}

tpu_status_t tpu_lower_tril_indices(tpu_lower_ctx_t* cx) {
  return tri_indices(cx, true, "tril_indices");
}

tpu_status_t tpu_lower_triu_indices(tpu_lower_ctx_t* cx) {
  return tri_indices(cx, false, "triu_indices");
}
