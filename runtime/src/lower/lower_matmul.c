// Matrix products. Half-precision operands multiply with float accumulation
// (dot_general's result type), as PyTorch's CPU and CUDA kernels do.
#include "lower/lower.h"

// C++ spellings PyTorch uses in matmul dtype errors.
static const char* cpp_name(tpu_dtype_t t) {
  switch (t) {
    case TPU_F32: return "float";
    case TPU_F64: return "double";
    case TPU_F16: return "c10::Half";
    case TPU_BF16: return "c10::BFloat16";
    case TPU_I64: return "long int";
    case TPU_I32: return "int";
    default: return tpu_dtype_torch_name(t);
  }
}

// a @ b over the last dim of a and dim `b_contract` of b, with batch dims.
tpu_val_t tpu_lower_matmul_values(tpu_lower_ctx_t* cx, tpu_val_t a, tpu_val_t b,
                                  int batch, tpu_dtype_t out) {
  tpu_dot_dims_t dn = {0};
  dn.n_batch = batch;
  for (int i = 0; i < batch; ++i) dn.lhs_batch[i] = dn.rhs_batch[i] = i;
  dn.n_contract = 1;
  dn.lhs_contract[0] = batch + 1;
  dn.rhs_contract[0] = batch;
  tpu_val_t r = tpu_ir_dot(cx->g, a, b, &dn, tpu_opmath(out));
  return tpu_ir_convert(cx->g, r, out);
}

tpu_status_t tpu_lower_mm(tpu_lower_ctx_t* cx) {
  if (tpu_arg_rank(cx, 0) != 2) return tpu_status_make(TPU_CODE_INVALID_ARGUMENT, "self must be a matrix");
  if (tpu_arg_rank(cx, 1) != 2) return tpu_status_make(TPU_CODE_INVALID_ARGUMENT, "mat2 must be a matrix");
  const int64_t *a = tpu_arg_sizes(cx, 0), *b = tpu_arg_sizes(cx, 1);
  if (a[1] != b[0])
    return tpu_status_make(TPU_CODE_INVALID_ARGUMENT,
                           "mat1 and mat2 shapes cannot be multiplied (%lldx%lld and %lldx%lld)",
                           (long long)a[0], (long long)a[1], (long long)b[0], (long long)b[1]);
  tpu_dtype_t ta = tpu_arg_value_dtype(cx, 0), tb = tpu_arg_value_dtype(cx, 1);
  if (ta != tb)
    return tpu_status_make(TPU_CODE_INVALID_ARGUMENT,
                           "expected m1 and m2 to have the same dtype, but got: %s != %s",
                           cpp_name(ta), cpp_name(tb));
  tpu_lower_out(cx, 0, tpu_lower_matmul_values(cx, tpu_lower_tensor(cx, 0),
                                               tpu_lower_tensor(cx, 1), 0, ta));
  return TPU_OK;
}
