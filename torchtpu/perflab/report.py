"""Reports of a perflab run: a markdown summary, PNG plots, and the table
of changes between two runs (--compare)."""
import json
from pathlib import Path

from torchtpu.perflab.suite_models import PAIRS
from torchtpu.perflab.suite_ops import BENCHES

MODEL_IMPLS = ("tpu-strict", "tpu-fused", "tpu-compiled", "tpu-debug", "cpu-eager", "cpu-inductor",
               "cuda-eager", "jax")
MODEL_KINDS = ("forward", "train", "train-pipelined")
PAIRED_RATIOS = tuple(f"{a}/{b}" for a, b in PAIRS)


def _model_kinds(doc):
    """The kinds of the models suite that this run measured (older runs
    have no train-pipelined)."""
    return [k for k in MODEL_KINDS
            if any(r["suite"] == "models" and r["bench"].endswith("-" + k)
                   for r in doc["records"])]
DISPATCH_IMPLS = ("cpu-eager", "cuda-eager", "tpu-strict", "tpu-fused", "tpu-debug")


#===--- formatting ---===#

def num(v, digits=3):
    """A number with `digits` significant digits, no exponent for the
    ranges seen here."""
    if v is None:
        return "—"
    if isinstance(v, int) or (isinstance(v, float) and v.is_integer() and abs(v) < 1e6):
        return f"{int(v)}"
    a = abs(v)
    if a >= 10 ** digits:
        return f"{v:.0f}"
    if a == 0:
        return "0"
    d = max(0, digits - 1 - int(f"{a:e}".split("e")[1]))
    return f"{v:.{d}f}"


def cell(doc_recs, rid, spread=True):
    """A record as a table cell: the median, and the half interquartile
    range relative to it (±%) for repeated timings."""
    r = doc_recs.get(rid)
    if r is None:
        return "n/a"
    if r["status"] != "ok":
        return r["status"]
    text = num(r["value"])
    st = r.get("stats")
    if spread and st and st["n"] >= 3 and st["median"]:
        text += f" ±{100 * (st['q3'] - st['q1']) / 2 / abs(st['median']):.0f}%"
    return text


def ratio_cell(doc_rats, rid):
    r = doc_rats.get(rid)
    if r is None or r["value"] is None:
        return "—"
    return f"{r['value']:.2f}"


def table(header, rows):
    out = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    out += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return out


def _index(doc):
    return {r["id"]: r for r in doc["records"]}, {r["id"]: r for r in doc["ratios"]}


#===--- markdown ---===#

def markdown(doc):
    recs, rats = _index(doc)
    env, run = doc["env"], doc["run"]
    suites = doc["suites"]
    lines = [f"# perflab run {run['id']}", ""]
    dev = env.get("device", {})
    lines += [
        f"- date: {env['date']}; total time {run.get('duration_s', 0):.0f} s; "
        f"command: `{run.get('command', '')}`",
        f"- machine: {env['cpu'].get('model')} ({env['cpus']} CPUs, flags "
        f"{' '.join(env['cpu'].get('flags', []))}), torch threads {env['torch_threads']}",
        f"- torch {env['torch']}, torchtpu {env.get('torchtpu')}, commit "
        f"{(env.get('git_commit') or '?')[:12]}{' (dirty)' if env.get('git_dirty') else ''}; "
        f"device {dev.get('name', dev.get('error'))}, PJRT {dev.get('pjrt_api')}; "
        f"jax {env.get('jax') or 'not installed'}",
        "- figures are medians of repeated samples after warmup; ±% is half the "
        "interquartile range; ratios divide two figures of this run.",
    ]
    loads = [env.get("load_start")] + [v for s in suites.values()
                                       for v in s.get("load_average", [])]
    loads = [v for v in loads if v is not None]
    if loads:
        line = (f"- load average (1 min) during the run: {min(loads):.1f} to {max(loads):.1f} "
                f"on {env['cpus']} CPUs")
        if max(loads) > env["cpus"]:
            line += (" — other processes competed for the CPUs: figures are slowed, PyTorch's "
                     "multi-threaded CPU ops most (the models suite runs PyTorch on one "
                     "thread by default for this reason)")
        lines.append(line)
    lines.append("")
    for name in doc["run"]["suites"]:
        s = suites.get(name, {})
        if s.get("status") == "error":
            lines += [f"## {name}: failed", "", "```", s.get("error", ""), "```", ""]
            continue
        fn = {"dispatch": _md_dispatch, "ops": _md_ops, "models": _md_models,
              "coverage": _md_coverage}[name]
        lines += fn(doc, recs, rats) + [""]
    errors = {}
    for r in doc["records"]:
        if r["status"] != "ok":
            why = (r.get("error") or "").replace("|", "/")[:200]
            errors.setdefault((r["status"], why), []).append(r["id"])
    if errors:
        lines += ["## Not measured", ""]
        lines += table(["figures", "status", "why"],
                       [[", ".join(ids), status, why] for (status, why), ids in errors.items()])
        lines.append("")
    return "\n".join(lines)


def _md_dispatch(doc, recs, rats):
    c = doc["suites"]["dispatch"]["config"]
    impls = [i for i in DISPATCH_IMPLS if i in c["impls"]]
    out = [f"## dispatch: µs per eager op ({'x'.join(map(str, c['shape']))} {c['dtype']}, "
           f"{c['reps']} samples of {c['inner']} ops)", ""]
    tpu = [i for i in impls if i.startswith("tpu-")]
    cuda = ["cuda-eager"] if "cuda-eager" in impls else []
    header = ["op"] + impls + [f"{i}/cpu" for i in tpu + cuda] + [f"{i}/cuda" for i in tpu if cuda]
    if "tpu-fused" in tpu and "tpu-strict" in tpu:
        header.append("fused/strict")
    header += ["issue µs (strict/fused/debug)", "fallbacks/op"]
    rows = []
    for op in c["ops"]:
        rid = lambda i, m="us_per_op": f"dispatch/{op}/{i}/{m}"  # noqa: E731
        row = [op] + [cell(recs, rid(i)) for i in impls]
        row += [ratio_cell(rats, f"dispatch/{op}/ratio/{i}/cpu-eager") for i in tpu + cuda]
        row += [ratio_cell(rats, f"dispatch/{op}/ratio/{i}/cuda-eager") for i in tpu if cuda]
        if "fused/strict" in header:
            row.append(ratio_cell(rats, f"dispatch/{op}/ratio/tpu-fused/tpu-strict"))
        row.append(" / ".join(cell(recs, rid(i, "issue_us_per_op"), False) for i in tpu))
        fb = {cell(recs, rid(i, "fallbacks_per_op"), False) for i in tpu}
        row.append(" / ".join(sorted(fb)))
        rows.append(row)
    out += table(header, rows)
    out += ["", "µs per op includes the op's share of the closing synchronize() (fused: of the "
            "one flush of the loop); issue µs is the loop alone (host time per op); "
            "x/cpu < 1 is faster than PyTorch CPU eager"
            + ("; x/cuda < 1, than PyTorch CUDA eager." if cuda else ".")]
    return out


def _md_ops(doc, recs, rats):
    s = doc["suites"]["ops"]
    sz = s["config"]["sizes"]
    out = ["## Calibration: this machine's practical peaks", ""]
    rows = []
    for bench in ("memory_bandwidth", "compute"):
        for r in doc["records"]:
            if r["suite"] == "ops" and r["bench"] == bench:
                how = (r.get("extra") or {}).get("how", "")
                rows.append([bench, r["impl"], cell(recs, r["id"]), r["unit"],
                             how.replace("|", "/")])
    out += table(["measure", "method", "median", "unit", "how"], rows)
    conv = sz["conv"]
    desc = {"elementwise_add": f"a + b, {sz['elements']} float32",
            "reduction_sum": f"a.sum(), {sz['elements']} float32",
            "matmul": f"{sz['matmul']}x{sz['matmul']} @ {sz['matmul']}x{sz['matmul']}",
            "conv2d": f"N{conv['n']} C{conv['cin']}->{conv['cout']} {conv['h']}x{conv['w']} "
                      f"k{conv['k']}"}
    if "linalg" in sz:  # (runs from before these benches have no size)
        desc["solve"] = f"linalg.solve {sz['linalg']}x{sz['linalg']}, one column"
        desc["qr"] = f"linalg.qr {sz['linalg']}x{sz['linalg']} (Q and R)"
    impls = ["tpu", "cpu-eager"] + (["jax"] if any(r["impl"] == "jax" for r in doc["records"]
                                                   if r["suite"] == "ops") else [])
    out += ["", "## ops: throughput of large ops (tpu in strict mode)", ""]
    header = ["op", "size", "unit"] + impls + [f"tpu/{p}" for p in impls[1:]] + \
             [f"{i} % of peak" for i in impls]
    rows = []
    for bench, d in desc.items():
        rid = f"ops/{bench}/tpu/rate"
        unit = recs[rid]["unit"] if rid in recs else ""
        row = [bench, d, unit] + [cell(recs, f"ops/{bench}/{i}/rate") for i in impls]
        row += [ratio_cell(rats, f"ops/{bench}/ratio/tpu/{p}") for p in impls[1:]]
        for i in impls:
            r = rats.get(f"ops/{bench}/ratio/{i}/peak")
            row.append("—" if r is None or r["value"] is None else f"{100 * r['value']:.0f}%")
        rows.append(row)
    out += table(header, rows)
    out += ["", "GB/s counts bytes read and written; tpu/x > 1 is faster than x."]
    return out


PHASES = ("zero_grad", "forward", "backward", "optimizer", "sync")


def _md_phases(recs, benches, impls):
    """Where a step's time goes: the host's time in each call of the step
    and in the closing synchronize(), and the CPU time of the host's thread
    and of the others (runs from before these were measured have none)."""
    rows = []
    for b in benches:
        for i in impls:
            r = recs.get(f"models/{b}/{i}/step_ms")
            extra = r.get("extra", {}) if r and r["status"] == "ok" else {}
            ph, cpu = extra.get("phase_ms"), extra.get("cpu_ms")
            if not (ph or cpu):
                continue
            row = [b, i] + [num(ph[p]) if ph and p in ph else "" for p in PHASES]
            row.append(num(sum(ph.values())) if ph else "")
            if cpu:
                row += [num(cpu["host"]), num(cpu["others"]),
                        num((cpu["host"] + cpu["others"]) / cpu["wall"], 2)]
            rows.append(row + [""] * (len(PHASES) + 6 - len(row)))
    if not rows:
        return []
    return ["", "### where a step's time goes (ms per step, medians)", ""] + table(
        ["model", "impl"] + list(PHASES) + ["sum", "host thread CPU", "other threads CPU",
                                            "cores busy"], rows) + [
        "", "The host's time in each call of a timed step, and its wait in the closing "
        "synchronize() (per step: a tenth of it in train-pipelined). On tpu a phase is the "
        "host's time to record and launch its ops and sync the wait for the device (with the "
        "CPU plugin, fused mode's optimizer step also waits for the backward graph whose "
        "buffers it updates in place); on the CPU each phase includes its kernels. "
        "CPU: the time on a core, per step, of the thread that runs the steps and of all the "
        "process's other threads (XLA's and PJRT's, PyTorch's OpenMP pool); cores busy: both "
        "over the wall time of the same steps. With the CPU plugin a tpu step's device work "
        "is the other threads' CPU time."]


def _md_models(doc, recs, rats):
    s = doc["suites"]["models"]
    c = s["config"]
    impls = [i for i in MODEL_IMPLS if i in c["impls"] or any(
        r["impl"] == i for r in doc["records"] if r["suite"] == "models")]
    benches = [f"{m}-{k}" for m in c["shapes"] for k in _model_kinds(doc)]
    rounds = c.get("rounds", 1)
    timed = f"{rounds} rounds of {c['reps']}" if rounds > 1 else f"{c['reps']}"
    out = [f"## models: step time in ms ({timed} timed steps after warmup; shapes "
           + ", ".join(f"{m} {v}" for m, v in c["shapes"].items())
           + f"; PyTorch CPU threads {c.get('torch_threads', 'default')})", ""]
    ratio_names = ["tpu-fused/tpu-strict", "tpu-strict/cpu-eager", "tpu-fused/cpu-eager",
                   "tpu-compiled/cpu-eager", "tpu-debug/cpu-eager", "cpu-inductor/cpu-eager",
                   "tpu-strict/cuda-eager", "tpu-fused/cuda-eager"]
    ratio_names = [n for n in ratio_names if any(r.endswith("/ratio/" + n) for r in rats)]
    header = ["model"] + impls + ratio_names
    rows = []
    for b in benches:
        row = [b] + [cell(recs, f"models/{b}/{i}/step_ms") for i in impls]
        row += [ratio_cell(rats, f"models/{b}/ratio/{n}") for n in ratio_names]
        rows.append(row)
    out += table(header, rows)
    out += ["", "Ratios < 1: the first is faster. forward and train: each step ends with "
            "torch.tpu.synchronize(); train-pipelined: ten steps per synchronize(), time per "
            "step (the host records a step while the device runs the one before)."]
    out += _md_paired(recs, benches, c.get("paired") or {})
    out += ["", "### tpu details and compile times", ""]
    rows = []
    for b in benches:
        for i in impls:
            base = f"models/{b}/{i}/"
            if base + "step_ms" not in recs or recs[base + "step_ms"]["status"] != "ok":
                continue
            extra = recs[base + "step_ms"].get("extra", {})
            first = cell(recs, base + "first_step_s", False)
            if i.startswith("tpu-"):
                comp = extra.get("compiles_per_warmup_step")
                rows.append([b, i, first, cell(recs, base + "warmup_steps", False),
                             " ".join(map(str, comp)) if comp else "",
                             cell(recs, base + "compiles_per_step", False),
                             cell(recs, base + "host_syncs_per_step", False),
                             cell(recs, base + "fallbacks_per_step", False),
                             cell(recs, base + "executions_per_step", False),
                             cell(recs, base + "peak_memory_MB", False),
                             cell(recs, base + "first_step_compile_s", False)])
            elif base + "compile_s" in recs or base + "peak_memory_MB" in recs:
                rows.append([b, i, first, "", "", "", "", "", ""] + [
                    cell(recs, base + m, False) if base + m in recs else ""
                    for m in ("peak_memory_MB", "compile_s")])
    out += table(["model", "impl", "first step s", "warmup steps", "compiles per warmup step",
                  "compiles/step", "host syncs/step", "CPU fallbacks/step", "executions/step",
                  "peak MB", "compile s"], rows)
    out += ["", "compile s: tpu, XLA compile time within the first step; Inductor and JAX, "
            "first step minus the median step."]
    out += _md_phases(recs, benches, impls)
    fb = s.get("fallback_ops") or {}
    if fb:
        out += ["", "### CPU fallbacks per step (ops not yet lowered natively)", "",
                "Calls per timed step; one number when every tpu mode made the same calls, "
                "else strict/fused/debug.", ""]
        cols = [b for b in benches if any(b in where for where in fb.values())]
        rows = []
        for op, where in sorted(fb.items(), key=lambda kv: (-len(kv[1]), kv[0])):
            row = [op]
            for b in cols:
                per = where.get(b, {})
                vals = [per.get(m) for m in ("tpu-strict", "tpu-fused", "tpu-debug") if m in per]
                if not vals:
                    row.append("")
                elif len(set(vals)) == 1:
                    row.append(num(vals[0]))
                else:
                    row.append("/".join(num(per.get(m)) if m in per else "-"
                                        for m in ("tpu-strict", "tpu-fused", "tpu-debug")))
            rows.append(row)
        out += table(["operator"] + cols, rows)
    return out


def _md_paired(recs, benches, cfg):
    pairs = [p for p in PAIRED_RATIOS if any(f"models/{b}/{p}/paired_ratio" in recs
                                             for b in benches)]
    if not pairs:
        return []
    rows = []
    for b in benches:
        row = [b]
        for p in pairs:
            r = recs.get(f"models/{b}/{p}/paired_ratio")
            if r is None:
                row.append("n/a")
            elif r["status"] != "ok":
                row.append(r["status"])
            else:
                st = r["stats"]
                row.append(f"{st['median']:.2f} ({st['q1']:.2f}–{st['q3']:.2f})")
        rows.append(row)
    return ["", f"### paired ratios (one process, {cfg.get('blocks')} blocks of "
            f"{cfg.get('block_steps')} steps each, in turn)", "",
            "Every implementation's model in one worker process, timed in blocks taken in "
            "turn (rotating order); per round, the first's time per step over the second's. "
            "Median (quartiles) over the rounds: a change of the machine's load falls on both "
            "sides of a ratio, which the ratios of the table above, from separate processes, "
            "do not ensure.", ""] + table(["model"] + pairs, rows)


def _md_coverage(doc, recs, rats):
    info = doc["suites"]["coverage"]["summary"]
    out = ["## coverage", "",
           f"Op table: {info['rows']} rows registering {info['aten_overloads']} ATen overloads "
           "(in-place and out= variants included).", ""]
    if info.get("sections"):
        out += table(["section of ops.def", "rows", "ATen overloads"],
                     [[k, v["rows"], v["aten_overloads"]] for k, v in info["sections"].items()])
        out.append("")
    conf = info.get("conformance") or {}
    if conf.get("status") == "ok":
        c = conf["counts"]
        keys = ["native", "fallback", "fail", "error", "skip", "crash", "other"]
        out += [f"Conformance ({conf['path']}):", ""]
        out += table(keys, [[c.get(k, 0) for k in keys]])
    elif conf.get("status") == "error":
        out.append(f"Conformance results unreadable: {conf['error']}")
    else:
        out.append("Conformance results: none yet (docs/op_coverage.json is absent).")
    return out


#===--- plots ---===#

def plots(doc, out_dir, stem):
    """Writes one PNG per suite that has figures; returns their paths."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return []
    recs, rats = _index(doc)
    written = []
    for name, fn in (("dispatch", _plot_dispatch), ("ops", _plot_ops),
                     ("models", _plot_models), ("coverage", _plot_coverage)):
        if name not in doc["suites"] or doc["suites"][name].get("status") == "error":
            continue
        fig = fn(plt, doc, recs, rats)
        if fig is None:
            continue
        path = Path(out_dir) / f"{stem}-{name}.png"
        fig.savefig(path, dpi=110, bbox_inches="tight")
        plt.close(fig)
        written.append(str(path))
    return written


def _bars(ax, groups, series, get, log=False):
    """Grouped bars: one group per `groups` entry, one bar per series, with
    min-max whiskers. get(group, series) -> record or None."""
    import numpy as np

    width = 0.8 / max(1, len(series))
    x = np.arange(len(groups))
    failed = []
    for k, s in enumerate(series):
        vals, lo, hi = [], [], []
        for j, g in enumerate(groups):
            r = get(g, s)
            ok = r is not None and r["status"] == "ok" and r["value"]
            if r is not None and r["status"] != "ok":
                failed.append(x[j] + (k - (len(series) - 1) / 2) * width)
            v = r["value"] if ok else 0
            st = r.get("stats") if ok else None
            vals.append(v)
            lo.append(v - st["min"] if st else 0)
            hi.append(st["max"] - v if st else 0)
        ax.bar(x + (k - (len(series) - 1) / 2) * width, vals, width, yerr=[lo, hi],
               capsize=2, label=s)
    ax.set_xticks(x)
    ax.set_xticklabels(groups, rotation=20, ha="right")
    if log:
        ax.set_yscale("log")
    ax.grid(axis="y", alpha=0.3)
    bottom = ax.get_ylim()[0]
    for pos in failed:  # a figure that could not be measured is marked, not left blank
        ax.text(pos, bottom, " failed", rotation=90, ha="center", va="bottom", fontsize=7,
                color="firebrick")


def _plot_dispatch(plt, doc, recs, rats):
    c = doc["suites"]["dispatch"]["config"]
    impls = [i for i in DISPATCH_IMPLS if i in c["impls"]]
    fig, ax = plt.subplots(figsize=(8, 4))
    _bars(ax, c["ops"], impls, lambda g, s: recs.get(f"dispatch/{g}/{s}/us_per_op"), log=True)
    ax.set_ylabel("µs per op (log)")
    ax.set_title("dispatch: host cost per eager op, small tensors")
    ax.legend(fontsize=8)
    return fig


def _plot_ops(plt, doc, recs, rats):
    impls = [i for i in ("tpu", "cpu-eager", "jax")
             if any(r["suite"] == "ops" and r["impl"] == i for r in doc["records"])]
    peaks = doc["suites"]["ops"].get("peaks", {})
    benches = [b for b in BENCHES if f"ops/{b}/cpu-eager/rate" in recs]

    def pct(bench, impl):
        r = recs.get(f"ops/{bench}/{impl}/rate")
        peak = recs.get(peaks.get(r["unit"], "") if r else "", {}).get("value")
        if r is None or r["status"] != "ok" or not peak:
            return None
        st = r["stats"]
        return {"status": "ok", "value": 100 * r["value"] / peak,
                "stats": {"min": 100 * st["min"] / peak, "max": 100 * st["max"] / peak}}

    fig, ax = plt.subplots(figsize=(8, 4))
    _bars(ax, benches, impls, pct, log=True)
    ax.axhline(100, color="k", ls="--", lw=1, label="measured peak")
    ax.set_ylabel("% of this machine's measured peak (log)")
    ax.set_title("ops: throughput of large ops (GB/s or GFLOP/s) relative to peak")
    ax.legend(fontsize=8)
    return fig


def _plot_models(plt, doc, recs, rats):
    c = doc["suites"]["models"]["config"]
    impls = [i for i in MODEL_IMPLS if any(r["impl"] == i for r in doc["records"]
                                           if r["suite"] == "models")]
    kinds = _model_kinds(doc)
    fig, axes = plt.subplots(1, len(kinds), figsize=(5.5 * len(kinds), 4), squeeze=False)
    axes = axes[0]
    for ax, kind in zip(axes, kinds):
        groups = [f"{m}-{kind}" for m in c["shapes"]]
        _bars(ax, groups, impls, lambda g, s: recs.get(f"models/{g}/{s}/step_ms"), log=True)
        ax.set_ylabel("ms per step (log)")
        ax.set_title(kind)
    axes[-1].legend(fontsize=7)
    fig.suptitle("models: step time after warmup")
    return fig


def _plot_coverage(plt, doc, recs, rats):
    info = doc["suites"]["coverage"]["summary"]
    secs = info.get("sections")
    conf = info.get("conformance") or {}
    if not secs and conf.get("status") != "ok":
        return None
    fig, ax = plt.subplots(figsize=(8, 4))
    if conf.get("status") == "ok":
        keys = ["native", "fallback", "fail", "error", "skip", "crash", "other"]
        ax.bar(keys, [conf["counts"].get(k, 0) for k in keys])
        ax.set_title("conformance outcomes (docs/op_coverage.json)")
    else:
        names = list(secs)
        ax.barh(names, [secs[n]["aten_overloads"] for n in names])
        ax.set_xlabel("ATen overloads registered")
        ax.set_title(f"op table: {info['rows']} rows, {info['aten_overloads']} overloads")
        ax.invert_yaxis()
    return fig


#===--- compare ---===#

TIME_UNITS = ("us", "ms", "s")


def _verdict(a, b, threshold):
    """better, worse, or ~ (within noise) for record b against record a.
    Repeated timings: their min-max ranges must not overlap and the median
    move by at least `threshold`. Single timings (a first step, a compile):
    a move of 50% or more, marked with "?". Counts and sizes: any change."""
    up = b["value"] > a["value"]
    word = "better" if up == (a["better"] == "higher") else "worse"
    change = abs(b["value"] / a["value"] - 1) if a["value"] else float("inf")
    sa, sb = a.get("stats"), b.get("stats")
    if sa and sb:
        apart = sb["min"] > sa["max"] or sb["max"] < sa["min"]
        return word if apart and change >= threshold else "~"
    if a["unit"] in TIME_UNITS:
        return word + "?" if change >= 0.5 else "~"
    return word if a["value"] != b["value"] else "~"


def compare(a, b, threshold=0.05):
    """Rows of changes from run a to run b, and the text of the table."""
    ra, qa = _index(a)
    rb, qb = _index(b)
    rows = []
    for rid in [k for k in ra if k in rb]:
        x, y = ra[rid], rb[rid]
        if x["status"] != "ok" or y["status"] != "ok":
            if x["status"] != y["status"]:
                rows.append([rid, x["unit"], x["status"], y["status"], "", "status changed"])
            continue
        if x["value"] is None or y["value"] is None:
            continue
        change = (y["value"] / x["value"] - 1) if x["value"] else None
        verdict = _verdict(x, y, threshold)
        rows.append([rid, x["unit"], num(x["value"]), num(y["value"]),
                     "" if change is None else f"{100 * change:+.1f}%", verdict])
    for rid in [k for k in qa if k in qb]:
        x, y = qa[rid], qb[rid]
        if x["value"] is None or y["value"] is None:
            continue
        change = y["value"] / x["value"] - 1 if x["value"] else None
        verdict = "~"
        if change is not None and abs(change) >= 2 * threshold:
            up = y["value"] > x["value"]
            verdict = "better" if up == (x.get("better") == "higher") else "worse"
        rows.append([rid, "ratio", f"{x['value']:.3f}", f"{y['value']:.3f}",
                     "" if change is None else f"{100 * change:+.1f}%", verdict])
    only_a = sorted(set(ra) - set(rb))
    only_b = sorted(set(rb) - set(ra))
    ea, eb = a["env"], b["env"]
    lines = [f"perflab compare: A = {a['run']['id']} ({(ea.get('git_commit') or '?')[:10]}, "
             f"{ea['date']})  B = {b['run']['id']} ({(eb.get('git_commit') or '?')[:10]}, "
             f"{eb['date']})"]
    if (ea.get("host"), ea["cpu"].get("model")) != (eb.get("host"), eb["cpu"].get("model")):
        lines.append("warning: the runs come from different machines; absolute figures "
                     "are not comparable, ratios may be")
    if a["run"].get("config") != b["run"].get("config"):
        lines.append("warning: the runs used different settings (sizes or repetitions)")
    for peak in ("ops/memory_bandwidth/peak/rate", "ops/compute/peak/rate"):
        x, y = ra.get(peak), rb.get(peak)
        if x and y and x["value"] and y["value"] and abs(y["value"] / x["value"] - 1) > 0.1:
            lines.append(f"note: this machine's calibrated {x['unit']} peak moved "
                         f"{100 * (y['value'] / x['value'] - 1):+.0f}% between the runs: the "
                         "machine's state (load) differed; ratios are the steadier guide")
    lines += ["", "better/worse: beyond both runs' min-max spread and at least "
              f"{100 * threshold:.0f}% (ratios: {200 * threshold:.0f}%); counts: any change; "
              "single timings (first step, compile): 50% or more, marked ?; ~ within noise", ""]
    header = ["figure", "unit", "A", "B", "change", ""]
    changed = [r for r in rows if r[-1] != "~"]
    n_b = sum(1 for r in rows if r[-1].startswith("better"))
    n_w = sum(1 for r in rows if r[-1].startswith("worse"))
    lines += [f"{len(rows)} figures compared: {n_b} better, {n_w} worse, "
              f"{len(rows) - len(changed)} within noise", "", "## Changes", ""]
    lines += table(header, changed) if changed else ["(none beyond noise)"]
    lines += ["", "## All figures", ""] + table(header, rows)
    lines.append("")
    if only_a:
        lines.append(f"only in A: {len(only_a)} ({', '.join(only_a[:8])}{' ...' if len(only_a) > 8 else ''})")
    if only_b:
        lines.append(f"only in B: {len(only_b)} ({', '.join(only_b[:8])}{' ...' if len(only_b) > 8 else ''})")
    return rows, "\n".join(lines)


def load(path):
    return json.loads(Path(path).read_text())
