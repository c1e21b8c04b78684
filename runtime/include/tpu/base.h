// torchtpu runtime: status objects, the replaceable allocator, hashing, logging,
// environment variables.
//
// Status: every function that can fail returns tpu_status_t. NULL (TPU_OK)
// means success and costs nothing; an error is a heap object holding an
// abseil-numbered code, a message, and the file and line that made it. Every
// status is returned, freed with tpu_status_free, or dropped on purpose with
// tpu_status_ignore. Out of memory returns a preallocated status.
//
// Allocator: all runtime memory goes through tpu_malloc/tpu_free, which count
// live allocations so tests can assert that nothing leaks. The functions
// behind them can be replaced before the first allocation.
//
// Thread safety: everything here may be called from any thread.
#ifndef TPU_BASE_H_
#define TPU_BASE_H_

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define TPU_MUST_USE __attribute__((warn_unused_result))
#define TPU_PRINTF(f, a) __attribute__((format(printf, f, a)))
#else
#define TPU_MUST_USE
#define TPU_PRINTF(f, a)
#endif

//===--- status ---===//

// Abseil status codes (the numbering PJRT uses too), and three of ours for
// the exception types PyTorch raises beyond RuntimeError/IndexError: LINALG,
// an input a linear-algebra op cannot factor or invert (LinAlgError); VALUE
// (ValueError) and TYPE (TypeError), an argument PyTorch rejects as such.
#define TPU_CODE_LIST(X)     \
  X(OK, 0)                   \
  X(CANCELLED, 1)            \
  X(UNKNOWN, 2)              \
  X(INVALID_ARGUMENT, 3)     \
  X(DEADLINE_EXCEEDED, 4)    \
  X(NOT_FOUND, 5)            \
  X(ALREADY_EXISTS, 6)       \
  X(PERMISSION_DENIED, 7)    \
  X(RESOURCE_EXHAUSTED, 8)   \
  X(FAILED_PRECONDITION, 9)  \
  X(ABORTED, 10)             \
  X(OUT_OF_RANGE, 11)        \
  X(UNIMPLEMENTED, 12)       \
  X(INTERNAL, 13)            \
  X(UNAVAILABLE, 14)         \
  X(DATA_LOSS, 15)           \
  X(UNAUTHENTICATED, 16)     \
  X(LINALG, 100)             \
  X(VALUE, 101)              \
  X(TYPE, 102)

typedef enum tpu_code {
#define TPU_CODE_ENUM(name, value) TPU_CODE_##name = value,
  TPU_CODE_LIST(TPU_CODE_ENUM)
#undef TPU_CODE_ENUM
} tpu_code_t;

typedef struct tpu_status* tpu_status_t;
#define TPU_OK ((tpu_status_t)NULL)

TPU_MUST_USE tpu_status_t tpu_status_make_(tpu_code_t code, const char* file,
                                           int line, const char* fmt, ...)
    TPU_PRINTF(4, 5);
#define tpu_status_make(code, ...) \
  tpu_status_make_((code), __FILE__, __LINE__, __VA_ARGS__)

tpu_code_t tpu_status_code(tpu_status_t status);
const char* tpu_status_message(tpu_status_t status);  // "" for OK
const char* tpu_status_file(tpu_status_t status);
int tpu_status_line(tpu_status_t status);
const char* tpu_code_name(tpu_code_t code);  // "INVALID_ARGUMENT"
// Prepends "context: " to the message; returns the same status.
TPU_MUST_USE tpu_status_t tpu_status_annotate(tpu_status_t status,
                                              const char* fmt, ...)
    TPU_PRINTF(2, 3);
// A new status with the same code, message and location.
TPU_MUST_USE tpu_status_t tpu_status_clone(tpu_status_t status);
void tpu_status_free(tpu_status_t status);
static inline void tpu_status_ignore(tpu_status_t status) {
  tpu_status_free(status);
}

#define TPU_RETURN_IF_ERROR(expr)          \
  do {                                     \
    tpu_status_t tpu_status__ = (expr);    \
    if (tpu_status__) return tpu_status__; \
  } while (0)

//===--- allocator ---===//

typedef struct tpu_allocator {
  void* (*malloc_fn)(size_t size);
  void* (*realloc_fn)(void* ptr, size_t size);
  void (*free_fn)(void* ptr);
} tpu_allocator_t;

void tpu_allocator_replace(const tpu_allocator_t* allocator);
void* tpu_malloc(size_t size);  // NULL on failure (or size 0)
void* tpu_calloc(size_t count, size_t size);
void* tpu_realloc(void* ptr, size_t size);
void tpu_free(void* ptr);
char* tpu_strdup(const char* s);
char* tpu_strndup(const char* s, size_t n);
// Number of allocations made through tpu_malloc and not yet freed.
int64_t tpu_alloc_live(void);

//===--- hashing ---===//

// A 128-bit hash: two independent 64-bit lanes, so that a cache keyed by it
// never confuses two programs in practice.
typedef struct tpu_hash {
  uint64_t lo, hi;
} tpu_hash_t;

tpu_hash_t tpu_hash_bytes(tpu_hash_t seed, const void* data, size_t size);
tpu_hash_t tpu_hash_u64(tpu_hash_t seed, uint64_t value);
static inline bool tpu_hash_eq(tpu_hash_t a, tpu_hash_t b) {
  return a.lo == b.lo && a.hi == b.hi;
}
// 32 lowercase hex digits and a NUL.
void tpu_hash_hex(tpu_hash_t hash, char out[33]);

//===--- logging ---===//

typedef enum tpu_log_level {
  TPU_LOG_ERROR = 0,
  TPU_LOG_WARN = 1,
  TPU_LOG_INFO = 2,
  TPU_LOG_DEBUG = 3,
} tpu_log_level_t;

// The level comes from TORCHTPU_LOG (error|warn|info|debug), default warn.
tpu_log_level_t tpu_log_level(void);
void tpu_log(tpu_log_level_t level, const char* fmt, ...) TPU_PRINTF(2, 3);

//===--- environment ---===//

// torchtpu's environment variables that take a number or one of a few
// words (docs/environment.md). A value that is set but that the variable
// does not take is an error naming both, never a silent default:
// tpu_runtime_init checks them all. TORCHTPU_ASSERT_NO_COMPILE and
// TORCHTPU_FALLBACK are read again where they act (tests set them within a
// process) and raise there too.
typedef enum tpu_env {
  TPU_ENV_MODE,                // debug | strict | fused (tpu_mode_t)
  TPU_ENV_LOG,                 // error | warn | info | debug (tpu_log_level_t)
  TPU_ENV_FALLBACK,            // warn | error
  TPU_ENV_ASSERT_NO_COMPILE,   // 0 | 1
  TPU_ENV_BACKGROUND_COMPILE,  // 0 | 1
  TPU_ENV_CPU_DEVICES,
  TPU_ENV_FUSED_MAX_OPS,
  TPU_ENV_CACHE_ENTRIES,
  TPU_ENV_CACHE_MAX_BYTES,
  TPU_ENV_CACHE_MAX_MAPPINGS,  // default -1: half of vm.max_map_count
  TPU_ENV_COUNT
} tpu_env_t;

// The variable's value: its integer, or the index of its word in the list
// above. Unset or empty: its default. A value it does not take: the default,
// and *error (when error is not NULL) says why.
int64_t tpu_env_get(tpu_env_t var, tpu_status_t* error);
// The first variable whose value is not one it takes, else TPU_OK.
TPU_MUST_USE tpu_status_t tpu_env_check(void);

#ifdef __cplusplus
}
#endif
#endif  // TPU_BASE_H_
