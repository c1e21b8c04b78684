// Points in a device's work. Recording one registers a completion callback
// on every execution still running on the device; the last to end stamps
// the time. Waiting and querying never touch the device, so an event can be
// waited for while other threads record. PJRT marks an execution's event
// ready before it runs the event's callbacks, so a device wait also waits
// for the callbacks (tpu_dev_await_points): after torch.tpu.synchronize(),
// every event recorded before it is complete, as with CUDA. So is every
// event recorded before a complete one: each point waits for every
// execution launched before it that had not ended.
#include <time.h>

#include "eager/eager.h"

struct tpu_point {
  atomic_int refs;  // the owner's, and one per callback still to come
  mtx_t mu;
  cnd_t reached_cv;
  int pending;         // executions not yet ended (+1 while recording)
  int64_t reached_ns;  // CLOCK_MONOTONIC, once pending is 0
  tpu_status_t error;  // the first execution error
  tpu_dev_t* dev;
  uint64_t order;      // 1 for the device's first point, 2 for the next...
};

// Signals the end of point callbacks to tpu_dev_await_points.
static mtx_t callbacks_mu;
static cnd_t callbacks_cv;
static once_flag callbacks_once = ONCE_FLAG_INIT;

static void callbacks_init(void) {
  mtx_init(&callbacks_mu, mtx_plain);
  cnd_init(&callbacks_cv);
}

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
    // Before a waiter wakes: the points recorded before this one are reached.
    uint64_t latest = atomic_load(&p->dev->point_reached);
    while (latest < p->order &&
           !atomic_compare_exchange_weak(&p->dev->point_reached, &latest, p->order)) {
    }
    cnd_broadcast(&p->reached_cv);
  }
  mtx_unlock(&p->mu);
}

static void execution_ended(void* user, tpu_status_t s) {
  tpu_point_t* p = user;
  tpu_dev_t* d = p->dev;
  arrive(p, s);
  tpu_point_release(p);
  mtx_lock(&callbacks_mu);
  if (atomic_fetch_sub(&d->point_callbacks, 1) == 1) cnd_broadcast(&callbacks_cv);
  mtx_unlock(&callbacks_mu);
}

void tpu_dev_await_points(tpu_dev_t* d) {
  call_once(&callbacks_once, callbacks_init);
  mtx_lock(&callbacks_mu);
  while (atomic_load(&d->point_callbacks) > 0) cnd_wait(&callbacks_cv, &callbacks_mu);
  mtx_unlock(&callbacks_mu);
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
  p->dev = d;
  call_once(&callbacks_once, callbacks_init);
  tpu_dev_lock(d);
  p->order = ++d->points_recorded;
  // A point raises nothing: a graph that fails to launch here (fused mode)
  // changed nothing, which the next sync says.
  tpu_dev_report(d, tpu_dev_flush(d));
  for (int i = 0; i < d->num_inflight; ++i) {
    if (tpu_event_is_ready(d->inflight[i])) continue;
    mtx_lock(&p->mu);
    ++p->pending;
    mtx_unlock(&p->mu);
    atomic_fetch_add(&p->refs, 1);
    atomic_fetch_add(&d->point_callbacks, 1);
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
  return reached || atomic_load(&p->dev->point_reached) >= p->order;
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
  for (int i = 0; i < 2; ++i) {  // reached: the time stamp is on its way
    mtx_lock(&ps[i]->mu);
    while (ps[i]->pending) cnd_wait(&ps[i]->reached_cv, &ps[i]->mu);
    t[i] = ps[i]->reached_ns;
    mtx_unlock(&ps[i]->mu);
  }
  // A stamp is the time of its point's last callback, a few microseconds
  // after the work ended: when the end's work ended right after the
  // start's, the end's callback may come first.
  return t[1] > t[0] ? (double)(t[1] - t[0]) / 1e6 : 0.0;
}

void tpu_point_release(tpu_point_t* p) {
  if (!p || atomic_fetch_sub(&p->refs, 1) != 1) return;
  tpu_status_free(p->error);
  cnd_destroy(&p->reached_cv);
  mtx_destroy(&p->mu);
  tpu_free(p);
}
