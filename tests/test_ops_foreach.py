"""The _foreach_* ops and AMP's grad-scaling ops against CPU PyTorch.

Each foreach call must run as ONE executable in strict mode, whatever the
list's length, shapes and dtypes, and without CPU fallback."""
import math

import pytest
import torch

import torchtpu
from conftest import NoFallback, assert_same, check_error, fallbacks, to_tpu

aten = torch.ops.aten
FLOATS = [torch.float32, torch.bfloat16, torch.float16]
SHAPES = [(3,), (2, 3), ()]  # mixed ranks, a 0-d element included


@pytest.fixture(autouse=True)
def strict():
    with torchtpu.mode("strict"):
        yield


def floats(dtype, shapes=SHAPES, lo=None, hi=None, seed=0):
    g = torch.Generator().manual_seed(seed)
    out = []
    for s in shapes:
        x = torch.randn(s, generator=g)
        if lo is not None:
            x = lo + (hi - lo) * torch.rand(s, generator=g)
        out.append(x.to(dtype))
    return out


def ints(dtype=torch.int64, shapes=SHAPES, lo=-5, hi=6, seed=0):
    g = torch.Generator().manual_seed(seed)
    return [torch.randint(lo, hi, s, generator=g).to(dtype) for s in shapes]


def run(fn, *inputs, atol=None, rtol=None, executions=1):
    """fn on CPU inputs and on tpu copies: same results, no CPU fallback, and
    `executions` executables (one per foreach call; None: at most one, for
    ops that may return their input unchanged)."""
    tpu_inputs = to_tpu(list(inputs))  # copied before fn may modify inputs
    expected = fn(*inputs)
    torch.tpu.synchronize()
    before = torchtpu.metrics()["executions"]
    with NoFallback():
        actual = fn(*tpu_inputs)
    ran = torchtpu.metrics()["executions"] - before
    if executions is None:
        assert ran <= 1, f"{ran} executions, expected at most 1"
    else:
        assert ran == executions, f"{ran} executions, expected {executions}"
    assert_same(expected, actual, atol, rtol)
    return actual


def inplace(op):
    """The in-place op, returning its (modified) self list."""
    def fn(xs, *args, **kwargs):
        op(xs, *args, **kwargs)
        return xs
    return fn


#===--- binary ops ---===#

BINARY = ["add", "sub", "mul", "div", "maximum", "minimum", "clamp_min", "clamp_max", "pow"]
HAS_TENSOR = {"add", "mul", "div"}


def binary_inputs(op, dtype):
    lo, hi = (0.5, 2.0) if op == "pow" else (None, None)
    xs = floats(dtype, lo=lo, hi=hi, seed=1)
    ys = floats(dtype, lo=lo, hi=hi, seed=2)
    return xs, ys


@pytest.mark.parametrize("dtype", FLOATS, ids=str)
@pytest.mark.parametrize("op", BINARY)
def test_binary_list(op, dtype):
    xs, ys = binary_inputs(op, dtype)
    f = getattr(aten, f"_foreach_{op}").List
    run(f, xs, ys)
    run(inplace(getattr(aten, f"_foreach_{op}_").List), xs, ys)


@pytest.mark.parametrize("dtype", FLOATS, ids=str)
@pytest.mark.parametrize("op", BINARY)
def test_binary_scalar(op, dtype):
    xs, _ = binary_inputs(op, dtype)
    f = getattr(aten, f"_foreach_{op}")
    run(f.Scalar, xs, 0.75)
    run(inplace(getattr(aten, f"_foreach_{op}_").Scalar), xs, 1.5)
    run(f.ScalarList, xs, [0.5, -2, 3.25])
    run(inplace(getattr(aten, f"_foreach_{op}_").ScalarList), xs, [1.5, 2, 0.25])


@pytest.mark.parametrize("dtype", FLOATS, ids=str)
@pytest.mark.parametrize("op", sorted(HAS_TENSOR))
def test_binary_tensor(op, dtype):
    xs, _ = binary_inputs(op, dtype)
    f = getattr(aten, f"_foreach_{op}").Tensor
    run(lambda xs, s: f(xs, s), xs, torch.tensor(1.5))  # a device 0-d tensor
    run(lambda xs: f(xs, torch.tensor(-0.5, dtype=torch.float64)), xs)  # a CPU one
    run(inplace(getattr(aten, f"_foreach_{op}_").Tensor), xs, torch.tensor(2.0, dtype=dtype))


def test_alpha():
    xs, ys = floats(torch.float32, seed=1), floats(torch.float32, seed=2)
    run(lambda a, b: torch._foreach_add(a, b, alpha=0.5), xs, ys)
    run(lambda a, b: torch._foreach_sub(a, b, alpha=-2), xs, ys)
    run(inplace(lambda a, b: torch._foreach_add_(a, b, alpha=3)), xs, ys)
    run(lambda a, s: torch._foreach_add(a, s, alpha=2), xs, torch.tensor(0.25))
    i, j = ints(seed=1), ints(seed=2)
    run(lambda a, b: torch._foreach_sub(a, b, alpha=2), i, j)


def test_mixed_dtypes_and_promotion():
    # Each element promotes on its own, as the scalar op.
    mixed = [torch.randn(3), torch.randn(2, 2).bfloat16(), torch.randint(-3, 4, (4,)),
             torch.randn(()).half(), torch.tensor([True, False])]
    others = [torch.randn(3).bfloat16(), torch.randn(2, 2), torch.randn(4),
              torch.randint(1, 4, ()), torch.tensor([True, True])]
    run(torch._foreach_add, mixed, others)
    run(torch._foreach_mul, mixed, others)
    run(torch._foreach_add, mixed, 1.5)
    run(torch._foreach_mul, mixed, 3)
    run(torch._foreach_div, mixed[:4], others[:4])
    run(torch._foreach_maximum, mixed[:4], others[:4])
    run(torch._foreach_clamp_max, mixed[:4], 0.5)
    # A scalar list with ints, floats and bools: one promotion per element.
    run(torch._foreach_add, ints(), [1, 2.5, True])
    run(torch._foreach_mul, ints(), [True, 2, -1.5])
    # Into the list: int tensors take int results.
    run(inplace(torch._foreach_add_), ints(), [1, 2, 3])
    run(inplace(torch._foreach_mul_), [torch.randn(3).bfloat16(), torch.randn(2)], [torch.randn(3), torch.randn(2)])


def test_cpu_scalars_in_a_list():
    # An optimizer's tensor learning rate puts 0-dim CPU tensors in a list
    # (Adagrad: _foreach_mul(grads, [-lr / ...])); each promotes as its
    # element op's 0-dim operand, as in CUDA's per-element path.
    xs = [torch.randn(3), torch.randn(2, 2).bfloat16(), torch.randint(-3, 4, (4,))]
    scalars = [torch.tensor(0.5), torch.tensor(2), torch.tensor(1.5, dtype=torch.float64)]
    with NoFallback():
        assert_same(torch._foreach_mul(xs, scalars), torch._foreach_mul(to_tpu(xs), scalars))
        ys = [torch.randn(3), torch.randn(2)]
        tpu_ys = to_tpu(ys)
        torch._foreach_add_(ys, scalars[:2])
        torch._foreach_add_(tpu_ys, scalars[:2])
        assert_same(ys, tpu_ys)
    with pytest.raises(RuntimeError, match="same device"):
        torch._foreach_mul(to_tpu(xs), [torch.ones(3), torch.ones(2, 2), torch.ones(4)])


def test_integer_lists():
    a, b = ints(seed=1), ints(lo=1, hi=5, seed=2)
    for op in ["add", "sub", "mul", "div", "maximum", "minimum", "clamp_min", "clamp_max"]:
        run(getattr(torch, f"_foreach_{op}"), a, b)
        run(getattr(torch, f"_foreach_{op}"), a, 2)
    run(torch._foreach_pow, a, b)
    run(torch._foreach_pow, a, 3)
    run(torch._foreach_pow, [torch.tensor([2, -1, 1, 0, 3, -1])], [torch.tensor([-1, -3, -2, 0, 0, -4])])
    run(torch._foreach_clamp_min, [torch.tensor([1, 2], dtype=torch.uint8)], -1)  # -1 wraps to 255
    u8 = [torch.randint(0, 200, s, dtype=torch.uint8) for s in SHAPES]
    run(torch._foreach_add, u8, u8)


def test_broadcasting():
    xs = [torch.randn(2, 3), torch.randn(4, 1)]
    ys = [torch.randn(3), torch.randn(1, 5)]
    run(torch._foreach_add, xs, ys)
    run(torch._foreach_maximum, xs, ys)
    run(torch._foreach_pow, [x.abs() for x in xs], ys)
    run(inplace(torch._foreach_mul_), xs, [torch.randn(3), torch.randn(4, 1)])


def test_nan_and_inf():
    nan, inf = float("nan"), float("inf")
    xs = [torch.tensor([1.0, nan, -2.0, inf, -inf]), torch.tensor([nan, 0.0])]
    ys = [torch.tensor([nan, 0.0, 0.0, 1.0, 1.0]), torch.tensor([1.0, nan])]
    for op in ["maximum", "minimum", "clamp_min", "clamp_max"]:
        run(getattr(torch, f"_foreach_{op}"), xs, ys)
        run(getattr(torch, f"_foreach_{op}"), xs, nan)
        run(getattr(torch, f"_foreach_{op}"), xs, 0.0)
    run(torch._foreach_div, xs, [torch.zeros(5), torch.zeros(2)])


@pytest.mark.parametrize("dtype", FLOATS, ids=str)
def test_pow_forms(dtype):
    base = floats(dtype, lo=0.1, hi=3.0)
    run(torch._foreach_pow, base, 2)
    run(torch._foreach_pow, base, 0.5)
    run(torch._foreach_pow, base, -1.5)
    run(torch._foreach_pow, 2.5, base)  # _foreach_pow.ScalarAndTensor
    run(torch._foreach_pow, 0.9, [torch.tensor(3.0), torch.tensor([1.0, 7.0])])
    run(torch._foreach_pow, [torch.tensor([-8.0, 4.0, 0.0])], 1 / 3)
    run(inplace(torch._foreach_pow_), base, [2, 3, 0.5])


def test_pow_integer_and_bool():
    b = [torch.tensor([True, False])]
    run(torch._foreach_pow, b, 2)
    run(torch._foreach_pow, b, True, executions=0)  # x ** True is x: no program
    run(torch._foreach_pow, b, False)
    run(torch._foreach_pow, 2, [torch.tensor([-1, 2, 5])])
    run(torch._foreach_pow, 2, [torch.tensor([True, False])])
    run(torch._foreach_pow, ints(), 2.5)
    check_error(torch._foreach_pow, ints(), -1)
    check_error(torch._foreach_pow, b, b)


#===--- addcmul, addcdiv, lerp ---===#

@pytest.mark.parametrize("dtype", FLOATS, ids=str)
@pytest.mark.parametrize("op", ["addcmul", "addcdiv"])
def test_pointwise(op, dtype):
    xs, t1, t2 = floats(dtype, seed=1), floats(dtype, seed=2), floats(dtype, lo=0.5, hi=2.0, seed=3)
    f, f_ = getattr(torch, f"_foreach_{op}"), getattr(torch, f"_foreach_{op}_")
    run(f, xs, t1, t2)
    run(lambda a, b, c: f(a, b, c, 0.3), xs, t1, t2)
    run(lambda a, b, c: f(a, b, c, [0.5, -1.0, 2]), xs, t1, t2)
    run(lambda a, b, c: f(a, b, c, torch.tensor([0.5, -1.0, 2.0])), xs, t1, t2)  # .Tensor
    run(inplace(lambda a, b, c: f_(a, b, c, value=-0.7)), xs, t1, t2)
    run(inplace(lambda a, b, c: f_(a, b, c, [1.5, 2, -3])), xs, t1, t2)
    run(inplace(lambda a, b, c: f_(a, b, c, torch.tensor([1.5, 2, -3]))), xs, t1, t2)


def test_pointwise_promotion_and_broadcast():
    run(torch._foreach_addcmul, ints(), ints(seed=1), ints(seed=2), 2.5)  # value truncated
    run(torch._foreach_addcmul, floats(torch.float32), ints(seed=1), ints(seed=2), 2)
    run(torch._foreach_addcdiv, ints(), floats(torch.float32, seed=1),
        [torch.tensor([2, 3, 4]), torch.tensor([1, 5, 6]), torch.tensor(7)], 2)
    run(torch._foreach_addcmul, [torch.randn(2, 3)], [torch.randn(3)], [torch.randn(2, 1)], 0.5)


@pytest.mark.parametrize("dtype", FLOATS, ids=str)
def test_lerp(dtype):
    xs, ys = floats(dtype, seed=1), floats(dtype, seed=2)
    ws = floats(dtype, lo=-0.5, hi=1.5, seed=3)
    run(torch._foreach_lerp, xs, ys, 0.1)
    run(torch._foreach_lerp, xs, ys, 0.9)  # the other branch of the formula
    run(torch._foreach_lerp, xs, ys, 2)
    run(torch._foreach_lerp, xs, ys, ws)
    run(torch._foreach_lerp, xs, ys, [0.25, 0.75, 1.0])
    run(inplace(torch._foreach_lerp_), xs, ys, 0.3)
    run(inplace(torch._foreach_lerp_), xs, ys, ws)
    run(inplace(torch._foreach_lerp_), xs, ys, [0.0, 0.6, -1.0])
    run(torch._foreach_lerp, [torch.randn(2, 3).to(dtype)], [torch.randn(3).to(dtype)],
        [torch.tensor(0.7, dtype=dtype)])


#===--- unary ops ---===#

# op -> (lo, hi) of its inputs (None: normal samples)
UNARY = {
    "abs": None, "acos": (-0.9, 0.9), "asin": (-0.9, 0.9), "atan": None, "ceil": None,
    "cos": None, "cosh": None, "erf": None, "erfc": None, "exp": None, "expm1": None,
    "floor": None, "frac": (-5, 5), "lgamma": (0.1, 5), "log": (0.1, 5), "log10": (0.1, 5),
    "log1p": (-0.5, 5), "log2": (0.1, 5), "neg": None, "reciprocal": (0.5, 3),
    "round": (-5, 5), "rsqrt": (0.1, 5), "sigmoid": None, "sign": None, "sin": None,
    "sinh": None, "sqrt": (0.1, 5), "tan": (-1.2, 1.2), "tanh": None, "trunc": (-5, 5),
}


@pytest.mark.parametrize("dtype", FLOATS, ids=str)
@pytest.mark.parametrize("op", sorted(UNARY))
def test_unary(op, dtype):
    lo_hi = UNARY[op] or (None, None)
    xs = floats(dtype, shapes=[(4,), (2, 3), (), (2, 1, 2)], lo=lo_hi[0], hi=lo_hi[1])
    run(getattr(aten, f"_foreach_{op}").default, xs)
    run(inplace(getattr(aten, f"_foreach_{op}_").default), xs)


@pytest.mark.parametrize("dtype", [torch.int64, torch.uint8, torch.bool], ids=str)
def test_unary_integral(dtype):
    xs = [torch.tensor([True, False, True])] if dtype == torch.bool else \
        ints(dtype, lo=0 if dtype == torch.uint8 else -5, hi=6)
    for op in sorted(UNARY):
        f = getattr(aten, f"_foreach_{op}").default
        try:
            f([x.clone() for x in xs])
        except Exception:
            check_error(f, xs)  # PyTorch refuses this dtype: so do we
            continue
        run(f, xs, executions=None)  # ceil(int) and the like need no program


def test_unary_specials():
    nan, inf = float("nan"), float("inf")
    xs = [torch.tensor([nan, -0.0, 0.0, 2.5, -2.5, 3.5, -0.5, inf, -inf])]
    for op in ["sign", "round", "trunc", "floor", "ceil", "frac", "abs", "neg", "reciprocal",
               "sqrt", "exp", "sigmoid"]:
        run(getattr(aten, f"_foreach_{op}").default, xs)


def test_unary_inplace_needs_float():
    check_error(torch._foreach_sqrt_, ints())  # Float can't be cast to Long
    check_error(torch._foreach_neg, [torch.tensor([True])])


#===--- reductions ---===#

@pytest.mark.parametrize("dtype", FLOATS, ids=str)
@pytest.mark.parametrize("ord", [2, 1, 0, 3, 0.5, -1, math.inf, -math.inf])
def test_norm(ord, dtype):
    xs = floats(dtype, shapes=[(5,), (3, 4), ()], seed=3)
    xs[0][1] = 0  # for ord 0 and negative orders
    run(lambda xs: torch._foreach_norm(xs, ord), xs, **({"rtol": 1e-4, "atol": 1e-5} if dtype == torch.float32 else {}))


def test_norm_dtype_and_errors():
    xs = floats(torch.bfloat16)
    run(lambda xs: aten._foreach_norm.Scalar(xs, 2, dtype=torch.float32), xs)
    run(lambda xs: aten._foreach_norm.Scalar(xs, 1, dtype=torch.float64), floats(torch.float32))
    check_error(lambda xs: aten._foreach_norm.Scalar(xs, 2, dtype=torch.bfloat16), floats(torch.float32))
    check_error(torch._foreach_norm, ints())
    check_error(lambda xs: torch._foreach_norm(xs, math.inf), [torch.empty(0)])
    check_error(lambda xs: torch._foreach_norm(xs, -math.inf), [torch.empty(0)])
    run(torch._foreach_norm, [torch.empty(0), torch.ones(2)])


@pytest.mark.parametrize("ord", [2, 1, 0, 3, 0.5, -1, math.inf])
def test_powsum(ord):
    xs = floats(torch.float32, shapes=[(5,), (3, 4), ()], seed=4)
    xs[0][2] = 0
    run(lambda xs: aten._foreach_powsum.Scalar(xs, ord), xs, rtol=1e-4, atol=1e-5)
    run(lambda xs: aten._foreach_powsum.Scalar(xs, ord), [x.bfloat16() for x in xs])


def test_powsum_errors():
    check_error(lambda xs: aten._foreach_powsum.Scalar(xs, 2), ints())


def complexes(shapes=SHAPES, seed=0):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(s, dtype=torch.complex64, generator=g) for s in shapes]


def test_complex_lerp_norm_powsum():
    # As CPU: lerp's two branches (|w|^2 < 0.25) with real, complex and
    # tensor weights; norms and powsums of |x|, with real results.
    xs, ys, ws = complexes(seed=1), complexes(seed=2), complexes(seed=3)
    for w in (0.3, 0.9, 0.3 + 0.5j, [0.1, 0.7 - 0.1j, 2.0]):
        run(torch._foreach_lerp, xs, ys, w)
    run(torch._foreach_lerp, xs, ys, ws)
    run(inplace(torch._foreach_lerp_), xs, ys, ws)
    xs[0][1] = 0
    for ord in (2, 1, 0, 3, 0.5, -1, math.inf, -math.inf):
        run(lambda xs: torch._foreach_norm(xs, ord), xs, rtol=1e-4, atol=1e-5)
    for ord in (2, 1, 3):
        run(lambda xs: aten._foreach_powsum.Scalar(xs, ord), xs, rtol=1e-4, atol=1e-5)
    run(lambda xs: aten._foreach_norm.Scalar(xs, 2, dtype=torch.complex128), xs)
    check_error(lambda xs: aten._foreach_norm.Scalar(xs, 2, dtype=torch.float64), xs)
    check_error(lambda xs: aten._foreach_norm.Scalar(xs, 2, dtype=torch.complex64),
                floats(torch.float32))


@pytest.mark.parametrize("op", ["maximum", "minimum", "clamp_min", "clamp_max"])
def test_complex_maximum_and_clamps_raise_as_cpu(op):
    # CPU has no complex maximum or clamp: NotImplementedError, CPU's words.
    xs, ys = complexes(seed=1), complexes(seed=2)
    for f in (getattr(torch, f"_foreach_{op}"), getattr(torch, f"_foreach_{op}_")):
        for other in (ys, 0.5, [0.5, 1.0, 2.0]):
            tpu_err, cpu_err = check_error(f, xs, other)
            assert str(tpu_err) == str(cpu_err)


def test_max():
    nan = float("nan")
    run(aten._foreach_max.default, floats(torch.float32) + floats(torch.bfloat16))
    run(aten._foreach_max.default, ints() + [torch.tensor([True, False])] +
        [torch.randint(0, 9, (3,), dtype=torch.uint8), torch.randint(-9, 9, (2, 2), dtype=torch.int8)])
    run(aten._foreach_max.default, [torch.tensor([1.0, nan]), torch.tensor([-math.inf])])
    check_error(aten._foreach_max.default, [torch.empty(0)])


#===--- backward ---===#

# op -> (fn, number of list inputs, CPU fallbacks its backward formula may
# still need: per-tensor ops of other families)
BACKWARD = {
    "add": (lambda a, b: torch._foreach_add(a, b, alpha=2), 2, set()),
    "mul": (torch._foreach_mul, 2, set()),
    "div": (torch._foreach_div, 2, set()),
    "sub_scalar": (lambda a: torch._foreach_sub(a, 2.0), 1, set()),
    "mul_scalarlist": (lambda a: torch._foreach_mul(a, [2.0, -1.0]), 1, set()),
    "addcmul": (lambda a, b, c: torch._foreach_addcmul(a, b, c, 0.5), 3, set()),
    "addcdiv": (lambda a, b, c: torch._foreach_addcdiv(a, b, c, [0.5, 2.0]), 3, set()),
    "lerp": (lambda a, b: torch._foreach_lerp(a, b, 0.3), 2, set()),
    "lerp_list": (torch._foreach_lerp, 3, set()),
    "exp": (torch._foreach_exp, 1, set()),
    "sqrt": (torch._foreach_sqrt, 1, set()),
    "log": (torch._foreach_log, 1, set()),
    "reciprocal": (torch._foreach_reciprocal, 1, set()),
    "clamp_min": (lambda a: torch._foreach_clamp_min(a, 0.8), 1, set()),
    "pow": (lambda a: torch._foreach_pow(a, 2.5), 1, {"aten::pow.Tensor_Scalar_out"}),
    "maximum": (torch._foreach_maximum, 2, {"aten::masked_fill_.Scalar"}),
    "norm": (torch._foreach_norm, 1, {"aten::masked_fill_.Scalar"}),
}


@pytest.mark.parametrize("name", sorted(BACKWARD))
def test_backward(name):
    fn, n, ok = BACKWARD[name]
    lists = [floats(torch.float32, shapes=[(3,), (2, 3)], lo=0.5, hi=2.0, seed=k) for k in range(n)]

    def grads(lists):
        lists = [[x.detach().requires_grad_() for x in l] for l in lists]
        out = fn(*lists)
        sum((o * (k + 1)).sum() for k, o in enumerate(out)).backward()
        return [[x.grad for x in l] for l in lists]
    expected = grads(lists)
    before = fallbacks()
    actual = grads(to_tpu(lists))
    new = {k for k, v in fallbacks().items() if v != before.get(k, 0)}
    assert new <= ok, f"CPU fallbacks {new - ok}"
    assert_same(expected, actual, atol=1e-6, rtol=1e-5)


def test_inplace_ops_bump_their_self_lists_versions():
    # An in-place foreach op changes its self list as the per-tensor ops
    # would (CUDA's kernels bump each version too), so autograd sees a
    # saved tensor that one of them modified, and a view of it sees it.
    def versions(device):
        xs = [torch.ones(3, device=device), torch.ones(2, device=device)]
        ys = [torch.ones(3, device=device), torch.ones(2, device=device)]
        views = [x[:1] for x in xs]
        torch._foreach_add_(xs, 1)
        torch._foreach_mul_(xs, ys)
        torch._foreach_addcdiv_(xs, ys, ys, 0.5)
        torch._foreach_sqrt_(xs)
        torch._foreach_lerp_(xs, ys, 0.25)
        torch._foreach_zero_(xs)
        torch._foreach_copy_(xs, ys)
        return [t._version for t in xs + ys + views]
    assert versions("tpu") == versions("cpu")

    def modified_saved_tensor(device):
        a = torch.ones(3, device=device, requires_grad=True)
        h = a * 1
        s = h.sin()  # saves h
        torch._foreach_add_([h], 1)
        with pytest.raises(RuntimeError, match="modified by an inplace operation") as e:
            s.sum().backward()
        return str(e.value).split("[")[0]
    assert modified_saved_tensor("tpu") == modified_saved_tensor("cpu")


#===--- zero, copy, mm ---===#

def test_zero():
    xs = floats(torch.float32) + ints() + [torch.tensor([True])]
    run(inplace(torch._foreach_zero_), xs)
    run(aten._foreach_zero.default, xs)


def test_copy():
    dst = floats(torch.float32) + ints()
    src = ints(seed=3) + floats(torch.bfloat16, seed=4)
    run(inplace(torch._foreach_copy_), dst, src)
    run(lambda d, s: aten._foreach_copy.default(d, s), dst, src)
    run(inplace(torch._foreach_copy_), [torch.zeros(2, 3)], [torch.arange(3.0)])  # broadcast
    check_error(torch._foreach_copy_, [torch.zeros(3)], [torch.ones(2)])
    check_error(torch._foreach_copy_, [torch.zeros(3)], [torch.ones(2, 3)])


def test_copy_into_views():
    base = torch.zeros(4, 6)
    src = [torch.randn(4), torch.randn(3, 2)]

    def fn(base, src):
        torch._foreach_copy_([base[:, 1], base[1:, 4:]], src)
        return base
    run(fn, base, src)


def test_mm():
    a = [torch.randn(2, 3), torch.randn(4, 5)]
    b = [torch.randn(3, 4), torch.randn(5, 1)]
    run(aten._foreach_mm.default, a, b, atol=1e-5, rtol=1e-5)


#===--- out= forms ---===#

def test_out_variants():
    xs, ys = floats(torch.float32, seed=1), floats(torch.float32, lo=0.5, hi=2, seed=2)

    def outs_like(xs, dtype=None):
        return [torch.empty_like(x, dtype=dtype) for x in xs]

    def call(op, *args, dtype=None, **kwargs):
        def fn(*tensors):
            out = outs_like(tensors[0], dtype)
            op(*tensors, *args, **kwargs, out=out)
            return out
        return fn
    run(call(aten._foreach_add.List_out, alpha=2), xs, ys)
    run(call(aten._foreach_mul.ScalarList_out, [1.5, 2, -1]), xs)
    run(call(aten._foreach_sqrt.out), ys)
    run(call(aten._foreach_lerp.Scalar_out, 0.25), xs, ys)
    run(call(aten._foreach_addcdiv.Scalar_out, 0.5), xs, ys, ys)
    run(call(aten._foreach_copy.out, False), xs, ys)

    def norm_out(xs):
        out = [torch.empty((), device=xs[0].device) for _ in xs]
        aten._foreach_norm.Scalar_out(xs, 2, out=out)
        return out
    run(norm_out, xs)


#===--- one executable ---===#

def test_one_executable_for_a_long_list():
    xs = [torch.randn(i + 1, 3) for i in range(16)]
    ys = [torch.randn(i + 1, 3).bfloat16() for i in range(16)]
    run(torch._foreach_addcmul, xs, ys, ys, 0.5)
    txs, tys = to_tpu(xs), to_tpu(ys)
    torch._foreach_mul_(txs, tys)
    torch.tpu.synchronize()
    m0 = torchtpu.metrics()
    for k in range(3):  # new numbers reuse the program
        torch._foreach_mul_(txs, 1.0 + k)
        torch._foreach_add_(txs, [float(k)] * 16)
    torch.tpu.synchronize()
    m1 = torchtpu.metrics()
    assert m1["executions"] - m0["executions"] == 6
    assert m1["compiles"] - m0["compiles"] <= 2


def test_fused_mode():
    xs, ys = floats(torch.float32, seed=1), floats(torch.float32, seed=2)
    txs, tys = to_tpu(xs), to_tpu(ys)
    with torchtpu.mode("fused"):
        torch._foreach_add_(txs, tys, alpha=2)
        torch._foreach_mul_(txs, 0.5)
        r = torch._foreach_sqrt(torch._foreach_abs(txs))
    torch._foreach_add_(xs, ys, alpha=2)
    torch._foreach_mul_(xs, 0.5)
    assert_same(torch._foreach_sqrt(torch._foreach_abs(xs)), r)
    assert_same(xs, txs)


#===--- errors ---===#

def test_list_errors():
    xs = floats(torch.float32)
    check_error(torch._foreach_add, [], 1)
    check_error(torch._foreach_add, xs, xs[:2])
    check_error(torch._foreach_add, xs, [1.0, 2.0])
    check_error(torch._foreach_addcmul, xs, xs, xs[:1])
    check_error(torch._foreach_lerp, xs, xs[:1], 0.5)
    check_error(torch._foreach_mul, xs, torch.ones(3))  # not a 0-d tensor
    check_error(lambda xs: torch._foreach_mul(xs, torch.ones(3).to("tpu") if xs[0].device.type == "tpu"
                                              else torch.ones(3)), xs)
    check_error(torch._foreach_addcmul, xs, xs, xs, torch.ones(2))  # wrong length
    check_error(torch._foreach_addcmul, xs, xs, xs, torch.ones(3, 1))  # not 1-D


def test_value_errors():
    check_error(torch._foreach_add_, ints(), 1.5)  # Float into Long
    check_error(torch._foreach_clamp_max_, ints(), 1.5)
    check_error(torch._foreach_add_, [torch.randn(3)], [torch.randn(2, 3)])  # into a smaller one
    check_error(torch._foreach_add, [torch.randn(3), torch.randn(2)], [torch.randn(3), torch.randn(3)])
    check_error(torch._foreach_sub, [torch.tensor([True])], [torch.tensor([True])])
    check_error(torch._foreach_sub, [torch.tensor([True])], True)
    check_error(lambda a, b: torch._foreach_add(a, b, alpha=1.5), ints(), ints())
    check_error(torch._foreach_clamp_min, [torch.tensor([True])], True)
    check_error(torch._foreach_maximum, [torch.tensor([True])], True)
    check_error(torch._foreach_lerp, ints(), ints(), 0.5)
    check_error(torch._foreach_lerp, [torch.randn(2)], [torch.randn(2).double()], 0.5)
    check_error(torch._foreach_lerp, [torch.randn(2)], [torch.randn(2)], [torch.randn(2).double()])
    check_error(torch._foreach_addcdiv, floats(torch.float32), ints(), ints())
    check_error(torch._foreach_addcmul, [torch.tensor([True])], [torch.tensor([True])],
                [torch.tensor([True])])
    check_error(torch._foreach_frac, ints())
    check_error(torch._foreach_ceil, [torch.tensor([True])])


#===--- AMP ---===#

def unscale(grads, found_inf, inv_scale):
    torch._amp_foreach_non_finite_check_and_unscale_(grads, found_inf, inv_scale)
    return grads, found_inf


def test_amp_unscale():
    grads = floats(torch.float32) + floats(torch.bfloat16, seed=5) + [torch.randn(4).half()]
    run(unscale, grads, torch.tensor(0.0), torch.tensor(0.125))
    run(unscale, grads, torch.tensor([0.0]), torch.tensor([1.0]))
    for bad in [float("inf"), float("-inf"), float("nan")]:
        g = [x.clone() for x in grads]
        g[3].view(-1)[1] = bad
        run(unscale, g, torch.tensor(0.0), torch.tensor(0.5))
    run(unscale, grads, torch.tensor(1.0), torch.tensor(0.5))  # found_inf stays set


def test_amp_unscale_errors():
    grads = floats(torch.float32)
    check_error(unscale, grads, torch.tensor(0.0, dtype=torch.float64), torch.tensor(1.0))
    check_error(unscale, grads, torch.tensor([0.0, 0.0]), torch.tensor(1.0))
    check_error(unscale, grads, torch.tensor(0.0), torch.tensor(1, dtype=torch.int32))


def update_scale(scale, tracker, found_inf, growth=2.0, backoff=0.5, interval=3):
    torch._amp_update_scale_(scale, tracker, found_inf, growth, backoff, interval)
    return scale, tracker


def test_amp_update_scale():
    scale, tracker = torch.tensor(1024.0), torch.tensor(0, dtype=torch.int32)
    t_scale, t_tracker = to_tpu([scale, tracker])
    for found in [0, 0, 0, 1, 0, 0, 0, 0, 1, 1, 0]:
        f = torch.tensor(float(found))
        update_scale(scale, tracker, f)
        with NoFallback():
            update_scale(t_scale, t_tracker, f.to("tpu"), 2.0, 0.5, 3)
        assert_same(scale, t_scale)
        assert_same(tracker, t_tracker)
    run(update_scale, torch.tensor([3.0e38]), torch.tensor([1], dtype=torch.int32),
        torch.tensor([0.0]), 4.0, 0.25, 2)  # growing past float32 keeps the scale
    run(update_scale, torch.tensor(3.0), torch.tensor(4, dtype=torch.int32),
        torch.tensor(0.0), 1.1, 0.3, 5)


def test_amp_update_scale_errors():
    f = torch.tensor(0.0)
    check_error(update_scale, torch.tensor(1.0), torch.tensor(0), f)  # tracker not int32
    check_error(update_scale, torch.tensor(1.0).double(), torch.tensor(0, dtype=torch.int32), f)
    check_error(update_scale, torch.ones(2), torch.tensor(0, dtype=torch.int32), f)
