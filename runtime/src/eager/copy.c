// Host transfers, device-to-device copies, synchronization.
#include <string.h>

#include "eager/eager.h"

// A buffer holding exactly `v` (dense, the view's dtype): the slot's own
// buffer when the view is all of it, else a computed copy. Flushes the
// device, which is a deterministic flush point in fused mode. The caller
// checks the slot's poison after (see failed_value).
static tpu_status_t materialize(tpu_dev_t* d, const tpu_view_t* v,
                                tpu_buffer_t** out) {
  *out = NULL;
  tpu_slot_t* s = v->slot;
  // A whole slot recorded but not run yet (fused mode) gets its buffer from
  // the flush: a copy recorded into another slot would be a second output
  // of the same value, computed and held twice.
  if (tpu_view_is_whole(v) && s->dtype == v->dtype && (s->buffer || s->pending_gen == d->gen)) {
    TPU_RETURN_IF_ERROR(tpu_dev_flush(d));
    if (s->buffer) {
      *out = s->buffer;
      tpu_buffer_retain(*out);
      return TPU_OK;
    }
  }
  int64_t n = tpu_view_numel(v);
  tpu_slot_t* tmp = NULL;
  TPU_RETURN_IF_ERROR(tpu_slot_create(d->index, (size_t)n * tpu_dtype_size(v->dtype), &tmp));
  tpu_mark_t mark;
  tpu_dev_begin(d, &mark);
  tpu_view_t whole = tpu_view_contiguous(tmp, v->dtype, &n, 1);
  int64_t flat_shape = n;
  tpu_dev_write(d, &whole, tpu_ir_reshape(d->graph, tpu_dev_read(d, v), &flat_shape, 1));
  tpu_status_t st = tpu_graph_take_error(d->graph);
  if (st) tpu_dev_rollback(d, &mark);
  if (!st) st = tpu_dev_flush(d);
  if (!st) {
    *out = tmp->buffer;
    tpu_buffer_retain(*out);
  }
  tpu_slot_release(tmp);
  return st;
}

// The error that makes the slot's value (materialized) wrong, or TPU_OK.
static tpu_status_t failed_value(tpu_dev_t* d, tpu_slot_t* s) {
  tpu_status_t p = tpu_dev_poison(d, s);
  return p ? tpu_status_annotate(tpu_status_clone(p), "this tensor holds the result of a "
                                                      "computation that failed")
           : TPU_OK;
}

tpu_status_t tpu_copy_to_host(const tpu_view_t* src, void* data, size_t size) {
  int64_t n = tpu_view_numel(src);
  size_t need = (size_t)n * tpu_dtype_size(src->dtype);
  if (size < need)
    return tpu_status_make(TPU_CODE_INVALID_ARGUMENT,
                           "host buffer of %zu bytes is too small for %zu bytes",
                           size, need);
  tpu_dev_t* d;
  TPU_RETURN_IF_ERROR(tpu_dev_get(src->slot->device, &d));
  tpu_buffer_t* b = NULL;
  tpu_dev_lock(d);
  tpu_status_t s = n ? materialize(d, src, &b) : tpu_dev_flush(d);
  // Device-side errors of everything run so far surface at a host read;
  // those that come with a failure of the read's own wait for the next sync.
  s = tpu_dev_check(d, s);
  if (!s && b) s = failed_value(d, src->slot);
  tpu_dev_unlock(d);
  if (!s && b) s = tpu_buffer_to_host(b, data, need);
  if (s && b) {  // computed by a program that failed to compile or run in the background
    tpu_status_t f = tpu_buffer_failure(b);
    if (f) {
      tpu_status_free(s);
      s = tpu_status_annotate(f, "this tensor holds the result of a computation that failed");
    }
  }
  tpu_buffer_release(b);
  tpu_metric_add(TPU_M_HOST_SYNCS, 1);
  tpu_metric_add(TPU_M_D2H_COPIES, 1);
  tpu_metric_add(TPU_M_D2H_BYTES, (int64_t)need);
  return s;
}

tpu_status_t tpu_copy_from_host(const tpu_view_t* dst, const void* data) {
  int64_t n = tpu_view_numel(dst);
  if (n == 0) return TPU_OK;
  tpu_dev_t* d;
  TPU_RETURN_IF_ERROR(tpu_dev_get(dst->slot->device, &d));
  tpu_buffer_t* b = NULL;
  TPU_RETURN_IF_ERROR(tpu_buffer_from_host(tpu_rt()->client, d->index, dst->dtype,
                                           &n, 1, data, NULL, &b));
  tpu_metric_add(TPU_M_H2D_COPIES, 1);
  tpu_metric_add(TPU_M_H2D_BYTES, (int64_t)tpu_buffer_nbytes(b));
  tpu_dev_lock(d);
  tpu_status_t s = TPU_OK;
  if (tpu_view_is_whole(dst)) {
    tpu_dev_set_buffer(d, dst->slot, b);
  } else {
    tpu_mark_t mark;
    tpu_dev_begin(d, &mark);
    tpu_val_t v = tpu_ir_reshape(d->graph, tpu_dev_param(d, b), dst->sizes, dst->rank);
    tpu_dev_write(d, dst, v);
    s = tpu_graph_take_error(d->graph);
    if (s) tpu_dev_rollback(d, &mark);
    else s = tpu_dev_after_op(d, -1);
  }
  tpu_dev_unlock(d);
  tpu_buffer_release(b);
  return s;
}

// Reads src (a value on d) broadcast to dst's shape and writes it.
static tpu_status_t write_broadcast(tpu_dev_t* d, const tpu_view_t* dst,
                                    tpu_val_t v) {
  tpu_graph_t* g = d->graph;
  int rank = tpu_ir_rank(g, v);
  if (rank > dst->rank)
    return tpu_status_make(TPU_CODE_INVALID_ARGUMENT,
                           "copy: source of rank %d does not fit a destination "
                           "of rank %d", rank, dst->rank);
  int64_t bdims[TPU_MAX_RANK];
  const int64_t* sd = tpu_ir_dims(g, v);
  for (int i = 0; i < rank; ++i) {
    int j = dst->rank - rank + i;
    if (sd[i] != 1 && sd[i] != dst->sizes[j])
      return tpu_status_make(TPU_CODE_INVALID_ARGUMENT,
                             "The size of tensor a (%lld) must match the size "
                             "of tensor b (%lld) at non-singleton dimension %d",
                             (long long)dst->sizes[j], (long long)sd[i], j);
    bdims[i] = j;
  }
  tpu_dev_write(d, dst, tpu_ir_broadcast(g, v, dst->sizes, dst->rank, bdims));
  return TPU_OK;
}

tpu_status_t tpu_copy(const tpu_view_t* dst, const tpu_view_t* src) {
  tpu_dev_t *dd, *sd;
  TPU_RETURN_IF_ERROR(tpu_dev_get(dst->slot->device, &dd));
  TPU_RETURN_IF_ERROR(tpu_dev_get(src->slot->device, &sd));
  tpu_buffer_t* moved = NULL;
  if (sd != dd) {  // bring the source over as a dense buffer
    tpu_buffer_t* b = NULL;
    tpu_dev_lock(sd);
    tpu_status_t s = materialize(sd, src, &b);
    // Checks belong to their device: read the ones the value depends on
    // here rather than carry them to the other device.
    if (!s && src->slot->suspicion) s = tpu_dev_check(sd, TPU_OK);
    if (!s) s = failed_value(sd, src->slot);
    tpu_dev_unlock(sd);
    if (!s) s = tpu_buffer_copy_to_device(b, dd->index, &moved);
    tpu_buffer_release(b);
    if (s) return s;
  }
  tpu_dev_lock(dd);
  tpu_mark_t mark;
  tpu_dev_begin(dd, &mark);
  tpu_val_t v = moved ? tpu_ir_reshape(dd->graph, tpu_dev_param(dd, moved),
                                       src->sizes, src->rank)
                      : tpu_dev_read(dd, src);
  tpu_status_t s = write_broadcast(dd, dst, v);
  if (!s) s = tpu_graph_take_error(dd->graph);
  if (s) tpu_dev_rollback(dd, &mark);
  else s = tpu_dev_after_op(dd, -1);
  tpu_dev_unlock(dd);
  tpu_buffer_release(moved);
  return s;
}

// Calls `fn` for the device (-1: each device) under its lock; the first failure.
static tpu_status_t for_devices(int device, tpu_status_t (*fn)(tpu_dev_t*)) {
  TPU_RETURN_IF_ERROR(tpu_runtime_init());
  int lo = device < 0 ? 0 : device, hi = device < 0 ? tpu_device_count() : device + 1;
  tpu_status_t first = TPU_OK;
  for (int i = lo; i < hi; ++i) {
    tpu_dev_t* d;
    TPU_RETURN_IF_ERROR(tpu_dev_get(i, &d));
    tpu_dev_lock(d);
    tpu_status_t s = fn(d);
    // One failure is raised; another device's waits for that device's next sync.
    if (s && first) tpu_dev_report(d, s);
    else if (s) first = s;
    tpu_dev_unlock(d);
  }
  return first;
}

// Raises the failure of the flush, else of an execution, else the oldest
// found; the others found with it wait for the next syncs.
static tpu_status_t synchronize(tpu_dev_t* d) {
  tpu_status_t s = tpu_dev_flush(d);
  tpu_status_t w = tpu_dev_wait_all(d);
  if (!s) s = w;
  else tpu_dev_report(d, w);
  return tpu_dev_check(d, s);
}

static tpu_status_t flush_deferred(tpu_dev_t* d) {
  tpu_status_t s = tpu_dev_flush(d);
  if (!d->deferred) d->deferred = s;
  else tpu_dev_report(d, s);  // a later pass's: raised at a later sync
  return TPU_OK;
}

tpu_status_t tpu_synchronize(int device) {
  tpu_status_t s = for_devices(device, synchronize);
  tpu_metric_add(TPU_M_HOST_SYNCS, 1);
  return s;
}

tpu_status_t tpu_flush(int device) { return for_devices(device, tpu_dev_flush); }

void tpu_flush_deferred(int device) { tpu_status_free(for_devices(device, flush_deferred)); }

tpu_status_t tpu_wait_launches(int device) {
  return for_devices(device, tpu_dev_undo_failed_jobs);
}

static tpu_status_t quiesce(tpu_dev_t* d) {
  tpu_status_free(tpu_dev_undo_failed_jobs(d));  // what the compile thread launches
  return tpu_dev_wait_all(d);
}

void tpu_quiesce(void) { tpu_status_free(for_devices(-1, quiesce)); }
