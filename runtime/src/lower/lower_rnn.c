// The fused LSTM and GRU cells. PyTorch's nn.LSTM, nn.GRU, nn.LSTMCell and
// nn.GRUCell call these on every non-CPU device (ATen/native/RNN.cpp): the
// two gate products are computed by ordinary matmuls, and the cell gets
// them, its previous state and the optional biases. The workspace is ours
// alone (only the backward ops read it): the gates after their activations,
// as PyTorch's CUDA kernels keep them. Half-precision cells compute in float.
#include <string.h>

#include "lower/elementwise.h"

// A (rows, k*h) value's j-th (rows, h) block.
static tpu_val_t chunk(tpu_graph_t* g, tpu_val_t x, int64_t rows, int64_t h, int j) {
  int64_t start[2] = {0, j * h}, limit[2] = {rows, (j + 1) * h};
  return tpu_ir_slice(g, x, start, limit, NULL);
}

static tpu_val_t one_minus(tpu_graph_t* g, tpu_val_t x) {
  const tpu_type_t* t = tpu_ir_type(g, x);
  return tpu_ew_sub(g, tpu_ir_const(g, t->dtype, 1.0, t->dims, t->rank), x);
}
// The derivative of a sigmoid or tanh through its output y.
static tpu_val_t dsigmoid(tpu_graph_t* g, tpu_val_t y) { return tpu_ew_mul(g, y, one_minus(g, y)); }
static tpu_val_t dtanh(tpu_graph_t* g, tpu_val_t y) { return one_minus(g, tpu_ew_mul(g, y, y)); }

static tpu_status_t size_error(const char* op, const char* what, int arg, const char* name) {
  return tpu_status_make(TPU_CODE_INVALID_ARGUMENT,
                         "Expected %s for argument #%d '%s' (while checking arguments for %s)",
                         what, arg, name, op);
}

// The checks of PyTorch's CUDA cells: gates (rows, k*h) of one shape, biases
// of k*h elements or both absent, the state (rows, h), one floating dtype.
// Arguments: input_gates 0, hidden_gates 1, state 2, biases 3 and 4.
static tpu_status_t check_cell(tpu_lower_ctx_t* cx, const char* op, const char* state, int k,
                               int64_t* rows, int64_t* h) {
  if (tpu_arg_rank(cx, 0) != 2) return size_error(op, "2-dimensional tensor", 1, "input_gates");
  const int64_t* gd = tpu_arg_sizes(cx, 0);
  if (tpu_arg_rank(cx, 1) != 2 || memcmp(tpu_arg_sizes(cx, 1), gd, 2 * sizeof *gd))
    return size_error(op, "hidden_gates to have input_gates' size", 2, "hidden_gates");
  if (tpu_arg_present(cx, 3) != tpu_arg_present(cx, 4))
    return size_error(op, "both biases or neither", 4, "input_bias");
  for (int b = 3; b <= 4 && tpu_arg_present(cx, b); ++b)
    if (tpu_arg_rank(cx, b) != 1 || tpu_arg_sizes(cx, b)[0] != gd[1])
      return size_error(op, "a 1-dimensional bias of the gates' width", b + 1,
                        b == 3 ? "input_bias" : "hidden_bias");
  *rows = gd[0];
  *h = gd[1] / k;
  if (gd[1] % k || tpu_arg_rank(cx, 2) != 2 || tpu_arg_sizes(cx, 2)[0] != *rows ||
      tpu_arg_sizes(cx, 2)[1] != *h)
    return size_error(op, "a (batch, gates / gate count) state", 3, state);
  tpu_dtype_t t = tpu_arg_value_dtype(cx, 0);
  if (!tpu_dtype_is_float(t)) return tpu_not_implemented(op, t);
  for (int i = 1; i <= 4; ++i)
    if (tpu_arg_present(cx, i) && tpu_arg_value_dtype(cx, i) != t)
      return tpu_status_make(TPU_CODE_INVALID_ARGUMENT, "%s: expected scalar type %s but found %s",
                             op, tpu_dtype_torch_name(t),
                             tpu_dtype_torch_name(tpu_arg_value_dtype(cx, i)));
  return TPU_OK;
}

// Gates argument i plus bias argument b (if present), in the compute type.
static tpu_val_t gates(tpu_lower_ctx_t* cx, int i, int b, tpu_dtype_t acc) {
  tpu_val_t x = tpu_lower_input(cx, i, acc);
  if (!tpu_arg_present(cx, b)) return x;
  const tpu_type_t* t = tpu_ir_type(cx->g, x);
  int64_t dim = 1;
  tpu_val_t bias = tpu_ir_broadcast(cx->g, tpu_lower_input(cx, b, acc), t->dims, 2, &dim);
  return tpu_ew_add(cx->g, x, bias);
}

// The sum over the batch: a bias's gradient.
static tpu_val_t batch_sum(tpu_graph_t* g, tpu_val_t x) {
  int64_t d0 = 0;
  return tpu_ir_reduce(g, x, tpu_ir_const(g, tpu_ir_dtype(g, x), 0, NULL, 0), &d0, 1,
                       TPU_BODY_ADD);
}

// _thnn_fused_lstm_cell(input_gates, hidden_gates, cx, input_bias?,
// hidden_bias?) -> (hy, cy, workspace): gates i, f, g, o in that order.
tpu_status_t tpu_lower_lstm_cell(tpu_lower_ctx_t* cx) {
  int64_t rows, h;
  TPU_RETURN_IF_ERROR(check_cell(cx, "_thnn_fused_lstm_cell", "cx", 4, &rows, &h));
  tpu_graph_t* g = cx->g;
  tpu_dtype_t t = tpu_arg_value_dtype(cx, 0), acc = tpu_opmath(t);
  tpu_val_t z = tpu_ew_add(g, gates(cx, 0, 3, acc), gates(cx, 1, 4, acc));
  tpu_val_t act[4];
  for (int j = 0; j < 4; ++j)
    act[j] = tpu_ir_unary(g, j == 2 ? TPU_IR_TANH : TPU_IR_LOGISTIC, chunk(g, z, rows, h, j));
  tpu_val_t c = tpu_ew_add(g, tpu_ew_mul(g, act[1], tpu_lower_input(cx, 2, acc)),
                           tpu_ew_mul(g, act[0], act[2]));
  tpu_val_t hy = tpu_ew_mul(g, act[3], tpu_ir_unary(g, TPU_IR_TANH, c));
  tpu_lower_out(cx, 0, tpu_ir_convert(g, hy, t));
  tpu_lower_out(cx, 1, tpu_ir_convert(g, c, t));
  tpu_lower_out(cx, 2, tpu_ir_convert(g, tpu_ir_concat(g, act, 4, 1), t));
  return TPU_OK;
}

// _thnn_fused_lstm_cell_backward_impl(grad_hy?, grad_cy?, cx, cy, workspace,
// has_bias) -> (grad_gates, grad_cx, grad_bias?): grad_gates is the gradient
// of both gate inputs (they are summed), grad_bias its sum over the batch.
tpu_status_t tpu_lower_lstm_cell_backward(tpu_lower_ctx_t* cx) {
  tpu_graph_t* g = cx->g;
  if (tpu_arg_rank(cx, 4) != 2 || tpu_arg_rank(cx, 2) != 2 ||
      tpu_arg_sizes(cx, 4)[1] != 4 * tpu_arg_sizes(cx, 2)[1])
    return size_error("_thnn_fused_lstm_cell_backward_impl", "a (batch, 4 * hidden) workspace",
                      5, "workspace");
  int64_t rows = tpu_arg_sizes(cx, 2)[0], h = tpu_arg_sizes(cx, 2)[1];
  tpu_dtype_t t = tpu_arg_value_dtype(cx, 2), acc = tpu_opmath(t);
  tpu_val_t ws = tpu_lower_input(cx, 4, acc), c_prev = tpu_lower_input(cx, 2, acc);
  tpu_val_t ig = chunk(g, ws, rows, h, 0), fg = chunk(g, ws, rows, h, 1);
  tpu_val_t cg = chunk(g, ws, rows, h, 2), og = chunk(g, ws, rows, h, 3);
  tpu_val_t zero = tpu_lower_const_like(cx, c_prev, 0.0);
  tpu_val_t ghy = tpu_arg_present(cx, 0) ? tpu_lower_input(cx, 0, acc) : zero;
  tpu_val_t gcy = tpu_arg_present(cx, 1) ? tpu_lower_input(cx, 1, acc) : zero;
  tpu_val_t tanh_cy = tpu_ir_unary(g, TPU_IR_TANH, tpu_lower_input(cx, 3, acc));
  // The gradient reaching the new cell state, through hy and directly.
  tpu_val_t gc = tpu_ew_add(g, tpu_ew_mul(g, tpu_ew_mul(g, ghy, og), dtanh(g, tanh_cy)), gcy);
  tpu_val_t grads[4] = {
      tpu_ew_mul(g, tpu_ew_mul(g, gc, cg), dsigmoid(g, ig)),
      tpu_ew_mul(g, tpu_ew_mul(g, gc, c_prev), dsigmoid(g, fg)),
      tpu_ew_mul(g, tpu_ew_mul(g, gc, ig), dtanh(g, cg)),
      tpu_ew_mul(g, tpu_ew_mul(g, ghy, tanh_cy), dsigmoid(g, og)),
  };
  tpu_val_t gates_grad = tpu_ir_concat(g, grads, 4, 1);
  tpu_lower_out(cx, 0, tpu_ir_convert(g, gates_grad, t));
  tpu_lower_out(cx, 1, tpu_ir_convert(g, tpu_ew_mul(g, gc, fg), t));
  tpu_lower_out(cx, 2, tpu_arg_bool(cx, 5, false)
                           ? tpu_ir_convert(g, batch_sum(g, gates_grad), t) : TPU_VAL_NONE);
  return TPU_OK;
}

// _thnn_fused_gru_cell(input_gates, hidden_gates, hx, input_bias?,
// hidden_bias?) -> (hy, workspace): gates r, z, n; workspace r, z, n, hx and
// the hidden side's n gate (the reset gate scales it).
tpu_status_t tpu_lower_gru_cell(tpu_lower_ctx_t* cx) {
  int64_t rows, h;
  TPU_RETURN_IF_ERROR(check_cell(cx, "_thnn_fused_gru_cell", "hx", 3, &rows, &h));
  tpu_graph_t* g = cx->g;
  tpu_dtype_t t = tpu_arg_value_dtype(cx, 0), acc = tpu_opmath(t);
  tpu_val_t xi = gates(cx, 0, 3, acc), hi = gates(cx, 1, 4, acc), hx = tpu_lower_input(cx, 2, acc);
  tpu_val_t gate[2];  // r and z: the sigmoid of both sides' sum
  for (int j = 0; j < 2; ++j)
    gate[j] = tpu_ir_unary(g, TPU_IR_LOGISTIC,
                           tpu_ew_add(g, chunk(g, xi, rows, h, j), chunk(g, hi, rows, h, j)));
  tpu_val_t r = gate[0], u = gate[1];
  tpu_val_t hn = chunk(g, hi, rows, h, 2);
  tpu_val_t n = tpu_ir_unary(g, TPU_IR_TANH,
                             tpu_ew_add(g, chunk(g, xi, rows, h, 2), tpu_ew_mul(g, r, hn)));
  tpu_val_t hy = tpu_ew_add(g, n, tpu_ew_mul(g, u, tpu_ew_sub(g, hx, n)));
  tpu_lower_out(cx, 0, tpu_ir_convert(g, hy, t));
  tpu_val_t ws[5] = {r, u, n, hx, hn};
  tpu_lower_out(cx, 1, tpu_ir_convert(g, tpu_ir_concat(g, ws, 5, 1), t));
  return TPU_OK;
}

// _thnn_fused_gru_cell_backward(grad_hy, workspace, has_bias) ->
// (grad_input_gates, grad_hidden_gates, grad_hx, grad_input_bias?,
// grad_hidden_bias?).
tpu_status_t tpu_lower_gru_cell_backward(tpu_lower_ctx_t* cx) {
  tpu_graph_t* g = cx->g;
  if (tpu_arg_rank(cx, 0) != 2 || tpu_arg_rank(cx, 1) != 2 ||
      tpu_arg_sizes(cx, 1)[1] != 5 * tpu_arg_sizes(cx, 0)[1])
    return size_error("_thnn_fused_gru_cell_backward", "a (batch, 5 * hidden) workspace", 2,
                      "workspace");
  int64_t rows = tpu_arg_sizes(cx, 0)[0], h = tpu_arg_sizes(cx, 0)[1];
  tpu_dtype_t t = tpu_arg_value_dtype(cx, 0), acc = tpu_opmath(t);
  tpu_val_t gy = tpu_lower_input(cx, 0, acc), ws = tpu_lower_input(cx, 1, acc);
  tpu_val_t r = chunk(g, ws, rows, h, 0), u = chunk(g, ws, rows, h, 1);
  tpu_val_t n = chunk(g, ws, rows, h, 2), hx = chunk(g, ws, rows, h, 3);
  tpu_val_t hn = chunk(g, ws, rows, h, 4);
  tpu_val_t gu = tpu_ew_mul(g, tpu_ew_mul(g, gy, tpu_ew_sub(g, hx, n)), dsigmoid(g, u));
  tpu_val_t gn = tpu_ew_mul(g, tpu_ew_mul(g, gy, one_minus(g, u)), dtanh(g, n));
  tpu_val_t gr = tpu_ew_mul(g, tpu_ew_mul(g, gn, hn), dsigmoid(g, r));
  tpu_val_t gi_parts[3] = {gr, gu, gn}, gh_parts[3] = {gr, gu, tpu_ew_mul(g, gn, r)};
  tpu_val_t gi = tpu_ir_concat(g, gi_parts, 3, 1), gh = tpu_ir_concat(g, gh_parts, 3, 1);
  bool has_bias = tpu_arg_bool(cx, 2, false);
  tpu_lower_out(cx, 0, tpu_ir_convert(g, gi, t));
  tpu_lower_out(cx, 1, tpu_ir_convert(g, gh, t));
  tpu_lower_out(cx, 2, tpu_ir_convert(g, tpu_ew_mul(g, gy, u), t));
  tpu_lower_out(cx, 3, has_bias ? tpu_ir_convert(g, batch_sum(g, gi), t) : TPU_VAL_NONE);
  tpu_lower_out(cx, 4, has_bias ? tpu_ir_convert(g, batch_sum(g, gh), t) : TPU_VAL_NONE);
  return TPU_OK;
}
