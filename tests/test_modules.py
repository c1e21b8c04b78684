"""Every nn.Module in PyTorch's ModuleInfo database (its own module tests'
inputs) on tpu against CPU, with no CPU fallback unless listed: in training
mode, outputs and the gradients of the inputs and parameters; in eval mode
without grad (where some modules take PyTorch's inference fast paths),
outputs."""
import copy
import sys
import types
import unittest

import pytest
import torch

from conftest import TPU, assert_same, fallbacks

# The database imports expecttest (a PyTorch test dependency that is not
# installed); only its TestCase base class is needed.
if "expecttest" not in sys.modules:
    sys.modules["expecttest"] = types.ModuleType("expecttest")
    sys.modules["expecttest"].TestCase = unittest.TestCase
from torch.testing._internal.common_modules import module_db  # noqa: E402

# Counted CPU fallbacks (not lowered yet; README, "What does not work yet").
FALLBACK = {"nn.CTCLoss": {"aten::_ctc_loss", "aten::_ctc_loss_backward"}}
# Outputs drawn from the device's random numbers: shapes and gradients'
# presence are compared, not values.
RANDOM = {"nn.Dropout", "nn.Dropout1d", "nn.Dropout2d", "nn.Dropout3d", "nn.AlphaDropout",
          "nn.FeatureAlphaDropout", "nn.RReLU"}
TOL = dict(atol=1e-4, rtol=1e-3)


def moved(x, device):
    if isinstance(x, torch.Tensor):
        t = x.detach().to(device)
        return t.requires_grad_(x.requires_grad)
    if isinstance(x, (list, tuple)):
        return type(x)(moved(v, device) for v in x)
    if isinstance(x, dict):
        return {k: moved(v, device) for k, v in x.items()}
    return x


def tensors(x):
    if isinstance(x, torch.Tensor):
        return [x]
    if isinstance(x, (list, tuple)):
        return [t for v in x for t in tensors(v)]
    if isinstance(x, dict):
        return [t for v in x.values() for t in tensors(v)]
    return []


def run(module, args, kwargs, device):
    """Forward and backward (the sum of every output that requires grad):
    the outputs and the gradients of the inputs and parameters."""
    args, kwargs = moved(args, device), moved(kwargs, device)
    outs = tensors(module(*args, **kwargs))
    diff = [o for o in outs if o.requires_grad]
    if diff:
        sum(o.float().sum() for o in diff).backward()
    leaves = [t for t in tensors((args, kwargs)) if t.requires_grad]
    return ([o.detach() for o in outs], [t.grad for t in leaves],
            [p.grad for p in module.parameters()])


@pytest.mark.parametrize("training", [True, False], ids=["train", "eval"])
@pytest.mark.parametrize("info", module_db, ids=lambda i: i.name)
def test_module_matches_cpu(info, training):
    samples = info.module_inputs_func(info, device="cpu", dtype=torch.float32,
                                      requires_grad=training, training=training)
    samples = [s for s in samples if s.forward_input is not None][:4]
    assert samples, "no inputs"
    for sample in samples:
        torch.manual_seed(0)
        c = sample.constructor_input
        module = info.module_cls(*c.args, **c.kwargs).to(torch.float32).train(training)
        fwd = sample.forward_input
        if any(isinstance(p, torch.nn.parameter.UninitializedParameter)
               for p in module.parameters()):
            # A lazy module draws its parameters at its first call: draw them
            # on the CPU, then both sides start from the same ones.
            module(*moved(fwd.args, "cpu"), **moved(fwd.kwargs, "cpu"))
        tpu_module = copy.deepcopy(module).to(TPU)
        with torch.set_grad_enabled(training):
            expected = run(module, fwd.args, fwd.kwargs, "cpu")
            before = fallbacks()
            actual = run(tpu_module, fwd.args, fwd.kwargs, TPU)
            torch.tpu.synchronize()
        new = {k for k, v in fallbacks().items() if v != before.get(k, 0)}
        assert new <= FALLBACK.get(info.name, set()), f"CPU fallbacks: {new}"
        if info.name in RANDOM:
            for e, a in zip(expected, actual):
                assert [None if t is None else t.shape for t in e] == \
                       [None if t is None else t.shape for t in a]
            continue
        assert_same(expected, actual, **TOL)
