"""Views alias their base: in-place writes through any view are visible
through every other view, as on CPU."""
import json
import os
import subprocess
import sys
import textwrap

import pytest
import torch
import torch.nn.functional as F

from conftest import NoFallback, assert_same, to_tpu, two_devices


def both(fn):
    """Runs fn(x) on a CPU tensor and a tpu copy; returns both x's after."""
    x = torch.arange(24.0).reshape(4, 6)
    t = to_tpu(x)
    with NoFallback():
        fn(x)
        fn(t)
    assert_same(x, t)
    return x, t


def test_view_ops_read():
    x = torch.arange(60.0).reshape(3, 4, 5)
    t = to_tpu(x)
    views = [
        lambda a: a.view(12, 5), lambda a: a.transpose(0, 2), lambda a: a.permute(1, 2, 0),
        lambda a: a[1], lambda a: a[:, 1:3], lambda a: a[..., ::2], lambda a: a[::2, ::3, 1:],
        lambda a: a.narrow(2, 1, 3), lambda a: a.unsqueeze(1), lambda a: a[0:1].squeeze(0),
        lambda a: a.expand(2, 3, 4, 5), lambda a: a[:, :1].expand(3, 4, 5),
        lambda a: a.unfold(2, 2, 1), lambda a: a.diagonal(0, 1, 2), lambda a: a.t() if a.dim() == 2 else a.flatten(),
        lambda a: a.as_strided((2, 2), (7, 3), 5), lambda a: a.reshape(60)[7:50:3],
    ]
    for i, f in enumerate(views):
        with NoFallback():
            assert_same(f(x), f(t)), i
        assert f(t)._base is not None or f(t).data_ptr() == t.data_ptr() or True


def test_rank8_strided_views():
    # A rank-8 view with a step needs a dense reshaping of rank 9, which the
    # IR's types cannot hold: it was 'reshape: element count changes' (and a
    # write past the type's dims).
    x = torch.randn(2, 3, 1, 2, 3, 2, 1, 2)
    t = to_tpu(x)
    for f in (lambda a: a[:, :, :, :, ::2], lambda a: a[:, 1:, :, :, ::2] * 3,
              lambda a: a.transpose(0, 7)[::2, :, :, :, ::2],
              lambda a: a.as_strided((2,) * 8, (37, 29, 17, 11, 7, 5, 3, 2)).sum((1, 3))):
        with NoFallback():
            assert_same(f(x), f(t))
    y = torch.randn(2, 2, 2, 2, 2, 2, 2, 4)  # eight strided dims, the last of stride 2
    u = to_tpu(y)
    for a in (x, t):
        a[:, 1:, :, :, ::2].mul_(3)
    for a in (y, u):
        a[..., ::2].add_(1)
    assert_same(x, t)
    assert_same(y, u)
    assert_same(y[..., ::2] * 2, u[..., ::2] * 2)
    with pytest.raises(RuntimeError, match="at most 8 dimensions"):
        t.unsqueeze(0) + 1


def test_inplace_through_views():
    both(lambda a: a[1].add_(100))
    both(lambda a: a[:, 2].mul_(-1))
    both(lambda a: a.t()[3].fill_(7))
    both(lambda a: a[1:3, 2:5].add_(a[0:2, 0:3]))
    both(lambda a: a.view(24)[5:20:4].fill_(0.5))
    both(lambda a: a.diagonal().add_(1000))


def test_alias_sees_write():
    t = torch.zeros(3, 4, device="tpu")
    col = t[:, 1]
    row = t[2]
    col.add_(5)
    assert row.cpu().tolist() == [0.0, 5.0, 0.0, 0.0]
    row.fill_(1)
    assert col.cpu().tolist() == [5.0, 5.0, 1.0]
    assert t.sum().item() == 14.0


def test_out_variant_and_resize():
    a = torch.randn(3, 4)
    b = torch.randn(3, 4)
    out = torch.empty(3, 4, device="tpu")
    with NoFallback():
        torch.add(a.tpu(), b.tpu(), out=out)
    assert torch.allclose(out.cpu(), a + b)
    small = torch.empty(0, device="tpu")
    torch.mul(a.tpu(), 2, out=small)
    assert small.shape == (3, 4) and torch.allclose(small.cpu(), a * 2)


@pytest.mark.filterwarnings("ignore:An output with one or more elements was resized")
def test_resized_out_keeps_sharing_its_storage():
    # PyTorch resizes an out= tensor in place: the same storage at the same
    # offset, grown if too small, so its base and aliases see the result.
    def run(d):
        seen = []
        x = torch.zeros(8, device=d)  # a view at an offset, storage large enough
        torch.add(torch.ones(2, 2, device=d), 1, out=x[1:5])
        seen.append(x)
        b = torch.zeros(2, device=d)  # storage too small, with an alias
        alias = b.view(2)
        torch.add(torch.ones(4, device=d), 1, out=b)
        seen += [b, alias]
        base = torch.arange(6.0, device=d)  # too small at an offset: the prefix stays
        view = base[4:]
        torch.mul(torch.full((3, 2), 3.0, device=d), 2, out=view)
        seen += [view, base]
        values, indices = torch.zeros(1, device=d), torch.zeros(1, dtype=torch.long, device=d)
        aliases = values.view(1), indices.view(1)
        torch.sort(torch.tensor([3.0, 1.0, 2.0], device=d), out=(values, indices))
        seen += [values, indices, *aliases]
        return seen

    with NoFallback():
        got = run("tpu")
    for g, want in zip(got, run("cpu")):
        assert_same(want, g)

def test_view_dtype_reinterprets_bits():
    x = torch.tensor([1.0, -2.0, 0.5])
    t = x.tpu()
    assert torch.equal(t.view(torch.int32).cpu(), x.view(torch.int32))
    assert torch.equal(t.view(torch.uint8).cpu(), x.view(torch.uint8))
    t.view(torch.int32)[1].fill_(0)
    x.view(torch.int32)[1].fill_(0)
    assert torch.equal(t.cpu(), x)


def test_expanded_write_refused():
    t = torch.zeros(1, 4, device="tpu").expand(3, 4)
    try:
        t.add_(1)
    except RuntimeError as e:
        assert "single memory location" in str(e)
    else:
        raise AssertionError("writing an expanded tensor must fail as on CPU")


def test_resize_keeps_prefix():
    t = torch.arange(4.0).tpu()
    t.resize_(6)
    assert t[:4].cpu().tolist() == [0.0, 1.0, 2.0, 3.0]
    t.resize_(2)
    assert t.cpu().tolist() == [0.0, 1.0]


def test_resize_to_the_same_shape_keeps_the_strides():
    # It laid the tensor out row-major: a transpose read in another order,
    # an expanded tensor grew its storage.
    def resized(device):
        t = torch.arange(6.0, device=device).view(2, 3).t()
        t.resize_(3, 2)
        e = torch.arange(3.0, device=device).expand(2, 3)
        e.resize_(2, 3)
        c = torch.arange(6.0, device=device).view(2, 3).t()
        c.resize_(3, 2, memory_format=torch.contiguous_format)
        return [(x.stride(), x.cpu().tolist(), x.untyped_storage().nbytes()) for x in (t, e, c)]
    assert resized("tpu") == resized("cpu")
    with pytest.raises(RuntimeError, match="Unsupported memory format"):
        torch.ones(2, device="tpu").resize_(2, memory_format=torch.preserve_format)


def test_untyped_storage_resize():
    t = torch.ones(8, device="tpu")
    s = t.untyped_storage()
    s.resize_(0)
    assert s.nbytes() == 0
    s.resize_(32)
    assert s.nbytes() == 32


def test_is_set_to_compares_storages():
    # Ran on the CPU fallback, whose copies share no storage: always False.
    def answers(device):
        a = torch.arange(6.0, device=device)
        b = torch.empty(0, device=device).set_(a)
        return [b.is_set_to(a), a.view(6).is_set_to(a), a[1:].is_set_to(a),
                a.view(2, 3).is_set_to(a), torch.zeros(6, device=device).is_set_to(a)]
    with NoFallback():
        assert answers("tpu") == answers("cpu")


@two_devices
def test_set_to_another_devices_storage_is_refused():
    # It moved the tensor to tpu:1, where CPU and CUDA refuse.
    a = torch.zeros(4, device="tpu:0")
    with pytest.raises(RuntimeError, match='Attempted to set the storage of a tensor on device '
                                           '"tpu:0" to a storage on different device "tpu:1"'):
        a.set_(torch.ones(4, device="tpu:1"))
    with pytest.raises(RuntimeError, match='on different device "cpu".  This is no longer '
                                           'allowed; the devices must match.'):
        a.set_(torch.ones(4).untyped_storage())
    assert a.device == torch.device("tpu:0") and a.cpu().tolist() == [0.0] * 4


LAYOUTS = {  # each returns the result whose layout is compared
    "add of a transpose": lambda x: x[0].t() + 1,
    "mul of two transposes": lambda x: x[0].t() * x[0].t(),
    "exp of a transpose": lambda x: torch.exp(x[0].t()),
    "comparison of a transpose": lambda x: x[0].t() > 0,
    "where on transposes": lambda x: torch.where(x[0].t() > 0, x[0].t(), 0.0),
    "transpose plus a broadcast row": lambda x: x[0].t() + x[0].t().sum(0, keepdim=True),
    "transpose plus contiguous": lambda x: x[0].t() + x[0].t().contiguous(),
    "contiguous plus transpose": lambda x: x[0].t().contiguous() + x[0].t(),
    "permuted 3-d": lambda x: x.permute(2, 0, 1) * 2,
    "permuted plus a broadcast slice": lambda x: x.permute(2, 0, 1) + x.permute(2, 0, 1)[0],
    "channels last": lambda x: torch.relu(
        x.reshape(1, 2, 4, 6).contiguous(memory_format=torch.channels_last)),
    "a column's transpose": lambda x: x[0][:, :1].t() + 1,
    # an expanded input of another dtype is converted first, and its copy,
    # laid out contiguously, decides
    "expanded int times transposed float": lambda x: (
        torch.ones((), dtype=torch.long, device=x.device).expand(6, 4) * x[0].t()),
    "transposed float times expanded int": lambda x: (
        x[0].t() * torch.ones((), dtype=torch.long, device=x.device).expand(6, 4)),
    "expanded float times transposed complex": lambda x: (
        torch.ones((), device=x.device).expand(6, 4) * torch.complex(x[0], x[1]).t()),
    "where with an expanded condition": lambda x: (  # a condition is not converted
        torch.where(torch.tensor(True, device=x.device).expand(6, 4), x[0].t(), 0.0)),
    "expanded int over expanded transposed int": lambda x: (
        torch.ones((), dtype=torch.long, device=x.device).expand(6, 4) /
        torch.ones(4, 1, dtype=torch.long, device=x.device).expand(4, 6).t()),
}


CHANNELS_LAST = {  # ops that keep a channels-last input's layout, as CPU's
    "max_pool2d": lambda x: F.max_pool2d(x, 2),
    "avg_pool2d": lambda x: F.avg_pool2d(x, 2),
    "adaptive_avg_pool2d": lambda x: F.adaptive_avg_pool2d(x, 3),
    "adaptive_max_pool2d": lambda x: F.adaptive_max_pool2d(x, 3),
    "batch_norm": lambda x: F.batch_norm(x, None, None, training=True),
    "group_norm": lambda x: F.group_norm(x, 3),
    "nearest": lambda x: F.interpolate(x, scale_factor=2),
    "bilinear": lambda x: F.interpolate(x, scale_factor=2, mode="bilinear"),
    "constant pad": lambda x: F.pad(x, (1, 1, 1, 1)),
    "cat": lambda x: torch.cat([x, x], 1),
}


@pytest.mark.parametrize("name", CHANNELS_LAST)
def test_channels_last_results(name):
    # Their meta kernels say so too, so a compiled graph expects it
    # (tests/test_compile.py). Convolution's results are row-major on tpu,
    # as PyTorch's meta kernel lays out a PrivateUse1 device's.
    x = torch.randn(2, 3, 8, 8).contiguous(memory_format=torch.channels_last)
    want, got = CHANNELS_LAST[name](x), CHANNELS_LAST[name](x.tpu())
    assert got.stride() == want.stride()
    torch.testing.assert_close(got.cpu(), want, atol=1e-5, rtol=1e-5)


def test_layouts_are_read_once_per_signature():
    # A meta kernel costs up to 0.2 ms a call (the Python ones): a loop
    # with the same shapes runs them in its first step only.
    from torchtpu import _C
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.BatchNorm2d(4),
                                torch.nn.MaxPool2d(2), torch.nn.Upsample(scale_factor=2)).tpu()
    x, a = torch.randn(2, 3, 8, 8, device="tpu"), torch.randn(4, 4, device="tpu")
    z = torch.randn(3, 8, 5, dtype=torch.complex64, device="tpu")

    def step():
        model(x).sum().backward()
        return torch.fft.fft(z, dim=1), torch.linalg.inv(a @ a.T + 4 * torch.eye(4, device="tpu"))
    step()
    before = _C._meta_layout_runs()
    step()
    step()
    assert before > 0 and _C._meta_layout_runs() == before


@pytest.mark.parametrize("name", LAYOUTS)
def test_elementwise_results_take_their_inputs_layout(name):
    # As TensorIterator lays them out on CPU: stride() and is_contiguous()
    # agree, and so does whether reshape returns a view.
    x = torch.randn(2, 4, 6)
    want, got = LAYOUTS[name](x), LAYOUTS[name](x.tpu())
    assert got.stride() == want.stride()
    torch.testing.assert_close(got.cpu(), want)


OFFSETS_SCRIPT = textwrap.dedent("""
    import json, sys, torch, torchtpu
    torchtpu.set_mode(sys.argv[1])
    x = torch.randn(600, 8)
    t, out = x.to("tpu"), torch.zeros(600, 8, device="tpu")
    torch.tpu.synchronize()  # (fused: so that both halves start from a flush)

    def compiles():
        torch.tpu.synchronize()
        return torchtpu.metrics()["compiles"]

    for i in range(300):
        out[i] = t[i] * 2
    first = compiles()
    for i in range(300, 600):
        out[i] = t[i] * 2
    rows = compiles() - first
    ok = torch.equal(out.cpu(), x * 2)
    t[0, 0].item()
    first = compiles()
    ok &= [t[i, 1].item() for i in range(20)] == x[:20, 1].tolist()
    print(json.dumps({"rows": rows, "items": compiles() - first, "ok": ok}))
""")


@pytest.mark.parametrize("mode", ["strict", "fused"])
def test_views_at_other_offsets_reuse_one_program(mode):
    # A view's offset was a constant of the program: a loop over rows or
    # elements compiled a program per offset in strict mode (printing with
    # profile="full" took seconds for 200 elements) and one per cut of the
    # loop in fused mode. Contiguous views are read and written at a runtime
    # offset instead, so the second half of the rows runs the first half's
    # programs. (A fresh process without the disk cache: programs of earlier
    # runs, or evicted from memory, must not hide or add compiles.)
    env = dict(os.environ, TORCHTPU_CACHE_DIR="off")
    run = subprocess.run([sys.executable, "-c", OFFSETS_SCRIPT, mode], env=env,
                         capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    got = json.loads(run.stdout.strip().splitlines()[-1])
    assert got["ok"]
    # (fused: one of the 20-odd graphs of the second half may be cut at
    # another point; with constant offsets every graph was new)
    assert got["rows"] <= (1 if mode == "fused" else 0), got
    assert got["items"] == 0, got
