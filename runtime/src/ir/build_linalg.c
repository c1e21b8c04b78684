// Builders of stablehlo.fft, stablehlo.cholesky, stablehlo.triangular_solve
// and the LU loops (their attributes ride in dims_attrs_t).
#include <string.h>

#include "ir/ir_internal.h"

static tpu_dtype_t complex_of(tpu_dtype_t t) { return t == TPU_F64 ? TPU_C128 : TPU_C64; }
static tpu_dtype_t real_of(tpu_dtype_t t) { return t == TPU_C128 ? TPU_F64 : TPU_F32; }

tpu_val_t tpu_ir_fft(tpu_graph_t* g, tpu_val_t x, tpu_fft_type_t type,
                     const int64_t* lengths, int n) {
  if (!valid(g, x)) return TPU_VAL_NONE;
  tpu_type_t t = g->nodes[x].type;
  if (n < 1 || n > 3 || n > t.rank) return FAIL(g, "fft: %d transformed dims of rank %d", n, t.rank);
  bool real_in = type == TPU_FFT_RFFT;
  if (real_in ? (t.dtype != TPU_F32 && t.dtype != TPU_F64) : !tpu_dtype_is_complex(t.dtype))
    return FAIL(g, "fft: operand dtype %s does not fit the transform", tpu_dtype_name(t.dtype));
  // The operand's trailing dims: the lengths, except IRFFT's halved last dim.
  for (int i = 0; i < n; ++i) {
    int64_t want = lengths[i];
    if (type == TPU_FFT_IRFFT && i == n - 1) want = lengths[i] / 2 + 1;
    if (lengths[i] < 1 || t.dims[t.rank - n + i] != want)
      return FAIL(g, "fft: dim %d has size %lld, the transform needs %lld", t.rank - n + i,
                  (long long)t.dims[t.rank - n + i], (long long)want);
  }
  if (type == TPU_FFT_RFFT) {
    t.dtype = complex_of(t.dtype);
    t.dims[t.rank - 1] = lengths[n - 1] / 2 + 1;
  } else if (type == TPU_FFT_IRFFT) {
    t.dtype = real_of(t.dtype);
    t.dims[t.rank - 1] = lengths[n - 1];
  }
  dims_attrs_t a;
  memset(&a, 0, sizeof a);
  a.n = n;
  a.body = (int32_t)type;
  memcpy(a.v, lengths, sizeof(int64_t) * (size_t)n);
  return tpu_graph_add(g, TPU_IR_FFT, &x, 1, &a, sizeof a, &t);
}

// Batched square matrices in the trailing two dims.
static bool square(const tpu_type_t* t) {
  return t->rank >= 2 && t->dims[t->rank - 1] == t->dims[t->rank - 2];
}

tpu_val_t tpu_ir_cholesky(tpu_graph_t* g, tpu_val_t a, bool lower) {
  if (!valid(g, a)) return TPU_VAL_NONE;
  const tpu_type_t* t = &g->nodes[a].type;
  if (!square(t) || (!tpu_dtype_is_float(t->dtype) && !tpu_dtype_is_complex(t->dtype)))
    return FAIL(g, "cholesky: operand is not a batch of float square matrices");
  dims_attrs_t at;
  memset(&at, 0, sizeof at);
  at.n = 1;
  at.v[0] = lower;
  return tpu_graph_add(g, TPU_IR_CHOLESKY, &a, 1, &at, sizeof at, t);
}

tpu_val_t tpu_ir_triangular_solve(tpu_graph_t* g, tpu_val_t a, tpu_val_t b,
                                  bool left_side, bool lower,
                                  bool unit_diagonal, tpu_transpose_t op) {
  if (!valid(g, a) || !valid(g, b)) return TPU_VAL_NONE;
  const tpu_type_t *ta = &g->nodes[a].type, *tb = &g->nodes[b].type;
  bool ok = square(ta) && tb->rank == ta->rank && ta->dtype == tb->dtype;
  for (int i = 0; ok && i < ta->rank - 2; ++i) ok = ta->dims[i] == tb->dims[i];
  int64_t m = ta->dims[ta->rank - 1];
  if (ok) ok = left_side ? tb->dims[tb->rank - 2] == m : tb->dims[tb->rank - 1] == m;
  if (!ok) return FAIL(g, "triangular_solve: operand shapes or dtypes do not fit");
  dims_attrs_t at;
  memset(&at, 0, sizeof at);
  at.n = 4;
  at.v[0] = left_side;
  at.v[1] = lower;
  at.v[2] = unit_diagonal;
  at.v[3] = op;
  tpu_val_t ops[2] = {a, b};
  return tpu_graph_add(g, TPU_IR_TRIANGULAR_SOLVE, ops, 2, &at, sizeof at, tb);
}

// The loops carry (step, ...) and stop after `steps` steps (-1: after the
// largest of the last carried values); the printer reads the bound from the
// attributes, and the precision of the loop's products (the squarings';
// tpu_graph_precision_attr) from there too. Each builder skips a loop of no
// steps (its slices would not fit empty matrices).
static tpu_val_t loop(tpu_graph_t* g, tpu_ir_op_t op, tpu_val_t* carried, int n,
                      int64_t steps, int64_t precision) {
  tpu_type_t t[4];
  for (int i = 0; i < n; ++i) t[i] = g->nodes[carried[i]].type;  // n <= 4
  dims_attrs_t at;
  memset(&at, 0, sizeof at);
  at.n = 2;
  at.v[0] = steps;
  at.v[1] = precision;
  return tpu_graph_add_multi(g, op, carried, n, &at, sizeof at, t, n);
}

static bool float_matrices(const tpu_type_t* t) {
  return t->rank >= 2 && (t->dtype == TPU_F32 || t->dtype == TPU_F64 || t->dtype == TPU_C64 ||
                          t->dtype == TPU_C128);
}

// Row indices 0..m-1 over the batch dims of `t` (i32, batch x m).
static tpu_val_t row_iota(tpu_graph_t* g, const tpu_type_t* t, int64_t m) {
  int64_t d[TPU_MAX_RANK];
  memcpy(d, t->dims, sizeof d);
  d[t->rank - 1] = m;
  return tpu_ir_iota(g, TPU_I32, d, t->rank, t->rank - 1);
}

void tpu_ir_lu(tpu_graph_t* g, tpu_val_t a, tpu_val_t* lu, tpu_val_t* pivots,
               tpu_val_t* perm) {
  *lu = *pivots = *perm = TPU_VAL_NONE;
  if (!valid(g, a)) return;
  tpu_type_t t = g->nodes[a].type;
  if (!float_matrices(&t)) {
    (void)FAIL(g, "lu: operand is not a batch of f32, f64 or complex matrices");
    return;
  }
  int64_t m = t.dims[t.rank - 2], n = t.dims[t.rank - 1], k = m < n ? m : n;
  tpu_type_t vt = t;  // batch x m
  vt.rank = t.rank - 1;
  vt.dims[vt.rank - 1] = m;
  int64_t pd[TPU_MAX_RANK];  // batch x k
  memcpy(pd, vt.dims, sizeof pd);
  pd[vt.rank - 1] = k;
  tpu_val_t carried[4] = {tpu_ir_const_i(g, TPU_I32, 0, NULL, 0), a,
                          tpu_ir_const_i(g, TPU_I32, 0, pd, vt.rank), row_iota(g, &vt, m)};
  if (k == 0) {
    *lu = a;
    *pivots = carried[2];
    *perm = carried[3];
    return;
  }
  tpu_val_t v = loop(g, TPU_IR_LU, carried, 4, k, 0);
  *lu = tpu_ir_result(g, v, 1);
  *pivots = tpu_ir_result(g, v, 2);
  *perm = tpu_ir_result(g, v, 3);
}

tpu_val_t tpu_ir_lu_permutation(tpu_graph_t* g, tpu_val_t pivots, int64_t m) {
  if (!valid(g, pivots)) return TPU_VAL_NONE;
  tpu_type_t t = g->nodes[pivots].type;
  if (t.rank < 1 || t.dtype != TPU_I32 || m < 0)
    return FAIL(g, "lu_permutation: pivots are not i32 of rank >= 1");
  tpu_val_t carried[3] = {tpu_ir_const_i(g, TPU_I32, 0, NULL, 0), pivots, row_iota(g, &t, m)};
  if (t.dims[t.rank - 1] == 0) return carried[2];
  return tpu_ir_result(g, loop(g, TPU_IR_LU_PERMUTATION, carried, 3, t.dims[t.rank - 1], 0), 2);
}

void tpu_ir_qr(tpu_graph_t* g, tpu_val_t a, tpu_val_t* packed, tpu_val_t* tau) {
  *packed = *tau = TPU_VAL_NONE;
  if (!valid(g, a)) return;
  tpu_type_t t = g->nodes[a].type;
  if (!float_matrices(&t)) {
    (void)FAIL(g, "qr: operand is not a batch of f32, f64 or complex matrices");
    return;
  }
  int64_t m = t.dims[t.rank - 2], n = t.dims[t.rank - 1], k = m < n ? m : n;
  int64_t td[TPU_MAX_RANK];  // batch x k
  memcpy(td, t.dims, sizeof td);
  td[t.rank - 2] = k;
  tpu_val_t carried[3] = {tpu_ir_const_i(g, TPU_I32, 0, NULL, 0), a,
                          tpu_ir_const(g, t.dtype, 0, td, t.rank - 1)};
  if (k == 0) {
    *packed = a;
    *tau = carried[2];
    return;
  }
  tpu_val_t v = loop(g, TPU_IR_QR, carried, 3, k, 0);
  *packed = tpu_ir_result(g, v, 1);
  *tau = tpu_ir_result(g, v, 2);
}

tpu_val_t tpu_ir_householder_product(tpu_graph_t* g, tpu_val_t v, tpu_val_t tau, int64_t cols) {
  if (!valid(g, v) || !valid(g, tau)) return TPU_VAL_NONE;
  tpu_type_t t = g->nodes[v].type, tt = g->nodes[tau].type;
  int r = t.rank;
  int64_t m = t.dims[r - 2], k = tt.rank ? tt.dims[tt.rank - 1] : 0;
  if (!float_matrices(&t) || tt.dtype != t.dtype || tt.rank != r - 1 || k > t.dims[r - 1] ||
      cols < k || cols > m)
    return FAIL(g, "householder_product: reflectors and scalars do not fit");
  int64_t qd[TPU_MAX_RANK];
  memcpy(qd, t.dims, sizeof qd);
  qd[r - 1] = cols;
  tpu_val_t row = tpu_ir_iota(g, TPU_I32, qd, r, r - 2), col = tpu_ir_iota(g, TPU_I32, qd, r, r - 1);
  tpu_val_t eye = tpu_ir_select(g, tpu_ir_compare(g, TPU_CMP_EQ, row, col),
                                tpu_ir_const(g, t.dtype, 1, qd, r), tpu_ir_const(g, t.dtype, 0, qd, r));
  if (k == 0) return eye;
  tpu_val_t carried[4] = {tpu_ir_const_i(g, TPU_I32, 0, NULL, 0), eye, v, tau};
  return tpu_ir_result(g, loop(g, TPU_IR_HOUSEHOLDER_PRODUCT, carried, 4, k, 0), 1);
}

tpu_val_t tpu_ir_squarings(tpu_graph_t* g, tpu_val_t x, tpu_val_t counts) {
  if (!valid(g, x) || !valid(g, counts)) return TPU_VAL_NONE;
  tpu_type_t t = g->nodes[x].type, ct = g->nodes[counts].type;
  bool ok = float_matrices(&t) && t.dims[t.rank - 1] == t.dims[t.rank - 2] &&
            ct.dtype == TPU_I32 && ct.rank == t.rank - 2;
  for (int i = 0; ok && i < ct.rank; ++i) ok = ct.dims[i] == t.dims[i];
  if (!ok) return FAIL(g, "squarings: operand is not a batch of square matrices with counts");
  tpu_val_t carried[3] = {tpu_ir_const_i(g, TPU_I32, 0, NULL, 0), x, counts};
  return tpu_ir_result(g, loop(g, TPU_IR_SQUARINGS, carried, 3, -1,
                                  tpu_graph_precision_attr(g, t.dtype)), 1);
}
