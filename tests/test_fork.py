"""Processes forked after tpu was initialized: the device's threads (the
PJRT client's, the compile thread) are the parent's, so the child gets
CUDA's answer, a RuntimeError naming the 'spawn' start method, instead of
waiting forever; it exits normally, and the parent's device keeps working.
Each case runs in a fresh interpreter under a time limit, so a hang fails
the test instead of stopping the suite."""
import os
import subprocess
import sys
import textwrap

import pytest

TIMEOUT_S = 120

FORK_AFTER_INIT = """
import os, sys, torch, torchtpu
torchtpu.set_mode("{mode}")
x = torch.arange(4.0, device="tpu") * 2
pending = x + 1  # recorded, not yet run, in fused mode
x.sum().item()
count = torch.tpu.device_count()
r, w = os.pipe()
pid = os.fork()
if pid == 0:
    os.close(r)
    lines = ["bad_fork %s initialized %s same_count %s" % (
        torch.tpu._is_in_bad_fork(), torch.tpu.is_initialized(),
        torch.tpu.device_count() == count)]
    for what, fn in [("new", lambda: torch.ones(2, device="tpu")),
                     ("read", lambda: x.cpu()),
                     ("pending", lambda: pending.cpu()),
                     ("op", lambda: x + 1),
                     ("sync", torch.tpu.synchronize),
                     ("init", torch.tpu.init)]:
        try:
            fn()
            lines.append(what + " ran")
        except RuntimeError as e:
            lines.append(what + " RuntimeError " + ("spawn" in str(e)) * "spawn")
    torch.manual_seed(1)  # skips tpu in a bad fork, as it skips CUDA
    lines.append("metrics %s" % ("executions" in torchtpu.metrics()))
    os.write(w, ("\\n".join(lines) + "\\n").encode())
    del x, pending  # the child's tensors die, and so do its interpreter's at exit
    sys.exit(0)  # runs atexit (torchtpu's shutdown) like a script's end
os.close(w)
_, status = os.waitpid(pid, 0)
child = os.read(r, 1 << 16).decode()
print(child, end="")
print("child exit", os.waitstatus_to_exitcode(status))
print("parent", (x + pending).tolist(), torch.tpu._is_in_bad_fork())
"""


def run(tmp_path, code):
    # A file, not `-c`: spawned workers import the parent's main module.
    script = tmp_path / "main.py"
    script.write_text(textwrap.dedent(code))
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                         timeout=TIMEOUT_S)
    assert out.returncode == 0, out.stderr
    return out.stdout


@pytest.mark.parametrize("mode", ["strict", "fused"])
def test_fork_after_init_raises_in_child(tmp_path, mode):
    out = run(tmp_path, FORK_AFTER_INIT.format(mode=mode))
    assert "bad_fork True initialized False same_count True" in out, out
    for what in ("new", "read", "pending", "op", "sync", "init"):
        assert f"{what} RuntimeError spawn" in out, out
    assert "metrics True" in out, out
    assert "child exit 0" in out, out
    assert "parent [1.0, 5.0, 9.0, 13.0] False" in out, out


def test_fork_before_init_child_uses_tpu(tmp_path):
    # As with CUDA, a fork before the device is initialized is fine: the
    # child initializes its own.
    out = run(tmp_path, """
        import os, torch, torchtpu
        assert not torch.tpu.is_initialized()
        pid = os.fork()
        if pid == 0:
            ok = (torch.ones(3, device="tpu") * 2).sum().item() == 6.0
            os._exit(0 if ok and not torch.tpu._is_in_bad_fork() else 1)
        _, status = os.waitpid(pid, 0)
        print("child exit", os.waitstatus_to_exitcode(status))
        print("parent", (torch.ones(2, device="tpu") + 1).tolist())
    """)
    assert "child exit 0" in out and "parent [2.0, 2.0]" in out, out


def test_dataloader_workers_after_init(tmp_path):
    # The common case: forked DataLoader workers that only produce CPU
    # tensors, in a process that already trains on tpu (fused mode: its
    # compile thread is running).
    out = run(tmp_path, """
        import torch, torchtpu
        from torch.utils.data import DataLoader, TensorDataset
        torchtpu.set_mode("fused")
        w = torch.full((2,), 3.0, device="tpu")
        ds = TensorDataset(torch.arange(32.0).view(16, 2))
        total = sum((b.to("tpu") * w).sum().item()
                    for (b,) in DataLoader(ds, batch_size=4, num_workers=2))
        print("total", total)
    """)
    assert f"total {3.0 * sum(range(32))}" in out, out


def test_multiprocessing_fork_and_spawn(tmp_path):
    # A forked worker that touches tpu raises in the worker (and the pool
    # hands the error back); a spawned one starts its own runtime.
    out = run(tmp_path, """
        import multiprocessing as mp, torch, torchtpu

        def work(n):
            return (torch.ones(n, device="tpu") * 2).sum().item()

        if __name__ == "__main__":
            torch.ones(1, device="tpu").sum().item()
            with mp.get_context("fork").Pool(1) as pool:
                try:
                    print("fork", pool.apply(work, (3,)))
                except RuntimeError as e:
                    print("fork RuntimeError", "spawn" in str(e))
            with mp.get_context("spawn").Pool(1) as pool:
                print("spawn", pool.apply(work, (3,)))
    """)
    assert "fork RuntimeError True" in out and "spawn 6.0" in out, out
