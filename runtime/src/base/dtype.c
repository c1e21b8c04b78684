#include "tpu/dtype.h"

static const struct {
  const char *name, *mlir;
  int pjrt;
  size_t size;
  tpu_dtype_kind_t kind;
} table[TPU_DTYPE_COUNT] = {
#define TPU_DTYPE_ROW(n, m, p, b, k) {#n, m, p, b, k},
    TPU_DTYPE_LIST(TPU_DTYPE_ROW)
#undef TPU_DTYPE_ROW
};

static bool valid(tpu_dtype_t t) { return t >= 0 && t < TPU_DTYPE_COUNT; }
const char* tpu_dtype_name(tpu_dtype_t t) { return valid(t) ? table[t].name : "INVALID"; }
const char* tpu_dtype_mlir(tpu_dtype_t t) { return valid(t) ? table[t].mlir : "?"; }
size_t tpu_dtype_size(tpu_dtype_t t) { return valid(t) ? table[t].size : 0; }
tpu_dtype_kind_t tpu_dtype_kind(tpu_dtype_t t) { return valid(t) ? table[t].kind : TPU_KIND_BOOL; }
int tpu_dtype_pjrt(tpu_dtype_t t) { return valid(t) ? table[t].pjrt : 0; }

tpu_dtype_t tpu_dtype_from_pjrt(int pjrt_type) {
  for (int i = 0; i < TPU_DTYPE_COUNT; ++i)
    if (table[i].pjrt == pjrt_type) return (tpu_dtype_t)i;
  return TPU_DTYPE_INVALID;
}
