// Operator registrations: the boxed kernel that runs op-table rows and the
// counted CPU fallback for everything else (the storage, view and copy
// primitives are in storage.cpp).
#include <algorithm>
#include <ATen/MemoryOverlap.h>
#include <ATen/native/CPUFallback.h>
#include <ATen/native/TypeProperties.h>
#include <ATen/ops/addbmm.h>
#include <torch/csrc/autograd/engine.h>
#include <torch/csrc/autograd/graph_task.h>
#include <torch/library.h>

#include <atomic>
#include <cstdlib>
#include <deque>
#include <list>
#include <memory>
#include <mutex>
#include <set>
#include <vector>

#include "binding.h"

namespace torchtpu {

void mixed_devices(const at::Tensor& t, c10::DeviceIndex tpu) {
  c10::Device d(c10::DeviceType::PrivateUse1, tpu >= 0 ? tpu : current_device());
  TORCH_CHECK(false,
              "Expected all tensors to be on the same device, but found at least "
              "two devices, ", d, " and ", t.device(), "!");
}

namespace {

//===--- converting boxed arguments to runtime arguments ---===//

tpu_scalar_t scalar_of(const c10::Scalar& s, tpu_tier_t tier) {
  tpu_scalar_t r;
  std::memset(&r, 0, sizeof r);
  r.tier = tier;
  if (s.isBoolean()) {
    r.dtype = TPU_BOOL;
    r.b = s.toBool();
  } else if (s.isIntegral(false)) {
    r.dtype = TPU_I64;
    r.i = s.toLong();
  } else if (s.isComplex()) {
    r.dtype = TPU_C128;
    auto c = s.toComplexDouble();
    r.c[0] = c.real();
    r.c[1] = c.imag();
  } else {
    r.dtype = TPU_F64;
    r.f = s.toDouble();
  }
  return r;
}

// Elements keep their addresses. A list, not a deque: libstdc++'s deque
// allocates when constructed, and most calls leave most of these empty.
template <class T>
using Stable = std::list<T>;

// Holds the runtime arguments of one call and everything they point into.
struct Args {
  std::vector<tpu_arg_t> args;
  Stable<tpu_view_t> views;
  Stable<std::vector<const tpu_view_t*>> view_lists;
  Stable<std::vector<int64_t>> int_lists;
  Stable<std::vector<double>> float_lists;
  Stable<std::unique_ptr<bool[]>> bool_lists;
  Stable<std::vector<tpu_scalar_t>> scalar_lists;
  Stable<std::string> strings;
  // Inputs materialized from conj / neg views, and CPU scalars of lists moved over.
  Stable<at::Tensor> resolved;
  std::vector<size_t> generators;  // indices of RNG args to fill in
  c10::DeviceIndex device = -1;    // of the first tpu tensor or Device arg

  const tpu_view_t* view(const at::Tensor& t) {
    if (device < 0) device = t.device().index();
    views.push_back(view_of(t));
    return &views.back();
  }
};

// A kernel here asked to write a tensor of another device: PyTorch chose tpu
// for another argument, a tpu generator (`torch.randn(3,
// generator=torch.Generator("tpu"))` fills a CPU tensor) or a tpu tensor.
// PyTorch's messages for those.
[[noreturn]] void foreign_target(const at::Tensor& t, c10::ArrayRef<c10::IValue> args) {
  for (const c10::IValue& v : args)
    if (v.isGenerator() && v.toGenerator().device().is_privateuseone())
      TORCH_CHECK(false, "Expected a '", c10::DeviceTypeName(t.device().type(), true),
                  "' device type for generator but found '",
                  c10::DeviceTypeName(c10::DeviceType::PrivateUse1, true), "'");
  for (const c10::IValue& v : args)
    if (v.isTensor() && v.toTensor().is_privateuseone()) mixed_devices(t, v.toTensor().device().index());
  mixed_devices(t, -1);
}

tpu_arg_t tensor_arg(Args& a, const at::Tensor& t) {
  tpu_arg_t r;
  std::memset(&r, 0, sizeof r);
  if (!t.defined()) return r;  // NONE
  if (t.is_privateuseone()) {
    r.kind = TPU_ARG_TENSOR;
    r.tensor = a.view(t);
    return r;
  }
  if (t.dim() == 0 && t.is_cpu()) {  // CPU scalars mix with device tensors
    r.kind = TPU_ARG_SCALAR;
    bool wrapped = t.unsafeGetTensorImpl()->is_wrapped_number();
    r.scalar = scalar_of(t.item(), wrapped ? TPU_TIER_WRAPPED : TPU_TIER_ZERO);
    if (!wrapped) r.scalar.dtype = to_tpu(t.scalar_type());
    return r;
  }
  mixed_devices(t, a.device);
}

c10::TypePtr unwrap_optional(c10::TypePtr t) {
  if (auto o = t->cast<c10::OptionalType>()) return o->getElementType();
  return t;
}

tpu_arg_t convert(Args& a, const c10::Argument& arg, const c10::IValue& v) {
  tpu_arg_t r;
  std::memset(&r, 0, sizeof r);
  c10::TypePtr type = unwrap_optional(arg.real_type());
  c10::TypeKind kind = type->kind();
  if (kind == c10::TypeKind::GeneratorType) {  // filled once the device is known
    r.kind = TPU_ARG_RNG;
    a.generators.push_back(a.args.size());
    return r;
  }
  if (v.isNone()) return r;
  if (v.isTensor()) {
    const at::Tensor& t = v.toTensor();
    // The foreach ops' packed scalars (one number per list element) are a
    // 1-D CPU tensor, read on the host as PyTorch does.
    if (arg.name() == "scalars" && t.defined() && t.is_cpu() && t.dim() == 1) {
      at::Tensor c = t.contiguous();
      a.scalar_lists.emplace_back();
      for (int64_t i = 0; i < c.numel(); ++i)
        a.scalar_lists.back().push_back(scalar_of(c[i].item(), TPU_TIER_WRAPPED));
      r.kind = TPU_ARG_SCALARS;
      r.scalars = a.scalar_lists.back().data();
      r.count = static_cast<int32_t>(c.numel());
      return r;
    }
    return tensor_arg(a, t);
  }
  if (auto list = type->cast<c10::ListType>();
      list && list->getElementType()->kind() == c10::TypeKind::NumberType) {
    a.scalar_lists.emplace_back();  // Scalar[]: each number keeps its type
    for (const auto& e : v.toListRef())
      a.scalar_lists.back().push_back(scalar_of(e.toScalar(), TPU_TIER_WRAPPED));
    r.kind = TPU_ARG_SCALARS;
    r.scalars = a.scalar_lists.back().data();
    r.count = static_cast<int32_t>(a.scalar_lists.back().size());
    return r;
  }
  if (v.isTensorList()) {
    auto list = v.toTensorList();
    c10::DeviceIndex device = a.device;
    for (size_t i = 0; i < list.size() && device < 0; ++i)
      if (list.get(i).is_privateuseone()) device = list.get(i).device().index();
    a.view_lists.emplace_back();
    for (size_t i = 0; i < list.size(); ++i) {
      at::Tensor t = list[i];
      if (!t.is_privateuseone()) {
        // A CPU scalar in a list (an optimizer's tensor learning rate in
        // _foreach_mul) is what the element's op would take; it joins the
        // device's work as a 0-dim tensor, promoting as one.
        if (t.dim() != 0 || !t.is_cpu() || device < 0) mixed_devices(t, device);
        a.resolved.push_back(t.to(c10::Device(c10::DeviceType::PrivateUse1, device)));
        t = a.resolved.back();
      }
      a.view_lists.back().push_back(a.view(t));
    }
    r.kind = TPU_ARG_TENSORS;
    r.tensors = a.view_lists.back().data();
    r.count = static_cast<int32_t>(list.size());
    return r;
  }
  if (v.isList() && !v.isIntList() && !v.isSymIntList() && !v.isDoubleList() &&
      !v.isBoolList()) {
    auto list = v.toListRef();
    bool ints = !list.empty();
    for (const auto& e : list) ints &= e.isInt() || e.isSymInt();
    if (ints) {  // int[] arriving as a generic list
      a.int_lists.emplace_back();
      for (const auto& e : list)
        a.int_lists.back().push_back(e.isInt() ? e.toInt() : e.toSymInt().guard_int(__FILE__, __LINE__));
      r.kind = TPU_ARG_INTS;
      r.ints = a.int_lists.back().data();
      r.count = static_cast<int32_t>(list.size());
      return r;
    }
    a.view_lists.emplace_back();  // Tensor?[] (indexing)
    for (const auto& e : list) {
      if (e.isNone() || (e.isTensor() && !e.toTensor().defined())) {
        a.view_lists.back().push_back(nullptr);
        continue;
      }
      TORCH_CHECK(e.isTensor(), "unsupported list element in argument ", arg.name());
      at::Tensor t = e.toTensor();
      if (!t.is_privateuseone()) mixed_devices(t, a.device);
      a.view_lists.back().push_back(a.view(t));
    }
    r.kind = TPU_ARG_TENSORS;
    r.tensors = a.view_lists.back().data();
    r.count = static_cast<int32_t>(list.size());
    return r;
  }
  if (v.isIntList()) {
    a.int_lists.push_back(v.toIntVector());
    r.kind = TPU_ARG_INTS;
    r.ints = a.int_lists.back().data();
    r.count = static_cast<int32_t>(a.int_lists.back().size());
    return r;
  }
  if (v.isSymIntList()) {
    a.int_lists.emplace_back();
    for (const auto& s : v.toSymIntVector()) a.int_lists.back().push_back(s.guard_int(__FILE__, __LINE__));
    r.kind = TPU_ARG_INTS;
    r.ints = a.int_lists.back().data();
    r.count = static_cast<int32_t>(a.int_lists.back().size());
    return r;
  }
  if (v.isDoubleList()) {
    a.float_lists.push_back(v.toDoubleVector());
    r.kind = TPU_ARG_FLOATS;
    r.floats = a.float_lists.back().data();
    r.count = static_cast<int32_t>(a.float_lists.back().size());
    return r;
  }
  if (v.isBoolList()) {
    auto list = v.toBoolList();
    a.bool_lists.emplace_back(new bool[list.size() + 1]);
    for (size_t i = 0; i < list.size(); ++i) a.bool_lists.back()[i] = list[i];
    r.kind = TPU_ARG_BOOLS;
    r.bools = a.bool_lists.back().get();
    r.count = static_cast<int32_t>(list.size());
    return r;
  }
  if (v.isString()) {
    a.strings.push_back(v.toStringRef());
    r.kind = TPU_ARG_STRING;
    r.s = a.strings.back().c_str();
    return r;
  }
  if (v.isDevice()) {
    c10::Device d = v.toDevice();
    if (d.is_privateuseone() && a.device < 0) a.device = d.has_index() ? d.index() : current_device();
    return r;  // NONE: lowerings never need it
  }
  switch (kind) {
    case c10::TypeKind::NumberType:
      r.kind = TPU_ARG_SCALAR;
      r.scalar = scalar_of(v.toScalar(), TPU_TIER_WRAPPED);
      return r;
    case c10::TypeKind::ScalarTypeType:
      r.kind = TPU_ARG_DTYPE;
      r.dtype = to_tpu(static_cast<c10::ScalarType>(v.toInt()));
      return r;
    case c10::TypeKind::LayoutType:
    case c10::TypeKind::MemoryFormatType:
      return r;
    default:
      break;
  }
  if (v.isBool()) {
    r.kind = TPU_ARG_BOOL;
    r.b = v.toBool();
  } else if (v.isInt() || v.isSymInt()) {
    r.kind = TPU_ARG_INT;
    r.i = v.isInt() ? v.toInt() : v.toSymInt().guard_int(__FILE__, __LINE__);
  } else if (v.isDouble() || v.isSymFloat()) {
    r.kind = TPU_ARG_FLOAT;
    r.f = v.isDouble() ? v.toDouble() : v.toSymFloat().guard_float(__FILE__, __LINE__);
  } else if (v.isScalar()) {
    r.kind = TPU_ARG_SCALAR;
    r.scalar = scalar_of(v.toScalar(), TPU_TIER_WRAPPED);
  } else {
    TORCH_CHECK(false, "tpu: unsupported argument type ", *arg.real_type(), " for ",
                arg.name());
  }
  return r;
}

//===--- results ---===//

// What the prepare callback needs to provide targets.
struct Call {
  bool into = false;  // in-place / out=
  bool is_out = false;
  bool iterator = false;  // new results take the inputs' layout
  size_t conditions = 0;  // leading inputs TensorIterator never converts
  MetaStrides layout;     // or these strides (TPU_F_META_LAYOUT)
  c10::DeviceIndex device = 0;
  std::vector<at::Tensor> targets;  // in-place / out= tensors, in order
  std::vector<at::Tensor> results;  // new tensors of a functional call
  std::vector<const c10::TensorImpl*> inputs;  // tensors read (out= aliasing)
  std::vector<std::pair<at::Tensor, size_t>> grow;  // out= storages too small, and their bytes
};

// Gives `out` the result's shape, as PyTorch's resize_output does: in place,
// keeping its storage and offset, so that the tensors sharing that storage
// see the result. An out= tensor that is also an input is never resized
// (TensorIterator's rule: ldexp_, which writes through mul's out=, must not
// broadcast self). Returns the bytes its storage must first grow to (0: it
// fits, and `out` has the shape now); growing records an op, which cannot
// happen inside the op being recorded, so the caller grows it and calls
// the op again.
size_t resize_out(at::Tensor& out, const tpu_result_type_t& type,
                  const std::vector<const c10::TensorImpl*>& inputs) {
  c10::IntArrayRef sizes(type.sizes, static_cast<size_t>(type.rank));
  if (out.sizes() == sizes) return 0;
  TORCH_CHECK(std::find(inputs.begin(), inputs.end(), out.unsafeGetTensorImpl()) == inputs.end(),
              "output with shape ", out.sizes(), " doesn't match the broadcast shape ", sizes);
  size_t need = static_cast<size_t>(out.storage_offset() + c10::multiply_integers(sizes)) *
                out.element_size();
  if (c10::multiply_integers(sizes) > 0 && out.storage().nbytes() < need) return need;
  if (out.numel() != 0)
    TORCH_WARN("An output with one or more elements was resized since it had shape ",
               out.sizes(), ", which does not match the required output shape ", sizes,
               ". This behavior is deprecated, and in a future PyTorch release outputs "
               "will not be resized unless they have zero elements. You can explicitly "
               "reuse an out tensor t by resizing it, inplace, to zero elements with "
               "t.resize_(0).");
  out.unsafeGetTensorImpl()->set_sizes_contiguous(sizes);
  return 0;
}

// The dtype TensorIterator converts the inputs of an op with a result of
// `dtype` to: their promoted dtype (a float one when the result is, as for
// true division of integers), or a unary op's input dtype (only sin(int)
// converts). Inputs before `first` (where's condition) take no part.
c10::ScalarType common_dtype(c10::ScalarType dtype,
                             const std::vector<const c10::TensorImpl*>& inputs, size_t first) {
  std::vector<at::Tensor> held;
  for (size_t k = first; k < inputs.size(); ++k)
    if (const c10::TensorImpl* in = inputs[k]; in != c10::UndefinedTensorImpl::singleton())
      held.push_back(at::Tensor(c10::intrusive_ptr<c10::TensorImpl>::unsafe_reclaim_from_nonowning(
          const_cast<c10::TensorImpl*>(in))));
  bool float_result = c10::isFloatingType(dtype) || c10::isComplexType(dtype);
  if (held.size() == 1) {
    c10::ScalarType in = held[0].scalar_type();
    return c10::isIntegralType(in, true) && float_result ? dtype : in;
  }
  c10::ScalarType common = at::native::result_type(held);
  return c10::isIntegralType(common, true) && float_result ? dtype : common;
}

// TensorIterator's layout for a new result of `sizes` and `dtype`: its dims
// ordered as the strides of the inputs that broadcast to it order them, the
// first input that tells two dims apart deciding (a broadcast dim tells
// nothing). Empty when that is row-major. Inputs before `first` are
// never converted.
std::vector<int64_t> iterator_strides(c10::IntArrayRef sizes, c10::ScalarType dtype,
                                      const std::vector<const c10::TensorImpl*>& inputs,
                                      size_t first) {
  const int64_t ndim = static_cast<int64_t>(sizes.size());
  if (ndim < 2) return {};
  // TensorIterator first converts each input of another dtype than the
  // common one, and a copy of an input that is not dense (x.expand(...))
  // is laid out contiguously (or channels-last): it is no longer broadcast.
  std::vector<std::vector<int64_t>> copied(inputs.size());
  std::optional<c10::ScalarType> common;
  for (size_t k = first; k < inputs.size(); ++k) {
    const c10::TensorImpl* in = inputs[k];
    if (in == c10::UndefinedTensorImpl::singleton() || in->is_non_overlapping_and_dense()) continue;
    if (!common) common = common_dtype(dtype, inputs, first);
    if (in->dtype().toScalarType() == *common) continue;
    if (in->is_strides_like_channels_last()) {
      copied[k] = c10::get_channels_last_strides_2d(in->sizes());
      continue;
    }
    copied[k].resize(static_cast<size_t>(in->dim()));
    int64_t next = 1;
    for (int64_t i = in->dim() - 1; i >= 0; --i) {
      copied[k][static_cast<size_t>(i)] = next;
      next *= std::max<int64_t>(in->size(i), 1);
    }
  }
  auto stride = [&](size_t k, int64_t d) -> int64_t {
    const c10::TensorImpl* in = inputs[k];
    int64_t i = d - (ndim - in->dim());  // inputs broadcast from the right
    if (i < 0 || (in->size(i) == 1 && sizes[d] != 1)) return 0;
    return copied[k].empty() ? in->stride(i) : copied[k][static_cast<size_t>(i)];
  };
  auto broadcasts = [&](const c10::TensorImpl* in) {  // to the result's shape
    if (in->dim() == 0 || in->dim() > ndim) return false;
    for (int64_t i = 0; i < in->dim(); ++i) {
      int64_t d = ndim - in->dim() + i;
      if (in->size(i) != sizes[d] && in->size(i) != 1) return false;
    }
    return true;
  };
  // > 0: dim a goes after (is slower than) dim b; < 0: before; 0: unknown
  auto slower = [&](int64_t a, int64_t b) -> int {
    for (size_t k = 0; k < inputs.size(); ++k) {
      if (!broadcasts(inputs[k])) continue;
      int64_t sa = stride(k, a), sb = stride(k, b);
      if (sa == 0 || sb == 0) continue;
      if (sa != sb) return sa > sb ? 1 : -1;
      if (sizes[a] > sizes[b]) return 1;  // equal strides: the smaller dim first
    }
    return 0;
  };
  std::vector<int64_t> perm(static_cast<size_t>(ndim));  // fastest first
  for (int64_t i = 0; i < ndim; ++i) perm[i] = ndim - 1 - i;
  for (int64_t i = 1; i < ndim; ++i) {  // insertion sort past unknown pairs
    int64_t moving = i;
    for (int64_t j = i - 1; j >= 0; --j) {
      int c = slower(perm[j], perm[moving]);
      if (c < 0) break;
      if (c > 0) {
        std::swap(perm[j], perm[moving]);
        moving = j;
      }
    }
  }
  bool row_major = true;
  for (int64_t i = 0; i < ndim; ++i) row_major &= perm[i] == ndim - 1 - i;
  if (row_major) return {};
  std::vector<int64_t> strides(static_cast<size_t>(ndim));
  int64_t next = 1;
  for (int64_t d : perm) {
    strides[d] = next;
    next *= sizes[d];
  }
  return strides;
}

tpu_status_t prepare(void* user, int count, const tpu_result_type_t* types,
                     tpu_view_t* targets) noexcept {
  auto* call = static_cast<Call*>(user);
  try {
    if (!call->into) {
      call->results.reserve(static_cast<size_t>(count));
      for (int k = 0; k < count; ++k) {
        if (types[k].dtype == TPU_DTYPE_INVALID) {  // absent: an undefined tensor
          call->results.emplace_back();
          continue;
        }
        c10::IntArrayRef sizes(types[k].sizes, static_cast<size_t>(types[k].rank));
        call->results.push_back(new_tensor(sizes, to_torch(types[k].dtype), call->device));
        // A meta kernel's layout comes first (glu: elementwise, but not
        // shaped as its input).
        std::vector<int64_t> strides;
        if (static_cast<size_t>(k) < call->layout.size()) strides = call->layout[k];
        else if (call->iterator)
          strides = iterator_strides(sizes, to_torch(types[k].dtype), call->inputs,
                                     call->conditions);
        if (strides.size() == sizes.size() && !strides.empty())
          call->results.back().unsafeGetTensorImpl()->set_sizes_and_strides(sizes, strides);
        targets[k] = view_of(call->results.back());
      }
      return TPU_OK;
    }
    if (static_cast<size_t>(count) != call->targets.size())
      return tpu_status_make(TPU_CODE_INTERNAL, "the op made %d results for %zu outputs",
                             count, call->targets.size());
    for (int k = 0; k < count; ++k) {
      if (types[k].dtype == TPU_DTYPE_INVALID) continue;  // absent: left as is
      at::Tensor& out = call->targets[static_cast<size_t>(k)];
      size_t grow = call->is_out ? resize_out(out, types[k], call->inputs) : 0;
      if (grow) call->grow.emplace_back(out, grow);
      targets[k] = view_of(out);
    }
    if (!call->grow.empty())
      return tpu_status_make(TPU_CODE_INTERNAL, "an out= storage is too small");  // grown, then again
    return TPU_OK;
  } catch (const c10::Error& e) {
    return tpu_status_make(TPU_CODE_INVALID_ARGUMENT, "%s", e.what_without_backtrace());
  } catch (const std::exception& e) {
    return tpu_status_make(TPU_CODE_INVALID_ARGUMENT, "%s", e.what());
  }
}

//===--- the boxed kernel of an op-table row ---===//

struct SchemaInfo {
  std::vector<bool> is_out;   // kwarg-only written arguments (out=)
  std::vector<bool> written;  // written arguments that are targets
  bool into = false;          // something is written
  bool is_out_variant = false;
  bool returns_list = false;  // a single Tensor[] result
  bool bumps_versions = false;  // an in-place foreach op (see analyze)
  size_t num_returns = 0;
};

// Whether a return aliases argument `a` (self of an in-place op, out=).
bool returned(const c10::FunctionSchema& s, const c10::Argument& a) {
  for (const auto& r : s.returns()) {
    if (!r.alias_info()) continue;
    for (const auto& set : a.alias_info()->beforeSets())
      if (r.alias_info()->beforeSets().count(set)) return true;
  }
  return false;
}

SchemaInfo analyze(const c10::FunctionSchema& s) {
  SchemaInfo info;
  bool fresh = false, has_out = false;  // new tensors returned; out= arguments
  for (const auto& r : s.returns()) fresh |= !r.alias_info();
  for (const auto& a : s.arguments())
    has_out |= a.alias_info() && a.alias_info()->isWrite() && a.kwarg_only();
  for (const auto& a : s.arguments()) {
    // Written arguments are targets (self of in-place ops, out=, every
    // written argument of ops returning nothing or only aliases), except
    // those of ops that also make new tensors or have out= arguments without
    // returning them (batch norm's running stats): those are inputs that the
    // lowering updates itself (tpu_lower_write_arg).
    bool w = a.alias_info() && a.alias_info()->isWrite() &&
             (a.kwarg_only() || returned(s, a) || !(fresh || has_out));
    info.written.push_back(w);
    info.is_out.push_back(w && a.kwarg_only());
    info.into |= w;
    info.is_out_variant |= w && a.kwarg_only();
  }
  info.num_returns = s.returns().size();
  // An in-place foreach op returns nothing, so PyTorch's ADInplaceOrView
  // layer bumps no version for it: CPU's per-tensor loop and CUDA's kernels
  // bump each target's themselves, and so must we, or autograd would not
  // see a saved tensor that the op modified (a silently wrong gradient).
  // (The fused optimizer steps bump nothing on CPU and CUDA either.)
  info.bumps_versions = info.into && s.name().rfind("aten::_foreach_", 0) == 0;
  info.returns_list =
      info.num_returns == 1 && s.returns()[0].type()->kind() == c10::TypeKind::ListType;
  return info;
}

// Fused mode: the end of a backward pass is a flush point. The first op a
// backward pass records queues a callback that runs when the pass ends.
std::atomic<bool> backward_ran{false};

void flush_after_backward() {
  static thread_local int queued_for = -1;
  int task = torch::autograd::get_current_graph_task_id();
  if (task >= 0) backward_ran.store(true, std::memory_order_relaxed);
  if (tpu_mode_get() != TPU_MODE_FUSED) return;
  if (task < 0 || task == queued_for) return;
  queued_for = task;
  torch::autograd::Engine::get_default_engine().queue_callback(
      [] { tpu_flush_deferred(-1); });
}

// PyTorch's checks of out= tensors, as given (before any resize): none may
// write an element twice, nor share memory with an input in part (its
// kernels would read what they already wrote; ours would not, but the same
// call fails the same way on both devices). An out= that is an input as a
// whole is an in-place update, allowed except by the rows that gather.
void check_out_overlap(int row, const std::vector<at::Tensor>& outs,
                       c10::ArrayRef<c10::IValue> args, const std::vector<bool>& is_out) {
  bool whole_ok = !tpu_op_out_disjoint(row);
  std::vector<at::Tensor> inputs;
  for (size_t i = 0; i < args.size(); ++i) {
    if (is_out[i]) continue;
    if (args[i].isTensor()) inputs.push_back(args[i].toTensor());
    if (args[i].isTensorList())
      for (const at::Tensor& t : args[i].toTensorVector()) inputs.push_back(t);
  }
  for (const at::Tensor& out : outs) {
    at::assert_no_internal_overlap(out);
    for (const at::Tensor& in : inputs) {
      if (!in.defined() || (whole_ok && in.is_same(out))) continue;
      if (whole_ok) at::assert_no_partial_overlap(out, in);
      else at::assert_no_overlap(out, in);
    }
  }
}

// PyTorch's checks of the tensor an in-place op writes against the op's
// other tensor inputs (tpu_op_inplace_overlap): TensorIterator's ops refuse
// a partial overlap, the ops that scatter any overlap. A foreach op's lists
// pair up element by element, as its per-tensor ops do.
void check_inplace_overlap(int row, const at::Tensor& target, size_t k,
                           c10::ArrayRef<c10::IValue> args, const std::vector<bool>& written) {
  tpu_overlap_t rule = tpu_op_inplace_overlap(row);
  if (rule == TPU_OVERLAP_ANY) return;
  auto check = [&](const at::Tensor& in) {
    if (!in.defined() || !in.is_privateuseone()) return;
    if (rule == TPU_OVERLAP_WHOLE) at::assert_no_partial_overlap(target, in);
    else at::assert_no_overlap(target, in);
  };
  for (size_t i = 0; i < args.size(); ++i) {
    if (written[i]) continue;
    if (args[i].isTensor()) check(args[i].toTensor());
    if (args[i].isTensorList()) {
      auto list = args[i].toTensorList();
      if (k < list.size()) check(list.get(k));
    }
  }
}

class RowKernel final : public c10::OperatorKernel {
 public:
  explicit RowKernel(int row) : row_(row) {}

  void operator()(const c10::OperatorHandle& op, c10::DispatchKeySet, torch::jit::Stack* stack) {
    std::call_once(once_, [&] { info_ = analyze(op.schema()); });
    const auto& schema_args = op.schema().arguments();
    const size_t n = schema_args.size();
    auto ivalues = torch::jit::last(*stack, n);
    Args a;
    a.args.reserve(n);
    Call call;
    call.into = info_.into;
    call.iterator = tpu_op_has_input_layout(row_) && !info_.returns_list;
    static const int where = tpu_op_lookup("where");
    call.conditions = row_ == where ? 1 : 0;  // where's condition: bool, never promoted
    call.is_out = info_.is_out_variant;
    if (!info_.into && tpu_op_has_meta_layout(row_)) call.layout = meta_strides(op, ivalues);
    for (size_t i = 0; i < n; ++i) {
      const c10::IValue& v = ivalues[i];
      if (info_.written[i]) {  // collect targets (and their device)
        if (v.isTensor()) {
          call.targets.push_back(v.toTensor());
        } else if (v.isTensorList()) {
          for (const at::Tensor& t : v.toTensorVector()) call.targets.push_back(t);
        }
        for (const auto& t : call.targets)
          if (!t.is_privateuseone()) foreign_target(t, ivalues);
        if (a.device < 0 && !call.targets.empty()) a.device = call.targets[0].device().index();
      }
      if (info_.is_out[i]) continue;  // out= tensors are targets, not inputs
      if (v.isTensor()) call.inputs.push_back(v.toTensor().unsafeGetTensorImpl());
      // A few ops fall through the Conjugate key (mm, addmm, bmm, baddbmm,
      // dot, vdot, _conj_physical: CPU's kernels read the bit), so a
      // conjugate view can reach a row; rows read physical data, so such an
      // input is materialized first (the negative bit likewise). So is a
      // ZeroTensor (forward-mode AD's tangent of an input without one),
      // which has no memory: dot, vdot, mul.Scalar and add.Scalar fall
      // through its key too.
      if (!info_.written[i] && v.isTensor()) {
        const at::Tensor& t = v.toTensor();
        if (t.defined() && t.is_privateuseone() &&
            (t._is_zerotensor() || t.is_conj() || t.is_neg())) {
          a.resolved.push_back(t._is_zerotensor() ? at::zeros(t.sizes(), t.options())
                                                  : t.resolve_conj().resolve_neg());
          a.args.push_back(convert(a, schema_args[i], c10::IValue(a.resolved.back())));
          continue;
        }
      }
      a.args.push_back(convert(a, schema_args[i], v));
    }
    if (a.device < 0) a.device = current_device();
    if (info_.is_out_variant)
      check_out_overlap(row_, call.targets, ivalues, info_.is_out);
    else
      for (size_t k = 0; k < call.targets.size(); ++k)
        check_inplace_overlap(row_, call.targets[k], k, ivalues, info_.written);
    for (size_t g : a.generators) {
      size_t schema_index = 0, seen = 0;  // find the IValue behind args[g]
      for (; schema_index < n; ++schema_index) {
        if (info_.is_out[schema_index]) continue;
        if (seen++ == g) break;
      }
      const c10::IValue& v = ivalues[schema_index];
      std::optional<at::Generator> gen;
      if (!v.isNone()) gen = v.toGenerator();
      rng_next(gen, a.device, a.args[g].rng);
    }
    if (a.generators.empty() && tpu_op_is_random(row_)) {  // e.g. native_dropout
      tpu_arg_t r;
      std::memset(&r, 0, sizeof r);
      r.kind = TPU_ARG_RNG;
      rng_next(std::nullopt, a.device, r.rng);
      a.args.push_back(r);
    }
    call.device = a.device;
    flush_after_backward();
    // The targets' dtypes (out= and in-place alike), for lowerings whose
    // result dtype is the target's: factories, scans (bool.cumsum_ raises).
    std::vector<tpu_dtype_t> out_dtypes;
    for (const at::Tensor& t : call.targets) out_dtypes.push_back(to_tpu(t.scalar_type()));
    tpu_call_t c{row_, a.device, a.args.data(), static_cast<int>(a.args.size()),
                 call.into ? TPU_WRITE_INTO : TPU_WRITE_NEW,
                 out_dtypes.empty() ? nullptr : out_dtypes.data(),
                 static_cast<int>(out_dtypes.size()), &prepare, &call, matmul_precision(),
                 default_float()};
    tpu_status_t status = unlocked_call([&] { return tpu_op_call(&c); });
    if (status && !call.grow.empty()) {  // see resize_out
      tpu_status_free(status);
      for (const auto& [out, nbytes] : call.grow) ensure_storage(out, nbytes);
      call.grow.clear();
      status = unlocked_call([&] { return tpu_op_call(&c); });
    }
    check(status);
    if (info_.bumps_versions)
      for (const at::Tensor& t : call.targets) t.unsafeGetTensorImpl()->bump_version();
    torch::jit::drop(*stack, n);
    if (info_.num_returns == 0) return;
    std::vector<at::Tensor>& out = call.into ? call.targets : call.results;
    if (info_.returns_list) {
      torch::jit::push(*stack, c10::List<at::Tensor>(out));
      return;
    }
    TORCH_CHECK(out.size() >= info_.num_returns, op.schema().name(), ": ", out.size(),
                " results for ", info_.num_returns, " returns");
    for (size_t k = 0; k < info_.num_returns; ++k) torch::jit::push(*stack, out[k]);
  }

 private:
  int row_;
  std::once_flag once_;
  SchemaInfo info_;
};

std::deque<torch::Library>& libraries() {
  static std::deque<torch::Library> libs;
  return libs;
}

}  // namespace

//===--- the CPU fallback ---===//

static bool fallback_is_error() {
  tpu_status_t s = TPU_OK;
  bool error = tpu_env_get(TPU_ENV_FALLBACK, &s) == 1;
  check(s);
  return error;
}

void cpu_fallback(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const std::string name = c10::toString(op.schema().operator_name());
  TORCH_CHECK_NOT_IMPLEMENTED(!fallback_is_error(), "The operator '", name,
                              "' is not implemented natively for the tpu device, and "
                              "TORCHTPU_FALLBACK=error forbids running it on the CPU.");
  tpu_metrics_fallback(name.c_str());
  static std::mutex lock;
  static std::set<std::string> warned;
  {
    std::lock_guard<std::mutex> g(lock);
    if (warned.insert(name).second)
      TORCH_WARN("The operator '", name, "' is not implemented natively for the tpu "
                 "device; it runs on the CPU, with copies to and from the device. "
                 "torchtpu.report() lists such fallbacks.");
  }
  at::native::cpu_fallback(op, stack);
}

void register_kernel(const std::string& qualified_name, int row) {
  auto sep = qualified_name.find("::");
  TORCH_CHECK(sep != std::string::npos, "expected ns::name, got ", qualified_name);
  std::string ns = qualified_name.substr(0, sep), name = qualified_name.substr(sep + 2);
  auto& libs = libraries();
  libs.emplace_back(torch::Library::IMPL, ns, c10::DispatchKey::PrivateUse1, __FILE__, __LINE__);
  libs.back().impl(name.c_str(),
                   torch::CppFunction::makeFromBoxedFunctor(std::make_unique<RowKernel>(row)));
}

// addbmm_: CPU's is addbmm's out= form writing into self, so a self that
// only broadcasts to the product's shape ([1], [], [p]) is resized to it,
// where the op table's in-place kernels (TensorIterator's rule) refuse to
// resize an input. That case computes the functional result and copies it
// in (from self's values before the op, where CPU's copy into the resized
// self may read elements it already overwrote: a [n, 1] self); a self of
// the product's shape takes the row's out= form into itself, one op.
// (torchtpu/_ops.py leaves addbmm_ to this kernel.)
static at::Tensor& addbmm_inplace(at::Tensor& self, const at::Tensor& batch1,
                                  const at::Tensor& batch2, const at::Scalar& beta,
                                  const at::Scalar& alpha) {
  if (batch1.dim() == 3 && batch2.dim() == 3 && self.dim() == 2 &&
      self.size(0) == batch1.size(1) && self.size(1) == batch2.size(2))
    return at::addbmm_out(self, self, batch1, batch2, beta, alpha);
  at::Tensor r = at::addbmm(self, batch1, batch2, beta, alpha);
  self.resize_(r.sizes());
  return self.copy_(r);
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) { m.impl("addbmm_", TORCH_FN(addbmm_inplace)); }

bool autograd_ran_on_device() { return backward_ran.load(std::memory_order_relaxed); }

void register_fallback() {
  auto& libs = libraries();
  libs.emplace_back(torch::Library::IMPL, "_", c10::DispatchKey::PrivateUse1,
                    __FILE__, __LINE__);
  libs.back().fallback(torch::CppFunction::makeFromBoxedFunction<&cpu_fallback>());
}

}  // namespace torchtpu
