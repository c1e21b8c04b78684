"""Core ATen probes: every overload tagged torch.Tag.core, called directly
(torch.ops.aten.X.overload) on tpu and on CPU, for float32 and bfloat16.

How an overload gets its inputs (the mapping from Core ATen to OpInfo):
  1. captured: the OpInfo samples run on CPU under a TorchDispatchMode that
     records the calls of core overloads below autograd and below
     CompositeImplicitAutograd decompositions. The first CAPTURES distinct
     calls (by argument shapes, dtypes and values) per (overload, dtype) are
     replayed. The OpInfo entries they came from are recorded ("sources").
  2. cast: no bfloat16 call captured, but a float32 one was: its float32
     tensors and dtype arguments are cast to bfloat16.
  3. probe: no call captured at all: a small hand-written sample (PROBES).
Each replay runs the overload alone, so its class is the overload's own:
native (all matched, no fallback), fallback, fail, error; skip when CPU
raises for every call (CPU does not support the dtype) or there is no input.
"""
import math

import torch
from torch.utils._python_dispatch import TorchDispatchMode

import opinfo_harness as H

CAPTURES = 3
PROBE_DTYPES = (torch.float32, torch.bfloat16)
SAMPLES_PER_OP = 6  # OpInfo samples scanned per (op, dtype) while capturing
META_ONLY = {"aten.empty.memory_format", "aten.empty_strided.default", "aten.rand.default",
             "aten.randn.default", "aten.randperm.default", "aten.native_dropout.default",
             "aten.resize_.default"}


def core_overloads():
    """The core ATen overloads of this torch version, sorted by name."""
    out = []
    for name in torch._C._dispatch_get_all_op_names():
        if not name.startswith("aten::"):
            continue
        base, _, overload = name[len("aten::"):].partition(".")
        try:
            op = getattr(getattr(torch.ops.aten, base), overload or "default")
        except (AttributeError, RuntimeError):
            continue
        if torch.Tag.core in op.tags:
            out.append(op)
    return sorted(out, key=str)


def _first_dtype(args, kwargs):
    """The dtype a call is filed under: its first floating or complex tensor's
    (a where's condition or an index does not count), else its first
    tensor's, else its dtype argument's."""
    ts = list(H._tensors((args, kwargs)))
    for t in ts:
        if t.is_floating_point() or t.is_complex():
            return t.dtype
    if ts:
        return ts[0].dtype
    d = kwargs.get("dtype")
    return d if isinstance(d, torch.dtype) else torch.get_default_dtype()


def _signature(args, kwargs):
    def sig(x):
        if isinstance(x, torch.Tensor):
            return f"T{tuple(x.shape)}{x.dtype}"
        if isinstance(x, (list, tuple)):
            return "[" + ",".join(sig(v) for v in x) + "]"
        if isinstance(x, dict):
            return "{" + ",".join(f"{k}:{sig(v)}" for k, v in sorted(x.items())) + "}"
        return repr(x)
    return sig((args, kwargs))


class Capture(TorchDispatchMode):
    """Records calls of the given overloads (cloned arguments)."""

    def __init__(self, wanted, store, source, dtypes):
        super().__init__()
        self.wanted, self.store, self.source, self.dtypes = wanted, store, source, dtypes

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = str(func)
        if name in self.wanted:
            dtype = _first_dtype(args, kwargs)
            if dtype in self.dtypes:
                calls = self.store.setdefault((name, dtype), {})
                if len(calls) < CAPTURES:
                    sig = _signature(args, kwargs)
                    if sig not in calls:
                        calls[sig] = (H._clone(list(args)), H._clone(dict(kwargs)), self.source)
        return func(*args, **kwargs)


def capture(db, wanted, dtypes=PROBE_DTYPES, progress=None):
    """{(overload name, dtype): [(args, kwargs, source)]} from the OpInfo
    samples (CPU only)."""
    store = {}
    for key, op in db:
        for dtype in dtypes:
            if dtype not in H.dtypes_of(op):
                continue
            try:
                samples = H._samples(op, dtype)[:SAMPLES_PER_OP]
            except Exception:  # noqa: BLE001 (an OpInfo that cannot make samples)
                continue
            for s in samples:
                try:
                    with torch.no_grad(), Capture(wanted, store, key, dtypes):
                        op(H._clone(s.input), *H._clone(s.args), **H._clone(s.kwargs))
                except Exception:  # noqa: BLE001 (the sample raises on CPU)
                    pass
        if progress:
            progress(key)
    return {k: list(v.values()) for k, v in store.items()}


def _cast(x, dtype):
    if isinstance(x, torch.Tensor):
        return x.to(dtype) if x.dtype == torch.float32 else x
    if isinstance(x, torch.dtype):
        return dtype if x == torch.float32 else x
    if isinstance(x, list):
        return [_cast(v, dtype) for v in x]
    if isinstance(x, tuple):
        return tuple(_cast(v, dtype) for v in x)
    if isinstance(x, dict):
        return {k: _cast(v, dtype) for k, v in x.items()}
    return x


def _r(*shape, dtype=torch.float32, lo=-2.0, hi=2.0):
    g = torch.Generator().manual_seed(sum(shape) + 7)
    return (torch.rand(shape, generator=g) * (hi - lo) + lo).to(dtype)


def _i(*shape, hi=3):
    g = torch.Generator().manual_seed(sum(shape) + 11)
    return torch.randint(0, hi, shape, generator=g)


def _probes(name, dtype):
    """Hand-written calls [(args, kwargs)] for overloads no OpInfo sample
    reaches; dtype is the floating dtype under test."""
    f = lambda *s, **k: _r(*s, dtype=dtype, **k)  # noqa: E731
    cpu = torch.device("cpu")
    table = {
        "aten._adaptive_avg_pool2d_backward.default": [([f(1, 2, 3, 3), f(1, 2, 6, 6)], {})],
        "aten._native_batch_norm_legit.no_stats": [([f(2, 3, 4), None, None, True, 0.1, 1e-5], {})],
        "aten._native_batch_norm_legit.default": [
            ([f(2, 3, 4), f(3), f(3), torch.zeros(3, dtype=dtype), torch.ones(3, dtype=dtype),
              True, 0.1, 1e-5], {})],
        "aten._native_batch_norm_legit_no_training.default": [
            ([f(2, 3, 4), f(3), f(3), f(3), _r(3, lo=0.5, hi=1.5, dtype=dtype), 0.1, 1e-5], {})],
        "aten._pdist_forward.default": [([f(4, 3), 2.0], {})],
        "aten._cdist_forward.default": [([f(2, 4, 3), f(2, 5, 3), 2.0, None], {})],
        "aten.alias.default": [([f(3, 4)], {})],
        "aten._embedding_bag.default": [([f(6, 3), _i(8, hi=6), torch.tensor([0, 3, 5]), False, 0],
                                         {}),
                                        ([f(6, 3), _i(8, hi=6), torch.tensor([0, 3, 5]), False, 1],
                                         {})],
        "aten._fft_c2r.default": [([_r(3, 5, dtype=torch.complex64 if dtype == torch.float32
                                       else dtype), [1], 0, 8], {})],
        "aten.adaptive_avg_pool1d.default": [([f(2, 3, 8), [4]], {}), ([f(2, 3, 7), [3]], {})],
        "aten.avg_pool1d.default": [([f(2, 3, 8), [2], [2], [0], False, True], {})],
        "aten.bitwise_and.Scalar": [([f(3, 4), 1], {})],
        "aten.bitwise_and.Tensor": [([f(3, 4), f(3, 4)], {})],
        "aten.bitwise_not.default": [([f(3, 4)], {})],
        "aten.bitwise_or.Scalar": [([f(3, 4), 1], {})],
        "aten.bitwise_or.Tensor": [([f(3, 4), f(3, 4)], {})],
        "aten.bitwise_xor.Scalar": [([f(3, 4), 1], {})],
        "aten.bitwise_xor.Tensor": [([f(3, 4), f(3, 4)], {})],
        "aten.div.Scalar_mode": [([f(3, 4), 0.7], {"rounding_mode": "floor"}),
                                 ([f(3, 4), -1.5], {"rounding_mode": "trunc"})],
        "aten.fmod.Scalar": [([f(3, 4), 0.7], {}), ([f(3, 4), -1.5], {})],
        "aten.gt.Scalar": [([f(3, 4), 0.25], {})],
        "aten.native_dropout.default": [([f(3, 4), 0.5, True], {}), ([f(3, 4), 0.5, False], {})],
        "aten.pow.Scalar": [([2.0, f(3, 4)], {}), ([0.5, f(3, 4)], {})],
        "aten.reflection_pad2d.default": [([f(1, 2, 4, 5), [1, 2, 2, 1]], {})],
        "aten.reflection_pad3d.default": [([f(1, 2, 3, 4, 5), [1, 2, 2, 1, 1, 1]], {})],
        "aten.replication_pad3d.default": [([f(1, 2, 3, 4, 5), [1, 2, 2, 1, 1, 1]], {})],
        "aten.remainder.Scalar": [([f(3, 4), 0.7], {}), ([f(3, 4), -1.5], {})],
        "aten.scatter.value": [([f(3, 4), 1, _i(3, 2, hi=4), 1.5], {})],
        "aten.where.self": [([f(3, 4) > 0, f(3, 4), f(1, 4)], {})],
        "aten.any.dims": [([f(3, 4) > 0, [0, 1]], {})],
        "aten.atan2.out": [([f(3, 4), f(3, 4)], {"out": torch.empty(3, 4, dtype=dtype)})],
        "aten.avg_pool2d_backward.default": [
            ([f(1, 2, 2, 2), f(1, 2, 4, 4), [2, 2], [2, 2], [0, 0], False, True, None], {})],
        "aten.col2im.default": [([f(1, 4, 9), [4, 4], [2, 2], [1, 1], [0, 0], [1, 1]], {})],
        "aten.convolution_backward.default": [
            ([f(1, 2, 3, 3), f(1, 3, 5, 5), f(2, 3, 3, 3), [2], [1, 1], [0, 0], [1, 1], False,
              [0, 0], 1, [True, True, True]], {})],
        "aten.copy.default": [([f(3, 4), f(3, 4)], {})],
        "aten.embedding_dense_backward.default": [([f(5, 3), _i(5, hi=4), 4, -1, False], {})],
        "aten.empty.memory_format": [([[2, 3]], {"dtype": dtype, "device": cpu})],
        "aten.empty_strided.default": [([[2, 3], [3, 1]], {"dtype": dtype, "device": cpu})],
        "aten.fill.Scalar": [([f(3, 4), 1.5], {})],
        "aten.full.default": [([[2, 3], 1.5], {"dtype": dtype, "device": cpu})],
        "aten.full_like.default": [([f(2, 3), 2.5], {})],
        "aten.grid_sampler_2d.default": [([f(1, 2, 4, 4), _r(1, 3, 3, 2, lo=-1, hi=1, dtype=dtype),
                                           0, 0, False], {})],
        "aten.max_pool2d_with_indices_backward.default": [
            ([f(1, 1, 2, 2), f(1, 1, 4, 4), [2, 2], [2, 2], [0, 0], [1, 1], False,
              torch.tensor([[[[0, 3], [9, 14]]]])], {})],
        "aten.native_group_norm_backward.default": [
            ([f(2, 4, 3), f(2, 4, 3), f(2, 2), _r(2, 2, lo=0.5, hi=1.5, dtype=dtype), f(4), 2, 4, 3, 2,
              [True, True, True]], {})],
        "aten.native_layer_norm_backward.default": [
            ([f(2, 3, 4), f(2, 3, 4), [4], f(2, 3, 1), _r(2, 3, 1, lo=0.5, hi=1.5, dtype=dtype),
              f(4), f(4), [True, True, True]], {})],
        "aten.rand.default": [([[2, 3]], {"dtype": dtype, "device": cpu})],
        "aten.randn.default": [([[2, 3]], {"dtype": dtype, "device": cpu})],
        "aten.randperm.default": [([7], {"device": cpu})],
        "aten.resize_.default": [([f(3, 4), [2, 3]], {})],
        "aten.scalar_tensor.default": [([2.5], {"dtype": dtype, "device": cpu})],
        "aten.select_scatter.default": [([f(3, 4), f(4), 0, 1], {})],
        "aten.slice_scatter.default": [([f(4, 4), f(2, 4), 0, 1, 3, 1], {})],
        "aten.squeeze.dims": [([f(3, 1, 4, 1), [1, 3]], {})],
        "aten.sym_is_contiguous.default": [([f(3, 4)], {})],
        "aten.sym_numel.default": [([f(3, 4)], {})],
        "aten.sym_size.int": [([f(3, 4), 1], {})],
        "aten.sym_storage_offset.default": [([f(3, 4)], {})],
        "aten.sym_stride.int": [([f(3, 4), 0], {})],
        "aten.upsample_bilinear2d.vec": [([f(1, 2, 3, 3), None, False, [2.0, 2.0]], {})],
        "aten.upsample_nearest2d.vec": [([f(1, 2, 3, 3), None, [2.0, 2.0]], {})],
        "aten.var.dim": [([f(3, 4), [1], True, False], {})],
    }
    return table.get(name, [])


def _tie_check(name, args):
    """sort and topk: indices among equal values are unspecified."""
    if name not in ("aten.sort.default", "aten.topk.default"):
        return None
    x = args[0]

    def check(expected, actual):
        H._tie_compare(x, expected, actual, 0.0, 0.0, False)
    return check


def probe(op, dtype, calls, origin):
    """Replays calls of one overload; returns a result dict."""
    name = str(op)
    res = H.CaseResult()
    atol, rtol = H._DEFAULT_TOL.get(dtype, (0.0, 0.0))
    meta_only = name in META_ONLY
    for k, (args, kwargs, *_) in enumerate(calls):
        def run_cpu(args=args, kwargs=kwargs):
            return op(*H._clone(args), **H._clone(kwargs))

        def run_tpu(args=args, kwargs=kwargs):
            return op(*H._to_tpu(args), **H._to_tpu(kwargs))
        # (a CPU error means CPU has no kernel for the dtype: the call is left out
        # even when tpu computes it)
        def ref(args=args, kwargs=kwargs):
            return op(*H._upcast(H._clone(args)), **H._upcast(H._clone(kwargs)))
        H._run_pair(run_cpu, run_tpu, res, atol, rtol, meta_only, f"call {k}",
                    _tie_check(name, args), cpu_error_skips=True, reference=ref)
    status = res.status()
    detail = res.detail()
    if not calls:
        detail = "no captured call and no hand-written probe"
    elif status == "skip" and res.matched_errors:
        detail = "CPU raises for this dtype"
    sources = sorted({c[2] for c in calls if len(c) > 2})
    return {"overload": name, "dtype": H.DTYPE_NAMES[dtype], "status": status,
            "calls": len(calls), "passed": res.passed, "origin": origin,
            "sources": sources[:8], "fallbacks": sorted(res.fallbacks), "detail": detail,
            "max_error": res.fail[1] if res.fail else None,
            "tol_ratio": res.fail[2] if res.fail else None,
            "nonfinite": bool(res.fail and res.fail[3])}


def plan(captured, overloads):
    """[(overload, dtype, calls, origin)] for every core overload and probe dtype."""
    out = []
    for op in overloads:
        name = str(op)
        for dtype in PROBE_DTYPES:
            calls = captured.get((name, dtype), [])
            origin = "captured"
            if not calls and dtype != torch.float32 and captured.get((name, torch.float32)):
                calls = [(_cast(a, dtype), _cast(k, dtype), src)
                         for a, k, src in captured[(name, torch.float32)]]
                origin = "cast"
            if not calls:
                calls = [(a, k, "probe") for a, k in _probes(name, dtype)]
                origin = "probe"
            out.append((op, dtype, calls, origin))
    return out


def is_finite_number(x):
    return isinstance(x, (int, float)) and math.isfinite(x)
