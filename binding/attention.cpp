// F.scaled_dot_product_attention on tpu.
//
// PyTorch asks each device's _fused_sdp_choice stub which kernel to run.
// Without an answer it decomposes attention into about ten ops (scale,
// matmul, mask add, _safe_softmax, matmul) that autograd differentiates one
// by one. Here 4-D attention without dropout goes to
// _scaled_dot_product_fused_attention_overrideable, whose kernel runs the
// op table's `sdpa` row (one program, runtime/src/lower/lower_attention.c);
// its autograd formula calls ..._overrideable_backward, the `sdpa_backward`
// row. Both kernels lay their results out as PyTorch's meta kernels do.
// Dropout and other ranks keep PyTorch's math path (whose ops are lowered
// too). The kernels live here because the forward's schema returns two
// SymInts, which the generic row kernel does not produce, and because their
// results' layout follows the inputs'. Also here: the kernels of
// nn.MultiheadAttention's and nn.TransformerEncoder's inference fast path.
#include <ATen/ATen.h>
#include <ATen/Context.h>
#include <ATen/SDPBackend.h>
#include <c10/core/impl/LocalDispatchKeySet.h>
#include <ATen/native/DispatchStub.h>
#include <ATen/native/transformers/attention.h>
#include <ATen/ops/_native_multi_head_attention_native.h>
#include <ATen/ops/_transformer_encoder_layer_fwd_native.h>
#include <torch/library.h>

#include <array>
#include <optional>
#include <tuple>
#include <vector>

#include "binding.h"
#include "row_call.h"

namespace torchtpu {
namespace {

// Sizes are read as SymInts: under torch.compile with dynamic shapes the
// choice sees fake tensors whose sizes are symbolic (their comparisons
// become guards).
bool fusable(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
             const std::optional<at::Tensor>& mask, double dropout_p, bool enable_gqa) {
  if (dropout_p != 0.0) return false;
  for (const at::Tensor* t : {&q, &k, &v})
    if (!t->is_privateuseone() || t->is_nested() || t->dim() != 4 || t->sym_numel() == 0 ||
        t->scalar_type() != q.scalar_type() || !at::isFloatingType(t->scalar_type()))
      return false;
  if (k.sym_size(0) != q.sym_size(0) || v.sym_size(0) != q.sym_size(0) ||
      v.sym_size(1) != k.sym_size(1) || v.sym_size(2) != k.sym_size(2) ||
      k.sym_size(3) != q.sym_size(3))
    return false;
  // Grouped-query attention only when asked for (otherwise the math path
  // broadcasts or reports the mismatch, as on CPU).
  if (q.sym_size(1) != k.sym_size(1) && !(enable_gqa && q.sym_size(1) % k.sym_size(1) == 0))
    return false;
  if (mask && mask->defined()) {
    if (!mask->is_privateuseone() || mask->dim() > 4) return false;
    const c10::SymInt full[4] = {q.sym_size(0), q.sym_size(1), q.sym_size(2), k.sym_size(2)};
    for (int64_t i = 0; i < mask->dim(); ++i) {
      c10::SymInt s = mask->sym_size(i);
      if (s != 1 && s != full[4 - mask->dim() + i]) return false;
    }
  }
  return true;
}

// Under a torch.func transform (vmap, jvp, ...) or torch.autograd.forward_ad:
// the fused kernel has neither a batching rule nor a forward formula (CUDA's
// kernels have batching rules), the math path's ops have both. (torch.func
// keeps which transforms are active in a header PyTorch does not ship
// whole, so grad alone takes the math path too.)
bool transformed(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v) {
  using c10::impl::tls_is_dispatch_key_included;
  if (tls_is_dispatch_key_included(c10::DispatchKey::FuncTorchDynamicLayerFrontMode) ||
      tls_is_dispatch_key_included(c10::DispatchKey::FuncTorchDynamicLayerBackMode))
    return true;
  for (const at::Tensor* t : {&q, &k, &v})
    if (t->_fw_grad(/*level=*/0).defined()) return true;
  return false;
}

int64_t fused_sdp_choice(const at::Tensor& query, const at::Tensor& key, const at::Tensor& value,
                         const std::optional<at::Tensor>& attn_mask, double dropout_p,
                         bool is_causal, std::optional<double> scale, bool enable_gqa) {
  auto& ctx = at::globalContext();
  if (ctx.userEnabledOverrideableSDP() && !transformed(query, key, value) &&
      fusable(query, key, value, attn_mask, dropout_p, enable_gqa))
    return static_cast<int64_t>(at::SDPBackend::overrideable);
  if (ctx.userEnabledMathSDP()) return static_cast<int64_t>(at::SDPBackend::math);
  return static_cast<int64_t>(at::SDPBackend::error);  // "No viable backend ..."
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, c10::SymInt, c10::SymInt, at::Tensor,
           at::Tensor, at::Tensor>
sdpa_overrideable(const at::Tensor& query, const at::Tensor& key, const at::Tensor& value,
                  const std::optional<at::Tensor>& attn_bias, double dropout_p, bool is_causal,
                  bool return_debug_mask, std::optional<double> scale) {
  static const int row = row_id("sdpa");
  for (const at::Tensor* t : {&query, &key, &value, attn_bias ? &*attn_bias : nullptr})
    if (t && t->defined() && !t->is_privateuseone())
      mixed_devices(*t, query.is_privateuseone() ? query.device().index() : -1);
  std::vector<at::Tensor> out = RowCall(row, query.device().index())
                                    .tensor(query)
                                    .tensor(key)
                                    .tensor(value)
                                    .optional_tensor(attn_bias)
                                    .real(dropout_p)
                                    .boolean(is_causal)
                                    .boolean(return_debug_mask)
                                    .optional_real(scale)
                                    .result_like(query)
                                    .run();
  TORCH_CHECK(out.size() == 2, "tpu: sdpa made ", out.size(), " results");
  // No variable-length batches, no debug mask. The dropout RNG's seed and
  // offset are 0-d tensors, as the meta kernel says (a compiled graph saves
  // them for the backward), on the CPU as CUDA's flash attention keeps them;
  // without dropout nothing reads them.
  at::Tensor seed = at::zeros({}, at::kLong), offset = at::zeros({}, at::kLong);
  return {out[0], out[1], at::Tensor(), at::Tensor(), c10::SymInt(query.size(2)),
          c10::SymInt(key.size(2)), seed, offset, at::Tensor()};
}

// The gradients are laid out as the meta kernel lays them out (like the
// inputs), which compiled graphs count on: a traced backward views them.
std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> sdpa_overrideable_backward(
    const at::Tensor& grad_out, const at::Tensor& query, const at::Tensor& key,
    const at::Tensor& value, const at::Tensor& attn_bias, std::array<bool, 4> grad_input_mask,
    const at::Tensor& out, const at::Tensor& logsumexp, const at::Tensor& /*cum_seq_q*/,
    const at::Tensor& /*cum_seq_k*/, c10::SymInt max_q, c10::SymInt max_k, double dropout_p,
    bool is_causal, const at::Tensor& /*philox_seed*/, const at::Tensor& /*philox_offset*/,
    std::optional<double> scale) {
  static const int row = row_id("sdpa_backward");
  // No gradient reached the output (autograd passes an undefined one): none
  // for the inputs, as PyTorch's other attention backwards answer.
  if (!grad_out.defined()) return {};
  std::vector<at::Tensor> g = RowCall(row, query.device().index())
                                  .tensor(grad_out)
                                  .tensor(query)
                                  .tensor(key)
                                  .tensor(value)
                                  .optional_tensor(attn_bias)
                                  .booleans(grad_input_mask)
                                  .tensor(out)
                                  .tensor(logsumexp)
                                  .optional_tensor(std::nullopt)  // cum_seq_q: unused
                                  .optional_tensor(std::nullopt)  // cum_seq_k
                                  .integer(max_q.guard_int(__FILE__, __LINE__))
                                  .integer(max_k.guard_int(__FILE__, __LINE__))
                                  .real(dropout_p)
                                  .boolean(is_causal)
                                  .optional_tensor(std::nullopt)  // the seed: no dropout
                                  .optional_tensor(std::nullopt)  // the offset
                                  .optional_real(scale)
                                  .result_like(query)
                                  .result_like(key)
                                  .result_like(value)
                                  .result_like(attn_bias)
                                  .run();
  TORCH_CHECK(g.size() == 4, "tpu: sdpa_backward made ", g.size(), " results");
  return {g[0], g[1], g[2], g[3]};
}

// tpu has no nested tensors. nn.TransformerEncoder asks for one in eval
// mode without grad when given a src_key_padding_mask (its fast path packs
// the unpadded tokens); the CPU fallback would build a CPU nested tensor
// that cannot come back. Say what to do instead.
at::Tensor nested_tensor_from_mask(const at::Tensor&, const at::Tensor&, bool) {
  TORCH_CHECK_NOT_IMPLEMENTED(
      false, "tpu has no nested tensors, which nn.TransformerEncoder's fast path uses for a "
             "src_key_padding_mask in eval mode: construct the encoder with "
             "enable_nested_tensor=False (the result is the same but for the padded positions, "
             "which the fast path sets to 0)");
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
  m.impl("_scaled_dot_product_fused_attention_overrideable_backward",
         TORCH_FN(torchtpu::sdpa_overrideable_backward));
  m.impl("_nested_tensor_from_mask", TORCH_FN(torchtpu::nested_tensor_from_mask));
  // PyTorch's inference fast path (nn.MultiheadAttention and
  // nn.TransformerEncoderLayer in eval mode without grad, which PyTorch
  // takes on tpu): its CPU kernels are compositions of ATen ops that
  // dispatch to ours (_transform_bias_rescale_qkv, _masked_softmax,
  // _addmm_activation, bmm, ... all lowered), so they serve as they are.
  m.impl("_native_multi_head_attention", TORCH_FN(at::native::native_multi_head_attention_cpu));
  m.impl("_transformer_encoder_layer_fwd", TORCH_FN(at::native::transformer_encoder_layer_forward));
}
