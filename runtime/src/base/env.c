// torchtpu's environment variables: one table of what each one takes.
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tpu/base.h"

static const struct {
  const char* name;
  const char* words;  // "a|b|c": takes one of these (its value is the index);
                      // NULL: an integer from lo to hi
  int64_t lo, hi, dflt;
} vars[TPU_ENV_COUNT] = {
    [TPU_ENV_MODE] = {"TORCHTPU_MODE", "debug|strict|fused", 0, 0, 1},
    [TPU_ENV_LOG] = {"TORCHTPU_LOG", "error|warn|info|debug", 0, 0, 1},
    [TPU_ENV_FALLBACK] = {"TORCHTPU_FALLBACK", "warn|error", 0, 0, 0},
    [TPU_ENV_ASSERT_NO_COMPILE] = {"TORCHTPU_ASSERT_NO_COMPILE", "0|1", 0, 0, 0},
    [TPU_ENV_BACKGROUND_COMPILE] = {"TORCHTPU_BACKGROUND_COMPILE", "0|1", 0, 0, 1},
    [TPU_ENV_CPU_DEVICES] = {"TORCHTPU_CPU_DEVICES", NULL, 1, 64, 1},
    [TPU_ENV_FUSED_MAX_OPS] = {"TORCHTPU_FUSED_MAX_OPS", NULL, 1, 1 << 20, 4096},
    [TPU_ENV_CACHE_ENTRIES] = {"TORCHTPU_CACHE_ENTRIES", NULL, 1, 1 << 20, 2048},
    [TPU_ENV_CACHE_MAX_BYTES] = {"TORCHTPU_CACHE_MAX_BYTES", NULL, 0, INT64_MAX,
                                 (int64_t)4 << 30},
    [TPU_ENV_CACHE_MAX_MAPPINGS] = {"TORCHTPU_CACHE_MAX_MAPPINGS", NULL, 1, INT64_MAX, -1},
};

// The index of word v in "a|b|c", or -1.
static int word_index(const char* words, const char* v) {
  size_t len = strlen(v);
  for (int i = 0; *words; ++i) {
    const char* end = strchr(words, '|');
    size_t n = end ? (size_t)(end - words) : strlen(words);
    if (n == len && !strncmp(words, v, n)) return i;
    if (!end) break;
    words = end + 1;
  }
  return -1;
}

// "a, b or c" of "a|b|c".
static void words_text(const char* words, char* out, size_t size) {
  const char* last = strrchr(words, '|');
  size_t n = 0;
  for (const char* p = words; *p && n + 5 < size; ++p) {
    if (*p != '|') out[n++] = *p;
    else if (p == last) n += (size_t)snprintf(out + n, size - n, " or ");
    else n += (size_t)snprintf(out + n, size - n, ", ");
  }
  out[n < size ? n : size - 1] = 0;
}

int64_t tpu_env_get(tpu_env_t var, tpu_status_t* error) {
  const char* v = getenv(vars[var].name);
  if (!v || !*v) return vars[var].dflt;
  if (vars[var].words) {
    int i = word_index(vars[var].words, v);
    if (i >= 0) return i;
    if (error) {
      char expected[128];
      words_text(vars[var].words, expected, sizeof expected);
      *error = tpu_status_make(TPU_CODE_INVALID_ARGUMENT, "%s=%s: expected %s",
                               vars[var].name, v, expected);
    }
    return vars[var].dflt;
  }
  char* end;
  errno = 0;
  long long n = strtoll(v, &end, 10);
  if (end != v)  // a number: spaces after it are fine, as strtoll skips those before
    while (isspace((unsigned char)*end)) ++end;
  if (!*end && errno == 0 && n >= vars[var].lo && n <= vars[var].hi) return n;
  if (error) {
    if (vars[var].hi == INT64_MAX && errno == ERANGE)
      *error = tpu_status_make(TPU_CODE_INVALID_ARGUMENT,
                               "%s=%s: too large: expected an integer from %lld to %lld",
                               vars[var].name, v, (long long)vars[var].lo, (long long)INT64_MAX);
    else if (vars[var].hi == INT64_MAX)
      *error = tpu_status_make(TPU_CODE_INVALID_ARGUMENT,
                               "%s=%s: expected an integer of at least %lld",
                               vars[var].name, v, (long long)vars[var].lo);
    else
      *error = tpu_status_make(TPU_CODE_INVALID_ARGUMENT,
                               "%s=%s: expected an integer from %lld to %lld",
                               vars[var].name, v, (long long)vars[var].lo,
                               (long long)vars[var].hi);
  }
  return vars[var].dflt;
}

tpu_status_t tpu_env_check(void) {
  for (int i = 0; i < TPU_ENV_COUNT; ++i) {
    tpu_status_t s = TPU_OK;
    tpu_env_get((tpu_env_t)i, &s);
    if (s) return s;
  }
  return TPU_OK;
}
