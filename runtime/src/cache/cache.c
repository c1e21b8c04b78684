// In-memory LRU of executables keyed by program hash.
#include "cache/cache.h"

#include "cache/disk.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <threads.h>
#include <time.h>

typedef struct entry {
  tpu_hash_t key;
  tpu_executable_t* exe;
  struct entry *prev, *next;  // LRU list, most recent first
} entry_t;

struct tpu_cache {
  tpu_client_t* client;
  tpu_disk_cache_t* disk;  // NULL when the disk tier is off
  mtx_t lock;
  size_t capacity, count;
  size_t inserts;          // since the last look at the process's mappings
  long mapping_budget;     // see fit_in_mappings
  entry_t** table;  // open addressing, linear probing; NULL = empty
  size_t table_cap;
  entry_t *head, *tail;
  tpu_cache_stats_t stats;
};

tpu_status_t tpu_cache_create(tpu_client_t* client, size_t capacity,
                              tpu_cache_t** out) {
  *out = NULL;
  tpu_cache_t* c = tpu_calloc(1, sizeof *c);
  if (!c) return tpu_status_make(TPU_CODE_RESOURCE_EXHAUSTED, "out of memory");
  c->capacity = capacity ? capacity : 1;
  c->mapping_budget = -1;
  c->table_cap = 64;
  while (c->table_cap < c->capacity * 2) c->table_cap *= 2;
  c->table = tpu_calloc(c->table_cap, sizeof *c->table);
  if (!c->table) {
    tpu_free(c);
    return tpu_status_make(TPU_CODE_RESOURCE_EXHAUSTED, "out of memory");
  }
  tpu_status_t s = tpu_disk_cache_open(tpu_client_identity(client), &c->disk);
  if (s) {  // an unusable directory costs speed, not correctness
    tpu_log(TPU_LOG_WARN, "compile cache on disk disabled: %s", tpu_status_message(s));
    tpu_status_free(s);
  }
  mtx_init(&c->lock, mtx_plain);
  tpu_client_retain(client);
  c->client = client;
  *out = c;
  return TPU_OK;
}

static void unlink_entry(tpu_cache_t* c, entry_t* e) {
  if (e->prev) e->prev->next = e->next;
  else c->head = e->next;
  if (e->next) e->next->prev = e->prev;
  else c->tail = e->prev;
  e->prev = e->next = NULL;
}

static void push_front(tpu_cache_t* c, entry_t* e) {
  e->next = c->head;
  e->prev = NULL;
  if (c->head) c->head->prev = e;
  c->head = e;
  if (!c->tail) c->tail = e;
}

static size_t slot_of(const tpu_cache_t* c, tpu_hash_t key) {
  size_t k = (size_t)key.lo & (c->table_cap - 1);
  while (c->table[k]) {
    if (tpu_hash_eq(c->table[k]->key, key)) return k;
    k = (k + 1) & (c->table_cap - 1);
  }
  return k;
}

// Empties table slot k and re-places the rest of its probe cluster.
static void table_delete(tpu_cache_t* c, size_t k) {
  c->table[k] = NULL;
  for (size_t j = (k + 1) & (c->table_cap - 1); c->table[j];
       j = (j + 1) & (c->table_cap - 1)) {
    entry_t* e = c->table[j];
    c->table[j] = NULL;
    c->table[slot_of(c, e->key)] = e;
  }
}

static void remove_entry(tpu_cache_t* c, entry_t* e) {
  size_t k = slot_of(c, e->key);
  if (c->table[k] == e) table_delete(c, k);
  unlink_entry(c, e);
  tpu_executable_release(e->exe);
  tpu_free(e);
  --c->count;
}

void tpu_cache_clear(tpu_cache_t* c) {
  mtx_lock(&c->lock);
  while (c->head) remove_entry(c, c->head);
  memset(c->table, 0, sizeof *c->table * c->table_cap);
  mtx_unlock(&c->lock);
}

void tpu_cache_destroy(tpu_cache_t* c) {
  if (!c) return;
  tpu_cache_clear(c);
  mtx_destroy(&c->lock);
  tpu_disk_cache_close(c->disk);
  tpu_free(c->table);
  tpu_client_release(c->client);
  tpu_free(c);
}

const char* tpu_cache_dir(const tpu_cache_t* c) { return tpu_disk_cache_dir(c->disk); }

// Counts the lines of a /proc file (-1 when it cannot be read).
static long count_lines(const char* path) {
  FILE* f = fopen(path, "r");
  if (!f) return -1;
  char buf[1 << 16];
  long n = 0;
  size_t got;
  while ((got = fread(buf, 1, sizeof buf, f)) > 0)
    for (size_t i = 0; i < got; ++i) n += buf[i] == '\n';
  fclose(f);
  return n;
}

// A loaded executable holds memory mappings of its JIT code: XLA CPU's hold
// 6 for a small program and 50 or more for one with many kernels (a fused
// graph). A process may have vm.max_map_count of them (65530 by default);
// past that LLVM cannot map code and the plugin crashes, so the entry count
// alone does not bound a cache of large programs. Every few inserts this
// looks at the process's mappings and, above a budget (half the limit, or
// TORCHTPU_CACHE_MAX_MAPPINGS), evicts a quarter of the entries and caps the
// cache at what is left. Evicted programs come back from the disk cache
// without compiling.
static long mapping_budget(void) {
  long set = (long)tpu_env_get(TPU_ENV_CACHE_MAX_MAPPINGS, NULL);
  if (set > 0) return set;
  long limit = 0;
  FILE* f = fopen("/proc/sys/vm/max_map_count", "r");
  if (f) {
    if (fscanf(f, "%ld", &limit) != 1) limit = 0;
    fclose(f);
  }
  return limit / 2;
}

static void fit_in_mappings(tpu_cache_t* c) {
  enum { EVERY = 16, MIN_ENTRIES = 16 };
  if (c->mapping_budget == 0 || ++c->inserts < EVERY) return;
  c->inserts = 0;
  if (c->mapping_budget < 0) c->mapping_budget = mapping_budget();
  long used = c->mapping_budget > 0 ? count_lines("/proc/self/maps") : -1;
  if (used < 0) {  // no budget, or no way to count (not Linux): no check
    c->mapping_budget = 0;
    return;
  }
  if (used < c->mapping_budget || c->count <= MIN_ENTRIES) return;
  size_t keep = c->count - c->count / 4;
  if (keep < MIN_ENTRIES) keep = MIN_ENTRIES;
  while (c->count > keep && c->tail) {
    remove_entry(c, c->tail);
    ++c->stats.evictions;
  }
  c->capacity = keep;
  tpu_log(TPU_LOG_INFO, "compile cache in memory capped at %zu programs: the process holds %ld "
          "memory mappings (budget %ld)", keep, used, c->mapping_budget);
}

static void insert(tpu_cache_t* c, tpu_hash_t key, tpu_executable_t* exe) {
  size_t k = slot_of(c, key);
  if (c->table[k]) return;  // another thread got there first
  entry_t* e = tpu_calloc(1, sizeof *e);
  if (!e) return;  // not cached; still correct
  while (c->count >= c->capacity && c->tail) {
    remove_entry(c, c->tail);
    ++c->stats.evictions;
  }
  k = slot_of(c, key);
  e->key = key;
  e->exe = exe;
  tpu_executable_retain(exe);
  c->table[k] = e;
  push_front(c, e);
  ++c->count;
  fit_in_mappings(c);
}

tpu_status_t tpu_cache_get(tpu_cache_t* c, tpu_hash_t key, int num_replicas,
                           tpu_cache_print_fn print, void* user,
                           tpu_executable_t** out, tpu_cache_source_t* source) {
  *out = NULL;
  *source = TPU_CACHE_MEMORY;
  mtx_lock(&c->lock);
  size_t k = slot_of(c, key);
  if (c->table[k] || print) ++c->stats.requests;
  if (c->table[k]) {
    entry_t* e = c->table[k];
    unlink_entry(c, e);
    push_front(c, e);
    ++c->stats.hits;
    tpu_executable_retain(e->exe);
    *out = e->exe;
    mtx_unlock(&c->lock);
    return TPU_OK;
  }
  if (!print) {  // the memory tier only: the caller asks again
    mtx_unlock(&c->lock);
    return TPU_OK;
  }
  ++c->stats.misses;
  mtx_unlock(&c->lock);

  // Load or compile outside the lock: different programs overlap.
  char* text = NULL;
  size_t size = 0;
  TPU_RETURN_IF_ERROR(print(user, &text, &size));
  tpu_hash_t disk_key = tpu_hash_bytes(tpu_client_identity(c->client), text, size);
  disk_key = tpu_hash_u64(disk_key, (uint64_t)num_replicas);
  tpu_executable_t* exe = NULL;
  tpu_status_t s = TPU_OK;
  if (c->disk) s = tpu_disk_cache_load(c->disk, c->client, disk_key, num_replicas, &exe);
  // Read at each compile (tests set it within a process); a value it does
  // not take is the error, so that a check for no compiles never passes by
  // a typo.
  bool forbidden = !s && !exe && tpu_env_get(TPU_ENV_ASSERT_NO_COMPILE, &s);
  if (!s && exe) {
    *source = TPU_CACHE_DISK;
  } else if (!s && forbidden) {
    tpu_log(TPU_LOG_ERROR, "program compiled under TORCHTPU_ASSERT_NO_COMPILE=1:\n%s", text);
    s = tpu_status_make(TPU_CODE_FAILED_PRECONDITION,
                        "a compilation was requested while TORCHTPU_ASSERT_NO_COMPILE=1");
  } else if (!s) {
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    s = tpu_executable_compile(c->client, text, size, num_replicas, &exe);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    *source = TPU_CACHE_COMPILED;
    double seconds = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9;
    tpu_log(TPU_LOG_DEBUG, "%s program (%.1f ms):\n%s",
            s ? "failed to compile" : "compiled", seconds * 1e3, text);
    if (!s) {
      mtx_lock(&c->lock);
      c->stats.compile_seconds += seconds;
      ++c->stats.compiles;
      mtx_unlock(&c->lock);
      if (c->disk) tpu_disk_cache_store(c->disk, disk_key, num_replicas, exe);
    }
  }
  tpu_free(text);
  if (s) return s;
  mtx_lock(&c->lock);
  if (*source == TPU_CACHE_DISK) ++c->stats.disk_hits;
  insert(c, key, exe);
  mtx_unlock(&c->lock);
  *out = exe;
  return TPU_OK;
}

void tpu_cache_stats(tpu_cache_t* c, tpu_cache_stats_t* out) {
  mtx_lock(&c->lock);
  *out = c->stats;
  out->entries = (int64_t)c->count;
  mtx_unlock(&c->lock);
}

double tpu_cache_compile_seconds(tpu_cache_t* c) {
  mtx_lock(&c->lock);
  double s = c->stats.compile_seconds;
  mtx_unlock(&c->lock);
  return s;
}
