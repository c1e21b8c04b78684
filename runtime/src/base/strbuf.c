#include "base/strbuf.h"

#include <stdio.h>
#include <string.h>

void tpu_strbuf_init(tpu_strbuf_t* sb) { *sb = (tpu_strbuf_t){0}; }

void tpu_strbuf_deinit(tpu_strbuf_t* sb) {
  tpu_free(sb->data);
  *sb = (tpu_strbuf_t){0};
}

void tpu_strbuf_clear(tpu_strbuf_t* sb) {
  sb->len = 0;
  if (sb->data) sb->data[0] = 0;
}

static bool reserve(tpu_strbuf_t* sb, size_t extra) {
  if (sb->failed) return false;
  if (sb->len + extra + 1 <= sb->cap) return true;
  size_t cap = sb->cap ? sb->cap : 256;
  while (cap < sb->len + extra + 1) cap *= 2;
  char* d = tpu_realloc(sb->data, cap);
  if (!d) {
    sb->failed = true;
    return false;
  }
  sb->data = d;
  sb->cap = cap;
  return true;
}

void tpu_strbuf_append(tpu_strbuf_t* sb, const char* s, size_t n) {
  if (!reserve(sb, n)) return;
  memcpy(sb->data + sb->len, s, n);
  sb->len += n;
  sb->data[sb->len] = 0;
}

void tpu_strbuf_puts(tpu_strbuf_t* sb, const char* s) {
  tpu_strbuf_append(sb, s, strlen(s));
}

void tpu_strbuf_printf(tpu_strbuf_t* sb, const char* fmt, ...) {
  char small[256];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(small, sizeof small, fmt, ap);
  va_end(ap);
  if (n < 0) return;
  if ((size_t)n < sizeof small) {
    tpu_strbuf_append(sb, small, (size_t)n);
    return;
  }
  if (!reserve(sb, (size_t)n)) return;
  va_start(ap, fmt);
  vsnprintf(sb->data + sb->len, (size_t)n + 1, fmt, ap);
  va_end(ap);
  sb->len += (size_t)n;
}

const char* tpu_strbuf_cstr(const tpu_strbuf_t* sb) {
  return sb->data ? sb->data : "";
}

tpu_status_t tpu_strbuf_status(const tpu_strbuf_t* sb) {
  return sb->failed ? tpu_status_make(TPU_CODE_RESOURCE_EXHAUSTED,
                                      "out of host memory building a string")
                    : TPU_OK;
}
