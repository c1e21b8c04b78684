"""Distances (cdist, pdist), grid sampling, embedding bags and medians
against CPU: forward for float32 / float64 (bfloat16 against a float32 CPU
reference where CPU refuses it), backward (compared .grad), errors."""
import math

import pytest
import torch
import torch.nn.functional as F

from conftest import TPU, NoFallback, assert_same, check, check_error, to_tpu

A = torch.ops.aten
TOL = {
    torch.float32: dict(atol=1e-4, rtol=1e-4),
    torch.float64: dict(atol=1e-9, rtol=1e-9),
}


def grads(fn, *inputs, atol=None, rtol=None):
    """fn's first output and the gradients of the inputs that require grad,
    for one random output gradient, on CPU and on tpu (no CPU fallback)."""
    out = fn(*inputs)
    g = torch.randn_like(out)
    leaves = [x for x in inputs if isinstance(x, torch.Tensor) and x.requires_grad]
    expected = (out,) + torch.autograd.grad(out, leaves, g)
    tpu_inputs = [to_tpu(x) for x in inputs]
    tpu_leaves = [x for x in tpu_inputs if isinstance(x, torch.Tensor) and x.requires_grad]
    with NoFallback():
        out_t = fn(*tpu_inputs)
        actual = (out_t,) + torch.autograd.grad(out_t, tpu_leaves, g.to(TPU))
    assert_same(expected, actual, atol=atol, rtol=rtol)


#===--- cdist, pdist ---===#

PS = [0.0, 1.0, 2.0, 3.0, 0.5, 1.5, math.inf]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=str)
@pytest.mark.parametrize("p", PS, ids=str)
def test_cdist(p, dtype):
    x1 = torch.randn(2, 4, 3, dtype=dtype, requires_grad=True)
    x2 = torch.randn(1, 5, 3, dtype=dtype, requires_grad=True)  # batch broadcast
    grads(lambda a, b: torch.cdist(a, b, p), x1, x2, **TOL[dtype])
    x3 = torch.randn(4, 3, dtype=dtype)
    with NoFallback():
        check(lambda a, b: A._cdist_forward(a, b, p, None), x3, x3.clone(), **TOL[dtype])


def test_cdist_matmul_mode():
    # p = 2 through the matmul identity (more than 25 rows, or mode 1)
    x1, x2 = torch.randn(30, 4, requires_grad=True), torch.randn(7, 4, requires_grad=True)
    grads(lambda a, b: torch.cdist(a, b), x1, x2, atol=1e-4, rtol=1e-4)
    for mode in ("use_mm_for_euclid_dist", "donot_use_mm_for_euclid_dist"):
        check(lambda a, b: torch.cdist(a, b, compute_mode=mode), x1.detach(), x2.detach(),
              atol=1e-4, rtol=1e-4)
    check(lambda a, b: A._cdist_forward(a, b, 2.0, 1), x1.detach(), x2.detach(),
          atol=1e-4, rtol=1e-4)


def test_cdist_bfloat16():
    x1, x2 = torch.randn(3, 4, 5), torch.randn(3, 6, 5)
    expected = torch.cdist(x1, x2, 1.5)
    with NoFallback():
        actual = torch.cdist(x1.bfloat16().to(TPU), x2.bfloat16().to(TPU), 1.5)
    assert actual.dtype == torch.bfloat16
    torch.testing.assert_close(actual.cpu().float(), expected, atol=0.1, rtol=0.03)


def test_cdist_empty_and_errors():
    check(lambda a, b: torch.cdist(a, b), torch.randn(0, 3), torch.randn(4, 3))
    check(lambda a, b: A._cdist_forward(a, b, 2.0, None), torch.randn(2, 0), torch.randn(4, 0))
    check_error(lambda a, b: torch.cdist(a, b), torch.randn(2, 3), torch.randn(4, 2))
    check_error(lambda a, b: torch.cdist(a, b, -1.0), torch.randn(2, 3), torch.randn(4, 3))
    check_error(lambda a, b: A._cdist_forward(a, b, 2.0, 3), torch.randn(2, 3), torch.randn(4, 3))
    check_error(lambda a, b: A._cdist_forward(a, b, 2.0, None), torch.randn(3), torch.randn(4, 3))


@pytest.mark.parametrize("p", PS, ids=str)
def test_pdist(p):
    x = torch.randn(5, 3, dtype=torch.float64, requires_grad=True)
    grads(lambda a: F.pdist(a, p), x, **TOL[torch.float64])
    xf = torch.randn(6, 4, requires_grad=True)
    grads(lambda a: F.pdist(a, p), xf, **TOL[torch.float32])


def test_pdist_edge_cases():
    check(lambda a: F.pdist(a), torch.randn(1, 3))
    check(lambda a: F.pdist(a), torch.randn(4, 0))
    x = torch.randn(4, 3)
    x[2] = x[1]  # a zero distance: its gradient is zero, not NaN
    x.requires_grad_()
    grads(lambda a: F.pdist(a), x, **TOL[torch.float32])
    check_error(lambda a: F.pdist(a), torch.randn(2, 3, 4))
    check(lambda a, b: F.pairwise_distance(a, b, 3.0), torch.randn(4, 5), torch.randn(4, 5))


#===--- grid_sample ---===#

GS_DTYPES = [torch.float32, torch.float64, torch.bfloat16]
GS_TOL = {
    torch.float32: dict(atol=1e-4, rtol=1e-4),
    torch.float64: dict(atol=1e-9, rtol=1e-9),
    torch.bfloat16: dict(atol=6e-2, rtol=3e-2),
}


def grid(*shape, dtype):
    # a little past [-1, 1] so padding modes matter
    return (torch.rand(*shape) * 2.4 - 1.2).to(dtype)


@pytest.mark.parametrize("dtype", GS_DTYPES, ids=str)
@pytest.mark.parametrize("mode", ["bilinear", "nearest", "bicubic"])
@pytest.mark.parametrize("padding", ["zeros", "border", "reflection"])
@pytest.mark.parametrize("align", [False, True])
def test_grid_sample_2d(align, padding, mode, dtype):
    x = torch.randn(2, 3, 4, 5).to(dtype).requires_grad_()
    g = grid(2, 3, 6, 2, dtype=dtype).requires_grad_()
    fn = lambda x, g: F.grid_sample(x, g, mode=mode, padding_mode=padding, align_corners=align)
    tol = GS_TOL[dtype]
    if dtype == torch.bfloat16:
        # CPU rounds intermediate products in bfloat16: compare with a float
        # reference at bfloat16's resolution, forward only
        expected = fn(x.detach().float(), g.detach().float())
        with NoFallback():
            actual = fn(to_tpu(x.detach()), to_tpu(g.detach()))
        torch.testing.assert_close(actual.cpu().float(), expected, atol=0.15, rtol=0.05)
        return
    grads(fn, x, g, **tol)


@pytest.mark.parametrize("mode", ["bilinear", "nearest"])
@pytest.mark.parametrize("padding", ["zeros", "border", "reflection"])
def test_grid_sample_3d(padding, mode):
    x = torch.randn(1, 2, 3, 4, 3, dtype=torch.float64, requires_grad=True)
    g = grid(1, 2, 3, 2, 3, dtype=torch.float64).requires_grad_()
    for align in (False, True):
        grads(lambda x, g: F.grid_sample(x, g, mode=mode, padding_mode=padding,
                                         align_corners=align), x, g, **GS_TOL[torch.float64])


def test_grid_sample_only_grid_grad_and_errors():
    x, g = torch.randn(1, 2, 3, 3), grid(1, 2, 2, 2, dtype=torch.float32).requires_grad_()
    grads(lambda x, g: F.grid_sample(x, g, align_corners=False), x, g, atol=1e-4, rtol=1e-4)
    check_error(lambda x, g: F.grid_sample(x, g, align_corners=False), torch.randn(1, 2, 3, 3),
                torch.randn(2, 2, 2, 2))
    check_error(lambda x, g: F.grid_sample(x, g, align_corners=False), torch.randn(1, 2, 3, 3),
                torch.randn(1, 2, 2, 3))
    check_error(lambda x, g: F.grid_sample(x, g, mode="bicubic", align_corners=False),
                torch.randn(1, 2, 3, 3, 3), torch.randn(1, 2, 2, 2, 3))
