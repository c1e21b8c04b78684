// Private to src/pjrt: the client struct and the one way to call PJRT.
#ifndef TPU_PJRT_INTERNAL_H_
#define TPU_PJRT_INTERNAL_H_

#include <stdatomic.h>
#include <string.h>
#include <threads.h>

#include "base/object.h"
#include "pjrt/pjrt_abi.h"
#include "tpu/client.h"

enum {
#define PJRT_SLOT_ENUM(name, slot, last, fields) PJRT_SLOT_##name = slot,
  PJRT_FUNCTION_LIST(PJRT_SLOT_ENUM)
#undef PJRT_SLOT_ENUM
};
enum {
#define PJRT_SIZE_ENUM(name, slot, last, fields) \
  PJRT_##name##_SIZE = PJRT_SIZE(PJRT_##name##_Args, last),
  PJRT_FUNCTION_LIST(PJRT_SIZE_ENUM)
#undef PJRT_SIZE_ENUM
};

// Declares a zeroed args struct with its struct_size set.
#define PJRT_ARGS(name, var)   \
  PJRT_##name##_Args var;      \
  memset(&var, 0, sizeof var); \
  var.struct_size = PJRT_##name##_SIZE
// Calls PJRT_<name>(&var) and turns its PJRT_Error into a status.
#define PJRT_CALL(api, name, var) \
  tpu_pjrt_call_((api), PJRT_SLOT_##name, #name, &(var))

TPU_MUST_USE tpu_status_t tpu_pjrt_call_(const PJRT_Api* api, int slot,
                                         const char* name, void* args);
// The only place a PJRT_Error becomes a status (it is destroyed here).
TPU_MUST_USE tpu_status_t tpu_pjrt_status(const PJRT_Api* api,
                                          PJRT_Error* error, const char* what);
bool tpu_pjrt_has(const PJRT_Api* api, int slot);
void tpu_pjrt_event_destroy(const PJRT_Api* api, PJRT_Event* event);
// Awaits and destroys the event; returns its error.
TPU_MUST_USE tpu_status_t tpu_pjrt_event_wait(const PJRT_Api* api,
                                              PJRT_Event* event,
                                              const char* what);

typedef struct tpu_device_info {
  PJRT_Device* handle;
  char* kind;
  atomic_llong bytes_in_use, peak_bytes, num_allocs;
  atomic_llong buffers, peak_buffers, num_frees, bytes_allocated, bytes_freed;
  atomic_llong bytes_cap;  // see tpu_client_set_memory_cap; 0: none
  int64_t capacity;        // what it holds at most (see device_capacity); 0: unknown
  atomic_llong num_ooms;
} tpu_device_info_t;

struct tpu_client {
  tpu_object_t obj;
  const PJRT_Api* api;
  PJRT_Client* handle;
  char* plugin_path;
  char* platform;
  char* platform_version;
  int64_t xla_version;
  int64_t stablehlo_version[3];
  int num_devices;
  tpu_device_info_t* devices;
  tpu_hash_t identity;
};

struct tpu_buffer {
  tpu_object_t obj;
  tpu_client_t* client;
  PJRT_Buffer* handle;
  int device;
  int rank;
  tpu_dtype_t dtype;
  int64_t dims[TPU_MAX_RANK];
  size_t nbytes;
  uint64_t last_use;  // tpu_buffer_mark_use
  bool counted;        // in the device's bytes in use (until destroyed or donated)
  bool donated;        // tpu_buffer_mark_donated
  // A promised buffer's (see tpu_buffer_promised): `handle` is set before
  // the promise is settled, and read only after.
  tpu_promise_t* promise;
};

// A PJRT event with the API that destroys it; or a promised execution's
// (`promise` set, `handle` NULL): its event once the promise is settled.
struct tpu_event {
  const PJRT_Api* api;
  PJRT_Event* handle;
  tpu_promise_t* promise;
};

// Wraps a PJRT buffer the client handed us (takes ownership of `handle`).
TPU_MUST_USE tpu_status_t tpu_buffer_wrap(tpu_client_t* client, int device,
                                          PJRT_Buffer* handle,
                                          tpu_buffer_t** out_buffer);

// Waits until the buffer's promise (if any) is settled; its failure, or OK
// when `handle` may be used.
TPU_MUST_USE tpu_status_t tpu_buffer_settle(tpu_buffer_t* buffer);
// Moves the device memory of `made` (an execution's output, released here)
// into the promised buffer `promised`.
void tpu_buffer_fulfil(tpu_buffer_t* promised, tpu_buffer_t* made);

// Waits until the promise is settled: its failure, or OK and its
// execution's event in *done (owned by the promise; may be NULL).
TPU_MUST_USE tpu_status_t tpu_promise_wait(tpu_promise_t* promise, PJRT_Event** done);
bool tpu_promise_settled(tpu_promise_t* promise);
tpu_client_t* tpu_promise_client(tpu_promise_t* promise);
// Calls fn(user, status) once the promise is settled and its execution
// ended, unless it is settled already (*settled: then the caller does).
TPU_MUST_USE tpu_status_t tpu_promise_on_settled(tpu_promise_t* promise,
                                                 void (*fn)(void* user, tpu_status_t status),
                                                 void* user, bool* settled);

// The plugin's flags from the environment (flags.c): whether the user set
// any, and, before the first client, a check that creating a client with
// them (`args`) does not end the process.
bool tpu_plugin_flags_set(void);
TPU_MUST_USE tpu_status_t tpu_plugin_flags_check(const PJRT_Api* api,
                                                 PJRT_Client_Create_Args* args,
                                                 const char* path);

#endif  // TPU_PJRT_INTERNAL_H_
