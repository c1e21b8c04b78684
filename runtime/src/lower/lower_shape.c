// Shape ops: flip, roll, triangles, constant padding, repeat and the
// backward of unfold.
#include <string.h>

#include "lower/index.h"

//===--- shape ops ---===//

// flip(Tensor self, int[] dims)
tpu_status_t tpu_lower_flip(tpu_lower_ctx_t* cx) {
  const int64_t* list;
  int count = tpu_arg_ints(cx, 1, &list), rank = tpu_arg_rank(cx, 0);
  bool seen[TPU_MAX_RANK] = {0};
  for (int i = 0; i < count; ++i) {
    int64_t d;
    TPU_RETURN_IF_ERROR(tpu_wrap_dim(list[i], rank, &d));
    if (rank == 0) continue;
    if (seen[d])
      return TPU_LOWER_ERROR(TPU_CODE_INVALID_ARGUMENT,
                             "dim %lld appears multiple times in the list of dims", (long long)d);
    seen[d] = true;
  }
  int64_t sorted[TPU_MAX_RANK];
  int k = 0;
  for (int i = 0; i < rank; ++i)
    if (seen[i] && tpu_arg_sizes(cx, 0)[i] > 1) sorted[k++] = i;
  tpu_lower_out(cx, 0, tpu_ir_reverse(cx->g, tpu_lower_tensor(cx, 0), sorted, k));
  return TPU_OK;
}

// x rolled by s (0 <= s < size) along dim.
static tpu_val_t roll_dim(tpu_graph_t* g, tpu_val_t x, const int64_t* d, int n, int dim,
                          int64_t s) {
  if (s == 0) return x;
  int64_t start[TPU_MAX_RANK] = {0}, limit[TPU_MAX_RANK];
  memcpy(limit, d, sizeof(int64_t) * (size_t)n);
  int64_t size = d[dim];
  start[dim] = size - s;
  tpu_val_t tail = tpu_ir_slice(g, x, start, limit, NULL);
  start[dim] = 0;
  limit[dim] = size - s;
  tpu_val_t head = tpu_ir_slice(g, x, start, limit, NULL);
  tpu_val_t parts[2] = {tail, head};
  return tpu_ir_concat(g, parts, 2, dim);
}

// roll(Tensor self, SymInt[1] shifts, int[1] dims=[])
tpu_status_t tpu_lower_roll(tpu_lower_ctx_t* cx) {
  tpu_graph_t* g = cx->g;
  const int64_t *shifts, *dims;
  int ns = tpu_arg_ints(cx, 1, &shifts), nd = tpu_arg_ints(cx, 2, &dims);
  if (ns == 0) return TPU_LOWER_ERROR(TPU_CODE_INVALID_ARGUMENT, "`shifts` required");
  if (!(nd == 0 && ns == 1) && ns != nd)
    return TPU_LOWER_ERROR(TPU_CODE_INVALID_ARGUMENT,
                           "shifts and dimensions must align. shifts: %d, dims:%d", ns, nd);
  int rank = tpu_arg_rank(cx, 0);
  const int64_t* xd = tpu_arg_sizes(cx, 0);
  tpu_val_t x = tpu_lower_tensor(cx, 0);
  int64_t len = tpu_numel(xd, rank);
  if (len == 0) {
    tpu_lower_out(cx, 0, x);
    return TPU_OK;
  }
  if (nd == 0) {  // roll the flattened tensor
    int64_t s = ((shifts[0] % len) + len) % len;
    x = roll_dim(g, tpu_ix_flat(g, x, xd, rank), &len, 1, 0, s);
    tpu_lower_out(cx, 0, tpu_ir_reshape(g, x, xd, rank));
    return TPU_OK;
  }
  for (int i = 0; i < nd; ++i) {
    int64_t d;
    if (rank == 0)  // a 0-d tensor has no dim to roll along
      return TPU_LOWER_ERROR(TPU_CODE_OUT_OF_RANGE,
                             "Dimension specified as %lld but tensor has no dimensions",
                             (long long)dims[i]);
    TPU_RETURN_IF_ERROR(tpu_wrap_dim(dims[i], rank, &d));
    int64_t size = xd[d];
    x = roll_dim(g, x, xd, rank, (int)d, ((shifts[i] % size) + size) % size);
  }
  tpu_lower_out(cx, 0, x);
  return TPU_OK;
}

// tril / triu (Tensor self, SymInt diagonal=0): zero above / below the
// diagonal of the last two dims.
static tpu_status_t triangle(tpu_lower_ctx_t* cx, bool lower) {
  tpu_graph_t* g = cx->g;
  int rank = tpu_arg_rank(cx, 0);
  if (rank < 2)
    return TPU_LOWER_ERROR(TPU_CODE_INVALID_ARGUMENT,
                           "%s: input tensor must have at least 2 dimensions",
                           lower ? "tril" : "triu");
  const int64_t* xd = tpu_arg_sizes(cx, 0);
  int64_t diag = tpu_arg_int(cx, 1, 0);
  int64_t md[2] = {xd[rank - 2], xd[rank - 1]}, bd[2] = {rank - 2, rank - 1};
  tpu_val_t col_minus_row = tpu_ir_binary(g, TPU_IR_SUB, tpu_ir_iota(g, TPU_I64, md, 2, 1),
                                          tpu_ir_iota(g, TPU_I64, md, 2, 0));
  tpu_val_t keep = tpu_ir_compare(g, lower ? TPU_CMP_LE : TPU_CMP_GE, col_minus_row,
                                  tpu_ix_splat_i64(g, diag, md, 2));
  tpu_dtype_t t = tpu_arg_value_dtype(cx, 0);
  tpu_val_t x = tpu_lower_tensor(cx, 0);
  tpu_lower_out(
      cx, 0,
      tpu_ir_select(g, tpu_ir_broadcast(g, keep, xd, rank, bd), x, tpu_ix_zeros(g, t, xd, rank)));
  return TPU_OK;
}

tpu_status_t tpu_lower_tril(tpu_lower_ctx_t* cx) { return triangle(cx, true); }
tpu_status_t tpu_lower_triu(tpu_lower_ctx_t* cx) { return triangle(cx, false); }

// constant_pad_nd(Tensor self, SymInt[] pad, Scalar value=0): pairs of
// (before, after) from the last dim backwards; negative pads crop.
tpu_status_t tpu_lower_constant_pad_nd(tpu_lower_ctx_t* cx) {
  tpu_graph_t* g = cx->g;
  const int64_t* pad;
  int np = tpu_arg_ints(cx, 1, &pad), rank = tpu_arg_rank(cx, 0);
  if (np % 2)
    return TPU_LOWER_ERROR(TPU_CODE_INVALID_ARGUMENT,
                           "Padding length must be divisible by 2 (got %d)", np);
  if (np / 2 > rank)
    return TPU_LOWER_ERROR(TPU_CODE_INVALID_ARGUMENT,
                           "Length of pad should be no more than twice the number of dimensions "
                           "of the input. Pad length is %d while the input has %d dimensions.",
                           np, rank);
  const int64_t* xd = tpu_arg_sizes(cx, 0);
  int64_t lo[TPU_MAX_RANK] = {0}, hi[TPU_MAX_RANK] = {0}, out[TPU_MAX_RANK];
  memcpy(out, xd, sizeof(int64_t) * (size_t)rank);
  for (int i = 0; i < np / 2; ++i) {
    int d = rank - 1 - i;
    lo[d] = pad[2 * i];
    hi[d] = pad[2 * i + 1];
    out[d] = xd[d] + lo[d] + hi[d];
    if (out[d] < 0)
      return TPU_LOWER_ERROR(TPU_CODE_INVALID_ARGUMENT,
                             "The input size %lld, plus negative padding %lld and %lld resulted "
                             "in a negative output size, which is invalid. Check dimension %d "
                             "of your input.", (long long)xd[d], (long long)lo[d],
                             (long long)hi[d], d);
  }
  tpu_dtype_t t = tpu_arg_value_dtype(cx, 0);
  if (tpu_numel(out, rank) == 0) {
    tpu_lower_out(cx, 0, tpu_ix_zeros(g, t, out, rank));
    return TPU_OK;
  }
  tpu_val_t x = tpu_lower_tensor(cx, 0);
  tpu_val_t v = tpu_lower_input(cx, 2, t);
  if (tpu_numel(xd, rank) == 0) {  // nothing left of self: all padding
    tpu_lower_out(cx, 0, tpu_ir_broadcast(g, v, out, rank, NULL));
    return TPU_OK;
  }
  tpu_lower_out(cx, 0, tpu_ir_pad(g, x, v, lo, hi, NULL));
  return TPU_OK;
}

// repeat(Tensor self, SymInt[] repeats)
tpu_status_t tpu_lower_repeat(tpu_lower_ctx_t* cx) {
  tpu_graph_t* g = cx->g;
  const int64_t* reps;
  int nr = tpu_arg_ints(cx, 1, &reps), rank = tpu_arg_rank(cx, 0);
  if (nr < rank)
    return TPU_LOWER_ERROR(TPU_CODE_INVALID_ARGUMENT,
                           "Number of dimensions of repeat dims can not be smaller than number "
                           "of dimensions of tensor");
  if (nr > TPU_MAX_RANK)
    return TPU_LOWER_ERROR(TPU_CODE_INVALID_ARGUMENT, "repeat: too many dimensions");
  int64_t d[TPU_MAX_RANK], out[TPU_MAX_RANK];
  for (int i = 0; i < nr; ++i) {
    int j = i - (nr - rank);
    d[i] = j >= 0 ? tpu_arg_sizes(cx, 0)[j] : 1;
    out[i] = d[i] * reps[i];
    if (reps[i] < 0) {
      char a[128];
      return TPU_LOWER_ERROR(TPU_CODE_INVALID_ARGUMENT,
                             "Trying to create tensor with negative dimension %lld: %s",
                             (long long)reps[i], tpu_shape_str(reps, nr, a, sizeof a));
    }
  }
  tpu_dtype_t t = tpu_arg_value_dtype(cx, 0);
  if (tpu_numel(out, nr) == 0) {
    tpu_lower_out(cx, 0, tpu_ix_zeros(g, t, out, nr));
    return TPU_OK;
  }
  tpu_val_t x = tpu_ir_reshape(g, tpu_lower_tensor(cx, 0), d, nr);
  int64_t cur[TPU_MAX_RANK];
  memcpy(cur, d, sizeof cur);
  for (int i = 0; i < nr; ++i) {
    if (reps[i] == 1) continue;
    if (nr < TPU_MAX_RANK) {
      // [.., d_i, ..] -> [.., r_i, d_i, ..] -> [.., r_i * d_i, ..]
      int64_t big[TPU_MAX_RANK], bd[TPU_MAX_RANK];
      for (int j = 0, o = 0; j < nr; ++j) {
        if (j == i) big[o++] = reps[i];
        bd[j] = o;
        big[o++] = cur[j];
      }
      x = tpu_ir_broadcast(g, x, big, nr + 1, bd);
      cur[i] *= reps[i];
      x = tpu_ir_reshape(g, x, cur, nr);
    } else {
      tpu_val_t* parts = tpu_graph_alloc(g, sizeof *parts * (size_t)reps[i]);
      if (!parts) return TPU_LOWER_ERROR(TPU_CODE_RESOURCE_EXHAUSTED, "out of memory");
      for (int64_t k = 0; k < reps[i]; ++k) parts[k] = x;
      x = tpu_ir_concat(g, parts, (int)reps[i], i);
      cur[i] *= reps[i];
    }
  }
  tpu_lower_out(cx, 0, x);
  return TPU_OK;
}

// unfold_backward(Tensor grad_in, SymInt[] input_sizes, int dim, int size, int step):
// the gradient of unfold(dim, size, step): window i, element j of grad_in
// adds to position i * step + j along dim.
tpu_status_t tpu_lower_unfold_backward(tpu_lower_ctx_t* cx) {
  tpu_graph_t* g = cx->g;
  const int64_t* in;
  int rank = tpu_arg_ints(cx, 1, &in);
  int64_t size = tpu_arg_int(cx, 3, 1), step = tpu_arg_int(cx, 4, 1);
  int64_t d[TPU_MAX_RANK];
  int n = rank ? rank : 1;
  if (rank) memcpy(d, in, sizeof(int64_t) * (size_t)rank);
  else d[0] = 1;
  int64_t dim;
  TPU_RETURN_IF_ERROR(tpu_wrap_dim(tpu_arg_int(cx, 2, 0), rank, &dim));
  int gr = tpu_arg_rank(cx, 0);
  const int64_t* gd = tpu_arg_sizes(cx, 0);
  if (rank == 0 && gr == 1 && gd[0] == 1 && size == 1) {  // a 0-d input unfolds to [1]
    tpu_lower_out(cx, 0, tpu_ir_reshape(g, tpu_lower_tensor(cx, 0), NULL, 0));
    return TPU_OK;
  }
  if (gr != n + 1 || gd[n] != size || step < 1)
    return TPU_LOWER_ERROR(TPU_CODE_INVALID_ARGUMENT,
                           "unfold_backward: grad_in does not have unfold's result shape");
  int64_t windows = gd[dim];
  tpu_dtype_t t = tpu_arg_value_dtype(cx, 0), acc = tpu_opmath(t);
  tpu_val_t grad = tpu_ir_convert(g, tpu_lower_tensor(cx, 0), acc);
  if (tpu_numel(d, n) == 0 || windows * size == 0) {
    tpu_lower_out(cx, 0, tpu_ix_zeros(g, t, in, rank));
    return TPU_OK;
  }
  // Move the window-element dim next to dim and merge the two.
  int64_t perm[TPU_MAX_RANK], td[TPU_MAX_RANK];
  for (int i = 0, o = 0; i < n; ++i) {
    perm[o++] = i;
    if (i == dim) perm[o++] = n;
  }
  for (int i = 0; i < n + 1; ++i) td[i] = gd[perm[i]];
  grad = tpu_ir_transpose(g, grad, perm);
  int64_t md[TPU_MAX_RANK];
  for (int i = 0, o = 0; i < n + 1; ++i) {
    if (i == dim + 1) continue;
    md[o++] = i == dim ? td[i] * td[i + 1] : td[i];
  }
  grad = tpu_ir_reshape(g, grad, md, n);
  int64_t m = windows * size;
  tpu_val_t pos = tpu_ir_iota(g, TPU_I64, &m, 1, 0);
  tpu_val_t win = tpu_ir_binary(g, TPU_IR_DIV, pos, tpu_ix_splat_i64(g, size, &m, 1));
  tpu_val_t elem = tpu_ir_binary(g, TPU_IR_REM, pos, tpu_ix_splat_i64(g, size, &m, 1));
  tpu_val_t idx = tpu_ir_binary(
      g, TPU_IR_ADD, tpu_ir_binary(g, TPU_IR_MUL, win, tpu_ix_splat_i64(g, step, &m, 1)), elem);
  tpu_val_t r =
      tpu_scatter_along(g, tpu_ix_zeros(g, acc, d, n), n, (int)dim, idx, grad, TPU_BODY_ADD);
  tpu_lower_out(cx, 0, tpu_ir_reshape(g, tpu_ir_convert(g, r, t), in, rank));
  return TPU_OK;
}
