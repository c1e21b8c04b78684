// The replaceable process-wide allocator, counting live allocations.
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "tpu/base.h"

static tpu_allocator_t current = {malloc, realloc, free};
static atomic_llong live;

void tpu_allocator_replace(const tpu_allocator_t* allocator) {
  current = *allocator;
}

void* tpu_malloc(size_t size) {
  if (size == 0) return NULL;
  void* p = current.malloc_fn(size);
  if (p) atomic_fetch_add_explicit(&live, 1, memory_order_relaxed);
  return p;
}

void* tpu_calloc(size_t count, size_t size) {
  if (count && size > SIZE_MAX / count) return NULL;
  void* p = tpu_malloc(count * size);
  if (p) memset(p, 0, count * size);
  return p;
}

void* tpu_realloc(void* ptr, size_t size) {
  if (!ptr) return tpu_malloc(size);
  if (size == 0) {
    tpu_free(ptr);
    return NULL;
  }
  return current.realloc_fn(ptr, size);
}

void tpu_free(void* ptr) {
  if (!ptr) return;
  atomic_fetch_sub_explicit(&live, 1, memory_order_relaxed);
  current.free_fn(ptr);
}

char* tpu_strndup(const char* s, size_t n) {
  char* d = tpu_malloc(n + 1);
  if (d) {
    memcpy(d, s, n);
    d[n] = 0;
  }
  return d;
}

char* tpu_strdup(const char* s) { return tpu_strndup(s, strlen(s)); }

int64_t tpu_alloc_live(void) {
  return atomic_load_explicit(&live, memory_order_relaxed);
}
