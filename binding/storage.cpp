// The storage, view and copy primitives every PrivateUse1 backend provides:
// empty tensors, views over a slot, resize_ and set_, copies between tpu
// tensors and between tpu and the host, and reading one element.
#include <ATen/EmptyTensor.h>
#include <ATen/MemoryOverlap.h>
#include <ATen/native/ResizeCommon.h>
#include <ATen/native/TensorFactories.h>
#include <ATen/ops/_reshape_alias_native.h>
#include <ATen/ops/as_strided_native.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/is_set_to_native.h>
#include <ATen/ops/pixel_shuffle_native.h>
#include <ATen/ops/pixel_unshuffle_native.h>
#include <ATen/ops/unfold_native.h>
#include <ATen/ops/view_as_complex_native.h>
#include <ATen/ops/view_as_real.h>
#include <ATen/ops/view_as_real_native.h>
#include <ATen/ops/view_native.h>
#include <torch/library.h>

#include <atomic>
#include <map>
#include <mutex>
#include <vector>

#include "binding.h"

namespace torchtpu {

void ensure_storage(const at::Tensor& self, size_t nbytes) {
  const c10::Storage& st = self.storage();
  if (st.nbytes() >= nbytes) return;
  resize_slot(st, nbytes);
}

namespace {

std::atomic<int> sync_mode{0};

// Every read of device data by the host (.item(), .cpu(), printing, a CPU
// fallback's inputs) waits for the device; sync_debug_mode finds them.
void host_sync() {
  int mode = sync_mode.load(std::memory_order_relaxed);
  if (mode == 0) return;
  const char* what = "called a synchronizing tpu operation (a read of device data by the host)";
  TORCH_CHECK(mode != 2, what);
  TORCH_WARN(what);
}

//===--- storage, views, copies ---===//

// torch.use_deterministic_algorithms(True) with fill_uninitialized_memory
// (its default): new memory holds NaN or the largest integer, as CPU's and
// CUDA's empty and resize_ give it (zeros here hid a read of it).
bool fill_uninitialized() {
  return at::globalContext().deterministicAlgorithms() &&
         at::globalContext().deterministicFillUninitializedMemory();
}

at::Tensor empty_memory_format(c10::SymIntArrayRef size, std::optional<at::ScalarType> dtype,
                               std::optional<at::Layout>, std::optional<at::Device> device,
                               std::optional<bool> pin_memory,
                               std::optional<at::MemoryFormat> memory_format) {
  // CUDA's check (torch.empty(n, device="cuda", pin_memory=True) raises).
  TORCH_CHECK(!pin_memory.value_or(false), "Only dense CPU tensors can be pinned");
  c10::DeviceIndex idx = device && device->has_index() ? device->index() : current_device();
  c10::ScalarType t = dtype.value_or(c10::get_default_dtype_as_scalartype());
  to_tpu(t);  // rejects unsupported dtypes early
  at::detail::check_size_nonnegative(size);
  at::Tensor r = new_tensor(C10_AS_INTARRAYREF_SLOW(size), t, idx);
  if (memory_format && *memory_format != at::MemoryFormat::Contiguous)
    r.unsafeGetTensorImpl()->empty_tensor_restride(*memory_format);
  if (fill_uninitialized()) at::native::fill_empty_deterministic_(r);
  return r;
}

at::Tensor empty_strided(c10::SymIntArrayRef size, c10::SymIntArrayRef stride,
                         std::optional<at::ScalarType> dtype, std::optional<at::Layout>,
                         std::optional<at::Device> device, std::optional<bool> pin_memory) {
  TORCH_CHECK(!pin_memory.value_or(false), "Only dense CPU tensors can be pinned");
  c10::DeviceIndex idx = device && device->has_index() ? device->index() : current_device();
  c10::ScalarType t = dtype.value_or(c10::get_default_dtype_as_scalartype());
  to_tpu(t);
  at::detail::check_size_nonnegative(size);
  auto sizes = C10_AS_INTARRAYREF_SLOW(size);
  auto strides = C10_AS_INTARRAYREF_SLOW(stride);
  size_t nbytes = at::detail::computeStorageNbytes(sizes, strides, c10::elementSize(t));
  c10::Storage storage(c10::Storage::use_byte_size_t(), nbytes, allocate_on(idx, nbytes),
                       allocator(), true);
  auto r = at::detail::make_tensor<c10::TensorImpl>(
      std::move(storage), c10::DispatchKeySet(c10::DispatchKey::PrivateUse1),
      caffe2::TypeMeta::fromScalarType(t));
  r.unsafeGetTensorImpl()->set_sizes_and_strides(sizes, strides);
  if (fill_uninitialized()) at::native::fill_empty_deterministic_(r);
  return r;
}

at::Tensor as_strided(const at::Tensor& self, c10::SymIntArrayRef size,
                      c10::SymIntArrayRef stride, std::optional<c10::SymInt> offset) {
  std::optional<int64_t> off;
  if (offset) off = offset->guard_int(__FILE__, __LINE__);
  return at::native::as_strided_tensorimpl(self, C10_AS_INTARRAYREF_SLOW(size),
                                           C10_AS_INTARRAYREF_SLOW(stride), off);
}

at::Tensor view(const at::Tensor& self, c10::SymIntArrayRef size) {
  return at::native::view(self, C10_AS_INTARRAYREF_SLOW(size));
}

at::Tensor reshape_alias(const at::Tensor& self, c10::SymIntArrayRef size,
                         c10::SymIntArrayRef stride) {
  return at::native::_reshape_alias(self, C10_AS_INTARRAYREF_SLOW(size),
                                    C10_AS_INTARRAYREF_SLOW(stride));
}

const at::Tensor& resize_(const at::Tensor& self, c10::SymIntArrayRef size,
                          std::optional<at::MemoryFormat> memory_format) {
  auto sizes = C10_AS_INTARRAYREF_SLOW(size);
  auto* impl = self.unsafeGetTensorImpl();
  int64_t old_nbytes = static_cast<int64_t>(impl->unsafe_storage().nbytes());
  // As CPU's and CUDA's: the same sizes keep the strides, unless a memory
  // format is given (a transposed tensor resized to its own shape became
  // row-major, so its elements read in another order).
  if (self.sizes() != sizes) impl->set_sizes_contiguous(sizes);
  if (memory_format) {
    TORCH_CHECK(*memory_format != at::MemoryFormat::Preserve, "Unsupported memory format",
                *memory_format);
    impl->empty_tensor_restride(*memory_format);
  }
  if (self.numel() > 0)
    ensure_storage(self, at::detail::computeStorageNbytes(self.sizes(), self.strides(),
                                                          self.element_size(),
                                                          self.storage_offset()));
  if (fill_uninitialized()) at::native::fill_resize_deterministic_(self, old_nbytes);
  return self;
}

at::Tensor& set_storage(at::Tensor& self, c10::Storage source, c10::SymInt offset,
                        c10::SymIntArrayRef size, c10::SymIntArrayRef stride) {
  auto* impl = self.unsafeGetTensorImpl();
  if (!impl->storage().is_alias_of(source)) {
    // CPU's and CUDA's check (a tensor set_ to another tpu device's storage
    // moved there, where theirs refuse).
    TORCH_CHECK(impl->storage().device() == source.device(),
                "Attempted to set the storage of a tensor on device \"", impl->storage().device(),
                "\" to a storage on different device \"", source.device(),
                "\".  This is no longer allowed; the devices must match.");
    impl->set_storage_keep_dtype(source);
  }
  auto sizes = C10_AS_INTARRAYREF_SLOW(size);
  impl->set_storage_offset(offset.guard_int(__FILE__, __LINE__));
  if (stride.empty()) impl->set_sizes_contiguous(sizes);
  else impl->set_sizes_and_strides(sizes, C10_AS_INTARRAYREF_SLOW(stride));
  if (self.numel() > 0)
    ensure_storage(self, at::detail::computeStorageNbytes(self.sizes(), self.strides(),
                                                          self.element_size(),
                                                          self.storage_offset()));
  return self;
}

at::Tensor& set_source_storage(at::Tensor& self, c10::Storage source) {
  int64_t n = static_cast<int64_t>(source.nbytes() / self.element_size());
  std::vector<c10::SymInt> size{c10::SymInt(n)};
  return set_storage(self, std::move(source), 0, size, {});
}

at::Tensor& set_source_tensor(at::Tensor& self, const at::Tensor& source) {
  if (self.is_same(source)) return self;
  return set_storage(self, source.storage(), source.sym_storage_offset(), source.sym_sizes(),
                     source.sym_strides());
}

at::Tensor& set_empty(at::Tensor& self) {
  c10::Storage empty(c10::Storage::use_byte_size_t(), 0, allocate_on(self.device().index(), 0),
                     allocator(), true);
  std::vector<c10::SymInt> size{c10::SymInt(0)};
  return set_storage(self, std::move(empty), 0, size, {});
}

// A view of t without the conjugate and negative bits: its physical data.
at::Tensor physical(const at::Tensor& t) {
  at::Tensor p = t;
  if (p.is_conj()) p = p.conj();  // conj() of a conjugate view clears the bit
  if (p.is_neg()) p = p._neg_view();
  return p;
}

// Copies move physical data; the conjugate and negative bits of views
// (x.conj(), x._neg_view()) say how logical values derive from it, so each
// direction applies the bits of both sides.
at::Tensor copy_from(const at::Tensor& self, const at::Tensor& dst, bool non_blocking) {
  if (self.numel() == 0) return dst;
  if (self.is_privateuseone() && dst.is_privateuseone()) {
    at::assert_no_partial_overlap(dst, self);  // TensorIterator's check, as on CPU
    tpu_view_t s = view_of(self), d = view_of(dst);
    check(unlocked_call([&] { return tpu_copy(&d, &s); }));
    bool conj = self.is_conj() != dst.is_conj(), neg = self.is_neg() != dst.is_neg();
    if (conj || neg) {
      at::Tensor p = physical(dst);
      // (conj_physical_ has no tpu kernel: negate the imaginary parts)
      if (conj) at::view_as_real(p).select(-1, 1).neg_();
      if (neg) p.neg_();
    }
  } else if (dst.is_privateuseone()) {  // host to device
    at::Tensor src = self.to(dst.scalar_type());
    if (dst.is_conj()) src = src.conj();  // dst holds the conjugate of its values
    if (dst.is_neg()) src = src._neg_view();
    src = src.resolve_conj().resolve_neg();
    src = src.expand(dst.sizes()).contiguous();
    tpu_view_t d = view_of(dst);
    check(unlocked_call([&] { return tpu_copy_from_host(&d, src.data_ptr()); }));
  } else {  // device to host
    at::Tensor tmp = at::empty(self.sizes(), self.options().device(c10::kCPU));
    tpu_view_t s = view_of(self);
    host_sync();
    check(unlocked_call([&] { return tpu_copy_to_host(&s, tmp.data_ptr(), tmp.nbytes()); }));
    if (self.is_conj()) tmp = tmp.conj();
    if (self.is_neg()) tmp = tmp._neg_view();
    dst.copy_(tmp);
  }
  return dst;
}

at::Tensor copy_from_and_resize(const at::Tensor& self, const at::Tensor& dst) {
  if (dst.sizes() != self.sizes()) dst.resize_(self.sizes());
  return copy_from(self, dst, false);
}

c10::Scalar local_scalar_dense(const at::Tensor& self) {
  at::Tensor tmp = at::empty({}, self.options().device(c10::kCPU));
  tpu_view_t s = view_of(self);
  host_sync();
  check(unlocked_call([&] { return tpu_copy_to_host(&s, tmp.data_ptr(), tmp.nbytes()); }));
  return tmp.item();
}

// `param.data = tpu_tensor` (what Module.to() does) must keep the Parameter
// object, as it does for CUDA: otherwise every module gets a new Parameter
// and tied weights (an LM head sharing the embedding) come apart. PyTorch's
// default only allows it between its built-in dense backends; a tpu tensor is
// an ordinary dense TensorImpl, interchangeable with a CPU one.
bool has_compatible_shallow_copy_type(const at::Tensor& self, const at::Tensor& from) {
  auto dense_cpu_or_tpu = [](c10::DispatchKeySet ks) {
    return ks.has(c10::DispatchKey::Dense) &&
           (ks.has_backend(c10::BackendComponent::CPUBit) ||
            ks.has_backend(c10::BackendComponent::PrivateUse1Bit));
  };
  if (dense_cpu_or_tpu(self.key_set()) && dense_cpu_or_tpu(from.key_set())) return true;
  return self.unsafeGetTensorImpl()->has_compatible_shallow_copy_type(from.key_set());
}

// A ZeroTensor (autograd's gradient of sign, forward AD's zero tangents):
// zeros that own no memory. The ZeroTensor dispatch key resolves it before
// any of our kernels reads it (view kernels keep its keys), as on CPU and
// CUDA; making it through the CPU fallback cost a host round trip each time.
at::Tensor efficient_zero_tensor(c10::SymIntArrayRef size, std::optional<c10::ScalarType> dtype,
                                 std::optional<c10::Layout>, std::optional<at::Device> device,
                                 std::optional<bool>) {
  c10::DeviceIndex index = device && device->has_index() ? device->index() : current_device();
  // A storage keeps a pointer to its allocator: one per device, kept for good.
  static std::mutex mutex;
  static std::map<c10::DeviceIndex, at::native::ZeroTensorAllocator> allocators;
  at::Allocator* zeros;
  {
    std::lock_guard<std::mutex> lock(mutex);
    zeros = &allocators.try_emplace(index, c10::Device(c10::DeviceType::PrivateUse1, index))
                 .first->second;
  }
  auto keys = c10::DispatchKeySet(c10::DispatchKey::PrivateUse1) |
              c10::DispatchKeySet(c10::DispatchKey::ZeroTensor);
  return at::detail::empty_generic(C10_AS_INTARRAYREF_SLOW(size), zeros, keys,
                                   dtype.value_or(c10::get_default_dtype_as_scalartype()),
                                   std::nullopt);
}

// pixel_shuffle / pixel_unshuffle: PyTorch's math kernels return a
// row-major result, where CPU's kernels, and the meta kernels that
// torch.compile traces with, keep a channels-last input's layout (a
// compiled graph's view of the result would not fit).
at::Tensor pixel_shuffle(const at::Tensor& self, int64_t upscale_factor) {
  return at::native::math_pixel_shuffle(self, upscale_factor)
      .contiguous(self.suggest_memory_format());
}
at::Tensor pixel_unshuffle(const at::Tensor& self, int64_t downscale_factor) {
  return at::native::math_pixel_unshuffle(self, downscale_factor)
      .contiguous(self.suggest_memory_format());
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_efficientzerotensor", TORCH_FN(efficient_zero_tensor));
  m.impl("pixel_shuffle", TORCH_FN(pixel_shuffle));
  m.impl("pixel_unshuffle", TORCH_FN(pixel_unshuffle));
  m.impl("_has_compatible_shallow_copy_type", TORCH_FN(has_compatible_shallow_copy_type));
  m.impl("empty.memory_format", TORCH_FN(empty_memory_format));
  m.impl("empty_strided", TORCH_FN(empty_strided));
  m.impl("as_strided", TORCH_FN(as_strided));
  m.impl("view", TORCH_FN(view));
  m.impl("_reshape_alias", TORCH_FN(reshape_alias));
  m.impl("unfold", TORCH_FN(at::native::unfold));
  m.impl("view_as_real", TORCH_FN(at::native::view_as_real));
  m.impl("view_as_complex", TORCH_FN(at::native::view_as_complex));
  m.impl("resize_", TORCH_FN(resize_));
  m.impl("set_.source_Storage_storage_offset", TORCH_FN(set_storage));
  m.impl("set_.source_Storage", TORCH_FN(set_source_storage));
  m.impl("set_.source_Tensor", TORCH_FN(set_source_tensor));
  m.impl("set_", TORCH_FN(set_empty));
  m.impl("_copy_from", TORCH_FN(copy_from));
  m.impl("_copy_from_and_resize", TORCH_FN(copy_from_and_resize));
  m.impl("_local_scalar_dense", TORCH_FN(local_scalar_dense));
  // Compares storages and geometry: on the CPU fallback's copies, which
  // never share a storage, it answered False for a tensor set_ to another
  // (and read both back to the host).
  m.impl("is_set_to", TORCH_FN(at::native::is_set_to));
}

// The Conjugate and Negative keys' generic fallback resolves a view's bit
// with clone(), and clone copies with _copy_from: an endless recursion (a
// stack overflow on x.conj().cpu()). _copy_from reads the bits itself.
TORCH_LIBRARY_IMPL(aten, Conjugate, m) {
  m.impl("_copy_from", torch::CppFunction::makeFallthrough());
  m.impl("_copy_from_and_resize", torch::CppFunction::makeFallthrough());
}

TORCH_LIBRARY_IMPL(aten, Negative, m) {
  m.impl("_copy_from", torch::CppFunction::makeFallthrough());
  m.impl("_copy_from_and_resize", torch::CppFunction::makeFallthrough());
}

void set_sync_debug_mode(int mode) {
  TORCH_CHECK(mode >= 0 && mode <= 2, "invalid value of debug_mode ", mode,
              ", expected one of 0 (default), 1 (warn), 2 (error)");
  sync_mode.store(mode);
}

int sync_debug_mode() { return sync_mode.load(); }

}  // namespace torchtpu
