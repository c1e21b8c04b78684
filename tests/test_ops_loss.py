"""Loss functions against CPU PyTorch: the ATen losses and their backward ops,
and the composite losses (cross_entropy, l1, kl_div) end to end."""
import math

import pytest
import torch
import torch.nn.functional as F

from conftest import check, check_error, check_grad

FLOATS = [torch.float32, torch.bfloat16, torch.float16]
REDUCTIONS = ["none", "mean", "sum"]
A = torch.ops.aten
nan, inf = math.nan, math.inf


@pytest.fixture(autouse=True)
def seed():
    torch.manual_seed(0)


def tol(dtype):
    # Half-precision losses: CPU rounds some intermediates that we keep in
    # float (one rounding at the end), so allow a couple of ulps.
    return {torch.bfloat16: dict(atol=2e-2, rtol=2e-2),
            torch.float16: dict(atol=2e-3, rtol=2e-3)}.get(dtype, {})


def logits(*shape, dtype=torch.float32):
    return torch.randn(*shape).to(dtype).requires_grad_()


#===--- nll_loss ---===#

@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("dtype", FLOATS, ids=str)
def test_nll_loss(dtype, reduction):
    x = torch.randn(6, 5).log_softmax(1).to(dtype).requires_grad_()
    t = torch.tensor([0, 4, -100, 2, 2, 1])
    w = torch.rand(5).to(dtype)
    check_grad(lambda a, b: F.nll_loss(a, b, reduction=reduction), x, t, **tol(dtype))
    x.grad = None
    check_grad(lambda a, b, c: F.nll_loss(a, b, c, reduction=reduction), x, t, w, **tol(dtype))
    x.grad = None
    check_grad(lambda a, b: F.nll_loss(a, b, ignore_index=2, reduction=reduction), x, t.clamp(0),
               **tol(dtype))


def test_nll_loss_forms():
    x = torch.randn(4, 3).log_softmax(1).requires_grad_()
    check_grad(lambda a, b: F.nll_loss(a, b), x[0].detach().requires_grad_(), torch.tensor(2))
    check_grad(lambda a, b: F.nll_loss(a, b, reduction="none"),
               x[1].detach().requires_grad_(), torch.tensor(1))
    for reduction in range(3):
        for t in (torch.tensor(2), torch.tensor(-100)):
            check(lambda a, b: A.nll_loss_forward(a, b, None, reduction, -100), x[0].detach(), t)
        check(lambda a, b: A.nll_loss_forward(a, b, None, reduction, -100), torch.randn(1), torch.tensor([0]))
    check(lambda a, b: F.nll_loss(a, b), x.detach(), torch.tensor([0, 2, 1, 1], dtype=torch.uint8))
    check(lambda a, b: F.nll_loss(a, b), x.detach().double(), torch.tensor([0, 2, 1, 1]))
    # Everything ignored: the mean is 0/0.
    check(lambda a, b: A.nll_loss_forward(a, b, None, 1, -100), x.detach(), torch.full((4,), -100))
    check(lambda a, b: A.nll_loss_forward(a, b, None, 2, 1), x.detach(), torch.ones(4, dtype=torch.long))
    check(lambda a, b: A.nll_loss_forward(a, b, None, 1, -100), torch.empty(0, 3),
          torch.empty(0, dtype=torch.long))
    check(lambda a, b: A.nll_loss_forward(a, b, None, 0, -100), torch.empty(0, 3),
          torch.empty(0, dtype=torch.long))
    check(lambda a, b: A.nll_loss_forward.output(a, b, None, 1, -100, output=torch.empty(0, device=a.device),
                                                 total_weight=torch.empty((), device=a.device)),
          x.detach(), torch.tensor([0, 2, 1, 1]))
    g = torch.tensor(1.5)
    check(lambda a, b, c: A.nll_loss_backward(c, a, b, None, 1, -100, torch.tensor(3.0, device=a.device)),
          x.detach(), torch.tensor([0, 2, -100, 1]), g)
    check(lambda a, b, c: A.nll_loss_backward(c, a, b, torch.full((3,), 2.0, device=a.device), 2, 0,
                                              torch.tensor(3.0, device=a.device)),
          x.detach(), torch.tensor([0, 2, 1, 1]), g)


def test_nll_loss_errors():
    x = torch.randn(3, 4).log_softmax(1)
    # Out-of-range targets raise at the next synchronization (device assert).
    check_error(lambda a, b: F.nll_loss(a, b), x, torch.tensor([0, 4, 1]))
    check_error(lambda a, b: F.nll_loss(a, b, reduction="none"), x, torch.tensor([0, -1, 1]))
    check_error(lambda a, b: A.nll_loss_backward(torch.tensor(1.0, device=a.device), a, b, None, 1,
                                                 -100, torch.tensor(3.0, device=a.device)),
                x, torch.tensor([0, 7, 1]))
    check(lambda a: F.nll_loss(a, torch.tensor([0, 2, 1], device=a.device)), x)  # still working
    check_error(lambda a, b: F.nll_loss(a, b), x, torch.tensor([0, 1]))
    check_error(lambda a, b: F.nll_loss(a, b, torch.ones(3, device=a.device)), x, torch.tensor([0, 1, 1]))
    check_error(lambda a, b: F.nll_loss(a, b), x, torch.tensor([0, 1, 1], dtype=torch.int32))
    check_error(lambda a, b: F.nll_loss(a, b), x.long(), torch.tensor([0, 1, 1]))
    check_error(lambda a, b: A.nll_loss_forward(a, b, None, 1, -100), x[None], torch.tensor([0, 1, 1]))
    check_error(lambda a, b: A.nll_loss_forward(a, b, None, 1, -100), x, torch.tensor([[0, 1, 1]]))
    check_error(lambda a, b: A.nll_loss_forward(a, b, None, 1, -100), x, torch.tensor([0, 1]))
    check_error(lambda a, b: A.nll_loss_forward(a, b, torch.ones(4, device=a.device).double(), 1, -100),
                x, torch.tensor([0, 1, 1]))
    check_error(lambda a, b: A.nll_loss_backward(torch.ones(2, device=a.device), a, b, None, 1, -100,
                                                 torch.tensor(3.0, device=a.device)), x, torch.tensor([0, 1, 1]))
    check_error(lambda a, b: A.nll_loss_backward(torch.tensor(1.0, device=a.device), a, b, None, 0, -100,
                                                 torch.tensor(3.0, device=a.device)), x, torch.tensor([0, 1, 1]))
    check_error(lambda a, b: A.nll_loss_backward(torch.tensor(1.0, device=a.device), a, b, None, 1, -100,
                                                 torch.ones(2, device=a.device)), x, torch.tensor([0, 1, 1]))


#===--- nll_loss2d ---===#

@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_nll_loss2d(reduction):
    x = torch.randn(2, 4, 3, 5).log_softmax(1).requires_grad_()
    t = torch.randint(0, 4, (2, 3, 5))
    t[0, 1, 2] = -100
    w = torch.rand(4)
    check_grad(lambda a, b: F.nll_loss(a, b, reduction=reduction), x, t)
    x.grad = None
    check_grad(lambda a, b, c: F.nll_loss(a, b, c, reduction=reduction, ignore_index=3), x, t.clamp(0), w)


def test_nll_loss_spatial_shapes_and_errors():
    # 3-D and 5-D inputs reach nll_loss2d through views.
    x3 = torch.randn(2, 4, 6).log_softmax(1).requires_grad_()
    check_grad(lambda a, b: F.nll_loss(a, b), x3, torch.randint(0, 4, (2, 6)))
    x5 = torch.randn(2, 3, 2, 2, 2).bfloat16().requires_grad_()
    check_grad(lambda a, b: F.nll_loss(a, b, reduction="sum"), x5, torch.randint(0, 3, (2, 2, 2, 2)),
               **tol(torch.bfloat16))
    x = torch.randn(2, 3, 2, 2)
    check_error(lambda a, b: F.nll_loss(a, b), x, torch.full((2, 2, 2), 3))
    check_error(lambda a, b: A.nll_loss2d_forward(a, b, None, 1, -100), x, torch.zeros(2, 2, 3, dtype=torch.long))
    check_error(lambda a, b: A.nll_loss2d_forward(a, b, None, 1, -100), x[0], torch.zeros(2, 2, dtype=torch.long))
    check_error(lambda a, b: A.nll_loss2d_forward(a, b, None, 1, -100), x, torch.zeros(2, 2, 2, dtype=torch.uint8))
    check_error(lambda a, b: A.nll_loss2d_forward(a, b, torch.ones(2, device=a.device), 1, -100), x,
                torch.zeros(2, 2, 2, dtype=torch.long))


#===--- cross_entropy (log_softmax + nll_loss) ---===#

@pytest.mark.parametrize("dtype", FLOATS, ids=str)
def test_cross_entropy(dtype):
    x = logits(8, 5, dtype=dtype)
    t = torch.randint(0, 5, (8,))
    t[3] = -100
    w = torch.rand(5).to(dtype)
    check_grad(lambda a, b: F.cross_entropy(a, b), x, t, **tol(dtype))
    x.grad = None
    check_grad(lambda a, b, c: F.cross_entropy(a, b, c, reduction="sum"), x, t, w, **tol(dtype))
    x.grad = None
    p = torch.rand(8, 5).softmax(1).to(dtype)
    check_grad(lambda a, b: F.cross_entropy(a, b), x, p, **tol(dtype))


def test_cross_entropy_label_smoothing_and_spatial():
    x = logits(8, 5)
    t = torch.randint(0, 5, (8,))
    t[2] = -100
    w = torch.rand(5)
    check_grad(lambda a, b: F.cross_entropy(a, b, label_smoothing=0.1), x, t)
    x.grad = None
    check_grad(lambda a, b, c: F.cross_entropy(a, b, c, label_smoothing=0.2, reduction="none"),
               x, t, w)
    x.grad = None
    p = torch.rand(8, 5).softmax(1)
    check_grad(lambda a, b: F.cross_entropy(a, b, label_smoothing=0.3), x, p)
    x.grad = None
    check_grad(lambda a, b, c: F.cross_entropy(a, b, c, reduction="sum"), x, p, w)
    xs = logits(2, 4, 3, 3)
    check_grad(lambda a, b: F.cross_entropy(a, b), xs, torch.randint(0, 4, (2, 3, 3)))
    xs.grad = None
    check_grad(lambda a, b: F.cross_entropy(a, b), xs, torch.rand(2, 4, 3, 3).softmax(1))
    check_error(lambda a, b: F.cross_entropy(a, b), x.detach(), torch.tensor([5] * 8))


#===--- mse, smooth_l1, huber ---===#

@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("dtype", FLOATS, ids=str)
def test_pointwise_losses(dtype, reduction):
    x = logits(4, 6, dtype=dtype)
    y = torch.randn(4, 6).to(dtype)
    for fn in (lambda a, b: F.mse_loss(a, b, reduction=reduction),
               lambda a, b: F.smooth_l1_loss(a, b, reduction=reduction),
               lambda a, b: F.smooth_l1_loss(a, b, reduction=reduction, beta=0.5),
               lambda a, b: F.huber_loss(a, b, reduction=reduction),
               lambda a, b: F.huber_loss(a, b, reduction=reduction, delta=0.3)):
        x.grad = None
        check_grad(fn, x, y, **tol(dtype))


def test_pointwise_loss_forms():
    x = logits(3, 4)
    y = torch.randn(3, 4)
    y[0, :2] = x[0, :2].detach()  # x - y == 0
    # beta=0 is l1_loss (a composite; its backward uses sgn).
    check_grad(lambda a, b: F.smooth_l1_loss(a, b, beta=0.0), x, y)
    x.grad = None
    check_grad(lambda a, b: F.mse_loss(a, b), x, y.requires_grad_())  # target gradient too
    check(lambda a, b: A.mse_loss(a, b, 0), torch.randn(3, 1), torch.randn(4))  # broadcasts
    check(lambda a, b: A.mse_loss(a, b, 0), torch.randn(3).half(), torch.randn(3))
    check(lambda a, b: A.mse_loss(a, b, 1), torch.empty(0), torch.empty(0))
    check(lambda a, b: A.mse_loss_backward(torch.tensor(1.0, device=a.device), a, b, 1),
          torch.randn(3).half(), torch.randn(3))
    check(lambda a, b: A.smooth_l1_loss_backward(torch.tensor(2.0, device=a.device), a, b, 2, 0.0),
          torch.tensor([0.0, 1.0, -1.0]), torch.zeros(3))
    check(lambda a, b: A.huber_loss_backward(torch.ones(3, device=a.device), a, b, 0, 0.5),
          torch.tensor([0.5, -0.5, 0.1]), torch.zeros(3))
    check(lambda a, b: A.mse_loss.out(a, b, 1, out=torch.empty((), device=a.device)), x.detach(), y.detach())
    check(lambda a, b: A.smooth_l1_loss.out(a, b, 0, 1.0, out=torch.empty(3, 4, device=a.device)),
          x.detach(), y.detach())
    check(lambda a, b: A.huber_loss_backward.out(torch.ones(3, 4, device=a.device), a, b, 0, 1.0,
                                                 grad_input=torch.empty(3, 4, device=a.device)),
          x.detach(), y.detach())
    check(lambda a, b: A.mse_loss_backward.grad_input(torch.ones(3, 4, device=a.device), a, b, 0,
                                                      grad_input=torch.empty(3, 4, device=a.device)),
          x.detach(), y.detach())
    i = torch.arange(3)
    check_error(lambda a, b: F.mse_loss(a, b), i, i)
    check_error(lambda a, b: F.smooth_l1_loss(a, b), i, i)
    check_error(lambda a, b: F.huber_loss(a, b), i, i)
    check_error(lambda a, b: F.smooth_l1_loss(a, b, beta=-1.0), x.detach(), y.detach())
    check_error(lambda a, b: F.huber_loss(a, b, delta=0.0), x.detach(), y.detach())
    check_error(lambda a, b: A.mse_loss(a, b, 1), torch.randn(3), torch.randn(4))


#===--- binary cross entropy ---===#

@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("dtype", FLOATS, ids=str)
def test_binary_cross_entropy(dtype, reduction):
    x = torch.rand(4, 5).clamp(0.05, 0.95).to(dtype).requires_grad_()
    y = torch.rand(4, 5).to(dtype)
    w = torch.rand(5).to(dtype)
    check_grad(lambda a, b: F.binary_cross_entropy(a, b, reduction=reduction), x, y, **tol(dtype))
    x.grad = None
    check_grad(lambda a, b, c: F.binary_cross_entropy(a, b, c, reduction=reduction), x, y, w, **tol(dtype))


def test_binary_cross_entropy_edges_and_errors():
    # log clamped at -100; the gradient's denominator at 1e-12.
    x = torch.tensor([0.0, 1.0, 0.5, 1.0, 0.0]).requires_grad_()
    y = torch.tensor([1.0, 0.0, 0.5, 1.0, 0.0])
    check_grad(lambda a, b: F.binary_cross_entropy(a, b, reduction="none"), x, y)
    check(lambda a, b: A.binary_cross_entropy_backward(torch.tensor(1.0, device=a.device), a, b),
          x.detach(), y)
    check(lambda a, b, c: A.binary_cross_entropy(a, b, c, 0), torch.rand(2, 3), torch.rand(2, 3), torch.rand(3))
    check(lambda a, b: A.binary_cross_entropy.out(a, b, None, 0, out=torch.empty(3, device=a.device)),
          torch.rand(3), torch.rand(3))
    check_error(lambda a, b: F.binary_cross_entropy(a, b), torch.tensor([1.5, 0.5]), torch.rand(2))
    check_error(lambda a, b: F.binary_cross_entropy(a, b), torch.tensor([nan, 0.5]), torch.rand(2))
    check_error(lambda a, b: F.binary_cross_entropy(a, b), torch.rand(2), torch.tensor([0.5, -0.5]))
    check(lambda a, b: F.binary_cross_entropy(a, b), torch.rand(2), torch.rand(2))  # still working
    check_error(lambda a, b: F.binary_cross_entropy(a, b), torch.rand(3), torch.rand(3, 1))
    check_error(lambda a, b: A.binary_cross_entropy(a, b), torch.rand(3), torch.rand(3).double())
    check_error(lambda a, b: A.binary_cross_entropy(a, b), torch.ones(3).long(), torch.ones(3).long())


@pytest.mark.parametrize("dtype", FLOATS, ids=str)
def test_binary_cross_entropy_with_logits(dtype):
    x = (torch.randn(4, 5) * 4).to(dtype).requires_grad_()
    y = torch.rand(4, 5).to(dtype)
    w, pw = torch.rand(5).to(dtype), torch.rand(5).to(dtype) * 3
    for reduction in REDUCTIONS:
        x.grad = None
        check_grad(lambda a, b: F.binary_cross_entropy_with_logits(a, b, reduction=reduction), x, y,
                   **tol(dtype))
    x.grad = None
    check_grad(lambda a, b, c, d: F.binary_cross_entropy_with_logits(a, b, c, pos_weight=d), x, y, w, pw,
               **tol(dtype))


def test_binary_cross_entropy_with_logits_forms():
    x = torch.tensor([-100.0, -20.0, 0.0, 20.0, 100.0]).requires_grad_()
    y = torch.tensor([1.0, 0.0, 0.5, 1.0, 0.0]).requires_grad_()
    check_grad(lambda a, b: F.binary_cross_entropy_with_logits(a, b, reduction="none"), x, y)
    # CPU rounds log_sigmoid(x) to x's dtype; we keep it in float.
    check(lambda a, b: A.binary_cross_entropy_with_logits(a, b, reduction=0), torch.randn(3).half(),
          torch.rand(3), atol=1e-3, rtol=1e-3)
    check(lambda a, b: A.binary_cross_entropy_with_logits.out(a, b, out=torch.empty((), device=a.device)),
          torch.randn(3), torch.rand(3))
    check_error(lambda a, b: A.binary_cross_entropy_with_logits(a, b), torch.ones(3).long(),
                torch.ones(3).long())
    check_error(lambda a, b: F.binary_cross_entropy_with_logits(a, b), torch.randn(3), torch.rand(4))


#===--- l1_loss, kl_div (composite) ---===#

def test_l1_and_kl_div():
    x = logits(4, 5)
    y = torch.randn(4, 5)
    for reduction in REDUCTIONS:
        x.grad = None
        check_grad(lambda a, b: F.l1_loss(a, b, reduction=reduction), x, y)
    lp = torch.rand(4, 5).log()
    for reduction in ("batchmean", "sum", "mean"):
        x.grad = None
        check_grad(lambda a, b: F.kl_div(a, b, reduction=reduction, log_target=True), x, lp)
        x.grad = None
        check_grad(lambda a, b: F.kl_div(a, b, reduction=reduction), x, lp.exp())
