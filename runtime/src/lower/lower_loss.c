// Loss functions and their backward ops. Losses are computed in float for
// half-precision inputs and rounded once. Class indices are matched with a
// one-hot comparison against an iota (no gather or scatter), and targets out
// of range raise through a device-side assert, since XLA would clamp them.
#include <stdio.h>
#include <string.h>

#include "lower/lower.h"

enum { RED_NONE = 0, RED_MEAN = 1, RED_SUM = 2 };

static int64_t numel_of(tpu_graph_t* g, tpu_val_t v) {
  const tpu_type_t* t = tpu_ir_type(g, v);
  return t ? tpu_type_numel(t) : 0;
}

// Sum over every dim (a 0-d result).
static tpu_val_t sum_all(tpu_lower_ctx_t* cx, tpu_val_t x) {
  tpu_graph_t* g = cx->g;
  if (!tpu_graph_ok(g)) return TPU_VAL_NONE;
  int rank = tpu_ir_rank(g, x);
  int64_t dims[TPU_MAX_RANK];
  for (int i = 0; i < rank; ++i) dims[i] = i;
  return tpu_ir_reduce(g, x, tpu_ir_const(g, tpu_ir_dtype(g, x), 0, NULL, 0), dims, rank,
                       TPU_BODY_ADD);
}

// True when any element of a bool value is.
static tpu_val_t any_true(tpu_lower_ctx_t* cx, tpu_val_t b) {
  tpu_graph_t* g = cx->g;
  if (!tpu_graph_ok(g)) return TPU_VAL_NONE;
  int rank = tpu_ir_rank(g, b);
  int64_t dims[TPU_MAX_RANK];
  for (int i = 0; i < rank; ++i) dims[i] = i;
  return tpu_ir_reduce(g, b, tpu_ir_const_i(g, TPU_BOOL, 0, NULL, 0), dims, rank, TPU_BODY_OR);
}

// PyTorch's apply_loss_reduction: none keeps the elementwise loss, mean
// divides the sum by the element count (0/0 = nan when empty), others sum.
static tpu_val_t reduce_loss(tpu_lower_ctx_t* cx, tpu_val_t loss, int64_t reduction) {
  if (reduction == RED_NONE) return loss;
  tpu_graph_t* g = cx->g;
  double count = (double)numel_of(g, loss);
  tpu_val_t s = sum_all(cx, loss);
  if (reduction == RED_MEAN)
    s = tpu_ir_binary(g, TPU_IR_DIV, s, tpu_lower_const_like(cx, s, count));
  return s;
}

// The factor a mean reduction puts on each element's gradient.
static double grad_norm(tpu_lower_ctx_t* cx, int self_arg, int64_t reduction) {
  if (reduction != RED_MEAN) return 1;
  int rank = tpu_arg_rank(cx, self_arg);
  const int64_t* sizes = tpu_arg_sizes(cx, self_arg);
  int64_t n = 1;
  for (int i = 0; i < rank; ++i) n *= sizes[i];
  return 1.0 / (double)n;
}

static tpu_val_t scalar_like(tpu_lower_ctx_t* cx, tpu_val_t v, double value) {
  return tpu_lower_const_like(cx, v, value);
}

static void shape_str(const int64_t* d, int rank, char* out, size_t size) {
  size_t k = 0;
  out[0] = 0;
  k += (size_t)snprintf(out, size, "[");
  for (int i = 0; i < rank && k < size; ++i)
    k += (size_t)snprintf(out + k, size - k, "%s%lld", i ? ", " : "", (long long)d[i]);
  if (k < size) snprintf(out + k, size - k, "]");
}

#define BIN(op, a, b) tpu_ir_binary(g, TPU_IR_##op, (a), (b))

// Arguments args[0..n) (absent ones skipped) read in `compute` and broadcast
// to the shape of argument `shape_arg` (a backward's input).
static tpu_status_t inputs_like(tpu_lower_ctx_t* cx, const int* args, int n, int shape_arg,
                                tpu_dtype_t compute, tpu_val_t* out) {
  int rank = tpu_arg_rank(cx, shape_arg);
  int64_t shape[TPU_MAX_RANK];
  memcpy(shape, tpu_arg_sizes(cx, shape_arg), sizeof(int64_t) * (size_t)rank);
  for (int k = 0; k < n; ++k) {
    out[k] = TPU_VAL_NONE;
    if (!tpu_arg_present(cx, args[k])) continue;
    int64_t b[TPU_MAX_RANK];
    int br;
    TPU_RETURN_IF_ERROR(tpu_broadcast_shapes(shape, rank, tpu_arg_sizes(cx, args[k]),
                                             tpu_arg_rank(cx, args[k]), b, &br));
    bool same = br == rank;
    for (int i = 0; same && i < rank; ++i) same = b[i] == shape[i];
    if (!same) {
      char a[128], c[128];
      shape_str(shape, rank, a, sizeof a);
      shape_str(b, br, c, sizeof c);
      return tpu_status_make(TPU_CODE_INVALID_ARGUMENT,
                             "output with shape %s doesn't match the broadcast shape %s", a, c);
    }
    out[k] = tpu_lower_expand(cx, tpu_lower_input(cx, args[k], compute), shape, rank);
  }
  return TPU_OK;
}

//===--- nll_loss, nll_loss2d ---===//

// What forward and backward share: the one-hot mask of each target's class
// (false where ignored), and each target's weight (0 where ignored).
typedef struct nll {
  tpu_type_t self;     // self's shape and dtype
  int cd;              // the class dim of self
  int64_t classes;
  tpu_val_t onehot;    // bool, self's shape
  tpu_val_t weight;    // compute dtype, the target's shape
} nll_t;

static tpu_status_t nll_check_dtypes(tpu_lower_ctx_t* cx, int self_arg, int target_arg,
                                     int weight_arg, bool is2d) {
  tpu_dtype_t st = tpu_arg_value_dtype(cx, self_arg), tt = tpu_arg_value_dtype(cx, target_arg);
  if (is2d ? tt != TPU_I64 : (tt != TPU_I64 && tt != TPU_U8))
    return is2d ? tpu_status_make(TPU_CODE_INVALID_ARGUMENT,
                                  "expected scalar type Long but found %s",
                                  tpu_dtype_torch_name(tt))
                : tpu_status_make(TPU_CODE_INVALID_ARGUMENT,
                                  "expected target dtype to be Long or Byte, but got %s",
                                  tpu_dtype_torch_name(tt));
  if (!tpu_dtype_is_float(st))
    return tpu_not_implemented(is2d ? "nll_loss2d_out_frame" : "nll_loss_out_frame", st);
  if (tpu_arg_present(cx, weight_arg) && tpu_arg_value_dtype(cx, weight_arg) != st)
    return tpu_status_make(TPU_CODE_INVALID_ARGUMENT, "expected scalar type %s but found %s",
                           tpu_dtype_torch_name(st),
                           tpu_dtype_torch_name(tpu_arg_value_dtype(cx, weight_arg)));
  return TPU_OK;
}


// PyTorch's shape checks of nll_loss (self 1-D or 2-D) and nll_loss2d (4-D).
static tpu_status_t nll_check_shapes(tpu_lower_ctx_t* cx, int self_arg, int target_arg,
                                     int weight_arg, bool is2d) {
  int sr = tpu_arg_rank(cx, self_arg), tr = tpu_arg_rank(cx, target_arg);
  const int64_t *s = tpu_arg_sizes(cx, self_arg), *t = tpu_arg_sizes(cx, target_arg);
  char a[128], b[128];  // the shapes, for messages (formatted on failure only)
  bool has_w = tpu_arg_present(cx, weight_arg);
  int64_t wn = 1;
  for (int i = 0; has_w && i < tpu_arg_rank(cx, weight_arg); ++i) wn *= tpu_arg_sizes(cx, weight_arg)[i];
  if (is2d) {
    if (tr != 3)
      return tpu_status_make(TPU_CODE_INVALID_ARGUMENT,
                             "only batches of spatial targets supported (3D tensors) but "
                             "got targets of dimension: %d", tr);
    if (sr != 4)
      return tpu_status_make(TPU_CODE_INVALID_ARGUMENT,
                             "only batches of spatial inputs supported (4D tensors), but "
                             "got input of dimension: %d", sr);
    if (has_w && wn != s[1])
      return tpu_status_make(TPU_CODE_INVALID_ARGUMENT,
                             "weight tensor should be defined either for all or no classes");
    if (s[0] != t[0] || s[2] != t[1] || s[3] != t[2]) {
      shape_str(s, sr, a, sizeof a);
      shape_str(t, tr, b, sizeof b);
      return tpu_status_make(TPU_CODE_INVALID_ARGUMENT,
                             "size mismatch (got input: %s , target: %s", a, b);
    }
    return TPU_OK;
  }
  if (sr < 1 || sr > 2)
    return tpu_status_make(TPU_CODE_INVALID_ARGUMENT, "input tensor should be 1D or 2D");
  if (tr > 1)
    return tpu_status_make(TPU_CODE_INVALID_ARGUMENT,
                           "0D or 1D target tensor expected, multi-target not supported");
  bool no_batch = sr == 1 && tr == 0;
  if (!no_batch && (tr == 0 || s[0] != t[0])) {
    shape_str(s, sr, a, sizeof a);
    shape_str(t, tr, b, sizeof b);
    return tpu_status_make(TPU_CODE_INVALID_ARGUMENT, "size mismatch (got input: %s, target: %s)",
                           a, b);
  }
  int64_t classes = s[sr - 1];
  if (has_w && (tpu_arg_rank(cx, weight_arg) != 1 || wn != classes)) {
    shape_str(tpu_arg_sizes(cx, weight_arg), tpu_arg_rank(cx, weight_arg), b, sizeof b);
    return tpu_status_make(TPU_CODE_INVALID_ARGUMENT,
                           "weight tensor should be defined either for all %lld classes or "
                           "no classes but got weight tensor of shape: %s",
                           (long long)classes, b);
  }
  if (sr == 1 && tr == 1 && t[0] != 1)  // CPU raises ValueError (no code maps to it)
    return tpu_status_make(TPU_CODE_INVALID_ARGUMENT,
                           "For 1D input, 1D target must have size 1, but got target size: %lld",
                           (long long)t[0]);
  return TPU_OK;
}

static tpu_status_t nll_prepare(tpu_lower_ctx_t* cx, int self_arg, int target_arg,
                                int weight_arg, int ignore_arg, bool is2d,
                                tpu_dtype_t compute, nll_t* p) {
  TPU_RETURN_IF_ERROR(nll_check_dtypes(cx, self_arg, target_arg, weight_arg, is2d));
  TPU_RETURN_IF_ERROR(nll_check_shapes(cx, self_arg, target_arg, weight_arg, is2d));
  tpu_graph_t* g = cx->g;
  int sr = tpu_arg_rank(cx, self_arg);
  p->self = tpu_type_make(tpu_arg_value_dtype(cx, self_arg), tpu_arg_sizes(cx, self_arg), sr);
  p->cd = sr == 1 ? 0 : 1;
  p->classes = p->self.dims[p->cd];
  // The target's shape: self's without the class dim.
  int64_t tshape[TPU_MAX_RANK], bdims[TPU_MAX_RANK];
  int tr = 0;
  for (int i = 0; i < sr; ++i)
    if (i != p->cd) {
      bdims[tr] = i;
      tshape[tr++] = p->self.dims[i];
    }
  tpu_val_t t = tpu_ir_reshape(g, tpu_lower_input(cx, target_arg, TPU_I64), tshape, tr);
  tpu_val_t ignore = tpu_ir_broadcast(g, tpu_lower_input(cx, ignore_arg, TPU_I64), tshape, tr, NULL);
  tpu_val_t valid = tpu_ir_compare(g, TPU_CMP_NE, t, ignore);
  tpu_val_t out_of_range =
      BIN(OR, tpu_ir_compare(g, TPU_CMP_LT, t, scalar_like(cx, t, 0)),
          tpu_ir_compare(g, TPU_CMP_GE, t, scalar_like(cx, t, (double)p->classes)));
  tpu_val_t bad = BIN(AND, valid, out_of_range);
  tpu_lower_assert_value(cx, any_true(cx, bad), tpu_lower_first_where(g, bad, t, tshape, tr),
                         TPU_VAL_NONE, TPU_CODE_OUT_OF_RANGE, "Target {value} is out of bounds.");
  tpu_val_t cls = tpu_ir_iota(g, TPU_I64, p->self.dims, sr, p->cd);
  p->onehot = BIN(AND, tpu_ir_compare(g, TPU_CMP_EQ, cls, tpu_ir_broadcast(g, t, p->self.dims, sr, bdims)),
                  tpu_ir_broadcast(g, valid, p->self.dims, sr, bdims));
  if (tpu_arg_present(cx, weight_arg)) {
    int64_t cdim = p->cd, c = p->classes;
    tpu_val_t w = tpu_ir_reshape(g, tpu_lower_input(cx, weight_arg, compute), &c, 1);
    tpu_val_t wb = tpu_ir_broadcast(g, w, p->self.dims, sr, &cdim);
    tpu_val_t picked = tpu_ir_select(g, p->onehot, wb, scalar_like(cx, wb, 0));
    p->weight = tpu_ir_reduce(g, picked, tpu_ir_const(g, compute, 0, NULL, 0), &cdim, 1,
                              TPU_BODY_ADD);
  } else {
    p->weight = tpu_ir_convert(g, valid, compute);
  }
  return TPU_OK;
}

// nll_loss_forward / nll_loss2d_forward(self, target, weight, reduction,
// ignore_index) -> (output, total_weight)
static tpu_status_t nll_forward(tpu_lower_ctx_t* cx, bool is2d) {
  tpu_dtype_t dt = tpu_arg_value_dtype(cx, 0), compute = tpu_opmath(dt);
  nll_t p;
  TPU_RETURN_IF_ERROR(nll_prepare(cx, 0, 1, 2, 4, is2d, compute, &p));
  tpu_graph_t* g = cx->g;
  int64_t reduction = tpu_arg_int(cx, 3, RED_MEAN);
  tpu_val_t x = tpu_lower_input(cx, 0, compute);
  int64_t cdim = p.cd;
  tpu_val_t picked = tpu_ir_reduce(g, tpu_ir_select(g, p.onehot, x, scalar_like(cx, x, 0)),
                                   tpu_ir_const(g, compute, 0, NULL, 0), &cdim, 1, TPU_BODY_ADD);
  // 0 - x * w keeps ignored entries at +0, as CPU writes them.
  tpu_val_t loss = BIN(SUB, scalar_like(cx, picked, 0), BIN(MUL, picked, p.weight));
  tpu_val_t total = sum_all(cx, p.weight);
  tpu_val_t out;
  if (reduction == RED_NONE) {
    out = loss;
    // CPU leaves total_weight at 0 for a batch, but fills it for one sample.
    if (p.self.rank > 1) total = scalar_like(cx, total, 0);
  } else {
    out = sum_all(cx, loss);
    if (reduction == RED_MEAN) out = BIN(DIV, out, total);
  }
  tpu_lower_out(cx, 0, tpu_ir_convert(g, out, dt));
  tpu_lower_out(cx, 1, tpu_ir_convert(g, total, dt));
  return TPU_OK;
}

// nll_loss_backward / nll_loss2d_backward(grad_output, self, target, weight,
// reduction, ignore_index, total_weight) -> grad_input
static tpu_status_t nll_backward(tpu_lower_ctx_t* cx, bool is2d) {
  tpu_dtype_t dt = tpu_arg_value_dtype(cx, 1), compute = tpu_opmath(dt);
  nll_t p;
  TPU_RETURN_IF_ERROR(nll_prepare(cx, 1, 2, 3, 5, is2d, compute, &p));
  tpu_graph_t* g = cx->g;
  int64_t reduction = tpu_arg_int(cx, 4, RED_MEAN);
  int64_t tw_n = 1;
  for (int i = 0; i < tpu_arg_rank(cx, 6); ++i) tw_n *= tpu_arg_sizes(cx, 6)[i];
  if (tw_n != 1) {
    char s[128];
    shape_str(tpu_arg_sizes(cx, 6), tpu_arg_rank(cx, 6), s, sizeof s);
    return tpu_status_make(TPU_CODE_INVALID_ARGUMENT,
                           "expected total_weight to be a  single element tensor, got: %s "
                           "(%lld elements)", s, (long long)tw_n);
  }
  int64_t tshape[TPU_MAX_RANK], bdims[TPU_MAX_RANK];
  int tr = 0;
  for (int i = 0; i < p.self.rank; ++i)
    if (i != p.cd) {
      bdims[tr] = i;
      tshape[tr++] = p.self.dims[i];
    }
  int gr = tpu_arg_rank(cx, 0);
  const int64_t* gs = tpu_arg_sizes(cx, 0);
  tpu_val_t grad;
  if (reduction == RED_NONE) {
    bool same = gr == tr;
    for (int i = 0; same && i < tr; ++i) same = gs[i] == tshape[i];
    if (!same) {
      if (gr == 0 && tr > 0)
        return tpu_status_make(TPU_CODE_OUT_OF_RANGE,
                               "Dimension specified as 0 but tensor has no dimensions");
      return tpu_status_make(TPU_CODE_INVALID_ARGUMENT,
                             "Expected a tensor of dimension %d and tensor.size[0] == %lld "
                             "but got: dimension %d and tensor.size[0] == %lld",
                             tr, (long long)(tr ? tshape[0] : 0), gr,
                             (long long)(gr ? gs[0] : 0));
    }
    grad = tpu_lower_input(cx, 0, compute);
  } else {
    int64_t gn = 1;
    for (int i = 0; i < gr; ++i) gn *= gs[i];
    if (gr > 1 || gn != 1) {
      char s[128];
      shape_str(gs, gr, s, sizeof s);
      return tpu_status_make(TPU_CODE_INVALID_ARGUMENT,
                             "Expected a single element grad_output tensor, but got: %s", s);
    }
    grad = tpu_ir_reshape(g, tpu_lower_input(cx, 0, compute), NULL, 0);
    if (reduction == RED_MEAN)
      grad = BIN(DIV, grad, tpu_ir_reshape(g, tpu_lower_input(cx, 6, compute), NULL, 0));
    grad = tpu_ir_broadcast(g, grad, tshape, tr, NULL);
  }
  tpu_val_t per_target = BIN(SUB, scalar_like(cx, grad, 0), BIN(MUL, grad, p.weight));
  tpu_val_t gb = tpu_ir_broadcast(g, per_target, p.self.dims, p.self.rank, bdims);
  tpu_val_t gi = tpu_ir_select(g, p.onehot, gb, scalar_like(cx, gb, 0));
  tpu_lower_out(cx, 0, tpu_ir_convert(g, gi, dt));
  return TPU_OK;
}

tpu_status_t tpu_lower_nll_loss(tpu_lower_ctx_t* cx) { return nll_forward(cx, false); }
tpu_status_t tpu_lower_nll_loss2d(tpu_lower_ctx_t* cx) { return nll_forward(cx, true); }
tpu_status_t tpu_lower_nll_loss_backward(tpu_lower_ctx_t* cx) { return nll_backward(cx, false); }
tpu_status_t tpu_lower_nll_loss2d_backward(tpu_lower_ctx_t* cx) { return nll_backward(cx, true); }

//===--- elementwise losses ---===//

// The promoted float dtype of self and target (args a, b); `kernel` names the
// CPU kernel in the error for other dtypes.
static tpu_status_t float_pair(tpu_lower_ctx_t* cx, int a, int b, const char* kernel,
                               tpu_dtype_t* t) {
  int ab[2] = {a, b};
  *t = tpu_lower_result_type(cx, ab, 2);
  if (*t == TPU_DTYPE_INVALID || !tpu_dtype_is_float(*t))
    return tpu_not_implemented(kernel, *t == TPU_DTYPE_INVALID ? tpu_arg_value_dtype(cx, a) : *t);
  return TPU_OK;
}

typedef enum { EW_MSE, EW_SMOOTH_L1, EW_HUBER } ew_kind_t;

// mse_loss(self, target, reduction), smooth_l1_loss(self, target, reduction,
// beta), huber_loss(self, target, reduction, delta).
static tpu_status_t ew_loss(tpu_lower_ctx_t* cx, ew_kind_t kind) {
  static const char* const kernels[] = {"mse_cpu", "smooth_l1_cpu", "huber_cpu"};
  double param = tpu_arg_float(cx, 3, 1.0);
  if (kind == EW_SMOOTH_L1 && param < 0)
    return tpu_status_make(TPU_CODE_INVALID_ARGUMENT,
                           "smooth_l1_loss does not support negative values for beta.");
  if (kind == EW_HUBER && param <= 0)
    return tpu_status_make(TPU_CODE_INVALID_ARGUMENT,
                           "huber_loss does not support non-positive values for delta.");
  tpu_dtype_t t;
  TPU_RETURN_IF_ERROR(float_pair(cx, 0, 1, kernels[kind], &t));
  tpu_dtype_t compute = tpu_opmath(t);
  int ab[2] = {0, 1};
  tpu_val_t v[2];
  TPU_RETURN_IF_ERROR(tpu_lower_broadcast_inputs(cx, ab, 2, compute, v));
  tpu_graph_t* g = cx->g;
  tpu_val_t d = BIN(SUB, v[0], v[1]), loss;
  if (kind == EW_MSE) {
    loss = BIN(MUL, d, d);
  } else {
    tpu_val_t z = tpu_ir_unary(g, TPU_IR_ABS, d);
    const tpu_type_t* zt = tpu_ir_type(g, z);
    tpu_type_t zs = zt ? *zt : tpu_type_make(compute, NULL, 0);
    // beta / delta travel as an input: a new value does not recompile.
    tpu_val_t b = tpu_ir_broadcast(g, tpu_lower_input(cx, 3, compute), zs.dims, zs.rank, NULL);
    tpu_val_t half = scalar_like(cx, z, 0.5);
    tpu_val_t quad = BIN(MUL, BIN(MUL, half, z), z);
    tpu_val_t lin = BIN(SUB, z, BIN(MUL, half, b));
    if (kind == EW_SMOOTH_L1) {
      quad = BIN(DIV, quad, b);
    } else {
      lin = BIN(MUL, b, lin);
    }
    loss = tpu_ir_select(g, tpu_ir_compare(g, TPU_CMP_LT, z, b), quad, lin);
  }
  tpu_lower_out(cx, 0, tpu_ir_convert(g, reduce_loss(cx, loss, tpu_arg_int(cx, 2, RED_MEAN)), t));
  return TPU_OK;
}

// mse_loss_backward(grad_output, self, target, reduction),
// smooth_l1_loss_backward / huber_loss_backward(grad_output, self, target,
// reduction, beta / delta): the gradient has self's shape and dtype.
static tpu_status_t ew_loss_backward(tpu_lower_ctx_t* cx, ew_kind_t kind) {
  tpu_dtype_t t = tpu_arg_value_dtype(cx, 1);
  int all[3] = {0, 1, 2};
  tpu_dtype_t compute = tpu_opmath(tpu_lower_result_type(cx, all, 3));
  if (!tpu_dtype_is_float(t) || !tpu_dtype_is_float(compute)) {
    static const char* const kernels[] = {"mse_backward_cpu", "smooth_l1_backward_cpu",
                                          "huber_backward_cpu"};
    return tpu_not_implemented(kernels[kind], t);
  }
  int64_t reduction = tpu_arg_int(cx, 3, RED_MEAN);
  double norm = grad_norm(cx, 1, reduction);
  tpu_val_t v[3];
  TPU_RETURN_IF_ERROR(inputs_like(cx, all, 3, 1, compute, v));
  tpu_graph_t* g = cx->g;
  tpu_val_t gr = v[0], x = BIN(SUB, v[1], v[2]), gi;
  if (kind == EW_MSE) {
    gi = BIN(MUL, BIN(MUL, scalar_like(cx, x, 2 * norm), x), gr);
  } else {
    const tpu_type_t* xt = tpu_ir_type(g, x);
    tpu_type_t xs = xt ? *xt : tpu_type_make(compute, NULL, 0);
    tpu_val_t b = tpu_ir_broadcast(g, tpu_lower_input(cx, 4, compute), xs.dims, xs.rank, NULL);
    tpu_val_t ng = BIN(MUL, scalar_like(cx, gr, norm), gr);
    // PyTorch's three-way rule (x == 0 with beta 0 takes the first branch).
    tpu_val_t lo = tpu_ir_unary(g, TPU_IR_NEG, ng), hi = ng, mid = BIN(MUL, x, ng);
    if (kind == EW_SMOOTH_L1) {
      mid = BIN(DIV, mid, b);
    } else {
      lo = BIN(MUL, lo, b);
      hi = BIN(MUL, hi, b);
    }
    gi = tpu_ir_select(g, tpu_ir_compare(g, TPU_CMP_LE, x, tpu_ir_unary(g, TPU_IR_NEG, b)), lo,
                       tpu_ir_select(g, tpu_ir_compare(g, TPU_CMP_GE, x, b), hi, mid));
  }
  tpu_lower_out(cx, 0, tpu_ir_convert(g, gi, t));
  return TPU_OK;
}

tpu_status_t tpu_lower_mse_loss(tpu_lower_ctx_t* cx) { return ew_loss(cx, EW_MSE); }
tpu_status_t tpu_lower_smooth_l1_loss(tpu_lower_ctx_t* cx) { return ew_loss(cx, EW_SMOOTH_L1); }
tpu_status_t tpu_lower_huber_loss(tpu_lower_ctx_t* cx) { return ew_loss(cx, EW_HUBER); }
tpu_status_t tpu_lower_mse_loss_backward(tpu_lower_ctx_t* cx) { return ew_loss_backward(cx, EW_MSE); }
tpu_status_t tpu_lower_smooth_l1_loss_backward(tpu_lower_ctx_t* cx) {
  return ew_loss_backward(cx, EW_SMOOTH_L1);
}
tpu_status_t tpu_lower_huber_loss_backward(tpu_lower_ctx_t* cx) {
  return ew_loss_backward(cx, EW_HUBER);
}

//===--- binary cross entropy ---===//

static tpu_status_t same_dtype(tpu_lower_ctx_t* cx, int arg, tpu_dtype_t t) {
  if (!tpu_arg_present(cx, arg) || tpu_arg_value_dtype(cx, arg) == t) return TPU_OK;
  return tpu_status_make(TPU_CODE_INVALID_ARGUMENT, "Found dtype %s but expected %s",
                         tpu_dtype_torch_name(tpu_arg_value_dtype(cx, arg)),
                         tpu_dtype_torch_name(t));
}

// binary_cross_entropy(self, target, weight=None, reduction=Mean): log terms
// clamped at -100, inputs and targets checked to lie in [0, 1] on the device.
tpu_status_t tpu_lower_binary_cross_entropy(tpu_lower_ctx_t* cx) {
  tpu_dtype_t t = tpu_arg_value_dtype(cx, 0);
  if (!tpu_dtype_is_float(t)) return tpu_not_implemented("binary_cross_entropy", t);
  TPU_RETURN_IF_ERROR(same_dtype(cx, 1, t));
  TPU_RETURN_IF_ERROR(same_dtype(cx, 2, t));
  tpu_dtype_t compute = tpu_opmath(t);
  int args[3] = {0, 1, 2};
  tpu_val_t v[3];
  TPU_RETURN_IF_ERROR(tpu_lower_broadcast_inputs(cx, args, 3, compute, v));
  tpu_graph_t* g = cx->g;
  tpu_val_t x = v[0], y = v[1];
  tpu_val_t zero = scalar_like(cx, x, 0), one = scalar_like(cx, x, 1);
  tpu_val_t x_ok = BIN(AND, tpu_ir_compare(g, TPU_CMP_GE, x, zero), tpu_ir_compare(g, TPU_CMP_LE, x, one));
  tpu_val_t y_ok = BIN(AND, tpu_ir_compare(g, TPU_CMP_GE, y, zero), tpu_ir_compare(g, TPU_CMP_LE, y, one));
  tpu_lower_assert(cx, any_true(cx, tpu_ir_unary(g, TPU_IR_NOT, x_ok)), TPU_CODE_INVALID_ARGUMENT,
                   "all elements of input should be between 0 and 1");
  tpu_lower_assert(cx, any_true(cx, tpu_ir_unary(g, TPU_IR_NOT, y_ok)), TPU_CODE_INVALID_ARGUMENT,
                   "all elements of target should be between 0 and 1");
  tpu_val_t floor = scalar_like(cx, x, -100);
  tpu_val_t log_x = BIN(MAX, tpu_ir_unary(g, TPU_IR_LOG, x), floor);
  tpu_val_t log_1mx = BIN(MAX, tpu_ir_unary(g, TPU_IR_LOG1P, tpu_ir_unary(g, TPU_IR_NEG, x)), floor);
  tpu_val_t loss = BIN(SUB, BIN(MUL, BIN(SUB, y, one), log_1mx), BIN(MUL, y, log_x));
  if (v[2] != TPU_VAL_NONE) loss = BIN(MUL, loss, v[2]);
  tpu_lower_out(cx, 0, tpu_ir_convert(g, reduce_loss(cx, loss, tpu_arg_int(cx, 3, RED_MEAN)), t));
  return TPU_OK;
}

// binary_cross_entropy_backward(grad_output, self, target, weight=None,
// reduction=Mean): grad * (x - y) / max((1 - x) x, 1e-12) [* weight] [/ n].
tpu_status_t tpu_lower_binary_cross_entropy_backward(tpu_lower_ctx_t* cx) {
  tpu_dtype_t t = tpu_arg_value_dtype(cx, 1);
  if (!tpu_dtype_is_float(t)) return tpu_not_implemented("binary_cross_entropy_backward", t);
  TPU_RETURN_IF_ERROR(same_dtype(cx, 2, t));
  TPU_RETURN_IF_ERROR(same_dtype(cx, 3, t));
  tpu_dtype_t compute = tpu_opmath(t);
  int args[4] = {0, 1, 2, 3};
  tpu_val_t v[4];
  TPU_RETURN_IF_ERROR(inputs_like(cx, args, 4, 1, compute, v));
  tpu_graph_t* g = cx->g;
  tpu_val_t x = v[1], one = scalar_like(cx, x, 1);
  tpu_val_t denom = BIN(MAX, BIN(MUL, BIN(SUB, one, x), x), scalar_like(cx, x, 1e-12));
  tpu_val_t gi = BIN(DIV, BIN(MUL, v[0], BIN(SUB, x, v[2])), denom);
  if (v[3] != TPU_VAL_NONE) gi = BIN(MUL, gi, v[3]);
  int64_t reduction = tpu_arg_int(cx, 4, RED_MEAN);
  if (reduction == RED_MEAN) gi = BIN(MUL, gi, scalar_like(cx, gi, grad_norm(cx, 1, reduction)));
  tpu_lower_out(cx, 0, tpu_ir_convert(g, gi, t));
  return TPU_OK;
}

// binary_cross_entropy_with_logits(self, target, weight=None,
// pos_weight=None, reduction=Mean), PyTorch's formula:
//   (1 - y) x - log_sigmoid(x) * ((pos_weight - 1) y + 1)   [* weight]
// with log_sigmoid(x) = min(x, 0) - log1p(exp(-|x|)). The result has the
// target's dtype (PyTorch builds it in place on 1 - target).
tpu_status_t tpu_lower_bce_with_logits(tpu_lower_ctx_t* cx) {
  tpu_dtype_t in = tpu_arg_value_dtype(cx, 0), out = tpu_arg_value_dtype(cx, 1);
  if (!tpu_dtype_is_float(in)) return tpu_not_implemented("log_sigmoid_cpu", in);
  int args[4] = {0, 1, 2, 3};
  tpu_dtype_t common = tpu_lower_result_type(cx, args, 4);
  if (common == TPU_DTYPE_INVALID || !tpu_dtype_can_cast(common, out))
    return tpu_status_make(TPU_CODE_INVALID_ARGUMENT,
                           "result type %s can't be cast to the desired output type %s",
                           tpu_dtype_torch_name(common), tpu_dtype_torch_name(out));
  tpu_dtype_t compute = tpu_opmath(common);
  tpu_val_t v[4];
  TPU_RETURN_IF_ERROR(tpu_lower_broadcast_inputs(cx, args, 4, compute, v));
  tpu_graph_t* g = cx->g;
  tpu_val_t x = v[0], y = v[1], zero = scalar_like(cx, x, 0), one = scalar_like(cx, x, 1);
  tpu_val_t log_sig = BIN(SUB, BIN(MIN, x, zero),
                          tpu_ir_unary(g, TPU_IR_LOG1P,
                                       tpu_ir_unary(g, TPU_IR_EXP,
                                                    tpu_ir_unary(g, TPU_IR_NEG,
                                                                 tpu_ir_unary(g, TPU_IR_ABS, x)))));
  if (v[3] != TPU_VAL_NONE)
    log_sig = BIN(MUL, log_sig, BIN(ADD, BIN(MUL, BIN(SUB, v[3], one), y), one));
  tpu_val_t loss = BIN(SUB, BIN(MUL, BIN(SUB, one, y), x), log_sig);
  if (v[2] != TPU_VAL_NONE) loss = BIN(MUL, loss, v[2]);
  tpu_lower_out(cx, 0, tpu_ir_convert(g, reduce_loss(cx, loss, tpu_arg_int(cx, 4, RED_MEAN)), out));
  return TPU_OK;
}
