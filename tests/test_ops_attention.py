"""Attention and the ops the model zoo needed, against CPU: the fused
scaled dot-product attention (forward and backward, masks, causal, GQA,
scale), the math path's _safe_softmax, weight norm, isin."""
import copy

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


def test_sdpa_fused_op_layouts_are_the_meta_kernels():
    # Heads split from the feature dim: q, k, v are (B, L, H, E) transposed.
    # The output and the gradients take the inputs' layout, as the meta
    # kernels say (a compiled graph views them on that promise), and the
    # dropout seed and offset are tensors.
    def split(x):
        return x.view(2, 4, 3, 8).transpose(1, 2)

    q, k, v = (rand(2, 4, 24) for _ in range(3))
    bias = rand(2, 3, 4, 4).transpose(-1, -2)  # not dense in row-major order
    meta = [split(t.to("meta")) for t in (q, k, v)] + [bias.to("meta")]
    tq, tk, tv, tb = [split(t) for t in to_tpu([q, k, v])] + [to_tpu(bias)]
    expected = A._scaled_dot_product_fused_attention_overrideable(*meta)
    got = A._scaled_dot_product_fused_attention_overrideable(tq, tk, tv, tb)
    assert got[0].stride() == expected[0].stride() != (96, 32, 8, 1)
    assert got[1].stride() == expected[1].stride()
    assert isinstance(got[6], torch.Tensor) and isinstance(got[7], torch.Tensor)
    assert_same(torch.softmax(split(q) @ split(k).transpose(-1, -2) / 8 ** 0.5 + bias, -1)
                @ split(v), got[0], atol=2e-5, rtol=2e-5)
    grad = torch.ones(2, 3, 4, 8)
    want = [True, True, True, True]
    meta_grads = A._scaled_dot_product_fused_attention_overrideable_backward(
        grad.to("meta"), *meta, want, expected[0], expected[1], None, None, 4, 4, 0.0, False,
        expected[6], expected[7])
    grads = A._scaled_dot_product_fused_attention_overrideable_backward(
        to_tpu(grad), tq, tk, tv, tb, want, got[0], got[1], None, None, 4, 4, 0.0, False,
        got[6], got[7])
    for g, m in zip(grads, meta_grads):
        assert g.stride() == m.stride() and g.shape == m.shape


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


#===--- PyTorch's fast transformer path (eval mode, no grad) ---===#
# nn.MultiheadAttention and nn.TransformerEncoderLayer call fused inference
# ops on every device PyTorch lists (tpu among them): PyTorch's own
# implementations of _native_multi_head_attention and
# _transformer_encoder_layer_fwd, over _transform_bias_rescale_qkv,
# _masked_softmax and _addmm_activation, which lower natively.

def fast_path(fn, module, *inputs, **tol):
    """fn(module, *inputs) under no_grad in eval mode, on CPU and on a tpu
    copy: same results, no CPU fallback."""
    module = module.eval()
    tpu_module = copy.deepcopy(module).to(TPU)
    with torch.no_grad():
        expected = fn(module, *inputs)
        with NoFallback():
            actual = fn(tpu_module, *to_tpu(list(inputs)))
    assert_same(expected, actual, **tol)


@pytest.mark.parametrize("dtype", FLOATS, ids=str)
def test_multihead_attention_fast_path(dtype):
    torch.manual_seed(0)
    mha = torch.nn.MultiheadAttention(16, 4, batch_first=True).to(dtype)
    x = rand(3, 5, 16, dtype=dtype)
    pad = torch.tensor([[False] * 5, [False] * 3 + [True] * 2, [False] * 4 + [True]])
    causal = torch.triu(torch.ones(5, 5, dtype=torch.bool), 1)
    tol = dict(TOL[dtype], atol=max(TOL[dtype]["atol"], 1e-4))
    fast_path(lambda m, x: m(x, x, x), mha, x, **tol)  # averaged weights
    fast_path(lambda m, x: m(x, x, x, need_weights=False)[0], mha, x, **tol)
    fast_path(lambda m, x: m(x, x, x, average_attn_weights=False), mha, x, **tol)
    fast_path(lambda m, x, p: m(x, x, x, key_padding_mask=p), mha, x, pad, **tol)
    fast_path(lambda m, x, c: m(x, x, x, attn_mask=c), mha, x, causal, **tol)


@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("activation", ["relu", "gelu"])
def test_transformer_encoder_fast_path(norm_first, activation):
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(16, 4, 32, dropout=0.0, activation=activation,
                                             batch_first=True, norm_first=norm_first)
    x = rand(3, 5, 16)
    pad = torch.tensor([[False] * 5, [False] * 3 + [True] * 2, [False] * 4 + [True]])
    tol = dict(atol=1e-5, rtol=1e-5)
    fast_path(lambda m, x: m(x), layer, x, **tol)
    fast_path(lambda m, x, p: m(x, src_key_padding_mask=p), layer, x, pad, **tol)
    encoder = torch.nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
    fast_path(lambda m, x, p: m(x, src_key_padding_mask=p), encoder, x, pad, **tol)


def test_transformer_encoder_nested_path_says_what_to_do():
    # With a padding mask in eval mode the encoder packs the unpadded tokens
    # into a nested tensor, which tpu does not have.
    layer = torch.nn.TransformerEncoderLayer(16, 4, 32, dropout=0.0, batch_first=True)
    encoder = torch.nn.TransformerEncoder(layer, 2).eval().to(TPU)
    pad = torch.tensor([[False] * 5, [False] * 3 + [True] * 2]).to(TPU)
    with torch.no_grad(), pytest.raises(NotImplementedError, match="enable_nested_tensor=False"):
        encoder(torch.randn(2, 5, 16, device=TPU), src_key_padding_mask=pad)


@pytest.mark.parametrize("dtype", FLOATS, ids=str)
def test_masked_softmax(dtype):
    x = rand(2, 3, 4, 4, dtype=dtype)
    full = torch.rand(2, 3, 4, 4) > 0.5
    full[0, 0, 0] = True  # a fully masked row: NaN, as on CPU
    key = torch.rand(2, 4) > 0.5
    src = torch.rand(4, 4) > 0.6
    tol = TOL[dtype]
    check(lambda x, m: A._masked_softmax(x, m), x, full, **tol)
    check(lambda x, m: A._masked_softmax(x, m, 1, 2), x, full, **tol)
    check(lambda x, m: A._masked_softmax(x, m, -1, 1), x, key, **tol)
    check(lambda x, m: A._masked_softmax(x, m, -1, 0), x, src, **tol)
    for bad in [(src, None), (src, 2), (key, 0), (src, 1), (full.int(), None)]:
        check_error(lambda x, m: A._masked_softmax(x, m, -1, bad[1]), x, bad[0])


@pytest.mark.parametrize("dtype", FLOATS, ids=str)
def test_transform_bias_rescale_qkv(dtype):
    qkv, bias = rand(2, 5, 3 * 12, dtype=dtype), rand(3 * 12, dtype=dtype)
    check(lambda q, b: A._transform_bias_rescale_qkv(q, b, 3), qkv, bias, **TOL[dtype])


@pytest.mark.parametrize("dtype", FLOATS, ids=str)
@pytest.mark.parametrize("use_gelu", [False, True])
def test_addmm_activation(dtype, use_gelu):
    a, b, c = rand(4, 6, dtype=dtype), rand(6, 5, dtype=dtype), rand(5, dtype=dtype)
    a[0, 0] = float("nan")
    check(lambda c, a, b: A._addmm_activation(c, a, b, use_gelu=use_gelu), c, a, b, **TOL[dtype])
    check(lambda c, a, b: A._addmm_activation(c, a, b, beta=0.5, alpha=2, use_gelu=use_gelu),
          c, a, b, **TOL[dtype])


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


def test_a_backward_that_reaches_no_attention_output_gives_no_gradient():
    # Autograd calls the fused backward with an undefined output gradient
    # when nothing flows back through the output; it raised "tensor does not
    # have a device".
    class Stop(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x.clone()

        @staticmethod
        def backward(ctx, g):
            return None

    grads = []
    for device in ("cpu", "tpu"):
        torch.manual_seed(0)
        q, k, v = [torch.randn(1, 2, 3, 4).to(device).requires_grad_() for _ in range(3)]
        o = torch.nn.functional.scaled_dot_product_attention(q, k, v)
        (Stop.apply(o).sum() + q.sum()).backward()
        grads.append((q.grad.cpu(), k.grad, v.grad))
    assert torch.equal(grads[0][0], grads[1][0])
    assert grads[1][1] is None and grads[1][2] is None


@pytest.mark.parametrize("case", ["mask_requires_grad", "value_head_dim"])
def test_attention_is_differentiated_twice_on_the_math_backend(case):
    # As CUDA's fused kernels, tpu's has no derivative of its backward (CPU
    # takes its math path for these two cases, so it has one): create_graph
    # through it raises, and the math backend differentiates twice as CPU.
    g = torch.Generator().manual_seed(0)
    q, k = torch.randn(1, 1, 3, 4, dtype=torch.float64, generator=g), torch.randn(1, 1, 5, 4, dtype=torch.float64, generator=g)
    v = torch.randn(1, 1, 5, 6 if case == "value_head_dim" else 4, dtype=torch.float64, generator=g)
    m = torch.randn(3, 5, dtype=torch.float64, generator=g)

    def second_order(device):
        Q, K, V, M = [t.to(device).requires_grad_() for t in (q, k, v, m)]
        mask = M if case == "mask_requires_grad" else None
        o = F.scaled_dot_product_attention(Q, K, V, attn_mask=mask, is_causal=mask is None)
        gq, = torch.autograd.grad(o.pow(2).sum(), Q, create_graph=True)
        gk, = torch.autograd.grad(gq.sum(), K)
        return o.detach().cpu(), gk.cpu()

    expected = second_order("cpu")
    with pytest.raises(RuntimeError, match="derivative for .*attention.* is not implemented"):
        second_order("tpu")
    with sdpa_kernel(SDPBackend.MATH):
        torch.testing.assert_close(second_order("tpu"), expected)
