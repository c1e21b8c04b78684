// A fast 128-bit non-cryptographic hash: two 64-bit lanes with different
// multipliers, each a multiply-xorshift mix over 8-byte words.
#include <stdio.h>
#include <string.h>

#include "tpu/base.h"

static const uint64_t K0 = 0x9e3779b97f4a7c15ull, K1 = 0xc2b2ae3d27d4eb4full;
static const uint64_t K2 = 0x165667b19e3779f9ull, K3 = 0xd6e8feb86659fd93ull;

static inline uint64_t mix(uint64_t h, uint64_t v, uint64_t k) {
  h ^= v * k;
  h = (h << 31) | (h >> 33);
  h *= K0;
  return h ^ (h >> 29);
}

static inline uint64_t finish(uint64_t h) {
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdull;
  h ^= h >> 33;
  h *= 0xc4ceb9fe1a85ec53ull;
  return h ^ (h >> 33);
}

tpu_hash_t tpu_hash_bytes(tpu_hash_t seed, const void* data, size_t size) {
  const unsigned char* p = data;
  uint64_t a = seed.lo ^ (size * K1), b = seed.hi ^ (size * K3);
  while (size >= 8) {
    uint64_t v;
    memcpy(&v, p, 8);
    a = mix(a, v, K1);
    b = mix(b, v, K2);
    p += 8;
    size -= 8;
  }
  uint64_t tail = 0;
  memcpy(&tail, p, size);
  a = mix(a, tail, K1);
  b = mix(b, tail ^ K3, K2);
  return (tpu_hash_t){finish(a), finish(b ^ a)};
}

tpu_hash_t tpu_hash_u64(tpu_hash_t seed, uint64_t value) {
  return (tpu_hash_t){finish(mix(seed.lo, value, K1)),
                      finish(mix(seed.hi, value, K2) ^ seed.lo)};
}

void tpu_hash_hex(tpu_hash_t h, char out[33]) {
  snprintf(out, 33, "%016llx%016llx", (unsigned long long)h.hi,
           (unsigned long long)h.lo);
}
