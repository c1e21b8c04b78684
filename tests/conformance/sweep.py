"""The conformance sweep: every OpInfo operator (and every Core ATen
overload) on tpu against CPU, in worker processes, so that a crash or a hang
costs one case, not the sweep. Writes docs/op_coverage.md and
docs/op_coverage.json (report.py).

    python tests/conformance/sweep.py [--jobs N] [--ops a,b,...] [--out DIR]
        [--max-samples N] [--timeout S] [--no-core] [--resume]

Each worker appends one JSON line per event to its shard file:
  {"event": "begin", "op", "dtype", "variant"}   before a case
  {"event": "case", ...result...}                 after it (opinfo_harness.run_case)
  {"event": "core", ...result...}                 a Core ATen probe (core_aten.probe)
A worker that dies (signal, abort, nonzero exit) or makes no progress for
--timeout seconds is killed and restarted; the case it had begun is recorded
as `crash` (with the signal or exit status and the end of its stderr) and
the new worker resumes after it.
"""
import argparse
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
sys.path.insert(0, str(HERE))


#===--- worker ---===#

def _done_cases(path):
    """Cases (op, dtype, variant) with a final record in a shard file."""
    done = set()
    if not path.exists():
        return done
    for line in path.read_text().splitlines():
        try:
            e = json.loads(line)
        except ValueError:
            continue  # (a line cut short by a crash)
        if e.get("event") in ("case", "core"):
            done.add((e.get("op") or e.get("overload"), e["dtype"], e.get("variant", "probe")))
    return done


def worker(args):
    import opinfo_harness as H
    H.setup()
    path = Path(args.shard)
    done = _done_cases(path)
    out = open(path, "a", buffering=1)
    beat = Path(str(path) + ".beat")
    beat.touch()
    H.HEARTBEAT = lambda: os.utime(beat)

    def emit(**e):
        out.write(json.dumps(e) + "\n")
        out.flush()

    keys = [k for k in args.ops.split(",") if k]
    if args.core:
        import core_aten as C
        ops = {str(o): o for o in C.core_overloads()}
        cap_path = Path(args.core_captures)
        import torch
        captured = torch.load(cap_path, weights_only=False) if cap_path.exists() else {}
        for op, dtype, calls, origin in C.plan(captured, [ops[k] for k in keys if k in ops]):
            dname = H.DTYPE_NAMES[dtype]
            if (str(op), dname, "probe") in done:
                continue
            emit(event="begin", op=str(op), dtype=dname, variant="probe")
            H.HEARTBEAT()
            r = C.probe(op, dtype, calls, origin)
            emit(event="core", variant="probe", **r)
        return 0
    db = dict(H.databases())
    for key in keys:
        op = db[key]
        cases = [(d, v) for d, v in H.all_cases(op)
                 if (key, H.DTYPE_NAMES[d], v) not in done]
        if not cases:
            continue

        def begin(dtype, variant, key=key):
            emit(event="begin", op=key, dtype=H.DTYPE_NAMES[dtype], variant=variant)
            # (self-test of the crash bookkeeping: CONFORMANCE_CRASH=op:dtype:variant)
            if os.environ.get("CONFORMANCE_CRASH") == f"{key}:{H.DTYPE_NAMES[dtype]}:{variant}":
                os.abort()

        def result(r):
            emit(event="case", **r)
        H.run_op(op, key, cases, max_samples=args.max_samples, on_begin=begin, on_result=result)
    return 0


def capture_worker(args):
    """Captures the core overloads' calls from the OpInfo samples (CPU)."""
    import opinfo_harness as H
    import core_aten as C
    import torch
    H.setup()
    wanted = {str(o) for o in C.core_overloads()}
    captured = C.capture(H.databases(), wanted)
    torch.save(captured, args.core_captures)
    return 0


#===--- driver ---===#

def _last_begin(path):
    """The last case begun in a shard file without its result, or None."""
    begun = None
    if not path.exists():
        return None
    for line in path.read_text().splitlines():
        try:
            e = json.loads(line)
        except ValueError:
            continue
        if e.get("event") == "begin":
            begun = e
        elif e.get("event") in ("case", "core"):
            begun = None
    return begun


def _signal_name(rc):
    if rc < 0:
        try:
            return signal.Signals(-rc).name
        except ValueError:
            return f"signal {-rc}"
    return f"exit status {rc}"


def _stderr_tail(log, start, lines=6):
    try:
        with open(log, "rb") as f:
            f.seek(start)
            text = f.read().decode("utf-8", "replace")
    except OSError:
        return ""
    keep = [ln for ln in text.splitlines() if ln.strip()][-lines:]
    return " | ".join(s.strip()[:200] for s in keep)


class Shard:
    def __init__(self, index, ops, outdir, opts, core=False, prefix=""):
        self.index, self.ops, self.opts, self.core = index, ops, opts, core
        tag = "core" if core else "opinfo"
        self.path = outdir / f"{tag}-{prefix}{index}.jsonl"
        self.log = outdir / f"{tag}-{index}.log"
        self.crashes = 0
        self.restarts = 0

    def command(self):
        cmd = [sys.executable, str(Path(__file__).resolve()), "--worker", "--shard", str(self.path),
               "--ops", ",".join(self.ops), "--core-captures", str(self.opts.captures)]
        if self.core:
            cmd.append("--core")
        if self.opts.max_samples is not None:
            cmd += ["--max-samples", str(self.opts.max_samples)]
        return cmd

    def run(self):
        stalls = 0
        while True:
            start = self.log.stat().st_size if self.log.exists() else 0
            with open(self.log, "ab") as log:
                p = subprocess.Popen(self.command(), stdout=log, stderr=subprocess.STDOUT,
                                     env=_env(), start_new_session=True)
                beat = Path(str(self.path) + ".beat")
                size, last = -1, time.time()
                reason = None
                while p.poll() is None:
                    time.sleep(1.0)
                    now_size = self.path.stat().st_size if self.path.exists() else 0
                    now_size += beat.stat().st_mtime if beat.exists() else 0
                    if now_size != size:
                        size, last = now_size, time.time()
                    elif time.time() - last > self.opts.timeout:
                        reason = f"hang: no progress for {self.opts.timeout} s"
                        os.killpg(p.pid, signal.SIGKILL)
                        p.wait()
                        break
                rc = p.returncode
            if rc == 0 and reason is None:
                return
            self.restarts += 1
            begun = _last_begin(self.path)
            why = reason or _signal_name(rc)
            tail = _stderr_tail(self.log, start)
            if begun is None:
                stalls += 1
                if stalls >= 3:
                    _record(self.path, {"event": "worker-failed", "detail": f"{why}: {tail}"})
                    print(f"[shard {self.index}] worker keeps failing outside a case: {why}: {tail}",
                          file=sys.stderr)
                    return
                continue
            stalls = 0
            self.crashes += 1
            crash = {"event": "core" if self.core else "case", "op": begun["op"],
                     "dtype": begun["dtype"], "variant": begun["variant"], "status": "crash",
                     "detail": f"{why}: {tail}"[:600], "samples": 0, "passed": 0,
                     "fallbacks": [], "max_error": None}
            if self.core:
                crash["overload"] = begun["op"]
            _record(self.path, crash)
            print(f"[shard {self.index}] crash in {begun['op']} {begun['dtype']} "
                  f"{begun['variant']}: {why}", file=sys.stderr, flush=True)


def _record(path, e):
    with open(path, "a") as f:
        f.write(json.dumps(e) + "\n")


MODE = None  # --mode (default: TORCHTPU_MODE, else strict)


def _env():
    env = dict(os.environ)
    if MODE:
        env["TORCHTPU_MODE"] = MODE
    env.setdefault("TORCHTPU_MODE", "strict")
    env.setdefault("TORCHTPU_CPU_DEVICES", "1")
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    env.setdefault("OMP_NUM_THREADS", "1")
    return env


def _cost(key):
    """A rough cost estimate for balancing shards (larger first)."""
    heavy = ("linalg", "fft", "conv", "pool", "nn.functional", "special", "masked", "signal")
    return 2 if any(h in key for h in heavy) else 1


def _run_shards(shards):
    threads = [threading.Thread(target=s.run, daemon=True) for s in shards]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def _read(paths, event):
    out = {}
    for p in sorted(paths, key=lambda p: p.stat().st_mtime if p.exists() else 0):
        if not p.exists():
            continue
        for line in p.read_text().splitlines():
            try:
                e = json.loads(line)
            except ValueError:
                continue
            if e.get("event") == event:
                e = dict(e)
                e.pop("event")
                k = (e.get("op") or e.get("overload"), e["dtype"], e.get("variant"))
                out[k] = e  # (the last record of a case wins: a crash, then nothing else)
    return list(out.values())


def write_expectations(cases, path):
    """{op: {dtype: class}} of the functional float32 and bfloat16 cases."""
    exp = {}
    for c in cases:
        if c["variant"] == "functional" and c["dtype"] in ("float32", "bfloat16"):
            exp.setdefault(c["op"], {})[c["dtype"]] = c["status"]
    lines = [f" {json.dumps(k)}: {json.dumps(exp[k], sort_keys=True)}" for k in sorted(exp)]
    path.write_text("{\n" + ",\n".join(lines) + "\n}\n")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--jobs", type=int, default=int(os.environ.get("CONFORMANCE_JOBS", "2")))
    ap.add_argument("--ops", default="", help="comma-separated OpInfo keys (default: all)")
    ap.add_argument("--out", default=str(ROOT / "build" / "conformance"))
    ap.add_argument("--docs", default=str(ROOT / "docs"))
    ap.add_argument("--max-samples", type=int, default=None)
    ap.add_argument("--timeout", type=int, default=300,
                    help="seconds without progress (one sample) that count as a hang")
    ap.add_argument("--no-core", action="store_true")
    ap.add_argument("--resume", action="store_true", help="keep the shard files of a previous run")
    ap.add_argument("--mode", choices=("strict", "debug", "fused"),
                    help="torchtpu execution mode of the workers (default strict)")
    ap.add_argument("--report-only", action="store_true")
    ap.add_argument("--write-expectations", action="store_true",
                    help="also write subset_expected.json (test_opinfo_subset.py) from the results")
    ap.add_argument("--redo", action="store_true",
                    help="run --ops again, keeping every other record of the previous run "
                         "(the new records replace theirs)")
    ap.add_argument("--only", choices=("opinfo", "core"),
                    help="run one phase; the other phase's records of a previous run are kept")
    # worker options
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--capture", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--core", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--shard", help=argparse.SUPPRESS)
    ap.add_argument("--core-captures", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    global MODE
    MODE = args.mode
    if args.worker:
        return worker(args)
    if args.capture:
        return capture_worker(args)

    outdir = Path(args.out)
    outdir.mkdir(parents=True, exist_ok=True)
    args.captures = outdir / "core_captures.pt"
    t0 = time.time()
    import opinfo_harness as H
    keys = [k for k, _ in H.databases()]
    if args.ops:
        wanted = args.ops.split(",")
        unknown = [k for k in wanted if k not in keys]
        if unknown:
            sys.exit(f"unknown OpInfo keys: {unknown}")
        keys = wanted
    jobs = max(1, args.jobs)
    if args.redo:
        args.resume, args.only = True, args.only or "opinfo"
    if not args.resume and not args.report_only:
        for p in outdir.glob("*.jsonl"):
            if args.only is None or p.name.startswith(args.only + "-"):
                p.unlink()
    if not args.report_only:
        # Largest first, dealt round-robin: shards finish at about the same time.
        order = sorted(keys, key=lambda k: -_cost(k))
        prefix = f"r{int(time.time())}-" if args.redo else ""
        shards = [Shard(i, order[i::jobs], outdir, args, prefix=prefix) for i in range(jobs)]
        if args.only == "core":
            shards = []
        if not args.no_core and args.only != "opinfo":
            if not args.captures.exists() or not args.resume:
                print("capturing core ATen calls from the OpInfo samples (CPU)", flush=True)
                r = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--capture",
                                    "--core-captures", str(args.captures)], env=_env())
                if r.returncode != 0:
                    print(f"capturing failed ({_signal_name(r.returncode)}): core overloads get "
                          "their hand-written probes only", file=sys.stderr)
            import core_aten as C
            names = [str(o) for o in C.core_overloads()]
            shards += [Shard(i, names[i::jobs], outdir, args, core=True) for i in range(jobs)]
        # OpInfo shards first (they are the long ones), core shards after.
        op_shards = [s for s in shards if not s.core]
        core_shards = [s for s in shards if s.core]
        print(f"sweeping {len(keys)} OpInfo entries in {jobs} workers", flush=True)
        _run_shards(op_shards)
        if core_shards:
            print(f"probing {len(names)} core ATen overloads", flush=True)
            _run_shards(core_shards)
    elapsed = time.time() - t0
    cases = _read(outdir.glob("opinfo-*.jsonl"), "case")
    core = _read(outdir.glob("core-*.jsonl"), "core")
    import report
    meta = {"seconds": round(elapsed), "jobs": jobs, "mode": _env()["TORCHTPU_MODE"],
            "max_samples": args.max_samples, "partial": bool(args.ops) and not args.redo}
    if args.report_only or args.redo or args.only:
        prev = Path(args.docs) / "op_coverage.json"
        if prev.exists():
            before = json.loads(prev.read_text()).get("meta", {})
            meta["seconds"] = before.get("seconds", meta["seconds"])
            if args.redo:  # the sweep stays the earlier one, with some operators run again
                meta["date"] = before.get("date")
                meta["redone"] = before.get("redone", []) + [
                    {"date": time.strftime("%Y-%m-%d %H:%M"), "ops": len(keys)}]
    doc = report.build(cases, core, meta)
    report.write(doc, Path(args.docs))
    if args.write_expectations:
        write_expectations(cases, HERE / "subset_expected.json")
    print(report.headline_text(doc))
    return 0


if __name__ == "__main__":
    sys.exit(main())
