// The on-disk tier of the compile cache (see disk.c for the format).
#ifndef TPU_CACHE_DISK_H_
#define TPU_CACHE_DISK_H_

#include "tpu/client.h"

typedef struct tpu_disk_cache tpu_disk_cache_t;

// Opens the cache directory from TORCHTPU_CACHE_DIR (created if needed).
// *out is NULL when the disk tier is off (TORCHTPU_CACHE_DIR=off) or has
// no home. `identity` must change whenever executables become unusable
// (another plugin, XLA version, device kind).
TPU_MUST_USE tpu_status_t tpu_disk_cache_open(tpu_hash_t identity,
                                              tpu_disk_cache_t** out);
void tpu_disk_cache_close(tpu_disk_cache_t* c);
const char* tpu_disk_cache_dir(const tpu_disk_cache_t* c);
// The executable stored under `key`, or *out NULL (absent, corrupt, stale).
TPU_MUST_USE tpu_status_t tpu_disk_cache_load(tpu_disk_cache_t* c,
                                              tpu_client_t* client,
                                              tpu_hash_t key, int num_replicas,
                                              tpu_executable_t** out);
// Stores `exe` under `key`; best effort (failures are logged, not raised).
void tpu_disk_cache_store(tpu_disk_cache_t* c, tpu_hash_t key,
                          int num_replicas, tpu_executable_t* exe);

#endif  // TPU_CACHE_DISK_H_
