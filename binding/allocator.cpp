// The tpu device allocator. A storage's DataPtr context is one reference to
// a runtime storage slot; its data address is the slot's address, a unique
// non-null token that is never dereferenced (bytes move only through the
// runtime's copies), or null while the storage is empty, as CPU's and CUDA's.
#include <c10/core/CachingDeviceAllocator.h>
#include <c10/core/TensorImpl.h>
#include <c10/util/Exception.h>

#include <cstdio>

#include "binding.h"

namespace torchtpu {

c10::CachingDeviceAllocator::DeviceStats device_stats(c10::DeviceIndex device) {
  ensure_runtime();
  tpu_memory_stats_t m;
  tpu_client_memory_stats(tpu_runtime_client(), device, &m);
  // PJRT frees a buffer as its tensor dies: no memory is held in reserve or
  // split, so reserved, active and requested bytes are the allocated ones,
  // and a segment (an active block) is a buffer.
  c10::CachingDeviceAllocator::DeviceStats stats;
  constexpr size_t all = static_cast<size_t>(c10::CachingAllocator::StatType::AGGREGATE);
  for (auto* bytes : {&stats.allocated_bytes, &stats.reserved_bytes, &stats.active_bytes,
                      &stats.requested_bytes}) {
    auto& s = (*bytes)[all];
    s.current = m.bytes_in_use;
    s.peak = m.peak_bytes_in_use;
    s.allocated = m.bytes_allocated;
    s.freed = m.bytes_freed;
  }
  for (auto* count : {&stats.allocation, &stats.segment, &stats.active}) {
    auto& s = (*count)[all];
    s.current = m.buffers;
    s.peak = m.peak_buffers;
    s.allocated = m.num_allocs;
    s.freed = m.num_frees;
  }
  stats.num_device_alloc = m.num_allocs;
  stats.num_device_free = m.num_frees;
  stats.num_ooms = m.num_ooms;
  return stats;
}

namespace {

void delete_slot(void* ctx) { tpu_slot_release(static_cast<tpu_slot_t*>(ctx)); }

struct TpuAllocator final : public c10::DeviceAllocator {
  c10::DataPtr allocate(size_t nbytes) override {
    return allocate_on(current_device(), nbytes);
  }
  c10::DeleterFnPtr raw_deleter() const override { return nullptr; }
  void copy_data(void* dest, const void* src, std::size_t count) const override {
    TORCH_CHECK(false, "tpu storages cannot be copied by address; use Tensor.copy_");
  }
  bool initialized() override { return tpu_runtime_client() != nullptr; }
  void emptyCache(c10::MempoolId_t) override {}  // PJRT frees eagerly
  void recordStream(const c10::DataPtr&, c10::Stream) override {}
  c10::CachingDeviceAllocator::DeviceStats getDeviceStats(c10::DeviceIndex device) override {
    return device_stats(device);
  }
  void resetAccumulatedStats(c10::DeviceIndex device) override {
    ensure_runtime();
    tpu_client_reset_accumulated(tpu_runtime_client(), device);
  }
  void resetPeakStats(c10::DeviceIndex device) override {
    ensure_runtime();
    tpu_client_reset_peak(tpu_runtime_client(), device);
  }
  std::pair<size_t, size_t> getMemoryInfo(c10::DeviceIndex device) override {
    return mem_get_info(device);  // torch.accelerator.get_memory_info
  }
};

TpuAllocator the_allocator;

}  // namespace

REGISTER_ALLOCATOR(c10::DeviceType::PrivateUse1, &the_allocator);

c10::Allocator* allocator() { return &the_allocator; }

c10::DataPtr allocate_on(c10::DeviceIndex device, size_t nbytes) {
  ensure_runtime();
  tpu_slot_t* slot = nullptr;
  check(tpu_slot_create(device, nbytes, &slot));
  // An empty storage's address is null, as CPU's and CUDA's allocators make
  // it: PyTorch compares it with its tensors' (0 when they have no elements),
  // and torch.export.save, finding them apart, raised "numel: integer
  // multiplication overflow" for an empty weight. The slot stays the context.
  return {nbytes ? slot : nullptr, slot, &delete_slot,
          c10::Device(c10::DeviceType::PrivateUse1, device)};
}

void resize_slot(const c10::Storage& storage, size_t nbytes) {
  tpu_slot_t* slot = slot_of(storage);
  check(unlocked_call([&] { return tpu_slot_resize(slot, nbytes); }));
  c10::StorageImpl* impl = storage.unsafeGetStorageImpl();
  impl->set_nbytes(nbytes);
  // A storage that was empty gets the slot's address (allocate_on); the old
  // DataPtr lets go of the slot without releasing it.
  if (nbytes > 0 && storage.data() == nullptr)
    impl->set_data_ptr(c10::DataPtr(slot, slot, &delete_slot, storage.device()))
        .release_context();
}

std::pair<size_t, size_t> mem_get_info(c10::DeviceIndex device) {
  ensure_runtime();
  tpu_memory_stats_t m;
  tpu_client_memory_stats(tpu_runtime_client(), device, &m);
  if (m.bytes_limit > 0) {
    size_t total = static_cast<size_t>(m.bytes_limit);
    size_t used = static_cast<size_t>(m.bytes_in_use);
    return {total > used ? total - used : 0, total};
  }
  // No limit reported (the CPU plugin): the buffers are in host memory, so
  // the host's available and physical memory.
  size_t available = 0, total = 0;
  if (FILE* f = std::fopen("/proc/meminfo", "r")) {
    char line[256];
    unsigned long long kib;
    while (std::fgets(line, sizeof line, f)) {
      if (std::sscanf(line, "MemAvailable: %llu", &kib) == 1) available = kib * 1024;
      if (std::sscanf(line, "MemTotal: %llu", &kib) == 1) total = kib * 1024;
    }
    std::fclose(f);
  }
  return {available, total};
}

tpu_slot_t* slot_of(const c10::Storage& storage) {
  void* ctx = storage.data_ptr().get_context();
  // (PyTorch's legacy serialization wraps a storage's address in from_blob
  // to copy it to the host, and such a tensor knows no slot.)
  TORCH_CHECK(ctx && storage.data_ptr().get_deleter() == &delete_slot,
              "this tpu tensor's memory was not allocated by torchtpu. From pickle.dumps "
              "or torch.save(..., _use_new_zipfile_serialization=False): those do not "
              "support tpu tensors; use torch.save's default format, or pickle t.cpu(). "
              "From torch.from_dlpack or from_blob of another library's pointer: tpu "
              "tensors are shared through .cpu() or .to()");
  return static_cast<tpu_slot_t*>(ctx);
}

at::Tensor new_tensor(c10::IntArrayRef sizes, c10::ScalarType dtype,
                      c10::DeviceIndex device) {
  int64_t numel = c10::multiply_integers(sizes);
  size_t nbytes = static_cast<size_t>(numel) * c10::elementSize(dtype);
  c10::Storage storage(c10::Storage::use_byte_size_t(), nbytes,
                       allocate_on(device, nbytes), &the_allocator, /*resizable=*/true);
  auto t = at::detail::make_tensor<c10::TensorImpl>(
      std::move(storage), c10::DispatchKeySet(c10::DispatchKey::PrivateUse1),
      caffe2::TypeMeta::fromScalarType(dtype));
  t.unsafeGetTensorImpl()->set_sizes_contiguous(sizes);
  return t;
}

}  // namespace torchtpu
