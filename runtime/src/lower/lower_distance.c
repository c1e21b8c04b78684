// Distances: _cdist_forward, _cdist_backward, _pdist_forward,
// _pdist_backward; and the margin losses (multi_margin_loss,
// multilabel_margin_loss) with their backward, at the end.
//
// cdist forms every row difference x1[i] - x2[j] as one [N, R1, R2, C] value
// and reduces over C with PyTorch's formula for p (0, 1, 2, inf or general),
// in the same order of operations as the CPU kernel so results agree to
// rounding; for p = 2 in matmul mode it uses PyTorch's matmul identity
// (|a|^2 + |b|^2 - 2 a.b, clamped and square-rooted) as CPU does. pdist is
// cdist of the rows with themselves, with the upper triangle gathered; its
// backward spreads the condensed gradient back into a full symmetric matrix,
// so each row's gradient is one sum over all other rows.
//
// Half precision computes in float (CPU refuses it; CUDA accepts it), and the
// p-dependent formula is chosen at lowering time (p shapes the program).
#include <math.h>
#include <string.h>

#include "lower/lower.h"

static tpu_val_t splat(tpu_graph_t* g, tpu_dtype_t t, double v, const int64_t* d, int n) {
  return tpu_ir_const(g, t, v, d, n);
}

// sign(x) as PyTorch's distance kernels define it: (0 < x) - (x < 0).
static tpu_val_t sign_of(tpu_graph_t* g, tpu_val_t x, tpu_dtype_t t, const int64_t* d, int n) {
  tpu_val_t zero = splat(g, t, 0, d, n);
  tpu_val_t pos = tpu_ir_convert(g, tpu_ir_compare(g, TPU_CMP_LT, zero, x), t);
  tpu_val_t neg = tpu_ir_convert(g, tpu_ir_compare(g, TPU_CMP_LT, x, zero), t);
  return tpu_ir_binary(g, TPU_IR_SUB, pos, neg);
}

// x1 [N, R1, C] - x2 [N, R2, C] -> [N, R1, R2, C].
static tpu_val_t pair_diff(tpu_graph_t* g, tpu_val_t x1, tpu_val_t x2, const int64_t* d4) {
  static const int64_t b1[3] = {0, 1, 3}, b2[3] = {0, 2, 3};
  return tpu_ir_binary(g, TPU_IR_SUB, tpu_ir_broadcast(g, x1, d4, 4, b1),
                       tpu_ir_broadcast(g, x2, d4, 4, b2));
}

// The p-distance of every row pair: x1 [N, R1, C], x2 [N, R2, C] in dtype t
// -> [N, R1, R2].
static tpu_val_t pnorm_dist(tpu_graph_t* g, tpu_val_t x1, tpu_val_t x2, const int64_t* d4,
                            double p, tpu_dtype_t t) {
  static const int64_t last = 3;
  tpu_val_t a = tpu_ir_unary(g, TPU_IR_ABS, pair_diff(g, x1, x2, d4));
  tpu_val_t zero = tpu_ir_const(g, t, 0, NULL, 0);
  if (isinf(p)) return tpu_ir_reduce(g, a, zero, &last, 1, TPU_BODY_MAX);
  if (p == 0) {
    tpu_val_t nz = tpu_ir_convert(g, tpu_ir_compare(g, TPU_CMP_NE, a, splat(g, t, 0, d4, 4)), t);
    return tpu_ir_reduce(g, nz, zero, &last, 1, TPU_BODY_ADD);
  }
  if (p == 1) return tpu_ir_reduce(g, a, zero, &last, 1, TPU_BODY_ADD);
  if (p == 2) {
    tpu_val_t s = tpu_ir_reduce(g, tpu_ir_binary(g, TPU_IR_MUL, a, a), zero, &last, 1,
                                TPU_BODY_ADD);
    return tpu_ir_unary(g, TPU_IR_SQRT, s);
  }
  tpu_val_t s = tpu_ir_reduce(g, tpu_ir_binary(g, TPU_IR_POW, a, splat(g, t, p, d4, 4)), zero,
                              &last, 1, TPU_BODY_ADD);
  return tpu_ir_binary(g, TPU_IR_POW, s, splat(g, t, 1.0 / p, d4, 3));
}

// PyTorch's _euclidean_dist: [-2 x1, |x1|^2, 1] @ [x2, 1, |x2|^2]^T, clamped
// at 0 and square-rooted (one matmul instead of the [N, R1, R2, C] value).
static tpu_val_t euclid_mm(tpu_graph_t* g, tpu_val_t x1, tpu_val_t x2, int64_t n, int64_t r1,
                           int64_t r2, int64_t c, tpu_dtype_t t) {
  static const int64_t last = 2;
  tpu_val_t zero = tpu_ir_const(g, t, 0, NULL, 0);
  int64_t d1[3] = {n, r1, 1}, d2[3] = {n, r2, 1}, f1[3] = {n, r1, c};
  tpu_val_t n1 = tpu_ir_reshape(
      g, tpu_ir_reduce(g, tpu_ir_binary(g, TPU_IR_MUL, x1, x1), zero, &last, 1, TPU_BODY_ADD),
      d1, 3);
  tpu_val_t n2 = tpu_ir_reshape(
      g, tpu_ir_reduce(g, tpu_ir_binary(g, TPU_IR_MUL, x2, x2), zero, &last, 1, TPU_BODY_ADD),
      d2, 3);
  tpu_val_t a[3] = {tpu_ir_binary(g, TPU_IR_MUL, x1, splat(g, t, -2, f1, 3)), n1,
                    splat(g, t, 1, d1, 3)};
  tpu_val_t b[3] = {x2, splat(g, t, 1, d2, 3), n2};
  tpu_dot_dims_t dn;
  memset(&dn, 0, sizeof dn);
  dn.n_batch = dn.n_contract = 1;
  dn.lhs_contract[0] = dn.rhs_contract[0] = 2;
  tpu_val_t r = tpu_ir_dot(g, tpu_ir_concat(g, a, 3, 2), tpu_ir_concat(g, b, 3, 2), &dn, t);
  int64_t od[3] = {n, r1, r2};
  return tpu_ir_unary(g, TPU_IR_SQRT,
                      tpu_ir_binary(g, TPU_IR_MAX, r, splat(g, t, 0, od, 3)));
}

// The gradient contribution of each pair and column (PyTorch's per-p
// backward formulas): diff [N, R1, R2, C], grad and dist [N, R1, R2].
static tpu_val_t pair_grad(tpu_graph_t* g, tpu_val_t diff, tpu_val_t grad, tpu_val_t dist,
                           const int64_t* d4, double p, tpu_dtype_t t) {
  static const int64_t b3[3] = {0, 1, 2};
  grad = tpu_ir_broadcast(g, grad, d4, 4, b3);
  dist = tpu_ir_broadcast(g, dist, d4, 4, b3);
  tpu_val_t zero = splat(g, t, 0, d4, 4);
  tpu_val_t sgn = sign_of(g, diff, t, d4, 4);
  tpu_val_t dist0 = tpu_ir_compare(g, TPU_CMP_EQ, dist, zero);
  if (p == 1) return tpu_ir_binary(g, TPU_IR_MUL, sgn, grad);
  if (isinf(p)) {
    // grad * sign(diff) * (1 - min(1, ceil(| |diff| - dist |))): only the
    // columns reaching the maximum get the gradient.
    tpu_val_t off = tpu_ir_unary(
        g, TPU_IR_CEIL,
        tpu_ir_unary(g, TPU_IR_ABS,
                     tpu_ir_binary(g, TPU_IR_SUB, tpu_ir_unary(g, TPU_IR_ABS, diff), dist)));
    tpu_val_t one = splat(g, t, 1, d4, 4);
    tpu_val_t w = tpu_ir_binary(g, TPU_IR_SUB, one, tpu_ir_binary(g, TPU_IR_MIN, one, off));
    return tpu_ir_binary(g, TPU_IR_MUL, tpu_ir_binary(g, TPU_IR_MUL, grad, sgn), w);
  }
  tpu_val_t r;
  if (p == 2) {
    r = tpu_ir_binary(g, TPU_IR_DIV, tpu_ir_binary(g, TPU_IR_MUL, grad, diff), dist);
  } else if (p < 2) {
    tpu_val_t pm1 = splat(g, t, p - 1, d4, 4);
    tpu_val_t num = tpu_ir_binary(
        g, TPU_IR_MUL,
        tpu_ir_binary(g, TPU_IR_MUL, sgn,
                      tpu_ir_binary(g, TPU_IR_POW, tpu_ir_unary(g, TPU_IR_ABS, diff), pm1)),
        grad);
    r = tpu_ir_binary(g, TPU_IR_DIV, num, tpu_ir_binary(g, TPU_IR_POW, dist, pm1));
    if (p < 1) dist0 = tpu_ir_binary(g, TPU_IR_OR, dist0, tpu_ir_compare(g, TPU_CMP_EQ, diff, zero));
  } else {
    tpu_val_t num = tpu_ir_binary(
        g, TPU_IR_MUL,
        tpu_ir_binary(g, TPU_IR_MUL, diff,
                      tpu_ir_binary(g, TPU_IR_POW, tpu_ir_unary(g, TPU_IR_ABS, diff),
                                    splat(g, t, p - 2, d4, 4))),
        grad);
    r = tpu_ir_binary(g, TPU_IR_DIV, num,
                      tpu_ir_binary(g, TPU_IR_POW, dist, splat(g, t, p - 1, d4, 4)));
  }
  return tpu_ir_select(g, dist0, zero, r);
}

static tpu_status_t check_floating(tpu_lower_ctx_t* cx, int i, const char* what) {
  tpu_dtype_t t = tpu_arg_value_dtype(cx, i);
  if (!tpu_dtype_is_float(t) || tpu_dtype_is_complex(t))
    return TPU_LOWER_ERROR(TPU_CODE_INVALID_ARGUMENT,
                           "cdist only supports floating-point dtypes, %s got: %s", what,
                           tpu_dtype_torch_name(t));
  return TPU_OK;
}

// The shapes of a cdist call: batch dims broadcast; N their product.
typedef struct cdist_shape {
  int64_t batch[TPU_MAX_RANK];
  int nb;
  int64_t n, r1, r2, c;
} cdist_shape_t;

static tpu_status_t cdist_shape(tpu_lower_ctx_t* cx, int a1, int a2, cdist_shape_t* s) {
  int n1 = tpu_arg_rank(cx, a1), n2 = tpu_arg_rank(cx, a2);
  if (n1 < 2)
    return TPU_LOWER_ERROR(TPU_CODE_INVALID_ARGUMENT,
                           "cdist only supports at least 2D tensors, X1 got: %dD", n1);
  if (n2 < 2)
    return TPU_LOWER_ERROR(TPU_CODE_INVALID_ARGUMENT,
                           "cdist only supports at least 2D tensors, X2 got: %dD", n2);
  const int64_t* d1 = tpu_arg_sizes(cx, a1);
  const int64_t* d2 = tpu_arg_sizes(cx, a2);
  s->c = d1[n1 - 1];
  if (d1[n1 - 1] != d2[n2 - 1])
    return TPU_LOWER_ERROR(TPU_CODE_INVALID_ARGUMENT,
                           "X1 and X2 must have the same number of columns. X1: %lld X2: %lld",
                           (long long)d1[n1 - 1], (long long)d2[n2 - 1]);
  s->r1 = d1[n1 - 2];
  s->r2 = d2[n2 - 2];
  TPU_RETURN_IF_ERROR(tpu_broadcast_shapes(d1, n1 - 2, d2, n2 - 2, s->batch, &s->nb));
  s->n = tpu_numel(s->batch, s->nb);
  return TPU_OK;
}

// Tensor argument i expanded to batch + [rows, c] and flattened to
// [N, rows, c] in dtype t.
static tpu_val_t batched(tpu_lower_ctx_t* cx, int i, const cdist_shape_t* s, int64_t rows,
                         tpu_dtype_t t) {
  int64_t d[TPU_MAX_RANK];
  memcpy(d, s->batch, sizeof(int64_t) * (size_t)s->nb);
  d[s->nb] = rows;
  d[s->nb + 1] = s->c;
  tpu_val_t x = tpu_lower_expand(cx, tpu_lower_input(cx, i, t), d, s->nb + 2);
  int64_t f[3] = {s->n, rows, s->c};
  return tpu_ir_reshape(cx->g, x, f, 3);
}

static tpu_status_t check_same_dtype(tpu_lower_ctx_t* cx, int a, int b) {
  tpu_dtype_t ta = tpu_arg_value_dtype(cx, a), tb = tpu_arg_value_dtype(cx, b);
  if (ta != tb)
    return TPU_LOWER_ERROR(TPU_CODE_INVALID_ARGUMENT, "expected scalar type %s but found %s",
                           tpu_dtype_torch_name(ta), tpu_dtype_torch_name(tb));
  return TPU_OK;
}

// _cdist_forward(Tensor x1, Tensor x2, float p, int? compute_mode)
tpu_status_t tpu_lower_cdist(tpu_lower_ctx_t* cx) {
  tpu_graph_t* g = cx->g;
  cdist_shape_t s;
  TPU_RETURN_IF_ERROR(cdist_shape(cx, 0, 1, &s));
  TPU_RETURN_IF_ERROR(check_floating(cx, 0, "X1"));
  TPU_RETURN_IF_ERROR(check_floating(cx, 1, "X2"));
  double p = tpu_arg_float(cx, 2, 2);
  if (!(p >= 0))
    return TPU_LOWER_ERROR(TPU_CODE_INVALID_ARGUMENT, "cdist only supports non-negative p values");
  int64_t mode = tpu_arg_int(cx, 3, 0);
  if (mode < 0 || mode > 2)
    return TPU_LOWER_ERROR(TPU_CODE_INVALID_ARGUMENT, "possible modes: 0, 1, 2, but was: %lld",
                           (long long)mode);
  TPU_RETURN_IF_ERROR(check_same_dtype(cx, 0, 1));
  tpu_dtype_t t = tpu_arg_value_dtype(cx, 0), acc = tpu_opmath(t);
  int64_t out[TPU_MAX_RANK];
  memcpy(out, s.batch, sizeof(int64_t) * (size_t)s.nb);
  out[s.nb] = s.r1;
  out[s.nb + 1] = s.r2;
  int nout = s.nb + 2;
  if (tpu_numel(out, nout) == 0 || s.c == 0) {
    tpu_lower_out(cx, 0, tpu_ir_const(g, t, 0, out, nout));
    return TPU_OK;
  }
  tpu_val_t x1 = batched(cx, 0, &s, s.r1, acc), x2 = batched(cx, 1, &s, s.r2, acc);
  tpu_val_t r;
  if (p == 2 && (mode == 1 || (mode == 0 && (s.r1 > 25 || s.r2 > 25)))) {
    r = euclid_mm(g, x1, x2, s.n, s.r1, s.r2, s.c, acc);
  } else {
    int64_t d4[4] = {s.n, s.r1, s.r2, s.c};
    r = pnorm_dist(g, x1, x2, d4, p, acc);
  }
  tpu_lower_out(cx, 0, tpu_ir_convert(g, tpu_ir_reshape(g, r, out, nout), t));
  return TPU_OK;
}

// _cdist_backward(Tensor grad, Tensor x1, Tensor x2, float p, Tensor cdist):
// the gradient of x1, in x1's shape with the batch dims broadcast.
tpu_status_t tpu_lower_cdist_backward(tpu_lower_ctx_t* cx) {
  tpu_graph_t* g = cx->g;
  cdist_shape_t s;
  TPU_RETURN_IF_ERROR(cdist_shape(cx, 1, 2, &s));
  TPU_RETURN_IF_ERROR(check_floating(cx, 1, "X1"));
  TPU_RETURN_IF_ERROR(check_floating(cx, 2, "X2"));
  double p = tpu_arg_float(cx, 3, 2);
  tpu_dtype_t t = tpu_arg_value_dtype(cx, 1), acc = tpu_opmath(t);
  int64_t out[TPU_MAX_RANK], gd[TPU_MAX_RANK];
  memcpy(out, s.batch, sizeof(int64_t) * (size_t)s.nb);
  memcpy(gd, s.batch, sizeof(int64_t) * (size_t)s.nb);
  out[s.nb] = s.r1;
  out[s.nb + 1] = s.c;
  gd[s.nb] = s.r1;
  gd[s.nb + 1] = s.r2;
  int nout = s.nb + 2;
  if (s.n == 0 || s.r1 == 0 || s.r2 == 0 || s.c == 0 || p == 0) {
    tpu_lower_out(cx, 0, tpu_ir_const(g, t, 0, out, nout));
    return TPU_OK;
  }
  int64_t d3[3] = {s.n, s.r1, s.r2}, d4[4] = {s.n, s.r1, s.r2, s.c};
  tpu_val_t x1 = batched(cx, 1, &s, s.r1, acc), x2 = batched(cx, 2, &s, s.r2, acc);
  tpu_val_t grad = tpu_ir_reshape(g, tpu_lower_expand(cx, tpu_lower_input(cx, 0, acc), gd, nout),
                                  d3, 3);
  tpu_val_t dist = tpu_ir_reshape(g, tpu_lower_expand(cx, tpu_lower_input(cx, 4, acc), gd, nout),
                                  d3, 3);
  tpu_val_t c = pair_grad(g, pair_diff(g, x1, x2, d4), grad, dist, d4, p, acc);
  static const int64_t over_r2 = 2;
  tpu_val_t r = tpu_ir_reduce(g, c, tpu_ir_const(g, acc, 0, NULL, 0), &over_r2, 1, TPU_BODY_ADD);
  tpu_lower_out(cx, 0, tpu_ir_convert(g, tpu_ir_reshape(g, r, out, nout), t));
  return TPU_OK;
}

static tpu_status_t check_pdist(tpu_lower_ctx_t* cx, int self, double p) {
  int rank = tpu_arg_rank(cx, self);
  if (rank != 2)
    return TPU_LOWER_ERROR(TPU_CODE_INVALID_ARGUMENT, "pdist only supports 2D tensors, got: %dD",
                           rank);
  tpu_dtype_t t = tpu_arg_value_dtype(cx, self);
  if (!tpu_dtype_is_float(t) || tpu_dtype_is_complex(t))
    return TPU_LOWER_ERROR(TPU_CODE_INVALID_ARGUMENT,
                           "pdist only supports floating-point dtypes");
  if (!(p >= 0))
    return TPU_LOWER_ERROR(TPU_CODE_INVALID_ARGUMENT, "pdist only supports non-negative p values");
  return TPU_OK;
}

// Offsets into the row-major [n, n] matrix of the pairs i < j, in pdist's
// order.
static tpu_val_t upper_offsets(tpu_graph_t* g, int64_t n, int64_t* count) {
  int64_t k = n * (n - 1) / 2;
  int64_t* off = tpu_graph_alloc(g, sizeof(int64_t) * (size_t)(k ? k : 1));
  if (!off) {
    tpu_graph_fail(g, TPU_LOWER_ERROR(TPU_CODE_RESOURCE_EXHAUSTED, "out of memory"));
    return TPU_VAL_NONE;
  }
  int64_t m = 0;
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = i + 1; j < n; ++j) off[m++] = i * n + j;
  *count = k;
  return tpu_ir_const_i64_array(g, off, k);
}

// _pdist_forward(Tensor self, float p=2)
tpu_status_t tpu_lower_pdist(tpu_lower_ctx_t* cx) {
  tpu_graph_t* g = cx->g;
  double p = tpu_arg_float(cx, 1, 2);
  TPU_RETURN_IF_ERROR(check_pdist(cx, 0, p));
  const int64_t* d = tpu_arg_sizes(cx, 0);
  int64_t n = d[0], c = d[1], k = n > 1 ? n * (n - 1) / 2 : 0;
  tpu_dtype_t t = tpu_arg_value_dtype(cx, 0), acc = tpu_opmath(t);
  if (k == 0 || c == 0) {
    tpu_lower_out(cx, 0, tpu_ir_const(g, t, 0, &k, 1));
    return TPU_OK;
  }
  int64_t d3[3] = {1, n, c}, d4[4] = {1, n, n, c}, nn = n * n;
  tpu_val_t x = tpu_ir_reshape(g, tpu_lower_input(cx, 0, acc), d3, 3);
  tpu_val_t full = tpu_ir_reshape(g, pnorm_dist(g, x, x, d4, p, acc), &nn, 1);
  tpu_val_t r = tpu_gather_flat(g, full, upper_offsets(g, n, &k), 1);
  tpu_lower_out(cx, 0, tpu_ir_convert(g, r, t));
  return TPU_OK;
}

// A condensed pdist value v [k] as the symmetric [1, n, n] matrix (zero
// diagonal): a gather from v with a zero appended, by a constant table.
static tpu_val_t condensed_to_full(tpu_graph_t* g, tpu_val_t v, int64_t n, int64_t k,
                                   tpu_dtype_t t) {
  int64_t* tab = tpu_graph_alloc(g, sizeof(int64_t) * (size_t)(n * n));
  if (!tab) {
    tpu_graph_fail(g, TPU_LOWER_ERROR(TPU_CODE_RESOURCE_EXHAUSTED, "out of memory"));
    return TPU_VAL_NONE;
  }
  int64_t m = 0;
  for (int64_t i = 0; i < n; ++i) {
    tab[i * n + i] = k;  // the appended zero
    for (int64_t j = i + 1; j < n; ++j, ++m) tab[i * n + j] = tab[j * n + i] = m;
  }
  int64_t one = 1, nn = n * n, d3[3] = {1, n, n};
  tpu_val_t ext[2] = {v, tpu_ir_const(g, t, 0, &one, 1)};
  tpu_val_t r =
      tpu_gather_flat(g, tpu_ir_concat(g, ext, 2, 0), tpu_ir_const_i64_array(g, tab, nn), 1);
  return tpu_ir_reshape(g, r, d3, 3);
}

// _pdist_backward(Tensor grad, Tensor self, float p, Tensor pdist)
tpu_status_t tpu_lower_pdist_backward(tpu_lower_ctx_t* cx) {
  tpu_graph_t* g = cx->g;
  double p = tpu_arg_float(cx, 2, 2);
  TPU_RETURN_IF_ERROR(check_pdist(cx, 1, p));
  const int64_t* d = tpu_arg_sizes(cx, 1);
  int64_t n = d[0], c = d[1], k = n > 1 ? n * (n - 1) / 2 : 0;
  tpu_dtype_t t = tpu_arg_value_dtype(cx, 1), acc = tpu_opmath(t);
  int64_t gk = tpu_numel(tpu_arg_sizes(cx, 0), tpu_arg_rank(cx, 0));
  int64_t dk = tpu_numel(tpu_arg_sizes(cx, 3), tpu_arg_rank(cx, 3));
  if (k == 0 || c == 0 || p == 0) {
    tpu_lower_out(cx, 0, tpu_ir_const(g, t, 0, d, 2));
    return TPU_OK;
  }
  if (gk != k || dk != k)
    return TPU_LOWER_ERROR(TPU_CODE_INVALID_ARGUMENT,
                           "_pdist_backward: grad and pdist must have %lld elements",
                           (long long)k);
  int64_t d3[3] = {1, n, c}, d4[4] = {1, n, n, c};
  tpu_val_t x = tpu_ir_reshape(g, tpu_lower_input(cx, 1, acc), d3, 3);
  tpu_val_t grad = condensed_to_full(g, tpu_ir_reshape(g, tpu_lower_input(cx, 0, acc), &k, 1),
                                     n, k, acc);
  tpu_val_t dist = condensed_to_full(g, tpu_ir_reshape(g, tpu_lower_input(cx, 3, acc), &k, 1),
                                     n, k, acc);
  tpu_val_t cg = pair_grad(g, pair_diff(g, x, x, d4), grad, dist, d4, p, acc);
  static const int64_t over_j = 2;
  tpu_val_t r = tpu_ir_reduce(g, cg, tpu_ir_const(g, acc, 0, NULL, 0), &over_j, 1, TPU_BODY_ADD);
  tpu_lower_out(cx, 0, tpu_ir_convert(g, tpu_ir_reshape(g, r, d, 2), t));
  return TPU_OK;
}

//===--- margin losses ---===//
//
// multi_margin_loss and multilabel_margin_loss compare each sample's target
// scores with its other scores: hinge terms over [N, C] (multi) or
// [N, J, C] (every target j against every class, multilabel), masked where
// PyTorch skips them, then summed and divided by C, and reduced over the
// batch. The backward forms the hinge derivatives from the same masks.

enum { RED_NONE = 0, RED_MEAN = 1, RED_SUM = 2 };

static tpu_status_t margin_dtypes(tpu_lower_ctx_t* cx, int self, int target, const char* kernel) {
  tpu_dtype_t t = tpu_arg_value_dtype(cx, self);
  if (!tpu_dtype_is_float(t) || tpu_dtype_is_complex(t))
    return tpu_not_implemented(kernel, t);
  tpu_dtype_t tt = tpu_arg_value_dtype(cx, target);
  if (tt != TPU_I64)
    return TPU_LOWER_ERROR(TPU_CODE_INVALID_ARGUMENT, "expected scalar type Long but found %s",
                           tpu_dtype_torch_name(tt));
  return TPU_OK;
}

// Samples n and classes c of a margin loss's input: a non-empty vector or
// matrix (or a 0-d input).
static tpu_status_t margin_input_shape(tpu_lower_ctx_t* cx, int self, int64_t* n, int64_t* c) {
  const int64_t* d = tpu_arg_sizes(cx, self);
  int rank = tpu_arg_rank(cx, self);
  if (!((rank == 2 && d[1] != 0) || (rank == 1 && d[0] != 0) || rank == 0)) {
    char a[128];
    return TPU_LOWER_ERROR(TPU_CODE_INVALID_ARGUMENT,
                           "Expected non-empty vector or matrix with optional 0-dim batch size, "
                           "but got: %s", tpu_shape_str(d, rank, a, sizeof a));
  }
  *n = rank == 2 ? d[0] : 1;
  *c = rank == 2 ? d[1] : rank == 1 ? d[0] : 1;
  return TPU_OK;
}

// A per-sample loss [N] reduced as `reduction` says; `per_sample` keeps [N]
// for reduction none (else a 0-d value).
static tpu_val_t margin_reduce(tpu_graph_t* g, tpu_val_t l, int64_t n, int64_t reduction,
                               tpu_dtype_t acc, bool per_sample) {
  static const int64_t d0 = 0;
  if (reduction == RED_NONE) return per_sample ? l : tpu_ir_reshape(g, l, NULL, 0);
  tpu_val_t s = tpu_ir_reduce(g, l, tpu_ir_const(g, acc, 0, NULL, 0), &d0, 1, TPU_BODY_ADD);
  if (reduction == RED_MEAN) s = tpu_ir_binary(g, TPU_IR_DIV, s, tpu_ir_const(g, acc, (double)n, NULL, 0));
  return s;
}

// x [N, C] at column y [N] -> [N].
static tpu_val_t take_cols(tpu_graph_t* g, tpu_val_t x, tpu_val_t y, int64_t n, int64_t c) {
  int64_t flat = n * c;
  tpu_val_t off = tpu_ir_binary(
      g, TPU_IR_ADD,
      tpu_ir_binary(g, TPU_IR_MUL, tpu_ir_iota(g, TPU_I64, &n, 1, 0),
                    tpu_ir_const_i(g, TPU_I64, c, &n, 1)),
      y);
  return tpu_gather_flat(g, tpu_ir_reshape(g, x, &flat, 1), off, 1);
}

// The hinge terms of multi_margin_loss: z [N, C] (margin - x[y] + x) and the
// mask of counted terms (not the target, z > 0); w_y the target's weight.
typedef struct mm_terms {
  int64_t n, c, p, reduction;
  tpu_dtype_t t, acc;
  tpu_val_t z, mask, wy, y;
} mm_terms_t;

static tpu_status_t mm_terms(tpu_lower_ctx_t* cx, int self, int target, int p_arg, int weight,
                             int reduction, mm_terms_t* m) {
  tpu_graph_t* g = cx->g;
  // (shape checks read argument 0 as self: the forward's layout; CPU checks
  // shapes before dtypes)
  int64_t n, c;
  TPU_RETURN_IF_ERROR(margin_input_shape(cx, self, &n, &c));
  int rank = tpu_arg_rank(cx, self);
  int trank = tpu_arg_rank(cx, target);
  int64_t tn = 1;
  for (int i = 0; i < trank; ++i) tn *= tpu_arg_sizes(cx, target)[i];
  char a[128], b[128];
  if ((rank <= 1 ? trank > 1 : trank != 1) || tn != n)
    return TPU_LOWER_ERROR(TPU_CODE_INVALID_ARGUMENT,
                           "multi_margin_loss: target tensor should be 1-D with size equal to "
                           "the number of input samples (batch size). Expected target size "
                           "[%lld], but got %s. Input has shape %s.", (long long)n,
                           tpu_shape_str(tpu_arg_sizes(cx, target), trank, a, sizeof a),
                           tpu_shape_str(tpu_arg_sizes(cx, self), rank, b, sizeof b));
  bool has_w = tpu_arg_present(cx, weight);
  if (has_w) {
    int wr = tpu_arg_rank(cx, weight);
    if (wr > 1 || tpu_numel(tpu_arg_sizes(cx, weight), wr) != c)
      return TPU_LOWER_ERROR(TPU_CODE_INVALID_ARGUMENT,
                             "inconsistent weight size, expected %lld but got %s", (long long)c,
                             tpu_shape_str(tpu_arg_sizes(cx, weight), wr, a, sizeof a));
  }
  TPU_RETURN_IF_ERROR(margin_dtypes(cx, self, target, "multi_margin_loss_cpu_kernel"));
  m->p = (int64_t)tpu_arg_number(cx, p_arg, 1);  // CPU's toLong() truncates
  if (m->p != 1 && m->p != 2)
    return TPU_LOWER_ERROR(TPU_CODE_INVALID_ARGUMENT, "only p == 1 and p == 2 supported");
  m->n = n;
  m->c = c;
  m->reduction = tpu_arg_int(cx, reduction, RED_MEAN);
  m->t = tpu_arg_value_dtype(cx, self);
  m->acc = tpu_opmath(m->t);
  int64_t nc[2] = {n, c};
  static const int64_t b0 = 0;
  tpu_val_t x = tpu_ir_reshape(g, tpu_lower_input(cx, self, m->acc), nc, 2);
  tpu_val_t y = tpu_ir_reshape(g, tpu_lower_tensor(cx, target), &n, 1);
  tpu_val_t bad = tpu_ir_binary(g, TPU_IR_OR,
                                tpu_ir_compare(g, TPU_CMP_LT, y, tpu_ir_const_i(g, TPU_I64, 0, &n, 1)),
                                tpu_ir_compare(g, TPU_CMP_GE, y, tpu_ir_const_i(g, TPU_I64, c, &n, 1)));
  tpu_lower_assert(cx, tpu_ir_reduce(g, bad, tpu_ir_const_i(g, TPU_BOOL, 0, NULL, 0), &b0, 1, TPU_BODY_OR),
                   TPU_CODE_INVALID_ARGUMENT, "target out of range");
  y = tpu_ir_clamp(g, tpu_ir_const_i(g, TPU_I64, 0, NULL, 0), y, tpu_ir_const_i(g, TPU_I64, c - 1, NULL, 0));
  m->y = y;
  tpu_val_t xy = take_cols(g, x, y, n, c);
  tpu_val_t margin = tpu_ir_broadcast(g, tpu_lower_input(cx, p_arg + 1, m->acc), nc, 2, NULL);
  m->z = tpu_ir_binary(g, TPU_IR_ADD,
                       tpu_ir_binary(g, TPU_IR_SUB, margin, tpu_ir_broadcast(g, xy, nc, 2, &b0)), x);
  tpu_val_t not_y = tpu_ir_compare(g, TPU_CMP_NE, tpu_ir_iota(g, TPU_I64, nc, 2, 1),
                                   tpu_ir_broadcast(g, y, nc, 2, &b0));
  m->mask = tpu_ir_binary(g, TPU_IR_AND, not_y,
                          tpu_ir_compare(g, TPU_CMP_GT, m->z, tpu_ir_const(g, m->acc, 0, nc, 2)));
  m->wy = has_w ? tpu_gather_flat(g, tpu_ir_reshape(g, tpu_lower_input(cx, weight, m->acc), &c, 1),
                                  y, 1)
                : TPU_VAL_NONE;
  return TPU_OK;
}

// multi_margin_loss(Tensor self, Tensor target, Scalar p=1, Scalar margin=1,
//                   Tensor? weight=None, int reduction=Mean)
tpu_status_t tpu_lower_multi_margin_loss(tpu_lower_ctx_t* cx) {
  tpu_graph_t* g = cx->g;
  mm_terms_t m;
  TPU_RETURN_IF_ERROR(mm_terms(cx, 0, 1, 2, 4, 5, &m));
  int64_t nc[2] = {m.n, m.c};
  static const int64_t b0 = 0, over_c = 1;
  tpu_val_t h = m.p == 1 ? m.z : tpu_ir_binary(g, TPU_IR_MUL, m.z, m.z);
  if (m.wy != TPU_VAL_NONE) h = tpu_ir_binary(g, TPU_IR_MUL, h, tpu_ir_broadcast(g, m.wy, nc, 2, &b0));
  h = tpu_ir_select(g, m.mask, h, tpu_ir_const(g, m.acc, 0, nc, 2));
  tpu_val_t l = tpu_ir_reduce(g, h, tpu_ir_const(g, m.acc, 0, NULL, 0), &over_c, 1, TPU_BODY_ADD);
  l = tpu_ir_binary(g, TPU_IR_DIV, l, tpu_ir_const(g, m.acc, (double)m.c, &m.n, 1));
  bool per_sample = tpu_arg_rank(cx, 1) > 0;
  tpu_lower_out(cx, 0, tpu_ir_convert(g, margin_reduce(g, l, m.n, m.reduction, m.acc, per_sample), m.t));
  return TPU_OK;
}

// Scales a [N, C] gradient by grad_output: a scalar, or one per sample.
static tpu_val_t scale_by_grad_out(tpu_lower_ctx_t* cx, tpu_val_t gi, int64_t n, int64_t c,
                                   int64_t reduction, tpu_dtype_t acc) {
  tpu_graph_t* g = cx->g;
  int64_t nc[2] = {n, c};
  static const int64_t b0 = 0;
  tpu_val_t go = tpu_lower_input(cx, 0, acc);
  if (reduction != RED_NONE || tpu_arg_rank(cx, 0) == 0)
    go = tpu_ir_broadcast(g, tpu_ir_reshape(g, go, NULL, 0), nc, 2, NULL);
  else
    go = tpu_ir_broadcast(g, tpu_ir_reshape(g, go, &n, 1), nc, 2, &b0);
  return tpu_ir_binary(g, TPU_IR_MUL, gi, go);
}

// multi_margin_loss_backward(Tensor grad_output, Tensor self, Tensor target,
//                            Scalar p, Scalar margin, Tensor? weight, int reduction)
tpu_status_t tpu_lower_multi_margin_loss_backward(tpu_lower_ctx_t* cx) {
  tpu_graph_t* g = cx->g;
  mm_terms_t m;
  TPU_RETURN_IF_ERROR(mm_terms(cx, 1, 2, 3, 5, 6, &m));
  int64_t nc[2] = {m.n, m.c};
  static const int64_t b0 = 0, over_c = 1;
  double scale = m.reduction == RED_MEAN ? 1.0 / (double)(m.n * m.c) : 1.0 / (double)m.c;
  tpu_val_t gs = tpu_ir_const(g, m.acc, scale, nc, 2);
  tpu_val_t h = m.p == 1 ? gs
                         : tpu_ir_binary(g, TPU_IR_MUL, tpu_ir_binary(g, TPU_IR_MUL, gs, m.z),
                                         tpu_ir_const(g, m.acc, 2, nc, 2));
  if (m.wy != TPU_VAL_NONE) h = tpu_ir_binary(g, TPU_IR_MUL, h, tpu_ir_broadcast(g, m.wy, nc, 2, &b0));
  h = tpu_ir_select(g, m.mask, h, tpu_ir_const(g, m.acc, 0, nc, 2));
  // the target's gradient: minus the sum of the others'
  tpu_val_t ht = tpu_ir_reduce(g, h, tpu_ir_const(g, m.acc, 0, NULL, 0), &over_c, 1, TPU_BODY_ADD);
  tpu_val_t is_y = tpu_ir_compare(g, TPU_CMP_EQ, tpu_ir_iota(g, TPU_I64, nc, 2, 1),
                                  tpu_ir_broadcast(g, m.y, nc, 2, &b0));
  tpu_val_t gi = tpu_ir_select(g, is_y, tpu_ir_unary(g, TPU_IR_NEG, tpu_ir_broadcast(g, ht, nc, 2, &b0)), h);
  gi = scale_by_grad_out(cx, gi, m.n, m.c, m.reduction, m.acc);
  tpu_lower_out(cx, 0, tpu_ir_convert(g, tpu_ir_reshape(g, gi, tpu_arg_sizes(cx, 1), tpu_arg_rank(cx, 1)), m.t));
  return TPU_OK;
}

// The hinge terms of multilabel_margin_loss over [N, J, C]: target j of a
// sample (valid before its first negative target) against class i (not a
// target): z = 1 - x[y_j] + x[i], counted where z > 0.
typedef struct ml_terms {
  int64_t n, c, reduction;
  tpu_dtype_t t, acc;
  tpu_val_t y;      // [N, J] targets, clamped into range
  tpu_val_t valid;  // [N, J]
  tpu_val_t eq;     // [N, J, C]: valid target j is class i
  tpu_val_t z, mask;  // [N, J, C]
} ml_terms_t;

static tpu_status_t ml_terms(tpu_lower_ctx_t* cx, int self, int target, int reduction,
                             int is_target, ml_terms_t* m) {
  tpu_graph_t* g = cx->g;
  int64_t n, c;
  TPU_RETURN_IF_ERROR(margin_input_shape(cx, self, &n, &c));
  int rank = tpu_arg_rank(cx, self);
  int trank = tpu_arg_rank(cx, target);
  const int64_t* td = tpu_arg_sizes(cx, target);
  int64_t tn = 1;
  for (int i = 0; i < trank; ++i) tn *= td[i];
  bool ok = rank <= 1 ? trank <= 1 && tn == c : trank == 2 && td[0] == n && td[1] == c;
  if (!ok) {
    char a[128], b[128];
    return TPU_LOWER_ERROR(TPU_CODE_INVALID_ARGUMENT,
                           "inconsistent target size: %s for input of size: %s",
                           tpu_shape_str(td, trank, a, sizeof a),
                           tpu_shape_str(tpu_arg_sizes(cx, self), rank, b, sizeof b));
  }
  TPU_RETURN_IF_ERROR(margin_dtypes(cx, self, target, "multilabel_margin_loss_forward_out_frame"));
  m->n = n;
  m->c = c;
  m->reduction = tpu_arg_int(cx, reduction, RED_MEAN);
  m->t = tpu_arg_value_dtype(cx, self);
  m->acc = tpu_opmath(m->t);
  int64_t nc[2] = {n, c}, njc[3] = {n, c, c};
  static const int64_t both[2] = {0, 1}, b01[2] = {0, 1}, b02[2] = {0, 2};
  tpu_val_t x = tpu_ir_reshape(g, tpu_lower_input(cx, self, m->acc), nc, 2);
  tpu_val_t y = tpu_ir_reshape(g, tpu_lower_tensor(cx, target), nc, 2);
  tpu_val_t bad = tpu_ir_binary(g, TPU_IR_OR,
                                tpu_ir_compare(g, TPU_CMP_LT, y, tpu_ir_const_i(g, TPU_I64, -1, nc, 2)),
                                tpu_ir_compare(g, TPU_CMP_GE, y, tpu_ir_const_i(g, TPU_I64, c, nc, 2)));
  tpu_lower_assert(cx, tpu_ir_reduce(g, bad, tpu_ir_const_i(g, TPU_BOOL, 0, NULL, 0), both, 2, TPU_BODY_OR),
                   TPU_CODE_INVALID_ARGUMENT, "argument #2 'target' is out of range");
  // targets count up to the first negative one
  tpu_val_t jpos = tpu_ir_iota(g, TPU_I64, nc, 2, 1);
  tpu_val_t neg = tpu_ir_compare(g, TPU_CMP_LT, y, tpu_ir_const_i(g, TPU_I64, 0, nc, 2));
  static const int64_t over_j = 1;
  tpu_val_t first = tpu_ir_reduce(g, tpu_ir_select(g, neg, jpos, tpu_ir_const_i(g, TPU_I64, c, nc, 2)),
                                  tpu_ir_const_i(g, TPU_I64, c, NULL, 0), &over_j, 1, TPU_BODY_MIN);
  m->valid = tpu_ir_compare(g, TPU_CMP_LT, jpos, tpu_ir_broadcast(g, first, nc, 2, both));
  m->y = tpu_ir_clamp(g, tpu_ir_const_i(g, TPU_I64, 0, NULL, 0), y, tpu_ir_const_i(g, TPU_I64, c - 1, NULL, 0));
  tpu_val_t valid3 = tpu_ir_broadcast(g, m->valid, njc, 3, b01);
  m->eq = tpu_ir_binary(g, TPU_IR_AND, valid3,
                        tpu_ir_compare(g, TPU_CMP_EQ, tpu_ir_broadcast(g, m->y, njc, 3, b01),
                                       tpu_ir_iota(g, TPU_I64, njc, 3, 2)));
  tpu_val_t is_t;
  if (is_target >= 0) {
    is_t = tpu_ir_compare(g, TPU_CMP_NE, tpu_ir_reshape(g, tpu_lower_input(cx, is_target, m->acc), nc, 2),
                          tpu_ir_const(g, m->acc, 0, nc, 2));
  } else {
    is_t = tpu_ir_reduce(g, m->eq, tpu_ir_const_i(g, TPU_BOOL, 0, NULL, 0), &over_j, 1, TPU_BODY_OR);
  }
  // x[y_j] per (n, j), gathered from the flat input
  int64_t flat = n * c;
  tpu_val_t off = tpu_ir_binary(g, TPU_IR_ADD,
                                tpu_ir_binary(g, TPU_IR_MUL, tpu_ir_iota(g, TPU_I64, nc, 2, 0),
                                              tpu_ir_const_i(g, TPU_I64, c, nc, 2)),
                                m->y);
  tpu_val_t xy = tpu_gather_flat(g, tpu_ir_reshape(g, x, &flat, 1), off, 2);
  m->z = tpu_ir_binary(g, TPU_IR_ADD,
                       tpu_ir_binary(g, TPU_IR_SUB, tpu_ir_const(g, m->acc, 1, njc, 3),
                                     tpu_ir_broadcast(g, xy, njc, 3, b01)),
                       tpu_ir_broadcast(g, x, njc, 3, b02));
  tpu_val_t not_t = tpu_ir_unary(g, TPU_IR_NOT, tpu_ir_broadcast(g, is_t, njc, 3, b02));
  m->mask = tpu_ir_binary(g, TPU_IR_AND, tpu_ir_binary(g, TPU_IR_AND, valid3, not_t),
                          tpu_ir_compare(g, TPU_CMP_GT, m->z, tpu_ir_const(g, m->acc, 0, njc, 3)));
  if (is_target < 0) m->eq = is_t;  // the forward returns is_target
  return TPU_OK;
}

// multilabel_margin_loss_forward(Tensor self, Tensor target, int reduction)
//   -> (output, is_target)
tpu_status_t tpu_lower_multilabel_margin_loss(tpu_lower_ctx_t* cx) {
  tpu_graph_t* g = cx->g;
  ml_terms_t m;
  TPU_RETURN_IF_ERROR(ml_terms(cx, 0, 1, 2, -1, &m));
  int64_t njc[3] = {m.n, m.c, m.c};
  static const int64_t jc[2] = {1, 2};
  tpu_val_t h = tpu_ir_select(g, m.mask, m.z, tpu_ir_const(g, m.acc, 0, njc, 3));
  tpu_val_t l = tpu_ir_reduce(g, h, tpu_ir_const(g, m.acc, 0, NULL, 0), jc, 2, TPU_BODY_ADD);
  l = tpu_ir_binary(g, TPU_IR_DIV, l, tpu_ir_const(g, m.acc, (double)m.c, &m.n, 1));
  bool per_sample = tpu_arg_rank(cx, 1) > 1;
  tpu_lower_out(cx, 0, tpu_ir_convert(g, margin_reduce(g, l, m.n, m.reduction, m.acc, per_sample), m.t));
  tpu_lower_out(cx, 1, tpu_ir_convert(g, tpu_ir_reshape(g, m.eq, tpu_arg_sizes(cx, 1), tpu_arg_rank(cx, 1)), m.t));
  return TPU_OK;
}

// multilabel_margin_loss_backward(Tensor grad_output, Tensor self, Tensor target,
//                                 int reduction, Tensor is_target)
tpu_status_t tpu_lower_multilabel_margin_loss_backward(tpu_lower_ctx_t* cx) {
  tpu_graph_t* g = cx->g;
  ml_terms_t m;
  TPU_RETURN_IF_ERROR(ml_terms(cx, 1, 2, 3, 4, &m));
  int64_t njc[3] = {m.n, m.c, m.c};
  static const int64_t b01[2] = {0, 1}, over_i = 2, over_j = 1;
  double scale = m.reduction == RED_MEAN ? 1.0 / (double)(m.n * m.c) : 1.0 / (double)m.c;
  tpu_val_t zero3 = tpu_ir_const(g, m.acc, 0, njc, 3);
  tpu_val_t cnt = tpu_ir_select(g, m.mask, tpu_ir_const(g, m.acc, scale, njc, 3), zero3);
  // class i gains g per counted term; each target loses g per counted term
  tpu_val_t gi = tpu_ir_reduce(g, cnt, tpu_ir_const(g, m.acc, 0, NULL, 0), &over_j, 1, TPU_BODY_ADD);
  tpu_val_t per_j = tpu_ir_reduce(g, cnt, tpu_ir_const(g, m.acc, 0, NULL, 0), &over_i, 1, TPU_BODY_ADD);
  tpu_val_t to_t = tpu_ir_select(g, m.eq, tpu_ir_broadcast(g, per_j, njc, 3, b01), zero3);
  gi = tpu_ir_binary(g, TPU_IR_SUB, gi,
                     tpu_ir_reduce(g, to_t, tpu_ir_const(g, m.acc, 0, NULL, 0), &over_j, 1, TPU_BODY_ADD));
  gi = scale_by_grad_out(cx, gi, m.n, m.c, m.reduction, m.acc);
  tpu_lower_out(cx, 0, tpu_ir_convert(g, tpu_ir_reshape(g, gi, tpu_arg_sizes(cx, 1), tpu_arg_rank(cx, 1)), m.t));
  return TPU_OK;
}
