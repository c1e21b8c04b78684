// Builders of the reductions (stablehlo.reduce, also with an index: argmax
// and friends) and of the windowed ones (reduce_window, select_and_scatter).
#include <string.h>

#include "ir/ir_internal.h"

// The value a chain of reshapes starts from.
static tpu_val_t unreshaped(const tpu_graph_t* g, tpu_val_t v) {
  while (g->nodes[v].op == TPU_IR_RESHAPE) v = g->nodes[v].operands[0];
  return v;
}

// The sum over the rows of a [rows, cols] matrix as a product with a matrix
// of ones, which Eigen runs (a single row of ones would be a matrix-vector
// product, which XLA's CPU backend emits as a loop and fuses like a reduce).
static tpu_val_t column_sum(tpu_graph_t* g, tpu_val_t x, tpu_val_t init) {
  const tpu_type_t* tx = type_of(g, x);
  int64_t cols = tx->dims[1];
  tpu_val_t ones = tpu_ir_const(g, tx->dtype, 1.0, (int64_t[]){4, tx->dims[0]}, 2);
  tpu_dot_dims_t dn = {.n_contract = 1, .lhs_contract = {1}, .rhs_contract = {0}};
  tpu_val_t sums = tpu_ir_dot(g, ones, x, &dn, tx->dtype);
  tpu_val_t row = tpu_ir_slice(g, sums, (int64_t[]){0, 0}, (int64_t[]){1, cols},
                               (int64_t[]){1, 1});
  return tpu_ir_binary(g, TPU_IR_ADD, tpu_ir_reshape(g, row, &cols, 1),
                       tpu_ir_broadcast(g, init, &cols, 1, NULL));
}

tpu_val_t tpu_ir_reduce(tpu_graph_t* g, tpu_val_t x, tpu_val_t init,
                        const int64_t* dims, int ndims, tpu_body_t body) {
  if (!valid(g, x) || !valid(g, init)) return TPU_VAL_NONE;
  const tpu_type_t* tx = type_of(g, x);
  if (type_of(g, init)->rank != 0 || type_of(g, init)->dtype != tx->dtype)
    return FAIL(g, "reduce: init must be a scalar of the operand's dtype");
  if (ndims == 0) return x;
  dims_attrs_t a;
  memset(&a, 0, sizeof a);
  a.n = ndims;
  a.body = body;
  bool reduced[TPU_MAX_RANK] = {0};
  for (int i = 0; i < ndims; ++i) {
    if (dims[i] < 0 || dims[i] >= tx->rank || reduced[dims[i]] ||
        (i && dims[i] <= dims[i - 1]))
      return FAIL(g, "reduce: dims must be ascending and in range");
    reduced[dims[i]] = true;
    a.v[i] = dims[i];
  }
  tpu_type_t t = tpu_type_make(tx->dtype, NULL, 0);
  for (int i = 0; i < tx->rank; ++i)
    if (!reduced[i]) t.dims[t.rank++] = tx->dims[i];
  // XLA's CPU backend runs a reduction over several adjacent dimensions as
  // a strided loop, about 4x slower than over one: adjacent reduced
  // dimensions, and adjacent kept ones, are merged by a reshape first.
  int64_t merged[TPU_MAX_RANK], merged_reduced[TPU_MAX_RANK];
  int rank = 0, n = 0;
  for (int i = 0; i < tx->rank; ++i) {
    if (i > 0 && reduced[i] == reduced[i - 1]) {
      merged[rank - 1] *= tx->dims[i];
      continue;
    }
    if (reduced[i]) merged_reduced[n++] = rank;
    merged[rank++] = tx->dims[i];
  }
  // A float sum over the leading dimensions (a bias's gradient) of data
  // that its producers shape with more dimensions (batch and sequence): XLA
  // folds the reshapes into the reduction and runs a reduction over several
  // dimensions as a strided loop. As a product with ones, which it cannot
  // fold, it is 2-3x faster. Past 65536 rows the reduction stays: its
  // pairwise sums lose less precision than Eigen's running sums.
  if (rank == 2 && n == 1 && merged_reduced[0] == 0 && body == TPU_BODY_ADD &&
      (tx->dtype == TPU_F32 || tx->dtype == TPU_F64) && merged[0] <= 65536 &&
      type_of(g, unreshaped(g, x))->rank > 2) {
    tpu_val_t r = column_sum(g, tpu_ir_reshape(g, x, merged, rank), init);
    return tpu_ir_reshape(g, r, t.dims, t.rank);
  }
  if (rank < tx->rank) {
    tpu_val_t r =
        tpu_ir_reduce(g, tpu_ir_reshape(g, x, merged, rank), init, merged_reduced, n, body);
    return tpu_ir_reshape(g, r, t.dims, t.rank);
  }
  tpu_val_t ops[2] = {x, init};
  return tpu_graph_add(g, TPU_IR_REDUCE, ops, 2, &a, sizeof a, &t);
}

tpu_val_t tpu_ir_reduce_arg(tpu_graph_t* g, tpu_val_t x, tpu_val_t index,
                            tpu_val_t init_x, tpu_val_t init_index,
                            int64_t dim, tpu_body_t body) {
  if (!valid(g, x) || !valid(g, index) || !valid(g, init_x) || !valid(g, init_index))
    return TPU_VAL_NONE;
  const tpu_type_t *tx = type_of(g, x), *ti = type_of(g, index);
  if (dim < 0 || dim >= tx->rank || tx->rank != ti->rank)
    return FAIL(g, "reduce_arg: bad dim or index shape");
  dims_attrs_t a;
  memset(&a, 0, sizeof a);
  a.n = 1;
  a.v[0] = dim;
  a.body = body;
  tpu_type_t t[2];
  t[0] = tpu_type_make(tx->dtype, NULL, 0);
  for (int i = 0; i < tx->rank; ++i)
    if (i != dim) t[0].dims[t[0].rank++] = tx->dims[i];
  t[1] = t[0];
  t[1].dtype = ti->dtype;
  tpu_val_t ops[4] = {x, index, init_x, init_index};
  return tpu_graph_add_multi(g, TPU_IR_REDUCE, ops, 4, &a, sizeof a, t, 2);
}

static bool window_result(tpu_graph_t* g, const tpu_type_t* tx,
                          const tpu_window_t* w, tpu_type_t* t) {
  *t = *tx;
  for (int i = 0; i < tx->rank; ++i) {
    int64_t bd = w->base_dilations[i] ? w->base_dilations[i] : 1;
    int64_t wd = w->window_dilations[i] ? w->window_dilations[i] : 1;
    int64_t st = w->strides[i] ? w->strides[i] : 1;
    int64_t in = (tx->dims[i] - 1) * bd + 1 + w->pad_lo[i] + w->pad_hi[i];
    int64_t win = (w->dims[i] - 1) * wd + 1;
    if (tx->dims[i] == 0) in = w->pad_lo[i] + w->pad_hi[i];
    if (tx->dims[i] == 0 && w->dims[i] >= 1 && in < win) {
      t->dims[i] = 0;  // an empty dimension has no windows (a pool over an empty batch)
      continue;
    }
    if (w->dims[i] < 1 || in < win) {
      tpu_graph_fail(g, tpu_status_make(TPU_CODE_INVALID_ARGUMENT,
                                        "window of %lld does not fit input of "
                                        "%lld in dim %d", (long long)win,
                                        (long long)in, i));
      return false;
    }
    t->dims[i] = (in - win) / st + 1;
  }
  return true;
}

static tpu_window_t normalized(const tpu_window_t* w, int rank) {
  tpu_window_t n = *w;
  for (int i = 0; i < TPU_MAX_RANK; ++i) {
    if (i >= rank) {
      n.dims[i] = n.strides[i] = n.base_dilations[i] = n.window_dilations[i] = 0;
      n.pad_lo[i] = n.pad_hi[i] = 0;
      continue;
    }
    if (!n.strides[i]) n.strides[i] = 1;
    if (!n.base_dilations[i]) n.base_dilations[i] = 1;
    if (!n.window_dilations[i]) n.window_dilations[i] = 1;
  }
  return n;
}

tpu_val_t tpu_ir_reduce_window(tpu_graph_t* g, tpu_val_t x, tpu_val_t init,
                               const tpu_window_t* w, tpu_body_t body) {
  if (!valid(g, x) || !valid(g, init)) return TPU_VAL_NONE;
  const tpu_type_t* tx = type_of(g, x);
  window_attrs_t a;
  memset(&a, 0, sizeof a);
  a.w = normalized(w, tx->rank);
  a.body = body;
  tpu_type_t t;
  if (!window_result(g, tx, &a.w, &t)) return TPU_VAL_NONE;
  tpu_val_t ops[2] = {x, init};
  return tpu_graph_add(g, TPU_IR_REDUCE_WINDOW, ops, 2, &a, sizeof a, &t);
}

tpu_val_t tpu_ir_select_and_scatter(tpu_graph_t* g, tpu_val_t operand,
                                    tpu_val_t source, tpu_val_t init,
                                    const tpu_window_t* w) {
  if (!valid(g, operand) || !valid(g, source) || !valid(g, init)) return TPU_VAL_NONE;
  const tpu_type_t* tx = type_of(g, operand);
  window_attrs_t a;
  memset(&a, 0, sizeof a);
  a.w = normalized(w, tx->rank);
  tpu_type_t t;
  if (!window_result(g, tx, &a.w, &t)) return TPU_VAL_NONE;
  if (!tpu_type_eq(&t, type_of(g, source)))
    return FAIL(g, "select_and_scatter: source shape does not match the windows");
  tpu_val_t ops[3] = {operand, source, init};
  return tpu_graph_add(g, TPU_IR_SELECT_AND_SCATTER, ops, 3, &a, sizeof a, tx);
}
