// The lowering interface: what an op's lowering function sees.
//
// A lowering reads its arguments (in ATen schema order) through the context,
// builds IR nodes into cx->g, and sets cx->outs. It returns an error status
// for bad arguments (with PyTorch's wording where users know it); IR builder
// errors are collected in the graph and reported by the engine.
#ifndef TPU_LOWER_LOWER_H_
#define TPU_LOWER_LOWER_H_

#include "ir/ir.h"
#include "tpu/engine.h"

typedef struct tpu_lower_ctx tpu_lower_ctx_t;
typedef tpu_status_t (*tpu_lower_fn)(tpu_lower_ctx_t* cx);

typedef enum tpu_op_class {
  TPU_CLASS_ELEMENTWISE, TPU_CLASS_REDUCE, TPU_CLASS_MOVEMENT,
  TPU_CLASS_MATMUL, TPU_CLASS_CONV, TPU_CLASS_INDEX, TPU_CLASS_RNG,
  TPU_CLASS_COLLECTIVE, TPU_CLASS_OPAQUE,
} tpu_op_class_t;

// Result dtype rules of elementwise rows.
typedef enum tpu_rule {
  TPU_RULE_SAME,      // the promoted dtype
  TPU_RULE_FLOAT,     // promoted; integers and bool become the default float
  TPU_RULE_BOOL,      // computed in the promoted dtype, result bool
  TPU_RULE_INTEGRAL,  // promoted; only integers and bool accepted
  TPU_RULE_NOT_BOOL,  // promoted; bool rejected
  TPU_RULE_NOT_COMPLEX,
  TPU_RULE_FLOATING,  // promoted; only floating point accepted
  TPU_RULE_INTEGER,   // promoted; only integers accepted (no bool)
} tpu_rule_t;

// Row flags.
enum {
  TPU_F_CAST_CHECK = 1,  // in-place / out=: result must be castable to the
                         // target dtype (TensorIterator's rule)
  TPU_F_OUT_EXACT = 2,   // out=: the target must have the result's dtype
                         // (structured kernels' check; rows without in-place)
  TPU_F_OUT_DISJOINT = 4,  // out=: may not be an input even as a whole (ops
                           // that gather; PyTorch's assert_no_overlap)
  TPU_F_OUT_AS_INPUT = 8,  // with OUT_EXACT: PyTorch words the check as "the
                           // dtype for input and out" (amax, amin)
  TPU_F_REAL_INPLACE = 16,  // in-place on a complex self is refused (abs_:
                            // a real result written back is not what it means)
  TPU_F_INPLACE_DISJOINT = 32,  // in-place: the other tensor inputs may not
                                // share memory with self at all (the ops that
                                // scatter; PyTorch's assert_no_overlap)
  TPU_F_INPUT_LAYOUT = 64,  // new results take the inputs' layout, as an
                            // elementwise row's do (native_dropout: empty_like)
  TPU_F_META_LAYOUT = 128,  // new results take the layout of PyTorch's meta
                            // kernel (the binding reads it: column-major
                            // linalg results, channels-last pooling)
  TPU_F_RECOMPUTE = 256,  // a backward that recomputes what its forward
                          // computed from the same saved inputs (gelu's
                          // erf): those inputs reach it through an
                          // optimization barrier, so that XLA computes the
                          // values again instead of merging them with the
                          // forward's, which would keep them alive from the
                          // forward to the backward of a fused graph
};

typedef struct tpu_op_row {
  const char* name;
  const char* aten;
  tpu_op_class_t cls;
  int flags;
  tpu_lower_fn lower;
  tpu_ir_op_t ir_op;  // one-to-one elementwise rows
  tpu_rule_t rule;
} tpu_op_row_t;

// The parameters made for an op's number arguments, by argument and
// carrier dtype (see tpu_lower_scalar).
typedef struct tpu_arg_param {
  int arg;
  tpu_dtype_t dtype;
  tpu_val_t value;
} tpu_arg_param_t;
typedef struct tpu_arg_params {
  int count;
  tpu_arg_param_t entries[16];
} tpu_arg_params_t;

struct tpu_lower_ctx {
  tpu_graph_t* g;
  const tpu_op_row_t* row;
  const tpu_arg_t* args;
  int num_args;
  tpu_val_t* outs;  // results (in the graph's arena)
  int num_outs, outs_cap;
  struct tpu_dev* dev;  // the engine's device (opaque here)
  const tpu_dtype_t* out_dtypes;  // out= variants: the out tensors' dtypes
  int num_out_dtypes;
  tpu_dtype_t default_float;  // torch.get_default_dtype() (tpu_call_t's)
  tpu_arg_params_t* arg_params;  // NULL: none shared
  uint32_t per_element;  // a foreach element's arguments taken from a list
};

//===--- arguments ---===//

// Argument i, or a NONE argument when i is past the end (optional trailing
// arguments may be absent).
const tpu_arg_t* tpu_arg(const tpu_lower_ctx_t* cx, int i);
bool tpu_arg_present(const tpu_lower_ctx_t* cx, int i);  // not NONE
bool tpu_arg_is_tensor(const tpu_lower_ctx_t* cx, int i);
int64_t tpu_arg_int(const tpu_lower_ctx_t* cx, int i, int64_t dflt);
double tpu_arg_float(const tpu_lower_ctx_t* cx, int i, double dflt);
bool tpu_arg_bool(const tpu_lower_ctx_t* cx, int i, bool dflt);
const char* tpu_arg_string(const tpu_lower_ctx_t* cx, int i, const char* dflt);
tpu_dtype_t tpu_arg_dtype(const tpu_lower_ctx_t* cx, int i, tpu_dtype_t dflt);
// A scalar argument's value as double (int, float, bool, Python number; a
// complex number's real part).
double tpu_arg_number(const tpu_lower_ctx_t* cx, int i, double dflt);
// Whether a scalar argument (dflt when absent) is exactly v; a complex one
// only with no imaginary part. For shortcuts such as "alpha is 1".
bool tpu_arg_number_is(const tpu_lower_ctx_t* cx, int i, double dflt, double v);
// INTS argument: its count and values (0 and NULL when absent).
int tpu_arg_ints(const tpu_lower_ctx_t* cx, int i, const int64_t** out);

// Type information of a tensor or scalar argument.
tpu_dtype_t tpu_arg_value_dtype(const tpu_lower_ctx_t* cx, int i);
int tpu_arg_rank(const tpu_lower_ctx_t* cx, int i);  // 0 for scalars
const int64_t* tpu_arg_sizes(const tpu_lower_ctx_t* cx, int i);

//===--- inputs ---===//

// Tensor argument i as a value (its view read from the slot).
tpu_val_t tpu_lower_tensor(tpu_lower_ctx_t* cx, int i);
// Tensor or scalar argument i as a value of `dtype` (a scalar becomes a 0-d
// input, so a new Python number does not recompile).
tpu_val_t tpu_lower_input(tpu_lower_ctx_t* cx, int i, tpu_dtype_t dtype);
// Argument i as the value an op fills in (fill_, masked_fill, index_fill):
// as tpu_lower_input, but a number that does not fit `dtype` fails as
// PyTorch's Scalar::to<T>() does ("value cannot be converted to type int
// without overflow") instead of wrapping; so does a 0-d tensor's value,
// checked on the device, when `check_tensor` (PyTorch reads it back to
// check it for masked_fill and index_fill, and copies it for fill_).
tpu_val_t tpu_lower_fill_value(tpu_lower_ctx_t* cx, int i, tpu_dtype_t dtype, bool check_tensor);
// False, failing the graph as PyTorch's Scalar::to<T>() does, when argument
// i is a number that does not fit `dtype` (clamp's bounds, add's alpha,
// addcmul's value, fill values); a tensor argument passes.
bool tpu_lower_number_fits(tpu_lower_ctx_t* cx, int i, tpu_dtype_t dtype);
// The same for a count v that an integer `dtype` must hold (randperm's n - 1).
bool tpu_lower_count_fits(tpu_lower_ctx_t* cx, int64_t v, tpu_dtype_t dtype);
// A scalar as a 0-d input of `dtype`. Each use is a parameter of its own
// (the program must not depend on which numbers are equal), except that
// the uses of one argument of the op share one: a foreach op's elements
// take one learning rate, not one per tensor.
tpu_val_t tpu_lower_scalar(tpu_lower_ctx_t* cx, const tpu_scalar_t* s,
                           tpu_dtype_t dtype);
// A number known at the call, as a 0-d input of `dtype`.
tpu_val_t tpu_lower_number(tpu_lower_ctx_t* cx, double value, tpu_dtype_t dtype);
// Small host data as an input (e.g. an RNG state).
tpu_val_t tpu_lower_bytes(tpu_lower_ctx_t* cx, tpu_dtype_t dtype,
                          const int64_t* dims, int rank, const void* data);
// A device-side assertion: when `bad` (a 0-d bool) is true at run time, the
// status (code and message) is raised at the next synchronization.
void tpu_lower_assert(tpu_lower_ctx_t* cx, tpu_val_t bad, tpu_code_t code,
                      const char* fmt, ...) TPU_PRINTF(4, 5);
// The same, naming the offending value and where it is (0-d i64s computed
// with `bad`; `where` may be TPU_VAL_NONE) in the message where it says
// "{value}" and "{where}".
void tpu_lower_assert_value(tpu_lower_ctx_t* cx, tpu_val_t bad, tpu_val_t value,
                            tpu_val_t where, tpu_code_t code, const char* fmt, ...)
    TPU_PRINTF(6, 7);

//===--- helpers ---===//

// PyTorch's result_type over the given tensor/scalar arguments (tiers
// respected; absent arguments skipped).
tpu_dtype_t tpu_lower_result_type(const tpu_lower_ctx_t* cx, const int* args,
                                  int n);
// The dtype PyTorch computes elementwise math in (f32 for f16/bf16).
tpu_dtype_t tpu_opmath(tpu_dtype_t t);
// torch.get_default_dtype() of the call being lowered.
tpu_dtype_t tpu_default_float(const tpu_lower_ctx_t* cx);
// integral/bool -> the default float; others unchanged
tpu_dtype_t tpu_to_float(const tpu_lower_ctx_t* cx, tpu_dtype_t t);

// Broadcasts two shapes (right-aligned); error in PyTorch's words.
TPU_MUST_USE tpu_status_t tpu_broadcast_shapes(const int64_t* a, int ra,
                                               const int64_t* b, int rb,
                                               int64_t* out, int* out_rank);
// The shape the present arguments args[0..n) broadcast to (rank 0 if none).
TPU_MUST_USE tpu_status_t tpu_args_broadcast_shape(const tpu_lower_ctx_t* cx, const int* args,
                                                   int n, int64_t* shape, int* rank);
// Reads the present arguments args[0..n) as values of `dtype`, broadcast to
// their common shape; absent ones give TPU_VAL_NONE.
TPU_MUST_USE tpu_status_t tpu_lower_broadcast_inputs(tpu_lower_ctx_t* cx,
                                                     const int* args, int n,
                                                     tpu_dtype_t dtype,
                                                     tpu_val_t* out);
// The inclusive scan of x along `dim` with a binary op (ADD, MUL) whose
// identity is `identity`.
tpu_val_t tpu_lower_scan(tpu_lower_ctx_t* cx, tpu_val_t x, int dim, tpu_ir_op_t op,
                         double identity);
// The most negative (or positive) value of a dtype: the identity of max (min).
tpu_val_t tpu_lower_extreme(tpu_graph_t* g, tpu_dtype_t t, bool high);
// Broadcasts a value to `dims` (right-aligned, numpy rules).
tpu_val_t tpu_lower_expand(tpu_lower_ctx_t* cx, tpu_val_t v,
                           const int64_t* dims, int rank);
// A dimension index in [-rank, rank) made non-negative; OUT_OF_RANGE error
// in PyTorch's words otherwise. rank 0 accepts -1 and 0.
TPU_MUST_USE tpu_status_t tpu_wrap_dim(int64_t dim, int rank, int64_t* out);
// A scalar constant of `dtype` splatted to the shape of v.
tpu_val_t tpu_lower_const_like(tpu_lower_ctx_t* cx, tpu_val_t v, double value);
// log_softmax of x (already in its compute type) along dim; *max, when not
// NULL, gets the maximum along dim (lower_reduce.c).
tpu_val_t tpu_lower_log_softmax_values(tpu_lower_ctx_t* cx, tpu_val_t x, int64_t dim,
                                       tpu_val_t* max);
// A 0-d value broadcast to the shape of `like`.
tpu_val_t tpu_lower_splat_like(tpu_lower_ctx_t* cx, tpu_val_t scalar, tpu_val_t like);

// a @ b contracting a's last dim with b's dim `batch` (batch dims first, in
// both), accumulating half precision in float; result dtype `out`.
tpu_val_t tpu_lower_matmul_values(tpu_lower_ctx_t* cx, tpu_val_t a, tpu_val_t b,
                                  int batch, tpu_dtype_t out);
// Sets result k (results are numbered from 0 without gaps). TPU_VAL_NONE
// makes result k absent: an undefined tensor, as PyTorch's backward kernels
// return for gradients that output_mask does not ask for.
void tpu_lower_out(tpu_lower_ctx_t* cx, int k, tpu_val_t v);
// The dtype of out= tensor k when the op was called as an out= variant
// (factory ops compute in it), else `dflt`.
tpu_dtype_t tpu_lower_out_dtype(const tpu_lower_ctx_t* cx, int k, tpu_dtype_t dflt);
// Writes `v` (converted to the argument's dtype; same shape) into tensor
// argument i: for arguments an op updates besides its results, such as batch
// norm's running statistics. Later reads of the argument see the new value,
// so write after reading.
void tpu_lower_write_arg(tpu_lower_ctx_t* cx, int i, tpu_val_t v);
// Element j of TENSORS argument i as a value; the list's length.
tpu_val_t tpu_lower_tensor_at(tpu_lower_ctx_t* cx, int i, int j);
int tpu_arg_count(const tpu_lower_ctx_t* cx, int i);
const tpu_view_t* tpu_arg_tensor_at(const tpu_lower_ctx_t* cx, int i, int j);
// Element j of SCALARS argument i (Scalar[]), or NULL.
const tpu_scalar_t* tpu_arg_scalar_at(const tpu_lower_ctx_t* cx, int i, int j);

#define TPU_LOWER_ERROR(code, ...) tpu_status_make((code), __VA_ARGS__)

// PyTorch's name of a dtype ("Float", "Long"), for messages users know.
const char* tpu_dtype_torch_name(tpu_dtype_t t);
// Its C++ spelling ("float", "c10::BFloat16", "long int"), which some
// PyTorch dtype errors use.
const char* tpu_dtype_cpp_name(tpu_dtype_t t);
// Elements of a 1-D x at i64 offsets of rank r (result: the offsets' shape).
tpu_val_t tpu_gather_flat(tpu_graph_t* g, tpu_val_t x, tpu_val_t off, int r);
// Scatters upd (the offsets' shape) into a 1-D x at i64 offsets of rank r;
// out-of-range updates drop.
tpu_val_t tpu_scatter_flat(tpu_graph_t* g, tpu_val_t x, tpu_val_t off, tpu_val_t upd, int r,
                           tpu_body_t body);
// Rows of the 2-D x [R, c] at the i64 indices idx of rank r: idx's shape
// with c appended.
tpu_val_t tpu_gather_rows(tpu_graph_t* g, tpu_val_t x, tpu_val_t idx, int r, int64_t c);
// Scatters upd [A, B] into the 2-D x at (rows[a, b], cols[a, b]) (i64,
// [A, B] each); out-of-range updates drop.
tpu_val_t tpu_scatter_points(tpu_graph_t* g, tpu_val_t x, tpu_val_t rows, tpu_val_t cols,
                             tpu_val_t upd, tpu_body_t body);
// Slices of x (shape d, rank n) along `dim` at the i64 indices idx (1-D, m
// entries): x's shape with dim of size m.
tpu_val_t tpu_gather_along(tpu_graph_t* g, tpu_val_t x, const int64_t* d, int n, int dim,
                           tpu_val_t idx);
// Combines slices of upd (x's shape with dim of size m) into x along `dim`
// at the i64 indices idx (1-D, m entries) with `body`.
tpu_val_t tpu_scatter_along(tpu_graph_t* g, tpu_val_t x, int n, int dim, tpu_val_t idx,
                            tpu_val_t upd, tpu_body_t body);
// The number of elements of a shape.
int64_t tpu_numel(const int64_t* d, int n);
// A shape as "[2, 3, 4]" in buf, for messages; returns buf.
const char* tpu_shape_str(const int64_t* d, int n, char* buf, size_t size);
// Sizes as "2, 3, 4" (with `sep` between them) for messages.
void tpu_dims_str(const int64_t* d, int rank, const char* sep, char* out, size_t size);
// Element j of an output_mask (bool[]) argument i; true when absent.
bool tpu_arg_mask_bit(const tpu_lower_ctx_t* cx, int i, int j);
#define tpu_invalid(...) tpu_status_make(TPU_CODE_INVALID_ARGUMENT, __VA_ARGS__)
// 0, 1, ..., TPU_MAX_RANK - 1: the dimensions of a reduction over all of a
// value's dimensions (its first `rank` entries).
extern const int64_t tpu_all_dims[TPU_MAX_RANK];
// The first element (row-major) of the i64 value x (shape d, rank n) where
// `mask` is true, as a 0-d i64: the value an error message names.
tpu_val_t tpu_lower_first_where(tpu_graph_t* g, tpu_val_t mask, tpu_val_t x, const int64_t* d,
                                int n);
// PyTorch's error for a kernel that has no implementation for a dtype.
#define tpu_not_implemented(kernel, dtype)                                              \
  tpu_status_make(TPU_CODE_UNIMPLEMENTED, "\"%s\" not implemented for '%s'", (kernel), \
                  tpu_dtype_torch_name(dtype))

// The op table, expanded from ops.def.
const tpu_op_row_t* tpu_op_row(int op);

#endif  // TPU_LOWER_LOWER_H_
