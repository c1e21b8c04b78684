"""Bad input raises PyTorch's exception type; the process and the device go
on working afterwards."""
import inspect
import os
import subprocess
import sys

import pytest
import torch

import torchtpu
from conftest import check_error, two_devices


def still_works():
    assert (torch.ones(3, device="tpu") * 2).sum().item() == 6.0


def run_python(code, **env):
    """Runs `code` in a new Python process with `env` added to the environment."""
    return subprocess.run([sys.executable, "-c", code], env=dict(os.environ, **env),
                          capture_output=True, text=True)


def test_shape_mismatch():
    err, _ = check_error(torch.add, torch.ones(2, 3), torch.ones(4))
    assert "must match the size of tensor b (4)" in str(err)
    still_works()


@pytest.mark.parametrize("op", [torch.add, torch.mul, torch.maximum])
def test_a_broadcast_mismatch_names_the_dimension_pytorch_names(op):
    # PyTorch compares sizes from the last dimension and reports the first
    # mismatch it meets there.
    err, cpu = check_error(op, torch.ones(2, 3), torch.ones(3, 2))
    assert str(cpu) in str(err)
    assert "dimension 1" in str(err)


@pytest.mark.parametrize("make", [
    lambda: torch.empty(-1, device="tpu"),
    lambda: torch.ones(2, -3, device="tpu"),
    lambda: torch.randn(-1, device="tpu"),
    lambda: torch.empty_strided((-1,), (1,), device="tpu"),
])
def test_a_negative_size_is_refused_with_pytorchs_message(make):
    with pytest.raises(RuntimeError, match="Trying to create tensor with negative dimension"):
        make()
    still_works()


def test_matmul_errors():
    check_error(torch.mm, torch.ones(2, 3), torch.ones(2, 3))
    err, _ = check_error(torch.mm, torch.ones(2, 3), torch.ones(3, 2, dtype=torch.float64))
    assert "same dtype" in str(err)
    still_works()


def test_inplace_cast_error():
    err, _ = check_error(lambda a, b: a.add_(b), torch.ones(3, dtype=torch.int64), torch.ones(3))
    assert "can't be cast" in str(err)
    still_works()


def test_mixed_devices():
    with pytest.raises(RuntimeError, match="same device"):
        torch.ones(3, device="tpu") + torch.ones(3)
    # A CPU scalar tensor mixes fine, as with CUDA.
    assert (torch.ones(3, device="tpu") + torch.tensor(2.0)).cpu().tolist() == [3.0] * 3
    still_works()


@two_devices
def test_mixed_tpu_devices():
    with pytest.raises(RuntimeError, match="same device"):
        torch.ones(3, device="tpu:0") + torch.ones(3, device="tpu:1")
    still_works()


@two_devices
def test_a_mixed_device_error_names_the_tpu_device_of_the_op():
    with pytest.raises(RuntimeError, match="two devices, tpu:1 and cpu!"):
        torch.ones(3, device="tpu:1") + torch.ones(3)
    with pytest.raises(RuntimeError, match="two devices, tpu:1 and cpu!"):
        torch.ones(3, device="tpu:1").add_(torch.ones(3))
    still_works()


def test_bad_dim():
    check_error(lambda x: x.sum(3), torch.ones(2, 3))
    still_works()


def test_unsupported_dtype():
    with pytest.raises(TypeError, match="does not support dtype"):
        torch.ones(2, dtype=torch.complex32, device="tpu")
    still_works()


def test_fallback_error_mode():
    code = ("import torch, torchtpu\n"
            "x = torch.ones(3, device='tpu')\n"
            "try:\n"
            "    torch.igamma(x, x)  # no lowering yet: a CPU fallback\n"
            "except NotImplementedError as e:\n"
            "    print('NotImplementedError', 'TORCHTPU_FALLBACK=error' in str(e))\n")
    out = run_python(code, TORCHTPU_FALLBACK="error")
    assert "NotImplementedError True" in out.stdout, out.stderr


def test_missing_plugin():
    code = ("import torch, torchtpu\n"
            "print('available', torch.tpu.is_available())\n"
            "try:\n"
            "    torch.ones(1, device='tpu')\n"
            "except RuntimeError as e:\n"
            "    print('error:', e)\n")
    out = run_python(code, TORCHTPU_PLUGIN="/nonexistent/plugin.so")
    assert "available False" in out.stdout, out.stderr
    assert "PJRT plugin not found: /nonexistent/plugin.so" in out.stdout


@pytest.mark.parametrize("kind,package", [("tpu", "libtpu"), ("cuda", "jax-cuda13-pjrt")])
def test_a_missing_plugin_of_a_kind_names_the_package_that_brings_it(kind, package, tmp_path):
    code = ("import torch, torchtpu\n"
            "try:\n"
            "    torch.ones(1, device='tpu')\n"
            "except RuntimeError as e:\n"
            "    print('error:', e)\n")
    out = run_python(code, TORCHTPU_PLUGIN=kind, TORCHTPU_PLUGIN_PATH=str(tmp_path))
    assert f"no '{kind}' PJRT plugin found" in out.stdout, out.stderr
    assert f"install {package}," in out.stdout


def test_an_empty_plugin_path_counts_as_unset():
    out = run_python("import torch, torchtpu; print((torch.ones(2, device='tpu') * 3).tolist())",
                     TORCHTPU_PLUGIN_PATH="")
    assert out.stdout.strip() == "[3.0, 3.0]", out.stderr


def test_a_flag_the_plugin_does_not_know_raises_instead_of_ending_the_process():
    # XLA ends the process on an unknown flag in XLA_FLAGS when a client is
    # created; a child process creates one first, and its reason is raised.
    code = ("import torch, torchtpu\n"
            "for _ in range(2):\n"
            "    try:\n"
            "        torch.ones(1, device='tpu')\n"
            "    except RuntimeError as e:\n"
            "        print('error:', e)\n"
            "print('available', torch.tpu.is_available())\n"
            "print('cpu', torch.ones(2).sum().item())\n")
    out = run_python(code, XLA_FLAGS="--xla_cpu_enable_fast_math=false --xla_no_such_flag=1")
    assert out.returncode == 0, out.stderr
    errors = [line for line in out.stdout.splitlines() if line.startswith("error:")]
    assert len(errors) == 2, out.stdout
    assert "does not accept the flags in XLA_FLAGS" in errors[0]
    assert "Unknown flag in XLA_FLAGS: --xla_no_such_flag=1" in errors[0]
    assert "available False" in out.stdout and "cpu 2.0" in out.stdout
    # Flags it knows pass the check and take effect as before.
    out = run_python(code, XLA_FLAGS="--xla_cpu_enable_fast_math=false")
    assert "error:" not in out.stdout and "available True" in out.stdout, out.stdout + out.stderr


@pytest.mark.parametrize("var, value, expected", [
    ("TORCHTPU_MODE", "lazy", "expected debug, strict or fused"),
    ("TORCHTPU_LOG", "loud", "expected error, warn, info or debug"),
    ("TORCHTPU_CACHE_MAX_BYTES", "4G", "expected an integer of at least 0"),
])
def test_bad_environment_value_raises_at_first_use(var, value, expected):
    code = ("import torch, torchtpu\n"
            "try:\n"
            "    torch.ones(1, device='tpu')\n"
            "except RuntimeError as e:\n"
            "    print(e)\n"
            "print('alive', torch.ones(2).sum().item())\n")
    out = run_python(code, **{var: value})
    assert f"{var}={value}: {expected}" in out.stdout, out.stderr
    assert "alive 2.0" in out.stdout


def test_cache_dir_that_is_a_file_warns_and_runs(tmp_path):
    not_a_dir = tmp_path / "file"
    not_a_dir.write_text("")
    code = "import torch, torchtpu\nprint((torch.ones(3, device='tpu') + 1).sum().item())\n"
    out = run_python(code, TORCHTPU_CACHE_DIR=str(not_a_dir))
    assert out.stdout.strip() == "6.0", out.stderr
    assert f"compile cache on disk disabled: {not_a_dir} is not a directory" in out.stderr


def test_misspelt_fallback_setting_is_an_error_not_a_silent_fallback(monkeypatch):
    x = torch.ones(3, device="tpu")
    monkeypatch.setenv("TORCHTPU_FALLBACK", "eror")
    with pytest.raises(RuntimeError, match="TORCHTPU_FALLBACK=eror: expected warn or error"):
        torch.igamma(x, x)  # no lowering yet: a CPU fallback
    monkeypatch.setenv("TORCHTPU_FALLBACK", "warn")
    assert torch.allclose(torch.igamma(x, x).cpu(), torch.igamma(x.cpu(), x.cpu()))
    still_works()


def test_poisoned_result_raises_again_and_device_recovers():
    x = torch.arange(4.0, device="tpu")
    bad = torch.tensor([0, 9], device="tpu")
    y = x.index_select(0, bad)  # strict mode: the error surfaces at the next sync
    with pytest.raises(IndexError, match="out of range"):
        torch.tpu.synchronize()
    with pytest.raises(IndexError, match="failed"):
        y.cpu()  # the result of the failed op is poisoned
    y.fill_(1.0)  # a whole write clears it
    assert y.cpu().tolist() == [1.0, 1.0]
    still_works()


def test_ops_on_a_poisoned_tensor_raise_and_device_recovers():
    # Each op's lowering goes on to its end after the failed read (the
    # error is taken after it): shapes it asks of the missing value must
    # stay in bounds (a crash once, in a reduction's backward).
    y = torch.arange(4.0, device="tpu").index_select(0, torch.tensor([0, 9], device="tpu"))
    m = torch.ones(2, 2, device="tpu")
    with pytest.raises(IndexError, match="out of range"):
        torch.tpu.synchronize()
    ops = [lambda t: t.var(0), lambda t: t.log_softmax(0), lambda t: t.softmax(0),
           lambda t: t.std(), lambda t: t.norm(), lambda t: t.cumsum(0),
           lambda t: t.sort(), lambda t: t.topk(1), lambda t: m @ t,
           lambda t: torch.nn.functional.layer_norm(t, (2,)),
           lambda t: torch.nn.functional.cross_entropy(m, t.long())]
    for op in ops:
        with pytest.raises(IndexError, match="failed"):
            op(y)
    still_works()


def test_device_side_error_names_the_op_and_the_line():
    def where(line):
        return f"checked on the device by index, called from {__file__}:{line} in " \
               "test_device_side_error_names_the_op_and_the_line"

    x = torch.arange(4.0, device="tpu")
    line = inspect.currentframe().f_lineno + 1
    y = x[torch.tensor([1, 9], device="tpu")]
    with pytest.raises(IndexError) as e:
        torch.tpu.synchronize()  # lines later: the message says where it came from
    assert str(e.value).splitlines() == [
        "index 9 is out of bounds for dimension 0 with size 4",
        f"({where(line)}; such errors are raised at the next sync, TORCHTPU_MODE=debug raises "
        "them at the op)"]
    with torchtpu.mode("debug"), pytest.raises(IndexError) as e:
        line = inspect.currentframe().f_lineno + 1
        x[torch.tensor([1, 9], device="tpu")]
    assert str(e.value).splitlines()[1] == f"({where(line)})"  # raised at the op
    del y
    still_works()


def test_debug_mode_raises_at_the_op():
    import torchtpu
    x = torch.arange(4.0, device="tpu")
    with torchtpu.mode("debug"):
        with pytest.raises(IndexError):
            x.index_select(0, torch.tensor([7], device="tpu"))
    still_works()


ARGUMENT_ERRORS = {  # each called with a device
    "roll of a 0-d tensor along a dim": lambda d: torch.roll(torch.tensor(1.0, device=d), 0, 0),
    "gather out= of another dtype": lambda d: torch.gather(
        torch.zeros(3, device=d), 0, torch.tensor([0], device=d),
        out=torch.zeros(1, dtype=torch.float64, device=d)),
    "argmax out= of another dtype": lambda d: torch.argmax(
        torch.zeros(3, device=d), out=torch.zeros((), dtype=torch.int32, device=d)),
    "avg_pool3d of a 3-d input": lambda d: torch.nn.functional.avg_pool3d(
        torch.zeros(2, 2, 3, device=d), 1),
    "narrow_copy past the last dim": lambda d: torch.zeros(2, 3, 4, device=d).narrow_copy(3, 0, 1),
    "complex out= of another precision": lambda d: torch.complex(
        torch.zeros(2, device=d), torch.zeros(2, device=d),
        out=torch.zeros(2, dtype=torch.complex128, device=d)),
}


@pytest.mark.parametrize("name", ARGUMENT_ERRORS)
def test_argument_errors_match_pytorch(name):
    with pytest.raises(Exception) as cpu_err:
        ARGUMENT_ERRORS[name]("cpu")
    with pytest.raises(Exception) as tpu_err:
        ARGUMENT_ERRORS[name]("tpu")
    assert type(tpu_err.value) is type(cpu_err.value)
    assert str(tpu_err.value).splitlines()[0] == str(cpu_err.value).splitlines()[0]
    still_works()


@pytest.mark.parametrize("mode", ["strict", "fused"])
def test_out_of_memory_raises_and_device_recovers(mode):
    # 4 TB: more than any device here has. The allocation happens when the
    # tensor is first written (at the op in strict mode, at the flush in
    # fused mode); it raises PyTorch's OutOfMemoryError (torch.tpu's name
    # for it, like torch.cuda's), counts nothing, and the device goes on.
    with torchtpu.mode(mode):
        small = torch.empty(10, device="tpu")
        small.fill_(1.0)  # the same ops once, small: the number 1.0 is cached
        small[:3].sum().item()
        del small
        torch.tpu.synchronize()
        before = torch.tpu.memory_allocated()
        with pytest.raises(torch.tpu.OutOfMemoryError, match="(?i)out of memory"):
            x = torch.empty(10**12, device="tpu")
            x.fill_(1.0)
            x[:3].sum().item()
        assert torch.tpu.OutOfMemoryError is torch.OutOfMemoryError
        del x
        torch.tpu.synchronize()
        assert torch.tpu.memory_allocated() == before
        still_works()


@pytest.mark.parametrize("background", ["1", "0"])
def test_fused_step_out_of_memory_keeps_the_model_and_the_optimizer(background, monkeypatch):
    # A fused training step whose forward and backward graph cannot get its
    # memory (here a 4 TB tensor the forward keeps) raises OutOfMemoryError
    # at the optimizer step at the latest, before that step changes
    # anything. The graph never ran, so it changed nothing: the weights,
    # the batch-norm statistics it was to update and the optimizer's state
    # are as before, and training goes on as if the step had not been
    # tried, whether the graph compiled in the background or at the flush.
    monkeypatch.setenv("TORCHTPU_BACKGROUND_COMPILE", background)
    nn = torch.nn
    x, y = torch.randn(32, 8).tpu(), torch.randint(0, 4, (32,)).tpu()

    def make():
        torch.manual_seed(0)
        model = nn.Sequential(nn.Linear(8, 16), nn.BatchNorm1d(16), nn.ReLU(), nn.Linear(16, 4)).tpu()
        return model, torch.optim.AdamW(model.parameters(), lr=0.1)

    def step(model, opt, huge=False):
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(x), y)
        kept = torch.zeros(10**12, device="tpu") if huge else None  # noqa: F841
        loss.backward()
        opt.step()
        return loss.item()

    def state(model, opt):
        tensors = list(model.state_dict().values())
        for s in opt.state_dict()["state"].values():
            tensors += list(s.values())
        return [t.cpu() for t in tensors]

    with torchtpu.mode("fused"):
        model, opt = make()
        want_model, want_opt = make()
        assert step(model, opt) == step(want_model, want_opt)
        with pytest.raises(torch.tpu.OutOfMemoryError,
                           match="out of memory: tried to allocate 3.64 TiB .* the device holds"):
            step(model, opt, huge=True)
        for got, want in zip(state(model, opt), state(want_model, want_opt), strict=True):
            assert torch.equal(got, want)
        for _ in range(2):
            assert step(model, opt) == step(want_model, want_opt)
    still_works()


@pytest.mark.parametrize("background", ["1", "0"])
def test_a_graph_whose_scratch_memory_passes_the_cap_fails_before_it_runs(background,
                                                                        monkeypatch):
    # The memory check counts the scratch memory XLA gives a program (here
    # for the 1 MiB products), not only its outputs (4 bytes), on
    # the compile thread as at the flush; the graph then changes nothing.
    monkeypatch.setenv("TORCHTPU_BACKGROUND_COMPILE", background)
    a = torch.randn(512, 512).tpu()
    w = torch.zeros(4).tpu()
    torch.tpu.synchronize()
    total = torch.tpu.get_device_properties().total_memory
    torch.tpu.set_per_process_memory_fraction((torch.tpu.memory_allocated() + 2**18) / total)
    try:
        with torchtpu.mode("fused"):
            w.add_(1)
            with pytest.raises(torch.tpu.OutOfMemoryError, match=r"tried to allocate [1-3]\.\d\d MiB"):
                ((a @ a) @ a).sum().item()
    finally:
        torch.tpu.set_per_process_memory_fraction(1.0)
    assert torch.equal(w.cpu(), torch.zeros(4))
    # Without the cap it runs, and the peak counts its scratch memory, so a
    # cap set from max_memory_allocated() lets it run again.
    torch.tpu.reset_peak_memory_stats()
    with torchtpu.mode("fused"):
        product = (a @ a) @ a
        assert torch.allclose(product.cpu(), (a.cpu() @ a.cpu()) @ a.cpu(), rtol=1e-3, atol=1e-1)
    assert torch.tpu.max_memory_allocated() >= torch.tpu.memory_allocated() + 2**20
    still_works()



def test_a_graph_that_reads_a_failed_launch_raises_the_first_failure_as_it_was(monkeypatch):
    # Fused mode, compiled in the background: a graph fails to launch (its
    # scratch memory passes the cap), and the graphs flushed after it that
    # read its result fail with it. Their tensors read as the first
    # failure, which names the ops that caused it; each graph that failed
    # after it added its own "running ..." in front ("running the 2 ops
    # recorded from mul to add: running the 2 ops ...: running the 4 ops
    # recorded from mm to sum_all: ... out of memory"), naming ops that
    # did not fail.
    monkeypatch.setenv("TORCHTPU_BACKGROUND_COMPILE", "1")
    a = torch.randn(512, 512).tpu()
    torch.tpu.synchronize()
    total = torch.tpu.get_device_properties().total_memory
    torch.tpu.set_per_process_memory_fraction((torch.tpu.memory_allocated() + 2**18) / total)
    try:
        with torchtpu.mode("fused"):  # each block is a graph of its own
            p = ((a @ a).tanh() @ a).sum()  # a graph no other test runs
        with torchtpu.mode("fused"):
            q = p + 2
        with torchtpu.mode("fused"):
            r = q * 3
        with pytest.raises(torch.tpu.OutOfMemoryError) as first:
            torch.tpu.synchronize()
        torch.tpu.synchronize()  # raised once
    finally:
        torch.tpu.set_per_process_memory_fraction(1.0)
    for t in (p, q, r):
        with pytest.raises(torch.tpu.OutOfMemoryError) as read:
            t.item()
        assert str(read.value).count("running") == 1
        assert str(first.value) in str(read.value)
    still_works()


@pytest.mark.parametrize("mode", ["strict", "fused"])
def test_a_device_error_found_at_a_failed_read_is_raised_at_the_next_sync(mode):
    # A host read that fails on its own (the tensor holds an earlier
    # failure) also collects the device-side errors found so far; those
    # were dropped, never raised (a gather's index out of range passed
    # unnoticed), and now wait for the next sync.
    with torchtpu.mode(mode):
        src = torch.arange(10.0, device="tpu")
        bad = torch.tensor([1, 20], device="tpu")
        first = torch.gather(src, 0, bad)
        with pytest.raises(RuntimeError, match="index 20 is out of bounds"):
            torch.tpu.synchronize()
        second = torch.gather(src, 0, bad + 10)  # noqa: F841
        with pytest.raises(RuntimeError, match="index 20 is out of bounds"):
            first[:1].cpu()
        with pytest.raises(RuntimeError, match="index 11 is out of bounds"):
            torch.tpu.synchronize()
        torch.tpu.synchronize()
    still_works()


@pytest.mark.parametrize("mode, background", [("strict", "1"), ("fused", "1"), ("fused", "0")])
def test_a_device_error_found_at_a_failed_synchronize_is_raised_at_the_next_sync(
        mode, background, monkeypatch):
    # A gather's index out of range is found at the sync whose own work
    # fails too (fused mode: the graph recorded since the last flush point
    # runs out of memory at the sync's flush; strict mode raised that at
    # the op). The sync raises its own failure; the index error was dropped
    # there, never raised, and now waits for the next sync.
    monkeypatch.setenv("TORCHTPU_BACKGROUND_COMPILE", background)
    with torchtpu.mode(mode):
        src = torch.arange(10.0, device="tpu")
        with torchtpu.mode(mode):  # fused: a graph of its own, launched at the end
            gathered = torch.gather(src, 0, torch.tensor([1, 20], device="tpu"))  # noqa: F841
        with pytest.raises(torch.tpu.OutOfMemoryError):
            huge = torch.empty(10**12, device="tpu")
            huge.fill_(1.0)
            torch.tpu.synchronize()
        del huge
        with pytest.raises(RuntimeError, match="index 20 is out of bounds"):
            torch.tpu.synchronize()
        torch.tpu.synchronize()
    still_works()


@pytest.mark.parametrize("mode, background", [("strict", "1"), ("fused", "1"), ("fused", "0")])
def test_a_device_error_found_with_a_failed_launch_is_raised_at_the_next_sync(
        mode, background, monkeypatch):
    # A graph compiled in the background that fails to launch (its scratch
    # memory passes the cap) and a gather's index out of range are found at
    # the same host read: it raised the first and dropped the other (strict
    # mode and fused mode without the compile thread raise the first at the
    # op or the flush).
    monkeypatch.setenv("TORCHTPU_BACKGROUND_COMPILE", background)
    a = torch.randn(512, 512).tpu()
    src = torch.arange(10.0, device="tpu")
    torch.tpu.synchronize()
    total = torch.tpu.get_device_properties().total_memory
    torch.tpu.set_per_process_memory_fraction((torch.tpu.memory_allocated() + 2**18) / total)
    try:
        with torchtpu.mode(mode):
            with torchtpu.mode(mode):
                gathered = torch.gather(src, 0, torch.tensor([1, 20], device="tpu"))  # noqa: F841
            with pytest.raises(torch.tpu.OutOfMemoryError):
                ((a @ a).sigmoid() @ a).sum().item()  # a graph no other test runs
            with pytest.raises(RuntimeError, match="index 20 is out of bounds"):
                torch.tpu.synchronize()
            torch.tpu.synchronize()
    finally:
        torch.tpu.set_per_process_memory_fraction(1.0)
    still_works()


def test_graphs_that_fail_to_launch_on_their_own_are_each_raised(monkeypatch):
    # Fused mode, compiled in the background: of the graphs that failed to
    # launch before a sync, only the oldest failure was raised. One that
    # failed on its own (not from reading the first's results) was dropped,
    # and its in-place update was lost without a word; so was a backward
    # pass's graph that failed at the end of the pass, and of two such
    # passes before a sync, the second's. Each is raised now, one sync after
    # the other.
    monkeypatch.setenv("TORCHTPU_BACKGROUND_COMPILE", "1")
    a = torch.randn(512, 512).tpu()
    w = torch.zeros(4, device="tpu")
    p = torch.ones(4, device="tpu", requires_grad=True)
    torch.tpu.synchronize()
    total = torch.tpu.get_device_properties().total_memory
    torch.tpu.set_per_process_memory_fraction((torch.tpu.memory_allocated() + 2**18) / total)
    try:
        with torchtpu.mode("fused"):
            with torchtpu.mode("fused"):  # graphs no other test runs
                first = ((a @ a).sin() @ a).sum()  # noqa: F841
            with torchtpu.mode("fused"):
                w.add_(1)
                second = ((a @ a).cos() @ a).sum()  # noqa: F841
            with pytest.raises(torch.tpu.OutOfMemoryError, match="recorded from mm to sum_all"):
                torch.tpu.synchronize()
            with pytest.raises(torch.tpu.OutOfMemoryError, match="recorded from add to sum_all"):
                torch.tpu.synchronize()
            torch.tpu.synchronize()
            with torchtpu.mode("fused"):
                third = ((a @ a).tan() @ a).sum()  # noqa: F841
            huge = torch.zeros(10**12, device="tpu")  # noqa: F841
            (p * 2).sum().backward()  # its graph fails at the end of the pass
            with pytest.raises(torch.tpu.OutOfMemoryError, match="recorded from mm to sum_all"):
                torch.tpu.synchronize()
            with pytest.raises(torch.tpu.OutOfMemoryError, match="tried to allocate 3.64 TiB"):
                torch.tpu.synchronize()
            torch.tpu.synchronize()
            for n in (10**12, 10**11):  # two passes whose graphs fail at their ends
                p.grad = None
                huge = torch.zeros(n, device="tpu")
                (p * 2).sum().backward()
            raised = set()
            for _ in range(2):
                with pytest.raises(torch.tpu.OutOfMemoryError) as e:
                    torch.tpu.synchronize()
                raised.add(str(e.value).split("tried to allocate ")[1].split(" with")[0])
            assert raised == {"3.64 TiB", "372.53 GiB"}  # 4e12 and 4e11 bytes, in either order
            torch.tpu.synchronize()
    finally:
        torch.tpu.set_per_process_memory_fraction(1.0)
    assert torch.equal(w.cpu(), torch.zeros(4))  # its graph never ran
    still_works()


@pytest.mark.parametrize("mode", ["strict", "fused"])
def test_two_device_errors_found_at_one_sync_are_raised_at_two_syncs(mode):
    # Each failure is raised once: the first at the sync that finds both,
    # the second at the next (it was dropped). The same op failing the same
    # way again (a loop) is one error. (A fused graph's check says its
    # first failed assertion only: the ops run in graphs of their own.)
    with torchtpu.mode(mode):
        src = torch.arange(10.0, device="tpu")
        results = []
        for bad in (20, 20, 20, 30):
            with torchtpu.mode(mode):
                results.append(torch.gather(src, 0, torch.tensor([1, bad], device="tpu")))
        with pytest.raises(RuntimeError, match="index 20 is out of bounds"):
            torch.tpu.synchronize()
        with pytest.raises(RuntimeError, match="index 30 is out of bounds"):
            torch.tpu.synchronize()
        torch.tpu.synchronize()
    still_works()


@two_devices
@pytest.mark.parametrize("mode", ["strict", "fused"])
def test_device_errors_of_two_devices_found_at_one_sync_are_raised_at_two_syncs(mode):
    # torch.tpu.synchronize(-1) raised the first device's error and dropped
    # the second's; that one now waits for the next sync of its device.
    with torchtpu.mode(mode):
        for i, bad in ((0, 20), (1, 30)):
            src = torch.arange(10.0, device=f"tpu:{i}")
            torch.gather(src, 0, torch.tensor([1, bad], device=f"tpu:{i}"))
        with pytest.raises(RuntimeError, match="index 20 is out of bounds"):
            torch.tpu.synchronize(-1)
        with pytest.raises(RuntimeError, match="index 30 is out of bounds"):
            torch.tpu.synchronize("tpu:1")
        torch.tpu.synchronize(-1)
    still_works()


@pytest.mark.parametrize("mode, background", [("strict", "1"), ("fused", "1"), ("fused", "0")])
def test_a_graph_that_fails_at_an_event_record_is_raised_at_the_next_sync(
        mode, background, monkeypatch):
    # Recording an event launches what fused mode recorded; a graph that
    # failed there (out of memory at the flush) changed nothing, and its
    # error was dropped: an in-place update was lost without a word.
    monkeypatch.setenv("TORCHTPU_BACKGROUND_COMPILE", background)
    with torchtpu.mode(mode):
        w = torch.zeros(4, device="tpu")
        torch.tpu.synchronize()
        with pytest.raises(torch.tpu.OutOfMemoryError):
            w.add_(1)
            huge = torch.empty(10**12, device="tpu")
            huge.fill_(1.0)
            event = torch.tpu.Event()
            event.record()
            event.synchronize()
            torch.tpu.synchronize()
        torch.tpu.synchronize()
    still_works()


def test_dlpack_is_refused_not_misread():
    # A tpu tensor has no host-addressable memory to share: importing it
    # through DLPack raises (PyTorch's own message), a tensor made from its
    # capsule raises at its first use, and a library that only reads host
    # memory refuses the capsule instead of reading garbage.
    np = pytest.importorskip("numpy")
    t = torch.arange(4.0, device="tpu")
    with pytest.raises(ValueError, match="Unknown device type tpu for Dlpack"):
        torch.from_dlpack(t)
    alias = torch.from_dlpack(t.__dlpack__())
    for use in (alias.cpu, lambda: alias + 1, lambda: alias.add_(1)):
        with pytest.raises(RuntimeError, match="not allocated by torchtpu"):
            use()
    with pytest.raises((RuntimeError, BufferError, ValueError)):
        np.from_dlpack(t)
    assert torch.equal(torch.from_dlpack(t.cpu()), torch.arange(4.0))
    still_works()
