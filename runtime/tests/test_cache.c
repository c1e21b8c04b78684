// The compile cache: memory hits, disk round trip, corrupt entries.
#include <dirent.h>
#include <unistd.h>

#include "cache/cache.h"
#include "test.h"

static const char* program =
    "module { func.func public @main(%a: tensor<4xf32>) -> tensor<4xf32> {\n"
    "  %0 = \"stablehlo.multiply\"(%a, %a) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>\n"
    "  \"func.return\"(%0) : (tensor<4xf32>) -> ()\n} }\n";

static int prints;

static tpu_status_t print_program(void* user, char** text, size_t* size) {
  ++prints;
  *text = tpu_strdup(program);
  *size = strlen(program);
  return TPU_OK;
}

static void run_square(tpu_client_t* c, tpu_executable_t* e) {
  float in[4] = {1, 2, 3, -4}, out[4];
  int64_t d = 4;
  tpu_buffer_t *b, *r;
  CHECK_OK(tpu_buffer_from_host(c, 0, TPU_F32, &d, 1, in, NULL, &b));
  CHECK_OK(tpu_executable_execute(e, 0, &b, 1, NULL, 0, &r, 1, NULL));
  CHECK_OK(tpu_buffer_to_host(r, out, sizeof out));
  for (int i = 0; i < 4; ++i) CHECK(out[i] == in[i] * in[i]);
  tpu_buffer_release(b);
  tpu_buffer_release(r);
}

static int count_entries(const char* dir) {
  DIR* d = opendir(dir);
  int n = 0;
  struct dirent* e;
  while (d && (e = readdir(d))) n += strstr(e->d_name, ".tpuexe") != NULL;
  if (d) closedir(d);
  return n;
}

void test_disk_cache(void) {
  char dir[] = "/tmp/tpu_cache_test_XXXXXX";
  CHECK(mkdtemp(dir));
  setenv("TORCHTPU_CACHE_DIR", dir, 1);
  tpu_client_t* c = test_client(1);
  tpu_hash_t key = {1234, 5678};
  tpu_cache_source_t src;
  tpu_executable_t *e1, *e2;

  // First process: compiled, stored on disk; then a memory hit, same object.
  tpu_cache_t* cache;
  CHECK_OK(tpu_cache_create(c, 16, &cache));
  CHECK_OK(tpu_cache_get(cache, key, 1, print_program, NULL, &e1, &src));
  CHECK(src == TPU_CACHE_COMPILED);
  CHECK_OK(tpu_cache_get(cache, key, 1, print_program, NULL, &e2, &src));
  CHECK(src == TPU_CACHE_MEMORY && e1 == e2 && prints == 1);
  tpu_cache_stats_t st;
  tpu_cache_stats(cache, &st);
  CHECK(st.requests == 2 && st.hits == 1 && st.compiles == 1);
  CHECK(count_entries(dir) == 1);
  run_square(c, e1);
  tpu_executable_release(e1);
  tpu_executable_release(e2);
  tpu_cache_destroy(cache);

  // "Second process": a fresh cache loads from disk without compiling.
  CHECK_OK(tpu_cache_create(c, 16, &cache));
  CHECK_OK(tpu_cache_get(cache, key, 1, print_program, NULL, &e1, &src));
  CHECK_MSG(src == TPU_CACHE_DISK, "expected a disk hit, got source %d", src);
  run_square(c, e1);
  tpu_executable_release(e1);
  tpu_cache_destroy(cache);

  // A corrupt entry is ignored and replaced, never trusted.
  DIR* d = opendir(dir);
  struct dirent* ent;
  char path[512] = "";
  while ((ent = readdir(d)))
    if (strstr(ent->d_name, ".tpuexe")) snprintf(path, sizeof path, "%s/%s", dir, ent->d_name);
  closedir(d);
  FILE* f = fopen(path, "r+b");
  CHECK(f);
  fseek(f, 200, SEEK_SET);
  fputs("garbage", f);
  fclose(f);
  CHECK_OK(tpu_cache_create(c, 16, &cache));
  CHECK_OK(tpu_cache_get(cache, key, 1, print_program, NULL, &e1, &src));
  CHECK(src == TPU_CACHE_COMPILED);
  run_square(c, e1);
  tpu_executable_release(e1);
  tpu_cache_destroy(cache);

  // No compiles allowed: a miss everywhere is an error, not a crash.
  setenv("TORCHTPU_ASSERT_NO_COMPILE", "1", 1);
  setenv("TORCHTPU_CACHE_DIR", "off", 1);
  CHECK_OK(tpu_cache_create(c, 16, &cache));
  CHECK_ERROR(tpu_cache_get(cache, key, 1, print_program, NULL, &e1, &src),
              TPU_CODE_FAILED_PRECONDITION, "TORCHTPU_ASSERT_NO_COMPILE");
  // A value it does not take is the error: a typo must not let a compile pass.
  setenv("TORCHTPU_ASSERT_NO_COMPILE", "true", 1);
  CHECK_ERROR(tpu_cache_get(cache, key, 1, print_program, NULL, &e1, &src),
              TPU_CODE_INVALID_ARGUMENT, "TORCHTPU_ASSERT_NO_COMPILE=true: expected 0 or 1");
  tpu_cache_destroy(cache);
  unsetenv("TORCHTPU_ASSERT_NO_COMPILE");

  // A directory that is a file: the cache works, without a disk.
  setenv("TORCHTPU_CACHE_DIR", path, 1);
  CHECK_OK(tpu_cache_create(c, 16, &cache));
  CHECK(tpu_cache_dir(cache) == NULL);
  CHECK_OK(tpu_cache_get(cache, key, 1, print_program, NULL, &e1, &src));
  CHECK(src == TPU_CACHE_COMPILED);
  tpu_executable_release(e1);
  tpu_cache_destroy(cache);
  unsetenv("TORCHTPU_CACHE_DIR");
  tpu_client_release(c);
  unlink(path);
  rmdir(dir);
}
