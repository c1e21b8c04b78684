"""Runs suites and writes a run's files: <id>.json, <id>.md and
<id>-<suite>.png under the output directory."""
import argparse
import datetime
import os
import shlex
import shutil
import sys
import tempfile
import time
import traceback
from pathlib import Path

from torchtpu.perflab import harness, report

SUITES = ("dispatch", "ops", "models", "coverage")


def _suite_module(name):
    import importlib

    return importlib.import_module(f"torchtpu.perflab.suite_{name}")


_CACHE_VARS = ("PERFLAB_CACHE_ROOT", "TORCHTPU_CACHE_DIR", "TORCHINDUCTOR_CACHE_DIR")


def _fresh_caches():
    """Points torchtpu's and Inductor's on-disk compile caches at an empty
    directory, so first steps and compile times are those of a cold start
    in every run (and comparable between runs). Must run before the tpu
    runtime starts and before Inductor first compiles."""
    tmp = tempfile.mkdtemp(prefix="perflab-cache-")
    os.environ["PERFLAB_CACHE_ROOT"] = tmp  # worker processes get their own below it
    os.environ["TORCHTPU_CACHE_DIR"] = os.path.join(tmp, "torchtpu")
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = os.path.join(tmp, "inductor")
    return tmp


def _run_id(out_dir):
    base = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    rid, k = base, 1
    while (out_dir / f"{rid}.json").exists():
        k += 1
        rid = f"{base}-{k}"
    return rid


def run(suites, cfg, out_dir=None, make_plots=True, warm_cache=False, command=None, quiet=False):
    """Runs `suites` with Config `cfg`; writes the files; returns the result
    document (its "artifacts" name the files)."""
    out_dir = Path(out_dir or harness.default_out_dir())
    out_dir.mkdir(parents=True, exist_ok=True)
    saved_env = {k: os.environ.get(k) for k in _CACHE_VARS}
    cache_tmp = None if warm_cache else _fresh_caches()
    try:
        harness.quiet_fallback_warnings()
        if cfg.threads:  # None or 0: PyTorch's own choice here
            import torch

            torch.set_num_threads(cfg.threads)
        started = time.perf_counter()
        results = harness.Results()
        run_id = _run_id(out_dir)
        env = harness.environment()
        env["load_start"] = harness.load_average()
        for name in suites:
            t0 = time.perf_counter()
            load0 = harness.load_average()
            try:
                _suite_module(name).run(results, cfg)
                status, err = "ok", None
            except Exception as e:  # a broken suite must not hide the others' figures
                status, err = "error", "".join(traceback.format_exception(e))[-3000:]
                print(f"\nperflab: suite {name} failed: {harness.error_text(e)}", file=sys.stderr)
            s = results.suites.setdefault(name, {})
            s["status"] = status
            s["duration_s"] = time.perf_counter() - t0
            s["load_average"] = [load0, harness.load_average()]
            if err:
                s["error"] = err
        doc = {"schema": harness.SCHEMA,
               "run": {"id": run_id, "suites": list(suites), "config": cfg.to_json(),
                       "command": command or "", "warm_cache": warm_cache,
                       "duration_s": time.perf_counter() - started},
               "env": env}
        doc.update(results.to_json())
        stem = out_dir / run_id
        doc["artifacts"] = {"json": f"{stem}.json", "markdown": f"{stem}.md", "plots": []}
        if make_plots:
            doc["artifacts"]["plots"] = report.plots(doc, out_dir, run_id)
        md = report.markdown(doc)
        Path(f"{stem}.md").write_text(md + "\n")
        doc["run"]["duration_s"] = time.perf_counter() - started
        harness.write_json(f"{stem}.json", doc)
        if not quiet:
            print(md)
            print(f"\nwrote {stem}.json, {stem}.md"
                  + (f" and {len(doc['artifacts']['plots'])} plots" if doc["artifacts"]["plots"]
                     else "") + f" in {doc['run']['duration_s']:.0f} s")
        return doc
    finally:
        if cache_tmp:
            if "torchtpu._C" in sys.modules:
                # The exit drains autograd's device thread with a small
                # backward pass (torchtpu/_shutdown.py), whose programs would
                # then find this cache gone and say so; run now, they are
                # stored here and found in memory at exit.
                from torchtpu import _shutdown

                _shutdown._drain_autograd_worker()
            for k, v in saved_env.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
            shutil.rmtree(cache_tmp, ignore_errors=True)


def main(argv=None):
    p = argparse.ArgumentParser(
        prog="python -m torchtpu.perflab",
        description="perflab: the torchtpu benchmark suite (dispatch, ops, models, coverage).")
    p.add_argument("suites", nargs="*", metavar="suite",
                   help=f"suites to run (default: all of {', '.join(SUITES)})")
    p.add_argument("--quick", action="store_true", help="smaller sizes, fewer repetitions")
    p.add_argument("--tiny", action="store_true",
                   help="the smallest configuration (seconds; used by the tests)")
    p.add_argument("--reps", type=int, help="timed repetitions per figure (overrides defaults)")
    p.add_argument("--out", help="output directory (default: perflab/results in the repository)")
    p.add_argument("--models", help="comma-separated subset of MLP,CNN,GPT")
    p.add_argument("--impls", help="comma-separated subset of implementations, e.g. "
                                   "tpu-strict,tpu-fused,cpu-eager (CPU eager always runs "
                                   "in dispatch)")
    p.add_argument("--no-peers", action="store_true", help="leave out JAX even if installed")
    p.add_argument("--no-isolate", action="store_true",
                   help="run each model in this process instead of a fresh one")
    p.add_argument("--warm-cache", action="store_true",
                   help="keep the usual on-disk compile caches (default: empty ones per run)")
    p.add_argument("--no-plots", action="store_true")
    p.add_argument("--threads", type=int,
                   help="PyTorch CPU threads everywhere (0: PyTorch's choice everywhere; "
                        "default: 1 in the models suite, PyTorch's choice elsewhere)")
    p.add_argument("--timeout", type=int, default=300,
                   help="seconds allowed per worker process (default 300)")
    p.add_argument("--compare", nargs=2, metavar=("A.json", "B.json"),
                   help="print the changes from run A to run B, and run nothing")
    args = p.parse_args(argv)

    if args.compare:
        a, b = (report.load(f) for f in args.compare)
        print(report.compare(a, b)[1])
        return 0
    unknown = [s for s in args.suites if s not in SUITES]
    if unknown:
        p.error(f"unknown suite(s) {', '.join(unknown)}: choose from {', '.join(SUITES)}")
    suites = [s for s in SUITES if s in args.suites] if args.suites else list(SUITES)
    split = lambda s: [x.strip() for x in s.split(",") if x.strip()] if s else None  # noqa
    cfg = harness.Config(quick=args.quick, tiny=args.tiny, reps=args.reps,
                         peers=not args.no_peers, isolate=not args.no_isolate,
                         models=split(args.models), impls=split(args.impls),
                         timeout=args.timeout, threads=args.threads)
    command = "python -m torchtpu.perflab " + " ".join(
        shlex.quote(a) for a in (argv if argv is not None else sys.argv[1:]))
    print(f"perflab: suites {', '.join(suites)}"
          f"{' (quick)' if cfg.quick and not cfg.tiny else ''}{' (tiny)' if cfg.tiny else ''}",
          file=sys.stderr)
    run(suites, cfg, args.out, make_plots=not args.no_plots, warm_cache=args.warm_cache,
        command=command.strip())
    return 0
