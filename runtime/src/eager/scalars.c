// 0-d device buffers for Python numbers, cached per device so that a loop
// passing the same learning rate uploads it once.
//
// Each use of a number is a parameter of its own (the uses of one op
// argument share one: tpu_lower_scalar), even where the graph
// already has one holding the same value: the program must not depend on
// which numbers happen to be equal. (When equal numbers shared a parameter,
// a learning rate that reached the momentum, or 0 where the weight decay is
// 0, made a program with one parameter fewer: a compile at that step, and an
// error under TORCHTPU_ASSERT_NO_COMPILE.)
#include <string.h>

#include "eager/eager.h"

enum { CAPACITY = 1024 };  // power of two; cleared when half full

typedef struct scalar_entry {
  tpu_buffer_t* buffer;  // NULL = empty
  tpu_dtype_t dtype;
  unsigned char bits[16];
} scalar_entry_t;

struct tpu_scalar_cache {
  scalar_entry_t entries[CAPACITY];
  int count;
};

void tpu_scalar_cache_destroy(struct tpu_scalar_cache* c) {
  if (!c) return;
  for (int i = 0; i < CAPACITY; ++i) tpu_buffer_release(c->entries[i].buffer);
  tpu_free(c);
}

static tpu_status_t lookup(tpu_dev_t* d, tpu_dtype_t dtype, const void* bits,
                          scalar_entry_t** out) {
  *out = NULL;
  if (!d->scalars) {
    d->scalars = tpu_calloc(1, sizeof *d->scalars);
    if (!d->scalars) return tpu_status_make(TPU_CODE_RESOURCE_EXHAUSTED, "out of memory");
  }
  struct tpu_scalar_cache* c = d->scalars;
  size_t size = tpu_dtype_size(dtype);
  unsigned char key[16] = {0};
  memcpy(key, bits, size);
  tpu_hash_t h = tpu_hash_bytes((tpu_hash_t){(uint64_t)dtype, 7}, key, sizeof key);
  unsigned k = (unsigned)h.lo & (CAPACITY - 1);
  for (; c->entries[k].buffer; k = (k + 1) & (CAPACITY - 1)) {
    scalar_entry_t* e = &c->entries[k];
    if (e->dtype == dtype && !memcmp(e->bits, key, sizeof key)) {
      *out = e;
      return TPU_OK;
    }
  }
  if (c->count >= CAPACITY / 2) {  // rare: many distinct numbers; start over
    for (int i = 0; i < CAPACITY; ++i) {
      tpu_buffer_release(c->entries[i].buffer);
      c->entries[i].buffer = NULL;
    }
    c->count = 0;
    k = (unsigned)h.lo & (CAPACITY - 1);
  }
  tpu_buffer_t* b = NULL;
  TPU_RETURN_IF_ERROR(tpu_buffer_from_host(tpu_rt()->client, d->index, dtype,
                                           NULL, 0, key, NULL, &b));
  tpu_metric_add(TPU_M_H2D_COPIES, 1);
  tpu_metric_add(TPU_M_H2D_BYTES, (int64_t)size);
  scalar_entry_t* e = &c->entries[k];
  e->buffer = b;
  e->dtype = dtype;
  memcpy(e->bits, key, sizeof key);
  ++c->count;
  *out = e;
  return TPU_OK;
}

tpu_val_t tpu_dev_scalar(tpu_dev_t* d, tpu_dtype_t dtype, const void* bits) {
  if (!tpu_graph_ok(d->graph)) return TPU_VAL_NONE;
  scalar_entry_t* e;
  tpu_status_t s = lookup(d, dtype, bits, &e);
  if (s) {
    tpu_graph_fail(d->graph, s);
    return TPU_VAL_NONE;
  }
  return tpu_dev_number_param(d, e->buffer);
}
