"""perflab, the benchmark suite: every suite runs in its tiny configuration,
the result file follows the schema, ratios come from the same run, plots
are written, --compare reports changes. Timings are not judged here."""
import copy
import io
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from torchtpu.perflab import harness, report, runner, suite_coverage, suite_ops
from torchtpu.perflab.harness import Stats

ROOT = Path(__file__).resolve().parents[1]
MODES = ["tpu-strict", "tpu-fused", "tpu-debug"]  # dispatch's tpu implementations
TPU_IMPLS = MODES + ["tpu-compiled"]  # the models suite's


@pytest.fixture(scope="module")
def run_doc(tmp_path_factory):
    """One tiny run of every suite, in this process (the models suite on
    the MLP only, without Inductor and JAX, to stay within seconds)."""
    import torch

    import torchtpu

    out = tmp_path_factory.mktemp("perflab")
    cfg = harness.Config(tiny=True, isolate=False, peers=False, models=["MLP"],
                         impls=TPU_IMPLS + ["cpu-eager"])
    threads, mode = torch.get_num_threads(), torchtpu.get_mode()
    doc = runner.run(list(runner.SUITES), cfg, out, quiet=True)
    # The run leaves the process as it found it.
    assert (torch.get_num_threads(), torchtpu.get_mode()) == (threads, mode)
    return doc, out


def test_files_written(run_doc):
    doc, out = run_doc
    art = doc["artifacts"]
    assert Path(art["json"]).parent == out
    on_disk = json.loads(Path(art["json"]).read_text())
    assert on_disk["records"] == doc["records"] and on_disk["ratios"] == doc["ratios"]
    md = Path(art["markdown"]).read_text()
    for heading in ("## dispatch", "## Calibration", "## ops", "## models", "## coverage"):
        assert heading in md
    assert "| add |" in md and "| MLP-train |" in md


def test_schema(run_doc):
    doc, _ = run_doc
    assert doc["schema"] == harness.SCHEMA
    assert set(doc) >= {"run", "env", "records", "ratios", "suites", "artifacts"}
    assert doc["run"]["suites"] == list(runner.SUITES)
    assert doc["env"]["torch"] and doc["env"]["cpus"] >= 1 and "date" in doc["env"]
    for name in runner.SUITES:
        assert doc["suites"][name]["status"] == "ok", doc["suites"][name].get("error")
        assert doc["suites"][name]["duration_s"] >= 0
    ids = [r["id"] for r in doc["records"]]
    assert len(ids) == len(set(ids))
    for r in doc["records"]:
        assert set(r) >= {"id", "suite", "bench", "impl", "metric", "unit", "better", "status",
                          "value", "stats"}
        assert r["id"] == f"{r['suite']}/{r['bench']}/{r['impl']}/{r['metric']}"
        assert r["better"] in ("lower", "higher")
        if r["status"] != "ok":
            assert r["value"] is None and r.get("error"), r
            continue
        assert isinstance(r["value"], (int, float)), r
        st = r["stats"]
        if st is not None:
            assert st["n"] == len(st["samples"]) >= 2
            assert st["min"] <= st["q1"] <= st["median"] <= st["q3"] <= st["max"]
            assert st["median"] == r["value"]


def _rec(doc, rid):
    return {r["id"]: r for r in doc["records"]}[rid]


def test_dispatch_figures(run_doc):
    doc, _ = run_doc
    reps = doc["suites"]["dispatch"]["config"]["reps"]
    for op in ("add", "mul", "matmul", "sum", "index_select", "sum_item"):
        for impl in ["cpu-eager"] + MODES:
            r = _rec(doc, f"dispatch/{op}/{impl}/us_per_op")
            assert r["status"] == "ok" and r["value"] > 0 and r["stats"]["n"] == reps
        for impl in MODES:
            assert _rec(doc, f"dispatch/{op}/{impl}/fallbacks_per_op")["value"] >= 0
    # Counted, not assumed: no fallback for add today, one per op for a
    # fallback op reported as such.
    assert _rec(doc, "dispatch/add/tpu-strict/fallbacks_per_op")["value"] == 0
    # .item() reads back every op: one host sync per op besides the closing one
    assert _rec(doc, "dispatch/sum_item/tpu-strict/host_syncs_per_op")["value"] >= 1


def test_ops_figures(run_doc):
    doc, _ = run_doc
    for bench in ("memory_bandwidth", "compute"):
        peak = _rec(doc, f"ops/{bench}/peak/rate")
        src = _rec(doc, peak["extra"]["source"])
        assert peak["value"] == src["stats"]["max"] > 0
    for bench in suite_ops.BENCHES:
        cpu = _rec(doc, f"ops/{bench}/cpu-eager/rate")
        assert cpu["status"] == "ok" and cpu["value"] > 0
        tpu = _rec(doc, f"ops/{bench}/tpu/rate")
        assert tpu["status"] == "ok" or tpu["error"]  # conv2d may not be lowered yet
    assert _rec(doc, "ops/matmul/tpu/rate")["unit"] == "GFLOP/s"


def test_models_figures(run_doc):
    doc, _ = run_doc
    for kind in ("forward", "train", "train-pipelined"):
        for impl in TPU_IMPLS:
            base = f"models/MLP-{kind}/{impl}/"
            assert _rec(doc, base + "step_ms")["value"] > 0
            assert _rec(doc, base + "first_step_s")["value"] > 0
            for key in ("compiles_per_step", "host_syncs_per_step", "fallbacks_per_step",
                        "executions_per_step"):
                assert _rec(doc, base + key)["value"] >= 0
            assert _rec(doc, base + "peak_memory_MB")["value"] > 0
            w = _rec(doc, base + "warmup_steps")
            assert w["status"] in ("ok", "unstable")
        assert _rec(doc, f"models/MLP-{kind}/cpu-eager/step_ms")["value"] > 0
    r = _rec(doc, "models/MLP-train/tpu-strict/step_ms")
    assert r["extra"]["mode"] == "strict" and r["extra"]["params"] > 0
    assert doc["suites"]["models"]["config"]["torch_threads"] == 1


def test_pipelined_training_counts_per_step(run_doc):
    # Ten steps per synchronize: counters are per step, so a mode runs as
    # many programs per step as when it synchronizes after each one, and a
    # fused step reads nothing back.
    doc, _ = run_doc
    for impl in ("tpu-strict", "tpu-fused"):
        one = _rec(doc, f"models/MLP-train/{impl}/executions_per_step")["value"]
        ten = _rec(doc, f"models/MLP-train-pipelined/{impl}/executions_per_step")["value"]
        assert one > 0 and ten == pytest.approx(one)
    assert _rec(doc, "models/MLP-train-pipelined/tpu-fused/host_syncs_per_step")["value"] == 0
    # torch.compile's graphs join fused mode's: the same programs per step.
    for kind in ("train", "train-pipelined"):
        compiled = _rec(doc, f"models/MLP-{kind}/tpu-compiled/step_ms")["extra"]
        assert compiled["mode"] == "fused"
        assert (_rec(doc, f"models/MLP-{kind}/tpu-compiled/executions_per_step")["value"]
                == _rec(doc, f"models/MLP-{kind}/tpu-fused/executions_per_step")["value"])
    rats = {r["id"] for r in doc["ratios"]}
    assert "models/MLP-train-pipelined/ratio/tpu-fused/cpu-eager" in rats


def test_models_phases(run_doc):
    # Where a step's time goes: each call of a training step, and for tpu
    # the wait in the closing synchronize; their sum is at most the step.
    doc, _ = run_doc
    for impl in TPU_IMPLS + ["cpu-eager"]:
        r = _rec(doc, f"models/MLP-train/{impl}/step_ms")
        ph = r["extra"]["phase_ms"]
        want = {"zero_grad", "forward", "backward", "optimizer"} | (
            {"sync"} if impl.startswith("tpu-") else set())
        assert set(ph) == want and all(v >= 0 for v in ph.values())
        assert ph["forward"] > 0 and ph["backward"] > 0 and ph["optimizer"] > 0
        assert sum(ph.values()) <= 1.5 * r["stats"]["max"]
    fwd = _rec(doc, "models/MLP-forward/tpu-fused/step_ms")["extra"]["phase_ms"]
    assert set(fwd) == {"forward", "sync"}
    md = Path(doc["artifacts"]["markdown"]).read_text()
    assert "### where a step's time goes" in md
    assert "| MLP-train | tpu-fused |" in md


def test_models_cpu_time_per_thread(run_doc):
    # The CPU time per step of the thread that runs the steps and of the
    # others. The host records and launches every op of a tpu step, and
    # with the CPU plugin XLA's threads run its kernels.
    doc, _ = run_doc
    for impl in TPU_IMPLS + ["cpu-eager"]:
        cpu = _rec(doc, f"models/MLP-train/{impl}/step_ms")["extra"]["cpu_ms"]
        assert set(cpu) == {"host", "others", "wall"}
        assert 0 < cpu["host"] <= 1.2 * cpu["wall"] and cpu["others"] >= 0
        if impl.startswith("tpu-"):
            assert cpu["others"] > 0
    md = Path(doc["artifacts"]["markdown"]).read_text()
    assert "| host thread CPU | other threads CPU | cores busy |" in md


def test_models_paired_ratios(run_doc):
    # The implementations that share a process also run in turn, in blocks
    # of steps; each round's ratio divides the two blocks of that round.
    doc, _ = run_doc
    blocks = doc["suites"]["models"]["config"]["paired"]["blocks"]
    for kind in ("forward", "train", "train-pipelined"):
        for a, b in (("tpu-fused", "tpu-strict"), ("tpu-fused", "cpu-eager"),
                     ("tpu-strict", "cpu-eager")):
            r = _rec(doc, f"models/MLP-{kind}/{a}/{b}/paired_ratio")
            ms = r["extra"]["block_ms"]
            assert len(ms[a]) == len(ms[b]) == blocks and min(ms[a] + ms[b]) > 0
            assert r["stats"]["samples"] == pytest.approx([x / y for x, y in zip(ms[a], ms[b])])
    md = Path(doc["artifacts"]["markdown"]).read_text()
    assert "### paired ratios" in md and "| model | tpu-fused/tpu-strict |" in md


def test_paired_ratios_keep_a_failed_side(monkeypatch):
    # An implementation that fails fails its ratios, with its error; the
    # others are still measured, and the process's mode is restored.
    import torchtpu

    from torchtpu.perflab import suite_models

    real = suite_models._block_sampler

    def no_cpu(name, impl, *args):
        if impl == "cpu-eager":
            raise RuntimeError("no CPU today")
        return real(name, impl, *args)

    monkeypatch.setattr(suite_models, "_block_sampler", no_cpu)
    impls = ["tpu-strict", "tpu-fused", "cpu-eager"]
    mode = torchtpu.get_mode()
    r = suite_models.bench_paired("MLP", "train", impls, {"batch": 8}, 2, 2, 4)
    assert torchtpu.get_mode() == mode
    results = harness.Results()
    suite_models._record_paired(results, "MLP", "train", impls, r)
    ok = results.records["models/MLP-train/tpu-fused/tpu-strict/paired_ratio"]
    assert ok["status"] == "ok" and ok["stats"]["n"] == 2 and ok["value"] > 0
    for a in ("tpu-fused", "tpu-strict"):
        bad = results.records[f"models/MLP-train/{a}/cpu-eager/paired_ratio"]
        assert bad["status"] == "error" and "no CPU today" in bad["error"]


def test_thread_cpu_ns_tells_this_thread_from_the_others():
    import threading
    import time

    def spin(seconds):
        end = time.thread_time() + seconds
        while time.thread_time() < end:
            pass

    mine0, others0 = harness.thread_cpu_ns()
    spin(0.05)
    mine1, others1 = harness.thread_cpu_ns()
    assert mine1 - mine0 >= 40e6  # this thread's 50 ms
    # another thread spins 50 ms while this one waits for it
    t = threading.Thread(target=spin, args=(0.05,))
    t.start()
    t.join(timeout=10)
    mine2, others2 = harness.thread_cpu_ns()
    assert others2 - others1 >= 40e6
    assert mine2 - mine1 < 40e6


def test_coverage_figures(run_doc):
    doc, _ = run_doc
    import torchtpu

    rows = torchtpu._ops.table()
    assert _rec(doc, "coverage/op_table/tpu/rows")["value"] == len(rows)
    assert _rec(doc, "coverage/op_table/tpu/aten_overloads")["value"] == sum(
        len(q) for _, _, q in rows)
    summary = doc["suites"]["coverage"]["summary"]
    assert sum(s["rows"] for s in summary["sections"].values()) == len(rows)


def test_ratios_come_from_the_same_run(run_doc):
    doc, _ = run_doc
    assert harness.check_ratios(doc) == []
    rats = {r["id"]: r for r in doc["ratios"]}
    for rid in ("dispatch/add/ratio/tpu-fused/tpu-strict",
                "dispatch/matmul/ratio/tpu-strict/cpu-eager",
                "ops/matmul/ratio/tpu/cpu-eager", "ops/elementwise_add/ratio/tpu/peak",
                "models/MLP-train/ratio/tpu-fused/tpu-strict",
                "models/MLP-forward/ratio/tpu-strict/cpu-eager"):
        r = rats[rid]
        num, den = _rec(doc, r["num"]), _rec(doc, r["den"])
        assert r["value"] == pytest.approx(num["value"] / den["value"], rel=1e-12)
    # The check fails on a ratio that does not match its records, or that
    # names a record of another run.
    bad = copy.deepcopy(doc)
    bad["ratios"][0]["value"] *= 1.5
    assert harness.check_ratios(bad)
    bad = copy.deepcopy(doc)
    bad["ratios"][0]["den"] = "dispatch/add/some-other-run/us_per_op"
    assert harness.check_ratios(bad)


def test_ratio_of_failed_measurement_is_none():
    res = harness.Results()
    a = res.record("s", "b", "x", "t", "ms", stats=Stats([1.0, 2.0, 3.0]))
    b = res.failed("s", "b", "y", "t", "ms", "NotImplementedError: conv")
    rid = res.ratio("s", "b", "x/y", a, b)
    assert res.ratios[rid]["value"] is None and "failed" in res.ratios[rid]["why_none"]
    rid = res.ratio("s", "b", "x/x", a, a)
    assert res.ratios[rid]["value"] == 1.0


def test_plots_written(run_doc):
    doc, out = run_doc
    plots = doc["artifacts"]["plots"]
    names = {Path(p).name.rsplit("-", 1)[1] for p in plots}
    assert names == {"dispatch.png", "ops.png", "models.png", "coverage.png"}
    for p in plots:
        data = Path(p).read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 2000
        assert Path(p).parent == out


def _slower(doc, rid, factor):
    d = copy.deepcopy(doc)
    d["run"]["id"] += "-b"
    for r in d["records"]:
        if r["id"] == rid:
            r["value"] *= factor
            st = r["stats"]
            st["samples"] = [v * factor for v in st["samples"]]
            for k in ("median", "min", "max", "q1", "q3"):
                st[k] *= factor
    return d


def test_compare(run_doc, tmp_path, capsys):
    doc, _ = run_doc
    slow = "dispatch/add/tpu-strict/us_per_op"
    fast = "ops/matmul/cpu-eager/rate"
    # 1000x: far beyond the spread of the quick run's samples on a busy machine
    b = _slower(_slower(doc, slow, 1000.0), fast, 1000.0)
    rows, text = report.compare(doc, b)
    verdict = {r[0]: r[-1] for r in rows}
    assert verdict[slow] == "worse"      # time per op went up
    assert verdict[fast] == "better"     # GFLOP/s went up
    assert verdict["dispatch/mul/tpu-strict/us_per_op"] == "~"
    assert "+99900.0%" in text
    pa, pb = tmp_path / "a.json", tmp_path / "b.json"
    pa.write_text(json.dumps(doc))
    pb.write_text(json.dumps(b))
    assert runner.main(["--compare", str(pa), str(pb)]) == 0
    out = capsys.readouterr().out
    assert slow in out and "worse" in out and "figures compared" in out


def test_conformance_summary(tmp_path, monkeypatch):
    assert suite_coverage.summarize_conformance(
        {"summary": {"native": 5, "fallback": 2, "fail": 1}})["native"] == 5
    c = suite_coverage.summarize_conformance(
        [{"op": "add", "status": "native"}, {"op": "conv", "status": "fallback"},
         {"op": "x", "status": "SKIP"}, {"op": "y", "status": "weird"}])
    assert (c["native"], c["fallback"], c["skip"], c["other"]) == (1, 1, 1, 1)
    c = suite_coverage.summarize_conformance({"results": {"add": "native", "mm": {"status": "error"}}})
    assert (c["native"], c["error"]) == (1, 1)

    path = tmp_path / "op_coverage.json"
    path.write_text(json.dumps({"add.Tensor": {"status": "native"},
                                "conv2d": {"status": "fail"}}))
    monkeypatch.setattr(suite_coverage, "CONFORMANCE_PATH", path)
    res = harness.Results()
    suite_coverage.run(res, harness.Config(tiny=True), progress=_Silent())
    assert res.value("coverage/conformance/tpu/native") == 1
    assert res.value("coverage/conformance/tpu/fail") == 1
    monkeypatch.setattr(suite_coverage, "CONFORMANCE_PATH", tmp_path / "absent.json")
    res = harness.Results()
    suite_coverage.run(res, harness.Config(tiny=True), progress=_Silent())
    assert res.suites["coverage"]["summary"]["conformance"]["status"] == "absent"
    assert res.records["coverage/conformance/tpu/entries"]["status"] == "skipped"


class _Silent:
    def now(self, text):
        pass

    def step(self, text=""):
        pass


def test_stats_and_interleave():
    s = Stats([5.0, 1.0, 3.0, 2.0, 4.0])
    assert (s.median, s.min, s.max, s.q1, s.q3, s.n) == (3.0, 1.0, 5.0, 2.0, 4.0, 5)
    r = s.inverse(10.0)  # times to rates: the slowest sample is the lowest rate
    assert (r.min, r.max, r.median) == (2.0, 10.0, 10 / 3)
    order = []

    def sampler(name):
        def f():
            order.append(name)
            if name == "c" and order.count("c") == 2:
                raise RuntimeError("boom")
            return 1.0
        return f

    errors = {}
    out = harness.interleave({n: sampler(n) for n in "abc"}, 3, errors)
    assert order[:3] == ["a", "b", "c"] and order[3:6] == ["b", "c", "a"]
    assert set(out) == {"a", "b"} and len(out["a"]) == 3 and "c" in errors


def test_cli_entry_point(tmp_path):
    """`python -m torchtpu.perflab` starts (torchtpu imported first) and
    rejects unknown suites."""
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    p = subprocess.run([sys.executable, "-m", "torchtpu.perflab", "nosuch", "--out", str(tmp_path)],
                       capture_output=True, text=True, env=env, timeout=120)
    assert p.returncode == 2 and "unknown suite" in p.stderr


def test_a_run_in_one_process_leaves_its_compile_cache_quietly(tmp_path):
    # A run with fresh caches removes them at its end; the exit's drain of
    # autograd's device thread then compiled two programs and warned that
    # it could not store them.
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    p = subprocess.run([sys.executable, "-m", "torchtpu.perflab", "models", "--tiny",
                        "--models", "MLP", "--no-isolate", "--no-peers", "--no-plots",
                        "--impls", "tpu-fused", "--out", str(tmp_path)],
                       capture_output=True, text=True, env=env, timeout=300)
    assert p.returncode == 0, p.stderr[-2000:]
    assert "cannot write to the compile cache" not in p.stderr


@pytest.mark.skipif(importlib.util.find_spec("jax") is None, reason="jax not installed")
def test_jax_peer_tiny():
    peer = ROOT / "torchtpu" / "perflab" / "peer_jax.py"
    job = {"ops": {"elements": 1024, "matmul": 16, "linalg": 8, "reps": 2, "warmup": 1,
                   "conv": {"n": 1, "cin": 2, "cout": 2, "h": 4, "w": 4, "k": 3}},
           "mlp": {"batch": 4, "dim_in": 64, "hidden": 128, "classes": 10, "reps": 2,
                   "warmup": 1}}
    doc, err = harness.run_python([str(peer), json.dumps(job)], timeout=180)
    assert err is None, err
    assert doc["backend"] == "cpu"
    for bench in suite_ops.BENCHES:
        assert len(doc["ops"][bench]["samples"]) == 2
    assert doc["mlp"]["train"]["first_s"] > 0


def test_models_rounds_pool_steps_and_keep_failures(monkeypatch):
    # A full run measures three rounds; their steps are pooled, and a round
    # that failed fails the figure even when the others worked.
    from torchtpu.perflab import suite_models

    real, calls = suite_models.bench_one, []

    def second_forward_round_breaks(name, impl, kind, *args):
        calls.append((impl, kind))
        if (impl, kind) == ("cpu-eager", "forward") and calls.count((impl, kind)) == 2:
            raise RuntimeError("round two broke")
        return real(name, impl, kind, *args)

    monkeypatch.setattr(suite_models, "bench_one", second_forward_round_breaks)
    cfg = harness.Config(reps=2, isolate=False, peers=False, models=["MLP"],
                         impls=["tpu-fused", "cpu-eager"])
    results = harness.Results()
    suite_models.run(results, cfg, progress=harness.Progress("models", 18, stream=io.StringIO()))
    assert results.suites["models"]["config"]["rounds"] == 3
    assert calls.count(("tpu-fused", "train")) == 3
    pooled = results.records["models/MLP-train/tpu-fused/step_ms"]
    assert pooled["status"] == "ok" and len(pooled["stats"]["samples"]) == 3 * 2
    broken = results.records["models/MLP-forward/cpu-eager/step_ms"]
    assert broken["status"] != "ok" and "round two broke" in broken["error"]


def test_cuda_eager_runs_where_tpu_was_never_registered(monkeypatch):
    # Once tpu is registered, PyTorch's autograd fails on cuda tensors
    # (pytorch/pytorch#161129), so CUDA eager's worker is a process that
    # never imports torchtpu, even under --no-isolate. Here CPU eager, sent
    # the same way, stands in for it.
    from torchtpu.perflab import suite_models

    monkeypatch.setattr(suite_models, "WITHOUT_TPU", ("cpu-eager",))
    cfg = harness.Config(tiny=True, isolate=False)
    job = {"model": "MLP", "kinds": ["train"], "shape": {"batch": 8}, "reps": 2,
           "max_warmup": 2, "threads": 1}
    alone, err = suite_models._run_worker(dict(job, impl="cpu-eager"), cfg)
    assert err is None and "error" not in alone["kinds"]["train"], err or alone
    assert alone["accelerator"] is None
    here, _ = suite_models._run_worker(dict(job, impl="tpu-fused"), cfg)  # in this process
    assert here["accelerator"] == "tpu" and "error" not in here["kinds"]["train"]


def test_cuda_eager_peer(monkeypatch):
    # PyTorch CUDA eager is the peer that counts on a GPU machine: chosen
    # by default where torch sees a GPU, and compared with the tpu modes in
    # the dispatch and models suites.
    import torch

    from torchtpu.perflab import suite_dispatch, suite_models

    assert harness.Config().wants("cuda-eager") == torch.cuda.is_available()
    assert harness.Config().wants("tpu-fused")
    assert harness.Config(impls=["cuda-eager"]).wants("cuda-eager")
    if not torch.cuda.is_available():
        # The figures' plumbing, with this machine's CPU standing in for the
        # GPU that torch does not see here.
        monkeypatch.setattr(suite_models, "_device",
                            lambda impl: "tpu" if impl.startswith("tpu-") else "cpu")
        make_op = suite_dispatch.make_op
        monkeypatch.setattr(suite_dispatch, "make_op",
                            lambda name, device: make_op(name, device.replace("cuda", "cpu")))
        monkeypatch.setattr(torch.cuda, "synchronize", lambda: None)
        monkeypatch.setattr(suite_models, "WITHOUT_TPU", ())  # keep the stand-ins above
    cfg = harness.Config(tiny=True, isolate=False, peers=False, models=["MLP"],
                         impls=["tpu-fused", "cuda-eager"])
    results = harness.Results()
    suite_models.run(results, cfg, progress=harness.Progress("models", 6, stream=io.StringIO()))
    suite_dispatch.run(results, cfg, progress=harness.Progress("dispatch", 6,
                                                               stream=io.StringIO()))
    for kind in suite_models.KINDS:
        assert results.records[f"models/MLP-{kind}/cuda-eager/step_ms"]["status"] == "ok"
        assert results.ratios[f"models/MLP-{kind}/ratio/tpu-fused/cuda-eager"]["value"] > 0
    for op in suite_dispatch.OPS:
        assert results.records[f"dispatch/{op}/cuda-eager/us_per_op"]["status"] == "ok"
        assert results.ratios[f"dispatch/{op}/ratio/tpu-fused/cuda-eager"]["value"] > 0
    doc = results.to_json()
    recs, rats = report._index(doc)
    text = "\n".join(report._md_dispatch(doc, recs, rats) + report._md_models(doc, recs, rats))
    assert "| tpu-fused/cuda |" in text and "| tpu-fused/cuda-eager |" in text
