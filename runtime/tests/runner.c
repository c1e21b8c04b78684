#include <signal.h>
#include <stdarg.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "test.h"

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

tpu_client_t* test_client(int devices) {
  tpu_client_options_t o = {"cpu", devices};
  tpu_client_t* c = NULL;
  CHECK_OK(tpu_client_create(&o, &c));
  return c;
}

tpu_executable_t* test_compile(tpu_client_t* c, const char* mlir) {
  tpu_executable_t* e = NULL;
  CHECK_OK(tpu_executable_compile(c, mlir, strlen(mlir), 1, &e));
  return e;
}

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
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

int main(int argc, char** argv) {
  if (!getenv("TORCHTPU_PLUGIN_PATH")) setenv("TORCHTPU_PLUGIN_PATH", TPU_TEST_PLUGIN_PATH, 1);
  int n = (int)(sizeof tests / sizeof tests[0]), passed = 0, failed = 0;
  for (int i = 0; i < n; ++i) {
    if (argc > 1 && !strstr(tests[i].name, argv[1])) continue;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int ok = run_one(i, 120);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double ms = (t1.tv_sec - t0.tv_sec) * 1e3 + (t1.tv_nsec - t0.tv_nsec) / 1e6;
    printf("%s %s (%.0f ms)\n", ok ? "PASS" : "FAIL", tests[i].name, ms);
    ok ? ++passed : ++failed;
  }
  printf("%d passed, %d failed\n", passed, failed);
  return failed ? 1 : 0;
}
