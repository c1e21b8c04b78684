"""debug, strict and fused modes give the same results; scalars do not
recompile; fused mode runs recorded work together."""
import pytest
import torch

import torchtpu


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


def test_fused_runs_one_execution():
    x = torch.randn(64).tpu()
    torch.tpu.synchronize()
    torchtpu.reset_metrics()
    with torchtpu.mode("fused"):
        for _ in range(10):
            x = x * 1.01 + 0.5
        s = x.sum().item()
    m = torchtpu.metrics()
    assert m["executions"] == 1, m
    assert m["ops"] == 21
    assert s == pytest.approx(s)


def test_new_scalar_does_not_recompile():
    x = torch.randn(8).tpu()
    (x * 0.5).cpu()
    torchtpu.reset_metrics()
    for lr in (0.1, 0.01, 0.001, 3.0):
        (x * lr).cpu()
    assert torchtpu.metrics()["compiles"] == 0


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
