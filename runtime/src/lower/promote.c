// PyTorch's dtype rules: promotion (torch.promote_types, tabulated for the
// pinned torch), casting, display names, and result_type over operands.
#include "lower/lower.h"

enum {
  b1 = TPU_BOOL, u1 = TPU_U8, i1 = TPU_I8, i2 = TPU_I16, i4 = TPU_I32,
  i8 = TPU_I64, u2 = TPU_U16, u4 = TPU_U32, u8 = TPU_U64, f2 = TPU_F16,
  bf = TPU_BF16, f4 = TPU_F32, f8 = TPU_F64, c8 = TPU_C64, cx = TPU_C128,
  e5 = TPU_F8E5M2, e4 = TPU_F8E4M3FN, XX = TPU_DTYPE_INVALID,
};

// promote[a][b], rows and columns in tpu_dtype_t order; XX: PyTorch refuses.
static const signed char promote[TPU_DTYPE_COUNT][TPU_DTYPE_COUNT] = {
    {b1, u1, i1, i2, i4, i8, XX, XX, XX, f2, bf, f4, f8, c8, cx, XX, XX},  // BOOL
    {u1, u1, i2, i2, i4, i8, XX, XX, XX, f2, bf, f4, f8, c8, cx, XX, XX},  // U8
    {i1, i2, i1, i2, i4, i8, XX, XX, XX, f2, bf, f4, f8, c8, cx, XX, XX},  // I8
    {i2, i2, i2, i2, i4, i8, XX, XX, XX, f2, bf, f4, f8, c8, cx, XX, XX},  // I16
    {i4, i4, i4, i4, i4, i8, XX, XX, XX, f2, bf, f4, f8, c8, cx, XX, XX},  // I32
    {i8, i8, i8, i8, i8, i8, XX, XX, XX, f2, bf, f4, f8, c8, cx, XX, XX},  // I64
    {XX, XX, XX, XX, XX, XX, u2, XX, XX, f2, bf, f4, f8, XX, XX, XX, XX},  // U16
    {XX, XX, XX, XX, XX, XX, XX, u4, XX, f2, bf, f4, f8, XX, XX, XX, XX},  // U32
    {XX, XX, XX, XX, XX, XX, XX, XX, u8, f2, bf, f4, f8, XX, XX, XX, XX},  // U64
    {f2, f2, f2, f2, f2, f2, f2, f2, f2, f2, f4, f4, f8, c8, cx, XX, XX},  // F16
    {bf, bf, bf, bf, bf, bf, bf, bf, bf, f4, bf, f4, f8, c8, cx, XX, XX},  // BF16
    {f4, f4, f4, f4, f4, f4, f4, f4, f4, f4, f4, f4, f8, c8, cx, XX, XX},  // F32
    {f8, f8, f8, f8, f8, f8, f8, f8, f8, f8, f8, f8, f8, cx, cx, XX, XX},  // F64
    {c8, c8, c8, c8, c8, c8, XX, XX, XX, c8, c8, c8, cx, c8, cx, XX, XX},  // C64
    {cx, cx, cx, cx, cx, cx, XX, XX, XX, cx, cx, cx, cx, cx, cx, XX, XX},  // C128
    {XX, XX, XX, XX, XX, XX, XX, XX, XX, XX, XX, XX, XX, XX, XX, e5, XX},  // F8E5M2
    {XX, XX, XX, XX, XX, XX, XX, XX, XX, XX, XX, XX, XX, XX, XX, XX, e4},  // F8E4M3FN
};

tpu_dtype_t tpu_promote_types(tpu_dtype_t a, tpu_dtype_t b) {
  if (a == TPU_DTYPE_INVALID) return b;
  if (b == TPU_DTYPE_INVALID) return a;
  return (tpu_dtype_t)promote[a][b];
}

bool tpu_dtype_can_cast(tpu_dtype_t from, tpu_dtype_t to) {
  if (tpu_dtype_is_complex(from) && !tpu_dtype_is_complex(to)) return false;
  if (tpu_dtype_is_float(from) && tpu_dtype_is_integral(to, false)) return false;
  if (from != TPU_BOOL && to == TPU_BOOL) return false;
  return true;
}

tpu_dtype_t tpu_opmath(tpu_dtype_t t) {
  return t == TPU_F16 || t == TPU_BF16 || t == TPU_F8E4M3FN || t == TPU_F8E5M2
             ? TPU_F32 : t;
}

tpu_dtype_t tpu_default_float(const tpu_lower_ctx_t* cx) {
  return tpu_dtype_is_float(cx->default_float) ? cx->default_float : TPU_F32;
}

tpu_dtype_t tpu_to_float(const tpu_lower_ctx_t* cx, tpu_dtype_t t) {
  return tpu_dtype_is_integral(t, true) ? tpu_default_float(cx) : t;
}

// PyTorch's default complex dtype follows the default float: complex128 for
// float64 (complex32 for float16, which has no PJRT type: complex64 here).
static tpu_dtype_t to_complex(tpu_dtype_t t) {
  return t == TPU_F64 ? TPU_C128 : TPU_C64;
}

// PyTorch's combine_categories: a lower tier may raise the category (bool <
// integer < float < complex) of a higher one, never its precision.
static tpu_dtype_t combine(tpu_dtype_t higher, tpu_dtype_t lower) {
  if (higher != TPU_DTYPE_INVALID && tpu_dtype_is_complex(higher)) return higher;
  if (lower != TPU_DTYPE_INVALID && tpu_dtype_is_complex(lower)) {
    if (higher != TPU_DTYPE_INVALID && tpu_dtype_is_float(higher)) return to_complex(higher);
    return lower;
  }
  if (higher != TPU_DTYPE_INVALID && tpu_dtype_is_float(higher)) return higher;
  if (higher == TPU_BOOL || (lower != TPU_DTYPE_INVALID && tpu_dtype_is_float(lower)))
    return tpu_promote_types(higher, lower);
  return higher != TPU_DTYPE_INVALID ? higher : lower;
}

tpu_dtype_t tpu_lower_result_type(const tpu_lower_ctx_t* cx, const int* args,
                                  int n) {
  tpu_dtype_t tiers[3] = {TPU_DTYPE_INVALID, TPU_DTYPE_INVALID, TPU_DTYPE_INVALID};
  for (int k = 0; k < n; ++k) {
    const tpu_arg_t* a = tpu_arg(cx, args[k]);
    tpu_dtype_t t;
    int tier;
    if (a->kind == TPU_ARG_TENSOR) {
      t = a->tensor->dtype;
      tier = a->tensor->rank > 0 ? TPU_TIER_DIM : TPU_TIER_ZERO;
    } else if (a->kind == TPU_ARG_SCALAR) {
      t = a->scalar.dtype;
      tier = a->scalar.tier;
      if (tier == TPU_TIER_WRAPPED) {
        if (tpu_dtype_is_float(t)) t = tpu_default_float(cx);
        else if (tpu_dtype_is_complex(t)) t = to_complex(tpu_default_float(cx));
      }
    } else {
      continue;
    }
    tiers[tier] = tpu_promote_types(tiers[tier], t);
  }
  return combine(tiers[TPU_TIER_DIM], combine(tiers[TPU_TIER_ZERO], tiers[TPU_TIER_WRAPPED]));
}

const char* tpu_dtype_torch_name(tpu_dtype_t t) {
  static const char* const names[TPU_DTYPE_COUNT] = {
      [TPU_BOOL] = "Bool", [TPU_U8] = "Byte", [TPU_I8] = "Char",
      [TPU_I16] = "Short", [TPU_I32] = "Int", [TPU_I64] = "Long",
      [TPU_U16] = "UInt16", [TPU_U32] = "UInt32", [TPU_U64] = "UInt64",
      [TPU_F16] = "Half", [TPU_BF16] = "BFloat16", [TPU_F32] = "Float",
      [TPU_F64] = "Double", [TPU_C64] = "ComplexFloat",
      [TPU_C128] = "ComplexDouble", [TPU_F8E5M2] = "Float8_e5m2",
      [TPU_F8E4M3FN] = "Float8_e4m3fn"};
  return t >= 0 && t < TPU_DTYPE_COUNT ? names[t] : "Undefined";
}

const char* tpu_dtype_cpp_name(tpu_dtype_t t) {
  switch (t) {
    case TPU_F32: return "float";
    case TPU_F64: return "double";
    case TPU_F16: return "c10::Half";
    case TPU_BF16: return "c10::BFloat16";
    case TPU_I64: return "long int";
    case TPU_I32: return "int";
    case TPU_I16: return "short int";
    case TPU_I8: return "signed char";
    case TPU_U8: return "unsigned char";
    case TPU_BOOL: return "bool";
    default: return tpu_dtype_torch_name(t);
  }
}
