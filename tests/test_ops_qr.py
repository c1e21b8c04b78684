"""The QR family (runtime/src/lower/lower_qr.c): geqrf, householder_product,
linalg.qr in its three modes, against CPU (LAPACK: the same reflectors, so
the same signs of Q and R), with backward and errors."""
import pytest
import torch

from conftest import (FLOAT_AND_COMPLEX, TPU, NoFallback, check, check_error, check_grad,
                      order_tol)


@pytest.mark.parametrize("dtype", FLOAT_AND_COMPLEX)
@pytest.mark.parametrize("shape", [(4, 4), (2, 3, 5, 5), (6, 3), (3, 6), (1, 1), (0, 3, 3),
                                   (2, 0, 4), (40, 40)])
def test_qr_matches_lapack(dtype, shape):
    a = torch.randn(shape, dtype=dtype)
    t = order_tol(dtype)
    for mode in ("reduced", "complete", "r"):
        check(lambda a: torch.linalg.qr(a, mode=mode), a, **t)
    check(torch.geqrf, a, **t)
    if shape[-2] >= shape[-1]:
        check(lambda a: torch.linalg.householder_product(*torch.geqrf(a)), a, **t)


def test_zero_columns_and_orthogonal_init():
    # a zero column below the diagonal (larfg's tau = 0 case), then the
    # user-level op built on QR
    a = torch.randn(5, 4)
    a[1:, 0] = 0
    a[:, 2] = 0
    check(torch.linalg.qr, a, atol=1e-5, rtol=1e-5)
    w = torch.empty(64, 32, device=TPU)
    with NoFallback():
        torch.nn.init.orthogonal_(w)
        gram = (w.T @ w).cpu()
    torch.testing.assert_close(gram, torch.eye(32), atol=1e-5, rtol=1e-5)


def test_backward():
    a = torch.randn(2, 5, 3, dtype=torch.float64, requires_grad=True)
    t = dict(atol=1e-8, rtol=1e-8)
    check_grad(lambda a: torch.linalg.qr(a).Q, a, **t)
    check_grad(lambda a: torch.linalg.qr(a).R, a, **t)
    wide = torch.randn(3, 5, dtype=torch.float64, requires_grad=True)
    check_grad(lambda a: torch.linalg.qr(a, mode="complete").Q, wide, **t)
    v = torch.randn(5, 3, dtype=torch.float64, requires_grad=True)
    tau = torch.rand(3, dtype=torch.float64, requires_grad=True)
    check_grad(torch.linalg.householder_product, v, tau, **t)


def test_errors():
    cases = [
        (torch.linalg.qr, torch.randn(3)),
        (torch.linalg.qr, torch.ones(3, 3, dtype=torch.long)),
        (torch.linalg.qr, torch.ones(3, 3, dtype=torch.half)),
        (lambda a: torch.linalg.qr(a, mode="foo"), torch.randn(3, 3)),
        (torch.geqrf, torch.randn(3)),
        (torch.geqrf, torch.ones(3, 3, dtype=torch.long)),
        (torch.linalg.householder_product, torch.randn(3, 4), torch.randn(2)),
        (torch.linalg.householder_product, torch.randn(4, 3), torch.randn(4)),
        (torch.linalg.householder_product, torch.randn(4, 3), torch.randn(2).double()),
        (torch.linalg.householder_product, torch.randn(3), torch.randn(2)),
        (torch.linalg.householder_product, torch.randn(2, 4, 3), torch.randn(3, 2)),
    ]
    for fn, *args in cases:
        tpu_err, cpu_err = check_error(fn, *args)
        assert str(tpu_err).splitlines()[0] == str(cpu_err).splitlines()[0]
