// The graph IR: typed SSA values in a hash-consed graph, printed as a
// StableHLO module.
//
// A graph owns its nodes (an arena reset between uses). Builder functions
// infer and check the result type; the first error (a shape or dtype
// mismatch) is kept in the graph and every later builder call returns
// TPU_VAL_NONE, so lowering code builds without checking each step and asks
// tpu_graph_status once at the end. Identical nodes (same op, attributes,
// operands and type) are built once (hash-consing), and each node's hash
// covers its whole input subgraph, so the hash of a graph's outputs names
// the program without printing it.
//
// Not thread-safe: one graph is used by one thread at a time.
#ifndef TPU_IR_IR_H_
#define TPU_IR_IR_H_

#include "tpu/base.h"
#include "tpu/client.h"
#include "tpu/dtype.h"

typedef int32_t tpu_val_t;  // a node of the graph; results of multi-result
                            // nodes are reached through tpu_ir_result
#define TPU_VAL_NONE ((tpu_val_t)-1)

typedef struct tpu_type {
  tpu_dtype_t dtype;
  int32_t rank;
  int64_t dims[TPU_MAX_RANK];
} tpu_type_t;

tpu_type_t tpu_type_make(tpu_dtype_t dtype, const int64_t* dims, int rank);
int64_t tpu_type_numel(const tpu_type_t* t);
bool tpu_type_eq(const tpu_type_t* a, const tpu_type_t* b);
// "tensor<2x3xf32>"
void tpu_type_str(const tpu_type_t* t, char* out, size_t size);

// X(enum, mlir name, class). Classes decide how attributes print.
#define TPU_IR_OP_LIST(X)                                        \
  X(PARAM, "", PARAM)                                            \
  X(RESULT, "", RESULT)                                          \
  X(CONSTANT, "stablehlo.constant", CONSTANT)                    \
  X(IOTA, "stablehlo.iota", IOTA)                                \
  /* elementwise unary */                                        \
  X(ABS, "stablehlo.abs", PLAIN)                                 \
  X(NEG, "stablehlo.negate", PLAIN)                              \
  X(EXP, "stablehlo.exponential", PLAIN)                         \
  X(EXPM1, "stablehlo.exponential_minus_one", PLAIN)             \
  X(LOG, "stablehlo.log", PLAIN)                                 \
  X(LOG1P, "stablehlo.log_plus_one", PLAIN)                      \
  X(SQRT, "stablehlo.sqrt", PLAIN)                               \
  X(RSQRT, "stablehlo.rsqrt", PLAIN)                             \
  X(CBRT, "stablehlo.cbrt", PLAIN)                               \
  X(TANH, "stablehlo.tanh", PLAIN)                               \
  X(LOGISTIC, "stablehlo.logistic", PLAIN)                       \
  X(SIN, "stablehlo.sine", PLAIN)                                \
  X(COS, "stablehlo.cosine", PLAIN)                              \
  X(TAN, "stablehlo.tan", PLAIN)                                 \
  X(FLOOR, "stablehlo.floor", PLAIN)                             \
  X(CEIL, "stablehlo.ceil", PLAIN)                               \
  X(ROUND_EVEN, "stablehlo.round_nearest_even", PLAIN)           \
  X(ROUND_AFZ, "stablehlo.round_nearest_afz", PLAIN)             \
  X(SIGN, "stablehlo.sign", PLAIN)                               \
  X(NOT, "stablehlo.not", PLAIN)                                 \
  X(POPCNT, "stablehlo.popcnt", PLAIN)                           \
  X(CLZ, "stablehlo.count_leading_zeros", PLAIN)                 \
  X(IS_FINITE, "stablehlo.is_finite", PLAIN)                     \
  X(REAL, "stablehlo.real", PLAIN)                               \
  X(IMAG, "stablehlo.imag", PLAIN)                               \
  X(ERF, "chlo.erf", PLAIN)                                      \
  X(ERFC, "chlo.erfc", PLAIN)                                    \
  X(ERF_INV, "chlo.erf_inv", PLAIN)                              \
  X(LGAMMA, "chlo.lgamma", PLAIN)                                \
  X(DIGAMMA, "chlo.digamma", PLAIN)                              \
  X(ASIN, "chlo.asin", PLAIN)                                    \
  X(ACOS, "chlo.acos", PLAIN)                                    \
  X(ATAN, "chlo.atan", PLAIN)                                    \
  X(SINH, "chlo.sinh", PLAIN)                                    \
  X(COSH, "chlo.cosh", PLAIN)                                    \
  X(ASINH, "chlo.asinh", PLAIN)                                  \
  X(ACOSH, "chlo.acosh", PLAIN)                                  \
  X(ATANH, "chlo.atanh", PLAIN)                                  \
  /* elementwise binary */                                       \
  X(ADD, "stablehlo.add", PLAIN)                                 \
  X(SUB, "stablehlo.subtract", PLAIN)                            \
  X(MUL, "stablehlo.multiply", PLAIN)                            \
  X(DIV, "stablehlo.divide", PLAIN)                              \
  X(REM, "stablehlo.remainder", PLAIN)                           \
  X(POW, "stablehlo.power", PLAIN)                               \
  X(MAX, "stablehlo.maximum", PLAIN)                             \
  X(MIN, "stablehlo.minimum", PLAIN)                             \
  X(AND, "stablehlo.and", PLAIN)                                 \
  X(OR, "stablehlo.or", PLAIN)                                   \
  X(XOR, "stablehlo.xor", PLAIN)                                 \
  X(SHL, "stablehlo.shift_left", PLAIN)                          \
  X(SHR_A, "stablehlo.shift_right_arithmetic", PLAIN)            \
  X(SHR_L, "stablehlo.shift_right_logical", PLAIN)               \
  X(ATAN2, "stablehlo.atan2", PLAIN)                             \
  X(NEXTAFTER, "chlo.next_after", PLAIN)                         \
  X(POLYGAMMA, "chlo.polygamma", PLAIN)                          \
  X(ZETA, "chlo.zeta", PLAIN)                                    \
  X(COMPLEX, "stablehlo.complex", PLAIN)                         \
  X(COMPARE, "stablehlo.compare", COMPARE)                       \
  X(SELECT, "stablehlo.select", PLAIN)                           \
  X(CLAMP, "stablehlo.clamp", PLAIN)                             \
  X(CONVERT, "stablehlo.convert", PLAIN)                         \
  X(BITCAST, "stablehlo.bitcast_convert", PLAIN)                 \
  /* shape */                                                    \
  X(RESHAPE, "stablehlo.reshape", PLAIN)                         \
  X(TRANSPOSE, "stablehlo.transpose", TRANSPOSE)                 \
  X(BROADCAST, "stablehlo.broadcast_in_dim", BROADCAST)          \
  X(SLICE, "stablehlo.slice", SLICE)                             \
  X(DYNAMIC_SLICE, "stablehlo.dynamic_slice", DYNAMIC_SLICE)     \
  X(DYNAMIC_UPDATE_SLICE, "stablehlo.dynamic_update_slice", PLAIN) \
  X(CONCAT, "stablehlo.concatenate", CONCAT)                     \
  X(PAD, "stablehlo.pad", PAD)                                   \
  X(REVERSE, "stablehlo.reverse", REVERSE)                       \
  X(GATHER, "stablehlo.gather", GATHER)                          \
  X(SCATTER, "stablehlo.scatter", SCATTER)                       \
  /* reductions, contractions */                                 \
  X(REDUCE, "stablehlo.reduce", REDUCE)                          \
  X(REDUCE_WINDOW, "stablehlo.reduce_window", REDUCE_WINDOW)     \
  X(SELECT_AND_SCATTER, "stablehlo.select_and_scatter", SELECT_AND_SCATTER) \
  X(DOT, "stablehlo.dot_general", DOT)                           \
  X(CONV, "stablehlo.convolution", CONV)                         \
  X(SORT, "stablehlo.sort", SORT)                                \
  X(TOP_K, "chlo.top_k", TOP_K)                                  \
  X(RNG_BITS, "stablehlo.rng_bit_generator", RNG)                \
  X(OPT_BARRIER, "stablehlo.optimization_barrier", PLAIN)        \
  X(ALL_REDUCE, "stablehlo.all_reduce", ALL_REDUCE)              \
  X(ALL_GATHER, "stablehlo.all_gather", ALL_GATHER)              \
  X(REDUCE_SCATTER, "stablehlo.reduce_scatter", REDUCE_SCATTER)  \
  X(ALL_TO_ALL, "stablehlo.all_to_all", ALL_TO_ALL)              \
  /* FFT and linear algebra */                                   \
  X(FFT, "stablehlo.fft", FFT)                                   \
  X(CHOLESKY, "stablehlo.cholesky", CHOLESKY)                    \
  X(TRIANGULAR_SOLVE, "stablehlo.triangular_solve", TRIANGULAR_SOLVE) \
  X(LU, "stablehlo.while", LOOP)                                 \
  X(LU_PERMUTATION, "stablehlo.while", LOOP)                     \
  X(QR, "stablehlo.while", LOOP)                                 \
  X(HOUSEHOLDER_PRODUCT, "stablehlo.while", LOOP)              \
  X(SQUARINGS, "stablehlo.while", LOOP)

typedef enum tpu_ir_op {
#define TPU_IR_OP_ENUM(e, name, cls) TPU_IR_##e,
  TPU_IR_OP_LIST(TPU_IR_OP_ENUM)
#undef TPU_IR_OP_ENUM
  TPU_IR_OP_COUNT
} tpu_ir_op_t;

const char* tpu_ir_op_name(tpu_ir_op_t op);

typedef enum tpu_cmp {
  TPU_CMP_EQ, TPU_CMP_NE, TPU_CMP_LT, TPU_CMP_LE, TPU_CMP_GT, TPU_CMP_GE
} tpu_cmp_t;

// Region bodies of reduce / reduce_window / scatter / all_reduce. A body of
// two operand pairs (ARGMAX, ARGMIN and their _LAST forms) reduces
// (value, index) together.
typedef enum tpu_body {
  TPU_BODY_ADD, TPU_BODY_MUL, TPU_BODY_MAX, TPU_BODY_MIN, TPU_BODY_AND,
  TPU_BODY_OR, TPU_BODY_XOR,
  TPU_BODY_REPLACE,          // scatter: the update wins
  TPU_BODY_ARGMAX, TPU_BODY_ARGMIN,  // (value, index): NaN wins, then lowest index
  TPU_BODY_ARGMAX_LAST, TPU_BODY_ARGMIN_LAST,  // the same, then highest index (cummax)
  TPU_BODY_COUNT
} tpu_body_t;

// Sort comparators over the first operand (other operands ride along).
typedef enum tpu_sort_order {
  TPU_SORT_ASCENDING,   // NaN last, as torch.sort
  TPU_SORT_DESCENDING,  // NaN first, as torch.sort(descending=True)
} tpu_sort_order_t;

typedef struct tpu_node tpu_node_t;
typedef struct tpu_graph tpu_graph_t;

//===--- graph ---===//

TPU_MUST_USE tpu_status_t tpu_graph_create(tpu_graph_t** out_graph);
void tpu_graph_destroy(tpu_graph_t* g);
// Forgets every node, keeping the memory for reuse.
void tpu_graph_reset(tpu_graph_t* g);
// Drops every node from index `count` on (and parameters made since), and
// clears the error: undoes a failed op in a graph that holds earlier ones.
void tpu_graph_truncate(tpu_graph_t* g, int32_t count);
// The first builder error, or OK. The graph keeps its own copy.
tpu_status_t tpu_graph_error(const tpu_graph_t* g);
TPU_MUST_USE tpu_status_t tpu_graph_take_error(tpu_graph_t* g);
// Records an error (first one wins; takes ownership of `status`).
void tpu_graph_fail(tpu_graph_t* g, tpu_status_t status);
bool tpu_graph_ok(const tpu_graph_t* g);
// The precision of the float32 products and convolutions built from now on
// (tpu_ir_dot, tpu_ir_conv; HIGHEST until set).
void tpu_graph_set_precision(tpu_graph_t* g, tpu_precision_t precision);
// Scratch memory that lives until the graph is reset (NULL when out of memory).
void* tpu_graph_alloc(tpu_graph_t* g, size_t size);
int32_t tpu_graph_node_count(const tpu_graph_t* g);

const tpu_type_t* tpu_ir_type(const tpu_graph_t* g, tpu_val_t v);
tpu_dtype_t tpu_ir_dtype(const tpu_graph_t* g, tpu_val_t v);
int tpu_ir_rank(const tpu_graph_t* g, tpu_val_t v);
const int64_t* tpu_ir_dims(const tpu_graph_t* g, tpu_val_t v);
tpu_hash_t tpu_ir_hash(const tpu_graph_t* g, tpu_val_t v);
tpu_ir_op_t tpu_ir_node_op(const tpu_graph_t* g, tpu_val_t v);
// Extends `marked` (a flag per node) to every node computed from a marked one.
void tpu_graph_mark_users(const tpu_graph_t* g, bool* marked);
// Whether v is computed from the data of `on`: from `on` or from what `on`
// is a reshape or transpose of (XLA may lay them out in the same buffer).
// True as well when that cannot be told (out of memory).
bool tpu_graph_depends_on(const tpu_graph_t* g, tpu_val_t v, tpu_val_t on);

// Parameters are numbered in creation order. Each is a distinct input
// (never merged by hash-consing).
tpu_val_t tpu_ir_param(tpu_graph_t* g, const tpu_type_t* type);
int32_t tpu_graph_param_count(const tpu_graph_t* g);
tpu_val_t tpu_graph_param(const tpu_graph_t* g, int32_t index);

//===--- builders ---===//

// A scalar constant, splatted to `dims` (rank 0 for a scalar). The value is
// given as double, int64 or both parts of a complex; it is converted to dtype.
tpu_val_t tpu_ir_const(tpu_graph_t* g, tpu_dtype_t dtype, double value,
                       const int64_t* dims, int rank);
tpu_val_t tpu_ir_const_i(tpu_graph_t* g, tpu_dtype_t dtype, int64_t value,
                         const int64_t* dims, int rank);
// Exact bit pattern (for NaN payloads, -0.0, infinities, u64 max, ...).
tpu_val_t tpu_ir_const_bits(tpu_graph_t* g, tpu_dtype_t dtype, uint64_t bits,
                            const int64_t* dims, int rank);
tpu_val_t tpu_ir_const_complex(tpu_graph_t* g, tpu_dtype_t dtype, double re,
                               double im, const int64_t* dims, int rank);
// A dense 1-D int64 constant (small tables: permutations, index lists).
tpu_val_t tpu_ir_const_i64_array(tpu_graph_t* g, const int64_t* values,
                                 int64_t count);
tpu_val_t tpu_ir_iota(tpu_graph_t* g, tpu_dtype_t dtype, const int64_t* dims,
                      int rank, int dim);

// Elementwise ops: operands must have equal types (no implicit broadcast).
tpu_val_t tpu_ir_unary(tpu_graph_t* g, tpu_ir_op_t op, tpu_val_t x);
tpu_val_t tpu_ir_binary(tpu_graph_t* g, tpu_ir_op_t op, tpu_val_t a,
                        tpu_val_t b);
tpu_val_t tpu_ir_compare(tpu_graph_t* g, tpu_cmp_t cmp, tpu_val_t a,
                         tpu_val_t b);
tpu_val_t tpu_ir_select(tpu_graph_t* g, tpu_val_t pred, tpu_val_t on_true,
                        tpu_val_t on_false);
tpu_val_t tpu_ir_clamp(tpu_graph_t* g, tpu_val_t lo, tpu_val_t x, tpu_val_t hi);
// Elementwise conversion (identity when the dtype already matches).
tpu_val_t tpu_ir_convert(tpu_graph_t* g, tpu_val_t x, tpu_dtype_t dtype);
// Reinterprets bits; `type` follows bitcast_convert's shape rule.
tpu_val_t tpu_ir_bitcast(tpu_graph_t* g, tpu_val_t x, const tpu_type_t* type);

tpu_val_t tpu_ir_reshape(tpu_graph_t* g, tpu_val_t x, const int64_t* dims,
                         int rank);
tpu_val_t tpu_ir_transpose(tpu_graph_t* g, tpu_val_t x, const int64_t* perm);
// result dim bdims[i] comes from operand dim i.
tpu_val_t tpu_ir_broadcast(tpu_graph_t* g, tpu_val_t x, const int64_t* dims,
                           int rank, const int64_t* bdims);
tpu_val_t tpu_ir_slice(tpu_graph_t* g, tpu_val_t x, const int64_t* start,
                       const int64_t* limit, const int64_t* strides);
// Start indices are 0-d integer values (clamped by XLA).
tpu_val_t tpu_ir_dynamic_slice(tpu_graph_t* g, tpu_val_t x,
                               const tpu_val_t* starts, const int64_t* sizes);
tpu_val_t tpu_ir_dynamic_update_slice(tpu_graph_t* g, tpu_val_t x,
                                      tpu_val_t update,
                                      const tpu_val_t* starts);
tpu_val_t tpu_ir_concat(tpu_graph_t* g, const tpu_val_t* xs, int n, int dim);
tpu_val_t tpu_ir_pad(tpu_graph_t* g, tpu_val_t x, tpu_val_t pad_value,
                     const int64_t* lo, const int64_t* hi,
                     const int64_t* interior);
tpu_val_t tpu_ir_reverse(tpu_graph_t* g, tpu_val_t x, const int64_t* dims,
                         int n);

typedef struct tpu_gather_dims {
  int64_t n_offset, n_collapsed, n_start_map, n_operand_batch, n_indices_batch;
  int64_t offset_dims[TPU_MAX_RANK];
  int64_t collapsed_slice_dims[TPU_MAX_RANK];
  int64_t start_index_map[TPU_MAX_RANK];
  int64_t operand_batching_dims[TPU_MAX_RANK];
  int64_t start_indices_batching_dims[TPU_MAX_RANK];
  int64_t index_vector_dim;
} tpu_gather_dims_t;
tpu_val_t tpu_ir_gather(tpu_graph_t* g, tpu_val_t operand, tpu_val_t indices,
                        const tpu_gather_dims_t* dn,
                        const int64_t* slice_sizes);

typedef struct tpu_scatter_dims {
  int64_t n_update_window, n_inserted, n_to_operand, n_input_batch,
      n_indices_batch;
  int64_t update_window_dims[TPU_MAX_RANK];
  int64_t inserted_window_dims[TPU_MAX_RANK];
  int64_t scatter_dims_to_operand_dims[TPU_MAX_RANK];
  int64_t input_batching_dims[TPU_MAX_RANK];
  int64_t scatter_indices_batching_dims[TPU_MAX_RANK];
  int64_t index_vector_dim;
} tpu_scatter_dims_t;
tpu_val_t tpu_ir_scatter(tpu_graph_t* g, tpu_val_t operand, tpu_val_t indices,
                         tpu_val_t updates, const tpu_scatter_dims_t* dn,
                         tpu_body_t body);

// Whether every element of v is known to be the same: a splat constant, or
// a broadcast or conversion of such a value or of a 0-d one.
bool tpu_ir_is_uniform(const tpu_graph_t* g, tpu_val_t v);

// Reduces `x` over `dims` (ascending, distinct) with init value `init` (0-d).
tpu_val_t tpu_ir_reduce(tpu_graph_t* g, tpu_val_t x, tpu_val_t init,
                        const int64_t* dims, int ndims, tpu_body_t body);
// Variadic (value, index) reduce for the ARGMAX/ARGMIN bodies; a two-result node.
tpu_val_t tpu_ir_reduce_arg(tpu_graph_t* g, tpu_val_t x, tpu_val_t index,
                            tpu_val_t init_x, tpu_val_t init_index,
                            int64_t dim, tpu_body_t body);
typedef struct tpu_window {
  int64_t dims[TPU_MAX_RANK];
  int64_t strides[TPU_MAX_RANK];
  int64_t base_dilations[TPU_MAX_RANK];
  int64_t window_dilations[TPU_MAX_RANK];
  int64_t pad_lo[TPU_MAX_RANK], pad_hi[TPU_MAX_RANK];
} tpu_window_t;
tpu_val_t tpu_ir_reduce_window(tpu_graph_t* g, tpu_val_t x, tpu_val_t init,
                               const tpu_window_t* w, tpu_body_t body);
// select_and_scatter with GE selection (max pooling backward) and ADD scatter.
tpu_val_t tpu_ir_select_and_scatter(tpu_graph_t* g, tpu_val_t operand,
                                    tpu_val_t source, tpu_val_t init,
                                    const tpu_window_t* w);

typedef struct tpu_dot_dims {
  int32_t n_batch, n_contract;
  int64_t lhs_batch[TPU_MAX_RANK], rhs_batch[TPU_MAX_RANK];
  int64_t lhs_contract[TPU_MAX_RANK], rhs_contract[TPU_MAX_RANK];
  int64_t precision;  // set by tpu_ir_dot (see tpu_graph_set_precision)
} tpu_dot_dims_t;
// Result: batch dims, lhs free dims, rhs free dims; dtype `out` (the
// accumulation type XLA uses for the result).
tpu_val_t tpu_ir_dot(tpu_graph_t* g, tpu_val_t lhs, tpu_val_t rhs,
                     const tpu_dot_dims_t* dn, tpu_dtype_t out);

typedef struct tpu_conv_attrs {
  int64_t spatial;  // number of spatial dims (1..3)
  int64_t strides[3], pad_lo[3], pad_hi[3], lhs_dilation[3], rhs_dilation[3];
  int64_t feature_groups, batch_groups;
  // Layouts: input/output are [batch, feature, spatial...] and the kernel is
  // [out feature, in feature, spatial...] unless these permutations say
  // otherwise (index of batch/feature and spatial dims).
  int64_t in_batch, in_feature, in_spatial[3];
  int64_t k_out, k_in, k_spatial[3];
  int64_t out_batch, out_feature, out_spatial[3];
  int64_t precision;  // set by tpu_ir_conv (see tpu_graph_set_precision)
} tpu_conv_attrs_t;
void tpu_conv_attrs_default(tpu_conv_attrs_t* a, int spatial);
tpu_val_t tpu_ir_conv(tpu_graph_t* g, tpu_val_t input, tpu_val_t kernel,
                      const tpu_conv_attrs_t* a, tpu_dtype_t out);

// Sorts along `dim` by the first operand; others are permuted alike.
// A node with n results.
tpu_val_t tpu_ir_sort(tpu_graph_t* g, const tpu_val_t* xs, int n, int dim,
                      tpu_sort_order_t order, bool stable);
// Largest k along the last dim: results (values, i32 indices).
tpu_val_t tpu_ir_top_k(tpu_graph_t* g, tpu_val_t x, int64_t k);
// Philox bits of `type` from a ui64[2] state: results (new state, bits).
tpu_val_t tpu_ir_rng_bits(tpu_graph_t* g, tpu_val_t state,
                          const tpu_type_t* type);
// Collectives over `groups` (num_groups x group_size device ids).
tpu_val_t tpu_ir_all_reduce(tpu_graph_t* g, tpu_val_t x, tpu_body_t body,
                            const int64_t* groups, int num_groups,
                            int group_size);
tpu_val_t tpu_ir_all_gather(tpu_graph_t* g, tpu_val_t x, int64_t dim,
                            const int64_t* groups, int num_groups,
                            int group_size);
tpu_val_t tpu_ir_reduce_scatter(tpu_graph_t* g, tpu_val_t x, int64_t dim,
                                tpu_body_t body, const int64_t* groups,
                                int num_groups, int group_size);
tpu_val_t tpu_ir_all_to_all(tpu_graph_t* g, tpu_val_t x, int64_t split_dim,
                            int64_t concat_dim, const int64_t* groups,
                            int num_groups, int group_size);
// stablehlo.fft over the trailing `n` (1..3) dims, of lengths `lengths`.
// FFT/IFFT: complex -> complex. RFFT: real -> complex, the last dim becomes
// lengths[n-1]/2+1. IRFFT: complex (last dim lengths[n-1]/2+1) -> real of
// `lengths`. The inverse transforms include the 1/N factor (XLA's rule).
typedef enum tpu_fft_type {
  TPU_FFT_FFT, TPU_FFT_IFFT, TPU_FFT_RFFT, TPU_FFT_IRFFT
} tpu_fft_type_t;
tpu_val_t tpu_ir_fft(tpu_graph_t* g, tpu_val_t x, tpu_fft_type_t type,
                     const int64_t* lengths, int n);
// Cholesky factor of the (batched) trailing square matrices: lower (L L^H)
// or upper (U^H U); only that triangle of `a` is read. Not positive
// definite gives NaNs (XLA's rule), not an error.
tpu_val_t tpu_ir_cholesky(tpu_graph_t* g, tpu_val_t a, bool lower);
// Solves op(a) x = b (left_side) or x op(a) = b for triangular a (batched
// trailing square matrices; batch dims equal). op is a, a^T or a^H.
typedef enum tpu_transpose {
  TPU_TRANSPOSE_NO, TPU_TRANSPOSE_YES, TPU_TRANSPOSE_ADJOINT
} tpu_transpose_t;
tpu_val_t tpu_ir_triangular_solve(tpu_graph_t* g, tpu_val_t a, tpu_val_t b,
                                  bool left_side, bool lower,
                                  bool unit_diagonal, tpu_transpose_t op);
// LU factorization with partial pivoting of the (batched) trailing m x n
// matrices of float or complex `a`, as LAPACK's getrf: a stablehlo.while
// over the min(m, n) columns (ir/print_loop.c). Gives the packed factors
// (unit lower L below the diagonal, U on and above it; a's type), the
// 1-based pivots (i32, batch x min(m, n)) and the permutation they make
// (i32, batch x m: row r of L U is row perm[r] of a).
void tpu_ir_lu(tpu_graph_t* g, tpu_val_t a, tpu_val_t* lu, tpu_val_t* pivots,
               tpu_val_t* perm);
// The permutation (i32, batch x m) that 1-based pivots (i32, batch x k)
// make of m rows by swapping row i with row pivots[i] - 1 in order. Pivots
// out of [1, m] leave the result unspecified.
tpu_val_t tpu_ir_lu_permutation(tpu_graph_t* g, tpu_val_t pivots, int64_t m);
// Householder QR of the (batched) trailing m x n matrices of float or
// complex `a`, as LAPACK's geqrf (reflectors as its larfg makes them): R on
// and above the diagonal of `packed`, the reflectors' vectors below it (their
// leading 1 implicit), and their scalars `tau` (batch x min(m, n)).
void tpu_ir_qr(tpu_graph_t* g, tpu_val_t a, tpu_val_t* packed, tpu_val_t* tau);
// The first `cols` columns of H_0 H_1 ... H_{k-1} (batch x m x cols), the
// reflectors H_i = I - tau_i v_i v_i^H given as geqrf packs them: v_i below
// the diagonal of column i of `v` (batch x m x n), tau (batch x k), k <= n,
// k <= cols <= m. As LAPACK's orgqr.
tpu_val_t tpu_ir_householder_product(tpu_graph_t* g, tpu_val_t v, tpu_val_t tau, int64_t cols);
// Each matrix of x (batch x n x n, float or complex) squared counts[b]
// times (i32, batch shape; counts < 0 count as 0): a loop of as many steps
// as the largest count.
tpu_val_t tpu_ir_squarings(tpu_graph_t* g, tpu_val_t x, tpu_val_t counts);

// Keeps the values from being moved across this point by XLA.
tpu_val_t tpu_ir_barrier(tpu_graph_t* g, tpu_val_t x);

// Result `index` of a multi-result node.
tpu_val_t tpu_ir_result(tpu_graph_t* g, tpu_val_t node, int index);

//===--- printing ---===//

typedef struct tpu_program_output {
  tpu_val_t value;
  int32_t donor_param;  // parameter whose buffer this output may reuse, or -1
} tpu_program_output_t;

// Prints the module whose @main takes every parameter and returns `outputs`
// in order. Only nodes the outputs depend on are printed. `num_replicas`
// goes into the module attributes (1 for single-device programs).
TPU_MUST_USE tpu_status_t tpu_graph_print(const tpu_graph_t* g,
                                          const tpu_program_output_t* outputs,
                                          int num_outputs, int num_replicas,
                                          char** out_text, size_t* out_size);
// The structural hash of the same program (no printing).
tpu_hash_t tpu_graph_program_hash(const tpu_graph_t* g,
                                  const tpu_program_output_t* outputs,
                                  int num_outputs, int num_replicas);

#endif  // TPU_IR_IR_H_
