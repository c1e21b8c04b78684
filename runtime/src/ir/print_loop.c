// The regions of the matrix-factorization loops (stablehlo.while): the
// condition and the body of one step, written out op by op. StableHLO has no
// LU or QR decomposition, so they are loops over columns. Each step slices
// column i (and row i: the same i for every matrix of the batch), finds what
// differs per matrix through masks (row == p), and updates the matrices in
// one or two elementwise passes.
//
// TPU_IR_LU, step i (carried: i, A, pivots, perm):
//   p      = the first row >= i of the largest |A[:, i]| (LAPACK's choice,
//            |re| + |im| for complex), i when the column is NaN
//   A      = A with rows i and p swapped; perm the same; pivots[i] = p + 1
//   l      = A[:, i] / A[i, i] (times the reciprocal, as LAPACK; unscaled
//            when the pivot is zero)
//   A[r, c] -= l[r] A[i, c] for r, c > i; A[r, i] = l[r] for r > i
// TPU_IR_LU_PERMUTATION, step i (carried: i, pivots, perm): swaps perm[i]
// and perm[pivots[i] - 1].
// TPU_IR_QR, step i (carried: i, A, tau): LAPACK's geqr2 (put_qr_body).
// TPU_IR_HOUSEHOLDER_PRODUCT, step j (carried: j, Q, V, tau): LAPACK's
// org2r backwards, Q = H_i Q for i = k - 1 - j.
// TPU_IR_SQUARINGS, step k (carried: k, X, counts): X = X X where k is
// below the matrix's count; it stops after the largest count.
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "base/strbuf.h"
#include "ir/ir_internal.h"

// Values of one region are %w<id>_<k>, k numbering them in order.
typedef struct region {
  tpu_strbuf_t* sb;
  long id;
  int count;
  tpu_type_t types[256];
} region_t;

static void put_name(region_t* r, int k) { tpu_strbuf_printf(r->sb, "%%w%ld_%d", r->id, k); }

static void put_t(tpu_strbuf_t* sb, const tpu_type_t* t) {
  char buf[160];
  tpu_type_str(t, buf, sizeof buf);
  tpu_strbuf_puts(sb, buf);
}

static int new_value(region_t* r, const tpu_type_t* t) {
  // (the largest body, QR's, uses about 150)
  if (r->count == (int)(sizeof r->types / sizeof r->types[0])) return r->count - 1;
  r->types[r->count] = *t;
  return r->count++;
}

// Emits `%w = "op"(args) {attrs} : (arg types) -> type` and returns the
// new value. `attrs` may be NULL.
static int emitv(region_t* r, const char* op, const tpu_type_t* type, const char* attrs, int n,
                 const int* args) {
  int v = new_value(r, type);
  tpu_strbuf_puts(r->sb, "      ");
  put_name(r, v);
  tpu_strbuf_printf(r->sb, " = \"stablehlo.%s\"(", op);
  for (int i = 0; i < n; ++i) {
    if (i) tpu_strbuf_puts(r->sb, ", ");
    put_name(r, args[i]);
  }
  tpu_strbuf_puts(r->sb, ") ");
  if (attrs) tpu_strbuf_printf(r->sb, "{%s} ", attrs);
  tpu_strbuf_puts(r->sb, ": (");
  for (int i = 0; i < n; ++i) {
    if (i) tpu_strbuf_puts(r->sb, ", ");
    put_t(r->sb, &r->types[args[i]]);
  }
  tpu_strbuf_puts(r->sb, ") -> ");
  put_t(r->sb, type);
  tpu_strbuf_puts(r->sb, "\n");
  return v;
}

static int emit(region_t* r, const char* op, const tpu_type_t* type, const char* attrs, int n,
                ...) {
  int args[4];
  va_list ap;
  va_start(ap, n);
  for (int i = 0; i < n; ++i) args[i] = va_arg(ap, int);
  va_end(ap);
  return emitv(r, op, type, attrs, n, args);
}

static tpu_type_t with(const tpu_type_t* t, tpu_dtype_t dtype) {
  tpu_type_t u = *t;
  u.dtype = dtype;
  return u;
}

static tpu_dtype_t real_part(tpu_dtype_t t) {
  return t == TPU_C64 ? TPU_F32 : t == TPU_C128 ? TPU_F64 : t;
}

// A splat constant: an integer, or a float given by its bits (so -0.0
// survives), the imaginary part zero.
static int constant(region_t* r, const tpu_type_t* t, double value) {
  char lit[64], attrs[320], type[160];
  tpu_type_str(t, type, sizeof type);
  tpu_dtype_t rt = real_part(t->dtype);
  if (rt == TPU_F32) {
    float f = (float)value;
    uint32_t b;
    memcpy(&b, &f, 4);
    snprintf(lit, sizeof lit, "0x%08X", b);
  } else if (rt == TPU_F64) {
    uint64_t b;
    memcpy(&b, &value, 8);
    snprintf(lit, sizeof lit, "0x%016llX", (unsigned long long)b);
  } else {
    snprintf(lit, sizeof lit, "%lld", (long long)value);
  }
  if (tpu_dtype_is_complex(t->dtype))
    snprintf(attrs, sizeof attrs, "value = dense<(%s, %s)> : %s", lit,
             rt == TPU_F32 ? "0x00000000" : "0x0000000000000000", type);
  else
    snprintf(attrs, sizeof attrs, "value = dense<%s> : %s", lit, type);
  return emit(r, "constant", t, attrs, 0);
}

static int iota(region_t* r, const tpu_type_t* t, int dim) {
  char attrs[64];
  snprintf(attrs, sizeof attrs, "iota_dimension = %d : i64", dim);
  return emit(r, "iota", t, attrs, 0);
}

static int compare(region_t* r, const char* dir, int a, int b) {
  tpu_type_t t = with(&r->types[a], TPU_BOOL);
  tpu_dtype_kind_t k = tpu_dtype_kind(r->types[a].dtype);
  char attrs[160];
  snprintf(attrs, sizeof attrs,
           "comparison_direction = #stablehlo<comparison_direction %s>, "
           "compare_type = #stablehlo<comparison_type %s>", dir,
           k == TPU_KIND_FLOAT || k == TPU_KIND_COMPLEX ? "FLOAT" : "SIGNED");
  return emit(r, "compare", &t, attrs, 2, a, b);
}

static int binary(region_t* r, const char* op, int a, int b) {
  return emit(r, op, &r->types[a], NULL, 2, a, b);
}

static int select(region_t* r, int pred, int a, int b) {
  return emit(r, "select", &r->types[a], NULL, 3, pred, a, b);
}

// x broadcast to `t`, x's dims going to dims[0..n).
static int broadcast(region_t* r, int x, const tpu_type_t* t, int n, int first_skipped) {
  char attrs[128] = "broadcast_dimensions = array<i64";
  for (int i = 0, d = 0; i < n; ++i, ++d) {
    if (d == first_skipped) ++d;
    snprintf(attrs + strlen(attrs), sizeof attrs - strlen(attrs), "%s%d", i ? ", " : ": ", d);
  }
  strcat(attrs, ">");
  return emit(r, "broadcast_in_dim", t, attrs, 1, x);
}

// x reduced over dim `dim` with `op` (add, maximum, minimum) from `init`.
static int reduce(region_t* r, const char* op, int x, int dim, double init) {
  tpu_type_t scalar = {.dtype = r->types[x].dtype, .rank = 0};
  int i = constant(r, &scalar, init);
  tpu_type_t t = r->types[x];
  for (int d = dim; d < t.rank - 1; ++d) t.dims[d] = t.dims[d + 1];
  --t.rank;
  int v = new_value(r, &t);
  tpu_strbuf_t* sb = r->sb;
  char s[160];
  tpu_type_str(&scalar, s, sizeof s);
  tpu_strbuf_puts(sb, "      ");
  put_name(r, v);
  tpu_strbuf_puts(sb, " = \"stablehlo.reduce\"(");
  put_name(r, x);
  tpu_strbuf_puts(sb, ", ");
  put_name(r, i);
  tpu_strbuf_printf(sb, ") ({\n      ^bb0(%%w%ld_%da: %s, %%w%ld_%db: %s):\n", r->id, v, s, r->id, v, s);
  tpu_strbuf_printf(sb, "        %%w%ld_%dr = \"stablehlo.%s\"(%%w%ld_%da, %%w%ld_%db) : (%s, %s) -> %s\n",
                    r->id, v, op, r->id, v, r->id, v, s, s, s);
  tpu_strbuf_printf(sb, "        \"stablehlo.return\"(%%w%ld_%dr) : (%s) -> ()\n      }) "
                    "{dimensions = array<i64: %d>} : (", r->id, v, s, dim);
  put_t(sb, &r->types[x]);
  tpu_strbuf_printf(sb, ", %s) -> ", s);
  put_t(sb, &t);
  tpu_strbuf_puts(sb, "\n");
  return v;
}

static void open_block(region_t* r, const tpu_type_t* types, int n) {
  tpu_strbuf_puts(r->sb, "{\n    ^bb0(");
  for (int i = 0; i < n; ++i) {
    int v = new_value(r, &types[i]);
    if (i) tpu_strbuf_puts(r->sb, ", ");
    put_name(r, v);
    tpu_strbuf_puts(r->sb, ": ");
    put_t(r->sb, &types[i]);
  }
  tpu_strbuf_puts(r->sb, "):\n");
}

static void close_block(region_t* r, const int* vals, int n) {
  tpu_strbuf_puts(r->sb, "      \"stablehlo.return\"(");
  for (int i = 0; i < n; ++i) {
    if (i) tpu_strbuf_puts(r->sb, ", ");
    put_name(r, vals[i]);
  }
  tpu_strbuf_puts(r->sb, ") : (");
  for (int i = 0; i < n; ++i) {
    if (i) tpu_strbuf_puts(r->sb, ", ");
    put_t(r->sb, &r->types[vals[i]]);
  }
  tpu_strbuf_puts(r->sb, ") -> ()\n    }");
}

// Rows i and p of x (batch x rows [x cols]) swapped; `at_i` / `at_p`
// (x's shape, bool) say where x's row index equals i / p.
static int swap_rows(region_t* r, int x, int at_i, int at_p, int nb, double zero) {
  const tpu_type_t* t = &r->types[x];
  tpu_type_t row = *t;  // x without its row dim
  for (int d = nb; d < t->rank - 1; ++d) row.dims[d] = row.dims[d + 1];
  --row.rank;
  int z = constant(r, t, zero);
  int xi = reduce(r, "add", select(r, at_i, x, z), nb, zero);
  int xp = reduce(r, "add", select(r, at_p, x, z), nb, zero);
  int xi_b = broadcast(r, xi, t, row.rank, nb);
  int xp_b = broadcast(r, xp, t, row.rank, nb);
  return select(r, at_i, xp_b, select(r, at_p, xi_b, x));
}

// step + 1, the next value of a loop's counter.
static int next_step(region_t* r, int step) {
  tpu_type_t s = {.dtype = TPU_I32, .rank = 0};
  return binary(r, "add", step, constant(r, &s, 1));
}

// x (batch x k) with entry i (an i32 scalar) set to value (batch).
static int set_entry(region_t* r, int x, int i, int value) {
  const tpu_type_t* t = &r->types[x];
  tpu_type_t ti = with(t, TPU_I32);
  int nb = t->rank - 1;
  int at = compare(r, "EQ", iota(r, &ti, nb), broadcast(r, i, &ti, 0, -1));
  return select(r, at, broadcast(r, value, t, nb, -1), x);
}

// The condition: step < steps.
// (steps < 0: step < the largest of the last carried value, the squarings'
// counts.)
static void put_cond(tpu_strbuf_t* sb, long id, const tpu_type_t* carried, int n,
                     int64_t steps) {
  region_t r = {.sb = sb, .id = id};
  open_block(&r, carried, n);
  tpu_type_t s = {.dtype = TPU_I32, .rank = 0};
  int bound = steps >= 0 ? constant(&r, &s, (double)steps) : n - 1;
  while (r.types[bound].rank > 0) bound = reduce(&r, "maximum", bound, 0, 0);
  int c = compare(&r, "LT", 0, bound);
  close_block(&r, &c, 1);
}

// x[.., start.., ..] of type t: a dynamic slice at 0 in every dim but
// `dim`, where it starts at the i32 scalar `start`.
static int slice_at(region_t* r, int x, int dim, int start, const tpu_type_t* t) {
  tpu_type_t s = {.dtype = TPU_I32, .rank = 0};
  int zero = constant(r, &s, 0);
  int rank = r->types[x].rank, args[TPU_MAX_RANK + 1];
  args[0] = x;
  char attrs[128] = "slice_sizes = array<i64";
  for (int d = 0; d < rank; ++d) {
    args[d + 1] = d == dim ? start : zero;
    snprintf(attrs + strlen(attrs), sizeof attrs - strlen(attrs), "%s%lld", d ? ", " : ": ",
             (long long)(d == dim ? 1 : r->types[x].dims[d]));
  }
  strcat(attrs, ">");
  tpu_type_t u = r->types[x];
  u.dims[dim] = 1;
  return emit(r, "reshape", t, NULL, 1, emitv(r, "dynamic_slice", &u, attrs, rank + 1, args));
}

static void put_lu_body(tpu_strbuf_t* sb, long id, const tpu_type_t* carried) {
  region_t r = {.sb = sb, .id = id};
  open_block(&r, carried, 4);  // values 0..3: i, A, pivots, perm
  const tpu_type_t *ta = &carried[1], *tvi = &carried[3];
  int nb = ta->rank - 2;
  int64_t m = ta->dims[nb];
  tpu_type_t tai = with(ta, TPU_I32), tv = with(tvi, ta->dtype), tvr = with(tvi, real_part(ta->dtype));
  tpu_type_t tb = tv, trow = *ta;  // batch; batch x n
  --tb.rank;
  trow.dims[nb] = ta->dims[nb + 1];
  --trow.rank;
  tpu_type_t tbi = with(&tb, TPU_I32);
  int i = 0, a = 1, piv = 2, perm = 3;
  int rows_v = iota(&r, tvi, nb);
  int i_v = broadcast(&r, i, tvi, 0, -1), i_b = broadcast(&r, i, &tbi, 0, -1);
  // The pivot row p: the first of the largest magnitude in column i.
  int col = slice_at(&r, a, nb + 1, i, &tv);
  int mag;
  if (tpu_dtype_is_complex(ta->dtype)) {
    int re = emit(&r, "real", &tvr, NULL, 1, col), im = emit(&r, "imag", &tvr, NULL, 1, col);
    mag = binary(&r, "add", emit(&r, "abs", &tvr, NULL, 1, re), emit(&r, "abs", &tvr, NULL, 1, im));
  } else {
    mag = emit(&r, "abs", &tvr, NULL, 1, col);
  }
  mag = select(&r, compare(&r, "GE", rows_v, i_v), mag, constant(&r, &tvr, -1));
  int top = broadcast(&r, reduce(&r, "maximum", mag, nb, -1), &tvr, nb, -1);
  int first = reduce(&r, "minimum",
                     select(&r, compare(&r, "EQ", mag, top), rows_v, constant(&r, tvi, (double)m)),
                     nb, (double)m);
  int p = select(&r, compare(&r, "EQ", first, constant(&r, &tbi, (double)m)), i_b, first);
  // Rows i and p, and column i after they swap places.
  int rows = iota(&r, &tai, nb), cols = iota(&r, &tai, nb + 1);
  int i_a = broadcast(&r, i, &tai, 0, -1);
  int at_i = compare(&r, "EQ", rows, i_a);
  int at_p = compare(&r, "EQ", rows, broadcast(&r, p, &tai, nb, -1));
  int row_p = reduce(&r, "add", select(&r, at_p, a, constant(&r, ta, -0.0)), nb, -0.0);
  int row_i = slice_at(&r, a, nb, i, &trow);
  int at_iv = compare(&r, "EQ", rows_v, i_v);
  int at_pv = compare(&r, "EQ", rows_v, broadcast(&r, p, tvi, nb, -1));
  int d_v = broadcast(&r, slice_at(&r, row_p, nb, i, &tb), &tv, nb, -1);  // the pivot
  int c_v = broadcast(&r, slice_at(&r, col, nb, i, &tb), &tv, nb, -1);
  int col1 = select(&r, at_iv, d_v, select(&r, at_pv, c_v, col));
  // The multipliers: times the reciprocal of the pivot unless that would
  // overflow, as LAPACK; none for a zero pivot.
  int recip = binary(&r, "divide", constant(&r, &tv, 1), d_v);
  int d_abs = emit(&r, "abs", &tvr, NULL, 1, d_v);
  double tiny = tvr.dtype == TPU_F32 ? 1.17549435082228750797e-38 : 2.2250738585072014e-308;
  int scaled = select(&r, compare(&r, "GE", d_abs, constant(&r, &tvr, tiny)),
                      binary(&r, "multiply", col1, recip), binary(&r, "divide", col1, d_v));
  int l = select(&r, compare(&r, "NE", d_v, constant(&r, &tv, 0)), scaled, col1);
  // One elementwise pass: the swap, the rank-1 update, the multipliers.
  int row_p_a = broadcast(&r, row_p, ta, nb + 1, nb);
  int a1 = select(&r, at_i, row_p_a, select(&r, at_p, broadcast(&r, row_i, ta, nb + 1, nb), a));
  int l_a = broadcast(&r, l, ta, nb + 1, -1);
  int below = compare(&r, "GT", rows, i_a);
  int right = compare(&r, "GT", cols, i_a);
  int at_col = compare(&r, "EQ", cols, i_a);
  int upd = binary(&r, "subtract", a1, binary(&r, "multiply", l_a, row_p_a));
  int a2 = select(&r, binary(&r, "and", below, right), upd, a1);
  int a3 = select(&r, binary(&r, "and", below, at_col), l_a, a2);
  // perm swaps the same rows; pivots[i] = p + 1.
  int perm1 = swap_rows(&r, perm, at_iv, at_pv, nb, 0);
  int piv1 = set_entry(&r, piv, i, binary(&r, "add", p, constant(&r, &tbi, 1)));
  int out[4] = {next_step(&r, i), a3, piv1, perm1};
  close_block(&r, out, 4);
}

static void put_permutation_body(tpu_strbuf_t* sb, long id, const tpu_type_t* carried) {
  region_t r = {.sb = sb, .id = id};
  open_block(&r, carried, 3);  // values 0..2: i, pivots, perm
  const tpu_type_t* tv = &carried[2];
  int nb = tv->rank - 1;
  tpu_type_t tb = *tv;
  --tb.rank;
  int i = 0, piv = 1, perm = 2;
  int p = binary(&r, "subtract", slice_at(&r, piv, nb, i, &tb), constant(&r, &tb, 1));
  int rows = iota(&r, tv, nb);
  int at_i = compare(&r, "EQ", rows, broadcast(&r, i, tv, 0, -1));
  int at_p = compare(&r, "EQ", rows, broadcast(&r, p, tv, nb, -1));
  int out[3] = {next_step(&r, i), piv, swap_rows(&r, perm, at_i, at_p, nb, 0)};
  close_block(&r, out, 3);
}

// conjugate(x) (x itself when real).
static int conjugate(region_t* r, int x) {
  const tpu_type_t* t = &r->types[x];
  if (!tpu_dtype_is_complex(t->dtype)) return x;
  tpu_type_t rt = with(t, real_part(t->dtype));
  int re = emit(r, "real", &rt, NULL, 1, x), im = emit(r, "imag", &rt, NULL, 1, x);
  return emit(r, "complex", t, NULL, 2, re, emit(r, "negate", &rt, NULL, 1, im));
}

// |x|^2, real.
static int abs_squared(region_t* r, int x) {
  const tpu_type_t* t = &r->types[x];
  if (!tpu_dtype_is_complex(t->dtype)) return binary(r, "multiply", x, x);
  tpu_type_t rt = with(t, real_part(t->dtype));
  int re = emit(r, "real", &rt, NULL, 1, x), im = emit(r, "imag", &rt, NULL, 1, x);
  return binary(r, "add", binary(r, "multiply", re, re), binary(r, "multiply", im, im));
}

// x (real) as a value of complex dtype t (x itself when t is real).
static int as_dtype(region_t* r, int x, tpu_dtype_t t) {
  if (r->types[x].dtype == t) return x;
  tpu_type_t u = with(&r->types[x], t);
  return emit(r, "convert", &u, NULL, 1, x);
}

// A reflector's vector from column values `col` (batch x m): col below row
// i, 1 at i, 0 above (`rows_v`: row indices, `i_v`: i; batch x m).
static int with_unit_diagonal(region_t* r, int col, int rows_v, int i_v) {
  const tpu_type_t* tv = &r->types[col];
  int unit = select(r, compare(r, "EQ", rows_v, i_v), constant(r, tv, 1), constant(r, tv, 0));
  return select(r, compare(r, "GT", rows_v, i_v), col, unit);
}

// x - tau v (v^H x) for x (batch x m x c), v (batch x m), tau (batch):
// the reflector I - tau v v^H applied from the left, on the columns where
// `keep` (batch x m x c bool, or -1 for all) is false.
static int reflect(region_t* r, int x, int v, int tau, int keep) {
  const tpu_type_t* tx = &r->types[x];
  int nb = tx->rank - 2;
  int v_a = broadcast(r, v, tx, nb + 1, -1);
  int w = reduce(r, "add", binary(r, "multiply", broadcast(r, conjugate(r, v), tx, nb + 1, -1), x), nb, 0);
  int tw = binary(r, "multiply", broadcast(r, w, tx, nb + 1, nb), broadcast(r, tau, tx, nb, -1));
  int y = binary(r, "subtract", x, binary(r, "multiply", v_a, tw));
  return keep < 0 ? y : select(r, keep, x, y);
}

// One step of geqr2: the reflector of column i as LAPACK's larfg makes it
// (beta = -sign(alpha_re) |(alpha, x)|, tau = (beta - alpha) / beta,
// v = x / (alpha - beta); none when x is zero and alpha real), applied as
// H^H to the columns right of i.
static void put_qr_body(tpu_strbuf_t* sb, long id, const tpu_type_t* carried) {
  region_t r = {.sb = sb, .id = id};
  open_block(&r, carried, 3);  // values 0..2: i, A, tau
  const tpu_type_t* ta = &carried[1];
  int nb = ta->rank - 2;
  tpu_dtype_t dt = ta->dtype, rt = real_part(dt);
  bool complex = tpu_dtype_is_complex(dt);
  tpu_type_t tvi = with(ta, TPU_I32), tv = *ta;  // batch x m
  tvi.rank = tv.rank = nb + 1;
  tpu_type_t tb = tv;
  tb.rank = nb;
  tpu_type_t tbr = with(&tb, rt), tai = with(ta, TPU_I32);
  int i = 0, a = 1, tau = 2;
  int rows_v = iota(&r, &tvi, nb), i_v = broadcast(&r, i, &tvi, 0, -1);
  int col = slice_at(&r, a, nb + 1, i, &tv);
  int alpha = slice_at(&r, col, nb, i, &tb);
  int below_v = compare(&r, "GT", rows_v, i_v);
  int x = select(&r, below_v, col, constant(&r, &tv, 0));
  int xnorm2 = reduce(&r, "add", abs_squared(&r, x), nb, 0);
  int ar = complex ? emit(&r, "real", &tbr, NULL, 1, alpha) : alpha;
  int ai = complex ? emit(&r, "imag", &tbr, NULL, 1, alpha) : constant(&r, &tbr, 0);
  int norm = emit(&r, "sqrt", &tbr, NULL, 1, binary(&r, "add", abs_squared(&r, alpha), xnorm2));
  int beta = select(&r, compare(&r, "LT", ar, constant(&r, &tbr, 0)), norm,
                    emit(&r, "negate", &tbr, NULL, 1, norm));
  int zero_b = constant(&r, &tbr, 0);
  int none = binary(&r, "and", compare(&r, "EQ", xnorm2, zero_b), compare(&r, "EQ", ai, zero_b));
  int t_re = binary(&r, "divide", binary(&r, "subtract", beta, ar), beta);
  int t = complex ? emit(&r, "complex", &tb, NULL, 2, t_re,
                         binary(&r, "divide", emit(&r, "negate", &tbr, NULL, 1, ai), beta))
                  : t_re;
  t = select(&r, none, constant(&r, &tb, 0), t);
  int scale = binary(&r, "divide", constant(&r, &tb, 1),
                     binary(&r, "subtract", alpha, as_dtype(&r, beta, dt)));
  int v_below = binary(&r, "multiply", x, broadcast(&r, scale, &tv, nb, -1));
  int v = with_unit_diagonal(&r, v_below, rows_v, i_v);
  // H^H on the columns right of i, and column i: beta on the diagonal, v
  // below it (none: H = I, the matrix stays as it is).
  int cols = iota(&r, &tai, nb + 1), i_a = broadcast(&r, i, &tai, 0, -1);
  tpu_type_t tab = with(ta, TPU_BOOL);
  int none_a = broadcast(&r, none, &tab, nb, -1);
  int keep = binary(&r, "or", compare(&r, "LE", cols, i_a), none_a);
  int a1 = reflect(&r, a, v, conjugate(&r, t), keep);
  int beta_v = broadcast(&r, as_dtype(&r, beta, dt), &tv, nb, -1);
  int at_iv = compare(&r, "EQ", rows_v, i_v);
  int new_col = select(&r, below_v, v_below, select(&r, at_iv, beta_v, col));
  int at_col = binary(&r, "and", compare(&r, "EQ", cols, i_a),
                      emit(&r, "not", &tab, NULL, 1, none_a));
  int a2 = select(&r, at_col, broadcast(&r, new_col, ta, nb + 1, -1), a1);
  int out[3] = {next_step(&r, i), a2, set_entry(&r, tau, i, t)};
  close_block(&r, out, 3);
}

// One step of orgqr, backwards: Q = H_i Q for i = k - 1 - step.
static void put_householder_body(tpu_strbuf_t* sb, long id, const tpu_type_t* carried) {
  region_t r = {.sb = sb, .id = id};
  open_block(&r, carried, 4);  // values 0..3: step, Q, V, tau
  const tpu_type_t *tvm = &carried[2], *tk = &carried[3];
  int nb = tvm->rank - 2;
  tpu_type_t tvi = with(tvm, TPU_I32), tv = *tvm, tb = *tk;
  tvi.rank = tv.rank = nb + 1;
  tb.rank = nb;
  tpu_type_t s = {.dtype = TPU_I32, .rank = 0};
  int step = 0, q = 1, vm = 2, tau = 3;
  int i = binary(&r, "subtract", constant(&r, &s, (double)(tk->dims[nb] - 1)), step);
  int rows_v = iota(&r, &tvi, nb), i_v = broadcast(&r, i, &tvi, 0, -1);
  int v = with_unit_diagonal(&r, slice_at(&r, vm, nb + 1, i, &tv), rows_v, i_v);
  int q1 = reflect(&r, q, v, slice_at(&r, tau, nb, i, &tb), -1);
  int out[4] = {next_step(&r, step), q1, vm, tau};
  close_block(&r, out, 4);
}

// One step of the squarings (carried: k, X, counts): X = X X for the
// matrices whose count is above k.
static void put_squaring_body(tpu_strbuf_t* sb, long id, const tpu_type_t* carried,
                              int64_t precision) {
  region_t r = {.sb = sb, .id = id};
  open_block(&r, carried, 3);  // values 0..2: k, X, counts
  const tpu_type_t *tx = &carried[1], *tc = &carried[2];
  int nb = tc->rank;
  char attrs[384] = "dot_dimension_numbers = #stablehlo.dot<lhs_batching_dimensions = [";
  for (int pass = 0; pass < 2; ++pass) {
    for (int i = 0; i < nb; ++i)
      snprintf(attrs + strlen(attrs), sizeof attrs - strlen(attrs), "%s%d", i ? ", " : "", i);
    strcat(attrs, pass ? "]" : "], rhs_batching_dimensions = [");
  }
  snprintf(attrs + strlen(attrs), sizeof attrs - strlen(attrs),
           ", lhs_contracting_dimensions = [%d], rhs_contracting_dimensions = [%d]>", nb + 1, nb);
  tpu_precision_text(attrs + strlen(attrs), sizeof attrs - strlen(attrs), precision);
  int square = emit(&r, "dot_general", tx, attrs, 2, 1, 1);
  int more = compare(&r, "LT", broadcast(&r, 0, tc, 0, -1), 2);
  tpu_type_t tb = with(tx, TPU_BOOL);
  int out[3] = {next_step(&r, 0), select(&r, broadcast(&r, more, &tb, nb, -1), square, 1), 2};
  close_block(&r, out, 3);
}

void tpu_print_loop(tpu_strbuf_t* sb, const tpu_node_t* n, int32_t v) {
  const dims_attrs_t* a = n->attrs;
  tpu_strbuf_puts(sb, "(");
  put_cond(sb, 2L * v, n->result_types, n->num_results, a->v[0]);
  tpu_strbuf_puts(sb, ", ");
  switch (n->op) {
    case TPU_IR_LU: put_lu_body(sb, 2L * v + 1, n->result_types); break;
    case TPU_IR_LU_PERMUTATION: put_permutation_body(sb, 2L * v + 1, n->result_types); break;
    case TPU_IR_QR: put_qr_body(sb, 2L * v + 1, n->result_types); break;
    case TPU_IR_HOUSEHOLDER_PRODUCT:
      put_householder_body(sb, 2L * v + 1, n->result_types);
      break;
    default: put_squaring_body(sb, 2L * v + 1, n->result_types, a->v[1]); break;
  }
  tpu_strbuf_puts(sb, ") ");
}
