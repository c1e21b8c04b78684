"""The measuring core of perflab: repeated timings summarized as a median
with its spread, a result store whose ratios are computed only from
measurements of the same run, progress bars, and a description of the
machine a run happened on.

Nothing here imports torch at module level, so the statistics can be used
by code that runs without it.
"""
import datetime
import gc
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

SCHEMA = "perflab/1"

# The direction of improvement of each unit, used by reports and --compare.
LOWER_IS_BETTER = {"us", "ms", "s", "bytes", "count", "MB"}
HIGHER_IS_BETTER = {"GB/s", "GFLOP/s"}


def better_for(unit):
    if unit in HIGHER_IS_BETTER:
        return "higher"
    return "lower"


#===--- statistics ---===#

class Stats:
    """A summary of repeated samples: median, quartiles, min and max."""

    def __init__(self, samples):
        if not samples:
            raise ValueError("no samples")
        s = sorted(float(v) for v in samples)
        self.samples = [float(v) for v in samples]
        self.n = len(s)
        self.median = statistics.median(s)
        self.min = s[0]
        self.max = s[-1]
        if self.n >= 2:
            q = statistics.quantiles(s, n=4, method="inclusive")
            self.q1, self.q3 = q[0], q[2]
        else:
            self.q1 = self.q3 = s[0]

    def scaled(self, factor):
        """The same samples multiplied by factor (a unit change)."""
        return Stats([v * factor for v in self.samples])

    def inverse(self, numerator):
        """Stats of numerator / sample (a time turned into a rate): the
        median maps to the median, the min to the max and so on."""
        return Stats([numerator / v if v > 0 else float("inf") for v in self.samples])

    def to_json(self):
        return {"median": self.median, "min": self.min, "max": self.max, "q1": self.q1,
                "q3": self.q3, "n": self.n, "samples": self.samples}


def measure(fn, *, reps, warmup=1, inner=1, sync=None, before=None):
    """Times fn: `warmup` untimed samples, then `reps` samples of `inner`
    calls each, followed by sync() inside the timed region. Returns Stats of
    seconds per call. The garbage collector is paused during each sample so
    that a collection does not land in one timing."""
    def sample():
        if before is not None:
            before()
        gc_was = gc.isenabled()
        gc.disable()
        try:
            t0 = time.perf_counter()
            for _ in range(inner):
                fn()
            if sync is not None:
                sync()
            t1 = time.perf_counter()
        finally:
            if gc_was:
                gc.enable()
        return (t1 - t0) / inner

    for _ in range(warmup):
        sample()
    gc.collect()
    return Stats([sample() for _ in range(reps)])


def thread_cpu_ns():
    """CPU time so far in ns, as (the calling thread's, all the process's
    other threads' together, ended ones included). A thread running on
    another core is counted up to its last scheduler tick."""
    mine = time.thread_time_ns()
    return mine, time.process_time_ns() - mine


def sample_once(fn, inner=1, sync=None):
    """One timed sample: `inner` calls of fn, then sync(); returns
    (seconds per call including sync, seconds per call before sync)."""
    gc_was = gc.isenabled()
    gc.disable()
    try:
        t0 = time.perf_counter()
        for _ in range(inner):
            fn()
        t1 = time.perf_counter()
        if sync is not None:
            sync()
        t2 = time.perf_counter()
    finally:
        if gc_was:
            gc.enable()
    return (t2 - t0) / inner, (t1 - t0) / inner


def interleave(samplers, reps, errors=None):
    """Takes `reps` samples from each of samplers ({name: fn() -> sample}),
    one round at a time and in a rotating order, so that a change in the
    machine's load during the run falls on every implementation alike
    rather than on whichever ran last. A sampler that raises is dropped and
    its error kept in `errors`. Returns {name: [samples]}."""
    names = list(samplers)
    out = {n: [] for n in names}
    errors = {} if errors is None else errors
    for r in range(reps):
        live = [n for n in names if n not in errors]
        if not live:
            break
        k = r % len(live)
        for n in live[k:] + live[:k]:
            try:
                out[n].append(samplers[n]())
            except Exception as e:
                errors[n] = e
    return {n: v for n, v in out.items() if n not in errors}


def load_average():
    """The 1-minute load average (None where unknown): above the number of
    CPUs, other processes competed for the machine during the run."""
    try:
        return round(os.getloadavg()[0], 2)
    except (OSError, AttributeError):
        return None


#===--- results ---===#

class Results:
    """The records and ratios of one run.

    A record is one measured figure: its id is suite/bench/impl/metric, its
    value the median (or a count), its stats the spread. A ratio names two
    records of this run and divides their values; it is never taken from
    another run."""

    def __init__(self):
        self.records = {}
        self.ratios = {}
        self.suites = {}
        self.notes = []

    def record(self, suite, bench, impl, metric, unit, stats=None, value=None, status="ok",
               error=None, better=None, **extra):
        rid = f"{suite}/{bench}/{impl}/{metric}"
        rec = {"id": rid, "suite": suite, "bench": bench, "impl": impl, "metric": metric,
               "unit": unit, "better": better or better_for(unit), "status": status,
               "value": None, "stats": None}
        if status == "ok":
            if stats is not None:
                rec["stats"] = stats.to_json()
                rec["value"] = stats.median
            else:
                rec["value"] = value
        if error is not None:
            rec["error"] = str(error)
        if extra:
            rec["extra"] = extra
        self.records[rid] = rec
        return rid

    def failed(self, suite, bench, impl, metric, unit, error, status="error"):
        return self.record(suite, bench, impl, metric, unit, status=status, error=error)

    def value(self, rid):
        rec = self.records.get(rid)
        return None if rec is None or rec["status"] != "ok" else rec["value"]

    def ratio(self, suite, bench, name, num, den, meaning=""):
        """value(num) / value(den), both records of this run. A missing or
        failed side leaves the ratio's value None (and says why)."""
        rid = f"{suite}/{bench}/ratio/{name}"
        a, b = self.value(num), self.value(den)
        rat = {"id": rid, "suite": suite, "bench": bench, "name": name, "num": num, "den": den,
               "value": None, "meaning": meaning,
               "better": self.records[num]["better"] if num in self.records else None}
        if a is None or b is None:
            rat["why_none"] = "missing or failed: " + ", ".join(
                r for r, v in ((num, a), (den, b)) if v is None)
        elif b == 0:
            rat["why_none"] = "division by zero"
        else:
            rat["value"] = a / b
        self.ratios[rid] = rat
        return rid

    def to_json(self):
        return {"records": list(self.records.values()), "ratios": list(self.ratios.values()),
                "suites": self.suites, "notes": self.notes}


def check_ratios(doc):
    """Problems with a result document's ratios (an empty list when each one
    is value(num)/value(den) of records in the same document)."""
    recs = {r["id"]: r for r in doc["records"]}
    problems = []
    for rat in doc["ratios"]:
        num, den = recs.get(rat["num"]), recs.get(rat["den"])
        if num is None or den is None:
            problems.append(f"{rat['id']}: refers to a record not in this run")
            continue
        if rat["value"] is None:
            if num["status"] == "ok" and den["status"] == "ok" and den["value"]:
                problems.append(f"{rat['id']}: no value although both sides were measured")
            continue
        expect = num["value"] / den["value"]
        if abs(rat["value"] - expect) > 1e-9 * max(1.0, abs(expect)):
            problems.append(f"{rat['id']}: {rat['value']} != {expect}")
    return problems


#===--- progress ---===#

class Progress:
    """A plain-text progress bar on stderr: redrawn in place with a carriage
    return on a terminal, one line per step otherwise."""

    def __init__(self, label, total, stream=None, width=24):
        self.label = label
        self.total = max(1, total)
        self.done = 0
        self.stream = stream or sys.stderr
        self.width = width
        self.tty = hasattr(self.stream, "isatty") and self.stream.isatty()
        self.start = time.perf_counter()
        self._last_len = 0

    def _draw(self, text, end=""):
        filled = int(self.width * min(self.done, self.total) / self.total)
        bar = "#" * filled + "." * (self.width - filled)
        el = time.perf_counter() - self.start
        line = f"  {self.label:<9} [{bar}] {self.done:3d}/{self.total:<3d} {el:6.1f}s  {text}"
        if self.tty:
            pad = max(0, self._last_len - len(line))
            self.stream.write("\r" + line + " " * pad + end)
            self._last_len = len(line)
        else:
            self.stream.write(line + "\n")
        self.stream.flush()

    def now(self, text):
        """Shows what is running (terminal only)."""
        if self.tty:
            self._draw(text)

    def step(self, text=""):
        self.done += 1
        self._draw(text)

    def close(self, text="done"):
        self.done = self.total
        if self.tty:
            self._draw(text, end="\n")
        else:
            self._draw(text)


#===--- environment ---===#

def repo_root():
    """The source tree this package lives in, when it is one."""
    root = Path(__file__).resolve().parents[2]
    if (root / "Makefile").exists() and (root / "torchtpu").is_dir():
        return root
    return None


def default_out_dir():
    root = repo_root()
    return (root if root is not None else Path.cwd()) / "perflab" / "results"


def _git(*args):
    root = repo_root()
    if root is None:
        return None
    try:
        return subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True,
                              timeout=10).stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        return None


def _cpu_info():
    info = {"model": platform.processor() or None, "mhz": None, "flags": []}
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return info
    for line in text.splitlines():
        key, _, val = line.partition(":")
        key, val = key.strip(), val.strip()
        if key == "model name" and not info.get("model_name"):
            info["model"] = val
            info["model_name"] = val
        elif key == "cpu MHz" and info["mhz"] is None:
            info["mhz"] = float(val)
        elif key == "flags" and not info["flags"]:
            wanted = ("avx", "avx2", "fma", "avx512f", "avx512_bf16", "amx_bf16", "neon")
            info["flags"] = [f for f in val.split() if f in wanted]
    info.pop("model_name", None)
    return info


def environment():
    """What the figures of a run depend on: machine, versions, settings."""
    import torch

    env = {
        "date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
        "host": platform.node(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "cpu": _cpu_info(),
        "cpus": os.cpu_count(),
        "torch": torch.__version__,
        "torch_threads": torch.get_num_threads(),
        "git_commit": _git("rev-parse", "HEAD"),
        "git_dirty": bool(_git("status", "--porcelain", "--untracked-files=no")),
        "torchtpu_mode_env": os.environ.get("TORCHTPU_MODE"),
        "torchtpu_cache_dir": os.environ.get("TORCHTPU_CACHE_DIR"),
        "inductor_cache_dir": os.environ.get("TORCHINDUCTOR_CACHE_DIR"),
    }
    try:
        import torchtpu

        env["torchtpu"] = torchtpu.__version__
        props = torch.tpu.get_device_properties(0)
        env["device"] = {"name": props.name, "platform": props.platform,
                         "platform_version": props.platform_version, "pjrt_api": props.pjrt_api,
                         "stablehlo": props.stablehlo, "plugin": props.plugin,
                         "count": torch.tpu.device_count()}
    except Exception as e:  # the report says the device was unavailable
        env["device"] = {"error": f"{type(e).__name__}: {e}"}
    for mod in ("numpy", "matplotlib", "jax", "jaxlib"):
        env[mod] = _version_of(mod)
    return env


def _version_of(module):
    try:
        from importlib.metadata import version

        return version(module)
    except Exception:
        return None


#===--- subprocesses ---===#

def run_python(args, timeout, env=None):
    """Runs `python args...`, the result written as JSON to a file whose
    path is the last argument. Returns (document or None, error text)."""
    import tempfile

    fd, path = tempfile.mkstemp(prefix="perflab-", suffix=".json")
    os.close(fd)
    try:
        proc = subprocess.run([sys.executable, *args, path], capture_output=True, text=True,
                              timeout=timeout, env=env)
        text = Path(path).read_text()
        if proc.returncode == 0 and text:
            return json.loads(text), None
        tail = (proc.stderr or proc.stdout or "").strip().splitlines()[-6:]
        return (json.loads(text) if text else None,
                f"exit status {proc.returncode}: " + " | ".join(tail))
    except subprocess.TimeoutExpired:
        return None, f"timed out after {timeout} s"
    finally:
        try:
            os.unlink(path)
        except OSError:
            pass


def write_json(path, doc):
    Path(path).write_text(json.dumps(doc, indent=1, sort_keys=False) + "\n")


#===--- torch and torchtpu helpers ---===#

TPU_MODES = ("strict", "fused", "debug")


def quiet_fallback_warnings():
    """The backend warns once per operator that falls back to the CPU; the
    suites count fallbacks through torchtpu.metrics() instead."""
    import warnings

    warnings.filterwarnings("ignore", message=r"The operator .* is not implemented natively")


def tpu_sync():
    import torch

    torch.tpu.synchronize()


def counters():
    """A snapshot of torchtpu's counters, with the CPU fallbacks summed."""
    import torchtpu

    m = torchtpu.metrics()
    m = dict(m)
    m["fallbacks"] = dict(m["fallbacks"])
    m["fallback_calls"] = sum(m["fallbacks"].values())
    return m


def counter_delta(before, after):
    out = {k: after[k] - before[k] for k in after
           if isinstance(after[k], (int, float)) and k in before}
    out["fallbacks"] = {k: v - before["fallbacks"].get(k, 0) for k, v in after["fallbacks"].items()
                        if v != before["fallbacks"].get(k, 0)}
    return out


def error_text(e):
    text = f"{type(e).__name__}: {e}".strip()
    return text.splitlines()[0][:300] if text else type(e).__name__


#===--- configuration ---===#

class Config:
    """Settings shared by the suites. `quick` shrinks sizes and repetitions
    (for tests and smoke runs); `reps` overrides the repetition counts."""

    def __init__(self, quick=False, reps=None, peers=True, isolate=True, models=None,
                 impls=None, timeout=300, tiny=False, threads=None):
        self.quick = quick or tiny
        self.tiny = tiny  # the test configuration: smallest sizes, fewest repetitions
        self.reps = reps
        self.peers = peers
        self.isolate = isolate
        self.models = tuple(models) if models else ("MLP", "CNN", "GPT")
        self.impls = tuple(impls) if impls else None
        self.timeout = timeout
        # PyTorch CPU threads: None, the default policy (1 in the models
        # suite, PyTorch's own choice elsewhere); 0, PyTorch's choice
        # everywhere; N, N everywhere.
        self.threads = threads

    def pick(self, full, quick, tiny=None):
        if self.tiny and tiny is not None:
            return tiny
        return quick if self.quick else full

    def n_reps(self, full, quick, tiny=None):
        return self.reps or self.pick(full, quick, tiny)

    def model_threads(self):
        """PyTorch CPU threads in the models suite (None: PyTorch's choice)."""
        if self.threads is None:
            return 1
        return self.threads or None

    def wants(self, impl):
        """--impls, else every implementation (PyTorch CUDA eager where
        torch sees a GPU)."""
        if self.impls is not None:
            return impl in self.impls
        if impl == "cuda-eager":
            import torch

            return torch.cuda.is_available()
        return True

    def to_json(self):
        return {"quick": self.quick, "tiny": self.tiny, "reps": self.reps, "peers": self.peers,
                "isolate": self.isolate, "models": list(self.models),
                "impls": list(self.impls) if self.impls else None, "timeout": self.timeout,
                "threads": self.threads}
