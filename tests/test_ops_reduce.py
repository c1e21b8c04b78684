"""Reductions, scans and softmax against CPU PyTorch: values, dtypes, shapes,
keepdim, out= and in-place forms, gradients, and the errors CPU raises."""
import math

import pytest
import torch
import torch.nn.functional as F

from conftest import TPU, assert_same, check, check_error, check_grad

FLOATS = [torch.float32, torch.bfloat16, torch.float16]
nan, inf = math.nan, math.inf


@pytest.fixture(autouse=True)
def seed():
    torch.manual_seed(0)


def sample(dtype, shape=(3, 4, 5)):
    if dtype == torch.bool:
        return torch.rand(shape) > 0.5
    if dtype.is_complex:
        return torch.randn(shape, dtype=dtype)
    if dtype.is_floating_point:
        return torch.randn(shape).to(dtype)
    lo = 0 if dtype == torch.uint8 else -5
    return torch.randint(lo, 6, shape).to(dtype)


def ties(shape=(3, 4, 5), dtype=torch.float32):
    """Small integers: many equal values, to test tie-breaking."""
    return torch.randint(0, 3, shape).to(dtype)


#===--- sum, nansum, mean, prod ---===#

@pytest.mark.parametrize("dtype", FLOATS + [torch.int32, torch.bool, torch.uint8], ids=str)
def test_sum(dtype):
    x = sample(dtype)
    check(lambda a: a.sum(), x)
    check(lambda a: a.sum(1), x)
    check(lambda a: a.sum((0, -1), keepdim=True), x)


def test_sum_forms():
    x = sample(torch.float32)
    check(lambda a: a.sum([]), x)
    check(lambda a: a.sum(dim=None, keepdim=True), x)
    check(lambda a: a.sum(2, dtype=torch.float64), x)
    check(lambda a: a.sum(dtype=torch.bfloat16), x)
    check(lambda a: a.sum(0, dtype=torch.int32), sample(torch.int16))
    check(lambda a: torch.sum(a, 1, out=torch.empty(3, 5, device=a.device)), x)
    check(lambda a: torch.ops.aten.sum.out(a, out=torch.empty((), device=a.device)), x)
    check(lambda a: a.sum(0), torch.empty(0, 4))
    check(lambda a: a.sum(), torch.tensor(2.5))
    check(lambda a: a.sum(0), torch.tensor(2.5))
    check_error(lambda a: a.sum(3), x)
    check_error(lambda a: a.sum((0, -3)), x)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_sum_with_a_narrower_dtype_rounds_the_input_first(dtype):
    # CPU's sum/nansum(dtype=) compute self.to(dtype): the rounded values
    # are added (here 1 ulp of the sums apart); mean(dtype=) does not.
    # (prod(dtype=) rounds first too, but CPU's bfloat16 product rounds at
    # each step, which XLA's does not.)
    x = torch.randn(40, 7, generator=torch.Generator().manual_seed(0)) * 100 + 0.3
    for fn in (lambda a: a.sum(0, dtype=dtype), lambda a: a.sum(dtype=dtype),
               lambda a: a.nansum(1, dtype=dtype), lambda a: a.mean(0, dtype=dtype)):
        assert torch.equal(fn(x.to(TPU)).cpu(), fn(x))


def peak_of(fn, t):
    """fn(t), and the peak device memory it took over what was allocated
    before (its result and XLA's scratch)."""
    torch.tpu.synchronize()
    before = torch.tpu.memory_allocated()
    torch.tpu.reset_peak_memory_stats()
    got = fn(t)
    torch.tpu.synchronize()
    return got, torch.tpu.max_memory_allocated() - before


def test_nansum():
    x = sample(torch.float32)
    x[0, 1, 2] = x[2, 3, 4] = nan
    check(lambda a: a.nansum(), x)
    check(lambda a: a.nansum((0, 2), keepdim=True), x)
    check(lambda a: a.nansum(1), x.bfloat16())
    check(lambda a: a.nansum(), sample(torch.int32))


@pytest.mark.parametrize("dtype", FLOATS, ids=str)
def test_mean(dtype):
    x = sample(dtype)
    check(lambda a: a.mean(), x)
    check(lambda a: a.mean(1), x)
    check(lambda a: a.mean((0, 2), keepdim=True), x)


def test_mean_forms():
    x = sample(torch.float32)
    check(lambda a: a.mean(dtype=torch.float64), x)
    check(lambda a: a.mean(0, dtype=torch.float64), x)
    check(lambda a: a.mean([]), x)
    check(lambda a: a.mean(), torch.empty(0))
    check(lambda a: a.mean(0), torch.empty(0, 3))
    check(lambda a: a.mean(1), sample(torch.complex64))
    check(lambda a: torch.mean(a, 0, out=torch.empty(4, 5, device=a.device)), x)
    check(lambda a: torch.mean(a, 0, out=torch.empty(4, 5, dtype=torch.float64, device=a.device)), x)
    check_error(lambda a: a.mean(), sample(torch.int64))
    check_error(lambda a: a.mean(), sample(torch.bool))
    check_error(lambda a: a.mean(dtype=torch.int64), x)
    check_error(lambda a: torch.mean(a, 0, out=torch.empty(4, 5, dtype=torch.int64, device=a.device)), x)
    check_error(lambda a: a.mean(5), x)


@pytest.mark.parametrize("dtype", FLOATS + [torch.int32, torch.bool], ids=str)
def test_prod(dtype):
    x = sample(dtype, (3, 4))
    check(lambda a: a.prod(), x)
    check(lambda a: a.prod(1), x)
    check(lambda a: a.prod(0, keepdim=True), x)


def test_prod_forms():
    x = sample(torch.float32, (3, 4))
    check(lambda a: a.prod(dtype=torch.float64), x)
    check(lambda a: a.prod(-1, dtype=torch.float64), x)
    check(lambda a: a.prod(0), torch.empty(0, 3))
    check(lambda a: torch.prod(a, 1, out=torch.empty(3, device=a.device)), x)
    check(lambda a: a.prod(), sample(torch.complex64, (3,)))
    check_error(lambda a: a.prod(2), x)


#===--- amax, amin, max, min, aminmax ---===#

@pytest.mark.parametrize("dtype", FLOATS + [torch.int8, torch.bool], ids=str)
def test_amax_amin(dtype):
    x = sample(dtype)
    for op in (torch.amax, torch.amin):
        check(lambda a: op(a), x)
        check(lambda a: op(a, 1), x)
        check(lambda a: op(a, (0, 2), keepdim=True), x)


def test_extremes_of_integer_dtypes():
    # The reduction's init value must be the dtype's own extreme.
    for dtype in (torch.int8, torch.int16, torch.int32, torch.int64, torch.uint8):
        info = torch.iinfo(dtype)
        x = torch.tensor([info.min, info.min], dtype=dtype)
        y = torch.tensor([info.max, info.max], dtype=dtype)
        check(lambda a, b: (a.amax(), b.amin(), a.max(), b.min(), a.max(0), b.min(0)), x, y)


def test_amax_nan_and_inf():
    x = torch.tensor([[1.0, nan, 3.0], [-inf, -inf, -inf], [inf, 2.0, nan]])
    for op in (torch.amax, torch.amin):
        check(lambda a: op(a, 1), x)
        check(lambda a: op(a, 0), x)
    check(lambda a: (a.max(), a.min()), x)
    check(lambda a: (a.max(), a.min()), x[1])


def test_amax_forms_and_errors():
    x = sample(torch.float32)
    check(lambda a: torch.amax(a, 1, out=torch.empty(3, 5, device=a.device)), x)
    check(lambda a: torch.amin(a, -1, keepdim=True), x)
    check(lambda a: a.amax(1), torch.empty(0, 4))
    check(lambda a: a.amax(), torch.tensor(2.0))
    check_error(lambda a: a.amax(0), torch.empty(0, 4))
    check_error(lambda a: a.amax(), torch.empty(0, 4))
    check_error(lambda a: a.amin((0, 0)), x)
    check_error(lambda a: a.amax(3), x)
    for op in (torch.amax, torch.amin):
        tpu_err, cpu_err = check_error(
            lambda a: op(a, 1, out=torch.empty(3, 5, dtype=torch.int64, device=a.device)), x)
        assert str(tpu_err) == str(cpu_err)
    check_error(lambda a: a.amax(), sample(torch.complex64))


@pytest.mark.parametrize("dtype", FLOATS + [torch.int32, torch.bool], ids=str)
def test_max_min_all(dtype):
    x = sample(dtype)
    check(lambda a: (a.max(), a.min()), x)
    check(lambda a: torch.max(a, out=torch.empty((), dtype=dtype, device=a.device)), x)


def test_max_min_all_errors():
    check_error(lambda a: a.max(), torch.empty(0, 3))
    check_error(lambda a: a.min(), torch.empty(0))
    check(lambda a: torch.max(a, out=torch.empty((), dtype=torch.float64, device=a.device)),
          torch.randn(3))  # CPU converts into out here


@pytest.mark.parametrize("dtype", FLOATS + [torch.int32, torch.bool], ids=str)
def test_max_min_dim(dtype):
    x = ties(dtype=dtype) if dtype != torch.bool else sample(dtype)
    for op in (torch.max, torch.min):
        check(lambda a: op(a, 1), x)
        check(lambda a: op(a, -1, keepdim=True), x)
        check(lambda a: op(a, 0), x)


def test_max_min_dim_nan_ties_inf():
    x = torch.tensor([[1.0, 3.0, 3.0, nan, nan], [2.0, 2.0, 1.0, 2.0, 1.0],
                      [-inf, -inf, -inf, -inf, -inf], [inf, inf, 0.0, -inf, inf]])
    for op in (torch.max, torch.min, torch.argmax, torch.argmin):
        check(lambda a: op(a, 1), x)
        check(lambda a: op(a, 0), x)


def test_max_dim_forms_and_errors():
    x = sample(torch.float32)
    check(lambda a: torch.max(a, 1, out=(torch.empty(3, 5, device=a.device),
                                         torch.empty(3, 5, dtype=torch.int64, device=a.device))), x)
    check(lambda a: torch.min(a, 0, keepdim=True), x)
    check(lambda a: torch.max(a, 0), torch.tensor(3.0))
    check(lambda a: torch.min(a, -1, keepdim=True), torch.tensor(3.0))
    check(lambda a: torch.max(a, 1), torch.empty(0, 4))
    check_error(lambda a: torch.max(a, 0), torch.empty(0, 4))
    check_error(lambda a: torch.min(a, 3), x)
    check_error(lambda a: torch.max(a, 1, out=(torch.empty(3, 5, dtype=torch.float64, device=a.device),
                                               torch.empty(3, 5, dtype=torch.int64, device=a.device))), x)
    check_error(lambda a: torch.max(a, 1, out=(torch.empty(3, 5, device=a.device),
                                               torch.empty(3, 5, dtype=torch.int32, device=a.device))), x)


@pytest.mark.parametrize("dtype", FLOATS + [torch.int64], ids=str)
def test_argmax_argmin(dtype):
    x = ties(dtype=dtype)
    for op in (torch.argmax, torch.argmin):
        check(lambda a: op(a), x)
        check(lambda a: op(a, 1), x)
        check(lambda a: op(a, -1, keepdim=True), x)
        check(lambda a: op(a, keepdim=True), x)


def test_argmax_forms_and_errors():
    x = sample(torch.float32)
    x[1, 2, 3] = x[2, 0, 0] = nan
    check(lambda a: (a.argmax(), a.argmin(), a.argmax(2), a.argmin(0)), x)
    check(lambda a: torch.argmax(a, 1, out=torch.empty(3, 5, dtype=torch.int64, device=a.device)), x)
    check(lambda a: (a.argmax(), a.argmax(0), a.argmin(-1, keepdim=True)), torch.tensor(2.0))
    check(lambda a: a.argmax(1), torch.empty(0, 3))
    check_error(lambda a: a.argmax(), torch.empty(0, 3))
    check_error(lambda a: a.argmin(0), torch.empty(0, 3))
    check_error(lambda a: a.argmax(), sample(torch.bool))
    check_error(lambda a: a.argmax(3), x)
    check_error(lambda a: torch.argmax(a, 1, out=torch.empty(3, 5, dtype=torch.int32, device=a.device)), x)


@pytest.mark.parametrize("dtype", FLOATS + [torch.int32, torch.bool], ids=str)
def test_aminmax(dtype):
    x = sample(dtype)
    check(lambda a: torch.aminmax(a), x)
    check(lambda a: torch.aminmax(a, dim=1), x)
    check(lambda a: torch.aminmax(a, dim=-1, keepdim=True), x)
    check(lambda a: torch.aminmax(a, keepdim=True), x)


def test_aminmax_forms_and_errors():
    x = sample(torch.float32)
    x[0, 0, 0] = nan
    check(lambda a: torch.aminmax(a, dim=2), x)
    check(lambda a: torch.aminmax(a, dim=0), torch.tensor(2.0))
    check(lambda a: torch.aminmax(a, dim=1), torch.empty(0, 3))
    check(lambda a: torch.aminmax(a, dim=0, out=(torch.empty(4, 5, device=a.device),
                                                 torch.empty(4, 5, device=a.device))), x)
    check_error(lambda a: torch.aminmax(a), torch.empty(0, 3))
    check_error(lambda a: torch.aminmax(a, dim=0), torch.empty(0, 3))
    check_error(lambda a: torch.aminmax(a, dim=0, out=(torch.empty(4, 5, dtype=torch.float64, device=a.device),
                                                       torch.empty(4, 5, device=a.device))), x)


#===--- var, std, var_mean, std_mean ---===#

@pytest.mark.parametrize("dtype", FLOATS, ids=str)
def test_var_std(dtype):
    x = sample(dtype)
    for op in (torch.var, torch.std, torch.var_mean, torch.std_mean):
        check(lambda a: op(a), x)
        check(lambda a: op(a, 1), x)
        check(lambda a: op(a, (0, 2), keepdim=True, correction=0), x)


def test_var_std_forms():
    x = sample(torch.float32)
    check(lambda a: a.var(1, unbiased=False), x)
    check(lambda a: a.std(-1, correction=2), x)
    check(lambda a: torch.var_mean(a, 0, correction=1.5), x)
    check(lambda a: a.var([]), x)
    check(lambda a: a.var(1), sample(torch.complex64))
    check(lambda a: a.std(), sample(torch.float64))
    check(lambda a: (a.var(), a.std(0), a.var(1)), torch.ones(1, 2))  # n <= correction
    check(lambda a: a.var(0), torch.empty(0, 3))
    check(lambda a: torch.var(a, 1, out=torch.empty(3, 5, device=a.device)), x)
    check(lambda a: torch.std(a, 1, out=torch.empty(3, 5, dtype=torch.float64, device=a.device)), x)
    check(lambda a: torch.ops.aten.var_mean.correction_out(
        a, [1], out0=torch.empty(3, 5, device=a.device), out1=torch.empty(3, 5, device=a.device)), x)
    check_error(lambda a: a.var(), sample(torch.int64))
    check_error(lambda a: a.std(3), x)
    check_error(lambda a: a.var((1, 1)), x)


#===--- norms ---===#

ORDS = [2, 1, inf, -inf, 0, 3, 0.5, -1]


@pytest.mark.parametrize("ord", ORDS, ids=str)
def test_vector_norm(ord):
    x = sample(torch.float32)
    x[0, 0, :2] = 0
    check(lambda a: torch.linalg.vector_norm(a, ord), x)
    check(lambda a: torch.linalg.vector_norm(a, ord, dim=1), x)
    check(lambda a: torch.linalg.vector_norm(a, ord, dim=(0, 2), keepdim=True), x)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float64, torch.complex64], ids=str)
def test_vector_norm_dtypes(dtype):
    x = sample(dtype)
    check(lambda a: torch.linalg.vector_norm(a), x)
    check(lambda a: torch.linalg.vector_norm(a, 1, dim=-1), x)
    check(lambda a: torch.linalg.vector_norm(a, inf, dim=0), x)


def test_vector_norm_forms_and_errors():
    x = sample(torch.float32)
    check(lambda a: [torch.linalg.vector_norm(a, p, 1) for p in (inf, -inf, 2, 1)],
          torch.tensor([[1.0, nan, -3.0], [-inf, 1.0, 2.0]]))
    check(lambda a: torch.linalg.vector_norm(a, dtype=torch.float64), x)
    check(lambda a: torch.linalg.vector_norm(a, 2, 1, dtype=torch.float32), x.bfloat16())
    check(lambda a: torch.linalg.vector_norm(a, dim=[]), x)
    check(lambda a: torch.linalg.vector_norm(a, 3, dim=0), torch.tensor(-2.0))
    check(lambda a: (torch.linalg.vector_norm(a), torch.linalg.vector_norm(a, 0)), torch.empty(0, 3))
    check(lambda a: torch.linalg.vector_norm(a, inf, dim=0), torch.empty(2, 0))
    check(lambda a: torch.linalg.vector_norm(a, 2, 1, out=torch.empty(3, 5, device=a.device)), x)
    check_error(lambda a: torch.linalg.vector_norm(a), sample(torch.int64))
    check_error(lambda a: torch.linalg.vector_norm(a, dtype=torch.int64), x)
    check_error(lambda a: torch.linalg.vector_norm(a, dtype=torch.float16), x)
    check_error(lambda a: torch.linalg.vector_norm(a, dtype=torch.complex64), x)
    check_error(lambda a: torch.linalg.vector_norm(a, inf), torch.empty(0, 3))
    check_error(lambda a: torch.linalg.vector_norm(a, -2, dim=0), torch.empty(0, 3))
    check_error(lambda a: torch.linalg.vector_norm(a, 2, 3), x)
    check_error(lambda a: torch.linalg.vector_norm(a, out=torch.empty((), dtype=torch.float64, device=a.device)), x)


def test_norm():
    x = sample(torch.float32)
    check(lambda a: a.norm(), x)
    check(lambda a: a.norm(1, dim=1), x)
    check(lambda a: torch.norm(a, "fro", dim=(0, 1)), x)
    check(lambda a: torch.norm(a, inf, dim=2, keepdim=True), x)
    check(lambda a: torch.ops.aten.norm.ScalarOpt_dim(a, None, [1]), x)
    check(lambda a: torch.ops.aten.norm.ScalarOpt_dim(a, 2.5, [0, 2], True), x)
    check(lambda a: torch.ops.aten.norm.ScalarOpt_dim_dtype(a, 2, [1], False, dtype=torch.float64), x)
    check(lambda a: torch.ops.aten.norm.Scalar(a, 3), x)
    check(lambda a: F.normalize(a, dim=1), x)
    check_error(lambda a: torch.ops.aten.norm.ScalarOpt_dim(a, 2, [0]), sample(torch.int64))


#===--- logsumexp ---===#

@pytest.mark.parametrize("dtype", FLOATS + [torch.int64], ids=str)
def test_logsumexp(dtype):
    x = sample(dtype)
    check(lambda a: a.logsumexp(1), x)
    check(lambda a: a.logsumexp((0, 2), keepdim=True), x)


def test_logsumexp_infinities_and_forms():
    x = torch.tensor([[-inf, -inf, -inf], [inf, 1.0, 2.0], [inf, -inf, 0.0], [nan, 1.0, 2.0],
                      [1e30, 1e30, -1e30]])
    check(lambda a: a.logsumexp(1), x)
    check(lambda a: a.logsumexp(0), torch.empty(0, 3))
    check(lambda a: a.logsumexp(0), torch.tensor(1.5))
    check(lambda a: torch.logsumexp(a, 1, out=torch.empty(5, device=a.device)), x)
    check(lambda a: torch.logsumexp(a, 1, out=torch.empty(5, dtype=torch.float64, device=a.device)), x)
    check_error(lambda a: a.logsumexp(2), x)


def test_logsumexp_complex():
    # Shifted by the largest real part, as CPU: exp(100 + 1j) would overflow;
    # an all -inf row gives -inf. masked.logsumexp fills with -inf.
    x = sample(torch.complex64)
    check(lambda a: (a.logsumexp(1), a.logsumexp((0, 2), keepdim=True)), x)
    big = torch.tensor([[100 + 1j, 101 - 2j, 50j], [complex(-inf, 0)] * 3, [1 - 1j, 0j, -2j]])
    check(lambda a: a.logsumexp(1), big)
    check(lambda a: torch.logsumexp(a, 0, out=torch.empty(3, dtype=a.dtype, device=a.device)), big)
    m = torch.tensor([[True, False, True, True, False]] * 4)
    check(lambda a, m: torch.masked.logsumexp(a, 2, mask=m), x, m)


#===--- cumsum, cumprod ---===#

@pytest.mark.parametrize("dtype", FLOATS + [torch.int32, torch.bool, torch.uint8], ids=str)
def test_cumsum_cumprod(dtype):
    x = sample(dtype, (3, 7, 5))
    if dtype.is_floating_point:
        x = (x.float() * 0.5 + 1).to(dtype)  # keep cumprod in range
    for op in (torch.cumsum, torch.cumprod):
        check(lambda a: op(a, 1), x)
        check(lambda a: op(a, -1), x)
        check(lambda a: op(a, 0), x)


# Around the scan's blocks of 16: one block, a padded one, whole ones, and
# two and three levels of blocks with padded tails.
@pytest.mark.parametrize("n", [1, 2, 15, 16, 17, 256, 257, 1000, 4099])
def test_cumsum_lengths(n):
    x = torch.randn(2, n)
    check(lambda a: (a.cumsum(1), (a * 0.01 + 1).cumprod(1)), x, atol=1e-4, rtol=1e-4)
    i = torch.randint(-9, 10, (n, 3), dtype=torch.int32)
    check(lambda a: a.cumsum(0), i)  # int64, exact


def test_scan_long_dims():
    # 2**20 + 3 elements: five levels of blocks, each with a padded tail.
    n = 2**20 + 3
    i = torch.randint(-1000, 1000, (n,), dtype=torch.int32)
    check(lambda a: a.cumsum(0), i)
    signs = torch.randint(0, 2, (n,), dtype=torch.int8) * 2 - 1
    signs[::97] = 3  # the products wrap around int64, as on CPU
    check(lambda a: a.cumprod(0), signs)
    check(lambda a: a.flip(0).cumsum(-1), i)
    check(lambda a: a.view(-1, 1).cumsum(0), i)
    # Floating point against float64: a sum's error is within (the number of
    # additions on the longest path to it) * eps * sum(|x[:k+1]|) in any
    # order: here at most 5 levels of 16, about 85 eps at worst; random
    # rounding stays near 1 eps (CPU's own float32 scan adds in double).
    x = torch.randn(n)
    eps = torch.finfo(torch.float32).eps
    got = x.to(TPU).cumsum(0).cpu().double()
    assert (got - x.double().cumsum(0)).abs().le(16 * eps * x.double().abs().cumsum(0)).all()
    # A product's error, in any order, is the sum of its k - 1 roundings'
    # relative errors: a random walk of about sqrt(k) * eps / 3.5 (k * eps / 2
    # at worst). CPU's float32 scan multiplies in double.
    f = x * 0.01 + 1  # products stay within float32's range
    got = f.to(TPU).cumprod(0).cpu().double()
    want = f.double().cumprod(0)
    k = torch.arange(1, n + 1, dtype=torch.float64)
    assert (got - want).abs().le(2 * eps * k.sqrt() * want.abs()).all()


def test_cumsum_cumprod_layouts_and_dtypes():
    x = torch.randn(40, 300)
    for fn in (lambda a: a.t().cumsum(1), lambda a: a.t().cumprod(0),
               lambda a: a[::3, 1::2].cumsum(1), lambda a: a.flip(1).cumsum(-1),
               lambda a: a.view(40, 3, 100).cumsum(1), lambda a: a.view(40, 3, 100).cumsum(-3),
               lambda a: a[:, :1].cumsum(1), lambda a: a[:, :0].cumsum(1), lambda a: a[:0].cumprod(1),
               lambda a: a.cumsum(1, dtype=torch.float64), lambda a: a.half().cumsum(1, dtype=torch.float32)):
        check(fn, x, atol=1e-4, rtol=1e-4)
    for dtype in (torch.float16, torch.bfloat16):
        check(lambda a: a.cumsum(1), x.to(dtype))
        check(lambda a: (a * 0.01 + 1).cumprod(1), x.to(dtype))
    check(lambda a: a.cumsum(1, dtype=torch.float16), torch.randint(-3, 4, (4, 300), dtype=torch.int8))
    # dtype= rounds the input first, as CPU's self.to(dtype) (the float32
    # values summed unrounded differed by 0.125 over 40 rows).
    check(lambda a: a.cumsum(0, dtype=torch.bfloat16), x)
    check(lambda a: (a * 0.01 + 1).cumprod(0, dtype=torch.float16), x)
    check(lambda a: a.cumsum(0), torch.randn(257, 5, dtype=torch.complex64), atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("op,dtype", [(torch.cumsum, torch.float32), (torch.cumprod, torch.float32),
                                      (torch.cumsum, torch.int32)],
                         ids=["cumsum-float32", "cumprod-float32", "cumsum-int32"])
def test_scans_keep_little_scratch(op, dtype):
    # The scan was log2(n) shifted adds, each a full-size buffer in XLA's
    # scratch memory: a 4 MiB float32 cumsum took 80 MiB (and 160 MiB for
    # int32, which scans in int64). Now the scratch is the block totals and
    # their scans, about a fifteenth of the result (an eighth for a padded
    # int64 one), over the result itself.
    x = torch.randn(1 << 20) * 0.001 + 1 if dtype.is_floating_point else \
        torch.randint(-100, 100, (1 << 20,), dtype=dtype)
    # (2**20 - 5: a padded tail, which once took a full-size padded copy.)
    for shape, dim in [((1 << 20,), 0), (((1 << 20) - 5,), 0), ((1024, 1024), 0), ((1024, 1024), 1)]:
        y = x[:math.prod(shape)].view(shape)
        got, peak = peak_of(lambda t: op(t, dim), y.to(TPU))
        assert peak <= got.numel() * got.element_size() * 5 // 4
        assert_same(op(y, dim), got, atol=1e-4, rtol=1e-4)


def cum_extremes(dim):
    return lambda a: (list(torch.cummax(a, dim)), list(torch.cummin(a, dim)))


@pytest.mark.parametrize("n", [2, 15, 16, 17, 257, 4099])
@pytest.mark.parametrize("dtype", FLOATS + [torch.float64, torch.int64, torch.int32, torch.int8,
                                            torch.uint8, torch.bool], ids=str)
def test_cummax_cummin_agree_exactly(dtype, n):
    # Values from a small range: long runs of ties, whose index is the last
    # one (CPU takes a later equal element); NaN propagates with the index
    # of the latest NaN; -inf and inf at the ends of the order. The lengths
    # straddle the scan's blocks of 16 and their padding.
    g = torch.Generator().manual_seed(n)
    if dtype == torch.bool:
        x = torch.rand(3, n, generator=g) > 0.7
    elif dtype.is_floating_point:
        x = torch.randint(-2, 3, (3, n), generator=g).to(dtype)
        x[0, torch.randint(0, n, (max(1, n // 40),), generator=g)] = nan
        x[1, torch.randint(0, n, (max(1, n // 40),), generator=g)] = -inf
        x[1, torch.randint(0, n, (max(1, n // 40),), generator=g)] = inf
        x[2, :] = -inf  # all ties at the cummax identity
        x[2, n // 2:] = inf  # and at the cummin one
    else:
        x = torch.randint(0, 3, (3, n), generator=g).to(dtype)
        if dtype != torch.uint8:
            x[1] -= 1
        lo, hi = torch.iinfo(dtype).min, torch.iinfo(dtype).max
        x[2, ::3] = lo  # the identities of max and min, as real values
        x[2, 1::3] = hi
    for fn in (cum_extremes(1), cum_extremes(-1), cum_extremes(0)):
        check(fn, x, atol=0, rtol=0)
    check(cum_extremes(0), x.t().contiguous(), atol=0, rtol=0)
    check(cum_extremes(0), x.t(), atol=0, rtol=0)  # non-contiguous
    check(cum_extremes(1), x[:, ::2], atol=0, rtol=0)


def test_cummax_cummin_shapes():
    x = torch.randint(-2, 3, (4, 5, 6)).float()
    x[1, 2, 3] = nan
    for dim in range(-3, 3):
        check(cum_extremes(dim), x, atol=0, rtol=0)
    for shape, dim in [((0,), 0), ((0, 3), 0), ((3, 0), 1), ((3, 0), 0), ((1, 4), 0), ((4, 1), 1),
                       ((2, 0, 3), 2)]:
        check(cum_extremes(dim), torch.randn(shape), atol=0, rtol=0)
    check(cum_extremes(0), torch.tensor(2.5), atol=0, rtol=0)
    check(cum_extremes(-1), torch.tensor(7), atol=0, rtol=0)
    check_error(lambda a: torch.cummax(a, 2), x[0])
    # a long scan: five levels of blocks, the last padded
    n = (1 << 20) + 3
    y = torch.randint(-1000, 1000, (n,)).float()
    y[12345] = nan
    check(lambda a: list(torch.cummax(a, 0)), y, atol=0, rtol=0)
    check(lambda a: list(torch.cummin(a[:12345], 0)), y, atol=0, rtol=0)


@pytest.mark.parametrize("op", [torch.cummax, torch.cummin], ids=["cummax", "cummin"])
def test_cummax_cummin_keep_little_scratch(op):
    # These scans were log2(n) steps of shifted comparisons, each a
    # full-size (value, index) buffer: 228 MiB of scratch for a 4 MiB
    # float32 input. Now they scan in blocks as cumsum does: the scratch is
    # the block totals and their scans, about a fifth of the input (values
    # and int64 indices) over the results themselves. A padded length (2**20
    # - 5) once took a padded copy of the input, and one of the results.
    x = torch.randn(1 << 20)
    for shape, dim in [((1 << 20,), 0), (((1 << 20) - 5,), 0), ((1024, 1024), 0), ((1024, 1024), 1)]:
        y = x[:math.prod(shape)].view(shape)
        got, peak = peak_of(lambda t: op(t, dim), y.to(TPU))
        result_bytes = sum(r.numel() * r.element_size() for r in got)
        input_bytes = y.numel() * y.element_size()
        assert peak <= result_bytes + input_bytes // 4
        assert_same(list(op(y, dim)), list(got), atol=0, rtol=0)

def test_cumsum_forms_and_errors():
    x = sample(torch.float32, (3, 4))
    check(lambda a: a.cumsum(1, dtype=torch.float64), x)
    check(lambda a: a.cumprod(0, dtype=torch.int64), sample(torch.int8, (3, 4)))
    check(lambda a: (a.cumsum(0), a.cumprod(-1)), torch.tensor(2.5))
    check(lambda a: a.cumsum(0), torch.empty(0, 3))
    check(lambda a: a.clone().cumsum_(1), x)
    t = x.to(TPU)
    t.cumsum_(0)
    assert_same(x.clone().cumsum_(0), t)
    t = sample(torch.int32, (3, 4))
    u = t.to(TPU)
    u.cumprod_(1)
    assert_same(t.clone().cumprod_(1), u)
    check(lambda a: torch.cumsum(a, 0, out=torch.empty(3, 4, device=a.device)), x)
    check(lambda a: torch.cumprod(a, 1, out=torch.empty(3, 4, dtype=torch.float64, device=a.device)), x)
    check(lambda a: torch.cumsum(a, 1), sample(torch.complex64, (2, 5)))
    check_error(lambda a: a.cumsum(2), x)


#===--- any, all, count_nonzero ---===#

@pytest.mark.parametrize("dtype", [torch.bool, torch.uint8, torch.float32, torch.int32, torch.bfloat16], ids=str)
def test_any_all(dtype):
    x = sample(dtype, (3, 4)) if dtype == torch.bool else torch.randint(0, 2, (3, 4)).to(dtype)
    x[0] = 1
    x[1] = 0
    for op in (torch.any, torch.all):
        check(lambda a: op(a), x)
        check(lambda a: op(a, 1), x)
        check(lambda a: op(a, 0, keepdim=True), x)
        check(lambda a: op(a, dim=(0, 1)), x)


def test_any_all_forms():
    x = torch.tensor([[0.0, nan, 0.0], [0.0, 0.0, 0.0]])
    check(lambda a: (a.any(), a.any(1), a.all(0), a.all()), x)
    check(lambda a: (a.any(dim=[]), a.all(dim=[], keepdim=True)), x)
    check(lambda a: (a.any(dim=None), a.all(dim=None, keepdim=True)), x)
    check(lambda a: (a.any(), a.all(), a.any(0), a.all(1)), torch.empty(0, 3))
    check(lambda a: (a.any(), a.all(0)), torch.tensor(1.0))
    check(lambda a: torch.any(a, 1, out=torch.empty(2, dtype=torch.bool, device=a.device)), x)
    check(lambda a: torch.all(a, out=torch.empty((), dtype=torch.bool, device=a.device)), x)
    check(lambda a: torch.any(a, (0, 1), out=torch.empty((), dtype=torch.bool, device=a.device)), x)
    check_error(lambda a: a.any(2), x)
    check_error(lambda a: a.all((0, 0)), x)


def test_count_nonzero():
    x = torch.randint(0, 3, (3, 4, 5)).float()
    x[0, 0, 0] = nan
    check(lambda a: torch.count_nonzero(a), x)
    check(lambda a: torch.count_nonzero(a, 1), x)
    check(lambda a: torch.count_nonzero(a, (0, 2)), x)
    check(lambda a: torch.count_nonzero(a, dim=[]), x)
    check(lambda a: torch.count_nonzero(a, -1), x > 1)
    check(lambda a: torch.count_nonzero(a, 0), torch.tensor(2))
    check_error(lambda a: torch.count_nonzero(a, (0, 0)), x)
    check_error(lambda a: torch.count_nonzero(a, 3), x)


#===--- softmax ---===#

@pytest.mark.parametrize("dtype", FLOATS + [torch.float64], ids=str)
def test_softmax(dtype):
    x = sample(dtype)
    for op in (torch.softmax, torch.log_softmax):
        check(lambda a: op(a, 1), x)
        check(lambda a: op(a, -1), x)


def test_softmax_forms_and_errors():
    x = torch.tensor([[-inf, 0.0, 1.0], [-inf, -inf, -inf], [inf, 0.0, 1.0], [1e4, -1e4, 0.0], [nan, 0.0, 1.0]])
    check(lambda a: (a.softmax(1), a.log_softmax(1)), x)
    check(lambda a: (a.softmax(0), a.log_softmax(-1)), torch.tensor(2.0))
    check(lambda a: (a.softmax(0), a.log_softmax(1)), torch.empty(0, 3))
    check(lambda a: F.softmax(a, 1, dtype=torch.float64), x)
    check(lambda a: F.log_softmax(a, 0, dtype=torch.float32), sample(torch.bfloat16))
    y = sample(torch.float32)
    check(lambda a: torch._softmax(a, 1, False, out=torch.empty(3, 4, 5, device=a.device)), y)
    check_error(lambda a: a.softmax(3), y)
    check_error(lambda a: a.softmax(0), sample(torch.int64))
    check_error(lambda a: torch._log_softmax(a, 1, False, out=torch.empty(3, 4, 5, dtype=torch.float64,
                                                                            device=a.device)), y)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
def test_softmax_half_to_float(dtype):
    # CPU refuses half_to_float (CUDA accepts it): compare with float math.
    x = sample(dtype)
    for op, bwd in ((torch._softmax, torch._softmax_backward_data),
                    (torch._log_softmax, torch._log_softmax_backward_data)):
        expected = op(x.float(), 1, False)
        actual = op(x.to(TPU), 1, True)
        assert_same(expected, actual)
        g = torch.randn(expected.shape)
        assert_same(bwd(g, expected, 1, torch.float32).to(dtype),
                    bwd(g.to(TPU), actual, 1, dtype))
    with pytest.raises(RuntimeError):
        torch._softmax(x.float().to(TPU), 1, True)


@pytest.mark.parametrize("dtype", FLOATS, ids=str)
def test_softmax_backward(dtype):
    # A one-ulp difference of a half-precision forward result is amplified
    # by the cancellation in g - sum(g * y): compare at twice the ulp.
    tol = {torch.float32: {}, torch.bfloat16: dict(atol=8e-3, rtol=2e-2),
           torch.float16: dict(atol=1e-3, rtol=2e-3)}[dtype]
    x = sample(dtype).requires_grad_()
    check_grad(lambda a: a.softmax(1), x, **tol)
    x.grad = None
    check_grad(lambda a: a.log_softmax(-1), x, **tol)
    g, y = sample(dtype), sample(dtype).softmax(0)
    check(lambda a, b: torch._softmax_backward_data(a, b, 0, dtype), g, y)
    check(lambda a, b: torch._log_softmax_backward_data(a, b, 2, dtype), g, y.log())
    check_error(lambda a, b: torch._softmax_backward_data(a, b, 0, dtype), g, y[:2])


#===--- gradients through reductions ---===#

def test_reduction_gradients():
    x = sample(torch.float32).requires_grad_()

    def run(fn):
        x.grad = None
        check_grad(fn, x, atol=1e-5, rtol=1e-4)

    run(lambda a: a.sum(1))
    run(lambda a: a.mean((0, 2)))
    run(lambda a: a.amax(1))
    run(lambda a: a.var(1))
    run(lambda a: a.logsumexp(2))
    run(lambda a: a.prod(1))
    run(lambda a: torch.linalg.vector_norm(a, 2, 1))
    run(lambda a: a.std(0))
    run(lambda a: a.cumsum(1))
    run(lambda a: a.cumprod(2))
    run(lambda a: a.max(1)[0])
    run(lambda a: a.max())


def test_trace():
    for dtype in FLOATS + [torch.float64, torch.complex64, torch.int8, torch.uint8, torch.int64]:
        check(torch.trace, sample(dtype, (4, 3)))
    check(torch.trace, torch.zeros(0, 3))
    check(lambda a: torch.ops.aten.trace.out(a, out=torch.empty(0, device=a.device)), torch.randn(3, 3))
    check_grad(torch.trace, torch.randn(3, 4, requires_grad=True))
    check_error(torch.trace, torch.randn(2, 2, 2))
    check_error(torch.trace, torch.ones(2, 2, dtype=torch.bool))
    check_error(lambda a: torch.ops.aten.trace.out(a, out=torch.empty(0, device=a.device,
                                                                      dtype=torch.float64)),
                torch.randn(3, 3))


def test_out_dtype_is_the_computation_dtype():
    # With no dtype=, sum, prod, cumsum and cumprod compute in the out=
    # tensor's dtype, as on CPU: sum of 1.7 and 1.7 into int64 is 2, not 3.
    x = torch.tensor([[1.7, -1.7], [1.7, -1.7]])

    def into(dtype, *shape):
        return lambda a: torch.empty(*shape, dtype=dtype, device=a.device)

    check(lambda a: torch.sum(a, 0, out=into(torch.int64, 2)(a)), x)
    check(lambda a: torch.sum(a, 0, out=into(torch.int32, 2)(a)), x)
    check(lambda a: torch.sum(a, 0, out=into(torch.float64, 2)(a)), x)
    check(lambda a: torch.prod(a, 0, out=into(torch.int64, 2)(a)), x)
    check(lambda a: torch.cumsum(a, 0, out=into(torch.int64, 2, 2)(a)), x)
    check(lambda a: torch.cumprod(a, 0, out=into(torch.int64, 2, 2)(a)), x)


@pytest.mark.parametrize("n", [3, 7, 100])
def test_mean_of_constant_data_is_exact(n):
    # XLA would multiply by the reciprocal of a constant count, which rounds
    # differently from PyTorch's division: a mean of seven 3.0s was 3.0000002,
    # so the variance of constant data was not 0 and normalizing it differed.
    x = torch.full((2, n), 3.0)
    for fn in (lambda a: a.mean(), lambda a: a.mean(1), lambda a: a.var(1),
               lambda a: a.std(1, correction=0), lambda a: torch.var_mean(a, 1),
               lambda a: F.layer_norm(a * 1000, (n,)), lambda a: F.adaptive_avg_pool1d(a, 1),
               lambda a: (a - a.mean()) / a.std()):
        check(fn, x, atol=0, rtol=0)


@pytest.mark.parametrize("dtype", [torch.int8, torch.uint8, torch.int16, torch.bool])
def test_integer_sums_convert_inside_the_reduction(dtype):
    # An int8 tensor's sum is int64: the whole tensor was converted to int64
    # first, a scratch copy 8 times its size (XLA's CPU backend does not fuse
    # a conversion into a long reduction), where CPU PyTorch accumulates
    # without one. Now the scratch is about a quarter of the input's size
    # (int8's: an int64 per 32 elements), and the values are CPU's, with and
    # without dims, with padding (sizes not a multiple of 32) and overflow.
    x = torch.randint(0, 100, (1 << 20,)).to(dtype) if dtype == torch.bool else \
        torch.randint(-100 if dtype != torch.uint8 else 0, 100, (1 << 20,)).to(dtype)
    got, peak = peak_of(torch.sum, x.to(TPU))
    assert peak <= x.numel() // 2  # was 8 * numel
    assert got.item() == x.sum().item()
    for shape, dims in [((1000, 1001), 1), ((37, 33, 65), (0, 2)), ((65, 3, 40), 0)]:
        y = x[:math.prod(shape)].view(shape)
        assert_same(y.sum(dims), y.to(TPU).sum(dims))
        assert_same(y[:, :3].prod(1), y.to(TPU)[:, :3].prod(1))
    big = torch.full((4099,), 2**30, dtype=torch.int32)
    assert big.to(TPU).sum().item() == big.sum().item()
