// torchtpu runtime: the umbrella header (the only one the binding includes).
//
// Rules that hold across the whole API:
//  - Errors: every fallible function returns tpu_status_t (NULL = OK) and is
//    TPU_MUST_USE. A failed call leaves its out-params NULL/zero and nothing
//    for the caller to free. Nothing aborts on user input or device errors.
//  - Ownership: *_create / *_compile / *_from_host return +1 references owned
//    by the caller; accessors borrow; a callee that keeps an argument retains
//    it; *_release(NULL) is a no-op.
//  - Out-params are named out_*, come last, and are zeroed on entry.
//  - Memory: all host allocations go through tpu_malloc (base.h), so tests
//    can assert that none leak.
#ifndef TPU_TPU_H_
#define TPU_TPU_H_

#include "tpu/base.h"
#include "tpu/client.h"
#include "tpu/dtype.h"

#ifdef __cplusplus
extern "C" {
#endif

// Releases every process-wide object the runtime holds (engines, caches,
// the default client). Tests call it before checking for leaks.
void tpu_runtime_shutdown(void);

#ifdef __cplusplus
}
#endif
#endif  // TPU_TPU_H_
