"""Indexing, joining, shape and sorting ops against CPU PyTorch: cat, the
gather / scatter / index_* family, advanced indexing and index_put, masked
ops, nonzero (data-dependent shapes), sort / topk / kthvalue, flip, roll,
tril / triu, padding, repeat; their in-place and out= forms, backward, and
the errors (index bounds are checked on the device)."""
import math

import pytest
import torch
import torch.nn.functional as F

import torchtpu
from conftest import TPU, NoFallback, assert_same, check, check_error, fallbacks, to_tpu

# The ATen ops of this family: a CPU fallback of any of them fails a test.
# (Backward passes also run ops of other families, e.g. zeros.)
FAMILY = {
    "cat", "stack", "index_select", "index_add", "index_copy", "index_fill", "gather",
    "scatter", "scatter_add", "scatter_reduce", "take", "put", "embedding",
    "embedding_dense_backward", "index", "_index_put_impl", "index_put", "masked_fill",
    "masked_scatter", "masked_select", "nonzero", "nonzero_static", "flip", "roll", "tril",
    "triu", "constant_pad_nd", "repeat", "unfold_backward", "sort", "topk", "kthvalue",
}


def family_fallbacks(before):
    new = {k: v - before.get(k, 0) for k, v in fallbacks().items() if v != before.get(k, 0)}
    return {k: v for k, v in new.items()
            if k.removeprefix("aten::").split(".")[0].rstrip("_") in FAMILY}


def check_grad(fn, *inputs, wrt=(0,), atol=None, rtol=None):
    """Runs fn forward and backward on CPU and tpu; compares the result and
    the gradients of the inputs at positions `wrt`."""
    cpu = [x.detach().clone().requires_grad_(i in wrt) if isinstance(x, torch.Tensor) else x
           for i, x in enumerate(inputs)]
    dev = [x.detach().to(TPU).requires_grad_(i in wrt) if isinstance(x, torch.Tensor) else x
           for i, x in enumerate(inputs)]
    out = fn(*cpu)
    gen = torch.Generator().manual_seed(0)
    g = torch.randn(out.shape, generator=gen).to(out.dtype)
    out.backward(g)
    before = fallbacks()
    out_t = fn(*dev)
    out_t.backward(g.to(TPU))
    torch.tpu.synchronize()
    assert not family_fallbacks(before), family_fallbacks(before)
    assert_same(out.detach(), out_t.detach(), atol, rtol)
    for i in wrt:
        assert_same(cpu[i].grad, dev[i].grad, atol, rtol)


def rand(shape, dtype=torch.float32, seed=0):
    gen = torch.Generator().manual_seed(seed)
    if dtype == torch.bool:
        return torch.rand(shape, generator=gen) > 0.5
    if dtype.is_floating_point:
        return torch.randn(shape, generator=gen).to(dtype)
    return torch.randint(-50, 50, shape, generator=gen).to(dtype)


def on(like, data, **kw):
    """An index (or other) tensor on the device of `like`."""
    return torch.tensor(data, device=like.device, **kw)


def randidx(high, shape, seed=1, dtype=torch.long):
    gen = torch.Generator().manual_seed(seed)
    return torch.randint(0, high, shape, generator=gen).to(dtype)


# float16 takes the same paths as bfloat16 except where the dtype itself
# matters (promotion in cat, comparisons in sort), which test it too.
DTYPES = [torch.float32, torch.bfloat16, torch.int64, torch.bool]
FLOATS = [torch.float32, torch.bfloat16]


def expect_device_error(fn, exc, match=None):
    """fn's error surfaces at the next synchronization (strict mode) and at
    the op in debug mode; the device keeps working afterwards."""
    with pytest.raises(exc, match=match):
        fn()
        torch.tpu.synchronize()
    with torchtpu.mode("debug"):
        with pytest.raises(exc, match=match):
            fn()
    a = torch.arange(6.0).reshape(2, 3)
    assert_same(a.index_select(1, torch.tensor([2, 0])),
                a.to(TPU).index_select(1, torch.tensor([2, 0], device=TPU)))


#===--- cat ---===#

@pytest.mark.parametrize("dtype", DTYPES + [torch.float16], ids=str)
def test_cat_dtypes(dtype):
    a, b = rand((2, 3), dtype), rand((4, 3), dtype, seed=1)
    check(lambda x, y: torch.cat([x, y]), a, b)
    check(lambda x, y: torch.cat([x, y.t()[:2], x], dim=-1), a, b)


def test_cat_promotion_empty_and_out():
    f, i, h = rand((2, 3)), rand((2, 3), torch.int64), rand((2, 3), torch.float16)
    check(lambda x, y: torch.cat([x, y], 1), f, i)
    check(lambda x, y: torch.cat([x, y]), h, rand((1, 3), torch.bfloat16))
    check(lambda x, y: torch.cat([x, y]), i, rand((2, 3), torch.bool))
    # legacy empty 1-D tensors are skipped; zero-size parts add nothing
    check(lambda x, y: torch.cat([y, x, y], 1), f, torch.empty(0))
    check(lambda x, y: torch.cat([x, y]), f, torch.empty(0, 3))
    check(lambda y: torch.cat([y, y]), torch.empty(0, dtype=torch.int64))
    check(lambda x: torch.cat([x]), rand((3, 1, 2)))
    check(lambda x: torch.stack([x, x, x], 1), rand((2, 3)))
    check(lambda x: torch.hstack([x, x]), rand((2, 3), torch.bfloat16))
    out = torch.empty(4, 3)
    check(lambda x, o: torch.cat([x, x], out=o), f, out)
    check_error(lambda x, y: torch.cat([x, y]), f, rand((2, 2)))
    check_error(lambda x, y: torch.cat([x, y]), f, torch.tensor(1.0))
    check_error(lambda x, y: torch.cat([x, y]), f, rand((2, 3, 1)))
    # an out= dtype the inputs cannot be cast to: PyTorch's TypeError, for
    # stack too (its message says torch.cat), before any shape check
    for fn in (lambda x, o: torch.cat([x, x], out=o), lambda x, o: torch.stack([x, x], out=o),
               lambda x, o: torch.cat([x, x[:, :2]], out=o)):
        tpu_err, cpu_err = check_error(fn, f, torch.empty(4, 3, dtype=torch.long))
        assert str(tpu_err) == str(cpu_err)
    check_error(lambda x: torch.cat([x, x], 2), f)


def test_cat_stack_backward():
    check_grad(lambda x, y: torch.cat([x, y * 2, x], 1), rand((2, 3)), rand((2, 4)), wrt=(0, 1))
    check_grad(lambda x: torch.stack([x, x.flip(0)], 0), rand((3, 2)))


#===--- index_select / index_add / index_copy / index_fill ---===#

@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_index_select(dtype):
    x = rand((4, 5, 3), dtype)
    idx = torch.tensor([3, 0, 3, 1])
    check(lambda a, i: a.index_select(0, i), x, idx)
    check(lambda a, i: a.index_select(1, i), x, idx)
    check(lambda a, i: torch.index_select(a, -1, i), x, idx.int() % 3)


def test_index_select_shapes_out_and_errors():
    x = rand((4, 5))
    check(lambda a, i: a.index_select(1, i), x, torch.tensor(2))  # 0-d index
    check(lambda a, i: a.index_select(0, i), x, torch.empty(0, dtype=torch.long))
    check(lambda a, i: a.index_select(0, i), torch.tensor(5.0), torch.tensor([0]))
    check(lambda a, i: a.index_select(0, i), torch.empty(0, 3), torch.empty(0, dtype=torch.long))
    check(lambda a, i, o: torch.index_select(a, 1, i, out=o), x, torch.tensor([4, 4]),
          torch.empty(4, 2))
    check_error(lambda a, i: a.index_select(0, i), x, torch.tensor([1.0]))
    check_error(lambda a, i: a.index_select(0, i), x, torch.tensor([[1]]))
    check_error(lambda a, i: a.index_select(2, i), x, torch.tensor([1]))
    # An index into an empty dimension: CPU's shape check (a RuntimeError).
    check_error(lambda a, i: a.index_select(0, i), torch.empty(0, 3), torch.tensor([0]))
    xt = x.to(TPU)
    expect_device_error(lambda: xt.index_select(0, torch.tensor([1, 4], device=TPU)),
                        IndexError, "index out of range in self")
    expect_device_error(lambda: xt.index_select(1, torch.tensor([-1], device=TPU)), IndexError)


def test_index_select_and_embedding_backward():
    idx = torch.tensor([2, 0, 2, 3, 2])
    check_grad(lambda a, i: a.index_select(0, i), rand((4, 3)), idx)
    check_grad(lambda a, i: a.index_select(1, i), rand((2, 4)), idx)
    check_grad(lambda w, i: F.embedding(i, w), rand((5, 3)), idx.reshape(5, 1))
    check_grad(lambda w, i: F.embedding(i, w, padding_idx=2), rand((5, 3)), idx)
    check_grad(lambda w, i: F.embedding(i, w, scale_grad_by_freq=True), rand((5, 3)), idx)
    check_grad(lambda w, i: F.embedding(i, w), rand((5, 3), torch.bfloat16), idx.reshape(1, 5))


def test_embedding_errors():
    w = rand((5, 3)).to(TPU)
    expect_device_error(lambda: F.embedding(torch.tensor([[1, 5]], device=TPU), w),
                        IndexError, "index out of range in self")


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64], ids=str)
def test_index_add(dtype):
    x = rand((4, 3), dtype)
    src = rand((5, 3), dtype, seed=2)
    idx = torch.tensor([1, 3, 1, 0, 1])
    tol = dict(atol=0.1, rtol=0.02) if dtype == torch.bfloat16 else {}
    check(lambda a, i, s: a.index_add(0, i, s), x, idx, src, **tol)
    check(lambda a, i, s: a.index_add(1, i, s, alpha=2), x, idx % 3, rand((4, 5), dtype, seed=3),
          **tol)
    check(lambda a, i, s: a.clone().index_add_(0, i.int(), s), x, idx, src, **tol)
    check(lambda a, i, s, o: torch.index_add(a, 0, i, s, out=o), x, idx, src,
          torch.empty(4, 3, dtype=dtype), **tol)


def test_index_add_errors_and_backward():
    x = rand((4, 3))
    check_error(lambda a, s: a.index_add(0, on(a, [0]), s), x, rand((1, 3)).double())
    check_error(lambda a, s: a.index_add(0, on(a, [0, 1]), s), x, rand((1, 3)))
    check_error(lambda a, s: a.index_add(0, on(a, [[0]]), s), x, rand((1, 3)))
    err, cpu_err = check_error(lambda a, s: a.index_add(0, on(a, [0]).byte(), s), x,
                               rand((1, 3)))
    assert str(err) == str(cpu_err)
    xt = x.to(TPU)
    expect_device_error(lambda: xt.index_add(0, torch.tensor([4], device=TPU),
                                             torch.ones(1, 3, device=TPU)), RuntimeError,
                        "index 4 is out of bounds for dimension 0 with size 4")
    check_grad(lambda a, s: a.index_add(0, on(a, [1, 1, 3]), s, alpha=3), x, rand((3, 3)),
               wrt=(0, 1))


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.bool], ids=str)
def test_index_copy_and_fill(dtype):
    x = rand((4, 3), dtype)
    src = rand((2, 3), dtype, seed=3)
    check(lambda a, s: a.index_copy(0, on(a, [3, 1]), s), x, src)
    check(lambda a, s: a.clone().index_copy_(1, on(a, [2, 0]), s), x, rand((4, 2), dtype))
    check(lambda a: a.index_fill(1, on(a, [0, -1]), 1), x)
    check(lambda a, v: a.clone().index_fill_(0, on(a, [2]), v), x, torch.tensor(0))
    check(lambda a, v: a.index_fill(1, on(a, [1]), v), x, torch.tensor(1, dtype=dtype))
    check(lambda a: torch.index_fill(a, 0, on(a, 1), True), x)


def test_index_copy_fill_errors_and_backward():
    x = rand((4, 3))
    xt = x.to(TPU)
    check_error(lambda a: a.index_copy(0, on(a, [1], dtype=torch.int32), a[:1]), x)
    check_error(lambda a: a.index_copy(0, on(a, [1, 2]), a[:1]), x)
    check_error(lambda a: a.index_copy(0, on(a, [[1]]), a[:1]), x)
    check_error(lambda a: a.index_fill(0, on(a, [1]), on(a, [1.0, 2.0])), x)
    check_error(lambda a: a.index_fill(0, on(a, [1.0]), 1.0), x)
    expect_device_error(lambda: xt.index_copy(0, torch.tensor([4], device=TPU), xt[:1]),
                        IndexError)
    expect_device_error(lambda: xt.index_fill(0, torch.tensor([-5], device=TPU), 0.0), IndexError)
    check_grad(lambda a, s: a.index_copy(0, on(a, [2, 0]), s), x, rand((2, 3)), wrt=(0, 1))
    check_grad(lambda a: a.index_fill(1, on(a, [1]), 2.0), x)


#===--- gather / scatter ---===#

@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_gather(dtype):
    x = rand((4, 5), dtype)
    check(lambda a, i: a.gather(0, i), x, randidx(4, (3, 5)))
    check(lambda a, i: torch.gather(a, 1, i), x, randidx(5, (2, 7), dtype=torch.int32))
    check(lambda a, i: a.gather(-1, i), rand((2, 3, 4), dtype), randidx(4, (2, 2, 6)))


def test_gather_shapes_errors_backward():
    x = rand((4, 5))
    check(lambda a, i: a.gather(0, i), x, torch.empty(0, 5, dtype=torch.long))
    check(lambda a, i: a.gather(0, i), torch.tensor(3.0), torch.tensor(0))
    check(lambda a, i, o: torch.gather(a, 1, i, out=o), x, randidx(5, (4, 2)), torch.empty(4, 2))
    check_error(lambda a, i: a.gather(0, i), x, randidx(4, (5,)))
    check_error(lambda a, i: a.gather(0, i), x, randidx(4, (2, 6)))
    check_error(lambda a, i: a.gather(0, i), x, randidx(4, (2, 5)).float())
    xt = x.to(TPU)
    expect_device_error(lambda: xt.gather(1, torch.tensor([[0], [5]], device=TPU)),
                        RuntimeError, "out of bounds for dimension 1 with size 5")
    check_grad(lambda a, i: a.gather(1, i), x, randidx(5, (4, 8)))
    check_grad(lambda a, i: a.gather(0, i), rand((3, 2), torch.bfloat16), randidx(3, (5, 2)))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64], ids=str)
def test_scatter(dtype):
    x = rand((4, 5), dtype)
    src = rand((3, 6), dtype, seed=4)
    # unique targets per column: replacing is deterministic
    idx = torch.stack([torch.randperm(4, generator=torch.Generator().manual_seed(k))[:3]
                       for k in range(5)], 1)
    check(lambda a, i, s: a.scatter(0, i, s), x, idx, src)
    check(lambda a, i: a.scatter(0, i, 7), x, idx)
    check(lambda a, i, s: a.clone().scatter_(0, i, s), x, idx, src)
    check(lambda a, i, s, o: torch.scatter(a, 0, i, s, out=o), x, idx, src,
          torch.empty(4, 5, dtype=dtype))
    dup = randidx(4, (3, 5))
    tol = dict(atol=0.1, rtol=0.02) if dtype == torch.bfloat16 else {}
    check(lambda a, i, s: a.scatter(0, i, s, reduce="add"), x, dup, src, **tol)
    check(lambda a, i, s: a.scatter(0, i, s, reduce="multiply"), x, dup, src, **tol)
    check(lambda a, i: a.scatter(0, i, 2, reduce="multiply"), x, dup)
    check(lambda a, i, s: a.scatter_add(0, i, s), x, dup, src, **tol)
    check(lambda a, i, s: a.clone().scatter_add_(1, i, s), x, randidx(5, (2, 7)),
          rand((3, 8), dtype, seed=5), **tol)


@pytest.mark.parametrize("reduce", ["sum", "prod", "mean", "amax", "amin"])
@pytest.mark.parametrize("include_self", [True, False])
def test_scatter_reduce(reduce, include_self):
    x = rand((5, 4))
    src = rand((6, 4), seed=5)
    idx = randidx(3, (6, 4))  # rows 3, 4 of self receive nothing
    check(lambda a, i, s: a.scatter_reduce(0, i, s, reduce, include_self=include_self),
          x, idx, src, atol=1e-5, rtol=1e-5)
    xi = rand((5, 4), torch.int64)
    check(lambda a, i, s: a.scatter_reduce(0, i, s, reduce, include_self=include_self),
          xi, idx, rand((6, 4), torch.int64, seed=6))


@pytest.mark.parametrize("reduce", ["amax", "amin"])
@pytest.mark.parametrize("include_self", [True, False])
def test_scatter_and_index_reduce_keep_nans(reduce, include_self):
    # A NaN scattered into a position makes it NaN, as on CPU (XLA's CPU
    # backend drops it in a scatter's max and min).
    nan = float("nan")
    x = torch.tensor([[1.0, 5.0], [-2.0, 7.0], [nan, 0.0]])
    src = torch.tensor([[2.0, nan], [nan, 1.0], [3.0, 4.0]])
    idx = torch.tensor([[0, 0], [1, 0], [0, 1]])
    check(lambda a, i, s: a.scatter_reduce(0, i, s, reduce, include_self=include_self),
          x, idx, src)
    check(lambda a, s: a.index_reduce(0, torch.tensor([1, 0, 1], device=a.device), s, reduce,
                                      include_self=include_self), x, src)


def test_scatter_errors_and_backward():
    x = rand((4, 5))
    i = randidx(4, (2, 5))
    check_error(lambda a, i: a.scatter(0, i, a.double()), x, i)
    check_error(lambda a, i: a.scatter(0, i, 1.0, reduce="max"), x, i)
    check_error(lambda a, i: a.scatter_reduce(0, i, a, "average"), x, i)
    check_error(lambda a, i: a.scatter(0, i, a[:1]), x, i)
    check_error(lambda a, i: a.scatter(0, i.float(), a), x, i)
    xt = x.to(TPU)
    expect_device_error(lambda: xt.scatter(0, torch.tensor([[4]], device=TPU), 1.0),
                        RuntimeError, "out of bounds for dimension 0 with size 4")
    expect_device_error(lambda: xt.scatter_add(1, torch.tensor([[-1]], device=TPU), xt),
                        RuntimeError)
    check(lambda a, i: a.scatter(0, i, 1.0), x, torch.empty(0, 5, dtype=torch.long))
    # An empty index of any dtype scatters nothing on CPU (gather's backward
    # does that for an empty uint8 index); a non-empty one is refused.
    for op in (lambda a, i: a.scatter(0, i, a[:0]), lambda a, i: a.scatter_add(0, i, a[:0]),
               lambda a, i: a.scatter_reduce(0, i, a[:0], "amax")):
        check(op, x, torch.empty(0, 5, dtype=torch.uint8))
        check_error(op, x, torch.zeros(1, 5, dtype=torch.uint8))
    check_grad(lambda a: a.gather(0, torch.empty(0, dtype=torch.uint8, device=a.device)),
               rand((5,)))
    perm = torch.stack([torch.randperm(4, generator=torch.Generator().manual_seed(k))
                        for k in range(5)], 1)
    check_grad(lambda a, s, i: a.scatter(0, i, s), x, rand((2, 5)), perm[:2], wrt=(0, 1))
    check_grad(lambda a, s, i: a.scatter_add(0, i, s), x, rand((2, 5)), i, wrt=(0, 1))


def test_take_and_put():
    x = rand((3, 4))
    idx = torch.tensor([[0, -1], [11, 5]])
    check(lambda a, i: a.take(i), x, idx)
    check(lambda a, i: a.take(i), rand((3, 4), torch.int64), idx)
    check(lambda a, i, s: a.put(i, s), x, torch.tensor([1, -2, 7]), rand((3,)))
    check(lambda a, i, s: a.clone().put_(i, s, accumulate=True), x, torch.tensor([1, 1, -1]),
          rand((3,)))
    check_error(lambda a: a.take(on(a, [0], dtype=torch.int32)), x)
    check_error(lambda a: a.put(on(a, [0, 1]), on(a, [1.0, 2.0, 3.0])), x)
    xt = x.to(TPU)
    expect_device_error(lambda: xt.take(torch.tensor([12], device=TPU)), IndexError)
    expect_device_error(lambda: xt.put(torch.tensor([-13], device=TPU), xt[0, :1]), IndexError)
    check_grad(lambda a, i: a.take(i), x, idx)


#===--- advanced indexing ---===#

@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_index_tensor(dtype):
    x = rand((4, 5, 3), dtype)
    i = torch.tensor([3, -1, 0, 3])
    j = torch.tensor([[1], [4]])
    k = torch.tensor([2, 0])
    check(lambda a, i: a[i], x, i)
    check(lambda a, i, j: a[i[:2], j], x, i, j)        # broadcast [2, 2]
    check(lambda a, j, k: a[:, j, k], x, j, k)         # adjacent, after a slice
    check(lambda a, i, k: a[i[:2], :, k], x, i, k)     # not adjacent: B goes first
    check(lambda a, k: a[k, :, k.reshape(2, 1)], x, k)
    check(lambda a, k: a[..., k], x, k)
    check(lambda a, i: a[None, i.int()], x, i)


def test_index_tensor_shapes():
    x = rand((4, 5))
    check(lambda a: a[torch.tensor(2)], x)
    check(lambda a: a[torch.tensor([], dtype=torch.long)], x)
    check(lambda a: a[:, torch.tensor([[0, 1], [2, 3]])], x)
    check(lambda a: a[torch.tensor([1, 2]), torch.tensor([0, 4])], x)
    check(lambda a: a[[0, 2]], x)
    check(lambda a: a[torch.tensor([0, 0]), :][torch.tensor([1])], torch.empty(3, 0))
    check_error(lambda a: a[:, torch.tensor([1])], torch.empty(3, 0))
    # CPU index tensors with a tpu self (PyTorch allows it)
    xt = x.to(TPU)
    with NoFallback():
        r = xt[torch.tensor([1, 3])]
        rm = xt[torch.tensor([True, False, False, True])]
    assert_same(x[torch.tensor([1, 3])], r)
    assert_same(x[torch.tensor([0, 3])], rm)


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.bool], ids=str)
def test_index_bool_mask(dtype):
    x = rand((4, 5, 2), dtype)
    m = rand((4, 5), torch.bool, seed=7)
    check(lambda a, m: a[m], x, m)
    check(lambda a, m: a[:, m[0]], x, m)
    check(lambda a, m: a[m[:, 0], 1], x, m)
    check(lambda a: a[torch.zeros(4, dtype=torch.bool)], x)
    check(lambda a: a[torch.ones(4, 5, 2, dtype=torch.bool)], x)
    check(lambda a: a[a != a], x)
    check(lambda a, m: a[m.to(torch.uint8)], x, m)


def test_index_mask_mixed_with_long():
    x = rand((4, 5))
    m = torch.tensor([True, False, True, True])
    check(lambda a, m: a[m, torch.tensor([0, 4, 1])], x, m)
    check(lambda a, m: a[torch.tensor([[1], [2]]), m[:3].repeat(2)[:5]], x, m)


def test_index_errors_and_backward():
    x = rand((4, 5))
    xt = x.to(TPU)
    check_error(lambda a: a[torch.tensor([0]), torch.tensor([0]), torch.tensor([0])], x)
    check_error(lambda a: a[torch.tensor([1.0])], x)
    check_error(lambda a: a[torch.ones(3, dtype=torch.bool)], x)
    check_error(lambda a: a[torch.tensor([0, 1]), torch.tensor([0, 1, 2])], x)
    expect_device_error(lambda: xt[torch.tensor([4], device=TPU)], IndexError,
                        "out of bounds for dimension 0 with size 4")
    expect_device_error(lambda: xt[:, torch.tensor([-6], device=TPU)], IndexError)
    check_grad(lambda a: a[torch.tensor([1, 3, 1])], x)
    check_grad(lambda a: a[torch.tensor([1, 3, 1]), torch.tensor([[0], [4]])], x)
    check_grad(lambda a: a[a > 0], x)
    check_grad(lambda a: a[:, torch.tensor([4, 0])], rand((3, 5), torch.bfloat16))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64, torch.bool],
                         ids=str)
def test_index_put(dtype):
    x = rand((5, 4), dtype)
    v = rand((3, 4), dtype, seed=8)
    i = torch.tensor([4, 0, -3])
    j = torch.tensor([[0], [1]])

    def setitem(a, key, val):
        a = a.clone()
        a[key] = val
        return a
    check(lambda a, i, v: setitem(a, i, v), x, i, v)
    check(lambda a, i, v: setitem(a, (i, 2), v[:, 0]), x, i, v)
    check(lambda a, i, v: setitem(a, (slice(None), i[:2]), v[:2, :1].t()), x, i % 4, v)
    check(lambda a, i: setitem(a, i, True if dtype == torch.bool else 3), x, i)
    check(lambda a, i, v: a.index_put((i,), v), x, i, v)
    check(lambda a, i, j, v: a.index_put((i, j), v[0, :3]), x, i, j, v)
    x3 = rand((4, 3, 5), dtype, seed=2)
    k = torch.tensor([[4], [-1]])
    check(lambda a, i, k, v: setitem(a, (i, slice(None), k), v[:, 0]), x3, i[:2] % 4, k, v)
    if dtype != torch.bool:
        tol = dict(atol=0.1, rtol=0.02) if dtype == torch.bfloat16 else {}
        dup = torch.tensor([1, 1, 3, 1])
        check(lambda a, d, v: a.index_put((d,), v[0], accumulate=True), x, dup, v, **tol)
        check(lambda a, d, v: a.clone().index_put_((d, d), v[0], accumulate=True), x, dup, v,
              **tol)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64], ids=str)
def test_index_put_bool_mask(dtype):
    x = rand((4, 3), dtype)
    m = torch.tensor([[True, False, True], [False, False, False],
                      [True, True, False], [False, True, True]])  # 6 true

    def setitem(a, key, val):
        a = a.clone()
        a[key] = val
        return a
    with NoFallback():
        before = torchtpu.metrics()["host_syncs"]
        r = setitem(x.to(TPU), m.to(TPU), 5)
        assert torchtpu.metrics()["host_syncs"] == before  # no count read back
    assert_same(setitem(x, m, 5), r)
    v = rand((6,), dtype, seed=9)
    check(lambda a, m, v: setitem(a, m, v), x, m, v)
    check(lambda a, m, v: setitem(a, m, v[:1]), x, m, v)
    check(lambda a, m, v: setitem(a, m[:, 0], v.reshape(2, 3)), x, m, v)
    check(lambda a, m, v: setitem(a, m[:, 0], v[:3]), x, m, v)
    check(lambda a, m, v: setitem(a, (slice(None), m[0]), v[:4, None].expand(4, 2)), x, m, v)
    check(lambda a, m, v: setitem(a, (m[:, 0], 1), v[:2]), x, m, v)
    check(lambda a: setitem(a, a > 0, 0), x)
    tol = dict(atol=0.1, rtol=0.02) if dtype == torch.bfloat16 else {}
    check(lambda a, m, v: a.index_put((m,), v, accumulate=True), x, m, v, **tol)
    check(lambda a, m, v: a.index_put((m[:, 1],), v[0], accumulate=True), x, m, v, **tol)


def test_index_put_errors_and_backward():
    x = rand((5, 4))
    xt = x.to(TPU)
    check_error(lambda a: a.index_put((on(a, [0]),), on(a, [1, 2, 3, 4])), x)
    check_error(lambda a: a.index_put((on(a, [0, 1]),), a[:3]), x)
    check_error(lambda a: a.index_put((a > 0,), a[:2, :2]), x)
    check_error(lambda a: a.index_put((on(a, [True, False, True]),), on(a, 1.0)), x)
    expect_device_error(lambda: xt.index_put((torch.tensor([5], device=TPU),), xt[0]), IndexError)
    m = torch.tensor([True, False, True, False, False], device=TPU)
    expect_device_error(lambda: xt.index_put((m,), torch.ones(3, 4, device=TPU)), RuntimeError,
                        "shape mismatch")
    check_grad(lambda a, v: a.index_put((on(a, [4, 1]),), v), x, rand((2, 4)), wrt=(0, 1))
    check_grad(lambda a, v: a.index_put((on(a, [1, 1]),), v, accumulate=True), x,
               rand((2, 4)), wrt=(0, 1))
    check_grad(lambda a, v: a.index_put((a[:, 0] > 0,), v), x, rand((4,)), wrt=(0, 1))


#===--- masked ops and nonzero ---===#

@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_masked_fill(dtype):
    x = rand((3, 4), dtype)
    m = rand((3, 4), torch.bool, seed=10)
    check(lambda a, m: a.masked_fill(m, 1), x, m)
    check(lambda a, m: a.masked_fill(m[0], torch.tensor(0)), x, m)  # broadcast mask
    check(lambda a, m: a.clone().masked_fill_(m, torch.tensor(True, device=a.device)), x, m)
    check(lambda a, m: a[0].masked_fill(m, -2), x, m)  # result takes the broadcast shape


def test_masked_fill_errors_and_backward():
    x = rand((3, 4))
    m = rand((3, 4), torch.bool, seed=10)
    check_error(lambda a, m: a.masked_fill(m.to(torch.uint8), 1.0), x, m)
    check_error(lambda a, m: a.masked_fill(m, torch.ones(2)), x, m)
    check_error(lambda a, m: a.masked_fill(m, 1.0), x, m[:2])
    check_grad(lambda a, m: a.masked_fill(m, 0.5), x, m)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64, torch.bool],
                         ids=str)
def test_masked_scatter_select(dtype):
    x = rand((3, 4), dtype)
    m = rand((3, 4), torch.bool, seed=11)
    src = rand((4, 4), dtype, seed=12)
    check(lambda a, m, s: a.masked_scatter(m, s), x, m, src)
    check(lambda a, m, s: a.clone().masked_scatter_(m[1], s), x, m, src)
    check(lambda a, m: a.masked_select(m), x, m)
    check(lambda a, m: a.masked_select(m[2]), x, m)       # mask broadcast
    check(lambda a, m: a[0].masked_select(m), x, m)       # self broadcast
    check(lambda a, m, o: torch.masked_select(a, m, out=o), x, m, torch.empty(0, dtype=dtype))


def test_masked_scatter_select_errors_and_backward():
    x = rand((3, 4))
    m = torch.ones(3, 4, dtype=torch.bool)
    check_error(lambda a, m: a.masked_scatter(m, a.double()), x, m)
    check_error(lambda a, m: a.masked_scatter(m.to(torch.uint8), a), x, m)
    check_error(lambda a, m: a.masked_select(m.to(torch.uint8)), x, m)
    xt = x.to(TPU)
    expect_device_error(lambda: xt.masked_scatter(m.to(TPU), torch.ones(5, device=TPU)),
                        RuntimeError, "source")
    check(lambda a, m: a.masked_select(m), x, ~m)
    mm = rand((3, 4), torch.bool, seed=13)
    check_grad(lambda a, m: a.masked_select(m), x, mm)
    check_grad(lambda a, s, m: a.masked_scatter(m, s), x, rand((12,)), mm, wrt=(0, 1))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64, torch.bool,
                                   torch.complex64], ids=str)
def test_nonzero(dtype):
    x = rand((3, 4, 2), dtype) if dtype != torch.int64 else randidx(3, (3, 4, 2))
    if dtype.is_floating_point:
        x[x > 0.5] = 0
    if dtype.is_complex:  # a number with one zero part is not zero
        re, im = rand((3, 4, 2), seed=1), rand((3, 4, 2), seed=2)
        x = torch.complex(re.masked_fill(re > 0, 0), im.masked_fill(im > 0, 0))
    check(lambda a: a.nonzero(), x)
    check(lambda a: torch.nonzero(a, as_tuple=True), x)
    check(lambda a: torch.argwhere(a), x[0])
    check(lambda a: torch.where(a), x[1])
    check(lambda a: a.nonzero(), torch.zeros(5, dtype=dtype))
    check(lambda a: a.nonzero(), torch.ones(0, 3, dtype=dtype))
    check(lambda a: a.nonzero(), torch.ones((), dtype=dtype))
    check(lambda a, o: torch.nonzero(a, out=o), x, torch.empty(0, dtype=torch.long))
    check(lambda a: torch.nonzero_static(a, size=4), x)
    check(lambda a: torch.nonzero_static(a, size=30, fill_value=-7), x)
    check(lambda a: a.nonzero(), torch.tensor([0.0, float("nan"), -0.0, 1.0]))


def test_prefix_sums_across_blocks():
    """nonzero / masked_scatter / mask index_put count with a blocked scan
    (blocks of 128, recursively): sizes across block boundaries."""
    m = rand((130, 131), torch.bool, seed=16)  # 17030 elements: two levels
    x = rand((130, 131))
    check(lambda m: m.nonzero(), m)
    check(lambda x, m: x.masked_scatter(m, x * 2), x, m)
    check(lambda x, m: x.index_put((m,), x[m] + 1), x, m)
    check(lambda m: m[:, :1].nonzero(), m)  # 130: one block and a bit


#===--- sorting ---===#

@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16, torch.int64,
                                   torch.bool], ids=str)
def test_sort(dtype):
    x = rand((4, 6), dtype)
    if dtype.is_floating_point:
        x[0, 1] = x[0, 4] = x[1, 2]  # ties
        x[2, 2] = float("nan")
        x[3, :] = 0
        x[3, 1] = -0.0
    elif dtype == torch.int64:
        x[0, :] = 3  # all ties
    for kw in ({}, {"dim": 0}, {"descending": True}, {"dim": 0, "descending": True}):
        check(lambda a: torch.sort(a, stable=True, **kw), x)
        check(lambda a: torch.argsort(a, stable=True, **kw), x)
    check(lambda a: a.sort(), torch.tensor(1, dtype=dtype))
    check(lambda a: a.msort(), x)


def test_sort_out_and_backward():
    x = rand((3, 5))
    v, i = torch.empty(3, 5), torch.empty(3, 5, dtype=torch.long)
    check(lambda a, v, i: torch.sort(a, 1, out=(v, i)), x, v, i)
    check(lambda a: a.sort(), torch.empty(2, 0))
    check_grad(lambda a: a.sort(0, descending=True)[0], x)
    check_grad(lambda a: torch.topk(a, 2)[0], x)
    check_grad(lambda a: torch.kthvalue(a, 2, 0)[0], x)


def test_sort_topk_kthvalue_out_dtypes_are_checked():
    # Wrong out= dtypes were written (float indices) instead of refused.
    x = rand((3, 5))
    for fn in (lambda a, v, i: torch.sort(a, 1, out=(v, i)),
               lambda a, v, i: torch.topk(a, 2, out=(v, i)),
               lambda a, v, i: torch.kthvalue(a, 2, out=(v, i))):
        for vd, idx in ((torch.long, torch.long), (torch.float, torch.float),
                        (torch.float, torch.int32), (torch.double, torch.long)):
            err, cpu_err = check_error(fn, x, torch.empty(0, dtype=vd), torch.empty(0, dtype=idx))
            assert str(err).split("\n")[0] == str(cpu_err).split("\n")[0]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64], ids=str)
def test_topk(dtype):
    gen = torch.Generator().manual_seed(14)
    x = torch.randperm(30, generator=gen).reshape(5, 6).to(dtype)  # no ties
    for kw in ({}, {"largest": False}, {"dim": 0}, {"dim": 0, "largest": False}):
        check(lambda a: torch.topk(a, 3, **kw), x)
    check(lambda a: torch.topk(a, 0), x)
    check(lambda a: torch.topk(a, 6), x)
    # unsorted: the same set of values
    v, i = torch.topk(x.to(TPU), 3, sorted=False)
    assert_same(torch.topk(x, 3).values.sort(1).values, v.sort(1).values)
    assert torch.equal(x.gather(1, i.cpu()), v.cpu())
    v, i = torch.empty(5, 2, dtype=dtype), torch.empty(5, 2, dtype=torch.long)
    check(lambda a, v, i: torch.topk(a, 2, out=(v, i)), x, v, i)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.float64], ids=str)
def test_topk_ties_nan_and_errors(dtype):
    zero = torch.zeros(1)
    neg_nan = (zero / zero).item()  # x86's default NaN has the sign bit set
    x = torch.tensor([[1.0, 3.0, 3.0, 2.0, 3.0, -0.0, 0.0, float("inf")],
                      [float("nan"), 0.0, 5.0, -1.0, 2.0, neg_nan, 1.0, -float("inf")]],
                     dtype=dtype)
    for largest in (True, False):
        for k in (3, 7):
            v, i = torch.topk(x.to(TPU), k, largest=largest)
            assert_same(torch.topk(x, k, largest=largest).values, v)
            # the indices name the values
            torch.testing.assert_close(x.gather(1, i.cpu()), v.cpu(), equal_nan=True)
    big = torch.tensor([[2**63 - 1, -2**63, 0, -1, 5]])
    check(lambda a: torch.topk(a, 2, largest=False), big)
    check(lambda a: torch.topk(a, 2), big)
    check_error(lambda a: torch.topk(a, 2, dim=0), rand((3, 4), torch.bool))
    check(lambda a: torch.topk(a, 1), torch.tensor(2.0))
    check_error(lambda a: torch.topk(a, 9), x)
    check_error(lambda a: torch.topk(a, 1, dim=2), x)


def test_kthvalue():
    gen = torch.Generator().manual_seed(15)
    x = torch.randperm(24, generator=gen).reshape(4, 6).float()
    check(lambda a: torch.kthvalue(a, 3), x)
    check(lambda a: torch.kthvalue(a, 1, 0, keepdim=True), x)
    check(lambda a: torch.kthvalue(a, 4, 0), x.long())
    check(lambda a: torch.kthvalue(a, 1), torch.tensor(3.0))
    v, i = torch.empty(4), torch.empty(4, dtype=torch.long)
    check(lambda a, v, i: torch.kthvalue(a, 2, out=(v, i)), x, v, i)
    check_error(lambda a: torch.kthvalue(a, 7), x)
    check_error(lambda a: torch.kthvalue(a, 0), x)
    for empty, dim in [(torch.zeros(0), 0), (torch.zeros(3, 0), 1)]:  # an IndexError
        err, cpu_err = check_error(lambda a: torch.kthvalue(a, 1, dim), empty)
        assert str(err) == str(cpu_err)


#===--- shape ops ---===#

@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_flip_roll_tril_triu(dtype):
    x = rand((3, 4, 5), dtype)
    check(lambda a: a.flip(0, 2), x)
    check(lambda a: a.flip(-1), x)
    check(lambda a: a.roll(2, 1), x)
    check(lambda a: a.roll((-1, 7), (0, -1)), x)
    check(lambda a: a.roll(5), x)
    check(lambda a: a.tril(), x)
    check(lambda a: a.triu(2), x)
    check(lambda a: a.clone().tril_(-1), x)
    check(lambda a, o: torch.triu(a, -2, out=o), x, torch.empty(3, 4, 5, dtype=dtype))


def test_shape_ops_edges_errors_backward():
    x = rand((3, 4))
    check(lambda a: a.flip(0), torch.empty(0, 2))
    check(lambda a: a.flip(0), torch.tensor(2.0))
    check(lambda a: a.roll(3, 0), torch.empty(0, 2))
    check(lambda a: a.tril(1), torch.empty(0, 3))
    check(lambda a, o: torch.ops.aten.flip.out(a, (1,), out=o), x, torch.empty(3, 4))
    check_error(lambda a: a.flip(0, 0), x)
    check_error(lambda a: a.flip(2), x)
    check_error(lambda a: a.roll((1, 2), (0,)), x)
    check_error(lambda a: a[0].tril(), x)
    check_grad(lambda a: a.flip(1).roll(1, 0).tril(1), x)
    check_grad(lambda a: a.triu(), rand((2, 3, 3)))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64, torch.bool],
                         ids=str)
def test_pad_and_repeat(dtype):
    x = rand((2, 3, 4), dtype)
    check(lambda a: F.pad(a, (1, 2)), x)
    check(lambda a: F.pad(a, (1, -2, 0, 1), value=1), x)
    check(lambda a: F.pad(a, (0, 0, -1, -2, 2, 0)), x)
    check(lambda a: torch.constant_pad_nd(a, (-4, 1)), x)
    check(lambda a: a.repeat(2, 1, 3), x)
    check(lambda a: a.repeat(1, 2, 1, 1), x)
    check(lambda a: a.repeat(0, 1, 1), x)
    check(lambda a: a.repeat(2, 3), torch.tensor(True) if dtype == torch.bool else
          torch.tensor(2, dtype=dtype))


def test_pad_repeat_unfold_errors_and_backward():
    x = rand((2, 3, 4))
    check_error(lambda a: F.pad(a, (1,)), x)
    check_error(lambda a: torch.constant_pad_nd(a, (1, 1) * 4), x)
    check_error(lambda a: F.pad(a, (-3, -2)), x)
    check_error(lambda a: a.repeat(2, 2), x)
    check(lambda a: F.pad(a, (1, 1)), torch.empty(2, 0))
    check_grad(lambda a: F.pad(a, (2, -1, 1, 0), value=3.0), x)
    check_grad(lambda a: a.repeat(2, 1, 1, 2), x)
    check_grad(lambda a: a.unfold(2, 2, 1), x)
    check_grad(lambda a: a.unfold(1, 2, 2), x)
    check_grad(lambda a: a.unfold(0, 1, 3), x)
    check_grad(lambda a: a.unfold(0, 1, 1), torch.tensor(2.5))  # 0-d: unfolds to [1]


def test_fused_mode():
    """A chain of these ops recorded and run as one program; a bad index
    among them still surfaces at the synchronization."""
    x = rand((6, 5))
    i = torch.tensor([4, 0, 2])
    m = x > 0.3

    def chain(a, i, m):
        a = a.index_select(0, i).gather(1, i.reshape(3, 1).expand(3, 2).flip(0))
        b = a.flip(0).roll(1, 1)
        c = torch.cat([b, a], 1).clone()
        c[c > 0] = 0.5
        v, _ = torch.topk(c, 2)  # (c has ties, whose topk order PyTorch leaves open)
        return v, torch.sort(c, dim=0, stable=True), m.nonzero(), c.masked_fill(c < 0, 2.0)
    expected = chain(x, i, m)
    with torchtpu.mode("fused"), NoFallback():
        actual = chain(*to_tpu([x, i, m]))
    assert_same(expected, actual)
    xt = x.to(TPU)
    with torchtpu.mode("fused"):
        bad = xt.index_select(0, torch.tensor([6], device=TPU)) + 1
        with pytest.raises(IndexError):
            torch.tpu.synchronize()
        assert_same(x.flip(1), xt.flip(1))
    del bad


def test_narrow_copy():
    x = torch.randn(6, 3)
    check(lambda t: torch.narrow_copy(t, 0, 2, 3), x)
    check(lambda t: torch.narrow_copy(t, -1, -2, 2), x)
    check(lambda t: torch.narrow_copy(t, 0, 6, 0), x)
    check(lambda t: torch.narrow_copy(t, 1, 1, 2, out=torch.empty(0, device=t.device)), x)
    check_error(lambda t: torch.narrow_copy(t, 0, 7, 1), x)  # IndexError
    check_error(lambda t: torch.narrow_copy(t, 0, 4, 3), x)


@pytest.mark.parametrize("reduce", ["prod", "mean", "amax", "amin"])
def test_index_reduce(reduce):
    idx = torch.tensor([1, 3, 1, 0])
    for dtype in (torch.float32, torch.int64):
        x = torch.randn(5, 3).mul(4).to(dtype)
        src = torch.randn(4, 3).mul(4).to(dtype)
        for include_self in (True, False):
            check(lambda a, s: a.index_reduce(0, idx.to(a.device), s, reduce,
                                              include_self=include_self), x, src)
            check(lambda a, s: a.clone().index_reduce_(1, torch.tensor([2, 0], device=a.device),
                                                       s, reduce, include_self=include_self),
                  x, torch.randn(2, 5).mul(4).to(dtype).t())  # non-contiguous source
    check_error(lambda a, s: a.index_reduce(0, torch.tensor([1, 9, 1, 0], device=a.device), s,
                                            reduce), torch.randn(5, 3), torch.randn(4, 3))
    check_error(lambda a, s: a.index_reduce(0, idx.to(a.device), s, "sum"),
                torch.randn(5, 3), torch.randn(4, 3))


def test_gather_empty_index_of_any_dtype():
    # CPU reads no index, so it does not check the index dtype.
    check(lambda x, i: torch.gather(x, 0, i), torch.randn(5), torch.empty(0, dtype=torch.uint8))


def test_bucketize_searchsorted():
    b = torch.tensor([1.0, 3.0, 5.0, 7.0])
    v = torch.tensor([[0.0, 1.0, 2.0], [7.0, 8.0, math.nan]])
    for right in (False, True):
        check(lambda x, s: torch.bucketize(x, s, right=right), v, b)
        check(lambda x, s: torch.bucketize(x, s, out_int32=True, right=right), v, b)
        check(lambda s: torch.bucketize(3, s, right=right), b)
        check(lambda s, x: torch.searchsorted(s, x, right=right), b, v)
    seq = torch.tensor([[1.0, 3.0, 5.0], [2.0, 4.0, 6.0]])
    check(lambda s, x: torch.searchsorted(s, x, side="right"), seq, torch.tensor([[3.0, 0.0], [4.0, 9.0]]))
    check(lambda s: torch.searchsorted(s, 4.0), seq[0])
    check(lambda s, x, o: torch.searchsorted(s, x, sorter=o), torch.tensor([5.0, 1.0, 3.0]),
          torch.tensor([3.0, 4.0]), torch.tensor([1, 2, 0]))
    check(lambda x, s: torch.bucketize(x, s), torch.arange(10), torch.tensor([2, 4, 6]))
    check_error(lambda x, s: torch.bucketize(x, s), v, torch.ones(2, 2))
    check_error(lambda s, x: torch.searchsorted(s, x), seq, torch.tensor([[3.0, 1.0]]))
    check_error(lambda s, x: torch.searchsorted(s, x, side="left", right=True), b, v)


@pytest.mark.parametrize("n", [1, 2, 7, 64, 1000])
def test_searchsorted_follows_cpus_binary_search(n):
    # A sort puts NaNs last; CPU's binary search then gives answers that no
    # count of smaller boundaries gives (0.5 before [1, 2, nan] is 0, not 1).
    g = torch.Generator().manual_seed(n)
    b = torch.sort(torch.randn(n, generator=g))[0]
    b[n - max(1, n // 5):] = math.nan
    v = torch.cat([torch.randn(50, generator=g) * 2, torch.tensor([math.nan, -math.inf, math.inf])])
    order = torch.randperm(n, generator=g)
    unsorted = torch.empty_like(b).scatter_(0, order, b)  # b == unsorted[order]
    for right in (False, True):
        check(lambda s, x: torch.searchsorted(s, x, right=right), b, v)
        check(lambda x, s: torch.bucketize(x, s, right=right), v, b)
        check(lambda s, x, o: torch.searchsorted(s, x, right=right, sorter=o), unsorted, v, order)
        rows = torch.stack([b, b.flip(0)])  # a batch of sequences, one not sorted at all
        check(lambda s, x: torch.searchsorted(s, x, right=right), rows, torch.stack([v, v]))


def test_histc():
    x = torch.tensor([0.0, 1.0, 2.0, 2.0, 3.0, 5.0, math.nan, -1.0])
    check(lambda a: torch.histc(a, bins=4, min=0, max=3), x)
    check(lambda a: torch.histc(a, bins=4), x[:6])  # the data's range
    check(lambda a: torch.histc(a, bins=4), torch.tensor([2.0, 2.0]))  # an empty range
    check(lambda a: torch.histc(a, bins=7, min=-2, max=2), torch.randn(500))
    check(lambda a: torch.histc(a, bins=5), torch.randn(100).to(torch.bfloat16))
    check_error(lambda a: torch.histc(a, bins=0), x)
    check_error(lambda a: torch.histc(a, bins=4, min=3, max=1), x)
    with pytest.raises(RuntimeError, match="not finite"):
        torch.histc(x.to("tpu"), bins=4).cpu()


def test_unique():
    x = torch.tensor([3.0, 1.0, 2.0, 3.0, math.nan, 1.0, math.nan])
    for inv in (False, True):
        for cnt in (False, True):
            check(lambda a: torch.unique(a, return_inverse=inv, return_counts=cnt), x)
            check(lambda a: torch.unique(a, sorted=False, return_inverse=inv, return_counts=cnt),
                  torch.randint(0, 5, (4, 6)))
            check(lambda a: torch.unique_consecutive(a, return_inverse=inv, return_counts=cnt),
                  torch.tensor([1, 1, 2, 2, 3, 1, 1]))
    check(lambda a: torch.unique(a, return_inverse=True, return_counts=True), torch.tensor(5.0))
    check(lambda a: torch.unique(a, return_inverse=True, return_counts=True), torch.empty(0, 3))
    check(lambda a: torch.unique(a, return_inverse=True), torch.tensor([True, False, True]))
    check(lambda a: torch.unique(a), torch.randn(50).to(torch.bfloat16).round())
    # unique_consecutive along a dim runs on the CPU, counted
    before = fallbacks().get("aten::unique_consecutive", 0)
    check(lambda a: torch.unique_consecutive(a, dim=0), torch.tensor([[1, 2], [1, 2], [3, 4]]),
          fallback_ok=True)
    assert fallbacks().get("aten::unique_consecutive", 0) == before + 1


def test_nonzero_static_of_an_empty_tensor():
    # (the coordinate math once divided by a zero stride: a SIGFPE)
    check(lambda a: torch.nonzero_static(a, size=3), torch.ones(5, 0, 5))
    check(lambda a: torch.nonzero_static(a, size=2, fill_value=-7), torch.ones(0, 2))


#===--- device-side index errors: PyTorch's types and messages ---===#

def _index_error_cases():
    def cases(shape):
        def idx(i):  # i as an index along dim 0 for gather/scatter
            return i.view((2,) + (1,) * (len(shape) - 1)).expand((2,) + shape[1:]).contiguous()
        src = lambda d: torch.ones((2,) + shape[1:], device=d)
        return {
            "index": lambda x, i: x[i],
            "index_put": lambda x, i: x.index_put_((i,), src(x.device)),
            "gather": lambda x, i: x.gather(0, idx(i)),
            "scatter": lambda x, i: x.scatter_(0, idx(i), src(x.device)),
            "index_add": lambda x, i: x.index_add_(0, i, src(x.device)),
            "index_copy": lambda x, i: x.index_copy_(0, i, src(x.device)),
            "index_fill": lambda x, i: x.index_fill_(0, i, 1.0),
            "index_select": lambda x, i: x.index_select(0, i),
            "take": lambda x, i: x.take(i),
            "put": lambda x, i: x.put_(i, torch.ones(2, device=x.device)),
            "nll_loss": lambda x, i: F.nll_loss(x.reshape(4, -1)[:2], i),
        }
    return [(shape, bad, name, fn) for shape in [(4,), (4, 3)]
            for bad in [(9, 11), (-9, 10), (-1, 7)] for name, fn in cases(shape).items()]


@pytest.mark.parametrize("shape,bad,name,fn", _index_error_cases(),
                         ids=lambda v: v if isinstance(v, str) else str(v))
def test_device_side_index_errors_match_pytorch(shape, bad, name, fn):
    # The indices are read on the device, so the error comes at the sync;
    # its type and message (naming the first offending index) are PyTorch's.
    i = torch.tensor(bad)
    try:
        fn(torch.zeros(shape), i)
        cpu = None
    except Exception as e:
        cpu = e
    try:
        fn(torch.zeros(shape, device=TPU), i.to(TPU))
        torch.tpu.synchronize()
        tpu = None
    except Exception as e:
        tpu = e
    assert type(tpu) is type(cpu), (cpu, tpu)
    if cpu is not None:  # PyTorch's message, then where the check was recorded
        message, where = str(tpu).split("\n")
        assert message == str(cpu).splitlines()[0]
        assert where.startswith(f"(checked on the device by ") and "test_ops_index.py:" in where


#===--- out= tensors that overlap: PyTorch's checks ---===#

def _ranged(d, n):
    return torch.arange(float(n), device=d)


OVERLAPS = {  # each returns the tensor written
    "partial with an input": lambda d: (
        a := _ranged(d, 6), torch.add(a[:4], 1, out=a[2:]))[0],
    "the input itself": lambda d: (a := _ranged(d, 6), torch.add(a, 1, out=a))[0],
    "disjoint, same storage": lambda d: (
        a := _ranged(d, 8), torch.mul(a[:4], 2, out=a[4:]))[0],
    "writes an element twice": lambda d: torch.index_select(
        _ranged(d, 18).view(3, 6), 0, torch.tensor([0, 2], device=d),
        out=torch.empty(1, 6, device=d).expand(2, 6)),
    "gather into its input": lambda d: (
        a := _ranged(d, 6), torch.gather(a, 0, torch.tensor([1, 0, 2, 3, 4, 5], device=d),
                                          out=a))[0],
    "cat into one of its inputs": lambda d: (a := _ranged(d, 4), torch.cat([a, a], out=a))[0],
    "cat next to its inputs": lambda d: (
        a := _ranged(d, 8), torch.cat([a[:2], a[2:4]], out=a[4:]))[0],
    "in place, elements shared": lambda d: torch.zeros(2, 1, device=d).expand(2, 3).add_(1),
    # filling writes one value to every alias: allowed
    "fill_ of an expanded tensor": lambda d: torch.zeros(2, 1, device=d).expand(2, 3).fill_(2.5),
    "zero_ of an expanded tensor": lambda d: _ranged(d, 2).view(2, 1).expand(2, 3).zero_(),
    "half fill_ of an expanded tensor": lambda d: torch.zeros(
        1, dtype=torch.float16, device=d).expand(4).fill_(3),
    # in place: TensorIterator's ops (copy_ among them) refuse a partial
    # overlap of self with another input, the ops that scatter any overlap
    "copy_ from a shifted view": lambda d: (
        a := _ranged(d, 6), a[1:].copy_(a[:-1]))[0],
    "copy_ from its transpose": lambda d: (
        a := _ranged(d, 9).view(3, 3), a.copy_(a.t()))[0],
    "copy_ from the same elements": lambda d: (a := _ranged(d, 6), a[2:].copy_(a[2:]))[0],
    "copy_ between disjoint views": lambda d: (a := _ranged(d, 6), a[3:].copy_(a[:3]))[0],
    "add_ of a shifted view": lambda d: (a := _ranged(d, 6), a[1:].add_(a[:-1]))[0],
    "mul_ by its first row": lambda d: (a := _ranged(d, 6).view(2, 3), a.mul_(a[0]))[0],
    "clamp_ to one of its elements": lambda d: (
        a := _ranged(d, 6), a.clamp_(max=a[3]))[0],
    "lerp_ towards a shifted view": lambda d: (
        a := _ranged(d, 6), a[1:].lerp_(a[:-1], 0.5))[0],
    "add_ of a disjoint view": lambda d: (a := _ranged(d, 6).view(2, 3), a[1].add_(a[0]))[0],
    "foreach add_ of shifted views": lambda d: (
        a := _ranged(d, 6), torch._foreach_add_([a[1:]], [a[:-1]]))[0],
    "fill_ with one of its elements": lambda d: (a := _ranged(d, 6), a.fill_(a[2]))[0],
    "index_add_ of its own rows": lambda d: (
        a := _ranged(d, 8).view(4, 2),
        a[:2].index_add_(0, torch.tensor([1, 0], device=d), a[:2]))[0],
    "index_copy_ of a shifted view": lambda d: (
        a := _ranged(d, 8).view(4, 2),
        a[:2].index_copy_(0, torch.tensor([1, 0], device=d), a[1:3]))[0],
    "scatter_add_ of its own rows": lambda d: (
        a := _ranged(d, 8).view(4, 2),
        a[:2].scatter_add_(0, torch.zeros(2, 2, dtype=torch.long, device=d), a[:2]))[0],
    "put_ of its own elements": lambda d: (
        a := _ranged(d, 6), a.put_(torch.tensor([0, 1], device=d), a[4:]))[0],
    "index_put_ of its own rows": lambda d: (
        a := _ranged(d, 8).view(4, 2), a.index_put_((torch.tensor([1, 0], device=d),), a[2:]))[0],
    "setitem from a shifted view": lambda d: (
        a := _ranged(d, 8).view(4, 2), a[1:].__setitem__(torch.tensor([0, 1], device=d), a[:2]))[0],
    "index_add_ from a disjoint view": lambda d: (
        a := _ranged(d, 8).view(4, 2),
        a[:2].index_add_(0, torch.tensor([1, 0], device=d), a[2:]))[0],
    "masked fill through index_put_ with its own element": lambda d: (
        a := _ranged(d, 6), a.index_put_((a > 2,), a[0]))[0],
}


@pytest.mark.parametrize("name", OVERLAPS)
def test_out_overlap_matches_pytorch(name):
    def outcome(device):
        try:
            return OVERLAPS[name](device)
        except RuntimeError as e:
            return str(e)
    cpu, tpu = outcome("cpu"), outcome(TPU)
    if isinstance(cpu, str):
        assert tpu == cpu and "unsupported operation" in cpu
    else:
        assert_same(cpu, tpu)


@pytest.mark.parametrize("op", ["index_add", "index_copy", "index_reduce"])
def test_index_source_shape_errors_match_cpu(op):
    # (self shape, source shape, index length): CPU's checks, in CPU's order;
    # a 0-d self with a 1-element source, and the reverse, are refused by
    # index_add and index_reduce (they were accepted)
    cases = [((3, 2), (2,), 2), ((3, 2), (2, 3), 2), ((3, 2), (3, 2), 2), ((3, 2), (2, 2, 1), 2),
             ((3,), (2, 2), 2), ((3, 2), (2, 2), 3), ((), (1,), 1), ((3,), (), 1),
             ((3, 2, 4), (2, 3, 5), 2), ((), (2,), 2), ((3,), (), 2)]
    fn = getattr(torch, op) if op != "index_reduce" else (
        lambda x, d, i, s: x.index_reduce(d, i, s, "prod"))
    for xs, ss, m in cases:
        x, s, i = torch.zeros(xs), torch.ones(ss), torch.zeros(m, dtype=torch.long)
        try:
            fn(x, 0, i, s)
            cpu = None
        except Exception as e:  # the outcome under test
            cpu = e
        if cpu is None:
            check(lambda a, b, c: fn(a, 0, b, c), x, i, s)
            continue
        tpu_err, cpu_err = check_error(lambda a, b, c: fn(a, 0, b, c), x, i, s)
        assert str(tpu_err) == str(cpu_err), (xs, ss, m)


def test_repeat_interleave():
    # The length is the sum of the repeats, read back unless output_size
    # gives it; repeat_interleave of a tensor indexes with the result.
    for repeats in (torch.tensor([2, 0, 3]), torch.tensor([1, 1, 1], dtype=torch.int32),
                    torch.tensor([], dtype=torch.long), torch.tensor([0, 0])):
        check(torch.repeat_interleave, repeats)
    check(lambda r: torch.repeat_interleave(r, output_size=3), torch.tensor([2, 1]))
    x = torch.randn(3, 2)
    check(lambda x, r: x.repeat_interleave(r, dim=0), x, torch.tensor([1, 2, 0]))
    check(lambda x, r: x.repeat_interleave(r, dim=1, output_size=4), x, torch.tensor([3, 1]))
    check(lambda x: x.repeat_interleave(2), x)
    check_grad(lambda x, r: x.repeat_interleave(r, dim=0), x, torch.tensor([1, 2, 0]))
    for bad, kwargs in [(torch.tensor([1, -1]), {}), (torch.tensor([-3, 1]), {}),
                        (torch.tensor([[1]]), {}), (torch.tensor([1.0]), {}),
                        (torch.tensor([2, 1]), {"output_size": 5})]:
        tpu_err, cpu_err = check_error(lambda r: torch.repeat_interleave(r, **kwargs), bad)
        assert str(tpu_err).splitlines()[0] == str(cpu_err).splitlines()[0]


def test_bincount():
    # The number of bins comes from the largest value (read back with the
    # smallest, which must not be negative) or minlength.
    x = torch.tensor([1, 3, 3, 0, 7, 3])
    check(torch.bincount, x)
    check(lambda x: torch.bincount(x, minlength=10), x)
    check(torch.bincount, x.to(torch.uint8))
    check(lambda x: torch.bincount(x, minlength=3), torch.tensor([], dtype=torch.long))
    for weights in (torch.rand(6), torch.rand(6).double(), torch.rand(6).half(),
                    torch.arange(6), torch.tensor([True, False] * 3)):
        check(torch.bincount, x, weights)
    for bad, kwargs in [(torch.tensor([-1, 2]), {}), (torch.tensor([[1]]), {}),
                        (torch.tensor([1.0]), {}), (x, {"minlength": -1}),
                        (x, {"weights": torch.rand(3)}), (torch.tensor([True]), {})]:
        tpu_err, cpu_err = check_error(lambda x, kw: torch.bincount(x, **kw), bad, kwargs)
        assert str(tpu_err).splitlines()[0] == str(cpu_err).splitlines()[0]


def test_mask_assignment_of_a_cpu_number_of_another_dtype():
    # PyTorch makes `x[mask] = value` with one mask and a single CPU value a
    # masked_fill_, which converts the value: no dtype check as for index_put_.
    def assign(x, value, index):
        x = x.clone()
        x[index(x)] = value
        return x

    for x, value in [(torch.arange(4.0), torch.tensor(0)),
                     (torch.arange(4.0), torch.tensor(2.5, dtype=torch.float64)),
                     (torch.arange(4), torch.tensor(2.7)),
                     (torch.arange(12.0).reshape(3, 4), torch.tensor([7]))]:
        check(lambda a: assign(a, value, lambda t: t > 1), x)
    x = torch.arange(12.0).reshape(3, 4)
    check(lambda a: assign(a, torch.tensor(5), lambda t: (slice(None), t[0] > 1)), x)
    check(lambda a: assign(a, torch.tensor(5), lambda t: t[:, 0] > 3), x)  # rows: broadcast


def test_scatter_of_a_number_that_does_not_fit_the_dtype_is_refused():
    # As CPU's (and CUDA's) Scalar::to<T>(): 300 into int8 raised there and
    # was written here as 44; 1e5 into float16 as inf.
    idx = torch.tensor([[1]])
    for x, v in [(torch.zeros(2, 3, dtype=torch.int8), 300), (torch.zeros(2, 3, dtype=torch.int8), -129),
                 (torch.zeros(2, 3, dtype=torch.float16), 1e5),
                 (torch.zeros(2, 3, dtype=torch.bfloat16), 1e39)]:
        err, cpu_err = check_error(lambda a, i: a.scatter_(0, i, v), x, idx)
        assert str(err).splitlines()[0] == str(cpu_err).splitlines()[0]
    check(lambda a, i: a.scatter(0, i, 127), torch.zeros(2, 3, dtype=torch.int8), idx)
    check(lambda a, i: a.scatter(0, i, 2.5, reduce="add"), torch.ones(2, 3), idx)


def test_a_mask_with_no_true_element_takes_an_empty_value_tensor():
    # torch.distributions' kl_divergence(Binomial, Binomial) writes
    # x[m] = x[m] with m all false; the gather from no values failed to compile.
    def assign(x, m, v):
        x = x.clone()
        x[m] = v
        return x
    x = torch.arange(6.0).reshape(2, 3)
    check(assign, x, torch.zeros(2, 3, dtype=torch.bool), torch.empty(0))
    check(assign, x, torch.zeros(2, dtype=torch.bool), torch.empty(0, 3))
    check_error(assign, x, torch.tensor([True, False]), torch.empty(0, 3))
    p, q = torch.tensor([0.25, 0.9]), torch.tensor([0.5, 0.5])
    kl = lambda p, q: torch.distributions.kl_divergence(torch.distributions.Binomial(10, p),
                                                        torch.distributions.Binomial(10, q))
    check(kl, p, q, atol=1e-5, rtol=1e-5)


def test_dtypes_without_a_kernel_raise_cpus_exception_types():
    # CPU (and CUDA) have no bool kthvalue or bool scans, and refuse to sort
    # complex numbers with a RuntimeError (kthvalue's is NotImplementedError).
    b, z = torch.tensor([True, False, True]), torch.tensor([1j, 2 + 0j])
    for fn, x in [(lambda a: torch.kthvalue(a, 1), b), (lambda a: torch.kthvalue(a, 1), z),
                  (lambda a: torch.cumsum(a, 0, dtype=torch.bool), torch.ones(2)),
                  (lambda a: torch.cumprod(a, 0, dtype=torch.bool), torch.ones(2)),
                  (lambda a: a.clone().cumsum_(0), b), (lambda a: a.clone().cumprod_(0), b),
                  (lambda a: torch.sort(a), z),
                  (lambda a: torch.argsort(a), z), (lambda a: torch.topk(a, 1), z)]:
        check_error(fn, x)
    check(lambda a: torch.cumsum(a, 0), b)  # bool input, int64 result: fine
    i8 = torch.tensor([100, 100, 100], dtype=torch.int8)  # in place: wraps in int8, as CPU
    check(lambda a: a.clone().cumsum_(0), i8)
    check(lambda a: a.clone().cumprod_(0), i8)
