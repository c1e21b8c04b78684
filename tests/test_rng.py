"""Random numbers on tpu: reproducibility (seeds, generators, RNG state,
modes), distributions (moments and bounds on a few thousand samples),
dtypes, dropout and its backward, randperm, multinomial, and the argument
errors. Values need not equal CPU's; deterministic parts (dropout backward,
errors) are compared with CPU."""
import math

import pytest
import torch
import torch.nn.functional as F

import torchtpu
from conftest import NoFallback, check, check_error

N = 4096
TPU = "tpu"
FLOATS = [torch.float32, torch.bfloat16, torch.float16, torch.float64]


def seeded(fn, seed=0):
    torch.manual_seed(seed)
    with NoFallback():
        return fn().cpu()


def stats(x):
    x = x.double()
    return x.mean().item(), x.std().item()


#===--- reproducibility ---===#

DRAWS = {
    "rand": lambda: torch.rand(N, device=TPU),
    "randn": lambda: torch.randn(N, device=TPU),
    "randint": lambda: torch.randint(0, 1000, (N,), device=TPU),
    "rand_bf16": lambda: torch.rand(N, device=TPU, dtype=torch.bfloat16),
    "bernoulli": lambda: torch.empty(N, device=TPU).bernoulli_(0.5),
    "exponential": lambda: torch.empty(N, device=TPU).exponential_(),
    "dropout": lambda: F.dropout(torch.ones(N, device=TPU), 0.5, training=True),
    "randperm": lambda: torch.randperm(N, device=TPU),
    "multinomial": lambda: torch.multinomial(torch.ones(N, device=TPU), 16),
    "normal_tensor": lambda: torch.normal(torch.zeros(N, device=TPU), torch.ones(N, device=TPU)),
    "standard_gamma": lambda: torch._standard_gamma(torch.full((N,), 0.7, device=TPU)),
    "dirichlet": lambda: torch._sample_dirichlet(torch.ones(N // 4, 4, device=TPU)),
    "poisson": lambda: torch.poisson(torch.linspace(0, 30, N, device=TPU)),
}


@pytest.mark.parametrize("name", list(DRAWS))
def test_same_seed_same_values(name):
    fn = DRAWS[name]
    a = seeded(fn, 123)
    b = seeded(fn, 123)
    assert torch.equal(a, b)
    torch.manual_seed(123)
    first, second = fn().cpu(), fn().cpu()
    assert torch.equal(first, a)
    assert not torch.equal(first, second), "successive draws repeat"
    assert not torch.equal(seeded(fn, 124), a), "another seed gives the same values"


def test_rank8_draws():
    # Draws of several words per element were [m, sizes...]: rank 9 for a
    # rank-8 tensor, past the IR's types (a complex randn crashed).
    s = (2, 3, 1, 2, 3, 2, 1, 2)
    for f in (lambda: torch.randn(s, device="tpu"),
              lambda: torch.randn(s, device="tpu", dtype=torch.complex64),
              lambda: torch.rand(s, device="tpu", dtype=torch.complex64),
              lambda: torch.poisson(torch.full(s, 4.0, device="tpu")),
              lambda: torch._standard_gamma(torch.full(s, 0.7, device="tpu"))):
        with NoFallback():
            r = f().cpu()
        assert r.shape == s and r.isfinite().all() and r.std() > 0


def test_successive_draws_do_not_overlap():
    # Each op owns its own Philox stream: the second draw is not the first
    # one shifted by a few blocks.
    torch.manual_seed(0)
    a = torch.rand(N, device=TPU).cpu()
    b = torch.rand(N, device=TPU).cpu()
    common = set(a.tolist()) & set(b.tolist())
    assert len(common) < 32, f"{len(common)} values shared"


def test_tpu_manual_seed_and_state():
    torch.tpu.manual_seed(42)
    a = torch.randn(N, device=TPU).cpu()
    torch.tpu.manual_seed(42)
    assert torch.equal(torch.randn(N, device=TPU).cpu(), a)
    state = torch.tpu.get_rng_state()
    b = torch.rand(N, device=TPU).cpu()
    c = torch.rand(N, device=TPU).cpu()
    torch.tpu.set_rng_state(state)
    assert torch.equal(torch.rand(N, device=TPU).cpu(), b)
    assert torch.equal(torch.rand(N, device=TPU).cpu(), c)
    torch.tpu.manual_seed_all(42)
    assert torch.equal(torch.randn(N, device=TPU).cpu(), a)


def test_generator_object():
    g = torch.Generator(TPU)
    g.manual_seed(5)
    a = torch.rand(N, device=TPU, generator=g).cpu()
    torch.rand(N, device=TPU)  # the default generator does not disturb g
    g.manual_seed(5)
    assert torch.equal(torch.rand(N, device=TPU, generator=g).cpu(), a)
    state = g.get_state()
    b = torch.randn(N, device=TPU, generator=g).cpu()
    g.set_state(state)
    assert torch.equal(torch.randn(N, device=TPU, generator=g).cpu(), b)
    # every op passes its generator through
    with NoFallback():
        for fn in [lambda gen: torch.empty(N, device=TPU).uniform_(generator=gen),
                   lambda gen: torch.empty(N, device=TPU).normal_(generator=gen),
                   lambda gen: torch.randint(0, 9, (N,), device=TPU, generator=gen),
                   lambda gen: torch.empty(N, device=TPU).random_(generator=gen),
                   lambda gen: torch.empty(N, device=TPU).bernoulli_(0.3, generator=gen),
                   lambda gen: torch.empty(N, device=TPU).exponential_(generator=gen),
                   lambda gen: torch.empty(N, device=TPU).log_normal_(generator=gen),
                   lambda gen: torch.empty(N, device=TPU).geometric_(0.3, generator=gen),
                   lambda gen: torch.empty(N, device=TPU).cauchy_(generator=gen),
                   lambda gen: torch.randperm(N, device=TPU, generator=gen),
                   lambda gen: torch.multinomial(torch.ones(N, device=TPU), 4, generator=gen),
                   lambda gen: torch.normal(torch.zeros(N, device=TPU), 1.0, generator=gen)]:
            g1, g2 = torch.Generator(TPU), torch.Generator(TPU)
            g1.manual_seed(9)
            g2.manual_seed(9)
            x, y = fn(g1).cpu(), fn(g2).cpu()
            assert torch.equal(x, y)
            assert not torch.equal(fn(g1).cpu(), x)


def test_modes_agree():
    def draws():
        torch.manual_seed(7)
        x = torch.ones(64, device=TPU, requires_grad=True)
        y = F.dropout(x, 0.4, training=True)
        y.sum().backward()
        out = [torch.rand(64, device=TPU), torch.randn(64, device=TPU, dtype=torch.float16),
               torch.randint(-3, 3, (64,), device=TPU), y.detach(), x.grad,
               torch.empty(64, device=TPU).bernoulli_(0.3), torch.randperm(20, device=TPU),
               torch.multinomial(torch.arange(1.0, 9.0, device=TPU), 4, replacement=True)]
        return [t.cpu() for t in out]

    results = {}
    for m in ["debug", "strict", "fused"]:
        with torchtpu.mode(m), NoFallback():
            results[m] = draws()
    for m in ["strict", "fused"]:
        for a, b in zip(results["debug"], results[m]):
            assert torch.equal(a, b), m


#===--- uniform ---===#

@pytest.mark.parametrize("dtype", FLOATS)
def test_uniform(dtype):
    x = seeded(lambda: torch.empty(N, device=TPU, dtype=dtype).uniform_(-2, 3))
    assert x.dtype == dtype
    assert x.min() >= -2 and x.max() < 3
    mean, std = stats(x)
    assert abs(mean - 0.5) < 0.1 and abs(std - 5 / math.sqrt(12)) < 0.06
    r = seeded(lambda: torch.rand(N, device=TPU, dtype=dtype))
    assert r.min() >= 0 and r.max() < 1
    assert len(set(r.tolist())) > {torch.bfloat16: 200, torch.float16: 1000}.get(dtype, 4000)


def test_uniform_never_reaches_to():
    # Ranges so narrow that rounding would land on `to`.
    x = seeded(lambda: torch.empty(N, device=TPU, dtype=torch.bfloat16).uniform_(1, 1.0078125))
    assert (x == 1).all()
    x = seeded(lambda: torch.empty(N, device=TPU, dtype=torch.float16).uniform_(-1, -1 + 2**-11))
    assert (x == -1).all()
    x = seeded(lambda: torch.empty(N, device=TPU, dtype=torch.float16).uniform_(1, 1 + 2**-10))
    assert (x == 1).all()
    x = seeded(lambda: torch.empty(N, device=TPU).uniform_(1e8, 1e8 + 8))
    assert x.min() >= 1e8 and x.max() < 1e8 + 8
    x = seeded(lambda: torch.empty(N, device=TPU).uniform_(2.5, 2.5))
    assert (x == 2.5).all()


def test_uniform_complex_and_views():
    z = seeded(lambda: torch.rand(N, device=TPU, dtype=torch.complex64))
    assert z.dtype == torch.complex64
    for part in [z.real, z.imag]:
        assert part.min() >= 0 and part.max() < 1 and abs(part.mean() - 0.5) < 0.05
    base = torch.zeros(8, 8, device=TPU)
    with NoFallback():
        base[:, ::2].uniform_(5, 6)
    b = base.cpu()
    assert (b[:, 1::2] == 0).all() and (b[:, ::2] >= 5).all()


#===--- normal ---===#

@pytest.mark.parametrize("dtype", FLOATS)
def test_normal(dtype):
    z = seeded(lambda: torch.randn(N, device=TPU, dtype=dtype))
    assert z.dtype == dtype
    mean, std = stats(z)
    assert abs(mean) < 0.08 and abs(std - 1) < 0.06
    within = (z.double().abs() < 1).double().mean().item()
    assert abs(within - 0.6827) < 0.035
    assert z.double().abs().max() > 3  # real tails
    x = seeded(lambda: torch.empty(N, device=TPU, dtype=dtype).normal_(3, 0.5))
    mean, std = stats(x)
    assert abs(mean - 3) < 0.05 and abs(std - 0.5) < 0.03


def test_normal_complex():
    z = seeded(lambda: torch.randn(N, device=TPU, dtype=torch.complex64))
    assert z.dtype == torch.complex64
    for part in [z.real, z.imag]:
        mean, std = stats(part)
        assert abs(mean) < 0.06 and abs(std - math.sqrt(0.5)) < 0.05


def test_normal_tensor_forms():
    mean = torch.arange(3.0, device=TPU).reshape(3, 1) * 10
    std = torch.tensor([0.0, 1.0, 2.0, 0.5], device=TPU)
    with NoFallback():
        x = torch.normal(mean, std)
        assert x.shape == (3, 4) and x.dtype == torch.float32
        c = x.cpu()
        assert torch.equal(c[:, 0], torch.tensor([0.0, 10.0, 20.0]))  # std 0: the mean
        h = torch.normal(mean.half(), std.double())
        assert h.dtype == torch.float16
        y = torch.normal(2.0, torch.full((N,), 3.0, device=TPU, dtype=torch.float64))
        assert y.dtype == torch.float64
        m, s = stats(y.cpu())
        assert abs(m - 2) < 0.25 and abs(s - 3) < 0.2
        w = torch.normal(torch.full((N,), -1.0, device=TPU), 0.25)
        m, s = stats(w.cpu())
        assert abs(m + 1) < 0.02 and abs(s - 0.25) < 0.015
        out = torch.empty(0, device=TPU)
        r = torch.normal(mean, std, out=out)
        assert r is out and out.shape == (3, 4)
        zc = torch.normal(torch.zeros(N, device=TPU, dtype=torch.complex64), 1.0)
        assert zc.dtype == torch.complex64
        assert abs(stats(zc.real.cpu())[1] - math.sqrt(0.5)) < 0.05


def test_normal_errors():
    check_error(lambda x: x.normal_(0, -1), torch.empty(4))
    check_error(lambda m: torch.normal(m, -1.0), torch.zeros(4))
    check_error(lambda x: x.normal_(), torch.empty(4, dtype=torch.int64))
    check_error(lambda m, s: torch.normal(m, s), torch.zeros(4), torch.ones(4, dtype=torch.complex64))
    check_error(lambda m, s: torch.normal(m, s), torch.zeros(3), torch.ones(4))
    # negative std in a tensor: found on the device, raised at synchronization
    check_error(lambda m, s: torch.normal(m, s), torch.zeros(4), -torch.ones(4))
    check_error(lambda s: torch.normal(0.0, s), -torch.ones(4))


#===--- random_, randint ---===#

RANDOM_RANGES = {torch.uint8: 255, torch.int8: 127, torch.int16: 2**15 - 1, torch.int32: 2**31 - 1,
                 torch.int64: 2**63 - 1, torch.bool: 1, torch.float16: 2048, torch.bfloat16: 256,
                 torch.float32: 2**24, torch.float64: 2**53}


@pytest.mark.parametrize("dtype", list(RANDOM_RANGES))
def test_random_(dtype):
    x = seeded(lambda: torch.empty(N, device=TPU, dtype=dtype).random_())
    assert x.dtype == dtype
    hi = RANDOM_RANGES[dtype]
    v = x.double() if dtype != torch.int64 else x
    assert v.min() >= 0 and v.max() <= hi
    assert (v == v.round()).all()
    if dtype == torch.int64:
        assert x.max() > 2**61
    else:
        mean = v.double().mean().item()
        assert abs(mean - hi / 2) < 0.06 * hi + 0.05
    if dtype in (torch.uint8, torch.bool):
        assert len(set(x.tolist())) == hi + 1


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.int8, torch.uint8, torch.float32,
                                   torch.bfloat16, torch.float64])
def test_randint(dtype):
    x = seeded(lambda: torch.randint(0, 3, (N,), device=TPU, dtype=dtype))
    assert x.dtype == dtype and set(x.tolist()) == {0, 1, 2}
    lo = 0 if dtype == torch.uint8 else -5
    y = seeded(lambda: torch.randint(lo, 5, (N,), device=TPU, dtype=dtype))
    assert set(y.tolist()) == set(range(lo, 5))
    z = seeded(lambda: torch.empty(N, device=TPU, dtype=dtype).random_(7))
    assert set(z.tolist()) == set(range(7))


def test_randint_wide_ranges():
    x = seeded(lambda: torch.randint(-2**40, 2**40, (N,), device=TPU))
    assert x.min() >= -2**40 and x.max() < 2**40
    assert abs(x.double().mean().item()) < 0.1 * 2**40
    # 32-bit words modulo 3 * 2^30 would put half of the samples below 2^30.
    y = seeded(lambda: torch.randint(0, 3 * 2**30, (N,), device=TPU))
    frac = (y < 2**30).double().mean().item()
    assert abs(frac - 1 / 3) < 0.04
    u = seeded(lambda: torch.empty(N, device=TPU, dtype=torch.uint8).random_(250, None))
    assert set(u.tolist()) == set(range(250, 256))
    full = seeded(lambda: torch.empty(N, device=TPU, dtype=torch.int64).random_(-2**63, None))
    assert full.min() < -2**61 and full.max() > 2**61
    rl = seeded(lambda: torch.randint_like(torch.zeros(N, device=TPU), 10, 20))
    assert rl.dtype == torch.float32 and set(rl.tolist()) == set(float(i) for i in range(10, 20))


def test_random_errors():
    check_error(lambda x: x.random_(5, 5), torch.empty(4))
    check_error(lambda x: x.random_(0, 300), torch.empty(4, dtype=torch.uint8))
    check_error(lambda x: x.random_(-1, 3), torch.empty(4, dtype=torch.uint8))
    check_error(lambda x: x.random_(0), torch.empty(4))
    check_error(lambda x: x.random_(), torch.empty(4, dtype=torch.complex64))
    check_error(lambda x: x.random_(3000, None), torch.empty(4, dtype=torch.float16))
    check_error(lambda x: x.random_(-2**63, None), torch.empty(4, dtype=torch.int32))


#===--- bernoulli ---===#

@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16, torch.float64,
                                   torch.int64, torch.uint8, torch.bool])
def test_bernoulli_scalar_p(dtype):
    x = seeded(lambda: torch.empty(N, device=TPU, dtype=dtype).bernoulli_(0.3))
    assert x.dtype == dtype and set(x.double().tolist()) <= {0.0, 1.0}
    assert abs(x.double().mean().item() - 0.3) < 0.035
    assert not seeded(lambda: torch.empty(N, device=TPU, dtype=dtype).bernoulli_(0)).double().any()
    assert seeded(lambda: torch.empty(N, device=TPU, dtype=dtype).bernoulli_(1)).double().all()


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.float64])
def test_bernoulli_tensor_p(dtype):
    p = torch.tensor([0.0, 0.1, 0.5, 0.9, 1.0], device=TPU, dtype=dtype).repeat(N // 4, 1)
    x = seeded(lambda: torch.bernoulli(p))
    assert x.dtype == dtype and x.shape == p.shape
    means = x.double().mean(0)
    expect = torch.tensor([0.0, 0.1, 0.5, 0.9, 1.0], dtype=torch.float64)
    assert (means - expect).abs().max() < 0.05
    assert means[0] == 0 and means[4] == 1
    # p broadcast over self, into an integer tensor; out=
    y = seeded(lambda: torch.empty(N // 4, 5, device=TPU, dtype=torch.int32).bernoulli_(p[0]))
    assert y.dtype == torch.int32 and ((y.double().mean(0) - expect).abs() < 0.06).all()
    out = torch.empty(0, device=TPU, dtype=torch.float64)
    with NoFallback():
        torch.bernoulli(p, out=out)
    assert out.shape == p.shape and set(out.cpu().unique().tolist()) <= {0.0, 1.0}


def test_bernoulli_errors():
    check_error(lambda x: x.bernoulli_(1.5), torch.empty(4))
    check_error(lambda x: x.bernoulli_(0.5), torch.empty(4, dtype=torch.complex64))
    check_error(lambda x, p: x.bernoulli_(p), torch.empty(3), torch.ones(4))
    check_error(lambda p: torch.bernoulli(p), torch.ones(3, dtype=torch.int64))
    check_error(lambda p: torch.bernoulli(p), torch.full((3,), 1.5))  # on the device
    check_error(lambda p: torch.bernoulli(p), torch.full((3,), float("nan")))


#===--- exponential, log-normal, geometric, Cauchy ---===#

@pytest.mark.parametrize("dtype", FLOATS)
def test_exponential(dtype):
    x = seeded(lambda: torch.empty(N, device=TPU, dtype=dtype).exponential_(2.0))
    assert x.dtype == dtype and x.min() > 0
    mean, std = stats(x)
    assert abs(mean - 0.5) < 0.04 and abs(std - 0.5) < 0.05


def test_log_normal():
    x = seeded(lambda: torch.empty(N, device=TPU).log_normal_(1.0, 0.5))
    assert x.min() > 0
    mean, std = stats(x.log())
    assert abs(mean - 1) < 0.04 and abs(std - 0.5) < 0.03
    h = seeded(lambda: torch.empty(N, device=TPU, dtype=torch.float16).log_normal_(0.0, 0.25))
    assert h.dtype == torch.float16 and abs(stats(h.float().log())[1] - 0.25) < 0.02


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.int64, torch.int32])
def test_geometric(dtype):
    x = seeded(lambda: torch.empty(N, device=TPU, dtype=dtype).geometric_(0.25))
    assert x.dtype == dtype and x.min() >= 1
    assert (x.double() == x.double().round()).all()
    mean, std = stats(x)
    assert abs(mean - 4) < 0.3 and abs(std - math.sqrt(0.75) / 0.25) < 0.35
    ones = (x == 1).double().mean().item()
    assert abs(ones - 0.25) < 0.035


def test_cauchy():
    x = seeded(lambda: torch.empty(N, device=TPU).cauchy_(2.0, 0.5))
    assert abs(x.median().item() - 2) < 0.08
    inside = ((x - 2).abs() < 0.5).double().mean().item()
    assert abs(inside - 0.5) < 0.04
    h = seeded(lambda: torch.empty(N, device=TPU, dtype=torch.bfloat16).cauchy_())
    assert h.dtype == torch.bfloat16


def test_distribution_errors():
    for fn, x in [(lambda x: x.exponential_(0), torch.empty(4)),
                  (lambda x: x.exponential_(-1), torch.empty(4)),
                  (lambda x: x.exponential_(), torch.empty(4, dtype=torch.int64)),
                  (lambda x: x.log_normal_(1, 0), torch.empty(4)),
                  (lambda x: x.log_normal_(), torch.empty(4, dtype=torch.int64)),
                  (lambda x: x.geometric_(0), torch.empty(4)),
                  (lambda x: x.geometric_(1), torch.empty(4)),
                  (lambda x: x.geometric_(0.5), torch.empty(4, dtype=torch.bool)),
                  (lambda x: x.cauchy_(0, 0), torch.empty(4)),
                  (lambda x: x.cauchy_(), torch.empty(4, dtype=torch.int32)),
                  (lambda x: x.uniform_(2, 1), torch.empty(4)),
                  (lambda x: x.uniform_(), torch.empty(4, dtype=torch.int64)),
                  (lambda x: x.uniform_(-3e38, 3e38), torch.empty(4))]:
        tpu_err, cpu_err = check_error(fn, x)
        assert str(tpu_err) == str(cpu_err)


#===--- dropout ---===#

@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_dropout(dtype):
    x_cpu = torch.randn(64, 64).to(dtype)
    x = x_cpu.to(TPU).requires_grad_()
    torch.manual_seed(3)
    with NoFallback():
        y = F.dropout(x, 0.3, training=True)
        g = torch.randn(64, 64).to(dtype)
        y.backward(g.to(TPU))
    y = y.detach().cpu()
    keep = y != 0
    assert abs(keep.double().mean().item() - 0.7) < 0.03
    scale = 1 / (1 - 0.3)
    assert torch.equal(y, x_cpu * keep * scale)
    assert torch.equal(x.grad.cpu(), g * keep * scale)


def test_native_dropout_and_eval():
    x = torch.randn(N, device=TPU)
    with NoFallback():
        out, mask = torch.native_dropout(x, 0.25, True)
        assert mask.dtype == torch.bool and out.dtype == torch.float32
        assert abs(mask.cpu().double().mean().item() - 0.75) < 0.03
        assert torch.equal(out.cpu(), x.cpu() * mask.cpu() * (1 / 0.75))
        same, ones = torch.native_dropout(x, 0.25, False)
        assert torch.equal(same.cpu(), x.cpu()) and ones.cpu().all()
        assert torch.equal(F.dropout(x, 0.5, training=False).cpu(), x.cpu())
        d2 = F.dropout2d(torch.ones(4, 8, 3, 3, device=TPU), 0.5, training=True).cpu()
        per_channel = d2.reshape(32, 9)
        assert ((per_channel == 0).all(1) | (per_channel == 2).all(1)).all()
        a = F.alpha_dropout(torch.ones(N, device=TPU), 0.2, training=True).cpu()
        assert len(a.unique()) == 2


def test_native_dropout_keeps_the_layout_of_its_input():
    # As CPU's (empty_like): a compiled graph views the result on that promise.
    x = torch.randn(6, 4, 5).permute(2, 0, 1)
    out, mask = torch.native_dropout(x.to(TPU), 0.5, True)
    expected = torch.native_dropout(x, 0.5, True)
    assert out.stride() == mask.stride() == expected[0].stride() == x.stride()
    assert torch.equal(out.cpu(), x * mask.cpu() * 2)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16, torch.float64])
def test_native_dropout_backward(dtype):
    g = torch.randn(5, 7).to(dtype)
    mask = torch.rand(5, 7) > 0.4
    check(lambda g, m: torch.ops.aten.native_dropout_backward(g, m, 1.6), g, mask)
    check(lambda g, m: torch.ops.aten.native_dropout_backward(g, m, 0.0), g, mask)
    check(lambda g, m: torch.ops.aten.native_dropout_backward(g, m, 2.0), g, mask[0])


def test_dropout_errors():
    check_error(lambda x: torch.native_dropout(x, 1.5, True), torch.ones(3))
    check_error(lambda x: torch.native_dropout(x, 0.5, True), torch.ones(3, dtype=torch.int64))


#===--- randperm, multinomial ---===#

@pytest.mark.parametrize("n", [1, 7, 100, 5000])
def test_randperm(n):
    p = seeded(lambda: torch.randperm(n, device=TPU))
    assert p.dtype == torch.int64 and torch.equal(p.sort().values, torch.arange(n))
    if n >= 100:
        assert not torch.equal(p, torch.arange(n))
        i = torch.arange(n, dtype=torch.float64)
        corr = torch.corrcoef(torch.stack([i, p.double()]))[0, 1].item()
        assert abs(corr) < 0.3 if n == 100 else abs(corr) < 0.06


@pytest.mark.parametrize("dtype", [torch.int32, torch.int16, torch.uint8, torch.float32,
                                   torch.float16, torch.bfloat16, torch.float64])
def test_randperm_dtypes(dtype):
    p = seeded(lambda: torch.randperm(100, device=TPU, dtype=dtype))
    assert p.dtype == dtype and torch.equal(p.sort().values.long(), torch.arange(100))
    out = torch.empty(0, device=TPU, dtype=dtype)
    with NoFallback():
        torch.randperm(10, out=out)
    assert torch.equal(out.cpu().sort().values.long(), torch.arange(10))


def test_randperm_errors():
    with pytest.raises(RuntimeError, match="n must be non-negative"):
        torch.randperm(-1, out=torch.empty(0, device=TPU, dtype=torch.int64))
    check_error(lambda o: torch.randperm(5000, out=o), torch.empty(0, dtype=torch.float16))
    check_error(lambda o: torch.randperm(3, out=o), torch.empty(0, dtype=torch.bool))
    assert torch.randperm(0, device=TPU).shape == (0,)
    # n - 1 must fit an integer dtype: 300 uint8 "permutations" held only
    # 256 distinct values, 200 int8 ones negative values.
    for dtype, n in ((torch.uint8, 300), (torch.int8, 200), (torch.int16, 40000)):
        err, cpu_err = check_error(lambda o: torch.randperm(n, out=o), torch.empty(0, dtype=dtype))
        assert str(err) == str(cpu_err)
    for dtype, n in ((torch.uint8, 256), (torch.int8, 128)):
        assert sorted(seeded(lambda: torch.randperm(n, dtype=dtype, device=TPU)).tolist()) == \
            list(range(n))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.float64])
def test_multinomial_without_replacement(dtype):
    p = torch.tensor([0.0, 1.0, 0.0, 2.0, 0.0, 3.0], dtype=dtype, device=TPU)
    s = seeded(lambda: torch.multinomial(p, 3))
    assert s.dtype == torch.int64 and sorted(s.tolist()) == [1, 3, 5]
    rows = p.repeat(N, 1)
    first = seeded(lambda: torch.multinomial(rows, 1)).flatten()
    freq = torch.bincount(first, minlength=6).double() / N
    assert (freq - torch.tensor([0, 1, 0, 2, 0, 3]) / 6).abs().max() < 0.035
    two = seeded(lambda: torch.multinomial(rows, 2))
    assert (two[:, 0] != two[:, 1]).all()


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.float64])
def test_multinomial_with_replacement(dtype):
    p = torch.tensor([0.0, 1.0, 0.0, 2.0, 0.0, 3.0, 0.0], dtype=dtype, device=TPU)
    s = seeded(lambda: torch.multinomial(p, N, replacement=True))
    assert s.shape == (N,) and s.dtype == torch.int64
    freq = torch.bincount(s, minlength=7).double() / N
    assert (freq - torch.tensor([0, 1, 0, 2, 0, 3, 0]) / 6).abs().max() < 0.035
    assert freq[0] == 0 and freq[2] == 0 and freq[4] == 0 and freq[6] == 0
    two = seeded(lambda: torch.multinomial(torch.tensor([[1.0, 0.0], [0.0, 5.0]], dtype=dtype,
                                                        device=TPU), 8, True))
    assert torch.equal(two, torch.tensor([[0] * 8, [1] * 8]))


@pytest.mark.parametrize("scale", [1e-35, 1e-300])
def test_multinomial_with_replacement_of_tiny_weights(scale):
    # Normal numbers, but u * total was regrouped as u's integer times
    # 2^-24 * total, a subnormal flushed to 0: every draw was category 0.
    dtype = torch.float32 if scale > 1e-38 else torch.float64
    p = torch.tensor([1.0, 3.0, 0.0], dtype=torch.float64).mul(scale).to(dtype)
    s = seeded(lambda: torch.multinomial(p.to(TPU), N, replacement=True))
    freq = torch.bincount(s, minlength=3).double() / N
    assert (freq - torch.tensor([0.25, 0.75, 0.0], dtype=torch.float64)).abs().max() < 0.035


def test_multinomial_many_categories():
    p = torch.zeros(1000, dtype=torch.float64)
    p[3::7] = torch.linspace(1, 3, len(p[3::7]), dtype=torch.float64)
    s = seeded(lambda: torch.multinomial(p.to(TPU), 8 * N, replacement=True))
    assert s.min() >= 0 and s.max() < 1000 and (p[s] > 0).all()
    freq = torch.bincount(s, minlength=1000).double()
    third = len(p[3::7]) // 3
    ratio = freq[3::7][-third:].sum() / freq[3::7][:third].sum()
    expect = p[3::7][-third:].sum() / p[3::7][:third].sum()
    assert abs(ratio / expect - 1) < 0.05


def test_multinomial_errors():
    check_error(lambda p: torch.multinomial(p, 1), torch.ones(2, 2, 2))
    check_error(lambda p: torch.multinomial(p, 1), torch.ones(2, dtype=torch.int64))
    check_error(lambda p: torch.multinomial(p, 0), torch.ones(2))
    check_error(lambda p: torch.multinomial(p, 3), torch.ones(2))
    check_error(lambda p, o: torch.multinomial(p, 2, out=o), torch.ones(1, 2, dtype=torch.float64),
                torch.empty(1, 2, dtype=torch.float64))
    # found on the device, raised at synchronization
    check_error(lambda p: torch.multinomial(p, 1), torch.tensor([1.0, -1.0]))
    check_error(lambda p: torch.multinomial(p, 1), torch.tensor([1.0, float("nan")]))
    check_error(lambda p: torch.multinomial(p, 1, True), torch.tensor([1.0, float("inf")]))
    check_error(lambda p: torch.multinomial(p, 1), torch.tensor([0.0, 0.0]))


#===--- gamma and Dirichlet ---===#

def ks_distance(a, b):
    """The two-sample Kolmogorov-Smirnov statistic of 1-D samples a and b."""
    both = torch.cat([a, b]).double().sort().values
    cdf = lambda s: torch.searchsorted(s.double().sort().values, both, right=True) / len(s)
    return (cdf(a) - cdf(b)).abs().max().item()


def ks_critical(n, m):
    return 1.95 * math.sqrt((n + m) / (n * m))  # rejects equal laws with p < 0.001


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
@pytest.mark.parametrize("alpha", [0.05, 0.4, 1.0, 3.5, 60.0])
def test_standard_gamma_matches_cpu_law(alpha, dtype):
    # Same law as CPU's sampler (two-sample KS test), in each dtype CUDA
    # samples (CPU has no half precision kernel: its float32 is the reference).
    n = 20000
    x = seeded(lambda: torch._standard_gamma(torch.full((n,), alpha, dtype=dtype, device=TPU)))
    assert x.dtype == dtype and (x > 0).all()
    ref_dtype = torch.float64 if dtype == torch.float64 else torch.float32
    ref = torch._standard_gamma(torch.full((n,), alpha, dtype=ref_dtype))
    assert ks_distance(x, ref) < ks_critical(n, n) + (0.01 if dtype == torch.bfloat16 else 0)


def test_standard_gamma_edge_values():
    # Exactly CPU's results where they are not random: alpha = inf gives inf;
    # alpha <= 0, NaN, and samples that underflow give the smallest normal.
    alpha = torch.tensor([0.0, -1.0, math.nan, math.inf, 1e-30])
    for dtype in (torch.float32, torch.float64):
        check(lambda a: torch._standard_gamma(a.to(dtype)), alpha)
    check_error(lambda a: torch._standard_gamma(a), torch.ones(3, dtype=torch.int64))


def test_dirichlet_and_distributions():
    n, conc = 20000, torch.tensor([0.3, 1.0, 2.5])
    x = seeded(lambda: torch._sample_dirichlet(conc.to(TPU).expand(n, 3).contiguous()))
    ref = torch._sample_dirichlet(conc.expand(n, 3).contiguous())
    torch.testing.assert_close(x.sum(1), torch.ones(n), atol=1e-5, rtol=0)
    for k in range(3):
        assert ks_distance(x[:, k], ref[:, k]) < ks_critical(n, n)
    # torch.distributions built on them sample on the device.
    with NoFallback():
        beta = torch.distributions.Beta(torch.tensor(2.0, device=TPU), torch.tensor(5.0, device=TPU))
        b = beta.sample((n,))
        gam = torch.distributions.Gamma(torch.full((n,), 3.0, device=TPU), torch.tensor(2.0, device=TPU))
        g = gam.sample()
        chi2 = torch.distributions.Chi2(torch.full((n,), 4.0, device=TPU)).sample()
    assert b.device.type == "tpu" and abs(b.mean().item() - 2 / 7) < 0.01
    assert abs(g.mean().item() - 1.5) < 0.05 and abs(chi2.mean().item() - 4) < 0.15


#===--- Poisson ---===#

@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16])
@pytest.mark.parametrize("rate", [0.05, 2.5, 9.5, 10.0, 40.0, 500.0])
def test_poisson_matches_cpu_law(rate, dtype):
    # Rates below 10 take the inversion, from 10 on the rejection sampler.
    n = 20000
    x = seeded(lambda: torch.poisson(torch.full((n,), rate, dtype=dtype, device=TPU)))
    assert x.dtype == dtype and torch.equal(x, x.round()) and (x >= 0).all()
    ref = torch.poisson(torch.full((n,), rate, dtype=torch.float64))
    slack = 0.01 if dtype == torch.float16 and rate == 500.0 else 0  # counts rounded to half
    assert ks_distance(x.double(), ref) < ks_critical(n, n) + slack


@pytest.mark.parametrize("rate", [3e6, 1e9])
def test_poisson_of_large_rates_has_the_variance_of_the_rate(rate):
    # Sampled in double as on CPU: float32's rejection test cancelled, and
    # the variance came out 0.9 to 1.65 times the rate.
    n = 20000
    x = seeded(lambda: torch.poisson(torch.full((n,), rate, device=TPU))).double()
    sigma = math.sqrt(rate)
    assert abs(x.mean().item() - rate) < 5 * sigma / math.sqrt(n)
    assert abs(x.var().item() / rate - 1) < 5 * math.sqrt(2 / n)


def test_poisson_edge_values_and_errors():
    rates = torch.tensor([0.0, math.inf, 1e-30])
    x = seeded(lambda: torch.poisson(rates.to(TPU)))
    assert x.tolist() == [0.0, math.inf, 0.0]
    # A negative or NaN rate: CPU's error, raised at the next sync.
    for bad in (-1.0, math.nan):
        check_error(torch.poisson, torch.tensor([1.0, bad]))
    check_error(torch.poisson, torch.ones(3, dtype=torch.int64))


def test_generator_of_another_device_is_refused_as_pytorch_refuses_it():
    cpu_gen, tpu_gen = torch.Generator(), torch.Generator("tpu")
    with pytest.raises(RuntimeError, match="Expected a 'cpu' device type for generator but "
                                           "found 'tpu'"):
        torch.randn(3, generator=tpu_gen)  # fills a CPU tensor
    with pytest.raises(RuntimeError, match="Expected a 'tpu' device type for generator but "
                                           "found 'cpu'"):
        torch.randn(3, device="tpu", generator=cpu_gen)
    with pytest.raises(RuntimeError, match="same device"):  # a CPU tensor written with tpu's
        torch.zeros(3).add_(torch.ones(3, device="tpu"))
