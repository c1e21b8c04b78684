"""Reflection / replication padding and nearest / linear / cubic upsampling
against CPU: forward in float32/bfloat16 (and the other dtypes CPU has),
negative padding, scales, align_corners, out=, backward, errors."""
import pytest
import torch
import torch.nn.functional as F

from conftest import check, check_error, check_grad

A = torch.ops.aten
FLOATS = [torch.float32, torch.bfloat16]
TOL = {
    torch.float32: dict(atol=1e-5, rtol=1e-5),
    torch.float64: dict(atol=1e-12, rtol=1e-12),
    torch.bfloat16: dict(atol=2e-2, rtol=2e-2),
    torch.float16: dict(atol=2e-3, rtol=2e-3),
}


def rand(*shape, dtype=torch.float32, grad=False):
    if dtype in (torch.uint8, torch.int8, torch.int32, torch.int64):
        return torch.randint(0, 100, shape).to(dtype)
    return torch.randn(shape).to(dtype).requires_grad_(grad)


#===--- padding ---===#

PADS = [  # (input shape, pad); negative entries crop
    ((2, 3, 5), (2, 3)),
    ((3, 6), (1, -2)),
    ((2, 3, 4, 5), (1, 2, 3, 0)),
    ((3, 4, 5), (-1, 2, 1, -2)),
    ((1, 2, 3, 4, 5), (1, 2, 0, 2, 2, 1)),
    ((2, 3, 4, 5), (-1, -1, 1, 1, -1, 2)),
]


@pytest.mark.parametrize("mode", ["reflect", "replicate"])
@pytest.mark.parametrize("dtype", FLOATS + [torch.float64, torch.float16, torch.int64, torch.uint8])
def test_pad(mode, dtype):
    for shape, pad in PADS:
        if len(pad) // 2 > len(shape) - 1:
            continue
        check(lambda x: F.pad(x, pad, mode=mode), rand(*shape, dtype=dtype))


def test_pad_complex_and_zero_batch():
    x = torch.randn(2, 3, 4, dtype=torch.complex64)
    check(lambda x: F.pad(x, (2, 1), mode="reflect"), x)
    check(lambda x: F.pad(x, (1, 1, 2, 0), mode="replicate"), torch.randn(0, 2, 3, 4))


@pytest.mark.parametrize("dtype", FLOATS)
def test_pad_backward(dtype):
    tol = TOL[dtype]
    for mode in ["reflect", "replicate"]:
        for shape, pad in PADS:
            check_grad(lambda x: F.pad(x, pad, mode=mode), rand(*shape, dtype=dtype, grad=True),
                       **tol)


def test_pad_out():
    x = torch.randn(2, 3, 5)

    def fn(x):
        out = torch.empty(0, device=x.device)
        r = A.reflection_pad1d.out(x, [2, 1], out=out)
        out2 = torch.empty(0, device=x.device)
        A.replication_pad2d.out(x, [1, 1, -1, 2], out=out2)
        return r, out2
    check(fn, x)


def test_pad_errors():
    check_error(lambda x: A.reflection_pad1d(x, [4, 1]), torch.randn(2, 3, 4))
    check_error(lambda x: A.reflection_pad2d(x, [1, 1]), torch.randn(2, 3, 4, 4))
    check_error(lambda x: A.replication_pad1d(x, [-3, -2]), torch.randn(2, 3, 4))
    check_error(lambda x: A.replication_pad2d(x, [1, 1, 1, 1]), torch.randn(3, 4))
    check_error(lambda x: A.reflection_pad1d(x, [1, 1]), torch.ones(2, 3, dtype=torch.bool))
    check_error(lambda g, x: A.reflection_pad1d_backward(g, x, [1, 1]),
                torch.randn(2, 3, 5), torch.randn(2, 3, 4))


#===--- upsampling ---===#

# (input shape, size, scale_factor): output size or scale (the scale then
# shapes the index math)
NEAREST = [
    ((2, 3, 5), 7, None),
    ((2, 3, 5), None, 1.7),
    ((1, 2, 4), 8, None),
    ((1, 2, 6), 4, None),
    ((2, 3, 4, 5), (7, 3), None),
    ((2, 3, 4, 5), None, (2.0, 0.6)),
    ((1, 2, 3, 4, 3), (5, 4, 7), None),
    ((1, 2, 3, 4, 3), None, 1.5),
]


@pytest.mark.parametrize("mode", ["nearest", "nearest-exact"])
@pytest.mark.parametrize("dtype", FLOATS + [torch.float64, torch.uint8])
def test_nearest(mode, dtype):
    for shape, size, sf in NEAREST:
        check(lambda x: F.interpolate(x, size=size, scale_factor=sf, mode=mode),
              rand(*shape, dtype=dtype))


# (input size, output size, scale) where CPU's float rounding decides which
# input an output reads: equal sizes with a scale, doubling, one output,
# scales that are not 1/integer, and a double-only case of nearest-exact
INDEX_CASES = [(2, 2, 1.7), (5, 10, None), (5, 10, 2.5), (4, 1, None), (12, 17, 1.7),
               (6, 17, 17 / 6), (14, 23, None), (7, 13, 0.3), (3, 5, None)]


@pytest.mark.parametrize("exact", [False, True])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_nearest_indices(exact, dtype):
    fwd = A._upsample_nearest_exact1d if exact else A.upsample_nearest1d
    bwd = A._upsample_nearest_exact1d_backward if exact else A.upsample_nearest1d_backward
    for i, o, scale in INDEX_CASES:
        check(lambda x: fwd(x, [o], scale), torch.arange(i, dtype=dtype).view(1, 1, i))
        check(lambda g: bwd(g, [o], [1, 1, i], scale), torch.randn(1, 1, o, dtype=dtype),
              **TOL[dtype])


INTERP = [  # (mode, input shape, size, scale_factor)
    ("linear", (2, 3, 5), 8, None),
    ("linear", (2, 3, 8), 5, None),
    ("linear", (2, 3, 5), None, 1.7),
    ("linear", (1, 2, 5), 5, None),
    ("linear", (1, 2, 4), 1, None),
    ("bilinear", (2, 3, 4, 5), (7, 3), None),
    ("bilinear", (1, 2, 4, 5), None, (2.0, 0.6)),
    ("bicubic", (2, 3, 4, 5), (7, 3), None),
    ("bicubic", (1, 2, 5, 4), None, (1.5, 2.5)),
    ("trilinear", (1, 2, 3, 4, 3), (5, 2, 7), None),
    ("trilinear", (1, 2, 3, 4, 3), None, 1.5),
]


@pytest.mark.parametrize("align", [False, True])
@pytest.mark.parametrize("dtype", FLOATS + [torch.float64])
def test_interpolate(align, dtype):
    for mode, shape, size, sf in INTERP:
        check(lambda x: F.interpolate(x, size=size, scale_factor=sf, mode=mode,
                                      align_corners=align), rand(*shape, dtype=dtype), **TOL[dtype])


# uint8 images: CPU's fixed-point separable path, integer for integer
U8_CASES = [((2, 3, 4, 5), (7, 3), (None, None)), ((1, 4, 6, 6), (12, 12), (None, None)),
            ((1, 3, 8, 8), (5, 13), (None, None)), ((1, 1, 5, 7), (9, 4), (2.0, 0.6)),
            ((1, 2, 5, 5), (5, 9), (None, None))]


@pytest.mark.parametrize("op", [A.upsample_bilinear2d, A.upsample_bicubic2d])
@pytest.mark.parametrize("align", [False, True])
def test_resize_uint8(op, align):
    for shape, osz, scales in U8_CASES:
        x = torch.randint(0, 256, shape, dtype=torch.uint8)
        check(lambda x: op(x, list(osz), align, *scales), x)


BACKWARD_2D = [  # (op, input size, output size, scales)
    (A.upsample_bilinear2d_backward, (2, 3, 4, 5), (7, 3), (None, None)),
    (A.upsample_bilinear2d_backward, (1, 2, 4, 5), (8, 3), (2.0, 0.6)),
    (A.upsample_bicubic2d_backward, (2, 3, 4, 5), (7, 3), (None, None)),
    (A.upsample_bicubic2d_backward, (1, 2, 5, 4), (7, 10), (1.5, 2.5)),
    (A.upsample_bicubic2d_backward, (1, 2, 4, 4), (1, 1), (None, None)),
    (A.upsample_bilinear2d_backward, (1, 2, 4, 4), (1, 3), (None, None)),
]


@pytest.mark.parametrize("dtype", FLOATS + [torch.float64])
def test_backward_2d(dtype):
    """The 2-D bilinear / bicubic backward ops, with explicit scales."""
    for op, isz, osz, scales in BACKWARD_2D:
        for align in [False, True]:
            g = rand(isz[0], isz[1], *osz, dtype=dtype)
            check(lambda g: op(g, list(osz), list(isz), align, *scales), g, **TOL[dtype])


@pytest.mark.parametrize("dtype", FLOATS)
def test_upsample_backward(dtype):
    tol = TOL[dtype] if dtype != torch.bfloat16 else dict(atol=6e-2, rtol=3e-2)
    for mode, shape, size, sf in INTERP[::3]:
        check_grad(lambda x: F.interpolate(x, size=size, scale_factor=sf, mode=mode,
                                           align_corners=True),
                   rand(*shape, dtype=dtype, grad=True), **tol)
    for mode in ["nearest", "nearest-exact"]:
        for shape, size, sf in NEAREST[1::2]:
            check_grad(lambda x: F.interpolate(x, size=size, scale_factor=sf, mode=mode),
                       rand(*shape, dtype=dtype, grad=True), **tol)


def test_upsample_out():
    x = torch.randn(2, 3, 4, 5)

    def fn(x):
        o1 = torch.empty(0, device=x.device)
        A.upsample_bilinear2d.out(x, [6, 7], True, None, None, out=o1)
        o2 = torch.empty(0, device=x.device)
        A.upsample_nearest2d.out(x, [6, 7], None, None, out=o2)
        return o1, o2
    check(fn, x)


def test_upsample_errors():
    check_error(lambda x: A.upsample_nearest2d(x, [5, 5]), torch.randn(2, 3, 4))
    check_error(lambda x: A.upsample_nearest2d(x, [0, 5]), torch.randn(2, 3, 4, 4))
    check_error(lambda x: A.upsample_nearest2d(x, [5, 5]), torch.randn(2, 0, 4, 4))
    check_error(lambda x: A.upsample_nearest2d(x, [5, 5]), torch.ones(2, 3, 4, 4, dtype=torch.int8))
    check_error(lambda x: A.upsample_linear1d(x, [5], False), torch.ones(2, 3, 4, dtype=torch.uint8))
    check_error(lambda g: A.upsample_bilinear2d_backward(g, [5, 5], [2, 3, 4, 4], False),
                torch.randn(2, 3, 5, 4))


#===--- unfold / fold (im2col / col2im) ---===#

WINDOWS = [  # (input shape, kernel, dilation, padding, stride)
    ((2, 3, 5, 6), (2, 3), 1, 0, 1),
    ((2, 3, 7, 6), (3, 2), (2, 1), (1, 2), (2, 3)),
    ((3, 6, 5), 2, 1, 1, 2),
    ((1, 2, 4, 4), 1, 1, 0, 1),
]


@pytest.mark.parametrize("dtype", FLOATS + [torch.float64, torch.bool, torch.complex64])
def test_unfold_fold(dtype):
    for shape, k, d, p, s in WINDOWS:
        x = rand(*shape) if dtype != torch.bool else torch.rand(shape) > 0.5
        x = x.to(dtype)
        cols = F.unfold(x, k, d, p, s)
        check(lambda x: F.unfold(x, k, d, p, s), x)
        check(lambda c: F.fold(c, shape[-2:], k, d, p, s), cols, **TOL.get(dtype, {}))


@pytest.mark.parametrize("dtype", FLOATS)
def test_unfold_fold_backward(dtype):
    for shape, k, d, p, s in WINDOWS[:3]:
        x = rand(*shape, dtype=dtype, grad=True)
        check_grad(lambda x: F.unfold(x, k, d, p, s), x, **TOL[dtype])
        c = F.unfold(x, k, d, p, s).detach().requires_grad_()
        check_grad(lambda c: F.fold(c, shape[-2:], k, d, p, s), c, **TOL[dtype])


def test_unfold_fold_errors():
    check_error(lambda x: A.im2col(x, [5, 2], [1, 1], [0, 0], [1, 1]), torch.randn(2, 3, 4, 4))
    check_error(lambda x: A.im2col(x, [2, 2], [1, 1], [0, 0], [0, 1]), torch.randn(2, 3, 4, 4))
    check_error(lambda x: A.im2col(x, [2, 2], [1, 1], [0, 0], [1, 1]), torch.ones(3, 4, 4).long())
    check_error(lambda x: A.col2im(x, [4, 4], [2, 2], [1, 1], [0, 0], [1, 1]), torch.randn(2, 11, 9))
    check_error(lambda x: A.col2im(x, [4, 4], [2, 2], [1, 1], [0, 0], [1, 1]), torch.randn(2, 12, 8))
