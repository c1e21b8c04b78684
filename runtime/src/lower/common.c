// Helpers shared by lowerings: shapes, broadcasting, dims, constants.
#include <stdio.h>
#include <string.h>

#include "lower/lower.h"


tpu_status_t tpu_broadcast_shapes(const int64_t* a, int ra, const int64_t* b,
                                  int rb, int64_t* out, int* out_rank) {
  int r = ra > rb ? ra : rb;
  for (int i = r - 1; i >= 0; --i) {  // from the last dim, as PyTorch reports a mismatch
    int ia = ra - r + i, ib = rb - r + i;
    int64_t da = ia >= 0 ? a[ia] : 1, db = ib >= 0 ? b[ib] : 1;
    if (da != db && da != 1 && db != 1)
      return tpu_status_make(TPU_CODE_INVALID_ARGUMENT,
                             "The size of tensor a (%lld) must match the size "
                             "of tensor b (%lld) at non-singleton dimension %d",
                             (long long)da, (long long)db, i);
    out[i] = da == 1 ? db : da;
  }
  *out_rank = r;
  return TPU_OK;
}

tpu_val_t tpu_lower_expand(tpu_lower_ctx_t* cx, tpu_val_t v,
                           const int64_t* dims, int rank) {
  if (!tpu_graph_ok(cx->g)) return TPU_VAL_NONE;
  int r = tpu_ir_rank(cx->g, v);
  const int64_t* vd = tpu_ir_dims(cx->g, v);
  int64_t bdims[TPU_MAX_RANK], keep_dims[TPU_MAX_RANK];
  int keep = 0;
  bool squeeze = false;
  // Size-1 dims being broadcast are dropped first (broadcast_in_dim only
  // repeats dims of size 1, which it allows, but this keeps shapes plain).
  for (int i = 0; i < r; ++i) {
    int j = rank - r + i;
    if (j < 0) {
      tpu_graph_fail(cx->g, tpu_status_make(TPU_CODE_INVALID_ARGUMENT,
                                            "cannot expand a rank %d value to rank %d", r, rank));
      return TPU_VAL_NONE;
    }
    if (vd[i] == 1 && dims[j] != 1) {
      squeeze = true;
      continue;
    }
    keep_dims[keep] = vd[i];
    bdims[keep++] = j;
  }
  if (squeeze) v = tpu_ir_reshape(cx->g, v, keep_dims, keep);
  return tpu_ir_broadcast(cx->g, v, dims, rank, bdims);
}

tpu_status_t tpu_wrap_dim(int64_t dim, int rank, int64_t* out) {
  int64_t r = rank > 0 ? rank : 1;
  if (dim < -r || dim >= r)
    return tpu_status_make(TPU_CODE_OUT_OF_RANGE,
                           "Dimension out of range (expected to be in range of "
                           "[%lld, %lld], but got %lld)", (long long)-r,
                           (long long)(r - 1), (long long)dim);
  *out = dim < 0 ? dim + r : dim;
  return TPU_OK;
}

tpu_val_t tpu_lower_const_like(tpu_lower_ctx_t* cx, tpu_val_t v, double value) {
  if (!tpu_graph_ok(cx->g)) return TPU_VAL_NONE;
  const tpu_type_t* t = tpu_ir_type(cx->g, v);
  return tpu_ir_const(cx->g, t->dtype, value, t->dims, t->rank);
}

const int64_t tpu_all_dims[TPU_MAX_RANK] = {0, 1, 2, 3, 4, 5, 6, 7};

tpu_val_t tpu_lower_splat_like(tpu_lower_ctx_t* cx, tpu_val_t scalar, tpu_val_t like) {
  if (!tpu_graph_ok(cx->g)) return TPU_VAL_NONE;
  const tpu_type_t* t = tpu_ir_type(cx->g, like);
  return tpu_ir_broadcast(cx->g, scalar, t->dims, t->rank, NULL);
}

tpu_status_t tpu_args_broadcast_shape(const tpu_lower_ctx_t* cx, const int* args, int n,
                                      int64_t* shape, int* rank) {
  *rank = 0;
  for (int k = 0; k < n; ++k) {
    if (!tpu_arg_present(cx, args[k])) continue;
    int64_t next[TPU_MAX_RANK];
    TPU_RETURN_IF_ERROR(tpu_broadcast_shapes(shape, *rank, tpu_arg_sizes(cx, args[k]),
                                             tpu_arg_rank(cx, args[k]), next, rank));
    memcpy(shape, next, sizeof(int64_t) * (size_t)*rank);
  }
  return TPU_OK;
}

tpu_status_t tpu_lower_broadcast_inputs(tpu_lower_ctx_t* cx, const int* args,
                                        int n, tpu_dtype_t dtype,
                                        tpu_val_t* out) {
  int64_t shape[TPU_MAX_RANK];
  int rank;
  TPU_RETURN_IF_ERROR(tpu_args_broadcast_shape(cx, args, n, shape, &rank));
  for (int k = 0; k < n; ++k)
    out[k] = tpu_arg_present(cx, args[k])
                 ? tpu_lower_expand(cx, tpu_lower_input(cx, args[k], dtype), shape, rank)
                 : TPU_VAL_NONE;
  return TPU_OK;
}

const tpu_scalar_t* tpu_arg_scalar_at(const tpu_lower_ctx_t* cx, int i, int j) {
  const tpu_arg_t* a = tpu_arg(cx, i);
  return a->kind == TPU_ARG_SCALARS && j >= 0 && j < a->count ? &a->scalars[j] : NULL;
}

void tpu_dims_str(const int64_t* d, int rank, const char* sep, char* out, size_t size) {
  size_t n = 0;
  out[0] = 0;
  for (int i = 0; i < rank && n < size; ++i)
    n += (size_t)snprintf(out + n, size - n, "%s%lld", i ? sep : "", (long long)d[i]);
}

bool tpu_arg_mask_bit(const tpu_lower_ctx_t* cx, int i, int j) {
  const tpu_arg_t* a = tpu_arg(cx, i);
  return a->kind == TPU_ARG_BOOLS && j < a->count ? a->bools[j] : true;
}

int64_t tpu_numel(const int64_t* d, int n) {
  int64_t p = 1;
  for (int i = 0; i < n; ++i) p *= d[i];
  return p;
}

const char* tpu_shape_str(const int64_t* d, int n, char* buf, size_t size) {
  size_t k = (size_t)snprintf(buf, size, "[");
  for (int i = 0; i < n && k < size; ++i)
    k += (size_t)snprintf(buf + k, size - k, "%s%lld", i ? ", " : "", (long long)d[i]);
  if (k < size) snprintf(buf + k, size - k, "]");
  return buf;
}

// Gathers slices along `dim` of x (shape d, rank n) at the i64 indices idx
// (1-D, m entries): the result has x's shape with dim of size m.
tpu_val_t tpu_gather_flat(tpu_graph_t* g, tpu_val_t x, tpu_val_t off, int r) {
  tpu_gather_dims_t dn;
  memset(&dn, 0, sizeof dn);
  dn.n_collapsed = 1;
  dn.n_start_map = 1;
  dn.index_vector_dim = r;  // each offset is a scalar index
  int64_t one = 1;
  return tpu_ir_gather(g, x, off, &dn, &one);
}

tpu_val_t tpu_scatter_flat(tpu_graph_t* g, tpu_val_t x, tpu_val_t off, tpu_val_t upd, int r,
                           tpu_body_t body) {
  tpu_scatter_dims_t dn;
  memset(&dn, 0, sizeof dn);
  dn.n_inserted = 1;
  dn.n_to_operand = 1;
  dn.index_vector_dim = r;
  return tpu_ir_scatter(g, x, off, upd, &dn, body);
}

tpu_val_t tpu_gather_rows(tpu_graph_t* g, tpu_val_t x, tpu_val_t idx, int r, int64_t c) {
  tpu_gather_dims_t dn;
  memset(&dn, 0, sizeof dn);
  dn.n_offset = 1;
  dn.offset_dims[0] = r;
  dn.n_collapsed = 1;
  dn.n_start_map = 1;
  dn.index_vector_dim = r;
  int64_t sizes[2] = {1, c};
  return tpu_ir_gather(g, x, idx, &dn, sizes);
}

tpu_val_t tpu_scatter_points(tpu_graph_t* g, tpu_val_t x, tpu_val_t rows, tpu_val_t cols,
                             tpu_val_t upd, tpu_body_t body) {
  if (!tpu_graph_ok(g)) return TPU_VAL_NONE;
  const int64_t* d = tpu_ir_dims(g, rows);
  int64_t d3[3] = {d[0], d[1], 1};
  tpu_val_t ij[2] = {tpu_ir_reshape(g, rows, d3, 3), tpu_ir_reshape(g, cols, d3, 3)};
  tpu_scatter_dims_t dn;
  memset(&dn, 0, sizeof dn);
  dn.n_inserted = 2;
  dn.inserted_window_dims[1] = 1;
  dn.n_to_operand = 2;
  dn.scatter_dims_to_operand_dims[1] = 1;
  dn.index_vector_dim = 2;
  return tpu_ir_scatter(g, x, tpu_ir_concat(g, ij, 2, 2), upd, &dn, body);
}

tpu_val_t tpu_gather_along(tpu_graph_t* g, tpu_val_t x, const int64_t* d, int n, int dim,
                           tpu_val_t idx) {
  tpu_gather_dims_t dn;
  memset(&dn, 0, sizeof dn);
  for (int i = 0; i < n; ++i)
    if (i != dim) dn.offset_dims[dn.n_offset++] = i;
  dn.n_collapsed = 1;
  dn.collapsed_slice_dims[0] = dim;
  dn.n_start_map = 1;
  dn.start_index_map[0] = dim;
  dn.index_vector_dim = 1;
  int64_t sizes[TPU_MAX_RANK];
  memcpy(sizes, d, sizeof(int64_t) * (size_t)n);
  sizes[dim] = 1;
  return tpu_ir_gather(g, x, idx, &dn, sizes);
}

// Scatters slices of upd (x's shape with dim of size m) into x along `dim`
// at the i64 indices idx (1-D, m entries).
tpu_val_t tpu_scatter_along(tpu_graph_t* g, tpu_val_t x, int n, int dim, tpu_val_t idx,
                            tpu_val_t upd, tpu_body_t body) {
  tpu_scatter_dims_t dn;
  memset(&dn, 0, sizeof dn);
  for (int i = 0; i < n; ++i)
    if (i != dim) dn.update_window_dims[dn.n_update_window++] = i;
  dn.n_inserted = 1;
  dn.inserted_window_dims[0] = dim;
  dn.n_to_operand = 1;
  dn.scatter_dims_to_operand_dims[0] = dim;
  dn.index_vector_dim = 1;
  return tpu_ir_scatter(g, x, idx, upd, &dn, body);
}

tpu_val_t tpu_lower_first_where(tpu_graph_t* g, tpu_val_t mask, tpu_val_t x, const int64_t* d,
                                int n) {
  int64_t m = tpu_numel(d, n);
  tpu_val_t flat_mask = tpu_ir_reshape(g, mask, &m, 1), flat = tpu_ir_reshape(g, x, &m, 1);
  tpu_val_t pos = tpu_ir_iota(g, TPU_I64, &m, 1, 0);
  tpu_val_t first = tpu_ir_reduce(g, tpu_ir_select(g, flat_mask, pos, tpu_ir_const_i(g, TPU_I64, m, &m, 1)),
                                  tpu_ir_const_i(g, TPU_I64, m, NULL, 0), tpu_all_dims, 1, TPU_BODY_MIN);
  tpu_val_t at = tpu_ir_compare(g, TPU_CMP_EQ, pos, tpu_ir_broadcast(g, first, &m, 1, NULL));
  return tpu_ir_reduce(g, tpu_ir_select(g, at, flat, tpu_ir_const_i(g, TPU_I64, INT64_MIN, &m, 1)),
                       tpu_ir_const_i(g, TPU_I64, INT64_MIN, NULL, 0), tpu_all_dims, 1,
                       TPU_BODY_MAX);
}
