"""Builds docs/op_coverage.json and docs/op_coverage.md from the sweep's
records (sweep.py)."""
import datetime
import json
import re
from collections import Counter, defaultdict
from pathlib import Path

CLASSES = ("native", "fallback", "fail", "error", "skip", "crash")
VARIANTS = ("functional", "inplace", "out", "grad")
DTYPES = ("float32", "bfloat16", "float16", "float64", "int64", "int32", "int8", "uint8",
          "bool", "complex64")
CODE = {"native": "n", "fallback": "f", "fail": "X", "error": "E", "skip": "s", "crash": "C"}
# Namespaces whose OpInfo entries the "general operators" figure leaves out.
EXCLUDED_PREFIXES = ("linalg.", "fft.", "special.")

SCHEMA = """\
`docs/op_coverage.json` (schema `torchtpu.op_coverage/1`) holds:

- `summary`: counts of (operator, dtype, variant) cases by class: `native`,
  `fallback`, `fail`, `error`, `skip`, `crash` (all integers; perflab's
  coverage suite reads it).
- `headline`: the figures below, as numbers.
- `cases`: one entry per (operator, dtype, variant): `op` (OpInfo name, with
  `.variant_test_name` when it has one), `dtype`, `variant` (`functional`,
  `inplace`, `out`, `grad`), `status` (one of the classes), `samples`,
  `passed`, `fallbacks` (ATen operators that ran on the CPU), `detail` (the
  first failure: exception text or mismatch with its max error), `max_error`,
  `tolerance` ([atol, rtol]), `seconds`, `compiles`, `compile_seconds`.
- `core_aten`: one entry per (Core ATen overload, dtype) for float32 and
  bfloat16: `overload`, `dtype`, `status`, `origin` (`captured` from OpInfo
  samples, `cast` from a float32 capture, or hand-written `probe`), `sources`
  (OpInfo entries the calls came from), `fallbacks`, `detail`.
- `missing`: ATen operators that fell back to the CPU: `{name: {"family",
  "cases", "ops", "core"}}` (the cases and OpInfo operators that used them,
  whether the operator is Core ATen).
- `meta`: torch version, date, wall time, workers, mode.
"""

CLASS_TEXT = """\
Classes: **native** (every sample matched CPU, no CPU fallback ran),
**fallback** (matched, but a CPU fallback ran), **fail** (a value, dtype or
shape differed from CPU beyond the tolerance), **error** (tpu raised where
CPU did not, or a different exception type), **skip** (nothing to compare:
no samples, or CPU raised on every sample), **crash** (the worker process
died or hung in the case). A case is one (operator, dtype, variant); an
operator's samples are all of `op.sample_inputs("cpu", dtype)`. Tolerances:
torch.testing's defaults for the dtype, raised to the loosest
`toleranceOverride`/`precisionOverride` the OpInfo declares for that dtype,
raised to the overrides documented in `tests/conformance/opinfo_harness.py`
(TOLERANCE_OVERRIDES). Random and uninitialized results (METADATA_ONLY there)
are compared by dtype and shape only.
"""

FAMILIES = [
    ("linalg", r"^(linalg_|_linalg|cholesky|lu|triangular_solve|_lu|geqrf|ormqr|orgqr|"
               r"householder|svd|_svd|slogdet|logdet|det|qr|eig|symeig|inverse|lstsq|"
               r"matrix_exp|_linalg_|solve|pinverse|cholesky_)"),
    ("fft", r"^(_fft_|fft_)"),
    ("special functions", r"^(special_|_special|i0|igamma|igammac|polygamma|mvlgamma|"
                          r"xlogy|xlog1py|zeta|erfcx|ndtri|log_ndtr|sinc|logit|"
                          r"heaviside|nextafter|frexp|ldexp|copysign|hypot|gcd|lcm|"
                          r"bessel|modified_bessel|scaled_modified|airy|spherical|"
                          r"chebyshev|hermite|laguerre|legendre|shifted_)"),
    ("pooling/upsampling/padding", r"(pool|upsample|_upsample|pad|im2col|col2im|"
                                   r"grid_sampler|affine_grid|pixel_|channel_shuffle)"),
    ("convolution", r"(conv|_convolution)"),
    ("normalization", r"(norm|_batch_norm|renorm)"),
    ("losses", r"(loss|_ctc|nll|cross_entropy|binary_cross|kl_div|hinge|margin)"),
    ("indexing/scatter/gather", r"^(index|_index|scatter|gather|take|put|masked|"
                                r"_unsafe_index|nonzero|where|diag|tril|triu|"
                                r"_embedding|embedding|repeat_interleave|searchsorted|"
                                r"bucketize|histc|histogram|bincount|unique|_unique|"
                                r"unique_consecutive|count_nonzero|narrow_copy|"
                                r"roll|rot90|flip|cross|kron|block_diag|cdist|_cdist|"
                                r"_pdist|pdist|trace|cumprod|cummax|cummin|logcumsumexp|"
                                r"_logcumsumexp|cumsum)"),
    ("sorting/selection", r"^(sort|argsort|topk|kthvalue|median|nanmedian|mode|msort|"
                          r"quantile|nanquantile|max|min|aminmax|_aminmax)"),
    ("random", r"(rand|normal|bernoulli|multinomial|uniform|exponential|cauchy|"
               r"geometric|log_normal|dropout|poisson|_standard_gamma|_sample_dirichlet|"
               r"binomial|rrelu)"),
    ("complex", r"^(view_as_real|view_as_complex|_conj|conj|resolve_conj|resolve_neg|"
                r"_neg_view|real|imag|angle|polar|complex)"),
    ("copies/views/shape", r"^(_to_copy|copy|clone|as_strided|_reshape|view|expand|"
                           r"unfold|cat|stack|split|chunk|unbind|narrow|select|slice|"
                           r"permute|transpose|t|squeeze|unsqueeze|alias|lift|"
                           r"_unsafe_view|set_|resize|_local_scalar|item|fill|zero|"
                           r"new_|empty|full|ones|zeros|arange|linspace|logspace|eye|"
                           r"tensor_split|_chunk|movedim|_nested|_foreach)"),
    ("reductions", r"^(sum|nansum|mean|nanmean|prod|var|std|_var|logsumexp|norm|"
                   r"amax|amin|all|any|argmax|argmin|count|dist|_euclidean)"),
    ("matmul", r"^(mm|bmm|addmm|addbmm|baddbmm|addmv|addr|mv|dot|vdot|matmul|"
               r"_addmm|tensordot|einsum|outer|ger|chain_matmul|inner|linear|bilinear|"
               r"_trilinear|_weight_norm)"),
    ("elementwise math", r".*"),
]


def family_of(aten_name):
    base = aten_name.split("::")[-1].split(".")[0]
    for fam, rx in FAMILIES:
        if re.search(rx, base):
            return fam
    return "other"


def _share(num, den):
    return round(num / den, 4) if den else None


def build(cases, core, meta):
    import torch
    cases = sorted(cases, key=lambda c: (c["op"], DTYPES.index(c["dtype"]) if c["dtype"] in DTYPES
                                         else 99, VARIANTS.index(c["variant"])
                                         if c["variant"] in VARIANTS else 99))
    summary = {k: 0 for k in CLASSES}
    for c in cases:
        summary[c["status"]] = summary.get(c["status"], 0) + 1
    # operators native for float32: every float32 variant native
    by_op = defaultdict(dict)
    for c in cases:
        by_op[c["op"]][(c["dtype"], c["variant"])] = c["status"]
    general = [op for op in by_op if not op.startswith(EXCLUDED_PREFIXES)]
    f32_ops = [op for op in general if any(d == "float32" for d, _ in by_op[op])]

    def all_native(op):
        sts = [s for (d, v), s in by_op[op].items() if d == "float32" and s != "skip"]
        return bool(sts) and all(s == "native" for s in sts)

    def functional_native(op):
        return by_op[op].get(("float32", "functional")) == "native"
    f32_tested = [op for op in f32_ops
                  if any(s != "skip" for (d, _), s in by_op[op].items() if d == "float32")]
    native_ops = [op for op in f32_tested if all_native(op)]
    func_native = [op for op in f32_tested if functional_native(op)]
    tested = sum(v for k, v in summary.items() if k != "skip")
    passed = summary["native"] + summary["fallback"]
    core_h = {"overloads": len({c["overload"] for c in core})}
    for d in ("float32", "bfloat16"):
        rows = [c for c in core if c["dtype"] == d]
        supported = [c for c in rows if c["status"] != "skip"]
        nat = [c for c in supported if c["status"] == "native"]
        core_h[d] = {"native": len(nat), "supported": len(supported),
                     "share": _share(len(nat), len(supported)),
                     "by_status": dict(Counter(c["status"] for c in rows))}
    headline = {
        "core_aten": core_h,
        "opinfo_general_native_float32": {
            "operators": len(f32_tested), "native": len(native_ops),
            "share": _share(len(native_ops), len(f32_tested)),
            "functional_native": len(func_native),
            "functional_share": _share(len(func_native), len(f32_tested)),
            "excluded_namespaces": [p.rstrip(".") for p in EXCLUDED_PREFIXES]},
        "pass_rate": {"passed": passed, "cases": tested, "share": _share(passed, tested)},
        "crashes": summary["crash"] + sum(1 for c in core if c["status"] == "crash"),
        "operators": len(by_op),
    }
    core_names = {c["overload"].replace("aten.", "aten::").replace(".default", "")
                  for c in core}
    missing = {}
    for c in cases:
        for fb in c.get("fallbacks", []):
            m = missing.setdefault(fb, {"family": family_of(fb), "cases": 0, "ops": set(),
                                        "core": fb in core_names})
            m["cases"] += 1
            m["ops"].add(c["op"])
    for c in core:
        for fb in c.get("fallbacks", []):
            m = missing.setdefault(fb, {"family": family_of(fb), "cases": 0, "ops": set(),
                                        "core": fb in core_names})
            m["core"] = m["core"] or fb in core_names
    for m in missing.values():
        m["ops"] = sorted(m["ops"])
    meta = dict(meta)
    meta.update({"torch": torch.__version__, "cases": len(cases),
                 "schema": "torchtpu.op_coverage/1"})
    meta["date"] = meta.get("date") or datetime.datetime.now().strftime("%Y-%m-%d %H:%M")
    return {"schema": "torchtpu.op_coverage/1", "meta": meta, "summary": summary,
            "headline": headline, "cases": cases,
            "core_aten": sorted(core, key=lambda c: (c["overload"], c["dtype"])),
            "missing": dict(sorted(missing.items(), key=lambda kv: -kv[1]["cases"]))}


def _pct(x):
    return "n/a" if x is None else f"{100 * x:.1f}%"


def headline_text(doc):
    h = doc["headline"]
    c = h["core_aten"]
    g = h["opinfo_general_native_float32"]
    p = h["pass_rate"]
    lines = [
        f"Core ATen overloads ({c['overloads']}): native for float32 "
        f"{c['float32']['native']}/{c['float32']['supported']} ({_pct(c['float32']['share'])}), "
        f"for bfloat16 {c['bfloat16']['native']}/{c['bfloat16']['supported']} "
        f"({_pct(c['bfloat16']['share'])}) (of those CPU supports)",
        f"OpInfo operators outside linalg/fft/special native for float32 (every variant): "
        f"{g['native']}/{g['operators']} ({_pct(g['share'])}); functional only: "
        f"{g['functional_native']}/{g['operators']} ({_pct(g['functional_share'])})",
        f"Pass rate over all (operator, dtype, variant) cases: {p['passed']}/{p['cases']} "
        f"({_pct(p['share'])}) (native + fallback, skips left out)",
        f"Crashes: {h['crashes']}",
    ]
    return "\n".join(lines)


def _esc(s):
    return str(s).replace("|", "\\|").replace("\n", " ")


def markdown(doc):
    meta, s = doc["meta"], doc["summary"]
    out = ["# Op coverage and conformance", "",
           f"Generated by `make conformance` (tests/conformance/sweep.py) on {meta['date']} "
           f"with torch {meta['torch']}, mode {meta['mode']}, {meta['jobs']} workers, "
           f"{meta['seconds'] // 60} min {meta['seconds'] % 60} s"
           + (f", at most {meta['max_samples']} samples per case" if meta.get("max_samples") else "")
           + (" (a partial run: only some operators)" if meta.get("partial") else "") + "."
           + "".join(f" On {r['date']}, {r['ops']} operators were run again (`--redo`) and their"
                     " cases replaced." for r in meta.get("redone", [])),
           "", "## Schema of op_coverage.json", "", SCHEMA, CLASS_TEXT,
           "## Headline figures", ""]
    out += ["- " + ln for ln in headline_text(doc).splitlines()]
    out += ["", "The Core ATen figure counts the overloads tagged `torch.Tag.core` "
            "(`torch.ops.aten.*`), each called directly on tpu and CPU with the calls that the "
            "OpInfo samples make of it (captured below autograd with a TorchDispatchMode), or a "
            "bfloat16 cast of its float32 calls, or a hand-written probe; an overload counts as "
            "supported for a dtype unless CPU raises on all of its calls. "
            "The OpInfo operator figure counts an operator as native when each float32 case "
            "(functional, in-place, out=, grad) that was not skipped is native.", ""]
    out += ["## Summary", "", "| class | cases |", "|---|---|"]
    out += [f"| {k} | {s.get(k, 0)} |" for k in CLASSES]
    out += ["", "By variant:", "", "| variant | " + " | ".join(CLASSES) + " |",
            "|---" * (len(CLASSES) + 1) + "|"]
    for v in VARIANTS:
        cnt = Counter(c["status"] for c in doc["cases"] if c["variant"] == v)
        out.append(f"| {v} | " + " | ".join(str(cnt.get(k, 0)) for k in CLASSES) + " |")
    out += ["", "By dtype:", "", "| dtype | " + " | ".join(CLASSES) + " |",
            "|---" * (len(CLASSES) + 1) + "|"]
    for d in DTYPES:
        cnt = Counter(c["status"] for c in doc["cases"] if c["dtype"] == d)
        out.append(f"| {d} | " + " | ".join(str(cnt.get(k, 0)) for k in CLASSES) + " |")

    crashes = [c for c in doc["cases"] if c["status"] == "crash"] + \
        [c for c in doc["core_aten"] if c["status"] == "crash"]
    out += ["", f"## Crashes ({len(crashes)})", ""]
    out += [f"- `{c.get('op') or c.get('overload')}` {c['dtype']} {c.get('variant', 'probe')}: "
            f"{_esc(c['detail'])}" for c in crashes] or ["None."]

    bad = [c for c in doc["cases"] if c["status"] in ("fail", "error")]

    def severity(c):
        if c["status"] == "error":
            return (0, 0)
        r = c.get("tol_ratio")
        if c.get("nonfinite"):
            return (1, -float("inf"))
        return (1, -(r if r is not None else 1e30))
    bad.sort(key=lambda c: (severity(c), c["op"]))
    out += ["", f"## Failures and errors ({len(bad)} cases)", "",
            "Errors first, then failures by how far they are off: `x tol` is the largest "
            "difference in units of the tolerance (atol + rtol * |expected|); `non-finite` "
            "marks a NaN or infinity where CPU has another value; an empty cell, a "
            "difference in dtype, shape or an exception. Differences of a few tolerances "
            "are usually rounding (a different summation order or a 1-ulp difference "
            "amplified by the operator); tens or more, or non-finite, are wrong values.", "",
            "| operator | dtype | variant | class | max error | x tol | cause |",
            "|---|---|---|---|---|---|---|"]
    for c in bad:
        err = f"{c['max_error']:.3g}" if c.get("max_error") is not None else ""
        r = c.get("tol_ratio")
        ratio = "non-finite" if c.get("nonfinite") else (f"{r:g}" if r is not None else "")
        out.append(f"| `{c['op']}` | {c['dtype']} | {c['variant']} | {c['status']} | {err} | "
                   f"{ratio} | {_esc(c['detail'] or '')[:300]} |")

    core = doc["core_aten"]
    out += ["", "## Core ATen overloads", "",
            "n native, f fallback, X fail, E error, s skip (CPU does not support the dtype, or "
            "no input), C crash. Origin: where the calls came from.", "",
            "| overload | float32 | bfloat16 | origin | OpInfo sources | note |",
            "|---|---|---|---|---|---|"]
    by = defaultdict(dict)
    for c in core:
        by[c["overload"]][c["dtype"]] = c
    for name in sorted(by):
        f, b = by[name].get("float32", {}), by[name].get("bfloat16", {})
        note = ""
        for c in (f, b):
            if c.get("status") in ("fail", "error", "crash", "fallback") and not note:
                note = (c.get("detail") or "") if c.get("status") != "fallback" else \
                    "falls back: " + ", ".join(c.get("fallbacks", []))
        origin = "/".join(dict.fromkeys(x.get("origin", "") for x in (f, b) if x))
        out.append(f"| `{name}` | {CODE.get(f.get('status'), '')} | {CODE.get(b.get('status'), '')} "
                   f"| {origin} | {_esc(', '.join(f.get('sources', [])[:3]))} | {_esc(note)[:200]} |")

    out += ["", "## Missing lowerings (CPU fallbacks)", "",
            "ATen operators that ran on the CPU, grouped by family; families ordered by the "
            "OpInfo cases they would fix (a case counts for each operator it fell back on).", ""]
    fams = defaultdict(list)
    for name, m in doc["missing"].items():
        fams[m["family"]].append((name, m))
    order = sorted(fams, key=lambda f: -sum(m["cases"] for _, m in fams[f]))
    for fam in order:
        items = sorted(fams[fam], key=lambda nm: (-nm[1]["cases"], nm[0]))
        total = sum(m["cases"] for _, m in items)
        ncore = sum(1 for _, m in items if m["core"])
        out += [f"### {fam} ({len(items)} operators, {total} cases, {ncore} Core ATen)", "",
                "| ATen operator | cases | core | OpInfo operators |", "|---|---|---|---|"]
        for name, m in items:
            ops = ", ".join(m["ops"][:6]) + (f" (+{len(m['ops']) - 6})" if len(m["ops"]) > 6 else "")
            out.append(f"| `{name}` | {m['cases']} | {'yes' if m['core'] else ''} | {_esc(ops)} |")
        out.append("")

    out += ["## Slowest cases and programs", "",
            "Compile figures count the programs this run compiled (the on-disk cache "
            "serves the rest), so they are the first run's when the cache was cold.", "",
            "By wall time of the case (all its samples, CPU reference included):", "",
            "| operator | dtype | variant | seconds | samples | compiles | compile seconds |",
            "|---|---|---|---|---|---|---|"]
    slow = sorted(doc["cases"], key=lambda c: -(c.get("seconds") or 0))[:20]
    out += [f"| `{c['op']}` | {c['dtype']} | {c['variant']} | {c.get('seconds')} | "
            f"{c.get('samples')} | {c.get('compiles')} | {c.get('compile_seconds')} |"
            for c in slow]
    per = [c for c in doc["cases"] if (c.get("compiles") or 0) > 0]
    per.sort(key=lambda c: -(c["compile_seconds"] / c["compiles"]))
    out += ["", "By XLA compile time per program (the case's average):", "",
            "| operator | dtype | variant | compiles | seconds per compile |",
            "|---|---|---|---|---|"]
    out += [f"| `{c['op']}` | {c['dtype']} | {c['variant']} | {c['compiles']} | "
            f"{c['compile_seconds'] / c['compiles']:.2f} |" for c in per[:20]]

    out += ["", "## Full table", "",
            "One row per OpInfo operator, one column per dtype; each cell has one letter per "
            "variant in the order functional, in-place, out=, grad: n native, f fallback, "
            "X fail, E error, s skip, C crash, `.` variant not defined for the operator; an "
            "empty cell: CPU does not support the dtype.", "",
            "| operator | " + " | ".join(DTYPES) + " |", "|---" * (len(DTYPES) + 1) + "|"]
    table = defaultdict(dict)
    for c in doc["cases"]:
        table[c["op"]][(c["dtype"], c["variant"])] = c["status"]
    for op in sorted(table):
        cells = []
        for d in DTYPES:
            if not any(k[0] == d for k in table[op]):
                cells.append("")
                continue
            cell = "".join(CODE[table[op][(d, v)]] if (d, v) in table[op] else "."
                           for v in VARIANTS)
            cells.append(cell.rstrip("."))
        out.append(f"| `{op}` | " + " | ".join(cells) + " |")
    return "\n".join(out) + "\n"


def write(doc, docs_dir):
    docs_dir.mkdir(parents=True, exist_ok=True)
    # One case per line, empty fields left out: the file stays diffable and small.
    def slim(e):
        return {k: v for k, v in e.items()
                if not (v is None or v is False or v == [] or v == ""
                        or (k in ("rescued", "random") and v == 0))}
    lines = ["{"]
    for key in ("schema", "meta", "summary", "headline"):
        lines.append(f" {json.dumps(key)}: {json.dumps(doc[key])},")
    for key in ("cases", "core_aten"):
        lines.append(f" {json.dumps(key)}: [")
        rows = [json.dumps(slim(e)) for e in doc[key]]
        lines += ["  " + r + ("," if k + 1 < len(rows) else "") for k, r in enumerate(rows)]
        lines.append(" ],")
    lines.append(f" \"missing\": {json.dumps(doc['missing'])}")
    lines.append("}")
    (docs_dir / "op_coverage.json").write_text("\n".join(lines) + "\n")
    (docs_dir / "op_coverage.md").write_text(markdown(doc))
