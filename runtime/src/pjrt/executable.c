// Compiling StableHLO text, executing, serializing.
#include <stdio.h>
#include <stdlib.h>

#include "pjrt/pjrt_internal.h"

typedef struct param_type {
  tpu_dtype_t dtype;
  int rank;
  int64_t dims[TPU_MAX_RANK];
} param_type_t;

struct tpu_executable {
  tpu_object_t obj;
  tpu_client_t* client;
  PJRT_LoadedExecutable* handle;
  int num_replicas;
  int num_outputs;
  int num_params;  // -1 when the signature could not be read
  param_type_t* params;
  int64_t temp_bytes;  // scratch memory an execution takes; 0: not reported
};

//===--- compile options: a hand-encoded CompileOptionsProto ---===//

// executable_build_options {num_replicas: R, num_partitions: 1}, and
// compile_portable_executable for one replica, so that one executable runs
// on any device (chosen at execute time).
static size_t encode_options(int num_replicas, unsigned char* out) {
  size_t n = 0;
  unsigned char inner[16];
  size_t m = 0;
  inner[m++] = 0x20;  // field 4 num_replicas, varint
  for (uint64_t v = (uint64_t)num_replicas;; v >>= 7) {
    inner[m++] = (unsigned char)((v & 0x7f) | (v > 0x7f ? 0x80 : 0));
    if (v <= 0x7f) break;
  }
  inner[m++] = 0x28;  // field 5 num_partitions = 1
  inner[m++] = 0x01;
  out[n++] = 0x1a;  // field 3 executable_build_options, length-delimited
  out[n++] = (unsigned char)m;
  memcpy(out + n, inner, m);
  n += m;
  if (num_replicas == 1) {
    out[n++] = 0x20;  // field 4 compile_portable_executable = true
    out[n++] = 0x01;
  }
  return n;
}

//===--- reading the @main signature, to check execute arguments ---===//

static tpu_dtype_t dtype_from_mlir(const char* s, size_t n) {
  for (int t = 0; t < TPU_DTYPE_COUNT; ++t) {
    const char* m = tpu_dtype_mlir((tpu_dtype_t)t);
    if (strlen(m) == n && !memcmp(m, s, n)) return (tpu_dtype_t)t;
  }
  return TPU_DTYPE_INVALID;
}

// Parses "tensor<2x3xf32>" at *p; advances past it.
static bool parse_tensor_type(const char** p, param_type_t* t) {
  const char* s = *p;
  if (strncmp(s, "tensor<", 7)) return false;
  s += 7;
  t->rank = 0;
  while (*s >= '0' && *s <= '9') {
    if (t->rank == TPU_MAX_RANK) return false;
    char* end;
    t->dims[t->rank++] = strtoll(s, &end, 10);
    if (*end != 'x') return false;
    s = end + 1;
  }
  const char* start = s;
  int depth = 1;
  while (*s && depth) {
    if (*s == '<') ++depth;
    if (*s == '>') --depth;
    ++s;
  }
  if (depth) return false;
  t->dtype = dtype_from_mlir(start, (size_t)(s - 1 - start));
  *p = s;
  return t->dtype != TPU_DTYPE_INVALID;
}

static void skip_braces(const char** p) {
  const char* s = *p;
  while (*s == ' ' || *s == '\n') ++s;
  if (*s == '{') {
    int depth = 0;
    do {
      if (*s == '{') ++depth;
      if (*s == '}') --depth;
      ++s;
    } while (*s && depth);
  }
  *p = s;
}

static void read_signature(tpu_executable_t* e, const char* mlir) {
  e->num_params = -1;
  const char* s = strstr(mlir, "@main(");
  if (!s) return;
  s += 6;
  int cap = 8, n = 0;
  param_type_t* params = tpu_malloc(sizeof *params * (size_t)cap);
  while (params) {
    while (*s == ' ' || *s == '\n' || *s == ',') ++s;
    if (*s == ')') {
      e->params = params;
      e->num_params = n;
      return;
    }
    if (*s != '%') break;
    while (*s && *s != ':') ++s;
    if (!*s) break;
    ++s;
    while (*s == ' ') ++s;
    if (n == cap) {
      param_type_t* grown = tpu_realloc(params, sizeof *params * (size_t)(cap *= 2));
      if (!grown) break;
      params = grown;
    }
    if (!parse_tensor_type(&s, &params[n++])) break;
    skip_braces(&s);
  }
  tpu_free(params);  // unreadable signature: arguments are not pre-checked
}

//===--- executables ---===//

static void executable_destroy(void* self) {
  tpu_executable_t* e = self;
  if (e->handle) {
    PJRT_ARGS(LoadedExecutable_Destroy, a);
    a.executable = e->handle;
    tpu_status_ignore(PJRT_CALL(e->client->api, LoadedExecutable_Destroy, a));
  }
  tpu_free(e->params);
  tpu_client_release(e->client);
  tpu_free(e);
}

// Its number of outputs, and the scratch memory XLA's buffer assignment
// gives it (optional in the ABI).
static tpu_status_t query_executable(tpu_executable_t* e) {
  const PJRT_Api* api = e->client->api;
  PJRT_ARGS(LoadedExecutable_GetExecutable, g);
  g.loaded_executable = e->handle;
  TPU_RETURN_IF_ERROR(PJRT_CALL(api, LoadedExecutable_GetExecutable, g));
  PJRT_ARGS(Executable_NumOutputs, no);
  no.executable = g.executable;
  tpu_status_t s = PJRT_CALL(api, Executable_NumOutputs, no);
  e->num_outputs = (int)no.num_outputs;
  if (!s && tpu_pjrt_has(api, PJRT_SLOT_Executable_GetCompiledMemoryStats)) {
    PJRT_ARGS(Executable_GetCompiledMemoryStats, ms);
    ms.executable = g.executable;
    tpu_status_t stats = PJRT_CALL(api, Executable_GetCompiledMemoryStats, ms);
    if (!stats && ms.temp_size_in_bytes > 0) e->temp_bytes = ms.temp_size_in_bytes;
    tpu_status_free(stats);
  }
  PJRT_ARGS(Executable_Destroy, d);
  d.executable = g.executable;
  tpu_status_ignore(PJRT_CALL(api, Executable_Destroy, d));
  return s;
}

static tpu_status_t wrap_loaded(tpu_client_t* c, PJRT_LoadedExecutable* h,
                                int num_replicas, const char* mlir,
                                tpu_executable_t** out) {
  tpu_executable_t* e = tpu_calloc(1, sizeof *e);
  if (!e) {
    PJRT_ARGS(LoadedExecutable_Destroy, a);
    a.executable = h;
    tpu_status_ignore(PJRT_CALL(c->api, LoadedExecutable_Destroy, a));
    return tpu_status_make(TPU_CODE_RESOURCE_EXHAUSTED, "out of memory");
  }
  tpu_object_init(&e->obj, executable_destroy);
  tpu_client_retain(c);
  e->client = c;
  e->handle = h;
  e->num_replicas = num_replicas;
  e->num_params = -1;
  if (mlir) read_signature(e, mlir);
  tpu_status_t s = query_executable(e);
  if (s) {
    tpu_executable_release(e);
    return s;
  }
  *out = e;
  return TPU_OK;
}

tpu_status_t tpu_executable_compile(tpu_client_t* c, const char* mlir,
                                    size_t size, int num_replicas,
                                    tpu_executable_t** out) {
  *out = NULL;
  if (num_replicas < 1 || num_replicas > c->num_devices)
    return tpu_status_make(TPU_CODE_INVALID_ARGUMENT,
                           "%d replicas requested, %d devices available",
                           num_replicas, c->num_devices);
  unsigned char options[32];
  size_t options_size = encode_options(num_replicas, options);
  PJRT_Program program;
  memset(&program, 0, sizeof program);
  program.struct_size = PJRT_SIZE(PJRT_Program, format_size);
  program.code = (char*)mlir;
  program.code_size = size;
  program.format = "mlir";
  program.format_size = 4;
  PJRT_ARGS(Client_Compile, a);
  a.client = c->handle;
  a.program = &program;
  a.compile_options = (const char*)options;
  a.compile_options_size = options_size;
  tpu_status_t s = PJRT_CALL(c->api, Client_Compile, a);
  if (s) {
    // A program the compiler rejects is the caller's input, not our bug.
    if (tpu_status_code(s) == TPU_CODE_UNKNOWN ||
        tpu_status_code(s) == TPU_CODE_INTERNAL) {
      tpu_status_t t = tpu_status_make(TPU_CODE_INVALID_ARGUMENT, "%s",
                                       tpu_status_message(s));
      tpu_status_free(s);
      s = t;
    }
    return s;
  }
  return wrap_loaded(c, a.executable, num_replicas, mlir, out);
}

static tpu_status_t check_args(const tpu_executable_t* e, int device,
                               tpu_buffer_t* const* args, int num_args) {
  if (e->num_params >= 0 && num_args != e->num_params)
    return tpu_status_make(TPU_CODE_INVALID_ARGUMENT,
                           "executable takes %d arguments, %d given",
                           e->num_params, num_args);
  for (int i = 0; i < num_args; ++i) {
    const tpu_buffer_t* b = args[i];
    if (!b)
      return tpu_status_make(TPU_CODE_INVALID_ARGUMENT, "argument %d is null", i);
    if (b->device != device)
      return tpu_status_make(TPU_CODE_INVALID_ARGUMENT,
                             "argument %d is on device %d, execution on %d", i,
                             b->device, device);
    if (e->num_params < 0) continue;
    const param_type_t* p = &e->params[i];
    bool same = p->dtype == b->dtype && p->rank == b->rank;
    for (int d = 0; same && d < p->rank; ++d) same = p->dims[d] == b->dims[d];
    if (!same)
      return tpu_status_make(TPU_CODE_INVALID_ARGUMENT,
                             "argument %d has dtype %s and rank %d; the "
                             "executable expects %s and rank %d", i,
                             tpu_dtype_name(b->dtype), b->rank,
                             tpu_dtype_name(p->dtype), p->rank);
  }
  return TPU_OK;
}

enum { STACK_ARGS = 64 };

tpu_status_t tpu_event_promised(tpu_promise_t* p, tpu_event_t** out) {
  *out = tpu_calloc(1, sizeof **out);
  if (!*out) return tpu_status_make(TPU_CODE_RESOURCE_EXHAUSTED, "out of memory");
  (*out)->api = tpu_promise_client(p)->api;
  tpu_promise_retain(p);
  (*out)->promise = p;
  return TPU_OK;
}

// The PJRT event behind `e` (NULL: nothing to wait for); waits for a
// promised execution's launch. A broken promise's failure is the event's
// until a read of one of its buffers has raised it.
static tpu_status_t event_handle(tpu_event_t* e, PJRT_Event** handle) {
  *handle = e->handle;
  if (!e->promise) return TPU_OK;
  tpu_status_t s = tpu_promise_wait(e->promise, handle);
  if (s && tpu_promise_raised(e->promise)) {
    tpu_status_free(s);
    s = TPU_OK;
  }
  return s;
}

tpu_status_t tpu_event_await(tpu_event_t* e) {
  PJRT_ARGS(Event_Await, a);
  TPU_RETURN_IF_ERROR(event_handle(e, &a.event));
  return a.event ? PJRT_CALL(e->api, Event_Await, a) : TPU_OK;
}

bool tpu_event_is_ready(tpu_event_t* e) {
  if (e->promise && !tpu_promise_settled(e->promise)) return false;
  PJRT_ARGS(Event_IsReady, a);
  tpu_status_t f = event_handle(e, &a.event);
  if (f || !a.event) {
    tpu_status_free(f);
    return true;
  }
  tpu_status_t s = PJRT_CALL(e->api, Event_IsReady, a);
  bool ready = s ? true : a.is_ready;
  tpu_status_free(s);
  return ready;
}

typedef struct on_ready {
  const PJRT_Api* api;
  void (*fn)(void* user, tpu_status_t status);
  void* user;
} on_ready_t;

static void call_on_ready(PJRT_Error* error, void* arg) {
  on_ready_t* r = arg;
  r->fn(r->user, tpu_pjrt_status(r->api, error, "execution"));
  tpu_free(r);
}

tpu_status_t tpu_event_on_ready(tpu_event_t* e, void (*fn)(void*, tpu_status_t), void* user) {
  if (e->promise) {  // settling it calls fn, or it is settled and the rest applies
    bool settled;
    TPU_RETURN_IF_ERROR(tpu_promise_on_settled(e->promise, fn, user, &settled));
    if (!settled) return TPU_OK;
    tpu_event_t launched = {e->api, NULL, NULL};
    tpu_status_t f = event_handle(e, &launched.handle);
    if (f || !launched.handle) {
      fn(user, f);
      return TPU_OK;
    }
    return tpu_event_on_ready(&launched, fn, user);
  }
  on_ready_t* r = tpu_malloc(sizeof *r);
  if (!r) return tpu_status_make(TPU_CODE_RESOURCE_EXHAUSTED, "out of memory");
  *r = (on_ready_t){e->api, fn, user};
  PJRT_ARGS(Event_OnReady, a);
  a.event = e->handle;
  a.callback = call_on_ready;
  a.user_arg = r;
  tpu_status_t s = PJRT_CALL(e->api, Event_OnReady, a);
  if (s) tpu_free(r);
  return s;
}

void tpu_event_destroy(tpu_event_t* e) {
  if (!e) return;
  tpu_pjrt_event_destroy(e->api, e->handle);
  tpu_promise_release(e->promise);
  tpu_free(e);
}

static tpu_status_t execute(tpu_executable_t* e, PJRT_Device* device,
                            int num_devices, tpu_buffer_t* const* args,
                            int num_args, const int64_t* keep, int num_keep,
                            tpu_buffer_t** outs, int num_outputs,
                            const int* devices, tpu_event_t** out_done) {
  const PJRT_Api* api = e->client->api;
  int total_in = num_devices * num_args, total_out = num_devices * num_outputs;
  PJRT_Buffer* in_small[STACK_ARGS];
  PJRT_Buffer* out_small[STACK_ARGS];
  PJRT_Buffer** in = total_in <= STACK_ARGS ? in_small : tpu_malloc(sizeof *in * (size_t)total_in);
  PJRT_Buffer** out = total_out <= STACK_ARGS ? out_small : tpu_malloc(sizeof *out * (size_t)total_out);
  PJRT_Buffer* const* in_lists[16];
  PJRT_Buffer** out_lists[16];
  tpu_status_t s = TPU_OK;
  if ((total_in && !in) || (total_out && !out))
    s = tpu_status_make(TPU_CODE_RESOURCE_EXHAUSTED, "out of memory");
  if (out) memset(out, 0, sizeof *out * (size_t)total_out);
  for (int i = 0; !s && i < total_in; ++i) {
    s = tpu_buffer_settle(args[i]);  // an earlier promised execution's output
    in[i] = args[i]->handle;
  }
  if (!s) {
    for (int d = 0; d < num_devices; ++d) {
      in_lists[d] = in + d * num_args;
      out_lists[d] = out + d * num_outputs;
    }
    PJRT_ExecuteOptions options;
    memset(&options, 0, sizeof options);
    options.struct_size = PJRT_SIZE(PJRT_ExecuteOptions, num_hlo_output_callbacks);
    options.non_donatable_input_indices = keep;
    options.num_non_donatable_input_indices = (size_t)num_keep;
    PJRT_ARGS(LoadedExecutable_Execute, a);
    a.executable = e->handle;
    a.options = &options;
    a.argument_lists = in_lists;
    a.num_devices = (size_t)num_devices;
    a.num_args = (size_t)num_args;
    a.output_lists = out_lists;
    a.execute_device = device;
    PJRT_Event* done[16] = {0};
    if (out_done && num_devices == 1) a.device_complete_events = done;
    s = PJRT_CALL(api, LoadedExecutable_Execute, a);
    if (tpu_status_code(s) == TPU_CODE_RESOURCE_EXHAUSTED)
      for (int d = 0; d < num_devices; ++d) tpu_client_note_oom(e->client, devices[d]);
    if (!s && done[0]) {
      *out_done = tpu_malloc(sizeof **out_done);
      if (*out_done) **out_done = (tpu_event_t){api, done[0], NULL};
      else tpu_pjrt_event_destroy(api, done[0]);  // nothing to wait on: fine
    }
  }
  for (int d = 0; !s && d < num_devices; ++d)
    for (int o = 0; o < num_outputs; ++o) {
      int k = d * num_outputs + o;
      tpu_status_t w = tpu_buffer_wrap(e->client, devices[d], out[k], &outs[k]);
      out[k] = NULL;
      if (w && !s) s = w;
      else tpu_status_free(w);
    }
  for (int d = 0; !s && d < num_devices; ++d) tpu_client_note_scratch(e->client, devices[d], e->temp_bytes);
  if (s) {  // release whatever was produced
    for (int k = 0; k < total_out; ++k) {
      if (out && out[k]) {
        PJRT_ARGS(Buffer_Destroy, b);
        b.buffer = out[k];
        tpu_status_ignore(PJRT_CALL(api, Buffer_Destroy, b));
      }
      tpu_buffer_release(outs[k]);
      outs[k] = NULL;
    }
  }
  if (in != in_small) tpu_free(in);
  if (out != out_small) tpu_free(out);
  return s;
}

tpu_status_t tpu_executable_execute(tpu_executable_t* e, int device,
                                    tpu_buffer_t* const* args, int num_args,
                                    const int64_t* keep, int num_keep,
                                    tpu_buffer_t** outs, int num_outputs,
                                    tpu_event_t** out_done) {
  memset(outs, 0, sizeof *outs * (size_t)num_outputs);
  if (out_done) *out_done = NULL;
  if (e->num_replicas != 1)
    return tpu_status_make(TPU_CODE_INVALID_ARGUMENT,
                           "executable has %d replicas; use "
                           "tpu_executable_execute_replicated", e->num_replicas);
  if (device < 0 || device >= e->client->num_devices)
    return tpu_status_make(TPU_CODE_INVALID_ARGUMENT, "device %d out of range",
                           device);
  if (num_outputs != e->num_outputs)
    return tpu_status_make(TPU_CODE_INVALID_ARGUMENT,
                           "executable has %d outputs, %d requested",
                           e->num_outputs, num_outputs);
  TPU_RETURN_IF_ERROR(check_args(e, device, args, num_args));
  return execute(e, e->client->devices[device].handle, 1, args, num_args, keep, num_keep,
                 outs, num_outputs, &device, out_done);
}

tpu_status_t tpu_executable_execute_replicated(tpu_executable_t* e,
                                               tpu_buffer_t* const* args,
                                               int num_args,
                                               tpu_buffer_t** outs,
                                               int num_outputs) {
  int r = e->num_replicas;
  memset(outs, 0, sizeof *outs * (size_t)(num_outputs * r));
  if (num_outputs != e->num_outputs || r > 16)
    return tpu_status_make(TPU_CODE_INVALID_ARGUMENT,
                           "executable has %d outputs, %d requested",
                           e->num_outputs, num_outputs);
  int devices[16];
  for (int d = 0; d < r; ++d) {
    devices[d] = d;
    TPU_RETURN_IF_ERROR(check_args(e, d, args + d * num_args, num_args));
  }
  return execute(e, NULL, r, args, num_args, NULL, 0, outs, num_outputs, devices, NULL);
}

int tpu_executable_num_outputs(const tpu_executable_t* e) { return e->num_outputs; }
int64_t tpu_executable_temp_bytes(const tpu_executable_t* e) { return e->temp_bytes; }
int tpu_executable_num_replicas(const tpu_executable_t* e) { return e->num_replicas; }
void tpu_executable_retain(tpu_executable_t* e) { if (e) tpu_object_retain(&e->obj); }
void tpu_executable_release(tpu_executable_t* e) { if (e) tpu_object_release(&e->obj); }

//===--- serialization (for the on-disk cache) ---===//
// Layout: u32 num_params, params, then the plugin's serialized bytes.

tpu_status_t tpu_executable_serialize(tpu_executable_t* e, char** out_bytes,
                                      size_t* out_size) {
  *out_bytes = NULL;
  *out_size = 0;
  const PJRT_Api* api = e->client->api;
  PJRT_ARGS(LoadedExecutable_GetExecutable, g);
  g.loaded_executable = e->handle;
  TPU_RETURN_IF_ERROR(PJRT_CALL(api, LoadedExecutable_GetExecutable, g));
  PJRT_ARGS(Executable_Serialize, a);
  a.executable = g.executable;
  tpu_status_t s = PJRT_CALL(api, Executable_Serialize, a);
  if (!s) {
    int32_t np = e->num_params;
    size_t head = sizeof np + sizeof(param_type_t) * (size_t)(np > 0 ? np : 0);
    char* bytes = tpu_malloc(head + a.serialized_bytes_size);
    if (!bytes) {
      s = tpu_status_make(TPU_CODE_RESOURCE_EXHAUSTED, "out of memory");
    } else {
      memcpy(bytes, &np, sizeof np);
      if (np > 0) memcpy(bytes + sizeof np, e->params, head - sizeof np);
      memcpy(bytes + head, a.serialized_bytes, a.serialized_bytes_size);
      *out_bytes = bytes;
      *out_size = head + a.serialized_bytes_size;
    }
    a.serialized_executable_deleter(a.serialized_executable);
  }
  PJRT_ARGS(Executable_Destroy, d);
  d.executable = g.executable;
  tpu_status_ignore(PJRT_CALL(api, Executable_Destroy, d));
  return s;
}

tpu_status_t tpu_executable_deserialize(tpu_client_t* c, const char* bytes,
                                        size_t size, int num_replicas,
                                        tpu_executable_t** out) {
  *out = NULL;
  int32_t np;
  if (size < sizeof np)
    return tpu_status_make(TPU_CODE_DATA_LOSS, "serialized executable truncated");
  memcpy(&np, bytes, sizeof np);
  size_t head = sizeof np + sizeof(param_type_t) * (size_t)(np > 0 ? np : 0);
  if (np < -1 || np > (1 << 20) || size < head)
    return tpu_status_make(TPU_CODE_DATA_LOSS, "serialized executable corrupt");
  PJRT_ARGS(Executable_DeserializeAndLoad, a);
  a.client = c->handle;
  a.serialized_executable = bytes + head;
  a.serialized_executable_size = size - head;
  TPU_RETURN_IF_ERROR(PJRT_CALL(c->api, Executable_DeserializeAndLoad, a));
  TPU_RETURN_IF_ERROR(wrap_loaded(c, a.loaded_executable, num_replicas, NULL, out));
  if (np > 0) {
    (*out)->params = tpu_malloc(head - sizeof np);
    if (!(*out)->params) return TPU_OK;  // arguments just go unchecked
    memcpy((*out)->params, bytes + sizeof np, head - sizeof np);
  }
  (*out)->num_params = np;
  return TPU_OK;
}
