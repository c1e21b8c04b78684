// Foreach ops (_foreach_*); the fused optimizer steps and AMP's
// grad-scaling ops are in lower_optim.c.
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
  uint32_t per_element = 0;
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
      per_element |= i < 32 ? 1u << i : 0;  // its own parameter (tpu_lower_scalar)
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
  e->cx.per_element = per_element;
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

// clamp_min / clamp_max (and maximum / minimum with a number, which PyTorch
// runs as clamp): promoted, NaN-propagating.
static tpu_status_t clamp_elem(tpu_lower_ctx_t* e, bool max, const char* kernel) {
  int ab[2] = {0, 1};
  tpu_dtype_t t;
  TPU_RETURN_IF_ERROR(promoted(e, ab, 2, &t));
  bool numbers = !tpu_arg_is_tensor(e, 1);
  if (t == TPU_BOOL && numbers) return tpu_not_implemented(kernel, t);
  // CPU's NotImplementedErrors: clamp's check for numbers, else the
  // maximum / minimum kernel's dtype dispatch.
  if (tpu_dtype_is_complex(t)) {
    if (numbers)
      return tpu_status_make(TPU_CODE_UNIMPLEMENTED, "clamp is not supported for complex types");
    return tpu_not_implemented(max ? "maximum_cpu" : "minimum_cpu", t);
  }
  tpu_val_t v[2];
  TPU_RETURN_IF_ERROR(tpu_lower_broadcast_inputs(e, ab, 2, t, v));
  tpu_lower_out(e, 0, max ? tpu_ew_max(e, v[0], v[1]) : tpu_ew_min(e, v[0], v[1]));
  return TPU_OK;
}

static tpu_status_t clamp_min_elem(tpu_lower_ctx_t* e) {
  return clamp_elem(e, true, "clamp_min_scalar_cpu");
}
static tpu_status_t clamp_max_elem(tpu_lower_ctx_t* e) {
  return clamp_elem(e, false, "clamp_max_scalar_cpu");
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
  tpu_lower_out(e, 0, tpu_ir_convert(g, tpu_ew_pow(e, v[0], v[1]), t));
  return TPU_OK;
}

// lerp(self, end, weight): lerp's formula (tpu_ew_lerp), floating and
// complex dtypes, with the dtype checks and kernel names of CPU's
// _foreach_lerp.
static tpu_status_t lerp_elem(tpu_lower_ctx_t* e) {
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
  if (!tpu_dtype_is_float(t) && !tpu_dtype_is_complex(t))
    return tpu_not_implemented(weight_tensor ? "lerp_kernel_tensor" : "lerp_kernel_scalar", t);
  int all[3] = {0, 1, 2};
  tpu_val_t v[3];
  TPU_RETURN_IF_ERROR(tpu_lower_broadcast_inputs(e, all, 3, tpu_opmath(t), v));
  tpu_lower_out(e, 0, tpu_ir_convert(e->g, tpu_ew_lerp(e, v[0], v[1], v[2]), t));
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

// Reduces every dim of x; a max or min of floats is NaN when any element is
// (as tpu_ew_max / tpu_ew_min).
static tpu_val_t reduce_all(tpu_lower_ctx_t* e, tpu_val_t x, double init, tpu_body_t body) {
  tpu_graph_t* g = e->g;
  tpu_dtype_t t = tpu_ir_dtype(g, x);
  int rank = tpu_ir_rank(g, x);
  tpu_val_t r = tpu_ir_reduce(g, x, tpu_ir_const(g, t, init, NULL, 0), tpu_all_dims, rank, body);
  if ((body == TPU_BODY_MAX || body == TPU_BODY_MIN) && tpu_dtype_is_float(t)) {
    tpu_val_t any_nan = tpu_ir_reduce(g, tpu_ir_compare(g, TPU_CMP_NE, x, x),
                                      tpu_ir_const_i(g, TPU_BOOL, 0, NULL, 0), tpu_all_dims, rank,
                                      TPU_BODY_OR);
    r = tpu_ir_select(g, any_nan, tpu_ir_const(g, t, NAN, NULL, 0), r);
  }
  return r;
}

// The dtype rules of linalg.vector_norm (and _foreach_powsum): floating or
// complex inputs, an optional dtype that the input converts to without
// narrowing (complex for complex inputs). *out: the dtype to compute in
// (the result is its real dtype).
static tpu_status_t norm_dtypes(tpu_lower_ctx_t* e, const char* int_kernel,
                                tpu_dtype_t* out) {
  tpu_dtype_t in = tpu_arg_value_dtype(e, 0);
  bool complex = tpu_dtype_is_complex(in);
  if (!tpu_dtype_is_float(in) && !complex) {
    if (int_kernel) return tpu_not_implemented(int_kernel, TPU_I64);
    return tpu_invalid("linalg.vector_norm: Expected a floating point or complex tensor "
                   "as input. Got %s", tpu_dtype_torch_name(in));
  }
  *out = tpu_arg_dtype(e, 2, in);
  if (complex != tpu_dtype_is_complex(*out))
    return tpu_invalid("linalg.vector_norm: dtype should be %s for %s inputs, but got %s",
                       complex ? "complex" : "real", complex ? "complex" : "real",
                       tpu_dtype_torch_name(*out));
  if (*out != in && tpu_promote_types(in, *out) != *out)
    return tpu_status_make(TPU_CODE_INVALID_ARGUMENT,
                           "linalg.vector_norm: the dtype of the input (%s) should be "
                           "convertible without narrowing to the specified dtype (%s)",
                           tpu_dtype_torch_name(in), tpu_dtype_torch_name(*out));
  return TPU_OK;
}

// The real dtype of a complex one (others unchanged).
static tpu_dtype_t real_of(tpu_dtype_t t) {
  return t == TPU_C64 ? TPU_F32 : t == TPU_C128 ? TPU_F64 : t;
}

// sum(|x|^p) of argument 0 in the real dtype of `out` (norm_dtypes), p a
// number (argument 1, an input unless 1 or 2). |x| is XLA's abs, also of a
// complex x, as CPU's std::abs (its norms square |x| for p = 2 too).
static tpu_val_t abs_pow_sum(tpu_lower_ctx_t* e, tpu_dtype_t out, double p) {
  tpu_graph_t* g = e->g;
  tpu_dtype_t c = tpu_opmath(out), rc = real_of(c);
  tpu_val_t a = tpu_ir_unary(g, TPU_IR_ABS, tpu_lower_input(e, 0, c));
  if (p == 1) return reduce_all(e, a, 0, TPU_BODY_ADD);
  if (p == 2) return reduce_all(e, tpu_ir_binary(g, TPU_IR_MUL, a, a), 0, TPU_BODY_ADD);
  tpu_val_t pv = tpu_lower_input(e, 1, rc);
  const tpu_type_t* at = tpu_ir_type(g, a);
  tpu_val_t ap = tpu_ir_binary(g, TPU_IR_POW, a, tpu_ir_broadcast(g, pv, at->dims, at->rank, NULL));
  return reduce_all(e, ap, 0, TPU_BODY_ADD);
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
  tpu_dtype_t rc = real_of(tpu_opmath(out));
  tpu_val_t r;
  if (p == 0 || isinf(p)) {
    tpu_val_t a = tpu_ir_unary(g, TPU_IR_ABS, tpu_lower_input(e, 0, tpu_opmath(out)));
    if (p == 0)
      r = reduce_all(e, tpu_ir_convert(g, tpu_ew_cmp_k(e, TPU_CMP_NE, a, 0), rc), 0,
                     TPU_BODY_ADD);
    else
      r = reduce_all(e, a, p > 0 ? 0 : INFINITY, p > 0 ? TPU_BODY_MAX : TPU_BODY_MIN);
  } else if (p == 1) {
    r = abs_pow_sum(e, out, p);
  } else if (p == 2) {
    r = tpu_ir_unary(g, TPU_IR_SQRT, abs_pow_sum(e, out, p));
  } else {
    // (sum |x|^p)^(1/p); p is an input, so other orders reuse the program.
    tpu_val_t inv = tpu_ir_binary(g, TPU_IR_DIV, tpu_ir_const(g, rc, 1, NULL, 0),
                                  tpu_lower_input(e, 1, rc));
    r = tpu_ir_binary(g, TPU_IR_POW, abs_pow_sum(e, out, p), inv);
  }
  tpu_lower_out(e, 0, tpu_ir_convert(g, r, real_of(out)));
  return TPU_OK;
}

// sum(|x|^ord): the norm without its root.
static tpu_status_t powsum_elem(tpu_lower_ctx_t* e) {
  tpu_dtype_t out;
  TPU_RETURN_IF_ERROR(norm_dtypes(e, "powsum_cpu", &out));
  tpu_val_t r = abs_pow_sum(e, out, tpu_arg_number(e, 1, 2));
  tpu_lower_out(e, 0, tpu_ir_convert(e->g, r, real_of(out)));
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
    r = tpu_ir_reduce(g, x, tpu_ir_const_i(g, TPU_BOOL, 0, NULL, 0), tpu_all_dims, v->rank, TPU_BODY_OR);
  } else if (tpu_dtype_is_float(v->dtype)) {
    x = tpu_ir_convert(g, x, tpu_opmath(v->dtype));
    r = tpu_ir_convert(g, reduce_all(e, x, -INFINITY, TPU_BODY_MAX), v->dtype);
  } else {
    int64_t lowest = tpu_dtype_kind(v->dtype) == TPU_KIND_UINT
                         ? 0
                         : (int64_t)(-(((uint64_t)1) << (8 * tpu_dtype_size(v->dtype) - 1)));
    r = tpu_ir_reduce(g, x, tpu_ir_const_i(g, v->dtype, lowest, NULL, 0), tpu_all_dims, v->rank,
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
