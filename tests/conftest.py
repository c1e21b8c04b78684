"""Shared test set-up: two CPU-plugin devices, and helpers that run the same
code on CPU and on tpu and compare."""
import os

os.environ.setdefault("TORCHTPU_CPU_DEVICES", "2")

import pytest  # noqa: E402
import torch  # noqa: E402

import torchtpu  # noqa: E402

TPU = torch.device("tpu:0")

# The CPU plugin has two devices here; a single-GPU or single-chip plugin
# (tools/device_check.sh) has one.
two_devices = pytest.mark.skipif(torch.tpu.device_count() < 2, reason="needs two tpu devices")


@pytest.fixture(autouse=True)
def _seeded():
    """Every test draws the same random inputs on every run."""
    torch.manual_seed(0)


def to_tpu(x, device=TPU):
    """Moves tensors (also inside lists/tuples/dicts) to the tpu device."""
    if isinstance(x, torch.Tensor):
        t = x.detach().to(device)
        return t.requires_grad_(x.requires_grad) if x.is_leaf else t
    if isinstance(x, (list, tuple)):
        return type(x)(to_tpu(v, device) for v in x)
    if isinstance(x, dict):
        return {k: to_tpu(v, device) for k, v in x.items()}
    return x


def fallbacks():
    return dict(torchtpu.metrics()["fallbacks"])


class NoFallback:
    """Asserts that the block ran no CPU fallback."""

    def __enter__(self):
        self.before = fallbacks()

    def __exit__(self, *exc):
        if exc[0] is None:
            new = {k: v - self.before.get(k, 0) for k, v in fallbacks().items()
                   if v != self.before.get(k, 0)}
            assert not new, f"CPU fallbacks: {new}"
        return False


def assert_same(expected, actual, atol=None, rtol=None, equal_nan=True):
    """Compares a CPU result with a tpu result: same types, dtypes, shapes,
    and values within tolerance (exact for integers and bools)."""
    if isinstance(expected, torch.Tensor):
        assert isinstance(actual, torch.Tensor), f"expected a tensor, got {type(actual)}"
        assert actual.device.type == "tpu", f"result on {actual.device}"
        assert actual.dtype == expected.dtype, f"dtype {actual.dtype} != {expected.dtype}"
        assert actual.shape == expected.shape, f"shape {tuple(actual.shape)} != {tuple(expected.shape)}"
        torch.testing.assert_close(actual.cpu(), expected, atol=atol, rtol=rtol,
                                   equal_nan=equal_nan, check_device=False)
    elif isinstance(expected, (list, tuple)):
        assert len(expected) == len(actual)
        for e, a in zip(expected, actual):
            assert_same(e, a, atol, rtol, equal_nan)
    else:
        assert expected == actual, f"{actual!r} != {expected!r}"


def check(fn, *inputs, atol=None, rtol=None, fallback_ok=False, **kwargs):
    """Runs fn on CPU inputs and on tpu copies of them; compares results and
    asserts that no CPU fallback ran on tpu (unless fallback_ok)."""
    expected = fn(*inputs, **kwargs)
    tpu_inputs = [to_tpu(i) for i in inputs]
    if fallback_ok:
        actual = fn(*tpu_inputs, **kwargs)
    else:
        with NoFallback():
            actual = fn(*tpu_inputs, **kwargs)
    assert_same(expected, actual, atol, rtol)
    return actual


def check_grad(fn, *inputs, atol=None, rtol=None):
    """fn's output (its first, for a tuple) and its gradients w.r.t. the
    inputs that require grad, for one random output gradient, on CPU and on
    tpu (no CPU fallback)."""
    def first(r):
        return r[0] if isinstance(r, tuple) else r

    def leaves(xs):
        return [x for x in xs if isinstance(x, torch.Tensor) and x.requires_grad]

    out = first(fn(*inputs))
    g = torch.randn_like(out)
    expected = torch.autograd.grad(out, leaves(inputs), g)
    tpu_inputs = [to_tpu(x) for x in inputs]
    with NoFallback():
        tpu_out = first(fn(*tpu_inputs))
        actual = torch.autograd.grad(tpu_out, leaves(tpu_inputs), g.to(TPU))
    assert_same(out.detach(), tpu_out.detach(), atol, rtol)
    assert_same(expected, actual, atol, rtol)


def check_ops(ops, *args, tolerance=lambda dtype: (None, None)):
    """Each op (name -> fn) on CPU and on tpu copies of args, no CPU
    fallback; results compared by name, within tolerance(dtype of the first
    result) -> (atol, rtol)."""
    expected = {name: fn(*args) for name, fn in ops.items()}
    tpu_args = [to_tpu(a) for a in args]
    with NoFallback():
        actual = {name: fn(*tpu_args) for name, fn in ops.items()}
    for name, e in expected.items():
        first = e[0] if isinstance(e, (list, tuple)) else e
        try:
            assert_same(e, actual[name], *tolerance(first.dtype))
        except AssertionError as err:
            raise AssertionError(f"{name}: {err}") from None


def check_error(fn, *inputs, **kwargs):
    """fn must raise on tpu the same exception type (and message) as on CPU."""
    with pytest.raises(Exception) as cpu_err:
        fn(*inputs, **kwargs)
    with pytest.raises(Exception) as tpu_err:
        fn(*to_tpu(list(inputs)), **kwargs)
        torch.tpu.synchronize()
    assert type(tpu_err.value) is type(cpu_err.value), \
        f"tpu raised {type(tpu_err.value).__name__}: {tpu_err.value}; CPU raised " \
        f"{type(cpu_err.value).__name__}: {cpu_err.value}"
    return tpu_err.value, cpu_err.value


FLOAT_AND_COMPLEX = [torch.float32, torch.float64, torch.complex64, torch.complex128]


def order_tol(dtype):
    """Tolerances for results that sum in another order than CPU's (matrix
    factorizations): 1e-4 in single precision, 1e-10 in double."""
    single = dtype in (torch.float32, torch.complex64)
    return dict(atol=1e-4, rtol=1e-4) if single else dict(atol=1e-10, rtol=1e-10)


@pytest.fixture
def tpu():
    return TPU
