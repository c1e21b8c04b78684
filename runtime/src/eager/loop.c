// Fused mode: where a loop without flush points is cut.
//
// A loop that records ops and never reads back (an evaluation loop that
// keeps its outputs on the device, or sums a metric there) would grow one
// graph to TORCHTPU_FUSED_MAX_OPS ops: a program that takes XLA seconds to
// compile, cut at another place of the loop body each time, so that the
// next graphs are new programs too. Instead, once the ops recorded since the
// last flush repeat with a period, the graph is cut there, and from then on
// every few periods, at the same place of the loop body: each later graph
// is the same program, compiled once and replayed from the cache. Any other
// flush, or an op that breaks the period, ends that.
#include <string.h>

#include "eager/eager.h"

enum {
  CHECK_EVERY = 256,  // recorded ops between searches for a period
  MIN_REPEATS = 4,    // periods that the newer half of those ops must hold
  MIN_CUT = 32,       // ops per graph at least, in whole periods
};

// The smallest period p with which the newer half of ops[0..n) repeats at
// least MIN_REPEATS times; 0 if none.
static int find_period(const int* ops, int n) {
  int from = n - n / 2;
  for (int p = 1; p <= n / 2 / MIN_REPEATS; ++p) {
    int i = from + p;
    while (i < n && ops[i] == ops[i - p]) ++i;
    if (i == n) return p;
  }
  return 0;
}

bool tpu_loop_record(tpu_loop_t* l, int op, int n) {
  if (n > l->cap) {
    int cap = l->cap ? 2 * l->cap : CHECK_EVERY;
    while (cap < n) cap *= 2;
    int* ops = tpu_realloc(l->ops, sizeof *ops * (size_t)cap);
    if (!ops) {  // out of memory: no cuts, never a wrong one
      l->period = 0;
      return false;
    }
    l->ops = ops;
    l->cap = cap;
  }
  l->ops[n - 1] = op;
  if (l->period) {
    if (op == l->body[(n - 1) % l->period]) return l->armed = n == l->cut;
    l->period = 0;  // the loop ended
  }
  if (n % CHECK_EVERY) return false;
  int p = find_period(l->ops, n);
  if (!p) return false;
  int* body = tpu_realloc(l->body, sizeof *body * (size_t)p);
  if (!body) return false;
  // The next graph begins where a period of the newer ops began.
  memcpy(body, l->ops + n - p, sizeof *body * (size_t)p);
  l->body = body;
  l->period = p;
  l->cut = p * ((MIN_CUT + p - 1) / p);
  return l->armed = true;
}

void tpu_loop_flushed(tpu_loop_t* l) {
  if (!l->armed) l->period = 0;
  l->armed = false;
}

void tpu_loop_free(tpu_loop_t* l) {
  tpu_free(l->ops);
  tpu_free(l->body);
  memset(l, 0, sizeof *l);
}
