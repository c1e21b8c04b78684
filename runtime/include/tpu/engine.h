// The eager engine: storage slots, ops, copies, modes, synchronization.
//
// A storage slot is the device side of one PyTorch storage: a mutable cell
// holding the current immutable value of nbytes bytes, which is a device
// buffer (a flat 1-D array, possibly still being computed), a pending node of
// the device's deferred graph, or nothing yet (uninitialized). A tensor is a
// view of a slot: (dtype, sizes, strides, offset), strides and offset in
// elements of the view's dtype. Reading a view reads the slot's value through
// it; writing a view replaces the slot's value with an updated one, so every
// view of the slot sees the write.
//
// Ops are recorded into the device's graph. In debug mode each op is compiled,
// run and waited for; in strict mode each op runs asynchronously as its own
// cached executable; in fused mode ops accumulate and run together at the
// next flush (a host read, a synchronize, a size cap).
//
// Errors raised on the device (an index out of range) surface at the next
// host synchronization in strict and fused mode, and at the op in debug mode.
// Outputs of a failed computation are poisoned: reading them raises the
// error again until they are overwritten.
//
// Thread safety: every function may be called from any thread; each device
// serializes its own recording.
#ifndef TPU_ENGINE_H_
#define TPU_ENGINE_H_

#include "tpu/base.h"
#include "tpu/client.h"
#include "tpu/dtype.h"

#ifdef __cplusplus
extern "C" {
#endif

//===--- runtime ---===//

typedef enum tpu_mode {
  TPU_MODE_DEBUG = 0,
  TPU_MODE_STRICT = 1,
  TPU_MODE_FUSED = 2,
} tpu_mode_t;

// Creates the process-wide client from TORCHTPU_PLUGIN, TORCHTPU_PLUGIN_PATH,
// TORCHTPU_CPU_DEVICES and TORCHTPU_MODE. Idempotent; the first error is
// remembered and returned again.
TPU_MUST_USE tpu_status_t tpu_runtime_init(void);
// The client (borrowed), or NULL before a successful init.
tpu_client_t* tpu_runtime_client(void);
int tpu_device_count(void);  // 0 before a successful init

// The mode of the calling thread (a thread starts in the process default).
tpu_mode_t tpu_mode_get(void);
void tpu_mode_set(tpu_mode_t mode);  // for the calling thread
// The calling thread's own mode, or -1 when it follows the default; give
// either back to tpu_mode_restore.
int tpu_mode_thread(void);
void tpu_mode_restore(int thread_mode);
void tpu_mode_set_default(tpu_mode_t mode);  // for threads without their own
const char* tpu_mode_name(tpu_mode_t mode);

//===--- slots ---===//

typedef struct tpu_slot tpu_slot_t;

TPU_MUST_USE tpu_status_t tpu_slot_create(int device, size_t nbytes,
                                          tpu_slot_t** out_slot);
void tpu_slot_retain(tpu_slot_t* slot);
void tpu_slot_release(tpu_slot_t* slot);
size_t tpu_slot_nbytes(const tpu_slot_t* slot);
int tpu_slot_device(const tpu_slot_t* slot);
// Grows or shrinks the slot, keeping the first min(old, new) bytes.
TPU_MUST_USE tpu_status_t tpu_slot_resize(tpu_slot_t* slot, size_t nbytes);

typedef struct tpu_view {
  tpu_slot_t* slot;  // borrowed
  tpu_dtype_t dtype;
  int32_t rank;
  int64_t sizes[TPU_MAX_RANK];
  int64_t strides[TPU_MAX_RANK];
  int64_t offset;
} tpu_view_t;

int64_t tpu_view_numel(const tpu_view_t* v);
// A contiguous view of `rank` dims over the start of `slot`.
tpu_view_t tpu_view_contiguous(tpu_slot_t* slot, tpu_dtype_t dtype,
                               const int64_t* sizes, int rank);

//===--- copies and synchronization ---===//

// Host data (dense row-major in the view's shape and dtype) into a view.
TPU_MUST_USE tpu_status_t tpu_copy_from_host(const tpu_view_t* dst,
                                             const void* data);
// A view into host memory (dense row-major), waiting for the value.
TPU_MUST_USE tpu_status_t tpu_copy_to_host(const tpu_view_t* src, void* data,
                                           size_t size);
// Device to device (same or another device), converting dtypes.
TPU_MUST_USE tpu_status_t tpu_copy(const tpu_view_t* dst,
                                   const tpu_view_t* src);
// Runs everything recorded on the device, waits for it, and raises any
// pending device-side error. device -1 = all devices.
TPU_MUST_USE tpu_status_t tpu_synchronize(int device);
// Runs what is recorded without waiting (fused mode flush point).
TPU_MUST_USE tpu_status_t tpu_flush(int device);
// A flush point with no caller to raise to (the end of a backward pass):
// a failure is raised by the next tpu_wait_launches or sync instead.
void tpu_flush_deferred(int device);
// Waits until what the device flushed has launched (fused mode compiles in
// the background) and returns the first failure to launch not raised yet.
// A graph that failed to launch changed nothing: the tensors it overwrote
// read as before it; those it made hold its error.
TPU_MUST_USE tpu_status_t tpu_wait_launches(int device);
// Waits for everything launched on every device to end, launching nothing
// recorded and raising nothing. At exit: XLA's CPU plugin frees its JIT
// code in static destructors, under a program still running it.
void tpu_quiesce(void);

//===--- points in a device's work (what a torch Event records) ---===//

// A point is reached once every execution launched on its device before it
// has ended; it keeps the time that happened.
typedef struct tpu_point tpu_point_t;

// Launches what is recorded on `device` (a failed launch poisons what it
// wrote, as at any flush) and marks the end of the work launched so far.
TPU_MUST_USE tpu_status_t tpu_point_record(int device, tpu_point_t** out_point);
bool tpu_point_reached(tpu_point_t* point);
// Waits until the point is reached; returns the first error of the
// executions before it.
TPU_MUST_USE tpu_status_t tpu_point_wait(tpu_point_t* point);
// Milliseconds from reaching `start` to reaching `end` (both reached,
// `start` first; never negative).
double tpu_point_elapsed_ms(tpu_point_t* start, tpu_point_t* end);
void tpu_point_release(tpu_point_t* point);

//===--- ops ---===//

typedef enum tpu_arg_kind {
  TPU_ARG_NONE,     // an omitted optional
  TPU_ARG_TENSOR,   // a tpu tensor
  TPU_ARG_TENSORS,  // a list of tpu tensors (entries may be NULL)
  TPU_ARG_SCALAR,   // a number: Python scalar or a CPU 0-d tensor
  TPU_ARG_INT,
  TPU_ARG_INTS,
  TPU_ARG_FLOAT,
  TPU_ARG_FLOATS,
  TPU_ARG_BOOL,
  TPU_ARG_BOOLS,
  TPU_ARG_STRING,
  TPU_ARG_DTYPE,
  TPU_ARG_RNG,      // a generator's (seed, counter) for this call
  TPU_ARG_SCALARS,  // a list of numbers (Scalar[]), each with its own dtype
} tpu_arg_kind_t;

// How a number takes part in type promotion (PyTorch's three tiers).
typedef enum tpu_tier {
  TPU_TIER_DIM = 0,      // a tensor with at least one dimension
  TPU_TIER_ZERO = 1,     // a 0-d tensor
  TPU_TIER_WRAPPED = 2,  // a Python number
} tpu_tier_t;

typedef struct tpu_scalar {
  tpu_dtype_t dtype;  // BOOL, I64, F64 or C128 for Python numbers; any for
                      // a CPU 0-d tensor
  tpu_tier_t tier;
  union {
    bool b;
    int64_t i;
    double f;
    double c[2];
  };
} tpu_scalar_t;

typedef struct tpu_arg {
  tpu_arg_kind_t kind;
  int32_t count;  // TENSORS, INTS, FLOATS, BOOLS, SCALARS
  union {
    const tpu_view_t* tensor;
    const tpu_view_t* const* tensors;
    tpu_scalar_t scalar;
    int64_t i;
    double f;
    bool b;
    const char* s;
    tpu_dtype_t dtype;
    const int64_t* ints;
    const double* floats;
    const bool* bools;
    const tpu_scalar_t* scalars;
    uint64_t rng[2];
  };
} tpu_arg_t;

// The type of one result of an op.
typedef struct tpu_result_type {
  tpu_dtype_t dtype;
  int32_t rank;
  int64_t sizes[TPU_MAX_RANK];
} tpu_result_type_t;

// Called once the results' types are known; fills targets[0..count) with the
// views to write (new tensors for a functional call, the out= or self tensors
// otherwise; a view with a NULL slot drops that result). An absent result
// (an undefined tensor, e.g. a gradient output_mask leaves out) has dtype
// TPU_DTYPE_INVALID and is never written. It runs with the
// device's recording lock held and must not call back into the engine, except
// to create slots.
typedef tpu_status_t (*tpu_prepare_fn)(void* user, int count,
                                       const tpu_result_type_t* types,
                                       tpu_view_t* targets);

typedef enum tpu_write_mode {
  TPU_WRITE_NEW = 0,   // targets are fresh tensors of the result types
  TPU_WRITE_INTO = 1,  // in-place / out=: check shapes, cast if allowed
} tpu_write_mode_t;

// One call of an op-table row.
typedef struct tpu_call {
  int op;      // an index into the op table
  int device;  // where it runs; -1 = the device of its tensor arguments (all
               // must be on it). Factory ops without tensor arguments pass it.
  const tpu_arg_t* args;
  int num_args;
  tpu_write_mode_t mode;
  // out= variants: the out tensors' dtypes (factory lowerings compute in
  // them: arange.start_out's length and values depend on the dtype it
  // writes, and no argument names it). NULL otherwise.
  const tpu_dtype_t* out_dtypes;
  int num_out_dtypes;
  tpu_prepare_fn prepare;  // provides the targets of the results
  void* user;
  tpu_precision_t precision;  // of the op's float32 products
  // torch.get_default_dtype(): the dtype of Python floats in promotion and
  // of an integer op's float result (int_tensor / 2, sqrt(int_tensor)). A
  // dtype that is not a float (0, in callers that leave it out) means F32.
  tpu_dtype_t default_float;
} tpu_call_t;

// Runs the call's op and writes its results into the targets `prepare`
// provides.
TPU_MUST_USE tpu_status_t tpu_op_call(const tpu_call_t* call);

// The op table (runtime/src/lower/ops.def).
int tpu_op_count(void);
const char* tpu_op_name(int op);       // "add"
const char* tpu_op_aten(int op);       // "add.Tensor add.Scalar"
int tpu_op_lookup(const char* name);   // -1 if none
// Whether the op draws random numbers (its row's class is RNG). Such an op
// whose schema has no Generator (native_dropout) gets the default
// generator's state as an extra, last, TPU_ARG_RNG argument.
bool tpu_op_is_random(int op);
// Whether an out= tensor of the op may not be one of its inputs, even as a
// whole (the ops that gather).
bool tpu_op_out_disjoint(int op);
// Whether the op is elementwise: as PyTorch's TensorIterator gives it, a
// new result takes the layout of its inputs (x.t() + 1 is laid out as x.t()).
bool tpu_op_is_elementwise(int op);
// Whether a new result of the op takes the layout of its inputs: the
// elementwise ops, and a few others as PyTorch lays theirs out.
bool tpu_op_has_input_layout(int op);
// Whether a new result of the op takes the layout PyTorch's meta kernel
// gives it: linalg's column-major matrices, fft's transformed dims
// innermost, pooling's, normalization's and resampling's channels-last.
bool tpu_op_has_meta_layout(int op);
// What the in-place form of the op allows between the tensor it writes and
// its other tensor inputs, as PyTorch checks it before running.
typedef enum tpu_overlap {
  TPU_OVERLAP_ANY,    // not checked (fill_ reads its value first)
  TPU_OVERLAP_WHOLE,  // the same elements or none; a partial overlap is
                      // refused (TensorIterator's ops: x[1:].add_(x[:-1]))
  TPU_OVERLAP_NONE,   // none (the ops that scatter: x[:2].index_add_(0, i, x[:2]))
} tpu_overlap_t;
tpu_overlap_t tpu_op_inplace_overlap(int op);

// Result dtype of PyTorch's type promotion over the given operands.
tpu_dtype_t tpu_promote_types(tpu_dtype_t a, tpu_dtype_t b);
bool tpu_dtype_can_cast(tpu_dtype_t from, tpu_dtype_t to);

//===--- compile events (recompile diagnostics) ---===//

typedef struct tpu_compile_event {
  int device;
  int first_op, num_ops;  // op-table rows recorded into the compiled graph
  tpu_hash_t ops_hash;    // the sequence of rows
  tpu_hash_t inputs_hash; // dtypes and shapes of the program's tensor inputs
  int tensor_inputs;      // how many
  tpu_hash_t numbers_hash; // how many numbers (0-d) it takes as inputs, and their dtypes
  tpu_hash_t program_hash;
  bool from_disk;  // loaded from the disk cache rather than compiled
  int64_t step;    // training steps taken when the graph was flushed (tpu_step_mark)
  int64_t reads;   // host reads and synchronizes before it: a loop that does not
                   // train reads its results, which mark its iterations
  int64_t hits;    // programs found in the memory cache before it
  // Fused mode: where the graph's first op was called from (see the site
  // hook); "" when the graph ran at its op (the caller's frame is the op's).
  const char* first_site;
} tpu_compile_event_t;

// Called for every program new to this process (compiled, or loaded from
// the disk cache), on the thread that needed it, with the device lock held:
// it must not call the engine. (A program compiled in the background is
// reported at that thread's next flush or synchronize after it.)
typedef void (*tpu_compile_hook_fn)(void* user, const tpu_compile_event_t* e);
void tpu_set_compile_hook(tpu_compile_hook_fn hook, void* user);
// Waits for the programs being compiled in the background (fused mode) and
// reports them to the compile hook.
void tpu_wait_compiles(void);
// Training steps (optimizer steps) taken, for compile events.
void tpu_step_mark(void);
int64_t tpu_steps_taken(void);
void tpu_steps_reset(void);

//===--- call sites (device-side error messages) ---===//

// Writes where the op being recorded was called from ("train.py:12 in
// step", NUL-terminated, at most `size` bytes) into `buf`, for the message
// of a device-side check the op records. Called with the device lock held:
// it must not call the engine.
typedef void (*tpu_site_hook_fn)(void* user, char* buf, size_t size);
void tpu_set_site_hook(tpu_site_hook_fn hook, void* user);

//===--- metrics ---===//

typedef struct tpu_metrics {
  int64_t compiles, cache_hits, cache_misses, disk_hits, executions;
  int64_t host_syncs, h2d_bytes, d2h_bytes, h2d_copies, d2h_copies;
  int64_t flushes, graph_nodes, ops_recorded;
  double compile_seconds;
} tpu_metrics_t;

void tpu_metrics_get(tpu_metrics_t* out_metrics);
void tpu_metrics_reset(void);
// Counts a CPU fallback of an operator (e.g. "aten::lerp.Scalar").
void tpu_metrics_fallback(const char* op);
// The fallbacks counted so far: fills up to `max` names (valid until the next
// reset) and counts; returns how many distinct operators fell back.
int tpu_metrics_fallbacks(const char** out_names, int64_t* out_counts, int max);

#ifdef __cplusplus
}
#endif
#endif  // TPU_ENGINE_H_
