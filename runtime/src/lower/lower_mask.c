// Ops whose result size depends on data, in their static forms: masked
// fill / scatter / select, nonzero and unique with a known size.
#include <string.h>

#include "lower/index.h"

//===--- masks ---===//

// masked_fill.Scalar / .Tensor (Tensor self, Tensor mask, Scalar|Tensor value)
tpu_status_t tpu_lower_masked_fill(tpu_lower_ctx_t* cx) {
  tpu_graph_t* g = cx->g;
  tpu_dtype_t mt = tpu_arg_value_dtype(cx, 1);
  if (mt != TPU_BOOL)
    return TPU_LOWER_ERROR(TPU_CODE_INVALID_ARGUMENT,
                           "masked_fill_ only supports boolean masks, but got mask with dtype "
                           "%s", tpu_dtype_torch_name(mt));
  if (tpu_arg_is_tensor(cx, 2) && tpu_arg_rank(cx, 2) != 0)
    return TPU_LOWER_ERROR(TPU_CODE_INVALID_ARGUMENT,
                           "masked_fill_ only supports a 0-dimensional value tensor, but got "
                           "tensor with %d dimension(s).", tpu_arg_rank(cx, 2));
  tpu_dtype_t t = tpu_arg_value_dtype(cx, 0);
  int64_t d[TPU_MAX_RANK];
  int n;
  TPU_RETURN_IF_ERROR(tpu_broadcast_shapes(tpu_arg_sizes(cx, 0), tpu_arg_rank(cx, 0),
                                           tpu_arg_sizes(cx, 1), tpu_arg_rank(cx, 1), d, &n));
  tpu_val_t x = tpu_lower_expand(cx, tpu_lower_tensor(cx, 0), d, n);
  tpu_val_t m = tpu_lower_expand(cx, tpu_lower_tensor(cx, 1), d, n);
  tpu_val_t v = tpu_ir_broadcast(g, tpu_lower_fill_value(cx, 2, t, true), d, n, NULL);
  tpu_lower_out(cx, 0, tpu_ir_select(g, m, v, x));
  return TPU_OK;
}

// masked_scatter(Tensor self, Tensor mask, Tensor source): the i-th true
// element of the (broadcast) mask takes source's i-th element.
tpu_status_t tpu_lower_masked_scatter(tpu_lower_ctx_t* cx) {
  tpu_graph_t* g = cx->g;
  tpu_dtype_t mt = tpu_arg_value_dtype(cx, 1);
  if (mt != TPU_BOOL)
    return TPU_LOWER_ERROR(TPU_CODE_INVALID_ARGUMENT,
                           "masked_scatter_ only supports boolean masks, but got mask with "
                           "dtype %s", tpu_dtype_torch_name(mt));
  tpu_dtype_t t = tpu_arg_value_dtype(cx, 0);
  if (tpu_arg_value_dtype(cx, 2) != t)
    return TPU_LOWER_ERROR(TPU_CODE_INVALID_ARGUMENT,
                           "masked_scatter_: expected self and source to have same dtypes but "
                           "got %s and %s", tpu_dtype_torch_name(t),
                           tpu_dtype_torch_name(tpu_arg_value_dtype(cx, 2)));
  int64_t d[TPU_MAX_RANK];
  int n;
  TPU_RETURN_IF_ERROR(tpu_broadcast_shapes(tpu_arg_sizes(cx, 0), tpu_arg_rank(cx, 0),
                                           tpu_arg_sizes(cx, 1), tpu_arg_rank(cx, 1), d, &n));
  int64_t len = tpu_numel(d, n), ns = tpu_numel(tpu_arg_sizes(cx, 2), tpu_arg_rank(cx, 2));
  tpu_val_t x = tpu_lower_expand(cx, tpu_lower_tensor(cx, 0), d, n);
  if (len == 0) {
    tpu_lower_out(cx, 0, x);
    return TPU_OK;
  }
  tpu_val_t mf = tpu_ix_flat(g, tpu_lower_expand(cx, tpu_lower_tensor(cx, 1), d, n), d, n);
  tpu_lower_assert(cx,
                   tpu_ir_compare(g, TPU_CMP_GT, tpu_ix_count_true(g, mf, 1),
                                  tpu_ir_const_i(g, TPU_I64, ns, NULL, 0)),
                   TPU_CODE_INVALID_ARGUMENT,
                   "Number of elements of source < number of ones in mask");
  tpu_val_t v;
  if (ns == 0) {
    v = tpu_ix_zeros(g, t, &len, 1);
  } else {
    tpu_dtype_t ct = tpu_ix_count_dtype(len + 1);
    tpu_val_t r = tpu_ix_prefix_sum(g, tpu_ir_convert(g, mf, ct), len, ct);
    r = tpu_ir_binary(g, TPU_IR_SUB, r, tpu_ir_const(g, ct, 1, &len, 1));
    r = tpu_ir_clamp(g, tpu_ir_const(g, ct, 0, NULL, 0), r,
                     tpu_ir_const(g, ct, (double)(ns - 1), NULL, 0));
    tpu_val_t src =
        tpu_ix_flat(g, tpu_lower_tensor(cx, 2), tpu_arg_sizes(cx, 2), tpu_arg_rank(cx, 2));
    v = tpu_gather_flat(g, src, tpu_ir_convert(g, r, TPU_I64), 1);
  }
  tpu_val_t r = tpu_ir_select(g, mf, v, tpu_ix_flat(g, x, d, n));
  tpu_lower_out(cx, 0, tpu_ir_reshape(g, r, d, n));
  return TPU_OK;
}

// nonzero_count(Tensor self) -> 0-d int64: how many elements are not zero
// (what the binding reads back before a nonzero).
tpu_status_t tpu_lower_nonzero_count(tpu_lower_ctx_t* cx) {
  tpu_graph_t* g = cx->g;
  int n = tpu_arg_rank(cx, 0);
  const int64_t* d = tpu_arg_sizes(cx, 0);
  tpu_val_t m = tpu_ix_nonzero_mask(g, tpu_lower_tensor(cx, 0), tpu_arg_value_dtype(cx, 0), d, n);
  tpu_lower_out(cx, 0, tpu_ix_count_true(g, m, n));
  return TPU_OK;
}

// nonzero_static(Tensor self, *, SymInt size, int fill_value=-1): the
// coordinates of the first `size` nonzero elements, rows of fill_value after
// the last one.
tpu_status_t tpu_lower_nonzero_static(tpu_lower_ctx_t* cx) {
  tpu_graph_t* g = cx->g;
  int64_t size = tpu_arg_int(cx, 1, 0), fill = tpu_arg_int(cx, 2, -1);
  if (size < 0)
    return TPU_LOWER_ERROR(TPU_CODE_INVALID_ARGUMENT,
                           "nonzero_static: 'size' must be an non-negative integer");
  tpu_dtype_t t = tpu_arg_value_dtype(cx, 0);  // (complex: x != 0 + 0j, as CPU)
  int n = tpu_arg_rank(cx, 0);
  const int64_t* d = tpu_arg_sizes(cx, 0);
  int64_t out[2] = {size, n};
  if (n == 0 || size == 0) {
    tpu_lower_out(cx, 0, tpu_ix_zeros(g, TPU_I64, out, 2));
    return TPU_OK;
  }
  int64_t len = tpu_numel(d, n);
  if (len == 0) {  // nothing is nonzero (and the coordinate math would divide by 0)
    tpu_lower_out(cx, 0, tpu_ix_splat_i64(g, fill, out, 2));
    return TPU_OK;
  }
  tpu_val_t m = tpu_ix_flat(g, tpu_ix_nonzero_mask(g, tpu_lower_tensor(cx, 0), t, d, n), d, n);
  tpu_val_t pos = tpu_ix_compact_positions(g, m, len, size);
  tpu_val_t valid = tpu_ir_compare(g, TPU_CMP_GE, pos, tpu_ix_splat_i64(g, 0, &size, 1));
  int64_t st[TPU_MAX_RANK], col[2] = {size, 1};
  tpu_ix_strides_of(d, n, st);
  tpu_val_t cols[TPU_MAX_RANK];
  for (int i = 0; i < n; ++i) {
    tpu_val_t c = pos;
    if (st[i] != 1) c = tpu_ir_binary(g, TPU_IR_DIV, c, tpu_ix_splat_i64(g, st[i], &size, 1));
    if (i > 0) c = tpu_ir_binary(g, TPU_IR_REM, c, tpu_ix_splat_i64(g, d[i], &size, 1));
    c = tpu_ir_select(g, valid, c, tpu_ix_splat_i64(g, fill, &size, 1));
    cols[i] = tpu_ir_reshape(g, c, col, 2);
  }
  tpu_lower_out(cx, 0, tpu_ir_concat(g, cols, n, 1));
  return TPU_OK;
}

//===--- unique ---===//

// The flattened values of self (n entries) in the order unique groups them
// (sorted, stably, unless consecutive), with their original positions and
// the group number (from 0) of each.
typedef struct unique_groups {
  tpu_val_t values, positions, group;
} unique_groups_t;

static unique_groups_t unique_groups(tpu_lower_ctx_t* cx, int64_t n, bool consecutive) {
  tpu_graph_t* g = cx->g;
  unique_groups_t u;
  u.values = tpu_ir_reshape(g, tpu_lower_tensor(cx, 0), &n, 1);
  u.positions = tpu_ir_iota(g, TPU_I64, &n, 1, 0);
  if (!consecutive) {  // NaN last, each NaN its own group (NaN != NaN), as CPU
    tpu_val_t ops[2] = {u.values, u.positions};
    tpu_val_t sorted = tpu_ir_sort(g, ops, 2, 0, TPU_SORT_ASCENDING, true);
    u.values = tpu_ir_result(g, sorted, 0);
    u.positions = tpu_ir_result(g, sorted, 1);
  }
  // A group starts where a value differs from the one before it.
  int64_t zero = 0, one = 1, rest = n - 1;
  tpu_val_t first = tpu_ir_const_i(g, TPU_I64, 1, &one, 1);
  tpu_val_t prev = tpu_ir_slice(g, u.values, &zero, &rest, NULL);
  tpu_val_t next = tpu_ir_slice(g, u.values, &one, &n, NULL);
  tpu_val_t starts = tpu_ir_convert(g, tpu_ir_compare(g, TPU_CMP_NE, next, prev), TPU_I64);
  tpu_val_t parts[2] = {first, starts};
  tpu_val_t begins = tpu_ir_concat(g, parts, 2, 0);
  u.group = tpu_ir_binary(g, TPU_IR_SUB, tpu_ix_prefix_sum(g, begins, n, TPU_I64),
                          tpu_ix_splat_i64(g, 1, &n, 1));
  return u;
}

// unique_count(Tensor self, bool consecutive): the number of groups, 0-d.
tpu_status_t tpu_lower_unique_count(tpu_lower_ctx_t* cx) {
  tpu_graph_t* g = cx->g;
  int64_t n = tpu_numel(tpu_arg_sizes(cx, 0), tpu_arg_rank(cx, 0));
  if (n == 0) {
    tpu_lower_out(cx, 0, tpu_ir_const_i(g, TPU_I64, 0, NULL, 0));
    return TPU_OK;
  }
  unique_groups_t u = unique_groups(cx, n, tpu_arg_bool(cx, 1, false));
  tpu_val_t last = tpu_ir_slice(g, u.group, (int64_t[]){n - 1}, &n, NULL);
  tpu_lower_out(cx, 0, tpu_ir_binary(g, TPU_IR_ADD, tpu_ir_reshape(g, last, NULL, 0),
                                     tpu_ir_const_i(g, TPU_I64, 1, NULL, 0)));
  return TPU_OK;
}

// unique_static(Tensor self, bool consecutive, int size): the `size` unique
// values (the count the binding read back), the inverse indices (self's
// shape) and the counts.
tpu_status_t tpu_lower_unique_static(tpu_lower_ctx_t* cx) {
  tpu_graph_t* g = cx->g;
  tpu_dtype_t t = tpu_arg_value_dtype(cx, 0);
  if (tpu_dtype_is_complex(t))
    return tpu_not_implemented("unique", t);
  int rank = tpu_arg_rank(cx, 0);
  const int64_t* d = tpu_arg_sizes(cx, 0);
  int64_t n = tpu_numel(d, rank), size = tpu_arg_int(cx, 2, 0);
  if (n == 0) {
    tpu_lower_out(cx, 0, tpu_ix_zeros(g, t, &size, 1));
    tpu_lower_out(cx, 1, tpu_ix_zeros(g, TPU_I64, d, rank));
    tpu_lower_out(cx, 2, tpu_ix_zeros(g, TPU_I64, &size, 1));
    return TPU_OK;
  }
  unique_groups_t u = unique_groups(cx, n, tpu_arg_bool(cx, 1, false));
  tpu_val_t values =
      tpu_scatter_flat(g, tpu_ix_zeros(g, t, &size, 1), u.group, u.values, 1, TPU_BODY_REPLACE);
  tpu_val_t counts = tpu_scatter_flat(g, tpu_ix_zeros(g, TPU_I64, &size, 1), u.group,
                                      tpu_ix_splat_i64(g, 1, &n, 1), 1, TPU_BODY_ADD);
  tpu_val_t inverse = tpu_scatter_flat(g, tpu_ix_zeros(g, TPU_I64, &n, 1), u.positions, u.group, 1,
                                       TPU_BODY_REPLACE);
  tpu_lower_out(cx, 0, values);
  tpu_lower_out(cx, 1, tpu_ir_reshape(g, inverse, d, rank));
  tpu_lower_out(cx, 2, counts);
  return TPU_OK;
}

// masked_select_static(Tensor self, Tensor mask, int size): the elements of
// self (broadcast with mask) where mask holds, `size` of them (the count the
// binding read back).
tpu_status_t tpu_lower_masked_select_static(tpu_lower_ctx_t* cx) {
  tpu_graph_t* g = cx->g;
  if (tpu_arg_value_dtype(cx, 1) != TPU_BOOL)
    return TPU_LOWER_ERROR(TPU_CODE_INVALID_ARGUMENT,
                           "masked_select: expected BoolTensor for mask");
  int64_t size = tpu_arg_int(cx, 2, 0);
  int64_t d[TPU_MAX_RANK];
  int n;
  TPU_RETURN_IF_ERROR(tpu_broadcast_shapes(tpu_arg_sizes(cx, 0), tpu_arg_rank(cx, 0),
                                           tpu_arg_sizes(cx, 1), tpu_arg_rank(cx, 1), d, &n));
  tpu_dtype_t t = tpu_arg_value_dtype(cx, 0);
  int64_t len = tpu_numel(d, n);
  if (size == 0 || len == 0) {
    tpu_lower_out(cx, 0, tpu_ix_zeros(g, t, &size, 1));
    return TPU_OK;
  }
  tpu_val_t m = tpu_ix_flat(g, tpu_lower_expand(cx, tpu_lower_tensor(cx, 1), d, n), d, n);
  tpu_val_t x = tpu_ix_flat(g, tpu_lower_expand(cx, tpu_lower_tensor(cx, 0), d, n), d, n);
  tpu_val_t pos = tpu_ix_compact_positions(g, m, len, size);
  // Rows past the real count (none when size is the count) read element 0.
  pos = tpu_ir_binary(g, TPU_IR_MAX, pos, tpu_ix_splat_i64(g, 0, &size, 1));
  tpu_lower_out(cx, 0, tpu_gather_flat(g, x, pos, 1));
  return TPU_OK;
}
