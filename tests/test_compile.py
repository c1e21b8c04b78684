"""torch.compile(backend="tpu"): each captured graph, forward and backward,
is recorded in fused mode (one program, or part of fused mode's graph) and
gives what eager mode gives."""
import copy
import operator

import pytest
import torch
import torch.nn.functional as F

import torchtpu
from torchtpu.perflab import models, suite_models


def counters():
    m = torchtpu.metrics()
    return m["executions"], m["compiles"]


def train(model, loss_fn, steps):
    # SGD: AdamW would turn the rounding noise in the gradient of a bias
    # that batch norm follows (zero in exact arithmetic) into whole steps.
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    losses = []
    for _ in range(steps):
        opt.zero_grad(set_to_none=True)
        loss = loss_fn()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


@pytest.mark.parametrize("name", ["MLP", "CNN", "GPT"])
def test_compiled_training_matches_eager(name):
    if name == "MLP":
        net, x, y = models.MLP(), torch.randn(8, 64), torch.randint(0, 10, (8,))
    elif name == "CNN":
        net, x, y = models.CNN(), torch.randn(2, 3, 16, 16), torch.randint(0, 10, (2,))
    else:
        net = models.GPT(vocab=32, dim=32, heads=2, layers=1, block=8)
        x, y = torch.randint(0, 32, (2, 8)), torch.randint(0, 32, (2, 8))
    x, y = x.tpu(), y.tpu()
    eager = net.tpu()
    compiled = copy.deepcopy(eager)
    run = torch.compile(compiled, backend="tpu")
    if name == "GPT":
        step_eager, step_compiled = (lambda: eager(x, y)[1]), (lambda: run(x, y)[1])
    else:
        step_eager = lambda: F.cross_entropy(eager(x), y)  # noqa: E731
        step_compiled = lambda: F.cross_entropy(run(x), y)  # noqa: E731
    expected = train(eager, step_eager, 3)
    got = train(compiled, step_compiled, 3)
    assert got == pytest.approx(expected, rel=1e-4, abs=1e-5)
    assert expected[-1] < expected[0]  # it trained
    for (pname, a), b in zip(eager.named_parameters(), compiled.parameters()):
        torch.testing.assert_close(b.cpu(), a.cpu(), rtol=1e-4, atol=1e-5, msg=pname)
    for a, b in zip(eager.buffers(), compiled.buffers()):  # batch norm's running statistics
        torch.testing.assert_close(b.cpu(), a.cpu(), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("outside", ["strict", "fused", "debug"])
def test_forward_and_backward_are_one_program_each(outside):
    # In fused mode they join the graph being recorded instead, which the
    # end of backward() launches: one program for both.
    fused = outside == "fused"
    lin1, lin2 = torch.nn.Linear(16, 32).tpu(), torch.nn.Linear(32, 4).tpu()

    def loss_of(x, y):
        return F.cross_entropy(lin2(torch.relu(lin1(x))).tanh(), y)

    compiled = torch.compile(loss_of, backend="tpu")
    x, y = torch.randn(8, 16).tpu(), torch.randint(0, 4, (8,)).tpu()
    seed = torch.ones((), device="tpu")  # made here: backward() would make it in the count
    with torchtpu.mode(outside):
        compiled(x, y).backward(seed)  # traces, compiles (what the count below runs)
        for p in (*lin1.parameters(), *lin2.parameters()):
            p.grad = None
        torch.tpu.synchronize()
        runs, compiles = counters()
        loss = compiled(x, y)
        assert counters() == (runs + (0 if fused else 1), compiles)  # nine ops, one program
        assert torchtpu.get_mode() == outside  # the graph's own mode is fused
        loss.backward(seed)  # the gradients are taken, not added: no op of their own
        assert counters() == (runs + (1 if fused else 2), compiles)
    params = (lin1.weight, lin1.bias, lin2.weight, lin2.bias)
    grads = [p.grad.cpu() for p in params]
    lin1.cpu(), lin2.cpu()
    for p in params:
        p.grad = None
    expected = loss_of(x.cpu(), y.cpu())
    expected.backward()
    torch.testing.assert_close(loss.cpu(), expected.detach())
    for p, g in zip(params, grads):
        torch.testing.assert_close(g, p.grad, rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("outside", ["strict", "fused"])
def test_graph_break_splits_the_function(outside):
    def f(x):
        y = (x * 2).sin()
        torch._dynamo.graph_break()
        return (y + 1).cos().sum(0)

    x = torch.randn(5, 3)
    run = torch.compile(f, backend="tpu")
    with torchtpu.mode(outside):
        torch.testing.assert_close(run(x.tpu()).cpu(), f(x))  # traces
        torch.tpu.synchronize()
        runs, compiles = counters()
        torch.testing.assert_close(run(x.tpu()).cpu(), f(x))
    # A program for each side; in fused mode both join one graph, which
    # the read launches.
    assert counters() == (runs + (1 if outside == "fused" else 2), compiles)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_attention_layer_under_autocast(dtype):
    # The fused attention kernels' results have the layout the traced graph
    # was promised (it views them), forward and backward.
    layer = torch.nn.TransformerEncoderLayer(32, 4, 64, dropout=0.0, batch_first=True)
    x = torch.randn(2, 8, 32)
    compiled_layer = copy.deepcopy(layer).tpu()
    run = torch.compile(compiled_layer, backend="tpu")
    with torch.autocast("tpu", dtype=dtype, enabled=dtype != torch.float32):
        got = run(x.tpu())
        got.float().square().mean().backward()
    with torch.autocast("cpu", dtype=dtype, enabled=dtype != torch.float32):
        expected = layer(x)
        expected.float().square().mean().backward()
    tol = {"rtol": 2e-2, "atol": 2e-2} if dtype == torch.bfloat16 else {"rtol": 1e-4, "atol": 1e-5}
    torch.testing.assert_close(got.cpu(), expected, **tol)
    for (name, p), q in zip(layer.named_parameters(), compiled_layer.parameters()):
        torch.testing.assert_close(q.grad.cpu(), p.grad, **tol, msg=name)


def test_attention_with_dynamic_shapes():
    # With dynamic shapes the attention kernel's choice sees fake tensors of
    # symbolic sizes; it read them as plain ints and raised "Cannot call
    # numel() on tensor with symbolic sizes" at the second batch size.
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True)
    run = torch.compile(copy.deepcopy(layer).tpu(), backend="tpu")
    for batch in (2, 3, 4):  # Dynamo makes the batch dim dynamic at the second
        x = torch.randn(batch, 5, 8)
        torch.testing.assert_close(run(x.tpu()).cpu(), layer(x), rtol=1e-4, atol=1e-5)
    attend = torch.compile(lambda q: F.scaled_dot_product_attention(q, q, q, is_causal=True),
                           backend="tpu", dynamic=True)
    q = torch.randn(1, 2, 5, 4)
    torch.testing.assert_close(attend(q.tpu()).cpu(),
                               F.scaled_dot_product_attention(q, q, q, is_causal=True))


def checking_backend(mismatches):
    """A backend that runs each graph node by node in fused mode and notes
    every result whose strides differ from what the trace's meta kernels
    promised."""
    from torch._dynamo.backends.common import aot_autograd

    def compiler(gm, example_inputs):
        class Checked(torch.fx.Interpreter):
            def run_node(self, node):
                result = super().run_node(node)
                fake = node.meta.get("val")
                if (isinstance(result, torch.Tensor) and isinstance(fake, torch.Tensor)
                        and result.numel() > 1 and result.stride() != fake.stride()):
                    source = node.args[0] if node.target is operator.getitem else node
                    mismatches.add((str(source.target), result.stride(), fake.stride()))
                return result

        def run(args):
            with torchtpu.mode("fused"):
                return Checked(gm).run(*args)

        run._boxed_call = True
        return run

    return aot_autograd(fw_compiler=compiler, bw_compiler=compiler)


def test_results_have_the_strides_the_trace_was_promised():
    mismatches = set()
    backend = checking_backend(mismatches)
    for name in suite_models.MODELS:
        model, _, loss_fn = suite_models.build(name, suite_models.shapes(False, True)[name], "tpu")
        loss_fn(torch.compile(model, backend=backend)).backward()
    layer = torch.nn.TransformerEncoderLayer(32, 4, 64, dropout=0.1, batch_first=True).tpu()
    torch.compile(layer, backend=backend)(torch.randn(2, 8, 32).tpu()).sum().backward()
    lstm = torch.nn.LSTM(8, 16, batch_first=True).tpu()
    torch.compile(lstm, backend=backend)(torch.randn(2, 5, 8).tpu())[0].sum().backward()
    emb = torch.nn.Sequential(torch.nn.Embedding(10, 8), torch.nn.LayerNorm(8),
                              torch.nn.GELU()).tpu()
    torch.compile(emb, backend=backend)(torch.randint(0, 10, (3, 4)).tpu()).sum().backward()

    def spectral(a, x):  # column-major linalg results, fft's transformed dim inner
        inv = torch.linalg.inv(a @ a.mT + 4 * torch.eye(4, device=a.device))
        return (inv.mT.reshape(-1).sum() + torch.linalg.qr(a)[0].sum() +
                torch.fft.rfft(x, dim=1).abs().sum())
    a, x = torch.randn(2, 4, 4).tpu().requires_grad_(), torch.randn(3, 8, 5).tpu().requires_grad_()
    torch.compile(spectral, backend=backend)(a, x).backward()
    cnn = torch.nn.Sequential(  # channels-last: conv's results are row-major on tpu
        torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.BatchNorm2d(8), torch.nn.ReLU(),
        torch.nn.MaxPool2d(2), torch.nn.GroupNorm(2, 8), torch.nn.Upsample(scale_factor=2),
        torch.nn.AvgPool2d(2), torch.nn.AdaptiveAvgPool2d(2)).tpu().to(memory_format=torch.channels_last)
    image = torch.randn(2, 3, 8, 8).tpu().contiguous(memory_format=torch.channels_last)
    torch.compile(cnn, backend=backend)(image.requires_grad_()).sum().backward()
    assert not mismatches


# Ops whose results on a transposed or channels-last input were row-major on
# tpu, where CPU and the meta kernels keep the input's layout: a compiled
# reshape of the result (traced as a view) raised, and so did an eager .view().
LAYOUT_KEEPING_OPS = {
    "flip": lambda x: x.flip(0),
    "rot90": lambda x: x.rot90(),
    "sort": lambda x: torch.sort(x, 0)[0],
    "argsort": lambda x: x.argsort(0),
    "glu": lambda x: torch.nn.functional.glu(x, 0),
    "mse_loss": lambda x: torch.nn.functional.mse_loss(x, x * 2, reduction="none"),
    "huber_loss": lambda x: torch.nn.functional.huber_loss(x, x * 2, reduction="none"),
    "index_fill": lambda x: x.index_fill(1, torch.tensor([0], device=x.device), 1.0),
    "hflip_image": lambda x: x.flip(3),
    "pixel_unshuffle": lambda x: torch.nn.functional.pixel_unshuffle(x, 2),
    "pixel_shuffle": lambda x: torch.nn.functional.pixel_shuffle(x, 2),
}


@pytest.mark.parametrize("name", sorted(LAYOUT_KEEPING_OPS))
def test_results_of_a_non_contiguous_input_keep_its_layout(name):
    op = LAYOUT_KEEPING_OPS[name]
    image = name in ("hflip_image", "pixel_unshuffle", "pixel_shuffle")
    x = (torch.randn(2, 8, 4, 4).contiguous(memory_format=torch.channels_last) if image
         else torch.randn(4, 6).t())
    flatten = lambda x: op(x).permute(0, 2, 3, 1).reshape(2, -1) if image else op(x).t().reshape(-1)
    expected = flatten(x)
    assert op(x.tpu()).stride() == op(x).stride()
    torch._dynamo.reset()
    assert torch.equal(torch.compile(flatten, backend="tpu")(x.tpu()).cpu(), expected)


def test_inference_and_a_new_batch_size():
    net = models.MLP().tpu().eval()
    run = torch.compile(net, backend="tpu")
    with torch.no_grad():
        for batch in (4, 7, 5):  # the second size makes Dynamo's graph dynamic
            x = torch.randn(batch, 64)
            torch.testing.assert_close(run(x.tpu()).cpu(), net.cpu()(x), rtol=1e-5, atol=1e-5)
            net.tpu()


def test_in_place_update_of_an_input_reaches_the_caller():
    @torch.compile(backend="tpu")
    def bump(x, y):
        x.add_(y)
        return x.sum()

    x, y = torch.randn(6), torch.randn(6)
    tx = x.tpu()
    total = bump(tx, y.tpu())
    torch.testing.assert_close(tx.cpu(), x + y)
    torch.testing.assert_close(total.cpu(), (x + y).sum())


def test_mismatched_inputs_raise_and_leave_the_mode():
    @torch.compile(backend="tpu")
    def product(a, b):
        return a @ b

    before = torchtpu.get_mode()
    with pytest.raises(RuntimeError, match="size|shape"):
        product(torch.randn(3, 4).tpu(), torch.randn(5, 2).tpu())
    assert torchtpu.get_mode() == before
    with pytest.raises(RuntimeError, match="device"):
        product(torch.randn(3, 4).tpu(), torch.randn(4, 2))
    a, b = torch.randn(3, 4), torch.randn(4, 2)
    torch.testing.assert_close(product(a.tpu(), b.tpu()).cpu(), a @ b)  # still usable


@pytest.mark.parametrize("kwargs", [{"mode": "max-autotune"}, {"options": {"trace.enabled": True}}])
def test_inductor_settings_are_refused(kwargs):
    run = torch.compile(lambda x: x + 1, backend="tpu", **kwargs)
    with pytest.raises(RuntimeError, match="ValueError: torch.compile\\(backend='tpu'\\)"):
        run(torch.ones(2).tpu())
