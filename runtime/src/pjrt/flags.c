// The plugin's flags from the environment (XLA_FLAGS, LIBTPU_INIT_ARGS).
// XLA reads them when the first client is created and ends the process on
// one it does not know ("Unknown flag in XLA_FLAGS"), which would take a
// notebook's kernel or a training job with it. So when the user set them, a
// child process creates a client first; if the plugin ends it, the reason
// it printed becomes an error here, and this process goes on.
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "pjrt/pjrt_internal.h"

enum { CHECK_SECONDS = 120, LOG_BYTES = 8192 };

bool tpu_plugin_flags_set(void) {
  static const char* const vars[] = {"XLA_FLAGS", "LIBTPU_INIT_ARGS"};
  for (size_t i = 0; i < sizeof vars / sizeof *vars; ++i) {
    const char* v = getenv(vars[i]);
    if (v && *v) return true;
  }
  return false;
}

// The message of the last line that says something: XLA's log lines start
// "F0000 00:00:1796282574.704336   10425 file.cc:234] "; the reason follows.
static const char* last_reason(char* log) {
  const char* reason = "";
  for (char* line = strtok(log, "\n"); line; line = strtok(NULL, "\n")) {
    if (!*line || !strncmp(line, "WARNING: All log messages before", 32)) continue;
    char* end_of_prefix = strstr(line, "] ");
    reason = end_of_prefix ? end_of_prefix + 2 : line;
  }
  return reason;
}

static double now_seconds(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

tpu_status_t tpu_plugin_flags_check(const PJRT_Api* api, PJRT_Client_Create_Args* args,
                                    const char* path) {
  int fds[2];
  if (pipe(fds)) return TPU_OK;  // unchecked, as before: never a false error
  pid_t pid = fork();
  if (pid < 0) {
    close(fds[0]);
    close(fds[1]);
    return TPU_OK;
  }
  if (pid == 0) {  // the child: only what creating a client needs
    close(fds[0]);
    dup2(fds[1], STDERR_FILENO);
    PJRT_Client_Create_Args a = *args;
    tpu_status_ignore(PJRT_CALL(api, Client_Create, a));
    _exit(0);  // created, or refused with an error this process will see too
  }
  close(fds[1]);
  char log[LOG_BYTES];
  size_t used = 0;
  double deadline = now_seconds() + CHECK_SECONDS;
  bool timed_out = false;
  for (;;) {
    struct pollfd p = {fds[0], POLLIN, 0};
    int left_ms = (int)((deadline - now_seconds()) * 1000);
    if (left_ms <= 0) {
      timed_out = true;
      break;
    }
    int ready = poll(&p, 1, left_ms);
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) continue;  // the deadline decides
    char chunk[1024];
    _Static_assert(sizeof chunk < LOG_BYTES, "a chunk fits in the log");
    ssize_t got = read(fds[0], chunk, sizeof chunk);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) break;  // the child is gone
    // Keep the end: the reason is printed last.
    size_t n = (size_t)got;
    if (used + n > sizeof log - 1) {
      size_t drop = used + n - (sizeof log - 1);
      memmove(log, log + drop, used - drop);
      used -= drop;
    }
    memcpy(log + used, chunk, n);
    used += n;
  }
  close(fds[0]);
  if (timed_out) kill(pid, SIGKILL);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {}
  if (timed_out || (WIFEXITED(status) && WEXITSTATUS(status) == 0)) return TPU_OK;
  log[used] = '\0';
  const char* reason = last_reason(log);
  return tpu_status_make(TPU_CODE_INVALID_ARGUMENT,
                         "the PJRT plugin %s does not accept the flags in XLA_FLAGS or "
                         "LIBTPU_INIT_ARGS (a process that created a client with them "
                         "ended: %s); fix or unset them",
                         path, *reason ? reason : "no reason given");
}
