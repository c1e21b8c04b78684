"""Suite `models`: the MLP, CNN and GPT of models.py, inference (forward
under no_grad, eval mode) and training steps (forward, loss, backward,
AdamW step), on tpu in each mode, PyTorch CPU eager, torch.compile with
Inductor on CPU, PyTorch CUDA eager where torch sees a GPU (the peer that
counts on a GPU machine) and, for the MLP, JAX when installed.

Each (model, kind, implementation) runs in a fresh process by default, with
compile caches of its own that start empty, so a first step is a cold one;
a crash in one combination does not end the run. (--no-isolate runs all in
the perflab process: later first steps then reuse earlier compiles. CUDA
eager runs in a process of its own all the same, one that never registers
the tpu device: PyTorch keeps one accelerator per process, and once tpu is
registered a backward pass over cuda tensors fails, pytorch/pytorch#161129.)

A full run measures every combination in three rounds, one after the other
(all combinations once, then again), and pools the steps of the rounds: on
a shared machine a stretch of noise then falls on every implementation
alike instead of on whichever ran during it. First-step figures come from
the first round (later rounds find its compile caches warm). --quick and
--tiny run one round.

PyTorch runs on one CPU thread here unless --threads says otherwise (CPU
eager, Inductor's code, and the CPU fallbacks of tpu runs): on a shared
2-core machine, two OpenMP threads stall for a scheduler time slice whenever
another process holds a core (24 ms per step was seen for an MLP forward
that takes 0.2 ms on one thread), which no median can remove. XLA (tpu, JAX)
keeps its own thread pool.

Per model and kind:
  first step     wall time of step 1 (compiles included)
  warmup steps   tpu: steps run until one compiled (or loaded) no program;
                 elsewhere the first step and two more, untimed
  step           median wall time per step after warmup; inputs are on the
                 device already. Kinds `forward` and `train`: each step is
                 followed by torch.tpu.synchronize() (the latency of a step,
                 as in a loop that reads the loss every step). Kind
                 `train-pipelined`: ten steps, then one synchronize(), per
                 step (a loop that reads the loss every tenth step: the host
                 records the next step while the device runs this one)
  compiles, host syncs, CPU fallbacks and executions per timed step (the
  closing synchronize() of each timed sample is not counted as a host sync)
  peak memory    torch.tpu.max_memory_allocated() over the timed steps
  compile        Inductor and JAX: first step minus the median step
  phases         the host's time in each call of a timed step (zero_grad,
                 forward and loss, backward, optimizer step) and its wait in
                 the closing synchronize(), per step, medians: where a tpu
                 step records and where it waits for the device
  CPU time       per timed step, of the thread that runs the steps and of
                 all the process's other threads (XLA's, PyTorch's OpenMP
                 pool, PJRT's), over the wall time of the same steps: how
                 many cores a step keeps busy
  paired ratios  tpu-strict, tpu-fused and cpu-eager (those measured) once
                 more in one process, in blocks of steps taken in turn: per
                 round, one's time per step over the other's, so that a
                 change of load falls on both sides (not CUDA eager: its
                 backward cannot run beside tpu, above)
"""
import importlib.util
import json
import os
import sys
import time
from pathlib import Path

from torchtpu.perflab import harness
from torchtpu.perflab.harness import Stats

SUITE = "models"
MODELS = ("MLP", "CNN", "GPT")
KINDS = ("forward", "train", "train-pipelined")
STEPS_PER_SYNC = {"train-pipelined": 10}  # else 1
IMPLS = ("tpu-strict", "tpu-fused", "tpu-compiled", "tpu-debug", "cpu-eager", "cpu-inductor",
         "cuda-eager")


def _device(impl):
    return "tpu" if impl.startswith("tpu-") else "cuda" if impl == "cuda-eager" else "cpu"


# The implementations that run a torch.compile'd model, and its backend.
COMPILE_BACKENDS = {"cpu-inductor": "inductor", "tpu-compiled": "tpu"}


def _mode(impl):
    """The torchtpu mode of a tpu implementation: tpu-compiled runs its
    compiled graphs and the optimizer step in fused mode."""
    return "fused" if impl == "tpu-compiled" else impl.split("-", 1)[1]


def shapes(quick, tiny):
    def pick(full, q, t):
        return t if tiny else q if quick else full

    return {
        "MLP": {"batch": pick(256, 64, 8)},
        "CNN": {"batch": pick(32, 8, 2)},
        "GPT": {"batch": pick(16, 4, 2), "seq": pick(32, 16, 8)},
    }


def build(name, shape, device, seed=0):
    """(model, forward inputs, loss function) on `device`."""
    import torch
    import torch.nn.functional as F

    from torchtpu.perflab import models

    torch.manual_seed(seed)
    g = torch.Generator().manual_seed(seed)
    b = shape["batch"]
    if name == "MLP":
        model = models.MLP()
        x = torch.randn(b, 64, generator=g)
        y = torch.randint(0, 10, (b,), generator=g)
    elif name == "CNN":
        model = models.CNN()
        x = torch.randn(b, 3, 16, 16, generator=g)
        y = torch.randint(0, 10, (b,), generator=g)
    elif name == "GPT":
        t = shape["seq"]
        model = models.GPT(vocab=64, dim=64, heads=4, layers=2, block=t)
        x = torch.randint(0, 64, (b, t), generator=g)
        y = torch.randint(0, 64, (b, t), generator=g)
    else:
        raise ValueError(name)
    model = model.to(device)
    x, y = x.to(device), y.to(device)
    if name == "GPT":
        return model, (x,), lambda m: m(x, y)[1]
    return model, (x,), lambda m: F.cross_entropy(m(x), y)


def _step_fn(kind, model, runner, inputs, loss_fn, phases):
    """The step of `kind`; each call appends the seconds of its phases to
    the lists of `phases`."""
    import torch

    def timed(phase, fn, *args):
        t0 = time.perf_counter()
        r = fn(*args)
        phases.setdefault(phase, []).append(time.perf_counter() - t0)
        return r

    if kind == "forward":
        model.eval()

        kept = []

        def step():
            # The output stays alive until the step's closing synchronize, or
            # fused mode would (rightly) skip computing a result nobody reads.
            with torch.no_grad():
                kept[:] = [timed("forward", runner, *inputs)]
        return step
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)

    def step():
        timed("zero_grad", opt.zero_grad, True)
        loss = timed("forward", loss_fn, runner)
        timed("backward", loss.backward)
        timed("optimizer", opt.step)
    return step


def bench_one(name, impl, kind, shape, reps, max_warmup):
    """Measures one (model, impl, kind) in this process; returns a dict."""
    import torch

    device = _device(impl)
    tpu = device == "tpu"
    if tpu:
        import torchtpu
    sync = {"tpu": harness.tpu_sync, "cuda": torch.cuda.synchronize}.get(device)
    out = {"model": name, "impl": impl, "kind": kind, "shape": shape}
    model, inputs, loss_fn = build(name, shape, device)
    out["params"] = sum(p.numel() for p in model.parameters())
    runner = model
    if impl in COMPILE_BACKENDS:
        runner = torch.compile(model, backend=COMPILE_BACKENDS[impl])
    phases = {}
    step = _step_fn(kind, model, runner, inputs, loss_fn, phases)
    if sync:
        sync()

    def timed():
        before = harness.counters() if tpu else None
        t0 = time.perf_counter()
        step()
        if sync:
            sync()
        dt = time.perf_counter() - t0
        return dt, (harness.counter_delta(before, harness.counters()) if tpu else None)

    first, d = timed()
    out["first_step_s"] = first
    if tpu:
        out["first_step_compiles"] = d["compiles"]
        out["first_step_compile_s"] = d["compile_seconds"]
        out["first_step_disk_hits"] = d["disk_hits"]
        compiles, misses = [d["compiles"]], [d["cache_misses"]]
        # Warmup ends at the first step that neither compiled a program nor
        # loaded one from the disk cache.
        while misses[-1] > 0 and len(misses) < max_warmup:
            d = timed()[1]
            compiles.append(d["compiles"])
            misses.append(d["cache_misses"])
        out["compiles_per_warmup_step"] = compiles
        out["warmup_steps"] = len(misses) - 1 if misses[-1] == 0 else None
        out["compiles_stopped"] = misses[-1] == 0
        torch.tpu.reset_peak_memory_stats()
        before = harness.counters()
    else:  # no compile counter to watch: two more untimed steps
        for _ in range(2):
            timed()
        if device == "cuda":
            torch.cuda.reset_peak_memory_stats()
    inner = STEPS_PER_SYNC.get(kind, 1)

    def timed_sync():
        t0 = time.perf_counter()
        sync()
        phases.setdefault("sync", []).append((time.perf_counter() - t0) / inner)

    phases.clear()  # the timed steps' only
    cpu0 = []  # read before the first sample, after measure()'s garbage collection

    def start_cpu_clock():
        if not cpu0:
            cpu0.append(harness.thread_cpu_ns())

    samples = harness.measure(step, reps=reps, warmup=0, sync=timed_sync if sync else None,
                              inner=inner, before=start_cpu_clock)
    cpu1 = harness.thread_cpu_ns()
    out["step_s"] = samples.samples
    out["phase_ms"] = {k: Stats(v).median * 1e3 for k, v in phases.items()}
    if cpu0:
        per_step = 1e-6 / (reps * inner)
        # (max: the kernel accounts a thread that is running on another core
        # at its next tick, so a figure near 0 can come out a little below)
        out["cpu_ms"] = {"host": (cpu1[0] - cpu0[0][0]) * per_step,
                         "others": max(0.0, (cpu1[1] - cpu0[0][1]) * per_step),
                         "wall": sum(samples.samples) / reps * 1e3}
    if tpu:
        d = harness.counter_delta(before, harness.counters())
        steps = reps * inner
        out["peak_bytes"] = torch.tpu.max_memory_allocated()
        out["compiles_per_step"] = d["compiles"] / steps
        out["host_syncs_per_step"] = (d["host_syncs"] - reps) / steps
        out["executions_per_step"] = d["executions"] / steps
        out["fallbacks_per_step"] = d["fallback_calls"] / steps
        out["fallback_ops_per_step"] = {k: v / steps for k, v in sorted(d["fallbacks"].items())}
        out["mode"] = torchtpu.get_mode()
    elif device == "cuda":
        out["peak_bytes"] = torch.cuda.max_memory_allocated()
    if impl == "cpu-inductor":
        out["compile_s"] = max(0.0, first - samples.median)
        try:
            from torch._dynamo.utils import counters

            out["inductor_counters"] = {k: v for k, v in counters["inductor"].items()
                                        if "cache" in k}
        except Exception:
            pass
    return out


# Paired measurement: the implementations that can share one process, and
# the ratios taken from their alternating blocks (first over second).
PAIRS = (("tpu-fused", "tpu-strict"), ("tpu-fused", "cpu-eager"), ("tpu-strict", "cpu-eager"))
PAIRED_IMPLS = tuple(dict.fromkeys(i for pair in PAIRS for i in pair))


def _block_sampler(name, impl, kind, shape, block_steps, max_warmup):
    """Builds `impl`'s model and step and warms it up; returns a function
    that runs one block of `block_steps` steps (with `kind`'s syncs) and
    returns seconds per step."""
    import torch

    import torchtpu

    device = _device(impl)
    mode = _mode(impl) if device == "tpu" else None
    sync = {"tpu": harness.tpu_sync, "cuda": torch.cuda.synchronize}.get(device)
    if mode:  # the mode is process-wide: each block sets its own
        torchtpu.set_mode(mode)
    model, inputs, loss_fn = build(name, shape, device)
    step = _step_fn(kind, model, model, inputs, loss_fn, {})
    inner = STEPS_PER_SYNC.get(kind, 1)

    def steps():  # `inner` steps, then a sync
        for _ in range(inner):
            step()
        if sync:
            sync()

    def block():
        if mode:
            torchtpu.set_mode(mode)
        return harness.sample_once(steps, inner=max(1, block_steps // inner))[0] / inner

    # Warmup: until a step neither compiled nor loaded a program (tpu), or
    # three steps.
    for _ in range(max_warmup if mode else 3):
        before = harness.counters() if mode else None
        steps()
        if mode and harness.counter_delta(before, harness.counters())["cache_misses"] == 0:
            break
    return block


def bench_paired(name, kind, impls, shape, blocks, block_steps, max_warmup):
    """Times `impls` on one model and kind in this process, in alternating
    blocks of steps (harness.interleave, rotating order), so that a change
    of the machine's load falls on a round's blocks alike. Returns
    {"step_s": {impl: seconds per step of each block}, "errors": {impl: text}}."""
    import torchtpu

    previous = torchtpu.get_mode()
    samplers, errors = {}, {}
    try:
        for impl in impls:
            try:
                samplers[impl] = _block_sampler(name, impl, kind, shape, block_steps,
                                                max_warmup)
            except Exception as e:
                errors[impl] = e
        times = harness.interleave(samplers, blocks, errors)
    finally:
        try:  # drop work a failed step left recorded
            harness.tpu_sync()
        except Exception:
            pass
        torchtpu.set_mode(previous)
    return {"step_s": times, "errors": {k: harness.error_text(v) for k, v in errors.items()}}


def worker(job):
    """Runs every kind of one (model, impl), or of one model and several
    `impls` paired (bench_paired); one result (or error) per kind. With
    `path`, the document is rewritten after each kind, so a crash still
    leaves the kinds finished before it."""
    import torch

    harness.quiet_fallback_warnings()
    threads = torch.get_num_threads()
    if job.get("threads"):
        torch.set_num_threads(job["threads"])
    accelerator = torch.accelerator.current_accelerator()
    doc = {"kinds": {}, "load_average": [harness.load_average()],
           "torch_threads": torch.get_num_threads(),
           "accelerator": accelerator.type if accelerator else None}
    paired = "impls" in job
    tpu = paired or job["impl"].startswith("tpu-")
    if tpu:
        import torchtpu

        previous = torchtpu.get_mode()
        if not paired:
            torchtpu.set_mode(_mode(job["impl"]))
    try:
        for kind in job["kinds"]:
            try:
                if paired:
                    doc["kinds"][kind] = bench_paired(job["model"], kind, job["impls"],
                                                      job["shape"], job["blocks"],
                                                      job["block_steps"], job["max_warmup"])
                else:
                    doc["kinds"][kind] = bench_one(job["model"], job["impl"], kind,
                                                   job["shape"], job["reps"], job["max_warmup"])
            except Exception as e:
                doc["kinds"][kind] = {"error": harness.error_text(e)}
                if tpu:
                    try:  # drop work a failed step left recorded
                        torch.tpu.synchronize()
                    except Exception:
                        pass
            doc["load_average"].append(harness.load_average())
            if job.get("path"):
                harness.write_json(job["path"], doc)
    finally:
        if tpu:
            torchtpu.set_mode(previous)
        torch.set_num_threads(threads)
    return doc


def _child_env(label):
    env = dict(os.environ)
    root = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    cache = env.get("PERFLAB_CACHE_ROOT")
    if cache:  # empty compile caches of its own: every worker starts cold
        env["TORCHTPU_CACHE_DIR"] = os.path.join(cache, label, "torchtpu")
        env["TORCHINDUCTOR_CACHE_DIR"] = os.path.join(cache, label, "inductor")
    return env


# The implementations whose worker runs in a process that never imports the
# torchtpu package, whose import registers the tpu device (see the module's
# docstring); _START_WITHOUT_TPU starts it, a stand-in package letting Python find
# perflab's modules.
WITHOUT_TPU = ("cuda-eager",)
_START_WITHOUT_TPU = ("import runpy, sys, types; package = types.ModuleType('torchtpu'); "
                "package.__path__ = [sys.argv.pop(1)]; sys.modules['torchtpu'] = package; "
                "runpy.run_module('torchtpu.perflab.suite_models', run_name='__main__', "
                "alter_sys=True)")


def _run_worker(job, cfg):
    alone = job.get("impl") in WITHOUT_TPU
    if not cfg.isolate and not alone:
        return worker(job), None
    args = ["-m", "torchtpu.perflab.suite_models", "--worker", json.dumps(job)]
    if alone:
        args = ["-c", _START_WITHOUT_TPU, str(Path(__file__).resolve().parents[1]), *args[2:]]
    # A model's paired workers share a compile cache: they time no first step.
    label = (f"{job['model']}-paired" if "impls" in job
             else f"{job['model']}-{'-'.join(job['kinds'])}-{job['impl']}")
    env = _child_env(label)
    if alone:
        env["TORCH_DEVICE_BACKEND_AUTOLOAD"] = "0"  # nor through import torch
    return harness.run_python(args, timeout=cfg.timeout, env=env)


def _record(results, name, impl, kind, r):
    bench = f"{name}-{kind}"
    rec = lambda metric, unit, **kw: results.record(SUITE, bench, impl, metric, unit, **kw)  # noqa
    st = Stats(r["step_s"])
    extra = {k: r[k] for k in ("params", "shape", "first_step_compiles", "compiles_per_warmup_step",
                               "compiles_stopped", "fallback_ops_per_step", "mode",
                               "inductor_counters", "first_step_disk_hits", "phase_ms", "cpu_ms")
             if k in r}
    rec("step_ms", "ms", stats=st.scaled(1e3), **extra)
    rec("first_step_s", "s", value=r["first_step_s"])
    if "first_step_compile_s" in r:
        rec("first_step_compile_s", "s", value=r["first_step_compile_s"])
    if r.get("warmup_steps") is not None or "compiles_stopped" in r:
        if r.get("warmup_steps") is None:
            results.failed(SUITE, bench, impl, "warmup_steps", "count",
                           f"compiles did not stop within {len(r['compiles_per_warmup_step'])} "
                           f"steps: {r['compiles_per_warmup_step']}", status="unstable")
        else:
            rec("warmup_steps", "count", value=r["warmup_steps"])
    for key in ("compiles_per_step", "host_syncs_per_step", "fallbacks_per_step",
                "executions_per_step"):
        if key in r:
            rec(key, "count", value=r[key])
    if "peak_bytes" in r:
        rec("peak_memory_MB", "MB", value=r["peak_bytes"] / 2 ** 20)
    if "compile_s" in r:
        rec("compile_s", "s", value=r["compile_s"])


def _record_paired(results, name, kind, impls, r):
    """The paired ratios of one model and kind: per round, the first
    implementation's seconds per step over the second's, in the blocks
    they ran one after the other."""
    bench = f"{name}-{kind}"
    times, errors = r.get("step_s", {}), r.get("errors", {})
    for a, b in PAIRS:
        if a not in impls or b not in impls:
            continue
        if a in times and b in times:
            ratios = [x / y for x, y in zip(times[a], times[b])]
            results.record(SUITE, bench, f"{a}/{b}", "paired_ratio", "x", stats=Stats(ratios),
                           block_ms={i: [t * 1e3 for t in times[i]] for i in (a, b)})
        else:
            why = r.get("error") or "; ".join(f"{i}: {errors[i]}" for i in (a, b) if i in errors)
            results.failed(SUITE, bench, f"{a}/{b}", "paired_ratio", "x", why or "no result")


def _jax_mlp(results, cfg, shape, reps, warmup):
    peer = str(Path(__file__).with_name("peer_jax.py"))
    job = {"mlp": {"batch": shape["batch"], "dim_in": 64, "hidden": 128, "classes": 10,
                   "reps": reps, "warmup": warmup}}
    doc, err = harness.run_python([peer, json.dumps(job)], timeout=cfg.timeout)
    for kind in ("forward", "train"):  # the peer times each step to its result
        bench = f"MLP-{kind}"
        if doc is None or kind not in doc.get("mlp", {}):
            results.failed(SUITE, bench, "jax", "step_ms", "ms", err or "no result")
            continue
        r = doc["mlp"][kind]
        st = Stats(r["samples"])
        results.record(SUITE, bench, "jax", "step_ms", "ms", stats=st.scaled(1e3),
                       jax=doc.get("jax"), how="whole step in one jax.jit; AdamW by hand")
        results.record(SUITE, bench, "jax", "first_step_s", "s", value=r["first_s"])
        results.record(SUITE, bench, "jax", "compile_s", "s",
                       value=max(0.0, r["first_s"] - st.median))


def run(results, cfg, progress=None):
    sh = shapes(cfg.quick, cfg.tiny)
    reps = cfg.n_reps(15, 5, 3)
    max_warmup = cfg.pick(10, 6, 4)
    impls = [i for i in IMPLS if cfg.wants(i)]
    models = [m for m in MODELS if m in cfg.models]
    jax_wanted = (cfg.peers and "MLP" in models and (cfg.impls is None or "jax" in cfg.impls)
                  and importlib.util.find_spec("jax") is not None)
    rounds = cfg.pick(3, 1, 1)
    paired = [i for i in PAIRED_IMPLS if i in impls]
    if not any(a in paired and b in paired for a, b in PAIRS):
        paired = []
    blocks, block_steps = reps, cfg.pick(10, 5, 2)
    bar = progress or harness.Progress(SUITE, rounds * len(models) * len(impls) * len(KINDS)
                                       + (len(models) * len(KINDS) if paired else 0)
                                       + int(jax_wanted))
    results.suites[SUITE] = {"config": {"shapes": {m: sh[m] for m in models}, "reps": reps,
                                        "max_warmup": max_warmup, "impls": impls,
                                        "isolated": cfg.isolate, "optimizer": "AdamW(lr=1e-3)",
                                        "paired": {"impls": paired, "blocks": blocks,
                                                   "block_steps": block_steps},
                                        "dtype": "float32", "rounds": rounds,
                                        "torch_threads": cfg.model_threads() or "default"}}
    fallback_ops = {}
    loads = results.suites[SUITE]["load_average"] = []

    def run_job(label, job):
        """One worker job of one kind: its result, or {"error": why}."""
        bar.now(label)
        t0 = time.perf_counter()
        doc, err = _run_worker(job, cfg)
        loads.extend(v for v in (doc or {}).get("load_average", []) if v is not None)
        r = (doc or {}).get("kinds", {}).get(job["kinds"][0])
        bar.step(f"{label} ({time.perf_counter() - t0:.0f} s)")
        if r is None or "error" in r:
            return {"error": (r or {}).get("error") or err or "no result"}
        return r

    runs = {}  # (model, impl, kind) -> the result of each round
    for rnd in range(rounds):
        for name in models:
            for impl in impls:
                for kind in KINDS:
                    label = f"{name}-{kind} {impl}" + (f" (round {rnd + 1})" if rounds > 1 else "")
                    job = {"model": name, "impl": impl, "kinds": [kind], "shape": sh[name],
                           "reps": reps, "max_warmup": max_warmup,
                           "threads": cfg.model_threads()}
                    runs.setdefault((name, impl, kind), []).append(run_job(label, job))
    for (name, impl, kind), rs in runs.items():
        failed = [r["error"] for r in rs if "error" in r]
        if failed:  # a round that failed is not hidden by the others
            results.failed(SUITE, f"{name}-{kind}", impl, "step_ms", "ms", failed[0])
            continue
        # The first round's first step is the cold one; the steps of all
        # rounds are pooled.
        r = dict(rs[0], step_s=[t for x in rs for t in x["step_s"]])
        for key in ("phase_ms", "cpu_ms"):
            if all(key in x for x in rs):
                r[key] = {k: Stats([x[key][k] for x in rs]).median for k in rs[0][key]}
            else:
                r.pop(key, None)
        _record(results, name, impl, kind, r)
        for op, n in r.get("fallback_ops_per_step", {}).items():
            fallback_ops.setdefault(op, {}).setdefault(f"{name}-{kind}", {})[impl] = n
    for name in models if paired else []:
        for kind in KINDS:
            job = {"model": name, "impls": paired, "kinds": [kind], "shape": sh[name],
                   "blocks": blocks, "block_steps": block_steps, "max_warmup": max_warmup,
                   "threads": cfg.model_threads()}
            r = run_job(f"{name}-{kind} paired ({', '.join(paired)})", job)
            _record_paired(results, name, kind, paired, r)
    if jax_wanted:
        bar.now("MLP jax (separate process)")
        _jax_mlp(results, cfg, sh["MLP"], reps, 3)
        impls = impls + ["jax"]
        bar.step("MLP jax")
    results.suites[SUITE]["fallback_ops"] = fallback_ops

    for name in models:
        for kind in KINDS:
            bench = f"{name}-{kind}"
            rid = lambda impl: f"{SUITE}/{bench}/{impl}/step_ms"  # noqa: E731
            have = [i for i in impls if rid(i) in results.records]
            if "tpu-fused" in have and "tpu-strict" in have:
                results.ratio(SUITE, bench, "tpu-fused/tpu-strict", rid("tpu-fused"),
                              rid("tpu-strict"), "step time, fused over strict (lower is better)")
            for impl in have:
                if impl != "cpu-eager" and "cpu-eager" in have:
                    results.ratio(SUITE, bench, f"{impl}/cpu-eager", rid(impl), rid("cpu-eager"),
                                  "step time relative to PyTorch CPU eager (lower is better)")
                if impl.startswith("tpu-") and "cuda-eager" in have:
                    results.ratio(SUITE, bench, f"{impl}/cuda-eager", rid(impl), rid("cuda-eager"),
                                  "step time relative to PyTorch CUDA eager (lower is better)")
            if "jax" in have:
                for impl in ("tpu-fused", "tpu-strict"):
                    if impl in have:
                        results.ratio(SUITE, bench, f"{impl}/jax", rid(impl), rid("jax"),
                                      "step time relative to JAX (lower is better)")
    if progress is None:
        bar.close()


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--worker":
        spec = json.loads(sys.argv[2])
        spec["path"] = sys.argv[3]
        worker(spec)
    else:
        sys.exit("usage: python -m torchtpu.perflab.suite_models --worker JOB_JSON OUT_JSON")
