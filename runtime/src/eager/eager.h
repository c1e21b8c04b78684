// Private to the engine: devices, slots, the deferred graph and its flush.
#ifndef TPU_EAGER_EAGER_H_
#define TPU_EAGER_EAGER_H_

#include <stdatomic.h>
#include <threads.h>

#include "base/object.h"
#include "cache/cache.h"
#include "ir/ir.h"
#include "lower/lower.h"
#include "tpu/engine.h"

// The unread device-side checks (by id, increasing) that a value was
// computed from: if one of them failed, the value is wrong. Immutable,
// shared by the slots holding such values.
typedef struct tpu_suspicion {
  tpu_object_t obj;
  int n;
  uint64_t ids[];
} tpu_suspicion_t;

struct tpu_slot {
  tpu_object_t obj;
  int device;
  size_t nbytes;
  // Under the device lock:
  tpu_dtype_t dtype;      // element type of the value (buffer or pending)
  tpu_buffer_t* buffer;   // the materialized value, a 1-D array, or NULL
  tpu_val_t pending;      // its value in the device graph, when
  uint32_t pending_gen;   //   pending_gen is the graph's generation
  tpu_val_t param;        // the buffer's parameter node, when
  uint32_t param_gen;     //   param_gen is the graph's generation
  uint32_t param_epoch;   //   and param_epoch the device's epoch
  // What is known to be wrong with `buffer`: the error that made it wrong,
  // or the checks it was computed from (see checks.c).
  tpu_status_t poison;
  tpu_suspicion_t* suspicion;
};

// A device-side assertion recorded in the current graph.
typedef struct tpu_assert {
  tpu_val_t bad;
  tpu_val_t numbers;  // i64[2] named in the message at "{value}" and "{where}", or NONE
  tpu_status_t status;
} tpu_assert_t;

// An executed graph whose assertions have not been read yet.
typedef struct tpu_pending_check {
  struct tpu_pending_check* next;
  uint64_t id;
  tpu_buffer_t* code;   // i32: 0 ok, k = assertion k-1 failed
  tpu_buffer_t* numbers;  // i64[2]: its "{value}" and "{where}", or NULL
  int num_asserts;
  tpu_status_t* statuses;
} tpu_pending_check_t;

// A check read back as failed.
typedef struct tpu_failed_check {
  uint64_t id;
  tpu_status_t status;
} tpu_failed_check_t;

// A parameter of the graph whose buffer is suspect.
typedef struct tpu_inherited {
  tpu_val_t param;
  tpu_suspicion_t* suspicion;  // retained
} tpu_inherited_t;

// A slot's state before an op rewrote it, to undo a failed op.
typedef struct tpu_undo {
  tpu_slot_t* slot;
  tpu_val_t pending;
  tpu_dtype_t dtype;
} tpu_undo_t;

// Where the graph stood before an op started recording.
typedef struct tpu_mark {
  int32_t nodes;
  int num_params, num_written, num_asserts, num_inherited;
} tpu_mark_t;

// Fused mode's cuts of a loop that records without flush points (loop.c).
typedef struct tpu_loop {
  int* ops;  // the op-table rows recorded since the last flush (-1: a copy)
  int cap;
  int period;  // > 0: the recorded ops repeat `body`, of this many ops
  int* body;
  int cut;     // the graph is cut at this many ops
  bool armed;  // the coming flush is that cut: the period goes on after it
} tpu_loop_t;

// Notes the n-th op since the last flush; true when the graph is to be
// cut now.
bool tpu_loop_record(tpu_loop_t* l, int op, int n);
// After any flush: the period goes on only after its own cut.
void tpu_loop_flushed(tpu_loop_t* l);
void tpu_loop_free(tpu_loop_t* l);

typedef struct tpu_job tpu_job_t;  // background.c

typedef struct tpu_dev {
  mtx_t lock;  // recursive
  int index;
  tpu_graph_t* graph;
  uint32_t gen;
  int num_ops;  // ops recorded since the last flush
  int first_op;  // the first op-table row recorded since the last flush
  int last_op;   // and the last (-1: a copy)
  char first_site[256];  // fused mode: where first_op was called from
  tpu_hash_t ops_hash;  // hash of the rows recorded since the last flush
  tpu_loop_t loop;
  // Graph parameters: the buffer behind each (retained), and whether it
  // holds a number (a Python number, a view's offset: tpu_dev_scalar)
  // rather than a tensor's data.
  tpu_buffer_t** params;
  bool* param_is_number;
  int num_params, params_cap, param_is_number_cap;
  // Slots written in this graph (retained), in order of first write.
  tpu_slot_t** written;
  int num_written, written_cap;
  tpu_assert_t* asserts;
  int num_asserts, asserts_cap;
  // What a failed assertion poisons: the values that ops with assertions
  // wrote, and every value computed from them (all, if `suspects` ran out
  // of memory).
  tpu_val_t* suspects;
  int num_suspects, suspects_cap;
  bool suspect_all;
  tpu_inherited_t* inherited;  // parameters whose buffers are suspect
  int num_inherited, inherited_cap;
  tpu_undo_t* undo;  // rewrites of slots by the op being recorded
  int num_undo, undo_cap;
  uint32_t param_epoch;  // bumped when a rollback drops parameters
  tpu_event_t** inflight;  // completions of recent executions (synchronize)
  uint64_t* inflight_seq;  // their sequence numbers, increasing
  int num_inflight, inflight_cap;
  uint64_t exec_seq;  // sequence number of the last execution
  // Buffers donated to executions that may still run. PJRT blocks the host
  // when a donated buffer is destroyed before its execution ends, so they
  // are released once it has (retained; last_use is that execution).
  tpu_buffer_t** donated;
  int num_donated, donated_cap;
  tpu_pending_check_t* checks;  // oldest first
  tpu_pending_check_t** checks_tail;
  uint64_t next_check_id;      // from 1
  uint64_t checks_read_below;  // every check with a smaller id has been read
  // A failure counts once a sync has raised it: until then ops go on
  // computing from the values it poisons, as they would had it not been
  // read yet, so where an error is raised never depends on timing.
  uint64_t checks_raised_below;
  tpu_failed_check_t* failed;  // the checks read back as failed
  int num_failed, failed_cap;
  // Failures found and not raised yet, oldest first: a sync raises the
  // first (or a failure of its own), the others wait for the next syncs.
  tpu_status_t* unreported;
  int num_unreported, unreported_cap;
  bool unreported_overflow;  // one was not kept since the last sync (logged)
  // Cached 0-d inputs for Python numbers.
  struct tpu_scalar_cache* scalars;
  tpu_job_t* jobs;  // flushes run by the compile thread, oldest first
  tpu_job_t* failed_jobs;  // those that failed to launch, newest first
  tpu_status_t deferred;   // a failed flush that had no caller to raise it
  // Points (point.c): how many were recorded, the latest-recorded one
  // reached so far (what it waited for includes what earlier ones wait
  // for), and the completion callbacks they still expect: an execution's
  // event is ready a moment before its callbacks have run.
  uint64_t points_recorded;
  atomic_uint_least64_t point_reached;
  atomic_int point_callbacks;
} tpu_dev_t;

// The process-wide runtime.
typedef struct tpu_runtime {
  tpu_client_t* client;
  tpu_cache_t* cache;
  int num_devices;
  tpu_dev_t* devices;
  int64_t flush_cap;  // fused mode: flush after this many recorded ops
} tpu_runtime_t;

tpu_runtime_t* tpu_rt(void);  // NULL before a successful tpu_runtime_init
TPU_MUST_USE tpu_status_t tpu_dev_get(int device, tpu_dev_t** out);
void tpu_dev_lock(tpu_dev_t* d);
void tpu_dev_unlock(tpu_dev_t* d);

//===--- recording (lock held) ---===//

// The slot's value as a flat 1-D array of `dtype` (reinterpreting the bits
// when the slot holds another dtype). Poisoned slots fail.
tpu_val_t tpu_dev_slot_value(tpu_dev_t* d, tpu_slot_t* s, tpu_dtype_t dtype);
// A view of a slot as a value of the view's shape.
tpu_val_t tpu_dev_read(tpu_dev_t* d, const tpu_view_t* v);
// Writes `value` (shape of the view, any dtype: converted) into the view.
void tpu_dev_write(tpu_dev_t* d, const tpu_view_t* v, tpu_val_t value);
// A buffer as a graph input.
tpu_val_t tpu_dev_param(tpu_dev_t* d, tpu_buffer_t* b);
// A cached number's buffer as a graph input (tpu_dev_scalar's).
tpu_val_t tpu_dev_number_param(tpu_dev_t* d, tpu_buffer_t* b);
// A number (bits of `dtype`) as a 0-d input, from the device's cache.
tpu_val_t tpu_dev_scalar(tpu_dev_t* d, tpu_dtype_t dtype, const void* bits);
void tpu_dev_assert(tpu_dev_t* d, tpu_val_t bad, tpu_val_t numbers, tpu_status_t status);
// After an op that asserted (since `mark`): the slot values it wrote are
// suspect.
void tpu_dev_suspect_writes(tpu_dev_t* d, const tpu_mark_t* mark);
// Marks the start of an op; rolls a failed op back to its mark.
void tpu_dev_begin(tpu_dev_t* d, tpu_mark_t* mark);
void tpu_dev_rollback(tpu_dev_t* d, const tpu_mark_t* mark);
// Compiles and runs the graph; slots get their new buffers.
TPU_MUST_USE tpu_status_t tpu_dev_flush(tpu_dev_t* d);
// Flushes per the mode after an op (strict/debug: now; fused: at the cap
// or at a loop's cut).
TPU_MUST_USE tpu_status_t tpu_dev_after_op(tpu_dev_t* d, int op);
// Where the op being recorded was called from (the site hook's answer; ""
// without one).
void tpu_call_site(char* buf, size_t size);
// Waits for every execution launched on the device so far.
TPU_MUST_USE tpu_status_t tpu_dev_wait_all(tpu_dev_t* d);
// Waits until the points recorded on the device have had the callbacks
// of the executions that have ended (point.c; any lock may be held).
void tpu_dev_await_points(tpu_dev_t* d);
// "the 3 ops recorded from add to mul" (or one op's name), for errors.
void tpu_dev_describe_ops(const tpu_dev_t* d, char* buf, size_t size);
// The compile event (see the compile hook) of the graph being flushed.
void tpu_dev_compile_event(const tpu_dev_t* d, tpu_hash_t program, tpu_compile_event_t* e);
void tpu_dev_report_program(const tpu_compile_event_t* e);  // to the compile hook
// The program `key` from the compile cache (see tpu_cache_get; `print` NULL:
// from memory only, *exe NULL when it is not there), counted in the metrics.
TPU_MUST_USE tpu_status_t tpu_get_program(tpu_hash_t key, tpu_cache_print_fn print, void* user,
                                          tpu_executable_t** exe, tpu_cache_source_t* source);

//===--- compiling in the background (background.c; lock held) ---===//

// Whether fused mode compiles in the background (TORCHTPU_BACKGROUND_COMPILE).
bool tpu_background_enabled(void);
// Hands the graph being flushed to the compile thread: `exe` (taken) or,
// when NULL, the program keyed `key` from the cache; `results` get promised
// buffers for `outs` and `done` a promised event. The first `num_slots`
// results are to go to `slots`, whose buffers the job keeps until it has
// launched.
TPU_MUST_USE tpu_status_t tpu_dev_launch_later(tpu_dev_t* d, tpu_hash_t key,
                                               tpu_executable_t* exe,
                                               const tpu_program_output_t* outs, int n,
                                               tpu_slot_t* const* slots, int num_slots,
                                               tpu_buffer_t** results, tpu_event_t** done);
// Forgets the device's jobs that the compile thread has run (`wait`: all);
// those that failed to launch wait for tpu_dev_undo_failed_jobs.
void tpu_dev_reap(tpu_dev_t* d, bool wait);
// At a sync: waits for the device's jobs, gives the slots that failed ones
// wrote their values from before them, and returns the oldest failure not
// raised yet, or else that of a flush that tpu_flush_deferred kept; the
// others count as raised (they followed from it).
TPU_MUST_USE tpu_status_t tpu_dev_undo_failed_jobs(tpu_dev_t* d);
// How many references to `buffer` the device's jobs hold.
int tpu_dev_job_holds(const tpu_dev_t* d, const tpu_buffer_t* buffer);
// Runs what is queued and ends the compile thread (at shutdown).
void tpu_background_stop(void);

//===--- device-side checks (checks.c; lock held) ---===//

// Queues the check of an execution that computed `code` and `numbers`
// (NULL: none; takes them and the statuses); returns its id.
uint64_t tpu_dev_add_check(tpu_dev_t* d, tpu_buffer_t* code, tpu_buffer_t* numbers,
                           tpu_status_t* statuses, int num_asserts);
// At a sync: reads the assertion results of executed graphs (waits for
// them) and undoes failed jobs. Returns what the sync raises: `own` (taken),
// the failure of the sync's own work, if any, else the oldest failure found
// and not raised yet. The others wait for the next syncs, one each, except
// those that `own` says again.
TPU_MUST_USE tpu_status_t tpu_dev_check(tpu_dev_t* d, tpu_status_t own);
// Keeps a failure (taken; TPU_OK: none) for the next sync, unless one kept
// says the same.
void tpu_dev_report(tpu_dev_t* d, tpu_status_t s);
// Whether one status is the other, or says it with more in front ("this
// tensor holds the result of a computation that failed: ..."), wherever a
// device-side check that failed came from.
bool tpu_same_failure(tpu_status_t a, tpu_status_t b);
void tpu_dev_drop_checks(tpu_dev_t* d);  // at shutdown
// The error that makes the slot's buffer wrong, or NULL (borrowed).
tpu_status_t tpu_dev_poison(tpu_dev_t* d, tpu_slot_t* s);
// `param` reads the buffer of slot `s`: what it was computed from, so is
// what the graph computes from `param`.
void tpu_dev_inherit(tpu_dev_t* d, tpu_slot_t* s, tpu_val_t param);
// After an execution: the suspicion of each result, from the parameters it
// was computed from and, when `own_check` is non-zero, the graph's own check
// for the values that `own` marks (NULL: all).
void tpu_dev_suspect_results(tpu_dev_t* d, tpu_slot_t* const* slots,
                             const tpu_program_output_t* outs, int n, uint64_t own_check,
                             const bool* own);
// A slot that now holds parameter `param`'s buffer: its suspicion too.
void tpu_dev_suspect_copy(tpu_dev_t* d, tpu_slot_t* s, tpu_val_t param);
void tpu_suspicion_release(tpu_suspicion_t* s);
// Makes room in a growable array of `elem`-byte entries for `need` of them
// (doubling); false when out of memory (the array is unchanged).
bool tpu_dev_grow(void** array, int* cap, int need, size_t elem);
// Replaces the slot's value with a buffer (a host upload).
void tpu_dev_set_buffer(tpu_dev_t* d, tpu_slot_t* s, tpu_buffer_t* b);

// View reads and writes as IR over a flat array of n elements. `offset`:
// a 0-d i64 value holding v->offset, read and written at for a contiguous
// view, or TPU_VAL_NONE (the offset is a constant of the program).
tpu_val_t tpu_view_lower_read(tpu_graph_t* g, tpu_val_t flat,
                              const tpu_view_t* v, tpu_val_t offset);
tpu_val_t tpu_view_lower_write(tpu_graph_t* g, tpu_val_t flat,
                               const tpu_view_t* v, tpu_val_t value, tpu_val_t offset);
bool tpu_view_is_whole(const tpu_view_t* v);  // covers the slot exactly
bool tpu_view_is_contiguous(const tpu_view_t* v);

void tpu_scalar_cache_destroy(struct tpu_scalar_cache* c);

// Metrics (atomic counters).
typedef enum tpu_metric {
  TPU_M_COMPILES, TPU_M_CACHE_HITS, TPU_M_CACHE_MISSES, TPU_M_DISK_HITS,
  TPU_M_EXECUTIONS, TPU_M_HOST_SYNCS, TPU_M_H2D_BYTES, TPU_M_D2H_BYTES,
  TPU_M_H2D_COPIES, TPU_M_D2H_COPIES, TPU_M_FLUSHES, TPU_M_GRAPH_NODES,
  TPU_M_OPS, TPU_M_COMPILE_NS, TPU_M_COUNT
} tpu_metric_t;
void tpu_metric_add(tpu_metric_t m, int64_t n);

#endif  // TPU_EAGER_EAGER_H_
