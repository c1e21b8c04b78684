"""A fast slice of the OpInfo conformance sweep (tests/conformance/sweep.py):
the first samples of every OpInfo operator, functional variant, in float32
and bfloat16, on tpu against CPU.

subset_expected.json (written from a full sweep by
`sweep.py --write-expectations`) holds each case's class in the sweep. Here
an operator the sweep found `native` must stay native (no CPU fallback, no
wrong value, no error); a `fallback` one must still pass (natively or not);
one that failed or raised in the sweep is listed in the report
(docs/op_coverage.md) with its cause and is not asserted here. Crashing
cases are never run in this process.
"""
import json
from pathlib import Path

import pytest
import torch

import opinfo_harness as H

SAMPLES = 2
DTYPES = (torch.float32, torch.bfloat16)
EXPECTED_PATH = Path(__file__).with_name("subset_expected.json")
EXPECTED = json.loads(EXPECTED_PATH.read_text()) if EXPECTED_PATH.exists() else {}
DB = dict(H.databases())


def _keys():
    return sorted(k for k in DB if EXPECTED.get(k))


@pytest.fixture(scope="module", autouse=True)
def _setup():
    H.setup()


def test_expectations_cover_the_database():
    # A new torch (new OpInfo entries) or a missing file: regenerate with
    # `make conformance` and `sweep.py --write-expectations`.
    assert EXPECTED, f"{EXPECTED_PATH.name} is missing"
    unknown = sorted(set(EXPECTED) - set(DB))
    assert not unknown, f"expectations for unknown OpInfo entries: {unknown[:10]}"


@pytest.mark.parametrize("key", _keys())
def test_opinfo(key):
    op = DB[key]
    problems = []
    for dtype in DTYPES:
        want = EXPECTED[key].get(H.DTYPE_NAMES[dtype])
        if want not in ("native", "fallback"):
            continue  # fail / error (reported with their cause), skip, crash, unsupported
        r = H.run_case(op, key, dtype, "functional", max_samples=SAMPLES)
        got = r["status"]
        ok = got == "native" or (want == "fallback" and got in ("fallback", "skip")) or \
            (want == "native" and got == "skip")
        if not ok:
            problems.append(f"{H.DTYPE_NAMES[dtype]}: {got} (sweep: {want}): "
                            f"{r['detail'] or ''} fallbacks={r['fallbacks']}")
    assert not problems, "; ".join(problems)
