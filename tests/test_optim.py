"""PyTorch's optimizers, gradient clipping and AMP grad scaling on tpu, against
the same training on CPU; no optimizer step (single-tensor, foreach or fused
path) runs a CPU fallback."""
import copy
import math
import sys
import types
import unittest

import pytest
import torch
from torch.optim.optimizer import _default_to_fused_or_foreach
from torch.utils._foreach_utils import _get_foreach_kernels_supported_devices

import torchtpu
from conftest import fallbacks

O = torch.optim
STEPS = 4


@pytest.fixture(autouse=True)
def strict():
    with torchtpu.mode("strict"):
        yield


def mlp(layers=2, bias=True):
    torch.manual_seed(0)
    mods = []
    for i in range(layers):
        mods += [torch.nn.Linear(4 if i == 0 else 8, 8 if i < layers - 1 else 3, bias=bias),
                 torch.nn.Tanh()]
    return torch.nn.Sequential(*mods[:-1])


X = torch.randn(6, 4, generator=torch.Generator().manual_seed(1))


class Step:
    """Runs a block and records its new CPU fallbacks and executions."""

    def __enter__(self):
        self.fb0, self.ex0 = fallbacks(), torchtpu.metrics()["executions"]
        return self

    def __exit__(self, *exc):
        fb = fallbacks()
        self.fallbacks = {k for k, v in fb.items() if v != self.fb0.get(k, 0)}
        self.executions = torchtpu.metrics()["executions"] - self.ex0
        return False


def train(device, make_opt, model, steps=STEPS, scaler=None, inf_at=(), clip=None,
          closure=False, dtype=torch.float32):
    """Trains a copy of `model` on `device`; returns the parameters after each
    step, the scales, and what each optimizer step ran. With `closure`, the
    step gets one that recomputes the loss (LBFGS calls it several times)."""
    m = copy.deepcopy(model).to(device, dtype)
    opt = make_opt(m.parameters())
    x = X.to(device, dtype)
    params, scales, records = [], [], []

    def loss_and_grad():
        opt.zero_grad()
        loss = (m(x) ** 2).mean()
        (scaler.scale(loss) if scaler else loss).backward()
        return loss

    for k in range(steps):
        loss_and_grad()
        if k in inf_at:
            with torch.no_grad():
                next(m.parameters()).grad.view(-1)[1] = math.inf
        torch.tpu.synchronize()
        with Step() as rec:
            if clip is not None:
                if scaler:
                    scaler.unscale_(opt)
                clip(m.parameters())
            if scaler:
                scaler.step(opt)
                scaler.update()
            else:
                opt.step(loss_and_grad) if closure else opt.step()
            torch.tpu.synchronize()
        records.append(rec)
        params.append([p.detach().cpu().clone() for p in m.parameters()])
        if scaler:
            scales.append(scaler.get_scale())
    return params, scales, records


def assert_params_close(cpu, tpu, rtol=1e-4, atol=1e-5):
    for k, (c, t) in enumerate(zip(cpu, tpu)):
        for a, b in zip(c, t):
            torch.testing.assert_close(b, a, rtol=rtol, atol=atol, msg=lambda m: f"step {k}: {m}")


def assert_no_further(ref, cpu, tpu, slack=2.0):
    """tpu's float32 run is no further from `ref` (float64) than `slack`
    times CPU's float32 run, step by step."""
    for k, (r, c, t) in enumerate(zip(ref, cpu, tpu)):
        err = [max((a.double() - b).abs().max().item() for a, b in zip(x, r)) for x in (c, t)]
        assert err[1] <= slack * err[0] + 1e-6, f"step {k}: tpu {err[1]:.3g} from float64, CPU {err[0]:.3g}"


def assert_no_fallback(records):
    for k, rec in enumerate(records):
        assert not rec.fallbacks, f"step {k}: CPU fallbacks {rec.fallbacks}"


#===--- which implementation PyTorch picks ---===#

def test_default_implementation_is_foreach():
    assert "tpu" in _get_foreach_kernels_supported_devices()
    params = list(mlp().to("tpu").parameters())
    assert _default_to_fused_or_foreach(params, differentiable=False, use_fused=False) == (False, True)
    assert _default_to_fused_or_foreach(params, differentiable=False, use_fused=True) == (True, False)


#===--- optimizers ---===#

CONFIGS = {
    "sgd": lambda fe: lambda p: O.SGD(p, lr=0.05, foreach=fe),
    "sgd_momentum_wd": lambda fe: lambda p: O.SGD(p, lr=0.05, momentum=0.9, weight_decay=0.01, foreach=fe),
    "sgd_nesterov": lambda fe: lambda p: O.SGD(p, lr=0.05, momentum=0.9, nesterov=True,
                                               dampening=0, weight_decay=0.1, foreach=fe),
    "adam": lambda fe: lambda p: O.Adam(p, lr=0.01, foreach=fe),
    "adam_wd": lambda fe: lambda p: O.Adam(p, lr=0.01, weight_decay=0.01, betas=(0.8, 0.9), foreach=fe),
    "adamw": lambda fe: lambda p: O.AdamW(p, lr=0.01, weight_decay=0.1, foreach=fe),
    "adamw_amsgrad": lambda fe: lambda p: O.AdamW(p, lr=0.01, amsgrad=True, foreach=fe),
    "adam_maximize": lambda fe: lambda p: O.Adam(p, lr=0.01, maximize=True, foreach=fe),
}


@pytest.mark.parametrize("foreach", [True, None], ids=["foreach", "default"])
@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_foreach_optimizer(name, foreach):
    model = mlp()
    make = CONFIGS[name](foreach)
    cpu, _, _ = train("cpu", make, model)
    tpu, _, records = train("tpu", make, model)
    assert_params_close(cpu, tpu)
    assert_no_fallback(records)


@pytest.mark.parametrize("name", ["sgd_momentum_wd", "adam_wd", "adamw_amsgrad"])
def test_single_tensor_optimizer(name):
    # foreach=False: per-parameter elementwise ops (lerp, addcmul, addcdiv).
    model = mlp()
    make = CONFIGS[name](False)
    cpu, _, _ = train("cpu", make, model)
    tpu, _, records = train("tpu", make, model)
    assert_params_close(cpu, tpu)
    assert_no_fallback(records)


FUSED = {
    "adam": lambda p: O.Adam(p, lr=0.01, weight_decay=0.01, fused=True),
    "adamw_amsgrad": lambda p: O.AdamW(p, lr=0.01, weight_decay=0.1, amsgrad=True, fused=True),
    "adam_maximize": lambda p: O.Adam(p, lr=0.01, maximize=True, fused=True),
    "sgd_momentum": lambda p: O.SGD(p, lr=0.05, momentum=0.9, weight_decay=0.01, fused=True),
    "sgd_nesterov": lambda p: O.SGD(p, lr=0.05, momentum=0.9, nesterov=True, fused=True),
    "sgd": lambda p: O.SGD(p, lr=0.05, fused=True),
    "adam_tensor_lr": lambda p: O.Adam(p, lr=torch.tensor(0.01), fused=True),
    # _fused_adagrad_ (PyTorch has it for CPU only) ran on the CPU fallback.
    "adagrad": lambda p: O.Adagrad(p, lr=0.05, lr_decay=0.01, weight_decay=0.01, fused=True),
    "adagrad_tensor_lr": lambda p: O.Adagrad(p, lr=torch.tensor(0.05), maximize=True,
                                             initial_accumulator_value=0.1, fused=True),
}


@pytest.mark.parametrize("name", sorted(FUSED))
def test_fused_optimizer(name):
    model = mlp()
    cpu, _, _ = train("cpu", FUSED[name], model)
    tpu, _, records = train("tpu", FUSED[name], model)
    assert_params_close(cpu, tpu)
    assert_no_fallback(records)
    # One program for the whole step (plus the step counters' increment).
    assert all(r.executions <= 2 for r in records[1:]), [r.executions for r in records]


@pytest.mark.parametrize("name", ["adam", "sgd_momentum_wd"])
def test_step_programs_do_not_grow_with_parameters(name):
    # One executable per foreach call: a model with twice the parameters
    # takes as many executions per step.
    make = CONFIGS[name](None)
    counts = []
    for layers in (2, 4):
        _, _, records = train("tpu", make, mlp(layers), steps=3)
        counts.append([r.executions for r in records[1:]])
    assert counts[0] == counts[1], counts
    assert max(counts[0]) <= 12, counts


#===--- gradient clipping ---===#

@pytest.mark.parametrize("norm_type", [2.0, 1.0, math.inf])
def test_clip_grad_norm(norm_type):
    model = mlp()
    norms = {}

    def clip_on(device):
        def clip(params):
            norms.setdefault(device, []).append(
                torch.nn.utils.clip_grad_norm_(params, 0.05, norm_type=norm_type, foreach=True).cpu())
        return clip
    make = CONFIGS["sgd"](True)
    cpu, _, _ = train("cpu", make, model, clip=clip_on("cpu"))
    tpu, _, records = train("tpu", make, model, clip=clip_on("tpu"))
    torch.testing.assert_close(torch.stack(norms["tpu"]), torch.stack(norms["cpu"]), rtol=1e-4, atol=1e-6)
    assert_params_close(cpu, tpu)
    assert_no_fallback(records)


#===--- AMP grad scaling ---===#

@pytest.mark.parametrize("opt", ["sgd_momentum_wd", "adam", "fused_adam", "fused_adagrad"])
def test_grad_scaler(opt):
    make = FUSED[opt[6:]] if opt.startswith("fused_") else CONFIGS[opt](None)
    model = mlp()
    kw = dict(init_scale=2.0 ** 12, growth_factor=2.0, backoff_factor=0.25, growth_interval=2)
    steps, inf_at = 6, (1, 4)
    cpu, cpu_scales, _ = train("cpu", make, model, steps=steps,
                               scaler=torch.amp.GradScaler("cpu", **kw), inf_at=inf_at)
    tpu, tpu_scales, records = train("tpu", make, model, steps=steps,
                                     scaler=torch.amp.GradScaler("tpu", **kw), inf_at=inf_at)
    assert tpu_scales == cpu_scales
    assert cpu_scales == [2.0 ** 12, 2.0 ** 10, 2.0 ** 10, 2.0 ** 11, 2.0 ** 9, 2.0 ** 9]
    for k in inf_at:  # the step was skipped
        for a, b in zip(tpu[k], tpu[k - 1]):
            assert torch.equal(a, b)
    assert_params_close(cpu, tpu)
    assert_no_fallback(records)


def test_grad_scaler_with_clipping():
    model = mlp()
    make = CONFIGS["adamw"](None)
    kw = dict(init_scale=2.0 ** 8, growth_interval=1)

    def clip(params):
        torch.nn.utils.clip_grad_norm_(params, 0.1, foreach=True)
    cpu, cpu_scales, _ = train("cpu", make, model, scaler=torch.amp.GradScaler("cpu", **kw),
                               inf_at=(2,), clip=clip)
    tpu, tpu_scales, _ = train("tpu", make, model, scaler=torch.amp.GradScaler("tpu", **kw),
                               inf_at=(2,), clip=clip)
    assert tpu_scales == cpu_scales
    assert_params_close(cpu, tpu)


# The other optimizers' foreach paths (capturable ones keep their step
# counters on the device and compute the bias corrections there).
OTHERS = {
    "adagrad": lambda p, **kw: O.Adagrad(p, lr=0.05, **kw),
    "adadelta": lambda p, **kw: O.Adadelta(p, **kw),
    "adamax": lambda p, **kw: O.Adamax(p, lr=0.01, **kw),
    "nadam": lambda p, **kw: O.NAdam(p, lr=0.01, **kw),
    "radam": lambda p, **kw: O.RAdam(p, lr=0.01, **kw),
    "rmsprop": lambda p, **kw: O.RMSprop(p, lr=0.01, momentum=0.5, centered=True, **kw),
    "rprop": lambda p, **kw: O.Rprop(p, lr=0.01, **kw),
    "asgd": lambda p, **kw: O.ASGD(p, lr=0.01, **kw),
    "adam_capturable": lambda p, **kw: O.Adam(p, lr=0.01, **kw),
    "adamw_amsgrad_capturable": lambda p, **kw: O.AdamW(p, lr=0.01, amsgrad=True, **kw),
    "nadam_capturable": lambda p, **kw: O.NAdam(p, lr=0.01, **kw),
    "radam_capturable": lambda p, **kw: O.RAdam(p, lr=0.01, **kw),
}


@pytest.mark.parametrize("name", sorted(OTHERS))
def test_other_foreach_optimizers(name):
    make = OTHERS[name]
    tpu_kw = {"capturable": True} if name.endswith("capturable") else {}  # CPU has no capturable
    cpu, _, _ = train("cpu", lambda p: make(p, foreach=True), mlp(), steps=3)
    tpu, _, records = train("tpu", lambda p: make(p, foreach=True, **tpu_kw), mlp(), steps=3)
    assert_params_close(cpu, tpu)
    assert_no_fallback(records)


def optimizer_configs():
    """Every optimizer configuration of PyTorch's own optimizer tests (its
    OptimizerInfo database: weight decay, maximize, amsgrad, tensor learning
    rates, foreach on and off, ...)."""
    if "expecttest" not in sys.modules:  # imported by the database, not installed
        sys.modules["expecttest"] = types.ModuleType("expecttest")
        sys.modules["expecttest"].TestCase = unittest.TestCase
    from torch.testing._internal.common_optimizers import optim_db

    sparse = pytest.mark.skip(reason="SparseAdam needs sparse gradients; tpu has no sparse "
                                     "tensors yet (README)")
    for info in optim_db:
        for config in info.optim_inputs_func(device="cpu"):
            yield pytest.param(info, config.kwargs,
                               id=f"{info.optim_cls.__name__}-{config.desc}",
                               marks=[sparse] if info.optim_cls is O.SparseAdam else [])


@pytest.mark.parametrize("info, kwargs", optimizer_configs())
def test_optimizer_database(info, kwargs):
    def make(params):
        return info.optim_cls(params, **kwargs)

    closure = info.step_requires_closure
    model = mlp(bias=info.optim_cls is not O.Muon)  # Muon takes matrices only
    cpu, _, _ = train("cpu", make, model, steps=3, closure=closure)
    tpu, _, records = train("tpu", make, model, steps=3, closure=closure)
    try:
        assert_params_close(cpu, tpu, atol=1e-4)
    except AssertionError:
        # Some configurations amplify rounding (LBFGS's line search): then
        # tpu must be no further from a float64 run than CPU's float32 is.
        ref, _, _ = train("cpu", make, model, steps=3, closure=closure, dtype=torch.float64)
        assert_no_further(ref, cpu, tpu)
    assert_no_fallback(records)


def test_zero_grad_keeps_tensors():
    m = mlp().to("tpu")
    opt = O.SGD(m.parameters(), lr=0.1, foreach=True)  # zero_grad uses foreach then
    (m(X.to("tpu")) ** 2).mean().backward()
    grads = [p.grad for p in m.parameters()]
    torch.tpu.synchronize()
    with Step() as rec:
        opt.zero_grad(set_to_none=False)  # _foreach_zero_
        torch.tpu.synchronize()
    assert not rec.fallbacks and rec.executions == 1
    for p, g in zip(m.parameters(), grads):
        assert p.grad is g and not p.grad.cpu().any()
