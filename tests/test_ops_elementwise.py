"""Elementwise math against CPU: unary and binary ops, dtype promotion,
integer semantics, NaN / inf / signed-zero cases, in-place and out= forms,
errors, and a few backward passes.

Many ops are checked in one call (check_ops): their tpu results fuse into one
program, so each group compiles once.
"""
import math

import pytest
import torch

import torchtpu
from conftest import NoFallback, assert_same, check, check_error, check_grad, to_tpu

FLOATS = [torch.float32, torch.bfloat16, torch.float16]
INTS = [torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8]

INF, NAN = math.inf, math.nan
SPECIAL = [0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 2.0, -2.0, 2.5, -2.5, 3.0, -3.0, 8.0,
           1000.0, 1e-3, -7.25, 100.0, -100.0, 1e6, INF, -INF, NAN]


def floats(dtype, n=200, scale=3.0, seed=0):
    """Special values followed by random ones (no subnormals: XLA's CPU
    flushes them to zero)."""
    g = torch.Generator().manual_seed(seed)
    x = torch.cat([torch.tensor(SPECIAL), torch.randn(n, generator=g) * scale])
    return x.to(dtype)


def ints(dtype, n=120, lo=-100, hi=100, seed=0, nonzero=False):
    g = torch.Generator().manual_seed(seed)
    if dtype == torch.uint8:
        lo = 0
    x = torch.randint(lo, hi, (n,), generator=g).to(dtype)
    if nonzero:
        x[x == 0] = 7
    return x


def check_ops(ops, *inputs, atol=None, rtol=None):
    """Runs every op of `ops` (name -> fn, or name -> (fn, {atol, rtol})) on
    CPU and on tpu copies of the inputs, and compares each result by name.
    No CPU fallback may run."""
    expected = {}
    for name, op in ops.items():
        fn = op[0] if isinstance(op, tuple) else op
        expected[name] = fn(*inputs)
    tpu_inputs = [to_tpu(i) for i in inputs]
    with NoFallback():
        actual = {name: (op[0] if isinstance(op, tuple) else op)(*tpu_inputs)
                  for name, op in ops.items()}
    for name, op in ops.items():
        t = op[1] if isinstance(op, tuple) else {"atol": atol, "rtol": rtol}
        a, r = widen(expected[name], t.get("atol"), t.get("rtol"))
        try:
            assert_same(expected[name], actual[name], a, r)
        except AssertionError as e:
            raise AssertionError(f"{name}: {e}") from None


# torch.testing's default (rtol, atol) per dtype.
DEFAULT_TOL = {torch.float16: (1e-3, 1e-5), torch.bfloat16: (1.6e-2, 1e-5),
               torch.float32: (1.3e-6, 1e-5), torch.float64: (1e-7, 1e-7)}


def widen(expected, atol, rtol):
    """A looser tolerance (given for float32) never tightens the default of
    a half-precision result."""
    if atol is None and rtol is None:
        return None, None
    dt = expected.dtype if isinstance(expected, torch.Tensor) else torch.float32
    r0, a0 = DEFAULT_TOL.get(dt, (0.0, 0.0))
    return max(atol or 0.0, a0), max(rtol or 0.0, r0)


def tol(atol, rtol):
    return {"atol": atol, "rtol": rtol}


#===--- unary math ---===#

UNARY_FLOAT = {
    "abs": torch.abs, "neg": torch.neg, "exp": torch.exp, "expm1": torch.expm1,
    "log": torch.log, "log1p": torch.log1p, "sqrt": torch.sqrt, "rsqrt": torch.rsqrt,
    "sin": torch.sin, "cos": torch.cos, "tan": (torch.tan, tol(1e-5, 1e-5)),
    "tanh": torch.tanh, "sigmoid": torch.sigmoid, "erf": torch.erf,
    "erfc": (torch.erfc, tol(1e-5, 1e-5)), "erfinv": (torch.erfinv, tol(1e-5, 1e-5)),
    "exp2": torch.exp2, "log2": torch.log2, "log10": torch.log10,
    "asin": torch.asin, "acos": torch.acos, "atan": torch.atan,
    "sinh": torch.sinh, "cosh": torch.cosh, "asinh": torch.asinh,
    "acosh": torch.acosh, "atanh": torch.atanh,
    "lgamma": (torch.lgamma, tol(1e-5, 1e-5)), "digamma": (torch.digamma, tol(1e-5, 1e-5)),
    "reciprocal": torch.reciprocal, "sign": torch.sign, "sgn": torch.sgn,
    "floor": torch.floor, "ceil": torch.ceil, "round": torch.round, "trunc": torch.trunc,
    "frac": torch.frac,
    "round2": lambda x: torch.round(x, decimals=2),
    "round-1": lambda x: torch.round(x, decimals=-1),
    "nan_to_num": torch.nan_to_num,
    "nan_to_num_args": lambda x: torch.nan_to_num(x, nan=1.5, posinf=7.0, neginf=-9.0),
    "nan_to_num_big": lambda x: torch.nan_to_num(x, posinf=1e10),
    "isnan": torch.isnan, "isinf": torch.isinf, "isposinf": torch.isposinf,
    "isneginf": torch.isneginf, "signbit": torch.signbit, "logical_not": torch.logical_not,
}


# f16 / bf16 run the ops whose lowering does more than widen, compute in
# float and round (each op is a program to compile: ~0.1 s).
UNARY_HALF = ["abs", "exp", "log", "sqrt", "rsqrt", "tanh", "sigmoid", "erfinv", "exp2",
              "log2", "log10", "asinh", "lgamma", "digamma", "reciprocal", "sign", "floor",
              "round", "trunc", "frac", "round2", "nan_to_num", "nan_to_num_big", "signbit",
              "isinf", "logical_not"]


def subset(table, names):
    return {k: table[k] for k in names}


@pytest.mark.parametrize("dtype", FLOATS, ids=str)
def test_unary_float(dtype):
    ops = UNARY_FLOAT if dtype == torch.float32 else subset(UNARY_FLOAT, UNARY_HALF)
    check_ops(ops, floats(dtype))


def test_unary_exact_values():
    # log2 / exp2 of exact powers, sign and trunc of zeros, digamma's poles.
    x = torch.tensor([2.0 ** k for k in range(-30, 31)])
    check_ops({"log2": torch.log2, "exp2": lambda v: torch.exp2(torch.log2(v)),
               "log10": lambda v: torch.log10(torch.tensor(1.0) * 0 + v)}, x)
    z = torch.tensor([0.0, -0.0, -0.25, 0.25, NAN, -1.0, -2.0, 1.0, 2.0])
    check_ops({"sign": torch.sign, "trunc": torch.trunc, "frac": torch.frac,
               "digamma": torch.digamma, "lgamma": torch.lgamma, "signbit": torch.signbit,
               "copysign": lambda v: torch.copysign(torch.ones_like(v), v)}, z)
    # Exact zeros and signs are part of the result, not just the value.
    t = to_tpu(z)
    assert torch.equal(torch.signbit(torch.trunc(t)).cpu(), torch.signbit(torch.trunc(z)))
    assert torch.equal(torch.digamma(t).cpu()[:2], torch.digamma(z)[:2])  # -inf, +inf
    assert torch.equal(torch.lgamma(to_tpu(torch.tensor([1.0, 2.0]))).cpu(), torch.zeros(2))


UNARY_INT = {
    "abs": torch.abs, "neg": torch.neg, "sign": torch.sign, "sgn": torch.sgn,
    "floor": torch.floor, "ceil": torch.ceil, "round": torch.round, "trunc": torch.trunc,
    "bitwise_not": torch.bitwise_not, "logical_not": torch.logical_not,
    "isnan": torch.isnan, "isinf": torch.isinf, "isposinf": torch.isposinf,
    "isneginf": torch.isneginf, "signbit": torch.signbit, "nan_to_num": torch.nan_to_num,
    # int -> float promotion
    "exp": torch.exp, "sqrt": torch.sqrt, "sigmoid": torch.sigmoid, "sin": torch.sin,
    "reciprocal": torch.reciprocal, "exp2": torch.exp2, "log2": torch.log2,
    "log10": torch.log10, "atan": torch.atan, "erfinv": torch.erfinv,
    "lgamma": (torch.lgamma, tol(1e-5, 1e-5)), "digamma": (torch.digamma, tol(1e-5, 1e-5)),
}


UNARY_INT_NARROW = ["abs", "neg", "sign", "floor", "round", "bitwise_not", "logical_not",
                    "isnan", "signbit", "nan_to_num", "exp", "log2"]


@pytest.mark.parametrize("dtype", INTS, ids=str)
def test_unary_int(dtype):
    x = ints(dtype)
    x[:4] = torch.tensor([0, 1, 2, 3])
    if dtype != torch.uint8:
        x[4] = torch.iinfo(dtype).min  # abs / neg wrap around
    check_ops(UNARY_INT if dtype == torch.int64 else subset(UNARY_INT, UNARY_INT_NARROW), x)


def test_unary_bool():
    b = torch.tensor([True, False, True, True, False])
    check_ops({k: UNARY_INT[k] for k in ["sign", "sgn", "bitwise_not", "logical_not", "isnan",
                                         "isinf", "signbit", "nan_to_num", "exp", "sigmoid",
                                         "reciprocal", "exp2"]}, b)


#===--- binary math ---===#

def float_pairs(dtype, n=300, seed=1):
    """Every pair of a few special values, then random pairs."""
    sp = [0.0, -0.0, 1.0, -1.0, 0.5, -2.5, 3.0, INF, -INF, NAN]
    a = torch.tensor(sp).repeat_interleave(len(sp))
    b = torch.tensor(sp).repeat(len(sp))
    g = torch.Generator().manual_seed(seed)
    a = torch.cat([a, torch.randn(n, generator=g) * 5])
    b = torch.cat([b, torch.randn(n, generator=g) * 5])
    return a.to(dtype), b.to(dtype)


BINARY_FLOAT = {
    "add": torch.add, "sub": torch.sub, "mul": torch.mul, "div": torch.div,
    "div_trunc": lambda a, b: torch.div(a, b, rounding_mode="trunc"),
    "div_floor": lambda a, b: torch.div(a, b, rounding_mode="floor"),
    "floor_divide": torch.floor_divide, "remainder": torch.remainder, "fmod": torch.fmod,
    "pow": torch.pow, "atan2": torch.atan2, "hypot": torch.hypot, "copysign": torch.copysign,
    "xlogy": torch.xlogy, "maximum": torch.maximum, "minimum": torch.minimum,
    "fmax": torch.fmax, "fmin": torch.fmin,
    "logical_and": torch.logical_and, "logical_or": torch.logical_or,
    "logical_xor": torch.logical_xor,
    "eq": torch.eq, "ne": torch.ne, "lt": torch.lt, "le": torch.le, "gt": torch.gt, "ge": torch.ge,
    "where": lambda a, b: torch.where(a > b, a, b),
    "clamp_t": lambda a, b: torch.clamp(a, min=b), "clamp_max_t": lambda a, b: torch.clamp_max(a, b),
    "clamp_both_t": lambda a, b: torch.clamp(a, b, b + 1),
    "lerp_t": lambda a, b: torch.lerp(a, b, torch.sigmoid(b)),
    "addcmul": lambda a, b: torch.addcmul(a, b, a, value=0.3),
    "addcdiv": lambda a, b: torch.addcdiv(a, b, a, value=-1.5),
    "add_alpha": lambda a, b: torch.add(a, b, alpha=0.3),
    "sub_alpha": lambda a, b: torch.sub(a, b, alpha=2),
}


BINARY_HALF = ["add", "mul", "div", "div_trunc", "div_floor", "floor_divide", "remainder",
               "fmod", "pow", "hypot", "copysign", "xlogy", "maximum", "fmax", "eq", "lt",
               "where", "clamp_t", "lerp_t", "addcmul", "addcdiv", "add_alpha"]


@pytest.mark.parametrize("dtype", FLOATS, ids=str)
def test_binary_float(dtype):
    ops = BINARY_FLOAT if dtype == torch.float32 else subset(BINARY_FLOAT, BINARY_HALF)
    check_ops(ops, *float_pairs(dtype))


SCALAR_FLOAT = {
    "add": lambda x: x + 2.5, "radd": lambda x: 0.3 + x, "sub": lambda x: x - 0.3,
    "rsub": lambda x: 0.3 - x, "mul": lambda x: x * 0.3, "div": lambda x: x / 0.3,
    "rdiv": lambda x: 2 / x, "floordiv": lambda x: x // 0.7, "mod": lambda x: x % 0.7,
    "rmod": lambda x: 5.0 % x, "fmod": lambda x: torch.fmod(x, -0.7),
    "pow2": lambda x: x ** 2, "pow3": lambda x: x ** 3, "pow0.5": lambda x: x ** 0.5,
    "pow-0.5": lambda x: x ** -0.5, "pow-1": lambda x: x ** -1, "pow-2": lambda x: x ** -2,
    "pow0": lambda x: x ** 0, "pow1": lambda x: x ** 1, "pow1.7": lambda x: x.abs() ** 1.7,
    "pow-2.3": lambda x: x ** -2.3, "rpow": lambda x: 2.5 ** x, "rpow_neg": lambda x: (-2) ** x,
    "copysign": lambda x: torch.copysign(x, -0.0), "xlogy_s": lambda x: torch.xlogy(x, 2.0),
    "xlogy_self": lambda x: torch.xlogy(2.0, x),
    "clamp": lambda x: torch.clamp(x, -0.5, 0.7), "clamp_min": lambda x: torch.clamp(x, min=0.2),
    "clamp_max": lambda x: torch.clamp(x, max=0.2), "clamp_min_op": lambda x: torch.clamp_min(x, -1),
    "clamp_max_op": lambda x: torch.clamp_max(x, 1), "clamp_nan": lambda x: torch.clamp(x, min=NAN),
    "clamp_swapped": lambda x: torch.clamp(x, 1.0, -1.0),
    "lerp_s": lambda x: torch.lerp(x, x * 2 + 1, 0.3), "lerp_big": lambda x: torch.lerp(x, -x, 0.75),
    "eq": lambda x: x == 0.3, "lt": lambda x: x < 0.3, "ge": lambda x: x >= -0.3,
    "maximum0d": lambda x: torch.maximum(x, torch.tensor(0.3)),
    "where_s": lambda x: torch.where(x > 0, x, 0.3),
    "logical_and0d": lambda x: torch.logical_and(x, torch.tensor(0.0)),
}


# Numbers are rounded to f16 / bf16 first, except by mul, div and the
# rounding divisions; pow has per-dtype special exponents.
SCALAR_HALF = ["add", "rsub", "mul", "div", "floordiv", "mod", "rmod", "pow2", "pow3",
               "pow0.5", "pow-0.5", "pow-2", "pow1.7", "rpow", "xlogy_s", "clamp", "lerp_s",
               "eq", "lt", "maximum0d", "where_s"]


@pytest.mark.parametrize("dtype", FLOATS, ids=str)
def test_scalar_operands(dtype):
    ops = SCALAR_FLOAT if dtype == torch.float32 else subset(SCALAR_FLOAT, SCALAR_HALF)
    check_ops(ops, floats(dtype, n=100))


BINARY_INT = {
    "add": torch.add, "sub": torch.sub, "mul": torch.mul, "div": torch.div,
    "div_trunc": lambda a, b: torch.div(a, b, rounding_mode="trunc"),
    "div_floor": lambda a, b: torch.div(a, b, rounding_mode="floor"),
    "floor_divide": torch.floor_divide, "remainder": torch.remainder, "fmod": torch.fmod,
    "maximum": torch.maximum, "minimum": torch.minimum, "fmax": torch.fmax, "fmin": torch.fmin,
    "bitwise_and": torch.bitwise_and, "bitwise_or": torch.bitwise_or,
    "bitwise_xor": torch.bitwise_xor,
    "logical_and": torch.logical_and, "logical_or": torch.logical_or,
    "logical_xor": torch.logical_xor,
    "eq": torch.eq, "ne": torch.ne, "lt": torch.lt, "le": torch.le, "gt": torch.gt, "ge": torch.ge,
    "where": lambda a, b: torch.where(a > b, a, b), "clamp_t": lambda a, b: torch.clamp(a, b, b + 5),
    "addcmul": lambda a, b: torch.addcmul(a, b, a, value=3),
    "add_alpha": lambda a, b: torch.add(a, b, alpha=3), "sub_alpha": lambda a, b: torch.sub(a, b, alpha=-2),
    # int -> float
    "atan2": torch.atan2, "copysign": torch.copysign, "xlogy": torch.xlogy,
    # mixed with numbers
    "add_f": lambda a, b: a + 1.5, "mul_i": lambda a, b: a * 3, "floordiv_s": lambda a, b: a // 7,
    "mod_s": lambda a, b: a % -7, "pow2": lambda a, b: a ** 2, "pow3": lambda a, b: a ** 3,
    "pow_f": lambda a, b: a ** 0.5, "rpow": lambda a, b: 2 ** (b % 6),
    "clamp_f": lambda a, b: torch.clamp(a, min=1.5), "div_s": lambda a, b: a / 4,
}


BINARY_INT_NARROW = ["add", "sub", "mul", "div_trunc", "div_floor", "remainder", "fmod",
                     "maximum", "fmin", "bitwise_xor", "lt", "add_alpha", "addcmul", "copysign",
                     "mod_s", "pow3"]


@pytest.mark.parametrize("dtype", INTS, ids=str)
def test_binary_int(dtype):
    a = ints(dtype, seed=2)
    b = ints(dtype, seed=3, nonzero=True)
    check_ops(BINARY_INT if dtype == torch.int64 else subset(BINARY_INT, BINARY_INT_NARROW), a, b)


@pytest.mark.parametrize("dtype", INTS, ids=str)
def test_int_pow_and_shifts(dtype):
    bits = torch.iinfo(dtype).bits
    g = torch.Generator().manual_seed(4)
    lo = 0 if dtype == torch.uint8 else -100
    a = torch.randint(lo, 100, (200,), generator=g).to(dtype)
    e = torch.randint(0, 12, (200,), generator=g).to(dtype)  # overflow wraps
    s = torch.randint(0 if dtype == torch.uint8 else -3, bits + 5, (200,), generator=g).to(dtype)
    ops = {"pow": torch.pow, "pow_s5": lambda a, e, s: a ** 5,
           "lshift": lambda a, e, s: torch.bitwise_left_shift(a, s),
           "rshift": lambda a, e, s: torch.bitwise_right_shift(a, s),
           "lshift_op": lambda a, e, s: a << s, "rshift_op": lambda a, e, s: a >> s,
           "lshift_s": lambda a, e, s: a << 3, "rshift_s": lambda a, e, s: a >> 2,
           "rlshift": lambda a, e, s: torch.bitwise_left_shift(1, s % bits)}
    check_ops({k: (v if k != "pow" else (lambda a, e, s: torch.pow(a, e))) for k, v in ops.items()},
              a, e, s)


def test_int_negative_powers():
    for dtype in [torch.int64, torch.int32, torch.int8]:
        base = torch.tensor([-1, -1, 1, 2, 0, -2, 3, 5, -3], dtype=dtype)
        exp = torch.tensor([-3, -2, -5, -1, -1, -3, 20, 30, 3], dtype=dtype)
        check(torch.pow, base, exp)
        check(lambda e: torch.pow(3, e), exp)  # pow.Scalar
    check_error(lambda x: x ** -1, torch.arange(3))
    check_error(lambda x: torch.pow(x, -2), torch.arange(3, dtype=torch.int8))


def test_bool_binary():
    g = torch.Generator().manual_seed(5)
    a = torch.rand(64, generator=g) > 0.5
    b = torch.rand(64, generator=g) > 0.5
    check_ops({"add": torch.add, "mul": torch.mul, "maximum": torch.maximum,
               "minimum": torch.minimum, "fmax": torch.fmax, "and": torch.bitwise_and,
               "or": torch.bitwise_or, "xor": torch.bitwise_xor, "land": torch.logical_and,
               "lxor": torch.logical_xor, "eq": torch.eq, "lt": torch.lt,
               "where": lambda a, b: torch.where(a, b, a), "add_int": lambda a, b: a + 2,
               "clamp_t": lambda a, b: torch.clamp(a, min=b), "pow_s": lambda a, b: a ** 2,
               "copysign": torch.copysign, "atan2": torch.atan2, "div": torch.div}, a, b)


def test_promotion_and_broadcast():
    g = torch.Generator().manual_seed(6)
    f = torch.randn(4, 1, generator=g)
    h = torch.randn(1, 5, generator=g).half()
    i = torch.randint(-5, 5, (4, 5), generator=g)
    u = torch.randint(0, 200, (5,), generator=g).to(torch.uint8)
    c = torch.randint(-100, 100, (5,), generator=g).to(torch.int8)
    s = torch.tensor(2.5, dtype=torch.float64)  # a 0-d CPU tensor
    check_ops({"f+h": lambda f, h, i, u, c, s: f + h, "h*i": lambda f, h, i, u, c, s: h * i,
               "u+c": lambda f, h, i, u, c, s: u + c, "u-c": lambda f, h, i, u, c, s: u - c,
               "i/h": lambda f, h, i, u, c, s: i / h, "u%c": lambda f, h, i, u, c, s: torch.fmod(u.int(), c),
               "pow_uc": lambda f, h, i, u, c, s: torch.pow(u % 4, c.abs() % 5),
               "i*s": lambda f, h, i, u, c, s: i * s, "h+s": lambda f, h, i, u, c, s: h + s,
               "max_if": lambda f, h, i, u, c, s: torch.maximum(i, f),
               "hypot_fh": lambda f, h, i, u, c, s: torch.hypot(f, h),
               "where_mix": lambda f, h, i, u, c, s: torch.where(i > 0, f, h),
               "clamp_mix": lambda f, h, i, u, c, s: torch.clamp(i, f, h),
               "lshift_uc": lambda f, h, i, u, c, s: u << (c.abs() % 9),
               "cmp_mix": lambda f, h, i, u, c, s: u > c, "addcdiv": lambda f, h, i, u, c, s: torch.addcdiv(i, f, h),
               "xlogy_mix": lambda f, h, i, u, c, s: torch.xlogy(u, h)},
              f, h, i, u, c, s)


def test_int_division_by_zero_raises():
    a = torch.tensor([5, -3, 7])
    b = torch.tensor([2, 0, 1])
    for fn in [lambda a, b: torch.div(a, b, rounding_mode="trunc"),
               lambda a, b: torch.div(a, b, rounding_mode="floor"),
               torch.floor_divide, torch.remainder, torch.fmod,
               lambda a, b: a // 0, lambda a, b: a % 0]:
        check_error(fn, a, b)
    # Float division by zero is IEEE's, and true division of ints is float.
    check_ops({"div": torch.div, "floor_div": lambda a, b: torch.floor_divide(a.float(), b),
               "rem": lambda a, b: torch.remainder(a.float(), b.float()),
               "fmod": lambda a, b: torch.fmod(a.float(), b)}, a, b)


def test_int_overflow_wraps():
    i8 = torch.tensor([127, -128, 100, -100], dtype=torch.int8)
    i32 = torch.tensor([2 ** 31 - 1, -2 ** 31, 65536, 123456], dtype=torch.int32)
    u8 = torch.tensor([255, 0, 200, 1], dtype=torch.uint8)
    check_ops({"add8": lambda a, b, c: a + 1, "mul8": lambda a, b, c: a * 3,
               "neg8": lambda a, b, c: -a, "abs8": lambda a, b, c: a.abs(),
               "mul32": lambda a, b, c: b * b, "sub32": lambda a, b, c: b - 1,
               "addu8": lambda a, b, c: c + 100, "subu8": lambda a, b, c: c - 201,
               "negu8": lambda a, b, c: -c}, i8, i32, u8)


def test_float64():
    # The lowerings with their own f64 paths (bit patterns, constants).
    x = floats(torch.float64, n=60)
    y = floats(torch.float64, n=60, seed=3)
    check_ops({"log2": lambda x, y: torch.log2(x),
               "log2_pow2": lambda x, y: torch.log2(torch.exp2(x.round().clamp(-1000, 1000))),
               "signbit": lambda x, y: torch.signbit(x), "copysign": torch.copysign,
               "nan_to_num": lambda x, y: torch.nan_to_num(x), "hypot": torch.hypot,
               "round2": lambda x, y: torch.round(x, decimals=2), "pow-0.5": lambda x, y: x ** -0.5,
               "pow3": lambda x, y: x ** 3, "remainder": torch.remainder, "floor_divide": torch.floor_divide,
               "digamma": lambda x, y: torch.digamma(x), "maximum": torch.maximum, "fmin": torch.fmin},
              x, y)


def test_complex():
    # The ops PyTorch defines for complex numbers; the others raise as on CPU
    # (XLA would crash or compute something else).
    z = torch.tensor([1 + 2j, -3 - 0.5j, 0j, 2.5 - 1j, -0.5 + 4j], dtype=torch.complex64)
    x = torch.tensor([1.0, -2.0, 0.5, 0.0, 3.0])
    check_ops({"abs": lambda z, x: torch.abs(z), "sgn": lambda z, x: torch.sgn(z),
               "isnan": lambda z, x: torch.isnan(z), "isinf": lambda z, x: torch.isinf(z),
               "logical_not": lambda z, x: torch.logical_not(z), "eq": lambda z, x: z == z * 1,
               "mixed": lambda z, x: z * x + x, "pow": lambda z, x: z ** 2,
               "reciprocal": lambda z, x: torch.reciprocal(z + 1),
               "where": lambda z, x: torch.where(x > 0, z, 0),
               "addcmul": lambda z, x: torch.addcmul(z, z, x)}, z, x)
    for fn in [torch.sign, torch.floor, torch.round, torch.signbit, torch.isposinf,
               torch.lgamma, torch.erfc, torch.relu, lambda z: z < z, lambda z: torch.fmod(z, z),
               lambda z: torch.remainder(z, 2), lambda z: torch.floor_divide(z, z),
               lambda z: torch.clamp(z, 0, 1), lambda z: torch.maximum(z, z),
               lambda z: torch.copysign(z, z), lambda z: torch.atan2(z, z)]:
        check_error(fn, z)


def test_complex_lerp_and_sinc():
    # As CPU: lerp's two branches (a complex weight is small when re^2 + im^2
    # < 0.25) with real, complex and tensor weights; sinc is 1 only at 0.
    a, b = (torch.randn(6, dtype=torch.complex64) for _ in range(2))
    w = torch.tensor([0.1, 0.4 + 0.2j, 0.3 - 0.5j, 0.6j, 1.5 - 1j, -0.2], dtype=torch.complex64)
    for weight in (0.3, 0.8, 0.2 - 0.3j, 1 + 1j):
        check(lambda a, b: (torch.lerp(a, b, weight), a.clone().lerp_(b, weight)), a, b)
    for weight in (w, torch.tensor(0.7), torch.tensor(0.9 + 0.1j)):
        check(lambda a, b, w: (torch.lerp(a, b, w), a.clone().lerp_(b, w)), a, b, weight)
    check(lambda a, b, w: torch.lerp(a, b, w, out=torch.empty_like(a)), a, b, w)
    z = torch.tensor([0j, 1e-20 + 0j, 1e-3j, 0.5 + 0.5j, -2 + 3j, 1.5, 4j], dtype=torch.complex64)
    check(lambda z: (torch.sinc(z), z.clone().sinc_(), torch.sinc(z, out=torch.empty_like(z))), z)


#===--- in-place and out= ---===#

def test_inplace_variants():
    x = floats(torch.float32, n=60)
    y = floats(torch.float32, n=60, seed=3)
    i = ints(torch.int32, n=len(x), nonzero=True)

    def run(x, y, i):
        return [x.clone().exp2_(), x.clone().sign_(), x.clone().sgn_(),
                x.clone().round_(decimals=1), x.clone().frac_(), x.clone().nan_to_num_(),
                x.clone().reciprocal_(), x.clone().pow_(2), x.clone().pow_(y),
                x.clone().remainder_(0.7), x.clone().fmod_(y), x.clone().floor_divide_(y),
                x.clone().clamp_(-1, 1), x.clone().clamp_(min=y), x.clone().clamp_min_(0),
                x.clone().clamp_max_(y), x.clone().lerp_(y, 0.3), x.clone().addcmul_(y, y, value=2),
                x.clone().addcdiv_(y, y + 10), x.clone().copysign_(y), x.clone().xlogy_(y),
                x.clone().hypot_(y), x.clone().logical_not_(), x.clone().logical_and_(y),
                x.clone().atanh_(), x.clone().digamma_(), x.clone().mul_(3), x.clone().div_(y, rounding_mode="floor"),
                i.clone().bitwise_not_(), i.clone().remainder_(i + 1000), i.clone().__ilshift__(3),
                i.clone().__irshift__(i.abs() % 40), i.clone().bitwise_left_shift_(2),
                i.clone().pow_(2), i.clone().floor_divide_(-3), i.clone().abs_(), i.clone().sign_(),
                i.clone().clamp_(-5, 5)]

    check(run, x, y, i)


def test_out_variants():
    x = floats(torch.float32, n=60)
    y = floats(torch.float32, n=60, seed=3)

    def run(x, y):
        o = lambda dtype=torch.float32: torch.empty(x.shape, dtype=dtype, device=x.device)
        outs = []
        for fn in [lambda out: torch.exp2(x, out=out), lambda out: torch.lgamma(x, out=out),
                   lambda out: torch.pow(x, 2, out=out), lambda out: torch.pow(x, y, out=out),
                   lambda out: torch.pow(2, y, out=out), lambda out: torch.clamp(x, 0, 1, out=out),
                   lambda out: torch.remainder(x, y, out=out), lambda out: torch.hypot(x, y, out=out),
                   lambda out: torch.lerp(x, y, 0.5, out=out), lambda out: torch.addcmul(x, y, y, out=out),
                   lambda out: torch.nan_to_num(x, out=out), lambda out: torch.round(x, decimals=2, out=out),
                   lambda out: torch.fmax(x, y, out=out), lambda out: torch.floor_divide(x, y, out=out)]:
            out = o()
            fn(out)
            outs.append(out)
        for fn in [lambda out: torch.signbit(x, out=out), lambda out: torch.isposinf(x, out=out)]:
            out = o(torch.bool)
            fn(out)
            outs.append(out)
        # A bool result written into a float tensor, a float one into double.
        outs.append(torch.logical_and(x, y, out=o()))
        outs.append(torch.sqrt(x, out=o(torch.float64)))
        outs.append(torch.exp(x.half(), out=o()))
        return outs

    check(run, x, y)


def test_inplace_and_out_errors():
    i = torch.arange(6)
    f = torch.randn(6)
    check_error(lambda i: i.exp2_(), i)              # Float can't be cast to Long
    check_error(lambda i: i.clamp_(1.5), i)
    check_error(lambda i, f: i.pow_(f), i, f)
    check_error(lambda f: f.add_(torch.ones(2, 6)), f)  # broadcast to a larger shape
    check_error(lambda i, f: torch.pow(f, 2, out=i), i, f)


#===--- errors ---===#

def error_cases():
    f = torch.randn(5)
    i = torch.arange(5)
    b = torch.tensor([True, False, True, True, False])
    return [
        (torch.bitwise_not, f), (lambda x: torch.bitwise_and(x, x), f),
        (lambda x: x << 1, f), (lambda x: x >> 1, f), (lambda x: torch.bitwise_left_shift(x, x), b),
        (lambda x: x << 1.5, i), (torch.frac, i), (torch.floor, b), (torch.round, b),
        (lambda x: torch.round(x, decimals=1), i), (torch.abs, b), (torch.neg, b),
        (lambda x: x - x, b), (lambda x: x ** x, b), (lambda x: torch.remainder(x, x), b),
        (lambda x: torch.fmod(x, x), b), (lambda x: torch.hypot(x, x), i),
        (lambda x: torch.div(x, x, rounding_mode="floor"), b),
        (lambda x: torch.div(x, x, rounding_mode="bad"), f),
        (lambda x: torch.floor_divide(x, x), b),
        (lambda x: torch.lerp(x, x.half(), 0.5), f), (lambda x: torch.lerp(x, x, 0.5), i),
        (lambda x: torch.lerp(x, x, x.double()), f), (lambda x: torch.addcdiv(x, x, x), i),
        (lambda x: torch.addcmul(x, x, x), b), (lambda x: torch.clamp(x), f),
        (lambda x: torch.clamp(x, min=False), b), (lambda x: torch.add(x, x, alpha=0.5), i),
        (lambda x: torch.where(x, x, x), f),
        (lambda x: torch.add(x, torch.ones(3)), f),  # shapes do not broadcast
    ]


def test_errors():
    for fn, x in error_cases():
        check_error(fn, x)


#===--- backward ---===#

MATH_BACKWARD = {
    "exp": torch.exp, "sin": torch.sin, "tanh": torch.tanh, "sigmoid": torch.sigmoid,
    "atan": torch.atan, "asin": lambda x: torch.asin(x / 10), "erf": torch.erf,
    "log1p": lambda x: torch.log1p(x.abs()), "sqrt": lambda x: torch.sqrt(x.abs() + 1),
    "pow3": lambda x: x ** 3, "pow_t": lambda x: torch.pow(x.abs() + 1, x),
    "clamp": lambda x: x.clamp(-0.5, 0.5), "lerp": lambda x: torch.lerp(x, x * 2, 0.3),
    "addcmul": lambda x: torch.addcmul(x, x, x), "hypot": lambda x: torch.hypot(x, x + 1),
"remainder": lambda x: torch.remainder(x, 0.7),
    "lgamma": lambda x: torch.lgamma(x.abs() + 1), "where": lambda x: torch.where(x > 0, x, x * 2),
    "abs": torch.abs, "reciprocal": lambda x: torch.reciprocal(x.abs() + 1),
}


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_math_backward(dtype):
    x = torch.randn(3, 7, generator=torch.Generator().manual_seed(8)).to(dtype)
    fns = list(MATH_BACKWARD.values())
    if dtype != torch.float32:
        fns = fns[::3]

    def run(x):
        x = x.detach().requires_grad_()
        ys = [f(x) for f in fns]
        grads = torch.autograd.grad(sum(y.sum() for y in ys), x)
        return [y.detach() for y in ys] + list(grads)

    check(run, x)


def test_conj_physical():
    z = torch.randn(3, 4, dtype=torch.complex64)
    check(torch.conj_physical, z)
    check(torch.conj_physical, torch.randn(3, 4))  # real: the identity
    check(lambda z: z.clone().conj_physical_(), z)
    check(lambda z: torch.conj_physical(z, out=torch.empty_like(z)), z)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_special_functions(dtype):
    x = floats(dtype, n=60)
    check(torch.sinc, x)
    # CPU rounds each step of half-precision logit; we round once.
    tol = {"atol": 0.02, "rtol": 0.02} if dtype == torch.bfloat16 else {}
    check(lambda u: torch.logit(u), torch.rand(50).to(dtype), **tol)
    check(lambda u: torch.logit(u, eps=0.2), torch.rand(50).to(dtype), **tol)
    pos = (torch.rand(40) * 5 + 1.1).to(dtype)
    loose = {"rtol": 1e-4, "atol": 1e-4} if dtype == torch.float32 else {}
    check(lambda u: torch.mvlgamma(u, 3), pos, **loose)
    for n in (0, 1, 3):
        check(lambda u: torch.polygamma(n, u), pos, **loose)
    check(torch.sinc, torch.arange(-3, 4))  # integers compute in float


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16, torch.float16],
                         ids=str)
def test_entr(dtype):
    # -x log x, 0 at 0, -inf below 0, NaN kept; half precision rounds log(x)
    # first, as CPU's kernel does, so results match exactly.
    specials = torch.tensor([0.0, -0.0, 1.0, -1.0, math.inf, -math.inf, math.nan, 1e-30])
    x = torch.cat([specials, torch.rand(200) * 10]).to(dtype)
    exact = {"atol": 0, "rtol": 0} if dtype in (torch.bfloat16, torch.float16) else {}
    check(torch.special.entr, x, **exact)
    check(torch.special.entr, torch.arange(-3, 4))
    check(lambda u: torch.special.entr(u, out=torch.empty_like(u)), x, **exact)
    check_error(torch.special.entr, torch.tensor([1j]))


def test_logit_backward():
    u = torch.rand(30)
    for eps in (None, 0.25):
        def grad(v):
            v = v.detach().requires_grad_()
            torch.logit(v, eps).sum().backward()
            return v.grad
        check(grad, u)


def test_rsub_complex_polar():
    a, b = torch.randn(5, 4), torch.randn(4)
    check(lambda p, q: torch.rsub(p, q, alpha=2), a, b)
    check(lambda p: 1.5 - p, a)
    check(lambda p: torch.rsub(p, 2, alpha=3), torch.arange(6))
    check(torch.complex, torch.randn(3, 1), torch.randn(4))
    check(torch.polar, torch.rand(3, 4), torch.randn(3, 4))
    check_error(torch.complex, torch.randn(2), torch.randn(2, dtype=torch.float64))
    check_error(torch.complex, torch.arange(2), torch.arange(2))


def test_complex_alpha_and_value():
    # A complex alpha or value whose real part is 1 still scales.
    a, b, m = (torch.randn(4, dtype=torch.complex64) for _ in range(3))
    for k in (1 + 2j, 1j, 1 - 0.5j):
        check(lambda p, q: torch.add(p, q, alpha=k), a, b)
        check(lambda p, q: torch.sub(p, q, alpha=k), a, b)
        check(lambda p, q, r: torch.addcmul(p, q, r, value=k), a, b, m)
        check(lambda p, q, r: torch.addcdiv(p, q, r, value=k), a, b, m)
        check(lambda p, q: torch._foreach_add([p], [q], alpha=k)[0], a, b)
        check(lambda p, q: p.index_add(0, torch.tensor([0, 2], device=p.device), q[:2], alpha=k),
              a, b)


def test_numbers_that_do_not_fit_the_dtype_are_refused():
    # clamp's bounds, alpha and addcmul's value are converted to the tensors'
    # dtype as PyTorch's Scalar::to<T>() does: out of range raises instead of
    # wrapping (a negative number wraps into an unsigned dtype within its range).
    u8 = torch.tensor([0, 100, 255], dtype=torch.uint8)
    i8 = torch.tensor([1, -1], dtype=torch.int8)
    half = torch.tensor([1.0, 2.0], dtype=torch.float16)
    for fn, x in [(lambda a: torch.clamp(a, -5, 300), u8), (lambda a: a.clamp_min(300), u8),
                  (lambda a: a.clone().clamp_(max=300), u8), (lambda a: a.clamp(max=200), i8),
                  (lambda a: a.clamp(max=1e10), half), (lambda a: torch.add(a, a, alpha=300), u8),
                  (lambda a: torch.sub(a, a, alpha=200), i8),
                  (lambda a: torch.add(a, a, alpha=1e10), half),
                  (lambda a: torch.addcmul(a, a, a, value=200), i8)]:
        err, cpu_err = check_error(fn, x)
        assert str(err).splitlines()[0] == str(cpu_err).splitlines()[0]
    check(lambda a: torch.clamp(a, -5), u8)
    check(lambda a: torch.add(a, a, alpha=-5), u8)
    check(lambda a: torch.addcdiv(a, a, a, value=1e10), half)  # computed in float
    check(lambda a: torch.clamp(a, torch.tensor(300, device=a.device)), u8)  # a tensor wraps


def test_inplace_abs_of_complex_is_refused():
    z = torch.randn(3, dtype=torch.complex64)
    for op in (lambda a: a.abs_(), lambda a: torch._foreach_abs_([a])):
        err, cpu_err = check_error(op, z)
        assert str(err) == str(cpu_err)
    zt = z.to("tpu")
    for op in (lambda a: a.abs_(), lambda a: torch._foreach_abs_([a])):
        with pytest.raises(RuntimeError):
            op(zt)
    assert torch.equal(zt.cpu(), z)  # nothing written
    check(lambda a: torch.abs(a, out=torch.empty(3, dtype=torch.complex64, device=a.device)), z)


def test_special_function_errors():
    check_error(lambda u: torch.polygamma(-1, u), torch.rand(3))
    check_error(lambda u: torch.mvlgamma(u, 0), torch.rand(3) + 2)
    # CPU (torch 2.13) computes x <= (p-1)/2 instead of raising: so does tpu
    # (a device-side check raised here, under vmap too).
    x = torch.tensor([0.1, 0.9, 1.0, 3.0])
    torch.testing.assert_close(torch.mvlgamma(x.to("tpu"), 3).cpu(), torch.mvlgamma(x, 3))
    torch.testing.assert_close(torch.func.vmap(lambda t: torch.mvlgamma(t, 2))(
        x.reshape(2, 2).to("tpu")).cpu(), torch.mvlgamma(x.reshape(2, 2), 2))


def test_inplace_through_out_never_broadcasts_self():
    # ldexp_ writes through mul's out=: self may not grow to the broadcast shape.
    check_error(lambda a, b: a.clone().ldexp_(b), torch.randn(5, 1), torch.randint(-3, 3, (5, 5)))
    check_error(lambda a, b: torch.add(a, b, out=a), torch.randn(5, 1), torch.randn(5, 5))


def test_angle():
    check(torch.angle, torch.tensor([-1.0, 0.0, -0.0, 2.0, math.nan, -math.inf]))
    check(torch.angle, torch.tensor([-3, 0, 4]))
    check(torch.angle, torch.tensor([1 + 1j, -1 + 0j, complex(-1, -0.0), 0j], dtype=torch.complex64))
    check(torch.angle, floats(torch.bfloat16, n=20))


def test_a_bool_mask_times_a_float_keeps_ieee_results():
    # XLA rewrites a product with a converted bool into a select, which gave
    # 0 for False * NaN, False * inf and False * -2 (CPU: NaN, NaN, -0.0),
    # so a NaN under a mask vanished from a masked loss.
    x = torch.tensor([float("nan"), float("inf"), -2.0, 3.0])
    m = torch.tensor([False, False, False, True])

    def same_bits(a, b):
        b = b.cpu()
        return (torch.equal(a.isnan(), b.isnan()) and torch.equal(a.signbit(), b.signbit())
                and bool(((a == b) | a.isnan()).all()))

    for fn in (lambda x, m: m * x, lambda x, m: x.double() * m, lambda x, m: x.clone().mul_(m),
               lambda x, m: m * float("inf"), lambda x, m: x * (x > 0),
               lambda x, m: x * m.float(), lambda x, m: (x * m.to(x.dtype)).sum().reshape(1),
               lambda x, m: torch.addcmul(x, x, m.float()), lambda x, m: torch.lerp(x, x, m.float())):
        assert same_bits(fn(x, m), fn(x.to("tpu"), m.to("tpu")))


def test_integer_powers_use_every_bit_of_the_exponent():
    # XLA's integer power reads only the exponent's low 6 bits: 3 ** 64 gave 1.
    for fn, args in [(lambda a: a ** 64, (torch.tensor([3, 2, -1, 5]),)),
                     (lambda a: a ** 100, (torch.tensor([3, 2, -3]),)),
                     (torch.pow, (torch.tensor([3, 2, 5, -1, 7]), torch.tensor([64, 65, 70, 2**40 + 1, 2**62]))),
                     (lambda e: 2 ** e, (torch.tensor([31, 32, 63], dtype=torch.int32),)),
                     (torch.pow, (torch.tensor([3, 3, 127], dtype=torch.uint8),
                                  torch.tensor([128, 200, 192], dtype=torch.uint8))),
                     (lambda a: a ** 200, (torch.tensor([3, 127], dtype=torch.uint8),)),
                     (lambda a: torch._foreach_pow([a], 64)[0], (torch.tensor([3, 2, 5]),)),
                     (torch.pow, (torch.tensor([1, -1, -1, 2, 0]), torch.tensor([-3, -3, -2, -1, -2])))]:
        check(fn, *args)


def test_copysign_of_bfloat16_takes_the_sign_of_an_integer():
    x = torch.tensor([3.0, -2.0, 5.0, -1.0], dtype=torch.bfloat16)
    for dtype in (torch.int8, torch.int32, torch.int64):
        check(torch.copysign, x, torch.tensor([3, -2, -5, 1], dtype=dtype))


@pytest.mark.parametrize("dtype", [torch.complex64, torch.complex128])
def test_complex_log2_and_log10_of_zero_and_infinity_keep_a_zero_angle(dtype):
    # A complex divisor log(2) made the imaginary part of -inf / log(2) NaN.
    z = torch.tensor([0j, complex(math.inf, 0), complex(math.inf, 1), -1 + 0j, 1j], dtype=dtype)
    for op in (torch.log2, torch.log10):
        expected, actual = op(z), op(z.tpu()).cpu()
        torch.testing.assert_close(actual, expected, equal_nan=True)
        assert not actual.imag.isnan().any()


def test_erfinv_near_plus_minus_one():
    # chlo's float32 erfinv was off by up to ~50 ulps near ±1, which the
    # gradient (sqrt(pi)/2 exp(erfinv(x)^2)) carried: 3.4x the OpInfo's
    # tolerance at x = -0.9987; a Newton step brings it within ~2 ulps
    x = torch.cat([torch.linspace(-0.99999, 0.99999, 4001),
                   1 - torch.logspace(-7, -1, 2000), -1 + torch.logspace(-7, -1, 2000),
                   torch.tensor([0.0, -0.0, 1.0, -1.0, 1.5, float("nan"), 1e-30, -0.9987144])])
    ref = torch.erfinv(x.double())
    with NoFallback():
        got = torch.erfinv(x.to("tpu")).cpu()
    ulp = torch.finfo(torch.float32).eps * ref.abs().float().clamp_min(1e-30)
    finite = ref.isfinite()
    assert ((got.double() - ref).abs()[finite] <= 3 * ulp.double()[finite]).all()
    torch.testing.assert_close(got[~finite], torch.erfinv(x)[~finite], equal_nan=True)
    assert got[-7].signbit() and not got[-8].signbit()  # -0 stays -0
    x = torch.tensor([-0.9987144, 0.99995, -0.5, 0.3], requires_grad=True)
    check_grad(torch.erfinv, x, atol=0, rtol=2e-6)


@pytest.mark.parametrize("dtype", [torch.complex64, torch.complex128])
def test_complex_zero_to_a_power_of_positive_real_part_is_zero(dtype):
    # XLA's complex pow is exp(w log z): NaN at z = 0, where CPU gives 0.
    z = torch.tensor([0j, 0j, 0j, 2 + 1j], dtype=dtype)
    w = torch.tensor([1 + 1j, 2.0, 0.5 - 3j, 1 + 1j], dtype=dtype)
    check(torch.pow, z, w, atol=1e-6, rtol=1e-6)
    check(lambda z: z ** (1 + 1j), z, atol=1e-6, rtol=1e-6)


def test_a_bool_tensor_takes_the_powers_zero_and_one_as_cpu_does():
    # CPU answers x ** 0 and x ** 1 before it looks at the dtype; a bool
    # power of a bool tensor raises there and here otherwise.
    b = torch.tensor([True, False, True])
    for e in (True, False, 1, 0, 2):
        check(lambda b: b ** e, b)
    check_error(torch.pow, b, b)
