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


#===--- embedding_bag ---===#

EB_IDX = torch.tensor([1, 2, 4, 5, 4, 3, 2, 0])
EB_OFF = torch.tensor([0, 2, 2, 5])  # an empty bag


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16], ids=str)
@pytest.mark.parametrize("mode", [0, 1, 2])
@pytest.mark.parametrize("pad", [-1, 2])
@pytest.mark.parametrize("last", [False, True])
def test_embedding_bag_aten(last, pad, mode, dtype):
    # all four results, CPU's shapes (offset2bag empty on the fast sum path)
    w = torch.randn(6, 3).to(dtype)
    off = torch.tensor([0, 2, 2, 5, 8]) if last else EB_OFF
    tol = dict(atol=1e-2, rtol=1e-2) if dtype == torch.bfloat16 else {}
    for fn in (A._embedding_bag, A._embedding_bag_forward_only):
        check(lambda w, i, o: fn(w, i, o, False, mode, False, None, last, pad), w, EB_IDX,
              off.int(), **tol)


@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
@pytest.mark.parametrize("pad", [None, 2])
def test_embedding_bag_grad(pad, mode):
    w = torch.randn(6, 3, requires_grad=True)
    grads(lambda w, i, o: F.embedding_bag(i, w, o, mode=mode, padding_idx=pad), w, EB_IDX,
          EB_OFF, atol=1e-5, rtol=1e-5)
    # 2-D input (fixed-size bags)
    grads(lambda w, i: F.embedding_bag(i, w, mode=mode, padding_idx=pad), w, EB_IDX.view(2, 4),
          atol=1e-5, rtol=1e-5)


def test_embedding_bag_scale_grad_by_freq():
    # each row's gradient divided by how often its index occurs (CPU's
    # kernel scales by a mis-indexed count here, so compare with embedding's)
    w = torch.randn(6, 3, requires_grad=True)
    i = EB_IDX.view(2, 4)
    g = torch.randn(2, 3)
    with NoFallback():
        wt = to_tpu(w)
        F.embedding_bag(i.to(TPU), wt, mode="sum", scale_grad_by_freq=True).backward(g.to(TPU))
    F.embedding(i, w, scale_grad_by_freq=True).sum(1).backward(g)
    torch.testing.assert_close(wt.grad.cpu(), w.grad)


def test_embedding_bag_per_sample_weights_and_errors():
    w = torch.randn(6, 3, requires_grad=True)
    psw = torch.rand(8, requires_grad=True)
    grads(lambda w, i, o, p: F.embedding_bag(i, w, o, mode="sum", per_sample_weights=p), w,
          EB_IDX, EB_OFF, psw, atol=1e-5, rtol=1e-5)
    grads(lambda w, i, o, p: F.embedding_bag(i, w, o, mode="sum", per_sample_weights=p,
                                             padding_idx=4), w, EB_IDX, EB_OFF, psw,
          atol=1e-5, rtol=1e-5)
    check_error(lambda w, i, o: A._embedding_bag(w, i, o, False, 1, False, torch.ones(8)),
                w.detach(), EB_IDX, EB_OFF)
    check_error(lambda w, i, o: F.embedding_bag(i, w, o), w.detach(), EB_IDX + 3, EB_OFF)
    check_error(lambda w, i, o: F.embedding_bag(i, w, o), w.detach(), EB_IDX, EB_OFF + 1)


#===--- median, nanmedian, mode ---===#

def test_median():
    x = torch.randn(4, 5, 6)
    xn = x.clone()
    xn[0, 1, 2] = math.nan
    xn[1, 3, :2] = math.nan
    xi = torch.randperm(120).view(4, 5, 6)
    for t in (x, xn, xi, x.double(), x.bfloat16()):
        check(torch.median, t)
        check(torch.nanmedian, t)
        for d in (0, 1, -1):
            check(lambda t: torch.median(t, d), t)
            check(lambda t: torch.nanmedian(t, d, keepdim=True), t)
    check(lambda t: torch.median(t, 0), torch.tensor(3.0))
    check(torch.median, torch.zeros(0))
    values, indices = torch.empty(0), torch.empty(0, dtype=torch.long)
    check(lambda t, v, i: torch.median(t, 1, out=(v, i)), x, values, indices)
    check_error(lambda t: torch.median(t, 1), torch.zeros(2, 0))
    check_error(torch.median, torch.tensor([True, False]))


def test_mode():
    x = torch.randint(0, 4, (3, 5, 7))  # small rows: CPU's sort is stable
    for t in (x, x.float(), x.bfloat16(), x.bool(), torch.randn(4, 6)):
        for d in (0, 1, -1):
            check(lambda t: torch.mode(t, d), t)
            check(lambda t: torch.mode(t, d, keepdim=True), t)
    check(torch.mode, torch.tensor(5.0))
    check_error(lambda t: torch.mode(t, 1), torch.zeros(2, 0))


def test_median_and_mode_out_dtypes_are_checked():
    # Wrong out= dtypes were written (float indices) instead of refused.
    x = torch.randn(3, 4)
    for fn in (lambda t, v, i: torch.median(t, 1, out=(v, i)),
               lambda t, v, i: torch.nanmedian(t, 1, out=(v, i)),
               lambda t, v, i: torch.mode(t, 1, out=(v, i))):
        for vd, idx in ((torch.long, torch.long), (torch.float, torch.float),
                        (torch.float, torch.int32), (torch.double, torch.long)):
            err, cpu_err = check_error(fn, x, torch.empty(0, dtype=vd), torch.empty(0, dtype=idx))
            assert str(err) == str(cpu_err)


#===--- max_unpool ---===#

@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float64], ids=str)
def test_max_unpool(dtype):
    x = torch.randn(2, 3, 6, 7).to(dtype)
    o, i = F.max_pool2d(x, 3, 2, return_indices=True)  # overlapping windows
    o.requires_grad_()
    grads(lambda o, i: F.max_unpool2d(o, i, 3, 2, output_size=(6, 7)), o, i)
    o, i = F.max_pool3d(torch.randn(2, 2, 4, 6, 4).to(dtype), 2, 2, return_indices=True)
    grads(lambda o, i: F.max_unpool3d(o, i, 2, 2), o.requires_grad_(), i)
    o, i = F.max_pool1d(torch.randn(3, 8).to(dtype), 2, return_indices=True)  # unbatched
    check(lambda o, i: F.max_unpool1d(o, i, 2), o, i)


def test_max_unpool_repeated_index_and_errors():
    # repeated indices: the last writer wins, as CPU's sequential loop
    x = torch.randn(1, 2, 2, 2)
    i = torch.tensor([[[[0, 5], [9, 15]], [[1, 1], [3, 3]]]])
    check(lambda x, i: A.max_unpool2d(x, i, [4, 4]), x, i)
    check_error(lambda x, i: A.max_unpool2d(x, i, [4, 4]), x, i + 10)
    check_error(lambda x, i: A.max_unpool2d(x, i, [4, 4]), x.long(), i)
    check_error(lambda x, i: A.max_unpool2d(x, i, [4, 4]), x, i.int())


#===--- margin losses ---===#

@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
def test_multi_margin_loss(reduction):
    for shape, y in [((3, 5), torch.tensor([0, 4, 2])), ((5,), torch.tensor(3))]:
        for p, w in [(1, None), (2, torch.rand(5))]:
            x = torch.randn(*shape, requires_grad=True)
            grads(lambda x, y, w: F.multi_margin_loss(x, y, p=p, margin=0.7, weight=w,
                                                      reduction=reduction), x, y, w,
                  atol=1e-5, rtol=1e-5)
            xd = x.detach().double().requires_grad_()
            grads(lambda x, y: F.multi_margin_loss(x, y, p=p, reduction=reduction), xd, y)


@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
def test_multilabel_margin_loss(reduction):
    y = torch.tensor([[0, 4, -1, 2, 1], [3, 3, 1, -1, -1], [-1, 0, 1, 2, 3]])
    for x, t in ((torch.randn(3, 5), y), (torch.randn(5), y[0])):
        grads(lambda x, t: F.multilabel_margin_loss(x, t, reduction=reduction),
              x.requires_grad_(), t, atol=1e-5, rtol=1e-5)
    check(lambda x, t: A.multilabel_margin_loss_forward(x, t, 0), torch.randn(3, 5), y)


def test_margin_losses_empty_batch():
    # A gather from the empty [0, C] input was refused by XLA (slice size 1
    # of an empty dimension). CPU's value reads uninitialized memory; as
    # nll_loss, the sum is 0 and the mean 0/0.
    x, y, t = torch.randn(0, 5), torch.zeros(0, dtype=torch.long), torch.zeros(0, 5).long()
    for red, want in (("sum", 0.0), ("mean", math.nan)):
        for f, target in ((F.multi_margin_loss, y), (F.multilabel_margin_loss, t)):
            with NoFallback():
                r = f(to_tpu(x), to_tpu(target), reduction=red).cpu()
            assert r.shape == () and (r.item() == want or math.isnan(want) and r.isnan())
    check(lambda x, y: F.multi_margin_loss(x, y, reduction="none"), x, y)
    check(lambda x, t: F.multilabel_margin_loss(x, t, reduction="none"), x, t)


def test_margin_loss_errors():
    x = torch.randn(3, 4)
    check_error(lambda x, y: F.multi_margin_loss(x, y), x, torch.tensor([0, 4, 1]))
    check_error(lambda x, y: F.multi_margin_loss(x, y, p=3), x, torch.tensor([0, 3, 1]))
    check_error(lambda x, y: F.multi_margin_loss(x, y), x, torch.tensor([0, 3, 1]).int())
    check_error(lambda x, y: F.multilabel_margin_loss(x, y), x,
                torch.tensor([[0, 1, -1, 9]] * 3))


def test_embedding_renorm():
    # max_norm renormalizes the used rows in place (embedding_renorm_)
    for p in (2.0, 1.0, 3.0, math.inf):
        w = torch.randn(6, 4) * 2
        check(lambda w, i: A.embedding_renorm_(w, i, 1.5, p), w, torch.tensor([1, 2, 4, 4, 0]),
              atol=1e-6, rtol=1e-6)
    check(lambda i, w, o: F.embedding_bag(i, w, o, max_norm=1.0), EB_IDX, torch.randn(6, 3),
          EB_OFF)
    check_error(lambda w, i: A.embedding_renorm_(w, i, 1.0, 2.0), torch.randn(6, 4),
                torch.tensor([7]))
