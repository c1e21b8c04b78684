// Builders: check operands, infer the result type, add the node.
#include <math.h>
#include <string.h>

#include "ir/ir_internal.h"

//===--- constants ---===//

static tpu_val_t add_const(tpu_graph_t* g, const const_attrs_t* a,
                           const int64_t* dims, int rank) {
  tpu_type_t t = tpu_type_make(a->dtype, dims, rank);
  return tpu_graph_add(g, TPU_IR_CONSTANT, NULL, 0, a, sizeof *a, &t);
}

// Dtypes without a literal form here (f16, bf16, f8) are made as f32 and
// converted, which is how PyTorch itself narrows a double scalar.
static tpu_val_t const_via(tpu_graph_t* g, tpu_dtype_t dtype, const_attrs_t* a,
                           const int64_t* dims, int rank) {
  if (dtype == TPU_F16 || dtype == TPU_BF16 || dtype == TPU_F8E4M3FN ||
      dtype == TPU_F8E5M2) {
    tpu_val_t f = add_const(g, a, dims, rank);
    return tpu_ir_convert(g, f, dtype);
  }
  return add_const(g, a, dims, rank);
}

tpu_val_t tpu_ir_const(tpu_graph_t* g, tpu_dtype_t dtype, double value,
                       const int64_t* dims, int rank) {
  const_attrs_t a;
  memset(&a, 0, sizeof a);
  switch (tpu_dtype_kind(dtype)) {
    case TPU_KIND_BOOL:
      a.dtype = dtype;
      a.bits = value != 0;
      break;
    case TPU_KIND_INT:
      a.dtype = dtype;
      a.bits = (uint64_t)(int64_t)value;
      break;
    case TPU_KIND_UINT:
      a.dtype = dtype;
      a.bits = (uint64_t)value;
      break;
    case TPU_KIND_COMPLEX:
      return tpu_ir_const_complex(g, dtype, value, 0, dims, rank);
    case TPU_KIND_FLOAT:
      if (dtype == TPU_F64) {
        a.dtype = TPU_F64;
        memcpy(&a.bits, &value, 8);
      } else {
        float f = (float)value;
        uint32_t b;
        memcpy(&b, &f, 4);
        a.dtype = TPU_F32;
        a.bits = b;
      }
      break;
  }
  return const_via(g, dtype, &a, dims, rank);
}

tpu_val_t tpu_ir_const_i(tpu_graph_t* g, tpu_dtype_t dtype, int64_t value,
                         const int64_t* dims, int rank) {
  if (!tpu_dtype_is_integral(dtype, true))
    return tpu_ir_const(g, dtype, (double)value, dims, rank);
  const_attrs_t a;
  memset(&a, 0, sizeof a);
  a.dtype = dtype;
  a.bits = dtype == TPU_BOOL ? (value != 0) : (uint64_t)value;
  return add_const(g, &a, dims, rank);
}

tpu_val_t tpu_ir_const_bits(tpu_graph_t* g, tpu_dtype_t dtype, uint64_t bits,
                            const int64_t* dims, int rank) {
  const_attrs_t a;
  memset(&a, 0, sizeof a);
  a.dtype = dtype;
  a.bits = bits;
  if (dtype == TPU_F16 || dtype == TPU_BF16) {
    // Widen the 16-bit pattern to f32 exactly, then narrow (exact again).
    uint32_t f;
    if (dtype == TPU_BF16) {
      f = (uint32_t)bits << 16;
    } else {
      uint32_t s = (uint32_t)(bits >> 15 & 1) << 31, e = bits >> 10 & 0x1f,
               m = bits & 0x3ff;
      if (e == 0x1f) f = s | 0x7f800000u | m << 13;
      else if (e) f = s | (e + 112) << 23 | m << 13;
      else if (!m) f = s;
      else {  // subnormal half: normalize
        int sh = 0;
        while (!(m & 0x400)) { m <<= 1; ++sh; }
        f = s | (uint32_t)(113 - sh) << 23 | (m & 0x3ff) << 13;
      }
    }
    a.dtype = TPU_F32;
    a.bits = f;
    return tpu_ir_convert(g, add_const(g, &a, dims, rank), dtype);
  }
  if (dtype == TPU_F8E4M3FN || dtype == TPU_F8E5M2)
    return FAIL(g, "bit-pattern constants of %s are not supported",
                tpu_dtype_name(dtype));
  return add_const(g, &a, dims, rank);
}

tpu_val_t tpu_ir_const_complex(tpu_graph_t* g, tpu_dtype_t dtype, double re,
                               double im, const int64_t* dims, int rank) {
  if (!tpu_dtype_is_complex(dtype)) return tpu_ir_const(g, dtype, re, dims, rank);
  const_attrs_t a;
  memset(&a, 0, sizeof a);
  a.dtype = dtype;
  memcpy(&a.bits, &re, 8);
  memcpy(&a.bits_im, &im, 8);
  return add_const(g, &a, dims, rank);
}

tpu_val_t tpu_ir_const_i64_array(tpu_graph_t* g, const int64_t* values,
                                 int64_t count) {
  size_t size = sizeof(const_attrs_t) + sizeof(int64_t) * (size_t)count;
  const_attrs_t* a = tpu_graph_alloc(g, size);
  if (!a) return FAIL(g, "out of memory");
  memset(a, 0, sizeof *a);
  a->dtype = TPU_I64;
  a->is_array = 1;
  a->count = count;
  memcpy(a->array, values, sizeof(int64_t) * (size_t)count);
  tpu_type_t t = tpu_type_make(TPU_I64, &count, 1);
  return tpu_graph_add(g, TPU_IR_CONSTANT, NULL, 0, a, size, &t);
}

tpu_val_t tpu_ir_iota(tpu_graph_t* g, tpu_dtype_t dtype, const int64_t* dims,
                      int rank, int dim) {
  if (dim < 0 || dim >= rank) return FAIL(g, "iota dimension %d of rank %d", dim, rank);
  dims_attrs_t a;
  memset(&a, 0, sizeof a);
  a.n = 1;
  a.v[0] = dim;
  tpu_type_t t = tpu_type_make(dtype, dims, rank);
  return tpu_graph_add(g, TPU_IR_IOTA, NULL, 0, &a, sizeof a, &t);
}

//===--- elementwise ---===//

tpu_val_t tpu_ir_unary(tpu_graph_t* g, tpu_ir_op_t op, tpu_val_t x) {
  if (!valid(g, x)) return TPU_VAL_NONE;
  tpu_type_t t = *type_of(g, x);
  if (op == TPU_IR_IS_FINITE) t.dtype = TPU_BOOL;
  if (op == TPU_IR_REAL || op == TPU_IR_IMAG || op == TPU_IR_ABS)  // |complex| is real
    t.dtype = t.dtype == TPU_C128 ? TPU_F64 : t.dtype == TPU_C64 ? TPU_F32 : t.dtype;
  return tpu_graph_add(g, op, &x, 1, NULL, 0, &t);
}

// XLA turns a division by a float constant into a product with its
// reciprocal, which rounds differently from the division PyTorch does unless
// the reciprocal is exact: a mean of seven 3.0s came out 3.0000002, and the
// variance of constant data was not 0. Such a divisor goes through an
// optimization barrier, after which it is no constant to XLA.
static tpu_val_t exact_divisor(tpu_graph_t* g, tpu_val_t b) {
  const tpu_node_t* n = &g->nodes[b];
  if (n->op != TPU_IR_CONSTANT) return b;
  const const_attrs_t* a = n->attrs;
  double v;
  if (a->is_array) return b;
  if (a->dtype == TPU_F64) {
    memcpy(&v, &a->bits, 8);
  } else if (a->dtype == TPU_F32) {
    float f;
    uint32_t bits = (uint32_t)a->bits;
    memcpy(&f, &bits, 4);
    v = f;
  } else {
    return b;
  }
  int e;
  if (!isfinite(v) || v == 0 || fabs(frexp(v, &e)) == 0.5) return b;  // a power of two: exact
  const_attrs_t attrs = *a;  // (adding nodes may move n and its attributes)
  tpu_type_t type = n->type;
  tpu_val_t scalar = add_const(g, &attrs, NULL, 0);
  return tpu_ir_broadcast(g, tpu_ir_barrier(g, scalar), type.dims, type.rank, NULL);
}

tpu_val_t tpu_ir_binary(tpu_graph_t* g, tpu_ir_op_t op, tpu_val_t a,
                        tpu_val_t b) {
  if (!valid(g, a) || !valid(g, b)) return TPU_VAL_NONE;
  if (op == TPU_IR_DIV) b = exact_divisor(g, b);
  const tpu_type_t *ta = type_of(g, a), *tb = type_of(g, b);
  if (!tpu_type_eq(ta, tb)) {
    char sa[128], sb[128];
    tpu_type_str(ta, sa, sizeof sa);
    tpu_type_str(tb, sb, sizeof sb);
    return FAIL(g, "%s: operand types differ: %s vs %s", tpu_ir_op_name(op), sa, sb);
  }
  tpu_type_t t = *ta;
  if (op == TPU_IR_COMPLEX) t.dtype = ta->dtype == TPU_F64 ? TPU_C128 : TPU_C64;
  tpu_val_t ops[2] = {a, b};
  return tpu_graph_add(g, op, ops, 2, NULL, 0, &t);
}

tpu_val_t tpu_ir_compare(tpu_graph_t* g, tpu_cmp_t cmp, tpu_val_t a,
                         tpu_val_t b) {
  if (!valid(g, a) || !valid(g, b)) return TPU_VAL_NONE;
  if (!tpu_type_eq(type_of(g, a), type_of(g, b)))
    return FAIL(g, "compare: operand types differ");
  dims_attrs_t at;
  memset(&at, 0, sizeof at);
  at.n = 1;
  at.v[0] = cmp;
  tpu_type_t t = *type_of(g, a);
  t.dtype = TPU_BOOL;
  tpu_val_t ops[2] = {a, b};
  return tpu_graph_add(g, TPU_IR_COMPARE, ops, 2, &at, sizeof at, &t);
}

tpu_val_t tpu_ir_select(tpu_graph_t* g, tpu_val_t p, tpu_val_t a, tpu_val_t b) {
  if (!valid(g, p) || !valid(g, a) || !valid(g, b)) return TPU_VAL_NONE;
  const tpu_type_t* tp = type_of(g, p);
  if (!tpu_type_eq(type_of(g, a), type_of(g, b)) || tp->dtype != TPU_BOOL ||
      (tp->rank != 0 && tp->rank != type_of(g, a)->rank))
    return FAIL(g, "select: bad operand types");
  tpu_val_t ops[3] = {p, a, b};
  return tpu_graph_add(g, TPU_IR_SELECT, ops, 3, NULL, 0, type_of(g, a));
}

tpu_val_t tpu_ir_clamp(tpu_graph_t* g, tpu_val_t lo, tpu_val_t x, tpu_val_t hi) {
  if (!valid(g, lo) || !valid(g, x) || !valid(g, hi)) return TPU_VAL_NONE;
  tpu_val_t ops[3] = {lo, x, hi};
  return tpu_graph_add(g, TPU_IR_CLAMP, ops, 3, NULL, 0, type_of(g, x));
}

tpu_val_t tpu_ir_convert(tpu_graph_t* g, tpu_val_t x, tpu_dtype_t dtype) {
  if (!valid(g, x)) return TPU_VAL_NONE;
  if (type_of(g, x)->dtype == dtype) return x;
  tpu_type_t t = *type_of(g, x);
  t.dtype = dtype;
  // A bool as a float is a select: XLA rewrites a product with a converted
  // bool into a select, which loses IEEE's NaN * 0 = NaN (a mask times a
  // tensor with a NaN or inf hid it).
  bool to_float = tpu_dtype_is_float(dtype) || tpu_dtype_is_complex(dtype);
  tpu_dtype_t from = type_of(g, x)->dtype;
  if (from == TPU_BOOL && to_float)
    return tpu_ir_select(g, x, tpu_ir_const(g, dtype, 1.0, t.dims, t.rank),
                         tpu_ir_const(g, dtype, 0.0, t.dims, t.rank));
  // PyTorch converts a float to uint8 through int64, so that CPU and CUDA
  // agree (-1.0 -> 255, 300.7 -> 44); XLA's conversion would saturate.
  if (dtype == TPU_U8 && tpu_dtype_is_float(from)) x = tpu_ir_convert(g, x, TPU_I64);
  // CPU and CUDA round a double to half through float (c10::Half(float)).
  if (dtype == TPU_F16 && from == TPU_F64) x = tpu_ir_convert(g, x, TPU_F32);
  return tpu_graph_add(g, TPU_IR_CONVERT, &x, 1, NULL, 0, &t);
}

tpu_val_t tpu_ir_bitcast(tpu_graph_t* g, tpu_val_t x, const tpu_type_t* type) {
  if (!valid(g, x)) return TPU_VAL_NONE;
  if (tpu_type_eq(type_of(g, x), type)) return x;
  return tpu_graph_add(g, TPU_IR_BITCAST, &x, 1, NULL, 0, type);
}

//===--- shape ---===//

tpu_val_t tpu_ir_reshape(tpu_graph_t* g, tpu_val_t x, const int64_t* dims,
                         int rank) {
  if (!valid(g, x)) return TPU_VAL_NONE;
  tpu_type_t t = tpu_type_make(type_of(g, x)->dtype, dims, rank);
  if (tpu_type_numel(&t) != tpu_type_numel(type_of(g, x)))
    return FAIL(g, "reshape: element count changes");
  if (tpu_type_eq(&t, type_of(g, x))) return x;
  return tpu_graph_add(g, TPU_IR_RESHAPE, &x, 1, NULL, 0, &t);
}

tpu_val_t tpu_ir_transpose(tpu_graph_t* g, tpu_val_t x, const int64_t* perm) {
  if (!valid(g, x)) return TPU_VAL_NONE;
  const tpu_type_t* tx = type_of(g, x);
  dims_attrs_t a;
  memset(&a, 0, sizeof a);
  a.n = tx->rank;
  tpu_type_t t = *tx;
  bool identity = true, seen[TPU_MAX_RANK] = {0};
  for (int i = 0; i < tx->rank; ++i) {
    if (perm[i] < 0 || perm[i] >= tx->rank || seen[perm[i]])
      return FAIL(g, "transpose: bad permutation");
    seen[perm[i]] = true;
    a.v[i] = perm[i];
    t.dims[i] = tx->dims[perm[i]];
    identity &= perm[i] == i;
  }
  if (identity) return x;
  const tpu_node_t* inner = &g->nodes[x];
  if (inner->op == TPU_IR_TRANSPOSE) {  // transpose(transpose(y)): one permutation
    const dims_attrs_t* ia = inner->attrs;
    int64_t composed[TPU_MAX_RANK];
    for (int i = 0; i < tx->rank; ++i) composed[i] = ia->v[perm[i]];
    return tpu_ir_transpose(g, inner->operands[0], composed);
  }
  return tpu_graph_add(g, TPU_IR_TRANSPOSE, &x, 1, &a, sizeof a, &t);
}

tpu_val_t tpu_ir_broadcast(tpu_graph_t* g, tpu_val_t x, const int64_t* dims,
                           int rank, const int64_t* bdims) {
  if (!valid(g, x)) return TPU_VAL_NONE;
  const tpu_type_t* tx = type_of(g, x);
  dims_attrs_t a;
  memset(&a, 0, sizeof a);
  a.n = tx->rank;
  for (int i = 0; i < tx->rank; ++i) {
    if (bdims[i] < 0 || bdims[i] >= rank ||
        (tx->dims[i] != 1 && tx->dims[i] != dims[bdims[i]]))
      return FAIL(g, "broadcast: operand dim %d (size %lld) does not fit", i,
                  (long long)tx->dims[i]);
    a.v[i] = bdims[i];
  }
  tpu_type_t t = tpu_type_make(tx->dtype, dims, rank);
  if (tpu_type_eq(&t, tx)) {
    bool identity = true;
    for (int i = 0; i < rank; ++i) identity &= bdims[i] == i;
    if (identity) return x;
  }
  return tpu_graph_add(g, TPU_IR_BROADCAST, &x, 1, &a, sizeof a, &t);
}

tpu_val_t tpu_ir_slice(tpu_graph_t* g, tpu_val_t x, const int64_t* start,
                       const int64_t* limit, const int64_t* strides) {
  if (!valid(g, x)) return TPU_VAL_NONE;
  const tpu_type_t* tx = type_of(g, x);
  slice_attrs_t a;
  memset(&a, 0, sizeof a);
  tpu_type_t t = *tx;
  bool identity = true;
  for (int i = 0; i < tx->rank; ++i) {
    int64_t st = strides ? strides[i] : 1;
    if (start[i] < 0 || limit[i] < start[i] || limit[i] > tx->dims[i] || st < 1)
      return FAIL(g, "slice: bad bounds [%lld, %lld) of %lld in dim %d",
                  (long long)start[i], (long long)limit[i],
                  (long long)tx->dims[i], i);
    a.start[i] = start[i];
    a.limit[i] = limit[i];
    a.strides[i] = st;
    t.dims[i] = (limit[i] - start[i] + st - 1) / st;
    identity &= start[i] == 0 && limit[i] == tx->dims[i] && st == 1;
  }
  if (identity) return x;
  return tpu_graph_add(g, TPU_IR_SLICE, &x, 1, &a, sizeof a, &t);
}

tpu_val_t tpu_ir_dynamic_slice(tpu_graph_t* g, tpu_val_t x,
                               const tpu_val_t* starts, const int64_t* sizes) {
  if (!valid(g, x)) return TPU_VAL_NONE;
  const tpu_type_t* tx = type_of(g, x);
  tpu_val_t ops[1 + TPU_MAX_RANK];
  ops[0] = x;
  dims_attrs_t a;
  memset(&a, 0, sizeof a);
  a.n = tx->rank;
  tpu_type_t t = *tx;
  for (int i = 0; i < tx->rank; ++i) {
    if (!valid(g, starts[i]) || type_of(g, starts[i])->rank != 0)
      return FAIL(g, "dynamic_slice: start %d is not a scalar", i);
    if (sizes[i] < 0 || sizes[i] > tx->dims[i])
      return FAIL(g, "dynamic_slice: size %lld > %lld", (long long)sizes[i],
                  (long long)tx->dims[i]);
    ops[1 + i] = starts[i];
    a.v[i] = sizes[i];
    t.dims[i] = sizes[i];
  }
  return tpu_graph_add(g, TPU_IR_DYNAMIC_SLICE, ops, 1 + tx->rank, &a, sizeof a, &t);
}

tpu_val_t tpu_ir_dynamic_update_slice(tpu_graph_t* g, tpu_val_t x,
                                      tpu_val_t u, const tpu_val_t* starts) {
  if (!valid(g, x) || !valid(g, u)) return TPU_VAL_NONE;
  const tpu_type_t *tx = type_of(g, x), *tu = type_of(g, u);
  if (tx->rank != tu->rank || tx->dtype != tu->dtype)
    return FAIL(g, "dynamic_update_slice: update type differs");
  tpu_val_t ops[2 + TPU_MAX_RANK] = {x, u};
  for (int i = 0; i < tx->rank; ++i) {
    if (!valid(g, starts[i])) return TPU_VAL_NONE;
    if (tu->dims[i] > tx->dims[i]) return FAIL(g, "dynamic_update_slice: update too big");
    ops[2 + i] = starts[i];
  }
  // An update as large as the operand replaces it (the starts clamp to 0).
  // Writing a whole clone thus yields its source's value, so the in-place
  // hazard checks of fused mode see through it (tpu_graph_depends_on).
  if (tpu_type_eq(tx, tu)) return u;
  return tpu_graph_add(g, TPU_IR_DYNAMIC_UPDATE_SLICE, ops, 2 + tx->rank, NULL, 0, tx);
}

tpu_val_t tpu_ir_concat(tpu_graph_t* g, const tpu_val_t* xs, int n, int dim) {
  if (n < 1) return FAIL(g, "concatenate of nothing");
  if (n == 1) return xs[0];
  if (!valid(g, xs[0])) return TPU_VAL_NONE;
  tpu_type_t t = *type_of(g, xs[0]);
  if (dim < 0 || dim >= t.rank) return FAIL(g, "concatenate: bad dim %d", dim);
  for (int i = 1; i < n; ++i) {
    if (!valid(g, xs[i])) return TPU_VAL_NONE;
    const tpu_type_t* ti = type_of(g, xs[i]);
    if (ti->rank != t.rank || ti->dtype != t.dtype)
      return FAIL(g, "concatenate: operand %d type differs", i);
    for (int d = 0; d < t.rank; ++d)
      if (d != dim && ti->dims[d] != t.dims[d])
        return FAIL(g, "concatenate: operand %d size differs in dim %d", i, d);
    t.dims[dim] += ti->dims[dim];
  }
  dims_attrs_t a;
  memset(&a, 0, sizeof a);
  a.n = 1;
  a.v[0] = dim;
  return tpu_graph_add(g, TPU_IR_CONCAT, xs, n, &a, sizeof a, &t);
}

tpu_val_t tpu_ir_pad(tpu_graph_t* g, tpu_val_t x, tpu_val_t pv,
                     const int64_t* lo, const int64_t* hi,
                     const int64_t* interior) {
  if (!valid(g, x) || !valid(g, pv)) return TPU_VAL_NONE;
  const tpu_type_t* tx = type_of(g, x);
  slice_attrs_t a;
  memset(&a, 0, sizeof a);
  tpu_type_t t = *tx;
  bool identity = true;
  for (int i = 0; i < tx->rank; ++i) {
    int64_t in = interior ? interior[i] : 0;
    if (in < 0) return FAIL(g, "pad: negative interior padding");
    a.start[i] = lo[i];
    a.limit[i] = hi[i];
    a.strides[i] = in;
    t.dims[i] = lo[i] + hi[i] + tx->dims[i] + (tx->dims[i] > 0 ? (tx->dims[i] - 1) * in : 0);
    if (t.dims[i] < 0) return FAIL(g, "pad: negative result size");
    identity &= lo[i] == 0 && hi[i] == 0 && in == 0;
  }
  if (identity) return x;
  tpu_val_t ops[2] = {x, pv};
  return tpu_graph_add(g, TPU_IR_PAD, ops, 2, &a, sizeof a, &t);
}

tpu_val_t tpu_ir_reverse(tpu_graph_t* g, tpu_val_t x, const int64_t* dims,
                         int n) {
  if (!valid(g, x)) return TPU_VAL_NONE;
  if (n == 0) return x;
  dims_attrs_t a;
  memset(&a, 0, sizeof a);
  a.n = n;
  memcpy(a.v, dims, sizeof(int64_t) * (size_t)n);
  return tpu_graph_add(g, TPU_IR_REVERSE, &x, 1, &a, sizeof a, type_of(g, x));
}

tpu_val_t tpu_ir_gather(tpu_graph_t* g, tpu_val_t operand, tpu_val_t indices,
                        const tpu_gather_dims_t* dn,
                        const int64_t* slice_sizes) {
  if (!valid(g, operand) || !valid(g, indices)) return TPU_VAL_NONE;
  const tpu_type_t *to = type_of(g, operand), *ti = type_of(g, indices);
  gather_attrs_t a;
  memset(&a, 0, sizeof a);
  a.dn = *dn;
  memcpy(a.slice_sizes, slice_sizes, sizeof(int64_t) * (size_t)to->rank);
  // Result: batch dims of indices (all but index_vector_dim) interleaved
  // with the offset dims (slice dims not collapsed or batching).
  int64_t batch[TPU_MAX_RANK + 1];
  int nb = 0;
  for (int i = 0; i < ti->rank; ++i)
    if (i != dn->index_vector_dim) batch[nb++] = ti->dims[i];
  int64_t offs[TPU_MAX_RANK];
  int no = 0;
  for (int i = 0; i < to->rank; ++i) {
    bool skip = false;
    for (int j = 0; j < dn->n_collapsed; ++j) skip |= dn->collapsed_slice_dims[j] == i;
    for (int j = 0; j < dn->n_operand_batch; ++j) skip |= dn->operand_batching_dims[j] == i;
    if (!skip) offs[no++] = slice_sizes[i];
  }
  if (no != dn->n_offset) return FAIL(g, "gather: offset_dims count mismatch");
  int rank = nb + no;
  if (rank > TPU_MAX_RANK) return FAIL(g, "gather: result rank too large");
  tpu_type_t t = tpu_type_make(to->dtype, NULL, 0);
  t.rank = rank;
  int bi = 0, oi = 0;
  for (int d = 0; d < rank; ++d) {
    bool is_off = false;
    for (int j = 0; j < dn->n_offset; ++j) is_off |= dn->offset_dims[j] == d;
    t.dims[d] = is_off ? offs[oi++] : batch[bi++];
  }
  // XLA refuses a slice larger than the operand, which only an empty
  // operand has (a margin loss's empty batch gathers [0] at no indices);
  // every index into it is out of range, which lowerings check themselves,
  // so the result is zeros.
  for (int i = 0; i < to->rank; ++i)
    if (slice_sizes[i] > to->dims[i]) return tpu_ir_const(g, to->dtype, 0, t.dims, t.rank);
  tpu_val_t ops[2] = {operand, indices};
  return tpu_graph_add(g, TPU_IR_GATHER, ops, 2, &a, sizeof a, &t);
}

tpu_val_t tpu_ir_scatter(tpu_graph_t* g, tpu_val_t operand, tpu_val_t indices,
                         tpu_val_t updates, const tpu_scatter_dims_t* dn,
                         tpu_body_t body) {
  if (!valid(g, operand) || !valid(g, indices) || !valid(g, updates))
    return TPU_VAL_NONE;
  if (type_of(g, updates)->dtype != type_of(g, operand)->dtype)
    return FAIL(g, "scatter: update dtype differs");
  scatter_attrs_t a;
  memset(&a, 0, sizeof a);
  a.dn = *dn;
  a.body = body;
  tpu_val_t ops[3] = {operand, indices, updates};
  return tpu_graph_add(g, TPU_IR_SCATTER, ops, 3, &a, sizeof a, type_of(g, operand));
}

//===--- products, convolutions, sorting, random bits ---===//

tpu_val_t tpu_ir_dot(tpu_graph_t* g, tpu_val_t lhs, tpu_val_t rhs,
                     const tpu_dot_dims_t* dn, tpu_dtype_t out) {
  if (!valid(g, lhs) || !valid(g, rhs)) return TPU_VAL_NONE;
  const tpu_type_t *tl = type_of(g, lhs), *tr = type_of(g, rhs);
  tpu_dot_dims_t d;
  memset(&d, 0, sizeof d);
  d.n_batch = dn->n_batch;
  d.n_contract = dn->n_contract;
  bool used_l[TPU_MAX_RANK] = {0}, used_r[TPU_MAX_RANK] = {0};
  tpu_type_t t = tpu_type_make(out, NULL, 0);
  for (int i = 0; i < dn->n_batch; ++i) {
    d.lhs_batch[i] = dn->lhs_batch[i];
    d.rhs_batch[i] = dn->rhs_batch[i];
    if (tl->dims[d.lhs_batch[i]] != tr->dims[d.rhs_batch[i]])
      return FAIL(g, "dot: batch sizes differ (%lld vs %lld)",
                  (long long)tl->dims[d.lhs_batch[i]], (long long)tr->dims[d.rhs_batch[i]]);
    used_l[d.lhs_batch[i]] = used_r[d.rhs_batch[i]] = true;
    t.dims[t.rank++] = tl->dims[d.lhs_batch[i]];
  }
  for (int i = 0; i < dn->n_contract; ++i) {
    d.lhs_contract[i] = dn->lhs_contract[i];
    d.rhs_contract[i] = dn->rhs_contract[i];
    if (tl->dims[d.lhs_contract[i]] != tr->dims[d.rhs_contract[i]])
      return FAIL(g, "dot: contracting sizes differ (%lld vs %lld)",
                  (long long)tl->dims[d.lhs_contract[i]],
                  (long long)tr->dims[d.rhs_contract[i]]);
    used_l[d.lhs_contract[i]] = used_r[d.rhs_contract[i]] = true;
  }
  for (int i = 0; i < tl->rank; ++i) if (!used_l[i]) t.dims[t.rank++] = tl->dims[i];
  for (int i = 0; i < tr->rank; ++i) if (!used_r[i]) t.dims[t.rank++] = tr->dims[i];
  if (tl->dtype != tr->dtype) return FAIL(g, "dot: operand dtypes differ");
  d.precision = tpu_graph_precision_attr(g, tl->dtype);
  tpu_val_t ops[2] = {lhs, rhs};
  return tpu_graph_add(g, TPU_IR_DOT, ops, 2, &d, sizeof d, &t);
}

void tpu_conv_attrs_default(tpu_conv_attrs_t* a, int spatial) {
  memset(a, 0, sizeof *a);
  a->spatial = spatial;
  for (int i = 0; i < 3; ++i) {
    a->strides[i] = a->lhs_dilation[i] = a->rhs_dilation[i] = 1;
    a->in_spatial[i] = a->k_spatial[i] = a->out_spatial[i] = 2 + i;
  }
  a->feature_groups = a->batch_groups = 1;
  a->in_batch = 0;
  a->in_feature = 1;
  a->k_out = 0;
  a->k_in = 1;
  a->out_batch = 0;
  a->out_feature = 1;
}

tpu_val_t tpu_ir_conv(tpu_graph_t* g, tpu_val_t input, tpu_val_t kernel,
                      const tpu_conv_attrs_t* a, tpu_dtype_t out) {
  if (!valid(g, input) || !valid(g, kernel)) return TPU_VAL_NONE;
  const tpu_type_t *ti = type_of(g, input), *tk = type_of(g, kernel);
  int n = a->spatial;
  if (ti->rank != n + 2 || tk->rank != n + 2)
    return FAIL(g, "convolution: expected rank %d input and kernel", n + 2);
  tpu_conv_attrs_t at = *a;
  for (int i = n; i < 3; ++i) {
    at.strides[i] = at.pad_lo[i] = at.pad_hi[i] = 0;
    at.lhs_dilation[i] = at.rhs_dilation[i] = 0;
    at.in_spatial[i] = at.k_spatial[i] = at.out_spatial[i] = 0;
  }
  tpu_type_t t = tpu_type_make(out, NULL, 0);
  t.rank = n + 2;
  int64_t batch = ti->dims[a->in_batch] / a->batch_groups;
  int64_t feat = tk->dims[a->k_out];
  if (ti->dims[a->in_feature] != tk->dims[a->k_in] * a->feature_groups)
    return FAIL(g, "convolution: input has %lld channels, kernel expects %lld",
                (long long)ti->dims[a->in_feature],
                (long long)(tk->dims[a->k_in] * a->feature_groups));
  t.dims[a->out_batch] = batch;
  t.dims[a->out_feature] = feat;
  for (int i = 0; i < n; ++i) {
    int64_t in = (ti->dims[a->in_spatial[i]] - 1) * a->lhs_dilation[i] + 1 +
                 a->pad_lo[i] + a->pad_hi[i];
    int64_t k = (tk->dims[a->k_spatial[i]] - 1) * a->rhs_dilation[i] + 1;
    if (in < k)
      return FAIL(g, "convolution: kernel of %lld larger than padded input of %lld",
                  (long long)k, (long long)in);
    t.dims[a->out_spatial[i]] = (in - k) / a->strides[i] + 1;
  }
  at.precision = tpu_graph_precision_attr(g, ti->dtype);
  tpu_val_t ops[2] = {input, kernel};
  return tpu_graph_add(g, TPU_IR_CONV, ops, 2, &at, sizeof at, &t);
}

tpu_val_t tpu_ir_sort(tpu_graph_t* g, const tpu_val_t* xs, int n, int dim,
                      tpu_sort_order_t order, bool stable) {
  if (n < 1 || n > 4) return FAIL(g, "sort: 1 to 4 operands");
  tpu_type_t t[4];
  for (int i = 0; i < n; ++i) {
    if (!valid(g, xs[i])) return TPU_VAL_NONE;
    t[i] = *type_of(g, xs[i]);
    if (t[i].rank != t[0].rank) return FAIL(g, "sort: operand ranks differ");
  }
  if (dim < 0 || dim >= t[0].rank) return FAIL(g, "sort: bad dim");
  sort_attrs_t a;
  memset(&a, 0, sizeof a);
  a.dim = dim;
  a.order = order;
  a.stable = stable;
  return tpu_graph_add_multi(g, TPU_IR_SORT, xs, n, &a, sizeof a, t, n);
}

tpu_val_t tpu_ir_top_k(tpu_graph_t* g, tpu_val_t x, int64_t k) {
  if (!valid(g, x)) return TPU_VAL_NONE;
  tpu_type_t t[2];
  t[0] = *type_of(g, x);
  if (t[0].rank < 1 || k < 0 || k > t[0].dims[t[0].rank - 1])
    return FAIL(g, "top_k: k=%lld out of range", (long long)k);
  t[0].dims[t[0].rank - 1] = k;
  t[1] = t[0];
  t[1].dtype = TPU_I32;
  dims_attrs_t a;
  memset(&a, 0, sizeof a);
  a.n = 1;
  a.v[0] = k;
  return tpu_graph_add_multi(g, TPU_IR_TOP_K, &x, 1, &a, sizeof a, t, 2);
}

tpu_val_t tpu_ir_rng_bits(tpu_graph_t* g, tpu_val_t state,
                          const tpu_type_t* type) {
  if (!valid(g, state)) return TPU_VAL_NONE;
  tpu_type_t t[2] = {*type_of(g, state), *type};
  return tpu_graph_add_multi(g, TPU_IR_RNG_BITS, &state, 1, NULL, 0, t, 2);
}

bool tpu_ir_is_uniform(const tpu_graph_t* g, tpu_val_t v) {
  const tpu_node_t* n = tpu_graph_node(g, v);
  switch (n->op) {
    case TPU_IR_CONSTANT: return !((const const_attrs_t*)n->attrs)->is_array;
    case TPU_IR_BROADCAST:
    case TPU_IR_CONVERT:
      return tpu_ir_rank(g, n->operands[0]) == 0 || tpu_ir_is_uniform(g, n->operands[0]);
    default: return false;
  }
}
