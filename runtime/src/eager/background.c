// Compiling in the background (fused mode). A flush whose program is not
// in the memory cache becomes a job: its outputs are promised buffers (see
// tpu/client.h), the host goes on recording, and one worker thread loads or
// compiles the program, runs it and settles the promise. Flushes that come
// while a device has jobs queue behind them, so a device's executions keep
// the order of its flushes. The host thread keeps everything else: jobs
// are reaped (their buffers released, their compiles reported) under the
// device lock, and the buffers they hold do not count against donation, so
// a program never depends on how far the worker has got.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "eager/eager.h"

enum { MAX_QUEUED = 8 };  // the host waits beyond this: bounded memory

struct tpu_job {
  tpu_job_t* next_queued;  // the worker's queue
  tpu_job_t* next;         // its device's jobs, oldest first
  int device;
  tpu_hash_t key;
  tpu_executable_t* exe;  // NULL: load or compile it
  char* text;             // its program, when exe is NULL
  size_t size;
  tpu_buffer_t** params;  // retained
  int num_params;
  tpu_buffer_t** results;  // promised, retained
  int num_results;
  // Per result that a slot takes: the slot (retained) and the buffer it
  // held before (retained; NULL: none, or one known to be wrong), which it
  // gets back if the job fails to launch.
  tpu_slot_t** slots;
  tpu_buffer_t** before;
  int num_slots;
  tpu_promise_t* promise;
  char ops[160];  // what failed, for errors: "the 3 ops recorded from add to mul"
  tpu_compile_event_t event;
  char site[sizeof ((tpu_dev_t*)0)->first_site];
  tpu_cache_source_t source;  // where the worker found it (MEMORY when exe was given)
  bool done;                  // under the worker's lock
};

typedef struct tpu_background {
  mtx_t mu;
  cnd_t work_cv, done_cv;
  thrd_t thread;
  bool started, stop;
  tpu_job_t* head;  // queued, oldest first
  tpu_job_t** tail;
  int pending;  // queued or running
} tpu_background_t;

static tpu_background_t background;
static once_flag background_once = ONCE_FLAG_INIT;

static void background_init(void) {
  mtx_init(&background.mu, mtx_plain);
  cnd_init(&background.work_cv);
  cnd_init(&background.done_cv);
  background.tail = &background.head;
}

bool tpu_background_enabled(void) {
  return tpu_env_get(TPU_ENV_BACKGROUND_COMPILE, NULL) == 1;
}

static tpu_status_t take_text(void* user, char** text, size_t* size) {
  tpu_job_t* j = user;
  *text = j->text;
  *size = j->size;
  j->text = NULL;  // the cache frees it
  return *text ? TPU_OK : tpu_status_make(TPU_CODE_INTERNAL, "program printed twice");
}

static void run(tpu_job_t* j) {
  tpu_status_t s = TPU_OK;
  tpu_executable_t* exe = j->exe;
  j->exe = NULL;
  if (!exe) {
    s = tpu_get_program(j->key, take_text, j, &exe, &j->source);
    if (s) s = tpu_status_annotate(s, "compiling %s", j->ops);
  }
  tpu_buffer_t* small[64];
  tpu_buffer_t** made = j->num_results <= 64 ? small
                                             : tpu_calloc((size_t)j->num_results, sizeof *made);
  tpu_event_t* done = NULL;
  if (!s && !made) s = tpu_status_make(TPU_CODE_RESOURCE_EXHAUSTED, "out of host memory");
  if (!s) {  // its outputs count already (promised buffers)
    s = tpu_client_fits(tpu_rt()->client, j->device, tpu_executable_temp_bytes(exe));
    if (s) s = tpu_status_annotate(s, "running %s", j->ops);
  }
  if (!s) {
    for (int i = 0; i < j->num_results; ++i) tpu_buffer_uncount(j->results[i]);
    s = tpu_executable_execute(exe, j->device, j->params, j->num_params, NULL, 0, made,
                               j->num_results, &done);
    // Failed because an earlier job failed to make an input (the worker
    // runs jobs in order: it has settled): its failure as it is, which
    // names the ops that failed, not this job's.
    bool input_failed = false;
    for (int i = 0; s && i < j->num_params && !input_failed; ++i)
      input_failed = tpu_buffer_is_broken(j->params[i]);
    if (s && !input_failed) s = tpu_status_annotate(s, "running %s", j->ops);
    tpu_metric_add(TPU_M_EXECUTIONS, 1);
  }
  tpu_executable_release(exe);
  tpu_promise_settle(j->promise, s, made, j->results, j->num_results, done);
  if (made != small) tpu_free(made);
}

static int worker(void* arg) {
  tpu_background_t* b = arg;
  mtx_lock(&b->mu);
  for (;;) {
    while (!b->head && !b->stop) cnd_wait(&b->work_cv, &b->mu);
    tpu_job_t* j = b->head;
    if (!j) break;  // stopping, and nothing is left
    if (!(b->head = j->next_queued)) b->tail = &b->head;
    mtx_unlock(&b->mu);
    run(j);
    mtx_lock(&b->mu);
    j->done = true;  // the host may free it from here on
    --b->pending;
    cnd_broadcast(&b->done_cv);
  }
  mtx_unlock(&b->mu);
  return 0;
}

static tpu_status_t enqueue(tpu_job_t* j) {
  call_once(&background_once, background_init);
  tpu_background_t* b = &background;
  mtx_lock(&b->mu);
  if (!b->started) {
    b->stop = false;
    if (thrd_create(&b->thread, worker, b) != thrd_success) {
      mtx_unlock(&b->mu);
      return tpu_status_make(TPU_CODE_RESOURCE_EXHAUSTED, "cannot start the compile thread");
    }
    b->started = true;
  }
  while (b->pending >= MAX_QUEUED) cnd_wait(&b->done_cv, &b->mu);
  *b->tail = j;
  b->tail = &j->next_queued;
  ++b->pending;
  cnd_signal(&b->work_cv);
  mtx_unlock(&b->mu);
  return TPU_OK;
}

void tpu_background_stop(void) {
  call_once(&background_once, background_init);
  tpu_background_t* b = &background;
  mtx_lock(&b->mu);
  bool started = b->started;
  b->stop = true;
  cnd_signal(&b->work_cv);
  mtx_unlock(&b->mu);
  if (started) thrd_join(b->thread, NULL);
  b->started = false;
}

static void free_job(tpu_job_t* j) {
  for (int i = 0; i < j->num_params; ++i) tpu_buffer_release(j->params[i]);
  for (int i = 0; i < j->num_results; ++i) tpu_buffer_release(j->results[i]);
  for (int i = 0; i < j->num_slots; ++i) {
    tpu_slot_release(j->slots[i]);
    tpu_buffer_release(j->before[i]);
  }
  tpu_free(j->params);
  tpu_free(j->results);
  tpu_free(j->slots);
  tpu_free(j->before);
  tpu_free(j->text);
  tpu_executable_release(j->exe);
  tpu_promise_release(j->promise);
  tpu_free(j);
}

void tpu_dev_reap(tpu_dev_t* d, bool wait) {
  if (!d->jobs) return;
  tpu_background_t* b = &background;
  for (tpu_job_t* j; (j = d->jobs);) {
    mtx_lock(&b->mu);
    while (wait && !j->done) cnd_wait(&b->done_cv, &b->mu);
    bool done = j->done;
    mtx_unlock(&b->mu);
    if (!done) break;
    d->jobs = j->next;
    if (j->source != TPU_CACHE_MEMORY) {  // new to this process: compiled or from disk
      j->event.from_disk = j->source == TPU_CACHE_DISK;
      tpu_dev_report_program(&j->event);
    }
    tpu_status_t failed = tpu_promise_failure(j->promise, false);
    if (failed) {  // undone at the next sync (tpu_dev_undo_failed_jobs)
      tpu_status_free(failed);
      j->next = d->failed_jobs;
      d->failed_jobs = j;
    } else {
      free_job(j);
    }
  }
}

// Whether the job read the results of a job that failed to launch: it
// failed with that one (whatever its own message says, a compile failure
// found first, say), as a flush that reads them does.
static bool reads_a_failed_launch(const tpu_job_t* j) {
  for (int i = 0; i < j->num_params; ++i)
    if (tpu_buffer_is_broken(j->params[i])) return true;
  return false;
}

// A job that failed to launch never ran: the slots it wrote that still hold
// its results get back what they held before it (newest job first, so that
// a slot that several failed jobs wrote ends with its value from before the
// first). This waits for the next sync, so that until then every graph that
// reads those results fails too, whatever the compile thread's progress.
// The oldest failure not raised yet is returned; a later one waits for the
// next sync, unless it failed with an earlier one (it read its results, or
// says its failure).
tpu_status_t tpu_dev_undo_failed_jobs(tpu_dev_t* d) {
  tpu_dev_reap(d, true);
  tpu_job_t* oldest_first = NULL;
  for (tpu_job_t* j; (j = d->failed_jobs);) {
    d->failed_jobs = j->next;
    for (int i = 0; i < j->num_slots; ++i) {
      tpu_slot_t* slot = j->slots[i];
      if (!j->before[i] || slot->buffer != j->results[i]) continue;
      // Only the buffer: a write recorded since, still pending, stays.
      tpu_buffer_mark_kept(j->before[i]);
      tpu_buffer_retain(j->before[i]);
      tpu_buffer_release(slot->buffer);
      slot->buffer = j->before[i];
    }
    j->next = oldest_first;
    oldest_first = j;
  }
  tpu_status_t oldest = TPU_OK;
  for (tpu_job_t* j; (j = oldest_first);) {
    oldest_first = j->next;
    tpu_status_t f = tpu_promise_raised(j->promise) ? TPU_OK
                                                    : tpu_promise_failure(j->promise, true);
    if (!oldest) oldest = f;
    else if (f && (reads_a_failed_launch(j) || tpu_same_failure(f, oldest))) tpu_status_free(f);
    else tpu_dev_report(d, f);
    free_job(j);
  }
  tpu_status_t deferred = d->deferred;
  d->deferred = NULL;
  if (!oldest) oldest = deferred;
  else if (deferred && tpu_same_failure(deferred, oldest)) tpu_status_free(deferred);
  else tpu_dev_report(d, deferred);
  return oldest;
}

void tpu_wait_compiles(void) {
  if (tpu_forked_child()) return;  // the compile thread is the parent's
  tpu_runtime_t* rt = tpu_rt();
  for (int i = 0; rt && i < rt->num_devices; ++i) {
    tpu_dev_t* d = &rt->devices[i];
    tpu_dev_lock(d);
    tpu_dev_reap(d, true);
    tpu_dev_unlock(d);
  }
}

int tpu_dev_job_holds(const tpu_dev_t* d, const tpu_buffer_t* buffer) {
  int holds = 0;
  for (const tpu_job_t* j = d->jobs; j; j = j->next) {
    for (int i = 0; i < j->num_params; ++i) holds += j->params[i] == buffer;
    for (int i = 0; i < j->num_results; ++i) holds += j->results[i] == buffer;
    for (int i = 0; i < j->num_slots; ++i) holds += j->before[i] == buffer;
  }
  return holds;
}

tpu_status_t tpu_dev_launch_later(tpu_dev_t* d, tpu_hash_t key, tpu_executable_t* exe,
                                  const tpu_program_output_t* outs, int n,
                                  tpu_slot_t* const* slots, int num_slots,
                                  tpu_buffer_t** results, tpu_event_t** done) {
  tpu_graph_t* g = d->graph;
  tpu_job_t* j = tpu_calloc(1, sizeof *j);
  tpu_status_t s = j ? tpu_promise_create(tpu_rt()->client, &j->promise)
                     : tpu_status_make(TPU_CODE_RESOURCE_EXHAUSTED, "out of host memory");
  if (!s) {
    j->device = d->index;
    j->key = key;
    j->exe = exe;
    exe = NULL;
    j->params = tpu_malloc(sizeof *j->params * ((size_t)d->num_params + 1));
    j->results = tpu_calloc((size_t)n, sizeof *j->results);
    j->slots = tpu_malloc(sizeof *j->slots * ((size_t)num_slots + 1));
    j->before = tpu_malloc(sizeof *j->before * ((size_t)num_slots + 1));
    if (!j->params || !j->results || !j->slots || !j->before)
      s = tpu_status_make(TPU_CODE_RESOURCE_EXHAUSTED, "out of host memory");
  }
  for (int i = 0; !s && i < num_slots; ++i) {
    tpu_slot_t* slot = slots[i];
    tpu_buffer_t* b = slot->poison || slot->suspicion ? NULL : slot->buffer;
    tpu_slot_retain(slot);
    tpu_buffer_retain(b);
    j->slots[j->num_slots] = slot;
    j->before[j->num_slots++] = b;
  }
  for (int p = 0; !s && p < d->num_params; ++p) {
    tpu_buffer_retain(d->params[p]);
    j->params[j->num_params++] = d->params[p];
  }
  for (int o = 0; !s && o < n; ++o) {
    const tpu_type_t* t = tpu_ir_type(g, outs[o].value);
    s = tpu_buffer_promised(j->promise, d->index, t->dtype, t->dims, t->rank, &results[o]);
    if (!s) {
      tpu_buffer_retain(results[o]);
      j->results[j->num_results++] = results[o];
    }
  }
  if (!s) s = tpu_event_promised(j->promise, done);
  if (!s) tpu_dev_describe_ops(d, j->ops, sizeof j->ops);
  if (!s && !j->exe) {
    tpu_dev_compile_event(d, key, &j->event);
    snprintf(j->site, sizeof j->site, "%s", d->first_site);
    j->event.first_site = j->site;
    s = tpu_graph_print(g, outs, n, 1, &j->text, &j->size);
  }
  if (!s) s = enqueue(j);
  if (s) {
    tpu_executable_release(exe);
    if (j) {
      for (int o = 0; o < n; ++o) {
        tpu_buffer_release(results[o]);
        results[o] = NULL;
      }
      tpu_event_destroy(*done);
      *done = NULL;
      free_job(j);
    }
    return s;
  }
  tpu_job_t** tail = &d->jobs;
  while (*tail) tail = &(*tail)->next;
  *tail = j;
  return TPU_OK;
}
