"""Suite `ops`: throughput of large single ops, and this machine's peaks.

Calibration first: memory bandwidth from a large copy (numpy), a large add
and a large sum (PyTorch CPU); compute from a large float32 matmul (PyTorch CPU and
numpy; both call an optimized SGEMM on all threads). The fastest sample of
any method is the "practical peak" the ops are compared with (load from
other processes only ever slows a sample down; the medians are kept too).

Then elementwise add and a full sum (GB/s: bytes read and written per
second), matmul, conv2d, a linear solve and a QR factorization (GFLOP/s, the
textbook operation counts), on tpu (strict mode: one program per op) and
PyTorch CPU eager, their samples interleaved; and, when installed, JAX on
its CPU backend, in a process of its own.
"""
import importlib.util
from pathlib import Path

from torchtpu.perflab import harness
from torchtpu.perflab.harness import Stats

SUITE = "ops"
BENCHES = ("elementwise_add", "reduction_sum", "matmul", "conv2d", "solve", "qr")


def sizes(cfg):
    return {
        "elements": cfg.pick(1 << 24, 1 << 22, 1 << 16),
        "matmul": cfg.pick(1024, 512, 64),
        "conv": cfg.pick({"n": 8, "cin": 64, "cout": 64, "h": 56, "w": 56, "k": 3},
                         {"n": 4, "cin": 32, "cout": 32, "h": 32, "w": 32, "k": 3},
                         {"n": 1, "cin": 8, "cout": 8, "h": 8, "w": 8, "k": 3}),
        "linalg": cfg.pick(512, 256, 32),
        "calib_elements": cfg.pick(1 << 25, 1 << 23, 1 << 18),
        "calib_matmul": cfg.pick(2048, 1024, 128),
    }


def work(bench, sz):
    """(amount, unit): bytes moved or floating-point operations of one call."""
    n, m, c = sz["elements"], sz["matmul"], sz["conv"]
    if bench == "elementwise_add":
        return 3 * 4 * n, "GB/s"  # two reads and one write of float32
    if bench == "reduction_sum":
        return 4 * n, "GB/s"
    if bench == "matmul":
        return 2 * m ** 3, "GFLOP/s"
    if bench == "conv2d":
        return 2 * c["n"] * c["cout"] * c["h"] * c["w"] * c["cin"] * c["k"] ** 2, "GFLOP/s"
    k = sz["linalg"]
    if bench == "solve":  # LU (2/3 n^3) and two triangular solves of one column
        return 2 * k ** 3 // 3 + 2 * k ** 2, "GFLOP/s"
    if bench == "qr":  # Householder R (4/3 n^3) and Q from its reflectors (4/3 n^3)
        return 8 * k ** 3 // 3, "GFLOP/s"
    raise ValueError(bench)


def _rate(stats_seconds, amount):
    return stats_seconds.inverse(amount / 1e9)


def calibrate(results, cfg, sz, reps, bar):
    import numpy as np
    import torch

    n = sz["calib_elements"]
    src = np.random.default_rng(0).standard_normal(n, dtype=np.float32)
    dst = np.empty_like(src)
    bw = {}
    bar.now("calibrate memory: numpy copy")
    t = harness.measure(lambda: np.copyto(dst, src), reps=reps, warmup=2)
    bw["numpy_copy"] = results.record(SUITE, "memory_bandwidth", "numpy-copy", "rate", "GB/s",
                                      _rate(t, 2 * 4 * n), bytes=2 * 4 * n,
                                      how="np.copyto of float32 arrays: one read and one write")
    bar.step("calibrate memory: numpy copy")
    a, b, c = torch.from_numpy(src), torch.from_numpy(dst), torch.empty(n)
    bar.now("calibrate memory: torch add")
    t = harness.measure(lambda: torch.add(a, b, out=c), reps=reps, warmup=2)
    bw["torch_add"] = results.record(SUITE, "memory_bandwidth", "torch-add", "rate", "GB/s",
                                     _rate(t, 3 * 4 * n), bytes=3 * 4 * n,
                                     how="torch.add(a, b, out=c) on CPU: two reads and one write")
    bar.step("calibrate memory: torch add")
    bar.now("calibrate memory: torch sum")
    t = harness.measure(lambda: a.sum(), reps=reps, warmup=2)
    bw["torch_sum"] = results.record(SUITE, "memory_bandwidth", "torch-sum", "rate", "GB/s",
                                     _rate(t, 4 * n), bytes=4 * n,
                                     how="a.sum() on CPU: one read (reads alone stream faster "
                                         "than a copy, whose writes also cost a read)")
    bar.step("calibrate memory: torch sum")
    del src, dst, a, b, c

    m = sz["calib_matmul"]
    x, y, z = torch.randn(m, m), torch.randn(m, m), torch.empty(m, m)
    fl = {}
    bar.now("calibrate compute: torch matmul")
    t = harness.measure(lambda: torch.mm(x, y, out=z), reps=reps, warmup=2)
    fl["torch_mm"] = results.record(SUITE, "compute", "torch-sgemm", "rate", "GFLOP/s",
                                    _rate(t, 2 * m ** 3), flops=2 * m ** 3,
                                    how=f"torch.mm of float32 {m}x{m} on CPU, "
                                        f"{torch.get_num_threads()} threads")
    bar.step("calibrate compute: torch matmul")
    xn, yn, zn = x.numpy(), y.numpy(), z.numpy()
    bar.now("calibrate compute: numpy matmul")
    t = harness.measure(lambda: np.matmul(xn, yn, out=zn), reps=reps, warmup=2)
    fl["numpy_mm"] = results.record(SUITE, "compute", "numpy-sgemm", "rate", "GFLOP/s",
                                    _rate(t, 2 * m ** 3), flops=2 * m ** 3,
                                    how=f"np.matmul of float32 {m}x{m} (numpy's BLAS)")
    bar.step("calibrate compute: numpy matmul")

    def best(ids, bench, unit, what):
        # A peak is the best the machine showed: the fastest sample of any
        # method (noise from other processes only ever slows a sample).
        ok = [i for i in ids if results.value(i) is not None]
        top = max(ok, key=lambda i: results.records[i]["stats"]["max"])
        st = results.records[top]["stats"]
        return results.record(SUITE, bench, "peak", "rate", unit, value=st["max"],
                              source=top, median_of_source=st["median"],
                              how=f"fastest sample of {what} ({top.split('/')[2]}); "
                                  "medians in the rows above")
    peak_bw = best(list(bw.values()), "memory_bandwidth", "GB/s", "copy/add bandwidths")
    peak_fl = best(list(fl.values()), "compute", "GFLOP/s", "SGEMM throughputs")
    return peak_bw, peak_fl


def make_inputs(bench, sz, device):
    import torch
    import torch.nn.functional as F

    g = torch.Generator().manual_seed(0)
    if bench in ("elementwise_add", "reduction_sum"):
        a = torch.randn(sz["elements"], generator=g).to(device)
        b = torch.randn(sz["elements"], generator=g).to(device)
        if bench == "elementwise_add":
            return lambda: a + b
        return lambda: a.sum()
    if bench == "matmul":
        m = sz["matmul"]
        a = torch.randn(m, m, generator=g).to(device)
        b = torch.randn(m, m, generator=g).to(device)
        return lambda: a @ b
    if bench in ("solve", "qr"):
        k = sz["linalg"]
        a = torch.randn(k, k, generator=g).to(device)
        b = torch.randn(k, 1, generator=g).to(device)
        if bench == "solve":
            return lambda: torch.linalg.solve(a, b)
        return lambda: torch.linalg.qr(a)
    c = sz["conv"]
    x = torch.randn(c["n"], c["cin"], c["h"], c["w"], generator=g).to(device)
    w = torch.randn(c["cout"], c["cin"], c["k"], c["k"], generator=g).to(device)
    return lambda: F.conv2d(x, w, padding=c["k"] // 2)


def run_jax(results, cfg, sz, reps, warmup):
    """Runs the JAX peer in its own process; returns the impl name or None."""
    if not cfg.peers or importlib.util.find_spec("jax") is None:
        return None
    import json

    peer = str(Path(__file__).with_name("peer_jax.py"))
    job = {"ops": {"elements": sz["elements"], "matmul": sz["matmul"], "conv": sz["conv"],
                   "linalg": sz["linalg"], "reps": reps, "warmup": warmup}}
    doc, err = harness.run_python([peer, json.dumps(job)], timeout=cfg.timeout)

    for bench in BENCHES:
        amount, unit = work(bench, sz)
        if doc is None or bench not in doc.get("ops", {}):
            results.failed(SUITE, bench, "jax", "rate", unit, err or "no result")
            continue
        r = doc["ops"][bench]
        results.record(SUITE, bench, "jax", "rate", unit, _rate(Stats(r["samples"]), amount),
                       first_call_s=r["first_s"], jax=doc.get("jax"), backend=doc.get("backend"))
    return "jax"


def run(results, cfg, progress=None):
    import torch

    import torchtpu

    harness.quiet_fallback_warnings()
    sz = sizes(cfg)
    reps = cfg.n_reps(9, 5, 2)
    warmup = cfg.pick(2, 2, 1)
    jax_wanted = (cfg.peers and (cfg.impls is None or "jax" in cfg.impls)
                  and importlib.util.find_spec("jax") is not None)
    bar = progress or harness.Progress(SUITE, 5 + len(BENCHES) + (1 if jax_wanted else 0))
    results.suites[SUITE] = {"config": {"sizes": sz, "reps": reps, "warmup": warmup,
                                        "dtype": "float32", "tpu_mode": "strict",
                                        "interleaved": True,
                                        "load_before": harness.load_average()}}
    peak_bw, peak_fl = calibrate(results, cfg, sz, reps, bar)
    results.suites[SUITE]["peaks"] = {"GB/s": peak_bw, "GFLOP/s": peak_fl}

    for bench in BENCHES:
        amount, unit = work(bench, sz)
        bar.now(bench)
        samplers, errors, counts = {}, {}, {}
        for impl in ("cpu-eager", "tpu"):
            try:
                if impl == "cpu-eager":
                    fn = make_inputs(bench, sz, "cpu")
                    samplers[impl] = lambda fn=fn: harness.sample_once(fn)[0]
                else:
                    with torchtpu.mode("strict"):
                        fn = make_inputs(bench, sz, "tpu")
                        torch.tpu.synchronize()

                    def tpu_sample(fn=fn):
                        with torchtpu.mode("strict"):
                            before = harness.counters()
                            t = harness.sample_once(fn, 1, harness.tpu_sync)[0]
                            d = harness.counter_delta(before, harness.counters())
                        for k in ("compiles", "compile_seconds", "fallback_calls"):
                            counts[k] = counts.get(k, 0) + d[k]
                        return t
                    samplers[impl] = tpu_sample
                for _ in range(warmup):
                    samplers[impl]()
            except Exception as e:
                errors[impl] = e
                samplers.pop(impl, None)
        counts.clear()
        samples = harness.interleave(samplers, reps, errors)
        for impl in ("cpu-eager", "tpu"):
            if impl in errors:
                results.failed(SUITE, bench, impl, "rate", unit, harness.error_text(errors[impl]))
                continue
            t = Stats(samples[impl])
            extra = {}
            if impl == "tpu":
                extra = {"compiles_timed": counts.get("compiles", 0),
                         "fallbacks_per_call": counts.get("fallback_calls", 0) / reps}
            results.record(SUITE, bench, impl, "rate", unit, _rate(t, amount),
                           work=amount, seconds=t.to_json(), **extra)
        bar.step(bench)

    if jax_wanted:
        bar.now("jax peer (separate process)")
    peers = ["cpu-eager"]
    if jax_wanted and run_jax(results, cfg, sz, reps, warmup):
        peers.append("jax")
        bar.step("jax peer")

    for bench in BENCHES:
        unit = work(bench, sz)[1]
        peak = peak_bw if unit == "GB/s" else peak_fl
        rid = lambda impl: f"{SUITE}/{bench}/{impl}/rate"  # noqa: E731
        for impl in ["tpu"] + peers:
            results.ratio(SUITE, bench, f"{impl}/peak", rid(impl), peak,
                          f"fraction of this machine's measured peak {unit} (higher is better)")
        for p in peers:
            results.ratio(SUITE, bench, f"tpu/{p}", rid("tpu"), rid(p),
                          f"tpu throughput relative to {p} (higher is better)")
    results.suites[SUITE]["config"]["load_after"] = harness.load_average()
    if progress is None:
        bar.close()
