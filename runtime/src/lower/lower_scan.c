// Scans: cumsum, cumprod, cummax and cummin, and the scan other lowerings
// build on (tpu_lower_scan). Integer and bool inputs accumulate in int64, as in
// PyTorch's sums (lower_reduce.c).
#include <string.h>

#include "lower/lower.h"

// Elements one block scans on its own. Each output of a block combines up to
// SCAN_BLOCK inputs, so the work is SCAN_BLOCK steps per element; each level
// of blocks divides the length by SCAN_BLOCK (5 levels for 2^20 elements).
enum { SCAN_BLOCK = 16 };

// The inclusive scan of each block of x ([outer, blocks, size, inner]) along
// axis 2: output j reduces the inputs i <= j, the others masked to the
// identity. Written as a reduce of a masked broadcast, which XLA's CPU
// backend fuses with what reads the result; a reduce_window (its own
// kernel there) kept a full-size buffer, and so did each of the log2(n)
// shifted adds of a Hillis-Steele scan (about 20x the input in all).
static tpu_val_t scan_within_blocks(tpu_graph_t* g, tpu_val_t x, tpu_body_t body, tpu_val_t id) {
  const int64_t* d = tpu_ir_dims(g, x);
  int64_t size = d[2];
  int64_t pairs[5] = {d[0], d[1], size, size, d[3]}, from_x[4] = {0, 1, 3, 4};
  int64_t square[2] = {size, size}, from_mask[2] = {2, 3}, summed = 3;
  tpu_val_t in_prefix = tpu_ir_compare(g, TPU_CMP_LE, tpu_ir_iota(g, TPU_I32, square, 2, 1),
                                       tpu_ir_iota(g, TPU_I32, square, 2, 0));  // [j, i]: i <= j
  tpu_val_t terms = tpu_ir_select(g, tpu_ir_broadcast(g, in_prefix, pairs, 5, from_mask),
                                  tpu_ir_broadcast(g, x, pairs, 5, from_x),
                                  tpu_ir_broadcast(g, id, pairs, 5, NULL));
  return tpu_ir_reduce(g, terms, id, &summed, 1, body);
}

// The scan of x viewed as [outer, len, inner] along its middle axis: the
// axis, padded with the identity to whole blocks, becomes [blocks, size];
// each block is scanned on its own, the block totals are scanned the same
// way (recursively), and each block is combined with the total of the
// blocks before it. Scratch: the totals, 1/SCAN_BLOCK of the input per level.
static tpu_val_t blocked_scan(tpu_graph_t* g, tpu_val_t x, tpu_body_t body, tpu_val_t id) {
  const int64_t* d = tpu_ir_dims(g, x);
  int64_t outer = d[0], len = d[1], inner = d[2];
  if (len <= 1) return x;
  int64_t size = len < SCAN_BLOCK ? len : SCAN_BLOCK;
  int64_t blocks = (len + size - 1) / size, whole = blocks * size;
  int64_t start[3] = {0, 0, 0}, none[3] = {0, 0, 0}, tail[3] = {0, whole - len, 0};
  int64_t split[4] = {outer, blocks, size, inner};
  tpu_val_t padded = whole > len ? tpu_ir_pad(g, x, id, none, tail, NULL) : x;
  tpu_val_t xb = tpu_ir_reshape(g, padded, split, 4);
  tpu_val_t r = scan_within_blocks(g, xb, body, id);
  if (blocks > 1) {
    // The block totals ([outer, blocks, inner]) come from the input rather
    // than from r's last column, so that r stays fused into the combine
    // below. A padded input read twice became a full-size buffer, so then
    // they are a strided reduce_window, which pads on its own.
    int64_t block_axis = 2;
    tpu_window_t w;
    memset(&w, 0, sizeof w);
    for (int i = 0; i < 3; ++i)
      w.dims[i] = w.strides[i] = w.base_dilations[i] = w.window_dilations[i] = 1;
    w.dims[1] = w.strides[1] = size;
    w.pad_hi[1] = whole - len;
    tpu_val_t totals = whole > len ? tpu_ir_reduce_window(g, x, id, &w, body)
                                   : tpu_ir_reduce(g, xb, id, &block_axis, 1, body);
    tpu_val_t upto = blocked_scan(g, totals, body, id);
    // Exclusive: block b gets the totals of blocks 0..b-1 (the identity for 0).
    int64_t limit[3] = {outer, blocks - 1, inner}, shift[3] = {0, 1, 0}, kept[3] = {0, 1, 3};
    tpu_val_t before = tpu_ir_pad(g, tpu_ir_slice(g, upto, start, limit, NULL), id, shift,
                                  none, NULL);
    r = tpu_ir_binary(g, body == TPU_BODY_MUL ? TPU_IR_MUL : TPU_IR_ADD,
                      tpu_ir_broadcast(g, before, split, 4, kept), r);
  }
  int64_t joined[3] = {outer, whole, inner}, end[3] = {outer, len, inner};
  r = tpu_ir_reshape(g, r, joined, 3);
  return whole > len ? tpu_ir_slice(g, r, start, end, NULL) : r;
}

tpu_val_t tpu_lower_scan(tpu_lower_ctx_t* cx, tpu_val_t x, int dim, tpu_ir_op_t op,
                         double identity) {
  tpu_graph_t* g = cx->g;
  if (!tpu_graph_ok(g)) return x;
  tpu_type_t shape = *tpu_ir_type(g, x);
  int64_t outer = 1, inner = 1;
  for (int i = 0; i < dim; ++i) outer *= shape.dims[i];
  for (int i = dim + 1; i < shape.rank; ++i) inner *= shape.dims[i];
  int64_t flat[3] = {outer, shape.dims[dim], inner};
  tpu_val_t id = tpu_ir_const(g, shape.dtype, identity, NULL, 0);
  tpu_body_t body = op == TPU_IR_MUL ? TPU_BODY_MUL : TPU_BODY_ADD;
  tpu_val_t r = blocked_scan(g, tpu_ir_reshape(g, x, flat, 3), body, id);
  return tpu_ir_reshape(g, r, shape.dims, shape.rank);
}

// cumsum / cumprod(self, dim, *, dtype=None)
static tpu_status_t cumulative(tpu_lower_ctx_t* cx, bool is_prod) {
  tpu_dtype_t in = tpu_arg_value_dtype(cx, 0);
  tpu_dtype_t out = tpu_dtype_is_integral(in, true) ? TPU_I64 : in;
  out = tpu_arg_dtype(cx, 2, tpu_lower_out_dtype(cx, 0, out));  // as in accumulate()
  if (out == TPU_BOOL)  // CPU's and CUDA's scans have no bool kernel
    return tpu_not_implemented(is_prod ? "cumprod" : "cumsum", out);
  int rank = tpu_arg_rank(cx, 0);
  int64_t dim;
  TPU_RETURN_IF_ERROR(tpu_wrap_dim(tpu_arg_int(cx, 1, 0), rank, &dim));
  tpu_dtype_t acc = tpu_opmath(out);
  // The input becomes the result's dtype first, as CPU's self.to(dtype):
  // cumsum(dtype=torch.bfloat16) of float32 adds the rounded values.
  tpu_val_t x = tpu_ir_convert(cx->g, tpu_lower_input(cx, 0, out), acc);
  if (rank > 0)
    x = tpu_lower_scan(cx, x, (int)dim, is_prod ? TPU_IR_MUL : TPU_IR_ADD, is_prod ? 1 : 0);
  tpu_lower_out(cx, 0, tpu_ir_convert(cx->g, x, out));
  return TPU_OK;
}

tpu_status_t tpu_lower_cumsum(tpu_lower_ctx_t* cx) { return cumulative(cx, false); }
tpu_status_t tpu_lower_cumprod(tpu_lower_ctx_t* cx) { return cumulative(cx, true); }

//===--- cummax, cummin ---===//

// A value and its index, as an ARGMAX_LAST (ARGMIN_LAST) reduce body orders
// them: a NaN first, then the larger (smaller) value, then the higher index.
typedef struct pair {
  tpu_val_t v, k;
} pair_t;

static pair_t reduce_pairs(tpu_graph_t* g, pair_t x, pair_t id, int64_t axis, tpu_body_t body) {
  tpu_val_t node = tpu_ir_reduce_arg(g, x.v, x.k, id.v, id.k, axis, body);
  pair_t r = {tpu_ir_result(g, node, 0), tpu_ir_result(g, node, 1)};
  return r;
}

static pair_t pad_pairs(tpu_graph_t* g, pair_t x, pair_t id, const int64_t* lo,
                        const int64_t* hi) {
  pair_t r = {tpu_ir_pad(g, x.v, id.v, lo, hi, NULL), tpu_ir_pad(g, x.k, id.k, lo, hi, NULL)};
  return r;
}

// The totals [outer, blocks, inner] of x's blocks (xb: x padded to whole
// blocks, [outer, blocks, size, inner]). The padded input, read here and by
// the scan of the blocks, became a full-size buffer; so a padded tail's
// total is reduced on its own, from x.
static pair_t block_totals(tpu_graph_t* g, pair_t x, pair_t xb, pair_t id, tpu_body_t body) {
  const int64_t *d = tpu_ir_dims(g, x.v), *db = tpu_ir_dims(g, xb.v);
  int64_t outer = d[0], len = d[1], inner = d[2], blocks = db[1], size = db[2];
  if (blocks * size == len) return reduce_pairs(g, xb, id, 2, body);
  int64_t full = (blocks - 1) * size;  // blocks > 1: at least one whole block
  int64_t start[3] = {0, 0, 0}, limit[3] = {outer, full, inner}, from[3] = {0, full, 0},
          end[3] = {outer, len, inner}, split[4] = {outer, blocks - 1, size, inner},
          one[3] = {outer, 1, inner};
  pair_t head = {tpu_ir_reshape(g, tpu_ir_slice(g, x.v, start, limit, NULL), split, 4),
                 tpu_ir_reshape(g, tpu_ir_slice(g, x.k, start, limit, NULL), split, 4)};
  pair_t rest = {tpu_ir_slice(g, x.v, from, end, NULL), tpu_ir_slice(g, x.k, from, end, NULL)};
  head = reduce_pairs(g, head, id, 2, body);
  rest = reduce_pairs(g, rest, id, 1, body);
  tpu_val_t v[2] = {head.v, tpu_ir_reshape(g, rest.v, one, 3)};
  tpu_val_t k[2] = {head.k, tpu_ir_reshape(g, rest.k, one, 3)};
  pair_t r = {tpu_ir_concat(g, v, 2, 1), tpu_ir_concat(g, k, 2, 1)};
  return r;
}

// blocked_scan for pairs ([outer, len, inner]) under an ARGMAX_LAST /
// ARGMIN_LAST body. A two-result reduce is not fused with what reads it
// (XLA's CPU backend), so the reduce that scans the blocks gives the
// results themselves: the total of the blocks before each block joins the
// block's terms as one more term, rather than a combine after the reduce,
// and a padded tail is cut from the terms, not from the results (a copy).
static pair_t blocked_pair_scan(tpu_graph_t* g, pair_t x, tpu_body_t body, pair_t id) {
  if (!tpu_graph_ok(g)) return x;
  const int64_t* d = tpu_ir_dims(g, x.v);
  int64_t outer = d[0], len = d[1], inner = d[2];
  if (len <= 1) return x;
  int64_t size = len < SCAN_BLOCK ? len : SCAN_BLOCK;
  int64_t blocks = (len + size - 1) / size, whole = blocks * size;
  int64_t start[4] = {0, 0, 0, 0}, none[3] = {0, 0, 0}, tail[3] = {0, whole - len, 0};
  int64_t split[4] = {outer, blocks, size, inner};
  pair_t padded = whole > len ? pad_pairs(g, x, id, none, tail) : x;
  pair_t xb = {tpu_ir_reshape(g, padded.v, split, 4), tpu_ir_reshape(g, padded.k, split, 4)};
  // Terms [outer, blocks, j, i, inner]: input i of the block for output j
  // when i <= j, else the identity.
  int64_t pairs[5] = {outer, blocks, size, size, inner}, from_x[4] = {0, 1, 3, 4};
  int64_t square[2] = {size, size}, from_mask[2] = {2, 3};
  tpu_val_t in_prefix = tpu_ir_broadcast(
      g, tpu_ir_compare(g, TPU_CMP_LE, tpu_ir_iota(g, TPU_I32, square, 2, 1),
                        tpu_ir_iota(g, TPU_I32, square, 2, 0)), pairs, 5, from_mask);
  pair_t terms = {
      tpu_ir_select(g, in_prefix, tpu_ir_broadcast(g, xb.v, pairs, 5, from_x),
                    tpu_ir_broadcast(g, id.v, pairs, 5, NULL)),
      tpu_ir_select(g, in_prefix, tpu_ir_broadcast(g, xb.k, pairs, 5, from_x),
                    tpu_ir_broadcast(g, id.k, pairs, 5, NULL))};
  int64_t n_terms = size;
  if (blocks > 1) {
    pair_t upto = blocked_pair_scan(g, block_totals(g, x, xb, id, body), body, id);
    // Exclusive: block b gets the totals of blocks 0..b-1 (the identity for 0).
    int64_t limit[3] = {outer, blocks - 1, inner}, shift[3] = {0, 1, 0};
    pair_t before = {tpu_ir_slice(g, upto.v, start, limit, NULL),
                     tpu_ir_slice(g, upto.k, start, limit, NULL)};
    before = pad_pairs(g, before, id, shift, none);
    int64_t one[5] = {outer, blocks, size, 1, inner}, kept[3] = {0, 1, 4};
    tpu_val_t v[2] = {tpu_ir_broadcast(g, before.v, one, 5, kept), terms.v};
    tpu_val_t k[2] = {tpu_ir_broadcast(g, before.k, one, 5, kept), terms.k};
    terms.v = tpu_ir_concat(g, v, 2, 3);
    terms.k = tpu_ir_concat(g, k, 2, 3);
    ++n_terms;
  }
  // [outer, len, terms, inner]: the outputs' places joined, the tail cut.
  int64_t joined[4] = {outer, whole, n_terms, inner}, end[4] = {outer, len, n_terms, inner};
  terms.v = tpu_ir_reshape(g, terms.v, joined, 4);
  terms.k = tpu_ir_reshape(g, terms.k, joined, 4);
  if (whole > len) {
    terms.v = tpu_ir_slice(g, terms.v, start, end, NULL);
    terms.k = tpu_ir_slice(g, terms.k, start, end, NULL);
  }
  return reduce_pairs(g, terms, id, 2, body);
}

// _cummax_helper / _cummin_helper(self, values, indices, dim): the running
// max (min) and the index where it was taken. CPU's loop takes a later
// element on ties and any NaN (the latest NaN), and keeps a NaN once seen:
// the order of the ARGMAX_LAST (ARGMIN_LAST) body, which is associative.
static tpu_status_t cum_extreme(tpu_lower_ctx_t* cx, bool is_max) {
  tpu_dtype_t t = tpu_arg_value_dtype(cx, 0);
  if (tpu_dtype_is_complex(t)) return tpu_not_implemented(is_max ? "cummax_cpu" : "cummin_cpu", t);
  int rank = tpu_arg_rank(cx, 0);
  int64_t dim;
  TPU_RETURN_IF_ERROR(tpu_wrap_dim(tpu_arg_int(cx, 3, 0), rank, &dim));
  tpu_graph_t* g = cx->g;
  tpu_val_t v = tpu_lower_tensor(cx, 0);
  if (rank == 0) {
    tpu_lower_out(cx, 0, v);
    tpu_lower_out(cx, 1, tpu_ir_const_i(g, TPU_I64, 0, NULL, 0));
    return TPU_OK;
  }
  const int64_t* sizes = tpu_arg_sizes(cx, 0);
  int64_t flat[3] = {1, sizes[dim], 1};
  for (int i = 0; i < dim; ++i) flat[0] *= sizes[i];
  for (int i = (int)dim + 1; i < rank; ++i) flat[2] *= sizes[i];
  tpu_dtype_t vt = t == TPU_BOOL ? TPU_U8 : t;  // the body's order is for numbers
  pair_t x = {tpu_ir_convert(g, tpu_ir_reshape(g, v, flat, 3), vt),
              tpu_ir_iota(g, TPU_I64, flat, 3, 1)};
  // The identity loses to every element, even one of the identity's value.
  pair_t id = {tpu_lower_extreme(g, vt, !is_max), tpu_ir_const_i(g, TPU_I64, -1, NULL, 0)};
  pair_t r = blocked_pair_scan(g, x, is_max ? TPU_BODY_ARGMAX_LAST : TPU_BODY_ARGMIN_LAST, id);
  tpu_lower_out(cx, 0, tpu_ir_reshape(g, tpu_ir_convert(g, r.v, t), sizes, rank));
  tpu_lower_out(cx, 1, tpu_ir_reshape(g, r.k, sizes, rank));
  return TPU_OK;
}

tpu_status_t tpu_lower_cummax(tpu_lower_ctx_t* cx) { return cum_extreme(cx, true); }
tpu_status_t tpu_lower_cummin(tpu_lower_ctx_t* cx) { return cum_extreme(cx, false); }
