// Private to the pooling lowerings (lower_pool.c, lower_fractional_pool.c):
// what max pooling of any window shape shares. Defined in lower_pool.c.
#ifndef TPU_LOWER_POOL_H_
#define TPU_LOWER_POOL_H_

#include "lower/lower.h"

// The lowest value of a dtype (max pooling's padding and initial value).
tpu_val_t tpu_pool_lowest(tpu_graph_t* g, tpu_dtype_t t);

// Reduces the trailing (window) dim of vals and of their flat indices idx
// (i64, vals' shape) as CPU's max pooling scans a window: the maximum wins,
// then the lowest index; a NaN wins over everything, the last NaN over
// earlier ones. Gives the values and the indices.
void tpu_pool_argmax(tpu_graph_t* g, tpu_val_t vals, tpu_val_t idx, tpu_val_t* out_vals,
                     tpu_val_t* out_idx);

// The gradient of a max pool over n spatial dims: grad_output (argument
// dy_arg) scatter-added into zeros shaped like self (x_arg) at the saved
// flat indices (idx_arg), as result 0.
TPU_MUST_USE tpu_status_t tpu_pool_scatter_grad(tpu_lower_ctx_t* cx, int dy_arg, int x_arg,
                                                int idx_arg, int n);

#endif  // TPU_LOWER_POOL_H_
