"""Random dataflow programs on tpu in each mode against CPU: new values,
in-place and out= updates, views, tensors that die or are rebound while
their views live on (fused mode donates their buffers), dtype changes, host
reads and synchronizations. Each seed is a fixed program: a failure names
it, and `program(seed, "tpu")` replays it."""
import random

import pytest
import torch

import torchtpu


def program(seed, device, steps=30):
    """Returns the tensors still held at the end, and what was read back."""
    rng = random.Random(seed)
    g = torch.Generator().manual_seed(seed)
    # Small integers and binary coefficients keep every result exact, so a
    # fused graph's reordered arithmetic cannot flip a comparison.
    pool = [torch.randint(-8, 9, (4, 6), generator=g).float().to(device) for _ in range(3)]
    read = []
    for _ in range(steps):
        k = rng.randrange(19)
        a = rng.choice(pool)
        b = rng.choice([t for t in pool if t.shape == a.shape])
        c = rng.choice([0.5, -1.5, 2.0])
        real = a.dtype.is_floating_point
        try:
            if k == 0:
                pool.append(a + b * c)
            elif k == 1:
                pool.append(torch.where(a > b, a, b - c))
            elif k == 2:
                a.add_(b, alpha=c) if real else a.add_(1)
            elif k == 3:
                a.mul_(c if real else 2)
            elif k == 4 and len(pool) > 2:
                pool.pop(rng.randrange(len(pool)))  # dies, unless a view holds it
            elif k == 5:
                read.append(a.float().sum().item())
            elif k == 6 and a.dim() == 2:
                pool.append(a.t())
            elif k == 7 and a.shape[0] > 1:
                pool.append(a[1:])
            elif k == 8:
                pool.append(a.to(torch.int32) if real else a.float() * c)
            elif k == 9:
                a.copy_(b.flip(0))
            elif k == 10:
                pool.append(a.clone())
            elif k == 11 and a.dim() == 2:
                pool.append(a.sum(0, keepdim=True) + b)
            elif k == 12 and device != "cpu":
                torch.tpu.synchronize()
            elif k == 13 and real:
                a.masked_fill_(b > 0, c)
            elif k == 14:  # rebound: the old tensor dies, its views live on
                pool[next(i for i, t in enumerate(pool) if t is a)] = a * 2
            elif k == 15 and a.dim() == 2 and a.dtype == b.dtype:
                a[0].copy_(b.sum(0))
            elif k == 16 and real and b.dtype == a.dtype:
                torch.add(a, b, alpha=c, out=a)
            elif k == 17 and a.is_contiguous():  # layouts must agree with CPU's
                pool.append(a.view(-1))
            elif k == 18 and a.dim() == 2 and a.shape[0] > 1:
                a[-1:].mul_(c if real else 3)
        except RuntimeError as e:
            read.append(str(e).splitlines()[0])
        if len(pool) > 12:
            pool.pop(0)
    return [t.cpu() for t in pool], read


@pytest.mark.parametrize("mode", ["strict", "fused"])
def test_random_dataflow_programs_match_cpu(mode):
    for seed in range(30):
        want, want_read = program(seed, "cpu")
        with torchtpu.mode(mode):
            got, got_read = program(seed, "tpu")
        assert [(t.shape, t.dtype) for t in got] == [(t.shape, t.dtype) for t in want], seed
        for a, b in zip(want, got):
            assert torch.equal(a, b), f"seed {seed}: {a} != {b}"
        assert got_read == want_read, seed
