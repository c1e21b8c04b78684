// The on-disk tier of the compile cache: serialized executables under
// TORCHTPU_CACHE_DIR (default ~/.cache/torchtpu), one file per program.
//
// A file is a header {magic, format version, key, plugin identity, payload
// size, payload hash} followed by the plugin's serialized executable. Files
// are written to a temporary name and renamed, so processes sharing the
// directory never see half-written entries. A file whose header or hash does
// not match is ignored (and recompiled), never trusted. When the directory
// grows past TORCHTPU_CACHE_MAX_BYTES the least recently used files go; a
// file larger than the whole limit is not written.
// Counting the directory stats every file (a used cache holds 100k), so a
// process counts it at its first store, then only when its own tally (the
// last count plus what it stored since) passes the limit, or a minute after
// the last count, as other processes store too: the limit is soft by what
// they wrote in that minute.
#include "cache/disk.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <threads.h>
#include <time.h>
#include <unistd.h>
#include <utime.h>

enum { FORMAT_VERSION = 1, STALE_SECONDS = 3600 };
static const char MAGIC[8] = {'T', 'P', 'U', 'X', 'E', 'X', 'E', '\n'};

typedef struct header {
  char magic[8];
  uint32_t version, num_replicas;
  tpu_hash_t key, identity, payload_hash;
  uint64_t payload_size;
} header_t;

struct tpu_disk_cache {
  char* dir;
  tpu_hash_t identity;
  int64_t max_bytes;
  mtx_t lock;           // stores run outside the compile cache's lock
  int64_t bytes;        // the last count plus what this process stored since
  time_t counted_at;    // when the directory was last counted (0: never)
  bool warned_unstorable;  // the plugin could not serialize an executable
  bool warned_unwritable;  // an entry could not be written (directory gone, disk full)
  bool warned_oversized;   // an entry was larger than max_bytes
};

static tpu_status_t make_dirs(const char* path) {
  char buf[4096];
  snprintf(buf, sizeof buf, "%s", path);
  for (char* p = buf + 1; *p; ++p) {
    if (*p != '/') continue;
    *p = 0;
    if (mkdir(buf, 0755) && errno != EEXIST)
      return tpu_status_make(TPU_CODE_PERMISSION_DENIED, "cannot create %s: %s", buf,
                             strerror(errno));
    *p = '/';
  }
  if (mkdir(buf, 0755) && errno != EEXIST)
    return tpu_status_make(TPU_CODE_PERMISSION_DENIED, "cannot create %s: %s", buf,
                           strerror(errno));
  struct stat st;
  if (stat(buf, &st) || !S_ISDIR(st.st_mode))
    return tpu_status_make(TPU_CODE_FAILED_PRECONDITION, "%s is not a directory", buf);
  if (access(buf, W_OK | X_OK))
    return tpu_status_make(TPU_CODE_PERMISSION_DENIED, "cannot write to %s: %s", buf,
                           strerror(errno));
  return TPU_OK;
}

tpu_status_t tpu_disk_cache_open(tpu_hash_t identity, tpu_disk_cache_t** out) {
  *out = NULL;
  const char* dir = getenv("TORCHTPU_CACHE_DIR");
  char def[4096];
  if (dir && (!strcmp(dir, "off") || !strcmp(dir, "0") || !*dir)) return TPU_OK;
  if (!dir) {
    const char* xdg = getenv("XDG_CACHE_HOME");
    const char* home = getenv("HOME");
    if (xdg && *xdg) snprintf(def, sizeof def, "%s/torchtpu", xdg);
    else if (home && *home) snprintf(def, sizeof def, "%s/.cache/torchtpu", home);
    else return TPU_OK;  // nowhere to keep it
    dir = def;
  }
  TPU_RETURN_IF_ERROR(make_dirs(dir));
  tpu_disk_cache_t* c = tpu_calloc(1, sizeof *c);
  if (!c) return tpu_status_make(TPU_CODE_RESOURCE_EXHAUSTED, "out of memory");
  char* absolute = realpath(dir, NULL);  // so that a later os.chdir() moves no entries
  c->dir = absolute ? tpu_strdup(absolute) : NULL;
  free(absolute);
  c->identity = identity;
  if (!c->dir || mtx_init(&c->lock, mtx_plain) != thrd_success) {
    tpu_free(c->dir);
    tpu_free(c);
    return tpu_status_make(TPU_CODE_RESOURCE_EXHAUSTED, "cannot set up the cache in %s", dir);
  }
  c->max_bytes = tpu_env_get(TPU_ENV_CACHE_MAX_BYTES, NULL);
  *out = c;
  return TPU_OK;
}

void tpu_disk_cache_close(tpu_disk_cache_t* c) {
  if (!c) return;
  mtx_destroy(&c->lock);
  tpu_free(c->dir);
  tpu_free(c);
}

const char* tpu_disk_cache_dir(const tpu_disk_cache_t* c) { return c ? c->dir : NULL; }

static void entry_path(const tpu_disk_cache_t* c, tpu_hash_t key, char* out, size_t size) {
  char hex[33];
  tpu_hash_hex(key, hex);
  snprintf(out, size, "%s/%s.tpuexe", c->dir, hex);
}

static tpu_hash_t payload_hash(const char* data, size_t size) {
  return tpu_hash_bytes((tpu_hash_t){0x7061796c, 0x6f6164}, data, size);
}

tpu_status_t tpu_disk_cache_load(tpu_disk_cache_t* c, tpu_client_t* client,
                                 tpu_hash_t key, int num_replicas,
                                 tpu_executable_t** out) {
  *out = NULL;
  char path[4200];
  entry_path(c, key, path, sizeof path);
  // Only a regular file is an entry: opening a named pipe put there would
  // block for ever. (Non-blocking only matters for the open itself.)
  int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  struct stat st;
  FILE* f = NULL;
  if (fd >= 0 && !fstat(fd, &st) && S_ISREG(st.st_mode)) f = fdopen(fd, "rb");
  if (!f) {
    if (fd >= 0) close(fd);
    return TPU_OK;  // a miss
  }
  header_t h;
  char* data = NULL;
  bool ok = fread(&h, sizeof h, 1, f) == 1 && !memcmp(h.magic, MAGIC, sizeof MAGIC) &&
            h.version == FORMAT_VERSION && tpu_hash_eq(h.key, key) &&
            tpu_hash_eq(h.identity, c->identity) && h.num_replicas == (uint32_t)num_replicas &&
            h.payload_size > 0 && h.payload_size < ((uint64_t)1 << 34);
  if (ok) {
    data = tpu_malloc((size_t)h.payload_size);
    ok = data && fread(data, 1, (size_t)h.payload_size, f) == h.payload_size &&
         tpu_hash_eq(payload_hash(data, (size_t)h.payload_size), h.payload_hash);
  }
  fclose(f);
  tpu_status_t s = TPU_OK;
  if (ok) {
    s = tpu_executable_deserialize(client, data, (size_t)h.payload_size, num_replicas, out);
    if (s) {  // stale or foreign: recompile instead
      tpu_log(TPU_LOG_INFO, "ignoring cache entry %s: %s", path, tpu_status_message(s));
      tpu_status_free(s);
      s = TPU_OK;
    } else {
      utime(path, NULL);  // recently used
    }
  } else {
    tpu_log(TPU_LOG_INFO, "ignoring corrupt cache entry %s", path);
  }
  tpu_free(data);
  return s;
}

typedef struct file_info {
  char name[64];
  int64_t mtime_ns;  // entries stored in the same second still have an order
  int64_t size;
} file_info_t;

static int by_mtime(const void* a, const void* b) {
  const file_info_t *x = a, *y = b;
  return x->mtime_ns < y->mtime_ns ? -1 : x->mtime_ns > y->mtime_ns;
}

// Counts the directory and deletes the least recently used entries until it
// fits, and the temporary files of writers that died mid-write.
static void count_and_evict(tpu_disk_cache_t* c) {
  c->counted_at = time(NULL);
  DIR* d = opendir(c->dir);
  if (!d) return;
  file_info_t* files = NULL;
  int n = 0, cap = 0;
  int64_t total = 0;
  struct dirent* e;
  while ((e = readdir(d))) {
    size_t len = strlen(e->d_name);
    bool temporary = strstr(e->d_name, ".tpuexe.tmp.") != NULL;
    if (!temporary && (len < 8 || len >= 64 || strcmp(e->d_name + len - 7, ".tpuexe")))
      continue;
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", c->dir, e->d_name);
    struct stat st;
    if (stat(path, &st)) continue;
    if (temporary) {  // being written, or left by a writer that died: gone after an hour
      if (time(NULL) - st.st_mtime > STALE_SECONDS) unlink(path);
      else total += (int64_t)st.st_size;
      continue;
    }
    if (n == cap) {
      cap = cap ? cap * 2 : 64;
      file_info_t* p = tpu_realloc(files, sizeof *p * (size_t)cap);
      if (!p) break;
      files = p;
    }
    snprintf(files[n].name, sizeof files[n].name, "%s", e->d_name);
    files[n].mtime_ns = (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec;
    files[n].size = (int64_t)st.st_size;
    total += files[n++].size;
  }
  closedir(d);
  if (total > c->max_bytes) {
    qsort(files, (size_t)n, sizeof *files, by_mtime);
    for (int i = 0; i < n && total > c->max_bytes; ++i) {
      char path[4200];
      snprintf(path, sizeof path, "%s/%s", c->dir, files[i].name);
      // Gone already (another process evicted it): its bytes are gone too.
      if (!unlink(path) || errno == ENOENT) total -= files[i].size;
    }
  }
  tpu_free(files);
  c->bytes = total;
}

// A warning the first time `*said` is false, then information: said once
// per process, as each costs every later process too.
static tpu_log_level_t once(tpu_disk_cache_t* c, bool* said) {
  mtx_lock(&c->lock);
  bool before = *said;
  *said = true;
  mtx_unlock(&c->lock);
  return before ? TPU_LOG_INFO : TPU_LOG_WARN;
}

void tpu_disk_cache_store(tpu_disk_cache_t* c, tpu_hash_t key, int num_replicas,
                          tpu_executable_t* exe) {
  char* data = NULL;
  size_t size = 0;
  tpu_status_t s = tpu_executable_serialize(exe, &data, &size);
  if (s) {  // the memory tier still works
    tpu_log(once(c, &c->warned_unstorable),
            "a compiled program cannot be stored in the disk cache, so every process "
            "compiles it again: %s",
            tpu_status_message(s));
    tpu_status_free(s);
    return;
  }
  // An entry over the whole limit would be evicted as soon as written, and
  // every other entry with it, oldest first: not stored, and said once.
  if ((int64_t)(sizeof(header_t) + size) > c->max_bytes) {
    tpu_log(once(c, &c->warned_oversized),
            "a compiled program of %lld bytes is not stored in the disk cache, as it is "
            "larger than TORCHTPU_CACHE_MAX_BYTES=%lld: it compiles again in the next "
            "process (raise the limit to keep it)",
            (long long)(sizeof(header_t) + size), (long long)c->max_bytes);
    tpu_free(data);
    return;
  }
  header_t h;
  memset(&h, 0, sizeof h);
  memcpy(h.magic, MAGIC, sizeof MAGIC);
  h.version = FORMAT_VERSION;
  h.num_replicas = (uint32_t)num_replicas;
  h.key = key;
  h.identity = c->identity;
  h.payload_size = size;
  h.payload_hash = payload_hash(data, size);
  char path[4200], tmp[4300];
  entry_path(c, key, path, sizeof path);
  snprintf(tmp, sizeof tmp, "%s.tmp.%ld.%lx", path, (long)getpid(),
           (unsigned long)(uintptr_t)&h ^ (unsigned long)time(NULL));
  FILE* f = fopen(tmp, "wb");
  bool ok = f && fwrite(&h, sizeof h, 1, f) == 1 && fwrite(data, 1, size, f) == size;
  int error = ok ? 0 : errno;  // 0: a short write that set none
  if (f && fclose(f) && ok) {
    ok = false;
    error = errno;
  }
  if (ok && rename(tmp, path)) {
    ok = false;
    error = errno;
  }
  tpu_free(data);
  if (!ok) {
    unlink(tmp);
    // The directory went, or the disk filled, after the cache opened: the
    // process runs on, compiling what it cannot store; said once, as at open.
    tpu_log(once(c, &c->warned_unwritable),
            "cannot write to the compile cache in %s (%s): programs compiled from now on "
            "are not stored, and compile again in the next process",
            c->dir, error ? strerror(error) : "short write");
    return;
  }
  mtx_lock(&c->lock);
  c->bytes += (int64_t)(sizeof h + size);
  if (c->bytes > c->max_bytes || time(NULL) - c->counted_at >= 60) count_and_evict(c);
  mtx_unlock(&c->lock);
}
