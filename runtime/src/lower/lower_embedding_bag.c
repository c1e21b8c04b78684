// Embedding bags (_embedding_bag and its backward ops).
//
// A bag is a run of indices between consecutive offsets. Each index's bag
// (offset2bag) is a count of the offsets at or before its position: ones
// scattered at the offsets, then a prefix sum. Rows of the weight are
// gathered per index and scatter-reduced into their bags (add for sum and
// mean; max, then the first position reaching it for max mode's indices).
// Indices equal to padding_idx are masked out (and not counted in a bag's
// size). The auxiliary results follow CPU's shapes: offset2bag is empty on
// CPU's fast sum path, and bag_size / max_indices are placeholders of the
// bags' (forward_only: the offsets') shape in sum mode, which nothing
// reads.
#include <math.h>
#include <string.h>

#include "lower/lower.h"

enum { EB_SUM = 0, EB_MEAN = 1, EB_MAX = 2 };

// Inclusive prefix sum of a 1-D i64 value of length n (Hillis-Steele).
static tpu_val_t eb_prefix_sum(tpu_graph_t* g, tpu_val_t x, int64_t n) {
  tpu_val_t zero = tpu_ir_const_i(g, TPU_I64, 0, NULL, 0);
  int64_t start = 0, interior = 0, hi = 0;
  for (int64_t k = 1; k < n; k <<= 1) {
    int64_t limit = n - k, lo = k;
    tpu_val_t shifted = tpu_ir_pad(g, tpu_ir_slice(g, x, &start, &limit, NULL), zero, &lo, &hi,
                                   &interior);
    x = tpu_ir_binary(g, TPU_IR_ADD, x, shifted);
  }
  return x;
}

// The bag of each of l positions from the first nb of the offsets [o] (i64):
// how many of them are <= the position, minus one.
static tpu_val_t eb_offset2bag(tpu_graph_t* g, tpu_val_t off, int64_t o, int64_t nb, int64_t l) {
  int64_t start = 0, len = l + 1;
  tpu_val_t first = nb < o ? tpu_ir_slice(g, off, &start, &nb, NULL) : off;
  tpu_val_t marks = tpu_scatter_flat(g, tpu_ir_const_i(g, TPU_I64, 0, &len, 1), first,
                                     tpu_ir_const_i(g, TPU_I64, 1, &nb, 1), 1, TPU_BODY_ADD);
  tpu_val_t c = tpu_ir_slice(g, eb_prefix_sum(g, marks, len), &start, &l, NULL);
  return tpu_ir_binary(g, TPU_IR_SUB, c, tpu_ir_const_i(g, TPU_I64, 1, &l, 1));
}

// A 0-d bool: any element of the 1-D bool b.
static tpu_val_t eb_any(tpu_graph_t* g, tpu_val_t b) {
  static const int64_t d0 = 0;
  return tpu_ir_reduce(g, b, tpu_ir_const_i(g, TPU_BOOL, 0, NULL, 0), &d0, 1, TPU_BODY_OR);
}

static bool eb_index_dtype(tpu_dtype_t t) { return t == TPU_I64 || t == TPU_I32; }

static tpu_status_t eb_check_weight(tpu_lower_ctx_t* cx, int i) {
  tpu_dtype_t t = tpu_arg_value_dtype(cx, i);
  if (!tpu_dtype_is_float(t) || tpu_dtype_is_complex(t) || tpu_arg_rank(cx, i) != 2)
    return TPU_LOWER_ERROR(TPU_CODE_INVALID_ARGUMENT,
                           "Expected tensor for argument #1 'weight' to have one of the following "
                           "scalar types: Half, BFloat16, Float, Double; but got %s (2-D) instead "
                           "(while checking arguments for embedding_bag)",
                           tpu_dtype_torch_name(t));
  return TPU_OK;
}

// Indices [L] as i64, asserted within [0, v).
static tpu_val_t eb_indices(tpu_lower_ctx_t* cx, int arg, int64_t l, int64_t v) {
  tpu_graph_t* g = cx->g;
  tpu_val_t idx = tpu_ir_convert(g, tpu_lower_tensor(cx, arg), TPU_I64);
  tpu_val_t bad = tpu_ir_binary(
      g, TPU_IR_OR, tpu_ir_compare(g, TPU_CMP_LT, idx, tpu_ir_const_i(g, TPU_I64, 0, &l, 1)),
      tpu_ir_compare(g, TPU_CMP_GE, idx, tpu_ir_const_i(g, TPU_I64, v, &l, 1)));
  tpu_lower_assert(cx, eb_any(g, bad), TPU_CODE_INVALID_ARGUMENT,
                   "embedding_bag: an index of input is not in the valid range [0, %lld)",
                   (long long)v);
  return idx;
}

// Indices not equal to padding_idx (all when it is negative).
static tpu_val_t eb_valid(tpu_graph_t* g, tpu_val_t idx, int64_t l, int64_t pad) {
  if (pad < 0) return tpu_ir_const_i(g, TPU_BOOL, 1, &l, 1);
  return tpu_ir_compare(g, TPU_CMP_NE, idx, tpu_ir_const_i(g, TPU_I64, pad, &l, 1));
}

// _embedding_bag / _embedding_bag_forward_only(Tensor weight, Tensor indices,
//   Tensor offsets, bool scale_grad_by_freq=False, int mode=0,
//   bool sparse=False, Tensor? per_sample_weights=None,
//   bool include_last_offset=False, int padding_idx=-1)
//   -> (output, offset2bag, bag_size, max_indices)
// forward_only: CPU sizes sum mode's placeholders by the offsets, not the
// bags.
static tpu_status_t embedding_bag(tpu_lower_ctx_t* cx, bool forward_only) {
  tpu_graph_t* g = cx->g;
  TPU_RETURN_IF_ERROR(eb_check_weight(cx, 0));
  if (tpu_arg_rank(cx, 1) != 1)
    return TPU_LOWER_ERROR(TPU_CODE_INVALID_ARGUMENT,
                           "input has to be a 1D Tensor, but got Tensor of dimension %d",
                           tpu_arg_rank(cx, 1));
  if (tpu_arg_rank(cx, 2) != 1)
    return TPU_LOWER_ERROR(TPU_CODE_INVALID_ARGUMENT,
                           "offsets has to be a 1D Tensor, but got Tensor of dimension %d",
                           tpu_arg_rank(cx, 2));
  tpu_dtype_t it = tpu_arg_value_dtype(cx, 1), ot = tpu_arg_value_dtype(cx, 2);
  if (!eb_index_dtype(it) || !eb_index_dtype(ot))
    return TPU_LOWER_ERROR(TPU_CODE_INVALID_ARGUMENT,
                           "embedding_bag: expected indices and offsets of dtype int32 or int64");
  // the auxiliary results take the promoted index dtype (CPU promotes
  // indices and offsets together)
  if (it == TPU_I64) ot = TPU_I64;
  int64_t mode = tpu_arg_int(cx, 4, 0), pad = tpu_arg_int(cx, 8, -1);
  bool incl = tpu_arg_bool(cx, 7, false), has_psw = tpu_arg_present(cx, 6);
  if (mode < 0 || mode > 2)
    return TPU_LOWER_ERROR(TPU_CODE_INVALID_ARGUMENT, "embedding_bag: unknown mode %lld",
                           (long long)mode);
  if (has_psw && mode != EB_SUM)
    return TPU_LOWER_ERROR(TPU_CODE_INVALID_ARGUMENT,
                           "embedding_bag: per_sample_weights only supported with mode='sum'");
  const int64_t* wd = tpu_arg_sizes(cx, 0);
  int64_t v = wd[0], d = wd[1], l = tpu_arg_sizes(cx, 1)[0], o = tpu_arg_sizes(cx, 2)[0];
  if (incl && o < 1)
    return TPU_LOWER_ERROR(TPU_CODE_INVALID_ARGUMENT,
                           "include_last_offset: number of offset should be at least 1");
  int64_t nb = incl ? o - 1 : o;
  if (has_psw && (tpu_arg_rank(cx, 6) != 1 || tpu_arg_sizes(cx, 6)[0] != l))
    return TPU_LOWER_ERROR(TPU_CODE_INVALID_ARGUMENT,
                           "embedding_bag: per_sample_weights has to be 1D with as many elements "
                           "as input");
  tpu_dtype_t t = tpu_arg_value_dtype(cx, 0), acc = tpu_opmath(t);
  if (has_psw && tpu_arg_value_dtype(cx, 6) != t)
    return TPU_LOWER_ERROR(TPU_CODE_INVALID_ARGUMENT, "expected scalar type %s but found %s",
                           tpu_dtype_torch_name(t),
                           tpu_dtype_torch_name(tpu_arg_value_dtype(cx, 6)));
  bool fast_sum = mode == EB_SUM && t != TPU_F64 && pad < 0;
  // data checks: the offsets start at 0 and stay within the input
  tpu_val_t off = tpu_ir_convert(g, tpu_lower_tensor(cx, 2), TPU_I64);
  if (o > 0) {
    int64_t z0 = 0, z1 = 1, last = o - 1;
    tpu_val_t first = tpu_ir_reshape(g, tpu_ir_slice(g, off, &z0, &z1, NULL), NULL, 0);
    tpu_lower_assert(cx, tpu_ir_compare(g, TPU_CMP_NE, first, tpu_ir_const_i(g, TPU_I64, 0, NULL, 0)),
                     TPU_CODE_INVALID_ARGUMENT,
                     "offsets[0] has to be 0, i.e., the first sequence in the mini-batch has to "
                     "start from position 0.");
    tpu_val_t lastv = tpu_ir_reshape(g, tpu_ir_slice(g, off, &last, &o, NULL), NULL, 0);
    tpu_lower_assert(cx, tpu_ir_compare(g, TPU_CMP_GT, lastv, tpu_ir_const_i(g, TPU_I64, l, NULL, 0)),
                     TPU_CODE_INVALID_ARGUMENT,
                     "offsets[-1] can not be greater than input's length %lld", (long long)l);
  }
  int64_t od[2] = {nb, d}, zero_len = 0;
  tpu_val_t out, bag = TPU_VAL_NONE, count = TPU_VAL_NONE, maxidx = TPU_VAL_NONE;
  if (l == 0 || nb <= 0 || d == 0 || v == 0) {
    if (l > 0 && v > 0) (void)eb_indices(cx, 1, l, v);
    out = tpu_ir_const(g, acc, 0, od, 2);
    bag = tpu_ir_const_i(g, TPU_I64, 0, &l, 1);
    count = tpu_ir_const_i(g, TPU_I64, 0, &nb, 1);
    maxidx = tpu_ir_const_i(g, TPU_I64, 0, od, 2);
    if (l > 0 && nb > 0) {
      bag = eb_offset2bag(g, off, o, nb, l);
      if (v > 0) {
        tpu_val_t valid = eb_valid(g, eb_indices(cx, 1, l, v), l, pad);
        count = tpu_scatter_flat(g, count, bag, tpu_ir_convert(g, valid, TPU_I64), 1, TPU_BODY_ADD);
      }
    }
  } else {
    tpu_val_t idx = eb_indices(cx, 1, l, v);
    tpu_val_t valid = eb_valid(g, idx, l, pad);
    bag = eb_offset2bag(g, off, o, nb, l);
    count = tpu_scatter_flat(g, tpu_ir_const_i(g, TPU_I64, 0, &nb, 1), bag,
                             tpu_ir_convert(g, valid, TPU_I64), 1, TPU_BODY_ADD);
    int64_t ld[2] = {l, d};
    static const int64_t b0 = 0;
    tpu_val_t valid2 = tpu_ir_broadcast(g, valid, ld, 2, &b0);
    tpu_val_t rows = tpu_gather_rows(g, tpu_ir_convert(g, tpu_lower_tensor(cx, 0), acc), idx, 1, d);
    if (has_psw)
      rows = tpu_ir_binary(g, TPU_IR_MUL, rows,
                           tpu_ir_broadcast(g, tpu_lower_input(cx, 6, acc), ld, 2, &b0));
    if (mode != EB_MAX) {
      out = tpu_scatter_along(g, tpu_ir_const(g, acc, 0, od, 2), 2, 0, bag,
                              tpu_ir_select(g, valid2, rows, tpu_ir_const(g, acc, 0, ld, 2)),
                              TPU_BODY_ADD);
      if (mode == EB_MEAN) {
        tpu_val_t n = tpu_ir_binary(g, TPU_IR_MAX, count, tpu_ir_const_i(g, TPU_I64, 1, &nb, 1));
        out = tpu_ir_binary(g, TPU_IR_DIV, out,
                            tpu_ir_broadcast(g, tpu_ir_convert(g, n, acc), od, 2, &b0));
      }
    } else {
      tpu_val_t ninf = tpu_ir_const(g, acc, -INFINITY, ld, 2);
      tpu_val_t bmax = tpu_scatter_along(g, tpu_ir_const(g, acc, -INFINITY, od, 2), 2, 0, bag,
                                         tpu_ir_select(g, valid2, rows, ninf), TPU_BODY_MAX);
      // the first position of each bag and column that reaches the maximum
      tpu_val_t hit =
          tpu_ir_binary(g, TPU_IR_AND, valid2,
                        tpu_ir_compare(g, TPU_CMP_EQ, rows, tpu_gather_rows(g, bmax, bag, 1, d)));
      tpu_val_t pos = tpu_ir_select(g, hit, tpu_ir_iota(g, TPU_I64, ld, 2, 0),
                                    tpu_ir_const_i(g, TPU_I64, l, ld, 2));
      tpu_val_t first =
          tpu_scatter_along(g, tpu_ir_const_i(g, TPU_I64, l, od, 2), 2, 0, bag, pos, TPU_BODY_MIN);
      tpu_val_t has = tpu_ir_compare(g, TPU_CMP_LT, first, tpu_ir_const_i(g, TPU_I64, l, od, 2));
      out = tpu_ir_select(g, has, bmax, tpu_ir_const(g, acc, 0, od, 2));
      tpu_val_t at = tpu_ir_binary(g, TPU_IR_MIN, first, tpu_ir_const_i(g, TPU_I64, l - 1, od, 2));
      maxidx = tpu_ir_select(g, has, tpu_gather_flat(g, idx, at, 2),
                             tpu_ir_const_i(g, TPU_I64, 0, od, 2));
    }
  }
  tpu_lower_out(cx, 0, tpu_ir_convert(g, out, t));
  tpu_lower_out(cx, 1, fast_sum ? tpu_ir_const_i(g, ot, 0, &zero_len, 1) : tpu_ir_convert(g, bag, ot));
  if (mode == EB_SUM) {
    int64_t* ph = forward_only ? &o : &nb;
    tpu_lower_out(cx, 2, tpu_ir_const_i(g, ot, 0, ph, 1));
    tpu_lower_out(cx, 3, tpu_ir_const_i(g, ot, 0, ph, 1));
  } else {
    tpu_lower_out(cx, 2, tpu_ir_convert(g, count, ot));
    // (mean mode: CPU's max_indices holds a copy of bag_size)
    tpu_lower_out(cx, 3, tpu_ir_convert(g, mode == EB_MAX ? maxidx : count, ot));
  }
  return TPU_OK;
}

tpu_status_t tpu_lower_embedding_bag(tpu_lower_ctx_t* cx) { return embedding_bag(cx, false); }
tpu_status_t tpu_lower_embedding_bag_forward_only(tpu_lower_ctx_t* cx) {
  return embedding_bag(cx, true);
}


// Argument positions of the two backward forms.
typedef struct eb_bwd_args {
  int grad, indices, offsets, offset2bag, bag_size, max_indices, num_weights, freq, mode, psw,
      pad;
} eb_bwd_args_t;

static tpu_status_t eb_backward(tpu_lower_ctx_t* cx, const eb_bwd_args_t* a) {
  tpu_graph_t* g = cx->g;
  int64_t v = tpu_arg_int(cx, a->num_weights, 0), mode = tpu_arg_int(cx, a->mode, 0);
  int64_t pad = tpu_arg_int(cx, a->pad, -1);
  bool freq = tpu_arg_bool(cx, a->freq, false), has_psw = tpu_arg_present(cx, a->psw);
  if (tpu_arg_rank(cx, a->grad) != 2 || tpu_arg_rank(cx, a->indices) != 1)
    return TPU_LOWER_ERROR(TPU_CODE_INVALID_ARGUMENT,
                           "embedding_bag backward: expected 2-D grad and 1-D indices");
  const int64_t* gd = tpu_arg_sizes(cx, a->grad);
  int64_t nb = gd[0], d = gd[1], l = tpu_arg_sizes(cx, a->indices)[0];
  tpu_dtype_t t = tpu_arg_value_dtype(cx, a->grad), acc = tpu_opmath(t);
  int64_t wd[2] = {v, d}, ld[2] = {l, d};
  static const int64_t b0 = 0;
  tpu_val_t gw = tpu_ir_const(g, acc, 0, wd, 2);
  if (v == 0 || d == 0 || nb == 0 || (mode != EB_MAX && l == 0)) {
    tpu_lower_out(cx, 0, tpu_ir_convert(g, gw, t));
    return TPU_OK;
  }
  tpu_val_t grad = tpu_lower_input(cx, a->grad, acc);
  if (mode == EB_MAX) {
    // each bag's maximum row per column gets that column's gradient
    if (tpu_arg_rank(cx, a->max_indices) != 2 || tpu_arg_rank(cx, a->bag_size) != 1 ||
        tpu_arg_sizes(cx, a->bag_size)[0] != nb)
      return TPU_LOWER_ERROR(TPU_CODE_INVALID_ARGUMENT,
                             "embedding_bag backward: expected 2-D maximum_indices and a bag "
                             "size per bag");
    tpu_val_t mi = tpu_ir_convert(g, tpu_lower_tensor(cx, a->max_indices), TPU_I64);
    tpu_val_t nonempty =
        tpu_ir_compare(g, TPU_CMP_NE, tpu_ir_convert(g, tpu_lower_tensor(cx, a->bag_size), TPU_I64),
                       tpu_ir_const_i(g, TPU_I64, 0, &nb, 1));
    int64_t od[2] = {nb, d};
    tpu_val_t upd = tpu_ir_select(g, tpu_ir_broadcast(g, nonempty, od, 2, &b0), grad,
                                  tpu_ir_const(g, acc, 0, od, 2));
    gw = tpu_scatter_points(g, gw, tpu_ir_reshape(g, mi, od, 2),
                            tpu_ir_iota(g, TPU_I64, od, 2, 1), upd, TPU_BODY_ADD);
    tpu_lower_out(cx, 0, tpu_ir_convert(g, gw, t));
    return TPU_OK;
  }
  tpu_val_t idx = eb_indices(cx, a->indices, l, v);
  int64_t o2b = tpu_numel(tpu_arg_sizes(cx, a->offset2bag), tpu_arg_rank(cx, a->offset2bag));
  tpu_val_t bag;
  if (o2b == 0 && a->offsets >= 0) {
    // CPU's fast sum path left offset2bag empty: rebuilt from the offsets
    if (tpu_arg_rank(cx, a->offsets) != 1)
      return TPU_LOWER_ERROR(TPU_CODE_INVALID_ARGUMENT, "offsets has to be a 1D Tensor");
    int64_t o = tpu_arg_sizes(cx, a->offsets)[0];
    bag = eb_offset2bag(g, tpu_ir_convert(g, tpu_lower_tensor(cx, a->offsets), TPU_I64), o, o, l);
  } else {
    if (o2b != l)
      return TPU_LOWER_ERROR(TPU_CODE_INVALID_ARGUMENT,
                             "embedding_bag backward: offset2bag must match the indices");
    bag = tpu_ir_reshape(g, tpu_ir_convert(g, tpu_lower_tensor(cx, a->offset2bag), TPU_I64), &l, 1);
  }
  tpu_val_t scale = tpu_ir_const(g, acc, 1, &l, 1);
  if (has_psw) scale = tpu_ir_binary(g, TPU_IR_MUL, scale, tpu_lower_input(cx, a->psw, acc));
  if (mode == EB_MEAN) {
    tpu_val_t bs =
        tpu_gather_flat(g, tpu_ir_convert(g, tpu_lower_tensor(cx, a->bag_size), acc), bag, 1);
    tpu_val_t z = tpu_ir_const(g, acc, 0, &l, 1);
    scale = tpu_ir_select(g, tpu_ir_compare(g, TPU_CMP_NE, bs, z),
                          tpu_ir_binary(g, TPU_IR_DIV, scale, bs), scale);
  }
  if (freq) {
    tpu_val_t counts = tpu_scatter_flat(g, tpu_ir_const(g, acc, 0, &v, 1), idx,
                                        tpu_ir_const(g, acc, 1, &l, 1), 1, TPU_BODY_ADD);
    scale = tpu_ir_binary(g, TPU_IR_DIV, scale, tpu_gather_flat(g, counts, idx, 1));
  }
  scale = tpu_ir_select(g, eb_valid(g, idx, l, pad), scale, tpu_ir_const(g, acc, 0, &l, 1));
  tpu_val_t rows = tpu_ir_binary(g, TPU_IR_MUL, tpu_gather_rows(g, grad, bag, 1, d),
                                 tpu_ir_broadcast(g, scale, ld, 2, &b0));
  gw = tpu_scatter_along(g, gw, 2, 0, idx, rows, TPU_BODY_ADD);
  tpu_lower_out(cx, 0, tpu_ir_convert(g, gw, t));
  return TPU_OK;
}

// _embedding_bag_dense_backward(Tensor grad, Tensor indices, Tensor offset2bag,
//   Tensor bag_size, Tensor maximum_indices, SymInt num_weights,
//   bool scale_grad_by_freq, int mode, Tensor? per_sample_weights,
//   int padding_idx=-1)
tpu_status_t tpu_lower_embedding_bag_dense_backward(tpu_lower_ctx_t* cx) {
  static const eb_bwd_args_t a = {0, 1, -1, 2, 3, 4, 5, 6, 7, 8, 9};
  return eb_backward(cx, &a);
}

// _embedding_bag_backward(Tensor grad, Tensor indices, Tensor offsets,
//   Tensor offset2bag, Tensor bag_size, Tensor maximum_indices,
//   SymInt num_weights, bool scale_grad_by_freq, int mode, bool sparse,
//   Tensor? per_sample_weights, int padding_idx=-1): the dense gradient; a
// sparse one is not supported on this device.
tpu_status_t tpu_lower_embedding_bag_backward(tpu_lower_ctx_t* cx) {
  static const eb_bwd_args_t a = {0, 1, 2, 3, 4, 5, 6, 7, 8, 10, 11};
  if (tpu_arg_bool(cx, 9, false))
    return TPU_LOWER_ERROR(TPU_CODE_UNIMPLEMENTED,
                           "embedding_bag: sparse gradients are not supported on tpu");
  return eb_backward(cx, &a);
}

// _embedding_bag_per_sample_weights_backward(Tensor grad, Tensor weight,
//   Tensor indices, Tensor offsets, Tensor offset2bag, int mode,
//   int padding_idx=-1): each index's grad row dotted with its weight row.
tpu_status_t tpu_lower_embedding_bag_psw_backward(tpu_lower_ctx_t* cx) {
  tpu_graph_t* g = cx->g;
  if (tpu_arg_int(cx, 5, 0) != EB_SUM)
    return TPU_LOWER_ERROR(TPU_CODE_INVALID_ARGUMENT,
                           "embedding_bag_backward: Currently only support mode='sum' for "
                           "per_sample_weights.");
  TPU_RETURN_IF_ERROR(eb_check_weight(cx, 1));
  if (tpu_arg_rank(cx, 0) != 2 || tpu_arg_rank(cx, 2) != 1 || tpu_arg_rank(cx, 3) != 1)
    return TPU_LOWER_ERROR(TPU_CODE_INVALID_ARGUMENT,
                           "embedding_bag_backward: expected 2-D grad, 1-D indices and offsets");
  int64_t pad = tpu_arg_int(cx, 6, -1);
  const int64_t* wd = tpu_arg_sizes(cx, 1);
  int64_t v = wd[0], d = wd[1], l = tpu_arg_sizes(cx, 2)[0], o = tpu_arg_sizes(cx, 3)[0];
  int64_t nb = tpu_arg_sizes(cx, 0)[0];
  int64_t o2b = tpu_numel(tpu_arg_sizes(cx, 4), tpu_arg_rank(cx, 4));
  tpu_dtype_t t = tpu_arg_value_dtype(cx, 0), acc = tpu_opmath(t);
  if (l == 0 || d == 0 || nb == 0 || v == 0) {
    tpu_lower_out(cx, 0, tpu_ir_const(g, t, 0, &l, 1));
    return TPU_OK;
  }
  tpu_val_t idx = eb_indices(cx, 2, l, v);
  tpu_val_t bag = o2b == 0 ? eb_offset2bag(g, tpu_ir_convert(g, tpu_lower_tensor(cx, 3), TPU_I64),
                                           o, o, l)
                           : tpu_ir_convert(g, tpu_lower_tensor(cx, 4), TPU_I64);
  tpu_val_t prodv =
      tpu_ir_binary(g, TPU_IR_MUL, tpu_gather_rows(g, tpu_lower_input(cx, 0, acc), bag, 1, d),
                    tpu_gather_rows(g, tpu_lower_input(cx, 1, acc), idx, 1, d));
  static const int64_t over_d = 1;
  tpu_val_t r = tpu_ir_reduce(g, prodv, tpu_ir_const(g, acc, 0, NULL, 0), &over_d, 1, TPU_BODY_ADD);
  r = tpu_ir_select(g, eb_valid(g, idx, l, pad), r, tpu_ir_const(g, acc, 0, &l, 1));
  tpu_lower_out(cx, 0, tpu_ir_convert(g, r, t));
  return TPU_OK;
}
