#include <signal.h>
#include <stdarg.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "test.h"

enum { PASSED, FAILED, SKIPPED };
enum { SKIP_STATUS = 77 };  // a test's exit status that says it skipped

#define TEST(name) void name(void);
#include "test_list.h"
#undef TEST

static const struct {
  const char* name;
  void (*fn)(void);
} tests[] = {
#define TEST(name) {#name, name},
#include "test_list.h"
#undef TEST
};

void test_fail(const char* file, int line, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "  %s:%d: ", file, line);
  vfprintf(stderr, fmt, ap);
  fprintf(stderr, "\n");
  va_end(ap);
  exit(1);
}

void test_skip(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "  skipped: ");
  vfprintf(stderr, fmt, ap);
  fprintf(stderr, "\n");
  va_end(ap);
  exit(SKIP_STATUS);
}

const char* test_plugin(void) {
  const char* p = getenv("TORCHTPU_PLUGIN");
  return p && *p ? p : "cpu";
}

tpu_client_t* test_client(int devices) {
  tpu_client_options_t o = {test_plugin(), devices};
  tpu_client_t* c = NULL;
  CHECK_OK(tpu_client_create(&o, &c));
  if (tpu_client_device_count(c) < devices)  // only the CPU plugin makes as many as asked
    test_skip("needs %d devices; the %s plugin has %d", devices, tpu_client_platform(c),
              tpu_client_device_count(c));
  return c;
}

tpu_executable_t* test_compile(tpu_client_t* c, const char* mlir) {
  tpu_executable_t* e = NULL;
  CHECK_OK(tpu_executable_compile(c, mlir, strlen(mlir), 1, &e));
  return e;
}

// PASSED, FAILED or SKIPPED.
static int run_one(int i, double timeout_s) {
  fflush(stdout);
  pid_t pid = fork();
  if (pid == 0) {
    alarm((unsigned)timeout_s);
    tests[i].fn();
    tpu_runtime_shutdown();
    int64_t live = tpu_alloc_live();
    if (live != 0) {
      fprintf(stderr, "  leak: %lld allocations still live\n", (long long)live);
      _exit(1);
    }
    fflush(stdout);
    _exit(0);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  if (WIFSIGNALED(status))
    fprintf(stderr, "  killed by signal %d%s\n", WTERMSIG(status),
            WTERMSIG(status) == SIGALRM ? " (timeout)" : "");
  if (!WIFEXITED(status)) return FAILED;
  return WEXITSTATUS(status) == 0 ? PASSED : WEXITSTATUS(status) == SKIP_STATUS ? SKIPPED : FAILED;
}

int main(int argc, char** argv) {
  if (!getenv("TORCHTPU_PLUGIN_PATH")) setenv("TORCHTPU_PLUGIN_PATH", TPU_TEST_PLUGIN_PATH, 1);
  int n = (int)(sizeof tests / sizeof tests[0]), count[3] = {0};
  for (int i = 0; i < n; ++i) {
    if (argc > 1 && !strstr(tests[i].name, argv[1])) continue;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int result = run_one(i, 120);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double ms = (t1.tv_sec - t0.tv_sec) * 1e3 + (t1.tv_nsec - t0.tv_nsec) / 1e6;
    static const char* const words[] = {"PASS", "FAIL", "SKIP"};
    printf("%s %s (%.0f ms)\n", words[result], tests[i].name, ms);
    ++count[result];
  }
  printf("%d passed, %d failed, %d skipped\n", count[PASSED], count[FAILED], count[SKIPPED]);
  return count[FAILED] ? 1 : 0;
}
