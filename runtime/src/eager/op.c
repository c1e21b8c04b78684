// Calling an op: lower it into the device graph, let the caller provide the
// targets, write the results, and run per the mode. Also the argument and
// input accessors that lowerings use.
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "eager/eager.h"

//===--- arguments ---===//

static const tpu_arg_t none_arg = {TPU_ARG_NONE, 0, {0}};

const tpu_arg_t* tpu_arg(const tpu_lower_ctx_t* cx, int i) {
  return i >= 0 && i < cx->num_args ? &cx->args[i] : &none_arg;
}
bool tpu_arg_present(const tpu_lower_ctx_t* cx, int i) {
  return tpu_arg(cx, i)->kind != TPU_ARG_NONE;
}
bool tpu_arg_is_tensor(const tpu_lower_ctx_t* cx, int i) {
  return tpu_arg(cx, i)->kind == TPU_ARG_TENSOR;
}

double tpu_arg_number(const tpu_lower_ctx_t* cx, int i, double dflt) {
  const tpu_arg_t* a = tpu_arg(cx, i);
  switch (a->kind) {
    case TPU_ARG_INT: return (double)a->i;
    case TPU_ARG_FLOAT: return a->f;
    case TPU_ARG_BOOL: return a->b;
    case TPU_ARG_SCALAR:
      switch (tpu_dtype_kind(a->scalar.dtype)) {
        case TPU_KIND_BOOL: return a->scalar.b;
        case TPU_KIND_INT:
        case TPU_KIND_UINT: return (double)a->scalar.i;
        case TPU_KIND_COMPLEX: return a->scalar.c[0];
        default: return a->scalar.f;
      }
    default: return dflt;
  }
}

bool tpu_arg_number_is(const tpu_lower_ctx_t* cx, int i, double dflt, double v) {
  const tpu_arg_t* a = tpu_arg(cx, i);
  bool complex = a->kind == TPU_ARG_SCALAR && tpu_dtype_kind(a->scalar.dtype) == TPU_KIND_COMPLEX;
  return tpu_arg_number(cx, i, dflt) == v && !(complex && a->scalar.c[1] != 0);
}

int64_t tpu_arg_int(const tpu_lower_ctx_t* cx, int i, int64_t dflt) {
  const tpu_arg_t* a = tpu_arg(cx, i);
  if (a->kind == TPU_ARG_INT) return a->i;
  if (a->kind == TPU_ARG_BOOL) return a->b;
  if (a->kind == TPU_ARG_SCALAR) return (int64_t)tpu_arg_number(cx, i, 0);
  return dflt;
}

double tpu_arg_float(const tpu_lower_ctx_t* cx, int i, double dflt) {
  return tpu_arg_number(cx, i, dflt);
}

bool tpu_arg_bool(const tpu_lower_ctx_t* cx, int i, bool dflt) {
  const tpu_arg_t* a = tpu_arg(cx, i);
  if (a->kind == TPU_ARG_BOOL) return a->b;
  if (a->kind == TPU_ARG_INT) return a->i != 0;
  return dflt;
}

const char* tpu_arg_string(const tpu_lower_ctx_t* cx, int i, const char* dflt) {
  const tpu_arg_t* a = tpu_arg(cx, i);
  return a->kind == TPU_ARG_STRING ? a->s : dflt;
}

tpu_dtype_t tpu_arg_dtype(const tpu_lower_ctx_t* cx, int i, tpu_dtype_t dflt) {
  const tpu_arg_t* a = tpu_arg(cx, i);
  return a->kind == TPU_ARG_DTYPE ? a->dtype : dflt;
}

int tpu_arg_ints(const tpu_lower_ctx_t* cx, int i, const int64_t** out) {
  const tpu_arg_t* a = tpu_arg(cx, i);
  if (a->kind == TPU_ARG_INTS) {
    *out = a->ints;
    return a->count;
  }
  if (a->kind == TPU_ARG_INT) {  // an int where a list is allowed
    *out = &a->i;
    return 1;
  }
  *out = NULL;
  return 0;
}

tpu_dtype_t tpu_arg_value_dtype(const tpu_lower_ctx_t* cx, int i) {
  const tpu_arg_t* a = tpu_arg(cx, i);
  if (a->kind == TPU_ARG_TENSOR) return a->tensor->dtype;
  if (a->kind == TPU_ARG_SCALAR) return a->scalar.dtype;
  return TPU_DTYPE_INVALID;
}

int tpu_arg_rank(const tpu_lower_ctx_t* cx, int i) {
  const tpu_arg_t* a = tpu_arg(cx, i);
  return a->kind == TPU_ARG_TENSOR ? a->tensor->rank : 0;
}

const int64_t* tpu_arg_sizes(const tpu_lower_ctx_t* cx, int i) {
  const tpu_arg_t* a = tpu_arg(cx, i);
  static const int64_t none[1] = {0};
  return a->kind == TPU_ARG_TENSOR ? a->tensor->sizes : none;
}

//===--- inputs ---===//

tpu_val_t tpu_lower_tensor(tpu_lower_ctx_t* cx, int i) {
  const tpu_arg_t* a = tpu_arg(cx, i);
  if (a->kind != TPU_ARG_TENSOR) {
    tpu_graph_fail(cx->g, tpu_status_make(TPU_CODE_INVALID_ARGUMENT,
                                          "%s: argument %d must be a tensor",
                                          cx->row->name, i));
    return TPU_VAL_NONE;
  }
  tpu_val_t v = tpu_dev_read(cx->dev, a->tensor);
  // (argument 0 is the gradient, which the forward never saw)
  return cx->row->flags & TPU_F_RECOMPUTE && i > 0 ? tpu_ir_barrier(cx->g, v) : v;
}

// A scalar's value converted (as C does) to `dtype`, as bytes.
static void scalar_bits(const tpu_scalar_t* s, tpu_dtype_t dtype, unsigned char out[16]) {
  memset(out, 0, 16);
  double re = 0, im = 0;
  int64_t iv = 0;
  bool is_int = false;
  switch (tpu_dtype_kind(s->dtype)) {
    case TPU_KIND_BOOL: iv = s->b; re = s->b; is_int = true; break;
    case TPU_KIND_INT:
    case TPU_KIND_UINT: iv = s->i; re = (double)s->i; is_int = true; break;
    case TPU_KIND_FLOAT: re = s->f; iv = (int64_t)s->f; break;
    case TPU_KIND_COMPLEX: re = s->c[0]; im = s->c[1]; iv = (int64_t)re; break;
  }
#define PUT(type, value) do { type v_ = (type)(value); memcpy(out, &v_, sizeof v_); } while (0)
  switch (dtype) {
    case TPU_BOOL: out[0] = is_int ? iv != 0 : (re != 0 || im != 0); break;
    case TPU_U8: PUT(uint8_t, iv); break;
    case TPU_I8: PUT(int8_t, iv); break;
    case TPU_I16: PUT(int16_t, iv); break;
    case TPU_I32: PUT(int32_t, iv); break;
    case TPU_I64: PUT(int64_t, iv); break;
    case TPU_U16: PUT(uint16_t, iv); break;
    case TPU_U32: PUT(uint32_t, iv); break;
    case TPU_U64: PUT(uint64_t, iv); break;
    case TPU_F32: PUT(float, re); break;
    case TPU_F64: PUT(double, re); break;
    case TPU_C64: {
      float c[2] = {(float)re, (float)im};
      memcpy(out, c, 8);
      break;
    }
    case TPU_C128: {
      double c[2] = {re, im};
      memcpy(out, c, 16);
      break;
    }
    default: break;
  }
#undef PUT
}

// The index of the op's argument that `s` is, or -1 (a number the lowering
// computed, or one element of a list argument).
static int shared_arg(const tpu_lower_ctx_t* cx, const tpu_scalar_t* s) {
  for (int i = 0; i < cx->num_args && i < 32; ++i)
    if (s == &cx->args[i].scalar)
      return cx->args[i].kind == TPU_ARG_SCALAR && !(cx->per_element >> i & 1) ? i : -1;
  return -1;
}

tpu_val_t tpu_lower_scalar(tpu_lower_ctx_t* cx, const tpu_scalar_t* s,
                           tpu_dtype_t dtype) {
  // 16-bit and 8-bit floats travel as f32 and are narrowed in the program,
  // the way PyTorch narrows a double scalar through float.
  tpu_dtype_t carrier = tpu_opmath(dtype);
  tpu_arg_params_t* memo = cx->arg_params;
  int arg = memo ? shared_arg(cx, s) : -1;
  for (int k = 0; arg >= 0 && k < memo->count; ++k)
    if (memo->entries[k].arg == arg && memo->entries[k].dtype == carrier)
      return tpu_ir_convert(cx->g, memo->entries[k].value, dtype);
  unsigned char bits[16];
  scalar_bits(s, carrier, bits);
  tpu_val_t v = tpu_dev_scalar(cx->dev, carrier, bits);
  if (arg >= 0 && memo->count < (int)(sizeof memo->entries / sizeof memo->entries[0]))
    memo->entries[memo->count++] = (tpu_arg_param_t){arg, carrier, v};
  return tpu_ir_convert(cx->g, v, dtype);
}

tpu_val_t tpu_lower_number(tpu_lower_ctx_t* cx, double value, tpu_dtype_t dtype) {
  tpu_scalar_t s;
  memset(&s, 0, sizeof s);
  s.dtype = TPU_F64;
  s.f = value;
  if (tpu_dtype_is_integral(dtype, true) && value == (double)(int64_t)value) {
    s.dtype = TPU_I64;
    s.i = (int64_t)value;
  }
  return tpu_lower_scalar(cx, &s, dtype);
}

tpu_val_t tpu_lower_input(tpu_lower_ctx_t* cx, int i, tpu_dtype_t dtype) {
  const tpu_arg_t* a = tpu_arg(cx, i);
  if (a->kind == TPU_ARG_SCALAR) return tpu_lower_scalar(cx, &a->scalar, dtype);
  if (a->kind == TPU_ARG_INT || a->kind == TPU_ARG_FLOAT || a->kind == TPU_ARG_BOOL)
    return tpu_lower_number(cx, tpu_arg_number(cx, i, 0), dtype);
  return tpu_ir_convert(cx->g, tpu_lower_tensor(cx, i), dtype);
}

// The C++ type PyTorch names when a number does not fit `t`, and the
// range it checks: [-max, max] for unsigned types (negatives wrap), none
// (infinite) for double and float8. (CPU skips the check for a
// one-element half or bfloat16 tensor; this does not.)
static const char* fill_type(tpu_dtype_t t, double* max) {
  *max = INFINITY;
  switch (t) {
    case TPU_F64: return "double";
    case TPU_C128: return "c10::complex<double>";
    case TPU_F8E5M2: return "c10::Float8_e5m2";
    case TPU_F8E4M3FN: return "c10::Float8_e4m3fn";
    case TPU_I8: *max = 127; return "int8_t";
    case TPU_I16: *max = 32767; return "int16_t";
    case TPU_I32: *max = 2147483647.0; return "int";
    case TPU_I64: *max = 9223372036854775807.0; return "int64_t";
    case TPU_U8: *max = 255; return "uint8_t";
    case TPU_U16: *max = 65535; return "uint16_t";
    case TPU_U32: *max = 4294967295.0; return "uint32_t";
    case TPU_U64: *max = 18446744073709551615.0; return "uint64_t";
    case TPU_F16: *max = 65504; return "c10::Half";
    case TPU_BF16: *max = 3.38953139e38; return "c10::BFloat16";
    case TPU_F32: *max = FLT_MAX; return "float";
    case TPU_C64: *max = FLT_MAX; return "c10::complex<float>";
    default: return "?";
  }
}

// c10's overflows(): an integer target takes values within its range (a
// NaN or infinity is out of it), a float target finite values within its
// range and any infinity or NaN; a real target no imaginary part.
static bool fill_overflows(const tpu_scalar_t* s, tpu_dtype_t t, double max) {
  double parts[2] = {0, 0};
  if (t == TPU_BOOL) return false;  // any number is true or false
  switch (tpu_dtype_kind(s->dtype)) {
    case TPU_KIND_BOOL: return false;
    case TPU_KIND_INT:
    case TPU_KIND_UINT: parts[0] = (double)s->i; break;
    case TPU_KIND_FLOAT: parts[0] = s->f; break;
    case TPU_KIND_COMPLEX:
      parts[0] = s->c[0];
      parts[1] = s->c[1];
      if (parts[1] != 0 && !tpu_dtype_is_complex(t)) return true;
      break;
  }
  bool lo_signed = tpu_dtype_kind(t) == TPU_KIND_INT;
  double lo = lo_signed ? -max - 1 : -max;
  for (int k = 0; k < 2; ++k) {
    double v = parts[k];
    if (tpu_dtype_is_integral(t, false) ? !(v >= lo && v <= max)
                                        : isfinite(v) && fabs(v) > max)
      return true;
  }
  return false;
}

// The same test on the device, for a 0-d tpu tensor `v`.
static tpu_val_t device_overflows(tpu_graph_t* g, tpu_val_t v, tpu_dtype_t t, double max) {
  tpu_dtype_t from = tpu_ir_dtype(g, v);
  tpu_val_t im_bad = tpu_ir_const_i(g, TPU_BOOL, 0, NULL, 0);
  if (tpu_dtype_is_complex(from)) {
    if (!tpu_dtype_is_complex(t))
      im_bad = tpu_ir_compare(g, TPU_CMP_NE, tpu_ir_unary(g, TPU_IR_IMAG, v),
                              tpu_ir_const(g, from == TPU_C64 ? TPU_F32 : TPU_F64, 0, NULL, 0));
    v = tpu_ir_unary(g, TPU_IR_REAL, v);
  }
  v = tpu_ir_convert(g, v, TPU_F64);
  tpu_val_t bad;
  if (tpu_dtype_is_integral(t, false)) {
    double lo = tpu_dtype_kind(t) == TPU_KIND_INT ? -max - 1 : -max;
    tpu_val_t in = tpu_ir_binary(g, TPU_IR_AND,
                                 tpu_ir_compare(g, TPU_CMP_GE, v, tpu_ir_const(g, TPU_F64, lo, NULL, 0)),
                                 tpu_ir_compare(g, TPU_CMP_LE, v, tpu_ir_const(g, TPU_F64, max, NULL, 0)));
    bad = tpu_ir_unary(g, TPU_IR_NOT, in);
  } else {
    bad = tpu_ir_binary(g, TPU_IR_AND, tpu_ir_unary(g, TPU_IR_IS_FINITE, v),
                        tpu_ir_compare(g, TPU_CMP_GT, tpu_ir_unary(g, TPU_IR_ABS, v),
                                       tpu_ir_const(g, TPU_F64, max, NULL, 0)));
  }
  return tpu_ir_binary(g, TPU_IR_OR, bad, im_bad);
}

static bool overflow(tpu_lower_ctx_t* cx, const char* name) {
  tpu_graph_fail(cx->g, tpu_status_make(TPU_CODE_INVALID_ARGUMENT,
                                        "value cannot be converted to type %s without "
                                        "overflow", name));
  return false;
}

bool tpu_lower_number_fits(tpu_lower_ctx_t* cx, int i, tpu_dtype_t dtype) {
  const tpu_arg_t* a = tpu_arg(cx, i);
  double max;
  const char* name = fill_type(dtype, &max);
  if (a->kind != TPU_ARG_SCALAR || !fill_overflows(&a->scalar, dtype, max)) return true;
  return overflow(cx, name);
}

bool tpu_lower_count_fits(tpu_lower_ctx_t* cx, int64_t v, tpu_dtype_t dtype) {
  double max;
  const char* name = fill_type(dtype, &max);
  return !tpu_dtype_is_integral(dtype, false) || (double)v <= max || overflow(cx, name);
}

tpu_val_t tpu_lower_fill_value(tpu_lower_ctx_t* cx, int i, tpu_dtype_t dtype, bool check_tensor) {
  if (!tpu_lower_number_fits(cx, i, dtype)) return TPU_VAL_NONE;
  const tpu_arg_t* a = tpu_arg(cx, i);
  double max;
  const char* name = fill_type(dtype, &max);
  tpu_dtype_t from = tpu_arg_value_dtype(cx, i);
  bool may_overflow = dtype != TPU_BOOL && (isfinite(max) || (tpu_dtype_is_complex(from) &&
                                                               !tpu_dtype_is_complex(dtype)));
  if (check_tensor && a->kind == TPU_ARG_TENSOR && from != dtype && may_overflow)
    tpu_lower_assert(cx, device_overflows(cx->g, tpu_lower_tensor(cx, i), dtype, max),
                     TPU_CODE_INVALID_ARGUMENT,
                     "value cannot be converted to type %s without overflow", name);
  return tpu_lower_input(cx, i, dtype);
}

tpu_val_t tpu_lower_bytes(tpu_lower_ctx_t* cx, tpu_dtype_t dtype,
                          const int64_t* dims, int rank, const void* data) {
  tpu_buffer_t* b = NULL;
  tpu_status_t s = tpu_buffer_from_host(tpu_rt()->client, cx->dev->index, dtype,
                                        dims, rank, data, NULL, &b);
  if (s) {
    tpu_graph_fail(cx->g, s);
    return TPU_VAL_NONE;
  }
  tpu_metric_add(TPU_M_H2D_COPIES, 1);
  tpu_metric_add(TPU_M_H2D_BYTES, (int64_t)tpu_buffer_nbytes(b));
  tpu_val_t v = tpu_dev_param(cx->dev, b);
  tpu_buffer_release(b);
  return v;
}

static tpu_site_hook_fn site_hook;
static void* site_hook_user;

void tpu_set_site_hook(tpu_site_hook_fn hook, void* user) {
  site_hook = hook;
  site_hook_user = user;
}

void tpu_call_site(char* buf, size_t size) {
  buf[0] = '\0';
  if (site_hook) site_hook(site_hook_user, buf, size);
}

// The numbers a failed assertion names: i64[2] (value, where), or NONE.
static tpu_val_t assert_numbers(tpu_graph_t* g, tpu_val_t value, tpu_val_t where) {
  if (value == TPU_VAL_NONE) return TPU_VAL_NONE;
  int64_t one = 1;
  tpu_val_t pair[2] = {tpu_ir_reshape(g, value, &one, 1),
                       where == TPU_VAL_NONE ? tpu_ir_const_i(g, TPU_I64, 0, &one, 1)
                                             : tpu_ir_reshape(g, where, &one, 1)};
  return tpu_ir_concat(g, pair, 2, 0);
}

// PyTorch's message, then a line on where the check comes from: outside
// debug mode it is raised lines later, at a sync (like CUDA's device-side
// asserts).
static void assert_v(tpu_lower_ctx_t* cx, tpu_val_t bad, tpu_val_t numbers, tpu_code_t code,
                     const char* fmt, va_list ap) {
  char msg[512], where[256];
  vsnprintf(msg, sizeof msg, fmt, ap);
  tpu_call_site(where, sizeof where);
  bool debug = tpu_mode_get() == TPU_MODE_DEBUG;
  tpu_dev_assert(cx->dev, bad, numbers,
                 tpu_status_make(code, "%s\n(checked on the device by %s%s%s%s)", msg,
                                 cx->row->name, *where ? ", called from " : "", where,
                                 debug ? "" : "; such errors are raised at the next sync, "
                                              "TORCHTPU_MODE=debug raises them at the op"));
}

void tpu_lower_assert(tpu_lower_ctx_t* cx, tpu_val_t bad, tpu_code_t code,
                      const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  assert_v(cx, bad, TPU_VAL_NONE, code, fmt, ap);
  va_end(ap);
}

void tpu_lower_assert_value(tpu_lower_ctx_t* cx, tpu_val_t bad, tpu_val_t value,
                            tpu_val_t where, tpu_code_t code, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  assert_v(cx, bad, assert_numbers(cx->g, value, where), code, fmt, ap);
  va_end(ap);
}

void tpu_lower_out(tpu_lower_ctx_t* cx, int k, tpu_val_t v) {
  if (k >= cx->outs_cap) {
    int cap = cx->outs_cap ? cx->outs_cap * 2 : 8;
    while (cap <= k) cap *= 2;
    tpu_val_t* outs = tpu_graph_alloc(cx->g, sizeof *outs * (size_t)cap);
    if (!outs) {
      tpu_graph_fail(cx->g, tpu_status_make(TPU_CODE_RESOURCE_EXHAUSTED, "out of memory"));
      return;
    }
    for (int i = 0; i < cx->num_outs; ++i) outs[i] = cx->outs[i];
    cx->outs = outs;
    cx->outs_cap = cap;
  }
  for (int i = cx->num_outs; i < k; ++i) cx->outs[i] = TPU_VAL_NONE;
  cx->outs[k] = v;
  if (cx->num_outs <= k) cx->num_outs = k + 1;
}

void tpu_lower_write_arg(tpu_lower_ctx_t* cx, int i, tpu_val_t v) {
  const tpu_arg_t* a = tpu_arg(cx, i);
  if (!tpu_graph_ok(cx->g)) return;
  if (a->kind != TPU_ARG_TENSOR) {
    tpu_graph_fail(cx->g, tpu_status_make(TPU_CODE_INVALID_ARGUMENT,
                                          "%s: argument %d must be a tensor to write",
                                          cx->row->name, i));
    return;
  }
  const tpu_type_t* t = tpu_ir_type(cx->g, v);
  bool same = t->rank == a->tensor->rank;
  for (int d = 0; same && d < t->rank; ++d) same = t->dims[d] == a->tensor->sizes[d];
  if (!same) {
    tpu_graph_fail(cx->g, tpu_status_make(TPU_CODE_INTERNAL,
                                          "%s: value written to argument %d has another shape",
                                          cx->row->name, i));
    return;
  }
  // A rewrite of the argument's slot, undone with the op if it fails.
  tpu_dev_write(cx->dev, a->tensor, v);
}

int tpu_arg_count(const tpu_lower_ctx_t* cx, int i) {
  const tpu_arg_t* a = tpu_arg(cx, i);
  return a->kind == TPU_ARG_TENSORS || a->kind == TPU_ARG_INTS ||
                 a->kind == TPU_ARG_FLOATS || a->kind == TPU_ARG_BOOLS ||
                 a->kind == TPU_ARG_SCALARS
             ? a->count
             : 0;
}

const tpu_view_t* tpu_arg_tensor_at(const tpu_lower_ctx_t* cx, int i, int j) {
  const tpu_arg_t* a = tpu_arg(cx, i);
  return a->kind == TPU_ARG_TENSORS && j >= 0 && j < a->count ? a->tensors[j] : NULL;
}

tpu_val_t tpu_lower_tensor_at(tpu_lower_ctx_t* cx, int i, int j) {
  const tpu_view_t* v = tpu_arg_tensor_at(cx, i, j);
  if (!v) {
    tpu_graph_fail(cx->g, tpu_status_make(TPU_CODE_INVALID_ARGUMENT,
                                          "%s: argument %d has no tensor %d",
                                          cx->row->name, i, j));
    return TPU_VAL_NONE;
  }
  return tpu_dev_read(cx->dev, v);
}

//===--- calling an op ---===//

static void fill_types(tpu_lower_ctx_t* cx, tpu_result_type_t* types) {
  for (int k = 0; k < cx->num_outs; ++k) {
    memset(&types[k], 0, sizeof types[k]);
    if (cx->outs[k] == TPU_VAL_NONE) {  // an absent result (undefined tensor)
      types[k].dtype = TPU_DTYPE_INVALID;
      continue;
    }
    const tpu_type_t* t = tpu_ir_type(cx->g, cx->outs[k]);
    types[k].dtype = t->dtype;
    types[k].rank = t->rank;
    memcpy(types[k].sizes, t->dims, sizeof(int64_t) * (size_t)t->rank);
  }
}

// The slot of result k's self: argument 0, or its k-th tensor (foreach).
static const tpu_slot_t* self_slot(const tpu_arg_t* self, int k) {
  if (self->kind == TPU_ARG_TENSOR) return self->tensor->slot;
  if (self->kind == TPU_ARG_TENSORS && k < self->count && self->tensors[k])
    return self->tensors[k]->slot;
  return NULL;
}

static tpu_status_t check_target(const tpu_op_row_t* row, const tpu_result_type_t* type,
                                 const tpu_view_t* t, const tpu_slot_t* self) {
  if ((row->flags & TPU_F_REAL_INPLACE) && self == t->slot && tpu_dtype_is_complex(t->dtype)) {
    const char* name = row->name;
    if (!strncmp(name, "foreach_", 8)) name += 8;  // PyTorch names the op
    return tpu_status_make(TPU_CODE_INVALID_ARGUMENT,
                           "In-place %s is not supported for complex tensors.", name);
  }
  bool same = type->rank == t->rank;
  for (int i = 0; same && i < t->rank; ++i) same = type->sizes[i] == t->sizes[i];
  if (!same) {
    char a[256] = "", b[256] = "";
    size_t na = 0, nb = 0;
    for (int i = 0; i < t->rank; ++i)
      na += (size_t)snprintf(a + na, sizeof a - na, "%s%lld", i ? ", " : "", (long long)t->sizes[i]);
    for (int i = 0; i < type->rank; ++i)
      nb += (size_t)snprintf(b + nb, sizeof b - nb, "%s%lld", i ? ", " : "", (long long)type->sizes[i]);
    return tpu_status_make(TPU_CODE_INVALID_ARGUMENT,
                           "output with shape [%s] doesn't match the broadcast "
                           "shape [%s]", a, b);
  }
  if ((row->flags & TPU_F_OUT_AS_INPUT) && type->dtype != t->dtype)
    return tpu_status_make(TPU_CODE_INVALID_ARGUMENT,
                           "Expected the dtype for input and out to match, but got %s for "
                           "input's dtype and %s for out's dtype.",
                           tpu_dtype_torch_name(type->dtype),
                           tpu_dtype_torch_name(t->dtype));
  if ((row->flags & TPU_F_OUT_EXACT) && type->dtype != t->dtype)
    return tpu_status_make(TPU_CODE_INVALID_ARGUMENT,
                           "Expected out tensor to have dtype %s, but got %s "
                           "instead", tpu_dtype_cpp_name(type->dtype),
                           tpu_dtype_cpp_name(t->dtype));
  if ((row->flags & TPU_F_CAST_CHECK) && !tpu_dtype_can_cast(type->dtype, t->dtype))
    return tpu_status_make(TPU_CODE_INVALID_ARGUMENT,
                           "result type %s can't be cast to the desired output "
                           "type %s", tpu_dtype_torch_name(type->dtype),
                           tpu_dtype_torch_name(t->dtype));
  return TPU_OK;
}

static int find_device(const tpu_arg_t* args, int n) {
  for (int i = 0; i < n; ++i) {
    if (args[i].kind == TPU_ARG_TENSOR) return args[i].tensor->slot->device;
    if (args[i].kind == TPU_ARG_TENSORS)
      for (int j = 0; j < args[i].count; ++j)
        if (args[i].tensors[j]) return args[i].tensors[j]->slot->device;
  }
  return -1;
}

tpu_dtype_t tpu_lower_out_dtype(const tpu_lower_ctx_t* cx, int k, tpu_dtype_t dflt) {
  return k >= 0 && k < cx->num_out_dtypes ? cx->out_dtypes[k] : dflt;
}

tpu_status_t tpu_op_call(const tpu_call_t* call) {
  int op = call->op, device = call->device, num_args = call->num_args;
  const tpu_arg_t* args = call->args;
  tpu_write_mode_t mode = call->mode;
  tpu_prepare_fn prepare = call->prepare;
  void* user = call->user;
  const tpu_op_row_t* row = tpu_op_row(op);
  if (!row) return tpu_status_make(TPU_CODE_INVALID_ARGUMENT, "no op %d", op);
  if (device < 0) device = find_device(args, num_args);
  if (device < 0) device = 0;
  tpu_dev_t* d;
  TPU_RETURN_IF_ERROR(tpu_dev_get(device, &d));
  tpu_dev_lock(d);
  tpu_mark_t mark;
  tpu_dev_begin(d, &mark);
  tpu_lower_ctx_t cx;
  memset(&cx, 0, sizeof cx);
  tpu_graph_set_precision(d->graph, call->precision);
  cx.g = d->graph;
  cx.row = row;
  cx.args = args;
  cx.num_args = num_args;
  cx.dev = d;
  cx.out_dtypes = call->out_dtypes;
  cx.num_out_dtypes = call->num_out_dtypes;
  cx.default_float = call->default_float;
  tpu_arg_params_t arg_params = {0};
  cx.arg_params = &arg_params;
  tpu_status_t s = row->lower(&cx);
  if (!s) s = tpu_graph_take_error(d->graph);
  if (!s && cx.num_outs == 0)
    s = tpu_status_make(TPU_CODE_INTERNAL, "%s produced no result", row->name);
  enum { SMALL = 8 };
  tpu_result_type_t small_types[SMALL];
  tpu_view_t small_targets[SMALL];
  int n = cx.num_outs;
  tpu_result_type_t* types = n <= SMALL ? small_types : tpu_malloc(sizeof *types * (size_t)n);
  tpu_view_t* targets = n <= SMALL ? small_targets : tpu_calloc((size_t)n, sizeof *targets);
  if (!s && (!types || !targets))
    s = tpu_status_make(TPU_CODE_RESOURCE_EXHAUSTED, "out of host memory");
  if (!s) {
    fill_types(&cx, types);
    memset(targets, 0, sizeof *targets * (size_t)n);
    s = prepare(user, n, types, targets);
  }
  for (int k = 0; !s && k < n; ++k) {
    // The caller does not want this result, or the op has none.
    if (!targets[k].slot || cx.outs[k] == TPU_VAL_NONE) continue;
    if (mode == TPU_WRITE_INTO)
      s = check_target(row, &types[k], &targets[k], self_slot(tpu_arg(&cx, 0), k));
    if (!s) tpu_dev_write(d, &targets[k], cx.outs[k]);
  }
  if (types != small_types) tpu_free(types);
  if (targets != small_targets) tpu_free(targets);
  if (!s) s = tpu_graph_take_error(d->graph);
  if (s) {
    tpu_dev_rollback(d, &mark);
  } else {
    if (d->num_asserts > mark.num_asserts) tpu_dev_suspect_writes(d, &mark);
    s = tpu_dev_after_op(d, op);
  }
  tpu_dev_unlock(d);
  return s;
}
