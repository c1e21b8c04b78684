// Device plumbing: statuses to exceptions, dtypes, the device guard, the
// PrivateUse1 hooks, and the device random generator.
#include <ATen/core/GeneratorForPrivateuseone.h>
#include <ATen/detail/PrivateUse1HooksInterface.h>
#include <ATen/Context.h>
#include <ATen/core/Generator.h>
#include <c10/core/CPUAllocator.h>
#include <c10/core/impl/alloc_cpu.h>
#include <c10/core/GeneratorImpl.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <c10/util/Exception.h>
#include <torch/library.h>

#include <cstring>
#include <deque>
#include <map>
#include <mutex>

#include "binding.h"

namespace torchtpu {

void check(tpu_status_t s) {
  if (!s) return;
  std::string msg = tpu_status_message(s);
  tpu_code_t code = tpu_status_code(s);
  tpu_status_free(s);
  switch (code) {
    case TPU_CODE_OUT_OF_RANGE: TORCH_CHECK_INDEX(false, msg);
    case TPU_CODE_UNIMPLEMENTED: TORCH_CHECK_NOT_IMPLEMENTED(false, msg);
    case TPU_CODE_RESOURCE_EXHAUSTED: TORCH_CHECK_WITH(OutOfMemoryError, false, msg);
    case TPU_CODE_LINALG: TORCH_CHECK_LINALG(false, msg);
    case TPU_CODE_VALUE: TORCH_CHECK_VALUE(false, msg);
    case TPU_CODE_TYPE: TORCH_CHECK_TYPE(false, msg);
    default: TORCH_CHECK(false, msg);
  }
}

void ensure_runtime() {
  if (tpu_runtime_client() && !tpu_forked_child()) return;
  check(tpu_runtime_init());
}

int device_count() {
  if (!tpu_runtime_client()) {
    tpu_status_t s = tpu_runtime_init();
    if (s) {
      tpu_status_free(s);
      return 0;
    }
  }
  return tpu_device_count();
}

//===--- dtypes ---===//

tpu_dtype_t to_tpu(c10::ScalarType t) {
  switch (t) {
    case c10::ScalarType::Bool: return TPU_BOOL;
    case c10::ScalarType::Byte: return TPU_U8;
    case c10::ScalarType::Char: return TPU_I8;
    case c10::ScalarType::Short: return TPU_I16;
    case c10::ScalarType::Int: return TPU_I32;
    case c10::ScalarType::Long: return TPU_I64;
    case c10::ScalarType::UInt16: return TPU_U16;
    case c10::ScalarType::UInt32: return TPU_U32;
    case c10::ScalarType::UInt64: return TPU_U64;
    case c10::ScalarType::Half: return TPU_F16;
    case c10::ScalarType::BFloat16: return TPU_BF16;
    case c10::ScalarType::Float: return TPU_F32;
    case c10::ScalarType::Double: return TPU_F64;
    case c10::ScalarType::ComplexFloat: return TPU_C64;
    case c10::ScalarType::ComplexDouble: return TPU_C128;
    case c10::ScalarType::Float8_e5m2: return TPU_F8E5M2;
    case c10::ScalarType::Float8_e4m3fn: return TPU_F8E4M3FN;
    default: TORCH_CHECK_TYPE(false, "the tpu device does not support dtype ", t);
  }
}

tpu_precision_t matmul_precision() {
  switch (at::globalContext().float32MatmulPrecision()) {
    case at::Float32MatmulPrecision::HIGH: return TPU_PRECISION_HIGH;
    case at::Float32MatmulPrecision::MEDIUM: return TPU_PRECISION_MEDIUM;
    default: return TPU_PRECISION_HIGHEST;
  }
}

tpu_dtype_t default_float() { return to_tpu(c10::get_default_dtype_as_scalartype()); }

c10::ScalarType to_torch(tpu_dtype_t t) {
  switch (t) {
    case TPU_BOOL: return c10::ScalarType::Bool;
    case TPU_U8: return c10::ScalarType::Byte;
    case TPU_I8: return c10::ScalarType::Char;
    case TPU_I16: return c10::ScalarType::Short;
    case TPU_I32: return c10::ScalarType::Int;
    case TPU_I64: return c10::ScalarType::Long;
    case TPU_U16: return c10::ScalarType::UInt16;
    case TPU_U32: return c10::ScalarType::UInt32;
    case TPU_U64: return c10::ScalarType::UInt64;
    case TPU_F16: return c10::ScalarType::Half;
    case TPU_BF16: return c10::ScalarType::BFloat16;
    case TPU_F32: return c10::ScalarType::Float;
    case TPU_F64: return c10::ScalarType::Double;
    case TPU_C64: return c10::ScalarType::ComplexFloat;
    case TPU_C128: return c10::ScalarType::ComplexDouble;
    case TPU_F8E5M2: return c10::ScalarType::Float8_e5m2;
    case TPU_F8E4M3FN: return c10::ScalarType::Float8_e4m3fn;
    default: TORCH_CHECK(false, "unknown runtime dtype ", static_cast<int>(t));
  }
}

tpu_view_t view_of(const at::Tensor& t) {
  TORCH_CHECK(t.dim() <= TPU_MAX_RANK, "tpu tensors have at most ", TPU_MAX_RANK,
              " dimensions, got ", t.dim());
  tpu_view_t v;
  std::memset(&v, 0, sizeof v);
  v.slot = slot_of(t.storage());
  v.dtype = to_tpu(t.scalar_type());
  v.rank = static_cast<int32_t>(t.dim());
  for (int i = 0; i < v.rank; ++i) {
    v.sizes[i] = t.size(i);
    v.strides[i] = t.stride(i);
  }
  v.offset = t.storage_offset();
  return v;
}

//===--- current device ---===//

namespace {
thread_local c10::DeviceIndex tls_device = 0;
}

c10::DeviceIndex current_device() { return tls_device; }

void set_current_device(c10::DeviceIndex d) {
  int n = device_count();
  TORCH_CHECK(d >= 0 && d < n, "Invalid device index ", static_cast<int>(d), ": ", n,
              " tpu device(s) available");
  tls_device = d;
}

//===--- device guard ---===//

namespace {

// One in-order stream per device; an event is a point in the device's work
// (runtime/src/eager/point.c): query and synchronize look at the executions
// launched before it, elapsed_time at when they ended.
struct TpuEvent {
  c10::DeviceIndex device = -1;
  bool timing = false;
  tpu_point_t* point = nullptr;
  ~TpuEvent() { tpu_point_release(point); }
};

struct TpuGuardImpl final : public c10::impl::DeviceGuardImplInterface {
  static constexpr c10::DeviceType kType = c10::DeviceType::PrivateUse1;
  c10::DeviceType type() const override { return kType; }
  c10::Device exchangeDevice(c10::Device d) const override {
    c10::Device old = getDevice();
    if (d.index() != tls_device) setDevice(d);
    return old;
  }
  c10::Device getDevice() const override { return {kType, tls_device}; }
  void setDevice(c10::Device d) const override { set_current_device(d.index()); }
  void uncheckedSetDevice(c10::Device d) const noexcept override { tls_device = d.index(); }
  // A device without an index (torch.Stream("tpu")) is the current one, as
  // for CUDA's streams; a stream of device -1 named no device to work on.
  static c10::Device indexed(c10::Device d) {
    return d.has_index() ? d : c10::Device(kType, tls_device);
  }
  c10::Stream getStream(c10::Device d) const override {
    return c10::Stream(c10::Stream::DEFAULT, indexed(d));
  }
  c10::Stream getNewStream(c10::Device d, int) const override {
    return c10::Stream(c10::Stream::DEFAULT, indexed(d));
  }
  c10::Stream getStreamFromGlobalPool(c10::Device d, bool) const override {
    return c10::Stream(c10::Stream::DEFAULT, indexed(d));
  }
  c10::Stream exchangeStream(c10::Stream s) const override {
    return c10::Stream(c10::Stream::DEFAULT, s.device());
  }
  c10::DeviceIndex deviceCount() const noexcept override {
    return static_cast<c10::DeviceIndex>(device_count());
  }
  void record(void** event, const c10::Stream& stream, const c10::DeviceIndex device_index,
              const c10::EventFlag flag) const override {
    if (!*event) *event = new TpuEvent();
    auto* e = static_cast<TpuEvent*>(*event);
    e->device = device_index >= 0 ? device_index : stream.device_index();
    e->timing = flag == c10::EventFlag::BACKEND_DEFAULT;
    tpu_point_t* point = nullptr;
    {
      PythonLockReleased unlocked;
      check(tpu_point_record(e->device, &point));
    }
    tpu_point_release(e->point);
    e->point = point;
  }
  void block(void*, const c10::Stream&) const override {}  // one stream: in order
  bool queryEvent(void* event) const override {
    auto* e = static_cast<TpuEvent*>(event);
    PythonLockReleased unlocked;
    return !e || !e->point || tpu_point_reached(e->point);
  }
  void synchronizeEvent(void* event) const override {
    auto* e = static_cast<TpuEvent*>(event);
    PythonLockReleased unlocked;
    if (e && e->point) check(tpu_point_wait(e->point));
  }
  double elapsedTime(void* start, void* end, const c10::DeviceIndex) const override {
    auto* a = static_cast<TpuEvent*>(start);
    auto* b = static_cast<TpuEvent*>(end);
    TORCH_CHECK(a && a->point && b && b->point,
                "Both events must be recorded before calculating elapsed time.");
    TORCH_CHECK(a->timing && b->timing,
                "Both events must be created with argument 'enable_timing=True'.");
    TORCH_CHECK(a->device == b->device, "Both events must be recorded on the same device.");
    TORCH_CHECK(tpu_point_reached(a->point) && tpu_point_reached(b->point),
                "Both events must be completed before calculating elapsed time.");
    return tpu_point_elapsed_ms(a->point, b->point);
  }
  void destroyEvent(void* event, const c10::DeviceIndex) const noexcept override {
    delete static_cast<TpuEvent*>(event);
  }
  // As CUDA's: whether the work queued so far has ended, without waiting for
  // it (a point launches what fused mode recorded, as Event.record does).
  // Once it has ended, pending device-side errors raise, as at a sync.
  bool queryStream(const c10::Stream& s) const override {
    tpu_point_t* point = nullptr;
    bool done;
    {
      PythonLockReleased unlocked;
      check(tpu_point_record(s.device_index(), &point));
      done = tpu_point_reached(point);
      tpu_point_release(point);
    }
    if (done) synchronizeStream(s);
    return done;
  }
  void synchronizeStream(const c10::Stream& s) const override {
    PythonLockReleased unlocked;
    check(tpu_synchronize(s.device_index()));
  }
  void synchronizeDevice(const c10::DeviceIndex d) const override {
    PythonLockReleased unlocked;
    check(tpu_synchronize(d));
  }
  void recordDataPtrOnStream(const c10::DataPtr&, const c10::Stream&) const override {}
};

C10_REGISTER_GUARD_IMPL(PrivateUse1, TpuGuardImpl);

// Tensor.record_stream(s), a caching allocator's hint not to reuse memory
// before s's queued work is done: with one in-order stream per device, and
// buffers that outlive the executions reading them, there is nothing to do.
void record_stream(at::Tensor&, c10::Stream) {}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) { m.impl("record_stream", TORCH_FN(record_stream)); }

//===--- generator ---===//

// Philox keys: each random op takes (seed, counter) and advances the counter,
// so results depend only on the seed and the order of random ops.
struct TpuGenerator final : public c10::GeneratorImpl {
  explicit TpuGenerator(c10::DeviceIndex d)
      : c10::GeneratorImpl(c10::Device(c10::DeviceType::PrivateUse1, d),
                           c10::DispatchKeySet(c10::DispatchKey::PrivateUse1)) {}
  void set_current_seed(uint64_t seed) override {
    seed_ = seed;
    counter_ = 0;
  }
  void set_offset(uint64_t offset) override { counter_ = offset; }
  uint64_t get_offset() const override { return counter_; }
  uint64_t current_seed() const override { return seed_; }
  uint64_t seed() override {
    set_current_seed(c10::detail::getNonDeterministicRandom());
    return seed_;
  }
  void set_state(const c10::TensorImpl& state) override {
    TORCH_CHECK(state.numel() == 16 && state.dtype() == caffe2::TypeMeta::Make<uint8_t>(),
                "a tpu generator state is a uint8 tensor of 16 elements");
    const auto* p = static_cast<const uint8_t*>(state.data());
    std::memcpy(&seed_, p, 8);
    std::memcpy(&counter_, p + 8, 8);
  }
  c10::intrusive_ptr<c10::TensorImpl> get_state() const override {
    auto state = c10::make_intrusive<c10::TensorImpl>(
        c10::Storage(c10::Storage::use_byte_size_t(), 16, c10::GetCPUAllocator(), true),
        c10::DispatchKeySet(c10::DispatchKey::CPU), caffe2::TypeMeta::Make<uint8_t>());
    state->set_sizes_contiguous({16});
    auto* p = static_cast<uint8_t*>(state->mutable_data());
    std::memcpy(p, &seed_, 8);
    std::memcpy(p + 8, &counter_, 8);
    return state;
  }
  static c10::DeviceType device_type() { return c10::DeviceType::PrivateUse1; }

  uint64_t seed_ = c10::default_rng_seed_val;
  uint64_t counter_ = 0;

 private:
  TpuGenerator* clone_impl() const override {
    auto* g = new TpuGenerator(device().index());
    g->seed_ = seed_;
    g->counter_ = counter_;
    return g;
  }
};

std::mutex gens_lock;
std::deque<at::Generator> gens;  // deque: references stay valid
std::optional<uint64_t> seed_for_new;  // manual_seed_all before a generator existed

const at::Generator& default_generator(c10::DeviceIndex d) {
  std::lock_guard<std::mutex> guard(gens_lock);
  if (d < 0) d = tls_device;
  while (static_cast<int>(gens.size()) <= d) {
    gens.push_back(at::make_generator<TpuGenerator>(static_cast<c10::DeviceIndex>(gens.size())));
    if (seed_for_new) gens.back().set_current_seed(*seed_for_new);
  }
  return gens[static_cast<size_t>(d)];
}

//===--- pinned host memory ---===//

// Host memory for pin_memory() and DataLoader(pin_memory=True). PJRT copies
// from any host memory, so pinned tensors are ordinary host allocations,
// remembered so that is_pinned() answers as users expect.
std::mutex pinned_lock;
std::map<uintptr_t, size_t> pinned;  // start -> size of live allocations

void pinned_free(void* p) {
  {
    std::lock_guard<std::mutex> guard(pinned_lock);
    pinned.erase(reinterpret_cast<uintptr_t>(p));
  }
  c10::free_cpu(p);
}

struct PinnedAllocator final : public c10::Allocator {
  c10::DataPtr allocate(size_t n) override {
    void* p = n ? c10::alloc_cpu(n) : nullptr;
    if (p) {
      std::lock_guard<std::mutex> guard(pinned_lock);
      pinned[reinterpret_cast<uintptr_t>(p)] = n;
    }
    return {p, p, &pinned_free, c10::Device(c10::DeviceType::CPU)};
  }
  c10::DeleterFnPtr raw_deleter() const override { return &pinned_free; }
  void copy_data(void* dst, const void* src, std::size_t n) const override {
    std::memcpy(dst, src, n);
  }
} pinned_allocator;

bool is_pinned(const void* data) {
  auto p = reinterpret_cast<uintptr_t>(data);
  std::lock_guard<std::mutex> guard(pinned_lock);
  auto it = pinned.upper_bound(p);
  if (it == pinned.begin()) return false;
  --it;
  return p < it->first + it->second;
}

//===--- hooks ---===//

struct TpuHooks final : public at::PrivateUse1HooksInterface {
  bool isBuilt() const override { return true; }
  bool isAvailable() const override { return device_count() > 0; }
  bool hasPrimaryContext(c10::DeviceIndex) const override { return tpu_runtime_client() != nullptr; }
  c10::DeviceIndex deviceCount() const override { return static_cast<c10::DeviceIndex>(device_count()); }
  void setCurrentDevice(c10::DeviceIndex d) const override { set_current_device(d); }
  c10::DeviceIndex getCurrentDevice() const override { return tls_device; }
  c10::DeviceIndex exchangeDevice(c10::DeviceIndex d) const override {
    c10::DeviceIndex old = tls_device;
    set_current_device(d);
    return old;
  }
  c10::DeviceIndex maybeExchangeDevice(c10::DeviceIndex d) const override {
    return exchangeDevice(d);
  }
  const at::Generator& getDefaultGenerator(c10::DeviceIndex d) const override {
    return default_generator(d);
  }
  at::Generator getNewGenerator(c10::DeviceIndex d) const override {
    return at::make_generator<TpuGenerator>(d < 0 ? tls_device : d);
  }
  at::Device getDeviceFromPtr(void* data) const override {
    // An empty storage's address is null (allocate_on): no slot to ask.
    if (!data) return {c10::DeviceType::PrivateUse1, current_device()};
    return {c10::DeviceType::PrivateUse1,
            static_cast<c10::DeviceIndex>(tpu_slot_device(static_cast<tpu_slot_t*>(data)))};
  }
  bool isPinnedPtr(const void* data) const override { return is_pinned(data); }
  c10::Allocator* getPinnedMemoryAllocator() const override { return &pinned_allocator; }
  void resizePrivateUse1Bytes(const c10::Storage& storage, size_t newsize) const override {
    resize_slot(storage, newsize);
  }
};

struct RegisterHooks {
  RegisterHooks() { at::RegisterPrivateUse1HooksInterface(new TpuHooks()); }
} register_hooks;

}  // namespace

void manual_seed_all(uint64_t seed) {
  std::lock_guard<std::mutex> guard(gens_lock);
  seed_for_new = seed;  // generators made later (devices not touched yet)
  for (auto& g : gens) {
    std::lock_guard<std::mutex> l(g.mutex());
    g.set_current_seed(seed);
  }
}

void rng_next(const std::optional<at::Generator>& gen, c10::DeviceIndex device,
              uint64_t out[2]) {
  at::Generator g = gen.has_value() && gen->defined() ? *gen : default_generator(device);
  auto* impl = at::check_generator<TpuGenerator>(g);
  std::lock_guard<std::mutex> lock(impl->mutex_);
  out[0] = impl->seed_;
  out[1] = impl->counter_++;
}

}  // namespace torchtpu
