// AMP's grad-scaling ops (_amp_foreach_non_finite_check_and_unscale_,
// _amp_update_scale_) and the fused optimizer steps (_fused_adam_,
// _fused_adamw_, _fused_sgd_, _fused_adagrad_): each lowers its whole tensor lists into one
// program. The _foreach_* ops are in lower_foreach.c.
#include <string.h>

#include "lower/elementwise.h"

//===--- AMP grad scaling ---===//

// A 1-element float32 / int32 tensor argument, checked as PyTorch does.
static tpu_status_t one_element(const tpu_lower_ctx_t* cx, int i, const char* name,
                                tpu_dtype_t dtype) {
  const tpu_arg_t* a = tpu_arg(cx, i);
  if (a->kind != TPU_ARG_TENSOR)
    return tpu_status_make(TPU_CODE_INVALID_ARGUMENT, "%s must be a tpu tensor.", name);
  if (tpu_view_numel(a->tensor) != 1)
    return tpu_status_make(TPU_CODE_INVALID_ARGUMENT, "%s must be a 1-element tensor.", name);
  if (a->tensor->dtype != dtype)
    return tpu_status_make(TPU_CODE_INVALID_ARGUMENT, "%s must be a%s tensor.", name,
                           dtype == TPU_I32 ? "n int" : " float");
  return TPU_OK;
}

// A 1-element value reshaped to 0-d.
static tpu_val_t scalar_value(tpu_lower_ctx_t* cx, int i) {
  return tpu_ir_reshape(cx->g, tpu_lower_tensor(cx, i), NULL, 0);
}

// _amp_foreach_non_finite_check_and_unscale_(Tensor(a!)[] self,
//     Tensor(b!) found_inf, Tensor inv_scale)
// Multiplies every grad by inv_scale, and sets found_inf to 1 when any grad
// holds an inf or NaN (it is never reset here).
tpu_status_t tpu_lower_amp_unscale(tpu_lower_ctx_t* cx) {
  tpu_graph_t* g = cx->g;
  TPU_RETURN_IF_ERROR(one_element(cx, 2, "inv_scale", TPU_F32));
  TPU_RETURN_IF_ERROR(one_element(cx, 1, "found_inf", TPU_F32));
  int n = tpu_arg_count(cx, 0);
  for (int j = 0; j < n; ++j)
    if (!tpu_dtype_is_float(tpu_arg_tensor_at(cx, 0, j)->dtype))
      return tpu_status_make(TPU_CODE_INVALID_ARGUMENT,
                             "_amp_foreach_non_finite_check_and_unscale_: one of "
                             "scaled_grads is not a floating point tensor.");
  tpu_val_t inv = scalar_value(cx, 2);
  tpu_val_t bad = tpu_ir_const_i(g, TPU_BOOL, 0, NULL, 0);
  for (int j = 0; j < n; ++j) {
    const tpu_view_t* v = tpu_arg_tensor_at(cx, 0, j);
    tpu_dtype_t c = tpu_opmath(v->dtype);
    tpu_val_t x = tpu_ir_convert(g, tpu_lower_tensor_at(cx, 0, j), c);
    tpu_val_t finite = tpu_ir_unary(g, TPU_IR_IS_FINITE, x);
    tpu_val_t all = tpu_ir_reduce(g, finite, tpu_ir_const_i(g, TPU_BOOL, 1, NULL, 0), tpu_all_dims,
                                  v->rank, TPU_BODY_AND);
    bad = tpu_ir_binary(g, TPU_IR_OR, bad, tpu_ir_unary(g, TPU_IR_NOT, all));
    tpu_val_t s = tpu_ir_broadcast(g, tpu_ir_convert(g, inv, c), v->sizes, v->rank, NULL);
    tpu_lower_out(cx, j, tpu_ir_convert(g, tpu_ir_binary(g, TPU_IR_MUL, x, s), v->dtype));
  }
  const tpu_view_t* fv = tpu_arg(cx, 1)->tensor;
  tpu_val_t found = scalar_value(cx, 1);
  found = tpu_ir_select(g, bad, tpu_ir_const(g, TPU_F32, 1, NULL, 0), found);
  tpu_lower_out(cx, n, tpu_ir_reshape(g, found, fv->sizes, fv->rank));
  return TPU_OK;
}

// _amp_update_scale_(Tensor(a!) self, Tensor(b!) growth_tracker,
//     Tensor found_inf, float scale_growth_factor, float scale_backoff_factor,
//     int growth_interval)
// Backs the scale off after an inf/NaN; grows it after growth_interval
// clean steps in a row (unless that overflows float32).
tpu_status_t tpu_lower_amp_update_scale(tpu_lower_ctx_t* cx) {
  tpu_graph_t* g = cx->g;
  TPU_RETURN_IF_ERROR(one_element(cx, 1, "growth_tracker", TPU_I32));
  TPU_RETURN_IF_ERROR(one_element(cx, 0, "current_scale", TPU_F32));
  TPU_RETURN_IF_ERROR(one_element(cx, 2, "found_inf", TPU_F32));
  tpu_val_t scale = scalar_value(cx, 0), tracker = scalar_value(cx, 1);
  tpu_val_t found = tpu_ir_compare(g, TPU_CMP_NE, scalar_value(cx, 2),
                                   tpu_ir_const(g, TPU_F32, 0, NULL, 0));
  // The factors are doubles: the products are rounded to float once, as
  // PyTorch's kernel computes them.
  tpu_val_t scale64 = tpu_ir_convert(g, scale, TPU_F64);
  tpu_val_t grown = tpu_ir_convert(
      g, tpu_ir_binary(g, TPU_IR_MUL, scale64, tpu_lower_input(cx, 3, TPU_F64)), TPU_F32);
  tpu_val_t backed = tpu_ir_convert(
      g, tpu_ir_binary(g, TPU_IR_MUL, scale64, tpu_lower_input(cx, 4, TPU_F64)), TPU_F32);
  tpu_val_t successful = tpu_ir_binary(g, TPU_IR_ADD, tracker, tpu_ir_const_i(g, TPU_I32, 1, NULL, 0));
  tpu_val_t due = tpu_ir_compare(g, TPU_CMP_EQ, successful, tpu_lower_input(cx, 5, TPU_I32));
  grown = tpu_ir_select(g, tpu_ir_unary(g, TPU_IR_IS_FINITE, grown), grown, scale);
  tpu_val_t new_scale = tpu_ir_select(g, found, backed, tpu_ir_select(g, due, grown, scale));
  tpu_val_t zero = tpu_ir_const_i(g, TPU_I32, 0, NULL, 0);
  tpu_val_t new_tracker = tpu_ir_select(g, found, zero, tpu_ir_select(g, due, zero, successful));
  const tpu_view_t *sv = tpu_arg(cx, 0)->tensor, *tv = tpu_arg(cx, 1)->tensor;
  tpu_lower_out(cx, 0, tpu_ir_reshape(g, new_scale, sv->sizes, sv->rank));
  tpu_lower_out(cx, 1, tpu_ir_reshape(g, new_tracker, tv->sizes, tv->rank));
  return TPU_OK;
}

//===--- fused optimizer steps ---===//

// A number argument (float, or a 1-element tensor for lr) as a 0-d f64 value.
static tpu_val_t f64_arg(tpu_lower_ctx_t* cx, int i) {
  if (tpu_arg_is_tensor(cx, i))
    return tpu_ir_convert(cx->g, scalar_value(cx, i), TPU_F64);
  return tpu_lower_input(cx, i, TPU_F64);
}

// The optional grad_scale and found_inf of a fused step (AMP): grads are
// divided by grad_scale, and nothing changes when found_inf is 1.
typedef struct amp_args {
  tpu_val_t grad_scale;  // f32 0-d or NONE
  tpu_val_t skip;        // bool 0-d or NONE
} amp_args_t;

static tpu_status_t fused_amp_args(tpu_lower_ctx_t* cx, int scale_arg, amp_args_t* a) {
  a->grad_scale = a->skip = TPU_VAL_NONE;
  if (tpu_arg_present(cx, scale_arg)) {
    TPU_RETURN_IF_ERROR(one_element(cx, scale_arg, "grad_scale", TPU_F32));
    a->grad_scale = scalar_value(cx, scale_arg);
  }
  if (tpu_arg_present(cx, scale_arg + 1)) {
    TPU_RETURN_IF_ERROR(one_element(cx, scale_arg + 1, "found_inf", TPU_F32));
    a->skip = tpu_ir_compare(cx->g, TPU_CMP_EQ, scalar_value(cx, scale_arg + 1),
                             tpu_ir_const(cx->g, TPU_F32, 1, NULL, 0));
  }
  return TPU_OK;
}

// Result k: `value` in the target's dtype, or the old value when skipped.
static void fused_out(tpu_lower_ctx_t* cx, const amp_args_t* amp, int k, tpu_val_t value,
                      int list, int j) {
  const tpu_view_t* v = tpu_arg_tensor_at(cx, list, j);
  tpu_val_t r = tpu_ir_convert(cx->g, value, v->dtype);
  if (amp->skip != TPU_VAL_NONE)
    r = tpu_ir_select(cx->g, tpu_lower_splat_like(cx, amp->skip, r),
                      tpu_lower_tensor_at(cx, list, j), r);
  tpu_lower_out(cx, k, r);
}

// List `steps_list` (-1: none) holds the 1-element step counters.
static tpu_status_t check_fused_lists(tpu_lower_ctx_t* cx, int num_lists, int optional_list,
                                      bool optional_used, int steps_list, int* out_n) {
  int n = tpu_arg_count(cx, 0);
  for (int i = 1; i < num_lists; ++i) {
    int m = tpu_arg_count(cx, i);
    if (i == optional_list && !optional_used) continue;
    if (m != n)
      return tpu_status_make(TPU_CODE_INVALID_ARGUMENT,
                             "Tensor lists must have the same number of tensors, "
                             "got %d and %d", n, m);
  }
  for (int j = 0; j < n; ++j) {
    tpu_dtype_t t = tpu_arg_tensor_at(cx, 0, j)->dtype;
    if (!tpu_dtype_is_float(t)) return tpu_not_implemented(cx->row->name, t);
    for (int i = 1; i < num_lists; ++i) {
      const tpu_view_t* v = tpu_arg_tensor_at(cx, i, j);
      if (!v) continue;
      if (i == steps_list) {
        if (tpu_view_numel(v) != 1)
          return tpu_invalid("%s: state_steps must hold one number each", cx->row->name);
        continue;
      }
      const tpu_view_t* p = tpu_arg_tensor_at(cx, 0, j);
      bool same = v->rank == p->rank && v->dtype == p->dtype;
      for (int d = 0; same && d < p->rank; ++d) same = v->sizes[d] == p->sizes[d];
      if (!same)
        return tpu_invalid("%s: every tensor must have the shape and dtype of its parameter",
                       cx->row->name);
    }
  }
  *out_n = n;
  return TPU_OK;
}

// _fused_adam_ / _fused_adamw_(Tensor(a!)[] self, Tensor(b!)[] grads,
//     Tensor(c!)[] exp_avgs, Tensor(d!)[] exp_avg_sqs,
//     Tensor(e!)[] max_exp_avg_sqs, Tensor[] state_steps, *, float lr
//     (or Tensor lr), float beta1, float beta2, float weight_decay, float eps,
//     bool amsgrad, bool maximize, Tensor? grad_scale, Tensor? found_inf)
// PyTorch's CPU kernel step by step (in opmath, its coefficients in double).
static tpu_status_t fused_adam(tpu_lower_ctx_t* cx, bool adamw) {
  tpu_graph_t* g = cx->g;
  bool amsgrad = tpu_arg_bool(cx, 11, false), maximize = tpu_arg_bool(cx, 12, false);
  int n = 0;
  TPU_RETURN_IF_ERROR(check_fused_lists(cx, 6, 4, amsgrad, 5, &n));
  amp_args_t amp;
  TPU_RETURN_IF_ERROR(fused_amp_args(cx, 13, &amp));
  double weight_decay = tpu_arg_number(cx, 9, 0);
  tpu_val_t lr = f64_arg(cx, 6), beta1 = f64_arg(cx, 7), beta2 = f64_arg(cx, 8);
  tpu_val_t wd = f64_arg(cx, 9), eps = f64_arg(cx, 10);
  tpu_val_t one = tpu_ir_const(g, TPU_F64, 1, NULL, 0);
  tpu_val_t avg_coeff = tpu_ir_binary(g, TPU_IR_SUB, one, beta1);
  tpu_val_t sq_coeff = tpu_ir_binary(g, TPU_IR_SUB, one, beta2);
  for (int j = 0; j < n; ++j) {
    const tpu_view_t* pv = tpu_arg_tensor_at(cx, 0, j);
    tpu_dtype_t c = tpu_opmath(pv->dtype);
    // Per-step coefficients (the step is a device number), in double.
    tpu_val_t step = tpu_ir_convert(g, tpu_ir_reshape(g, tpu_lower_tensor_at(cx, 5, j), NULL, 0), TPU_F64);
    tpu_val_t bc1 = tpu_ir_binary(g, TPU_IR_SUB, one, tpu_ir_binary(g, TPU_IR_POW, beta1, step));
    tpu_val_t bc2 = tpu_ir_binary(g, TPU_IR_SUB, one, tpu_ir_binary(g, TPU_IR_POW, beta2, step));
    tpu_val_t neg_step_size = tpu_ir_unary(g, TPU_IR_NEG, tpu_ir_binary(g, TPU_IR_DIV, lr, bc1));
    tpu_val_t bc2_sqrt = tpu_ir_unary(g, TPU_IR_SQRT, bc2);
#define C(v) tpu_lower_splat_like(cx, tpu_ir_convert(g, (v), c), p)
    tpu_val_t p = tpu_ir_convert(g, tpu_lower_tensor_at(cx, 0, j), c);
    tpu_val_t grad = tpu_ir_convert(g, tpu_lower_tensor_at(cx, 1, j), c);
    if (amp.grad_scale != TPU_VAL_NONE) grad = tpu_ir_binary(g, TPU_IR_DIV, grad, C(amp.grad_scale));
    fused_out(cx, &amp, n + j, grad, 1, j);
    if (maximize) grad = tpu_ir_unary(g, TPU_IR_NEG, grad);
    if (weight_decay != 0) {
      if (adamw)
        p = tpu_ir_binary(g, TPU_IR_MUL, p,
                          C(tpu_ir_binary(g, TPU_IR_SUB, one, tpu_ir_binary(g, TPU_IR_MUL, lr, wd))));
      else
        grad = tpu_ir_binary(g, TPU_IR_ADD, grad, tpu_ir_binary(g, TPU_IR_MUL, p, C(wd)));
    }
    // exp_avg.lerp_(grad, 1 - beta1)
    tpu_val_t m = tpu_ir_convert(g, tpu_lower_tensor_at(cx, 2, j), c);
    tpu_val_t w = tpu_ir_convert(g, avg_coeff, c);
    tpu_val_t small = tpu_ir_compare(g, TPU_CMP_LT, tpu_ir_unary(g, TPU_IR_ABS, w),
                                     tpu_ir_const(g, c, 0.5, NULL, 0));
    tpu_val_t coeff = tpu_ir_select(g, small, w, tpu_ir_binary(g, TPU_IR_SUB, w, tpu_ir_const(g, c, 1, NULL, 0)));
    tpu_val_t base = tpu_ir_select(g, tpu_lower_splat_like(cx, small, p), m, grad);
    m = tpu_ir_binary(g, TPU_IR_ADD, base,
                      tpu_ir_binary(g, TPU_IR_MUL, tpu_lower_splat_like(cx, coeff, p),
                                    tpu_ir_binary(g, TPU_IR_SUB, grad, m)));
    // exp_avg_sq = exp_avg_sq * beta2 + (1 - beta2) * grad * grad
    tpu_val_t v = tpu_ir_convert(g, tpu_lower_tensor_at(cx, 3, j), c);
    v = tpu_ir_binary(g, TPU_IR_ADD, tpu_ir_binary(g, TPU_IR_MUL, v, C(beta2)),
                      tpu_ir_binary(g, TPU_IR_MUL, tpu_ir_binary(g, TPU_IR_MUL, C(sq_coeff), grad), grad));
    fused_out(cx, &amp, 2 * n + j, m, 2, j);
    fused_out(cx, &amp, 3 * n + j, v, 3, j);
    tpu_val_t d = v;
    if (amsgrad) {
      d = tpu_ew_max(cx, tpu_ir_convert(g, tpu_lower_tensor_at(cx, 4, j), c), v);
      fused_out(cx, &amp, 4 * n + j, d, 4, j);
    }
    tpu_val_t denom = tpu_ir_binary(g, TPU_IR_ADD,
                                    tpu_ir_binary(g, TPU_IR_DIV, tpu_ir_unary(g, TPU_IR_SQRT, d), C(bc2_sqrt)),
                                    C(eps));
    p = tpu_ir_binary(g, TPU_IR_ADD, p,
                      tpu_ir_binary(g, TPU_IR_DIV, tpu_ir_binary(g, TPU_IR_MUL, C(neg_step_size), m), denom));
    fused_out(cx, &amp, j, p, 0, j);
#undef C
  }
  // max_exp_avg_sqs passed without amsgrad are written back unchanged.
  if (!amsgrad)
    for (int j = 0; j < tpu_arg_count(cx, 4); ++j)
      tpu_lower_out(cx, 4 * n + j, tpu_lower_tensor_at(cx, 4, j));
  return TPU_OK;
}

tpu_status_t tpu_lower_fused_adam(tpu_lower_ctx_t* cx) { return fused_adam(cx, false); }
tpu_status_t tpu_lower_fused_adamw(tpu_lower_ctx_t* cx) { return fused_adam(cx, true); }

// _fused_sgd_(Tensor(a!)[] self, Tensor(b!)[] grads,
//     Tensor(c!)[] momentum_buffer_list, *, float weight_decay,
//     float momentum, float lr (or Tensor lr), float dampening, bool nesterov,
//     bool maximize, bool is_first_step, Tensor? grad_scale, Tensor? found_inf)
tpu_status_t tpu_lower_fused_sgd(tpu_lower_ctx_t* cx) {
  tpu_graph_t* g = cx->g;
  double momentum_value = tpu_arg_number(cx, 4, 0);
  bool has_momentum = momentum_value != 0;
  bool nesterov = tpu_arg_bool(cx, 7, false), maximize = tpu_arg_bool(cx, 8, false);
  bool first = tpu_arg_bool(cx, 9, false);
  if (!has_momentum && tpu_arg_count(cx, 2) != 0)
    return tpu_invalid("%s: momentum buffers given without momentum", cx->row->name);
  int n = 0;
  TPU_RETURN_IF_ERROR(check_fused_lists(cx, 3, 2, has_momentum, -1, &n));
  amp_args_t amp;
  TPU_RETURN_IF_ERROR(fused_amp_args(cx, 10, &amp));
  double weight_decay = tpu_arg_number(cx, 3, 0);
  tpu_val_t wd = f64_arg(cx, 3), momentum = f64_arg(cx, 4), lr = f64_arg(cx, 5);
  tpu_val_t damp = tpu_ir_binary(g, TPU_IR_SUB, tpu_ir_const(g, TPU_F64, 1, NULL, 0), f64_arg(cx, 6));
  for (int j = 0; j < n; ++j) {
    tpu_dtype_t c = tpu_opmath(tpu_arg_tensor_at(cx, 0, j)->dtype);
#define C(v) tpu_lower_splat_like(cx, tpu_ir_convert(g, (v), c), p)
    tpu_val_t p = tpu_ir_convert(g, tpu_lower_tensor_at(cx, 0, j), c);
    tpu_val_t grad = tpu_ir_convert(g, tpu_lower_tensor_at(cx, 1, j), c);
    if (amp.grad_scale != TPU_VAL_NONE) grad = tpu_ir_binary(g, TPU_IR_DIV, grad, C(amp.grad_scale));
    fused_out(cx, &amp, n + j, grad, 1, j);
    if (maximize) grad = tpu_ir_unary(g, TPU_IR_NEG, grad);
    if (weight_decay != 0) grad = tpu_ir_binary(g, TPU_IR_ADD, grad, tpu_ir_binary(g, TPU_IR_MUL, p, C(wd)));
    if (has_momentum) {
      tpu_val_t buf = grad;
      if (!first) {
        buf = tpu_ir_convert(g, tpu_lower_tensor_at(cx, 2, j), c);
        buf = tpu_ir_binary(g, TPU_IR_ADD, tpu_ir_binary(g, TPU_IR_MUL, buf, C(momentum)),
                            tpu_ir_binary(g, TPU_IR_MUL, C(damp), grad));
      }
      fused_out(cx, &amp, 2 * n + j, buf, 2, j);
      grad = nesterov ? tpu_ir_binary(g, TPU_IR_ADD, grad, tpu_ir_binary(g, TPU_IR_MUL, buf, C(momentum)))
                      : buf;
    }
    p = tpu_ir_binary(g, TPU_IR_SUB, p, tpu_ir_binary(g, TPU_IR_MUL, grad, C(lr)));
    fused_out(cx, &amp, j, p, 0, j);
#undef C
  }
  return TPU_OK;
}

// _fused_adagrad_(Tensor(a!)[] self, Tensor(b!)[] grads,
//     Tensor(c!)[] state_sums, Tensor(d!)[] state_steps, *, float lr
//     (or Tensor lr), float lr_decay, float weight_decay, float eps,
//     bool maximize, Tensor? grad_scale, Tensor? found_inf)
// PyTorch's CPU kernel (the only one PyTorch has): the step size in double
// from the (already incremented) step, its coefficients rounded to the
// parameter's dtype, the math in opmath. (That is its vectorized loop; for
// bfloat16/float16 its scalar tail, the last numel % 16 elements, keeps the
// coefficients in float and can differ from it in the last bit.)
tpu_status_t tpu_lower_fused_adagrad(tpu_lower_ctx_t* cx) {
  tpu_graph_t* g = cx->g;
  bool maximize = tpu_arg_bool(cx, 8, false);
  int n = 0;
  TPU_RETURN_IF_ERROR(check_fused_lists(cx, 4, -1, true, 3, &n));
  amp_args_t amp;
  TPU_RETURN_IF_ERROR(fused_amp_args(cx, 9, &amp));
  double weight_decay = tpu_arg_number(cx, 6, 0);
  tpu_val_t lr = f64_arg(cx, 4), lr_decay = f64_arg(cx, 5);
  tpu_val_t wd = f64_arg(cx, 6), eps = f64_arg(cx, 7);
  tpu_val_t one = tpu_ir_const(g, TPU_F64, 1, NULL, 0);
  for (int j = 0; j < n; ++j) {
    const tpu_view_t* pv = tpu_arg_tensor_at(cx, 0, j);
    tpu_dtype_t c = tpu_opmath(pv->dtype);
    // clr = lr / (1 + (step - 1) * lr_decay), the step read as float.
    tpu_val_t step = tpu_ir_convert(
        g, tpu_ir_reshape(g, tpu_lower_tensor_at(cx, 3, j), NULL, 0), TPU_F64);
    tpu_val_t decay = tpu_ir_binary(g, TPU_IR_MUL, tpu_ir_binary(g, TPU_IR_SUB, step, one),
                                    lr_decay);
    tpu_val_t clr = tpu_ir_binary(g, TPU_IR_DIV, lr, tpu_ir_binary(g, TPU_IR_ADD, one, decay));
    // The kernel's scalar_t(coefficient): rounded to the parameter's dtype.
#define C(v) tpu_lower_splat_like(cx, tpu_ir_convert(g, tpu_ir_convert(g, (v), pv->dtype), c), p)
    tpu_val_t p = tpu_ir_convert(g, tpu_lower_tensor_at(cx, 0, j), c);
    tpu_val_t grad = tpu_ir_convert(g, tpu_lower_tensor_at(cx, 1, j), c);
    if (amp.grad_scale != TPU_VAL_NONE)
      grad = tpu_ir_binary(g, TPU_IR_DIV, grad,
                           tpu_lower_splat_like(cx, tpu_ir_convert(g, amp.grad_scale, c), p));
    fused_out(cx, &amp, n + j, grad, 1, j);
    if (maximize) grad = tpu_ir_unary(g, TPU_IR_NEG, grad);
    if (weight_decay != 0)
      grad = tpu_ir_binary(g, TPU_IR_ADD, grad, tpu_ir_binary(g, TPU_IR_MUL, p, C(wd)));
    tpu_val_t sum = tpu_ir_convert(g, tpu_lower_tensor_at(cx, 2, j), c);
    sum = tpu_ir_binary(g, TPU_IR_ADD, sum, tpu_ir_binary(g, TPU_IR_MUL, grad, grad));
    fused_out(cx, &amp, 2 * n + j, sum, 2, j);
    tpu_val_t std = tpu_ir_binary(g, TPU_IR_ADD, tpu_ir_unary(g, TPU_IR_SQRT, sum), C(eps));
    tpu_val_t scaled = tpu_ir_binary(g, TPU_IR_MUL, C(clr), grad);
    p = tpu_ir_binary(g, TPU_IR_SUB, p, tpu_ir_binary(g, TPU_IR_DIV, scaled, std));
    fused_out(cx, &amp, j, p, 0, j);
#undef C
  }
  // The float-lr form (lr a float, not a tpu or CPU tensor) writes
  // state_steps (Tensor(d!)[]): back unchanged (the optimizer increments
  // them before the call); the tensor_lr form only reads them.
  if (tpu_arg(cx, 4)->kind == TPU_ARG_FLOAT)
    for (int j = 0; j < n; ++j) tpu_lower_out(cx, 3 * n + j, tpu_lower_tensor_at(cx, 3, j));
  return TPU_OK;
}
