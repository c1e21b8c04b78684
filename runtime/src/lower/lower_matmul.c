// Matrix products. Half-precision operands multiply with float accumulation
// (dot_general's result type), as PyTorch's CPU and CUDA kernels do.
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "lower/elementwise.h"

static tpu_status_t not_for_bool(tpu_dtype_t t, const char* kernel);

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
                           tpu_dtype_cpp_name(ta), tpu_dtype_cpp_name(tb));
  TPU_RETURN_IF_ERROR(not_for_bool(ta, "addmm_impl_cpu_"));
  tpu_lower_out(cx, 0, tpu_lower_matmul_values(cx, tpu_lower_tensor(cx, 0),
                                               tpu_lower_tensor(cx, 1), 0, ta));
  return TPU_OK;
}

//===--- helpers ---===//

// Checks that argument `arg` expands to `dims` (Tensor.expand's rules and
// messages: addmm and friends expand self to the product's shape).
static tpu_status_t check_expand(tpu_lower_ctx_t* cx, int arg, const int64_t* dims, int rank) {
  int r = tpu_arg_rank(cx, arg);
  const int64_t* s = tpu_arg_sizes(cx, arg);
  int bad = r > rank ? -1 : r;  // -1: too many dims; else the first dim that does not expand
  for (int i = 0; bad == r && i < r; ++i)
    if (s[i] != 1 && s[i] != dims[rank - r + i]) bad = i;
  if (bad == r) return TPU_OK;
  char a[256], b[256];
  tpu_dims_str(s, r, ", ", a, sizeof a);
  tpu_dims_str(dims, rank, ", ", b, sizeof b);
  if (bad < 0)
    return tpu_invalid("expand(torch.%sTensor{[%s]}, size=[%s]): the number of sizes provided "
                       "(%d) must be greater or equal to the number of dimensions in the "
                       "tensor (%d)", tpu_dtype_torch_name(tpu_arg_value_dtype(cx, arg)), a, b,
                       rank, r);
  int j = rank - r + bad;
  return tpu_invalid("The expanded size of the tensor (%lld) must match the existing size "
                     "(%lld) at non-singleton dimension %d.  Target sizes: [%s].  Tensor "
                     "sizes: [%s]", (long long)dims[j], (long long)s[bad], j, b, a);
}

static tpu_status_t not_for_bool(tpu_dtype_t t, const char* kernel) {
  if (t != TPU_BOOL) return TPU_OK;
  return tpu_status_make(TPU_CODE_UNIMPLEMENTED, "\"%s\" not implemented for 'Bool'", kernel);
}

// a and b contracted over one dim each (lc, rc) with `nb` leading batch dims,
// in opmath: half precision multiplies into a float accumulator and stays
// float, so that the caller can add and scale before rounding once.
static tpu_val_t contract(tpu_lower_ctx_t* cx, tpu_val_t a, tpu_val_t b, int nb,
                          int64_t lc, int64_t rc, tpu_dtype_t t) {
  tpu_dot_dims_t dn;
  memset(&dn, 0, sizeof dn);
  dn.n_batch = nb;
  for (int i = 0; i < nb; ++i) dn.lhs_batch[i] = dn.rhs_batch[i] = i;
  dn.n_contract = 1;
  dn.lhs_contract[0] = lc;
  dn.rhs_contract[0] = rc;
  return tpu_ir_dot(cx->g, a, b, &dn, tpu_opmath(t));
}

// beta * self + alpha * prod, rounded once to t; self (argument 0) expands
// to prod's shape. beta == 0 ignores self (NaN in it does not propagate),
// as PyTorch documents. Bool results use and/or for * and +.
static tpu_status_t scaled_sum(tpu_lower_ctx_t* cx, tpu_val_t prod, tpu_dtype_t t,
                               tpu_val_t* out) {
  tpu_graph_t* g = cx->g;
  *out = TPU_VAL_NONE;
  if (!tpu_graph_ok(g)) return TPU_OK;
  const tpu_type_t* pt = tpu_ir_type(g, prod);
  int64_t dims[TPU_MAX_RANK];
  int rank = pt->rank;
  memcpy(dims, pt->dims, sizeof(int64_t) * (size_t)rank);
  TPU_RETURN_IF_ERROR(check_expand(cx, 0, dims, rank));
  tpu_dtype_t compute = tpu_ir_dtype(g, prod);
  bool is_bool = t == TPU_BOOL;
  tpu_ir_op_t mul = is_bool ? TPU_IR_AND : TPU_IR_MUL, add = is_bool ? TPU_IR_OR : TPU_IR_ADD;
  if (!tpu_arg_number_is(cx, 4, 1, 1)) {  // alpha
    tpu_val_t s = tpu_lower_input(cx, 4, compute);
    prod = tpu_ir_binary(g, mul, prod, tpu_ir_broadcast(g, s, dims, rank, NULL));
  }
  if (!tpu_arg_number_is(cx, 3, 1, 0)) {  // beta
    tpu_val_t self = tpu_lower_expand(cx, tpu_lower_input(cx, 0, compute), dims, rank);
    if (!tpu_arg_number_is(cx, 3, 1, 1)) {
      tpu_val_t s = tpu_lower_input(cx, 3, compute);
      self = tpu_ir_binary(g, mul, self, tpu_ir_broadcast(g, s, dims, rank, NULL));
    }
    prod = tpu_ir_binary(g, add, self, prod);
  }
  *out = tpu_ir_convert(g, prod, t);
  return TPU_OK;
}

static tpu_status_t add_scaled(tpu_lower_ctx_t* cx, tpu_val_t prod, tpu_dtype_t t) {
  tpu_val_t r;
  TPU_RETURN_IF_ERROR(scaled_sum(cx, prod, t, &r));
  tpu_lower_out(cx, 0, r);
  return TPU_OK;
}

//===--- matrix products ---===//

// bmm(self, mat2) and the checks bmm and baddbmm share.
static tpu_status_t check_bmm(tpu_lower_ctx_t* cx, int b1, int b2) {
  if (tpu_arg_rank(cx, b1) != 3) return tpu_invalid("batch1 must be a 3D tensor");
  if (tpu_arg_rank(cx, b2) != 3) return tpu_invalid("batch2 must be a 3D tensor");
  const int64_t *a = tpu_arg_sizes(cx, b1), *b = tpu_arg_sizes(cx, b2);
  if (a[0] != b[0] || a[2] != b[1])
    return tpu_invalid("Expected size for first two dimensions of batch2 tensor to be: "
                       "[%lld, %lld] but got: [%lld, %lld].", (long long)a[0], (long long)a[2],
                       (long long)b[0], (long long)b[1]);
  return TPU_OK;
}

tpu_status_t tpu_lower_bmm(tpu_lower_ctx_t* cx) {
  TPU_RETURN_IF_ERROR(check_bmm(cx, 0, 1));
  tpu_dtype_t ta = tpu_arg_value_dtype(cx, 0), tb = tpu_arg_value_dtype(cx, 1);
  if (ta != tb)
    return tpu_invalid("expected scalar type %s but found %s", tpu_dtype_torch_name(ta),
                       tpu_dtype_torch_name(tb));
  TPU_RETURN_IF_ERROR(not_for_bool(ta, "bmm"));
  tpu_lower_out(cx, 0, tpu_lower_matmul_values(cx, tpu_lower_tensor(cx, 0),
                                               tpu_lower_tensor(cx, 1), 1, ta));
  return TPU_OK;
}

// addmm's and addbmm's dtype checks, in CPU's order and words: self, mat1
// and mat2 (args 0-2) share one dtype, which goes to *t.
static tpu_status_t same_mat_dtypes(tpu_lower_ctx_t* cx, const char* op, tpu_dtype_t* t) {
  tpu_dtype_t ts = tpu_arg_value_dtype(cx, 0), t1 = tpu_arg_value_dtype(cx, 1),
              t2 = tpu_arg_value_dtype(cx, 2);
  if (t1 != t2)
    return tpu_invalid("mat1 and mat2 must have the same dtype, but got %s and %s",
                       tpu_dtype_torch_name(t1), tpu_dtype_torch_name(t2));
  if (ts != t2)
    return tpu_invalid("self and mat2 must have the same dtype, but got %s and %s",
                       tpu_dtype_torch_name(ts), tpu_dtype_torch_name(t2));
  *t = t2;
  return not_for_bool(t2, op);
}

// addmm(self, mat1, mat2, *, beta=1, alpha=1)
static tpu_status_t addmm(tpu_lower_ctx_t* cx, tpu_val_t* out) {
  for (int i = 1; i <= 2; ++i)
    if (tpu_arg_rank(cx, i) != 2)
      return tpu_invalid("mat%d must be a matrix, got %d-D tensor", i, tpu_arg_rank(cx, i));
  const int64_t *a = tpu_arg_sizes(cx, 1), *b = tpu_arg_sizes(cx, 2);
  if (a[1] != b[0])
    return tpu_invalid("mat1 and mat2 shapes cannot be multiplied (%lldx%lld and %lldx%lld)",
                       (long long)a[0], (long long)a[1], (long long)b[0], (long long)b[1]);
  tpu_dtype_t t;
  TPU_RETURN_IF_ERROR(same_mat_dtypes(cx, "addmm_impl_cpu_", &t));
  tpu_val_t p = contract(cx, tpu_lower_tensor(cx, 1), tpu_lower_tensor(cx, 2), 0, 1, 0, t);
  return scaled_sum(cx, p, t, out);
}

tpu_status_t tpu_lower_addmm(tpu_lower_ctx_t* cx) {
  tpu_val_t r;
  TPU_RETURN_IF_ERROR(addmm(cx, &r));
  tpu_lower_out(cx, 0, r);
  return TPU_OK;
}

// _addmm_activation(self, mat1, mat2, *, beta=1, alpha=1, use_gelu=False):
// addmm, then relu or (exact) gelu of its rounded result, as CPU's kernel
// applies them in place (the feed-forward layer of PyTorch's fast
// transformer path).
tpu_status_t tpu_lower_addmm_activation(tpu_lower_ctx_t* cx) {
  tpu_val_t r;
  TPU_RETURN_IF_ERROR(addmm(cx, &r));
  tpu_graph_t* g = cx->g;
  if (!tpu_graph_ok(g)) return TPU_OK;
  tpu_dtype_t t = tpu_ir_dtype(g, r), acc = tpu_opmath(t);
  tpu_val_t x = tpu_ir_convert(g, r, acc);
  if (tpu_arg_bool(cx, 5, false)) {
    x = tpu_ew_gelu_erf(cx, x);
  } else {  // relu keeps NaN
    tpu_val_t neg = tpu_ir_compare(g, TPU_CMP_LT, x, tpu_lower_const_like(cx, x, 0.0));
    x = tpu_ir_select(g, neg, tpu_lower_const_like(cx, x, 0.0), x);
  }
  tpu_lower_out(cx, 0, tpu_ir_convert(g, x, t));
  return TPU_OK;
}

// baddbmm(self, batch1, batch2, *, beta=1, alpha=1)
tpu_status_t tpu_lower_baddbmm(tpu_lower_ctx_t* cx) {
  TPU_RETURN_IF_ERROR(check_bmm(cx, 1, 2));
  tpu_dtype_t ts = tpu_arg_value_dtype(cx, 0), t1 = tpu_arg_value_dtype(cx, 1),
              t2 = tpu_arg_value_dtype(cx, 2);
  if (ts != t1 || t1 != t2)
    return tpu_invalid("Input dtypes must be the same, got: input %s, batch1: %s, batch2: %s",
                       tpu_dtype_cpp_name(ts), tpu_dtype_cpp_name(t1), tpu_dtype_cpp_name(t2));
  TPU_RETURN_IF_ERROR(not_for_bool(t1, "baddbmm"));
  tpu_val_t p = contract(cx, tpu_lower_tensor(cx, 1), tpu_lower_tensor(cx, 2), 1, 2, 1, t1);
  return add_scaled(cx, p, t1);
}

// addbmm(self, batch1, batch2, *, beta=1, alpha=1): the batch of products
// summed, as one contraction over the batch and inner dims.
tpu_status_t tpu_lower_addbmm(tpu_lower_ctx_t* cx) {
  int64_t d;
  // PyTorch sizes the result from batch1.size(1) and batch2.size(2) first.
  TPU_RETURN_IF_ERROR(tpu_wrap_dim(1, tpu_arg_rank(cx, 1), &d));
  TPU_RETURN_IF_ERROR(tpu_wrap_dim(2, tpu_arg_rank(cx, 2), &d));
  if (tpu_arg_rank(cx, 1) != 3) return tpu_invalid("batch1 must be a 3D tensor");
  if (tpu_arg_rank(cx, 2) != 3) return tpu_invalid("batch2 must be a 3D tensor");
  const int64_t *a = tpu_arg_sizes(cx, 1), *b = tpu_arg_sizes(cx, 2);
  if (a[0] != b[0])
    return tpu_invalid("batch1 and batch2 must have same number of batches, got %lld and %lld",
                       (long long)a[0], (long long)b[0]);
  if (a[2] != b[1])
    return tpu_invalid("Incompatible matrix sizes for bmm (%lldx%lld and %lldx%lld)",
                       (long long)a[1], (long long)a[2], (long long)b[1], (long long)b[2]);
  tpu_dtype_t t;
  TPU_RETURN_IF_ERROR(same_mat_dtypes(cx, "addbmm", &t));
  tpu_dot_dims_t dn;
  memset(&dn, 0, sizeof dn);
  dn.n_contract = 2;
  dn.lhs_contract[0] = 0;
  dn.lhs_contract[1] = 2;
  dn.rhs_contract[0] = 0;
  dn.rhs_contract[1] = 1;
  tpu_val_t p = tpu_ir_dot(cx->g, tpu_lower_tensor(cx, 1), tpu_lower_tensor(cx, 2), &dn,
                           tpu_opmath(t));
  return add_scaled(cx, p, t);
}

// The checks of addmv(self, mat, vec); mv passes its result's dtype (vec's)
// and rank (1) for self, as PyTorch's mv does.
static tpu_status_t check_addmv(tpu_lower_ctx_t* cx, int self_rank, int64_t self_numel,
                                int64_t self_size, tpu_dtype_t self_dtype, int m, int v) {
  int rm = tpu_arg_rank(cx, m), rv = tpu_arg_rank(cx, v);
  if (rm != 2 || rv != 1 || self_rank > 1)
    return tpu_invalid("vector + matrix @ vector expected, got %d, %d, %d", self_rank, rm, rv);
  const int64_t *a = tpu_arg_sizes(cx, m), *b = tpu_arg_sizes(cx, v);
  if (a[1] != b[0] || (a[0] != self_numel && self_numel != 1))
    return tpu_invalid("size mismatch, got input (%lld), mat (%lldx%lld), vec (%lld)",
                       (long long)self_size, (long long)a[0], (long long)a[1], (long long)b[0]);
  tpu_dtype_t tm = tpu_arg_value_dtype(cx, m), tv = tpu_arg_value_dtype(cx, v);
  if (self_dtype != tm || tm != tv)
    return tpu_invalid("addmv input tensors must have the same dtype, but got %s, %s, and %s",
                       tpu_dtype_torch_name(self_dtype), tpu_dtype_torch_name(tm),
                       tpu_dtype_torch_name(tv));
  return not_for_bool(tm, "addmv_impl_cpu");
}

// mv(self, vec)
tpu_status_t tpu_lower_mv(tpu_lower_ctx_t* cx) {
  int64_t rows = tpu_arg_rank(cx, 0) >= 1 ? tpu_arg_sizes(cx, 0)[0] : 1;
  TPU_RETURN_IF_ERROR(check_addmv(cx, 1, rows, rows, tpu_arg_value_dtype(cx, 1), 0, 1));
  tpu_dtype_t t = tpu_arg_value_dtype(cx, 0);
  tpu_val_t p = contract(cx, tpu_lower_tensor(cx, 0), tpu_lower_tensor(cx, 1), 0, 1, 0, t);
  tpu_lower_out(cx, 0, tpu_ir_convert(cx->g, p, t));
  return TPU_OK;
}

// addmv(self, mat, vec, *, beta=1, alpha=1)
tpu_status_t tpu_lower_addmv(tpu_lower_ctx_t* cx) {
  int rs = tpu_arg_rank(cx, 0);
  const int64_t* s = tpu_arg_sizes(cx, 0);
  int64_t numel = rs == 1 ? s[0] : 1;
  TPU_RETURN_IF_ERROR(check_addmv(cx, rs, numel, rs ? s[0] : 1, tpu_arg_value_dtype(cx, 0), 1, 2));
  tpu_dtype_t t = tpu_arg_value_dtype(cx, 1);
  tpu_val_t p = contract(cx, tpu_lower_tensor(cx, 1), tpu_lower_tensor(cx, 2), 0, 1, 0, t);
  return add_scaled(cx, p, t);
}

// dot / vdot (vdot conjugates its first argument).
static tpu_status_t dot_impl(tpu_lower_ctx_t* cx, const char* name, bool conj) {
  int ra = tpu_arg_rank(cx, 0), rb = tpu_arg_rank(cx, 1);
  if (ra != 1 || rb != 1)
    return tpu_invalid("1D tensors expected, but got %dD and %dD tensors", ra, rb);
  tpu_dtype_t ta = tpu_arg_value_dtype(cx, 0), tb = tpu_arg_value_dtype(cx, 1);
  if (ta != tb)
    return tpu_invalid("%s : expected both vectors to have same dtype, but found %s and %s", name,
                       tpu_dtype_torch_name(ta), tpu_dtype_torch_name(tb));
  int64_t na = tpu_arg_sizes(cx, 0)[0], nb = tpu_arg_sizes(cx, 1)[0];
  if (na != nb)
    return tpu_invalid("inconsistent tensor size, expected tensor [%lld] and src [%lld] to have "
                       "the same number of elements, but got %lld and %lld elements "
                       "respectively", (long long)na, (long long)nb, (long long)na, (long long)nb);
  TPU_RETURN_IF_ERROR(not_for_bool(ta, name));
  tpu_graph_t* g = cx->g;
  tpu_val_t a = tpu_lower_tensor(cx, 0);
  if (conj && tpu_dtype_is_complex(ta))
    a = tpu_ir_binary(g, TPU_IR_COMPLEX, tpu_ir_unary(g, TPU_IR_REAL, a),
                      tpu_ir_unary(g, TPU_IR_NEG, tpu_ir_unary(g, TPU_IR_IMAG, a)));
  tpu_val_t p = contract(cx, a, tpu_lower_tensor(cx, 1), 0, 0, 0, ta);
  tpu_lower_out(cx, 0, tpu_ir_convert(g, p, ta));
  return TPU_OK;
}

tpu_status_t tpu_lower_dot(tpu_lower_ctx_t* cx) { return dot_impl(cx, "dot", false); }
tpu_status_t tpu_lower_vdot(tpu_lower_ctx_t* cx) { return dot_impl(cx, "vdot", true); }

// addr(self, vec1, vec2, *, beta=1, alpha=1): beta * self + alpha * outer,
// in the promoted dtype of the three.
tpu_status_t tpu_lower_addr(tpu_lower_ctx_t* cx) {
  for (int i = 1; i <= 2; ++i)
    if (tpu_arg_rank(cx, i) != 1)
      return tpu_invalid("addr: Expected 1-D argument vec%d, but got %d-D", i, tpu_arg_rank(cx, i));
  int all[3] = {0, 1, 2};
  tpu_dtype_t t = tpu_lower_result_type(cx, all, 3);
  if (t == TPU_DTYPE_INVALID) return tpu_invalid("addr: cannot promote the argument dtypes");
  for (int i = 3; i <= 4; ++i) {
    const tpu_arg_t* s = tpu_arg(cx, i);
    if (s->kind != TPU_ARG_SCALAR) continue;
    tpu_dtype_kind_t k = tpu_dtype_kind(s->scalar.dtype);
    const char* name = i == 3 ? "beta" : "alpha";
    if (tpu_dtype_is_integral(t, true) && (k == TPU_KIND_FLOAT || k == TPU_KIND_COMPLEX))
      return tpu_invalid("For integral input tensors, argument %s must not be a floating point "
                         "number.", name);
    if (t != TPU_BOOL && k == TPU_KIND_BOOL)
      return tpu_invalid("Boolean %s only supported for Boolean results.", name);
  }
  tpu_graph_t* g = cx->g;
  tpu_dtype_t compute = tpu_opmath(t);
  int64_t m = tpu_arg_sizes(cx, 1)[0], n = tpu_arg_sizes(cx, 2)[0];
  int64_t dims[2] = {m, n}, b0 = 0, b1 = 1;
  tpu_val_t a = tpu_ir_broadcast(g, tpu_lower_input(cx, 1, compute), dims, 2, &b0);
  tpu_val_t b = tpu_ir_broadcast(g, tpu_lower_input(cx, 2, compute), dims, 2, &b1);
  return add_scaled(cx, tpu_ir_binary(g, t == TPU_BOOL ? TPU_IR_AND : TPU_IR_MUL, a, b), t);
}
