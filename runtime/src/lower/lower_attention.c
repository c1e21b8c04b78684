// Attention: F.scaled_dot_product_attention as one fused program forward and
// one backward, the _safe_softmax of its math path, and the _masked_softmax
// and _transform_bias_rescale_qkv of nn.MultiheadAttention's inference fast
// path (binding/attention.cpp).
//
// PyTorch asks the device which SDPA kernel to use (_fused_sdp_choice); the
// binding (binding/attention.cpp) answers "overrideable" for 4-D inputs
// without dropout and calls the `sdpa` row for
// _scaled_dot_product_fused_attention_overrideable, whose autograd formula
// calls ..._overrideable_backward (the `sdpa_backward` row). Everything else
// (dropout, other ranks) takes PyTorch's math decomposition, whose softmax is
// _safe_softmax.
//
// Shapes: query (B, Hq, L, E), key (B, Hkv, S, E), value (B, Hkv, S, Ev);
// Hq is a multiple of Hkv (grouped-query attention: query head h reads key
// head h / G, G = Hq / Hkv). The lowering views the query side as
// (B, Hkv, G * L, .), a free reshape, so that every product is a plain
// batched matmul over (B, Hkv) with one contracting dim (the form XLA's CPU
// and TPU backends map to their fast matmuls) and the key and value heads are
// never repeated in memory. Half-precision inputs are computed in float and
// rounded once (opmath); the logsumexp the backward reads stays in float.
#include <math.h>
#include <string.h>

#include "lower/lower.h"

//===--- helpers ---===//

typedef struct sdpa_shape {
  int64_t b, hq, hkv, grp, l, s, e, ev;
} sdpa_shape_t;

static tpu_status_t invalid(const char* msg) {
  return tpu_status_make(TPU_CODE_INVALID_ARGUMENT, "%s", msg);
}

// Checks query/key/value (arguments q, q+1, q+2) and reads their sizes.
static tpu_status_t sdpa_shape(tpu_lower_ctx_t* cx, int q, sdpa_shape_t* sh) {
  for (int i = 0; i < 3; ++i)
    if (tpu_arg_rank(cx, q + i) != 4)
      return invalid("scaled_dot_product_attention: expected query, key and value to be 4-D "
                     "(batch, heads, sequence, head dim)");
  tpu_dtype_t t = tpu_arg_value_dtype(cx, q);
  if (tpu_arg_value_dtype(cx, q + 1) != t || tpu_arg_value_dtype(cx, q + 2) != t)
    return invalid("Expected query, key, and value to have the same dtype");
  if (!tpu_dtype_is_float(t))
    return invalid("scaled_dot_product_attention: expected floating point query, key and value");
  const int64_t *qs = tpu_arg_sizes(cx, q), *ks = tpu_arg_sizes(cx, q + 1),
                *vs = tpu_arg_sizes(cx, q + 2);
  sh->b = qs[0], sh->hq = qs[1], sh->l = qs[2], sh->e = qs[3];
  sh->hkv = ks[1], sh->s = ks[2], sh->ev = vs[3];
  if (ks[0] != sh->b || vs[0] != sh->b || vs[1] != sh->hkv)
    return invalid("scaled_dot_product_attention: expected query, key and value to have the "
                   "same batch size, and key and value the same number of heads");
  if (ks[3] != sh->e || vs[2] != sh->s)
    return invalid("scaled_dot_product_attention: key must have the head dim of query and "
                   "the sequence length of value");
  if (sh->hkv <= 0 || sh->hq % sh->hkv != 0)
    return invalid("number of heads in key/value must divide number of heads in query");
  sh->grp = sh->hq / sh->hkv;
  return TPU_OK;
}

// The softmax scale: the given one, else 1 / sqrt(head dim).
static double sdpa_scale(tpu_lower_ctx_t* cx, int arg, const sdpa_shape_t* sh) {
  return tpu_arg_present(cx, arg) ? tpu_arg_float(cx, arg, 0.0) : 1.0 / sqrt((double)sh->e);
}

static tpu_val_t reduce_last(tpu_lower_ctx_t* cx, tpu_val_t x, tpu_dtype_t t, tpu_body_t body) {
  int rank = tpu_ir_rank(cx->g, x);
  int64_t dim = rank - 1;
  tpu_val_t init = tpu_ir_const(cx->g, t, body == TPU_BODY_MAX ? -INFINITY : 0.0, NULL, 0);
  return tpu_ir_reduce(cx->g, x, init, &dim, 1, body);
}

// A (d0..dn-1) value broadcast along a new last dim of size `n`.
static tpu_val_t spread_last(tpu_lower_ctx_t* cx, tpu_val_t x, int64_t n) {
  const tpu_type_t* t = tpu_ir_type(cx->g, x);
  int64_t dims[TPU_MAX_RANK], bdims[TPU_MAX_RANK];
  for (int i = 0; i < t->rank; ++i) dims[i] = t->dims[i], bdims[i] = i;
  dims[t->rank] = n;
  return tpu_ir_broadcast(cx->g, x, dims, t->rank + 1, bdims);
}

// A batched matmul over (B, Hkv) contracting dim ac of a with dim bc of b.
static tpu_val_t dot(tpu_lower_ctx_t* cx, tpu_val_t a, tpu_val_t b, int64_t ac, int64_t bc,
                     tpu_dtype_t t) {
  tpu_dot_dims_t dn;
  memset(&dn, 0, sizeof dn);
  dn.n_batch = 2;
  dn.lhs_batch[0] = dn.rhs_batch[0] = 0;
  dn.lhs_batch[1] = dn.rhs_batch[1] = 1;
  dn.n_contract = 1;
  dn.lhs_contract[0] = ac;
  dn.rhs_contract[0] = bc;
  return tpu_ir_dot(cx->g, a, b, &dn, t);
}

// Argument i (B, Hq, L, X) in `t`, viewed as (B, Hkv, G * L, X).
static tpu_val_t grouped(tpu_lower_ctx_t* cx, int i, const sdpa_shape_t* sh, tpu_dtype_t t) {
  int64_t dims[4] = {sh->b, sh->hkv, sh->grp * sh->l, tpu_arg_sizes(cx, i)[3]};
  return tpu_ir_reshape(cx->g, tpu_lower_input(cx, i, t), dims, 4);
}

// The scaled, masked scores (B, Hkv, G * L, S) in `t`: scale * q k^T + bias,
// -inf above the diagonal when causal (top-left aligned, as PyTorch's
// is_causal). `bias` is the argument index of attn_bias (absent: no bias).
static tpu_status_t scores(tpu_lower_ctx_t* cx, const sdpa_shape_t* sh, tpu_val_t q,
                           tpu_val_t k, int bias, bool causal, double scale, tpu_dtype_t t,
                           tpu_val_t* out) {
  tpu_graph_t* g = cx->g;
  tpu_val_t s = dot(cx, q, k, 3, 3, t);
  int64_t dims[4] = {sh->b, sh->hkv, sh->grp * sh->l, sh->s};
  tpu_val_t sc = tpu_ir_broadcast(g, tpu_lower_number(cx, scale, t), dims, 4, NULL);
  s = tpu_ir_binary(g, TPU_IR_MUL, s, sc);
  if (tpu_arg_present(cx, bias)) {
    int rank = tpu_arg_rank(cx, bias);
    const int64_t* bs = tpu_arg_sizes(cx, bias);
    int64_t full[4] = {sh->b, sh->hq, sh->l, sh->s};
    if (rank > 4) return invalid("scaled_dot_product_attention: attn_mask has too many dims");
    for (int i = 0; i < rank; ++i)
      if (bs[i] != 1 && bs[i] != full[4 - rank + i])
        return invalid("scaled_dot_product_attention: attn_mask is not broadcastable to "
                       "(batch, heads, query length, key length)");
    tpu_val_t b = tpu_lower_expand(cx, tpu_lower_input(cx, bias, t), full, 4);
    s = tpu_ir_binary(g, TPU_IR_ADD, s, tpu_ir_reshape(g, b, dims, 4));
  }
  if (causal) {  // an (L, S) mask, the same for every (B, Hkv, G)
    int64_t ls[2] = {sh->l, sh->s}, five[5] = {sh->b, sh->hkv, sh->grp, sh->l, sh->s};
    int64_t bd[2] = {3, 4};
    tpu_val_t keep = tpu_ir_compare(g, TPU_CMP_LE, tpu_ir_iota(g, TPU_I64, ls, 2, 1),
                                    tpu_ir_iota(g, TPU_I64, ls, 2, 0));
    keep = tpu_ir_reshape(g, tpu_ir_broadcast(g, keep, five, 5, bd), dims, 4);
    s = tpu_ir_select(g, keep, s, tpu_ir_const(g, t, -INFINITY, dims, 4));
  }
  *out = s;
  return TPU_OK;
}

// x where x is finite-or-+inf, 0 where x == -inf (a fully masked row).
static tpu_val_t zero_if_neg_inf(tpu_lower_ctx_t* cx, tpu_val_t x, tpu_dtype_t t) {
  tpu_graph_t* g = cx->g;
  const tpu_type_t* ty = tpu_ir_type(g, x);
  if (!ty) return TPU_VAL_NONE;
  tpu_val_t ninf = tpu_ir_const(g, t, -INFINITY, ty->dims, ty->rank);
  return tpu_ir_select(g, tpu_ir_compare(g, TPU_CMP_EQ, x, ninf),
                       tpu_ir_const(g, t, 0.0, ty->dims, ty->rank), x);
}

//===--- forward ---===//

// _scaled_dot_product_fused_attention_overrideable(query, key, value,
// attn_bias?, dropout_p, is_causal, return_debug_mask, *, scale?) ->
// results (output, logsumexp); the binding adds the schema's other results.
tpu_status_t tpu_lower_sdpa(tpu_lower_ctx_t* cx) {
  sdpa_shape_t sh;
  TPU_RETURN_IF_ERROR(sdpa_shape(cx, 0, &sh));
  if (tpu_arg_float(cx, 4, 0.0) != 0.0)
    return tpu_status_make(TPU_CODE_UNIMPLEMENTED,
                           "tpu: the fused attention kernel has no dropout (PyTorch's math "
                           "path runs attention with dropout)");
  tpu_graph_t* g = cx->g;
  tpu_dtype_t dt = tpu_arg_value_dtype(cx, 0), t = tpu_opmath(dt);
  tpu_val_t q = grouped(cx, 0, &sh, t);
  tpu_val_t k = tpu_lower_input(cx, 1, t), v = tpu_lower_input(cx, 2, t);
  tpu_val_t s;
  TPU_RETURN_IF_ERROR(scores(cx, &sh, q, k, 3, tpu_arg_bool(cx, 5, false),
                             sdpa_scale(cx, 7, &sh), t, &s));
  // Softmax with the row max subtracted; a fully masked row (max -inf) has
  // no weights: its output is 0, as PyTorch's _safe_softmax gives.
  tpu_val_t m = zero_if_neg_inf(cx, reduce_last(cx, s, t, TPU_BODY_MAX), t);
  tpu_val_t p = tpu_ir_unary(g, TPU_IR_EXP, tpu_ir_binary(g, TPU_IR_SUB, s, spread_last(cx, m, sh.s)));
  tpu_val_t l = reduce_last(cx, p, t, TPU_BODY_ADD);
  tpu_val_t o = dot(cx, p, v, 3, 2, t);  // (B, Hkv, G * L, Ev)
  int64_t ldims[3] = {sh.b, sh.hkv, sh.grp * sh.l};
  tpu_val_t zero = tpu_ir_const(g, t, 0.0, ldims, 3), one = tpu_ir_const(g, t, 1.0, ldims, 3);
  tpu_val_t empty = tpu_ir_compare(g, TPU_CMP_EQ, l, zero);
  tpu_val_t inv = tpu_ir_select(g, empty, zero, tpu_ir_binary(g, TPU_IR_DIV, one, l));
  o = tpu_ir_binary(g, TPU_IR_MUL, o, spread_last(cx, inv, sh.ev));
  int64_t odims[4] = {sh.b, sh.hq, sh.l, sh.ev}, ldims3[3] = {sh.b, sh.hq, sh.l};
  tpu_lower_out(cx, 0, tpu_ir_convert(g, tpu_ir_reshape(g, o, odims, 4), dt));
  // logsumexp = max + log(sum): -inf for a fully masked row.
  tpu_val_t lse = tpu_ir_binary(g, TPU_IR_ADD, m, tpu_ir_unary(g, TPU_IR_LOG, l));
  tpu_lower_out(cx, 1, tpu_ir_reshape(g, lse, ldims3, 3));
  return TPU_OK;
}

//===--- backward ---===//

// Sums a (B, Hq, L, S) gradient down to the attn_bias argument's shape
// (right-aligned broadcasting undone).
static tpu_val_t unbroadcast(tpu_lower_ctx_t* cx, tpu_val_t x, int bias, tpu_dtype_t t) {
  int rank = tpu_arg_rank(cx, bias);
  const int64_t* bs = tpu_arg_sizes(cx, bias);
  const int64_t* xs = tpu_ir_dims(cx->g, x);
  if (!xs) return TPU_VAL_NONE;
  int64_t dims[4];
  int n = 0;
  for (int i = 0; i < 4; ++i) {
    int j = i - (4 - rank);
    if (j < 0 || (bs[j] == 1 && xs[i] != 1)) dims[n++] = i;
  }
  tpu_val_t r = x;
  if (n > 0) r = tpu_ir_reduce(cx->g, x, tpu_ir_const(cx->g, t, 0.0, NULL, 0), dims, n, TPU_BODY_ADD);
  return tpu_ir_reshape(cx->g, r, bs, rank);
}

// _scaled_dot_product_fused_attention_overrideable_backward(grad_out, query,
// key, value, attn_bias, grad_input_mask[4], out, logsumexp, cum_seq_q,
// cum_seq_k, max_q, max_k, dropout_p, is_causal, philox_seed, philox_offset,
// *, scale?) -> (grad_query, grad_key, grad_value, grad_attn_bias).
//
// The probabilities are recomputed from the scores and the forward's
// logsumexp (nothing (B, H, L, S)-sized is kept between the passes). With
// P = softmax(scores) and dP = grad_out V^T, the score gradient is
// dS = P * (dP - rowsum(P * dP)); dQ = scale dS K, dK = scale dS^T Q,
// dV = P^T grad_out, and the bias gradient is dS summed to its shape.
tpu_status_t tpu_lower_sdpa_backward(tpu_lower_ctx_t* cx) {
  sdpa_shape_t sh;
  TPU_RETURN_IF_ERROR(sdpa_shape(cx, 1, &sh));
  if (tpu_arg_float(cx, 12, 0.0) != 0.0)
    return tpu_status_make(TPU_CODE_UNIMPLEMENTED,
                           "tpu: the fused attention kernel has no dropout (PyTorch's math "
                           "path runs attention with dropout)");
  const bool* want = NULL;
  bool all[4] = {true, true, true, true};
  want = tpu_arg(cx, 5)->kind == TPU_ARG_BOOLS && tpu_arg_count(cx, 5) == 4 ? tpu_arg(cx, 5)->bools
                                                                            : all;
  tpu_graph_t* g = cx->g;
  tpu_dtype_t dt = tpu_arg_value_dtype(cx, 1), t = tpu_opmath(dt);
  double scale = sdpa_scale(cx, 16, &sh);
  tpu_val_t q = grouped(cx, 1, &sh, t);
  tpu_val_t k = tpu_lower_input(cx, 2, t), v = tpu_lower_input(cx, 3, t);
  tpu_val_t s;
  TPU_RETURN_IF_ERROR(scores(cx, &sh, q, k, 4, tpu_arg_bool(cx, 13, false), scale, t, &s));
  int64_t ldims[3] = {sh.b, sh.hkv, sh.grp * sh.l};
  tpu_val_t lse = tpu_ir_reshape(g, tpu_lower_input(cx, 7, t), ldims, 3);
  // A fully masked row has logsumexp -inf and scores -inf: P = exp(-inf) = 0.
  tpu_val_t p = tpu_ir_unary(g, TPU_IR_EXP, tpu_ir_binary(g, TPU_IR_SUB, s,
                                                           spread_last(cx, zero_if_neg_inf(cx, lse, t), sh.s)));
  tpu_val_t go = grouped(cx, 0, &sh, t);                                 // (B, Hkv, G * L, Ev)
  tpu_val_t dv = want[2] ? dot(cx, p, go, 2, 2, t) : TPU_VAL_NONE;       // (B, Hkv, S, Ev)
  tpu_val_t dp = dot(cx, go, v, 3, 3, t);                                // (B, Hkv, G * L, S)
  // rowsum(P * dP) = rowsum(grad_out * out): (B, Hkv, G * L, Ev) work
  // instead of (.., S)
  tpu_val_t d = reduce_last(cx, tpu_ir_binary(g, TPU_IR_MUL, go, grouped(cx, 6, &sh, t)), t,
                            TPU_BODY_ADD);
  tpu_val_t ds = tpu_ir_binary(g, TPU_IR_MUL, p, tpu_ir_binary(g, TPU_IR_SUB, dp, spread_last(cx, d, sh.s)));
  if (want[0]) {
    tpu_val_t dq = dot(cx, ds, k, 3, 2, t);  // (B, Hkv, G * L, E)
    dq = tpu_ir_binary(g, TPU_IR_MUL, dq, tpu_lower_expand(cx, tpu_lower_number(cx, scale, t),
                                                          tpu_ir_dims(g, dq), 4));
    int64_t qd[4] = {sh.b, sh.hq, sh.l, sh.e};
    tpu_lower_out(cx, 0, tpu_ir_convert(g, tpu_ir_reshape(g, dq, qd, 4), dt));
  } else {
    tpu_lower_out(cx, 0, TPU_VAL_NONE);
  }
  if (want[1]) {
    tpu_val_t dk = dot(cx, ds, q, 2, 2, t);  // (B, Hkv, S, E)
    dk = tpu_ir_binary(g, TPU_IR_MUL, dk, tpu_lower_expand(cx, tpu_lower_number(cx, scale, t),
                                                          tpu_ir_dims(g, dk), 4));
    tpu_lower_out(cx, 1, tpu_ir_convert(g, dk, dt));
  } else {
    tpu_lower_out(cx, 1, TPU_VAL_NONE);
  }
  tpu_lower_out(cx, 2, want[2] ? tpu_ir_convert(g, dv, dt) : TPU_VAL_NONE);
  if (want[3] && tpu_arg_present(cx, 4)) {
    int64_t full[4] = {sh.b, sh.hq, sh.l, sh.s};
    tpu_val_t db = unbroadcast(cx, tpu_ir_reshape(g, ds, full, 4), 4, t);
    tpu_lower_out(cx, 3, tpu_ir_convert(g, db, tpu_arg_value_dtype(cx, 4)));
  } else {
    tpu_lower_out(cx, 3, TPU_VAL_NONE);
  }
  return TPU_OK;
}

//===--- _safe_softmax, _masked_softmax ---===//

// Softmax of x (rank >= 1, in its compute type) along dim; with `safe`, a
// slice that is all -inf gives zeros instead of NaN.
static tpu_val_t softmax_along(tpu_lower_ctx_t* cx, tpu_val_t x, int64_t dim, bool safe) {
  tpu_graph_t* g = cx->g;
  if (!tpu_graph_ok(g)) return TPU_VAL_NONE;
  const tpu_type_t* xt_type = tpu_ir_type(g, x);
  int rank = xt_type->rank;
  int64_t n = xt_type->dims[dim];
  // Move `dim` last, reduce, move it back.
  int64_t perm[TPU_MAX_RANK], inv[TPU_MAX_RANK];
  int k = 0;
  for (int i = 0; i < rank; ++i)
    if (i != dim) perm[k++] = i;
  perm[k] = dim;
  for (int i = 0; i < rank; ++i) inv[perm[i]] = i;
  tpu_val_t xt = tpu_ir_transpose(g, x, perm);
  tpu_val_t m;  // the maximum along dim
  tpu_val_t r = tpu_ir_unary(g, TPU_IR_EXP, tpu_lower_log_softmax_values(cx, xt, rank - 1, &m));
  if (safe) {
    tpu_val_t masked = tpu_ir_compare(g, TPU_CMP_EQ, m, tpu_lower_const_like(cx, m, -INFINITY));
    r = tpu_ir_select(g, spread_last(cx, masked, n), tpu_lower_const_like(cx, r, 0.0), r);
  }
  return tpu_ir_transpose(g, r, inv);
}

// _masked_softmax(self, mask, dim?, mask_type?): softmax along dim (default
// the last) with the positions where mask is true left out; a fully masked
// slice is NaN, as on CPU. mask_type 0: an (L, L) mask for every batch and
// head of a (B, H, L, L) input; 1: a (B, L) key padding mask; 2 or none:
// the input's shape.
tpu_status_t tpu_lower_masked_softmax(tpu_lower_ctx_t* cx) {
  tpu_dtype_t in = tpu_arg_value_dtype(cx, 0);
  if (tpu_arg_value_dtype(cx, 1) != TPU_BOOL) return invalid("Mask should be a Boolean tensor");
  if (!tpu_dtype_is_float(in)) return tpu_not_implemented("masked_softmax", in);
  int rank = tpu_arg_rank(cx, 0), mrank = tpu_arg_rank(cx, 1);
  const int64_t *xs = tpu_arg_sizes(cx, 0), *ms = tpu_arg_sizes(cx, 1);
  bool same = rank == mrank && !memcmp(xs, ms, sizeof *xs * (size_t)rank);
  tpu_val_t mask = tpu_lower_tensor(cx, 1);
  tpu_graph_t* g = cx->g;
  if (!tpu_arg_present(cx, 3)) {
    if (!same) return invalid("Mask Type should be defined");
  } else {
    int64_t type = tpu_arg_int(cx, 3, 2);
    if (type == 0) {
      if (rank != 4 || mrank != 2 || ms[0] != xs[2] || ms[1] != xs[3])
        return invalid("For mask_type == 0 mask shape should be (L, L)");
      int64_t bd[2] = {2, 3};
      mask = tpu_ir_broadcast(g, mask, xs, rank, bd);
    } else if (type == 1) {
      if (rank != 4 || mrank != 2 || ms[0] != xs[0] || ms[1] != xs[3])
        return invalid("For mask_type == 1 mask shape should be (B, L)");
      int64_t bd[2] = {0, 3};
      mask = tpu_ir_broadcast(g, mask, xs, rank, bd);
    } else if (type == 2) {
      if (!same) return invalid("For mask_type == 2 mask shape should match input shape");
    } else {
      return invalid("Invalid mask_type");
    }
  }
  int64_t dim = rank - 1;
  if (tpu_arg_present(cx, 2)) TPU_RETURN_IF_ERROR(tpu_wrap_dim(tpu_arg_int(cx, 2, 0), rank, &dim));
  if (rank == 0) return invalid("masked_softmax: expected an input with at least one dim");
  tpu_dtype_t t = tpu_opmath(in);
  tpu_val_t x = tpu_lower_input(cx, 0, t);
  x = tpu_ir_select(g, mask, tpu_lower_const_like(cx, x, -INFINITY), x);
  tpu_lower_out(cx, 0, tpu_ir_convert(g, softmax_along(cx, x, dim, false), in));
  return TPU_OK;
}

// _transform_bias_rescale_qkv(qkv, qkv_bias, num_heads) -> (q, k, v): the
// packed (B, T, 3 * D) projections plus their bias, split and laid out as
// (B, heads, T, D / heads) each, q scaled by 1 / sqrt(D / heads).
tpu_status_t tpu_lower_transform_bias_rescale_qkv(tpu_lower_ctx_t* cx) {
  int64_t heads = tpu_arg_int(cx, 2, 1);
  if (tpu_arg_rank(cx, 0) != 3 || tpu_arg_rank(cx, 1) != 1)
    return invalid("_transform_bias_rescale_qkv: expected qkv (B, T, 3 * D) and a 1-D bias");
  const int64_t* qs = tpu_arg_sizes(cx, 0);
  int64_t b = qs[0], len = qs[1], d = qs[2] / 3;
  if (qs[2] % 3 || tpu_arg_sizes(cx, 1)[0] != qs[2] || heads <= 0 || d % heads)
    return invalid("_transform_bias_rescale_qkv: qkv's last dim must be 3 * D, the bias's too, "
                   "and D a multiple of num_heads");
  tpu_dtype_t in = tpu_arg_value_dtype(cx, 0), t = tpu_opmath(in);
  if (!tpu_dtype_is_float(in)) return tpu_not_implemented("transform_bias_rescale_qkv", in);
  tpu_graph_t* g = cx->g;
  int64_t bias_dim = 2;
  tpu_val_t x = tpu_ir_binary(g, TPU_IR_ADD, tpu_lower_input(cx, 0, t),
                              tpu_ir_broadcast(g, tpu_lower_input(cx, 1, t), qs, 3, &bias_dim));
  int64_t split[5] = {b, len, 3, heads, d / heads}, perm[5] = {2, 0, 3, 1, 4};
  x = tpu_ir_transpose(g, tpu_ir_reshape(g, x, split, 5), perm);  // (3, B, heads, T, dh)
  for (int j = 0; j < 3; ++j) {
    int64_t lo[5] = {j, 0, 0, 0, 0}, hi[5] = {j + 1, b, heads, len, d / heads};
    tpu_val_t part = tpu_ir_reshape(g, tpu_ir_slice(g, x, lo, hi, NULL), hi + 1, 4);
    if (j == 0)
      part = tpu_ir_binary(g, TPU_IR_MUL, part,
                           tpu_lower_const_like(cx, part, 1.0 / sqrt((double)(d / heads))));
    tpu_lower_out(cx, j, tpu_ir_convert(g, part, in));
  }
  return TPU_OK;
}

// _safe_softmax(self, dim, dtype?): softmax, except that a slice whose
// entries are all -inf (a fully masked attention row) gives zeros instead of
// NaN. dtype converts the input first, as softmax(dtype=) does.
tpu_status_t tpu_lower_safe_softmax(tpu_lower_ctx_t* cx) {
  tpu_dtype_t in = tpu_arg_value_dtype(cx, 0);
  tpu_dtype_t out = tpu_arg_dtype(cx, 2, in);
  if (!tpu_dtype_is_float(out))
    return tpu_status_make(TPU_CODE_UNIMPLEMENTED, "\"softmax_lastdim_kernel_impl\" not "
                           "implemented for '%s'", tpu_dtype_torch_name(out));
  int rank = tpu_arg_rank(cx, 0);
  int64_t dim;
  TPU_RETURN_IF_ERROR(tpu_wrap_dim(tpu_arg_int(cx, 1, 0), rank, &dim));
  tpu_graph_t* g = cx->g;
  tpu_dtype_t t = tpu_opmath(out);
  // (the input rounded to `out` first, as PyTorch converts before softmax)
  tpu_val_t x = tpu_ir_convert(g, tpu_ir_convert(g, tpu_lower_tensor(cx, 0), out), t);
  if (rank == 0) {  // one element: 1, or 0 when it is -inf
    tpu_val_t ninf = tpu_ir_const(g, t, -INFINITY, NULL, 0);
    tpu_val_t r = tpu_ir_select(g, tpu_ir_compare(g, TPU_CMP_EQ, x, ninf),
                                tpu_ir_const(g, t, 0.0, NULL, 0), tpu_ir_const(g, t, 1.0, NULL, 0));
    tpu_val_t nan = tpu_ir_compare(g, TPU_CMP_NE, x, x);
    tpu_lower_out(cx, 0, tpu_ir_convert(g, tpu_ir_select(g, nan, x, r), out));
    return TPU_OK;
  }
  tpu_lower_out(cx, 0, tpu_ir_convert(g, softmax_along(cx, x, dim, true), out));
  return TPU_OK;
}
