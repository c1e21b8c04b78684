// Environment variables: defaults, values taken, and values refused by name.
#include "test.h"
#include "tpu/engine.h"

void test_env_values(void) {
  unsetenv("TORCHTPU_LOG");
  unsetenv("TORCHTPU_FUSED_MAX_OPS");
  tpu_status_t s = TPU_OK;
  CHECK(tpu_env_get(TPU_ENV_LOG, &s) == TPU_LOG_WARN && !s);
  CHECK(tpu_env_get(TPU_ENV_FUSED_MAX_OPS, &s) == 4096 && !s);
  setenv("TORCHTPU_LOG", "", 1);  // empty is unset
  CHECK(tpu_env_get(TPU_ENV_LOG, &s) == TPU_LOG_WARN && !s);

  setenv("TORCHTPU_LOG", "debug", 1);
  setenv("TORCHTPU_MODE", "fused", 1);
  setenv("TORCHTPU_FUSED_MAX_OPS", "1", 1);
  setenv("TORCHTPU_CACHE_MAX_BYTES", "0", 1);
  CHECK(tpu_env_get(TPU_ENV_LOG, &s) == TPU_LOG_DEBUG);
  CHECK(tpu_env_get(TPU_ENV_MODE, &s) == TPU_MODE_FUSED);
  CHECK(tpu_env_get(TPU_ENV_FUSED_MAX_OPS, &s) == 1);
  CHECK(tpu_env_get(TPU_ENV_CACHE_MAX_BYTES, &s) == 0);
  CHECK_OK(s);
  CHECK_OK(tpu_env_check());

  // Refused: a word it does not take, a number out of range or not a number
  // (trailing text, overflow); each gives the default and names the value.
  setenv("TORCHTPU_LOG", "loud", 1);
  CHECK(tpu_env_get(TPU_ENV_LOG, &s) == TPU_LOG_WARN);
  CHECK_ERROR(s, TPU_CODE_INVALID_ARGUMENT, "TORCHTPU_LOG=loud: expected error, warn, info or debug");
  CHECK_ERROR(tpu_env_check(), TPU_CODE_INVALID_ARGUMENT, "TORCHTPU_LOG=loud");
  unsetenv("TORCHTPU_LOG");
  const char* bad[] = {"0", "-3", "12x", "", " ", "99999999999999999999"};
  for (size_t i = 0; i < sizeof bad / sizeof *bad; ++i) {
    setenv("TORCHTPU_FUSED_MAX_OPS", bad[i], 1);
    s = TPU_OK;
    CHECK(tpu_env_get(TPU_ENV_FUSED_MAX_OPS, &s) == 4096);
    if (*bad[i]) CHECK_ERROR(s, TPU_CODE_INVALID_ARGUMENT, "expected an integer from 1 to 1048576");
    else CHECK_OK(s);
  }
  unsetenv("TORCHTPU_FUSED_MAX_OPS");
  setenv("TORCHTPU_ASSERT_NO_COMPILE", "yes", 1);
  CHECK_ERROR(tpu_env_check(), TPU_CODE_INVALID_ARGUMENT,
              "TORCHTPU_ASSERT_NO_COMPILE=yes: expected 0 or 1");
  setenv("TORCHTPU_CACHE_MAX_BYTES", "4G", 1);
  unsetenv("TORCHTPU_ASSERT_NO_COMPILE");
  CHECK_ERROR(tpu_env_check(), TPU_CODE_INVALID_ARGUMENT,
              "TORCHTPU_CACHE_MAX_BYTES=4G: expected an integer of at least 0");
  setenv("TORCHTPU_CACHE_MAX_BYTES", "99999999999999999999", 1);
  CHECK_ERROR(tpu_env_check(), TPU_CODE_INVALID_ARGUMENT,
              "=99999999999999999999: too large: expected an integer from 0 to "
              "9223372036854775807");
  const char* spaced[] = {" 100", "100 ", "\t100\n"};  // spaces around a number are fine
  for (size_t i = 0; i < sizeof spaced / sizeof *spaced; ++i) {
    setenv("TORCHTPU_CACHE_MAX_BYTES", spaced[i], 1);
    s = TPU_OK;
    CHECK(tpu_env_get(TPU_ENV_CACHE_MAX_BYTES, &s) == 100);
    CHECK_OK(s);
  }
  unsetenv("TORCHTPU_CACHE_MAX_BYTES");
  unsetenv("TORCHTPU_MODE");
  CHECK_OK(tpu_env_check());
}
