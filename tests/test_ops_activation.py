"""Activations and their backward ops against CPU: torch.nn.functional
forward and autograd, the ATen backward ops called directly, in-place and
out= forms, integer inputs, and errors.

Each check runs a group of ops; ops are compiled one program each, so the
groups stay small per dtype.
"""
import math

import pytest
import torch
import torch.nn.functional as F

import torchtpu
from conftest import NoFallback, check, check_error, check_ops

FLOATS = [torch.float32, torch.bfloat16, torch.float16]
aten = torch.ops.aten


def inputs(dtype, n=150, seed=0, special=True):
    """Boundary values of the activations (0, ±3, ±1, the default softplus
    threshold), NaN, then random values."""
    g = torch.Generator().manual_seed(seed)
    sp = [0.0, -0.0, 1.0, -1.0, 3.0, -3.0, 2.5, -2.5, 20.0, -20.0, 0.3, -7.0, math.nan]
    x = torch.randn(n, generator=g) * 4
    if special:
        x = torch.cat([torch.tensor(sp), x])
    return x.to(dtype)


# Small absolute differences come from XLA's erf / tanh / expm1 in their
# saturating tails (values around 1e-7).
ATOL = 2e-5
# torch.testing's default rtol per dtype.
RTOL = {torch.float16: 1e-3, torch.bfloat16: 1.6e-2, torch.float32: 1.3e-6,
        torch.float64: 1e-7}


def tols(dtype):
    """(atol, rtol): ATOL with the dtype's default rtol (None, None for
    exact dtypes)."""
    if dtype not in RTOL:
        return None, None
    return ATOL, RTOL[dtype]


FORWARD = {
    "relu": F.relu, "relu6": F.relu6, "threshold": lambda x: F.threshold(x, 0.3, -2.5),
    "gelu": F.gelu, "gelu_tanh": lambda x: F.gelu(x, approximate="tanh"),
    "silu": F.silu, "mish": F.mish, "leaky_relu": lambda x: F.leaky_relu(x, 0.13),
    "elu": lambda x: F.elu(x, 1.3), "selu": F.selu, "celu": lambda x: F.celu(x, 0.7),
    "softplus": F.softplus, "softplus_beta": lambda x: F.softplus(x, 1.5, 5.0),
    "hardtanh": lambda x: F.hardtanh(x, -2.0, 2.5), "hardswish": F.hardswish,
    "hardsigmoid": F.hardsigmoid, "logsigmoid": F.logsigmoid,
    "log_sigmoid_forward": lambda x: list(aten.log_sigmoid_forward(x)),
    "glu": lambda x: F.glu(x[:-1].reshape(-1, 2)),  # even sizes: drop the NaN
    "glu0": lambda x: F.glu(x[:-1].reshape(2, -1), 0),
    "sigmoid": torch.sigmoid, "tanh": torch.tanh,
}


@pytest.mark.parametrize("dtype", FLOATS + [torch.float64], ids=str)
def test_forward(dtype):
    check_ops(FORWARD, inputs(dtype), tolerance=tols)


def test_forward_infinities():
    # gelu(±inf) differs on CPU between its vector and scalar loops, so
    # infinities are checked on the others only.
    x = torch.tensor([math.inf, -math.inf, 1e30, -1e30, 90.0, -90.0])
    check_ops({k: v for k, v in FORWARD.items() if not k.startswith(("gelu", "glu"))}, x,
              tolerance=tols)


# The backward ATen ops, called directly with various parameters.
BACKWARD_OPS = {
    "threshold_backward": lambda g, x, y: aten.threshold_backward(g, x, 0.3),
    "relu_backward": lambda g, x, y: aten.threshold_backward(g, x, 0),
    "gelu_backward": lambda g, x, y: aten.gelu_backward(g, x),
    "gelu_backward_tanh": lambda g, x, y: aten.gelu_backward(g, x, approximate="tanh"),
    "sigmoid_backward": lambda g, x, y: aten.sigmoid_backward(g, y),
    "tanh_backward": lambda g, x, y: aten.tanh_backward(g, y * 2 - 1),
    "leaky_relu_backward": lambda g, x, y: aten.leaky_relu_backward(g, x, 0.13, False),
    "leaky_relu_backward_result": lambda g, x, y: aten.leaky_relu_backward(g, x, 0.2, True),
    "elu_backward": lambda g, x, y: aten.elu_backward(g, 1.3, 1.2, 0.8, False, x),
    "elu_backward_result": lambda g, x, y: aten.elu_backward(g, 1.3, 1.0, 1.0, True, x),
    "softplus_backward": lambda g, x, y: aten.softplus_backward(g, x, 1.5, 5.0),
    "hardtanh_backward": lambda g, x, y: aten.hardtanh_backward(g, x, -2.0, 2.5),
    "hardswish_backward": lambda g, x, y: aten.hardswish_backward(g, x),
    "hardsigmoid_backward": lambda g, x, y: aten.hardsigmoid_backward(g, x),
    "log_sigmoid_backward": lambda g, x, y: aten.log_sigmoid_backward(g, x, y),
    "glu_backward": lambda g, x, y: aten.glu_backward(g[:-1].reshape(2, -1)[:1], x[:-1].reshape(2, -1), 0),
    "glu_backward_last": lambda g, x, y: aten.glu_backward(g[:-1].reshape(-1, 2)[:, 1:], x[:-1].reshape(-1, 2), 1),
}


@pytest.mark.parametrize("dtype", FLOATS + [torch.float64], ids=str)
def test_backward_ops(dtype):
    x = inputs(dtype)
    g = inputs(dtype, seed=1, special=False)[: x.numel()]
    g = torch.cat([g, torch.randn(x.numel() - g.numel()).to(dtype)]) if g.numel() < x.numel() else g
    y = torch.rand(x.numel(), generator=torch.Generator().manual_seed(2)).to(dtype)  # a sigmoid output
    check_ops(BACKWARD_OPS, g, x, y, tolerance=tols)


# Autograd through torch.nn.functional: which backward op runs is PyTorch's
# choice (relu -> threshold_backward, silu / mish -> their decompositions);
# none may fall back to the CPU.
AUTOGRAD = {
    "relu": F.relu, "relu6": F.relu6, "threshold": lambda x: F.threshold(x, 0.1, 2.0),
    "gelu": F.gelu, "gelu_tanh": lambda x: F.gelu(x, approximate="tanh"), "silu": F.silu,
    "mish": F.mish, "sigmoid": torch.sigmoid, "tanh": torch.tanh,
    "leaky_relu": lambda x: F.leaky_relu(x, 0.2), "elu": F.elu, "selu": F.selu,
    "celu": lambda x: F.celu(x, 0.5), "softplus": lambda x: F.softplus(x, 2.0, 3.0),
    "hardtanh": F.hardtanh, "hardswish": F.hardswish, "hardsigmoid": F.hardsigmoid,
    "logsigmoid": F.logsigmoid, "glu": F.glu,
}


@pytest.mark.parametrize("name", list(AUTOGRAD), ids=str)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_autograd(name, dtype):
    fn = AUTOGRAD[name]
    gen = torch.Generator().manual_seed(3)
    x = (torch.randn(6, 8, generator=gen) * 3).to(dtype)
    x[0, :4] = torch.tensor([0.0, 3.0, -3.0, 1.0])
    dy = torch.randn(6, 4 if name == "glu" else 8, generator=gen).to(dtype)

    def run(x, dy):
        x = x.detach().requires_grad_()
        y = fn(x)
        (gx,) = torch.autograd.grad(y, x, dy)
        return [y.detach(), gx]

    atol, rtol = tols(dtype)
    if dtype == torch.bfloat16 and name in ("silu", "mish"):
        # silu_backward / mish_backward are CompositeImplicitAutograd: on tpu
        # they decompose into bf16 ops that each round, where CPU's kernels
        # work in float.
        rtol = 4e-2
    check(run, x, dy, atol=atol, rtol=rtol)


def test_autograd_float16():
    gen = torch.Generator().manual_seed(4)
    x = (torch.randn(5, 8, generator=gen) * 3).half()

    def run(x):
        x = x.detach().requires_grad_()
        ys = [F.relu(x), F.gelu(x), F.silu(x), F.elu(x), F.softplus(x), F.hardswish(x),
              F.logsigmoid(x), F.leaky_relu(x), F.glu(x)]
        (gx,) = torch.autograd.grad(sum(y.float().sum() for y in ys), x)
        return [y.detach() for y in ys] + [gx]

    check(run, x, atol=ATOL, rtol=RTOL[torch.float16])


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=str)
def test_glu_forward_mode_derivative(dtype):
    # jvp through glu ran aten::glu_jvp on the CPU fallback (counted, right)
    gen = torch.Generator().manual_seed(5)
    x, dx = (torch.randn(4, 6, 3, generator=gen, dtype=dtype) * 3 for _ in range(2))
    for dim in (1, 0, -2):
        with NoFallback():
            check(lambda x, dx: torch.func.jvp(lambda t: F.glu(t, dim), (x,), (dx,)), x, dx)
    check_error(lambda g, x: torch.ops.aten.glu_jvp(g, x, x[:, :2], 1), x[:, :3], x)


def test_inplace_and_out():
    x = inputs(torch.float32)

    def run(x):
        outs = [F.relu(x.clone(), inplace=True), F.relu6(x.clone(), inplace=True),
                F.leaky_relu(x.clone(), 0.2, inplace=True), F.elu(x.clone(), inplace=True),
                F.hardtanh(x.clone(), -0.5, 0.5, inplace=True), F.threshold(x.clone(), 1.0, 0.0, inplace=True),
                F.silu(x.clone(), inplace=True), F.mish(x.clone(), inplace=True),
                F.hardswish(x.clone(), inplace=True), F.hardsigmoid(x.clone(), inplace=True),
                F.selu(x.clone(), inplace=True), F.celu(x.clone(), inplace=True), x.clone().relu_()]
        for op, args in [(aten.gelu.out, (x,)), (aten.softplus.out, (x, 2.0, 10.0)),
                         (aten.silu.out, (x,)), (aten.hardtanh.out, (x, -1.0, 1.0)),
                         (aten.relu.out, (x,)), (aten.elu.out, (x, 1.0, 1.0, 1.0)),
                         (aten.hardswish_backward.out, (x, x))]:
            out = torch.empty_like(x)
            op(*args, out=out)
            outs.append(out)
        for op in [aten.threshold_backward.grad_input, aten.gelu_backward.grad_input]:
            out = torch.empty_like(x)
            op(x, x, *([0.5] if op is aten.threshold_backward.grad_input else []), grad_input=out)
            outs.append(out)
        out, buf = torch.empty_like(x), torch.empty_like(x)
        aten.log_sigmoid_forward.output(x, output=out, buffer=buf)
        glu_out = torch.empty(x.numel() // 2, dtype=x.dtype, device=x.device)
        aten.glu.out(x[:-1], 0, out=glu_out)
        return outs + [out, buf, glu_out]

    check(run, x, atol=ATOL, rtol=RTOL[torch.float32])


def test_integer_inputs():
    i = torch.randint(-6, 6, (40,))
    u = torch.randint(0, 250, (40,)).to(torch.uint8)
    check_ops({"relu": lambda i, u: F.relu(i), "relu_u8": lambda i, u: F.relu(u),
               "relu6": lambda i, u: F.relu6(i), "threshold": lambda i, u: F.threshold(i, 1.5, 7.5),
               "hardtanh": lambda i, u: F.hardtanh(i, -2.5, 2.5),
               "threshold_backward": lambda i, u: aten.threshold_backward(i, i, 0),
               "relu_i8": lambda i, u: F.relu(i.to(torch.int8))}, i, u, tolerance=tols)


def test_parameters_do_not_recompile():
    # Numbers are program inputs. (Equal numbers share one input, so the
    # values avoid coinciding with each other or the defaults.)
    x = inputs(torch.float32).to("tpu")
    for k, s in enumerate((0.15, 0.35)):
        ys = [F.leaky_relu(x, s), F.elu(x, 1 + s), F.softplus(x, 1 + s, 10 * s),
              F.hardtanh(x, -s, s), F.threshold(x, s, 2 * s), F.celu(x, 2 + s)]
        [y.cpu() for y in ys]
        if k == 0:
            before = torchtpu.metrics()["compiles"]
    assert torchtpu.metrics()["compiles"] == before


def test_errors():
    f = torch.randn(4, 5)
    i = torch.arange(6)
    b = torch.tensor([True, False])
    cases = [
        (F.relu, b), (lambda x: F.hardtanh(x), b), (lambda x: F.threshold(x, 0.5, 1.0), b),
        (F.silu, i), (F.gelu, i), (F.elu, i), (F.softplus, i), (F.hardswish, i),
        (F.hardsigmoid, i), (F.mish, i), (F.logsigmoid, i), (F.leaky_relu, i), (F.glu, i),
        (lambda x: F.gelu(x, approximate="fast"), f),
        (lambda x: F.glu(x, 1), f),  # odd halving dim
        (lambda x: F.glu(x, 2), f),  # dim out of range
        (lambda x: F.glu(x[0, 0]), f),  # 0-d
        (lambda x: aten.leaky_relu_backward(x, x, -0.1, True), f),
        (lambda x: aten.elu_backward(x, -1.0, 1.0, 1.0, True, x), f),
        (lambda x: aten.sigmoid_backward(x, x), i), (lambda x: aten.hardtanh_backward(x, x, -1, 1), i),
        (lambda x: aten.glu_backward(x[:, :2], x, 1), f),
    ]
    for fn, x in cases:
        check_error(fn, x)


def test_numbers_that_do_not_fit_the_dtype_are_refused():
    # As CPU's (and CUDA's) Scalar::to<T>(): threshold's value and
    # hardtanh's bounds must fit the tensor's dtype (threshold itself the
    # compute type's), and a half, bfloat16 or integer power's exponent the
    # tensor's. tpu computed with them (inf or a wrapped integer) instead.
    h, f, i8 = torch.ones(3, dtype=torch.float16), torch.ones(3), torch.ones(3, dtype=torch.int8)
    for fn, x in [(lambda a: F.threshold(a, 0.5, 1e5), h), (lambda a: F.threshold(a, 1e39, 0.5), f),
                  (lambda a: F.threshold(a, 1000, 1), i8), (lambda a: F.hardtanh(a, -1e5, 1), h),
                  (lambda a: F.hardtanh(a, -1, 1e39), f), (lambda a: F.hardtanh(a.bfloat16(), -1e39), f),
                  (lambda a: torch.pow(a, 1e6), h), (lambda a: torch.pow(a, 1000), i8),
                  (lambda a: F.threshold_(a.clone(), 0.5, 1e5), h)]:
        err, cpu_err = check_error(fn, x)
        assert str(err).splitlines()[0] == str(cpu_err).splitlines()[0]
    for fn, x in [(lambda a: F.threshold(a, 1e5, 0.5), h), (lambda a: torch.pow(a, 1e39), f),
                  (lambda a: torch.pow(a, 0.5), h), (lambda a: torch.pow(a, 2.5), i8)]:
        check(fn, x)  # what fits, and float's exponent, which CPU takes as a double


def test_silu_complex():
    # CPU defines silu (not mish, gelu, ...) for complex numbers
    z = torch.randn(4, 5, dtype=torch.complex64)
    check(F.silu, z)
    check(lambda z: F.silu(z.clone(), inplace=True), z)
    check_error(F.mish, z)
