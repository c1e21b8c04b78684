// Host-side cost of the PJRT layer: one execute of a tiny compiled program,
// a host upload and download, and the compile time of a small program.
// Prints medians of several rounds (machines here are shared and noisy).
//
//   build/runtime/tpu_bench            (make bench-c)
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tpu/tpu.h"

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static int cmp(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return x < y ? -1 : x > y;
}

static double median(double* v, int n) {
  qsort(v, (size_t)n, sizeof *v, cmp);
  return v[n / 2];
}

static void check(tpu_status_t s, const char* what) {
  if (!s) return;
  fprintf(stderr, "%s: %s\n", what, tpu_status_message(s));
  exit(1);
}

static const char* tiny =
    "module { func.func public @main(%a: tensor<4xf32>, %b: tensor<4xf32>) -> tensor<4xf32> {\n"
    "  %0 = \"stablehlo.add\"(%a, %b) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>\n"
    "  \"func.return\"(%0) : (tensor<4xf32>) -> ()\n} }\n";

// A small MLP layer: dot, bias broadcast, max(0, .).
static const char* small =
    "module { func.func public @main(%x: tensor<32x64xf32>, %w: tensor<64x64xf32>, %b: tensor<64xf32>) -> tensor<32x64xf32> {\n"
    "  %0 = \"stablehlo.dot_general\"(%x, %w) {dot_dimension_numbers = #stablehlo.dot<lhs_contracting_dimensions = [1], rhs_contracting_dimensions = [0]>} : (tensor<32x64xf32>, tensor<64x64xf32>) -> tensor<32x64xf32>\n"
    "  %1 = \"stablehlo.broadcast_in_dim\"(%b) {broadcast_dimensions = array<i64: 1>} : (tensor<64xf32>) -> tensor<32x64xf32>\n"
    "  %2 = \"stablehlo.add\"(%0, %1) : (tensor<32x64xf32>, tensor<32x64xf32>) -> tensor<32x64xf32>\n"
    "  %3 = \"stablehlo.constant\"() {value = dense<0.0> : tensor<32x64xf32>} : () -> tensor<32x64xf32>\n"
    "  %4 = \"stablehlo.maximum\"(%2, %3) : (tensor<32x64xf32>, tensor<32x64xf32>) -> tensor<32x64xf32>\n"
    "  \"func.return\"(%4) : (tensor<32x64xf32>) -> ()\n} }\n";

int main(void) {
  enum { ROUNDS = 9, N = 5000 };
  tpu_client_options_t o = {NULL, 1};
  tpu_client_t* c;
  check(tpu_client_create(&o, &c), "client");
  printf("plugin %s (PJRT API 0.%d, platform %s)\n", tpu_client_plugin_path(c),
         tpu_client_api_minor(c), tpu_client_platform(c));

  double t[ROUNDS];
  tpu_executable_t* e;
  for (int r = 0; r < ROUNDS; ++r) {
    double t0 = now();
    check(tpu_executable_compile(c, small, strlen(small), 1, &e), "compile");
    t[r] = (now() - t0) * 1e3;
    tpu_executable_release(e);
  }
  printf("compile small program (dot + bias + relu): %.1f ms median of %d\n", median(t, ROUNDS), ROUNDS);
  for (int r = 0; r < ROUNDS; ++r) {
    double t0 = now();
    check(tpu_executable_compile(c, tiny, strlen(tiny), 1, &e), "compile");
    t[r] = (now() - t0) * 1e3;
    if (r < ROUNDS - 1) tpu_executable_release(e);
  }
  printf("compile tiny program (one add):            %.1f ms median of %d\n", median(t, ROUNDS), ROUNDS);

  float host[4] = {1, 2, 3, 4}, back[4];
  int64_t d = 4;
  tpu_buffer_t* b;
  check(tpu_buffer_from_host(c, 0, TPU_F32, &d, 1, host, NULL, &b), "upload");
  tpu_buffer_t* args[2] = {b, b};
  for (int r = 0; r < ROUNDS; ++r) {
    double t0 = now();
    for (int i = 0; i < N; ++i) {
      tpu_buffer_t* out;
      check(tpu_executable_execute(e, 0, args, 2, NULL, 0, &out, 1, NULL), "execute");
      tpu_buffer_release(out);
    }
    t[r] = (now() - t0) / N * 1e6;
  }
  printf("execute tiny program (host side, async):    %.2f us median of %d x %d\n", median(t, ROUNDS), ROUNDS, N);
  for (int r = 0; r < ROUNDS; ++r) {
    double t0 = now();
    for (int i = 0; i < N; ++i) {
      tpu_buffer_t* out;
      check(tpu_executable_execute(e, 0, args, 2, NULL, 0, &out, 1, NULL), "execute");
      check(tpu_buffer_await(out), "await");
      tpu_buffer_release(out);
    }
    t[r] = (now() - t0) / N * 1e6;
  }
  printf("execute tiny program and wait:              %.2f us median of %d x %d\n", median(t, ROUNDS), ROUNDS, N);
  for (int r = 0; r < ROUNDS; ++r) {
    double t0 = now();
    for (int i = 0; i < N; ++i) {
      tpu_buffer_t* x;
      check(tpu_buffer_from_host(c, 0, TPU_F32, &d, 1, host, NULL, &x), "upload");
      tpu_buffer_release(x);
    }
    t[r] = (now() - t0) / N * 1e6;
  }
  printf("upload 16 bytes:                            %.2f us median\n", median(t, ROUNDS));
  for (int r = 0; r < ROUNDS; ++r) {
    double t0 = now();
    for (int i = 0; i < N; ++i) check(tpu_buffer_to_host(b, back, sizeof back), "download");
    t[r] = (now() - t0) / N * 1e6;
  }
  printf("download 16 bytes:                          %.2f us median\n", median(t, ROUNDS));
  tpu_buffer_release(b);
  tpu_executable_release(e);
  tpu_client_release(c);
  return 0;
}
