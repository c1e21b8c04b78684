"""Recurrent layers against CPU: nn.LSTM, nn.GRU, nn.LSTMCell and nn.GRUCell
run the fused cells (_thnn_fused_lstm_cell, _thnn_fused_gru_cell and their
backward ops) on every non-CPU device; CPU runs its own cells, so each
test compares outputs, final states and every gradient with CPU's."""
import copy

import pytest
import torch
import torch.nn as nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from conftest import TPU, NoFallback, assert_same

A = torch.ops.aten
TOL = {torch.float32: dict(atol=2e-5, rtol=2e-5),
       torch.bfloat16: dict(atol=3e-2, rtol=3e-2),
       torch.float16: dict(atol=3e-3, rtol=3e-3)}


def run_both(module, *inputs, call=lambda m, *xs: m(*xs)):
    """call(module, *inputs) on CPU and call(a tpu copy, *tpu copies): each
    side's outputs (flattened) and the gradients of its inputs and
    parameters for one upstream gradient per output."""
    module.zero_grad(set_to_none=True)  # (a copy does not take its gradients)
    tpu_module = copy.deepcopy(module).to(TPU)
    sides = []
    for m, device in ((module, "cpu"), (tpu_module, TPU)):
        xs = [x.detach().to(device).requires_grad_(x.is_floating_point()) for x in inputs]
        torch.manual_seed(1)
        with NoFallback() if device == TPU else torch.enable_grad():
            outs = flatten(call(m, *xs))
            grads = [torch.randn(o.shape).to(o.dtype).to(device) for o in outs]
            torch.autograd.backward(outs, grads)
        params = [p.grad for p in m.parameters()]
        sides.append((outs, [x.grad for x in xs if x.requires_grad], params))
    return sides


def flatten(out):
    if isinstance(out, torch.Tensor):
        return [out]
    return [t for o in out for t in flatten(o)]


def assert_sides_match(sides, tol):
    (cpu_outs, cpu_xg, cpu_pg), (outs, xg, pg) = sides
    assert_same([o.detach() for o in cpu_outs], [o.detach() for o in outs], **tol)
    assert_same(cpu_xg, xg, **tol)
    assert_same(cpu_pg, pg, **tol)


@pytest.mark.parametrize("kind", ["LSTM", "GRU", "RNN"])  # (RNN: ordinary ops, no fused cell)
@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("bidirectional", [False, True])
def test_layers(kind, bias, bidirectional):
    torch.manual_seed(0)
    m = getattr(nn, kind)(5, 7, num_layers=2, bias=bias, batch_first=True,
                          bidirectional=bidirectional)
    x = torch.randn(3, 4, 5)
    assert_sides_match(run_both(m, x), TOL[torch.float32])


@pytest.mark.parametrize("kind", ["LSTM", "GRU"])
def test_initial_state_and_no_batch(kind):
    torch.manual_seed(0)
    m = getattr(nn, kind)(4, 6)
    x, h0 = torch.randn(5, 2, 4), torch.randn(1, 2, 6)
    state = (h0, torch.randn(1, 2, 6)) if kind == "LSTM" else h0
    if kind == "LSTM":
        sides = run_both(m, x, *state, call=lambda m, x, h, c: m(x, (h, c)))
    else:
        sides = run_both(m, x, state)
    assert_sides_match(sides, TOL[torch.float32])
    # An unbatched sequence (no batch dim).
    assert_sides_match(run_both(m, torch.randn(5, 4)), TOL[torch.float32])


def test_lstm_projection():
    torch.manual_seed(0)
    m = nn.LSTM(5, 8, proj_size=3, batch_first=True)
    assert_sides_match(run_both(m, torch.randn(2, 6, 5)), TOL[torch.float32])


@pytest.mark.parametrize("kind", ["LSTM", "GRU"])
def test_packed_sequence(kind):
    # Sequences of different lengths, packed: gradients through the packing.
    torch.manual_seed(0)
    m = getattr(nn, kind)(3, 4, batch_first=True)
    lengths = torch.tensor([5, 3, 1])

    def call(m, x):
        out, _ = m(pack_padded_sequence(x, lengths, batch_first=True))
        return pad_packed_sequence(out, batch_first=True)[0]

    assert_sides_match(run_both(m, torch.randn(3, 5, 3), call=call), TOL[torch.float32])


@pytest.mark.parametrize("kind", ["LSTMCell", "GRUCell"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16], ids=str)
def test_cells(kind, dtype):
    torch.manual_seed(0)
    m = getattr(nn, kind)(6, 5).to(dtype)
    x, h = torch.randn(4, 6).to(dtype), torch.randn(4, 5).to(dtype)
    if kind == "LSTMCell":
        sides = run_both(m, x, h, torch.randn(4, 5).to(dtype), call=lambda m, x, h, c: m(x, (h, c)))
    else:
        sides = run_both(m, x, h)
    assert_sides_match(sides, TOL[dtype])


def test_only_one_state_has_a_gradient():
    # A loss on hy alone (cy's gradient undefined) and on cy alone.
    torch.manual_seed(0)
    m = nn.LSTMCell(3, 4)
    for pick in (0, 1):
        sides = run_both(m, torch.randn(2, 3), call=lambda m, x: m(x)[pick])
        assert_sides_match(sides, TOL[torch.float32])


def test_double_backward():
    # Under create_graph the cells' backward is PyTorch's differentiable
    # composite of ordinary ops; gradients of gradients match CPU's.
    torch.manual_seed(0)
    m = nn.GRUCell(3, 4)
    results = []
    for device in ("cpu", TPU):
        mm = copy.deepcopy(m).to(device)
        x = torch.randn(2, 3, generator=torch.Generator().manual_seed(2)).to(device)
        x.requires_grad_()
        (g,) = torch.autograd.grad(mm(x).pow(2).sum(), x, create_graph=True)
        g.sum().backward()
        results.append((g.detach(), x.grad))
    assert_same(results[0][0], results[1][0], **TOL[torch.float32])
    assert_same(results[0][1], results[1][1], **TOL[torch.float32])


def test_bad_shapes_are_refused():
    g = torch.randn(2, 8, device=TPU)
    with pytest.raises(RuntimeError, match="hidden_gates"):
        A._thnn_fused_lstm_cell(g, torch.randn(2, 4, device=TPU), torch.randn(2, 2, device=TPU))
    with pytest.raises(RuntimeError, match="'cx'"):
        A._thnn_fused_lstm_cell(g, g, torch.randn(2, 3, device=TPU))
    with pytest.raises(RuntimeError, match="input_bias"):
        A._thnn_fused_gru_cell(torch.randn(2, 6, device=TPU), torch.randn(2, 6, device=TPU),
                               torch.randn(2, 2, device=TPU), torch.randn(5, device=TPU),
                               torch.randn(5, device=TPU))
    with pytest.raises(RuntimeError, match="workspace"):
        A._thnn_fused_gru_cell_backward(torch.randn(2, 2, device=TPU),
                                        torch.randn(2, 8, device=TPU), True)
    with pytest.raises(NotImplementedError):
        i = torch.ones(2, 8, dtype=torch.int32, device=TPU)
        A._thnn_fused_lstm_cell(i, i, torch.ones(2, 2, dtype=torch.int32, device=TPU))
