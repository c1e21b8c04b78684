// Scans: cumsum and cumprod, and the scan other lowerings build on
// (tpu_lower_scan). Integer and bool inputs accumulate in int64, as in
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
