"""The LU family (runtime/src/lower/lower_lu.c): lu_factor, lu, lu_unpack,
lu_solve, solve, inv, det, slogdet, against CPU (LAPACK), with their
backward, singular inputs and errors."""
import pytest
import torch

from conftest import (FLOAT_AND_COMPLEX, TPU, NoFallback, check, check_error, check_grad,
                      order_tol)


@pytest.mark.parametrize("dtype", FLOAT_AND_COMPLEX)
@pytest.mark.parametrize("shape", [(4, 4), (2, 3, 5, 5), (6, 3), (3, 6), (1, 1), (0, 3, 3),
                                   (2, 0, 4)])
def test_lu_factor_matches_lapack(dtype, shape):
    a = torch.randn(shape, dtype=dtype)
    # the same pivots as LAPACK, the same packed factors
    check(lambda a: torch.linalg.lu_factor_ex(a), a, **order_tol(dtype))
    check(lambda a: torch.linalg.lu(a), a, **order_tol(dtype))
    check(lambda a: torch.lu_unpack(*torch.linalg.lu_factor(a)), a, **order_tol(dtype))


@pytest.mark.parametrize("dtype", [torch.float32, torch.complex128])
@pytest.mark.parametrize("shape", [(33, 33), (2, 70, 70), (80, 40), (40, 75)])
def test_blocked_lu_matches_lapack(dtype, shape):
    # more than 32 columns: panels of 32 by the loop, the rest by triangular
    # solves and matrix products, as LAPACK's blocked getrf
    a = torch.randn(shape, dtype=dtype)
    t = dict(atol=1e-3, rtol=1e-3) if dtype == torch.float32 else order_tol(dtype)
    check(lambda a: torch.linalg.lu_factor_ex(a), a, **t)
    check(lambda a: torch.linalg.lu(a), a, **t)
    if shape[-1] == shape[-2]:
        check(torch.linalg.solve, a, torch.randn(shape[:-1], dtype=dtype), **t)
        check(torch.linalg.slogdet, a, **t)


def test_lu_unpack_parts():
    a = torch.randn(2, 4, 4)
    for data, pivots in ((True, False), (False, True), (False, False)):
        check(lambda a: torch.lu_unpack(*torch.linalg.lu_factor(a), unpack_data=data,
                                        unpack_pivots=pivots), a, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("dtype", FLOAT_AND_COMPLEX)
def test_solve_inv_det_slogdet(dtype):
    a = torch.randn(3, 5, 5, dtype=dtype)
    t = order_tol(dtype)
    check(torch.linalg.inv, a, **t)
    check(torch.linalg.inv_ex, a, **t)
    check(torch.linalg.det, a, **t)
    check(torch.linalg.slogdet, a, **t)
    check(lambda a: torch.ops.aten._linalg_det(a), a, **t)  # with the saved factors
    check(lambda a: torch.ops.aten._linalg_det(a.mT), a, **t)  # not contiguous: A itself
    check(lambda a: torch.ops.aten._linalg_slogdet(a), a, **t)
    b = torch.randn(3, 5, 2, dtype=dtype)
    check(torch.linalg.solve, a, b, **t)
    check(lambda a, b: torch.ops.aten._linalg_solve_ex(a, b), a, b, **t)
    check(lambda a, b: torch.linalg.solve(a, b.mT, left=False), a, b, **t)
    check(torch.linalg.solve, a, torch.randn(5, dtype=dtype), **t)  # a vector for each
    check(torch.linalg.solve, a, torch.randn(3, 5, dtype=dtype), **t)  # a batch of vectors
    check(torch.linalg.solve, a[0], b, **t)  # A broadcast over B's batch
    lu, piv = torch.linalg.lu_factor(a)
    for left in (True, False):
        for adjoint in (True, False):
            rhs = b if left else b.mT
            check(lambda lu, piv, rhs: torch.linalg.lu_solve(lu, piv, rhs, left=left,
                                                             adjoint=adjoint),
                  lu, piv, rhs, **t)
    if not dtype.is_complex:
        check(torch.logdet, a[0] @ a[0].mT + torch.eye(5, dtype=dtype), **t)


def test_out_variants():
    a = torch.randn(4, 4)
    out = torch.empty(4, 4, device=TPU)
    with NoFallback():
        torch.linalg.inv(a.to(TPU), out=out)
    torch.testing.assert_close(out.cpu(), torch.linalg.inv(a), atol=1e-4, rtol=1e-4)
    lu, piv = torch.empty(0, device=TPU), torch.empty(0, device=TPU, dtype=torch.int32)
    with NoFallback():
        torch.linalg.lu_factor(a.to(TPU), out=(lu, piv))
    assert torch.equal(piv.cpu(), torch.linalg.lu_factor(a)[1])


@pytest.mark.parametrize("contiguous", [True, False])
def test_backward(contiguous):
    # det and slogdet save the factors of A^T when A is contiguous, of A
    # otherwise; their backward reads them accordingly
    base = torch.randn(2, 4, 4, dtype=torch.float64)
    a = (base if contiguous else base.mT).requires_grad_()
    b = torch.randn(2, 4, 3, dtype=torch.float64, requires_grad=True)
    t = dict(atol=1e-8, rtol=1e-8)
    check_grad(torch.linalg.det, a, **t)
    check_grad(lambda a: torch.linalg.slogdet(a).logabsdet, a, **t)
    check_grad(torch.linalg.inv, a, **t)
    check_grad(torch.linalg.solve, a, b, **t)
    check_grad(lambda a, b: torch.linalg.solve(a, b.mT, left=False), a, b, **t)
    check_grad(lambda a, b: torch.linalg.lu_solve(*torch.linalg.lu_factor(a), b, adjoint=True),
               a, b, **t)
    check_grad(lambda a: torch.linalg.lu(a).U, a, **t)
    check_grad(lambda a: torch.linalg.lu(a).L, a, **t)
    big = torch.randn(40, 40, dtype=torch.float64, requires_grad=True)  # blocked
    check_grad(lambda a: torch.linalg.slogdet(a).logabsdet, big, **t)
    check_grad(torch.linalg.inv, big, atol=1e-7, rtol=1e-7)


def test_singular_matrices():
    # (exactly singular under any rounding: the elimination is exact, so U
    # has exact zeros with and without fused multiply-adds, which LAPACK
    # builds and XLA use or not depending on the machine)
    s = torch.tensor([[1.0, 2.0, 0.0], [2.0, 4.0, 0.0], [0.0, 0.0, 1.0]])
    zeros = torch.zeros(3, 3)
    batch = torch.stack([torch.eye(3), s, zeros])
    # info is LAPACK's: where U's diagonal is first zero; det 0, slogdet (0, -inf)
    check(torch.linalg.lu_factor_ex, batch)
    check(torch.linalg.det, batch)
    check(torch.linalg.slogdet, batch)
    check(lambda a: torch.linalg.inv_ex(a).info, batch)
    # the checking variants raise CPU's LinAlgError with CPU's message, at
    # the next sync for the _ex variants that check on the device
    for fn, a in ((torch.linalg.inv, s), (torch.linalg.inv, batch),
                  (lambda a: torch.linalg.inv_ex(a, check_errors=True), batch),
                  (lambda a: torch.linalg.solve(a, torch.ones_like(a[..., 0])), s),
                  (lambda a: torch.linalg.solve_ex(a, torch.ones_like(a), check_errors=True), batch),
                  (torch.linalg.lu_factor, batch),
                  (lambda a: torch.linalg.lu_factor_ex(a, check_errors=True), s)):
        with pytest.raises(RuntimeError) as cpu_err:
            fn(a)
        with pytest.raises(RuntimeError) as tpu_err:
            fn(a.to(TPU))
            torch.tpu.synchronize()
        assert str(tpu_err.value).splitlines()[0] == str(cpu_err.value).splitlines()[0]
        if isinstance(cpu_err.value, torch.linalg.LinAlgError):
            assert isinstance(tpu_err.value, torch.linalg.LinAlgError)
    # the device is usable afterwards
    check(torch.linalg.inv, torch.eye(3) * 2)


def test_nonfinite_input_keeps_pivots_in_range():
    a = torch.randn(4, 4)
    a[1, 0] = float("nan")
    a[2, 2] = float("inf")
    with NoFallback():
        lu, piv, _ = torch.linalg.lu_factor_ex(a.to(TPU))
        p = piv.cpu()
    assert ((p >= 1) & (p <= 4)).all()
    assert lu.cpu().isnan().any()


def test_bad_pivots_raise():
    a = torch.randn(3, 3)
    lu, piv = torch.linalg.lu_factor(a)
    bad = torch.tensor([5, 1, 1], dtype=torch.int32)
    for fn in (lambda lu, p: torch.lu_unpack(lu, p),
               lambda lu, p: torch.linalg.lu_solve(lu, p, torch.ones_like(lu))):
        with pytest.raises(RuntimeError) as cpu_err:
            fn(lu, bad)
        with pytest.raises(RuntimeError) as tpu_err:
            fn(lu.to(TPU), bad.to(TPU))
            torch.tpu.synchronize()
        assert str(tpu_err.value).splitlines()[0] == str(cpu_err.value).splitlines()[0]


def test_errors():
    a = torch.randn(3, 3)
    lu, piv = torch.linalg.lu_factor(a)
    cases = [
        (torch.linalg.lu_factor, torch.randn(3)),
        (torch.linalg.lu_factor, torch.ones(3, 3, dtype=torch.long)),
        (lambda a: torch.linalg.lu_factor(a, pivot=False), a),
        (lambda a: torch.linalg.lu(a, pivot=False), a),
        (torch.linalg.lu, torch.randn(3)),
        (torch.linalg.lu_solve, lu, piv, torch.randn(4, 2)),
        (torch.linalg.lu_solve, lu, piv, torch.randn(3)),
        (torch.linalg.lu_solve, torch.randn(3, 4), piv, torch.randn(3, 2)),
        (torch.linalg.lu_solve, lu, piv.long(), torch.randn(3, 2)),
        (torch.linalg.lu_solve, lu, piv[:2], torch.randn(3, 2)),
        (torch.linalg.lu_solve, lu, piv, torch.randn(3, 2, dtype=torch.float64)),
        (torch.lu_unpack, lu, piv.long()),
        (torch.lu_unpack, torch.randn(3), piv),
        (torch.linalg.inv, torch.randn(2, 3)),
        (torch.linalg.inv, torch.ones(2, 2, dtype=torch.long)),
        (torch.linalg.inv, torch.eye(2, dtype=torch.float16)),
        (torch.linalg.det, torch.randn(2, 3)),
        (torch.linalg.slogdet, torch.randn(2, 3)),
        (torch.linalg.solve, torch.randn(3, 3), torch.randn(2)),
        (torch.linalg.solve, torch.randn(3, 3), torch.randn(3, 3, dtype=torch.float64)),
        (lambda a, b: torch.linalg.solve(a, b, left=False), torch.randn(3, 3), torch.randn(3)),
        (lambda a, b: torch.linalg.solve(a, b, left=False), torch.randn(3, 3),
         torch.randn(3, 2)),
    ]
    for fn, *args in cases:
        tpu_err, cpu_err = check_error(fn, *args)
        assert str(tpu_err).splitlines()[0] == str(cpu_err).splitlines()[0]
