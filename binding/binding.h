// The PyTorch side of torchtpu: what the binding's files share.
//
// C++ lives here only because PyTorch's extension points are C++. The work
// is in the C runtime (tpu.h); this layer converts between PyTorch's objects
// and the runtime's, and turns runtime statuses into PyTorch exceptions.
#pragma once

#include <ATen/core/Tensor.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/core/Allocator.h>
#include <c10/core/CachingDeviceAllocator.h>
#include <c10/core/Device.h>

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "tpu/engine.h"
#include "tpu/tpu.h"

namespace torchtpu {

// Throws the PyTorch exception matching the status (and frees it):
// OUT_OF_RANGE -> IndexError, UNIMPLEMENTED -> NotImplementedError,
// RESOURCE_EXHAUSTED -> OutOfMemoryError, everything else -> RuntimeError.
void check(tpu_status_t status);

// Initializes the runtime (plugin, client) on first use; throws on failure.
void ensure_runtime();

tpu_dtype_t to_tpu(c10::ScalarType t);  // throws for unsupported dtypes
c10::ScalarType to_torch(tpu_dtype_t t);
// torch.set_float32_matmul_precision now: the precision of an op's float32
// products (tpu_call_t.precision).
tpu_precision_t matmul_precision();
// torch.get_default_dtype() now (tpu_call_t.default_float).
tpu_dtype_t default_float();

// The runtime's view of a tpu tensor (its storage slot and geometry).
tpu_view_t view_of(const at::Tensor& t);
tpu_slot_t* slot_of(const c10::Storage& storage);

// The device allocator: storages own one reference to a storage slot.
c10::Allocator* allocator();
// Its statistics in torch.cuda's terms, which torch.tpu.memory_stats() and
// torch.accelerator.memory_stats() report.
c10::CachingDeviceAllocator::DeviceStats device_stats(c10::DeviceIndex device);
c10::DataPtr allocate_on(c10::DeviceIndex device, size_t nbytes);
// Resizes a storage's slot to `nbytes`, keeping its contents.
void resize_slot(const c10::Storage& storage, size_t nbytes);
// (free, total) bytes of the device's memory: torch.tpu.mem_get_info and
// torch.accelerator.get_memory_info.
std::pair<size_t, size_t> mem_get_info(c10::DeviceIndex device);
// Makes the storage hold at least `nbytes`, keeping its contents.
void ensure_storage(const at::Tensor& self, size_t nbytes);
// A new contiguous tpu tensor.
at::Tensor new_tensor(c10::IntArrayRef sizes, c10::ScalarType dtype,
                      c10::DeviceIndex device);

// The current tpu device of this thread.
c10::DeviceIndex current_device();
// PyTorch's "Expected all tensors to be on the same device" for `t`, of
// another device than the op's tpu tensors on `tpu` (-1: the current one).
[[noreturn]] void mixed_devices(const at::Tensor& t, c10::DeviceIndex tpu);
void set_current_device(c10::DeviceIndex device);
int device_count();  // 0 when the runtime cannot start

// The generator's (seed, counter) for one random op, advancing it.
void rng_next(const std::optional<at::Generator>& gen, c10::DeviceIndex device,
              uint64_t out[2]);

// Seeds every device's default generator, also those created later.
void manual_seed_all(uint64_t seed);

// torch.tpu.set_sync_debug_mode, as CUDA's: 0 lets the host's reads of
// device data pass, 1 warns at each, 2 raises.
void set_sync_debug_mode(int mode);
int sync_debug_mode();

// Releases Python's lock for its scope where this thread holds it
// (diagnostics.cpp). Every call into the runtime that takes a device's lock
// is made in one (ops, copies, storage resizes, events): a thread holding
// that lock may wait for Python's, to name the user's line of a compile or
// of a device-side check, and PyTorch calls some kernels with Python's lock
// held (`x[i] = 1.0`'s fill_), so two threads could each wait for the other.
class PythonLockReleased {
 public:
  PythonLockReleased();
  ~PythonLockReleased();
  PythonLockReleased(const PythonLockReleased&) = delete;
  PythonLockReleased& operator=(const PythonLockReleased&) = delete;

 private:
  void* saved_;
};

// A call into the runtime that may take a device's lock, made without
// Python's lock (see PythonLockReleased).
template <class Call>
tpu_status_t unlocked_call(Call call) {
  PythonLockReleased unlocked;
  return call();
}

// Where compilations came from (diagnostics.cpp): a Python line, the first
// op of the compiled graph, how often, and why it compiled again.
struct CompileSite {
  std::string frame, op;
  int compiles, from_disk;  // new programs compiled; loaded from the disk cache
  int steps;  // distinct training steps in which it needed one
  // Outside training: the stretches between host reads in which it needed
  // one, and whether it settled: since it last did, the host read results
  // and programs were found in the memory cache (the loop went on without).
  int reads;
  bool settled;
  std::map<std::string, int> reasons;
};
std::vector<CompileSite> compile_sites();
void reset_compile_sites();
// Training steps (optimizer steps) taken, which split compiles into warm-up
// and recompiles.
void mark_step();
int64_t steps_taken();

// The strides PyTorch's meta kernel gives each result of `op` called with
// `args` (meta_layout.cpp), in the order of its returns; empty for a result
// that is not a dense tensor, all empty when the op has no meta kernel.
using MetaStrides = std::vector<std::vector<int64_t>>;
MetaStrides meta_strides(const c10::OperatorHandle& op, c10::ArrayRef<c10::IValue> args);
int64_t meta_layout_runs();  // meta kernels run so far (a loop runs none)

// Registers the boxed kernel of op table row `row` for an ATen overload.
void register_kernel(const std::string& qualified_name, int row);
// Runs a boxed call on the CPU: counted in the metrics, warned once, an
// error under TORCHTPU_FALLBACK=error.
void cpu_fallback(const c10::OperatorHandle& op, std::vector<c10::IValue>* stack);
void register_fallback();
// Whether a backward pass ran ops on the device (so autograd's device
// worker thread exists).
bool autograd_ran_on_device();

}  // namespace torchtpu
