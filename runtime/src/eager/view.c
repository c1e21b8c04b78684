// Reading and writing a strided view of a flat array, as IR.
//
// Most views PyTorch makes (contiguous, transposed, narrowed, stepped,
// expanded) are a box of a dense reshaping of the flat array: sort the dims
// by stride; if each stride divides the previous one, the array reshaped to
// (.., s0/s1, s1/s2, .., s_last) holds the view as a plain slice. Reads are
// then reshape + slice + transpose + broadcast, and writes a
// dynamic_update_slice, all of which XLA turns into address arithmetic.
// Anything else (overlapping or irregular strides) uses gather / scatter with
// computed element indices.
#include <string.h>

#include "eager/eager.h"

int64_t tpu_view_numel(const tpu_view_t* v) {
  int64_t n = 1;
  for (int i = 0; i < v->rank; ++i) n *= v->sizes[i];
  return n;
}

tpu_view_t tpu_view_contiguous(tpu_slot_t* slot, tpu_dtype_t dtype,
                               const int64_t* sizes, int rank) {
  tpu_view_t v;
  memset(&v, 0, sizeof v);
  v.slot = slot;
  v.dtype = dtype;
  v.rank = rank;
  int64_t stride = 1;
  for (int i = rank - 1; i >= 0; --i) {
    v.sizes[i] = sizes[i];
    v.strides[i] = stride;
    stride *= sizes[i] > 1 ? sizes[i] : 1;
  }
  return v;
}

bool tpu_view_is_contiguous(const tpu_view_t* v) {
  int64_t expected = 1;
  for (int i = v->rank - 1; i >= 0; --i) {
    if (v->sizes[i] == 0) return true;
    if (v->sizes[i] == 1) continue;
    if (v->strides[i] != expected) return false;
    expected *= v->sizes[i];
  }
  return true;
}

bool tpu_view_is_whole(const tpu_view_t* v) {
  return v->offset == 0 && tpu_view_is_contiguous(v) &&
         (size_t)tpu_view_numel(v) * tpu_dtype_size(v->dtype) == v->slot->nbytes;
}

// The box plan of a view over a flat array of n elements.
typedef struct box_plan {
  int k;                        // dims with size > 1 and stride > 0
  int order[TPU_MAX_RANK];      // those dims, by decreasing stride
  int rank_e;                   // rank of the dense reshaping
  int64_t e[TPU_MAX_RANK + 1];  // its shape
  int64_t start[TPU_MAX_RANK + 1], limit[TPU_MAX_RANK + 1];
  int64_t padded;               // elements of the dense array (>= n)
  bool broadcast;               // some dim has stride 0 and size > 1
} box_plan_t;

static bool make_plan(const tpu_view_t* v, int64_t n, box_plan_t* p) {
  memset(p, 0, sizeof *p);
  for (int i = 0; i < v->rank; ++i) {
    if (v->sizes[i] <= 1) continue;
    if (v->strides[i] == 0) {
      p->broadcast = true;
      continue;
    }
    if (v->strides[i] < 0) return false;
    // insertion sort by decreasing stride
    int j = p->k++;
    while (j > 0 && v->strides[p->order[j - 1]] < v->strides[i]) {
      p->order[j] = p->order[j - 1];
      --j;
    }
    p->order[j] = i;
  }
  if (v->offset < 0) return false;
  if (p->k == 0) {  // a single element
    p->rank_e = 1;
    p->e[0] = n;
    p->padded = n;
    p->start[0] = v->offset;
    p->limit[0] = v->offset + 1;
    return v->offset < n;
  }
  int64_t s_last = v->strides[p->order[p->k - 1]];
  // The dense shape has a dim more than the strided ones where the last
  // stride is not 1: past TPU_MAX_RANK (a rank-8 view with a step) the view
  // is gathered instead.
  if (p->k + (s_last > 1) > TPU_MAX_RANK) return false;
  for (int i = 0; i + 1 < p->k; ++i) {
    int64_t a = v->strides[p->order[i]], b = v->strides[p->order[i + 1]];
    if (a == b || a % b) return false;
  }
  int64_t s0 = v->strides[p->order[0]];
  int64_t e0 = (n + s0 - 1) / s0;
  p->rank_e = 0;
  p->e[p->rank_e++] = e0 > 0 ? e0 : 1;
  for (int i = 0; i + 1 < p->k; ++i)
    p->e[p->rank_e++] = v->strides[p->order[i]] / v->strides[p->order[i + 1]];
  if (s_last > 1) p->e[p->rank_e++] = s_last;
  p->padded = p->e[0] * s0;
  // Decompose the offset in the mixed radix of the dense shape.
  int64_t rem = v->offset;
  for (int i = 0; i < p->k; ++i) {
    int64_t s = v->strides[p->order[i]];
    p->start[i] = rem / s;
    rem %= s;
    p->limit[i] = p->start[i] + v->sizes[p->order[i]];
    if (p->limit[i] > p->e[i]) return false;
  }
  if (s_last > 1) {
    p->start[p->k] = rem;
    p->limit[p->k] = rem + 1;
  } else if (rem) {
    return false;
  }
  return p->limit[0] * s0 <= p->padded;
}

static tpu_val_t pad_to(tpu_graph_t* g, tpu_val_t flat, int64_t n, int64_t padded) {
  if (padded == n) return flat;
  tpu_dtype_t t = tpu_ir_dtype(g, flat);
  tpu_val_t zero = tpu_ir_const(g, t, 0, NULL, 0);
  int64_t lo = 0, hi = padded - n;
  if (hi < 0) {
    int64_t start = 0;
    return tpu_ir_slice(g, flat, &start, &padded, NULL);
  }
  return tpu_ir_pad(g, flat, zero, &lo, &hi, NULL);
}

// Element indices (i64, shape = view sizes) of a view: scalar indices, for
// a gather or scatter with index_vector_dim = rank (no trailing size-1 dim,
// which a rank-8 view would not have room for).
static tpu_val_t element_indices(tpu_graph_t* g, const tpu_view_t* v) {
  tpu_val_t idx = tpu_ir_const_i(g, TPU_I64, v->offset, v->sizes, v->rank);
  for (int d = 0; d < v->rank; ++d) {
    if (v->sizes[d] <= 1 || v->strides[d] == 0) continue;
    tpu_val_t io = tpu_ir_iota(g, TPU_I64, v->sizes, v->rank, d);
    tpu_val_t st = tpu_ir_const_i(g, TPU_I64, v->strides[d], v->sizes, v->rank);
    idx = tpu_ir_binary(g, TPU_IR_ADD, idx, tpu_ir_binary(g, TPU_IR_MUL, io, st));
  }
  return idx;
}

tpu_val_t tpu_view_lower_read(tpu_graph_t* g, tpu_val_t flat,
                              const tpu_view_t* v, tpu_val_t offset) {
  if (!tpu_graph_ok(g)) return TPU_VAL_NONE;
  int64_t n = tpu_ir_dims(g, flat)[0];
  int64_t numel = tpu_view_numel(v);
  tpu_dtype_t dt = tpu_ir_dtype(g, flat);
  if (numel == 0) return tpu_ir_const(g, dt, 0, v->sizes, v->rank);
  if (tpu_view_is_contiguous(v) && v->offset + numel <= n) {
    int64_t start = v->offset, limit = v->offset + numel;
    tpu_val_t part = offset != TPU_VAL_NONE ? tpu_ir_dynamic_slice(g, flat, &offset, &numel)
                                            : tpu_ir_slice(g, flat, &start, &limit, NULL);
    return tpu_ir_reshape(g, part, v->sizes, v->rank);
  }
  box_plan_t p;
  if (!make_plan(v, n, &p)) {
    tpu_gather_dims_t dn;
    memset(&dn, 0, sizeof dn);
    dn.n_collapsed = dn.n_start_map = 1;
    dn.index_vector_dim = v->rank;
    int64_t one = 1;
    return tpu_ir_gather(g, flat, element_indices(g, v), &dn, &one);
  }
  tpu_val_t dense = tpu_ir_reshape(g, pad_to(g, flat, n, p.padded), p.e, p.rank_e);
  tpu_val_t box = tpu_ir_slice(g, dense, p.start, p.limit, NULL);
  // Drop the trailing size-1 dim: the box in stride order.
  int64_t sorted[TPU_MAX_RANK];
  for (int i = 0; i < p.k; ++i) sorted[i] = v->sizes[p.order[i]];
  box = tpu_ir_reshape(g, box, sorted, p.k);
  // Back to the view's order of those dims.
  int real[TPU_MAX_RANK], nreal = 0;
  for (int i = 0; i < v->rank; ++i)
    if (v->sizes[i] > 1 && v->strides[i] != 0) real[nreal++] = i;
  int64_t perm[TPU_MAX_RANK];
  for (int j = 0; j < nreal; ++j)
    for (int i = 0; i < p.k; ++i)
      if (p.order[i] == real[j]) perm[j] = i;
  box = tpu_ir_transpose(g, box, perm);
  // Size-1 and stride-0 dims come back through broadcast_in_dim.
  int64_t bdims[TPU_MAX_RANK];
  for (int j = 0; j < nreal; ++j) bdims[j] = real[j];
  return tpu_ir_broadcast(g, box, v->sizes, v->rank, bdims);
}

static tpu_val_t write_view(tpu_graph_t* g, tpu_val_t flat, const tpu_view_t* v,
                            tpu_val_t value, tpu_val_t offset) {
  int64_t n = tpu_ir_dims(g, flat)[0];
  int64_t numel = tpu_view_numel(v);
  if (tpu_view_is_contiguous(v) && v->offset + numel <= n) {
    tpu_val_t start = offset != TPU_VAL_NONE ? offset
                                             : tpu_ir_const_i(g, TPU_I64, v->offset, NULL, 0);
    return tpu_ir_dynamic_update_slice(g, flat, tpu_ir_reshape(g, value, &numel, 1),
                                       &start);
  }
  box_plan_t p;
  if (!make_plan(v, n, &p)) {
    tpu_scatter_dims_t dn;
    memset(&dn, 0, sizeof dn);
    dn.n_inserted = dn.n_to_operand = 1;
    dn.index_vector_dim = v->rank;
    return tpu_ir_scatter(g, flat, element_indices(g, v), value, &dn,
                          TPU_BODY_REPLACE);
  }
  if (p.broadcast && tpu_ir_is_uniform(g, value)) {
    // Every element the same (fill_, zero_): each aliased location gets it
    // once, well defined, as PyTorch allows. Write it through the view
    // without the stride-0 dims.
    tpu_view_t once = *v;
    int64_t zeros[TPU_MAX_RANK] = {0}, ones[TPU_MAX_RANK];
    for (int i = 0; i < v->rank; ++i) {
      ones[i] = 1;
      if (v->strides[i] == 0) once.sizes[i] = 1;
    }
    tpu_val_t one = tpu_ir_reshape(g, tpu_ir_slice(g, value, zeros, ones, NULL), NULL, 0);
    return write_view(g, flat, &once, tpu_ir_broadcast(g, one, once.sizes, once.rank, NULL),
                      TPU_VAL_NONE);
  }
  if (p.broadcast) {
    tpu_graph_fail(g, tpu_status_make(
                          TPU_CODE_INVALID_ARGUMENT,
                          "unsupported operation: more than one element of the "
                          "written-to tensor refers to a single memory "
                          "location. Please clone() the tensor before "
                          "performing the operation."));
    return TPU_VAL_NONE;
  }
  int real[TPU_MAX_RANK], nreal = 0;
  for (int i = 0; i < v->rank; ++i)
    if (v->sizes[i] > 1) real[nreal++] = i;
  int64_t real_sizes[TPU_MAX_RANK];
  for (int j = 0; j < nreal; ++j) real_sizes[j] = v->sizes[real[j]];
  tpu_val_t box = tpu_ir_reshape(g, value, real_sizes, nreal);
  int64_t perm[TPU_MAX_RANK];  // view order -> stride order
  for (int i = 0; i < p.k; ++i)
    for (int j = 0; j < nreal; ++j)
      if (real[j] == p.order[i]) perm[i] = j;
  box = tpu_ir_transpose(g, box, perm);
  int64_t box_dims[TPU_MAX_RANK + 1];
  for (int i = 0; i < p.rank_e; ++i) box_dims[i] = p.limit[i] - p.start[i];
  box = tpu_ir_reshape(g, box, box_dims, p.rank_e);
  tpu_val_t dense = tpu_ir_reshape(g, pad_to(g, flat, n, p.padded), p.e, p.rank_e);
  tpu_val_t starts[TPU_MAX_RANK + 1];
  for (int i = 0; i < p.rank_e; ++i)
    starts[i] = tpu_ir_const_i(g, TPU_I64, p.start[i], NULL, 0);
  dense = tpu_ir_dynamic_update_slice(g, dense, box, starts);
  tpu_val_t out = tpu_ir_reshape(g, dense, &p.padded, 1);
  return pad_to(g, out, p.padded, n);
}

tpu_val_t tpu_view_lower_write(tpu_graph_t* g, tpu_val_t flat,
                               const tpu_view_t* v, tpu_val_t value, tpu_val_t offset) {
  if (!tpu_graph_ok(g)) return TPU_VAL_NONE;
  int64_t n = tpu_ir_dims(g, flat)[0];
  int64_t numel = tpu_view_numel(v);
  if (numel == 0) return flat;
  if (tpu_view_is_contiguous(v) && v->offset == 0 && numel == n)
    return tpu_ir_reshape(g, value, &n, 1);
  // XLA's CPU compiler may update `flat` in place while the fused update
  // still reads it at other places, and so read values it already wrote
  // (v.copy_(v.flip(0)) in a fused graph). A value computed from `flat` is
  // written into zeros instead, and selected where the view lies. Only a
  // fused graph can hold such a value: one op reads the region it writes
  // only as that same view (PyTorch refuses partial overlap).
  if (tpu_mode_get() != TPU_MODE_FUSED || !tpu_graph_depends_on(g, value, flat))
    return write_view(g, flat, v, value, offset);
  tpu_val_t in_view = write_view(g, tpu_ir_const(g, TPU_BOOL, 0, &n, 1), v,
                                 tpu_ir_const(g, TPU_BOOL, 1, v->sizes, v->rank), offset);
  tpu_val_t placed = write_view(g, tpu_ir_const(g, tpu_ir_dtype(g, flat), 0, &n, 1), v, value,
                                offset);
  return tpu_ir_select(g, in_view, placed, flat);
}
