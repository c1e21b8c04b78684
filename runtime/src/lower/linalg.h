// Pieces the linear algebra lowerings share (lower_linalg.c defines them;
// lower_lu.c uses them too).
#ifndef TPU_LOWER_LINALG_H_
#define TPU_LOWER_LINALG_H_

#include "lower/lower.h"

// CPU's messages after "<api>: [(Batch element k): ]", {value} the info.
#define TPU_LINALG_NOT_PD                                                         \
  "The factorization could not be completed because the input is not "           \
  "positive-definite (the leading minor of order {value} is not positive-definite)."
#define TPU_LINALG_SINGULAR                                                       \
  "The diagonal element {value} is zero, the inversion could not be completed "   \
  "because the input matrix is singular."

typedef struct tpu_mat_shape {
  int64_t d[TPU_MAX_RANK];
  int rank;  // >= 2: batch dims, then rows, cols
} tpu_mat_shape_t;

// Argument `arg` must have a dtype LAPACK works in (f32, f64, c64, c128);
// others raise CPU's NotImplementedError naming its kernel.
tpu_status_t tpu_linalg_check_lapack_dtype(tpu_lower_ctx_t* cx, int arg, const char* kernel);
// Argument `arg` must be a batch of square matrices (PyTorch's wording).
tpu_status_t tpu_linalg_check_square(tpu_lower_ctx_t* cx, int arg, const char* api,
                                     const char* name);
// The common shape of two matrix batches: broadcast batch dims, each keeping
// its own matrix dims.
tpu_status_t tpu_linalg_batch_broadcast(tpu_lower_ctx_t* cx, int a, int b, tpu_mat_shape_t* sa,
                                        tpu_mat_shape_t* sb);
// A copy of v's type (builders may move the node array); false once the
// graph has failed, when v may be no value.
bool tpu_linalg_type(tpu_graph_t* g, tpu_val_t v, tpu_type_t* out);
// The lower (row >= col) or upper triangle of x's matrices, the rest zero.
tpu_val_t tpu_linalg_triangle(tpu_graph_t* g, tpu_val_t x, bool lower);
// Identity matrices of x's type.
tpu_val_t tpu_linalg_eye_like(tpu_graph_t* g, tpu_val_t x);
// The diagonal of x's matrices (batch x min(rows, cols)), in x's dtype.
tpu_val_t tpu_linalg_diagonal(tpu_graph_t* g, tpu_val_t x);
// A 1-D empty tensor of dtype t (an output PyTorch leaves empty, such as
// lu_unpack's parts it was told not to unpack).
tpu_val_t tpu_linalg_empty(tpu_graph_t* g, tpu_dtype_t t);
// x[.., r0:r1, c0:c1]
tpu_val_t tpu_linalg_block(tpu_graph_t* g, tpu_val_t x, int64_t r0, int64_t r1, int64_t c0,
                           int64_t c1);
// The complex conjugate (x itself when real); x^T and x^H over the matrix
// dims.
tpu_val_t tpu_linalg_conj(tpu_graph_t* g, tpu_val_t x);
tpu_val_t tpu_linalg_transpose(tpu_graph_t* g, tpu_val_t x);
tpu_val_t tpu_linalg_adjoint(tpu_graph_t* g, tpu_val_t x);
// LAPACK-style info over batch x n flags `bad`: 1 + the first bad index
// along the last dim, 0 when none (i32, batch shape).
tpu_val_t tpu_linalg_first_bad(tpu_graph_t* g, tpu_val_t bad);
// Raises CPU's error (LinAlgError) at the next sync when an info (batch
// shape) is nonzero: "<api>: [(Batch element k): ]<what>".
void tpu_linalg_assert_info(tpu_lower_ctx_t* cx, tpu_val_t info, const char* api,
                            const char* what);
// Solves op(a) x = b (left) or x op(a) = b with a triangular: a and b
// already expanded to common batch dims. Empty problems give zeros.
tpu_val_t tpu_linalg_tri_solve(tpu_graph_t* g, tpu_val_t a, tpu_val_t b, bool left, bool lower,
                               bool unit, tpu_transpose_t op);

#endif  // TPU_LOWER_LINALG_H_
