"""More elementwise math and activations against CPU (lower_math_extra.c):
heaviside, logaddexp(2), nextafter, frexp, xlog1py, hard/softshrink, prelu,
rrelu, equal, cross, channel_shuffle, cummax/cummin, embedding_renorm_ and
the modified Bessel functions i0 / i0e / i1 / i1e. Forward in float32,
bfloat16, float16 and float64 (integers where CPU takes them), in-place and
out= forms, backward, and errors.
"""
import math

import pytest
import torch
import torch.nn.functional as F

from conftest import TPU, NoFallback, assert_same, check, check_error, check_ops, to_tpu

aten = torch.ops.aten
FLOATS = [torch.float32, torch.bfloat16, torch.float16, torch.float64]
RTOL = {torch.float16: 1e-3, torch.bfloat16: 1.6e-2, torch.float32: 1.3e-6,
        torch.float64: 1e-7}


def tols(dtype):
    return (1e-5, RTOL[dtype]) if dtype in RTOL else (None, None)


def exact(dtype):
    return 0, 0


def values(dtype, n=40, seed=0, scale=3.0):
    """Special values (signed zeros, infinities, NaN, ±1) and random ones."""
    g = torch.Generator().manual_seed(seed)
    sp = [0.0, -0.0, 1.0, -1.0, math.inf, -math.inf, math.nan, 0.5, -0.5]
    return torch.cat([torch.tensor(sp), torch.randn(n, generator=g) * scale]).to(dtype)


#===--- binary math ---===#

BINARY = {
    "heaviside": torch.heaviside,
    "logaddexp": torch.logaddexp,
    "logaddexp2": torch.logaddexp2,
    "xlog1py": torch.special.xlog1py,
    "xlog1py_scalar": lambda a, b: torch.special.xlog1py(a, 2.5),
}


@pytest.mark.parametrize("dtype", FLOATS, ids=str)
def test_binary(dtype):
    a = values(dtype)
    b = values(dtype, seed=1).flip(0)  # special values meet each other
    check_ops(BINARY, a, b, tolerance=tols)


def test_binary_forms():
    a, b = values(torch.float32), values(torch.float32, seed=1).flip(0)
    ops = {
        "heaviside_": lambda a, b: a.clone().heaviside_(b),
        "logaddexp_out": lambda a, b: torch.logaddexp(a, b, out=torch.empty_like(a)),
        "logaddexp2_out": lambda a, b: torch.logaddexp2(a, b, out=torch.empty_like(a)),
        "heaviside_bcast": lambda a, b: torch.heaviside(a.view(7, 7), b[:7]),
        "xlog1py_self_scalar": lambda a, b: torch.special.xlog1py(0.5, b),
    }
    check_ops(ops, a, b, tolerance=tols)


def test_integer_and_complex():
    g = torch.Generator().manual_seed(2)
    for dt in [torch.int64, torch.int32, torch.uint8, torch.bool]:
        a = torch.randint(-2, 3, (30,), generator=g).to(dt)
        b = torch.randint(-2, 3, (30,), generator=g).to(dt)
        check(torch.heaviside, a, b)
        check(torch.special.xlog1py, a, b.abs() if dt != torch.bool else b)
    z = torch.randn(20, dtype=torch.complex64, generator=g)
    w = torch.randn(20, dtype=torch.complex64, generator=g)
    check(torch.logaddexp, z, w, atol=1e-5, rtol=1e-5)


def test_nextafter_bits():
    """Exact: zeros, equal inputs, NaN, subnormals, the largest float."""
    tiny = 1.401298464324817e-45
    a = torch.tensor([0.0, -0.0, 0.0, tiny, -tiny, 1.0, 1.0, -1.0, 3.4028234663852886e38,
                      math.inf, -math.inf, math.nan, 2.0, 1e-38, 5.0])
    b = torch.tensor([-0.0, 1.0, -1.0, 0.0, 0.0, 2.0, 0.0, 0.0, math.inf,
                      0.0, 0.0, 1.0, math.nan, 1.0, 5.0])
    for dt in FLOATS:
        x, y = a.to(dt), b.to(dt)
        expected = torch.nextafter(x, y)
        with NoFallback():
            actual = torch.nextafter(to_tpu(x), to_tpu(y)).cpu()
        # bit-exact, -0.0 included
        same = (expected.view(torch.int16 if dt.itemsize == 2 else
                              torch.int32 if dt.itemsize == 4 else torch.int64) ==
                actual.view(torch.int16 if dt.itemsize == 2 else
                            torch.int32 if dt.itemsize == 4 else torch.int64))
        assert bool((same | (expected.isnan() & actual.isnan())).all()), (dt, expected, actual)


@pytest.mark.parametrize("dtype", FLOATS, ids=str)
def test_frexp(dtype):
    x = torch.cat([values(dtype, scale=1e3),
                   torch.tensor([1e-40, -3e-42, 1e-30, 6e-8, 1e4]).to(dtype)])
    if dtype == torch.float64:
        x = torch.cat([x, torch.tensor([1e-310, -5e-324, 1e300], dtype=dtype)])
    check_ops({"frexp": lambda x: list(torch.frexp(x))}, x, tolerance=exact)


def test_frexp_out_and_errors():
    x = values(torch.float32)
    m, e = torch.empty(0), torch.empty(0, dtype=torch.int32)
    check(lambda x, m, e: list(torch.frexp(x, out=(m, e))), x, m, e, atol=0, rtol=0)
    check_error(torch.frexp, torch.arange(3))
    check_error(lambda x: torch.frexp(x, out=(torch.empty(3, dtype=torch.float64),
                                              torch.empty(3, dtype=torch.int32))), x[:3])
    check_error(lambda x: torch.frexp(x, out=(torch.empty(3), torch.empty(3, dtype=torch.int64))),
                x[:3])


def test_binary_errors():
    x = torch.randn(4)
    check_error(torch.heaviside, x, x.double())
    check_error(torch.heaviside, x.cfloat(), x.cfloat())
    check_error(torch.logaddexp, torch.arange(3), torch.arange(3))
    check_error(torch.logaddexp2, x.cfloat(), x.cfloat())
    check_error(torch.nextafter, torch.arange(3), torch.arange(3))
    check_error(lambda a: torch.heaviside(a, a, out=torch.empty(4, dtype=torch.float64)), x)


def test_grad():
    for fn in [torch.logaddexp, torch.logaddexp2, torch.special.xlog1py]:
        a = torch.randn(10, requires_grad=True)
        b = torch.rand(10, requires_grad=True)
        ga = torch.randn(10)
        expected = torch.autograd.grad(fn(a, b), [a, b], ga)
        ta, tb = to_tpu(a), to_tpu(b)
        with NoFallback():
            actual = torch.autograd.grad(fn(ta, tb), [ta, tb], ga.to(ta.device))
        assert_same(expected, actual, 1e-5, 1e-5)


#===--- activations ---===#

@pytest.mark.parametrize("dtype", FLOATS, ids=str)
def test_shrink(dtype):
    x = values(dtype)
    g = values(dtype, seed=3)
    ops = {
        "hardshrink": F.hardshrink, "hardshrink_03": lambda x, g: F.hardshrink(x, 0.3),
        "softshrink": F.softshrink, "softshrink_07": lambda x, g: F.softshrink(x, 0.7),
        "hardshrink_backward": lambda x, g: aten.hardshrink_backward(g, x, 0.5),
        "softshrink_backward": lambda x, g: aten.softshrink_backward(g, x, 0.3),
    }
    ops = {k: (v if k not in ("hardshrink", "softshrink") else (lambda f: lambda x, g: f(x))(v))
           for k, v in ops.items()}
    check_ops(ops, x, g, tolerance=tols)


def test_shrink_forms_and_errors():
    x = values(torch.float32)
    check(lambda x: F.hardshrink(x, 0.25, ).mul(2), x)
    check(lambda x: torch.nn.functional.softshrink(x, 0.1), x)
    check(lambda x: aten.hardshrink(x, 0.4, out=torch.empty_like(x)), x)
    check(lambda x: aten.softshrink_backward(x, x, 0.4, grad_input=torch.empty_like(x)), x)
    check_error(F.softshrink, x, -0.5)
    check_error(F.softshrink, x.half(), 1e6)
    check_error(F.hardshrink, torch.arange(3))
    for f in [F.hardshrink, F.softshrink]:
        a = torch.randn(12, requires_grad=True)
        ga = torch.randn(12)
        expected = torch.autograd.grad(f(a), a, ga)
        ta = to_tpu(a)
        with NoFallback():
            actual = torch.autograd.grad(f(ta), ta, ga.to(ta.device))
        assert_same(expected, actual)


@pytest.mark.parametrize("dtype", FLOATS, ids=str)
def test_prelu(dtype):
    x = torch.randn(2, 3, 4).to(dtype)
    w = torch.randn(3).to(dtype)
    check_ops({"prelu": F.prelu, "prelu1": lambda x, w: F.prelu(x, w[:1])}, x, w, tolerance=tols)


def test_prelu_grad_and_errors():
    x = torch.randn(2, 3, 5, requires_grad=True)
    w = torch.randn(3, requires_grad=True)
    g = torch.randn(2, 3, 5)
    expected = torch.autograd.grad(F.prelu(x, w), [x, w], g)
    tx, tw = to_tpu(x), to_tpu(w)
    with NoFallback():
        actual = torch.autograd.grad(F.prelu(tx, tw), [tx, tw], g.to(tx.device))
    assert_same(expected, actual, 1e-5, 1e-5)
    check_error(aten._prelu_kernel, x.detach(), w.detach().double().view(3, 1))
    check_error(aten._prelu_kernel, x.detach().int(), w.detach().int().view(3, 1))


def test_rrelu_eval():
    for dt in FLOATS:
        x = values(dt)
        check(lambda x: F.rrelu(x, 0.1, 0.3, training=False), x)
    check(lambda x: F.rrelu(x.clone(), training=False, inplace=True), values(torch.float32))


def test_rrelu_training():
    """Random slopes: not CPU's values, but in [lower, upper] where x <= 0,
    the identity elsewhere, written into noise, and the gradient is noise."""
    x = torch.randn(2000)
    tx = to_tpu(x).requires_grad_(True)
    noise = to_tpu(torch.zeros(2000))
    with NoFallback():
        y = aten.rrelu_with_noise(tx, noise, 0.1, 0.3, True)
        y.backward(to_tpu(torch.ones(2000)))
    y, n, g = y.detach().cpu(), noise.cpu(), tx.grad.cpu()
    neg = x <= 0
    assert bool((n[~neg] == 1).all()) and bool((y[~neg] == x[~neg]).all())
    assert bool(((n[neg] >= 0.1) & (n[neg] < 0.3)).all())
    assert n[neg].unique().numel() > 100  # really random
    torch.testing.assert_close(y[neg], x[neg] * n[neg])
    torch.testing.assert_close(g, n)
    # in place: self and noise written
    t = to_tpu(x)
    noise2 = to_tpu(torch.zeros(2000))
    with NoFallback():
        aten.rrelu_with_noise_(t, noise2, 0.1, 0.3, True)
    t, n2 = t.cpu(), noise2.cpu()
    torch.testing.assert_close(t, torch.where(neg, x * n2, x))
    assert bool(((n2[neg] >= 0.1) & (n2[neg] < 0.3)).all())
    check_error(lambda x: aten.rrelu_with_noise(x, torch.zeros(3, device=x.device), 0.1, 0.3,
                                                True), x)
    check_error(lambda x: aten.rrelu_with_noise(x.int(), torch.zeros(2000, device=x.device).int(),
                                                0.1, 0.3, True), x)


#===--- equal, cross, channel_shuffle ---===#

def test_equal():
    x = values(torch.float32)
    for a, b in [(x[7:], x[7:].clone()), (x, x.clone()), (x[:6], x[:6].clone()),
                 (x[7:], x[7:] + 1), (x[:5], x[1:6]), (x, x[:4]),
                 (torch.arange(6), torch.arange(6)), (torch.arange(6), torch.arange(6).double()),
                 (torch.zeros(0), torch.zeros(0)), (torch.tensor(0.0), torch.tensor(-0.0))]:
        check(torch.equal, a, b)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64, torch.complex64],
                         ids=str)
def test_cross(dtype):
    g = torch.Generator().manual_seed(4)
    a = (torch.randn(4, 3, 2, generator=g) * 3).to(dtype)
    b = (torch.randn(1, 3, 2, generator=g) * 3).to(dtype)
    ops = {
        "linalg_cross": lambda a, b: torch.linalg.cross(a, b, dim=1),
        "cross": lambda a, b: torch.cross(a.transpose(1, 2), b.transpose(1, 2).expand(4, 2, 3),
                                          dim=-1),
        "cross_default_dim": lambda a, b: torch.cross(a, b.expand(4, 3, 2)),
        "linalg_cross_out": lambda a, b: torch.linalg.cross(a, b, dim=1,
                                                            out=torch.empty(0, dtype=a.dtype,
                                                                      device=a.device)),
    }
    check_ops(ops, a, b, tolerance=tols)


def test_cross_errors_and_grad():
    a = torch.randn(2, 3)
    check_error(torch.linalg.cross, a, a.double())
    check_error(torch.linalg.cross, a, torch.randn(3))
    check_error(lambda a: torch.linalg.cross(a, a, dim=0), a)
    check_error(lambda a: torch.linalg.cross(a, a, dim=3), a)
    check_error(torch.linalg.cross, a.bool(), a.bool())
    x, y = torch.randn(4, 3, requires_grad=True), torch.randn(4, 3, requires_grad=True)
    g = torch.randn(4, 3)
    expected = torch.autograd.grad(torch.linalg.cross(x, y), [x, y], g)
    tx, ty = to_tpu(x), to_tpu(y)
    with NoFallback():
        actual = torch.autograd.grad(torch.linalg.cross(tx, ty), [tx, ty], g.to(tx.device))
    assert_same(expected, actual, 1e-5, 1e-5)


def test_channel_shuffle():
    for dt in [torch.float32, torch.bfloat16, torch.int64, torch.bool]:
        x = torch.arange(2 * 6 * 5).reshape(2, 6, 5).to(dt)
        check(lambda x: torch.channel_shuffle(x, 3), x)
        check(lambda x: F.channel_shuffle(x.view(2, 6, 5, 1), 2), x)
    check_error(lambda x: torch.channel_shuffle(x, 2), torch.randn(2, 4))
    check_error(lambda x: torch.channel_shuffle(x, 0), torch.randn(2, 4, 3))
    check_error(lambda x: torch.channel_shuffle(x, 3), torch.randn(2, 4, 3))


#===--- cummax, cummin ---===#

@pytest.mark.parametrize("dtype", FLOATS + [torch.int64, torch.uint8, torch.bool], ids=str)
def test_cummax_cummin(dtype):
    g = torch.Generator().manual_seed(5)
    if dtype.is_floating_point:
        x = torch.randint(-3, 4, (4, 13), generator=g).to(dtype)  # many ties
        x[1, 3] = math.nan
        x[2, 5] = math.nan
        x[2, 9] = math.nan
        x[3, 2] = math.inf
        x[3, 7] = -math.inf
    else:
        x = torch.randint(0, 3, (4, 13), generator=g).to(dtype)
    ops = {
        "cummax1": lambda x: list(torch.cummax(x, 1)),
        "cummin1": lambda x: list(torch.cummin(x, -1)),
        "cummax0": lambda x: list(torch.cummax(x, 0)),
        "cummin0": lambda x: list(torch.cummin(x, 0)),
        "cummax_0d": lambda x: list(torch.cummax(x[0, 0], 0)),
        "cummax_out": lambda x: list(torch.cummax(
            x, 1, out=(torch.empty(0, dtype=x.dtype, device=x.device),
                       torch.empty(0, dtype=torch.long, device=x.device)))),
    }
    check_ops(ops, x, tolerance=exact)


def test_cummax_grad():
    x = torch.randn(3, 9, requires_grad=True)
    g = torch.randn(3, 9)
    expected = torch.autograd.grad(torch.cummax(x, 1)[0], x, g)
    tx = to_tpu(x)
    with NoFallback():
        actual = torch.autograd.grad(torch.cummax(tx, 1)[0], tx, g.to(tx.device))
    assert_same(expected, actual)
    check_error(lambda x: torch.cummin(x, 0), torch.randn(3, dtype=torch.complex64))


#===--- embedding_renorm_ ---===#

@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float64], ids=str)
def test_embedding_renorm(dtype):
    w = (torch.randn(8, 4) * 2).to(dtype)
    idx = torch.tensor([[0, 2, 2], [5, -1, 3]])
    atol, rtol = tols(dtype)
    for p in [2.0, 1.0, 3.0, math.inf]:
        check(lambda w, i: torch.embedding_renorm_(w.clone(), i, 1.5, p), w, idx,
              atol=atol, rtol=rtol)
    check(lambda w, i: F.embedding(i.abs(), w.clone(), max_norm=1.0), w, idx,
          atol=atol, rtol=rtol)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=str)
def test_embedding_renorm_half_precision_is_bitwise_cpu(dtype):
    # CPU scales a row by max_norm / (norm + 1e-7) rounded to the row's
    # dtype (not its float32 opmath): a 1-ulp difference of the scaled
    # weights became 0.0117 in an embedding_bag with per_sample_weights
    # (OpInfo sample 8, bfloat16)
    torch.manual_seed(0)
    w = (torch.randn(300, 5) * 5).to(dtype)
    for max_norm, p in [(1.0, 2.0), (0.3, 1.0), (2.5, 3.0)]:
        check(lambda w, i: torch.embedding_renorm_(w.clone(), i, max_norm, p), w,
              torch.arange(300), atol=0, rtol=0)
    check(lambda w, i, psw: F.embedding_bag(i, w.clone(), max_norm=1.0, mode="sum",
                                            per_sample_weights=psw),
          w[:5], torch.tensor([[0, 1], [1, 0]]), torch.randn(2, 2).mul(5).to(dtype),
          atol=0, rtol=0)


def test_embedding_renorm_errors():
    w = torch.randn(5, 3)
    check_error(lambda w: torch.embedding_renorm_(w, torch.tensor([1.0]), 1.0, 2.0), w)
    check_error(lambda w: torch.embedding_renorm_(w[0], torch.tensor([1]), 1.0, 2.0), w)
    check_error(lambda w: torch.embedding_renorm_(w.int(), torch.tensor([1]), 1.0, 2.0), w)
    check_error(lambda w, i: torch.embedding_renorm_(w, i, 1.0, 2.0), w, torch.tensor([7]))
    check_error(lambda w, i: torch.embedding_renorm_(w, i, 1.0, 2.0), w, torch.tensor([-6]))


#===--- Bessel functions ---===#

BESSEL = {"i0": torch.i0, "i0e": torch.special.i0e, "i1": torch.special.i1,
          "i1e": torch.special.i1e}


@pytest.mark.parametrize("dtype", FLOATS, ids=str)
def test_bessel(dtype):
    x = torch.cat([values(dtype, scale=8.0),
                   torch.tensor([19.5, 20.0, 20.5, -35.0, 60.0, 1e-3, -1e-5]).to(dtype)])
    if dtype == torch.float16:  # CPU's half kernels are off by an ulp or two
        for name, f in BESSEL.items():
            check(f, x, atol=1e-5, rtol=4e-3)
    else:
        check_ops(BESSEL, x, tolerance=tols)


def test_bessel_forms():
    x = torch.randint(-30, 30, (20,))
    check_ops(BESSEL, x, tolerance=tols)  # integers become float
    y = values(torch.float32)
    check(lambda y: torch.special.i1(y, out=torch.empty_like(y)), y)
    check(lambda y: y.clone().i0_(), y)
    expected = torch.kaiser_window(12, True, 6.0)
    with NoFallback():
        actual = torch.kaiser_window(12, True, 6.0, device=TPU)
    assert_same(expected, actual, 1e-5, 1e-5)
    check_error(torch.i0, torch.randn(3, dtype=torch.complex64))
    x = torch.randn(10, requires_grad=True)
    g = torch.randn(10)
    for f in [torch.i0, torch.special.i0e, torch.special.i1, torch.special.i1e]:
        expected = torch.autograd.grad(f(x), x, g)
        tx = to_tpu(x)
        with NoFallback():
            actual = torch.autograd.grad(f(tx), tx, g.to(tx.device))
        assert_same(expected, actual, 1e-5, 1e-5)


@pytest.mark.parametrize("dtype", [torch.int8, torch.uint8, torch.int16, torch.int32, torch.int64],
                         ids=str)
def test_gcd_lcm(dtype):
    # Euclid unrolled for the dtype's worst case; lcm wraps as CPU's C++ does.
    info = torch.iinfo(dtype)
    wide = torch.randint(info.min, info.max, (500,), dtype=dtype)
    small = torch.randint(-40 if info.min < 0 else 0, 40, (500,), dtype=dtype)
    wide[:4] = torch.tensor([0, 0, info.min, info.max], dtype=dtype)
    small[:4] = torch.tensor([0, 7, 6, info.max], dtype=dtype)
    ops = {"gcd": torch.gcd, "lcm": torch.lcm}
    for a, b in [(wide, small), (small, small.flip(0)), (wide, wide.flip(0))]:
        check_ops(ops, a, b, tolerance=exact)
    check(lambda a, b: a.clone().gcd_(b), small, small.flip(0))
    check(lambda a, b: torch.lcm(a, b, out=torch.empty_like(a)), small, small.flip(0))


def test_gcd_fibonacci_and_errors():
    fib = [0, 1]
    while fib[-1] < 2 ** 62:
        fib.append(fib[-1] + fib[-2])
    check(torch.gcd, torch.tensor(fib[-2:-1]), torch.tensor(fib[-1:]))  # the most steps
    check(torch.gcd, torch.tensor([12, 18]), torch.tensor([8], dtype=torch.uint8))  # promotes
    check_error(torch.gcd, torch.tensor([1.0]), torch.tensor([2.0]))
    check_error(torch.lcm, torch.tensor([True]), torch.tensor([True]))
