"""Autograd on tpu: the engine, hooks, higher-order gradients, gradcheck."""
import pytest
import torch

from conftest import NoFallback, to_tpu, two_devices


def test_grad_accumulates_and_retain_graph():
    x = torch.randn(4, 3, requires_grad=True)
    t = to_tpu(x)
    for v in (x, t):
        y = (v * v).sum()
        y.backward(retain_graph=True)
        y.backward()
    torch.testing.assert_close(t.grad.cpu(), x.grad)
    assert t.grad.device.type == "tpu"


def test_backward_runs_on_the_calling_thread():
    # As for a lazy device: no hand-off to the autograd engine's device
    # thread; another thread that turns threading back on gets it again.
    import threading

    def threads_seen():
        seen = []
        x = torch.ones(3, device="tpu", requires_grad=True)
        y = x * 2
        y.register_hook(lambda g: seen.append(threading.get_ident()))
        y.sum().backward()
        torch.testing.assert_close(x.grad.cpu(), torch.full((3,), 2.0))
        return seen

    assert threads_seen() == [threading.get_ident()]
    other = []

    def run():
        with torch.autograd.set_multithreading_enabled(True):
            other.extend(threads_seen())
            other.append(threading.get_ident())
    t = threading.Thread(target=run)
    t.start()
    t.join()
    assert len(other) == 2 and other[0] != other[1]


def test_autograd_grad_and_grad_tensors():
    x = torch.randn(5, requires_grad=True)
    t = to_tpu(x)
    g = torch.randn(5)
    for v, gv in ((x, g), (t, g.tpu())):
        (out,) = torch.autograd.grad(v.exp() * 2, v, grad_outputs=gv)
        if v is x:
            expected = out
    torch.testing.assert_close(out.cpu(), expected)


def test_double_backward():
    x = torch.randn(6, dtype=torch.float64, requires_grad=True)
    t = to_tpu(x)
    results = []
    for v in (x, t):
        (g,) = torch.autograd.grad((v ** 3).sum(), v, create_graph=True)
        (gg,) = torch.autograd.grad(g.sum(), v)
        results.append(gg)
    torch.testing.assert_close(results[1].cpu(), results[0])


def test_hooks_and_views():
    x = torch.randn(3, 4, requires_grad=True)
    t = to_tpu(x)
    seen = []
    for v in (x, t):
        h = v.register_hook(lambda g: g * 2)
        w = v[:, 1:3].t()
        w.register_hook(lambda g: seen.append(g.device.type) or g)
        (w * w).sum().backward()
        h.remove()
    assert seen == ["cpu", "tpu"]
    torch.testing.assert_close(t.grad.cpu(), x.grad)


def test_no_grad_detach_and_inplace():
    t = torch.randn(4, device="tpu", requires_grad=True)
    with torch.no_grad():
        y = t * 2
    assert not y.requires_grad
    d = t.detach()
    d.add_(1)  # shares storage: visible through t
    assert torch.equal(d.cpu(), t.detach().cpu())
    with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
        t.add_(1)


def test_custom_function():
    class Square(torch.autograd.Function):
        @staticmethod
        def forward(ctx, v):
            ctx.save_for_backward(v)
            return v * v

        @staticmethod
        def backward(ctx, g):
            (v,) = ctx.saved_tensors
            return 2 * v * g

    x = torch.randn(5, requires_grad=True)
    t = to_tpu(x)
    for v in (x, t):
        Square.apply(v).sum().backward()
    torch.testing.assert_close(t.grad.cpu(), x.grad)


def test_gradcheck_float64():
    x = torch.randn(3, 4, dtype=torch.float64, device="tpu", requires_grad=True)
    w = torch.randn(4, 2, dtype=torch.float64, device="tpu", requires_grad=True)
    with NoFallback():
        assert torch.autograd.gradcheck(lambda a, b: torch.tanh(a @ b).sum(0), (x, w))


@two_devices
def test_backward_across_devices():
    a = torch.randn(3, 3, requires_grad=True)
    b = torch.randn(3, 3, requires_grad=True)
    ta, tb = to_tpu(a, torch.device("tpu:0")), to_tpu(b, torch.device("tpu:1"))
    (a @ b.relu()).sum().backward()
    (ta @ tb.relu().to("tpu:0")).sum().backward()
    assert tb.grad.device == torch.device("tpu:1")
    torch.testing.assert_close(ta.grad.cpu(), a.grad)
    torch.testing.assert_close(tb.grad.cpu(), b.grad)


def test_zero_gradients_are_zero_tensors():
    # sign's gradient is a ZeroTensor (no memory): made on the device, no
    # CPU fallback; it behaves as zeros wherever it flows.
    x = torch.randn(5, requires_grad=True)
    t = to_tpu(x)
    with NoFallback():
        (t.sign() * 3 + t.abs()).sum().backward()
        z = torch.ops.aten._efficientzerotensor([2, 3], device="tpu")
        assert z._is_zerotensor() and z.device.type == "tpu"
        assert torch.equal((z + 1).cpu(), torch.ones(2, 3))
        assert torch.equal(z.t().contiguous().cpu(), torch.zeros(3, 2))
    (x.sign() * 3 + x.abs()).sum().backward()
    assert torch.equal(t.grad.cpu(), x.grad)


def test_forward_mode_and_functorch_transforms():
    # jvp, jacfwd (forward-mode AD: zero tangents are ZeroTensors), jacrev,
    # hessian and per-sample gradients with vmap, against CPU.
    from torch.func import functional_call, grad, hessian, jacfwd, jacrev, jvp, vmap
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.GELU(), torch.nn.LayerNorm(8),
                                torch.nn.Linear(8, 3))
    x, v = torch.randn(5, 4), torch.randn(5, 4)

    def run(m, x, v):
        params = dict(m.named_parameters())
        per_sample = vmap(grad(lambda p, a: functional_call(m, p, (a[None],)).pow(2).sum()),
                          in_dims=(None, 0))(params, x)
        return [jvp(m, (x,), (v,))[1], jacfwd(lambda a: m(a).sum(0))(x[:2]),
                jacrev(lambda a: m(a).sum(0))(x[:2]), hessian(lambda a: m(a).pow(2).sum())(x[0]),
                per_sample["0.weight"]]

    expected = run(model, x, v)
    with NoFallback():
        actual = run(model.to("tpu"), to_tpu(x), to_tpu(v))
    for e, a in zip(expected, actual):
        torch.testing.assert_close(a.cpu(), e, atol=1e-4, rtol=1e-4)


def test_forward_mode_with_an_operand_that_has_no_tangent():
    # The missing tangent is a ZeroTensor, which has no memory; dot, vdot,
    # mul.Scalar and add.Scalar reach the device's kernels with it (CPU's
    # read the ZeroTensor bit): they raised "memory was not allocated by
    # torchtpu".
    from torch.func import hessian, jvp
    w = torch.tensor([1.0, 2.0, 3.0])

    def run(w, one):
        return [jvp(lambda x: x @ w, (one,), (one,))[1],
                jvp(lambda x: torch.add(x, w, alpha=2), (one,), (one,))[1],
                jvp(lambda x: torch.addcmul(x, w, w, value=0.5), (one,), (one,))[1],
                jvp(lambda x: torch.vdot(w, x), (one,), (one,))[1],
                hessian(lambda x: (x.tanh() @ w).exp())(one)]

    expected = run(w, torch.ones(3))
    with NoFallback():
        actual = run(w.to("tpu"), torch.ones(3, device="tpu"))
    for e, a in zip(expected, actual):
        torch.testing.assert_close(a.cpu(), e)


def test_attention_under_vmap_and_forward_mode():
    # The one-program attention kernel has no batching rule and no forward
    # formula: under torch.func's transforms and forward_ad duals attention
    # takes the math path (vmap raised "Batching rule not implemented").
    import torch.autograd.forward_ad as fwAD
    import torch.nn.functional as F
    from torch.func import grad, jvp, vmap
    from torch.nn.attention import SDPBackend, sdpa_kernel

    def attend(a):
        return F.scaled_dot_product_attention(a, a, a, is_causal=True)

    def run(q, t):
        per_sample = vmap(grad(lambda a: attend(a).pow(2).sum()))(q)
        with fwAD.dual_level():
            tangent = fwAD.unpack_dual(attend(fwAD.make_dual(q[0], t))).tangent
        return [vmap(attend)(q), per_sample, jvp(attend, (q[0],), (t,))[1], tangent]

    torch.manual_seed(0)
    q, t = torch.randn(3, 2, 2, 5, 4), torch.randn(2, 2, 5, 4)
    with sdpa_kernel(SDPBackend.MATH):  # CPU's fused kernel has no forward formula
        expected = run(q, t)
    actual = run(q.to("tpu"), t.to("tpu"))
    for e, a in zip(expected, actual):
        torch.testing.assert_close(a.cpu(), e, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("reentrant", [False, True])
def test_checkpoint_replays_dropout(reentrant):
    # Activation checkpointing recomputes the forward in backward with the
    # device's RNG state restored (it reads torch.tpu._initialized, as
    # torch.cuda's, to decide whether to save it): the recomputed dropout
    # masks, and so the gradients, equal an ordinary forward's.
    from torch.utils.checkpoint import checkpoint
    torch.manual_seed(0)
    lin = torch.nn.Linear(8, 8).to("tpu")
    x = torch.randn(16, 8, device="tpu", requires_grad=True)

    def f(t):
        return torch.nn.functional.dropout(lin(t), 0.5, training=True).relu()

    grads = []
    for use_checkpoint in (True, False):
        torch.manual_seed(3)
        y = checkpoint(f, x, use_reentrant=reentrant) if use_checkpoint else f(x)
        torch.rand(4, device="tpu")  # more random ops before backward
        (y * torch.arange(8.0, device="tpu")).sum().backward()
        grads.append((y.detach().cpu(), x.grad.cpu(), lin.weight.grad.cpu()))
        x.grad = lin.weight.grad = lin.bias.grad = None
    for a, b in zip(*grads):
        torch.testing.assert_close(a, b)
