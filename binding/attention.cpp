// F.scaled_dot_product_attention on tpu.
//
// PyTorch asks each device's _fused_sdp_choice stub which kernel to run.
// Without an answer it decomposes attention into about ten ops (scale,
// matmul, mask add, _safe_softmax, matmul) that autograd differentiates one
// by one. Here 4-D attention without dropout goes to
// _scaled_dot_product_fused_attention_overrideable, whose kernel runs the
// op table's `sdpa` row (one program, runtime/src/lower/lower_attention.c);
// its autograd formula calls ..._overrideable_backward, an ordinary row.
// Dropout and other ranks keep PyTorch's math path (whose ops are lowered
// too). The kernel lives here only because the schema returns two SymInts,
// which the generic row kernel does not produce.
#include <ATen/ATen.h>
#include <ATen/Context.h>
#include <ATen/SDPBackend.h>
#include <ATen/native/DispatchStub.h>
#include <ATen/native/transformers/attention.h>
#include <torch/library.h>

#include <cstring>
#include <optional>
#include <tuple>
#include <vector>

#include "binding.h"

namespace torchtpu {
namespace {

bool fusable(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
             const std::optional<at::Tensor>& mask, double dropout_p, bool enable_gqa) {
  if (dropout_p != 0.0) return false;
  for (const at::Tensor* t : {&q, &k, &v})
    if (!t->is_privateuseone() || t->is_nested() || t->dim() != 4 || t->numel() == 0 ||
        t->scalar_type() != q.scalar_type() || !at::isFloatingType(t->scalar_type()))
      return false;
  if (k.size(0) != q.size(0) || v.size(0) != q.size(0) || v.size(1) != k.size(1) ||
      v.size(2) != k.size(2) || k.size(3) != q.size(3))
    return false;
  // Grouped-query attention only when asked for (otherwise the math path
  // broadcasts or reports the mismatch, as on CPU).
  if (q.size(1) != k.size(1) && !(enable_gqa && q.size(1) % k.size(1) == 0)) return false;
  if (mask && mask->defined()) {
    if (!mask->is_privateuseone() || mask->dim() > 4) return false;
    const int64_t full[4] = {q.size(0), q.size(1), q.size(2), k.size(2)};
    for (int64_t i = 0; i < mask->dim(); ++i) {
      int64_t s = mask->size(i), f = full[4 - mask->dim() + i];
      if (s != 1 && s != f) return false;
    }
  }
  return true;
}

int64_t fused_sdp_choice(const at::Tensor& query, const at::Tensor& key, const at::Tensor& value,
                         const std::optional<at::Tensor>& attn_mask, double dropout_p,
                         bool is_causal, std::optional<double> scale, bool enable_gqa) {
  auto& ctx = at::globalContext();
  if (ctx.userEnabledOverrideableSDP() &&
      fusable(query, key, value, attn_mask, dropout_p, enable_gqa))
    return static_cast<int64_t>(at::SDPBackend::overrideable);
  if (ctx.userEnabledMathSDP()) return static_cast<int64_t>(at::SDPBackend::math);
  return static_cast<int64_t>(at::SDPBackend::error);  // "No viable backend ..."
}

struct Results {
  c10::DeviceIndex device = 0;
  std::vector<at::Tensor> out;
};

tpu_status_t prepare(void* user, int count, const tpu_result_type_t* types,
                     tpu_view_t* targets) noexcept {
  auto* r = static_cast<Results*>(user);
  try {
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

tpu_arg_t arg_of(tpu_arg_kind_t kind) {
  tpu_arg_t a;
  std::memset(&a, 0, sizeof a);
  a.kind = kind;
  return a;
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, c10::SymInt, c10::SymInt, at::Tensor,
           at::Tensor, at::Tensor>
sdpa_overrideable(const at::Tensor& query, const at::Tensor& key, const at::Tensor& value,
                  const std::optional<at::Tensor>& attn_bias, double dropout_p, bool is_causal,
                  bool return_debug_mask, std::optional<double> scale) {
  static const int row = tpu_op_lookup("sdpa");
  TORCH_CHECK(row >= 0, "tpu: the op table has no row 'sdpa'");
  const at::Tensor* tensors[4] = {&query, &key, &value,
                                  attn_bias && attn_bias->defined() ? &*attn_bias : nullptr};
  tpu_view_t views[4];
  std::vector<tpu_arg_t> args;
  for (int i = 0; i < 4; ++i) {
    if (!tensors[i]) {
      args.push_back(arg_of(TPU_ARG_NONE));
      continue;
    }
    TORCH_CHECK(tensors[i]->is_privateuseone(),
                "Expected all tensors to be on the same device, but found at least two "
                "devices, tpu:0 and ", tensors[i]->device(), "!");
    views[i] = view_of(*tensors[i]);
    args.push_back(arg_of(TPU_ARG_TENSOR));
    args.back().tensor = &views[i];
  }
  args.push_back(arg_of(TPU_ARG_FLOAT));
  args.back().f = dropout_p;
  args.push_back(arg_of(TPU_ARG_BOOL));
  args.back().b = is_causal;
  args.push_back(arg_of(TPU_ARG_BOOL));
  args.back().b = return_debug_mask;
  args.push_back(arg_of(scale ? TPU_ARG_FLOAT : TPU_ARG_NONE));
  if (scale) args.back().f = *scale;
  Results r;
  r.device = query.device().index();
  tpu_call_t c{row, r.device, args.data(), static_cast<int>(args.size()), TPU_WRITE_NEW,
               nullptr, 0, &prepare, &r};
  check(tpu_op_call(&c));
  TORCH_CHECK(r.out.size() == 2, "tpu: sdpa made ", r.out.size(), " results");
  // (no variable-length batches, no dropout RNG state, no debug mask)
  return {r.out[0], r.out[1], at::Tensor(), at::Tensor(), c10::SymInt(query.size(2)),
          c10::SymInt(key.size(2)), at::Tensor(), at::Tensor(), at::Tensor()};
}

}  // namespace
}  // namespace torchtpu

namespace at::native {
REGISTER_PRIVATEUSE1_DISPATCH(_fused_sdp_choice_stub, &torchtpu::fused_sdp_choice);
}  // namespace at::native

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_fused_sdp_choice", TORCH_FN(torchtpu::fused_sdp_choice));
  m.impl("_scaled_dot_product_fused_attention_overrideable",
         TORCH_FN(torchtpu::sdpa_overrideable));
}
