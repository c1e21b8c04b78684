"""Type promotion and output metadata: results have PyTorch's dtype and shape
for every combination of tensor, 0-d tensor, CPU scalar tensor and Python
number, and agree with PyTorch's Meta kernels."""
import itertools

import pytest
import torch

from conftest import NoFallback

DTYPES = [torch.bool, torch.uint8, torch.int8, torch.int32, torch.int64, torch.float16,
          torch.bfloat16, torch.float32, torch.float64]
NUMBERS = [True, 3, 2.5]


def make(dtype, shape, device="cpu"):
    if dtype == torch.bool:
        return (torch.arange(max(1, int(torch.tensor(shape).prod())) if shape else torch.tensor(1)) % 2 == 0).reshape(shape).to(device)
    return torch.ones(shape, dtype=dtype, device=device) * 3


@pytest.mark.parametrize("a,b", list(itertools.product(DTYPES, DTYPES)),
                         ids=lambda d: str(d).replace("torch.", ""))
def test_binary_promotion(a, b):
    for sa, sb in [((2, 3), (3,)), ((2, 3), ()), ((), (2, 1))]:
        x, y = make(a, sa), make(b, sb)
        expected = torch.add(x, y) if (a, b) != (torch.bool, torch.bool) else torch.logical_or(x, y)
        with NoFallback():
            actual = (torch.add(x.tpu(), y.tpu()) if (a, b) != (torch.bool, torch.bool)
                      else torch.logical_or(x.tpu(), y.tpu()))
        assert actual.dtype == expected.dtype, (a, b, sa, sb)
        assert actual.shape == expected.shape
        assert torch.equal(actual.cpu(), expected)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_python_numbers_and_cpu_scalars(dtype):
    x = make(dtype, (4,))
    t = x.tpu()
    for n in NUMBERS:
        if dtype == torch.bool and isinstance(n, bool):
            continue
        for op in (torch.mul, torch.sub if dtype != torch.bool and not isinstance(n, bool) else torch.mul):
            expected, actual = op(x, n), op(t, n)
            assert actual.dtype == expected.dtype, (dtype, n)
            torch.testing.assert_close(actual.cpu(), expected)
        # A CPU 0-d tensor takes part as a 0-d tensor, not as a number.
        s = torch.tensor(n, dtype=torch.float64 if isinstance(n, float) else None)
        assert torch.mul(t, s).dtype == torch.mul(x, s).dtype
    assert torch.true_divide(t, 2).dtype == torch.true_divide(x, 2).dtype


def test_int_to_float_rules():
    x = torch.arange(6).reshape(2, 3)
    t = x.tpu()
    with NoFallback():
        for f in (torch.exp, torch.sqrt, torch.sigmoid, lambda v: v / 2, lambda v: v.mean(dtype=torch.float32)):
            e, a = f(x), f(t)
            assert a.dtype == e.dtype
            torch.testing.assert_close(a.cpu(), e)
        assert t.sum().dtype == torch.int64 and (t > 2).sum().dtype == torch.int64


@pytest.mark.parametrize("default", [torch.float64, torch.bfloat16, torch.float16], ids=str)
def test_default_dtype_in_promotion(default):
    # torch.set_default_dtype decides what a Python float promotes to, what
    # an integer op's float result is and the dtype of factories without
    # one; tpu computed all of these in float32 whatever the default.
    x = torch.arange(1, 7).reshape(2, 3)
    t = x.tpu()
    old = torch.get_default_dtype()
    torch.set_default_dtype(default)
    try:
        with NoFallback():
            for f in (lambda v: v * 0.5, lambda v: v / 2, torch.sqrt, lambda v: v + 1.5j,
                      lambda v: torch.true_divide(v, 4), lambda v: v.logsumexp(1)):
                e, a = f(x), f(t)
                if e.dtype == torch.complex32:
                    continue  # no PJRT type: complex64 on tpu
                assert a.dtype == e.dtype, (default, e.dtype, a.dtype)
                torch.testing.assert_close(a.cpu(), e)
            w = torch.kaiser_window(6, device="tpu")
            assert w.dtype == default
            torch.testing.assert_close(w.cpu(), torch.kaiser_window(6), atol=1e-2, rtol=1e-2)
    finally:
        torch.set_default_dtype(old)


OPS = [
    lambda x: x.sum(1, keepdim=True), lambda x: x.mean(0), lambda x: x.amax((0, 2)),
    lambda x: x.max(1), lambda x: x.var(2, correction=0), lambda x: x.softmax(1),
    lambda x: x.transpose(1, 2) @ x, lambda x: torch.cat([x, x], 1),
    lambda x: x[:, None, 1:].expand(2, 4, 2, 5) * 2, lambda x: torch.where(x > 0, x, 0.5),
    lambda x: x.topk(2, dim=2), lambda x: x.cumsum(1), lambda x: x.argmax(),
    lambda x: torch.nn.functional.layer_norm(x, (5,)), lambda x: x.to(torch.bfloat16).sum(0),
]


@pytest.mark.parametrize("i", range(len(OPS)))
def test_metadata_matches_meta_kernels(i):
    f = OPS[i]
    x = torch.randn(2, 3, 5)
    meta = f(x.to("meta"))
    with NoFallback():
        out = f(x.tpu())
    metas = meta if isinstance(meta, tuple) else (meta,)
    outs = out if isinstance(out, tuple) else (out,)
    for m, o in zip(metas, outs):
        assert o.dtype == m.dtype and o.shape == m.shape, i
