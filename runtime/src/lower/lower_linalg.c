// The Cholesky family: linalg_cholesky_ex, cholesky, linalg_solve_triangular,
// triangular_solve, cholesky_solve, cholesky_inverse, on stablehlo.cholesky
// and stablehlo.triangular_solve.
//
// XLA leaves the unused triangle of a Cholesky factor unspecified and
// reports a matrix that is not positive definite with an all-NaN factor
// instead of an error, so the factor is masked to its triangle, and
// LAPACK's info (the order of the first leading minor that is not positive
// definite) is found on device by a bisection (failed_order). Ops whose CPU
// kernels raise on such input raise through a device assertion at the next
// synchronization (a RuntimeError with CPU's message; CPU's exception is
// its subclass torch.linalg.LinAlgError). linalg.cholesky raises
// LinAlgError itself: its composite checks the info of linalg_cholesky_ex.
#include <string.h>

#include "lower/linalg.h"

tpu_status_t tpu_linalg_check_lapack_dtype(tpu_lower_ctx_t* cx, int arg, const char* kernel) {
  tpu_dtype_t t = tpu_arg_value_dtype(cx, arg);
  if (t == TPU_F32 || t == TPU_F64 || t == TPU_C64 || t == TPU_C128) return TPU_OK;
  return tpu_not_implemented(kernel, t);
}

tpu_val_t tpu_linalg_empty(tpu_graph_t* g, tpu_dtype_t t) {
  int64_t zero = 0;
  return tpu_ir_const(g, t, 0, &zero, 1);
}

// Argument `arg` must be a batch of square matrices (PyTorch's wording).
tpu_status_t tpu_linalg_check_square(tpu_lower_ctx_t* cx, int arg, const char* api, const char* name) {
  int r = tpu_arg_rank(cx, arg);
  if (r < 2)
    return TPU_LOWER_ERROR(TPU_CODE_INVALID_ARGUMENT,
                           "%s: The input tensor %s must have at least 2 dimensions.", api, name);
  const int64_t* d = tpu_arg_sizes(cx, arg);
  if (d[r - 1] != d[r - 2])
    return TPU_LOWER_ERROR(TPU_CODE_INVALID_ARGUMENT,
                           "%s: %s must be batches of square matrices, but they are %lld by "
                           "%lld matrices", api, name, (long long)d[r - 2], (long long)d[r - 1]);
  return TPU_OK;
}

// triangular_solve and cholesky_solve want b (argument 0) and A (argument 1)
// of one dtype.
static tpu_status_t check_same_dtype(tpu_lower_ctx_t* cx) {
  tpu_dtype_t tb = tpu_arg_value_dtype(cx, 0), ta = tpu_arg_value_dtype(cx, 1);
  if (ta == tb) return TPU_OK;
  return TPU_LOWER_ERROR(TPU_CODE_INVALID_ARGUMENT,
                         "Expected b and A to have the same dtype, but found b of type %s and A "
                         "of type %s instead.", tpu_dtype_torch_name(tb), tpu_dtype_torch_name(ta));
}

// x as dtype t (a complex value going real keeps its real part, as a copy_
// into a real tensor does).
static tpu_val_t convert_to(tpu_graph_t* g, tpu_val_t x, tpu_dtype_t t) {
  if (!tpu_graph_ok(g)) return TPU_VAL_NONE;
  if (tpu_dtype_is_complex(tpu_ir_dtype(g, x)) && !tpu_dtype_is_complex(t))
    x = tpu_ir_unary(g, TPU_IR_REAL, x);
  return tpu_ir_convert(g, x, t);
}

// A copy of v's type (builders may move the node array); false once the
// graph has failed, when v may be no value.
bool tpu_linalg_type(tpu_graph_t* g, tpu_val_t v, tpu_type_t* out) {
  if (!tpu_graph_ok(g) || v < 0) return false;
  *out = *tpu_ir_type(g, v);
  return true;
}

// select(row <op> col, x, 0) over the trailing matrix dims: the lower
// (row >= col) or upper triangle of x, the rest zero.
tpu_val_t tpu_linalg_triangle(tpu_graph_t* g, tpu_val_t x, bool lower) {
  tpu_type_t t;
  if (!tpu_linalg_type(g, x, &t)) return TPU_VAL_NONE;
  int r = t.rank;
  tpu_val_t row = tpu_ir_iota(g, TPU_I32, t.dims, r, r - 2);
  tpu_val_t col = tpu_ir_iota(g, TPU_I32, t.dims, r, r - 1);
  tpu_val_t keep = tpu_ir_compare(g, lower ? TPU_CMP_GE : TPU_CMP_LE, row, col);
  return tpu_ir_select(g, keep, x, tpu_ir_const(g, t.dtype, 0, t.dims, r));
}

// Identity matrices of x's type.
tpu_val_t tpu_linalg_eye_like(tpu_graph_t* g, tpu_val_t x) {
  tpu_type_t t;
  if (!tpu_linalg_type(g, x, &t)) return TPU_VAL_NONE;
  int r = t.rank;
  tpu_val_t row = tpu_ir_iota(g, TPU_I32, t.dims, r, r - 2);
  tpu_val_t col = tpu_ir_iota(g, TPU_I32, t.dims, r, r - 1);
  return tpu_ir_select(g, tpu_ir_compare(g, TPU_CMP_EQ, row, col),
                       tpu_ir_const(g, t.dtype, 1, t.dims, r),
                       tpu_ir_const(g, t.dtype, 0, t.dims, r));
}

// The diagonal of x's matrices (batch x min(rows, cols)), in x's dtype.
tpu_val_t tpu_linalg_diagonal(tpu_graph_t* g, tpu_val_t x) {
  tpu_type_t tt;
  if (!tpu_linalg_type(g, x, &tt)) return TPU_VAL_NONE;
  int r = tt.rank;
  int64_t m = tt.dims[r - 2], n = tt.dims[r - 1];
  tpu_val_t zeros = tpu_ir_const(g, tt.dtype, 0, tt.dims, r);
  tpu_val_t row = tpu_ir_iota(g, TPU_I32, tt.dims, r, r - 2);
  tpu_val_t col = tpu_ir_iota(g, TPU_I32, tt.dims, r, r - 1);
  tpu_val_t d = tpu_ir_select(g, tpu_ir_compare(g, TPU_CMP_EQ, row, col), x, zeros);
  int64_t last = r - 1;
  d = tpu_ir_reduce(g, d, tpu_ir_const(g, tt.dtype, 0, NULL, 0), &last, 1, TPU_BODY_ADD);
  if (n >= m) return d;
  int64_t lo[TPU_MAX_RANK] = {0}, hi[TPU_MAX_RANK];
  memcpy(hi, tt.dims, sizeof hi);
  hi[r - 2] = n;
  return tpu_ir_slice(g, d, lo, hi, NULL);
}

// The real part of the diagonal of batched square x: shape batch x n.
static tpu_val_t real_diagonal(tpu_graph_t* g, tpu_val_t x) {
  tpu_val_t d = tpu_linalg_diagonal(g, x);
  if (tpu_graph_ok(g) && tpu_dtype_is_complex(tpu_ir_dtype(g, d))) d = tpu_ir_unary(g, TPU_IR_REAL, d);
  return d;
}

// LAPACK-style info over batch x n flags `bad`: 1 + the first bad index
// along the last dim, 0 when none (i32, batch shape).
tpu_val_t tpu_linalg_first_bad(tpu_graph_t* g, tpu_val_t bad) {
  tpu_type_t tt;
  if (!tpu_linalg_type(g, bad, &tt)) return TPU_VAL_NONE;
  int r = tt.rank;
  int64_t n = tt.dims[r - 1];
  tpu_val_t order = tpu_ir_binary(g, TPU_IR_ADD, tpu_ir_iota(g, TPU_I32, tt.dims, r, r - 1),
                                  tpu_ir_const_i(g, TPU_I32, 1, tt.dims, r));
  tpu_val_t none = tpu_ir_const_i(g, TPU_I32, n + 1, tt.dims, r);
  tpu_val_t cand = tpu_ir_select(g, bad, order, none);
  int64_t last = r - 1;
  tpu_val_t m = tpu_ir_reduce(g, cand, tpu_ir_const_i(g, TPU_I32, n + 1, NULL, 0), &last, 1,
                              TPU_BODY_MIN);
  tpu_type_t mtt;
  if (!tpu_linalg_type(g, m, &mtt)) return TPU_VAL_NONE;
  tpu_val_t zero = tpu_ir_const_i(g, TPU_I32, 0, mtt.dims, mtt.rank);
  tpu_val_t full = tpu_ir_const_i(g, TPU_I32, n + 1, mtt.dims, mtt.rank);
  return tpu_ir_select(g, tpu_ir_compare(g, TPU_CMP_EQ, m, full), zero, m);
}

static tpu_val_t any_true(tpu_graph_t* g, tpu_val_t b) {
  tpu_type_t t;
  if (!tpu_linalg_type(g, b, &t)) return TPU_VAL_NONE;
  int rank = t.rank;
  int64_t all[TPU_MAX_RANK];
  for (int i = 0; i < rank; ++i) all[i] = i;
  return tpu_ir_reduce(g, b, tpu_ir_const_i(g, TPU_BOOL, 0, NULL, 0), all, rank, TPU_BODY_OR);
}

// Raises CPU's error (LinAlgError) when an info (batch shape) is nonzero,
// with CPU's message: "<api>: [(Batch element k): ]<what>", {value} in
// `what` standing for the info.
void tpu_linalg_assert_info(tpu_lower_ctx_t* cx, tpu_val_t info, const char* api,
                            const char* what) {
  tpu_graph_t* g = cx->g;
  tpu_type_t tt;
  if (!tpu_linalg_type(g, info, &tt)) return;
  tpu_val_t failed = tpu_ir_compare(g, TPU_CMP_NE, info,
                                    tpu_ir_const_i(g, TPU_I32, 0, tt.dims, tt.rank));
  tpu_val_t bad = any_true(g, failed);
  int64_t n = tpu_numel(tt.dims, tt.rank);
  bool batch = tt.rank > 0;  // (CPU names the element of any batch, even of one)
  tpu_val_t order = tpu_lower_first_where(g, failed, tpu_ir_convert(g, info, TPU_I64), tt.dims, tt.rank);
  tpu_val_t element = tpu_lower_first_where(g, failed, tpu_ir_iota(g, TPU_I64, &n, 1, 0), &n, 1);
  tpu_lower_assert_value(cx, bad, order, element, TPU_CODE_LINALG, "%s:%s %s", api,
                         batch ? " (Batch element {where}):" : "", what);
}

// Whether every matrix of the factor f has a positive diagonal (batch shape).
static tpu_val_t factor_ok(tpu_graph_t* g, tpu_val_t f) {
  tpu_val_t d = real_diagonal(g, f);
  tpu_type_t t;
  if (!tpu_linalg_type(g, d, &t)) return TPU_VAL_NONE;
  tpu_val_t pos = tpu_ir_compare(g, TPU_CMP_GT, d, tpu_ir_const(g, t.dtype, 0, t.dims, t.rank));
  int64_t last = t.rank - 1;
  return tpu_ir_reduce(g, pos, tpu_ir_const_i(g, TPU_BOOL, 1, NULL, 0), &last, 1, TPU_BODY_AND);
}

// The complex conjugate (x itself when real).
tpu_val_t tpu_linalg_conj(tpu_graph_t* g, tpu_val_t x) {
  if (!tpu_graph_ok(g) || !tpu_dtype_is_complex(tpu_ir_dtype(g, x))) return x;
  return tpu_ir_binary(g, TPU_IR_COMPLEX, tpu_ir_unary(g, TPU_IR_REAL, x),
                       tpu_ir_unary(g, TPU_IR_NEG, tpu_ir_unary(g, TPU_IR_IMAG, x)));
}

// x^T over the trailing matrix dims.
tpu_val_t tpu_linalg_transpose(tpu_graph_t* g, tpu_val_t x) {
  tpu_type_t t;
  if (!tpu_linalg_type(g, x, &t)) return TPU_VAL_NONE;
  int64_t perm[TPU_MAX_RANK];
  for (int i = 0; i < t.rank; ++i) perm[i] = i;
  perm[t.rank - 2] = t.rank - 1;
  perm[t.rank - 1] = t.rank - 2;
  return tpu_ir_transpose(g, x, perm);
}

// x^H over the trailing matrix dims.
tpu_val_t tpu_linalg_adjoint(tpu_graph_t* g, tpu_val_t x) {
  return tpu_linalg_conj(g, tpu_linalg_transpose(g, x));
}

// x[.., r0:r1, c0:c1]
tpu_val_t tpu_linalg_block(tpu_graph_t* g, tpu_val_t x, int64_t r0, int64_t r1, int64_t c0,
                       int64_t c1) {
  tpu_type_t t;
  if (!tpu_linalg_type(g, x, &t)) return TPU_VAL_NONE;
  int64_t lo[TPU_MAX_RANK] = {0}, hi[TPU_MAX_RANK];
  memcpy(hi, t.dims, sizeof hi);
  lo[t.rank - 2] = r0;
  hi[t.rank - 2] = r1;
  lo[t.rank - 1] = c0;
  hi[t.rank - 1] = c1;
  return tpu_ir_slice(g, x, lo, hi, NULL);
}

// pred (batch shape) broadcast over trailing matrix dims of type t.
static tpu_val_t batch_pred(tpu_graph_t* g, tpu_val_t pred, const tpu_type_t* t) {
  int64_t bd[TPU_MAX_RANK];
  for (int i = 0; i < t->rank - 2; ++i) bd[i] = i;
  return tpu_ir_broadcast(g, pred, t->dims, t->rank, bd);
}

// LAPACK's info for a failed factorization: the order of the first leading
// minor that is not positive definite. XLA's factor is all NaN then, so it
// is found by bisection on static halves: if the leading half A11 factors,
// the failure lies in its Schur complement A22 - A21 A11^-1 A21^H (whose
// leading minors are positive definite exactly where A's are beyond the
// half), else in A11 (padded with identity to the other half's size). Each
// step costs a half-size factorization, so the search costs about one
// factorization. `a` holds the used triangle in its lower part.
static tpu_val_t failed_order(tpu_graph_t* g, tpu_val_t a) {
  tpu_type_t t;
  if (!tpu_linalg_type(g, a, &t)) return TPU_VAL_NONE;
  int br = t.rank - 2;
  int64_t s = t.dims[t.rank - 1];
  tpu_val_t off = tpu_ir_const_i(g, TPU_I32, 0, t.dims, br);
  tpu_val_t m = a;
  while (s > 1 && tpu_graph_ok(g)) {
    int64_t h = s / 2, k = s - h;
    tpu_val_t a11 = tpu_linalg_block(g, m, 0, h, 0, h), a21 = tpu_linalg_block(g, m, h, s, 0, h);
    tpu_val_t l11 = tpu_linalg_triangle(g, tpu_ir_cholesky(g, a11, true), true);
    tpu_val_t ok = factor_ok(g, l11);
    tpu_val_t w = tpu_ir_triangular_solve(g, l11, a21, false, true, false, TPU_TRANSPOSE_ADJOINT);
    tpu_dot_dims_t dn = {0};
    dn.n_batch = br;
    for (int i = 0; i < br; ++i) dn.lhs_batch[i] = dn.rhs_batch[i] = i;
    dn.n_contract = 1;
    dn.lhs_contract[0] = dn.rhs_contract[0] = br + 1;
    tpu_val_t wwh = tpu_ir_dot(g, w, tpu_linalg_conj(g, w), &dn, t.dtype);  // W W^H
    tpu_val_t schur = tpu_ir_binary(g, TPU_IR_SUB, tpu_linalg_block(g, m, h, s, h, s), wwh);
    if (k > h) {  // pad A11 with a unit diagonal entry
      int64_t lo[TPU_MAX_RANK] = {0}, hi[TPU_MAX_RANK] = {0};
      hi[br] = hi[br + 1] = k - h;
      a11 = tpu_ir_pad(g, a11, tpu_ir_const(g, t.dtype, 0, NULL, 0), lo, hi, NULL);
      tpu_type_t pt;
      if (!tpu_linalg_type(g, a11, &pt)) return TPU_VAL_NONE;
      tpu_val_t row = tpu_ir_iota(g, TPU_I32, pt.dims, pt.rank, br);
      tpu_val_t col = tpu_ir_iota(g, TPU_I32, pt.dims, pt.rank, br + 1);
      tpu_val_t corner = tpu_ir_binary(g, TPU_IR_AND, tpu_ir_compare(g, TPU_CMP_EQ, row, col),
          tpu_ir_compare(g, TPU_CMP_GE, row, tpu_ir_const_i(g, TPU_I32, h, pt.dims, pt.rank)));
      a11 = tpu_ir_select(g, corner, tpu_ir_const(g, t.dtype, 1, pt.dims, pt.rank), a11);
    }
    tpu_type_t st;
    if (!tpu_linalg_type(g, schur, &st)) return TPU_VAL_NONE;
    m = tpu_ir_select(g, batch_pred(g, ok, &st), schur, a11);
    off = tpu_ir_binary(g, TPU_IR_ADD, off,
                        tpu_ir_select(g, ok, tpu_ir_const_i(g, TPU_I32, h, t.dims, br),
                                      tpu_ir_const_i(g, TPU_I32, 0, t.dims, br)));
    s = k;
  }
  return tpu_ir_binary(g, TPU_IR_ADD, off, tpu_ir_const_i(g, TPU_I32, 1, t.dims, br));
}

// The masked Cholesky factor of argument 0 and its info (i32, batch shape).
static void factor(tpu_lower_ctx_t* cx, bool upper, tpu_val_t* l, tpu_val_t* info) {
  tpu_graph_t* g = cx->g;
  tpu_val_t a = tpu_lower_tensor(cx, 0);
  tpu_val_t f = tpu_linalg_triangle(g, tpu_ir_cholesky(g, a, !upper), !upper);
  tpu_val_t ok = factor_ok(g, f);
  tpu_type_t t;
  *l = f;
  *info = TPU_VAL_NONE;
  if (!tpu_linalg_type(g, ok, &t)) return;
  tpu_val_t order = failed_order(g, upper ? tpu_linalg_adjoint(g, a) : a);
  *info = tpu_ir_select(g, ok, tpu_ir_const_i(g, TPU_I32, 0, t.dims, t.rank), order);
}

// linalg_cholesky_ex(Tensor self, *, bool upper=False, bool check_errors=False)
tpu_status_t tpu_lower_linalg_cholesky_ex(tpu_lower_ctx_t* cx) {
  tpu_dtype_t t = tpu_arg_value_dtype(cx, 0);
  if (!tpu_dtype_is_float(t) && !tpu_dtype_is_complex(t))
    return TPU_LOWER_ERROR(TPU_CODE_INVALID_ARGUMENT,
                           "linalg.cholesky: Expected a floating point or complex tensor as "
                           "input. Got %s", tpu_dtype_torch_name(t));
  TPU_RETURN_IF_ERROR(tpu_linalg_check_lapack_dtype(cx, 0, "cholesky_cpu"));
  TPU_RETURN_IF_ERROR(tpu_linalg_check_square(cx, 0, "linalg.cholesky", "A"));
  bool upper = tpu_arg_bool(cx, 1, false), check = tpu_arg_bool(cx, 2, false);
  int r = tpu_arg_rank(cx, 0);
  const int64_t* d = tpu_arg_sizes(cx, 0);
  if (tpu_numel(d, r) == 0) {
    tpu_lower_out(cx, 0, tpu_lower_tensor(cx, 0));
    tpu_lower_out(cx, 1, tpu_ir_const_i(cx->g, TPU_I32, 0, d, r - 2));
    return TPU_OK;
  }
  tpu_val_t l, info;
  factor(cx, upper, &l, &info);
  if (check) tpu_linalg_assert_info(cx, info, "linalg.cholesky_ex", TPU_LINALG_NOT_PD);
  tpu_lower_out(cx, 0, l);
  tpu_lower_out(cx, 1, info);
  return TPU_OK;
}

// cholesky(Tensor self, bool upper=False): raises for a matrix that is not
// positive definite, as CPU does.
tpu_status_t tpu_lower_cholesky(tpu_lower_ctx_t* cx) {
  TPU_RETURN_IF_ERROR(tpu_linalg_check_lapack_dtype(cx, 0, "cholesky_cpu"));
  TPU_RETURN_IF_ERROR(tpu_linalg_check_square(cx, 0, "cholesky", "A"));
  int r = tpu_arg_rank(cx, 0);
  const int64_t* d = tpu_arg_sizes(cx, 0);
  if (tpu_numel(d, r) == 0) {
    tpu_lower_out(cx, 0, tpu_lower_tensor(cx, 0));
    return TPU_OK;
  }
  tpu_val_t l, info;
  factor(cx, tpu_arg_bool(cx, 1, false), &l, &info);
  tpu_linalg_assert_info(cx, info, "cholesky", TPU_LINALG_NOT_PD);
  tpu_lower_out(cx, 0, l);
  return TPU_OK;
}

// The common shape of two matrix batches: broadcast batch dims, each keeping
// its own matrix dims.
tpu_status_t tpu_linalg_batch_broadcast(tpu_lower_ctx_t* cx, int a, int b, tpu_mat_shape_t* sa,
                                    tpu_mat_shape_t* sb) {
  int ra = tpu_arg_rank(cx, a), rb = tpu_arg_rank(cx, b);
  const int64_t *da = tpu_arg_sizes(cx, a), *db = tpu_arg_sizes(cx, b);
  int64_t batch[TPU_MAX_RANK];
  int br;
  TPU_RETURN_IF_ERROR(tpu_broadcast_shapes(da, ra - 2, db, rb - 2, batch, &br));
  memcpy(sa->d, batch, sizeof(int64_t) * (size_t)br);
  memcpy(sb->d, batch, sizeof(int64_t) * (size_t)br);
  sa->d[br] = da[ra - 2];
  sa->d[br + 1] = da[ra - 1];
  sb->d[br] = db[rb - 2];
  sb->d[br + 1] = db[rb - 1];
  sa->rank = sb->rank = br + 2;
  return TPU_OK;
}

// Solves op(a) x = b (left) or x op(a) = b with a triangular: a and b
// already expanded to common batch dims. Empty problems give zeros.
tpu_val_t tpu_linalg_tri_solve(tpu_graph_t* g, tpu_val_t a, tpu_val_t b, bool left, bool lower,
                           bool unit, tpu_transpose_t op) {
  tpu_type_t t, ta;
  if (!tpu_linalg_type(g, b, &t) || !tpu_linalg_type(g, a, &ta)) return TPU_VAL_NONE;
  if (tpu_numel(t.dims, t.rank) == 0) return b;
  if (ta.dims[ta.rank - 1] == 0) return tpu_ir_const(g, t.dtype, 0, t.dims, t.rank);
  return tpu_ir_triangular_solve(g, tpu_linalg_triangle(g, a, lower), b, left, lower, unit, op);
}

// linalg_solve_triangular(Tensor self, Tensor B, *, bool upper, bool
// left=True, bool unitriangular=False)
tpu_status_t tpu_lower_linalg_solve_triangular(tpu_lower_ctx_t* cx) {
  TPU_RETURN_IF_ERROR(tpu_linalg_check_lapack_dtype(cx, 0, "triangular_solve_cpu"));
  TPU_RETURN_IF_ERROR(tpu_linalg_check_square(cx, 0, "linalg.solve_triangular", "A"));
  if (tpu_arg_rank(cx, 1) < 2)
    return TPU_LOWER_ERROR(TPU_CODE_INVALID_ARGUMENT,
                           "linalg.solve_triangular: The input tensor B must have at least 2 "
                           "dimensions.");
  bool upper = tpu_arg_bool(cx, 2, false), left = tpu_arg_bool(cx, 3, true);
  bool unit = tpu_arg_bool(cx, 4, false);
  tpu_mat_shape_t sa, sb;
  TPU_RETURN_IF_ERROR(tpu_linalg_batch_broadcast(cx, 0, 1, &sa, &sb));
  int r = sa.rank;
  int64_t n = sa.d[r - 1], bn = left ? sb.d[r - 2] : sb.d[r - 1];
  if (bn != n)
    return TPU_LOWER_ERROR(TPU_CODE_INVALID_ARGUMENT,
                           "linalg.solve_triangular: Incompatible shapes of A and B for the "
                           "equation %s (%lldx%lld and %lldx%lld)", left ? "AX = B" : "XA = B",
                           (long long)n, (long long)n, (long long)sb.d[r - 2],
                           (long long)sb.d[r - 1]);
  tpu_val_t a = tpu_lower_expand(cx, tpu_lower_tensor(cx, 0), sa.d, r);
  // (CPU solves in A's dtype, B converted)
  tpu_val_t b = convert_to(cx->g, tpu_lower_tensor(cx, 1), tpu_arg_value_dtype(cx, 0));
  b = tpu_lower_expand(cx, b, sb.d, r);
  tpu_lower_out(cx, 0, tpu_linalg_tri_solve(cx->g, a, b, left, !upper, unit, TPU_TRANSPOSE_NO));
  return TPU_OK;
}

// triangular_solve(Tensor self, Tensor A, bool upper=True, bool
// transpose=False, bool unitriangular=False) -> (solution, cloned_coefficient)
tpu_status_t tpu_lower_triangular_solve(tpu_lower_ctx_t* cx) {
  TPU_RETURN_IF_ERROR(tpu_linalg_check_lapack_dtype(cx, 0, "triangular_solve_cpu"));
  if (tpu_arg_rank(cx, 0) < 2)
    return TPU_LOWER_ERROR(TPU_CODE_INVALID_ARGUMENT,
                           "torch.triangular_solve: Expected b to have at least 2 dimensions, "
                           "but it has %d dimensions instead", tpu_arg_rank(cx, 0));
  if (tpu_arg_rank(cx, 1) < 2)
    return TPU_LOWER_ERROR(TPU_CODE_INVALID_ARGUMENT,
                           "torch.triangular_solve: Expected A to have at least 2 dimensions, "
                           "but it has %d dimensions instead", tpu_arg_rank(cx, 1));
  TPU_RETURN_IF_ERROR(check_same_dtype(cx));
  TPU_RETURN_IF_ERROR(tpu_linalg_check_square(cx, 1, "torch.triangular_solve", "A"));
  bool upper = tpu_arg_bool(cx, 2, true), trans = tpu_arg_bool(cx, 3, false);
  bool unit = tpu_arg_bool(cx, 4, false);
  tpu_mat_shape_t sb, sa;
  TPU_RETURN_IF_ERROR(tpu_linalg_batch_broadcast(cx, 0, 1, &sb, &sa));
  int r = sa.rank;
  if (sb.d[r - 2] != sa.d[r - 1])
    return TPU_LOWER_ERROR(TPU_CODE_INVALID_ARGUMENT,
                           "Incompatible matrix sizes for triangular_solve: each A matrix is "
                           "%lld by %lld but each b matrix is %lld by %lld",
                           (long long)sa.d[r - 2], (long long)sa.d[r - 1],
                           (long long)sb.d[r - 2], (long long)sb.d[r - 1]);
  tpu_val_t a = tpu_lower_expand(cx, tpu_lower_tensor(cx, 1), sa.d, r);
  tpu_val_t b = tpu_lower_expand(cx, tpu_lower_tensor(cx, 0), sb.d, r);
  tpu_lower_out(cx, 0, tpu_linalg_tri_solve(cx->g, a, b, true, !upper, unit,
                                 trans ? TPU_TRANSPOSE_YES : TPU_TRANSPOSE_NO));
  tpu_lower_out(cx, 1, a);
  return TPU_OK;
}

// X = (L L^H)^-1 B (or (U^H U)^-1 B): two triangular solves.
static tpu_val_t chol_solve(tpu_graph_t* g, tpu_val_t f, tpu_val_t b, bool upper) {
  tpu_val_t y = tpu_linalg_tri_solve(g, f, b, true, !upper, false,
                          upper ? TPU_TRANSPOSE_ADJOINT : TPU_TRANSPOSE_NO);
  return tpu_linalg_tri_solve(g, f, y, true, !upper, false,
                   upper ? TPU_TRANSPOSE_NO : TPU_TRANSPOSE_ADJOINT);
}

// cholesky_solve(Tensor self, Tensor input2, bool upper=False), and
// _cholesky_solve_helper(Tensor self, Tensor A, bool upper)
tpu_status_t tpu_lower_cholesky_solve(tpu_lower_ctx_t* cx) {
  TPU_RETURN_IF_ERROR(tpu_linalg_check_lapack_dtype(cx, 0, "cholesky_solve_cpu"));
  TPU_RETURN_IF_ERROR(check_same_dtype(cx));
  for (int i = 0; i < 2; ++i)
    if (tpu_arg_rank(cx, i) < 2)
      return TPU_LOWER_ERROR(TPU_CODE_INVALID_ARGUMENT,
                             "%s should have at least 2 dimensions, but has %d dimensions "
                             "instead", i ? "u" : "b", tpu_arg_rank(cx, i));
  TPU_RETURN_IF_ERROR(tpu_linalg_check_square(cx, 1, "cholesky_solve", "A"));
  bool upper = tpu_arg_bool(cx, 2, false);
  tpu_mat_shape_t sb, sa;
  TPU_RETURN_IF_ERROR(tpu_linalg_batch_broadcast(cx, 0, 1, &sb, &sa));
  int r = sa.rank;
  if (sb.d[r - 2] != sa.d[r - 1])
    return TPU_LOWER_ERROR(TPU_CODE_INVALID_ARGUMENT,
                           "Incompatible matrix sizes for cholesky_solve: each A matrix is "
                           "%lld by %lld but each b matrix is %lld by %lld",
                           (long long)sa.d[r - 2], (long long)sa.d[r - 1],
                           (long long)sb.d[r - 2], (long long)sb.d[r - 1]);
  tpu_val_t f = tpu_lower_expand(cx, tpu_lower_tensor(cx, 1), sa.d, r);
  tpu_val_t b = tpu_lower_expand(cx, tpu_lower_tensor(cx, 0), sb.d, r);
  tpu_lower_out(cx, 0, chol_solve(cx->g, f, b, upper));
  return TPU_OK;
}

// cholesky_inverse(Tensor self, bool upper=False): (L L^H)^-1, solving
// against the identity. A zero on the factor's diagonal raises, as CPU.
tpu_status_t tpu_lower_cholesky_inverse(tpu_lower_ctx_t* cx) {
  tpu_graph_t* g = cx->g;
  TPU_RETURN_IF_ERROR(tpu_linalg_check_lapack_dtype(cx, 0, "cholesky_inverse_out_cpu"));
  TPU_RETURN_IF_ERROR(tpu_linalg_check_square(cx, 0, "cholesky_inverse", "input"));
  bool upper = tpu_arg_bool(cx, 1, false);
  int r = tpu_arg_rank(cx, 0);
  const int64_t* d = tpu_arg_sizes(cx, 0);
  tpu_val_t f = tpu_lower_tensor(cx, 0);
  if (tpu_numel(d, r) == 0) {
    tpu_lower_out(cx, 0, f);
    return TPU_OK;
  }
  tpu_val_t diag = real_diagonal(g, f);
  if (tpu_dtype_is_complex(tpu_arg_value_dtype(cx, 0))) {
    // A complex diagonal entry is zero only when both parts are.
    tpu_val_t im = real_diagonal(g, tpu_ir_unary(g, TPU_IR_IMAG, f));
    diag = tpu_ir_binary(g, TPU_IR_ADD, tpu_ir_unary(g, TPU_IR_ABS, diag),
                         tpu_ir_unary(g, TPU_IR_ABS, im));
  }
  tpu_val_t zero = tpu_ir_compare(g, TPU_CMP_EQ, diag, tpu_lower_const_like(cx, diag, 0));
  tpu_linalg_assert_info(cx, tpu_linalg_first_bad(g, zero), "cholesky_inverse", TPU_LINALG_SINGULAR);
  tpu_val_t inv = chol_solve(g, f, tpu_linalg_eye_like(g, f), upper);
  tpu_lower_out(cx, 0, inv);
  return TPU_OK;
}
