// Element types. Each has an MLIR spelling, a PJRT buffer type and a size.
#ifndef TPU_DTYPE_H_
#define TPU_DTYPE_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum tpu_dtype_kind {
  TPU_KIND_BOOL,
  TPU_KIND_UINT,
  TPU_KIND_INT,
  TPU_KIND_FLOAT,
  TPU_KIND_COMPLEX,
} tpu_dtype_kind_t;

// X(name, mlir type, PJRT_Buffer_Type value, bytes, kind)
#define TPU_DTYPE_LIST(X)                           \
  X(BOOL, "i1", 1, 1, TPU_KIND_BOOL)                \
  X(U8, "ui8", 6, 1, TPU_KIND_UINT)                 \
  X(I8, "i8", 2, 1, TPU_KIND_INT)                   \
  X(I16, "i16", 3, 2, TPU_KIND_INT)                 \
  X(I32, "i32", 4, 4, TPU_KIND_INT)                 \
  X(I64, "i64", 5, 8, TPU_KIND_INT)                 \
  X(U16, "ui16", 7, 2, TPU_KIND_UINT)               \
  X(U32, "ui32", 8, 4, TPU_KIND_UINT)               \
  X(U64, "ui64", 9, 8, TPU_KIND_UINT)               \
  X(F16, "f16", 10, 2, TPU_KIND_FLOAT)              \
  X(BF16, "bf16", 13, 2, TPU_KIND_FLOAT)            \
  X(F32, "f32", 11, 4, TPU_KIND_FLOAT)              \
  X(F64, "f64", 12, 8, TPU_KIND_FLOAT)              \
  X(C64, "complex<f32>", 14, 8, TPU_KIND_COMPLEX)   \
  X(C128, "complex<f64>", 15, 16, TPU_KIND_COMPLEX) \
  X(F8E5M2, "f8E5M2", 16, 1, TPU_KIND_FLOAT)        \
  X(F8E4M3FN, "f8E4M3FN", 17, 1, TPU_KIND_FLOAT)

typedef enum tpu_dtype {
#define TPU_DTYPE_ENUM(name, mlir, pjrt, bytes, kind) TPU_##name,
  TPU_DTYPE_LIST(TPU_DTYPE_ENUM)
#undef TPU_DTYPE_ENUM
  TPU_DTYPE_COUNT,
  TPU_DTYPE_INVALID = -1,
} tpu_dtype_t;

const char* tpu_dtype_name(tpu_dtype_t t);  // "F32"
const char* tpu_dtype_mlir(tpu_dtype_t t);  // "f32"
size_t tpu_dtype_size(tpu_dtype_t t);
tpu_dtype_kind_t tpu_dtype_kind(tpu_dtype_t t);
int tpu_dtype_pjrt(tpu_dtype_t t);  // PJRT_Buffer_Type
tpu_dtype_t tpu_dtype_from_pjrt(int pjrt_type);  // TPU_DTYPE_INVALID if none
static inline bool tpu_dtype_is_float(tpu_dtype_t t) {
  return tpu_dtype_kind(t) == TPU_KIND_FLOAT;
}
static inline bool tpu_dtype_is_complex(tpu_dtype_t t) {
  return tpu_dtype_kind(t) == TPU_KIND_COMPLEX;
}
static inline bool tpu_dtype_is_integral(tpu_dtype_t t, bool include_bool) {
  tpu_dtype_kind_t k = tpu_dtype_kind(t);
  return k == TPU_KIND_INT || k == TPU_KIND_UINT ||
         (include_bool && k == TPU_KIND_BOOL);
}

// How far float32 matrix products and convolutions may trade precision for
// speed: torch.set_float32_matmul_precision's three settings, printed as
// StableHLO's precision_config (HIGHEST, HIGH, DEFAULT). The CPU plugin
// computes in float32 at each; a GPU may use TF32 below HIGHEST and a TPU
// bfloat16 passes, so HIGHEST, PyTorch's default, is the zero value.
typedef enum {
  TPU_PRECISION_HIGHEST = 0,
  TPU_PRECISION_HIGH = 1,
  TPU_PRECISION_MEDIUM = 2,
} tpu_precision_t;

#ifdef __cplusplus
}
#endif
#endif  // TPU_DTYPE_H_
