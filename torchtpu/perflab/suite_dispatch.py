"""Suite `dispatch`: the host cost of one eager op on small tensors.

Each sample runs a loop of `inner` ops and then waits for the device
(torch.tpu.synchronize()), so the figure per op includes its share of the
flush and the wait: in fused mode the whole loop is one recorded graph,
flushed once. `issue_us` is the loop alone, before the wait: what the
Python thread spends per op (recording, in fused mode). PyTorch CPU eager
runs the same loop in the same process as the peer, and so does PyTorch
CUDA eager where torch sees a GPU (waiting with torch.cuda.synchronize()). `sum_item` reads each
sum back (.item()): the latency of one host round trip, which every CPU
fallback and every .item() in a model pays. The implementations'
samples are interleaved (round-robin), so a change of machine load during
the suite affects them alike.
"""
from torchtpu.perflab import harness
from torchtpu.perflab.harness import Stats

SUITE = "dispatch"
OPS = ("add", "mul", "matmul", "sum", "index_select", "sum_item")
IMPLS = ("cpu-eager", "cuda-eager", "tpu-strict", "tpu-fused", "tpu-debug")
SHAPE = (16, 16)


def make_op(name, device):
    """A closure running one op on small tensors. Binary ops feed their
    result back in (y = y + x), as a loop in a model would; the values stay
    bounded so no denormals or infinities slow one side down."""
    import torch

    g = torch.Generator().manual_seed(0)
    x = (torch.rand(SHAPE, generator=g) * 0.2 + 0.9).to(device)
    y = [torch.rand(SHAPE, generator=g).to(device)]
    w = torch.linalg.qr(torch.randn(SHAPE, generator=g)).Q.contiguous().to(device)
    idx = torch.tensor([0, 3, 5, 7, 8, 10, 12, 15]).to(device)
    if name == "add":
        def op():
            y[0] = y[0] + x
    elif name == "mul":
        def op():
            y[0] = y[0] * x
    elif name == "matmul":
        def op():
            y[0] = y[0] @ w
    elif name == "sum":
        def op():
            y[0] = x.sum()
    elif name == "index_select":
        def op():
            y[0] = x.index_select(0, idx)
    elif name == "sum_item":  # a host sync every op: the round trip to the device and back
        def op():
            y[0] = x.sum().item()
    else:
        raise ValueError(name)
    return op


def _sampler(impl, op, inner, counts):
    """fn() -> (total, issue) seconds per op for one sample of impl; for
    tpu impls it switches to the impl's mode and accumulates the backend's
    counters of the sample into counts."""
    import torch

    import torchtpu

    if impl == "cpu-eager":
        return lambda: harness.sample_once(op, inner)
    if impl == "cuda-eager":
        return lambda: harness.sample_once(op, inner, torch.cuda.synchronize)
    mode = impl.split("-", 1)[1]

    def sample():
        with torchtpu.mode(mode):  # switching flushes, outside the timing
            harness.tpu_sync()
            before = harness.counters()
            t = harness.sample_once(op, inner, harness.tpu_sync)
            d = harness.counter_delta(before, harness.counters())
        for k in ("fallback_calls", "executions", "host_syncs", "compiles"):
            counts[k] = counts.get(k, 0) + d[k]
        counts.setdefault("fallback_ops", set()).update(d["fallbacks"])
        return t
    return sample


def run(results, cfg, progress=None):
    import torchtpu

    harness.quiet_fallback_warnings()
    reps = cfg.n_reps(15, 7, 3)
    inner = cfg.pick(200, 100, 20)
    warmup = 2
    impls = [i for i in IMPLS if cfg.wants(i) or i == "cpu-eager"]
    bar = progress or harness.Progress(SUITE, len(OPS))
    cfg_out = {"shape": list(SHAPE), "dtype": "float32", "reps": reps, "inner": inner,
               "warmup_samples": warmup, "impls": impls, "ops": list(OPS), "interleaved": True,
               "load_before": harness.load_average()}
    results.suites[SUITE] = {"config": cfg_out}
    for name in OPS:
        bar.now(name)
        samplers, counts, errors = {}, {}, {}
        for impl in impls:
            try:
                if not impl.startswith("tpu-"):
                    op = make_op(name, impl.split("-")[0])
                else:
                    with torchtpu.mode(impl.split("-", 1)[1]):
                        op = make_op(name, "tpu")
                counts[impl] = {}
                samplers[impl] = _sampler(impl, op, inner, counts[impl])
                for _ in range(warmup):  # compiles happen here
                    samplers[impl]()
                counts[impl].clear()
            except Exception as e:
                errors[impl] = e
                samplers.pop(impl, None)
        samples = harness.interleave(samplers, reps, errors)
        for impl in impls:
            if impl in errors:
                results.failed(SUITE, name, impl, "us_per_op", "us", harness.error_text(errors[impl]))
                continue
            tot = Stats([t for t, _ in samples[impl]]).scaled(1e6)
            iss = Stats([i for _, i in samples[impl]]).scaled(1e6)
            if not impl.startswith("tpu-"):
                results.record(SUITE, name, impl, "us_per_op", "us", tot)
                if impl == "cuda-eager":
                    results.record(SUITE, name, impl, "issue_us_per_op", "us", iss)
                continue
            c, ops = counts[impl], reps * inner
            extra = {"fallbacks_per_op": c["fallback_calls"] / ops,
                     "executions_per_op": c["executions"] / ops,
                     # each sample's closing synchronize() is one host sync
                     "host_syncs_per_op": (c["host_syncs"] - reps) / ops,
                     "compiles_timed": c["compiles"],
                     "fallback_ops": sorted(c.get("fallback_ops", ()))}
            results.record(SUITE, name, impl, "us_per_op", "us", tot, **extra)
            results.record(SUITE, name, impl, "issue_us_per_op", "us", iss)
            for key in ("fallbacks_per_op", "host_syncs_per_op", "executions_per_op"):
                results.record(SUITE, name, impl, key, "count", value=extra[key])
        bar.step(name)
        cpu = f"{SUITE}/{name}/cpu-eager/us_per_op"
        for impl in impls:
            if impl != "cpu-eager":
                results.ratio(SUITE, name, f"{impl}/cpu-eager", f"{SUITE}/{name}/{impl}/us_per_op",
                              cpu, "time per op relative to PyTorch CPU eager (lower is better)")
            if impl.startswith("tpu-") and "cuda-eager" in impls:
                results.ratio(SUITE, name, f"{impl}/cuda-eager", f"{SUITE}/{name}/{impl}/us_per_op",
                              f"{SUITE}/{name}/cuda-eager/us_per_op",
                              "time per op relative to PyTorch CUDA eager (lower is better)")
        if "tpu-fused" in impls and "tpu-strict" in impls:
            results.ratio(SUITE, name, "tpu-fused/tpu-strict", f"{SUITE}/{name}/tpu-fused/us_per_op",
                          f"{SUITE}/{name}/tpu-strict/us_per_op",
                          "fused time per op relative to strict (lower is better)")
    cfg_out["load_after"] = harness.load_average()
    if progress is None:
        bar.close()
