"""Random programs of views, in-place writes and reads, on tpu in each mode
against CPU. Each seed is a fixed program: a failure names it, and
`program(seed, "tpu")` replays it."""
import random

import pytest
import torch

import torchtpu


def random_view(t, rng):
    kind = rng.randrange(7)
    if t.dim() == 0 or kind == 0:
        return t
    if kind == 1:
        d = rng.randrange(t.dim())
        if t.shape[d] < 2:
            return t
        a = rng.randrange(t.shape[d] - 1)
        return t.narrow(d, a, rng.randrange(a + 1, t.shape[d] + 1) - a)
    if kind == 2 and t.dim() >= 2:
        return t.transpose(0, t.dim() - 1)
    if kind == 3 and t.dim() >= 2 and min(t.shape[:2]) > 0:
        return t.diagonal(0, 0, 1)
    if kind == 4 and t.shape[0] > 0:
        return t.select(0, rng.randrange(t.shape[0]))
    if kind == 5 and t.shape[-1] >= 2:
        return t[..., ::2]
    if kind == 6 and t.is_contiguous():
        return t.view(-1)
    return t


def program(seed, device, steps=12):
    """Writes through random views of a few tensors; returns them and the
    numbers read back along the way."""
    rng = random.Random(seed)
    g = torch.Generator().manual_seed(seed)
    tensors = [torch.randn(4, 5, 3, generator=g).to(device),
               torch.randn(6, 6, generator=g).to(device)]
    read = []
    for _ in range(steps):
        v = rng.choice(tensors)
        for _ in range(rng.randrange(3)):
            v = random_view(v, rng)
        op, c = rng.randrange(21), rng.choice([0.5, -2.0, 3.0])
        if op == 0:
            v.add_(c)
        elif op == 1:
            v.mul_(c)
        elif op == 2:
            v.copy_(v.flip(0) if v.dim() else v)
        elif op == 3:
            v.fill_(c)
        elif op == 4:
            v.zero_()
        elif op == 5:
            v.clamp_(-1, 1)
        elif op == 6:
            v.add_(random_view(rng.choice(tensors), rng).sum() * 0.1)
        elif op == 7:
            read.append(v.sum().item())
        elif op == 8:
            w = v.clone()
            w.mul_(2)
            v.sub_(w * 0.25)
        elif op == 9 and device != "cpu":
            torch.tpu.synchronize()
        elif op == 10 and v.dim() >= 1:
            v.masked_fill_(v > 0, c)
        elif op == 11 and v.dim() >= 1 and v.shape[0] > 1:
            v.index_fill_(0, torch.tensor([0, v.shape[0] - 1], device=device), c)
        elif op == 12 and 0 < v.numel():
            o = random_view(rng.choice(tensors), rng)
            if o.numel() >= v.numel():
                v.copy_(o.reshape(-1)[:v.numel()].reshape(v.shape).clone())
        elif op == 13 and v.dim() >= 1 and v.shape[0] > 0:
            v[0] = v[-1] * c
        elif op == 14:
            v.copy_(v * 0.5 + v.mean())
        elif op == 15 and v.dim() >= 1 and v.shape[0] > 1 and v.is_contiguous():
            # Rows that overlap in memory are refused on both devices. (In
            # a view with gaps CPU cannot tell, and copies element by
            # element through the overlap; tpu reads the source first.)
            try:
                v[1:].copy_(v[:-1]) if c > 0 else v[1:].add_(v[:1])
            except RuntimeError as e:
                read.append(str(e))
        elif op == 16 and v.dim() >= 2:
            tensors.append(v.transpose(0, -1).clone())
        # Writes whose source may share memory with the written view: both
        # devices refuse the same ones (only dense views: see op 15).
        elif op == 17 and v.numel() > 0 and v.is_contiguous():
            o = random_view(rng.choice(tensors), rng).reshape(-1)
            if o.numel() >= v.numel() and o.is_contiguous():
                try:
                    v.copy_(o[:v.numel()].reshape(v.shape))
                except RuntimeError as e:
                    read.append(str(e))
        elif op == 18 and v.dim() == 2 and v.shape[0] == v.shape[1] and v.is_contiguous():
            try:
                v.add_(v.t() * c)
            except RuntimeError as e:
                read.append(str(e))
        elif op == 19 and v.dim() >= 1 and v.shape[0] > 1 and v.is_contiguous():
            o = random_view(rng.choice(tensors), rng)
            if o.dim() == v.dim() and o.shape[1:] == v.shape[1:] and o.shape[0] >= 2 \
                    and o[:2].is_contiguous():
                try:
                    v.index_add_(0, torch.tensor([0, v.shape[0] - 1], device=device), o[:2],
                                 alpha=c)
                except RuntimeError as e:
                    read.append(str(e))
        elif op == 20 and v.dim() >= 1:
            v.mul_(0.5).add_(v.transpose(0, -1).sum() * 0.01)
        if rng.random() < 0.2:
            tensors.append(v.clone())
    return [t.cpu() for t in tensors], read


@pytest.mark.parametrize("mode", ["strict", "fused"])
def test_random_view_programs_match_cpu(mode):
    seeds = range(40)
    for seed in seeds:
        want, want_read = program(seed, "cpu")
        with torchtpu.mode(mode):
            got, got_read = program(seed, "tpu")
        assert len(got) == len(want), seed
        for a, b in zip(want, got):
            torch.testing.assert_close(b, a, atol=1e-5, rtol=1e-5, msg=lambda m: f"seed {seed}: {m}")
        assert len(got_read) == len(want_read), seed
        for a, b in zip(want_read, got_read):
            assert b == (a if isinstance(a, str) else pytest.approx(a, rel=1e-4, abs=1e-4)), seed
