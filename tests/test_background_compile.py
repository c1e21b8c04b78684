"""Fused mode compiles in the background: a flush whose program is not in
memory hands it to the compile thread and returns; reads and synchronize
wait for it, and its errors surface there, once, naming the ops."""
import random

import pytest
import torch

import torchtpu


def fresh_size():
    return random.randrange(10**5, 10**6)  # a program no cache holds


def train(n, steps, background, monkeypatch):
    monkeypatch.setenv("TORCHTPU_BACKGROUND_COMPILE", "1" if background else "0")
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(n, 16), torch.nn.Tanh(), torch.nn.Linear(16, 1)).tpu()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    x = torch.randn(8, n).tpu()
    losses = []
    with torchtpu.mode("fused"):
        for _ in range(steps):
            opt.zero_grad()
            loss = model(x).square().mean()
            loss.backward()
            opt.step()
            losses.append(loss)  # read after the loop: the host runs ahead
        losses = [v.item() for v in losses]
    return losses, [p.detach().cpu() for p in model.parameters()]


def test_training_gives_the_same_results_as_compiling_at_the_flush(monkeypatch):
    n = random.randrange(100, 1000)
    torchtpu.reset_metrics()
    losses, params = train(n, 4, True, monkeypatch)
    # forward and backward, optimizer step: compiled, or loaded from disk
    assert torchtpu.metrics()["cache_misses"] >= 2, torchtpu.metrics()
    want_losses, want_params = train(n, 4, False, monkeypatch)
    assert losses == want_losses
    for p, q in zip(params, want_params):
        assert torch.equal(p, q)


def test_a_flush_does_not_wait_for_its_compile(monkeypatch):
    x = torch.ones(fresh_size(), device="tpu", requires_grad=True)
    torch.tpu.synchronize()
    monkeypatch.setenv("TORCHTPU_ASSERT_NO_COMPILE", "1")
    with torchtpu.mode("fused"):
        loss = (x * 2).exp().sum()
        loss.backward()  # flushes: the compile fails on the compile thread
        grad = x.grad * 1  # recorded on top of the program that failed (and fails too)
        with pytest.raises(RuntimeError, match=r"compiling the \d+ ops recorded from mul to "):
            torch.tpu.synchronize()
    monkeypatch.delenv("TORCHTPU_ASSERT_NO_COMPILE")
    torch.tpu.synchronize()  # raised once
    for t in (loss, grad):
        with pytest.raises(RuntimeError, match="computation that failed: compiling"):
            t.cpu()
    assert x.detach().sum().item() == x.numel()  # what it only read is intact


def test_a_read_raises_the_failure_and_synchronize_does_not_again(monkeypatch):
    x = torch.ones(fresh_size(), device="tpu")
    torch.tpu.synchronize()
    monkeypatch.setenv("TORCHTPU_ASSERT_NO_COMPILE", "1")
    with torchtpu.mode("fused"):
        y = (x + 1).sum()
        with pytest.raises(RuntimeError, match="TORCHTPU_ASSERT_NO_COMPILE"):
            y.item()
    monkeypatch.delenv("TORCHTPU_ASSERT_NO_COMPILE")
    torch.tpu.synchronize()



def test_graphs_that_fail_to_launch_change_nothing_and_raise_once(monkeypatch):
    # The first graph cannot compile; the second, whose program is cached,
    # reads its result and so cannot launch either. Both are undone at the
    # next sync, newest first: the tensor both updated reads as before the
    # first, the one the first made holds its error, and that error is
    # raised once, whether the compile thread had finished or not.
    n = fresh_size()
    x = torch.ones(n, device="tpu")
    w = torch.full((n,), 5.0, device="tpu")
    other = torch.ones(n, device="tpu")
    with torchtpu.mode("fused"):
        other.add_(x)  # compiles the program of the second graph
    torch.tpu.synchronize()
    monkeypatch.setenv("TORCHTPU_ASSERT_NO_COMPILE", "1")
    with torchtpu.mode("fused"):  # each block ends with a flush
        w.mul_(2)
        g = x * 3
    with torchtpu.mode("fused"):
        w.add_(g)
    with pytest.raises(RuntimeError, match="compiling the 2 ops recorded from mul to mul"):
        torch.tpu.synchronize()
    monkeypatch.delenv("TORCHTPU_ASSERT_NO_COMPILE")
    torch.tpu.synchronize()  # raised once: the second graph's failure is the first's
    assert torch.equal(w.cpu(), torch.full((n,), 5.0))
    with pytest.raises(RuntimeError, match="computation that failed: compiling"):
        g.cpu()
    assert torch.equal(other.cpu(), torch.full((n,), 2.0))
