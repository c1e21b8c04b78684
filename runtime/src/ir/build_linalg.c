// Builders of stablehlo.fft, stablehlo.cholesky and
// stablehlo.triangular_solve (their attributes ride in dims_attrs_t).
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
