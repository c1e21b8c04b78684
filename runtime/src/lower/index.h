// Private to the indexing lowerings (lower_index.c, lower_advanced_index.c,
// lower_mask.c, lower_shape.c, lower_scatter.c): values, index checks and
// flat gathers and scatters they share. Defined in lower_index.c.
#ifndef TPU_LOWER_INDEX_H_
#define TPU_LOWER_INDEX_H_

#include "lower/lower.h"

static inline tpu_val_t tpu_ix_zeros(tpu_graph_t* g, tpu_dtype_t t, const int64_t* d, int n) {
  return tpu_ir_const(g, t, 0, d, n);
}

static inline tpu_val_t tpu_ix_splat_i64(tpu_graph_t* g, int64_t v, const int64_t* d, int n) {
  return tpu_ir_const_i(g, TPU_I64, v, d, n);
}

// x (shape d, rank n) as a 1-D value.
static inline tpu_val_t tpu_ix_flat(tpu_graph_t* g, tpu_val_t x, const int64_t* d, int n) {
  int64_t len = tpu_numel(d, n);
  return tpu_ir_reshape(g, x, &len, 1);
}

static inline bool tpu_ix_is_index_dtype(tpu_dtype_t t) { return t == TPU_I64 || t == TPU_I32; }

// The dtype for counting up to n (i32 where it fits: TPUs have no native
// 64-bit integers).
static inline tpu_dtype_t tpu_ix_count_dtype(int64_t n) {
  return n < ((int64_t)1 << 31) ? TPU_I32 : TPU_I64;
}

// Sum of a bool value's true elements as a 0-d i64.
tpu_val_t tpu_ix_count_true(tpu_graph_t* g, tpu_val_t b, int rank);
// x != 0 as bool (x itself when bool).
tpu_val_t tpu_ix_nonzero_mask(tpu_graph_t* g, tpu_val_t x, tpu_dtype_t t, const int64_t* d,
                              int n);
// Index values (i32/i64, shape d) as i64, asserting every one lies in
// [-size, size) when negatives wrap, else in [0, size); negatives are
// wrapped. The message goes with `code` when an index is out of range,
// with the first such index where it says "{value}".
tpu_val_t tpu_ix_checked_index(tpu_lower_ctx_t* cx, tpu_val_t idx, const int64_t* d, int n,
                               int64_t size, bool wrap, tpu_code_t code, const char* fmt, ...)
    TPU_PRINTF(8, 9);
// The shape that index ops treat argument `arg` as (0-d counts as 1-d of
// size 1) in d; returns its rank.
int tpu_ix_nonempty_shape(const tpu_lower_ctx_t* cx, int arg, int64_t* d);
// A 0-d or 1-d index argument as a 1-D i64 value of *m entries.
tpu_val_t tpu_ix_index_vector(tpu_lower_ctx_t* cx, int arg, int64_t* m);
// The checks of index_add / index_reduce (PyTorch's index_func_meta_impl,
// in its order and with its messages): a vector index (argument 2) of m
// entries, source (argument 3) of self's dtype and shaped like self but
// along dim.
TPU_MUST_USE tpu_status_t tpu_ix_check_index_source(tpu_lower_ctx_t* cx, const char* op,
                                                    int64_t dim, int64_t m);
// Row-major strides of a contiguous shape.
void tpu_ix_strides_of(const int64_t* d, int n, int64_t* st);
// Inclusive prefix sum of a 1-D integer value of n entries.
tpu_val_t tpu_ix_prefix_sum(tpu_graph_t* g, tpu_val_t x, int64_t n, tpu_dtype_t t);
// Flat positions (i64, `size` entries) of the first `size` true elements of
// the 1-D bool m (n entries), in order; -1 past the last one.
tpu_val_t tpu_ix_compact_positions(tpu_graph_t* g, tpu_val_t m, int64_t n, int64_t size);

#endif  // TPU_LOWER_INDEX_H_
