"""Attention and the ops the model zoo needed, against CPU: the fused
scaled dot-product attention (forward and backward, masks, causal, GQA,
scale), the math path's _safe_softmax, weight norm, isin."""
import pytest
import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from conftest import TPU, NoFallback, assert_same, check, check_error, check_grad, to_tpu

A = torch.ops.aten
FLOATS = [torch.float32, torch.bfloat16, torch.float16]
TOL = {
    torch.float32: dict(atol=2e-5, rtol=2e-5),
    torch.bfloat16: dict(atol=3e-2, rtol=2e-2),
    torch.float16: dict(atol=4e-3, rtol=3e-3),
}
FUSED, MATH = int(SDPBackend.OVERRIDEABLE), int(SDPBackend.MATH)


def rand(*shape, dtype=torch.float32, grad=False):
    return torch.randn(shape).to(dtype).requires_grad_(grad)


#===--- scaled dot-product attention ---===#

def bool_mask(*shape):
    m = torch.rand(shape) > 0.3
    m[..., 1, :] = False  # a fully masked query row: output 0, no NaN
    return m


# (name, (B, Hq, Hkv, L, S, E, Ev), mask maker, kwargs)
SDPA = [
    ("plain", (2, 4, 4, 5, 7, 8, 8), None, {}),
    ("causal", (2, 4, 4, 6, 6, 8, 8), None, dict(is_causal=True)),
    ("causal_rect", (1, 2, 2, 4, 7, 8, 5), None, dict(is_causal=True)),  # L < S
    ("causal_tall", (1, 2, 2, 7, 3, 8, 8), None, dict(is_causal=True)),  # rows with no key
    ("bool_mask", (2, 4, 4, 5, 7, 8, 8), lambda: bool_mask(2, 1, 5, 7), {}),
    ("float_mask", (2, 2, 2, 5, 7, 4, 4), lambda: rand(5, 7, grad=True), {}),
    ("full_mask_scale", (2, 2, 2, 5, 7, 4, 4), lambda: rand(2, 2, 5, 7, grad=True),
     dict(scale=0.3)),
    ("row_mask", (2, 2, 2, 3, 6, 4, 4), lambda: rand(2, 1, 1, 6, grad=True), {}),
    ("gqa", (2, 6, 2, 5, 7, 8, 8), None, dict(enable_gqa=True)),
    ("gqa_causal_mqa", (1, 4, 1, 5, 5, 8, 6), None, dict(enable_gqa=True, is_causal=True)),
]


def sdpa_inputs(sizes, mask, dtype):
    b, hq, hkv, l, s, e, ev = sizes
    q = rand(b, hq, l, e, dtype=dtype, grad=True)
    k = rand(b, hkv, s, e, dtype=dtype, grad=True)
    v = rand(b, hkv, s, ev, dtype=dtype, grad=True)
    m = mask() if mask else None
    if m is not None and m.is_floating_point():
        m = m.detach().to(dtype).requires_grad_(True)
    return q, k, v, m


@pytest.mark.parametrize("dtype", FLOATS, ids=str)
@pytest.mark.parametrize("case", [c[0] for c in SDPA])
def test_sdpa(case, dtype):
    _, sizes, mask, kw = next(c for c in SDPA if c[0] == case)
    torch.manual_seed(0)
    q, k, v, m = sdpa_inputs(sizes, mask, dtype)
    assert torch._fused_sdp_choice(*to_tpu([q, k, v, m]), **{
        x: y for x, y in kw.items() if x in ("is_causal", "enable_gqa", "scale")}) == FUSED

    def fn(q, k, v, m):
        return F.scaled_dot_product_attention(q, k, v, attn_mask=m, **kw)

    out = check(fn, q, k, v, m, **TOL[dtype])
    assert not out.isnan().any()
    check_grad(fn, q, k, v, m, **TOL[dtype])


def test_sdpa_runs_the_fused_kernels():
    from torch.utils._python_dispatch import TorchDispatchMode

    class Ops(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.names = []

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            self.names.append(func.__name__)
            return func(*args, **(kwargs or {}))

    q = rand(1, 2, 4, 8, grad=True).to(TPU).detach().requires_grad_()
    with Ops() as ops:
        F.scaled_dot_product_attention(q, q, q, is_causal=True).sum().backward()
    assert "_scaled_dot_product_fused_attention_overrideable.default" in ops.names
    assert "_scaled_dot_product_fused_attention_overrideable_backward.default" in ops.names
    assert "bmm.default" not in ops.names and "_safe_softmax.default" not in ops.names


def test_sdpa_fused_op_results():
    # Called directly: output, and a float logsumexp of the scaled scores.
    q, k, v = rand(2, 3, 4, 8), rand(2, 3, 6, 8), rand(2, 3, 6, 5)
    bias = rand(2, 1, 4, 6)
    with NoFallback():
        r = A._scaled_dot_product_fused_attention_overrideable(
            *to_tpu([q, k, v, bias]), scale=0.5)
    scores = q @ k.transpose(-1, -2) * 0.5 + bias
    assert_same(torch.softmax(scores, -1) @ v, r[0], atol=2e-5, rtol=2e-5)
    assert_same(torch.logsumexp(scores, -1), r[1], atol=2e-5, rtol=2e-5)
    assert (r[4], r[5]) == (4, 6)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_sdpa_math_path(dtype):
    # 3-D inputs, the math backend on request, and dropout take PyTorch's
    # decomposition, whose softmax is _safe_softmax: natively lowered too.
    q, k, v = rand(3, 5, 8, dtype=dtype, grad=True), rand(3, 7, 8, dtype=dtype, grad=True), \
        rand(3, 7, 8, dtype=dtype, grad=True)
    m = bool_mask(5, 7)
    fn = lambda q, k, v: F.scaled_dot_product_attention(q, k, v, attn_mask=m.to(q.device))
    check(fn, q, k, v, **TOL[dtype])
    check_grad(fn, q, k, v, **TOL[dtype])
    q4 = q.unsqueeze(0)
    assert torch._fused_sdp_choice(*to_tpu([q4, q4, q4]), dropout_p=0.5) == MATH

    def math(q, k, v):
        with sdpa_kernel(SDPBackend.MATH):
            return F.scaled_dot_product_attention(q, k, v, is_causal=True)
    check(math, q4, q4, q4, **TOL[dtype])
    # dropout_p=1 drops every weight: zeros, on CPU too
    check(lambda q: F.scaled_dot_product_attention(q, q, q, dropout_p=1.0), q4)


def test_sdpa_errors():
    q, k = rand(1, 2, 3, 4), rand(1, 3, 3, 4)
    check_error(lambda q, k: F.scaled_dot_product_attention(q, k.double(), q), q, q)
    check_error(lambda q, k: F.scaled_dot_product_attention(q, k, k, enable_gqa=True), q, k)
    check_error(lambda q, k: F.scaled_dot_product_attention(q, k, k), q, k)  # heads differ

    def no_backend(q):
        with sdpa_kernel(SDPBackend.OVERRIDEABLE):
            return F.scaled_dot_product_attention(q, q, q, dropout_p=0.5)
    check_error(no_backend, q)
    with pytest.raises(NotImplementedError, match="dropout"):
        A._scaled_dot_product_fused_attention_overrideable(*to_tpu([q, q, q]), dropout_p=0.1)


#===--- _safe_softmax ---===#

@pytest.mark.parametrize("dtype", FLOATS, ids=str)
@pytest.mark.parametrize("dim", [0, 1, -1])
def test_safe_softmax(dtype, dim):
    x = rand(4, 5, 6, dtype=dtype)
    x[1, 2, :] = float("-inf")
    x[:, 3, 4] = float("-inf")
    x[2, :, 1] = float("-inf")
    x = x.requires_grad_()
    fn = lambda x: A._safe_softmax(x, dim)
    out = check(fn, x, **TOL[dtype])
    assert not out.isnan().any()
    check_grad(fn, x, **TOL[dtype])
    check(lambda x: A._safe_softmax(x, dim, torch.float32), x.detach(), **TOL[dtype])


def test_safe_softmax_edge_cases():
    check(lambda x: A._safe_softmax(x, 0), torch.tensor(float("-inf")))
    check(lambda x: A._safe_softmax(x, 0), torch.tensor(2.5))
    check(lambda x: A._safe_softmax(x, 1), torch.randn(3, 0))
    check(lambda x: A._safe_softmax(x, 0, torch.float64), torch.randint(0, 5, (4,)))
    check_error(lambda x: A._safe_softmax(x, 0), torch.randint(0, 5, (4,)))
    check_error(lambda x: A._safe_softmax(x, 2), torch.randn(3, 4))


#===--- weight norm ---===#

@pytest.mark.parametrize("dtype", FLOATS, ids=str)
@pytest.mark.parametrize("shape,gshape,dim", [
    ((4, 3, 5), (1, 1, 5), 2), ((4, 3, 5), (4, 1, 1), 0), ((6, 4), (6,), 0), ((3, 4), (4,), 1)])
def test_weight_norm(dtype, shape, gshape, dim):
    v, g = rand(*shape, dtype=dtype, grad=True), rand(*gshape, dtype=dtype, grad=True)
    check(lambda v, g: A._weight_norm_interface(v, g, dim), v.detach(), g.detach(), **TOL[dtype])
    check(lambda v, g: torch._weight_norm(v, g, dim), v, g, **TOL[dtype])
    check_grad(lambda v, g: torch._weight_norm(v, g, dim), v, g, **TOL[dtype])
    w, n = A._weight_norm_interface(v.detach(), g.detach(), dim)
    gw = torch.randn_like(w)
    check(lambda *a: A._weight_norm_interface_backward(*a, dim), gw, v.detach(), g.detach(), n,
          **TOL[dtype])


def test_weight_norm_module():
    torch.manual_seed(0)
    conv = torch.nn.utils.parametrizations.weight_norm(torch.nn.Conv1d(4, 6, 3), dim=2)
    x = rand(2, 4, 9)
    ref = conv(x)
    ref.sum().backward()
    grads = [p.grad for p in conv.parameters()]
    conv.zero_grad()
    conv.to(TPU)
    with NoFallback():
        out = conv(x.to(TPU))
        out.sum().backward()
    assert_same(ref, out, atol=1e-5, rtol=1e-5)
    assert_same(grads, [p.grad for p in conv.parameters()], atol=1e-5, rtol=1e-5)


def test_weight_norm_errors():
    v = rand(4, 3, 5)
    check_error(lambda v, g: A._weight_norm_interface(v, g, 1), v, rand(1, 3, 1))
    check_error(lambda v, g: A._weight_norm_interface(v, g, 0), v.long(), rand(4, 1, 1).long())
    check_error(lambda v, g: A._weight_norm_interface(v, g, 0), v, rand(4, 1, 1).double())


#===--- isin ---===#

@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.uint8, torch.float32,
                                   torch.bfloat16, torch.float16], ids=str)
def test_isin(dtype):
    e = torch.randint(0, 10, (3, 4)).to(dtype)
    t = torch.tensor([1, 3, 5, 7]).to(dtype)
    check(torch.isin, e, t)
    check(lambda e, t: torch.isin(e, t, invert=True), e, t)
    check(lambda e, t: torch.isin(e, t, assume_unique=True), e, t)
    check(lambda e: torch.isin(e, 3), e)
    check(lambda t: torch.isin(5, t), t)
    check(lambda e, t: torch.isin(e, t, out=torch.empty(3, 4, dtype=torch.bool, device=e.device)),
          e, t)


def test_isin_promotion_and_edges():
    check(torch.isin, torch.tensor([1, 2, 3]), torch.tensor([2.0, 3.5]))
    check(torch.isin, torch.tensor([1.5, 2.0]), torch.tensor([2]))
    check(torch.isin, torch.tensor([float("nan"), 1.0]), torch.tensor([float("nan"), 1.0]))
    check(torch.isin, torch.tensor([1, 2]), torch.tensor([], dtype=torch.long))
    check(torch.isin, torch.tensor([], dtype=torch.long), torch.tensor([1, 2]))
    check(torch.isin, torch.tensor(3), torch.tensor([[3]]))
    check_error(torch.isin, torch.tensor([1, 2]), torch.tensor([True]))
    check_error(torch.isin, torch.tensor([1j]), torch.tensor([1]))
    check_error(lambda e, t: torch.isin(e, t, out=torch.empty(2, device=e.device)),
                torch.tensor([1, 2]), torch.tensor([1]))
