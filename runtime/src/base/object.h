// Refcounted objects: a struct that starts with tpu_object_t gets atomic
// retain/release; the last release calls its destroy function.
#ifndef TPU_BASE_OBJECT_H_
#define TPU_BASE_OBJECT_H_

#include <stdatomic.h>

typedef struct tpu_object {
  atomic_int refs;
  void (*destroy)(void* self);
} tpu_object_t;

static inline void tpu_object_init(tpu_object_t* o, void (*destroy)(void*)) {
  atomic_init(&o->refs, 1);
  o->destroy = destroy;
}

static inline void tpu_object_retain(tpu_object_t* o) {
  if (o) atomic_fetch_add_explicit(&o->refs, 1, memory_order_relaxed);
}

static inline void tpu_object_release(tpu_object_t* o) {
  if (o && atomic_fetch_sub_explicit(&o->refs, 1, memory_order_acq_rel) == 1)
    o->destroy(o);
}

static inline int tpu_object_refs(const tpu_object_t* o) {
  return atomic_load_explicit(&((tpu_object_t*)o)->refs, memory_order_acquire);
}

#endif  // TPU_BASE_OBJECT_H_
