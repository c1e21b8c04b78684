// Status objects: heap-allocated {code, message, file, line}; NULL is OK.
#include <stdio.h>
#include <string.h>

#include "tpu/base.h"

struct tpu_status {
  tpu_code_t code;
  int line;
  const char* file;
  char* message;
  bool is_static;  // the preallocated out-of-memory status
};

static struct tpu_status oom_status = {TPU_CODE_RESOURCE_EXHAUSTED, 0,
                                       __FILE__, "out of host memory", true};

static char* vformat(const char* fmt, va_list ap) {
  va_list ap2;
  va_copy(ap2, ap);
  int n = vsnprintf(NULL, 0, fmt, ap2);
  va_end(ap2);
  if (n < 0) n = 0;
  char* buf = tpu_malloc((size_t)n + 1);
  if (buf) vsnprintf(buf, (size_t)n + 1, fmt, ap);
  return buf;
}

tpu_status_t tpu_status_make_(tpu_code_t code, const char* file, int line,
                              const char* fmt, ...) {
  if (code == TPU_CODE_OK) return TPU_OK;
  struct tpu_status* s = tpu_malloc(sizeof *s);
  if (!s) return &oom_status;
  va_list ap;
  va_start(ap, fmt);
  s->message = vformat(fmt, ap);
  va_end(ap);
  if (!s->message) {
    tpu_free(s);
    return &oom_status;
  }
  s->code = code;
  s->file = file;
  s->line = line;
  s->is_static = false;
  return s;
}

tpu_code_t tpu_status_code(tpu_status_t s) { return s ? s->code : TPU_CODE_OK; }
const char* tpu_status_message(tpu_status_t s) { return s ? s->message : ""; }
const char* tpu_status_file(tpu_status_t s) { return s ? s->file : ""; }
int tpu_status_line(tpu_status_t s) { return s ? s->line : 0; }

const char* tpu_code_name(tpu_code_t code) {
  switch (code) {
#define TPU_CODE_CASE(name, value) \
  case TPU_CODE_##name:            \
    return #name;
    TPU_CODE_LIST(TPU_CODE_CASE)
#undef TPU_CODE_CASE
  }
  return "UNKNOWN";
}

tpu_status_t tpu_status_annotate(tpu_status_t s, const char* fmt, ...) {
  if (!s || s->is_static) return s;
  va_list ap;
  va_start(ap, fmt);
  char* prefix = vformat(fmt, ap);
  va_end(ap);
  if (!prefix) return s;
  size_t a = strlen(prefix), b = strlen(s->message);
  char* joined = tpu_malloc(a + 2 + b + 1);
  if (joined) {
    memcpy(joined, prefix, a);
    memcpy(joined + a, ": ", 2);
    memcpy(joined + a + 2, s->message, b + 1);
    tpu_free(s->message);
    s->message = joined;
  }
  tpu_free(prefix);
  return s;
}

tpu_status_t tpu_status_clone(tpu_status_t s) {
  if (!s) return TPU_OK;
  if (s->is_static) return s;
  return tpu_status_make_(s->code, s->file, s->line, "%s", s->message);
}

void tpu_status_free(tpu_status_t s) {
  if (!s || s->is_static) return;
  tpu_free(s->message);
  tpu_free(s);
}
