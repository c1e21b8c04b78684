// Points in a device's work. Recording one registers a completion callback
// on every execution still running on the device; the last to end stamps
// the time. Waiting and querying never touch the device, so an event can be
// waited for while other threads record.
#include <time.h>

#include "eager/eager.h"

struct tpu_point {
  atomic_int refs;  // the owner's, and one per callback still to come
  mtx_t mu;
  cnd_t reached_cv;
  int pending;         // executions not yet ended (+1 while recording)
  int64_t reached_ns;  // CLOCK_MONOTONIC, once pending is 0
  tpu_status_t error;  // the first execution error
};

static int64_t now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

// One of the point's executions has ended (or the recording has).
static void arrive(tpu_point_t* p, tpu_status_t s) {
  mtx_lock(&p->mu);
  if (s && !p->error) p->error = s;
  else tpu_status_free(s);
  if (--p->pending == 0) {
    p->reached_ns = now_ns();
    cnd_broadcast(&p->reached_cv);
  }
  mtx_unlock(&p->mu);
}

static void execution_ended(void* user, tpu_status_t s) {
  arrive(user, s);
  tpu_point_release(user);
}

tpu_status_t tpu_point_record(int device, tpu_point_t** out) {
  *out = NULL;
  TPU_RETURN_IF_ERROR(tpu_runtime_init());
  tpu_dev_t* d;
  TPU_RETURN_IF_ERROR(tpu_dev_get(device, &d));
  tpu_point_t* p = tpu_calloc(1, sizeof *p);
  if (!p) return tpu_status_make(TPU_CODE_RESOURCE_EXHAUSTED, "out of memory");
  mtx_init(&p->mu, mtx_plain);
  cnd_init(&p->reached_cv);
  atomic_init(&p->refs, 1);
  p->pending = 1;
  tpu_dev_lock(d);
  tpu_status_free(tpu_dev_flush(d));
  for (int i = 0; i < d->num_inflight; ++i) {
    if (tpu_event_is_ready(d->inflight[i])) continue;
    mtx_lock(&p->mu);
    ++p->pending;
    mtx_unlock(&p->mu);
    atomic_fetch_add(&p->refs, 1);
    tpu_status_t s = tpu_event_on_ready(d->inflight[i], execution_ended, p);
    if (s) {  // no callback: wait for that execution here instead
      tpu_status_free(s);
      execution_ended(p, tpu_event_await(d->inflight[i]));
    }
  }
  tpu_dev_unlock(d);
  arrive(p, TPU_OK);
  *out = p;
  return TPU_OK;
}

bool tpu_point_reached(tpu_point_t* p) {
  mtx_lock(&p->mu);
  bool reached = p->pending == 0;
  mtx_unlock(&p->mu);
  return reached;
}

tpu_status_t tpu_point_wait(tpu_point_t* p) {
  mtx_lock(&p->mu);
  while (p->pending) cnd_wait(&p->reached_cv, &p->mu);
  tpu_status_t s = p->error ? tpu_status_clone(p->error) : TPU_OK;
  mtx_unlock(&p->mu);
  return s;
}

double tpu_point_elapsed_ms(tpu_point_t* start, tpu_point_t* end) {
  int64_t t[2];
  tpu_point_t* ps[2] = {start, end};
  for (int i = 0; i < 2; ++i) {
    mtx_lock(&ps[i]->mu);
    t[i] = ps[i]->reached_ns;
    mtx_unlock(&ps[i]->mu);
  }
  return (double)(t[1] - t[0]) / 1e6;
}

void tpu_point_release(tpu_point_t* p) {
  if (!p || atomic_fetch_sub(&p->refs, 1) != 1) return;
  tpu_status_free(p->error);
  cnd_destroy(&p->reached_cv);
  mtx_destroy(&p->mu);
  tpu_free(p);
}
