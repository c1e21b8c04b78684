// torch.autocast("tpu"): the same casting policy as CUDA, using the op lists
// PyTorch publishes for backends to reuse (ATen/autocast_mode.h).
#include <ATen/autocast_mode.h>
#include <torch/library.h>
#include <torch/version.h>

namespace {

using at::IntArrayRef;
using at::Scalar;
using at::ScalarType;
using at::Tensor;
using namespace at::autocast;
#if TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR < 13
using at::DimnameList;  // named unqualified in the op lists of torch < 2.13
#endif

#define TPU_LOWER_PRECISION(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, lower_precision_fp)
#define TPU_FP32(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, fp32)
#define TPU_FP32_SET_OPT_DTYPE(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, fp32_set_opt_dtype)
#define TPU_PROMOTE(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, promote)
#define TPU_DIFFERENT_REDISPATCH(FUNC, NAME, SIG, REDISPATCH_SIG, POLICY) \
  KERNEL_DIFFERENT_REDISPATCH_SIGNATURE_PRIVATEUSEONE(FUNC, NAME, SIG, REDISPATCH_SIG, POLICY)

// As on CUDA: binary cross entropy is refused under autocast (its float16
// log of a probability is unsafe), pointing at the logits form.
Tensor binary_cross_entropy_banned(const Tensor&, const Tensor&, const std::optional<Tensor>&,
                                   int64_t) {
  TORCH_CHECK(false,
              "torch.nn.functional.binary_cross_entropy and torch.nn.BCELoss are unsafe to "
              "autocast.\nMany models use a sigmoid layer right before the binary cross entropy "
              "layer.\nIn this case, combine the two layers using "
              "torch.nn.functional.binary_cross_entropy_with_logits\nor torch.nn.BCEWithLogitsLoss."
              "  binary_cross_entropy_with_logits and BCEWithLogits are\nsafe to autocast.");
}

TORCH_LIBRARY_IMPL(_, AutocastPrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFallthrough());
}

TORCH_LIBRARY_IMPL(aten, AutocastPrivateUse1, m) {
  AT_FORALL_LOWER_PRECISION_FP(TPU_LOWER_PRECISION)
  AT_FORALL_FP32(TPU_FP32)
  AT_FORALL_FP32_SET_OPT_DTYPE(TPU_FP32_SET_OPT_DTYPE)
  AT_FORALL_DIFFERENT_REDISPATCH_SIGNATURE(TPU_DIFFERENT_REDISPATCH)
  AT_FORALL_PROMOTE(TPU_PROMOTE)
  m.impl(TORCH_SELECTIVE_NAME("aten::binary_cross_entropy"),
         TORCH_FN((&binary_cross_entropy_banned)));
}

}  // namespace
