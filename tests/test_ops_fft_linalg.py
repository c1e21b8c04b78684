"""FFTs (_fft_r2c, _fft_c2r, _fft_c2c through torch.fft) and the Cholesky
family (linalg.cholesky(_ex), cholesky, solve_triangular, triangular_solve,
cholesky_solve, cholesky_inverse) against CPU: forward in float32, float64
and complex, out=, backward, errors."""
import pytest
import torch

from conftest import TPU, NoFallback, check, check_error, check_grad

A = torch.ops.aten
TOL = dict(atol=1e-4, rtol=1e-4)


def check_grad_tol(fn, *inputs, atol=1e-4, rtol=1e-4):
    check_grad(fn, *inputs, atol=atol, rtol=rtol)


#===--- FFT ---===#

@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_fft_real_input(dtype):
    x = torch.randn(3, 6, 5, dtype=dtype)
    check(lambda x: (torch.fft.rfft(x), torch.fft.rfft(x, n=8, dim=1, norm="ortho"),
                     torch.fft.fft(x, dim=0), torch.fft.rfft2(x, norm="forward"),
                     torch.fft.rfftn(x), torch.fft.ihfft(x), torch.fft.fftn(x, s=(4, 3))), x,
          **TOL)


@pytest.mark.parametrize("dtype", [torch.complex64, torch.complex128])
def test_fft_complex_input(dtype):
    z = torch.randn(4, 6, 5, dtype=dtype)
    check(lambda z: (torch.fft.fft(z), torch.fft.ifft(z, dim=1, norm="ortho"),
                     torch.fft.fft2(z, norm="forward"), torch.fft.ifftn(z),
                     torch.fft.irfft(z), torch.fft.irfft(z, n=7, dim=0, norm="ortho"),
                     torch.fft.irfftn(z), torch.fft.hfft(z, n=6)), z, **TOL)


def test_fft_raw_overloads():
    # All normalization modes, onesided or not, dims in any order, more than
    # the three dims one stablehlo.fft takes.
    x = torch.randn(2, 3, 4, 5, 2)
    z = torch.randn(2, 3, 4, 5, 2, dtype=torch.complex64)
    for norm in (0, 1, 2):
        check(lambda x, z: (A._fft_r2c(x, [2, 0], norm, True), A._fft_r2c(x, [1], norm, False),
                            A._fft_r2c(x, [4, 0, 3, 1], norm, True),
                            A._fft_c2c(z, [3, 1], norm, True), A._fft_c2c(z, [0, 1, 2, 3], norm, False),
                            A._fft_c2c(z, [], norm, True),
                            A._fft_c2r(z, [1, 3], norm, 8), A._fft_c2r(z, [0, 2, 1, 3], norm, 9),
                            A._fft_c2r(z, [3], norm, 5)), x, z, **TOL)


def test_fft_out():
    x = torch.randn(4, 6)
    z = torch.randn(4, 6, dtype=torch.complex64)

    def fn(x, z):
        r1 = torch.empty(0, dtype=torch.complex64, device=x.device)
        r2 = torch.empty(0, dtype=torch.float32, device=x.device)
        r3 = torch.empty(0, dtype=torch.complex64, device=x.device)
        torch.fft.rfft(x, out=r1)
        torch.fft.irfft(z, out=r2)
        torch.fft.fft(z, dim=0, out=r3)
        return r1, r2, r3
    check(fn, x, z, **TOL)


def test_fft_backward():
    x = torch.randn(4, 6, requires_grad=True)
    z = torch.randn(4, 6, dtype=torch.complex64, requires_grad=True)
    check_grad_tol(lambda x: torch.fft.rfft(x, norm="ortho").abs(), x)
    check_grad_tol(lambda x: torch.fft.fftn(x).real, x)
    check_grad_tol(lambda z: torch.fft.irfft(z, n=10), z)
    check_grad_tol(lambda z: torch.fft.ifft2(z).imag, z)
    check_grad_tol(lambda z: torch.fft.hfft(z), z)


def test_fft_errors():
    check_error(lambda x: A._fft_r2c(x, [0], 0, True), torch.randn(4, dtype=torch.bfloat16))
    check_error(lambda x: A._fft_r2c(x, [0], 0, True), torch.randn(4, dtype=torch.float16))
    check_error(lambda x: torch.fft.fft(x, dim=2), torch.randn(4, 3))


#===--- Cholesky family ---===#

def spd(*batch, n=4, dtype=torch.float32):
    a = torch.randn(*batch, n, n, dtype=dtype)
    return a @ a.mH + n * torch.eye(n, dtype=dtype)


def tri(*shape, upper=False, dtype=torch.float32):
    a = torch.randn(*shape, dtype=dtype)
    a = a.triu() if upper else a.tril()
    return a + 3 * torch.eye(shape[-1], dtype=dtype)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.complex64])
def test_cholesky_forward(dtype):
    a, b = spd(n=4, dtype=dtype), spd(2, 3, n=3, dtype=dtype)
    check(lambda a, b: (torch.linalg.cholesky(a), torch.linalg.cholesky(b, upper=True),
                        torch.linalg.cholesky_ex(b), torch.linalg.cholesky_ex(a, upper=True),
                        torch.cholesky(b), torch.cholesky(a, upper=True)), a, b, **TOL)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.complex64])
def test_triangular_solves(dtype):
    lo, up = tri(2, 3, 3, dtype=dtype), tri(3, 3, upper=True, dtype=dtype)
    b = torch.randn(4, 1, 3, 2, dtype=dtype)
    r = torch.randn(2, 3, dtype=dtype)
    check(lambda lo, up, b, r: (
        torch.linalg.solve_triangular(lo, b, upper=False),
        torch.linalg.solve_triangular(up, b, upper=True, unitriangular=True),
        torch.linalg.solve_triangular(up, r, upper=True, left=False),
        torch.linalg.solve_triangular(lo, r, upper=False, left=False, unitriangular=True),
        torch.triangular_solve(b, up), torch.triangular_solve(b, lo, upper=False, transpose=True),
        torch.triangular_solve(r.mT, up, unitriangular=True)), lo, up, b, r, **TOL)


def test_solve_triangular_mixed_dtypes():
    # CPU solves in A's dtype
    check(lambda a, b: torch.linalg.solve_triangular(a, b, upper=True),
          tri(3, 3, upper=True), torch.randn(3, 2, dtype=torch.float64), **TOL)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.complex64])
def test_cholesky_solve_inverse(dtype):
    a = spd(2, n=3, dtype=dtype)
    lo = torch.linalg.cholesky(a)
    up = lo.mH.contiguous()
    b = torch.randn(3, 1, 3, 2, dtype=dtype)
    check(lambda lo, up, b: (torch.cholesky_solve(b, lo), torch.cholesky_solve(b, up, upper=True),
                             torch.cholesky_inverse(lo), torch.cholesky_inverse(up[0], upper=True),
                             A._cholesky_solve_helper(b[0].expand(2, 3, 2), lo, False)),
          lo, up, b, **TOL)


def test_cholesky_family_out():
    a = spd(2, n=3)
    lo = torch.linalg.cholesky(a)
    b = torch.randn(2, 3, 2)

    def fn(a, lo, b):
        e = lambda dt=torch.float32: torch.empty(0, dtype=dt, device=a.device)  # noqa: E731
        L, info = e(), e(torch.int32)
        torch.linalg.cholesky_ex(a, out=(L, info))
        x = torch.linalg.solve_triangular(lo, b, upper=False, out=e())
        s, c = e(), e()
        torch.triangular_solve(b, lo, upper=False, out=(s, c))
        return (L, info, x, s, c, torch.cholesky_solve(b, lo, out=e()),
                torch.cholesky_inverse(lo, out=e()), torch.cholesky(a, out=e()))
    check(fn, a, lo, b, **TOL)


def test_cholesky_family_backward():
    a = spd(2, n=3).requires_grad_()
    lo = tri(2, 3, 3).requires_grad_()
    b = torch.randn(2, 3, 2, requires_grad=True)
    check_grad_tol(lambda a: torch.linalg.cholesky(a), a)
    check_grad_tol(lambda a: torch.linalg.cholesky_ex(a, upper=True).L, a)
    check_grad_tol(lambda a: torch.cholesky(a), a)
    check_grad_tol(lambda lo, b: torch.linalg.solve_triangular(lo, b, upper=False), lo, b)
    check_grad_tol(lambda lo, b: torch.triangular_solve(b, lo, upper=False).solution, lo, b)
    check_grad_tol(lambda lo, b: torch.cholesky_solve(b, lo), lo, b, atol=1e-3, rtol=1e-3)
    check_grad_tol(lambda lo: torch.cholesky_inverse(lo), lo, atol=1e-3, rtol=1e-3)


def test_cholesky_not_positive_definite():
    bad = torch.tensor([[1.0, 2.0, 0.0], [2.0, 1.0, 0.0], [0.0, 0.0, 1.0]])
    # info names the first leading minor that is not positive definite
    with NoFallback():
        _, info = torch.linalg.cholesky_ex(bad.to(TPU))
        _, binfo = torch.linalg.cholesky_ex(torch.stack([torch.eye(3), bad, -torch.eye(3)]).to(TPU))
    assert info.item() == 2
    assert binfo.tolist() == [0, 2, 1]
    # only the triangle named by `upper` is read
    one_sided = torch.tensor([[1.0, 2.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]])
    check(lambda a: (torch.linalg.cholesky_ex(a).info, torch.linalg.cholesky_ex(a, upper=True).info),
          one_sided)
    # larger matrices: the failing order is found at any position
    big = torch.eye(11).repeat(11, 1, 1)
    for k in range(11):
        big[k, k, k] = -1.0
    check(lambda a: torch.linalg.cholesky_ex(a).info, big)
    # linalg.cholesky raises CPU's LinAlgError with CPU's message
    tpu_err, cpu_err = check_error(torch.linalg.cholesky, bad)
    assert str(tpu_err) == str(cpu_err)
    # the ops that check on the device raise it at the next sync, with CPU's
    # type and first line (naming the order, and the first failing element
    # of a batch), for matrices of any size
    large = torch.eye(40)
    large[:, 31] = large[31, :] = 2.0
    singular = torch.tensor([[1.0, 0.0], [1.0, 0.0]])
    batch = torch.stack([torch.eye(3), torch.eye(3), bad, -torch.eye(3)]).reshape(2, 2, 3, 3)
    for fn, a in ((torch.cholesky, bad), (torch.cholesky, large), (torch.cholesky, batch),
                  (torch.cholesky, bad[None]),
                  (lambda a: torch.linalg.cholesky_ex(a, check_errors=True), large),
                  (lambda a: torch.linalg.cholesky_ex(a, check_errors=True), batch),
                  (torch.cholesky_inverse, singular),
                  (torch.cholesky_inverse, torch.stack([torch.eye(2), singular]))):
        with pytest.raises(torch.linalg.LinAlgError) as cpu_err:
            fn(a)
        with pytest.raises(torch.linalg.LinAlgError) as tpu_err:
            fn(a.to(TPU))
            torch.tpu.synchronize()
        assert str(tpu_err.value).splitlines()[0] == str(cpu_err.value).splitlines()[0]


def test_cholesky_family_errors():
    check_error(torch.linalg.cholesky, torch.randn(3, 4))
    check_error(torch.linalg.cholesky, torch.randn(3))
    check_error(torch.cholesky, torch.eye(3, dtype=torch.bfloat16))
    check_error(lambda a, b: torch.linalg.solve_triangular(a, b, upper=True),
                torch.eye(3), torch.randn(4, 2))
    check_error(torch.triangular_solve, torch.randn(3, 2, dtype=torch.float64), torch.eye(3))
    check_error(torch.linalg.cholesky_ex, torch.eye(3, dtype=torch.int64))
    check_error(torch.triangular_solve, torch.randn(4, 2), torch.eye(3))
    check_error(torch.cholesky_solve, torch.randn(4, 2), torch.eye(3))
    check_error(torch.cholesky_inverse, torch.eye(3, dtype=torch.float16))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.complex64])
def test_matrix_exp(dtype):
    # norms from 0 to ~100 in one batch: each matrix squared its own number
    # of times; 1x1 is exp, empty stays empty
    a = torch.randn(5, 4, 4, dtype=dtype) * torch.tensor([0.0, 0.1, 1.0, 5.0, 12.0]).view(5, 1, 1)
    t = dict(atol=1e-10, rtol=1e-10) if dtype == torch.float64 else dict(atol=1e-4, rtol=1e-4)
    check(torch.linalg.matrix_exp, a, **t)
    check(torch.linalg.matrix_exp, torch.randn(1, 1, dtype=dtype), **t)
    check(torch.linalg.matrix_exp, torch.randn(0, 3, 3, dtype=dtype))
    big = torch.tensor([[0.0, 500.0], [-500.0, 0.0]], dtype=torch.float64)  # a rotation
    check(torch.linalg.matrix_exp, big, atol=1e-9, rtol=1e-9)


def test_matrix_exp_half_precision():
    # computed in float32, as the result of CPU's float32 kernel rounded (CPU's
    # own bfloat16 kernel returns inf and NaN for this 4x4 matrix of norm ~3)
    torch.manual_seed(0)
    a = torch.randn(5, 4, 4)[2:3]
    for dtype in (torch.bfloat16, torch.float16):
        with NoFallback():
            got = torch.linalg.matrix_exp(a.to(dtype).to(TPU)).cpu()
        want = torch.linalg.matrix_exp(a.to(dtype).float()).to(dtype)
        assert got.dtype == dtype
        torch.testing.assert_close(got.float(), want.float(), atol=1e-2, rtol=1e-2)


def test_matrix_exp_backward_and_orthogonal_parametrization():
    a = torch.randn(2, 4, 4, dtype=torch.float64, requires_grad=True)
    check_grad(torch.linalg.matrix_exp, a, atol=1e-9, rtol=1e-9)
    from torch.nn.utils import parametrizations
    with NoFallback():
        layer = parametrizations.orthogonal(torch.nn.Linear(6, 6).to(TPU))
        layer(torch.randn(3, 6, device=TPU)).sum().backward()
        w = layer.weight.detach().cpu()
    torch.testing.assert_close(w.T @ w, torch.eye(6), atol=1e-5, rtol=1e-5)


def test_matrix_exp_errors():
    check_error(torch.linalg.matrix_exp, torch.randn(3))
    check_error(torch.linalg.matrix_exp, torch.randn(2, 3))
    check_error(torch.linalg.matrix_exp, torch.ones(3, 3, dtype=torch.long))


#===--- layout ---===#

def _strides(result):
    return [t.stride() for t in (result if isinstance(result, tuple) else (result,))]


def test_results_are_laid_out_as_pytorch_lays_them_out():
    # linalg's matrices column-major, fft's transformed dims innermost: the
    # strides of CPU's kernels and of the meta kernels a compiled graph
    # trusts. The meta kernel runs once per signature, so an input laid out
    # otherwise (the transposed z) gets its own layout.
    a, s, b = torch.randn(2, 4, 4), spd(2), torch.randn(2, 4, 3)
    low, x = torch.linalg.cholesky(s), torch.randn(3, 8, 5)
    z = torch.randn(3, 8, 5, dtype=torch.complex64)
    cases = [(torch.linalg.inv, s), (torch.linalg.cholesky, s), (torch.linalg.qr, a),
             (torch.linalg.lu_factor, a), (torch.linalg.solve, s, b), (torch.cholesky_solve, b, low),
             (lambda a, b: torch.linalg.solve_triangular(a, b, upper=False), low, b),
             (lambda z: torch.fft.fft(z, dim=1), z), (lambda x: torch.fft.rfft(x, dim=1), x),
             (lambda z: torch.fft.irfft(z, dim=1), z), (lambda z: torch.fft.fft(z, dim=1), z.mT),
             (lambda z: torch.fft.fftn(z, dim=(0, 1)), z)]
    for fn, *inputs in cases:
        got = check(fn, *inputs, **TOL)
        assert _strides(got) == _strides(fn(*inputs)), (fn, _strides(got))


def test_views_that_rely_on_the_layout_work():
    # The transposed results are contiguous, as on CPU: view() takes them.
    s, z = spd(2), torch.randn(3, 8, 5, dtype=torch.complex64)
    check(lambda s: torch.linalg.inv(s).mT.view(2, -1), s, **TOL)
    check(lambda s: torch.linalg.cholesky(s).mT.view(-1), s, **TOL)
    check(lambda z: torch.fft.fft(z, dim=1).transpose(1, 2).view(3, -1), z, **TOL)
