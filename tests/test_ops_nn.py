"""Convolution, pooling and normalization layers against CPU: forward in
float32/bfloat16/float16 (and integers where CPU has them), backward of
input, weight and bias, output_mask, in-place running statistics, errors."""
import pytest
import torch
import torch.nn.functional as F

from conftest import TPU, NoFallback, assert_same, check, check_error, check_grad

A = torch.ops.aten
FLOATS = [torch.float32, torch.bfloat16, torch.float16]
# Sums of a few dozen products of unit-scale values: allow about an ulp of
# the result in half precision (CPU may round partial sums).
TOL = {
    torch.float32: dict(atol=2e-5, rtol=2e-5),
    torch.bfloat16: dict(atol=6e-2, rtol=2e-2),
    torch.float16: dict(atol=1e-2, rtol=3e-3),
}


def rand(*shape, dtype=torch.float32, grad=False):
    return torch.randn(shape).to(dtype).requires_grad_(grad)


#===--- convolution ---===#

CONVS = [  # (function, input shape, weight shape, bias, kwargs)
    (F.conv2d, (2, 4, 7, 7), (6, 4, 3, 3), True, dict(padding=1)),
    (F.conv2d, (2, 4, 9, 8), (6, 2, 3, 2), False,
     dict(stride=(2, 1), padding=(2, 1), dilation=2, groups=2)),
    (F.conv2d, (2, 4, 8, 8), (8, 1, 3, 3), True, dict(stride=3, groups=4)),  # depthwise
    (F.conv1d, (2, 4, 9), (6, 4, 3), True, dict(stride=2, padding=1)),
    (F.conv_transpose2d, (2, 4, 5, 5), (4, 3, 3, 3), True,
     dict(stride=2, padding=1, output_padding=1)),
    (F.conv_transpose2d, (2, 4, 5, 6), (4, 3, 3, 2), True,
     dict(stride=(2, 3), padding=(2, 0), dilation=2, groups=2)),
    (F.conv_transpose1d, (2, 4, 5), (4, 3, 3), False, dict(stride=3)),
    # output_padding >= stride (allowed below the dilation): the input
    # gradient drops the rows only the padding made
    (F.conv_transpose2d, (2, 2, 4, 4), (2, 2, 4, 5), True,
     dict(stride=(3, 2), padding=(1, 2), output_padding=(2, 3), groups=2, dilation=(4, 4))),
]


@pytest.mark.parametrize("dtype", FLOATS, ids=str)
@pytest.mark.parametrize("case", range(len(CONVS)))
def test_conv(case, dtype):
    fn, xs, ws, bias, kw = CONVS[case]
    tol = TOL[dtype]
    x, w = rand(*xs, dtype=dtype, grad=True), rand(*ws, dtype=dtype, grad=True)
    b = rand(ws[1] * kw.get("groups", 1) if fn.__name__.startswith("conv_t") else ws[0],
             dtype=dtype, grad=True) if bias else None
    check(lambda x, w, b: fn(x, w, b, **kw), x, w, b, **tol)
    check_grad(lambda x, w, b: fn(x, w, b, **kw), x, w, b, **tol)


def test_conv3d():
    x, w, b = rand(1, 2, 5, 6, 5, grad=True), rand(3, 2, 2, 3, 2, grad=True), rand(3, grad=True)
    tol = dict(atol=1e-4, rtol=1e-4)  # the bias gradient sums 60 values
    check_grad(lambda x, w, b: F.conv3d(x, w, b, stride=2, padding=1), x, w, b, **tol)
    check_grad(lambda x, w, b: F.conv_transpose3d(x, w.transpose(0, 1), b, stride=2), x, w, b,
               **tol)


def test_conv_integer_and_double():
    x = torch.randint(-5, 6, (2, 3, 6, 6))
    w = torch.randint(-5, 6, (4, 3, 3, 3))
    check(lambda x, w: F.conv2d(x, w, stride=2, padding=1), x, w)
    check(lambda x, w: F.conv2d(x, w), x.double(), w.double())


def test_conv_module_and_mask():
    torch.manual_seed(0)
    m = torch.nn.Conv2d(3, 5, 3, padding=1)
    mt = torch.nn.Conv2d(3, 5, 3, padding=1).to(TPU)
    mt.load_state_dict(m.state_dict())
    x = torch.randn(2, 3, 6, 6)
    with NoFallback():
        yt = mt(x.to(TPU))
        yt.sum().backward()
    y = m(x)
    y.sum().backward()
    assert_same(y, yt, atol=1e-5, rtol=1e-5)
    assert_same(m.weight.grad, mt.weight.grad, atol=1e-4, rtol=1e-5)
    assert_same(m.bias.grad, mt.bias.grad, atol=1e-4, rtol=1e-5)
    # Gradients output_mask leaves out are undefined, as on CPU.
    dy, x, w = rand(2, 5, 4), rand(2, 3, 6), rand(5, 3, 3)
    for mask in ([False, True, True], [True, False, False]):
        check(lambda dy, x, w: A.convolution_backward(dy, x, w, [5], [1], [0], [1], False, [0], 1,
                                                      mask), dy, x, w, atol=1e-5, rtol=1e-5)


def test_conv_errors():
    f = rand
    check_error(F.conv2d, f(1, 1, 3, 3), f(1, 1, 2, 2, dtype=torch.float64))
    check_error(F.conv2d, f(1, 1, 3, 3), f(1, 1, 2, 2), f(1, dtype=torch.float64))
    check_error(F.conv2d, f(1, 2, 3, 3), f(1, 1, 2, 2))
    check_error(F.conv2d, f(1, 1, 3, 3), f(1, 1, 4, 4))
    check_error(F.conv2d, f(1, 4, 3, 3), f(3, 2, 2, 2), groups=2)
    check_error(F.conv2d, f(1, 1, 3, 3), f(1, 1, 2, 2), stride=0)
    check_error(F.conv2d, f(1, 1, 3, 3), f(1, 1, 2, 2), padding=-1)
    check_error(F.conv_transpose2d, f(1, 2, 3, 3), f(3, 1, 2, 2))
    tpu_err, cpu_err = check_error(F.conv_transpose2d, f(1, 2, 3, 3), f(2, 1, 2, 2), stride=2,
                                   output_padding=2)
    assert str(tpu_err) == str(cpu_err).split("\n")[0]
    check(lambda x, w: F.conv_transpose2d(x, w, stride=1, dilation=3, output_padding=2),
          f(1, 2, 3, 3), f(2, 1, 2, 2), atol=1e-5, rtol=1e-5)
    check_error(F.conv2d, f(1, 1, 3, 3), f(2, 1, 2, 2), f(3))
    b = torch.ones(1, 1, 3, 3, dtype=torch.bool)
    check_error(F.conv2d, b, b)


#===--- pooling ---===#

POOLS = [  # (function, input shape, kwargs)
    (F.max_pool2d, (2, 3, 7, 7), dict(kernel_size=3, stride=2, padding=1, return_indices=True)),
    (F.max_pool2d, (2, 3, 8, 7), dict(kernel_size=3, stride=2, padding=1, ceil_mode=True,
                                      return_indices=True)),
    (F.max_pool2d, (3, 9, 8), dict(kernel_size=(2, 3), stride=1, padding=1, dilation=2,
                                   return_indices=True)),
    (F.max_pool1d, (2, 3, 9), dict(kernel_size=3, stride=2, padding=1, return_indices=True)),
    (F.avg_pool2d, (2, 3, 7, 7), dict(kernel_size=3, stride=2, padding=1)),
    (F.avg_pool2d, (2, 3, 8, 7), dict(kernel_size=3, stride=2, padding=1, ceil_mode=True,
                                      count_include_pad=False)),
    (F.avg_pool2d, (3, 8, 7), dict(kernel_size=(3, 2), stride=(2, 3), padding=1,
                                   ceil_mode=True, divisor_override=5)),
    (F.avg_pool1d, (2, 3, 9), dict(kernel_size=3, stride=2, padding=1)),
    (F.adaptive_avg_pool2d, (2, 3, 7, 9), dict(output_size=(3, 4))),
    (F.adaptive_avg_pool1d, (2, 3, 10), dict(output_size=4)),
    (F.adaptive_max_pool2d, (2, 3, 7, 9), dict(output_size=(3, 4), return_indices=True)),
    (F.adaptive_max_pool1d, (3, 10), dict(output_size=4, return_indices=True)),
]


@pytest.mark.parametrize("dtype", FLOATS, ids=str)
@pytest.mark.parametrize("case", range(len(POOLS)))
def test_pool(case, dtype):
    fn, shape, kw = POOLS[case]
    x = rand(*shape, dtype=dtype, grad=True)
    check(lambda x: fn(x, **kw), x, **TOL[dtype])
    check_grad(lambda x: fn(x, **kw), x, **TOL[dtype])


def test_pool3d():
    x = rand(2, 2, 5, 6, 7, grad=True)
    for fn, kw in [(F.max_pool3d, dict(kernel_size=2, stride=2, padding=1, return_indices=True)),
                   (F.avg_pool3d, dict(kernel_size=(2, 3, 2), stride=2, padding=1,
                                       ceil_mode=True)),
                   (F.adaptive_avg_pool3d, dict(output_size=(2, 3, 4))),
                   (F.adaptive_max_pool3d, dict(output_size=(2, 3, 4), return_indices=True))]:
        check(lambda x: fn(x, **kw), x)
        check_grad(lambda x: fn(x, **kw), x)


def test_pool_integers():
    x = torch.randint(-50, 50, (2, 3, 7, 7))
    check(lambda x: F.max_pool2d(x, 3, 2, 1, return_indices=True), x)
    check(lambda x: F.max_pool2d(x, 3, 2, 1, return_indices=True), x.to(torch.uint8).abs())
    # Integer averages divide in integers (truncating), as CPU.
    check(lambda x: F.avg_pool2d(x, 3, 2, 1), x)
    check(lambda x: F.avg_pool2d(x, 3, 2, 1, divisor_override=7), x)
    check(lambda x: F.avg_pool3d(x, 2, 2), x.reshape(2, 3, 7, 7, 1).expand(2, 3, 7, 7, 2))


def test_max_pool_ties_nan_inf():
    # Ties pick the first element in scan order, NaN wins (the last NaN of a
    # window, as CPU), and -inf elements beat padding.
    x = torch.zeros(1, 1, 4, 4)
    check(lambda x: F.max_pool2d(x, 3, 1, 1, return_indices=True), x)
    x = torch.randn(1, 2, 4, 4)
    x[0, 0, 0, :2] = float("nan")
    x[0, 1, 2, 1:3] = float("nan")
    check(lambda x: F.max_pool2d(x, 2, return_indices=True), x)
    check(lambda x: F.adaptive_max_pool2d(x, 3, return_indices=True), x)
    x = torch.full((1, 1, 4, 4), float("-inf"))
    check(lambda x: F.max_pool2d(x, 3, 2, 1, return_indices=True), x)


def test_pool_out_and_empty():
    x = rand(2, 3, 7, 7)
    def max_out(x):
        out = torch.empty(0, device=x.device)
        idx = torch.empty(0, dtype=torch.int64, device=x.device)
        r = A.max_pool2d_with_indices.out(x, [3, 3], [2, 2], [1, 1], [1, 1], False, out=out,
                                          indices=idx)
        assert r[0] is out and r[1] is idx
        return out, idx

    check(max_out, x)
    check(lambda x: A.avg_pool2d.out(x, [2, 2], out=torch.empty(2, 3, 3, 3, device=x.device)), x)
    check(lambda x: F.max_pool2d(x, 3, 2, 1, return_indices=True), rand(0, 3, 7, 7))
    check(lambda x: F.avg_pool1d(x, 6, 3, 2), rand(0, 3, 9))
    check(lambda x: F.avg_pool3d(x, (2, 3, 1), (2, 1, 2)), rand(0, 1, 4, 5, 4))
    check(lambda x: A._adaptive_avg_pool2d(x, [0, 3]), x)
    check(lambda x: A.adaptive_max_pool2d(x, [0, 3]), x)


def test_pool_errors():
    f = rand
    check_error(lambda x: A.max_pool2d_with_indices(x, [2, 2], [2, 2], [2, 2]), f(2, 3, 5, 5))
    check_error(lambda x: A.max_pool2d_with_indices(x, [0, 2]), f(2, 3, 5, 5))
    check_error(lambda x: A.max_pool2d_with_indices(x, [2, 2, 2]), f(2, 3, 5, 5))
    check_error(lambda x: A.max_pool2d_with_indices(x, [2, 2], [1, 1, 1]), f(2, 3, 5, 5))
    check_error(lambda x: A.max_pool2d_with_indices(x, [2, 2], [1, 1], [0, 0], [0, 1]),
                f(2, 3, 5, 5))
    check_error(lambda x: A.max_pool2d_with_indices(x, [2, 2]), f(2, 0, 5, 5))
    check_error(lambda x: A.max_pool2d_with_indices(x, [2, 2]), f(1, 2, 3, 5, 5))
    check_error(lambda x: A.max_pool2d_with_indices(x, [3, 3]), f(2, 3, 1, 1))
    check_error(lambda x: A.max_pool3d_with_indices(x, [2, 2, 2]), f(3, 5, 5))
    check_error(lambda x: A.max_pool2d_with_indices(x, [2, 2]),
                torch.ones(2, 3, 5, 5, dtype=torch.bool))
    check_error(lambda x: A.avg_pool2d(x, [2, 2], [2, 2], [2, 2]), f(2, 3, 5, 5))
    check_error(lambda x: A.avg_pool2d(x, [2, 2]), f(5, 5))
    check_error(lambda x: A.avg_pool2d(x, [2, 2]), torch.ones(2, 3, 5, 5, dtype=torch.bool))
    check_error(lambda x: A.avg_pool3d(x, [2, 2, 2], divisor_override=0), f(2, 3, 5, 5, 5))
    check_error(lambda x: A._adaptive_avg_pool2d(x, [3, 3]), f(5, 5))
    check_error(lambda x: A._adaptive_avg_pool2d(x, [3]), f(2, 3, 5, 5))
    check_error(lambda x: A._adaptive_avg_pool2d(x, [3, 3]), f(2, 3, 0, 5))
    check_error(lambda x: A._adaptive_avg_pool2d(x, [3, 3]),
                torch.ones(2, 3, 5, 5, dtype=torch.int64))
    check_error(lambda x: A.adaptive_max_pool2d(x, [3, 3]), f(5, 5))
    check_error(lambda x: A.adaptive_max_pool2d(x, [3]), f(2, 3, 5, 5))
    check_error(lambda x: A.adaptive_max_pool3d(x, [3, 3, 3]), f(5, 5))


#===--- fractional max pooling ---===#

FRACTIONAL = [  # (input shape, kernel size, output size)
    ((2, 3, 9, 11), (2, 3), (4, 5)),
    ((3, 10, 7), (3, 2), (5, 6)),
    ((1, 2, 50, 37), (3, 3), (17, 12)),
    ((2, 3, 9, 11), (2, 3), (1, 1)),
    ((2, 2, 7, 8, 9), (2, 3, 2), (3, 4, 5)),
    ((2, 6, 6, 6), (2, 2, 2), (3, 3, 3)),
]


def fractional(k, out):
    fn = F.fractional_max_pool2d if len(k) == 2 else F.fractional_max_pool3d
    return lambda x, u: fn(x, k, output_size=out, _random_samples=u, return_indices=True)


@pytest.mark.parametrize("dtype", FLOATS + [torch.float64], ids=str)
@pytest.mark.parametrize("shape, k, out", FRACTIONAL)
def test_fractional_max_pool(shape, k, out, dtype):
    # The windows come from the samples, computed in the input's precision
    # as CPU computes them: the same samples pick the same windows, and
    # values and indices match exactly (NaNs included: the last one wins).
    x = rand(*shape, dtype=dtype)
    x.view(-1)[::13] = float("nan")
    n = len(k)
    batch = shape[0] if len(shape) == n + 2 else 1
    u = torch.rand(batch + 1, shape[-n - 1], n).to(dtype)  # extra samples are ignored
    check(fractional(k, out), x, u, atol=0, rtol=0)
    tol = TOL.get(dtype, {})
    check_grad(lambda x, u: fractional(k, out)(x, u)[0], rand(*shape, dtype=dtype, grad=True), u,
               **tol)


def test_fractional_max_pool_errors():
    x, u = rand(2, 3, 8, 8), torch.rand(2, 3, 2)
    pool = F.fractional_max_pool2d
    bad = [
        lambda x, u: pool(x, 5, output_size=5, _random_samples=u),  # window too large
        lambda x, u: pool(x, 2, output_size=4, _random_samples=u.double()),
        lambda x, u: pool(x, 2, output_size=4, _random_samples=u[:1]),  # fewer than the batch
        lambda x, u: pool(x, 2, output_size=4, _random_samples=u[:, :2]),
        lambda x, u: pool(x, 2, output_size=4, _random_samples=u[:, :, :1]),
        lambda x, u: pool(x, 2, output_size=4, _random_samples=u[:, :, 0]),
        lambda x, u: pool(x[0, 0], 2, output_size=4, _random_samples=u),
        lambda x, u: pool(x[:, :0], 2, output_size=4, _random_samples=u[:, :0]),
        lambda x, u: pool(x.long(), 2, output_size=4, _random_samples=u.long()),
        lambda x, u: F.fractional_max_pool3d(x[None], 3, output_size=(2, 7, 3),
                                             _random_samples=torch.cat([u[:1, :2], u[:1, :2, :1]], 2)),
    ]
    for fn in bad:
        tpu_err, cpu_err = check_error(fn, x, u)
        assert str(tpu_err) == str(cpu_err).split("\n")[0]
    # Empty outputs and empty windows, as CPU allows them.
    check(lambda x, u: pool(x, 2, output_size=(0, 4), _random_samples=u, return_indices=True), x, u)
    check(lambda x, u: pool(x, (0, 2), output_size=3, _random_samples=u, return_indices=True), x, u)


#===--- normalization ---===#

@pytest.mark.parametrize("dtype", FLOATS, ids=str)
def test_layer_group_rms_norm(dtype):
    tol = TOL[dtype]
    r = lambda *s: rand(*s, dtype=dtype, grad=True)  # noqa: E731
    cases = [
        (lambda x, w, b: F.layer_norm(x, (8,), w, b), r(2, 3, 8), r(8), r(8)),
        (lambda x: F.layer_norm(x, (3, 8), eps=1e-3), r(2, 3, 8)),
        (lambda x, w, b: F.group_norm(x, 3, w, b), r(2, 6, 5), r(6), r(6)),
        (lambda x: F.group_norm(x, 2), r(2, 6, 5, 3)),
        (lambda x, w: F.rms_norm(x, (8,), w), r(2, 3, 8), r(8)),
        (lambda x: F.rms_norm(x, (3, 8), eps=1e-3), r(2, 3, 8)),
    ]
    for fn, *inputs in cases:
        check(fn, *inputs, **tol)
        check_grad(fn, *inputs, **tol)


@pytest.mark.parametrize("dtype", FLOATS, ids=str)
def test_native_norm_statistics(dtype):
    """mean/rstd results: their shapes and dtypes (float for half inputs with
    float parameters)."""
    tol = TOL[dtype]
    x = rand(2, 3, 8, dtype=dtype)
    for w in (rand(8, dtype=dtype), rand(8)):
        check(lambda x, w: A.native_layer_norm(x, [8], w, None, 1e-5), x, w, **tol)
        check(lambda x, w: A.native_group_norm(x.reshape(2, 6, 4), w[:6], w[:6], 2, 6, 4, 3,
                                               1e-5), x, w, **tol)
    check(lambda x: A._fused_rms_norm(x, [8], None, None), x, **tol)
    check(lambda x, w: A._fused_rms_norm(x, [3, 8], w, 1e-4), x, rand(3, 8, dtype=dtype), **tol)


@pytest.mark.parametrize("dtype", FLOATS, ids=str)
def test_batch_norm(dtype):
    tol = TOL[dtype]
    r = lambda *s: rand(*s, dtype=dtype, grad=True)  # noqa: E731
    for shape in [(4, 3, 5), (4, 3, 5, 2), (6, 3)]:
        x = r(*shape)
        check_grad(lambda x, w, b: F.batch_norm(x, None, None, w, b, training=True), x, r(3), r(3),
                   **tol)
        check_grad(lambda x, rm, rv: F.batch_norm(x, rm, rv, training=False), x, rand(3),
                   torch.rand(3) + 0.5, **tol)
    check_grad(lambda x: F.instance_norm(x), r(2, 3, 5), **tol)


@pytest.mark.parametrize("training", [True, False])
@pytest.mark.parametrize("dtype", FLOATS, ids=str)
def test_batch_norm_running_stats(dtype, training):
    """Running statistics are updated in place (unbiased variance) when
    training and used when not; float statistics with half inputs too."""
    tol = TOL[dtype]
    stat_dtypes = [torch.float32] if dtype == torch.float32 else [torch.float32, dtype]
    for sd in stat_dtypes:
        x = rand(4, 3, 5, 2, dtype=dtype)
        rm, rv = torch.randn(3).to(sd), torch.rand(3).to(sd) + 0.5
        w, b = torch.randn(3).to(sd), torch.randn(3).to(sd)
        rm_t, rv_t = rm.to(TPU), rv.to(TPU)
        with NoFallback():
            yt = F.batch_norm(x.to(TPU), rm_t, rv_t, w.to(TPU), b.to(TPU), training=training,
                              momentum=0.3, eps=1e-3)
        y = F.batch_norm(x, rm, rv, w, b, training=training, momentum=0.3, eps=1e-3)
        assert_same(y, yt, **tol)
        assert_same(rm, rm_t, **tol)
        assert_same(rv, rv_t, **tol)


def test_batch_norm_module_and_views():
    torch.manual_seed(0)
    m = torch.nn.BatchNorm2d(3)
    mt = torch.nn.BatchNorm2d(3).to(TPU)
    for _ in range(2):
        x = torch.randn(4, 3, 5, 5)
        xt = x.to(TPU).requires_grad_()
        with NoFallback():
            mt(xt).sum().backward()
        m(x.requires_grad_()).sum().backward()
        assert_same(m.running_mean, mt.running_mean, atol=1e-6, rtol=1e-5)
        assert_same(m.running_var, mt.running_var, atol=1e-6, rtol=1e-5)
        assert_same(m.num_batches_tracked, mt.num_batches_tracked)
    assert_same(m.weight.grad, mt.weight.grad, atol=1e-4, rtol=1e-5)
    assert_same(m.bias.grad, mt.bias.grad, atol=1e-4, rtol=1e-5)
    m.eval()
    mt.eval()
    x = torch.randn(4, 3, 5, 5)
    check(lambda x: mt(x) if x.device.type == "tpu" else m(x), x, atol=1e-5, rtol=1e-5)

    # Running statistics that are strided views of bigger tensors.
    def strided(x, rm2, rv2):
        rm2, rv2 = rm2.clone(), rv2.clone()
        out = A.native_batch_norm(x, None, None, rm2[:, 0], rv2[:, 1], True, 0.3, 1e-5)
        return list(out) + [rm2, rv2]

    check(strided, rand(4, 3, 5), torch.randn(3, 2), torch.rand(3, 2) + 0.5)


def test_batch_norm_family():
    """The _native_batch_norm_legit family (what functionalization and
    torch.compile use): running statistics written in place or returned."""
    x, w, b = rand(4, 3, 5), rand(3), rand(3)
    stats = lambda: (torch.randn(3), torch.rand(3) + 0.5)  # noqa: E731

    def legit(x, w, b, rm, rv, training):
        rm, rv = rm.clone(), rv.clone()  # check() runs CPU first, on the same inputs
        return list(A._native_batch_norm_legit(x, w, b, rm, rv, training, 0.1, 1e-5)) + [rm, rv]

    def with_update(x, w, b, rm, rv):
        rm, rv = rm.clone(), rv.clone()
        return list(A._batch_norm_with_update(x, w, b, rm, rv, 0.1, 1e-5)) + [rm, rv]

    for training in (True, False):
        check(legit, x, w, b, *stats(), training, atol=1e-6, rtol=1e-5)
    check(lambda x, w, b: A._native_batch_norm_legit.no_stats(x, w, b, True, 0.1, 1e-5), x, w, b)
    check(with_update, x, w, b, *stats(), atol=1e-6, rtol=1e-5)
    check(lambda *a: A._batch_norm_no_update(*a, 0.1, 1e-5), x, w, b, *stats())
    check(lambda *a: A._native_batch_norm_legit_functional(*a, True, 0.1, 1e-5), x, w, b,
          *stats(), atol=1e-6, rtol=1e-5)
    check(lambda *a: A._native_batch_norm_legit_no_training(*a, 0.1, 1e-5), x, w, b, *stats())


def test_norm_backward_masks():
    """Backward ops called directly: gradients output_mask leaves out are
    undefined (None), as on CPU."""
    dy, x, w = rand(4, 3, 5), rand(4, 3, 5), rand(3)
    sm, si = rand(3), torch.rand(3) + 0.5
    rm, rv = rand(3), torch.rand(3) + 0.5
    for train in (True, False):
        for mask in ([True, False, True], [False, True, False]):
            check(lambda *a: A.native_batch_norm_backward(*a, train, 1e-5, mask), dy, x, w, rm, rv,
                  sm, si, atol=1e-5, rtol=1e-5)
    check(lambda *a: A.batch_norm_backward(*a, True, 1e-5, [True, True, True],
                                           torch.empty(0, dtype=torch.uint8, device=a[0].device)),
          dy, x, w, rm, rv, sm, si, atol=1e-5, rtol=1e-5)
    mean, rstd = rand(4, 3, 1), torch.rand(4, 3, 1) + 0.5
    for mask in ([True, False, True], [False, True, False]):
        check(lambda *a: A.native_layer_norm_backward(a[0], a[1], [5], a[2], a[3], a[4], a[4],
                                                      mask), dy, x, mean, rstd, rand(5),
              atol=1e-5, rtol=1e-5)
        check(lambda *a: A.native_group_norm_backward(*a, 4, 3, 5, 3, mask), dy, x,
              mean.reshape(4, 3), rstd.reshape(4, 3), w, atol=1e-5, rtol=1e-5)
    # _fused_rms_norm_backward has no CPU kernel: compare with CPU's autograd
    # of rms_norm.
    xg, w5 = x.clone().requires_grad_(), rand(5)
    expected = torch.autograd.grad(F.rms_norm(xg, (5,), w5), xg, dy)[0]
    xt, wt = x.to(TPU), w5.to(TPU)
    with NoFallback():
        _, rstd_t = A._fused_rms_norm(xt, [5], wt, None)
        gi, gw = A._fused_rms_norm_backward(dy.to(TPU), xt, [5], rstd_t, wt, [True, False])
    assert gw is None
    assert_same(expected, gi, atol=1e-5, rtol=1e-5)


def test_norm_errors():
    f = rand
    check_error(lambda x: A.native_layer_norm(x, [3], None, None, 1e-5), f(2, 3, 4))
    check_error(lambda x, w: A.native_layer_norm(x, [4], w, None, 1e-5), f(2, 3, 4), f(3))
    check_error(lambda x, b: A.native_layer_norm(x, [4], None, b, 1e-5), f(2, 3, 4), f(3))
    check_error(lambda x: A.native_layer_norm(x, [], None, None, 1e-5), f(2, 3, 4))
    check_error(lambda x: A.native_layer_norm(x, [4], None, None, 1e-5),
                torch.ones(2, 3, 4, dtype=torch.int64))
    check_error(lambda x: F.group_norm(x, 3), f(2, 4, 5))
    check_error(lambda x, w: F.group_norm(x, 2, w), f(2, 4, 5), f(3))
    check_error(lambda x: A.native_batch_norm(x, None, None, None, None, True, 0.1, 1e-5), f(3))
    check_error(lambda x: A.native_batch_norm(x, None, None, None, None, True, 0.1, 1e-5),
                torch.ones(2, 3, 4, dtype=torch.int64))
    check_error(lambda x, rm, rv: F.batch_norm(x, rm, rv), f(2, 3, 4), f(4), f(4))
    check_error(lambda x: F.rms_norm(x, (3,)), f(2, 3, 4))
    check_error(lambda x, w: F.rms_norm(x, (4,), w), f(2, 3, 4), f(3))
    check_error(lambda x: F.rms_norm(x, (4,)), torch.ones(2, 3, 4, dtype=torch.int64))
