"""Matrix products against CPU: mm, bmm, addmm, baddbmm, addbmm, mv, addmv,
dot, vdot, addr, and the composites that decompose into them (matmul, linear,
einsum), with their backward, out= and in-place forms, and errors."""
import pytest
import torch
import torch.nn.functional as F

import torchtpu
from conftest import check, check_error, check_grad

FLOATS = [torch.float32, torch.bfloat16, torch.float16]
# Half-precision products accumulate in float and round once; CPU may round
# partial sums, so allow a couple of ulps on values of order one.
TOL = {
    torch.float32: dict(atol=1e-5, rtol=1e-5),
    torch.bfloat16: dict(atol=3e-2, rtol=2e-2),
    torch.float16: dict(atol=4e-3, rtol=2e-3),
    torch.int64: dict(atol=0, rtol=0),
    torch.int32: dict(atol=0, rtol=0),
}


def rand(*shape, dtype=torch.float32, grad=False):
    if dtype.is_floating_point or dtype.is_complex:
        x = torch.randn(shape, dtype=dtype)
    else:
        x = torch.randint(-5, 6, shape, dtype=dtype)
    return x.requires_grad_(grad)


@pytest.mark.parametrize("dtype", FLOATS + [torch.int64], ids=str)
def test_mm_bmm(dtype):
    check(torch.mm, rand(3, 4, dtype=dtype), rand(4, 5, dtype=dtype), **TOL[dtype])
    check(torch.bmm, rand(2, 3, 4, dtype=dtype), rand(2, 4, 5, dtype=dtype), **TOL[dtype])
    # Transposed (non-contiguous) operands.
    check(lambda a, b: torch.bmm(a.transpose(1, 2), b), rand(2, 4, 3, dtype=dtype),
          rand(2, 4, 5, dtype=dtype), **TOL[dtype])


@pytest.mark.parametrize("dtype", FLOATS + [torch.int64], ids=str)
def test_addmm_family(dtype):
    tol = TOL[dtype]
    kw = dict(beta=2, alpha=3) if dtype == torch.int64 else dict(beta=0.5, alpha=-1.5)
    check(torch.addmm, rand(5, dtype=dtype), rand(3, 4, dtype=dtype), rand(4, 5, dtype=dtype),
          **kw, **tol)
    check(torch.addmm, rand(3, 5, dtype=dtype), rand(3, 4, dtype=dtype),
          rand(4, 5, dtype=dtype), **tol)
    check(torch.baddbmm, rand(3, 1, dtype=dtype), rand(2, 3, 4, dtype=dtype),
          rand(2, 4, 5, dtype=dtype), **kw, **tol)
    check(torch.addbmm, rand(3, 5, dtype=dtype), rand(2, 3, 4, dtype=dtype),
          rand(2, 4, 5, dtype=dtype), **kw, **tol)
    check(torch.addmv, rand(3, dtype=dtype), rand(3, 4, dtype=dtype), rand(4, dtype=dtype),
          **kw, **tol)
    check(torch.addr, rand(3, 4, dtype=dtype), rand(3, dtype=dtype), rand(4, dtype=dtype),
          **kw, **tol)
    check(torch.mv, rand(3, 4, dtype=dtype), rand(4, dtype=dtype), **tol)
    check(torch.dot, rand(7, dtype=dtype), rand(7, dtype=dtype), **tol)
    check(torch.vdot, rand(7, dtype=dtype), rand(7, dtype=dtype), **tol)


def test_beta_zero_ignores_self():
    nan = torch.full((3, 5), float("nan"))
    check(torch.addmm, nan, rand(3, 4), rand(4, 5), beta=0)
    check(torch.addmv, nan[:, 0], rand(3, 4), rand(4), beta=0)
    check(torch.baddbmm, nan, rand(2, 3, 4), rand(2, 4, 5), beta=0)
    check(torch.addbmm, nan, rand(2, 3, 4), rand(2, 4, 5), beta=0)
    check(torch.addr, nan, rand(3), rand(5), beta=0)
    # alpha == 0 propagates NaN from the product (CPU's float32 BLAS paths of
    # addmm/addmv/addbmm skip the product instead; its other paths agree).
    check(torch.addr, rand(3, 5), nan[:, 0], rand(5), alpha=0)
    check(torch.baddbmm, rand(3, 5), rand(2, 3, 4), torch.full((2, 4, 5), float("nan")),
          alpha=0)


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.complex64], ids=str)
def test_addbmm_inplace_resizes_a_broadcast_self(dtype):
    # CPU's addbmm_ is addbmm's out= form into self: a self that broadcasts
    # to the product's shape is resized to it (the OpInfo's [1] and []
    # samples), where the in-place ops that TensorIterator checks refuse
    kw = dict(beta=2, alpha=3) if dtype == torch.int64 else dict(beta=0.6, alpha=0.2)
    b1, b2 = rand(5, 5, 5, dtype=dtype), rand(5, 5, 10, dtype=dtype)
    for shape in [(1,), (), (10,), (1, 10), (5, 10)]:
        x = check(lambda s, a, b: s.clone().addbmm_(a, b, **kw), rand(*shape, dtype=dtype), b1,
                  b2, **TOL.get(dtype, {}))
        assert x.shape == (5, 10)
    # the same tensor comes back, resized in place
    x = rand(1, dtype=dtype).to("tpu")
    assert x.addbmm_(b1.to("tpu"), b2.to("tpu")) is x and x.shape == (5, 10)
    # a [5, 1] self: CPU's copy into the resized self reads elements it
    # already wrote; tpu computes from self's values before the op
    s = rand(5, 1, dtype=dtype)
    got = s.to("tpu").addbmm_(b1.to("tpu"), b2.to("tpu"), **kw).cpu()
    torch.testing.assert_close(got, torch.addbmm(s, b1, b2, **kw), **TOL.get(dtype, {}))
    check_error(lambda s, a, b: s.addbmm_(a, b), rand(3, 10, dtype=dtype), b1, b2)


def test_bool_and_complex():
    b = lambda *s: torch.rand(s) > 0.5  # noqa: E731
    check(torch.addr, b(3, 4), b(3), b(4))
    check(torch.addr, b(3, 4), b(3), b(4), beta=False)
    check(torch.addr, b(3, 4), b(3), b(4), alpha=False)
    c = lambda *s: torch.randn(s, dtype=torch.complex64)  # noqa: E731
    check(torch.mm, c(3, 4), c(4, 2))
    check(torch.dot, c(5), c(5))
    check(torch.vdot, c(5), c(5))
    # addr promotes its operands (the others require equal dtypes).
    check(torch.addr, rand(3, 4, dtype=torch.float64), rand(3), rand(4))
    check(torch.addr, rand(3, 4, dtype=torch.int64), b(3), rand(4, dtype=torch.int64))


def test_complex_coefficients():
    # alpha/beta with a real part of 0 or 1 but an imaginary part are not the
    # "ignore self" / "no scaling" cases (they were taken as such).
    c = lambda *s: torch.randn(s, dtype=torch.complex64)  # noqa: E731
    for beta, alpha in [(1 + 2j, 1 + 1j), (2j, 1), (1, 1 - 3j)]:
        check(lambda s, a, b: torch.addmm(s, a, b, beta=beta, alpha=alpha), c(2, 3), c(2, 4),
              c(4, 3))
        check(lambda s, a, b: torch.baddbmm(s, a, b, beta=beta, alpha=alpha), c(2, 2, 3),
              c(2, 2, 4), c(2, 4, 3))
        check(lambda s, a, b: torch.addbmm(s, a, b, beta=beta, alpha=alpha), c(2, 3),
              c(2, 2, 4), c(2, 4, 3))
        check(lambda s, m, v: torch.addmv(s, m, v, beta=beta, alpha=alpha), c(3), c(3, 4), c(4))
        check(lambda s, u, v: torch.addr(s, u, v, beta=beta, alpha=alpha), c(3, 4), c(3), c(4))


def test_conjugate_views():
    # mm, addmm, bmm, baddbmm, dot and vdot fall through the Conjugate key
    # (CPU's kernels read the bit): tpu must see the conjugated values.
    a, b, c = (torch.randn(3, 3, dtype=torch.complex64) for _ in range(3))
    check(lambda a, b: a.mH @ b, a, b)
    check(lambda a, b: a @ b.conj(), a, b)
    check(lambda a, b, c: torch.addmm(c.conj(), a.conj(), b), a, b, c)
    check(lambda a, b: torch.bmm(a.conj()[None], b[None]), a, b)
    check(lambda a, b, c: torch.baddbmm(c.conj()[None], a[None], b.conj()[None]), a, b, c)
    check(lambda a, b: torch.dot(a[0].conj(), b[0]), a, b)
    check(lambda a, b: torch.vdot(a[0], b[0].conj()), a, b)
    check(lambda a, b: torch._neg_view(a.real) @ b.real, a, b)


def test_out_and_inplace():
    def addmm_out(s, a, b):
        out = torch.empty(3, 5, device=s.device)
        r = torch.addmm(s, a, b, beta=0.5, out=out)
        assert r is out
        return out

    check(addmm_out, rand(5), rand(3, 4), rand(4, 5))
    check(lambda s, a, b: s.clone().addmm_(a, b, alpha=2), rand(3, 5), rand(3, 4), rand(4, 5))
    check(lambda s, a, b: s.clone().baddbmm_(a, b), rand(2, 3, 5), rand(2, 3, 4), rand(2, 4, 5))
    check(lambda s, a, b: s.clone().addbmm_(a, b), rand(3, 5), rand(2, 3, 4), rand(2, 4, 5))
    check(lambda s, a, b: s.clone().addmv_(a, b), rand(3), rand(3, 4), rand(4))
    check(lambda s, a, b: s.clone().addr_(a, b), rand(3, 4), rand(3), rand(4))
    check(lambda a, b: torch.bmm(a, b, out=torch.empty(0, device=a.device)),
          rand(2, 3, 4), rand(2, 4, 5))
    check(lambda a, b: torch.mv(a, b, out=torch.empty(3, device=a.device)), rand(3, 4), rand(4))
    check(lambda a, b: torch.dot(a, b, out=torch.empty((), device=a.device)), rand(4), rand(4))


@pytest.mark.parametrize("dtype", FLOATS, ids=str)
def test_composites(dtype):
    """matmul, linear and einsum decompose into the ops above."""
    tol = TOL[dtype]
    check(torch.matmul, rand(2, 3, 4, dtype=dtype), rand(4, 5, dtype=dtype), **tol)
    check(torch.matmul, rand(2, 1, 3, 4, dtype=dtype), rand(3, 4, 5, dtype=dtype), **tol)
    check(torch.matmul, rand(4, dtype=dtype), rand(2, 4, 5, dtype=dtype), **tol)
    check(torch.matmul, rand(3, 4, dtype=dtype), rand(4, dtype=dtype), **tol)
    check(torch.matmul, rand(4, dtype=dtype), rand(4, dtype=dtype), **tol)
    check(F.linear, rand(2, 3, 4, dtype=dtype), rand(5, 4, dtype=dtype), rand(5, dtype=dtype),
          **tol)
    check(F.linear, rand(3, 4, dtype=dtype), rand(5, 4, dtype=dtype), **tol)
    check(lambda a, b: torch.einsum("bij,bkj->bik", a, b), rand(2, 3, 4, dtype=dtype),
          rand(2, 5, 4, dtype=dtype), **tol)
    check(lambda a, b: torch.einsum("i,j->ij", a, b), rand(3, dtype=dtype),
          rand(4, dtype=dtype), **tol)


@pytest.mark.parametrize("dtype", FLOATS, ids=str)
def test_backward(dtype):
    tol = TOL[dtype]
    r = lambda *s: rand(*s, dtype=dtype, grad=True)  # noqa: E731
    check_grad(torch.mm, r(3, 4), r(4, 5), **tol)
    check_grad(torch.bmm, r(2, 3, 4), r(2, 4, 5), **tol)
    check_grad(lambda s, a, b: torch.addmm(s, a, b, beta=0.5, alpha=2), r(5), r(3, 4), r(4, 5),
               **tol)
    check_grad(lambda s, a, b: torch.baddbmm(s, a, b, beta=0.5), r(3, 5), r(2, 3, 4),
               r(2, 4, 5), **tol)
    check_grad(torch.matmul, r(2, 3, 4), r(4, 5), **tol)
    check_grad(F.linear, r(2, 3, 4), r(5, 4), r(5), **tol)
    check_grad(torch.mv, r(3, 4), r(4), **tol)
    check_grad(torch.dot, r(6), r(6), **tol)


def test_backward_more():
    r = lambda *s: rand(*s, grad=True)  # noqa: E731
    check_grad(lambda s, a, b: torch.addbmm(s, a, b, alpha=2), r(3, 5), r(2, 3, 4), r(2, 4, 5))
    check_grad(lambda s, a, b: torch.addmv(s, a, b, beta=2), r(3), r(3, 4), r(4))
    check_grad(lambda s, a, b: torch.addr(s, a, b, alpha=2), r(3, 4), r(3), r(4))
    check_grad(lambda a, b: torch.einsum("bij,bkj->bik", a, b), r(2, 3, 4), r(2, 5, 4))


def test_errors():
    f = rand
    d = torch.float64
    check_error(torch.mm, f(2, 3), f(4, 2))
    check_error(torch.mm, f(2, 3), f(3, 2, dtype=d))
    check_error(torch.mm, f(3), f(3, 2))
    check_error(torch.mm, torch.ones(2, 2, dtype=torch.bool), torch.ones(2, 2, dtype=torch.bool))
    check_error(torch.bmm, f(2, 3), f(2, 3, 4))
    check_error(torch.bmm, f(2, 2, 3), f(3, 3, 4))
    check_error(torch.bmm, f(2, 2, 3), f(2, 4, 4))
    check_error(torch.bmm, f(2, 2, 3), f(2, 3, 4, dtype=d))
    check_error(torch.addmm, f(3), f(2, 4), f(5, 3))
    check_error(torch.addmm, f(4), f(2, 4), f(4, 3))
    check_error(torch.addmm, f(1, 2, 3), f(2, 4), f(4, 3))
    check_error(torch.addmm, f(3, dtype=d), f(2, 4), f(4, 3))
    check_error(torch.addmm, f(3), f(2, 4, dtype=d), f(4, 3))
    check_error(torch.addmm, f(3), f(4), f(4, 3))
    check_error(torch.baddbmm, f(3), f(2, 2, 4), f(2, 5, 3))
    check_error(torch.baddbmm, f(3, 1, 1), f(2, 2, 4), f(2, 4, 3))
    check_error(torch.baddbmm, f(3, dtype=d), f(2, 2, 4), f(2, 4, 3))
    check_error(torch.addbmm, f(3), f(2, 2, 4), f(2, 5, 3))
    check_error(torch.addbmm, f(3), f(2, 2, 4), f(3, 4, 3))
    check_error(torch.addbmm, f(3), f(2, 2, 4), f(4, 3))
    check_error(torch.addbmm, f(3), f(2, 2, 2, 4), f(2, 4, 3))
    check_error(torch.mv, f(3, 4), f(5))
    check_error(torch.mv, f(4), f(4))
    check_error(torch.mv, f(3, 4), f(4, dtype=d))
    check_error(torch.addmv, f(2), f(3, 4), f(4))
    check_error(torch.addmv, f(3, 1), f(3, 4), f(4))
    check_error(torch.addmv, f(3, dtype=d), f(3, 4), f(4))
    check_error(torch.dot, f(3), f(4))
    check_error(torch.dot, f(3, 1), f(3))
    check_error(torch.dot, f(3), f(3, dtype=d))
    check_error(torch.dot, torch.ones(3, dtype=torch.bool), torch.ones(3, dtype=torch.bool))
    check_error(torch.vdot, f(3), f(4))
    check_error(torch.addr, f(3, 5), f(3), f(4))
    check_error(torch.addr, f(3, 4), f(3, 1), f(4))
    i = lambda *s: torch.ones(s, dtype=torch.int64)  # noqa: E731
    check_error(lambda a, b, c: torch.addr(a, b, c, beta=2.5), i(3, 4), i(3), i(4))
    check_error(lambda a, b, c: torch.addr(a, b, c, alpha=True), f(3, 4), f(3), f(4))


def test_error_messages_match_cpu():
    tpu_err, cpu_err = check_error(torch.addmm, rand(4), rand(2, 4), rand(4, 3))
    assert str(tpu_err) == str(cpu_err)
    tpu_err, cpu_err = check_error(torch.baddbmm, rand(3, dtype=torch.float64),
                                   rand(2, 2, 4), rand(2, 4, 3))
    assert str(tpu_err).startswith(str(cpu_err).split("\n")[0])


def test_float32_matmul_precision_reaches_the_program():
    # torch.set_float32_matmul_precision picks the precision_config of
    # float32 products (HIGHEST by default: a GPU would otherwise use TF32
    # and a TPU bfloat16 passes): a program of its own per setting. The CPU
    # plugin computes float32 at each, so the results agree; float64
    # products do not depend on the setting.
    x, w = torch.randn(7, 5), torch.randn(5, 3)
    tx, tw = x.to("tpu"), w.to("tpu")
    misses = lambda: torchtpu.metrics()["cache_misses"]  # noqa: E731
    before = torch.get_float32_matmul_precision()
    try:
        torch.set_float32_matmul_precision("highest")
        expected = (tx @ tw).cpu()
        (tx.double() @ tw.double()).cpu()
        torch.testing.assert_close(expected, x @ w)
        for setting in ("high", "medium"):
            torch.set_float32_matmul_precision(setting)
            n = misses()
            assert torch.equal((tx @ tw).cpu(), expected)
            assert misses() > n, setting
            n = misses()
            (tx.double() @ tw.double()).cpu()
            assert misses() == n, setting
        torch.set_float32_matmul_precision("highest")
        n = misses()
        assert torch.equal((tx @ tw).cpu(), expected)
        assert misses() == n
    finally:
        torch.set_float32_matmul_precision(before)
