"""Suite `coverage`: how much of ATen runs natively.

Today: the rows of the op table (torchtpu._ops.table()) and the ATen
overloads they register (in-place and out= variants included), grouped by
the family sections of runtime/src/lower/ops.def when the source tree is at
hand. When the conformance harness has written docs/op_coverage.json, its
outcome counts (native, fallback, fail, error, skip, crash) are summarized too.
No timings: every figure is a count.
"""
import json
import re
from pathlib import Path

from torchtpu.perflab import harness

SUITE = "coverage"
OUTCOMES = ("native", "fallback", "fail", "error", "skip", "crash")
# Where the conformance harness writes its results (None: docs/op_coverage.json
# in the source tree).
CONFORMANCE_PATH = None
_ROW = re.compile(r"^\s*(OP|UNARY|BINARY|COMPARE)\(\s*(\w+)\s*,")
_SECTION = re.compile(r"^//===---\s*(.*?)\s*---===//")


def sections(path):
    """{row name: section title} from ops.def."""
    out, title = {}, "(no section)"
    for line in path.read_text().splitlines():
        m = _SECTION.match(line)
        if m:
            title = m.group(1)
            continue
        m = _ROW.match(line)
        if m:
            out[m.group(2)] = title
    return out


def _entries(doc):
    """The per-op entries of a conformance document, whatever its layout:
    a list, {"results": list or dict}, or {name: entry}."""
    if isinstance(doc, dict):
        for key in ("results", "ops", "entries", "cases"):
            if key in doc:
                return _entries(doc[key])
        return [dict(v, name=k) if isinstance(v, dict) else {"name": k, "status": v}
                for k, v in doc.items() if k not in ("summary", "meta", "schema", "date")]
    if isinstance(doc, list):
        return [e if isinstance(e, dict) else {"status": e} for e in doc]
    return []


def summarize_conformance(doc):
    """Outcome counts of a conformance document. A "summary" dict of counts
    is used as written; otherwise entries are counted by their status."""
    counts = {k: 0 for k in OUTCOMES}
    counts["other"] = 0
    if isinstance(doc, dict) and isinstance(doc.get("summary"), dict) and all(
            isinstance(v, (int, float)) for v in doc["summary"].values()):
        for k, v in doc["summary"].items():
            key = str(k).lower()
            counts[key if key in counts else "other"] += int(v)
        counts["source"] = "summary"
        return counts
    for e in _entries(doc):
        status = str(e.get("status", e.get("result", e.get("outcome", "other")))).lower()
        counts[status if status in counts else "other"] += 1
    counts["source"] = "entries"
    return counts


def run(results, cfg, progress=None):
    from torchtpu import _ops

    bar = progress or harness.Progress(SUITE, 2)
    bar.now("op table")
    rows = _ops.table()
    overloads = sum(len(q) for _, _, q in rows)
    results.record(SUITE, "op_table", "tpu", "rows", "count", value=len(rows),
                   better="higher")
    results.record(SUITE, "op_table", "tpu", "aten_overloads", "count",
                   value=overloads, better="higher")
    info = {"rows": len(rows), "aten_overloads": overloads, "sections": None,
            "conformance": None}
    root = harness.repo_root()
    ops_def = root / "runtime" / "src" / "lower" / "ops.def" if root else None
    if ops_def is not None and ops_def.exists():
        where = sections(ops_def)
        by = {}
        for _, name, q in rows:
            s = by.setdefault(where.get(name, "(not in ops.def)"), {"rows": 0, "aten_overloads": 0})
            s["rows"] += 1
            s["aten_overloads"] += len(q)
        info["sections"] = by
    bar.step("op table")

    bar.now("conformance results")
    path = CONFORMANCE_PATH or (root / "docs" / "op_coverage.json" if root else None)
    path = Path(path) if path else None
    if path is None or not path.exists():
        info["conformance"] = {"status": "absent", "path": str(path) if path else None,
                               "note": "no conformance results yet (docs/op_coverage.json)"}
        results.record(SUITE, "conformance", "tpu", "entries", "count", status="skipped",
                       error="docs/op_coverage.json not found")
    else:
        try:
            counts = summarize_conformance(json.loads(path.read_text()))
            info["conformance"] = {"status": "ok", "path": str(path), "counts": counts}
            for k in OUTCOMES + ("other",):
                results.record(SUITE, "conformance", "tpu", k, "count", value=counts[k],
                               better="higher" if k == "native" else "lower")
        except (OSError, ValueError) as e:
            info["conformance"] = {"status": "error", "path": str(path),
                                   "error": harness.error_text(e)}
            results.failed(SUITE, "conformance", "tpu", "entries", "count", harness.error_text(e))
    bar.step("conformance results")
    results.suites[SUITE] = {"config": {}, "summary": info}
    if progress is None:
        bar.close()
