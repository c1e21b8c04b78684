// RowCall: one call of an op-table row from a C++ kernel, for kernels that
// sequence rows themselves (dynamic.cpp) or whose schema the generic row
// kernel cannot produce (attention.cpp). Arguments go in schema order.
#pragma once

#include <deque>
#include <memory>
#include <optional>
#include <vector>

#include "binding.h"

namespace torchtpu {

// The index of the op table's row `name`; throws if there is none.
int row_id(const char* name);

class RowCall {
 public:
  RowCall(int row, c10::DeviceIndex device) : row_(row), device_(device) {}

  // A tensor on the CPU (PyTorch allows index tensors there) is moved over.
  RowCall& tensor(const at::Tensor& t);
  RowCall& optional_tensor(const std::optional<at::Tensor>& t);  // None if undefined
  RowCall& tensors(const std::vector<at::Tensor>& ts);  // Tensor?[]: undefined is None
  RowCall& integer(int64_t v);
  RowCall& real(double v);
  RowCall& optional_real(std::optional<double> v);
  RowCall& boolean(bool v);
  RowCall& booleans(c10::ArrayRef<bool> v);
  // The next new result is laid out as PyTorch's meta kernels lay out a
  // result "like" `t` (empty_like, or `t`'s dims in its strides' order);
  // an undefined `t` leaves it row-major.
  RowCall& result_like(const at::Tensor& t);

  std::vector<at::Tensor> run();       // new result tensors
  void run_into(const at::Tensor& self);  // the single result written into self

 private:
  tpu_arg_t& next(tpu_arg_kind_t kind);
  const tpu_view_t* view(const at::Tensor& t);
  void call(tpu_write_mode_t mode, void* results);

  int row_;
  c10::DeviceIndex device_;
  std::vector<tpu_arg_t> args_;
  std::deque<at::Tensor> keep_;
  std::deque<tpu_view_t> views_;
  std::deque<std::vector<const tpu_view_t*>> lists_;
  std::deque<std::unique_ptr<bool[]>> bools_;
  std::vector<at::Tensor> like_;
};

}  // namespace torchtpu
