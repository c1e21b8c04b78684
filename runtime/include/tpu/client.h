// A PJRT plugin and its client: devices, device buffers, executables.
//
// Ownership: tpu_*_create / compile / from_host hand back one reference owned
// by the caller; release with the matching *_release. Buffers and executables
// retain their client, so the client is destroyed after the last of them.
// The plugin library itself is loaded once per process and never unloaded
// (XLA keeps process-lifetime state in it).
//
// Thread safety: all functions may be called from any thread; a single
// buffer must not be released by one thread while another uses it.
#ifndef TPU_CLIENT_H_
#define TPU_CLIENT_H_

#include "tpu/base.h"
#include "tpu/dtype.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TPU_MAX_RANK 8

typedef struct tpu_client tpu_client_t;
typedef struct tpu_buffer tpu_buffer_t;
typedef struct tpu_executable tpu_executable_t;
typedef struct tpu_event tpu_event_t;
typedef struct tpu_promise tpu_promise_t;

//===--- client ---===//

typedef struct tpu_client_options {
  // A plugin path, or one of "cpu", "cuda", "tpu", or NULL/"auto" (libtpu,
  // then CUDA when a GPU is present, then the CPU plugin). Names are looked
  // up under the directories in TORCHTPU_PLUGIN_PATH (':'-separated, usually
  // Python's site-packages).
  const char* plugin;
  int cpu_devices;  // devices of the CPU plugin; 0 = 1
} tpu_client_options_t;

// Loads the plugin (once per process), checks its API version and creates a
// client. NOT_FOUND when the plugin file does not exist, INVALID_ARGUMENT when
// the file is not a usable PJRT plugin; both name the path.
TPU_MUST_USE tpu_status_t tpu_client_create(const tpu_client_options_t* options,
                                            tpu_client_t** out_client);
void tpu_client_retain(tpu_client_t* client);
void tpu_client_release(tpu_client_t* client);

// True in a process forked while a client existed: the plugin's threads did
// not survive the fork, so every PJRT call fails there with
// tpu_forked_child_error() (FAILED_PRECONDITION, naming the 'spawn' start
// method) instead of waiting for them; releases skip the plugin.
bool tpu_forked_child(void);
TPU_MUST_USE tpu_status_t tpu_forked_child_error(void);

int tpu_client_device_count(const tpu_client_t* client);
const char* tpu_client_platform(const tpu_client_t* client);  // "cpu"
const char* tpu_client_platform_version(const tpu_client_t* client);
const char* tpu_client_plugin_path(const tpu_client_t* client);
const char* tpu_client_device_kind(const tpu_client_t* client, int device);
int tpu_client_api_minor(const tpu_client_t* client);
// The plugin's xla_version and StableHLO version attributes (0 if absent).
int64_t tpu_client_xla_version(const tpu_client_t* client);
void tpu_client_stablehlo_version(const tpu_client_t* client, int64_t out[3]);
// Hash of everything that makes a compiled executable unusable elsewhere:
// plugin path, platform and version, API version, device kind.
tpu_hash_t tpu_client_identity(const tpu_client_t* client);

typedef struct tpu_memory_stats {
  int64_t bytes_in_use;       // device buffers alive that torchtpu created
  int64_t peak_bytes_in_use;  // since the last reset
  int64_t num_allocs, num_frees;         // buffers counted and uncounted, and
  int64_t bytes_allocated, bytes_freed;  //   their bytes, since the last reset
  int64_t buffers, peak_buffers;         // alive now, and at most since the reset
  int64_t bytes_limit;        // from the plugin when it reports one, else 0
  int64_t bytes_cap;          // tpu_client_set_memory_cap's, else 0
  int64_t num_ooms;           // allocations refused: past the cap, or by the plugin
} tpu_memory_stats_t;
void tpu_client_memory_stats(tpu_client_t* client, int device,
                             tpu_memory_stats_t* out_stats);
void tpu_client_reset_peak(tpu_client_t* client, int device);
// Zeroes the counts since the start (allocations, frees, their bytes, OOMs).
void tpu_client_reset_accumulated(tpu_client_t* client, int device);
// Caps what this process may hold on `device` (torch.cuda's memory
// fraction): a transfer or an execution whose new buffers would take
// bytes_in_use past `bytes` fails with RESOURCE_EXHAUSTED before it starts,
// so nothing is lost. 0: no cap (the default).
void tpu_client_set_memory_cap(tpu_client_t* client, int device, int64_t bytes);
// TPU_OK when `bytes` more fit under the device's cap; else the error, and
// an out-of-memory counted.
TPU_MUST_USE tpu_status_t tpu_client_fits(tpu_client_t* client, int device, int64_t bytes);
// Counts an allocation the plugin refused (RESOURCE_EXHAUSTED).
void tpu_client_note_oom(tpu_client_t* client, int device);
// An execution launched with `bytes` of scratch memory: the peak counts it
// on top of the buffers in use, as if it were allocated while it runs.
void tpu_client_note_scratch(tpu_client_t* client, int device, int64_t bytes);

//===--- buffers ---===//

// Copies host data (row-major unless byte_strides is given, one stride per
// dimension) into a new buffer on `device`. The copy is done on return.
TPU_MUST_USE tpu_status_t tpu_buffer_from_host(
    tpu_client_t* client, int device, tpu_dtype_t dtype, const int64_t* dims,
    int rank, const void* data, const int64_t* byte_strides,
    tpu_buffer_t** out_buffer);
// Waits for the buffer and copies all of it, row-major, into dst.
// INVALID_ARGUMENT if dst_size is smaller than the buffer.
TPU_MUST_USE tpu_status_t tpu_buffer_to_host(tpu_buffer_t* buffer, void* dst,
                                             size_t dst_size);
// Waits until the buffer is computed; returns the error that computing it
// raised, if any.
TPU_MUST_USE tpu_status_t tpu_buffer_await(tpu_buffer_t* buffer);
bool tpu_buffer_is_ready(tpu_buffer_t* buffer);
// Copies the buffer to another device of the same client.
TPU_MUST_USE tpu_status_t tpu_buffer_copy_to_device(tpu_buffer_t* buffer,
                                                    int device,
                                                    tpu_buffer_t** out_buffer);
void tpu_buffer_retain(tpu_buffer_t* buffer);
void tpu_buffer_release(tpu_buffer_t* buffer);
int tpu_buffer_refs(const tpu_buffer_t* buffer);
// A tag the caller keeps on a buffer: the sequence number of the last
// execution that reads or writes it (0: none). The runtime uses it to see
// which buffers a running execution still uses.
void tpu_buffer_mark_use(tpu_buffer_t* buffer, uint64_t seq);
uint64_t tpu_buffer_last_use(const tpu_buffer_t* buffer);
// The buffer was donated to an execution: its memory now belongs to an
// output, so it no longer counts as in use (memory_allocated).
void tpu_buffer_mark_donated(tpu_buffer_t* buffer);
// The execution it was donated to never launched: it counts again.
void tpu_buffer_mark_kept(tpu_buffer_t* buffer);
// A promised buffer stops counting in memory_allocated() just before its
// execution launches: the output that the launch makes counts in its place
// and passes its count on when the promise is kept (both counting for a
// moment made the peak of a graph's first run, the one launched by the
// compile thread, its outputs twice). A broken promise's buffers hold no
// memory and stop counting too.
void tpu_buffer_uncount(tpu_buffer_t* buffer);
tpu_dtype_t tpu_buffer_dtype(const tpu_buffer_t* buffer);
int tpu_buffer_rank(const tpu_buffer_t* buffer);
const int64_t* tpu_buffer_dims(const tpu_buffer_t* buffer);
int64_t tpu_buffer_numel(const tpu_buffer_t* buffer);
size_t tpu_buffer_nbytes(const tpu_buffer_t* buffer);
int tpu_buffer_device(const tpu_buffer_t* buffer);

//===--- executables ---===//

// Compiles MLIR text (a StableHLO module whose entry is @main) for
// `num_replicas` devices (1 = one device, runnable on any device). A module
// that does not parse or verify gives INVALID_ARGUMENT with the compiler's
// message.
TPU_MUST_USE tpu_status_t tpu_executable_compile(tpu_client_t* client,
                                                 const char* mlir, size_t size,
                                                 int num_replicas,
                                                 tpu_executable_t** out_exe);
// Runs on `device` (single-replica executables). Outputs are new buffers
// owned by the caller, possibly still being computed. Checks argument count,
// dtypes and shapes before launching. When out_done is not NULL it receives
// an event that completes with the execution (owned by the caller).
// Arguments the program may donate (aliases to outputs) are donated, except
// those whose indices are listed in `keep` (they stay valid; the output gets
// a new buffer).
TPU_MUST_USE tpu_status_t tpu_executable_execute(
    tpu_executable_t* exe, int device, tpu_buffer_t* const* args, int num_args,
    const int64_t* keep, int num_keep, tpu_buffer_t** out_buffers, int num_outputs,
    tpu_event_t** out_done);
// Runs a multi-replica executable once on every replica's device:
// args[r * num_args + i], outs[r * num_outputs + o].
TPU_MUST_USE tpu_status_t tpu_executable_execute_replicated(
    tpu_executable_t* exe, tpu_buffer_t* const* args, int num_args,
    tpu_buffer_t** out_buffers, int num_outputs);
int tpu_executable_num_outputs(const tpu_executable_t* exe);
int tpu_executable_num_replicas(const tpu_executable_t* exe);
// The scratch memory an execution takes while it runs, beyond its
// arguments and outputs (XLA's buffer assignment); 0 if not reported.
int64_t tpu_executable_temp_bytes(const tpu_executable_t* exe);
// Serialized bytes (owned by the caller, free with tpu_free).
TPU_MUST_USE tpu_status_t tpu_executable_serialize(tpu_executable_t* exe,
                                                   char** out_bytes,
                                                   size_t* out_size);
TPU_MUST_USE tpu_status_t tpu_executable_deserialize(
    tpu_client_t* client, const char* bytes, size_t size, int num_replicas,
    tpu_executable_t** out_exe);
void tpu_executable_retain(tpu_executable_t* exe);

//===--- events ---===//

// Waits for the event; returns the error of the work it tracks.
TPU_MUST_USE tpu_status_t tpu_event_await(tpu_event_t* event);
bool tpu_event_is_ready(tpu_event_t* event);
// Calls fn(user, status of the work) once the event is ready: now, or later
// on a thread of the plugin's. fn owns the status.
TPU_MUST_USE tpu_status_t tpu_event_on_ready(tpu_event_t* event,
                                             void (*fn)(void* user, tpu_status_t status),
                                             void* user);
void tpu_event_destroy(tpu_event_t* event);
void tpu_executable_release(tpu_executable_t* exe);

//===--- promises ---===//

// The outputs and completion event of an execution that is launched later
// (its program compiles on another thread). Promised buffers have their
// type now and can be arguments of later executions; what reads them or
// waits for them (to_host, await, events) waits until the promise is
// settled, and a broken promise's buffers and event give its failure.
TPU_MUST_USE tpu_status_t tpu_promise_create(tpu_client_t* client, tpu_promise_t** out);
void tpu_promise_retain(tpu_promise_t* promise);
void tpu_promise_release(tpu_promise_t* promise);
TPU_MUST_USE tpu_status_t tpu_buffer_promised(tpu_promise_t* promise, int device,
                                              tpu_dtype_t dtype, const int64_t* dims,
                                              int rank, tpu_buffer_t** out_buffer);
TPU_MUST_USE tpu_status_t tpu_event_promised(tpu_promise_t* promise, tpu_event_t** out_event);
// Settles the promise (once): kept with the execution's outputs `made`
// (taken: their memory moves into the promised buffers `outs`) and its event
// `done` (taken, may be NULL); or broken with `failure` (taken).
void tpu_promise_settle(tpu_promise_t* promise, tpu_status_t failure, tpu_buffer_t** made,
                        tpu_buffer_t* const* outs, int num_outs, tpu_event_t* done);
// A settled, broken promise's failure (a copy); OK otherwise (never waits).
// `raise`: the caller raises it, so the promised event no longer does.
TPU_MUST_USE tpu_status_t tpu_promise_failure(tpu_promise_t* promise, bool raise);
bool tpu_promise_raised(tpu_promise_t* promise);
// A settled, broken promise's failure for a buffer made by it; OK for any
// other buffer (never waits). The caller raises it: from then on the
// promise's event no longer reports it, so it is raised once.
TPU_MUST_USE tpu_status_t tpu_buffer_failure(tpu_buffer_t* buffer);
// Whether the buffer was made by a settled, broken promise (never waits).
bool tpu_buffer_is_broken(tpu_buffer_t* buffer);

#ifdef __cplusplus
}
#endif
#endif  // TPU_CLIENT_H_
