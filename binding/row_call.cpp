#include "row_call.h"

#include <cstring>

namespace torchtpu {
namespace {

// Where a call's results go: new tensors, or `into` written in place.
struct Results {
  c10::DeviceIndex device = 0;
  const at::Tensor* into = nullptr;
  std::vector<at::Tensor> out;
};

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
      c10::IntArrayRef sizes(types[k].sizes, static_cast<size_t>(types[k].rank));
      r->out.push_back(new_tensor(sizes, to_torch(types[k].dtype), r->device));
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

std::vector<at::Tensor> RowCall::run() {
  Results r;
  r.device = device_;
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
               nullptr, 0, &prepare, results, matmul_precision()};
  check(tpu_op_call(&c));
}

}  // namespace torchtpu
