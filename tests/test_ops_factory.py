"""Factories: zero_, arange, linspace, logspace, eye, tril/triu_indices, and
the full / ones / zeros / *_like family (empty + fill_ / zero_), compared
with CPU PyTorch."""
import math

import pytest
import torch

from conftest import NoFallback, assert_same

FLOATS = [torch.float32, torch.bfloat16, torch.float16, torch.float64]
INTS = [torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8]


def check_factory(fn, atol=None, rtol=None):
    """fn(device) on CPU and on tpu: same dtype, shape and values, no fallback."""
    expected = fn("cpu")
    with NoFallback():
        actual = fn("tpu")
    assert_same(expected, actual, atol, rtol)
    return actual


def check_factory_error(fn, same_message=True):
    with pytest.raises(Exception) as cpu_err:
        fn("cpu")
    with pytest.raises(Exception) as tpu_err:
        fn("tpu")
        torch.tpu.synchronize()
    assert type(tpu_err.value) is type(cpu_err.value), \
        f"tpu raised {type(tpu_err.value).__name__}: {tpu_err.value}; CPU raised " \
        f"{type(cpu_err.value).__name__}: {cpu_err.value}"
    if same_message:
        assert str(tpu_err.value) == str(cpu_err.value)


#===--- zeros, ones, full, *_like ---===#

@pytest.mark.parametrize("dtype", FLOATS + INTS + [torch.bool, torch.complex64])
def test_zeros_ones_full(dtype):
    check_factory(lambda d: torch.zeros(2, 3, dtype=dtype, device=d))
    check_factory(lambda d: torch.ones(2, 3, dtype=dtype, device=d))
    value = True if dtype == torch.bool else 3
    check_factory(lambda d: torch.full((2, 3), value, dtype=dtype, device=d))


def test_like_and_new():
    base = torch.arange(6.0).reshape(2, 3)
    for dtype in [None, torch.int32, torch.bfloat16]:
        check_factory(lambda d: torch.zeros_like(base.to(d), dtype=dtype))
        check_factory(lambda d: torch.ones_like(base.to(d), dtype=dtype))
        check_factory(lambda d: torch.full_like(base.to(d), 7, dtype=dtype))
    check_factory(lambda d: base.to(d).new_zeros(4))
    check_factory(lambda d: base.to(d).new_ones((2, 2), dtype=torch.int64))
    check_factory(lambda d: base.to(d).new_full((3,), -1.5))
    check_factory(lambda d: torch.scalar_tensor(2.5, device=d))
    check_factory(lambda d: torch.scalar_tensor(4, dtype=torch.int32, device=d))


def test_deterministic_mode_fills_uninitialized_memory_as_cpu():
    # torch.use_deterministic_algorithms(True) fills new memory with NaN or
    # the largest integer on CPU and CUDA; tpu tensors held zeros.
    def made(d):
        return [torch.empty(3, device=d), torch.empty(2, 2, dtype=torch.int32, device=d),
                torch.empty_like(torch.ones(2, dtype=torch.bfloat16, device=d)),
                torch.empty_strided((2, 2), (1, 2), dtype=torch.complex64, device=d),
                torch.empty(2, dtype=torch.bool, device=d),
                torch.ones(2, device=d).resize_(5), torch.ones(3, device=d).new_empty(2)]
    torch.use_deterministic_algorithms(True)
    try:
        with NoFallback():
            for want, got in zip(made("cpu"), made("tpu")):
                assert_same(want, got)
    finally:
        torch.use_deterministic_algorithms(False)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.int64, torch.bool,
                                   torch.complex64])
def test_zero_(dtype):
    base = torch.arange(1, 13).reshape(3, 4).to(dtype)

    def whole(d):
        x = base.to(d)
        return x.zero_()

    def view(d):  # a strided view: the rest of the storage is kept
        x = base.to(d)
        x[:, 1::2].zero_()
        return x

    check_factory(whole)
    check_factory(view)


#===--- arange ---===#

@pytest.mark.parametrize("args", [
    (5,), (2, 9), (0, 10, 3), (10, 0, -3), (-4, 4, 2), (3, 3), (0, 1, 0.1), (1.5, -2.0, -0.25),
    (0, 2.5), (-1.0, 1.0, 1 / 3),
])
def test_arange(args):
    check_factory(lambda d: torch.arange(*args, device=d))


@pytest.mark.parametrize("dtype", FLOATS + INTS)
def test_arange_dtypes(dtype):
    check_factory(lambda d: torch.arange(0, 20, 3, dtype=dtype, device=d))
    if dtype.is_floating_point:
        check_factory(lambda d: torch.arange(-1, 1, 0.125, dtype=dtype, device=d))


def test_arange_length_rules():
    # Integer dtypes truncate the numbers first; int64 computes the length
    # exactly, other dtypes from the doubles.
    check_factory(lambda d: torch.arange(0.5, 5, 1.5, dtype=torch.int32, device=d))
    check_factory(lambda d: torch.arange(0.5, 5, 1.5, dtype=torch.int64, device=d))
    check_factory(lambda d: torch.arange(250, 260, dtype=torch.uint8, device=d))  # wraps
    check_factory(lambda d: torch.arange(2**53, 2**53 + 10, 3, device=d))
    check_factory(lambda d: torch.arange(0, 1000, 0.7, device=d))
    for dtype in [torch.int32, torch.uint8]:  # the step truncates to 0: zeros
        check_factory(lambda d: torch.arange(0, 5, 0.5, dtype=dtype, device=d))
        check_factory(lambda d: torch.arange(-2.5, 5.9, 1.5, dtype=dtype, device=d))
    check_factory(lambda d: torch.arange(-2.5, 5.9, 1.5, dtype=torch.int64, device=d))


def test_arange_int64_zero_step():
    # The step rounds to 0 in int64: PyTorch's ValueError.
    with pytest.raises(ValueError, match="step must be nonzero"):
        torch.arange(0, 5, 0.5, dtype=torch.int64)
    with pytest.raises(ValueError, match="step must be nonzero"):
        torch.arange(0, 5, 0.5, dtype=torch.int64, device="tpu")


def test_arange_out():
    for dtype in [torch.float32, torch.int32, torch.float64]:
        def fn(d):
            out = torch.empty(0, dtype=dtype, device=d)
            r = torch.arange(1, 4, 0.5 if dtype.is_floating_point else 2, out=out)
            assert r is out
            return out
        check_factory(fn)


@pytest.mark.parametrize("fn", [
    lambda d: torch.arange(0, 5, 0, device=d),
    lambda d: torch.arange(0, float("inf"), device=d),
    lambda d: torch.arange(float("nan"), 2, device=d),
    lambda d: torch.arange(5, 0, 1, device=d),
    lambda d: torch.arange(0, 2, dtype=torch.bool, device=d),
])
def test_arange_errors(fn):
    check_factory_error(fn)


#===--- linspace, logspace ---===#

@pytest.mark.parametrize("args", [(0, 1, 5), (-3.5, 7, 8), (2, -2, 7), (2.5, 1, 1), (0, 1, 0),
                                  (1e-3, 1e3, 50)])
def test_linspace(args):
    check_factory(lambda d: torch.linspace(*args, device=d))


@pytest.mark.parametrize("dtype", FLOATS + INTS + [torch.complex64])
def test_linspace_dtypes(dtype):
    tol = {torch.float16: 2e-3, torch.bfloat16: 1.6e-2}.get(dtype)
    check_factory(lambda d: torch.linspace(0, 100, 9, dtype=dtype, device=d), atol=tol, rtol=tol)
    if not dtype.is_complex and dtype != torch.uint8:
        check_factory(lambda d: torch.linspace(-7, 10, 5, dtype=dtype, device=d), atol=tol, rtol=tol)
    check_factory(lambda d: torch.linspace(3, 3, 1, dtype=dtype, device=d))


def test_linspace_complex_and_out():
    check_factory(lambda d: torch.linspace(0, 1 + 2j, 5, device=d))
    check_factory(lambda d: torch.linspace(-1j, 3 + 1j, 4, dtype=torch.complex128, device=d))

    def fn(d):
        out = torch.empty(0, dtype=torch.float64, device=d)
        torch.linspace(1, 2, 6, out=out)
        return out
    check_factory(fn)


@pytest.mark.parametrize("args", [(0, 1, 5), (-2, 2, 9), (2, 3, 1), (0, 3, 4, 2), (1, -1, 6, 0.5),
                                  (0, 1, 0)])
def test_logspace(args):
    check_factory(lambda d: torch.logspace(*args, device=d), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("dtype", FLOATS + [torch.int64, torch.int32, torch.complex64])
def test_logspace_dtypes(dtype):
    tol = {torch.float16: 2e-3, torch.bfloat16: 1.6e-2}.get(dtype, 1e-5)
    check_factory(lambda d: torch.logspace(0, 3, 4, dtype=dtype, device=d), atol=tol, rtol=tol)
    check_factory(lambda d: torch.logspace(0, 6, 7, base=2, dtype=dtype, device=d), atol=tol, rtol=tol)


def test_logspace_complex():
    check_factory(lambda d: torch.logspace(0, 1 + 1j, 3, device=d), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("fn", [
    lambda d: torch.linspace(0, 1, -1, device=d),
    lambda d: torch.linspace(0, 1, 3, dtype=torch.bool, device=d),
    lambda d: torch.logspace(0, 1, -1, device=d),
    lambda d: torch.logspace(0, 1, 3, dtype=torch.bool, device=d),
])
def test_space_errors(fn):
    check_factory_error(fn)


#===--- eye ---===#

@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16, torch.int64,
                                   torch.uint8, torch.bool, torch.complex64])
def test_eye(dtype):
    check_factory(lambda d: torch.eye(4, dtype=dtype, device=d))
    check_factory(lambda d: torch.eye(2, 5, dtype=dtype, device=d))
    check_factory(lambda d: torch.eye(5, 3, dtype=dtype, device=d))


def test_eye_out_and_empty():
    def fn(d):
        out = torch.empty(0, device=d)
        torch.eye(3, out=out)
        out2 = torch.empty(0, dtype=torch.int32, device=d)
        torch.eye(2, 4, out=out2)
        return out, out2
    check_factory(fn)
    check_factory(lambda d: torch.eye(0, device=d))
    check_factory(lambda d: torch.eye(3, 0, device=d))


@pytest.mark.parametrize("fn", [lambda d: torch.eye(-1, device=d),
                                lambda d: torch.eye(2, -1, device=d)])
def test_eye_errors(fn):
    check_factory_error(fn)


#===--- tril_indices, triu_indices ---===#

@pytest.mark.parametrize("shape", [(3, 3, 0), (3, 4, 1), (4, 3, -1), (5, 2, 3), (2, 5, -4),
                                   (0, 4, 0), (6, 6, -10)])
def test_tri_indices(shape):
    check_factory(lambda d: torch.tril_indices(*shape, device=d))
    check_factory(lambda d: torch.triu_indices(*shape, device=d))


def test_tri_indices_dtype_and_errors():
    check_factory(lambda d: torch.tril_indices(4, 4, dtype=torch.int32, device=d))
    check_factory(lambda d: torch.triu_indices(4, 5, 1, dtype=torch.int32, device=d))
    check_factory_error(lambda d: torch.tril_indices(-1, 3, device=d))
    check_factory_error(lambda d: torch.triu_indices(3, -1, device=d))
    check_factory_error(lambda d: torch.tril_indices(3, 3, dtype=torch.float32, device=d))


FILLS = {
    "fill_": lambda x, v: x.fill_(v),
    "full": lambda x, v: torch.full(x.shape, v, dtype=x.dtype, device=x.device),
    "masked_fill": lambda x, v: x.masked_fill(torch.ones_like(x, dtype=torch.bool), v),
    "index_fill": lambda x, v: x.index_fill(0, torch.tensor([0], device=x.device), v),
}


@pytest.mark.parametrize("name", FILLS)
@pytest.mark.parametrize("dtype,value", [
    (torch.int32, 2**40), (torch.int8, -129), (torch.uint8, 300), (torch.uint8, -256),
    (torch.int64, 9.3e18), (torch.int32, float("nan")), (torch.float32, 1e300),
    (torch.float16, -1e6), (torch.bfloat16, 1e300), (torch.complex64, complex(1, 1e300)),
    (torch.float64, 1j), (torch.int32, complex(2, 1)),
], ids=str)
def test_fill_with_a_number_that_does_not_fit_raises(name, dtype, value):
    # PyTorch's Scalar::to<T>(): an error, not a wrapped or infinite value.
    with pytest.raises(RuntimeError) as cpu_err:
        FILLS[name](torch.zeros(3, dtype=dtype), value)
    with pytest.raises(RuntimeError) as tpu_err:
        FILLS[name](torch.zeros(3, dtype=dtype, device="tpu"), value)
    assert str(tpu_err.value) == str(cpu_err.value)


@pytest.mark.parametrize("dtype,value", [
    (torch.uint8, -255), (torch.int64, 2**63 - 1), (torch.int8, -128), (torch.float16, float("inf")),
    (torch.float32, float("nan")), (torch.bool, 1e300), (torch.float64, 1e308), (torch.int32, 2.5),
    (torch.complex64, 1j),
], ids=str)
def test_fill_with_a_number_at_the_edge_of_the_range(dtype, value):
    for fill in FILLS.values():
        want = fill(torch.zeros(3, dtype=dtype), value)
        got = fill(torch.zeros(3, dtype=dtype, device="tpu"), value).cpu()
        torch.testing.assert_close(got, want, rtol=0, atol=0, equal_nan=True)


TENSOR_FILLS = {  # a 0-d tensor value: masked_fill and index_fill check it, fill_ copies it
    "masked_fill complex into int64": lambda d: torch.zeros(2, dtype=torch.int64, device=d)
    .masked_fill(torch.ones(2, dtype=torch.bool, device=d), torch.tensor(1j, device=d)),
    "masked_fill real complex into int64": lambda d: torch.zeros(2, dtype=torch.int64, device=d)
    .masked_fill(torch.ones(2, dtype=torch.bool, device=d), torch.tensor(3 + 0j, device=d)),
    "masked_fill double into float": lambda d: torch.zeros(2, device=d).masked_fill(
        torch.ones(2, dtype=torch.bool, device=d), torch.tensor(1e300, dtype=torch.float64,
                                                                device=d)),
    "index_fill 300 into int8": lambda d: torch.zeros(2, dtype=torch.int8, device=d).index_fill(
        0, torch.tensor([0], device=d), torch.tensor(300, device=d)),
    "fill_ 2**40 into int32 (wraps)": lambda d: torch.zeros(2, dtype=torch.int32, device=d).fill_(
        torch.tensor(2**40, device=d)),
}


@pytest.mark.parametrize("name", TENSOR_FILLS)
def test_fill_with_a_tensor_value_as_on_cpu(name):
    def outcome(device):
        try:
            result = TENSOR_FILLS[name](device)
            torch.tpu.synchronize()  # the tpu value is checked on the device
            return result.cpu()
        except RuntimeError as e:
            return str(e).splitlines()[0]
    cpu, tpu = outcome("cpu"), outcome("tpu")
    assert type(tpu) is type(cpu) and (tpu == cpu if isinstance(cpu, str) else torch.equal(tpu, cpu))
