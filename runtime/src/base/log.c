// Leveled logging to stderr; the level comes from TORCHTPU_LOG once.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <threads.h>

#include "tpu/base.h"

static tpu_log_level_t level;
static once_flag level_once = ONCE_FLAG_INIT;

static void read_level(void) { level = (tpu_log_level_t)tpu_env_get(TPU_ENV_LOG, NULL); }

tpu_log_level_t tpu_log_level(void) {
  call_once(&level_once, read_level);
  return level;
}

void tpu_log(tpu_log_level_t lvl, const char* fmt, ...) {
  if (lvl > tpu_log_level()) return;
  static const char* names[] = {"error", "warn", "info", "debug"};
  char line[2048], *text = line;
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(line, sizeof line, fmt, ap);
  va_end(ap);
  if (n >= (int)sizeof line && (text = tpu_malloc((size_t)n + 1))) {  // a program dump
    va_start(ap, fmt);
    vsnprintf(text, (size_t)n + 1, fmt, ap);
    va_end(ap);
  }
  fprintf(stderr, "[torchtpu %s] %s\n", names[lvl], text ? text : line);
  if (text != line) tpu_free(text);
}
