// The process-wide runtime: client, devices, modes, metrics, slots.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "eager/eager.h"

static tpu_runtime_t runtime;
static bool initialized;
static tpu_status_t init_error;
static mtx_t init_lock;
static once_flag init_once = ONCE_FLAG_INIT;

static void init_lock_create(void) { mtx_init(&init_lock, mtx_plain); }

tpu_runtime_t* tpu_rt(void) { return initialized ? &runtime : NULL; }
tpu_client_t* tpu_runtime_client(void) { return initialized ? runtime.client : NULL; }
int tpu_device_count(void) { return initialized ? runtime.num_devices : 0; }

//===--- modes ---===//

static _Atomic int default_mode = TPU_MODE_STRICT;
static _Thread_local int thread_mode = -1;

tpu_mode_t tpu_mode_get(void) {
  return thread_mode >= 0 ? (tpu_mode_t)thread_mode : (tpu_mode_t)default_mode;
}
void tpu_mode_set(tpu_mode_t m) { thread_mode = (int)m; }
int tpu_mode_thread(void) { return thread_mode; }
void tpu_mode_restore(int m) { thread_mode = m; }
void tpu_mode_set_default(tpu_mode_t m) { default_mode = (int)m; }
const char* tpu_mode_name(tpu_mode_t m) {
  return m == TPU_MODE_DEBUG ? "debug" : m == TPU_MODE_FUSED ? "fused" : "strict";
}

//===--- metrics ---===//

static atomic_llong metrics[TPU_M_COUNT];

void tpu_metric_add(tpu_metric_t m, int64_t n) {
  atomic_fetch_add_explicit(&metrics[m], n, memory_order_relaxed);
}

void tpu_metrics_get(tpu_metrics_t* out) {
  memset(out, 0, sizeof *out);
  out->compiles = metrics[TPU_M_COMPILES];
  out->cache_hits = metrics[TPU_M_CACHE_HITS];
  out->cache_misses = metrics[TPU_M_CACHE_MISSES];
  out->disk_hits = metrics[TPU_M_DISK_HITS];
  out->executions = metrics[TPU_M_EXECUTIONS];
  out->host_syncs = metrics[TPU_M_HOST_SYNCS];
  out->h2d_bytes = metrics[TPU_M_H2D_BYTES];
  out->d2h_bytes = metrics[TPU_M_D2H_BYTES];
  out->h2d_copies = metrics[TPU_M_H2D_COPIES];
  out->d2h_copies = metrics[TPU_M_D2H_COPIES];
  out->flushes = metrics[TPU_M_FLUSHES];
  out->graph_nodes = metrics[TPU_M_GRAPH_NODES];
  out->ops_recorded = metrics[TPU_M_OPS];
  out->compile_seconds = (double)metrics[TPU_M_COMPILE_NS] * 1e-9;
}

typedef struct fallback_count {
  char* name;
  int64_t count;
} fallback_count_t;

static mtx_t fallback_lock;
static once_flag fallback_once = ONCE_FLAG_INIT;
static fallback_count_t* fallbacks;
static int num_fallbacks, fallbacks_cap;

static void fallback_init(void) { mtx_init(&fallback_lock, mtx_plain); }

void tpu_metrics_fallback(const char* op) {
  call_once(&fallback_once, fallback_init);
  mtx_lock(&fallback_lock);
  int i = 0;
  while (i < num_fallbacks && strcmp(fallbacks[i].name, op)) ++i;
  if (i == num_fallbacks && num_fallbacks == fallbacks_cap) {
    int cap = fallbacks_cap ? fallbacks_cap * 2 : 16;
    fallback_count_t* p = realloc(fallbacks, sizeof *p * (size_t)cap);  // process lifetime
    if (p) {
      fallbacks = p;
      fallbacks_cap = cap;
    }
  }
  if (i == num_fallbacks && num_fallbacks < fallbacks_cap) {
    fallbacks[i].name = strdup(op);
    fallbacks[i].count = 0;
    ++num_fallbacks;
  }
  if (i < num_fallbacks) ++fallbacks[i].count;
  mtx_unlock(&fallback_lock);
}

int tpu_metrics_fallbacks(const char** names, int64_t* counts, int max) {
  call_once(&fallback_once, fallback_init);
  mtx_lock(&fallback_lock);
  int n = 0;
  for (int i = 0; i < num_fallbacks; ++i) {
    if (!fallbacks[i].count) continue;
    if (n < max) {
      names[n] = fallbacks[i].name;
      counts[n] = fallbacks[i].count;
    }
    ++n;
  }
  mtx_unlock(&fallback_lock);
  return n;
}

void tpu_metrics_reset(void) {
  for (int i = 0; i < TPU_M_COUNT; ++i) atomic_store(&metrics[i], 0);
  call_once(&fallback_once, fallback_init);
  mtx_lock(&fallback_lock);
  for (int i = 0; i < num_fallbacks; ++i) fallbacks[i].count = 0;  // names stay valid
  mtx_unlock(&fallback_lock);
}

//===--- init / shutdown ---===//

static tpu_status_t init_locked(void) {
  TPU_RETURN_IF_ERROR(tpu_env_check());
  tpu_mode_set_default((tpu_mode_t)tpu_env_get(TPU_ENV_MODE, NULL));
  tpu_client_options_t o = {NULL, (int)tpu_env_get(TPU_ENV_CPU_DEVICES, NULL)};
  tpu_runtime_t rt;
  memset(&rt, 0, sizeof rt);
  TPU_RETURN_IF_ERROR(tpu_client_create(&o, &rt.client));
  rt.num_devices = tpu_client_device_count(rt.client);
  rt.flush_cap = tpu_env_get(TPU_ENV_FUSED_MAX_OPS, NULL);
  // Each loaded executable holds a few memory mappings of JIT code (XLA
  // CPU: about 6), and a process may have only 65530 (vm.max_map_count);
  // past that, LLVM fails and the plugin crashes. Evicted programs come
  // back from the disk cache without compiling.
  tpu_status_t s = tpu_cache_create(rt.client,
                                    (size_t)tpu_env_get(TPU_ENV_CACHE_ENTRIES, NULL),
                                    &rt.cache);
  if (!s) {
    rt.devices = tpu_calloc((size_t)rt.num_devices, sizeof *rt.devices);
    if (!rt.devices) s = tpu_status_make(TPU_CODE_RESOURCE_EXHAUSTED, "out of memory");
  }
  for (int i = 0; !s && i < rt.num_devices; ++i) {
    tpu_dev_t* d = &rt.devices[i];
    mtx_init(&d->lock, mtx_recursive);
    d->index = i;
    d->gen = 1;
    d->first_op = -1;
    d->checks_tail = &d->checks;
    d->checks_read_below = d->checks_raised_below = 1;
    s = tpu_graph_create(&d->graph);
  }
  if (s) {
    if (rt.devices)
      for (int i = 0; i < rt.num_devices; ++i) tpu_graph_destroy(rt.devices[i].graph);
    tpu_free(rt.devices);
    tpu_cache_destroy(rt.cache);
    tpu_client_release(rt.client);
    return s;
  }
  runtime = rt;
  return TPU_OK;
}

tpu_status_t tpu_runtime_init(void) {
  if (tpu_forked_child()) return tpu_forked_child_error();
  call_once(&init_once, init_lock_create);
  mtx_lock(&init_lock);
  if (!initialized && !init_error) {
    init_error = init_locked();
    initialized = init_error == NULL;
  }
  tpu_status_t s = tpu_status_clone(init_error);
  mtx_unlock(&init_lock);
  return s;
}

void tpu_runtime_shutdown(void) {
  if (tpu_forked_child()) return;  // the threads it would wait for are the parent's
  call_once(&init_once, init_lock_create);
  mtx_lock(&init_lock);
  if (initialized) {
    for (int i = 0; i < runtime.num_devices; ++i) {
      tpu_dev_t* d = &runtime.devices[i];
      tpu_status_ignore(tpu_dev_flush(d));
      tpu_status_ignore(tpu_dev_wait_all(d));
      tpu_free(d->inflight);
      tpu_free(d->inflight_seq);
      tpu_free(d->donated);
      tpu_loop_free(&d->loop);
      tpu_free(d->undo);
      tpu_status_ignore(tpu_dev_undo_failed_jobs(d));
      tpu_dev_drop_checks(d);
      tpu_free(d->inherited);
      tpu_graph_destroy(d->graph);
      tpu_free(d->params);
      tpu_free(d->param_is_number);
      tpu_free(d->written);
      tpu_free(d->asserts);
      tpu_free(d->suspects);
      tpu_scalar_cache_destroy(d->scalars);
      mtx_destroy(&d->lock);
    }
    tpu_background_stop();  // idle: every device's jobs were reaped
    tpu_free(runtime.devices);
    tpu_cache_destroy(runtime.cache);
    tpu_client_release(runtime.client);
    memset(&runtime, 0, sizeof runtime);
    initialized = false;
  }
  tpu_status_free(init_error);
  init_error = NULL;
  mtx_unlock(&init_lock);
}

tpu_status_t tpu_dev_get(int device, tpu_dev_t** out) {
  *out = NULL;
  if (tpu_forked_child()) return tpu_forked_child_error();
  if (!initialized) TPU_RETURN_IF_ERROR(tpu_runtime_init());
  if (device < 0 || device >= runtime.num_devices)
    return tpu_status_make(TPU_CODE_INVALID_ARGUMENT,
                           "Invalid device index %d: %d tpu device(s) available",
                           device, runtime.num_devices);
  *out = &runtime.devices[device];
  return TPU_OK;
}

void tpu_dev_lock(tpu_dev_t* d) { mtx_lock(&d->lock); }
void tpu_dev_unlock(tpu_dev_t* d) { mtx_unlock(&d->lock); }

//===--- slots ---===//

static void slot_destroy(void* self) {
  tpu_slot_t* s = self;
  tpu_buffer_release(s->buffer);
  tpu_status_free(s->poison);
  tpu_suspicion_release(s->suspicion);
  tpu_free(s);
}

tpu_status_t tpu_slot_create(int device, size_t nbytes, tpu_slot_t** out) {
  *out = NULL;
  tpu_dev_t* d;
  TPU_RETURN_IF_ERROR(tpu_dev_get(device, &d));
  tpu_slot_t* s = tpu_calloc(1, sizeof *s);
  if (!s) return tpu_status_make(TPU_CODE_RESOURCE_EXHAUSTED, "out of memory");
  tpu_object_init(&s->obj, slot_destroy);
  s->device = device;
  s->nbytes = nbytes;
  s->dtype = TPU_U8;
  s->pending = s->param = TPU_VAL_NONE;
  *out = s;
  return TPU_OK;
}

void tpu_slot_retain(tpu_slot_t* s) { if (s) tpu_object_retain(&s->obj); }
void tpu_slot_release(tpu_slot_t* s) { if (s) tpu_object_release(&s->obj); }
size_t tpu_slot_nbytes(const tpu_slot_t* s) { return s->nbytes; }
int tpu_slot_device(const tpu_slot_t* s) { return s->device; }
