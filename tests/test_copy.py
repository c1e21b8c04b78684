"""Copies between host and device, across devices, and serialization."""
import io

import pytest
import torch

from conftest import two_devices

DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int8,
          torch.int16, torch.int32, torch.int64, torch.uint8, torch.bool, torch.complex64]


def sample(dtype, shape=(3, 5)):
    if dtype == torch.bool:
        return torch.rand(shape) > 0.5
    if dtype.is_complex:
        return torch.randn(shape, dtype=dtype)
    if dtype.is_floating_point:
        return torch.randn(shape).to(dtype)
    return torch.randint(-100 if dtype != torch.uint8 else 0, 100, shape).to(dtype)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_roundtrip(dtype):
    x = sample(dtype)
    t = x.to("tpu")
    assert t.dtype == dtype and t.shape == x.shape
    assert torch.equal(t.cpu(), x)


def test_roundtrip_float8():
    x = torch.randn(8).to(torch.float8_e4m3fn)
    assert torch.equal(x.to("tpu").cpu().view(torch.uint8), x.view(torch.uint8))


def test_non_contiguous_host_and_views():
    x = torch.arange(24.0).reshape(4, 6)
    assert torch.equal(x.t().to("tpu").cpu(), x.t())
    t = x.to("tpu")
    assert torch.equal(t.t().cpu(), x.t())
    assert torch.equal(t[:, 1::2].cpu(), x[:, 1::2])
    assert torch.equal(t[1].cpu(), x[1])
    assert torch.equal(t.t().contiguous().cpu(), x.t().contiguous())


def test_copy_into_views():
    x = torch.zeros(4, 6)
    t = x.to("tpu")
    src = torch.arange(4.0)
    x[:, 2].copy_(src)
    t[:, 2].copy_(src)  # host -> device view
    assert torch.equal(t.cpu(), x)
    t[1:3, :].copy_(t[0:2, :].clone())  # device -> device view
    x[1:3, :].copy_(x[0:2, :].clone())
    assert torch.equal(t.cpu(), x)
    t.t()[0].copy_(torch.ones(4, dtype=torch.int64))  # with a dtype change
    x.t()[0].copy_(torch.ones(4, dtype=torch.int64))
    assert torch.equal(t.cpu(), x)


def test_conjugate_and_negative_views():
    # Views with the conjugate / negative bit: copies in every direction read
    # and write logical values (x.conj().cpu() used to recurse endlessly).
    x, y = torch.randn(2, 3, dtype=torch.complex64), torch.randn(2, 3)
    t, u = x.to("tpu"), y.to("tpu")
    assert torch.equal(t.conj().cpu(), x.conj())
    assert torch.equal(torch._neg_view(u).cpu(), -y)
    assert torch.equal(t.conj().clone().cpu(), x.conj())
    assert torch.equal(t.conj().resolve_conj().cpu(), x.conj())
    assert torch.equal(torch._neg_view(u).clone().cpu(), -y)
    d = torch.zeros(2, 3, dtype=torch.complex64, device="tpu").conj()
    d.copy_(t)  # device -> device, into a conjugate view
    assert torch.equal(d.cpu(), x) and torch.equal(d.conj().cpu(), x.conj())
    d.copy_(x.conj())  # host -> device, into a conjugate view
    assert torch.equal(d.cpu(), x.conj())
    h = torch.empty(2, 3, dtype=torch.complex64)
    h.copy_(t.conj())  # device -> host
    assert torch.equal(h, x.conj())
    assert t.conj()[1, 2].item() == x.conj()[1, 2].item()


def test_dtype_conversion():
    x = torch.randn(10) * 100
    for dtype in [torch.int32, torch.int64, torch.float16, torch.bfloat16, torch.bool]:
        assert torch.equal(x.to("tpu").to(dtype).cpu(), x.to(dtype)), dtype


def test_conversions_that_pytorch_defines_as_cpu_and_cuda_do():
    # A float becomes uint8 through int64 (wrapping: -1.0 -> 255, 300.7 ->
    # 44), on the device as on the host; a double becomes half through float
    # (rounding twice: 1 + 2**-11 + 1e-14 -> 1.0).
    x = torch.tensor([-1.0, -1.5, -3.0, 256.0, 300.7, 3.2, 255.9, 0.0])
    for dtype in (torch.float32, torch.bfloat16, torch.float16, torch.float64):
        want = x.to(dtype).to(torch.uint8)
        assert torch.equal(x.to(dtype).tpu().to(torch.uint8).cpu(), want), dtype
        out = torch.empty(x.shape, dtype=torch.uint8, device="tpu")
        assert torch.equal(out.copy_(x.to(dtype).tpu()).cpu(), want), dtype
    d = torch.tensor([1 + 2**-11 + 1e-14, 1 + 2**-11 - 1e-14, 65519.99, -3e-8], dtype=torch.float64)
    d = torch.cat([d, torch.randn(10000, dtype=torch.float64)])
    assert torch.equal(d.tpu().half().cpu(), d.half())


@two_devices
def test_copy_across_devices():
    x = torch.randn(5, 3)
    a = x.to("tpu:0")
    b = a.to("tpu:1")
    assert b.device == torch.device("tpu:1")
    assert torch.equal(b.cpu(), x)
    c = torch.zeros(3, 5, device="tpu:1")
    c.copy_(a.t())
    assert torch.equal(c.cpu(), x.t())


def test_broadcast_copy():
    t = torch.zeros(3, 4, device="tpu")
    t.copy_(torch.arange(4.0))
    assert torch.equal(t.cpu(), torch.arange(4.0).expand(3, 4))
    t.copy_(torch.ones(4, device="tpu") * 2)
    assert torch.equal(t.cpu(), torch.full((3, 4), 2.0))


def test_item_tolist_numpy():
    t = torch.tensor([1.5, 2.5], device="tpu")
    assert t[1].item() == 2.5
    assert t.tolist() == [1.5, 2.5]
    assert (t.cpu().numpy() == [1.5, 2.5]).all()
    assert "device='tpu:0'" in repr(t)


def test_save_load_roundtrip():
    m = torch.nn.Linear(4, 3)
    state = {k: v.to("tpu") for k, v in m.state_dict().items()}
    state["i"] = torch.arange(5, device="tpu")
    buf = io.BytesIO()
    torch.save(state, buf)
    buf.seek(0)
    on_cpu = torch.load(buf, map_location="cpu")
    for k in m.state_dict():
        assert torch.equal(on_cpu[k], m.state_dict()[k])
    buf.seek(0)
    back = torch.load(buf)
    assert back["weight"].device == torch.device("tpu:0")
    assert torch.equal(back["weight"].cpu(), m.weight.detach())
    assert torch.equal(back["i"].cpu(), torch.arange(5))
    # A CPU checkpoint loads onto tpu bit-exactly.
    buf = io.BytesIO()
    torch.save(m.state_dict(), buf)
    buf.seek(0)
    loaded = torch.load(buf, map_location="tpu")
    assert loaded["bias"].is_tpu and torch.equal(loaded["bias"].cpu(), m.bias.detach())


def test_export_save_load_with_an_empty_weight():
    # An empty tpu storage's address was a non-null token while its tensors'
    # is 0: torch.export.save, which compares the two to find whole
    # storages, raised "numel: integer multiplication overflow". It is null,
    # as on CPU, until the storage grows.
    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("z", torch.zeros(0, 3))
            self.w = torch.nn.Parameter(torch.ones(2))

        def forward(self, x):
            return x * self.w + self.z.sum()

    m = M().to("tpu")
    assert m.z.untyped_storage().data_ptr() == 0
    x = torch.arange(2.0, device="tpu")
    buf = io.BytesIO()
    torch.export.save(torch.export.export(m, (x,)), buf)
    buf.seek(0)
    loaded = torch.export.load(buf)
    assert loaded.state_dict["z"].is_tpu and loaded.state_dict["z"].shape == (0, 3)
    assert loaded.module()(x).cpu().tolist() == [0.0, 1.0]
    e = torch.empty(0, device="tpu")
    view = e.view(0, 1)
    e.resize_(3).fill_(2.0)
    out = torch.empty(0, device="tpu")
    torch.add(e, 1, out=out)
    assert e.untyped_storage().data_ptr() != 0
    assert view.untyped_storage().data_ptr() == e.untyped_storage().data_ptr()
    assert e.cpu().tolist() == [2.0] * 3 and out.cpu().tolist() == [3.0] * 3


def test_legacy_serialization_says_it_is_not_supported():
    # pickle and torch.save's legacy format copy a storage through its
    # address (from_blob), which a tpu storage has not: the error says so and
    # names the format that works, and the tensor is left as it was.
    import pickle

    t = torch.arange(4.0, device="tpu")
    for save in (lambda: pickle.dumps(t),
                 lambda: torch.save(t, io.BytesIO(), _use_new_zipfile_serialization=False)):
        with pytest.raises(RuntimeError, match="torch.save's default format"):
            save()
    assert t.cpu().tolist() == [0.0, 1.0, 2.0, 3.0]


def test_a_tpu_tensor_sent_to_another_process_is_refused_clearly():
    # torch.multiprocessing's reducers took a tpu storage for a CPU one and
    # said "_share_fd_: only available on CPU"; CPU tensors still share.
    from multiprocessing.reduction import ForkingPickler

    t = torch.ones(3, device="tpu")
    for obj in (t, torch.nn.Parameter(t), t.untyped_storage()):
        with pytest.raises(RuntimeError, match=r"cannot be sent to another process.*t\.cpu\(\)"):
            ForkingPickler.dumps(obj)
    assert ForkingPickler.dumps(torch.ones(3))


def test_untyped_storage_roundtrip():
    x = torch.arange(6, dtype=torch.float32)
    s = x.untyped_storage().tpu()
    assert s.device.type == "tpu" and s.nbytes() == 24
    back = torch.empty(0, dtype=torch.float32, device="tpu").set_(s)
    assert torch.equal(back.cpu(), x)


def test_pinned_host_memory():
    # pin_memory() and DataLoader(pin_memory=True) work as with CUDA: the
    # tensor is marked pinned (views too), the source is not, copies to tpu
    # (non_blocking or not) carry the same values.
    x = torch.randn(4, 5)
    p = x.pin_memory()
    assert p.is_pinned() and p[1:].is_pinned() and not x.is_pinned()
    assert torch.equal(p, x)
    assert torch.equal(p.to("tpu", non_blocking=True).cpu(), x)
    assert torch.empty(3, pin_memory=True).is_pinned()
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(torch.randn(8, 2)),
                                         batch_size=4, pin_memory=True)
    assert all(batch.is_pinned() for (batch,) in loader)


def test_every_upload_counts_as_a_host_to_device_copy():
    # A Python number new to the device goes up as a 0-d buffer and a random
    # op uploads its generator state: both are transfers, but the first
    # counted bytes without a copy and the second counted nothing.
    import random

    import torchtpu
    x = torch.ones(8, device="tpu")
    torch.tpu.synchronize()
    scale = 1000 + random.random()  # not uploaded before in this process
    for upload in (lambda: x * scale, lambda: torch.nn.functional.dropout(x, 0.5)):
        torchtpu.reset_metrics()
        upload().cpu()
        m = torchtpu.metrics()
        assert m["h2d_copies"] > 0 and m["h2d_bytes"] >= 4 * m["h2d_copies"], m
