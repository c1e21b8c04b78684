// A tiny test harness: each test is a void function listed in test_list.h;
// the runner forks it into a child with a timeout, so a crash in one test
// cannot hide the others, and checks after it that nothing leaked.
#ifndef TPU_TEST_H_
#define TPU_TEST_H_

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tpu/tpu.h"

void test_fail(const char* file, int line, const char* fmt, ...);

#define CHECK(cond)                                            \
  do {                                                         \
    if (!(cond)) test_fail(__FILE__, __LINE__, "%s", #cond);   \
  } while (0)
#define CHECK_MSG(cond, ...)                                   \
  do {                                                         \
    if (!(cond)) test_fail(__FILE__, __LINE__, __VA_ARGS__);   \
  } while (0)
#define CHECK_OK(expr)                                                      \
  do {                                                                      \
    tpu_status_t s_ = (expr);                                               \
    if (s_)                                                                 \
      test_fail(__FILE__, __LINE__, "%s failed: [%s] %s", #expr,            \
                tpu_code_name(tpu_status_code(s_)), tpu_status_message(s_)); \
  } while (0)
// Checks that expr fails with `code` and that the message contains `needle`.
#define CHECK_ERROR(expr, code, needle)                                       \
  do {                                                                        \
    tpu_status_t s_ = (expr);                                                 \
    if (!s_) test_fail(__FILE__, __LINE__, "%s unexpectedly succeeded", #expr); \
    if (tpu_status_code(s_) != (code) ||                                      \
        !strstr(tpu_status_message(s_), (needle)))                            \
      test_fail(__FILE__, __LINE__, "%s: got [%s] %s; want [%s] containing '%s'", \
                #expr, tpu_code_name(tpu_status_code(s_)),                    \
                tpu_status_message(s_), tpu_code_name(code), (needle));      \
    tpu_status_free(s_);                                                      \
  } while (0)

// The plugin the tests run on: TORCHTPU_PLUGIN, else "cpu".
const char* test_plugin(void);
// A client of test_plugin() with `devices` devices; skips the test when the
// plugin has fewer (only the CPU plugin makes as many as asked).
tpu_client_t* test_client(int devices);
// Ends the test as skipped, saying why.
void test_skip(const char* fmt, ...);
// Compiles `mlir` (NUL-terminated) or fails the test.
tpu_executable_t* test_compile(tpu_client_t* client, const char* mlir);

#endif  // TPU_TEST_H_
