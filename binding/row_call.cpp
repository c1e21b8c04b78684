#include "row_call.h"

#include <algorithm>
#include <cstring>

namespace torchtpu {
namespace {

// Where a call's results go: new tensors, or `into` written in place.
struct Results {
  c10::DeviceIndex device = 0;
  const at::Tensor* into = nullptr;
  const std::vector<at::Tensor>* like = nullptr;  // layouts of the first results
  std::vector<at::Tensor> out;
};

// The strides of a result of `sizes` laid out like `t`: empty_like's when
// the sizes are the same and `t` is dense, else `t`'s dims ordered by its
// strides (stable) and packed, as the meta kernels' alloc_with_matching_layout.
std::vector<int64_t> strides_like(const at::Tensor& t, c10::IntArrayRef sizes) {
  if (t.sizes() == sizes && t.is_non_overlapping_and_dense()) return t.strides().vec();
  const size_t n = sizes.size();
  std::vector<int64_t> order(n), strides(n);
  for (size_t i = 0; i < n; ++i) order[i] = static_cast<int64_t>(i);
  if (static_cast<size_t>(t.dim()) == n)
    std::stable_sort(order.begin(), order.end(),
                     [&](int64_t a, int64_t b) { return t.stride(a) > t.stride(b); });
  int64_t next = 1;
  for (size_t i = n; i-- > 0;) {
    strides[static_cast<size_t>(order[i])] = next;
    next *= sizes[static_cast<size_t>(order[i])];
  }
  return strides;
}

tpu_status_t prepare(void* user, int count, const tpu_result_type_t* types,
                     tpu_view_t* targets) noexcept {
  auto* r = static_cast<Results*>(user);
  try {
    if (r->into) {
      if (count != 1) return tpu_status_make(TPU_CODE_INTERNAL, "expected one result, got %d", count);
      targets[0] = view_of(*r->into);
      return TPU_OK;
    }
    for (int k = 0; k < count; ++k) {
      if (types[k].dtype == TPU_DTYPE_INVALID) {  // absent: an undefined tensor
        r->out.emplace_back();
        continue;
      }
      c10::IntArrayRef sizes(types[k].sizes, static_cast<size_t>(types[k].rank));
      r->out.push_back(new_tensor(sizes, to_torch(types[k].dtype), r->device));
      if (r->like && static_cast<size_t>(k) < r->like->size() && (*r->like)[k].defined())
        r->out.back().unsafeGetTensorImpl()->set_sizes_and_strides(
            sizes, strides_like((*r->like)[k], sizes));
      targets[k] = view_of(r->out.back());
    }
    return TPU_OK;
  } catch (const std::exception& e) {
    return tpu_status_make(TPU_CODE_INVALID_ARGUMENT, "%s", e.what());
  }
}

}  // namespace

int row_id(const char* name) {
  int row = tpu_op_lookup(name);
  TORCH_CHECK(row >= 0, "tpu: the op table has no row '", name, "'");
  return row;
}

RowCall& RowCall::tensor(const at::Tensor& t) {
  const tpu_view_t* v = view(t);
  next(TPU_ARG_TENSOR).tensor = v;
  return *this;
}

RowCall& RowCall::optional_tensor(const std::optional<at::Tensor>& t) {
  if (t && t->defined()) return tensor(*t);
  next(TPU_ARG_NONE);
  return *this;
}

RowCall& RowCall::tensors(const std::vector<at::Tensor>& ts) {
  lists_.emplace_back();
  for (const at::Tensor& t : ts) lists_.back().push_back(t.defined() ? view(t) : nullptr);
  tpu_arg_t& a = next(TPU_ARG_TENSORS);
  a.tensors = lists_.back().data();
  a.count = static_cast<int32_t>(ts.size());
  return *this;
}

RowCall& RowCall::integer(int64_t v) {
  next(TPU_ARG_INT).i = v;
  return *this;
}

RowCall& RowCall::real(double v) {
  next(TPU_ARG_FLOAT).f = v;
  return *this;
}

RowCall& RowCall::optional_real(std::optional<double> v) {
  if (v) return real(*v);
  next(TPU_ARG_NONE);
  return *this;
}

RowCall& RowCall::boolean(bool v) {
  next(TPU_ARG_BOOL).b = v;
  return *this;
}

RowCall& RowCall::booleans(c10::ArrayRef<bool> v) {
  bools_.emplace_back(new bool[v.size() + 1]);
  std::copy(v.begin(), v.end(), bools_.back().get());
  tpu_arg_t& a = next(TPU_ARG_BOOLS);
  a.bools = bools_.back().get();
  a.count = static_cast<int32_t>(v.size());
  return *this;
}

RowCall& RowCall::result_like(const at::Tensor& t) {
  like_.push_back(t);
  return *this;
}

std::vector<at::Tensor> RowCall::run() {
  Results r;
  r.device = device_;
  r.like = &like_;
  call(TPU_WRITE_NEW, &r);
  return std::move(r.out);
}

void RowCall::run_into(const at::Tensor& self) {
  Results r;
  r.device = device_;
  r.into = &self;
  call(TPU_WRITE_INTO, &r);
}

tpu_arg_t& RowCall::next(tpu_arg_kind_t kind) {
  args_.emplace_back();
  std::memset(&args_.back(), 0, sizeof(tpu_arg_t));
  args_.back().kind = kind;
  return args_.back();
}

const tpu_view_t* RowCall::view(const at::Tensor& t) {
  keep_.push_back(t.is_privateuseone() ? t : t.to(c10::Device(c10::DeviceType::PrivateUse1, device_)));
  views_.push_back(view_of(keep_.back()));
  return &views_.back();
}

void RowCall::call(tpu_write_mode_t mode, void* results) {
  tpu_call_t c{row_, device_, args_.data(), static_cast<int>(args_.size()), mode,
               nullptr, 0, &prepare, results, matmul_precision(), default_float()};
  check(unlocked_call([&] { return tpu_op_call(&c); }));
}

}  // namespace torchtpu
