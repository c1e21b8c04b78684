// Activations and their backward ops (the ATen ops that torch.nn.functional
// and autograd dispatch to).
//
// Formulas follow PyTorch's CPU kernels step by step (the order of the
// multiplications, which side of a comparison gets the boundary), computed
// in float for f16 / bf16 and rounded once, except where the CPU kernel
// rounds intermediate steps (noted). Scalar parameters (slopes, alpha,
// beta, thresholds) are program inputs, so changing them does not
// recompile.
#include <math.h>
#include <string.h>

#include "lower/elementwise.h"

// Activations take real numbers only.
static tpu_status_t real(tpu_lower_ctx_t* cx, tpu_dtype_t t) {
  if (!tpu_dtype_is_complex(t)) return TPU_OK;
  return tpu_not_implemented(cx->row->name, t);
}

// The output and grad_output's common dtype, checked; values in `compute`
// (opmath, or the dtype itself when `storage`).
static tpu_status_t backward2(tpu_lower_ctx_t* cx, int ga, int xa, tpu_rule_t rule,
                              tpu_ew_fn2 fn, bool storage) {
  int args[2] = {ga, xa};
  tpu_dtype_t t = tpu_lower_result_type(cx, args, 2), out;
  TPU_RETURN_IF_ERROR(real(cx, t));
  TPU_RETURN_IF_ERROR(tpu_ew_rule(cx, rule, t, &out));
  tpu_val_t v[2];
  TPU_RETURN_IF_ERROR(tpu_ew_inputs(cx, args, 2, t, storage ? t : tpu_opmath(t), 0, v));
  tpu_lower_out(cx, 0, tpu_ir_convert(cx->g, fn(cx, v[0], v[1]), out));
  return TPU_OK;
}

static tpu_val_t k(tpu_lower_ctx_t* cx, tpu_val_t like, double c) {
  return tpu_lower_const_like(cx, like, c);
}

// A divisor: a program input rather than a constant, because XLA rewrites
// x / c as x * (1 / c), which rounds differently from CPU's division.
static tpu_val_t divisor(tpu_lower_ctx_t* cx, tpu_val_t like, double c) {
  return tpu_ew_number_like(cx, like, c);
}

// Scalar argument i (dflt when absent) splatted like x.
static tpu_val_t param(tpu_lower_ctx_t* cx, int i, tpu_val_t x, double dflt) {
  return tpu_ew_arg_like(cx, i, x, dflt);
}

static tpu_val_t sel(tpu_lower_ctx_t* cx, tpu_val_t pred, tpu_val_t a, tpu_val_t b) {
  return tpu_ir_select(cx->g, pred, a, b);
}

// 1 / (1 + exp(-x)), CPU's sigmoid spelling in silu / glu.
static tpu_val_t sigmoid_of(tpu_lower_ctx_t* cx, tpu_val_t x) {
  tpu_graph_t* g = cx->g;
  tpu_val_t one = k(cx, x, 1);
  tpu_val_t e = tpu_ir_unary(g, TPU_IR_EXP, tpu_ir_unary(g, TPU_IR_NEG, x));
  return tpu_ew_div(g, one, tpu_ew_add(g, one, e));
}

//===--- relu, threshold ---===//

// relu(self): 0 where x < 0 (NaN and -0.0 pass through, as CPU's
// clamp_min), in the tensor's dtype.
tpu_status_t tpu_lower_relu(tpu_lower_ctx_t* cx) {
  if (tpu_arg_value_dtype(cx, 0) == TPU_BOOL)
    return tpu_status_make(TPU_CODE_INVALID_ARGUMENT, "Boolean inputs not supported for relu");
  TPU_RETURN_IF_ERROR(real(cx, tpu_arg_value_dtype(cx, 0)));
  tpu_val_t x = tpu_lower_tensor(cx, 0);
  tpu_lower_out(cx, 0, sel(cx, tpu_ew_cmp_k(cx, TPU_CMP_LT, x, 0), k(cx, x, 0), x));
  return TPU_OK;
}

// threshold(self, threshold, value): value where x <= threshold. The numbers
// are taken in the compute dtype: exact for f16 / bf16 (compared in float),
// truncated for integers, as on CPU.
tpu_status_t tpu_lower_threshold(tpu_lower_ctx_t* cx) {
  tpu_dtype_t t;
  TPU_RETURN_IF_ERROR(real(cx, tpu_arg_value_dtype(cx, 0)));
  TPU_RETURN_IF_ERROR(tpu_ew_rule(cx, TPU_RULE_NOT_BOOL, tpu_arg_value_dtype(cx, 0), &t));
  // As CPU's kernel: the threshold must fit the compute type, the value the tensor's.
  if (!tpu_lower_number_fits(cx, 1, tpu_opmath(t)) || !tpu_lower_number_fits(cx, 2, t))
    return TPU_OK;  // the graph's error
  tpu_val_t x = tpu_lower_input(cx, 0, tpu_opmath(t));
  tpu_val_t th = param(cx, 1, x, 0), v = param(cx, 2, x, 0);
  tpu_val_t r = sel(cx, tpu_ir_compare(cx->g, TPU_CMP_LE, x, th), v, x);
  tpu_lower_out(cx, 0, tpu_ir_convert(cx->g, r, t));
  return TPU_OK;
}

// threshold_backward(grad_output, self, threshold): 0 where self <= threshold
// (relu's backward, with threshold 0).
static tpu_val_t threshold_bw_fn(tpu_lower_ctx_t* cx, tpu_val_t g, tpu_val_t x) {
  return sel(cx, tpu_ir_compare(cx->g, TPU_CMP_LE, x, param(cx, 2, x, 0)), k(cx, g, 0), g);
}
tpu_status_t tpu_lower_threshold_backward(tpu_lower_ctx_t* cx) {
  return backward2(cx, 0, 1, TPU_RULE_NOT_BOOL, threshold_bw_fn, false);
}

//===--- gelu ---===//

static const double kBeta = M_SQRT2 * M_2_SQRTPI * 0.5;  // sqrt(2 / pi)
static const double kKappa = 0.044715;

static tpu_status_t gelu_mode(tpu_lower_ctx_t* cx, int arg, bool* tanh_mode) {
  const char* a = tpu_arg_string(cx, arg, "none");
  *tanh_mode = !strcmp(a, "tanh");
  if (!*tanh_mode && strcmp(a, "none"))
    return tpu_status_make(TPU_CODE_INVALID_ARGUMENT,
                           "approximate argument must be either none or tanh.");
  return TPU_OK;
}

// 0.5 * x * (1 + erf(x / sqrt(2))), or with tanh:
// 0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 x^3))).
static tpu_val_t gelu_fn(tpu_lower_ctx_t* cx, tpu_val_t x) {
  tpu_graph_t* g = cx->g;
  if (!strcmp(tpu_arg_string(cx, 1, "none"), "tanh")) {
    tpu_val_t one = k(cx, x, 1), half = k(cx, x, 0.5);
    tpu_val_t cube = tpu_ew_mul(g, tpu_ew_mul(g, x, x), x);
    tpu_val_t inner = tpu_ew_mul(g, k(cx, x, kBeta),
                                 tpu_ew_add(g, x, tpu_ew_mul(g, k(cx, x, kKappa), cube)));
    return tpu_ew_mul(g, tpu_ew_mul(g, half, x),
                      tpu_ew_add(g, one, tpu_ir_unary(g, TPU_IR_TANH, inner)));
  }
  return tpu_ew_gelu_erf(cx, x);
}

tpu_val_t tpu_ew_gelu_erf(tpu_lower_ctx_t* cx, tpu_val_t x) {
  tpu_graph_t* g = cx->g;
  tpu_val_t e = tpu_ir_unary(g, TPU_IR_ERF, tpu_ew_mul(g, x, k(cx, x, M_SQRT1_2)));
  return tpu_ew_mul(g, tpu_ew_mul(g, x, k(cx, x, 0.5)), tpu_ew_add(g, k(cx, x, 1), e));
}
tpu_status_t tpu_lower_gelu(tpu_lower_ctx_t* cx) {
  bool t;
  TPU_RETURN_IF_ERROR(gelu_mode(cx, 1, &t));
  return tpu_ew_unary(cx, TPU_RULE_FLOATING, gelu_fn);
}

static tpu_val_t gelu_bw_fn(tpu_lower_ctx_t* cx, tpu_val_t dy, tpu_val_t x) {
  tpu_graph_t* g = cx->g;
  tpu_val_t one = k(cx, x, 1), half = k(cx, x, 0.5);
  if (!strcmp(tpu_arg_string(cx, 2, "none"), "tanh")) {
    tpu_val_t x_sq = tpu_ew_mul(g, x, x);
    tpu_val_t x_cube = tpu_ew_mul(g, x_sq, x);
    tpu_val_t inner = tpu_ew_mul(g, k(cx, x, kBeta),
                                 tpu_ew_add(g, x, tpu_ew_mul(g, k(cx, x, kKappa), x_cube)));
    tpu_val_t th = tpu_ir_unary(g, TPU_IR_TANH, inner);
    tpu_val_t left = tpu_ew_mul(g, half, x);
    tpu_val_t right = tpu_ew_add(g, one, th);
    tpu_val_t left_d = tpu_ew_mul(g, half, right);
    tpu_val_t tanh_d = tpu_ew_sub(g, one, tpu_ew_mul(g, th, th));
    tpu_val_t inner_d = tpu_ew_mul(g, k(cx, x, kBeta),
                                   tpu_ew_add(g, one, tpu_ew_mul(g, k(cx, x, 3 * kKappa), x_sq)));
    tpu_val_t right_d = tpu_ew_mul(g, tpu_ew_mul(g, left, tanh_d), inner_d);
    return tpu_ew_mul(g, dy, tpu_ew_add(g, left_d, right_d));
  }
  tpu_val_t e = tpu_ir_unary(g, TPU_IR_ERF, tpu_ew_mul(g, x, k(cx, x, M_SQRT1_2)));
  tpu_val_t cdf = tpu_ew_mul(g, half, tpu_ew_add(g, one, e));
  tpu_val_t gauss = tpu_ir_unary(g, TPU_IR_EXP, tpu_ew_mul(g, tpu_ew_mul(g, x, x), k(cx, x, -0.5)));
  tpu_val_t pdf = tpu_ew_mul(g, k(cx, x, M_2_SQRTPI * M_SQRT1_2 * 0.5), gauss);
  return tpu_ew_mul(g, dy, tpu_ew_add(g, cdf, tpu_ew_mul(g, x, pdf)));
}
tpu_status_t tpu_lower_gelu_backward(tpu_lower_ctx_t* cx) {
  bool t;
  TPU_RETURN_IF_ERROR(gelu_mode(cx, 2, &t));
  return backward2(cx, 0, 1, TPU_RULE_FLOATING, gelu_bw_fn, false);
}

//===--- silu, mish, sigmoid / tanh backward ---===//

static tpu_val_t silu_fn(tpu_lower_ctx_t* cx, tpu_val_t x) {
  tpu_graph_t* g = cx->g;
  tpu_val_t e = tpu_ir_unary(g, TPU_IR_EXP, tpu_ir_unary(g, TPU_IR_NEG, x));
  return tpu_ew_div(g, x, tpu_ew_add(g, k(cx, x, 1), e));
}
// (CPU defines silu for complex numbers too, with the same formula)
tpu_status_t tpu_lower_silu(tpu_lower_ctx_t* cx) {
  bool complex = tpu_dtype_is_complex(tpu_arg_value_dtype(cx, 0));
  return tpu_ew_unary(cx, complex ? TPU_RULE_SAME : TPU_RULE_FLOATING, silu_fn);
}

// x * tanh(log1p(exp(x)))
static tpu_val_t mish_fn(tpu_lower_ctx_t* cx, tpu_val_t x) {
  tpu_graph_t* g = cx->g;
  tpu_val_t sp = tpu_ir_unary(g, TPU_IR_LOG1P, tpu_ir_unary(g, TPU_IR_EXP, x));
  return tpu_ew_mul(g, x, tpu_ir_unary(g, TPU_IR_TANH, sp));
}
tpu_status_t tpu_lower_mish(tpu_lower_ctx_t* cx) {
  return tpu_ew_unary(cx, TPU_RULE_FLOATING, mish_fn);
}

// grad * (1 - y) * y
static tpu_val_t sigmoid_bw_fn(tpu_lower_ctx_t* cx, tpu_val_t dy, tpu_val_t y) {
  tpu_graph_t* g = cx->g;
  return tpu_ew_mul(g, tpu_ew_mul(g, dy, tpu_ew_sub(g, k(cx, y, 1), y)), y);
}
// CPU's f16 kernel rounds each step to half; its bf16 kernel works in float.
tpu_status_t tpu_lower_sigmoid_backward(tpu_lower_ctx_t* cx) {
  int args[2] = {0, 1};
  bool half = tpu_lower_result_type(cx, args, 2) == TPU_F16;
  return backward2(cx, 0, 1, TPU_RULE_FLOATING, sigmoid_bw_fn, half);
}

// grad * (1 - y * y)
static tpu_val_t tanh_bw_fn(tpu_lower_ctx_t* cx, tpu_val_t dy, tpu_val_t y) {
  tpu_graph_t* g = cx->g;
  return tpu_ew_mul(g, dy, tpu_ew_sub(g, k(cx, y, 1), tpu_ew_mul(g, y, y)));
}
tpu_status_t tpu_lower_tanh_backward(tpu_lower_ctx_t* cx) {
  return backward2(cx, 0, 1, TPU_RULE_FLOATING, tanh_bw_fn, false);
}

//===--- leaky_relu, elu ---===//

// leaky_relu(self, negative_slope=0.01): x > 0 ? x : x * slope
static tpu_val_t leaky_fn(tpu_lower_ctx_t* cx, tpu_val_t x) {
  tpu_val_t neg = tpu_ew_mul(cx->g, x, param(cx, 1, x, 0.01));
  return sel(cx, tpu_ew_cmp_k(cx, TPU_CMP_GT, x, 0), x, neg);
}
tpu_status_t tpu_lower_leaky_relu(tpu_lower_ctx_t* cx) {
  return tpu_ew_unary(cx, TPU_RULE_FLOATING, leaky_fn);
}

// leaky_relu_backward(grad_output, self, negative_slope, self_is_result)
static tpu_val_t leaky_bw_fn(tpu_lower_ctx_t* cx, tpu_val_t dy, tpu_val_t x) {
  tpu_val_t neg = tpu_ew_mul(cx->g, dy, param(cx, 2, dy, 0.01));
  return sel(cx, tpu_ew_cmp_k(cx, TPU_CMP_GT, x, 0), dy, neg);
}
tpu_status_t tpu_lower_leaky_relu_backward(tpu_lower_ctx_t* cx) {
  if (tpu_arg_bool(cx, 3, false) && tpu_arg_number(cx, 2, 0.01) < 0)
    return tpu_status_make(
        TPU_CODE_INVALID_ARGUMENT,
        "In-place leakyReLu backward calculation is triggered with a negative slope "
        "which is not supported. This is caused by calling in-place forward function "
        "with a negative slope, please call out-of-place version instead. File an "
        "issue at https://github.com/pytorch/pytorch if you do require supporting "
        "in-place leakRelu backward calculation with negative slope");
  return backward2(cx, 0, 1, TPU_RULE_FLOATING, leaky_bw_fn, false);
}

// A product of two numbers rounded as CPU rounds it: in float for f32 and
// narrower dtypes, in double for f64.
static double coef(tpu_val_t like, tpu_lower_ctx_t* cx, double a, double b) {
  if (tpu_graph_ok(cx->g) && tpu_ir_dtype(cx->g, like) == TPU_F64) return a * b;
  return (double)((float)a * (float)b);
}

// elu(self, alpha=1, scale=1, input_scale=1):
// x < 0 ? expm1(x * input_scale) * (alpha * scale) : x * scale
static tpu_val_t elu_fn(tpu_lower_ctx_t* cx, tpu_val_t x) {
  tpu_graph_t* g = cx->g;
  double alpha = tpu_arg_number(cx, 1, 1), scale = tpu_arg_number(cx, 2, 1);
  tpu_val_t neg = tpu_ew_number_like(cx, x, coef(x, cx, alpha, scale));
  tpu_val_t pos = param(cx, 2, x, 1), in = param(cx, 3, x, 1);
  tpu_val_t e = tpu_ew_mul(g, tpu_ir_unary(g, TPU_IR_EXPM1, tpu_ew_mul(g, x, in)), neg);
  return sel(cx, tpu_ew_cmp_k(cx, TPU_CMP_LT, x, 0), e, tpu_ew_mul(g, x, pos));
}
tpu_status_t tpu_lower_elu(tpu_lower_ctx_t* cx) {
  return tpu_ew_unary(cx, TPU_RULE_FLOATING, elu_fn);
}

// elu_backward(grad_output, alpha, scale, input_scale, is_result,
// self_or_result): for b <= 0 (and NaN, as CPU's vector kernel),
//   is_result: dy * input_scale * (b + alpha * scale)
//   else:      dy * input_scale * (alpha * scale) * exp(b * input_scale)
// and dy * scale elsewhere.
static tpu_val_t elu_bw_fn(tpu_lower_ctx_t* cx, tpu_val_t dy, tpu_val_t b) {
  tpu_graph_t* g = cx->g;
  double alpha = tpu_arg_number(cx, 1, 1), scale = tpu_arg_number(cx, 2, 1);
  tpu_val_t neg = tpu_ew_number_like(cx, b, coef(b, cx, alpha, scale));
  tpu_val_t pos = param(cx, 2, b, 1), in = param(cx, 3, b, 1);
  tpu_val_t r;
  if (tpu_arg_bool(cx, 4, false))
    r = tpu_ew_mul(g, tpu_ew_mul(g, dy, in), tpu_ew_add(g, b, neg));
  else
    r = tpu_ew_mul(g, tpu_ew_mul(g, tpu_ew_mul(g, dy, in), neg),
                   tpu_ir_unary(g, TPU_IR_EXP, tpu_ew_mul(g, b, in)));
  return sel(cx, tpu_ew_cmp_k(cx, TPU_CMP_GT, b, 0), tpu_ew_mul(g, dy, pos), r);
}
tpu_status_t tpu_lower_elu_backward(tpu_lower_ctx_t* cx) {
  if (tpu_arg_bool(cx, 4, false) && tpu_arg_number(cx, 1, 1) < 0)
    return tpu_status_make(
        TPU_CODE_INVALID_ARGUMENT,
        "In-place elu backward calculation is triggered with a negative slope which "
        "is not supported. This is caused by calling in-place forward function with "
        "a negative slope, please call out-of-place version instead.");
  return backward2(cx, 0, 5, TPU_RULE_FLOATING, elu_bw_fn, false);
}

//===--- softplus ---===//

// softplus(self, beta=1, threshold=20): x * beta > threshold ? x
// : log1p(exp(x * beta)) / beta
static tpu_val_t softplus_fn(tpu_lower_ctx_t* cx, tpu_val_t x) {
  tpu_graph_t* g = cx->g;
  tpu_val_t beta = param(cx, 1, x, 1), th = param(cx, 2, x, 20);
  tpu_val_t xb = tpu_ew_mul(g, x, beta);
  tpu_val_t sp = tpu_ir_unary(g, TPU_IR_LOG1P, tpu_ir_unary(g, TPU_IR_EXP, xb));
  tpu_val_t soft = tpu_ew_div(g, sp, beta);
  return sel(cx, tpu_ir_compare(g, TPU_CMP_GT, xb, th), x, soft);
}
tpu_status_t tpu_lower_softplus(tpu_lower_ctx_t* cx) {
  return tpu_ew_unary(cx, TPU_RULE_FLOATING, softplus_fn);
}

// softplus_backward(grad_output, self, beta, threshold):
// z = exp(x * beta); x * beta > threshold ? dy : dy * z / (z + 1)
static tpu_val_t softplus_bw_fn(tpu_lower_ctx_t* cx, tpu_val_t dy, tpu_val_t x) {
  tpu_graph_t* g = cx->g;
  tpu_val_t beta = param(cx, 2, x, 1), th = param(cx, 3, x, 20);
  tpu_val_t xb = tpu_ew_mul(g, x, beta);
  tpu_val_t z = tpu_ir_unary(g, TPU_IR_EXP, xb);
  tpu_val_t r = tpu_ew_div(g, tpu_ew_mul(g, dy, z), tpu_ew_add(g, z, k(cx, z, 1)));
  return sel(cx, tpu_ir_compare(g, TPU_CMP_GT, xb, th), dy, r);
}
tpu_status_t tpu_lower_softplus_backward(tpu_lower_ctx_t* cx) {
  return backward2(cx, 0, 1, TPU_RULE_FLOATING, softplus_bw_fn, false);
}

//===--- hardtanh, hardswish, hardsigmoid ---===//

// hardtanh(self, min_val=-1, max_val=1): clamp in the tensor's dtype (the
// bounds of an integer tensor are truncated to integers, as on CPU).
tpu_status_t tpu_lower_hardtanh(tpu_lower_ctx_t* cx) {
  tpu_dtype_t t = tpu_arg_value_dtype(cx, 0);
  if (t == TPU_BOOL)
    return tpu_status_make(TPU_CODE_INVALID_ARGUMENT, "Bool inputs not supported for hardtanh");
  TPU_RETURN_IF_ERROR(real(cx, t));
  if (!tpu_lower_number_fits(cx, 1, t) || !tpu_lower_number_fits(cx, 2, t))
    return TPU_OK;  // the graph's error, as CPU's clamp bounds
  tpu_val_t x = tpu_lower_input(cx, 0, tpu_opmath(t));
  tpu_val_t r = tpu_ew_min(cx, tpu_ew_max(cx, x, param(cx, 1, x, -1)), param(cx, 2, x, 1));
  tpu_lower_out(cx, 0, tpu_ir_convert(cx->g, r, t));
  return TPU_OK;
}

// hardtanh_backward(grad_output, self, min_val, max_val):
// dy where min < x < max, else 0 (also for NaN)
static tpu_val_t hardtanh_bw_fn(tpu_lower_ctx_t* cx, tpu_val_t dy, tpu_val_t x) {
  tpu_graph_t* g = cx->g;
  tpu_val_t in = tpu_ir_binary(g, TPU_IR_AND, tpu_ir_compare(g, TPU_CMP_GT, x, param(cx, 2, x, -1)),
                               tpu_ir_compare(g, TPU_CMP_LT, x, param(cx, 3, x, 1)));
  return sel(cx, in, dy, k(cx, dy, 0));
}
tpu_status_t tpu_lower_hardtanh_backward(tpu_lower_ctx_t* cx) {
  return backward2(cx, 0, 1, TPU_RULE_FLOATING, hardtanh_bw_fn, false);
}

// min(max(x + 3, 0), 6)
static tpu_val_t relu6_shift(tpu_lower_ctx_t* cx, tpu_val_t x) {
  tpu_val_t s = tpu_ew_add(cx->g, x, k(cx, x, 3));
  return tpu_ew_min(cx, tpu_ew_max(cx, s, k(cx, x, 0)), k(cx, x, 6));
}

// x * min(max(x + 3, 0), 6) / 6
static tpu_val_t hardswish_fn(tpu_lower_ctx_t* cx, tpu_val_t x) {
  tpu_graph_t* g = cx->g;
  return tpu_ew_div(g, tpu_ew_mul(g, x, relu6_shift(cx, x)), divisor(cx, x, 6));
}
tpu_status_t tpu_lower_hardswish(tpu_lower_ctx_t* cx) {
  return tpu_ew_unary(cx, TPU_RULE_FLOATING, hardswish_fn);
}

// x <= -3 ? 0 : x >= 3 ? dy : dy * (x / 3 + 0.5) (NaN in the middle)
static tpu_val_t hardswish_bw_fn(tpu_lower_ctx_t* cx, tpu_val_t dy, tpu_val_t x) {
  tpu_graph_t* g = cx->g;
  tpu_val_t slope = tpu_ew_add(g, tpu_ew_div(g, x, divisor(cx, x, 3)), k(cx, x, 0.5));
  tpu_val_t mid = tpu_ew_mul(g, dy, slope);
  tpu_val_t r = sel(cx, tpu_ew_cmp_k(cx, TPU_CMP_GE, x, 3), dy, mid);
  return sel(cx, tpu_ew_cmp_k(cx, TPU_CMP_LE, x, -3), k(cx, dy, 0), r);
}
tpu_status_t tpu_lower_hardswish_backward(tpu_lower_ctx_t* cx) {
  return backward2(cx, 0, 1, TPU_RULE_FLOATING, hardswish_bw_fn, false);
}

// min(max(x + 3, 0), 6) / 6
static tpu_val_t hardsigmoid_fn(tpu_lower_ctx_t* cx, tpu_val_t x) {
  return tpu_ew_div(cx->g, relu6_shift(cx, x), divisor(cx, x, 6));
}
tpu_status_t tpu_lower_hardsigmoid(tpu_lower_ctx_t* cx) {
  return tpu_ew_unary(cx, TPU_RULE_FLOATING, hardsigmoid_fn);
}

// -3 < x < 3 ? dy * (1/6) : 0
static tpu_val_t hardsigmoid_bw_fn(tpu_lower_ctx_t* cx, tpu_val_t dy, tpu_val_t x) {
  tpu_graph_t* g = cx->g;
  tpu_val_t in = tpu_ir_binary(g, TPU_IR_AND, tpu_ew_cmp_k(cx, TPU_CMP_GT, x, -3),
                               tpu_ew_cmp_k(cx, TPU_CMP_LT, x, 3));
  bool wide = tpu_graph_ok(g) && tpu_ir_dtype(g, dy) == TPU_F64;
  double sixth = wide ? 1.0 / 6.0 : (double)(1.0f / 6.0f);
  return sel(cx, in, tpu_ew_mul(g, dy, k(cx, dy, sixth)), k(cx, dy, 0));
}
tpu_status_t tpu_lower_hardsigmoid_backward(tpu_lower_ctx_t* cx) {
  return backward2(cx, 0, 1, TPU_RULE_FLOATING, hardsigmoid_bw_fn, false);
}

//===--- log_sigmoid ---===//

// log_sigmoid_forward(self) -> (output, buffer): buffer = exp(-|x|),
// output = min(x, 0) - log1p(buffer).
tpu_status_t tpu_lower_log_sigmoid_forward(tpu_lower_ctx_t* cx) {
  tpu_dtype_t t;
  TPU_RETURN_IF_ERROR(tpu_ew_rule(cx, TPU_RULE_FLOATING, tpu_arg_value_dtype(cx, 0), &t));
  tpu_graph_t* g = cx->g;
  tpu_val_t x = tpu_lower_input(cx, 0, tpu_opmath(t));
  tpu_val_t neg_abs = tpu_ir_unary(g, TPU_IR_NEG, tpu_ir_unary(g, TPU_IR_ABS, x));
  tpu_val_t buf = tpu_ir_unary(g, TPU_IR_EXP, neg_abs);
  tpu_val_t out = tpu_ew_sub(g, tpu_ew_min(cx, x, k(cx, x, 0)), tpu_ir_unary(g, TPU_IR_LOG1P, buf));
  tpu_lower_out(cx, 0, tpu_ir_convert(g, out, t));
  tpu_lower_out(cx, 1, tpu_ir_convert(g, buf, t));
  return TPU_OK;
}

// log_sigmoid_backward(grad_output, self, buffer):
// (max_deriv - sign * (b / (1 + b))) * dy with max_deriv, sign = (1, 1) for
// x < 0, else (0, -1).
tpu_status_t tpu_lower_log_sigmoid_backward(tpu_lower_ctx_t* cx) {
  int args[3] = {0, 1, 2};
  tpu_dtype_t t = tpu_lower_result_type(cx, args, 3), out;
  TPU_RETURN_IF_ERROR(tpu_ew_rule(cx, TPU_RULE_FLOATING, t, &out));
  tpu_graph_t* g = cx->g;
  tpu_val_t v[3];
  TPU_RETURN_IF_ERROR(tpu_ew_inputs(cx, args, 3, t, tpu_opmath(t), 0, v));
  tpu_val_t dy = v[0], x = v[1], b = v[2];
  tpu_val_t neg = tpu_ew_cmp_k(cx, TPU_CMP_LT, x, 0);
  tpu_val_t one = k(cx, x, 1), zero = k(cx, x, 0);
  tpu_val_t max_deriv = sel(cx, neg, one, zero);
  tpu_val_t sign = sel(cx, neg, one, k(cx, x, -1));
  tpu_val_t q = tpu_ew_div(g, b, tpu_ew_add(g, one, b));
  tpu_val_t r = tpu_ew_mul(g, tpu_ew_sub(g, max_deriv, tpu_ew_mul(g, sign, q)), dy);
  tpu_lower_out(cx, 0, tpu_ir_convert(g, r, out));
  return TPU_OK;
}

//===--- glu ---===//

// The halving dim of glu / glu_backward's self (arg 1 for the backward).
static tpu_status_t glu_dim(tpu_lower_ctx_t* cx, int self, int dim_arg, int64_t* dim) {
  int rank = tpu_arg_rank(cx, self);
  if (rank == 0)
    return tpu_status_make(TPU_CODE_INVALID_ARGUMENT,
                           "glu does not support scalars because halving size must be even");
  TPU_RETURN_IF_ERROR(tpu_wrap_dim(tpu_arg_int(cx, dim_arg, -1), rank, dim));
  int64_t n = tpu_arg_sizes(cx, self)[*dim];
  if (n % 2)
    return tpu_status_make(TPU_CODE_INVALID_ARGUMENT,
                           "Halving dimension must be even, but dimension %lld is size %lld",
                           (long long)*dim, (long long)n);
  return TPU_OK;
}

// The two halves of x along dim.
static void halves(tpu_lower_ctx_t* cx, tpu_val_t x, int64_t dim, tpu_val_t* a, tpu_val_t* b) {
  *a = *b = TPU_VAL_NONE;
  if (!tpu_graph_ok(cx->g)) return;
  const tpu_type_t* t = tpu_ir_type(cx->g, x);
  int64_t start[TPU_MAX_RANK] = {0}, limit[TPU_MAX_RANK], strides[TPU_MAX_RANK];
  for (int i = 0; i < t->rank; ++i) {
    limit[i] = t->dims[i];
    strides[i] = 1;
  }
  int64_t h = t->dims[dim] / 2;
  limit[dim] = h;
  *a = tpu_ir_slice(cx->g, x, start, limit, strides);
  start[dim] = h;
  limit[dim] = 2 * h;
  *b = tpu_ir_slice(cx->g, x, start, limit, strides);
}

// glu(self, dim=-1): a * (1 / (1 + exp(-b))) for the halves a, b.
tpu_status_t tpu_lower_glu(tpu_lower_ctx_t* cx) {
  int64_t dim;
  TPU_RETURN_IF_ERROR(glu_dim(cx, 0, 1, &dim));
  tpu_dtype_t t;
  TPU_RETURN_IF_ERROR(tpu_ew_rule(cx, TPU_RULE_FLOATING, tpu_arg_value_dtype(cx, 0), &t));
  tpu_val_t a, b;
  halves(cx, tpu_lower_input(cx, 0, tpu_opmath(t)), dim, &a, &b);
  tpu_lower_out(cx, 0, tpu_ir_convert(cx->g, tpu_ew_mul(cx->g, a, sigmoid_of(cx, b)), t));
  return TPU_OK;
}

// glu_jvp(glu, x, dx, dim): glu's forward-mode derivative, with x = [a, b]
// and dx = [da, db] halved along dim: da * s + glu * (db - s * db), s =
// sigmoid(b), as CPU's and CUDA's kernels compute it (in opmath).
tpu_status_t tpu_lower_glu_jvp(tpu_lower_ctx_t* cx) {
  int64_t dim;
  TPU_RETURN_IF_ERROR(glu_dim(cx, 1, 3, &dim));
  tpu_dtype_t t;
  TPU_RETURN_IF_ERROR(tpu_ew_rule(cx, TPU_RULE_FLOATING, tpu_arg_value_dtype(cx, 1), &t));
  int rank = tpu_arg_rank(cx, 1);
  bool same = tpu_arg_rank(cx, 2) == rank && tpu_arg_rank(cx, 0) == rank;
  for (int i = 0; same && i < rank; ++i)
    same = tpu_arg_sizes(cx, 2)[i] == tpu_arg_sizes(cx, 1)[i] &&
           tpu_arg_sizes(cx, 0)[i] == tpu_arg_sizes(cx, 1)[i] / (i == dim ? 2 : 1);
  if (!same)
    return tpu_status_make(TPU_CODE_INVALID_ARGUMENT,
                           "glu_jvp: glu must be x halved along dim, and dx shaped as x");
  tpu_graph_t* g = cx->g;
  tpu_dtype_t c = tpu_opmath(t);
  tpu_val_t a, b, da, db;
  halves(cx, tpu_lower_input(cx, 1, c), dim, &a, &b);
  halves(cx, tpu_lower_input(cx, 2, c), dim, &da, &db);
  tpu_val_t s = sigmoid_of(cx, b);
  tpu_val_t r = tpu_ew_add(g, tpu_ew_mul(g, da, s),
                           tpu_ew_mul(g, tpu_lower_input(cx, 0, c),
                                      tpu_ew_sub(g, db, tpu_ew_mul(g, s, db))));
  tpu_lower_out(cx, 0, tpu_ir_convert(g, r, t));
  return TPU_OK;
}

// glu_backward(grad_output, self, dim): CPU stores sigmoid(b) in the
// tensor's dtype first, then grad_a = s * dy, grad_b = (1 - s) * s * a * dy.
tpu_status_t tpu_lower_glu_backward(tpu_lower_ctx_t* cx) {
  int64_t dim;
  TPU_RETURN_IF_ERROR(glu_dim(cx, 1, 2, &dim));
  int args[2] = {0, 1};
  tpu_dtype_t t = tpu_lower_result_type(cx, args, 2), out;
  TPU_RETURN_IF_ERROR(tpu_ew_rule(cx, TPU_RULE_FLOATING, t, &out));
  tpu_graph_t* g = cx->g;
  tpu_dtype_t compute = tpu_opmath(t);
  tpu_val_t a, b;
  halves(cx, tpu_lower_input(cx, 1, compute), dim, &a, &b);
  tpu_val_t dy = tpu_lower_input(cx, 0, compute);
  if (!tpu_graph_ok(g)) return TPU_OK;
  const tpu_type_t* at = tpu_ir_type(g, a);
  if (tpu_arg_rank(cx, 0) != at->rank ||
      memcmp(tpu_arg_sizes(cx, 0), at->dims, sizeof(int64_t) * (size_t)at->rank))
    return tpu_status_make(TPU_CODE_INVALID_ARGUMENT,
                           "glu_backward: grad_output has the wrong shape");
  tpu_val_t s = tpu_ir_unary(g, TPU_IR_LOGISTIC, b);
  s = tpu_ir_convert(g, tpu_ir_convert(g, s, t), compute);
  tpu_val_t ga = tpu_ew_mul(g, s, dy);
  tpu_val_t ds = tpu_ew_mul(g, tpu_ew_sub(g, k(cx, s, 1), s), s);
  tpu_val_t gb = tpu_ew_mul(g, tpu_ew_mul(g, ds, a), dy);
  tpu_val_t parts[2] = {tpu_ir_convert(g, ga, out), tpu_ir_convert(g, gb, out)};
  tpu_lower_out(cx, 0, tpu_ir_concat(g, parts, 2, (int)dim));
  return TPU_OK;
}
