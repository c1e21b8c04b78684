// Advanced indexing: x[i, j] with index tensors (index), and assignment
// through them (index_put, with accumulate); bool indices are masks.
#include <string.h>

#include "lower/index.h"

//===--- advanced indexing ---===//

// The tensors of an indices list (Tensor?[] at arg `arg`) after PyTorch's
// rules: index tensors broadcast to one shape B; indexed dims `dims[0..k)`;
// the result has B where the first indexed dim was when the indexed dims are
// adjacent, else in front.
typedef struct adv_index {
  int k;                     // number of index tensors
  int64_t dims[TPU_MAX_RANK];  // the self dim each one indexes
  int list[TPU_MAX_RANK];    // its position in the list
  int64_t b[TPU_MAX_RANK];   // broadcast shape B
  int nb;
  int pos;                   // where B goes in the result
  int64_t out[TPU_MAX_RANK];  // result shape
  int nout;
} adv_index_t;

static tpu_status_t adv_index_plan(tpu_lower_ctx_t* cx, int arg, adv_index_t* p) {
  memset(p, 0, sizeof *p);
  int rank = tpu_arg_rank(cx, 0), count = tpu_arg_count(cx, arg);
  const int64_t* xd = tpu_arg_sizes(cx, 0);
  if (count > rank)
    return TPU_LOWER_ERROR(TPU_CODE_OUT_OF_RANGE,
                           "too many indices for tensor of dimension %d (got %d)", rank, count);
  bool gap = false;
  for (int i = 0; i < count; ++i) {
    const tpu_view_t* v = tpu_arg_tensor_at(cx, arg, i);
    if (!v) {
      if (p->k) gap = true;
      continue;
    }
    if (!tpu_ix_is_index_dtype(v->dtype))
      return TPU_LOWER_ERROR(TPU_CODE_OUT_OF_RANGE,
                             "tensors used as indices must be long, int, byte or bool tensors");
    if (p->k && gap) p->pos = -1;  // not adjacent
    int64_t nb[TPU_MAX_RANK];
    int r;
    tpu_status_t s = tpu_broadcast_shapes(p->b, p->nb, v->sizes, v->rank, nb, &r);
    if (s) {
      tpu_status_free(s);
      return TPU_LOWER_ERROR(TPU_CODE_OUT_OF_RANGE,
                             "shape mismatch: indexing tensors could not be broadcast together");
    }
    memcpy(p->b, nb, sizeof(int64_t) * (size_t)r);
    p->nb = r;
    if (p->k == 0) p->pos = i;
    p->dims[p->k] = i;
    p->list[p->k++] = i;
  }
  if (p->pos < 0) p->pos = 0;
  int rest = rank - p->k;
  if (p->nb + rest > TPU_MAX_RANK)
    return TPU_LOWER_ERROR(TPU_CODE_INVALID_ARGUMENT, "index: result has too many dimensions");
  // Result: non-indexed dims before pos, B, then the other non-indexed dims.
  int o = 0, seen = 0;
  for (int i = 0; i < rank; ++i) {
    bool indexed = false;
    for (int j = 0; j < p->k; ++j) indexed |= p->dims[j] == i;
    if (indexed) continue;
    if (seen++ == p->pos) {
      memcpy(p->out + o, p->b, sizeof(int64_t) * (size_t)p->nb);
      o += p->nb;
    }
    p->out[o++] = xd[i];
  }
  if (seen <= p->pos) {
    memcpy(p->out + o, p->b, sizeof(int64_t) * (size_t)p->nb);
    o += p->nb;
  }
  p->nout = o;
  return TPU_OK;
}

// The plan's index tensors, broadcast, checked, wrapped, flattened to
// [NB, k] i64 (NB = numel of B).
static tpu_val_t adv_index_values(tpu_lower_ctx_t* cx, int arg, const adv_index_t* p) {
  tpu_graph_t* g = cx->g;
  const int64_t* xd = tpu_arg_sizes(cx, 0);
  int64_t nb = tpu_numel(p->b, p->nb);
  int64_t col[2] = {nb, 1};
  tpu_val_t cols[TPU_MAX_RANK];
  for (int j = 0; j < p->k; ++j) {
    tpu_val_t v = tpu_ir_convert(g, tpu_lower_tensor_at(cx, arg, p->list[j]), TPU_I64);
    v = tpu_lower_expand(cx, v, p->b, p->nb);
    int64_t size = xd[p->dims[j]];
    v = tpu_ix_checked_index(cx, v, p->b, p->nb, size, true, TPU_CODE_OUT_OF_RANGE,
                             "index {value} is out of bounds for dimension %lld with size %lld",
                             (long long)p->dims[j], (long long)size);
    cols[j] = tpu_ir_reshape(g, v, col, 2);
  }
  return tpu_ir_concat(g, cols, p->k, 1);
}

// Gather/scatter dimension numbers of the plan, over self and a result in
// the collapsed form [non-indexed dims before pos, NB, the others].
static void adv_gather_dims(const adv_index_t* p, int rank, tpu_gather_dims_t* dn,
                            int64_t* slice, const int64_t* xd) {
  memset(dn, 0, sizeof *dn);
  int rest = rank - p->k;
  for (int i = 0; i < rest + 1; ++i)
    if (i != p->pos) dn->offset_dims[dn->n_offset++] = i;
  for (int j = 0; j < p->k; ++j) {
    dn->collapsed_slice_dims[j] = p->dims[j];
    dn->start_index_map[j] = p->dims[j];
  }
  dn->n_collapsed = dn->n_start_map = p->k;
  // Collapsed dims must be ascending; the list order is ascending already.
  dn->index_vector_dim = 1;
  memcpy(slice, xd, sizeof(int64_t) * (size_t)rank);
  for (int j = 0; j < p->k; ++j) slice[p->dims[j]] = 1;
}

// The collapsed shape [non-indexed before pos, NB, other non-indexed].
static int adv_collapsed_shape(const adv_index_t* p, int rank, const int64_t* xd, int64_t* cd) {
  int o = 0, seen = 0;
  int64_t nb = tpu_numel(p->b, p->nb);
  for (int i = 0; i < rank; ++i) {
    bool indexed = false;
    for (int j = 0; j < p->k; ++j) indexed |= p->dims[j] == i;
    if (indexed) continue;
    if (seen++ == p->pos) cd[o++] = nb;
    cd[o++] = xd[i];
  }
  if (seen <= p->pos) cd[o++] = nb;
  return o;
}

// index(Tensor self, Tensor?[] indices): integer index tensors only (the
// binding turns boolean masks into integer indices first).
tpu_status_t tpu_lower_index(tpu_lower_ctx_t* cx) {
  tpu_graph_t* g = cx->g;
  adv_index_t p;
  TPU_RETURN_IF_ERROR(adv_index_plan(cx, 1, &p));
  tpu_val_t x = tpu_lower_tensor(cx, 0);
  if (p.k == 0) {
    tpu_lower_out(cx, 0, x);
    return TPU_OK;
  }
  int rank = tpu_arg_rank(cx, 0);
  const int64_t* xd = tpu_arg_sizes(cx, 0);
  tpu_dtype_t t = tpu_arg_value_dtype(cx, 0);
  // PyTorch checks indices as it visits result elements: none when empty.
  if (tpu_numel(p.out, p.nout) == 0) {
    tpu_lower_out(cx, 0, tpu_ix_zeros(g, t, p.out, p.nout));
    return TPU_OK;
  }
  tpu_val_t idx = adv_index_values(cx, 1, &p);
  bool empty_dim = false;
  for (int j = 0; j < p.k; ++j) empty_dim |= xd[p.dims[j]] == 0;
  if (empty_dim) {  // every index is out of range: the assertion fails
    tpu_lower_out(cx, 0, tpu_ix_zeros(g, t, p.out, p.nout));
    return TPU_OK;
  }
  tpu_gather_dims_t dn;
  int64_t slice[TPU_MAX_RANK];
  adv_gather_dims(&p, rank, &dn, slice, xd);
  tpu_val_t r = tpu_ir_gather(g, x, idx, &dn, slice);
  tpu_lower_out(cx, 0, tpu_ir_reshape(g, r, p.out, p.nout));
  return TPU_OK;
}

static tpu_status_t value_shape_error(tpu_lower_ctx_t* cx, int varg, const int64_t* rs,
                                      int nrs) {
  char a[128], b[128];
  return TPU_LOWER_ERROR(TPU_CODE_INVALID_ARGUMENT,
                         "shape mismatch: value tensor of shape %s cannot be broadcast to "
                         "indexing result of shape %s",
                         tpu_shape_str(tpu_arg_sizes(cx, varg), tpu_arg_rank(cx, varg), a, sizeof a),
                         tpu_shape_str(rs, nrs, b, sizeof b));
}

// self with `v` (self's shape) written where the bool `m` (self's shape)
// holds: replaced, or added when accumulating.
static tpu_val_t put_where(tpu_graph_t* g, tpu_val_t x, tpu_val_t m, tpu_val_t v, tpu_dtype_t t,
                           const int64_t* d, int n, bool accumulate) {
  if (!accumulate) return tpu_ir_select(g, m, v, x);
  tpu_dtype_t ct = tpu_opmath(t);
  tpu_val_t sum = t == TPU_BOOL ? tpu_ir_binary(g, TPU_IR_OR, x, v)
                                : tpu_ir_convert(g, tpu_ir_binary(g, TPU_IR_ADD,
                                                                  tpu_ir_convert(g, x, ct),
                                                                  tpu_ir_convert(g, v, ct)), t);
  return tpu_ir_select(g, m, sum, x);
}

// index_put with one boolean mask as its only index tensor: the result keeps
// self's shape, so no host sync is needed. The mask covers self's dims
// [p, p + k); values broadcast to [self before p, count, self after].
static tpu_status_t index_put_mask(tpu_lower_ctx_t* cx, int p, bool accumulate) {
  tpu_graph_t* g = cx->g;
  const tpu_view_t* mv = tpu_arg_tensor_at(cx, 1, p);
  int rank = tpu_arg_rank(cx, 0), k = mv->rank;
  const int64_t* xd = tpu_arg_sizes(cx, 0);
  tpu_dtype_t t = tpu_arg_value_dtype(cx, 0);
  if (p + k > rank)
    return TPU_LOWER_ERROR(TPU_CODE_OUT_OF_RANGE,
                           "too many indices for tensor of dimension %d (got %d)", rank, p + k);
  for (int j = 0; j < k; ++j)
    if (mv->sizes[j] != xd[p + j]) {
      char a[128], b[128];
      return TPU_LOWER_ERROR(TPU_CODE_OUT_OF_RANGE,
                             "The shape of the mask %s at index %d does not match the shape of "
                             "the indexed tensor %s at index %d",
                             tpu_shape_str(mv->sizes, k, a, sizeof a), j,
                             tpu_shape_str(xd, rank, b, sizeof b), p + j);
    }
  // The indexing result's shape with the mask's count as -1 (unknown).
  int64_t rs[TPU_MAX_RANK];
  int nrs = 0;
  for (int i = 0; i < p; ++i) rs[nrs++] = xd[i];
  rs[nrs++] = -1;
  for (int i = p + k; i < rank; ++i) rs[nrs++] = xd[i];
  int nv = tpu_arg_rank(cx, 2);
  const int64_t* vd = tpu_arg_sizes(cx, 2);
  if (nv > nrs) return value_shape_error(cx, 2, rs, nrs);
  int64_t vr[TPU_MAX_RANK];  // values' shape aligned to rs
  for (int i = 0; i < nrs; ++i) {
    int j = i - (nrs - nv);
    vr[i] = j >= 0 ? vd[j] : 1;
    if (i != p && vr[i] != 1 && vr[i] != rs[i]) return value_shape_error(cx, 2, rs, nrs);
  }
  tpu_val_t x = tpu_lower_tensor(cx, 0);
  int64_t len = tpu_numel(xd, rank);
  if (len == 0) {
    tpu_lower_out(cx, 0, x);
    return TPU_OK;
  }
  tpu_val_t mask = tpu_ir_convert(g, tpu_lower_tensor_at(cx, 1, p), TPU_BOOL);
  tpu_val_t vals = tpu_ir_reshape(g, tpu_lower_tensor(cx, 2), vr, nrs);
  int64_t mb[TPU_MAX_RANK];  // mask dims at their place in self
  for (int j = 0; j < k; ++j) mb[j] = p + j;
  tpu_val_t m = tpu_ir_broadcast(g, mask, xd, rank, mb);
  tpu_val_t v;
  if (vr[p] == 1) {
    // One value per position outside the mask: spread over the mask's dims.
    int64_t vs[TPU_MAX_RANK];
    int nvs = 0;
    for (int i = 0; i < p; ++i) vs[nvs++] = vr[i];
    for (int j = 0; j < k; ++j) vs[nvs++] = 1;
    for (int i = p + 1; i < nrs; ++i) vs[nvs++] = vr[i];
    v = tpu_lower_expand(cx, tpu_ir_reshape(g, vals, vs, nvs), xd, rank);
  } else {
    // The i-th true element of the mask takes value i along the count dim;
    // the count must be exactly that dim's size.
    int64_t c = vr[p], mn = tpu_numel(mv->sizes, k);
    tpu_val_t mf = tpu_ir_reshape(g, mask, &mn, 1);
    tpu_lower_assert(cx,
                     tpu_ir_compare(g, TPU_CMP_NE, tpu_ix_count_true(g, mf, 1),
                                    tpu_ir_const_i(g, TPU_I64, c, NULL, 0)),
                     TPU_CODE_INVALID_ARGUMENT,
                     "shape mismatch: value tensor of shape %s cannot be broadcast to indexing "
                     "result (the mask has a different number of true elements)",
                     tpu_shape_str(vd, nv, (char[128]){0}, 128));
    if (c == 0) {  // no values, so no true element either (checked above)
      tpu_lower_out(cx, 0, x);
      return TPU_OK;
    }
    tpu_dtype_t ct = tpu_ix_count_dtype(mn + 1);
    tpu_val_t rank_m = tpu_ix_prefix_sum(g, tpu_ir_convert(g, mf, ct), mn, ct);
    rank_m = tpu_ir_binary(g, TPU_IR_SUB, rank_m, tpu_ir_const(g, ct, 1, &mn, 1));
    rank_m = tpu_ir_clamp(g, tpu_ir_const(g, ct, 0, NULL, 0), rank_m,
                          tpu_ir_const(g, ct, (double)(c - 1), NULL, 0));
    rank_m = tpu_ir_reshape(g, tpu_ir_convert(g, rank_m, TPU_I64), mv->sizes, k);
    int64_t full[TPU_MAX_RANK];  // values broadcast to rs with count c
    memcpy(full, rs, sizeof(int64_t) * (size_t)nrs);
    full[p] = c;
    tpu_val_t vf = tpu_lower_expand(cx, vals, full, nrs);
    tpu_gather_dims_t dn;
    memset(&dn, 0, sizeof dn);
    for (int i = 0; i < rank; ++i)
      if (i < p || i >= p + k) dn.offset_dims[dn.n_offset++] = i;
    dn.n_collapsed = dn.n_start_map = 1;
    dn.collapsed_slice_dims[0] = dn.start_index_map[0] = p;
    dn.index_vector_dim = k;
    int64_t slice[TPU_MAX_RANK];
    memcpy(slice, full, sizeof(int64_t) * (size_t)nrs);
    slice[p] = 1;
    v = tpu_ir_gather(g, vf, rank_m, &dn, slice);
  }
  tpu_lower_out(cx, 0, put_where(g, x, m, tpu_ir_convert(g, v, t), t, xd, rank, accumulate));
  return TPU_OK;
}

// index_put(Tensor self, Tensor?[] indices, Tensor values, bool accumulate=False)
// (also _index_put_impl_'s leading arguments): integer index tensors, or one
// boolean mask alone (the binding turns other masks into integer indices).
tpu_status_t tpu_lower_index_put(tpu_lower_ctx_t* cx) {
  tpu_graph_t* g = cx->g;
  tpu_dtype_t t = tpu_arg_value_dtype(cx, 0);
  if (tpu_arg_value_dtype(cx, 2) != t)
    return TPU_LOWER_ERROR(TPU_CODE_INVALID_ARGUMENT,
                           "Index put requires the source and destination dtypes match, got %s "
                           "for the destination and %s for the source.",
                           tpu_dtype_torch_name(t),
                           tpu_dtype_torch_name(tpu_arg_value_dtype(cx, 2)));
  bool accumulate = tpu_arg_bool(cx, 3, false);
  int count = tpu_arg_count(cx, 1), masks = 0, tensors = 0, mask_at = -1;
  for (int i = 0; i < count; ++i) {
    const tpu_view_t* v = tpu_arg_tensor_at(cx, 1, i);
    if (!v) continue;
    ++tensors;
    if (v->dtype == TPU_BOOL || v->dtype == TPU_U8) {
      ++masks;
      mask_at = i;
    }
  }
  if (masks == 1 && tensors == 1) return index_put_mask(cx, mask_at, accumulate);
  if (masks)
    return TPU_LOWER_ERROR(TPU_CODE_INTERNAL,
                           "index_put: boolean masks must be converted to indices first");
  adv_index_t p;
  TPU_RETURN_IF_ERROR(adv_index_plan(cx, 1, &p));
  int rank = tpu_arg_rank(cx, 0);
  const int64_t* xd = tpu_arg_sizes(cx, 0);
  // values must broadcast to the indexing result.
  int64_t bs[TPU_MAX_RANK];
  int nbs;
  tpu_status_t s = tpu_broadcast_shapes(p.out, p.nout, tpu_arg_sizes(cx, 2), tpu_arg_rank(cx, 2),
                                        bs, &nbs);
  bool ok = !s && nbs == p.nout;
  tpu_status_free(s);
  for (int i = 0; ok && i < nbs; ++i) ok = bs[i] == p.out[i];
  if (!ok) return value_shape_error(cx, 2, p.out, p.nout);
  tpu_val_t x = tpu_lower_tensor(cx, 0);
  if (p.k == 0) {
    // No index tensor: the values are written to (or added to) all of self.
    tpu_val_t v = tpu_lower_expand(cx, tpu_lower_tensor(cx, 2), xd, rank);
    tpu_val_t all = tpu_ir_const_i(g, TPU_BOOL, 1, xd, rank);
    tpu_lower_out(cx, 0, put_where(g, x, all, v, t, xd, rank, accumulate));
    return TPU_OK;
  }
  if (tpu_numel(p.out, p.nout) == 0) {
    tpu_lower_out(cx, 0, x);
    return TPU_OK;
  }
  tpu_val_t idx = adv_index_values(cx, 1, &p);
  if (tpu_numel(xd, rank) == 0) {
    tpu_lower_out(cx, 0, x);
    return TPU_OK;
  }
  int64_t cd[TPU_MAX_RANK];
  int ncd = adv_collapsed_shape(&p, rank, xd, cd);
  tpu_val_t upd = tpu_lower_expand(cx, tpu_lower_tensor(cx, 2), p.out, p.nout);
  upd = tpu_ir_reshape(g, upd, cd, ncd);
  tpu_gather_dims_t gd;
  int64_t slice[TPU_MAX_RANK];
  adv_gather_dims(&p, rank, &gd, slice, xd);
  tpu_scatter_dims_t dn;
  memset(&dn, 0, sizeof dn);
  dn.n_update_window = gd.n_offset;
  memcpy(dn.update_window_dims, gd.offset_dims, sizeof gd.offset_dims);
  dn.n_inserted = dn.n_to_operand = p.k;
  for (int j = 0; j < p.k; ++j)
    dn.inserted_window_dims[j] = dn.scatter_dims_to_operand_dims[j] = p.dims[j];
  dn.index_vector_dim = 1;
  if (accumulate && t != tpu_opmath(t)) {
    // Half precision accumulates in float, rounded once.
    tpu_dtype_t ct = tpu_opmath(t);
    tpu_val_t r = tpu_ir_scatter(g, tpu_ir_convert(g, x, ct), idx, tpu_ir_convert(g, upd, ct),
                                 &dn, TPU_BODY_ADD);
    tpu_lower_out(cx, 0, tpu_ir_convert(g, r, t));
    return TPU_OK;
  }
  tpu_lower_out(cx, 0, tpu_ir_scatter(g, x, idx, upd, &dn,
                                      accumulate ? TPU_BODY_ADD : TPU_BODY_REPLACE));
  return TPU_OK;
}
