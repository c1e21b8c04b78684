"""OpInfo conformance: runs PyTorch's own operator database on tpu and on CPU
and sorts every (operator, dtype, variant) into one class.

Classes (CLASSES):
  native    every sample matched CPU and no CPU fallback ran
  fallback  every sample matched CPU, but at least one ran a CPU fallback
  fail      a result differed from CPU (values beyond tolerance, dtype, shape)
  error     tpu raised where CPU did not, or a different exception type
  skip      nothing to compare (no samples, CPU raised on every sample, ...)
  crash     the process died or hung in the case (recorded by sweep.py)

Variants: functional (op(x)), inplace (the OpInfo's in-place variant), out
(out= with a preallocated tpu tensor of the right shape and dtype), grad (the
gradients of every input that requires grad, for a random upstream gradient;
float32 and float64).

This module only runs cases in the current process; sweep.py runs them in
worker processes so that a crash stops one case, not the sweep.
"""
import contextlib
import math
import os
import sys
import time
import types
import unittest
import warnings

# The OpInfo database imports expecttest (a PyTorch test dependency that is
# not installed); only its TestCase base class is needed.
if "expecttest" not in sys.modules:
    try:
        import expecttest  # noqa: F401
    except ImportError:
        _m = types.ModuleType("expecttest")
        _m.TestCase = unittest.TestCase
        sys.modules["expecttest"] = _m

import torch  # noqa: E402

import torchtpu  # noqa: E402,F401

TPU = torch.device("tpu:0")
CLASSES = ("native", "fallback", "fail", "error", "skip", "crash")
VARIANTS = ("functional", "inplace", "out", "grad")
DTYPES = (torch.float32, torch.bfloat16, torch.float16, torch.float64, torch.int64,
          torch.int32, torch.int8, torch.uint8, torch.bool, torch.complex64)
GRAD_DTYPES = (torch.float32, torch.float64)
DTYPE_NAMES = {d: str(d).replace("torch.", "") for d in DTYPES}
BY_NAME = {v: k for k, v in DTYPE_NAMES.items()}

# The strides of each dense functional result are compared with CPU's: a
# compiled graph views tpu's results as the meta kernels lay them out, and
# CPU's kernels lay theirs out the same (docs/compile.md). Except for these
# ops, laid out otherwise for the reason given.
LAYOUT_UNCHECKED = {
    # data-dependent shapes, no meta kernel: CPU's kernel writes the
    # transposed layout, tpu's is row-major
    "argwhere", "nonzero", "nonzero_static",
    # no meta kernel (not traceable by torch.compile): CPU keeps LAPACK's
    # column-major result, tpu's is row-major
    "geqrf",
    # runs on the CPU through its out= form, into row-major tensors
    "linalg.lstsq", "linalg.lstsq.grad_oriented",
    # channels-last input: row-major on tpu, as PyTorch's decomposition (what
    # a graph traced for tpu expects) lays it out; CPU's kernel keeps it
    "nn.functional.max_unpool2d", "nn.functional.max_unpool2d.grad",
    "nn.functional.max_unpool3d", "nn.functional.max_unpool3d.grad",
    # real-to-complex and back over several dims: tpu takes the layout of
    # the meta kernel, which is cuFFT's there; CPU's MKL kernel gives another
    "fft.rfft2", "fft.rfftn", "fft.hfft2", "fft.hfftn",
}

# Ops whose values are random or uninitialized: only dtype, shape and device
# are compared (the tpu RNG is not bit-compatible with CPU's).
METADATA_ONLY = {
    "bernoulli", "cauchy", "empty", "empty_like", "empty_permuted", "empty_strided",
    "exponential", "geometric", "log_normal", "multinomial", "new_empty",
    "new_empty_strided", "normal", "normal.number_mean", "rand_like", "randint",
    "randint_like", "randn", "randn_like", "uniform", "nn.functional.dropout",
    "nn.functional.dropout2d", "nn.functional.dropout3d", "nn.functional.alpha_dropout",
    "nn.functional.feature_alpha_dropout.with_train",
    "nn.functional.feature_alpha_dropout.without_train", "nn.functional.rrelu",
    "svd_lowrank", "pca_lowrank", "resize_", "resize_as_", "torch.empty",
    "_foreach_empty",
    # (random pooling regions unless the sample passes _random_samples)
    "nn.functional.fractional_max_pool2d", "nn.functional.fractional_max_pool3d",
}

# Documented tolerance overrides beyond the OpInfo's own, {(op, dtype): (atol,
# rtol, reason)}; "*" as dtype applies to every dtype. Each entry says why the
# tpu result may differ more than the OpInfo allows between CPU and CUDA.
TOLERANCE_OVERRIDES = {}


def _override(ops, dtypes, atol, rtol, reason):
    for op in ops:
        for d in dtypes:
            TOLERANCE_OVERRIDES[(op, d)] = (atol, rtol, reason)


# PyTorch picks the accumulation dtype of the chunked linear_cross_entropy
# per device type (linear_cross_entropy_options._AUTO_DEFAULTS): cpu
# accumulates half-precision inputs in float32, other devices in the input
# dtype. The tpu result is the less precise one by design of that policy.
_override(["nn.functional.linear_cross_entropy", "nn.functional.linear_cross_entropy.chunked",
           "nn.functional.linear_cross_entropy.chunked_none"],
          [torch.bfloat16], 5e-2, 1e-1, "device-dependent accumulation dtype")
_override(["nn.functional.linear_cross_entropy", "nn.functional.linear_cross_entropy.chunked",
           "nn.functional.linear_cross_entropy.chunked_none"],
          [torch.float16], 5e-3, 1e-2, "device-dependent accumulation dtype")
# CPU's foreach add/sub round alpha to the tensors' dtype in their vectorized
# loop but not in the scalar tail (the same op, two results); tpu rounds as
# the vectorized loop does. Allow one rounding of alpha times `other`.
_override(["_foreach_add", "_foreach_sub"], [torch.float16], 1e-2, 1e-3,
          "CPU rounds alpha in its vectorized loop only")
_override(["_foreach_add", "_foreach_sub"], [torch.bfloat16], 2e-2, 1.6e-2,
          "CPU rounds alpha in its vectorized loop only")
# The samples feed attention logits of magnitude ~7000 to softmax: a 1-ulp
# difference of the input projections (addmm, XLA's dot against CPU's BLAS)
# moves the outputs by ~1e-4 relative.
_override(["nn.functional.multi_head_attention_forward"], [torch.float32], 5e-3, 1e-4,
          "softmax of logits ~7000 amplifies 1-ulp matmul differences")

# householder_product's backward multiplies chains of reflectors, which
# amplifies float32 rounding: on random inputs tpu's gradients were no
# further from a float64 run than CPU's (4.7e-4 against 1.4e-3 relative),
# but 1.5e-5 from CPU's in one OpInfo sample.
_override(["linalg.householder_product"], [torch.float32], 1e-4, 1e-5,
          "float32 rounding of reflector chains in the backward")

# matrix_exp squares the exponential of a scaled matrix several times, which
# amplifies rounding in entries small against the matrix's norm; tpu's and
# CPU's methods differ (Taylor 18 against CPU's optimized polynomials).
# On uniform(-9, 9) 5x5 inputs tpu's float32 error against a float64 run
# was 1.0-1.3e-6 of the norm, CPU's 0.7-4.5e-6.
_override(["matrix_exp"], [torch.float32, torch.complex64], 1e-3, 1e-3,
          "scaling and squaring amplifies rounding differently than CPU's method")

# complex pow is exp(b log a): a float32 rounding of b log a, of magnitude
# up to ~35 in these samples, moves the result by |b log a| ulps. Against a
# complex128 run tpu's results were 5.6e-7 relative on average (CPU's
# 6.7e-7), at most 3.2e-6 (CPU's 2.6e-6, and 4.2e-6 in _foreach_pow).
_override(["pow", "__rpow__", "_foreach_pow"], [torch.complex64], 1e-5, 1e-5,
          "complex pow's rounding grows with |exponent * log(base)|")

# Gradients that are sums with heavy cancellation, whose float32 rounding
# depends on the summation order (XLA's against CPU's), each within a few
# 1e-5 of CPU's: kron's (a 200-term sum of products of size ~10 giving
# -0.71, tpu 4.7e-5 and CPU 1.2e-5 from a float64 run), stft's window (CPU
# and tpu both ~490 from a float64 run, 4.4e-5 from each other), CTC loss's
# (the CPU kernel on both sides, fed tpu's log_softmax: its 1-ulp
# differences go through 50 steps of the alpha-beta recursion; tpu 4.5e-5
# and CPU 6.9e-5 from a float64 run).
_override(["kron", "stft", "nn.functional.ctc_loss"], [torch.float32], 1e-4, 1.3e-6,
          "float32 rounding of cancelling sums in the gradient")

_SETUP_DONE = False
# Called once per sample (sweep.py's workers touch a heartbeat file, so a
# slow case is not taken for a hang).
HEARTBEAT = None


def setup():
    """Process-wide settings for running the database: quiet warnings, one
    CPU thread for PyTorch (the XLA plugin has its own), deterministic
    float32 matmuls."""
    global _SETUP_DONE
    if _SETUP_DONE:
        return
    _SETUP_DONE = True
    warnings.simplefilter("ignore")
    torch.set_num_threads(int(os.environ.get("CONFORMANCE_THREADS", "1")))


def case_key(op):
    return op.name + ("." + op.variant_test_name if op.variant_test_name else "")


def databases():
    """[(op key, OpInfo)] for op_db (which already holds the linalg, fft,
    special, masked and signal databases) and the foreach databases."""
    from torch.testing._internal import common_methods_invocations as cmi
    out, seen = [], set()
    foreach = (cmi.foreach_unary_op_db + cmi.foreach_binary_op_db + cmi.foreach_pointwise_op_db
               + cmi.foreach_reduce_op_db + cmi.foreach_other_op_db)
    for op in list(cmi.op_db) + list(foreach):
        key = case_key(op)
        if key in seen:  # (no duplicates today; keep keys unique regardless)
            n = 2
            while f"{key}#{n}" in seen:
                n += 1
            key = f"{key}#{n}"
        seen.add(key)
        out.append((key, op))
    return out


def is_foreach(op):
    return op.name.startswith("_foreach_")


def dtypes_of(op):
    """The sweep's dtypes that CPU supports for this op, in DTYPES order."""
    try:
        supported = op.supported_dtypes("cpu")
    except Exception:
        return []
    return [d for d in DTYPES if d in supported]


def grad_dtypes_of(op):
    if not op.supports_autograd:
        return []
    try:
        supported = op.supported_backward_dtypes("cpu")
    except Exception:
        return []
    return [d for d in GRAD_DTYPES if d in supported and d in dtypes_of(op)]


def variants_of(op, dtype):
    out = ["functional"]
    if op.inplace_variant is not None:
        out.append("inplace")
    if op.supports_out and not is_foreach(op):
        out.append("out")
    if dtype in grad_dtypes_of(op):
        out.append("grad")
    return out


def all_cases(op):
    return [(d, v) for d in dtypes_of(op) for v in variants_of(op, d)]


#===--- tolerances ---===#

_DEFAULT_TOL = {torch.float16: (1e-5, 1e-3), torch.bfloat16: (1e-5, 1.6e-2),
                torch.float32: (1e-5, 1.3e-6), torch.float64: (1e-7, 1e-7),
                torch.complex64: (1e-5, 1.3e-6)}


def tolerance(op, key, dtype):
    """(atol, rtol) for comparing a dtype's results: torch.testing's defaults,
    raised to the loosest toleranceOverride / precisionOverride the OpInfo
    declares for that dtype in any of its tests, then to our documented
    overrides."""
    from torch.testing._internal.common_device_type import precisionOverride, toleranceOverride
    atol, rtol = _DEFAULT_TOL.get(dtype, (0.0, 0.0))
    for info in list(getattr(op, "decorators", ()) or ()):
        decorators = getattr(info, "decorators", [info])
        if getattr(info, "dtypes", None) is not None and dtype not in info.dtypes:
            continue
        if getattr(info, "active_if", True) is False:
            continue
        for d in decorators:
            if isinstance(d, toleranceOverride) and dtype in d.d:
                atol, rtol = max(atol, d.d[dtype].atol), max(rtol, d.d[dtype].rtol)
            elif isinstance(d, precisionOverride) and dtype in d.d:
                atol = max(atol, d.d[dtype])
    for k in ((key, dtype), (key, "*")):
        if k in TOLERANCE_OVERRIDES:
            a, r, _ = TOLERANCE_OVERRIDES[k]
            atol, rtol = max(atol, a), max(rtol, r)
    return atol, rtol


#===--- moving samples to tpu ---===#

def _to_tpu(x, grad_map=None):
    """Tensors to tpu (leaves that require grad stay leaves that require grad;
    grad_map records CPU tensor id -> tpu leaf), cpu devices to tpu."""
    if isinstance(x, torch.Tensor):
        if grad_map is not None and id(x) in grad_map:
            return grad_map[id(x)]
        t = x.detach().to(TPU)
        if x.requires_grad:
            t.requires_grad_(True)
            if grad_map is not None:
                grad_map[id(x)] = t
        return t
    if isinstance(x, torch.device):
        return TPU if x.type == "cpu" else x
    if isinstance(x, list):
        return [_to_tpu(v, grad_map) for v in x]
    if isinstance(x, tuple) and not hasattr(x, "_fields"):
        return tuple(_to_tpu(v, grad_map) for v in x)
    if isinstance(x, dict):
        return {k: (("tpu" if v == "cpu" else v) if k == "device" and isinstance(v, str)
                    else _to_tpu(v, grad_map)) for k, v in x.items()}
    return x


def _clone(x):
    """A deep copy of the tensors (in-place variants must not change the
    sample that later variants reuse)."""
    if isinstance(x, torch.Tensor):
        c = x.detach().clone()
        return c.requires_grad_(x.requires_grad) if x.is_leaf else c
    if isinstance(x, list):
        return [_clone(v) for v in x]
    if isinstance(x, tuple) and not hasattr(x, "_fields"):
        return tuple(_clone(v) for v in x)
    if isinstance(x, dict):
        return {k: _clone(v) for k, v in x.items()}
    return x


def _tensors(x):
    if isinstance(x, torch.Tensor):
        yield x
    elif isinstance(x, (list, tuple)):
        for v in x:
            yield from _tensors(v)
    elif isinstance(x, dict):
        for v in x.values():
            yield from _tensors(v)


def _to_cpu(x):
    """Results to CPU (synchronizes: device-side errors surface here)."""
    if isinstance(x, torch.Tensor):
        return x.detach().cpu() if x.device.type != "cpu" else x.detach()
    if isinstance(x, (list, tuple)):
        vals = [_to_cpu(v) for v in x]
        if hasattr(x, "_fields"):
            return type(x)(*vals)
        try:
            return type(x)(vals)
        except TypeError:
            return tuple(vals)
    return x


#===--- comparing ---===#

class Mismatch(Exception):
    """A tpu result differs from CPU's; .error is the largest absolute
    difference outside the tolerance and .ratio the largest difference in
    units of the tolerance (atol + rtol * |expected|), when known; .ratio is
    None when a NaN or infinity differs."""

    def __init__(self, msg, error=None, ratio=None, nonfinite=False):
        super().__init__(msg)
        self.error = error
        self.ratio = ratio
        self.nonfinite = nonfinite


def _max_error(actual, expected, atol, rtol):
    """(largest absolute difference among the elements outside the
    tolerance, largest difference / tolerance); Nones when not computable."""
    try:
        wide = torch.complex128 if expected.is_complex() else torch.float64
        a, e = actual.to(wide), expected.to(wide)
        diff = (a - e).abs()
        bound = atol + rtol * e.abs()
        bad = ~(diff <= bound) & ~(torch.isnan(a) & torch.isnan(e))
        if not bad.any():
            return None, None, False
        finite = torch.isfinite(diff) & bad
        err = float(diff[finite].max()) if finite.any() else None
        if not bool(torch.isfinite(diff[bad]).all()):
            return err, None, True
        ratio = diff[bad] / bound[bad].clamp_min(1e-300)
        return err, round(float(ratio.max()), 2), False
    except Exception:  # noqa: BLE001
        return None, None, False


def _floor_tol(dtype, atol, rtol):
    a, r = _DEFAULT_TOL.get(dtype, (0.0, 0.0))
    return max(atol, a), max(rtol, r)


def compare(expected, actual, atol, rtol, meta_only=False, devices=None, path="result"):
    """Raises Mismatch unless actual (tpu, already moved to CPU by the caller
    except for `devices`) matches expected. `devices` holds the tpu results'
    device types, in the order _tensors yields them."""
    if isinstance(expected, torch.Tensor):
        if not isinstance(actual, torch.Tensor):
            raise Mismatch(f"{path}: expected a tensor, got {type(actual).__name__}")
        if devices is not None:
            dev = devices.pop(0) if devices else None
            if dev is not None and dev != "tpu" and expected.device.type == "cpu":
                raise Mismatch(f"{path}: result on {dev}, not on tpu")
        if actual.dtype != expected.dtype:
            raise Mismatch(f"{path}: dtype {actual.dtype} != {expected.dtype}")
        if actual.shape != expected.shape:
            raise Mismatch(f"{path}: shape {tuple(actual.shape)} != {tuple(expected.shape)}")
        if meta_only:
            return
        if expected.layout != torch.strided or actual.layout != torch.strided:
            if expected.layout != actual.layout:
                raise Mismatch(f"{path}: layout {actual.layout} != {expected.layout}")
            expected, actual = expected.to_dense(), actual.to_dense()
        if expected.is_quantized:
            expected, actual = expected.dequantize(), actual.dequantize()
        expected, actual = expected.resolve_conj().resolve_neg(), actual.resolve_conj().resolve_neg()
        # (a float result of an integer case gets its own dtype's tolerance)
        atol, rtol = _floor_tol(expected.dtype, atol, rtol)
        try:
            torch.testing.assert_close(actual, expected, atol=atol, rtol=rtol, equal_nan=True,
                                       check_device=False, check_stride=False, check_dtype=True)
        except AssertionError as e:
            err, ratio, nonfinite = _max_error(actual, expected, atol, rtol)
            lines = [ln.strip() for ln in str(e).splitlines() if ln.strip()]
            msg = "; ".join(lines[:4])
            raise Mismatch(f"{path}: {msg}", err, ratio, nonfinite) from None
    elif isinstance(expected, (list, tuple)):
        if not isinstance(actual, (list, tuple)) or len(actual) != len(expected):
            raise Mismatch(f"{path}: expected a sequence of {len(expected)}, got {actual!r:.80}")
        for k, (e, a) in enumerate(zip(expected, actual)):
            compare(e, a, atol, rtol, meta_only, devices, f"{path}[{k}]")
    elif isinstance(expected, dict):
        if not isinstance(actual, dict) or set(actual) != set(expected):
            raise Mismatch(f"{path}: dict keys differ")
        for k in expected:
            compare(expected[k], actual[k], atol, rtol, meta_only, devices, f"{path}[{k!r}]")
    elif isinstance(expected, (float, complex)) and not isinstance(expected, bool):
        if meta_only:
            return
        if not isinstance(actual, (int, float, complex)):
            raise Mismatch(f"{path}: expected a number, got {actual!r:.80}")
        atol, rtol = _floor_tol(torch.float32, atol, rtol)
        if isinstance(expected, float) and math.isnan(expected) and math.isnan(float(actual.real if isinstance(actual, complex) else actual)):
            return
        if not (actual == expected or abs(actual - expected) <= atol + rtol * abs(expected)):
            d = abs(actual - expected)
            raise Mismatch(f"{path}: {actual!r} != {expected!r}", d,
                           round(d / (atol + rtol * abs(expected)), 2) if atol or rtol else None)
    elif isinstance(expected, torch.device):
        pass  # a tpu result's device differs by design
    else:
        if meta_only and isinstance(expected, int):
            return
        if actual != expected:
            raise Mismatch(f"{path}: {actual!r:.80} != {expected!r:.80}")


# Ops whose index results are unspecified among equal values (CPU's
# unstable sort and topk pick one order, XLA's another): when the plain
# comparison fails, the values must still match and the indices must select
# those values from the input (see _tie_compare).
TIE_OPS = {"sort", "argsort", "topk", "msort", "kthvalue", "median", "nanmedian", "mode",
           "sort.stable"}


def _gathers_to(x, idx, values):
    """Whether x.gather(d, idx) == values for some dim d."""
    if not isinstance(x, torch.Tensor) or x.dim() == 0:
        return torch.equal(x.reshape(idx.shape) if idx.numel() == 1 else x, values) \
            if isinstance(x, torch.Tensor) else False
    for d in range(x.dim()):
        try:
            if idx.dim() != x.dim():
                g = x.gather(d, idx.unsqueeze(d)).squeeze(d)
            else:
                g = x.gather(d, idx)
        except RuntimeError:
            continue
        if g.shape == values.shape and torch.equal(
                torch.nan_to_num(g.double(), nan=1e308), torch.nan_to_num(values.double(), nan=1e308)):
            return True
    return False


def compare_layout(expected, actual, path="result"):
    """Raises Mismatch unless each dense tensor of actual (tpu's result,
    moved to CPU with its strides) is laid out as expected's (CPU's): the
    same strides on the dims with more than one element. Views that are not
    dense (moving them to CPU makes them contiguous) and tensors of fewer
    than two elements are not compared."""
    if isinstance(expected, torch.Tensor) and isinstance(actual, torch.Tensor):
        if expected.layout != torch.strided or actual.layout != torch.strided:
            return
        dense = torch._prims_common.is_non_overlapping_and_dense_or_false(expected)
        if expected.numel() < 2 or not dense:
            return
        want = [st for st, n in zip(expected.stride(), expected.shape) if n > 1]
        got = [st for st, n in zip(actual.stride(), actual.shape) if n > 1]
        if want != got:
            raise Mismatch(f"{path}: strides {actual.stride()} where CPU's are "
                           f"{expected.stride()} (shape {tuple(expected.shape)})")
    elif isinstance(expected, (list, tuple)) and isinstance(actual, (list, tuple)):
        for k, (e, a) in enumerate(zip(expected, actual)):
            compare_layout(e, a, f"{path}[{k}]")


def _tie_compare(x, expected, actual, atol, rtol, stable):
    """Accepts a sort-like result whose indices differ from CPU's only among
    equal values. Raises Mismatch otherwise."""
    if isinstance(expected, torch.Tensor):  # argsort: indices only
        ok = False
        if not stable and x.dim() > 0 and actual.shape == expected.shape:
            for d in range(x.dim()):
                try:
                    ok = torch.equal(x.gather(d, actual), x.gather(d, expected))
                except RuntimeError:
                    continue
                if ok:
                    break
        if not ok:
            raise Mismatch("indices select different values than CPU's")
        return
    vals_e, vals_a, idx_a = expected[0], actual[0], actual[1]
    compare(vals_e, vals_a, atol, rtol)
    if stable or not _gathers_to(x, idx_a, vals_a):
        raise Mismatch("indices do not select the values (or differ from CPU's stable order)")


def _devices(x):
    return [t.device.type for t in _tensors(x)]


#===--- running one case ---===#

def fallbacks():
    return dict(torchtpu.metrics()["fallbacks"])


def _new_fallbacks(before):
    after = fallbacks()
    return {k for k, v in after.items() if v != before.get(k, 0)}


def _exc_text(e):
    text = f"{type(e).__name__}: {e}".strip()
    text = " ".join(text.split())
    return text[:300]


def _samples(op, dtype, requires_grad=False):
    torch.manual_seed(0)
    return list(op.sample_inputs("cpu", dtype, requires_grad=requires_grad))


# Positional arguments that an OpInfo creates on the CPU for every device
# because the operator reads them on the host (PyTorch refuses them on a
# device): they are not moved to tpu.
HOST_ARGS = {
    "tensor_split": {0},  # indices_or_sections as a tensor
}


def _unpack(sample, transform, key=None):
    host = HOST_ARGS.get(key, ())
    args = tuple(a if i in host else transform(a) for i, a in enumerate(sample.args))
    return types.SimpleNamespace(input=transform(sample.input), args=args,
                                 kwargs=transform(sample.kwargs))


class CaseResult:
    """The running tally of one (operator, dtype, variant)."""

    def __init__(self):
        self.samples = 0
        self.passed = 0
        self.skipped = 0
        self.matched_errors = 0
        self.rescued = 0
        self.random = 0
        self.fallbacks = set()
        self.fail = None       # first mismatch: (message, max error)
        self.error = None      # first error: message
        self.skip_reasons = []

    def status(self):
        if self.fail is not None:
            return "fail"
        if self.error is not None:
            return "error"
        if self.passed == 0:
            return "skip"
        return "fallback" if self.fallbacks else "native"

    def detail(self):
        if self.fail is not None:
            return self.fail[0]
        if self.error is not None:
            return self.error
        if self.passed == 0:
            if self.matched_errors:
                return "CPU raised on every sample (tpu raised the same type)"
            return self.skip_reasons[0] if self.skip_reasons else "no samples"
        return None


def _upcast(x):
    """Floating tensors to float64, complex to complex128 (a reference run)."""
    if isinstance(x, torch.Tensor):
        if x.is_complex():
            return x.detach().to(torch.complex128).requires_grad_(x.requires_grad)
        if x.is_floating_point():
            return x.detach().to(torch.float64).requires_grad_(x.requires_grad)
        return x
    if isinstance(x, list):
        return [_upcast(v) for v in x]
    if isinstance(x, tuple) and not hasattr(x, "_fields"):
        return tuple(_upcast(v) for v in x)
    if isinstance(x, dict):
        return {k: _upcast(v) for k, v in x.items()}
    return x


def _no_worse(expected, actual, ref, atol, rtol):
    """Whether actual is, element by element, no farther from the float64
    reference than CPU's result is (or within the tolerance of it)."""
    if isinstance(expected, torch.Tensor):
        if not isinstance(ref, torch.Tensor) or not isinstance(actual, torch.Tensor):
            return False
        try:
            torch.testing.assert_close(actual, expected, atol=atol, rtol=rtol, equal_nan=True,
                                       check_device=False, check_stride=False)
            return True
        except AssertionError:
            pass
        if not (expected.is_floating_point() or expected.is_complex()) or ref.shape != expected.shape:
            return False
        atol, rtol = _floor_tol(expected.dtype, atol, rtol)
        wide = torch.complex128 if expected.is_complex() or ref.is_complex() else torch.float64
        a, e, r = actual.to(wide), expected.to(wide), ref.detach().to(wide)
        ok = ((a - r).abs() <= (e - r).abs() + atol + rtol * r.abs()) | (a == e) | (a == r)
        ok |= torch.isnan(a) & (torch.isnan(e) | torch.isnan(r))
        # A NaN of CPU's where the float64 run has a value (CPU's bfloat16 and
        # float16 matrix_exp of any matrix of norm above ~2) is farther than
        # any value: a result within the tolerance of that run passes, or
        # equal to it rounded to the dtype (a float16 overflow to inf).
        rounded = ref.detach().to(expected.dtype).to(wide)
        ok |= torch.isnan(e) & ~torch.isnan(r) & (
            ((a - r).abs() <= atol + rtol * r.abs()) | (a == rounded))
        return bool(ok.all())
    if isinstance(expected, (list, tuple)):
        return isinstance(ref, (list, tuple)) and len(ref) == len(expected) and all(
            _no_worse(e, a, r, atol, rtol) for e, a, r in zip(expected, actual, ref))
    if isinstance(expected, float) and isinstance(ref, float) and isinstance(actual, float):
        return abs(actual - ref) <= abs(expected - ref) + atol + rtol * abs(ref)
    return expected == actual


def _run_pair(run_cpu, run_tpu, res, atol, rtol, meta_only, what, fallback_compare=None,
              cpu_error_skips=False, reference=None, layout=False):
    """Runs one sample on CPU then on tpu and folds the outcome into res.
    fallback_compare(expected, actual) gets a second chance when the plain
    comparison fails (ops with unspecified tie order); so does reference(),
    the same computation on CPU in float64: a result no farther from it than
    CPU's passes (counted in res.rescued). With `layout`, a result must also
    be laid out as CPU's (compare_layout)."""
    res.samples += 1
    try:
        expected = run_cpu()
        cpu_exc = None
    except _NoGrad:
        res.skip_reasons.append("no differentiable output")
        return
    except Exception as e:  # noqa: BLE001 (any CPU exception is an expected outcome)
        expected, cpu_exc = None, e
    before = fallbacks()
    tpu_exc = None
    try:
        raw = run_tpu()
        devices = _devices(raw)
        actual = _to_cpu(raw)
        torch.tpu.synchronize()
    except Exception as e:  # noqa: BLE001
        tpu_exc = e
    res.fallbacks |= _new_fallbacks(before)
    if cpu_exc is not None:
        if tpu_exc is None and cpu_error_skips:
            res.matched_errors += 1
        elif tpu_exc is None:
            if res.fail is None:
                res.fail = (f"{what}: no exception where CPU raised {_exc_text(cpu_exc)}", None,
                            None, False)
        elif type(tpu_exc) is not type(cpu_exc) and not isinstance(tpu_exc, type(cpu_exc)):
            if res.error is None:
                res.error = (f"{what}: {_exc_text(tpu_exc)} (CPU raised "
                             f"{type(cpu_exc).__name__}: {str(cpu_exc)[:120]})")
        else:
            res.matched_errors += 1
        return
    if tpu_exc is not None:
        if res.error is None:
            res.error = f"{what}: {_exc_text(tpu_exc)}"
        return
    try:
        try:
            compare(expected, actual, atol, rtol, meta_only, devices)
        except Mismatch:
            if fallback_compare is not None:
                fallback_compare(expected, actual)
            elif reference is not None and _rescued(expected, actual, reference, atol, rtol):
                res.rescued += 1
            elif _is_random(run_cpu, expected, atol, rtol):
                # (CPU's own result changes with the seed: dropout in a
                # composite, say; only dtypes and shapes can match)
                compare(expected, actual, atol, rtol, True)
                res.random += 1
            else:
                raise
        if layout:
            compare_layout(expected, actual)
        res.passed += 1
    except Mismatch as m:
        if res.fail is None:
            res.fail = (f"{what}: {str(m)[:400]}", m.error, m.ratio, m.nonfinite)
    except Exception as e:  # noqa: BLE001 (the comparison itself choked on a result)
        if res.fail is None:
            res.fail = (f"{what}: comparing raised {_exc_text(e)}", None, None, False)


def _is_random(run_cpu, expected, atol, rtol):
    """Whether CPU's result depends on the RNG seed (run again, seeded anew)."""
    state = torch.get_rng_state()
    # OpInfo entries of random ops call wrapper_set_seed (seed 42 before the
    # call): it gets another seed here.
    patched = [m for name, m in list(sys.modules.items())
               if name.startswith("torch.testing._internal") and
               hasattr(m, "wrapper_set_seed")]
    saved = [m.wrapper_set_seed for m in patched]

    seed = [0]

    def reseeded(op, *args, **kwargs):
        torch.manual_seed(seed[0])
        return op(*args, **kwargs)
    try:
        for m in patched:
            m.wrapper_set_seed = reseeded
        # (a few seeds: a small dropout has few outcomes, two may agree)
        for seed[0] in (987654321, 1234567, 7654321, 1111111):
            torch.manual_seed(seed[0])
            again = run_cpu()
            compare(expected, again, atol, rtol)
        return False
    except Mismatch:
        return True
    except Exception:  # noqa: BLE001
        return False
    finally:
        for m, f in zip(patched, saved):
            m.wrapper_set_seed = f
        torch.set_rng_state(state)


def _rescued(expected, actual, reference, atol, rtol):
    try:
        ref = reference()
    except Exception:  # noqa: BLE001 (no float64 kernel, say: no second chance)
        return False
    try:
        return _no_worse(expected, actual, ref, atol, rtol)
    except Exception:  # noqa: BLE001
        return False


def _out_like(expected):
    if isinstance(expected, torch.Tensor):
        return torch.empty_like(expected, device=TPU)
    if isinstance(expected, (list, tuple)):
        return type(expected)(_out_like(e) for e in expected) if not hasattr(expected, "_fields") \
            else tuple(_out_like(e) for e in expected)
    raise TypeError(f"out= for a {type(expected).__name__} result")


def run_case(op, key, dtype, variant, samples=None, max_samples=None):
    """Runs every sample of one (op, dtype, variant); returns a result dict."""
    t0 = time.time()
    m0 = torchtpu.metrics()
    res = CaseResult()
    atol, rtol = tolerance(op, key, dtype)
    meta_only = key in METADATA_ONLY
    try:
        if samples is None:
            samples = _samples(op, dtype, requires_grad=(variant == "grad"))
    except Exception as e:  # noqa: BLE001
        res.skip_reasons.append(f"sample generation raised {_exc_text(e)}")
        samples = []
    if max_samples is not None:
        samples = samples[:max_samples]
    for i, s in enumerate(samples):
        what = f"sample {i}"
        if HEARTBEAT is not None:
            HEARTBEAT()
        ties = None
        if key in TIE_OPS and variant in ("functional", "out"):
            stable = bool(s.kwargs.get("stable", False))

            def ties(expected, actual, s=s, stable=stable, out=(variant == "out")):
                if out:
                    expected, actual = expected[0], actual[0]
                _tie_compare(s.input, expected, actual, atol, rtol, stable)
        if variant == "functional":
            post = s.output_process_fn_grad

            def run_cpu(s=s, post=post):
                return post(op(_clone(s.input), *_clone(s.args), **_clone(s.kwargs)))

            def run_tpu(s=s, post=post):
                t = _unpack(s, _to_tpu, key)
                return post(op(t.input, *t.args, **t.kwargs))

            def ref(s=s, post=post):
                return post(op(_upcast(s.input), *_upcast(s.args), **_upcast(s.kwargs)))
            _run_pair(run_cpu, run_tpu, res, atol, rtol, meta_only, what, ties, reference=ref,
                      layout=not meta_only and key not in LAYOUT_UNCHECKED)
        elif variant == "inplace":
            fn = op.inplace_variant

            def run_cpu(s=s, fn=fn):
                return fn(_clone(s.input), *_clone(s.args), **_clone(s.kwargs))

            def run_tpu(s=s, fn=fn):
                t = _unpack(s, _to_tpu, key)
                return fn(t.input, *t.args, **t.kwargs)

            def ref(s=s):
                return op(_upcast(s.input), *_upcast(s.args), **_upcast(s.kwargs))
            _run_pair(run_cpu, run_tpu, res, atol, rtol, meta_only, what, reference=ref)
        elif variant == "out":
            try:
                expected = op(_clone(s.input), *_clone(s.args), **_clone(s.kwargs))
                out_tpu = _out_like(expected)
            except Exception as e:  # noqa: BLE001
                res.samples += 1
                res.skip_reasons.append(f"functional call raised on CPU: {_exc_text(e)}")
                continue

            def run_cpu(s=s, expected=expected):
                out = _map_tensors(expected, lambda e: torch.empty_like(e))
                r = op(_clone(s.input), *_clone(s.args), out=out, **_clone(s.kwargs))
                return (r, out)

            def run_tpu(s=s, out_tpu=out_tpu):
                t = _unpack(s, _to_tpu, key)
                r = op(t.input, *t.args, out=out_tpu, **t.kwargs)
                return (r, out_tpu)

            def ref(s=s):
                r = op(_upcast(s.input), *_upcast(s.args), **_upcast(s.kwargs))
                return (r, r)
            _run_pair(run_cpu, run_tpu, res, atol, rtol, meta_only, what, ties, reference=ref)
        elif variant == "grad":
            _run_grad(op, key, s, res, atol, rtol, meta_only, what)
    m1 = torchtpu.metrics()
    out = {
        "op": key, "dtype": DTYPE_NAMES[dtype], "variant": variant, "status": res.status(),
        "samples": res.samples, "passed": res.passed, "rescued": res.rescued,
        "random": res.random,
        "fallbacks": sorted(res.fallbacks),
        "detail": res.detail(),
        "max_error": res.fail[1] if res.fail else None,
        "tol_ratio": res.fail[2] if res.fail else None,
        "nonfinite": bool(res.fail and res.fail[3]),
        "tolerance": [atol, rtol],
        "seconds": round(time.time() - t0, 3),
        "compiles": m1["compiles"] - m0["compiles"],
        "compile_seconds": round(m1["compile_seconds"] - m0["compile_seconds"], 3),
    }
    return out


def _map_tensors(x, f):
    if isinstance(x, torch.Tensor):
        return f(x)
    if isinstance(x, (list, tuple)):
        return tuple(_map_tensors(v, f) for v in x)
    return x


def _grad_outputs(outs):
    """The differentiable tensors of a result and a seeded random upstream
    gradient for each."""
    ts = [t for t in _tensors(outs) if t.requires_grad and (t.is_floating_point() or t.is_complex())]
    g = torch.Generator().manual_seed(1)
    grads = [torch.randn(t.shape, generator=g, dtype=torch.float64).to(t.dtype)
             if not t.is_complex() else
             torch.randn(t.shape, generator=g, dtype=t.dtype) for t in ts]
    return ts, grads


def _run_grad(op, key, s, res, atol, rtol, meta_only, what):
    variant_fn = op.get_op()

    def forward(sample):
        out = op.gradcheck_wrapper(variant_fn, sample.input, *sample.args, **sample.kwargs)
        return s.output_process_fn_grad(out)

    leaves = [t for t in _tensors((s.input, s.args, s.kwargs)) if t.requires_grad]
    if not leaves:
        res.samples += 1
        res.skip_reasons.append("no input requires grad")
        return

    def run_cpu(wide=False):
        # (clones keep the CPU sample reusable: leaves stay leaves)
        cmap = {}

        def cl(x):
            if isinstance(x, torch.Tensor):
                if id(x) not in cmap:
                    c = _upcast(x).detach() if wide else x.detach().clone()
                    cmap[id(x)] = c.requires_grad_(x.requires_grad)
                return cmap[id(x)]
            if isinstance(x, list):
                return [cl(v) for v in x]
            if isinstance(x, tuple) and not hasattr(x, "_fields"):
                return tuple(cl(v) for v in x)
            if isinstance(x, dict):
                return {k: cl(v) for k, v in x.items()}
            return x
        c = _unpack(s, cl, key)
        outs, grads = _grad_outputs(forward(c))
        if not outs:
            raise _NoGrad()
        ins = [cmap[id(t)] for t in leaves]
        return list(torch.autograd.grad(outs, ins, grads, allow_unused=True))

    def run_tpu():
        gmap = {}
        t = _unpack(s, lambda x: _to_tpu(x, gmap), key)
        outs, grads = _grad_outputs(forward(t))  # (same seed and shapes: CPU's gradients)
        ins = [gmap[id(x)] for x in leaves]
        # (each upstream gradient on its output's device: `to` can leave tpu)
        grads = [g.to(o.device) for g, o in zip(grads, outs)]
        return list(torch.autograd.grad(outs, ins, grads, allow_unused=True))

    with torch.enable_grad():
        _run_pair(run_cpu, run_tpu, res, atol, rtol, meta_only, what,
                  reference=lambda: run_cpu(wide=True))


class _NoGrad(Exception):
    pass


def run_op(op, key, cases=None, max_samples=None, on_begin=None, on_result=None):
    """Runs the op's cases (default: all) and returns their result dicts.
    on_begin(dtype, variant) is called before each case (crash bookkeeping)."""
    setup()
    results = []
    cases = all_cases(op) if cases is None else cases
    by_dtype = {}
    for dtype, variant in cases:
        by_dtype.setdefault(dtype, []).append(variant)
    for dtype, variants in by_dtype.items():
        plain = None
        for variant in variants:
            if on_begin:
                on_begin(dtype, variant)
            samples = None
            if variant != "grad":
                if plain is None:
                    try:
                        plain = _samples(op, dtype)
                    except Exception:  # noqa: BLE001 (run_case records it)
                        plain = None
                samples = plain
            r = run_case(op, key, dtype, variant, samples=samples, max_samples=max_samples)
            # a sample's CPU error under the grad variant (no differentiable
            # output) is not a tpu problem
            results.append(r)
            if on_result:
                on_result(r)
    return results


@contextlib.contextmanager
def quiet():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield
