// The QR family: geqrf, linalg_householder_product (orgqr), linalg_qr, on the
// Householder loops of the IR (tpu_ir_qr: LAPACK's geqrf reflectors, so Q
// and R carry CPU's signs; tpu_ir_householder_product: its orgqr).
#include <string.h>

#include "lower/linalg.h"

// geqrf(Tensor self) -> (a, tau)
tpu_status_t tpu_lower_geqrf(tpu_lower_ctx_t* cx) {
  if (tpu_arg_rank(cx, 0) < 2)
    return tpu_invalid("torch.geqrf: input must have at least 2 dimensions.");
  TPU_RETURN_IF_ERROR(tpu_linalg_check_lapack_dtype(cx, 0, "geqrf_cpu"));
  tpu_val_t packed, tau;
  tpu_ir_qr(cx->g, tpu_lower_tensor(cx, 0), &packed, &tau);
  tpu_lower_out(cx, 0, packed);
  tpu_lower_out(cx, 1, tau);
  return TPU_OK;
}

// linalg_householder_product(Tensor input, Tensor tau)
tpu_status_t tpu_lower_linalg_householder_product(tpu_lower_ctx_t* cx) {
  const char* api = "torch.linalg.householder_product";
  int r = tpu_arg_rank(cx, 0), rt = tpu_arg_rank(cx, 1);
  if (r < 2) return tpu_invalid("%s: input must have at least 2 dimensions.", api);
  const int64_t *d = tpu_arg_sizes(cx, 0), *td = tpu_arg_sizes(cx, 1);
  if (d[r - 2] < d[r - 1])
    return tpu_invalid("%s: input.shape[-2] must be greater than or equal to input.shape[-1]",
                       api);
  if (rt < 1 || d[r - 1] < td[rt - 1])
    return tpu_invalid("%s: input.shape[-1] must be greater than or equal to tau.shape[-1]", api);
  bool batch_ok = rt == r - 1;
  for (int i = 0; batch_ok && i < r - 2; ++i) batch_ok = td[i] == d[i];
  if (!batch_ok) {
    char buf[96];
    return tpu_invalid("%s: Expected batch dimensions of tau to be equal to input.shape[:-2], "
                       "but got %s", api, tpu_shape_str(td, rt - 1, buf, sizeof buf));
  }
  tpu_dtype_t ti = tpu_arg_value_dtype(cx, 0), tt = tpu_arg_value_dtype(cx, 1);
  if (ti != tt)
    return tpu_invalid("%s: tau dtype %s does not match input dtype %s", api,
                       tpu_dtype_torch_name(tt), tpu_dtype_torch_name(ti));
  TPU_RETURN_IF_ERROR(tpu_linalg_check_lapack_dtype(cx, 0, "orgqr_cpu"));
  tpu_lower_out(cx, 0, tpu_ir_householder_product(cx->g, tpu_lower_tensor(cx, 0),
                                                  tpu_lower_tensor(cx, 1), d[r - 1]));
  return TPU_OK;
}

// linalg_qr(Tensor A, str mode="reduced") -> (Q, R)
tpu_status_t tpu_lower_linalg_qr(tpu_lower_ctx_t* cx) {
  tpu_graph_t* g = cx->g;
  int r = tpu_arg_rank(cx, 0);
  if (r < 2) return tpu_invalid("linalg.qr: The input tensor A must have at least 2 dimensions.");
  tpu_dtype_t t = tpu_arg_value_dtype(cx, 0);
  if (!tpu_dtype_is_float(t) && !tpu_dtype_is_complex(t))
    return tpu_invalid("linalg.qr: Expected a floating point or complex tensor as input. Got %s",
                       tpu_dtype_torch_name(t));
  const char* mode = tpu_arg_string(cx, 1, "reduced");
  bool complete = strcmp(mode, "complete") == 0, r_only = strcmp(mode, "r") == 0;
  if (!complete && !r_only && strcmp(mode, "reduced") != 0)
    return tpu_invalid("qr received unrecognized mode '%s' but expected one of 'reduced' "
                       "(default), 'r', or 'complete'", mode);
  TPU_RETURN_IF_ERROR(tpu_linalg_check_lapack_dtype(cx, 0, "geqrf_cpu"));
  const int64_t* d = tpu_arg_sizes(cx, 0);
  int64_t m = d[r - 2], n = d[r - 1], k = m < n ? m : n;
  tpu_val_t packed, tau;
  tpu_ir_qr(g, tpu_lower_tensor(cx, 0), &packed, &tau);
  int64_t rows = complete ? m : k;
  tpu_lower_out(cx, 0, r_only ? tpu_linalg_empty(g, t)
                               : tpu_ir_householder_product(g, packed, tau, rows));
  tpu_lower_out(cx, 1, tpu_linalg_triangle(g, tpu_linalg_block(g, packed, 0, rows, 0, n), false));
  return TPU_OK;
}
