// Device-side checks: the assertions an executed graph computed (an index
// out of range, a bad class target), read back at host syncs, and which
// values a failed one makes wrong.
//
// A value computed from what an asserting op wrote is suspect of that
// graph's check; a later graph that reads a suspect buffer before the
// check is read makes its results from that buffer suspect too, across any
// number of executions. So each slot carries the set of unread checks its
// buffer was computed from; once a sync has raised a failed one, using the
// slot raises that error (it is looked up at the use, so checks hold no
// slots and an unread loop keeps nothing alive). Checks that finished are
// read without waiting whenever a new one is queued and sets drop the ones
// that passed, so sets stay as small as the device is behind.
#include <string.h>

#include "base/strbuf.h"
#include "eager/eager.h"

static void suspicion_destroy(void* self) { tpu_free(self); }

void tpu_suspicion_release(tpu_suspicion_t* s) { if (s) tpu_object_release(&s->obj); }

static tpu_status_t failure_of(const tpu_dev_t* d, uint64_t id) {
  for (int i = 0; i < d->num_failed; ++i)
    if (d->failed[i].id == id) return d->failed[i].status;
  return NULL;
}

// Sets *out to the ids of `a` and `b` (either may be NULL) and `extra` (0:
// none), less the checks read back as passed (NULL when none is left).
// False: out of memory.
static bool merge(const tpu_dev_t* d, const tpu_suspicion_t* a, const tpu_suspicion_t* b,
                  uint64_t extra, tpu_suspicion_t** out) {
  int na = a ? a->n : 0, nb = b ? b->n : 0, n = 0;
  tpu_suspicion_t* m = tpu_malloc(sizeof *m + sizeof(uint64_t) * (size_t)(na + nb + 1));
  *out = NULL;
  if (!m) return false;
  int i = 0, j = 0;
  while (i < na || j < nb || extra) {
    uint64_t x = i < na ? a->ids[i] : UINT64_MAX, y = j < nb ? b->ids[j] : UINT64_MAX;
    uint64_t z = extra ? extra : UINT64_MAX, id = x < y ? x : y;
    if (z < id) id = z;
    i += x == id;
    j += y == id;
    if (z == id) extra = 0;
    if (id >= d->checks_read_below || failure_of(d, id)) m->ids[n++] = id;
  }
  if (!n) {
    tpu_free(m);
    return true;
  }
  tpu_object_init(&m->obj, suspicion_destroy);
  m->n = n;
  *out = m;
  return true;
}

//===--- reading checks ---===//

static void clear_check(tpu_pending_check_t* c) {
  tpu_buffer_release(c->code);
  tpu_buffer_release(c->numbers);
  for (int i = 0; i < c->num_asserts; ++i) tpu_status_free(c->statuses[i]);
  tpu_free(c->statuses);
}

static void free_check(tpu_pending_check_t* c) {
  clear_check(c);
  tpu_free(c);
}

// The status of failed assertion `k` of `c`, with its numbers in place of
// "{value}" and "{where}".
static tpu_status_t failure(const tpu_pending_check_t* c, int k) {
  static const char* const names[2] = {"{value}", "{where}"};
  tpu_status_t s = c->statuses[k];
  const char* m = tpu_status_message(s);
  if (!strstr(m, names[0]) && !strstr(m, names[1])) return tpu_status_clone(s);
  int64_t numbers[2] = {0, 0};
  tpu_status_t r = c->numbers ? tpu_buffer_to_host(c->numbers, numbers, sizeof numbers) : TPU_OK;
  tpu_status_free(r);  // unreadable: the message says 0, the error is still raised
  tpu_strbuf_t out;
  tpu_strbuf_init(&out);
  for (const char* at = m; *at;) {
    int i = 0;
    while (i < 2 && strncmp(at, names[i], strlen(names[i])) != 0) ++i;
    if (i == 2) {
      tpu_strbuf_append(&out, at++, 1);
      continue;
    }
    tpu_strbuf_printf(&out, "%lld", (long long)numbers[i]);
    at += strlen(names[i]);
  }
  tpu_status_t f = tpu_strbuf_status(&out);  // out of memory: say so instead
  if (!f) f = tpu_status_make(tpu_status_code(s), "%s", tpu_strbuf_cstr(&out));
  tpu_strbuf_deinit(&out);
  return f;
}

// What check `c` found (waits for it): its failed assertion's status, or OK.
static tpu_status_t result_of(const tpu_pending_check_t* c) {
  int32_t code = 0;
  tpu_status_t s = tpu_buffer_to_host(c->code, &code, sizeof code);
  if (!s && code > 0 && code <= c->num_asserts) s = failure(c, code - 1);
  return s;
}

//===--- failures waiting for a sync ---===//

// Failures kept for syncs at most: past that (many checks failed, each with
// its own numbers, before a sync), the first one more is logged instead of
// kept, and the others until a sync are dropped.
enum { MAX_UNREPORTED = 16 };

// The length of message `m` without the line on where a device-side check
// came from (op.c's "\n(checked on the device by ...)").
static size_t without_where(const char* m) {
  const char* where = strstr(m, "\n(checked on the device by ");
  return where ? (size_t)(where - m) : strlen(m);
}

// Whether `s` is `failure`, or says it with more in front ("this tensor
// holds the result of a computation that failed: ..."). Where a check came
// from does not count: another op that checked the same data (the backward
// of the op that failed) or the same op again (a loop) says the same.
static bool says(tpu_status_t s, tpu_status_t failure) {
  const char *m = tpu_status_message(s), *f = tpu_status_message(failure);
  size_t nm = without_where(m), nf = without_where(f);
  return nm >= nf && memcmp(m + nm - nf, f, nf) == 0;
}

bool tpu_same_failure(tpu_status_t a, tpu_status_t b) { return says(a, b) || says(b, a); }

// Keeps `s` (taken; TPU_OK: none) as the `at`-th failure waiting.
static void keep_at(tpu_dev_t* d, int at, tpu_status_t s) {
  if (!s) return;
  for (int i = 0; i < d->num_unreported; ++i) {
    if (tpu_same_failure(s, d->unreported[i])) {  // said once is enough
      tpu_status_free(s);
      return;
    }
  }
  if (d->num_unreported == MAX_UNREPORTED ||
      !tpu_dev_grow((void**)&d->unreported, &d->unreported_cap, d->num_unreported + 1,
                    sizeof *d->unreported)) {
    if (!d->unreported_overflow)
      tpu_log(TPU_LOG_WARN,
              "tpu:%d: %d errors wait for the next syncs; this one and those found after it "
              "before a sync are not kept: %s", d->index, d->num_unreported,
              tpu_status_message(s));
    d->unreported_overflow = true;
    tpu_status_free(s);
    return;
  }
  memmove(d->unreported + at + 1, d->unreported + at,
          sizeof *d->unreported * (size_t)(d->num_unreported - at));
  d->unreported[at] = s;
  ++d->num_unreported;
}

void tpu_dev_report(tpu_dev_t* d, tpu_status_t s) { keep_at(d, d->num_unreported, s); }

// Reads the oldest check (waits for it when `wait`, else only if finished);
// a failure is remembered and reported once. False: nothing read.
static bool read_oldest(tpu_dev_t* d, bool wait) {
  tpu_pending_check_t* c = d->checks;
  if (!c || (!wait && !tpu_buffer_is_ready(c->code))) return false;
  if (!(d->checks = c->next)) d->checks_tail = &d->checks;
  tpu_status_t s = result_of(c);
  if (s) {
    // Out of memory: the values it poisons read as passed; the error itself
    // is still raised.
    if (tpu_dev_grow((void**)&d->failed, &d->failed_cap, d->num_failed + 1, sizeof *d->failed))
      d->failed[d->num_failed++] = (tpu_failed_check_t){c->id, tpu_status_clone(s)};
    tpu_dev_report(d, s);
  }
  d->checks_read_below = c->id + 1;
  free_check(c);
  return true;
}

uint64_t tpu_dev_add_check(tpu_dev_t* d, tpu_buffer_t* code, tpu_buffer_t* numbers,
                           tpu_status_t* statuses, int num_asserts) {
  while (read_oldest(d, false)) {}
  tpu_pending_check_t* c = tpu_calloc(1, sizeof *c);
  if (!c) {  // read it now instead of later
    tpu_pending_check_t now = {NULL, 0, code, numbers, num_asserts, statuses};
    tpu_dev_report(d, result_of(&now));
    clear_check(&now);
    return 0;
  }
  c->id = ++d->next_check_id;
  c->code = code;
  c->numbers = numbers;
  c->statuses = statuses;
  c->num_asserts = num_asserts;
  *d->checks_tail = c;
  d->checks_tail = &c->next;
  return c->id;
}

tpu_status_t tpu_dev_check(tpu_dev_t* d, tpu_status_t own) {
  int at = d->num_unreported;
  keep_at(d, at, tpu_dev_undo_failed_jobs(d));  // before the other failed jobs' it kept
  while (read_oldest(d, true)) {}
  d->checks_raised_below = d->checks_read_below;
  int kept = 0;
  for (int i = 0; i < d->num_unreported; ++i) {
    tpu_status_t u = d->unreported[i];
    if (!own) own = u;
    else if (tpu_same_failure(own, u)) tpu_status_free(u);  // often a failed launch's, twice
    else d->unreported[kept++] = u;
  }
  d->num_unreported = kept;
  d->unreported_overflow = false;
  return own;
}

void tpu_dev_drop_checks(tpu_dev_t* d) {
  while (d->checks) {
    tpu_pending_check_t* c = d->checks;
    d->checks = c->next;
    free_check(c);
  }
  d->checks_tail = &d->checks;
  for (int i = 0; i < d->num_failed; ++i) tpu_status_free(d->failed[i].status);
  tpu_free(d->failed);
  d->failed = NULL;
  d->num_failed = d->failed_cap = 0;
  for (int i = 0; i < d->num_unreported; ++i) tpu_status_free(d->unreported[i]);
  tpu_free(d->unreported);
  d->unreported = NULL;
  d->num_unreported = d->unreported_cap = 0;
}

//===--- suspect values ---===//

tpu_status_t tpu_dev_poison(tpu_dev_t* d, tpu_slot_t* s) {
  tpu_suspicion_t* sp = s->suspicion;
  if (s->poison || !sp) return s->poison;
  bool keep = false;  // an id may still fail, or be raised
  for (int i = 0; i < sp->n && !s->poison; ++i) {
    uint64_t id = sp->ids[i];
    tpu_status_t f = failure_of(d, id);
    if (f && id < d->checks_raised_below) s->poison = tpu_status_clone(f);
    keep |= id >= d->checks_read_below || f;
  }
  if (s->poison || !keep) {
    tpu_suspicion_release(sp);
    s->suspicion = NULL;
  }
  return s->poison;
}

void tpu_dev_inherit(tpu_dev_t* d, tpu_slot_t* s, tpu_val_t param) {
  if (!s->suspicion || param == TPU_VAL_NONE) return;
  if (!tpu_dev_grow((void**)&d->inherited, &d->inherited_cap, d->num_inherited + 1,
                    sizeof *d->inherited)) {
    tpu_graph_fail(d->graph, tpu_status_make(TPU_CODE_RESOURCE_EXHAUSTED, "out of host memory"));
    return;
  }
  tpu_object_retain(&s->suspicion->obj);
  d->inherited[d->num_inherited++] = (tpu_inherited_t){param, s->suspicion};
}

void tpu_dev_suspect_copy(tpu_dev_t* d, tpu_slot_t* s, tpu_val_t param) {
  for (int i = 0; i < d->num_inherited; ++i) {
    if (d->inherited[i].param != param) continue;
    tpu_object_retain(&d->inherited[i].suspicion->obj);
    tpu_suspicion_release(s->suspicion);
    s->suspicion = d->inherited[i].suspicion;
    return;
  }
}

// The union of the sources that `key` names (bit 63: the graph's own check).
static bool union_of(const tpu_dev_t* d, uint64_t key, tpu_suspicion_t* const* source,
                     uint64_t own_check, tpu_suspicion_t** out) {
  if (!merge(d, NULL, NULL, key >> 63 ? own_check : 0, out)) return false;
  for (int k = 0; k < 63; ++k) {
    if (!(key >> k & 1)) continue;
    tpu_suspicion_t* m;
    bool ok = merge(d, source[k], *out, 0, &m);
    tpu_suspicion_release(*out);
    *out = m;
    if (!ok) return false;
  }
  return true;
}

enum { MAX_SOURCES = 63, MAX_UNIONS = 8 };

void tpu_dev_suspect_results(tpu_dev_t* d, tpu_slot_t* const* slots,
                             const tpu_program_output_t* outs, int n, uint64_t own_check,
                             const bool* own) {
  if (!d->num_inherited && !own_check) return;
  // The distinct suspicions read (past MAX_SOURCES, the last one gathers
  // the rest, which can only make more values suspect), each with the
  // values computed from its parameters (NULL marks: all, out of memory).
  tpu_suspicion_t* source[MAX_SOURCES];
  bool* marks[MAX_SOURCES];
  int num_sources = 0;
  bool ok = true;
  size_t num_nodes = (size_t)tpu_graph_node_count(d->graph) + 1;
  for (int i = 0; i < d->num_inherited; ++i) {
    tpu_suspicion_t* sp = d->inherited[i].suspicion;
    int k = 0;
    while (k < num_sources && source[k] != sp) ++k;
    if (k == MAX_SOURCES) {
      k = MAX_SOURCES - 1;
      tpu_suspicion_t* all;
      ok &= merge(d, source[k], sp, 0, &all);
      tpu_suspicion_release(source[k]);
      source[k] = all;
      tpu_free(marks[k]);
      marks[k] = NULL;
    } else if (k == num_sources) {
      tpu_object_retain(&sp->obj);
      source[k] = sp;
      marks[k] = tpu_calloc(num_nodes, sizeof(bool));
      ++num_sources;
    }
    if (marks[k]) marks[k][d->inherited[i].param] = true;
  }
  for (int k = 0; k < num_sources; ++k)
    if (marks[k]) tpu_graph_mark_users(d->graph, marks[k]);
  // Results from the same sources share one set.
  uint64_t made_key[MAX_UNIONS];
  tpu_suspicion_t* made[MAX_UNIONS];
  int num_made = 0;
  for (int o = 0; o < n; ++o) {
    tpu_val_t v = outs[o].value;
    uint64_t key = own_check && (!own || own[v]) ? 1ull << 63 : 0;
    for (int k = 0; k < num_sources; ++k)
      if (!marks[k] || marks[k][v]) key |= 1ull << k;
    tpu_suspicion_t* sp = NULL;
    int m = 0;
    while (m < num_made && made_key[m] != key) ++m;
    if (key && m < num_made) {
      sp = made[m];
      if (sp) tpu_object_retain(&sp->obj);
    } else if (key && !(union_of(d, key, source, own_check, &sp) && ok)) {
      tpu_status_free(slots[o]->poison);
      slots[o]->poison = tpu_status_make(TPU_CODE_RESOURCE_EXHAUSTED,
                                         "out of host memory: whether this tensor holds "
                                         "the result of a failed device-side check is not known");
    } else if (key && num_made < MAX_UNIONS) {
      made_key[num_made] = key;
      if (sp) tpu_object_retain(&sp->obj);
      made[num_made++] = sp;
    }
    tpu_suspicion_release(slots[o]->suspicion);
    slots[o]->suspicion = sp;
  }
  for (int m = 0; m < num_made; ++m) tpu_suspicion_release(made[m]);
  for (int k = 0; k < num_sources; ++k) {
    tpu_suspicion_release(source[k]);
    tpu_free(marks[k]);
  }
}
