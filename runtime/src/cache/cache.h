// The compile cache: executables by program key, in memory (LRU) and on
// disk (disk.h).
//
// The memory key is the structural hash of the program (see ir.h), so a hit
// costs no printing. On a miss the cache asks for the program text; the disk
// key is the hash of that text, the replica count and the plugin's identity.
// Only when both tiers miss is the program compiled (and stored on disk).
// With TORCHTPU_ASSERT_NO_COMPILE=1 a compile is an error instead.
//
// Thread safety: all functions may be called from any thread.
#ifndef TPU_CACHE_CACHE_H_
#define TPU_CACHE_CACHE_H_

#include "tpu/client.h"

typedef struct tpu_cache tpu_cache_t;

typedef tpu_status_t (*tpu_cache_print_fn)(void* user, char** out_text,
                                           size_t* out_size);

typedef struct tpu_cache_stats {
  int64_t requests, hits, misses, entries, evictions;
  int64_t disk_hits, compiles;
  double compile_seconds;
} tpu_cache_stats_t;

TPU_MUST_USE tpu_status_t tpu_cache_create(tpu_client_t* client,
                                           size_t capacity,
                                           tpu_cache_t** out_cache);
void tpu_cache_destroy(tpu_cache_t* cache);
typedef enum tpu_cache_source {
  TPU_CACHE_MEMORY, TPU_CACHE_DISK, TPU_CACHE_COMPILED
} tpu_cache_source_t;

// The executable for `key` (retained for the caller), loading or compiling
// it on a miss; *out_source says which. With `print` NULL only the memory
// tier is looked in: a miss gives OK and *out_exe NULL, and is not counted.
TPU_MUST_USE tpu_status_t tpu_cache_get(tpu_cache_t* cache, tpu_hash_t key,
                                        int num_replicas,
                                        tpu_cache_print_fn print, void* user,
                                        tpu_executable_t** out_exe,
                                        tpu_cache_source_t* out_source);
// The directory of the disk tier, or NULL when it is off.
const char* tpu_cache_dir(const tpu_cache_t* cache);
void tpu_cache_stats(tpu_cache_t* cache, tpu_cache_stats_t* out_stats);
double tpu_cache_compile_seconds(tpu_cache_t* cache);
void tpu_cache_clear(tpu_cache_t* cache);

#endif  // TPU_CACHE_CACHE_H_
