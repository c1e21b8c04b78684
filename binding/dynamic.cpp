// Kernels for ops whose result shape depends on the data: nonzero,
// masked_select, repeat_interleave, bincount, and advanced indexing with
// boolean masks.
//
// Each reads a count back from the device (a host synchronization: an
// op-table row computes it, .item() reads it), then runs a static-shape
// op-table row with that size. index.Tensor and _index_put_impl_ live here
// because a boolean mask among their indices turns into integer indices
// through nonzero first; integer indices go straight to the row, and so does
// a lone mask in index_put (its result keeps self's shape, so the row handles
// it on the device without a count). The work stays in the C lowerings
// (runtime/src/lower/lower_index.c); this file only sequences calls.
#include <ATen/ATen.h>
#include <ATen/MemoryOverlap.h>
#include <ATen/native/Resize.h>
#include <torch/library.h>

#include <algorithm>
#include <optional>
#include <vector>

#include "binding.h"
#include "row_call.h"

namespace torchtpu {
namespace {

using IndexList = c10::List<std::optional<at::Tensor>>;

c10::DeviceIndex index_of_device(const at::Tensor& t) { return t.device().index(); }

// How many elements of t are nonzero: counted on the device, read back.
int64_t device_count_nonzero(const at::Tensor& t) {
  static const int row = row_id("nonzero_count");
  return RowCall(row, index_of_device(t)).tensor(t).run()[0].item<int64_t>();
}

at::Tensor nonzero_tpu(const at::Tensor& self) {
  static const int row = row_id("nonzero_static");
  int64_t n = device_count_nonzero(self);
  return RowCall(row, index_of_device(self)).tensor(self).integer(n).integer(-1).run()[0];
}

// out= forms: compute, then resize and copy into out (rarely used; the copy
// keeps this file free of shape logic).
at::Tensor& write_out(const at::Tensor& r, at::Tensor& out) {
  at::native::resize_output(out, r.sizes());
  out.copy_(r);
  return out;
}

at::Tensor& nonzero_out_tpu(const at::Tensor& self, at::Tensor& out) {
  TORCH_CHECK(out.scalar_type() == at::kLong,
              "nonzero: Expected out tensor to have scalar type Long but got scalar type ",
              out.scalar_type());
  return write_out(nonzero_tpu(self), out);
}

at::Tensor masked_select_tpu(const at::Tensor& self, const at::Tensor& mask) {
  static const int row = row_id("masked_select_static");
  TORCH_CHECK(mask.scalar_type() == at::kBool, "masked_select: expected BoolTensor for mask");
  TORCH_CHECK(mask.device() == self.device(), "Expected all tensors to be on the same device, "
              "but found at least two devices, ", self.device(), " and ", mask.device(), "!");
  std::vector<int64_t> shape = at::infer_size(self.sizes(), mask.sizes());
  int64_t numel = c10::multiply_integers(shape);
  // Broadcasting repeats the mask whole, so its count scales.
  int64_t n = mask.numel() == 0 ? 0 : device_count_nonzero(mask) * (numel / mask.numel());
  return RowCall(row, index_of_device(self)).tensor(self).tensor(mask).integer(n).run()[0];
}

at::Tensor& masked_select_out_tpu(const at::Tensor& self, const at::Tensor& mask, at::Tensor& out) {
  TORCH_CHECK(out.scalar_type() == self.scalar_type(),
              "masked_select(): self and result must have the same scalar type");
  at::assert_no_internal_overlap(out);  // PyTorch's checks, as for the op-table rows' out=
  at::assert_no_overlap(out, self);
  at::assert_no_overlap(out, mask);
  return write_out(masked_select_tpu(self, mask), out);
}

// torch.unique (without dim) and unique_consecutive: the number of groups
// is read back, then a static-shape row computes values, inverse and counts.
std::tuple<at::Tensor, at::Tensor, at::Tensor> unique_rows(const at::Tensor& self,
                                                           bool consecutive, bool return_inverse,
                                                           bool return_counts) {
  static const int count_row = row_id("unique_count"), row = row_id("unique_static");
  c10::DeviceIndex device = index_of_device(self);
  int64_t n = RowCall(count_row, device).tensor(self).boolean(consecutive).run()[0].item<int64_t>();
  std::vector<at::Tensor> r = RowCall(row, device).tensor(self).boolean(consecutive).integer(n).run();
  at::Tensor none = at::empty({0}, self.options().dtype(at::kLong));  // not asked for, as on CPU
  return {r[0], return_inverse ? r[1] : none, return_counts ? r[2] : none};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> unique2_tpu(const at::Tensor& self, bool /*sorted*/,
                                                           bool return_inverse, bool return_counts) {
  return unique_rows(self, false, return_inverse, return_counts);  // CPU sorts either way
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> unique_consecutive_tpu(
    const at::Tensor& self, bool return_inverse, bool return_counts, std::optional<int64_t> dim) {
  if (!dim.has_value()) return unique_rows(self, true, return_inverse, return_counts);
  static const c10::OperatorHandle op =
      c10::Dispatcher::singleton().findSchemaOrThrow("aten::unique_consecutive", "");
  std::vector<c10::IValue> stack{self, return_inverse, return_counts, dim};
  cpu_fallback(op, &stack);  // along a dim: not lowered yet
  return {stack[0].toTensor(), stack[1].toTensor(), stack[2].toTensor()};
}

bool is_mask(const at::Tensor& t) {
  return t.scalar_type() == at::kBool || t.scalar_type() == at::kByte;
}

// The indices with every boolean mask replaced by the integer indices of
// its true elements (one tensor per dim it covers), as PyTorch does. With
// keep_lone_mask, a mask that is the only index tensor stays (index_put's
// row handles it on the device).
std::vector<at::Tensor> expand_masks(const at::Tensor& self, const IndexList& indices,
                                     bool keep_lone_mask) {
  std::vector<at::Tensor> out;
  int tensors = 0;
  for (size_t i = 0; i < indices.size(); ++i) {
    std::optional<at::Tensor> t = indices[i];
    if (!t || !t->defined()) continue;
    ++tensors;
    auto st = t->scalar_type();
    TORCH_CHECK_INDEX(st == at::kLong || st == at::kInt || st == at::kBool || st == at::kByte,
                      "tensors used as indices must be long, int, byte or bool tensors");
    if (st == at::kByte)
      TORCH_WARN("indexing with dtype torch.uint8 is now deprecated, please use a dtype "
                 "torch.bool instead.");
  }
  int64_t dim = 0;
  for (size_t i = 0; i < indices.size(); ++i) {
    std::optional<at::Tensor> t = indices[i];
    if (!t || !t->defined()) {
      out.emplace_back();
      ++dim;
      continue;
    }
    if (!is_mask(*t) || (keep_lone_mask && tensors == 1)) {
      out.push_back(*t);
      dim += is_mask(*t) ? t->dim() : 1;
      continue;
    }
    at::Tensor mask = *t;
    TORCH_CHECK_INDEX(mask.dim() > 0, "tpu: 0-dimensional boolean masks are not supported in "
                                      "indexing");
    for (int64_t j = 0; j < mask.dim(); ++j) {
      TORCH_CHECK_INDEX(dim + j < self.dim(), "too many indices for tensor of dimension ",
                        self.dim());
      TORCH_CHECK_INDEX(mask.size(j) == self.size(dim + j), "The shape of the mask ",
                        mask.sizes(), " at index ", j,
                        " does not match the shape of the indexed tensor ", self.sizes(),
                        " at index ", dim + j);
    }
    at::Tensor nz = mask.is_privateuseone() ? nonzero_tpu(mask) : at::nonzero(mask);
    for (int64_t j = 0; j < mask.dim(); ++j) out.push_back(nz.select(1, j));
    dim += mask.dim();
  }
  return out;
}

at::Tensor index_tpu(const at::Tensor& self, const IndexList& indices) {
  static const int row = row_id("index");
  std::vector<at::Tensor> idx = expand_masks(self, indices, false);
  return RowCall(row, index_of_device(self)).tensor(self).tensors(idx).run()[0];
}

at::Tensor& index_out_tpu(const at::Tensor& self, const IndexList& indices, at::Tensor& out) {
  TORCH_CHECK(out.scalar_type() == self.scalar_type(), "index_out: self (",
              self.scalar_type(), ") and result (", out.scalar_type(),
              ") must have the same scalar type");
  return write_out(index_tpu(self, indices), out);
}

// The mask of `self[mask] = v` when the indices are one tpu bool (or uint8)
// mask after full slices, shaped to broadcast over self's other dims; else
// an undefined tensor.
at::Tensor lone_mask(const at::Tensor& self, const IndexList& indices) {
  at::Tensor mask;
  int64_t dim = 0;
  for (const std::optional<at::Tensor>& t : indices) {
    if (!t || !t->defined()) {
      ++dim;
      continue;
    }
    if (mask.defined() || !is_mask(*t) || t->device() != self.device() ||
        dim + t->dim() > self.dim())
      return at::Tensor();
    for (int64_t j = 0; j < t->dim(); ++j)
      if (t->size(j) != self.size(dim + j)) return at::Tensor();  // raised by the row
    mask = *t;
    dim += mask.dim();
  }
  if (!mask.defined()) return at::Tensor();
  for (; dim < self.dim(); ++dim) mask = mask.unsqueeze(-1);
  return mask;
}

at::Tensor& index_put_impl_tpu(at::Tensor& self, const IndexList& indices, const at::Tensor& values,
                            bool accumulate, bool /*unsafe*/) {
  static const int row = row_id("index_put");
  // PyTorch's shortcut on every device: a lone mask and a single CPU value
  // (`x[x > 1] = torch.tensor(0)`, of any dtype) are a masked_fill_.
  if (!accumulate && values.numel() == 1 && values.is_cpu()) {
    at::Tensor mask = lone_mask(self, indices);
    if (mask.defined()) return self.masked_fill_(mask, values.item());
  }
  std::vector<at::Tensor> idx = expand_masks(self, indices, true);
  // PyTorch's check, skipped as there when a lone mask and a single value
  // make the call a masked_fill_.
  bool masked_fill = !accumulate && idx.size() == 1 && idx[0].defined() && is_mask(idx[0]) &&
                     values.numel() == 1;
  if (!masked_fill) at::assert_no_overlap(self, values);
  RowCall(row, index_of_device(self)).tensor(self).tensors(idx).tensor(values).boolean(accumulate)
      .run_into(self);
  return self;
}

at::Tensor index_put_tpu(const at::Tensor& self, const IndexList& indices, const at::Tensor& values,
                     bool accumulate) {
  static const int row = row_id("index_put");
  std::vector<at::Tensor> idx = expand_masks(self, indices, true);
  return RowCall(row, index_of_device(self)).tensor(self).tensors(idx).tensor(values)
      .boolean(accumulate).run()[0];
}

// repeat_interleave.Tensor(repeats, *, output_size=None): the indices of
// the repeats, each repeated. Without output_size the length is the sum of
// the repeats, read back (a host synchronization, as on CUDA); the row
// checks the repeats on the device.
at::Tensor repeat_interleave_tpu(const at::Tensor& repeats, std::optional<c10::SymInt> output_size) {
  static const int row = row_id("repeat_interleave_static");
  int64_t n = 0;
  if (output_size)
    n = output_size->guard_int(__FILE__, __LINE__);
  else if (repeats.dim() == 1 && !at::isFloatingType(repeats.scalar_type()))
    n = std::max<int64_t>(repeats.sum().item<int64_t>(), 0);  // a negative sum: the row says why
  return RowCall(row, index_of_device(repeats)).tensor(repeats).integer(n).run()[0];
}

// bincount(self, weights=None, minlength=0): as many bins as the largest
// value plus one, or minlength. The smallest and largest values are read
// back together (one host synchronization, as on CUDA), so a negative value
// is refused here, as CPU refuses it.
at::Tensor bincount_tpu(const at::Tensor& self, const std::optional<at::Tensor>& weights,
                        c10::SymInt minlength) {
  static const int row = row_id("bincount_static");
  int64_t size = minlength.guard_int(__FILE__, __LINE__);
  TORCH_CHECK(size >= 0, "minlength should be >= 0");
  if (self.dim() == 1 && self.numel() > 0 && at::isIntegralType(self.scalar_type(), false)) {
    at::Tensor range = at::stack({self.min(), self.max()}).cpu();
    TORCH_CHECK(range[0].item<int64_t>() >= 0,
                "bincount only supports 1-d non-negative integral inputs.");
    size = std::max(size, range[1].item<int64_t>() + 1);
  }
  return RowCall(row, index_of_device(self)).tensor(self).optional_tensor(weights).integer(size)
      .run()[0];
}

// equal(self, other) -> bool: tensors of different sizes are unequal (no
// broadcasting); otherwise the `equal` row reduces on the device and the
// bool is read back (a host synchronization, as on CUDA).
bool equal_tpu(const at::Tensor& self, const at::Tensor& other) {
  static const int row = row_id("equal");
  TORCH_CHECK(self.device() == other.device(), "Cannot compare two tensors on different "
              "devices. Got: ", self.device(), " and ", other.device());
  if (!self.is_same_size(other)) return false;
  if (self.numel() == 0) return true;
  at::Tensor a = self.resolve_conj().resolve_neg(), b = other.resolve_conj().resolve_neg();
  return RowCall(row, index_of_device(self)).tensor(a).tensor(b).run()[0].item<bool>();
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("equal", TORCH_FN(equal_tpu));
  m.impl("repeat_interleave.Tensor", TORCH_FN(repeat_interleave_tpu));
  m.impl("bincount", TORCH_FN(bincount_tpu));
  m.impl("_unique2", TORCH_FN(unique2_tpu));
  m.impl("unique_consecutive", TORCH_FN(unique_consecutive_tpu));
  m.impl("nonzero", TORCH_FN(nonzero_tpu));
  m.impl("nonzero.out", TORCH_FN(nonzero_out_tpu));
  m.impl("masked_select", TORCH_FN(masked_select_tpu));
  m.impl("masked_select.out", TORCH_FN(masked_select_out_tpu));
  m.impl("index.Tensor", TORCH_FN(index_tpu));
  m.impl("index.Tensor_out", TORCH_FN(index_out_tpu));
  m.impl("_index_put_impl_", TORCH_FN(index_put_impl_tpu));
  m.impl("index_put", TORCH_FN(index_put_tpu));
}

}  // namespace torchtpu
