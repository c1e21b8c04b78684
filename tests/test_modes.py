"""debug, strict and fused modes give the same results; scalars do not
recompile; fused mode runs recorded work together."""
import os
import random

import pytest
import torch
import torch.nn.functional as F

import torchtpu
from conftest import two_devices


def program(x, y):
    z = x * 2 + y
    z.add_(1)
    w = z[1:].sum(0)
    z[0].mul_(w)
    return z, w


@pytest.mark.parametrize("name", ["debug", "strict", "fused"])
def test_modes_agree(name):
    x, y = torch.randn(4, 5), torch.randn(4, 5)
    ez, ew = program(x.clone(), y)
    with torchtpu.mode(name):
        assert torchtpu.get_mode() == name
        z, w = program(x.tpu(), y.tpu())
    assert torch.allclose(z.cpu(), ez) and torch.allclose(w.cpu(), ew)


def swap_through_views(b):
    v = b.narrow(0, 0, 1).transpose(0, 2)
    v.copy_(v.flip(0))  # its own values, read back reversed
    b[1, :, 0].mul_(0.5)  # another write: XLA then updated in place
    b[..., ::2].transpose(0, 1).add_(b[..., 1::2].transpose(0, 1).flip(0))
    return b


@pytest.mark.parametrize("name", ["debug", "strict", "fused"])
def test_writing_a_view_with_values_read_from_elsewhere_in_it(name):
    # In a fused graph the value written through a view can be computed from
    # other places of the same tensor; XLA's CPU compiler updated the tensor
    # in place while still reading it (found by a random program fuzzer).
    b = torch.arange(20.0).reshape(2, 5, 2) + 1
    with torchtpu.mode(name):
        got = swap_through_views(b.tpu()).cpu()
    assert torch.equal(got, swap_through_views(b.clone()))


def copy_from_a_clone_then_write(b):
    c = b.clone()
    c[..., ::2].copy_(b.view(-1)[:18].reshape(6, 3).clone())  # read from c's own data
    d = c.diagonal()
    d.masked_fill_(d > 0, 100.0)
    return c


def copy_from_a_transposed_clone_then_write(b):
    t = b.t().clone()
    t[..., ::2].copy_(b.t().reshape(-1)[:18].reshape(6, 3).clone())
    d = t.diagonal()
    d.copy_(d.flip(0))
    return t


@pytest.mark.parametrize("program", [copy_from_a_clone_then_write,
                                     copy_from_a_transposed_clone_then_write])
@pytest.mark.parametrize("name", ["debug", "strict", "fused"])
def test_writing_a_view_of_a_clone_with_values_read_from_its_source(name, program):
    # The same hazard where the tensor written is a whole copy of the one
    # the value is read from (in the graph, a reshape of the same data), or
    # a transposed copy (XLA folds the two transposes and the whole-tensor
    # write away, so the written buffer is the source itself).
    b = torch.arange(36.0).reshape(6, 6) - 10
    with torchtpu.mode(name):
        got = program(b.tpu()).cpu()
    assert torch.equal(got, program(b.clone()))


def train_a_little(device, seed):
    g = torch.Generator().manual_seed(seed)
    w = torch.randn(8, 8, generator=g).to(device).requires_grad_()
    x = torch.randn(16, 8, generator=g).to(device)
    opt = torch.optim.SGD([w], lr=0.1)
    losses = []
    for _ in range(8):
        opt.zero_grad()
        h = x @ w
        h[:, ::2].mul_(0.5)  # in place through a view
        loss = h.tanh().pow(2).mean()
        loss.backward()
        opt.step()
        losses.append(loss.detach())
    return w.detach().cpu(), torch.stack(losses).cpu()


@pytest.mark.parametrize("name", ["debug", "strict", "fused"])
def test_threads_that_use_the_device_at_once_get_their_own_results(name):
    # Two models trained side by side on Python threads: their ops land in
    # the device's one pending graph in whatever order the threads run, and
    # each thread's flush points (its backward's end, its optimizer step)
    # launch the other's recorded work too.
    import threading

    seeds = [1, 2, 3, 4]
    want = {s: train_a_little("cpu", s) for s in seeds}
    got, errors = {}, []

    def run(seed):
        try:
            got[seed] = train_a_little("tpu", seed)
        except Exception as e:  # surfaced below, not lost in the thread
            errors.append(e)

    with torchtpu.mode(name):
        threads = [threading.Thread(target=run, args=(s,)) for s in seeds]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert not errors, errors
    for s in seeds:
        for a, b in zip(got[s], want[s]):
            assert torch.allclose(a, b, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name", ["strict", "fused"])
def test_threads_that_write_python_numbers_do_not_deadlock(name):
    # `x[k] = i` runs its fill_ with Python's lock held, while a thread in
    # the runtime (device lock held) waited for Python's lock to name the
    # line of a new graph or compile: each waited for the other. In a child
    # process, so that a hang fails the test instead of the suite.
    import subprocess
    import sys

    code = """
import threading, torch, torchtpu
def work(k):
    x = torch.arange(8., device="tpu") + k
    for i in range(1000):
        x = x * 0.9 + x.roll(1) * 0.1
        x[k] = i
    assert x[k].item() == 999
threads = [threading.Thread(target=work, args=(k,)) for k in range(3)]
for t in threads: t.start()
for t in threads: t.join()
print("finished")
"""
    env = dict(os.environ, TORCHTPU_MODE=name)
    try:
        r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                           text=True, timeout=120)
    except subprocess.TimeoutExpired:
        pytest.fail(f"three threads writing Python numbers hung in {name} mode")
    assert r.returncode == 0 and r.stdout.strip() == "finished", r.stderr[-2000:]


def test_fused_runs_one_execution():
    x0 = torch.randn(64)
    x = x0.tpu()
    torch.tpu.synchronize()
    torchtpu.reset_metrics()
    with torchtpu.mode("fused"):
        for _ in range(10):
            x = x * 1.01 + 0.5
        s = x.sum().item()
    m = torchtpu.metrics()
    assert m["executions"] == 1, m
    assert m["ops"] == 21
    expected = x0
    for _ in range(10):
        expected = expected * 1.01 + 0.5
    assert s == pytest.approx(expected.sum().item(), rel=1e-5)


def test_new_scalar_does_not_recompile():
    x = torch.randn(8).tpu()
    (x * 0.5).cpu()
    torchtpu.reset_metrics()
    for lr in (0.1, 0.01, 0.001, 3.0):
        (x * lr).cpu()
    assert torchtpu.metrics()["compiles"] == 0


@pytest.mark.parametrize("name", ["strict", "fused"])
def test_a_scalar_that_equals_another_does_not_recompile(name):
    # A learning-rate schedule that passes the momentum (0.9) and the weight
    # decay (0): a number equal to another of the same program was one
    # parameter where it had been two, a new program at each such step.
    torch.manual_seed(0)
    model, x = torch.nn.Linear(4, 3), torch.randn(5, 4)
    lrs = [0.1, 0.2, 0.3, 0.9, 0.0, 0.4, 0.5]
    got = {}
    for device in ("cpu", "tpu"):
        m = torch.nn.Linear(4, 3).to(device)
        m.load_state_dict(model.state_dict())
        opt = torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9, fused=True)
        a = x.to(device)
        with torchtpu.mode(name):
            for k, lr in enumerate(lrs):
                if k == 2:
                    torch.tpu.synchronize()
                    misses = torchtpu.metrics()["cache_misses"]
                for group in opt.param_groups:
                    group["lr"] = lr
                m(a).square().sum().backward()
                opt.step()
                opt.zero_grad()
                # Numbers of one program that sometimes agree; a list's
                # elements are numbers of their own.
                s = torch.add(a, a, alpha=lr) * 0.5
                f = torch._foreach_add([a, a, a], [lr, 0.3, 0.5])
            got[device] = [p.detach().cpu() for p in m.parameters()] + [s.cpu()] + [t.cpu() for t in f]
            torch.tpu.synchronize()
            if device == "tpu":
                assert torchtpu.metrics()["cache_misses"] == misses
    for c, t in zip(got["cpu"], got["tpu"]):
        torch.testing.assert_close(t, c, rtol=1e-5, atol=1e-6)


def test_strict_is_asynchronous():
    x = torch.randn(256, 256).tpu()
    torch.tpu.synchronize()
    torchtpu.reset_metrics()
    for _ in range(5):
        x = x * 1.0001
    assert torchtpu.metrics()["host_syncs"] == 0
    torch.tpu.synchronize()
    assert torchtpu.metrics()["host_syncs"] == 1


def test_set_mode_and_env_names():
    prev = torchtpu.get_mode()
    torchtpu.set_mode("debug")
    assert torchtpu.get_mode() == "debug"
    torchtpu.set_mode(prev)
    with pytest.raises(ValueError):
        torchtpu.set_mode("lazy")


def test_mode_block_decorator_and_a_bare_enter():
    prev = torchtpu.get_mode()
    other = "debug" if prev != "debug" else "strict"
    with torchtpu.mode(other) as m:
        assert torchtpu.get_mode() == other
        with m:  # the same object entered again restores in order
            assert torchtpu.get_mode() == other
        assert torchtpu.get_mode() == other
    assert torchtpu.get_mode() == prev

    @torchtpu.mode(other)
    def inside():
        return torchtpu.get_mode()
    assert inside() == other and torchtpu.get_mode() == prev

    # A notebook's bare __enter__() stays in effect after the object is
    # dropped (a generator's context manager restored it when collected).
    import gc
    torchtpu.mode(other).__enter__()
    gc.collect()
    try:
        assert torchtpu.get_mode() == other
    finally:
        torchtpu.set_mode(prev)
    with pytest.raises(ValueError, match="unknown mode 'lazy'"):
        torchtpu.mode("lazy")


@pytest.mark.parametrize("name", ["strict", "fused"])
def test_in_place_updates_reuse_memory(name):
    # Each add_ donates the old buffer to its output: memory stays flat
    # while the executions run, and nothing is left held after a sync.
    x = torch.zeros(1024, 1024).tpu()
    x.add_(1)  # the 0-d input that holds the 1 is cached from here on
    torch.tpu.synchronize()
    before = torch.tpu.memory_allocated()
    torch.tpu.reset_peak_memory_stats()
    with torchtpu.mode(name):
        for _ in range(19):
            x.add_(1)
            assert torch.tpu.memory_allocated() == before
    torch.tpu.synchronize()
    assert torch.tpu.memory_allocated() == before
    assert torch.tpu.max_memory_allocated() <= before + x.numel() * 4
    assert torch.equal(x.cpu(), torch.full((1024, 1024), 20.0))


@pytest.mark.parametrize("name", ["strict", "fused"])
def test_reading_a_result_holds_it_once(name):
    # Fused mode: .cpu() of a tensor recorded but not run yet takes the
    # buffer the flush gives it (it once recorded a copy too: a second
    # output of the same value, twice the memory). A slice is still copied.
    with torchtpu.mode(name):
        x = torch.randn(256, 1024).tpu()
        torch.tpu.synchronize()
        y = x * 2
        torch.tpu.reset_peak_memory_stats()
        base = torch.tpu.memory_allocated()
        host = y.cpu()
        assert torch.tpu.max_memory_allocated() - base <= y.numel() * 4
        assert torch.equal(host, x.cpu() * 2)
        z = x + 1
        assert torch.equal(z[1:3].cpu(), x.cpu()[1:3] + 1)
        assert torch.equal(z.cpu(), x.cpu() + 1)


def test_fused_optimizer_step_peak_is_what_the_step_holds():
    # The step's outputs take the memory of the parameters and state they
    # overwrite (donated): the peak is what is held before and after the
    # step, with no moment when both count, and the scratch memory XLA
    # gives the program (its intermediates: here one parameter's worth),
    # which the peak counts as torch.cuda's counts kernels' workspaces.
    torch.manual_seed(0)
    model = torch.nn.Linear(256, 256).tpu()
    opt = torch.optim.AdamW(model.parameters())
    x = torch.randn(8, 256).tpu()
    with torchtpu.mode("fused"):
        for _ in range(3):
            opt.zero_grad()
            model(x).square().mean().backward()
            opt.step()
        model(x).square().mean().backward()
        torch.tpu.synchronize()  # nothing running: every donor is free
        held = torch.tpu.memory_allocated()
        torch.tpu.reset_peak_memory_stats()
        opt.step()
        torch.tpu.synchronize()
    after = torch.tpu.memory_allocated()
    assert after - held < 64  # this step's bias corrections: new 0-d inputs (cached)
    state_bytes = 3 * sum(p.numel() * 4 for p in model.parameters())  # and 2 moments
    assert torch.tpu.max_memory_allocated() - max(held, after) < state_bytes / 2


def training_step_peak(name, mode):
    """Peak memory of perflab's model `name` over one AdamW training step
    (after three), beyond what was allocated before it was built."""
    from torchtpu.perflab import suite_models

    torch.tpu.synchronize()
    base = torch.tpu.memory_allocated()
    with torchtpu.mode(mode):
        model, _, loss_fn = suite_models.build(name, suite_models.shapes(False, False)[name], "tpu")
        opt = torch.optim.AdamW(model.parameters())
        for step in range(4):
            if step == 3:
                torch.tpu.synchronize()
                torch.tpu.reset_peak_memory_stats()
            opt.zero_grad(True)
            loss_fn(model).backward()
            opt.step()
        torch.tpu.synchronize()
    return torch.tpu.max_memory_allocated() - base


# Fused peak over strict peak that each model stays within: 1.13 (MLP),
# 1.07 (CNN) and 1.26 (GPT) measured on the CPU plugin, whose sequential
# schedule a fused program gets (XLA's other one gives 0.96, 1.15 and 1.07,
# but holds more in an optimizer step, docs/modes.md). Fused mode is to
# become the default when these are at most 1.
FUSED_PEAK_OVER_STRICT = {"MLP": 1.2, "CNN": 1.1, "GPT": 1.3}


@pytest.mark.skipif(not torch.tpu.get_device_name().startswith("cpu"),
                    reason="the ratios are the XLA CPU plugin's")
@pytest.mark.parametrize("name", sorted(FUSED_PEAK_OVER_STRICT))
def test_fused_training_step_peak_against_strict(name):
    strict, fused = (training_step_peak(name, mode) for mode in ("strict", "fused"))
    assert fused <= FUSED_PEAK_OVER_STRICT[name] * strict, (fused, strict)


def grid_sample(x):
    return F.grid_sample(x, torch.tanh(x[..., :x.dim() - 2]), align_corners=False)


# (function, input shape, peak memory of its forward and backward in one
# fused graph, in units of the input's size)
RECOMPUTING_BACKWARDS = {
    # The gradient only (strict mode's peak too). Before their rows were
    # flagged TPU_F_RECOMPUTE, 2: XLA merged the backward's erf / tanh / exp
    # with the forward's and kept that activation-sized value alive.
    "gelu": (F.gelu, (512, 1024), 1.0),
    "gelu_tanh": (lambda x: F.gelu(x, approximate="tanh"), (512, 1024), 1.0),
    "softplus": (F.softplus, (512, 1024), 1.0),
    # 2.00, as strict mode's; 2.50 before: the forward's sigmoid of the gate
    # half (half the input's size) was kept.
    "glu": (lambda x: F.glu(x, -1), (512, 1024), 2.0),
    # The gradient and the buffer the backward's scatter-add fills (2.09 and
    # 2.34 measured; 3.09 and 4.34 before: the forward's gathered values
    # were kept. Strict mode: 4.03 and 4.09).
    "grid_sample": (grid_sample, (8, 16, 64, 64), 2.5),
    "grid_sample_3d": (grid_sample, (4, 8, 16, 32, 32), 3.0),
}


@pytest.mark.parametrize("case", RECOMPUTING_BACKWARDS)
def test_fused_backward_recomputes_instead_of_keeping_the_forwards_values(case):
    f, shape, units = RECOMPUTING_BACKWARDS[case]
    x = torch.randn(*shape).tpu().requires_grad_()
    with torchtpu.mode("strict"):  # the same lowerings, op by op
        f(x).sum().backward()
    strict = x.grad.cpu()
    with torchtpu.mode("fused"):
        for _ in range(2):  # the first compiles
            x.grad = None
            torch.tpu.synchronize()
            base = torch.tpu.memory_allocated()
            torch.tpu.reset_peak_memory_stats()
            f(x).sum().backward()
            torch.tpu.synchronize()
    # (and a few KB of small inputs: the functions' scalars)
    assert torch.tpu.max_memory_allocated() - base <= units * x.numel() * 4 + 64 * 1024
    torch.testing.assert_close(x.grad.cpu(), strict)


def test_fused_step_launched_while_backward_runs_updates_in_place():
    # A loop that reads nothing back launches the optimizer step while the
    # backward graph (long: a large batch) still reads the parameters. The
    # step still takes their memory (PJRT waits for the reads), so the
    # model's state is never held twice.
    torch.manual_seed(0)
    model = torch.nn.Linear(256, 256).tpu()
    opt = torch.optim.AdamW(model.parameters())
    x = torch.randn(4096, 256).tpu()

    def step():
        opt.zero_grad()
        model(x).square().mean().backward()
        opt.step()

    def peak(sync_after_backward):
        torch.tpu.synchronize()
        torch.tpu.reset_peak_memory_stats()
        for _ in range(5):
            opt.zero_grad()
            model(x).square().mean().backward()
            if sync_after_backward:  # nothing running: every donor is free
                torch.tpu.synchronize()
            opt.step()
        torch.tpu.synchronize()
        return torch.tpu.max_memory_allocated()

    with torchtpu.mode("fused"):
        for _ in range(3):
            step()
        # Both peaks count the backward program's scratch memory.
        donors_free = peak(True)
        donors_busy = peak(False)
    param_bytes = sum(p.numel() * 4 for p in model.parameters())
    assert donors_busy - donors_free < param_bytes / 2


@pytest.mark.parametrize("name", ["strict", "fused"])
def test_a_loop_that_reads_nothing_back_keeps_no_old_results(name):
    # Cross entropy checks its targets on the device; the check is read at
    # the next sync. Until then it must not keep each step's results (the
    # gradients) alive, nor stop the optimizer from updating in place.
    torch.manual_seed(0)
    model = torch.nn.Linear(64, 10).tpu()
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    x, t = torch.randn(32, 64).tpu(), torch.randint(0, 10, (32,)).tpu()

    def step():
        opt.zero_grad(set_to_none=True)
        torch.nn.functional.cross_entropy(model(x), t).backward()
        opt.step()

    with torchtpu.mode(name):
        for _ in range(3):
            step()
        torch.tpu.synchronize()
        before, compiles = torch.tpu.memory_allocated(), torchtpu.metrics()["compiles"]
        for _ in range(20):
            step()
        grown = torch.tpu.memory_allocated() - before
        torch.tpu.synchronize()
    assert grown < 1024, grown  # one step's gradients are 2.6 KB
    assert torchtpu.metrics()["compiles"] == compiles


def test_fused_cuts_a_loop_that_never_reads_back_at_its_period():
    # An evaluation loop that keeps its outputs and sums a metric on the
    # device has no flush point. Fused mode cuts it every few iterations at
    # the same place of the loop body (not into one graph of thousands of
    # ops that XLA takes seconds to compile, cut at another place each
    # time), so a longer run of it compiles nothing new.
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(),
                                torch.nn.Linear(32, 4)).eval()
    xs = [torch.randn(8, 16) for _ in range(5)]

    def evaluate(device, iterations):
        m = model.to(device)
        inputs = [x.to(device) for x in xs]
        outs, total = [], torch.zeros((), device=device)
        with torch.no_grad():
            for i in range(iterations):
                y = m(inputs[i % 5] * (1 + i / 64))
                total += y.relu().sum()
                outs.append(y)
        return torch.stack(outs).cpu(), total.cpu()

    with torchtpu.mode("fused"):
        evaluate("tpu", 600)  # compiles the loop's graphs
        torch.tpu.synchronize()
        m0 = torchtpu.metrics()
        got, got_total = evaluate("tpu", 1000)
        m1 = torchtpu.metrics()
    want, want_total = evaluate("cpu", 1000)
    torch.testing.assert_close(got, want)
    torch.testing.assert_close(got_total, want_total, rtol=1e-4, atol=1e-3)
    d = {k: m1[k] - m0[k] for k in ("ops", "flushes", "compiles")}
    assert d["ops"] / d["flushes"] < 100, d  # graphs of a few iterations
    assert d["compiles"] <= 2, d  # the new tail (stack and copies) at most


@pytest.mark.parametrize("name", ["strict", "fused"])
def test_failed_op_poisons_only_results_still_held(name):
    with torchtpu.mode(name):
        x = torch.arange(4.0, device="tpu")
        bad = torch.tensor([0, 9], device="tpu")
        y = x.index_select(0, bad)
        z = x.index_select(0, bad)
        z.fill_(2.0)  # overwritten before anything was read back
        u = x + 1  # not computed from the failed op
        with pytest.raises(IndexError, match="out of range"):
            torch.tpu.synchronize()
    with pytest.raises(IndexError, match="failed"):
        y.cpu()
    assert z.cpu().tolist() == [2.0, 2.0]
    assert u.cpu().tolist() == [1.0, 2.0, 3.0, 4.0]


def test_fused_failure_poisons_what_the_graph_computed_from_it():
    with torchtpu.mode("fused"):
        x = torch.arange(4.0, device="tpu")
        y = x.index_select(0, torch.tensor([0, 9], device="tpu"))
        w = y * 2 + 1  # recorded in the same graph as the failing op
        with pytest.raises(IndexError, match="out of range"):
            torch.tpu.synchronize()
    with pytest.raises(IndexError, match="failed"):
        w.cpu()


@pytest.mark.parametrize("name", ["strict", "fused"])
def test_failure_poisons_what_later_executions_computed_from_it(name):
    # Each `with` block ends in a flush: y, z and w come from three
    # executions, all launched before the error is read back.
    with torchtpu.mode(name):
        x = torch.arange(4.0, device="tpu")
        y = x.index_select(0, torch.tensor([0, 9], device="tpu"))
    with torchtpu.mode(name):
        z = y * 2
        v = x * 2
    with torchtpu.mode(name):
        w = v[:2] + z.sum()
        u = v + 1
        with pytest.raises(IndexError, match="out of range"):
            torch.tpu.synchronize()
    for t in (y, z, w):
        with pytest.raises(IndexError, match="index out of range in self"):
            t.cpu()
        with pytest.raises(IndexError, match="failed"):
            t + 1  # using it fails too, not only reading it
    assert u.cpu().tolist() == [1.0, 3.0, 5.0, 7.0]
    w.copy_(torch.ones(2))  # a whole write clears it
    assert w.cpu().tolist() == [1.0, 1.0]


@two_devices
@pytest.mark.parametrize("name", ["strict", "fused"])
def test_copy_to_another_device_reads_the_checks_it_depends_on(name):
    # Checks belong to their device: a copy of a value computed from an
    # unread one raises (or not) at the copy instead of carrying it over.
    with torchtpu.mode(name):
        x = torch.arange(4.0, device="tpu:0")
        good = x.index_select(0, torch.tensor([3, 0], device="tpu:0")) * 2
        assert good.to("tpu:1").cpu().tolist() == [6.0, 0.0]
        bad = x.index_select(0, torch.tensor([0, 9], device="tpu:0")) * 2
        with pytest.raises(IndexError, match="index out of range in self"):
            bad.to("tpu:1")
    with pytest.raises(IndexError, match="failed"):
        bad.cpu()


@pytest.mark.parametrize("name", ["strict", "fused"])
def test_a_bad_target_poisons_the_weights_it_updated(name):
    torch.manual_seed(0)
    model = torch.nn.Linear(8, 3).tpu()
    saved = {k: v.cpu() for k, v in model.state_dict().items()}
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x, bad = torch.randn(4, 8).tpu(), torch.tensor([0, 1, 2, 7]).tpu()
    with torchtpu.mode(name):
        torch.nn.functional.cross_entropy(model(x), bad).backward()
        opt.step()  # updates the weights from gradients of a clamped target
        with pytest.raises(IndexError, match="Target 7 is out of bounds"):
            torch.tpu.synchronize()
    with pytest.raises(IndexError, match="failed"):
        model.weight.cpu()
    with pytest.raises(IndexError, match="failed"):
        model(x)
    model.load_state_dict(saved)  # restoring the weights recovers
    good = torch.tensor([0, 1, 2, 1])
    want = torch.nn.functional.cross_entropy(torch.nn.functional.linear(
        x.cpu(), saved["weight"], saved["bias"]), good)
    got = torch.nn.functional.cross_entropy(model(x), good.tpu())
    assert torch.allclose(got.cpu(), want, atol=1e-6)


def test_a_graph_that_fails_to_compile_names_its_ops_and_changes_nothing(monkeypatch):
    n = random.randrange(10**5, 10**6)  # a program no cache holds
    x = torch.ones(n, device="tpu")
    w = torch.zeros(n, device="tpu")
    torch.tpu.synchronize()
    monkeypatch.setenv("TORCHTPU_ASSERT_NO_COMPILE", "1")
    with torchtpu.mode("fused"):
        w.add_(x)
        y = (x * 3).exp().sum()
        with pytest.raises(RuntimeError, match="compiling the 4 ops recorded from add to sum_all: "
                                               "a compilation was requested"):
            y.item()  # the flush: its compile fails
    monkeypatch.delenv("TORCHTPU_ASSERT_NO_COMPILE")
    # The graph never ran: the tensor it updated reads as before it (as in
    # strict mode, where the failing op changes nothing) and the one it
    # made holds the error instead of zeros.
    with pytest.raises(RuntimeError, match="failed: compiling the 4 ops"):
        y.cpu()
    assert torch.equal(w.cpu(), torch.zeros(n))
    assert x.sum().item() == n  # what the graph only read is intact


def test_a_mode_block_whose_last_flush_fails_still_restores_the_mode():
    prev = torchtpu.get_mode()
    torchtpu.set_mode("strict")  # the block's mode differs in either CI run
    x = torch.ones(1000, device="tpu")

    def block():
        with torchtpu.mode("fused"):
            return x * 3  # runs when the block ends

    block()  # compiled now, so that the next launch checks memory at once
    torch.tpu.synchronize()
    total = torch.tpu.mem_get_info()[1]
    torch.tpu.set_per_process_memory_fraction((torch.tpu.memory_allocated() + 64) / total)
    try:
        with pytest.raises(torch.OutOfMemoryError):
            block()
        assert torchtpu.get_mode() == "strict"
        # Entering a block whose flush fails changes nothing either.
        with torchtpu.mode("fused"):
            y = x * 3
            with pytest.raises(torch.OutOfMemoryError):
                with torchtpu.mode("strict"):
                    pass
            assert torchtpu.get_mode() == "fused"
    finally:
        torch.tpu.set_per_process_memory_fraction(1.0)
        torchtpu.set_mode(prev)
    assert torchtpu.get_mode() == prev


def test_debug_mode_counts_a_host_sync_per_op():
    x = torch.randn(16).tpu()
    torch.tpu.synchronize()
    torchtpu.reset_metrics()
    with torchtpu.mode("debug"):
        y = x[torch.tensor([1, 2]).tpu()] * 2  # an indexed read checks its bounds
    assert torchtpu.metrics()["host_syncs"] == torchtpu.metrics()["executions"]
    assert torch.equal(y.cpu(), x.cpu()[[1, 2]] * 2)
