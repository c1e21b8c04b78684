// Running a device's graph: outputs are the live slots it wrote; the program
// is found in the compile cache by structural hash; slots get the results.
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "eager/eager.h"

void tpu_dev_begin(tpu_dev_t* d, tpu_mark_t* m) {
  m->nodes = tpu_graph_node_count(d->graph);
  m->num_params = d->num_params;
  m->num_written = d->num_written;
  m->num_asserts = d->num_asserts;
  m->num_inherited = d->num_inherited;
  d->num_undo = 0;
}

static void drop_inherited(tpu_dev_t* d, int keep) {
  for (int i = keep; i < d->num_inherited; ++i) tpu_suspicion_release(d->inherited[i].suspicion);
  d->num_inherited = keep;
}

void tpu_dev_rollback(tpu_dev_t* d, const tpu_mark_t* m) {
  for (int i = d->num_undo - 1; i >= 0; --i) {
    tpu_undo_t* u = &d->undo[i];
    u->slot->pending = u->pending;
    u->slot->dtype = u->dtype;
  }
  d->num_undo = 0;
  for (int i = m->num_written; i < d->num_written; ++i) {
    d->written[i]->pending_gen = 0;
    tpu_slot_release(d->written[i]);
  }
  d->num_written = m->num_written;
  for (int i = m->num_asserts; i < d->num_asserts; ++i)
    tpu_status_free(d->asserts[i].status);
  d->num_asserts = m->num_asserts;
  drop_inherited(d, m->num_inherited);
  for (int i = m->num_params; i < d->num_params; ++i) tpu_buffer_release(d->params[i]);
  if (d->num_params != m->num_params) ++d->param_epoch;  // stale param nodes
  d->num_params = m->num_params;
  tpu_graph_truncate(d->graph, m->nodes);
}

// Forgets the recorded graph (after running it, or to drop it).
static void clear_graph(tpu_dev_t* d) {
  for (int i = 0; i < d->num_params; ++i) tpu_buffer_release(d->params[i]);
  d->num_params = 0;
  for (int i = 0; i < d->num_written; ++i) tpu_slot_release(d->written[i]);
  d->num_written = 0;
  for (int i = 0; i < d->num_asserts; ++i) tpu_status_free(d->asserts[i].status);
  d->num_asserts = 0;
  d->num_suspects = 0;
  d->suspect_all = false;
  drop_inherited(d, 0);
  d->num_undo = 0;
  d->num_ops = 0;
  d->first_op = -1;
  d->first_site[0] = '\0';
  d->ops_hash = (tpu_hash_t){0, 0};
  tpu_loop_flushed(&d->loop);
  tpu_graph_reset(d->graph);
  ++d->gen;
}

static tpu_compile_hook_fn compile_hook;
static void* compile_hook_user;
static atomic_llong steps_taken;

void tpu_step_mark(void) { atomic_fetch_add_explicit(&steps_taken, 1, memory_order_relaxed); }
int64_t tpu_steps_taken(void) { return atomic_load_explicit(&steps_taken, memory_order_relaxed); }
void tpu_steps_reset(void) { atomic_store_explicit(&steps_taken, 0, memory_order_relaxed); }

void tpu_set_compile_hook(tpu_compile_hook_fn hook, void* user) {
  compile_hook = hook;
  compile_hook_user = user;
}

void tpu_dev_compile_event(const tpu_dev_t* d, tpu_hash_t program, tpu_compile_event_t* e) {
  memset(e, 0, sizeof *e);
  e->device = d->index;
  e->first_op = d->first_op;
  e->first_site = d->first_site;
  e->num_ops = d->num_ops;
  e->ops_hash = d->ops_hash;
  // Tensors and numbers apart: whether a number is an input or built into
  // the program depends on its value where an op special-cases some (pow's
  // exponent 2 or 0.5, add's alpha 1). That is a constant that changed, not
  // an input's type.
  tpu_hash_t h = {0x696e, 0x7075}, numbers = {0x6e75, 0x6d62};
  for (int p = 0; p < d->num_params; ++p) {
    tpu_buffer_t* b = d->params[p];
    if (d->param_is_number[p]) {
      numbers = tpu_hash_u64(numbers, (uint64_t)tpu_buffer_dtype(b));
      continue;
    }
    h = tpu_hash_u64(h, (uint64_t)tpu_buffer_dtype(b));
    h = tpu_hash_bytes(h, tpu_buffer_dims(b), sizeof(int64_t) * (size_t)tpu_buffer_rank(b));
    ++e->tensor_inputs;
  }
  e->inputs_hash = h;
  e->numbers_hash = numbers;
  e->program_hash = program;
  e->step = tpu_steps_taken();
  tpu_metrics_t m;
  tpu_metrics_get(&m);
  e->reads = m.host_syncs;
  e->hits = m.cache_hits;
}

void tpu_dev_report_program(const tpu_compile_event_t* e) {
  if (compile_hook) compile_hook(compile_hook_user, e);
}

tpu_status_t tpu_get_program(tpu_hash_t key, tpu_cache_print_fn print, void* user,
                             tpu_executable_t** exe, tpu_cache_source_t* source) {
  tpu_cache_t* cache = tpu_rt()->cache;
  double before = tpu_cache_compile_seconds(cache);
  TPU_RETURN_IF_ERROR(tpu_cache_get(cache, key, 1, print, user, exe, source));
  if (!*exe) return TPU_OK;  // not in memory, and not asked to look further
  if (*source == TPU_CACHE_COMPILED) {
    tpu_metric_add(TPU_M_COMPILES, 1);
    tpu_metric_add(TPU_M_COMPILE_NS,
                   (int64_t)((tpu_cache_compile_seconds(cache) - before) * 1e9));
  }
  tpu_metric_add(*source == TPU_CACHE_MEMORY ? TPU_M_CACHE_HITS : TPU_M_CACHE_MISSES, 1);
  if (*source == TPU_CACHE_DISK) tpu_metric_add(TPU_M_DISK_HITS, 1);
  return TPU_OK;
}

typedef struct print_args {
  const tpu_graph_t* g;
  const tpu_program_output_t* outs;
  int n;
} print_args_t;

static tpu_status_t print_program(void* user, char** text, size_t* size) {
  print_args_t* a = user;
  return tpu_graph_print(a->g, a->outs, a->n, 1, text, size);
}

static const char* op_name(int op) { return op >= 0 ? tpu_op_name(op) : "copy"; }

void tpu_dev_describe_ops(const tpu_dev_t* d, char* buf, size_t size) {
  if (d->num_ops > 1)
    snprintf(buf, size, "the %d ops recorded from %s to %s", d->num_ops,
             op_name(d->first_op), op_name(d->last_op));
  else
    snprintf(buf, size, "%s", op_name(d->first_op));
}

// Says which recorded ops a failed compile or launch was for (in fused mode
// it fails at a flush point, lines after them).
static tpu_status_t name_ops(const tpu_dev_t* d, const char* doing, tpu_status_t s) {
  if (!s) return s;
  char ops[160];
  tpu_dev_describe_ops(d, ops, sizeof ops);
  return tpu_status_annotate(s, "%s %s", doing, ops);
}

enum { STACK_OUTS = 64 };

// The sequence number up to which every execution has finished.
static uint64_t finished_seq(tpu_dev_t* d) {
  for (int i = 0; i < d->num_inflight; ++i)
    if (!tpu_event_is_ready(d->inflight[i])) return d->inflight_seq[i] - 1;
  return d->exec_seq;
}

// A parameter's buffer can be donated when nothing holds it after the
// execution: only the parameter list (once: a buffer passed twice cannot be
// donated) and slots that this execution overwrites (their old value dies).
// Earlier flushes still queued on the compile thread run first, so what
// they hold does not count: the program does not depend on their progress.
static bool donatable(tpu_dev_t* d, tpu_buffer_t* b, tpu_slot_t* const* out_slots,
                      int num_out) {
  int uses = 0, dying = 0;
  for (int p = 0; p < d->num_params; ++p) uses += d->params[p] == b;
  for (int o = 0; o < num_out; ++o) dying += out_slots[o]->buffer == b;
  return uses == 1 && tpu_buffer_refs(b) - tpu_dev_job_holds(d, b) == uses + dying;
}

// The donors that a running execution still reads or writes, in strict
// mode: PJRT would block the host until that execution ends before reusing
// their memory, so they are kept (their outputs get new buffers) and the
// host goes on issuing ops while the device works; a kept buffer is one
// op's. Fused mode donates them all the same: its graphs update whole model
// states (an optimizer step rewrites every parameter while the backward
// graph still reads them), which keeping would hold twice; waiting for the
// backward graph cost no time on the CPU plugin (the host and XLA share
// its cores), and an accelerator's PJRT client, whose executions are
// ordered on a stream, need not hold the host at all (not yet measured).
// Which donors are kept depends on timing, so it is decided at each
// execution and never changes the compiled program.
static int busy_donors(tpu_dev_t* d, uint64_t finished, const tpu_program_output_t* outs, int n,
                       int64_t* keep) {
  int k = 0;
  for (int o = 0; o < n; ++o) {
    int p = outs[o].donor_param;
    if (p >= 0 && tpu_buffer_last_use(d->params[p]) > finished) keep[k++] = p;
  }
  return k;
}

// A slot that the graph overwrites without reading it (zero_, fill_, a
// copy_ into a whole tensor) offers its old buffer as a parameter that the
// program only writes through, so that donation can reuse it: otherwise
// the write takes a whole new buffer while the old one dies only after it
// (twice the tensor's memory at the peak, and a spurious out-of-memory
// under a cap). Only a buffer the slot alone holds, of the value's type.
static void offer_overwritten_buffers(tpu_dev_t* d, const tpu_program_output_t* outs,
                                      tpu_slot_t* const* out_slots, int num_values) {
  for (int o = 0; o < num_values; ++o) {
    tpu_buffer_t* b = out_slots[o]->buffer;
    if (!b || tpu_buffer_refs(b) - tpu_dev_job_holds(d, b) != 1) continue;
    bool read = false;
    for (int p = 0; p < d->num_params && !read; ++p) read = d->params[p] == b;
    tpu_type_t t = tpu_type_make(tpu_buffer_dtype(b), tpu_buffer_dims(b), tpu_buffer_rank(b));
    if (!read && tpu_type_eq(&t, tpu_ir_type(d->graph, outs[o].value))) tpu_dev_param(d, b);
  }
}

// Releases the donated buffers of executions up to `finished`.
static void release_donated(tpu_dev_t* d, uint64_t finished) {
  int k = 0;
  for (int i = 0; i < d->num_donated; ++i) {
    if (tpu_buffer_last_use(d->donated[i]) <= finished) tpu_buffer_release(d->donated[i]);
    else d->donated[k++] = d->donated[i];
  }
  d->num_donated = k;
}

// The buffer that `out` takes as a donation, or NULL (no donor, or one
// kept because a running execution still uses it).
static tpu_buffer_t* donation(tpu_dev_t* d, const tpu_program_output_t* out,
                              const int64_t* keep, int num_keep) {
  if (out->donor_param < 0) return NULL;
  for (int k = 0; k < num_keep; ++k)
    if (keep[k] == out->donor_param) return NULL;
  return d->params[out->donor_param];
}

// Donations stop counting in memory_allocated() before the launch: each
// output that takes one reuses its memory, and counting both for a moment
// would report a peak that never was. (If the launch fails, they count
// again: their slots keep them.)
static void uncount_donations(tpu_dev_t* d, const tpu_program_output_t* outs, int n,
                              const int64_t* keep, int num_keep) {
  for (int o = 0; o < n; ++o) {
    tpu_buffer_t* b = donation(d, &outs[o], keep, num_keep);
    if (b) tpu_buffer_mark_donated(b);
  }
}

// The bytes an execution's outputs take beyond the donations they reuse.
static int64_t new_bytes(tpu_dev_t* d, const tpu_program_output_t* outs, int n, int num_values,
                         const int64_t* keep, int num_keep) {
  int64_t bytes = 0;
  for (int o = 0; o < n; ++o) {
    const tpu_type_t* t = tpu_ir_type(d->graph, outs[o].value);
    bytes += tpu_type_numel(t) * (int64_t)tpu_dtype_size(t->dtype);
    tpu_buffer_t* b = o < num_values ? donation(d, &outs[o], keep, num_keep) : NULL;
    if (b) bytes -= (int64_t)tpu_buffer_nbytes(b);
  }
  return bytes;
}

// Holds the buffers that the execution just launched took as donations
// until it ends; see tpu_dev_t.donated.
static void hold_donated(tpu_dev_t* d, const tpu_program_output_t* outs, int n,
                         const int64_t* keep, int num_keep) {
  for (int o = 0; o < n; ++o) {
    tpu_buffer_t* b = donation(d, &outs[o], keep, num_keep);
    if (!b) continue;
    if (d->num_donated == d->donated_cap) {
      int cap = d->donated_cap ? d->donated_cap * 2 : 64;
      tpu_buffer_t** grown = tpu_realloc(d->donated, sizeof *grown * (size_t)cap);
      if (!grown) continue;  // released with the graph: the host waits, never wrong
      d->donated = grown;
      d->donated_cap = cap;
    }
    tpu_buffer_retain(b);
    d->donated[d->num_donated++] = b;
  }
}

// Flags (per node) the values a failed assertion of the graph would
// poison: those computed from what an op with an assertion wrote. NULL:
// all of them (out of memory).
static bool* suspect_values(tpu_dev_t* d) {
  if (d->suspect_all) return NULL;
  tpu_graph_t* g = d->graph;
  bool* marked = tpu_calloc((size_t)tpu_graph_node_count(g) + 1, sizeof *marked);
  if (!marked) return NULL;
  for (int i = 0; i < d->num_suspects; ++i) marked[d->suspects[i]] = true;
  tpu_graph_mark_users(g, marked);
  return marked;
}

// Remembers execution `seq` so that synchronize can wait for it. Executions
// finish mostly in order, so finished ones are dropped from the front.
static void track(tpu_dev_t* d, tpu_event_t* done, uint64_t seq) {
  enum { PRUNE_AT = 32, MAX_INFLIGHT = 1024 };
  if (d->num_inflight >= PRUNE_AT) {
    int first = 0;
    while (first < d->num_inflight &&
           (d->num_inflight - first > MAX_INFLIGHT || tpu_event_is_ready(d->inflight[first]))) {
      tpu_status_ignore(tpu_event_await(d->inflight[first]));
      tpu_event_destroy(d->inflight[first++]);
    }
    int left = d->num_inflight - first;
    memmove(d->inflight, d->inflight + first, sizeof *d->inflight * (size_t)left);
    memmove(d->inflight_seq, d->inflight_seq + first, sizeof *d->inflight_seq * (size_t)left);
    d->num_inflight = left;
  }
  if (d->num_inflight == d->inflight_cap) {
    int cap = d->inflight_cap ? d->inflight_cap * 2 : 64;
    tpu_event_t** p = tpu_realloc(d->inflight, sizeof *p * (size_t)cap);
    if (p) d->inflight = p;
    uint64_t* q = p ? tpu_realloc(d->inflight_seq, sizeof *q * (size_t)cap) : NULL;
    if (q) d->inflight_seq = q;
    if (!p || !q) {  // wait now instead of later: never wrong
      tpu_status_ignore(tpu_event_await(done));
      tpu_event_destroy(done);
      return;
    }
    d->inflight_cap = cap;
  }
  d->inflight_seq[d->num_inflight] = seq;
  d->inflight[d->num_inflight++] = done;
}

tpu_status_t tpu_dev_wait_all(tpu_dev_t* d) {
  tpu_status_t first = TPU_OK;
  for (int i = 0; i < d->num_inflight; ++i) {
    tpu_status_t s = tpu_event_await(d->inflight[i]);
    if (s && !first) first = s;
    else tpu_status_free(s);
    tpu_event_destroy(d->inflight[i]);
  }
  d->num_inflight = 0;
  release_donated(d, d->exec_seq);
  tpu_dev_reap(d, true);
  tpu_dev_await_points(d);
  return first;
}

static bool reads_a_failed_launch(tpu_dev_t* d) {
  for (int p = 0; p < d->num_params; ++p)
    if (tpu_buffer_is_broken(d->params[p])) return true;
  return false;
}

static tpu_status_t flush(tpu_dev_t* d, bool wait) {
  tpu_graph_t* g = d->graph;
  tpu_dev_reap(d, wait);
  if (d->num_written == 0 && d->num_asserts == 0) {
    if (tpu_graph_node_count(g)) clear_graph(d);
    return TPU_OK;
  }
  tpu_status_t s = tpu_graph_take_error(g);
  int cap = d->num_written + 2;  // the values, an assertion's code and numbers
  tpu_program_output_t small_outs[STACK_OUTS];
  tpu_slot_t* small_slots[STACK_OUTS];
  tpu_buffer_t* small_bufs[STACK_OUTS] = {0};  // NULL: released on failure too
  tpu_program_output_t* outs = cap <= STACK_OUTS ? small_outs : tpu_malloc(sizeof *outs * (size_t)cap);
  tpu_slot_t** out_slots = cap <= STACK_OUTS ? small_slots : tpu_malloc(sizeof *out_slots * (size_t)cap);
  tpu_buffer_t** results = cap <= STACK_OUTS ? small_bufs : tpu_calloc((size_t)cap, sizeof *results);
  if (!s && (!outs || !out_slots || !results))
    s = tpu_status_make(TPU_CODE_RESOURCE_EXHAUSTED, "out of host memory");
  int n = 0;
  bool* donor_taken = NULL;
  for (int i = 0; !s && i < d->num_written; ++i) {
    tpu_slot_t* slot = d->written[i];
    if (slot->pending_gen != d->gen) continue;  // overwritten from the host
    if (tpu_object_refs(&slot->obj) == 1) {     // only we hold it: dead
      slot->pending_gen = 0;
      continue;
    }
    tpu_val_t v = slot->pending;
    if (tpu_ir_node_op(g, v) == TPU_IR_PARAM) {
      // An unchanged buffer (a copy of a whole slot): share it.
      int p = 0;
      while (tpu_graph_param(g, p) != v) ++p;
      tpu_dev_set_buffer(d, slot, d->params[p]);
      tpu_dev_suspect_copy(d, slot, v);
      continue;
    }
    out_slots[n] = slot;
    outs[n++] = (tpu_program_output_t){v, -1};
  }
  int num_values = n;
  tpu_event_t* done = NULL;
  bool has_numbers = false;
  if (!s && d->num_asserts) {  // first failing assertion's number (or 0) and numbers
    tpu_val_t code = tpu_ir_const_i(g, TPU_I32, 0, NULL, 0);
    int64_t two = 2;
    tpu_val_t numbers = tpu_ir_const_i(g, TPU_I64, 0, &two, 1);
    for (int k = d->num_asserts - 1; k >= 0; --k) {
      tpu_assert_t* a = &d->asserts[k];
      code = tpu_ir_select(g, a->bad, tpu_ir_const_i(g, TPU_I32, k + 1, NULL, 0), code);
      if (a->numbers == TPU_VAL_NONE) continue;
      numbers = tpu_ir_select(g, tpu_ir_broadcast(g, a->bad, &two, 1, NULL), a->numbers, numbers);
      has_numbers = true;
    }
    outs[n++] = (tpu_program_output_t){code, -1};
    if (has_numbers) outs[n++] = (tpu_program_output_t){numbers, -1};
    s = tpu_graph_take_error(g);
  }
  if (!s && n > 0) {
    offer_overwritten_buffers(d, outs, out_slots, num_values);
    s = tpu_graph_take_error(g);
  }
  if (!s && n > 0) {
    // Donation: a parameter whose buffer nobody else holds can be reused for
    // an output of the same type (in-place updates then need no new memory).
    // An output takes the buffer of the slot it overwrites where it can, so
    // that XLA updates it in place (given another tensor's buffer while that
    // tensor's old value is still read, XLA copies to break the swap: the
    // GPT's first AdamW step had 58 copies, now 11); then the first such
    // parameter not taken yet.
    donor_taken = tpu_malloc(sizeof(bool) * ((size_t)d->num_params + 1));
    for (int p = 0; donor_taken && p < d->num_params; ++p)
      donor_taken[p] = !donatable(d, d->params[p], out_slots, num_values);
    for (int own = 1; own >= 0; --own) {
      for (int o = 0; donor_taken && o < num_values; ++o) {
        if (outs[o].donor_param >= 0) continue;
        const tpu_type_t* ot = tpu_ir_type(g, outs[o].value);
        for (int p = 0; p < d->num_params; ++p) {
          if (donor_taken[p] || (own && d->params[p] != out_slots[o]->buffer) ||
              !tpu_type_eq(ot, tpu_ir_type(g, tpu_graph_param(g, p))))
            continue;
          outs[o].donor_param = p;
          donor_taken[p] = true;
          break;
        }
      }
    }
    tpu_hash_t key = tpu_graph_program_hash(g, outs, n, 1);
    tpu_executable_t* exe = NULL;
    tpu_cache_source_t source = TPU_CACHE_MEMORY;
    // Fused mode: a program not in memory is loaded or compiled by the
    // compile thread while the host goes on, and what the device flushes
    // after it runs after it.
    bool later = !wait && (d->jobs || (tpu_mode_get() == TPU_MODE_FUSED &&
                                       tpu_background_enabled()));
    if (later) {
      s = tpu_get_program(key, NULL, NULL, &exe, &source);
      later = d->jobs || !exe;
    }
    if (!s && !later && !exe) {
      print_args_t pa = {g, outs, n};
      s = name_ops(d, "compiling", tpu_get_program(key, print_program, &pa, &exe, &source));
      if (!s && source != TPU_CACHE_MEMORY) {
        tpu_compile_event_t e;
        tpu_dev_compile_event(d, key, &e);
        e.from_disk = source == TPU_CACHE_DISK;
        tpu_dev_report_program(&e);
      }
    }
    if (!s) {
      int64_t small_keep[STACK_OUTS];
      int64_t* keep = n <= STACK_OUTS ? small_keep : tpu_malloc(sizeof *keep * (size_t)n);
      uint64_t finished = finished_seq(d);
      release_donated(d, finished);
      int num_keep = keep && !later && tpu_mode_get() != TPU_MODE_FUSED
                         ? busy_donors(d, finished, outs, num_values, keep) : 0;  // none: only slower
      // Past the device's memory or the process's cap the graph fails here,
      // before it changes anything; a program compiled on the compile
      // thread checks its scratch memory there.
      int64_t bytes = new_bytes(d, outs, n, num_values, keep, num_keep);
      if (exe) bytes += tpu_executable_temp_bytes(exe);
      s = name_ops(d, "running", tpu_client_fits(tpu_rt()->client, d->index, bytes));
      if (s) {
        tpu_executable_release(exe);
      } else {
        uncount_donations(d, outs, num_values, keep, num_keep);
        if (later) {
          s = tpu_dev_launch_later(d, key, exe, outs, n, out_slots, num_values, results, &done);
        } else {
          s = name_ops(d, "running",
                       tpu_executable_execute(exe, d->index, d->params, d->num_params, keep,
                                              num_keep, results, n, wait ? NULL : &done));
          tpu_executable_release(exe);
          tpu_metric_add(TPU_M_EXECUTIONS, 1);
        }
      }
      if (!s) hold_donated(d, outs, num_values, keep, num_keep);
      if (keep != small_keep) tpu_free(keep);
    }
    if (!s) {
      ++d->exec_seq;
      for (int p = 0; p < d->num_params; ++p) tpu_buffer_mark_use(d->params[p], d->exec_seq);
      for (int o = 0; o < n; ++o) tpu_buffer_mark_use(results[o], d->exec_seq);
    }
  }
  if (!s) {
    for (int o = 0; o < num_values; ++o) {
      tpu_dev_set_buffer(d, out_slots[o], results[o]);
    }
    uint64_t own_check = 0;
    bool* own = NULL;
    if (d->num_asserts) {
      tpu_status_t* statuses = tpu_calloc((size_t)d->num_asserts, sizeof *statuses);
      for (int k = 0; statuses && k < d->num_asserts; ++k) {
        statuses[k] = d->asserts[k].status;
        d->asserts[k].status = NULL;
      }
      own_check = tpu_dev_add_check(d, results[num_values], has_numbers ? results[num_values + 1] : NULL,
                                    statuses, statuses ? d->num_asserts : 0);
      results[num_values] = NULL;
      if (has_numbers) results[num_values + 1] = NULL;
      own = suspect_values(d);
    }
    tpu_dev_suspect_results(d, out_slots, outs, num_values, own_check, own);
    tpu_free(own);
    if (done) track(d, done, d->exec_seq);
    done = NULL;
    tpu_metric_add(TPU_M_FLUSHES, 1);
    tpu_metric_add(TPU_M_GRAPH_NODES, tpu_graph_node_count(g));
  } else {
    // The graph never ran, so it changed nothing: the slots it wrote keep
    // their buffers (and its donations count again), as strict and debug
    // modes keep them when the op that they flush at fails. In fused mode
    // the ops that made new tensors returned long ago: those hold the error.
    bool fused = tpu_mode_get() == TPU_MODE_FUSED;
    for (int p = 0; p < d->num_params; ++p) tpu_buffer_mark_kept(d->params[p]);
    for (int i = 0; i < d->num_written; ++i) {
      tpu_slot_t* slot = d->written[i];
      if (fused && slot->pending_gen == d->gen && !slot->buffer && !slot->poison)
        slot->poison = tpu_status_clone(s);
      slot->pending_gen = 0;
    }
  }
  if (s && tpu_mode_get() == TPU_MODE_FUSED && reads_a_failed_launch(d)) {
    // Failed because a graph it reads failed to launch: raised with that
    // one, at the next sync, and not here, where the compile thread's
    // progress decides whether that one is known to have failed yet.
    if (!d->deferred) d->deferred = s;
    else tpu_status_free(s);
    s = TPU_OK;
  }
  for (int o = 0; o < n; ++o) {
    if (wait && !s && results[o]) s = tpu_buffer_await(results[o]);
    tpu_buffer_release(results ? results[o] : NULL);
  }
  tpu_event_destroy(done);
  tpu_free(donor_taken);
  if (outs != small_outs) tpu_free(outs);
  if (out_slots != small_slots) tpu_free(out_slots);
  if (results != small_bufs) tpu_free(results);
  clear_graph(d);
  return s;
}

tpu_status_t tpu_dev_flush(tpu_dev_t* d) { return flush(d, false); }

tpu_status_t tpu_dev_after_op(tpu_dev_t* d, int op) {
  tpu_mode_t mode = tpu_mode_get();
  if (d->num_ops == 0) {
    d->first_op = op;
    // A fused graph compiles at a flush lines later (at the end of a
    // backward pass, in no Python frame): name the line that began it.
    d->first_site[0] = '\0';
    if (mode == TPU_MODE_FUSED) tpu_call_site(d->first_site, sizeof d->first_site);
  }
  d->last_op = op;
  d->ops_hash = tpu_hash_u64(d->ops_hash, (uint64_t)(op + 1));
  ++d->num_ops;
  tpu_metric_add(TPU_M_OPS, 1);
  if (mode == TPU_MODE_FUSED && !tpu_loop_record(&d->loop, op, d->num_ops) &&
      d->num_ops < tpu_rt()->flush_cap)
    return TPU_OK;
  if (mode != TPU_MODE_DEBUG) return flush(d, false);
  // Debug: wait for the results and raise device-side errors at the op.
  tpu_metric_add(TPU_M_HOST_SYNCS, 1);
  TPU_RETURN_IF_ERROR(flush(d, true));
  return tpu_dev_check(d, TPU_OK);
}
