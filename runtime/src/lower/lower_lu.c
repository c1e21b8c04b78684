// The LU family: linalg_lu_factor_ex, linalg_lu, lu_unpack, linalg_lu_solve,
// _linalg_solve_ex, linalg_inv_ex, _linalg_det, _linalg_slogdet, on the LU
// loop of the IR (tpu_ir_lu: partial pivoting as LAPACK's getf2, the same
// pivots), blocked as LAPACK's getrf for more than LU_BLOCK columns, and
// stablehlo.triangular_solve.
//
// Outputs follow CPU's conventions, which PyTorch's backward formulas rely
// on: solve factors A itself, det and slogdet factor A^T when A is a
// contiguous real tensor (CPU saves a copy that way) and A otherwise.
// A singular matrix is not an error for the factorization (info says where
// U's diagonal is zero, as LAPACK's); the check_errors variants raise CPU's
// LinAlgError at the next synchronization.
#include <string.h>

#include "lower/elementwise.h"
#include "lower/linalg.h"

#define LU_ZERO_PIVOT                                                            \
  "U[{value},{value}] is zero and using it on lu_solve would result in a "      \
  "division by zero. If you still want to perform the factorization, consider " \
  "calling linalg.lu(A, pivot) or linalg.lu_factor_ex(A, pivot)"

typedef struct factors {
  tpu_val_t lu, pivots, perm, info;
} factors_t;

static tpu_status_t check_rank(tpu_lower_ctx_t* cx, int arg, const char* api) {
  int r = tpu_arg_rank(cx, arg);
  if (r >= 2) return TPU_OK;
  char buf[64];
  return tpu_invalid("%s: Expected tensor with 2 or more dimensions. Got size: %s instead", api,
                     tpu_shape_str(tpu_arg_sizes(cx, arg), r, buf, sizeof buf));
}

// Argument 1, `pivot`, must be true (as for both linalg.lu_factor and
// linalg.lu on CPU, in the same words).
static tpu_status_t check_pivot(tpu_lower_ctx_t* cx) {
  if (tpu_arg_bool(cx, 1, true)) return TPU_OK;
  return tpu_invalid("linalg.lu_factor: LU without pivoting is not implemented on the CPU");
}

// The checks of linalg.inv, det, slogdet and solve on A (argument 0).
static tpu_status_t check_square_float(tpu_lower_ctx_t* cx, const char* api) {
  TPU_RETURN_IF_ERROR(tpu_linalg_check_square(cx, 0, api, "A"));
  tpu_dtype_t t = tpu_arg_value_dtype(cx, 0);
  if (!tpu_dtype_is_float(t) && !tpu_dtype_is_complex(t))
    return tpu_invalid("%s: Expected a floating point or complex tensor as input. Got %s", api,
                       tpu_dtype_torch_name(t));
  if (t == TPU_F16 || t == TPU_BF16)
    return tpu_invalid("%s: Low precision dtypes not supported. Got %s", api,
                       tpu_dtype_torch_name(t));
  return tpu_linalg_check_lapack_dtype(cx, 0, "lu_cpu");
}

// As Tensor::is_contiguous().
static bool arg_contiguous(const tpu_lower_ctx_t* cx, int arg) {
  const tpu_view_t* v = tpu_arg(cx, arg)->tensor;
  if (tpu_view_numel(v) == 0) return true;
  int64_t expected = 1;
  for (int d = v->rank - 1; d >= 0; --d) {
    if (v->sizes[d] == 1) continue;
    if (v->strides[d] != expected) return false;
    expected *= v->sizes[d];
  }
  return true;
}

// Rows of x (batch x m x c) in the order of perm (i32, batch x m): row r of
// the result is row perm[r] of x.
static tpu_val_t permute_rows(tpu_graph_t* g, tpu_val_t x, tpu_val_t perm) {
  tpu_type_t t;
  if (!tpu_linalg_type(g, x, &t)) return TPU_VAL_NONE;
  int r = t.rank;
  int64_t m = t.dims[r - 2], c = t.dims[r - 1];
  int64_t rows = tpu_numel(t.dims, r - 1);
  if (rows == 0 || c == 0) return x;
  // Offsets into x seen as (batch * m) x c rows.
  tpu_val_t base = tpu_ir_const_i(g, TPU_I64, 0, t.dims, r - 1);
  if (r > 2) {  // flat batch index * m
    int64_t nb = tpu_numel(t.dims, r - 2), bm[2] = {nb, m};
    tpu_val_t b = tpu_ir_iota(g, TPU_I64, bm, 2, 0);
    base = tpu_ir_reshape(g, tpu_ir_binary(g, TPU_IR_MUL, b, tpu_ir_const_i(g, TPU_I64, m, bm, 2)),
                          t.dims, r - 1);
  }
  tpu_val_t off = tpu_ir_binary(g, TPU_IR_ADD, base, tpu_ir_convert(g, perm, TPU_I64));
  int64_t flat[2] = {rows, c};
  tpu_val_t y = tpu_gather_rows(g, tpu_ir_reshape(g, x, flat, 2),
                                tpu_ir_reshape(g, off, &rows, 1), 1, c);
  return tpu_ir_reshape(g, y, t.dims, r);
}

// Columns per panel of the blocked factorization.
enum { LU_BLOCK = 64, LU_MAX_BLOCKS = 16 };

// LAPACK's blocked getrf, right-looking: each panel (the rows from k0 down,
// its columns) is factored by the loop, its row swaps applied to those
// whole rows, U12 = L11^-1 A12 by a triangular solve and the trailing
// matrix updated by one matrix product, so that most of the work is in
// matrix products. The loop alone would touch the whole matrix per column.
static void blocked_lu(tpu_lower_ctx_t* cx, tpu_val_t a, tpu_val_t* lu, tpu_val_t* pivots) {
  tpu_graph_t* g = cx->g;
  tpu_type_t t;
  *lu = *pivots = TPU_VAL_NONE;
  if (!tpu_linalg_type(g, a, &t)) return;
  int r = t.rank;
  int64_t m = t.dims[r - 2], n = t.dims[r - 1], k = m < n ? m : n;
  int64_t block = LU_BLOCK;
  if (k > LU_BLOCK * LU_MAX_BLOCKS) block = (k + LU_MAX_BLOCKS - 1) / LU_MAX_BLOCKS;
  tpu_val_t pivs[LU_MAX_BLOCKS + 1];
  int count = 0;
  *lu = a;
  for (int64_t k0 = 0; k0 < k && tpu_graph_ok(g); k0 += block) {
    int64_t kb = k - k0 < block ? k - k0 : block, rows = m - k0, right = k0 + kb;
    tpu_val_t below = tpu_linalg_block(g, *lu, k0, m, 0, n);
    tpu_val_t plu, ppiv, pperm;
    tpu_ir_lu(g, tpu_linalg_block(g, below, 0, rows, k0, right), &plu, &ppiv, &pperm);
    below = permute_rows(g, below, pperm);
    tpu_val_t cols[3];
    int nc = 0;
    if (k0 > 0) cols[nc++] = tpu_linalg_block(g, below, 0, rows, 0, k0);
    cols[nc++] = plu;
    if (right < n) {
      tpu_val_t l11 = tpu_linalg_block(g, plu, 0, kb, 0, kb);
      tpu_val_t u12 = tpu_linalg_tri_solve(g, l11, tpu_linalg_block(g, below, 0, kb, right, n),
                                           true, true, true, TPU_TRANSPOSE_NO);
      cols[nc] = u12;
      if (rows > kb) {
        tpu_val_t a22 = tpu_linalg_block(g, below, kb, rows, right, n);
        a22 = tpu_ir_binary(g, TPU_IR_SUB, a22,
                            tpu_lower_matmul_values(cx, tpu_linalg_block(g, plu, kb, rows, 0, kb),
                                                    u12, r - 2, t.dtype));
        tpu_val_t stacked[2] = {u12, a22};
        cols[nc] = tpu_ir_concat(g, stacked, 2, r - 2);
      }
      ++nc;
    }
    below = nc == 1 ? cols[0] : tpu_ir_concat(g, cols, nc, r - 1);
    if (k0 > 0) {
      tpu_val_t stacked[2] = {tpu_linalg_block(g, *lu, 0, k0, 0, n), below};
      below = tpu_ir_concat(g, stacked, 2, r - 2);
    }
    *lu = below;
    tpu_type_t pt;
    if (!tpu_linalg_type(g, ppiv, &pt)) return;
    pivs[count++] = tpu_ir_binary(g, TPU_IR_ADD, ppiv,
                                  tpu_ir_const_i(g, TPU_I32, k0, pt.dims, pt.rank));
  }
  *pivots = count == 1 ? pivs[0] : tpu_ir_concat(g, pivs, count, r - 2);
}

static factors_t factor(tpu_lower_ctx_t* cx, tpu_val_t a) {
  tpu_graph_t* g = cx->g;
  factors_t f;
  tpu_type_t t;
  f.lu = f.pivots = f.perm = f.info = TPU_VAL_NONE;
  if (!tpu_linalg_type(g, a, &t)) return f;
  int64_t m = t.dims[t.rank - 2], n = t.dims[t.rank - 1];
  if ((m < n ? m : n) <= LU_BLOCK) {
    tpu_ir_lu(g, a, &f.lu, &f.pivots, &f.perm);
  } else {  // (the permutation from the pivots: programs that use it are rare)
    blocked_lu(cx, a, &f.lu, &f.pivots);
    f.perm = tpu_ir_lu_permutation(g, f.pivots, m);
  }
  tpu_val_t d = tpu_linalg_diagonal(g, f.lu);
  if (tpu_linalg_type(g, d, &t))
    f.info = tpu_linalg_first_bad(
        g, tpu_ir_compare(g, TPU_CMP_EQ, d, tpu_ir_const(g, t.dtype, 0, t.dims, t.rank)));
  return f;
}

// The inverse of the permutations perm (i32, batch x m).
static tpu_val_t inverse_permutation(tpu_graph_t* g, tpu_val_t perm) {
  tpu_type_t t;
  if (!tpu_linalg_type(g, perm, &t)) return TPU_VAL_NONE;
  tpu_val_t xs[2] = {perm, tpu_ir_iota(g, TPU_I32, t.dims, t.rank, t.rank - 1)};
  tpu_val_t sorted = tpu_ir_sort(g, xs, 2, t.rank - 1, TPU_SORT_ASCENDING, false);
  return tpu_ir_result(g, sorted, 1);
}

// X with A X = b, or A^H X = b (`adjoint`), for A = P L U given by its
// packed factors and row permutation (batch dims as b's).
static tpu_val_t solve_left(tpu_graph_t* g, tpu_val_t lu, tpu_val_t perm, tpu_val_t b,
                            bool adjoint) {
  if (!adjoint) {
    tpu_val_t y = permute_rows(g, b, perm);
    y = tpu_linalg_tri_solve(g, lu, y, true, true, true, TPU_TRANSPOSE_NO);
    return tpu_linalg_tri_solve(g, lu, y, true, false, false, TPU_TRANSPOSE_NO);
  }
  tpu_val_t z = tpu_linalg_tri_solve(g, lu, b, true, false, false, TPU_TRANSPOSE_ADJOINT);
  z = tpu_linalg_tri_solve(g, lu, z, true, true, true, TPU_TRANSPOSE_ADJOINT);
  return permute_rows(g, z, inverse_permutation(g, perm));
}

// X with op(A) X = b (left) or X op(A) = b; op(A) is A^H when `adjoint`.
static tpu_val_t solve(tpu_graph_t* g, tpu_val_t lu, tpu_val_t perm, tpu_val_t b, bool left,
                       bool adjoint) {
  if (left) return solve_left(g, lu, perm, b, adjoint);
  // X op(A) = b  <=>  op(A)^H X^H = b^H
  return tpu_linalg_adjoint(g, solve_left(g, lu, perm, tpu_linalg_adjoint(g, b), !adjoint));
}

// The permutation matrices P (dtype t) of perm (i32, batch x m):
// P[s, r] = 1 where s == perm[r], so that A = P L U.
static tpu_val_t permutation_matrix(tpu_graph_t* g, tpu_val_t perm, tpu_dtype_t dtype) {
  tpu_type_t t;
  if (!tpu_linalg_type(g, perm, &t)) return TPU_VAL_NONE;
  int r = t.rank + 1;
  int64_t d[TPU_MAX_RANK], bd[TPU_MAX_RANK];
  memcpy(d, t.dims, sizeof(int64_t) * (size_t)t.rank);
  d[r - 2] = d[r - 1] = t.dims[t.rank - 1];
  for (int i = 0; i < t.rank - 1; ++i) bd[i] = i;
  bd[t.rank - 1] = r - 1;
  tpu_val_t p = tpu_ir_broadcast(g, perm, d, r, bd);
  tpu_val_t s = tpu_ir_iota(g, TPU_I32, d, r, r - 2);
  return tpu_ir_select(g, tpu_ir_compare(g, TPU_CMP_EQ, s, p), tpu_ir_const(g, dtype, 1, d, r),
                       tpu_ir_const(g, dtype, 0, d, r));
}

// L (m x k, unit diagonal) and U (k x n) of packed factors.
static void unpack_factors(tpu_graph_t* g, tpu_val_t lu, tpu_val_t* l, tpu_val_t* u) {
  tpu_type_t t;
  *l = *u = TPU_VAL_NONE;
  if (!tpu_linalg_type(g, lu, &t)) return;
  int r = t.rank;
  int64_t m = t.dims[r - 2], n = t.dims[r - 1], k = m < n ? m : n;
  tpu_val_t lk = tpu_linalg_block(g, lu, 0, m, 0, k);
  tpu_type_t lt;
  if (!tpu_linalg_type(g, lk, &lt)) return;
  tpu_val_t row = tpu_ir_iota(g, TPU_I32, lt.dims, r, r - 2);
  tpu_val_t col = tpu_ir_iota(g, TPU_I32, lt.dims, r, r - 1);
  *l = tpu_ir_select(g, tpu_ir_compare(g, TPU_CMP_GT, row, col), lk, tpu_linalg_eye_like(g, lk));
  *u = tpu_linalg_triangle(g, tpu_linalg_block(g, lu, 0, k, 0, n), false);
}

// Raises `message` at the next sync unless 1 <= pivots <= m.
static void assert_pivots(tpu_lower_ctx_t* cx, tpu_val_t pivots, int64_t m, const char* message) {
  tpu_graph_t* g = cx->g;
  tpu_type_t t;
  if (!tpu_linalg_type(g, pivots, &t)) return;
  tpu_val_t low = tpu_ir_compare(g, TPU_CMP_LT, pivots, tpu_ir_const_i(g, TPU_I32, 1, t.dims, t.rank));
  tpu_val_t high = tpu_ir_compare(g, TPU_CMP_GT, pivots, tpu_ir_const_i(g, TPU_I32, m, t.dims, t.rank));
  tpu_val_t bad = tpu_ir_reduce(g, tpu_ir_binary(g, TPU_IR_OR, low, high),
                                tpu_ir_const_i(g, TPU_BOOL, 0, NULL, 0), tpu_all_dims, t.rank,
                                TPU_BODY_OR);
  tpu_lower_assert(cx, bad, TPU_CODE_INVALID_ARGUMENT, "%s", message);
}

// linalg_lu_factor_ex(Tensor A, *, bool pivot=True, bool check_errors=False)
//   -> (LU, pivots, info)
tpu_status_t tpu_lower_linalg_lu_factor_ex(tpu_lower_ctx_t* cx) {
  TPU_RETURN_IF_ERROR(check_rank(cx, 0, "torch.lu_factor"));
  TPU_RETURN_IF_ERROR(tpu_linalg_check_lapack_dtype(cx, 0, "lu_cpu"));
  TPU_RETURN_IF_ERROR(check_pivot(cx));
  factors_t f = factor(cx, tpu_lower_tensor(cx, 0));
  if (tpu_arg_bool(cx, 2, false))
    tpu_linalg_assert_info(cx, f.info, "torch.linalg.lu_factor_ex", LU_ZERO_PIVOT);
  tpu_lower_out(cx, 0, f.lu);
  tpu_lower_out(cx, 1, f.pivots);
  tpu_lower_out(cx, 2, f.info);
  return TPU_OK;
}

// linalg_lu(Tensor A, *, bool pivot=True) -> (P, L, U)
tpu_status_t tpu_lower_linalg_lu(tpu_lower_ctx_t* cx) {
  TPU_RETURN_IF_ERROR(check_rank(cx, 0, "linalg.lu"));
  TPU_RETURN_IF_ERROR(tpu_linalg_check_lapack_dtype(cx, 0, "lu_cpu"));
  TPU_RETURN_IF_ERROR(check_pivot(cx));
  factors_t f = factor(cx, tpu_lower_tensor(cx, 0));
  tpu_val_t l, u;
  unpack_factors(cx->g, f.lu, &l, &u);
  tpu_lower_out(cx, 0, permutation_matrix(cx->g, f.perm, tpu_arg_value_dtype(cx, 0)));
  tpu_lower_out(cx, 1, l);
  tpu_lower_out(cx, 2, u);
  return TPU_OK;
}

// lu_unpack(Tensor LU_data, Tensor LU_pivots, bool unpack_data=True,
// bool unpack_pivots=True) -> (P, L, U)
tpu_status_t tpu_lower_lu_unpack(tpu_lower_ctx_t* cx) {
  tpu_graph_t* g = cx->g;
  TPU_RETURN_IF_ERROR(check_rank(cx, 0, "torch.lu_unpack"));
  if (tpu_arg_value_dtype(cx, 1) != TPU_I32)
    return tpu_invalid("torch.lu_unpack: LU_pivots is expected to be a contiguous tensor of "
                       "torch.int32 dtype.\nNote: this function is intended to be used with the "
                       "output produced by torch.linalg.lu_factor");
  int r = tpu_arg_rank(cx, 0);
  const int64_t *d = tpu_arg_sizes(cx, 0), *pd = tpu_arg_sizes(cx, 1);
  int64_t m = d[r - 2];
  bool fits = tpu_arg_rank(cx, 1) == r - 1;
  for (int i = 0; fits && i < r - 2; ++i) fits = pd[i] == d[i];
  if (!fits)
    return tpu_invalid("torch.lu_unpack: LU_pivots must have the batch dimensions of LU_data");
  tpu_dtype_t dtype = tpu_arg_value_dtype(cx, 0);
  tpu_val_t l = tpu_linalg_empty(g, dtype), u = l, p = l;
  if (tpu_arg_bool(cx, 2, true)) unpack_factors(g, tpu_lower_tensor(cx, 0), &l, &u);
  if (tpu_arg_bool(cx, 3, true)) {
    tpu_val_t pivots = tpu_lower_tensor(cx, 1);
    assert_pivots(cx, pivots, m,
                  "pivots passed to lu_unpack must be between 1 and LU.size(-2) inclusive."
                  "Did you properly pass the result of lu_factor?");
    p = permutation_matrix(g, tpu_ir_lu_permutation(g, pivots, m), dtype);
  }
  tpu_lower_out(cx, 0, p);
  tpu_lower_out(cx, 1, l);
  tpu_lower_out(cx, 2, u);
  return TPU_OK;
}

// linalg_lu_solve(Tensor LU, Tensor pivots, Tensor B, *, bool left=True,
// bool adjoint=False)
tpu_status_t tpu_lower_linalg_lu_solve(tpu_lower_ctx_t* cx) {
  tpu_graph_t* g = cx->g;
  TPU_RETURN_IF_ERROR(tpu_linalg_check_square(cx, 0, "torch.linalg.lu_solve", "A"));
  if (tpu_arg_rank(cx, 2) < 2)
    return tpu_invalid("linalg.lu_solve: The input tensor B must have at least 2 dimensions.");
  if (tpu_arg_value_dtype(cx, 1) != TPU_I32)
    return tpu_invalid("linalg.lu_solve: pivots should be a Tensor of scalar type torch.int32");
  int r = tpu_arg_rank(cx, 0);
  int64_t n = tpu_arg_sizes(cx, 0)[r - 1];
  if (tpu_arg_rank(cx, 1) != r - 1 || tpu_arg_sizes(cx, 1)[r - 2] != n)
    return tpu_invalid("linalg.lu_solve: Number of pivots per batch should be same as the "
                       "dimension of the matrix");
  tpu_dtype_t ta = tpu_arg_value_dtype(cx, 0), tb = tpu_arg_value_dtype(cx, 2);
  if (ta != tb)
    return tpu_invalid("linalg.lu_solve: Expected LU and B to have the same dtype, but found LU "
                       "of type %s and B of type %s instead", tpu_dtype_torch_name(ta),
                       tpu_dtype_torch_name(tb));
  TPU_RETURN_IF_ERROR(tpu_linalg_check_lapack_dtype(cx, 0, "lu_cpu"));
  bool left = tpu_arg_bool(cx, 3, true), adjoint = tpu_arg_bool(cx, 4, false);
  tpu_mat_shape_t sa, sb;
  TPU_RETURN_IF_ERROR(tpu_linalg_batch_broadcast(cx, 0, 2, &sa, &sb));
  int rr = sb.rank;
  if ((left ? sb.d[rr - 2] : sb.d[rr - 1]) != n)
    return tpu_invalid("linalg.lu_solve: Incompatible shapes of A and B for the equation %s "
                       "(%lldx%lld and %lldx%lld)", left ? "AX = B" : "XA = B", (long long)n,
                       (long long)n, (long long)sb.d[rr - 2], (long long)sb.d[rr - 1]);
  tpu_val_t pivots = tpu_lower_tensor(cx, 1);
  assert_pivots(cx, pivots, n,
                "Pivots given to lu_solve must all be smaller or equal to LU.size(-2). Did you "
                "properly pass the result of lu_factor?");
  if (tpu_numel(sb.d, rr) == 0) {
    tpu_lower_out(cx, 0, tpu_ir_const(g, tb, 0, sb.d, rr));
    return TPU_OK;
  }
  tpu_val_t lu = tpu_lower_expand(cx, tpu_lower_tensor(cx, 0), sa.d, rr);
  tpu_val_t perm = tpu_lower_expand(cx, tpu_ir_lu_permutation(g, pivots, n), sa.d, rr - 1);
  tpu_val_t b = tpu_lower_expand(cx, tpu_lower_tensor(cx, 2), sb.d, rr);
  tpu_lower_out(cx, 0, solve(g, lu, perm, b, left, adjoint));
  return TPU_OK;
}

// _linalg_solve_ex(Tensor A, Tensor B, *, bool left=True, bool
// check_errors=False) -> (result, LU, pivots, info)
tpu_status_t tpu_lower_linalg_solve_ex(tpu_lower_ctx_t* cx) {
  tpu_graph_t* g = cx->g;
  TPU_RETURN_IF_ERROR(check_square_float(cx, "linalg.solve"));
  tpu_dtype_t ta = tpu_arg_value_dtype(cx, 0), tb = tpu_arg_value_dtype(cx, 1);
  if (ta != tb)
    return tpu_invalid("linalg.solve: Expected A and B to have the same dtype, but found A of "
                       "type %s and B of type %s instead", tpu_dtype_torch_name(ta),
                       tpu_dtype_torch_name(tb));
  bool left = tpu_arg_bool(cx, 2, true);
  int ra = tpu_arg_rank(cx, 0), rb = tpu_arg_rank(cx, 1);
  const int64_t *da = tpu_arg_sizes(cx, 0), *db = tpu_arg_sizes(cx, 1);
  // [numpy-compat] B is a (batch of) vector(s) when 1-D or shaped A[:-1].
  bool vector = rb == 1 || (rb == ra - 1 && memcmp(db, da, sizeof(int64_t) * (size_t)rb) == 0);
  int64_t n = da[ra - 1], bm[TPU_MAX_RANK];
  int rbm = vector ? rb + 1 : rb;  // B as matrices
  memcpy(bm, db, sizeof(int64_t) * (size_t)rb);
  if (vector) bm[rb] = 1;
  if (rbm < 2 || (left ? bm[rbm - 2] : bm[rbm - 1]) != n)
    return tpu_invalid("linalg.solve: Incompatible shapes of A and B for the equation %s "
                       "(%lldx%lld and %lldx%lld)", left ? "AX = B" : "XA = B", (long long)n,
                       (long long)n, (long long)(rbm < 2 ? 1 : bm[rbm - 2]),
                       (long long)bm[rbm - 1]);
  if (vector && !left)
    return tpu_invalid("linalg.solve: Vector broadcasting of the left hand side is not "
                       "supported for left=False. In this case linalg.solve is equivalent to "
                       "B / A.squeeze(-1)");
  int64_t batch[TPU_MAX_RANK], shape[TPU_MAX_RANK], a_shape[TPU_MAX_RANK];
  int br;
  TPU_RETURN_IF_ERROR(tpu_broadcast_shapes(da, ra - 2, bm, rbm - 2, batch, &br));
  memcpy(shape, batch, sizeof(int64_t) * (size_t)br);
  memcpy(a_shape, batch, sizeof(int64_t) * (size_t)br);
  shape[br] = bm[rbm - 2];
  shape[br + 1] = bm[rbm - 1];
  a_shape[br] = a_shape[br + 1] = n;
  factors_t f = factor(cx, tpu_lower_tensor(cx, 0));
  if (tpu_arg_bool(cx, 3, false))
    tpu_linalg_assert_info(cx, f.info, "torch.linalg.solve_ex",
                           "The solver failed because the input matrix is singular.");
  tpu_val_t x;
  if (tpu_numel(shape, br + 2) == 0) {
    x = tpu_ir_const(g, ta, 0, shape, br + 2);
  } else {
    tpu_val_t b = tpu_lower_expand(cx, tpu_ir_reshape(g, tpu_lower_tensor(cx, 1), bm, rbm),
                                   shape, br + 2);
    x = solve(g, tpu_lower_expand(cx, f.lu, a_shape, br + 2),
              tpu_lower_expand(cx, f.perm, a_shape, br + 1), b, left, false);
  }
  if (vector) x = tpu_ir_reshape(g, x, shape, br + 1);
  tpu_lower_out(cx, 0, x);
  tpu_lower_out(cx, 1, f.lu);
  tpu_lower_out(cx, 2, f.pivots);
  tpu_lower_out(cx, 3, f.info);
  return TPU_OK;
}

// linalg_inv_ex(Tensor A, *, bool check_errors=False) -> (inverse, info)
tpu_status_t tpu_lower_linalg_inv_ex(tpu_lower_ctx_t* cx) {
  tpu_graph_t* g = cx->g;
  TPU_RETURN_IF_ERROR(check_square_float(cx, "linalg.inv"));
  tpu_val_t a = tpu_lower_tensor(cx, 0);
  factors_t f = factor(cx, a);
  if (tpu_arg_bool(cx, 1, false))
    tpu_linalg_assert_info(cx, f.info, "linalg.inv_ex", TPU_LINALG_SINGULAR);
  bool none = tpu_numel(tpu_arg_sizes(cx, 0), tpu_arg_rank(cx, 0)) == 0;
  tpu_lower_out(cx, 0, none ? a : solve_left(g, f.lu, f.perm, tpu_linalg_eye_like(g, a), false));
  tpu_lower_out(cx, 1, f.info);
  return TPU_OK;
}

// The factors det and slogdet save for their backward: of A^T when A is a
// contiguous real tensor, as CPU's.
static factors_t det_factors(tpu_lower_ctx_t* cx) {
  tpu_val_t a = tpu_lower_tensor(cx, 0);
  if (arg_contiguous(cx, 0) && !tpu_dtype_is_complex(tpu_arg_value_dtype(cx, 0)))
    a = tpu_linalg_transpose(cx->g, a);
  return factor(cx, a);
}

// The determinant of the pivots' permutation, +-1 of dtype t (batch shape).
static tpu_val_t permutation_sign(tpu_graph_t* g, tpu_val_t pivots, tpu_dtype_t dtype) {
  tpu_type_t t;
  if (!tpu_linalg_type(g, pivots, &t)) return TPU_VAL_NONE;
  int r = t.rank;
  tpu_val_t order = tpu_ir_binary(g, TPU_IR_ADD, tpu_ir_iota(g, TPU_I32, t.dims, r, r - 1),
                                  tpu_ir_const_i(g, TPU_I32, 1, t.dims, r));
  tpu_val_t swapped = tpu_ir_select(g, tpu_ir_compare(g, TPU_CMP_NE, pivots, order),
                                    tpu_ir_const_i(g, TPU_I32, 1, t.dims, r),
                                    tpu_ir_const_i(g, TPU_I32, 0, t.dims, r));
  int64_t last = r - 1;
  tpu_val_t count = tpu_ir_reduce(g, swapped, tpu_ir_const_i(g, TPU_I32, 0, NULL, 0), &last, 1,
                                  TPU_BODY_ADD);
  tpu_val_t odd = tpu_ir_binary(g, TPU_IR_AND, count, tpu_ir_const_i(g, TPU_I32, 1, t.dims, r - 1));
  tpu_val_t is_odd = tpu_ir_compare(g, TPU_CMP_NE, odd, tpu_ir_const_i(g, TPU_I32, 0, t.dims, r - 1));
  return tpu_ir_select(g, is_odd, tpu_ir_const(g, dtype, -1, t.dims, r - 1),
                       tpu_ir_const(g, dtype, 1, t.dims, r - 1));
}

// x reduced over its last dim by ADD or MUL.
static tpu_val_t reduce_last(tpu_graph_t* g, tpu_val_t x, tpu_body_t body) {
  tpu_type_t t;
  if (!tpu_linalg_type(g, x, &t)) return TPU_VAL_NONE;
  int64_t last = t.rank - 1;
  return tpu_ir_reduce(g, x, tpu_ir_const(g, t.dtype, body == TPU_BODY_MUL ? 1 : 0, NULL, 0),
                       &last, 1, body);
}

// _linalg_det(Tensor A) -> (result, LU, pivots)
tpu_status_t tpu_lower_linalg_det(tpu_lower_ctx_t* cx) {
  tpu_graph_t* g = cx->g;
  TPU_RETURN_IF_ERROR(check_square_float(cx, "linalg.det"));
  factors_t f = det_factors(cx);
  tpu_dtype_t t = tpu_arg_value_dtype(cx, 0);
  tpu_val_t prod = reduce_last(g, tpu_linalg_diagonal(g, f.lu), TPU_BODY_MUL);
  tpu_lower_out(cx, 0, tpu_ir_binary(g, TPU_IR_MUL, permutation_sign(g, f.pivots, t), prod));
  tpu_lower_out(cx, 1, f.lu);
  tpu_lower_out(cx, 2, f.pivots);
  return TPU_OK;
}

// _linalg_slogdet(Tensor A) -> (sign, logabsdet, LU, pivots)
tpu_status_t tpu_lower_linalg_slogdet(tpu_lower_ctx_t* cx) {
  tpu_graph_t* g = cx->g;
  TPU_RETURN_IF_ERROR(check_square_float(cx, "linalg.slogdet"));
  factors_t f = det_factors(cx);
  tpu_dtype_t t = tpu_arg_value_dtype(cx, 0);
  tpu_val_t d = tpu_linalg_diagonal(g, f.lu);
  tpu_val_t mag = tpu_ir_unary(g, TPU_IR_ABS, d);  // real
  tpu_val_t sign = tpu_ir_binary(g, TPU_IR_MUL, permutation_sign(g, f.pivots, t),
                                 reduce_last(g, tpu_ew_sgn(cx, d), TPU_BODY_MUL));
  tpu_lower_out(cx, 0, sign);
  tpu_lower_out(cx, 1, reduce_last(g, tpu_ir_unary(g, TPU_IR_LOG, mag), TPU_BODY_ADD));
  tpu_lower_out(cx, 2, f.lu);
  tpu_lower_out(cx, 3, f.pivots);
  return TPU_OK;
}
