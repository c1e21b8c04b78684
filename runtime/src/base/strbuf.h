// A growable NUL-terminated string; an allocation failure is sticky and is
// reported once by tpu_strbuf_status, so callers append without checking.
#ifndef TPU_BASE_STRBUF_H_
#define TPU_BASE_STRBUF_H_

#include "tpu/base.h"

typedef struct tpu_strbuf {
  char* data;
  size_t len, cap;
  bool failed;
} tpu_strbuf_t;

void tpu_strbuf_init(tpu_strbuf_t* sb);
void tpu_strbuf_deinit(tpu_strbuf_t* sb);
void tpu_strbuf_clear(tpu_strbuf_t* sb);
void tpu_strbuf_append(tpu_strbuf_t* sb, const char* s, size_t n);
void tpu_strbuf_puts(tpu_strbuf_t* sb, const char* s);
void tpu_strbuf_printf(tpu_strbuf_t* sb, const char* fmt, ...) TPU_PRINTF(2, 3);
// The string so far ("" when empty); owned by the strbuf.
const char* tpu_strbuf_cstr(const tpu_strbuf_t* sb);
TPU_MUST_USE tpu_status_t tpu_strbuf_status(const tpu_strbuf_t* sb);

#endif  // TPU_BASE_STRBUF_H_
