// The layout PyTorch gives an op's results, read from its meta kernel, for
// the rows that lay theirs out neither row-major nor as their inputs
// (TPU_F_META_LAYOUT): linalg's column-major matrices, fft's transformed
// dims innermost, the channels-last results of pooling, normalization,
// resampling, padding and cat. A compiled graph views them as the meta
// kernel said, and code such as inv(a).mT.view(-1) works only with that
// layout.
//
// Rows are flagged only where the meta kernel run on meta tensors lays out
// as CPU's kernel and a graph traced for tpu do: the few meta kernels that
// ask the device take a meta tensor for CUDA's (convolution, reflection
// padding: not flagged; the real FFTs over several dims: cuFFT's layout).
//
// Meta kernels written in Python cost 0.1-0.2 ms a call, so each op keeps
// the strides per signature (its arguments' dtypes, sizes, strides and
// values): a loop calls the meta kernel once.
#include <ATen/ops/empty_strided.h>

#include <atomic>
#include <mutex>
#include <string>
#include <unordered_map>

#include "binding.h"

namespace torchtpu {
namespace {

// Appends v to the signature; false for an argument it cannot describe.
bool describe(const c10::IValue& v, std::string& key) {
  auto add = [&](const void* p, size_t n) { key.append(static_cast<const char*>(p), n); };
  auto add_int = [&](int64_t i) { add(&i, sizeof i); };
  auto add_tensor = [&](const at::Tensor& t) {
    if (!t.defined()) return key.push_back('u');
    key.push_back('t');
    add_int(static_cast<int64_t>(t.scalar_type()));
    add_int(t.dim());
    for (int64_t d = 0; d < t.dim(); ++d) {
      add_int(t.size(d));
      add_int(t.stride(d));
    }
  };
  if (v.isNone()) {
    key.push_back('n');
  } else if (v.isTensor()) {
    add_tensor(v.toTensor());
  } else if (v.isTensorList()) {
    key.push_back('l');
    for (const at::Tensor& t : v.toTensorVector()) add_tensor(t);
    key.push_back(';');
  } else if (v.isBool()) {
    key.push_back(v.toBool() ? 'T' : 'F');
  } else if (v.isInt()) {
    key.push_back('i');
    add_int(v.toInt());
  } else if (v.isDouble()) {
    key.push_back('d');
    double d = v.toDouble();
    add(&d, sizeof d);
  } else if (v.isIntList()) {
    key.push_back('L');
    for (int64_t i : v.toIntVector()) add_int(i);
    key.push_back(';');
  } else if (v.isBoolList()) {  // output_mask
    key.push_back('B');
    for (bool b : v.toBoolList()) key.push_back(b ? 'T' : 'F');
    key.push_back(';');
  } else if (v.isDoubleList()) {  // scale factors
    key.push_back('D');
    for (double d : v.toDoubleVector()) add(&d, sizeof d);
    key.push_back(';');
  } else if (v.isString()) {
    key.push_back('s');
    key.append(v.toStringRef());
    key.push_back('\0');
  } else {
    return false;
  }
  return true;
}

c10::IValue on_meta(const c10::IValue& v) {
  auto meta = [](const at::Tensor& t) {
    if (!t.defined()) return t;
    return at::empty_strided(t.sizes(), t.strides(), t.options().device(c10::kMeta));
  };
  if (v.isTensor()) return meta(v.toTensor());
  if (v.isTensorList()) {
    c10::List<at::Tensor> list;
    for (const at::Tensor& t : v.toTensorVector()) list.push_back(meta(t));
    return list;
  }
  return v;
}

std::atomic<int64_t> runs{0};

MetaStrides run_meta(const c10::OperatorHandle& op, c10::ArrayRef<c10::IValue> args) {
  runs.fetch_add(1, std::memory_order_relaxed);
  MetaStrides out;
  torch::jit::Stack stack;
  for (const c10::IValue& v : args) stack.push_back(on_meta(v));
  try {
    op.callBoxed(&stack);
  } catch (const std::exception&) {
    return out;  // no meta kernel for these arguments: row-major results
  }
  for (const c10::IValue& r : stack) {
    out.emplace_back();
    if (!r.isTensor()) continue;
    const at::Tensor& t = r.toTensor();
    if (t.defined() && t.is_non_overlapping_and_dense())
      out.back().assign(t.strides().begin(), t.strides().end());
  }
  return out;
}

}  // namespace

int64_t meta_layout_runs() { return runs.load(std::memory_order_relaxed); }

MetaStrides meta_strides(const c10::OperatorHandle& op, c10::ArrayRef<c10::IValue> args) {
  std::string key = op.schema().operator_name().name + "." +
                    op.schema().operator_name().overload_name + '\0';
  bool keyed = true;
  for (const c10::IValue& v : args) keyed = keyed && describe(v, key);
  if (!keyed) return run_meta(op, args);
  static std::mutex lock;
  static std::unordered_map<std::string, MetaStrides> seen;
  {
    std::lock_guard<std::mutex> g(lock);
    auto it = seen.find(key);
    if (it != seen.end()) return it->second;
  }
  MetaStrides strides = run_meta(op, args);  // unlocked: it may take the GIL
  std::lock_guard<std::mutex> g(lock);
  if (seen.size() >= 4096) seen.clear();  // a bound on shapes that never repeat
  seen.emplace(std::move(key), strides);
  return strides;
}

}  // namespace torchtpu
