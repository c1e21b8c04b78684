// isin(elements, test_elements): whether each element equals any test
// element, compared in the promoted dtype (NaN matches nothing). It compares
// every (element, test element) pair and reduces with `or`: the sizes that
// reach it (generation's stop tokens, vocabulary masks) are small.
#include "lower/lower.h"

// Flattens argument i (tensor or scalar) to a 1-D value of `t`.
static tpu_val_t flat(tpu_lower_ctx_t* cx, int i, tpu_dtype_t t, int64_t* n) {
  int rank = tpu_arg_rank(cx, i);
  const int64_t* s = tpu_arg_sizes(cx, i);
  *n = 1;
  for (int d = 0; d < rank; ++d) *n *= s[d];
  return tpu_ir_reshape(cx->g, tpu_lower_input(cx, i, t), n, 1);
}

// isin.Tensor_Tensor / .Tensor_Scalar / .Scalar_Tensor(elements,
// test_elements, *, assume_unique, invert): bool, elements' shape.
tpu_status_t tpu_lower_isin(tpu_lower_ctx_t* cx) {
  for (int i = 0; i < 2; ++i) {
    tpu_dtype_t t = tpu_arg_value_dtype(cx, i);
    if (t == TPU_BOOL || tpu_dtype_is_complex(t))
      return tpu_status_make(TPU_CODE_INVALID_ARGUMENT,
                             "Unsupported input type encountered for isin(): %s",
                             tpu_dtype_torch_name(t));
  }
  const int args[2] = {0, 1};
  tpu_dtype_t ct = tpu_lower_result_type(cx, args, 2);
  tpu_graph_t* g = cx->g;
  int64_t n, m;
  tpu_val_t e = flat(cx, 0, ct, &n), t = flat(cx, 1, ct, &m);
  int64_t pair[2] = {n, m}, d0 = 0, d1 = 1;
  tpu_val_t eq = tpu_ir_compare(g, TPU_CMP_EQ, tpu_ir_broadcast(g, e, pair, 2, &d0),
                                tpu_ir_broadcast(g, t, pair, 2, &d1));
  tpu_val_t any = tpu_ir_reduce(g, eq, tpu_ir_const(g, TPU_BOOL, 0.0, NULL, 0), &d1, 1, TPU_BODY_OR);
  if (tpu_arg_bool(cx, 3, false)) any = tpu_ir_unary(g, TPU_IR_NOT, any);
  tpu_lower_out(cx, 0, tpu_ir_reshape(g, any, tpu_arg_sizes(cx, 0), tpu_arg_rank(cx, 0)));
  return TPU_OK;
}
