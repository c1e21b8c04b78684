// Foreach ops (_foreach_*), the fused optimizer steps (_fused_adam_,
// _fused_adamw_, _fused_sgd_) and AMP's grad-scaling ops.
//
// A foreach op applies one scalar op to each element of its tensor lists and
// returns one result per element (the in-place variants write them into
// `self`). PyTorch's CPU kernels call the scalar op element by element, so
// each element follows that op's promotion, broadcasting and errors; lists
// may mix shapes and dtypes. We lower every element as its scalar op through
// an element context, whose arguments are that element's tensors and
// numbers, into the same graph: the whole list becomes one program (one
// executable in strict mode) instead of one per element.
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "lower/elementwise.h"

// The generic unary lowering of the op table's UNARY rows (lower_elementwise.c).
tpu_status_t tpu_lower_unary(tpu_lower_ctx_t* cx);

static tpu_status_t invalid(const char* fmt, const char* a) {
  return tpu_status_make(TPU_CODE_INVALID_ARGUMENT, fmt, a);
}

// A row of the op table by name (the scalar op a foreach op maps).
static tpu_status_t table_row(const char* name, const tpu_op_row_t** out) {
  int i = tpu_op_lookup(name);
  *out = i >= 0 ? tpu_op_row(i) : NULL;
  if (!*out)
    return tpu_status_make(TPU_CODE_INTERNAL, "the op table has no row '%s'", name);
  return TPU_OK;
}

//===--- element contexts ---===//

enum { MAX_ELEM_ARGS = 16 };

// The context of element j: list arguments (TENSORS, SCALARS) give their
// element j, everything else passes through. Lowerings of scalar ops run on
// it unchanged; their results come back in e->cx.outs.
typedef struct elem {
  tpu_lower_ctx_t cx;
  tpu_arg_t args[MAX_ELEM_ARGS];
} elem_t;

static void elem_init(elem_t* e, const tpu_lower_ctx_t* cx, const tpu_op_row_t* row,
                      int j) {
  int n = cx->num_args < MAX_ELEM_ARGS ? cx->num_args : MAX_ELEM_ARGS;
  for (int i = 0; i < n; ++i) {
    const tpu_arg_t* a = tpu_arg(cx, i);
    tpu_arg_t* d = &e->args[i];
    memset(d, 0, sizeof *d);
    if (a->kind == TPU_ARG_TENSORS) {
      if (a->tensors[j]) {
        d->kind = TPU_ARG_TENSOR;
        d->tensor = a->tensors[j];
      }
    } else if (a->kind == TPU_ARG_SCALARS) {
      d->kind = TPU_ARG_SCALAR;
      d->scalar = a->scalars[j];
    } else {
      *d = *a;
    }
  }
  e->cx = *cx;
  e->cx.row = row ? row : cx->row;
  e->cx.args = e->args;
  e->cx.num_args = n;
  e->cx.outs = NULL;
  e->cx.num_outs = e->cx.outs_cap = 0;
}

// The list length shared by the TENSORS and SCALARS arguments, with
// PyTorch's checks (check_foreach_api_restrictions).
static tpu_status_t list_length(const tpu_lower_ctx_t* cx, int* out) {
  int n = -1;
  for (int i = 0; i < cx->num_args; ++i) {
    const tpu_arg_t* a = tpu_arg(cx, i);
    if (a->kind != TPU_ARG_TENSORS) continue;
    if (a->count == 0)
      return tpu_status_make(TPU_CODE_INVALID_ARGUMENT,
                             "Tensor list must have at least one tensor.");
    if (n >= 0 && a->count != n)
      return tpu_status_make(TPU_CODE_INVALID_ARGUMENT,
                             "Tensor lists must have the same number of tensors, "
                             "got %d and %d", n, a->count);
    n = a->count;
  }
  if (n < 0)
    return tpu_status_make(TPU_CODE_INVALID_ARGUMENT,
                           "Tensor list must have at least one tensor.");
  for (int i = 0; i < cx->num_args; ++i)
    if (tpu_arg(cx, i)->kind == TPU_ARG_SCALARS && tpu_arg(cx, i)->count != n)
      return tpu_status_make(TPU_CODE_INVALID_ARGUMENT,
                             "Tensor list must have same number of elements as "
                             "scalar list.");
  *out = n;
  return TPU_OK;
}

typedef tpu_status_t (*elem_fn)(tpu_lower_ctx_t* e);

// Result j = fn (or row's lowering) on element j, for every element.
static tpu_status_t foreach_map(tpu_lower_ctx_t* cx, const tpu_op_row_t* row, elem_fn fn) {
  int n = 0;
  TPU_RETURN_IF_ERROR(list_length(cx, &n));
  for (int j = 0; j < n; ++j) {
    elem_t e;
    elem_init(&e, cx, row, j);
    TPU_RETURN_IF_ERROR(fn ? fn(&e.cx) : e.cx.row->lower(&e.cx));
    if (e.cx.num_outs < 1)
      return tpu_status_make(TPU_CODE_INTERNAL, "%s: element %d has no result",
                             cx->row->name, j);
    tpu_lower_out(cx, j, e.cx.outs[0]);
  }
  return TPU_OK;
}

// Maps the op table's row `name` over the lists.
static tpu_status_t foreach_table(tpu_lower_ctx_t* cx, const char* name) {
  const tpu_op_row_t* row;
  TPU_RETURN_IF_ERROR(table_row(name, &row));
  return foreach_map(cx, row, NULL);
}

// The .Tensor overloads take one 0-d tensor for every element.
static tpu_status_t check_scalar_tensor(const tpu_lower_ctx_t* cx, int i) {
  if (!tpu_arg_is_tensor(cx, i) || tpu_arg_rank(cx, i) == 0) return TPU_OK;
  const tpu_view_t* v = tpu_arg(cx, i)->tensor;
  return tpu_status_make(TPU_CODE_INVALID_ARGUMENT,
                         "scalar tensor expected to be 0 dim but it has %d "
                         "dimensions and %lld elements.", v->rank,
                         (long long)tpu_view_numel(v));
}

//===--- element ops the op table does not have (yet) ---===//

static tpu_status_t promoted(tpu_lower_ctx_t* e, const int* args, int n, tpu_dtype_t* t) {
  *t = tpu_lower_result_type(e, args, n);
  return *t == TPU_DTYPE_INVALID ? tpu_ew_promotion_error(e, args[0], args[1]) : TPU_OK;
}

// max / min that propagate NaN from either side, as PyTorch does (the XLA CPU
// compiler's maximum / minimum return the other operand when the second is
// NaN).
static tpu_val_t nan_max_min(tpu_graph_t* g, tpu_ir_op_t op, tpu_val_t a, tpu_val_t b) {
  tpu_val_t r = tpu_ir_binary(g, op, a, b);
  tpu_dtype_t t = tpu_ir_dtype(g, r);
  if (!tpu_dtype_is_float(t)) return r;
  r = tpu_ir_select(g, tpu_ir_compare(g, TPU_CMP_NE, b, b), b, r);
  return tpu_ir_select(g, tpu_ir_compare(g, TPU_CMP_NE, a, a), a, r);
}

// clamp_min / clamp_max (and maximum / minimum with a number, which PyTorch
// runs as clamp): promoted, NaN-propagating.
static tpu_status_t clamp_elem(tpu_lower_ctx_t* e, tpu_ir_op_t op, const char* kernel) {
  int ab[2] = {0, 1};
  tpu_dtype_t t;
  TPU_RETURN_IF_ERROR(promoted(e, ab, 2, &t));
  if (t == TPU_BOOL && !tpu_arg_is_tensor(e, 1)) return tpu_not_implemented(kernel, t);
  if (tpu_dtype_is_complex(t))
    return invalid("%s is not supported for complex inputs", kernel);
  tpu_val_t v[2];
  TPU_RETURN_IF_ERROR(tpu_lower_broadcast_inputs(e, ab, 2, t, v));
  tpu_lower_out(e, 0, nan_max_min(e->g, op, v[0], v[1]));
  return TPU_OK;
}

static tpu_status_t clamp_min_elem(tpu_lower_ctx_t* e) {
  return clamp_elem(e, TPU_IR_MAX, "clamp_min_scalar_cpu");
}
static tpu_status_t clamp_max_elem(tpu_lower_ctx_t* e) {
  return clamp_elem(e, TPU_IR_MIN, "clamp_max_scalar_cpu");
}

// pow(self, exponent): either may be a number (pow.Tensor_Scalar,
// pow.Scalar) or a tensor.
static tpu_status_t pow_elem(tpu_lower_ctx_t* e) {
  tpu_graph_t* g = e->g;
  int ab[2] = {0, 1};
  tpu_dtype_t t;
  TPU_RETURN_IF_ERROR(promoted(e, ab, 2, &t));
  bool exp_number = !tpu_arg_is_tensor(e, 1);
  if (exp_number && tpu_arg_is_tensor(e, 0)) {
    const tpu_scalar_t* s = &tpu_arg(e, 1)->scalar;
    if (tpu_dtype_is_integral(tpu_arg_value_dtype(e, 0), true) &&
        tpu_dtype_is_integral(s->dtype, true) && tpu_arg_number(e, 1, 0) < 0)
      return tpu_status_make(TPU_CODE_INVALID_ARGUMENT,
                             "Integers to negative integer powers are not allowed.");
    if (t == TPU_BOOL) {  // bool ** bool: PyTorch's x**0 = 1 and x**1 = x
      tpu_val_t x = tpu_lower_tensor(e, 0);
      tpu_lower_out(e, 0, tpu_arg_number(e, 1, 0) != 0 ? x : tpu_lower_const_like(e, x, 1));
      return TPU_OK;
    }
  }
  if (t == TPU_BOOL) return tpu_not_implemented("pow", t);
  tpu_dtype_t c = tpu_opmath(t);
  tpu_val_t v[2];
  TPU_RETURN_IF_ERROR(tpu_lower_broadcast_inputs(e, ab, 2, c, v));
  tpu_val_t r = tpu_ir_binary(g, TPU_IR_POW, v[0], v[1]);
  if (tpu_dtype_kind(c) == TPU_KIND_INT) {
    // PyTorch's integer powers with a negative exponent: 1 for base 1, +-1
    // for base -1 (by the exponent's parity), 0 otherwise.
    tpu_val_t zero = tpu_lower_const_like(e, r, 0), one = tpu_lower_const_like(e, r, 1);
    tpu_val_t minus_one = tpu_lower_const_like(e, r, -1);
    tpu_val_t odd = tpu_ir_compare(g, TPU_CMP_NE,
                                   tpu_ir_binary(g, TPU_IR_REM, v[1], tpu_lower_const_like(e, r, 2)),
                                   zero);
    tpu_val_t neg = tpu_ir_select(g, tpu_ir_compare(g, TPU_CMP_EQ, v[0], one), one,
                                  tpu_ir_select(g, tpu_ir_compare(g, TPU_CMP_EQ, v[0], minus_one),
                                                tpu_ir_select(g, odd, minus_one, one), zero));
    r = tpu_ir_select(g, tpu_ir_compare(g, TPU_CMP_LT, v[1], zero), neg, r);
  }
  tpu_lower_out(e, 0, tpu_ir_convert(g, r, t));
  return TPU_OK;
}

// lerp(self, end, weight): PyTorch's formula, exact at both ends:
// weight < 0.5 ? self + weight * (end - self) : end + (weight - 1) * (end - self).
static tpu_status_t lerp_elem(tpu_lower_ctx_t* e) {
  tpu_graph_t* g = e->g;
  tpu_dtype_t t = tpu_arg_value_dtype(e, 0);
  if (tpu_arg_value_dtype(e, 1) != t)
    return tpu_status_make(TPU_CODE_INVALID_ARGUMENT,
                           "expected dtype %s for `end` but got dtype %s", tpu_dtype_cpp_name(t),
                           tpu_dtype_cpp_name(tpu_arg_value_dtype(e, 1)));
  bool weight_tensor = tpu_arg_is_tensor(e, 2);
  if (weight_tensor && tpu_arg_value_dtype(e, 2) != t)
    return tpu_status_make(TPU_CODE_INVALID_ARGUMENT,
                           "expected dtype %s for `weight` but got dtype %s", tpu_dtype_cpp_name(t),
                           tpu_dtype_cpp_name(tpu_arg_value_dtype(e, 2)));
  if (!tpu_dtype_is_float(t))  // (complex lerp is not supported on tpu)
    return tpu_not_implemented(weight_tensor ? "lerp_kernel_tensor" : "lerp_kernel_scalar", t);
  int all[3] = {0, 1, 2};
  tpu_val_t v[3];
  TPU_RETURN_IF_ERROR(tpu_lower_broadcast_inputs(e, all, 3, tpu_opmath(t), v));
  tpu_val_t w = v[2];
  tpu_val_t small = tpu_ir_compare(g, TPU_CMP_LT, tpu_ir_unary(g, TPU_IR_ABS, w),
                                   tpu_lower_const_like(e, w, 0.5));
  tpu_val_t coeff = tpu_ir_select(g, small, w,
                                  tpu_ir_binary(g, TPU_IR_SUB, w, tpu_lower_const_like(e, w, 1)));
  tpu_val_t base = tpu_ir_select(g, small, v[0], v[1]);
  tpu_val_t diff = tpu_ir_binary(g, TPU_IR_SUB, v[1], v[0]);
  tpu_val_t r = tpu_ir_binary(g, TPU_IR_ADD, base, tpu_ir_binary(g, TPU_IR_MUL, coeff, diff));
  tpu_lower_out(e, 0, tpu_ir_convert(g, r, t));
  return TPU_OK;
}

// addcmul / addcdiv(self, tensor1, tensor2, value):
// self + value * tensor1 * tensor2 (or / tensor2), in PyTorch's order.
static tpu_status_t addc_elem(tpu_lower_ctx_t* e, tpu_ir_op_t op) {
  tpu_graph_t* g = e->g;
  int all[3] = {0, 1, 2};
  tpu_dtype_t t;
  TPU_RETURN_IF_ERROR(promoted(e, all, 3, &t));
  if (op == TPU_IR_DIV && tpu_dtype_is_integral(tpu_arg_value_dtype(e, 1), true) &&
      tpu_dtype_is_integral(tpu_arg_value_dtype(e, 2), true))
    return tpu_status_make(
        TPU_CODE_INVALID_ARGUMENT,
        "Integer division with addcdiv is no longer supported, and in a future  "
        "release addcdiv will perform a true division of tensor1 and tensor2. The "
        "historic addcdiv behavior can be implemented as (input + value * "
        "torch.trunc(tensor1 / tensor2)).to(input.dtype) for integer inputs and as "
        "(input + value * tensor1 / tensor2) for float inputs. The future addcdiv "
        "behavior is just the latter implementation: (input + value * tensor1 / "
        "tensor2), for all dtypes.");
  if (t == TPU_BOOL) return tpu_not_implemented(op == TPU_IR_DIV ? "addcdiv_cpu_out" : "addcmul_cpu_out", t);
  tpu_dtype_t c = tpu_opmath(t);
  tpu_val_t v[3];
  TPU_RETURN_IF_ERROR(tpu_lower_broadcast_inputs(e, all, 3, c, v));
  const tpu_type_t* vt = tpu_ir_type(g, v[0]);
  tpu_val_t value = tpu_arg_present(e, 3) ? tpu_lower_input(e, 3, c) : tpu_ir_const(g, c, 1, NULL, 0);
  value = tpu_ir_broadcast(g, value, vt->dims, vt->rank, NULL);
  tpu_val_t r = tpu_ir_binary(g, op, tpu_ir_binary(g, TPU_IR_MUL, value, v[1]), v[2]);
  tpu_lower_out(e, 0, tpu_ir_convert(g, tpu_ir_binary(g, TPU_IR_ADD, v[0], r), t));
  return TPU_OK;
}

static tpu_status_t addcmul_elem(tpu_lower_ctx_t* e) { return addc_elem(e, TPU_IR_MUL); }
static tpu_status_t addcdiv_elem(tpu_lower_ctx_t* e) { return addc_elem(e, TPU_IR_DIV); }

// Unary float math without an op-table row: a row for the generic lowering.
#define FLOAT_ROW(op, ir) \
  static const tpu_op_row_t op##_row = {#op, "", TPU_CLASS_ELEMENTWISE, TPU_F_CAST_CHECK, \
                                         tpu_lower_unary, TPU_IR_##ir, TPU_RULE_FLOAT}
FLOAT_ROW(acos, ACOS);
FLOAT_ROW(asin, ASIN);
FLOAT_ROW(atan, ATAN);
FLOAT_ROW(cosh, COSH);
FLOAT_ROW(sinh, SINH);
FLOAT_ROW(erfc, ERFC);
FLOAT_ROW(lgamma, LGAMMA);
#undef FLOAT_ROW

static tpu_status_t abs_elem(tpu_lower_ctx_t* e) {
  tpu_dtype_t t = tpu_arg_value_dtype(e, 0);
  if (t == TPU_BOOL) return tpu_not_implemented("abs_cpu", t);
  if (tpu_dtype_kind(t) == TPU_KIND_UINT) {  // stablehlo.abs refuses unsigned
    tpu_lower_out(e, 0, tpu_lower_tensor(e, 0));
    return TPU_OK;
  }
  const tpu_op_row_t* row;
  TPU_RETURN_IF_ERROR(table_row("abs", &row));
  e->row = row;
  return row->lower(e);
}

static tpu_status_t zero_elem(tpu_lower_ctx_t* e) {
  const tpu_view_t* v = tpu_arg(e, 0)->tensor;
  tpu_lower_out(e, 0, tpu_ir_const(e->g, v->dtype, 0, v->sizes, v->rank));
  return TPU_OK;
}

// copy(self, src): src converted to self's dtype and broadcast to its shape.
static tpu_status_t copy_elem(tpu_lower_ctx_t* e) {
  const tpu_view_t* dst = tpu_arg(e, 0)->tensor;
  int64_t shape[TPU_MAX_RANK];
  int rank;
  TPU_RETURN_IF_ERROR(tpu_broadcast_shapes(dst->sizes, dst->rank, tpu_arg_sizes(e, 1),
                                           tpu_arg_rank(e, 1), shape, &rank));
  bool same = rank == dst->rank;
  for (int i = 0; same && i < rank; ++i) same = shape[i] == dst->sizes[i];
  if (!same) {
    char a[256] = "", b[256] = "";
    size_t na = 0, nb = 0;
    for (int i = 0; i < dst->rank; ++i)
      na += (size_t)snprintf(a + na, sizeof a - na, "%s%lld", i ? ", " : "", (long long)dst->sizes[i]);
    for (int i = 0; i < rank; ++i)
      nb += (size_t)snprintf(b + nb, sizeof b - nb, "%s%lld", i ? ", " : "", (long long)shape[i]);
    return tpu_status_make(TPU_CODE_INVALID_ARGUMENT,
                           "output with shape [%s] doesn't match the broadcast shape [%s]",
                           a, b);
  }
  tpu_val_t v = tpu_lower_input(e, 1, dst->dtype);
  tpu_lower_out(e, 0, tpu_lower_expand(e, v, dst->sizes, dst->rank));
  return TPU_OK;
}

//===--- reductions to one number per tensor ---===//

static const int64_t all_dims[TPU_MAX_RANK] = {0, 1, 2, 3, 4, 5, 6, 7};

// Reduces every dim of x; a max or min of floats is NaN when any element is
// (see nan_max_min).
static tpu_val_t reduce_all(tpu_lower_ctx_t* e, tpu_val_t x, double init, tpu_body_t body) {
  tpu_graph_t* g = e->g;
  tpu_dtype_t t = tpu_ir_dtype(g, x);
  int rank = tpu_ir_rank(g, x);
  tpu_val_t r = tpu_ir_reduce(g, x, tpu_ir_const(g, t, init, NULL, 0), all_dims, rank, body);
  if ((body == TPU_BODY_MAX || body == TPU_BODY_MIN) && tpu_dtype_is_float(t)) {
    tpu_val_t any_nan = tpu_ir_reduce(g, tpu_ir_compare(g, TPU_CMP_NE, x, x),
                                      tpu_ir_const_i(g, TPU_BOOL, 0, NULL, 0), all_dims, rank,
                                      TPU_BODY_OR);
    r = tpu_ir_select(g, any_nan, tpu_ir_const(g, t, NAN, NULL, 0), r);
  }
  return r;
}

// The dtype rules of linalg.vector_norm (and _foreach_powsum): floating
// inputs, an optional result dtype that the input converts to without
// narrowing.
static tpu_status_t norm_dtypes(tpu_lower_ctx_t* e, const char* int_kernel,
                                tpu_dtype_t* out) {
  tpu_dtype_t in = tpu_arg_value_dtype(e, 0);
  if (tpu_dtype_is_complex(in))
    return tpu_status_make(TPU_CODE_UNIMPLEMENTED,
                           "%s: complex tensors are not supported on tpu", e->row->name);
  if (!tpu_dtype_is_float(in)) {
    if (int_kernel) return tpu_not_implemented(int_kernel, TPU_I64);
    return invalid("linalg.vector_norm: Expected a floating point or complex tensor "
                   "as input. Got %s", tpu_dtype_torch_name(in));
  }
  *out = tpu_arg_dtype(e, 2, in);
  if (*out != in && tpu_promote_types(in, *out) != *out)
    return tpu_status_make(TPU_CODE_INVALID_ARGUMENT,
                           "linalg.vector_norm: the dtype of the input (%s) should be "
                           "convertible without narrowing to the specified dtype (%s)",
                           tpu_dtype_torch_name(in), tpu_dtype_torch_name(*out));
  return TPU_OK;
}

// linalg.vector_norm(self, ord) over all elements.
static tpu_status_t norm_elem(tpu_lower_ctx_t* e) {
  tpu_graph_t* g = e->g;
  tpu_dtype_t out;
  TPU_RETURN_IF_ERROR(norm_dtypes(e, NULL, &out));
  double p = tpu_arg_number(e, 1, 2);
  if (isinf(p) && tpu_view_numel(tpu_arg(e, 0)->tensor) == 0)
    return tpu_status_make(TPU_CODE_INVALID_ARGUMENT,
                           p > 0 ? "_foreach_norm cannot compute the infinity norm on an "
                                   "empty tensor because the operation does not have an "
                                   "identity"
                                 : "linalg.vector_norm cannot compute the -inf norm on an "
                                   "empty tensor because the operation does not have an "
                                   "identity");
  tpu_dtype_t c = tpu_opmath(out);
  tpu_val_t x = tpu_lower_input(e, 0, c);
  tpu_val_t a = tpu_ir_unary(g, TPU_IR_ABS, x), r;
  if (p == 0) {
    r = reduce_all(e, tpu_ir_convert(g, tpu_ir_compare(g, TPU_CMP_NE, x, tpu_lower_const_like(e, x, 0)), c),
                   0, TPU_BODY_ADD);
  } else if (p == 1) {
    r = reduce_all(e, a, 0, TPU_BODY_ADD);
  } else if (p == 2) {
    r = tpu_ir_unary(g, TPU_IR_SQRT, reduce_all(e, tpu_ir_binary(g, TPU_IR_MUL, x, x), 0, TPU_BODY_ADD));
  } else if (isinf(p)) {
    r = reduce_all(e, a, p > 0 ? 0 : INFINITY, p > 0 ? TPU_BODY_MAX : TPU_BODY_MIN);
  } else {
    // (sum |x|^p)^(1/p); p is an input, so other orders reuse the program.
    tpu_val_t pv = tpu_lower_input(e, 1, c);
    const tpu_type_t* at = tpu_ir_type(g, a);
    tpu_val_t s = reduce_all(e, tpu_ir_binary(g, TPU_IR_POW, a, tpu_ir_broadcast(g, pv, at->dims, at->rank, NULL)),
                             0, TPU_BODY_ADD);
    r = tpu_ir_binary(g, TPU_IR_POW, s, tpu_ir_binary(g, TPU_IR_DIV, tpu_ir_const(g, c, 1, NULL, 0), pv));
  }
  tpu_lower_out(e, 0, tpu_ir_convert(g, r, out));
  return TPU_OK;
}

// sum(|x|^ord): the norm without its root.
static tpu_status_t powsum_elem(tpu_lower_ctx_t* e) {
  tpu_graph_t* g = e->g;
  tpu_dtype_t out;
  TPU_RETURN_IF_ERROR(norm_dtypes(e, "powsum_cpu", &out));
  double p = tpu_arg_number(e, 1, 2);
  tpu_dtype_t c = tpu_opmath(out);
  tpu_val_t x = tpu_lower_input(e, 0, c);
  tpu_val_t a = tpu_ir_unary(g, TPU_IR_ABS, x), r;
  if (p == 1) {
    r = reduce_all(e, a, 0, TPU_BODY_ADD);
  } else if (p == 2) {
    r = reduce_all(e, tpu_ir_binary(g, TPU_IR_MUL, x, x), 0, TPU_BODY_ADD);
  } else {
    tpu_val_t pv = tpu_lower_input(e, 1, c);
    const tpu_type_t* at = tpu_ir_type(g, a);
    r = reduce_all(e, tpu_ir_binary(g, TPU_IR_POW, a, tpu_ir_broadcast(g, pv, at->dims, at->rank, NULL)),
                   0, TPU_BODY_ADD);
  }
  tpu_lower_out(e, 0, tpu_ir_convert(g, r, out));
  return TPU_OK;
}

// The largest element (NaN wins), in the input's dtype.
static tpu_status_t max_elem(tpu_lower_ctx_t* e) {
  tpu_graph_t* g = e->g;
  const tpu_view_t* v = tpu_arg(e, 0)->tensor;
  if (tpu_view_numel(v) == 0)
    return tpu_status_make(TPU_CODE_INVALID_ARGUMENT,
                           "_foreach_max cannot compute the maximum of an empty tensor; "
                           "max over zero elements is undefined.");
  if (tpu_dtype_is_complex(v->dtype)) return tpu_not_implemented("max_all", v->dtype);
  tpu_val_t x = tpu_lower_tensor(e, 0), r;
  if (v->dtype == TPU_BOOL) {
    r = tpu_ir_reduce(g, x, tpu_ir_const_i(g, TPU_BOOL, 0, NULL, 0), all_dims, v->rank, TPU_BODY_OR);
  } else if (tpu_dtype_is_float(v->dtype)) {
    x = tpu_ir_convert(g, x, tpu_opmath(v->dtype));
    r = tpu_ir_convert(g, reduce_all(e, x, -INFINITY, TPU_BODY_MAX), v->dtype);
  } else {
    int64_t lowest = tpu_dtype_kind(v->dtype) == TPU_KIND_UINT
                         ? 0
                         : (int64_t)(-(((uint64_t)1) << (8 * tpu_dtype_size(v->dtype) - 1)));
    r = tpu_ir_reduce(g, x, tpu_ir_const_i(g, v->dtype, lowest, NULL, 0), all_dims, v->rank,
                      TPU_BODY_MAX);
  }
  tpu_lower_out(e, 0, r);
  return TPU_OK;
}

//===--- the foreach rows ---===//

// _foreach_add / _sub (List with alpha, Scalar, ScalarList, Tensor with alpha)
tpu_status_t tpu_lower_foreach_add(tpu_lower_ctx_t* cx) {
  TPU_RETURN_IF_ERROR(check_scalar_tensor(cx, 1));
  return foreach_table(cx, "add");
}
tpu_status_t tpu_lower_foreach_sub(tpu_lower_ctx_t* cx) { return foreach_table(cx, "sub"); }
tpu_status_t tpu_lower_foreach_mul(tpu_lower_ctx_t* cx) {
  TPU_RETURN_IF_ERROR(check_scalar_tensor(cx, 1));
  return foreach_table(cx, "mul");
}
tpu_status_t tpu_lower_foreach_div(tpu_lower_ctx_t* cx) {
  TPU_RETURN_IF_ERROR(check_scalar_tensor(cx, 1));
  return foreach_table(cx, "div");
}

// _foreach_maximum.List is torch.maximum, with numbers PyTorch clamps: the
// same values, NaN-propagating (clamp_elem refuses bool only with numbers).
tpu_status_t tpu_lower_foreach_maximum(tpu_lower_ctx_t* cx) {
  return foreach_map(cx, NULL, clamp_min_elem);
}
tpu_status_t tpu_lower_foreach_minimum(tpu_lower_ctx_t* cx) {
  return foreach_map(cx, NULL, clamp_max_elem);
}
tpu_status_t tpu_lower_foreach_clamp_min(tpu_lower_ctx_t* cx) {
  return foreach_map(cx, NULL, clamp_min_elem);
}
tpu_status_t tpu_lower_foreach_clamp_max(tpu_lower_ctx_t* cx) {
  return foreach_map(cx, NULL, clamp_max_elem);
}
tpu_status_t tpu_lower_foreach_pow(tpu_lower_ctx_t* cx) { return foreach_map(cx, NULL, pow_elem); }
tpu_status_t tpu_lower_foreach_lerp(tpu_lower_ctx_t* cx) { return foreach_map(cx, NULL, lerp_elem); }

// The .Tensor overloads pack one number per element in a 1-D CPU tensor
// (the binding passes its values as a scalar list).
static tpu_status_t check_packed_scalars(const tpu_lower_ctx_t* cx) {
  const tpu_arg_t* a = tpu_arg(cx, 3);
  if (a->kind == TPU_ARG_TENSOR)
    return tpu_status_make(TPU_CODE_INVALID_ARGUMENT,
                           "Expected scalars to be on CPU, got tpu:%d instead.",
                           tpu_slot_device(a->tensor->slot));
  if (a->kind == TPU_ARG_SCALAR && a->scalar.tier == TPU_TIER_ZERO)
    return tpu_status_make(TPU_CODE_INVALID_ARGUMENT,
                           "Expected packed scalar Tensor to be of dimension 1. Got 0 "
                           "instead.");
  return TPU_OK;
}

tpu_status_t tpu_lower_foreach_addcmul(tpu_lower_ctx_t* cx) {
  TPU_RETURN_IF_ERROR(check_packed_scalars(cx));
  return foreach_map(cx, NULL, addcmul_elem);
}
tpu_status_t tpu_lower_foreach_addcdiv(tpu_lower_ctx_t* cx) {
  TPU_RETURN_IF_ERROR(check_packed_scalars(cx));
  return foreach_map(cx, NULL, addcdiv_elem);
}

#define FOREACH_TABLE(op) \
  tpu_status_t tpu_lower_foreach_##op(tpu_lower_ctx_t* cx) { return foreach_table(cx, #op); }
FOREACH_TABLE(neg)
FOREACH_TABLE(exp)
FOREACH_TABLE(expm1)
FOREACH_TABLE(log)
FOREACH_TABLE(log1p)
FOREACH_TABLE(sqrt)
FOREACH_TABLE(rsqrt)
FOREACH_TABLE(sin)
FOREACH_TABLE(cos)
FOREACH_TABLE(tan)
FOREACH_TABLE(tanh)
FOREACH_TABLE(sigmoid)
FOREACH_TABLE(erf)
FOREACH_TABLE(mm)
FOREACH_TABLE(ceil)
FOREACH_TABLE(floor)
FOREACH_TABLE(round)
FOREACH_TABLE(trunc)
FOREACH_TABLE(frac)
FOREACH_TABLE(log2)
FOREACH_TABLE(log10)
FOREACH_TABLE(reciprocal)
FOREACH_TABLE(sign)
#undef FOREACH_TABLE

#define FOREACH_ROW(op) \
  tpu_status_t tpu_lower_foreach_##op(tpu_lower_ctx_t* cx) { return foreach_map(cx, &op##_row, NULL); }
FOREACH_ROW(acos)
FOREACH_ROW(asin)
FOREACH_ROW(atan)
FOREACH_ROW(cosh)
FOREACH_ROW(sinh)
FOREACH_ROW(erfc)
FOREACH_ROW(lgamma)
#undef FOREACH_ROW

#define FOREACH_ELEM(op) \
  tpu_status_t tpu_lower_foreach_##op(tpu_lower_ctx_t* cx) { return foreach_map(cx, NULL, op##_elem); }
FOREACH_ELEM(abs)
FOREACH_ELEM(zero)
FOREACH_ELEM(copy)
FOREACH_ELEM(norm)
FOREACH_ELEM(powsum)
FOREACH_ELEM(max)
#undef FOREACH_ELEM

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
    tpu_val_t all = tpu_ir_reduce(g, finite, tpu_ir_const_i(g, TPU_BOOL, 1, NULL, 0), all_dims,
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

static tpu_val_t splat(tpu_lower_ctx_t* cx, tpu_val_t s, tpu_val_t like) {
  const tpu_type_t* t = tpu_ir_type(cx->g, like);
  return tpu_ir_broadcast(cx->g, s, t->dims, t->rank, NULL);
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
    r = tpu_ir_select(cx->g, splat(cx, amp->skip, r), tpu_lower_tensor_at(cx, list, j), r);
  tpu_lower_out(cx, k, r);
}

static tpu_status_t check_fused_lists(tpu_lower_ctx_t* cx, int num_lists, int optional_list,
                                      bool optional_used, int* out_n) {
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
      bool steps = !strncmp(cx->row->name, "fused_adam", 10) && i == 5;
      if (steps) {
        if (tpu_view_numel(v) != 1)
          return invalid("%s: state_steps must hold one number each", cx->row->name);
        continue;
      }
      const tpu_view_t* p = tpu_arg_tensor_at(cx, 0, j);
      bool same = v->rank == p->rank && v->dtype == p->dtype;
      for (int d = 0; same && d < p->rank; ++d) same = v->sizes[d] == p->sizes[d];
      if (!same)
        return invalid("%s: every tensor must have the shape and dtype of its parameter",
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
  TPU_RETURN_IF_ERROR(check_fused_lists(cx, 6, 4, amsgrad, &n));
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
#define C(v) splat(cx, tpu_ir_convert(g, (v), c), p)
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
    tpu_val_t base = tpu_ir_select(g, splat(cx, small, p), m, grad);
    m = tpu_ir_binary(g, TPU_IR_ADD, base,
                      tpu_ir_binary(g, TPU_IR_MUL, splat(cx, coeff, p), tpu_ir_binary(g, TPU_IR_SUB, grad, m)));
    // exp_avg_sq = exp_avg_sq * beta2 + (1 - beta2) * grad * grad
    tpu_val_t v = tpu_ir_convert(g, tpu_lower_tensor_at(cx, 3, j), c);
    v = tpu_ir_binary(g, TPU_IR_ADD, tpu_ir_binary(g, TPU_IR_MUL, v, C(beta2)),
                      tpu_ir_binary(g, TPU_IR_MUL, tpu_ir_binary(g, TPU_IR_MUL, C(sq_coeff), grad), grad));
    fused_out(cx, &amp, 2 * n + j, m, 2, j);
    fused_out(cx, &amp, 3 * n + j, v, 3, j);
    tpu_val_t d = v;
    if (amsgrad) {
      d = nan_max_min(g, TPU_IR_MAX, tpu_ir_convert(g, tpu_lower_tensor_at(cx, 4, j), c), v);
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
    return invalid("%s: momentum buffers given without momentum", cx->row->name);
  int n = 0;
  TPU_RETURN_IF_ERROR(check_fused_lists(cx, 3, 2, has_momentum, &n));
  amp_args_t amp;
  TPU_RETURN_IF_ERROR(fused_amp_args(cx, 10, &amp));
  double weight_decay = tpu_arg_number(cx, 3, 0);
  tpu_val_t wd = f64_arg(cx, 3), momentum = f64_arg(cx, 4), lr = f64_arg(cx, 5);
  tpu_val_t damp = tpu_ir_binary(g, TPU_IR_SUB, tpu_ir_const(g, TPU_F64, 1, NULL, 0), f64_arg(cx, 6));
  for (int j = 0; j < n; ++j) {
    tpu_dtype_t c = tpu_opmath(tpu_arg_tensor_at(cx, 0, j)->dtype);
#define C(v) splat(cx, tpu_ir_convert(g, (v), c), p)
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
