// Plugin loading and the PJRT client: the only file that dlopens.
#include <dlfcn.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <threads.h>
#include <unistd.h>

#include "base/strbuf.h"
#include "pjrt/pjrt_internal.h"

//===--- fork ---===//
// A process forked while a client exists inherits the client's memory but
// none of the plugin's threads (its thread pools, its event loops), so a
// call into the plugin could wait forever for them. In such a child every
// PJRT call fails at once: destructors' calls are skipped (what they would
// free goes with the process) and everything else raises, as CUDA does in
// a child forked after it was initialized.

static atomic_int clients_alive;  // clients whose PJRT client exists
static atomic_bool forked_child;
static once_flag fork_once = ONCE_FLAG_INIT;

static void on_fork_child(void) {
  if (atomic_load(&clients_alive) > 0) atomic_store(&forked_child, true);
}

static void fork_handler_install(void) { pthread_atfork(NULL, NULL, on_fork_child); }

bool tpu_forked_child(void) {
  return atomic_load_explicit(&forked_child, memory_order_relaxed);
}

tpu_status_t tpu_forked_child_error(void) {
  return tpu_status_make(TPU_CODE_FAILED_PRECONDITION,
                         "Cannot re-initialize tpu in forked subprocess: the parent "
                         "process had initialized it, and the device's threads do "
                         "not survive a fork. To use tpu with multiprocessing, you "
                         "must use the 'spawn' start method");
}

//===--- calling PJRT ---===//

bool tpu_pjrt_has(const PJRT_Api* api, int slot) {
  return PJRT_SLOT_OFFSET(slot) + sizeof(void*) <= api->struct_size &&
         api->slots[slot] != NULL;
}

tpu_status_t tpu_pjrt_status(const PJRT_Api* api, PJRT_Error* error,
                             const char* what) {
  if (!error) return TPU_OK;
  PJRT_ARGS(Error_GetCode, code_args);
  code_args.error = error;
  int code = TPU_CODE_UNKNOWN;
  PJRT_Error* code_error =
      ((PJRT_Error * (*)(void*)) api->slots[PJRT_SLOT_Error_GetCode])(&code_args);
  if (!code_error) code = code_args.code;
  PJRT_Error_Message_Args msg = {sizeof msg, NULL, error, NULL, 0};
  ((void (*)(void*))api->slots[PJRT_SLOT_ERROR_MESSAGE])(&msg);
  if (code <= 0 || code > TPU_CODE_UNAUTHENTICATED) code = TPU_CODE_UNKNOWN;
  tpu_status_t s = tpu_status_make((tpu_code_t)code, "%s: %.*s", what,
                                   (int)msg.message_size,
                                   msg.message ? msg.message : "");
  PJRT_Error_Destroy_Args destroy = {sizeof destroy, NULL, error};
  ((void (*)(void*))api->slots[PJRT_SLOT_ERROR_DESTROY])(&destroy);
  if (code_error) {
    PJRT_Error_Destroy_Args d2 = {sizeof d2, NULL, code_error};
    ((void (*)(void*))api->slots[PJRT_SLOT_ERROR_DESTROY])(&d2);
  }
  return s;
}

tpu_status_t tpu_pjrt_call_(const PJRT_Api* api, int slot, const char* name,
                            void* args) {
  if (tpu_forked_child()) return tpu_forked_child_error();
  if (!tpu_pjrt_has(api, slot))
    return tpu_status_make(TPU_CODE_UNIMPLEMENTED,
                           "this PJRT plugin (API 0.%d) has no PJRT_%s",
                           api->pjrt_api_version.minor_version, name);
  PJRT_Error* e = ((PJRT_Error * (*)(void*)) api->slots[slot])(args);
  return tpu_pjrt_status(api, e, name);
}

void tpu_pjrt_event_destroy(const PJRT_Api* api, PJRT_Event* event) {
  if (!event) return;
  PJRT_ARGS(Event_Destroy, a);
  a.event = event;
  tpu_status_ignore(PJRT_CALL(api, Event_Destroy, a));
}

tpu_status_t tpu_pjrt_event_wait(const PJRT_Api* api, PJRT_Event* event,
                                 const char* what) {
  if (!event) return TPU_OK;
  PJRT_ARGS(Event_Await, a);
  a.event = event;
  tpu_status_t s = PJRT_CALL(api, Event_Await, a);
  tpu_pjrt_event_destroy(api, event);
  return s ? tpu_status_annotate(s, "%s", what) : TPU_OK;
}

//===--- plugin loading (once per path per process) ---===//

typedef struct loaded_plugin {
  char* path;
  const PJRT_Api* api;
  bool check_flags;  // the user set its flags: check them before its first client (flags.c)
} loaded_plugin_t;

static loaded_plugin_t plugins[8];
static int num_plugins;
static mtx_t plugins_mutex;
static once_flag plugins_once = ONCE_FLAG_INIT;
static void plugins_init(void) { mtx_init(&plugins_mutex, mtx_plain); }

static bool file_exists(const char* path) {
  struct stat st;
  return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

// The newest slot we call; a plugin whose table ends before it is too old.
enum { REQUIRED_SLOT = PJRT_SLOT_Buffer_ReadyEvent };

// Whether the file holds `text` (a flag name in a plugin's string table).
static bool file_contains(const char* path, const char* text) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  struct stat st;
  bool found = false;
  if (fstat(fd, &st) == 0 && st.st_size > 0) {
    void* data = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (data != MAP_FAILED) {
      found = memmem(data, (size_t)st.st_size, text, strlen(text)) != NULL;
      munmap(data, (size_t)st.st_size);
    }
  }
  close(fd);
  return found;
}

// XLA's CPU backend schedules a program for running independent kernels in
// parallel. Here the host's cores also record the next ops, and the
// sequential, memory-ordered schedule runs perflab's fused GPT training step
// about 18% faster, so it is the default unless XLA_FLAGS chooses. Only a
// plugin that knows the flag gets it: XLA aborts on an unknown flag.
static void prefer_sequential_schedule(const char* path) {
  static const char flag[] = "xla_cpu_enable_concurrency_optimized_scheduler";
  const char* old = getenv("XLA_FLAGS");
  if ((old && strstr(old, flag)) || !file_contains(path, flag)) return;
  tpu_strbuf_t b;
  tpu_strbuf_init(&b);
  if (old && *old) tpu_strbuf_printf(&b, "%s ", old);
  tpu_strbuf_printf(&b, "--%s=false", flag);
  tpu_status_t s = tpu_strbuf_status(&b);
  if (!s) setenv("XLA_FLAGS", tpu_strbuf_cstr(&b), 1);
  tpu_status_free(s);  // out of memory: the default schedule, never wrong
  tpu_strbuf_deinit(&b);
}

static tpu_status_t plugin_open(const char* path, loaded_plugin_t** out) {
  for (int i = 0; i < num_plugins; ++i)
    if (!strcmp(plugins[i].path, path)) {
      *out = &plugins[i];
      return TPU_OK;
    }
  if (!file_exists(path))
    return tpu_status_make(TPU_CODE_NOT_FOUND, "PJRT plugin not found: %s",
                           path);
  if (num_plugins == (int)(sizeof plugins / sizeof plugins[0]))
    return tpu_status_make(TPU_CODE_RESOURCE_EXHAUSTED,
                           "too many PJRT plugins loaded");
  // XLA logs every client creation at INFO; keep its logs to warnings and up
  // unless the user asked for more.
  if (tpu_log_level() < TPU_LOG_DEBUG) setenv("TF_CPP_MIN_LOG_LEVEL", "1", 0);
  bool check_flags = tpu_plugin_flags_set();  // before a flag of ours is added
  if (strstr(path, "cpu")) prefer_sequential_schedule(path);
  void* lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!lib)
    return tpu_status_make(TPU_CODE_INVALID_ARGUMENT,
                           "%s is not a loadable PJRT plugin: %s", path,
                           dlerror());
  const PJRT_Api* (*get_api)(void) =
      (const PJRT_Api* (*)(void))dlsym(lib, "GetPjrtApi");
  if (!get_api)
    return tpu_status_make(TPU_CODE_INVALID_ARGUMENT,
                           "%s is not a PJRT plugin: it has no GetPjrtApi", path);
  const PJRT_Api* api = get_api();
  if (!api || api->struct_size < PJRT_SLOT_OFFSET(0))
    return tpu_status_make(TPU_CODE_INVALID_ARGUMENT,
                           "%s returned no usable PJRT_Api", path);
  int major = api->pjrt_api_version.major_version;
  int minor = api->pjrt_api_version.minor_version;
  if (major != 0 || minor < 40)
    return tpu_status_make(TPU_CODE_INVALID_ARGUMENT,
                           "%s has PJRT API %d.%d; torchtpu needs 0.40 or newer",
                           path, major, minor);
  if (!tpu_pjrt_has(api, REQUIRED_SLOT))
    return tpu_status_make(TPU_CODE_INVALID_ARGUMENT,
                           "%s (PJRT API 0.%d) lacks functions torchtpu needs",
                           path, minor);
  PJRT_ARGS(Plugin_Initialize, init);
  tpu_status_t s = PJRT_CALL(api, Plugin_Initialize, init);
  if (s) return tpu_status_annotate(s, "initializing %s", path);
  // dlclose is never called: XLA keeps process-lifetime state in the plugin.
  plugins[num_plugins].path = strdup(path);
  plugins[num_plugins].api = api;
  plugins[num_plugins].check_flags = check_flags;
  *out = &plugins[num_plugins++];
  return TPU_OK;
}

// Looks for `rel` under each directory of TORCHTPU_PLUGIN_PATH.
static bool search_plugin(const char* rel, char* out, size_t out_size) {
  const char* dirs = getenv("TORCHTPU_PLUGIN_PATH");
  if (!dirs) return false;
  while (*dirs) {
    const char* end = strchr(dirs, ':');
    size_t n = end ? (size_t)(end - dirs) : strlen(dirs);
    if (n) {
      snprintf(out, out_size, "%.*s/%s", (int)n, dirs, rel);
      if (file_exists(out)) return true;
    }
    dirs += n + (end ? 1 : 0);
  }
  return false;
}

static const char* const cpu_names[] = {"xla_plugins/xla_cpu_pjrt/xla_cpu_pjrt.so", NULL};
static const char* const cuda_names[] = {
    "jax_plugins/xla_cuda13/xla_cuda_plugin.so",
    "jax_plugins/xla_cuda12/xla_cuda_plugin.so",
    "xla_plugins/xla_cuda13_pjrt/xla_gpu_pjrt.so",
    "xla_plugins/xla_cuda12_pjrt/xla_gpu_pjrt.so", NULL};
static const char* const tpu_names[] = {"libtpu/libtpu.so", NULL};

static bool find_named(const char* const* names, char* out, size_t size) {
  for (; *names; ++names)
    if (search_plugin(*names, out, size)) return true;
  return false;
}

// Resolves a plugin spec to a path (NOT_FOUND naming what was searched).
static tpu_status_t resolve_plugin(const char* spec, char* out, size_t size) {
  if (!spec || !*spec) spec = getenv("TORCHTPU_PLUGIN");
  if (!spec || !*spec) spec = "auto";
  if (strchr(spec, '/')) {
    snprintf(out, size, "%s", spec);
    return TPU_OK;
  }
  bool ok = false;
  if (!strcmp(spec, "cpu")) ok = find_named(cpu_names, out, size);
  else if (!strcmp(spec, "cuda")) ok = find_named(cuda_names, out, size);
  else if (!strcmp(spec, "tpu")) ok = find_named(tpu_names, out, size);
  else if (!strcmp(spec, "auto"))
    ok = find_named(tpu_names, out, size) ||
         (file_exists("/dev/nvidia0") && find_named(cuda_names, out, size)) ||
         find_named(cpu_names, out, size);
  else
    return tpu_status_make(TPU_CODE_INVALID_ARGUMENT,
                           "TORCHTPU_PLUGIN=%s: expected cpu, cuda, tpu, auto "
                           "or a path to a PJRT plugin", spec);
  // docs/install.md: the package that brings each kind of plugin.
  const char* package = !strcmp(spec, "tpu")    ? "libtpu"
                        : !strcmp(spec, "cuda") ? "jax-cuda13-pjrt"
                                                : "xla-cpu-pjrt";
  if (!ok)
    return tpu_status_make(TPU_CODE_NOT_FOUND,
                           "no '%s' PJRT plugin found under TORCHTPU_PLUGIN_PATH"
                           "=%s (install %s, or set TORCHTPU_PLUGIN "
                           "to a plugin path)",
                           spec, getenv("TORCHTPU_PLUGIN_PATH")
                                     ? getenv("TORCHTPU_PLUGIN_PATH") : "", package);
  return TPU_OK;
}

//===--- client ---===//

static void read_attributes(tpu_client_t* c) {
  PJRT_ARGS(Plugin_Attributes, a);
  if (PJRT_CALL(c->api, Plugin_Attributes, a) != TPU_OK) return;  // optional
  for (size_t i = 0; i < a.num_attributes; ++i) {
    const PJRT_NamedValue* v = &a.attributes[i];
    if (v->name_size == 11 && !memcmp(v->name, "xla_version", 11) &&
        v->type == PJRT_NV_INT64)
      c->xla_version = v->int64_value;
    if (v->name_size == 25 &&
        !memcmp(v->name, "stablehlo_current_version", 25) &&
        v->type == PJRT_NV_INT64_LIST && v->value_size >= 3)
      memcpy(c->stablehlo_version, v->int64_array_value, 3 * sizeof(int64_t));
  }
}

// What a device holds at most: the plugin's limit, or else the host's
// physical memory (the CPU plugin's buffers live there). An execution that
// needs more fails before it is launched, as torch.cuda's allocator fails.
static int64_t device_capacity(const PJRT_Api* api, PJRT_Device* device) {
  PJRT_ARGS(Device_MemoryStats, ms);
  ms.device = device;
  tpu_status_t s = PJRT_CALL(api, Device_MemoryStats, ms);
  bool reported = !s && ms.bytes_limit_is_set && ms.bytes_limit > 0;
  tpu_status_free(s);
  if (reported) return ms.bytes_limit;
  long pages = sysconf(_SC_PHYS_PAGES), page_size = sysconf(_SC_PAGESIZE);
  return pages > 0 && page_size > 0 ? (int64_t)pages * page_size : 0;
}

static char* dup_n(const char* s, size_t n) {
  return s ? tpu_strndup(s, n) : tpu_strdup("");
}

static void client_destroy(void* self) {
  tpu_client_t* c = self;
  if (c->handle) {
    PJRT_ARGS(Client_Destroy, a);
    a.client = c->handle;
    tpu_status_ignore(PJRT_CALL(c->api, Client_Destroy, a));
    atomic_fetch_sub(&clients_alive, 1);
  }
  for (int i = 0; i < c->num_devices; ++i) tpu_free(c->devices[i].kind);
  tpu_free(c->devices);
  tpu_free(c->plugin_path);
  tpu_free(c->platform);
  tpu_free(c->platform_version);
  tpu_free(c);
}

static tpu_status_t client_query(tpu_client_t* c) {
  PJRT_ARGS(Client_PlatformName, pn);
  pn.client = c->handle;
  TPU_RETURN_IF_ERROR(PJRT_CALL(c->api, Client_PlatformName, pn));
  c->platform = dup_n(pn.platform_name, pn.platform_name_size);
  PJRT_ARGS(Client_PlatformVersion, pv);
  pv.client = c->handle;
  TPU_RETURN_IF_ERROR(PJRT_CALL(c->api, Client_PlatformVersion, pv));
  c->platform_version = dup_n(pv.platform_version, pv.platform_version_size);
  PJRT_ARGS(Client_AddressableDevices, ad);
  ad.client = c->handle;
  TPU_RETURN_IF_ERROR(PJRT_CALL(c->api, Client_AddressableDevices, ad));
  if (ad.num_addressable_devices == 0)
    return tpu_status_make(TPU_CODE_UNAVAILABLE,
                           "the PJRT plugin %s reports no devices",
                           c->plugin_path);
  c->devices = tpu_calloc(ad.num_addressable_devices, sizeof *c->devices);
  if (!c->devices)
    return tpu_status_make(TPU_CODE_RESOURCE_EXHAUSTED, "out of host memory");
  c->num_devices = (int)ad.num_addressable_devices;
  // The plugin's identity for the compile caches: its file name and size,
  // not its path, so that the same plugin installed in another environment
  // (a second venv, a fresh clone) shares the on-disk cache.
  const char* base = strrchr(c->plugin_path, '/');
  base = base ? base + 1 : c->plugin_path;
  struct stat st;
  uint64_t size = stat(c->plugin_path, &st) == 0 ? (uint64_t)st.st_size : 0;
  tpu_hash_t id = tpu_hash_u64(tpu_hash_bytes((tpu_hash_t){1, 3}, base, strlen(base)), size);
  id = tpu_hash_bytes(id, c->platform_version, strlen(c->platform_version));
  id = tpu_hash_u64(id, (uint64_t)c->api->pjrt_api_version.minor_version);
  id = tpu_hash_u64(id, (uint64_t)c->xla_version);
  // Options the plugin reads from the environment change what it compiles.
  static const char* const option_vars[] = {"XLA_FLAGS", "LIBTPU_INIT_ARGS"};
  for (uint64_t i = 0; i < sizeof option_vars / sizeof *option_vars; ++i) {
    const char* v = getenv(option_vars[i]);
    if (v && *v) id = tpu_hash_bytes(tpu_hash_u64(id, i + 1), v, strlen(v));
  }
  for (int i = 0; i < c->num_devices; ++i) {
    tpu_device_info_t* d = &c->devices[i];
    d->handle = ad.addressable_devices[i];
    PJRT_ARGS(Device_GetDescription, gd);
    gd.device = d->handle;
    TPU_RETURN_IF_ERROR(PJRT_CALL(c->api, Device_GetDescription, gd));
    PJRT_ARGS(DeviceDescription_Kind, dk);
    dk.device_description = gd.device_description;
    TPU_RETURN_IF_ERROR(PJRT_CALL(c->api, DeviceDescription_Kind, dk));
    d->kind = dup_n(dk.device_kind, dk.device_kind_size);
    if (!d->kind)
      return tpu_status_make(TPU_CODE_RESOURCE_EXHAUSTED, "out of host memory");
    d->capacity = device_capacity(c->api, d->handle);
    if (i == 0) id = tpu_hash_bytes(id, d->kind, strlen(d->kind));
  }
  c->identity = id;
  return TPU_OK;
}

tpu_status_t tpu_client_create(const tpu_client_options_t* options,
                               tpu_client_t** out_client) {
  *out_client = NULL;
  call_once(&plugins_once, plugins_init);
  char path[4096];
  TPU_RETURN_IF_ERROR(resolve_plugin(options ? options->plugin : NULL, path,
                                     sizeof path));
  loaded_plugin_t* plugin = NULL;
  mtx_lock(&plugins_mutex);
  tpu_status_t s = plugin_open(path, &plugin);
  mtx_unlock(&plugins_mutex);
  if (s) return s;
  const PJRT_Api* api = plugin->api;

  tpu_client_t* c = tpu_calloc(1, sizeof *c);
  if (!c) return tpu_status_make(TPU_CODE_RESOURCE_EXHAUSTED, "out of memory");
  tpu_object_init(&c->obj, client_destroy);
  c->api = api;
  c->plugin_path = tpu_strdup(path);
  read_attributes(c);

  // Plugins reject option names they do not know, so each gets only its
  // own: the CPU plugin its device count; XLA's GPU plugin no
  // preallocation (it would otherwise take 75% of the GPU's memory at
  // start, where torch.cuda takes memory as tensors need it). A plugin that
  // refuses the options is created again without them.
  int cpu_devices = options && options->cpu_devices > 0 ? options->cpu_devices : 1;
  PJRT_NamedValue opt;
  memset(&opt, 0, sizeof opt);
  opt.struct_size = PJRT_SIZE(PJRT_NamedValue, value_size);
  opt.value_size = 1;
  const char* base = strrchr(path, '/');
  base = base ? base + 1 : path;
  if (strstr(base, "cpu")) {
    opt.name = "cpu_device_count";
    opt.type = PJRT_NV_INT64;
    opt.int64_value = cpu_devices;
  } else if (strstr(base, "cuda") || strstr(base, "gpu")) {
    opt.name = "preallocate";
    opt.type = PJRT_NV_BOOL;
    opt.bool_value = false;
  }
  opt.name_size = opt.name ? strlen(opt.name) : 0;
  PJRT_ARGS(Client_Create, cc);
  cc.create_options = opt.name ? &opt : NULL;
  cc.num_options = opt.name ? 1 : 0;
  if (plugin->check_flags) {
    s = tpu_plugin_flags_check(api, &cc, path);
    if (s) {
      tpu_client_release(c);
      return s;
    }
    plugin->check_flags = false;  // the plugin has read them: no second check
  }
  s = PJRT_CALL(api, Client_Create, cc);
  if (s && opt.name) {
    tpu_log(TPU_LOG_WARN, "PJRT plugin %s refused the option %s; created without it",
            path, opt.name);
    tpu_status_free(s);
    cc.create_options = NULL;
    cc.num_options = 0;
    s = PJRT_CALL(api, Client_Create, cc);
  }
  if (!s) {
    call_once(&fork_once, fork_handler_install);
    atomic_fetch_add(&clients_alive, 1);
    c->handle = cc.client;
    s = client_query(c);
  }
  if (s) {
    tpu_client_release(c);
    return tpu_status_annotate(s, "creating a PJRT client for %s", path);
  }
  tpu_log(TPU_LOG_INFO, "PJRT plugin %s: platform %s %s, API 0.%d, %d device(s)",
          path, c->platform, c->platform_version,
          api->pjrt_api_version.minor_version, c->num_devices);
  *out_client = c;
  return TPU_OK;
}

void tpu_client_retain(tpu_client_t* c) { if (c) tpu_object_retain(&c->obj); }
void tpu_client_release(tpu_client_t* c) { if (c) tpu_object_release(&c->obj); }
int tpu_client_device_count(const tpu_client_t* c) { return c->num_devices; }
const char* tpu_client_platform(const tpu_client_t* c) { return c->platform; }
const char* tpu_client_platform_version(const tpu_client_t* c) { return c->platform_version; }
const char* tpu_client_plugin_path(const tpu_client_t* c) { return c->plugin_path; }
int tpu_client_api_minor(const tpu_client_t* c) { return c->api->pjrt_api_version.minor_version; }
int64_t tpu_client_xla_version(const tpu_client_t* c) { return c->xla_version; }
tpu_hash_t tpu_client_identity(const tpu_client_t* c) { return c->identity; }

void tpu_client_stablehlo_version(const tpu_client_t* c, int64_t out[3]) {
  memcpy(out, c->stablehlo_version, sizeof c->stablehlo_version);
}

const char* tpu_client_device_kind(const tpu_client_t* c, int device) {
  return device >= 0 && device < c->num_devices ? c->devices[device].kind : "";
}

void tpu_client_memory_stats(tpu_client_t* c, int device,
                             tpu_memory_stats_t* out) {
  memset(out, 0, sizeof *out);
  if (device < 0 || device >= c->num_devices) return;
  tpu_device_info_t* d = &c->devices[device];
  out->bytes_in_use = atomic_load(&d->bytes_in_use);
  out->peak_bytes_in_use = atomic_load(&d->peak_bytes);
  out->num_allocs = atomic_load(&d->num_allocs);
  out->num_frees = atomic_load(&d->num_frees);
  out->bytes_allocated = atomic_load(&d->bytes_allocated);
  out->bytes_freed = atomic_load(&d->bytes_freed);
  out->buffers = atomic_load(&d->buffers);
  out->peak_buffers = atomic_load(&d->peak_buffers);
  out->bytes_cap = atomic_load(&d->bytes_cap);
  out->num_ooms = atomic_load(&d->num_ooms);
  // Plugins that track memory (GPU, TPU) report a limit; the CPU one does not.
  PJRT_ARGS(Device_MemoryStats, ms);
  ms.device = d->handle;
  tpu_status_t s = PJRT_CALL(c->api, Device_MemoryStats, ms);
  if (!s && ms.bytes_limit_is_set) out->bytes_limit = ms.bytes_limit;
  tpu_status_ignore(s);
}

void tpu_client_set_memory_cap(tpu_client_t* c, int device, int64_t bytes) {
  if (device >= 0 && device < c->num_devices)
    atomic_store(&c->devices[device].bytes_cap, bytes > 0 ? bytes : 0);
}

void tpu_client_note_oom(tpu_client_t* c, int device) {
  if (device >= 0 && device < c->num_devices) atomic_fetch_add(&c->devices[device].num_ooms, 1);
}

static void human_bytes(int64_t bytes, char out[32]) {
  static const char* const units[] = {"KiB", "MiB", "GiB", "TiB"};
  if (bytes < 1024) {
    snprintf(out, 32, "%lld bytes", (long long)bytes);
    return;
  }
  double v = (double)bytes / 1024;
  int u = 0;
  while (v >= 1024 && u < 3) v /= 1024, ++u;
  snprintf(out, 32, "%.2f %s", v, units[u]);
}

tpu_status_t tpu_client_fits(tpu_client_t* c, int device, int64_t bytes) {
  if (device < 0 || device >= c->num_devices || bytes <= 0) return TPU_OK;
  tpu_device_info_t* d = &c->devices[device];
  int64_t cap = atomic_load(&d->bytes_cap), in_use = atomic_load(&d->bytes_in_use);
  int64_t most = cap ? cap : d->capacity;
  if (!most || in_use + bytes <= most) return TPU_OK;
  atomic_fetch_add(&d->num_ooms, 1);
  char want[32], held[32], limit[32];
  human_bytes(bytes, want);
  human_bytes(in_use, held);
  human_bytes(most, limit);
  return tpu_status_make(TPU_CODE_RESOURCE_EXHAUSTED,
                         "tpu:%d out of memory: tried to allocate %s with %s allocated; %s %s%s",
                         device, want, held, cap ? "this process may allocate" : "the device holds",
                         limit, cap ? " (its memory fraction)" : " in all");
}

void tpu_client_reset_peak(tpu_client_t* c, int device) {
  if (device < 0 || device >= c->num_devices) return;
  tpu_device_info_t* d = &c->devices[device];
  atomic_store(&d->peak_bytes, atomic_load(&d->bytes_in_use));
  atomic_store(&d->peak_buffers, atomic_load(&d->buffers));
}

void tpu_client_reset_accumulated(tpu_client_t* c, int device) {
  if (device < 0 || device >= c->num_devices) return;
  tpu_device_info_t* d = &c->devices[device];
  atomic_store(&d->num_allocs, 0);
  atomic_store(&d->num_frees, 0);
  atomic_store(&d->bytes_allocated, 0);
  atomic_store(&d->bytes_freed, 0);
  atomic_store(&d->num_ooms, 0);
}
