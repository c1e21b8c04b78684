// Promises: the outputs and completion event of an execution that is not
// launched yet (its program compiles on another thread). They exist now,
// with their types, so the host goes on using them; what reads their
// contents waits until the promise is settled, and a broken promise reads
// as its failure.
#include "pjrt/pjrt_internal.h"

typedef struct waiter {
  struct waiter* next;
  void (*fn)(void* user, tpu_status_t status);
  void* user;
} waiter_t;

struct tpu_promise {
  tpu_object_t obj;
  tpu_client_t* client;
  mtx_t mu;
  cnd_t settled_cv;
  bool settled;
  tpu_status_t failure;  // a broken promise's
  bool raised;           // its failure was read from a buffer (tpu_buffer_failure)
  PJRT_Event* done;      // the execution's, once launched
  waiter_t* waiters;     // tpu_event_on_ready before it was settled
};

static void promise_destroy(void* self) {
  tpu_promise_t* p = self;
  tpu_pjrt_event_destroy(p->client->api, p->done);
  tpu_status_free(p->failure);
  cnd_destroy(&p->settled_cv);
  mtx_destroy(&p->mu);
  tpu_client_release(p->client);
  tpu_free(p);
}

tpu_status_t tpu_promise_create(tpu_client_t* c, tpu_promise_t** out) {
  *out = NULL;
  tpu_promise_t* p = tpu_calloc(1, sizeof *p);
  if (!p) return tpu_status_make(TPU_CODE_RESOURCE_EXHAUSTED, "out of memory");
  tpu_object_init(&p->obj, promise_destroy);
  mtx_init(&p->mu, mtx_plain);
  cnd_init(&p->settled_cv);
  tpu_client_retain(c);
  p->client = c;
  *out = p;
  return TPU_OK;
}

void tpu_promise_retain(tpu_promise_t* p) { if (p) tpu_object_retain(&p->obj); }
void tpu_promise_release(tpu_promise_t* p) { if (p) tpu_object_release(&p->obj); }

tpu_status_t tpu_promise_wait(tpu_promise_t* p, PJRT_Event** done) {
  mtx_lock(&p->mu);
  while (!p->settled) cnd_wait(&p->settled_cv, &p->mu);
  mtx_unlock(&p->mu);
  if (done) *done = p->done;  // written once, before settled
  return tpu_status_clone(p->failure);
}

tpu_client_t* tpu_promise_client(tpu_promise_t* p) { return p->client; }

bool tpu_promise_settled(tpu_promise_t* p) {
  mtx_lock(&p->mu);
  bool settled = p->settled;
  mtx_unlock(&p->mu);
  return settled;
}

tpu_status_t tpu_promise_failure(tpu_promise_t* p, bool raise) {
  mtx_lock(&p->mu);
  tpu_status_t f = p->settled ? tpu_status_clone(p->failure) : TPU_OK;
  if (f && raise) p->raised = true;
  mtx_unlock(&p->mu);
  return f;
}

bool tpu_promise_raised(tpu_promise_t* p) {
  mtx_lock(&p->mu);
  bool raised = p->raised;
  mtx_unlock(&p->mu);
  return raised;
}

tpu_status_t tpu_promise_on_settled(tpu_promise_t* p, void (*fn)(void*, tpu_status_t),
                                    void* user, bool* settled) {
  mtx_lock(&p->mu);
  *settled = p->settled;
  if (!*settled) {
    waiter_t* w = tpu_malloc(sizeof *w);
    if (!w) {
      mtx_unlock(&p->mu);
      return tpu_status_make(TPU_CODE_RESOURCE_EXHAUSTED, "out of memory");
    }
    *w = (waiter_t){p->waiters, fn, user};
    p->waiters = w;
  }
  mtx_unlock(&p->mu);
  return TPU_OK;
}

void tpu_promise_settle(tpu_promise_t* p, tpu_status_t failure, tpu_buffer_t** made,
                        tpu_buffer_t* const* outs, int n, tpu_event_t* done) {
  for (int i = 0; i < n; ++i) {
    if (failure) tpu_buffer_uncount(outs[i]);
    else tpu_buffer_fulfil(outs[i], made[i]);
  }
  mtx_lock(&p->mu);
  p->failure = failure;
  if (done) {
    p->done = done->handle;
    done->handle = NULL;
  }
  p->settled = true;
  waiter_t* w = p->waiters;
  p->waiters = NULL;
  cnd_broadcast(&p->settled_cv);
  mtx_unlock(&p->mu);
  tpu_event_destroy(done);
  while (w) {
    waiter_t* next = w->next;
    tpu_event_t e = {p->client->api, p->done, NULL};
    if (p->failure) {
      w->fn(w->user, tpu_status_clone(p->failure));
    } else if (!p->done) {
      w->fn(w->user, TPU_OK);
    } else {
      tpu_status_t s = tpu_event_on_ready(&e, w->fn, w->user);
      if (s) {  // no callback: wait here (this is not the host's thread)
        tpu_status_free(s);
        w->fn(w->user, tpu_event_await(&e));
      }
    }
    tpu_free(w);
    w = next;
  }
}
