"""The compile cache: memory hits, the disk tier across processes, the
no-compile assertion, recompile diagnostics."""
import json
import os
import re
import subprocess
import sys
import textwrap

import pytest
import torch

import torchtpu

SCRIPT = textwrap.dedent("""
    import json, torch, torchtpu
    x = torch.arange(12.0, device="tpu").reshape(3, 4)
    y = (x * 3 + 1).sum(1)
    y.cpu()
    m = torchtpu.metrics()
    print(json.dumps({"compiles": m["compiles"], "disk_hits": m["disk_hits"]}))
""")


def run(env):
    out = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_warm_disk_cache_compiles_nothing(tmp_path):
    env = dict(os.environ, TORCHTPU_CACHE_DIR=str(tmp_path))
    cold = run(env)
    assert cold["compiles"] > 0 and cold["disk_hits"] == 0
    warm = run(env)
    assert warm["compiles"] == 0, warm
    assert warm["disk_hits"] == cold["compiles"]
    # The no-compile assertion holds with a warm cache ...
    run(dict(env, TORCHTPU_ASSERT_NO_COMPILE="1"))
    # ... and fails without one.
    env_off = dict(env, TORCHTPU_CACHE_DIR=str(tmp_path / "empty"), TORCHTPU_ASSERT_NO_COMPILE="1")
    out = subprocess.run([sys.executable, "-c", SCRIPT], env=env_off, capture_output=True, text=True)
    assert out.returncode != 0 and "TORCHTPU_ASSERT_NO_COMPILE" in out.stderr


def test_plugin_options_from_the_environment_key_the_disk_cache(tmp_path):
    # XLA_FLAGS changes what the plugin compiles: another value must not
    # reuse executables compiled under the first.
    env = dict(os.environ, TORCHTPU_CACHE_DIR=str(tmp_path))
    env.pop("XLA_FLAGS", None)
    assert run(env)["compiles"] > 0
    flagged = dict(env, XLA_FLAGS="--xla_cpu_enable_fast_math=false")
    first = run(flagged)
    assert first["compiles"] > 0 and first["disk_hits"] == 0
    assert run(flagged)["compiles"] == 0
    assert run(env)["compiles"] == 0


def test_debug_log_prints_each_compiled_program_whole(tmp_path):
    # A chain of 40 ops makes a program far longer than a log line.
    script = textwrap.dedent("""
        import torch, torchtpu
        torchtpu.set_mode("fused")
        x = torch.ones(8, device="tpu")
        for i in range(40):
            x = x * 1.5 + i
        x.cpu()
    """)
    env = dict(os.environ, TORCHTPU_CACHE_DIR="off", TORCHTPU_LOG="debug")
    out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    programs = [p for p in out.stderr.split("[torchtpu ") if p.startswith("debug] compiled")]
    longest = max(programs, key=len)
    assert len(longest) > 4096 and longest.count("stablehlo.multiply") >= 40
    assert longest.rstrip().endswith("}"), longest[-200:]


UNSTORABLE_SCRIPT = textwrap.dedent("""
    import json, torch, torchtpu
    x = torch.arange(12.0, device="tpu").reshape(3, 4)
    assert x.sum(1).tolist() == [6.0, 22.0, 38.0]
    assert x.amax(0).tolist() == [8.0, 9.0, 10.0, 11.0]
    m = torchtpu.metrics()
    print(json.dumps({"compiles": m["compiles"], "disk_hits": m["disk_hits"]}))
""")


def test_program_the_plugin_cannot_serialize_warns_once_and_runs(tmp_path):
    # The CPU plugin cannot serialize programs with XNNPACK kernels (here its
    # reductions): they run, are compiled again by each process, and the
    # user is told once per process.
    env = dict(os.environ, TORCHTPU_CACHE_DIR=str(tmp_path),
               XLA_FLAGS="--xla_cpu_experimental_xnn_fusion_type=reduce")
    runs = [subprocess.run([sys.executable, "-c", UNSTORABLE_SCRIPT], env=env,
                           capture_output=True, text=True) for _ in range(2)]
    for out in runs:
        assert out.returncode == 0, out.stderr
    cold, warm = (json.loads(out.stdout.strip().splitlines()[-1]) for out in runs)
    if warm["compiles"] == 0 and warm["disk_hits"] == cold["compiles"]:
        pytest.skip("this plugin stores XNNPACK programs (newer XLA builds do; the pinned "
                    "xla-cpu-pjrt 0.0.1 cannot), so there is no unstorable program to test")
    for out in runs:
        assert out.stderr.count("cannot be stored in the disk cache") == 1, out.stderr
    assert cold["disk_hits"] == 0
    # the two reductions compile again; the rest (arange, reshape) load
    assert warm["compiles"] == 2 and warm["disk_hits"] == cold["compiles"] - 2, (cold, warm)


def test_cache_entry_that_is_not_a_regular_file_is_a_miss(tmp_path):
    # A named pipe at an entry's path blocked the process for ever in open().
    env = dict(os.environ, TORCHTPU_CACHE_DIR=str(tmp_path))
    cold = run(env)
    entry = sorted(tmp_path.glob("*.tpuexe"))[0]
    entry.unlink()
    os.mkfifo(entry)
    out = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    warm = json.loads(out.stdout.strip().splitlines()[-1])
    assert warm["compiles"] == 1 and warm["disk_hits"] == cold["compiles"] - 1, (cold, warm)


UNWRITABLE_SCRIPT = textwrap.dedent("""
    import json, os, resource, shutil, sys, torch, torchtpu
    (torch.ones(2, device="tpu") * 2).cpu()  # the directory opens
    if sys.argv[1] == "gone":  # replaced by a file while the process runs
        shutil.rmtree(os.environ["TORCHTPU_CACHE_DIR"])
        open(os.environ["TORCHTPU_CACHE_DIR"], "w").close()
    else:  # a disk that fills: every entry's write stops short
        resource.setrlimit(resource.RLIMIT_FSIZE, (64, resource.RLIM_INFINITY))
    sums = [(torch.arange(float(n), device="tpu") * 3).sum().item() for n in range(3, 9)]
    print(json.dumps({"sums": sums, "compiles": torchtpu.metrics()["compiles"]}))
""")


@pytest.mark.parametrize("how", ["gone", "full"])
def test_cache_directory_that_cannot_be_written_warns_once_and_runs(tmp_path, how):
    # A cache directory removed, or a disk that filled, while the process
    # ran: each store failed with nothing said at the default log level.
    env = dict(os.environ, TORCHTPU_CACHE_DIR=str(tmp_path / "cache"))
    env.pop("TORCHTPU_LOG", None)
    out = subprocess.run([sys.executable, "-c", UNWRITABLE_SCRIPT, how], env=env,
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["sums"] == [float(sum(range(n)) * 3) for n in range(3, 9)]
    assert got["compiles"] >= 6
    assert out.stderr.count("cannot write to the compile cache") == 1, out.stderr
    assert not list(tmp_path.glob("cache/*.tmp.*"))  # no half-written file left


CHDIR_SCRIPT = textwrap.dedent("""
    import os, sys, torch, torchtpu
    (torch.ones(3, device="tpu") * 2).cpu()
    os.chdir(sys.argv[1])
    (torch.ones(5, device="tpu") * 2).cpu()  # stored after the chdir
""")


def test_relative_cache_dir_stays_where_it_was_when_opened(tmp_path):
    (tmp_path / "elsewhere").mkdir()
    env = dict(os.environ, TORCHTPU_CACHE_DIR="cache")
    out = subprocess.run([sys.executable, "-c", CHDIR_SCRIPT, str(tmp_path / "elsewhere")],
                         env=env, cwd=tmp_path, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    stored = list((tmp_path / "cache").glob("*.tpuexe"))
    assert len(stored) >= 2 and not (tmp_path / "elsewhere" / "cache").exists()
    # the program of the second op, stored after the chdir, is a hit:
    out = subprocess.run([sys.executable, "-c", CHDIR_SCRIPT, str(tmp_path / "elsewhere")],
                         env=dict(env, TORCHTPU_ASSERT_NO_COMPILE="1"), cwd=tmp_path,
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr


def test_temporary_files_of_dead_writers_are_removed(tmp_path):
    # A writer killed between writing and renaming leaves its temporary file:
    # counted against the size limit while it may still be written, then
    # removed (after an hour).
    stale = tmp_path / ("0" * 32 + ".tpuexe.tmp.123.abc")
    fresh = tmp_path / ("1" * 32 + ".tpuexe.tmp.456.def")
    for f in (stale, fresh):
        f.write_bytes(b"x" * 1000)
    os.utime(stale, (0, os.path.getmtime(stale) - 7200))
    env = dict(os.environ, TORCHTPU_CACHE_DIR=str(tmp_path))
    run(env)  # its first store counts the directory
    assert not stale.exists() and fresh.exists()


EVICT_SCRIPT = textwrap.dedent("""
    import json, sys, torch, torchtpu
    for n in map(int, sys.argv[1:]):
        (torch.ones(n, device="tpu") * 2).cpu()
    m = torchtpu.metrics()
    print(json.dumps({"compiles": m["compiles"], "disk_hits": m["disk_hits"]}))
""")


def test_disk_cache_keeps_to_its_size_limit_dropping_least_recently_used(tmp_path):
    limit = 40_000  # about ten of these small programs
    env = dict(os.environ, TORCHTPU_CACHE_DIR=str(tmp_path),
               TORCHTPU_CACHE_MAX_BYTES=str(limit))

    def run_sizes(*sizes):
        out = subprocess.run([sys.executable, "-c", EVICT_SCRIPT, *map(str, sizes)], env=env,
                             capture_output=True, text=True)
        assert out.returncode == 0, out.stderr
        return json.loads(out.stdout.strip().splitlines()[-1])

    assert run_sizes(*range(1, 21))["compiles"] >= 20  # several times the limit
    entries = list(tmp_path.glob("*.tpuexe"))
    assert entries and sum(p.stat().st_size for p in entries) <= limit
    assert run_sizes(20)["compiles"] == 0  # the newest programs stayed
    assert run_sizes(1)["compiles"] > 0  # the oldest went


CHAIN_SCRIPT = textwrap.dedent("""
    import sys, torch, torchtpu
    torchtpu.set_mode("fused")
    for n in map(int, sys.argv[1:]):
        x = torch.ones(8, device="tpu")
        for i in range(n):  # a longer chain: a larger program
            x = x * 1.5 + i
        x.cpu()
    print(torchtpu.metrics()["compiles"])
""")


def test_disk_cache_entry_larger_than_the_limit_is_not_stored_and_warns_once(tmp_path):
    # An entry larger than TORCHTPU_CACHE_MAX_BYTES was written, then evicted
    # at once, and every other entry with it (oldest first), with no word.
    def run_chains(limit, *lengths):
        env = dict(os.environ, TORCHTPU_CACHE_DIR=str(tmp_path),
                   TORCHTPU_CACHE_MAX_BYTES=str(limit))
        out = subprocess.run([sys.executable, "-c", CHAIN_SCRIPT, *map(str, lengths)], env=env,
                             capture_output=True, text=True)
        assert out.returncode == 0, out.stderr
        return out

    run_chains(1 << 30, 1)
    [short] = tmp_path.glob("*.tpuexe")
    limit = short.stat().st_size  # the short chain's entry just fits
    out = run_chains(limit, 1, 40, 41)
    said = [line for line in out.stderr.splitlines() if "TORCHTPU_CACHE_MAX_BYTES" in line]
    assert len(said) == 1 and "warn" in said[0], out.stderr  # two entries too large: said once
    assert f"larger than TORCHTPU_CACHE_MAX_BYTES={limit}" in said[0], said
    size = int(re.search(r"program of (\d+) bytes", said[0]).group(1))
    assert size > limit, said
    entries = list(tmp_path.glob("*.tpuexe"))
    assert short in entries and all(p.stat().st_size <= limit for p in entries), entries
    assert int(run_chains(limit, 40).stdout.split()[-1]) > 0  # not stored: compiles again


MAPPINGS_SCRIPT = textwrap.dedent("""
    import json, os, sys, torch, torchtpu
    torchtpu.set_mode("fused")
    def mappings():
        with open("/proc/self/maps") as f:
            return sum(1 for _ in f)
    torch.ones(1, device="tpu").cpu()
    base = mappings()
    w = torch.randn(16, 16, device="tpu")
    def program(n):  # a graph of several kernels: tens of mappings each
        y = torch.arange(n * 16.0, device="tpu").reshape(n, 16) / (n * 16)
        for k in range(3):
            y = (y @ w).softmax(-1) + y.sum(0) * (k + 1)
        return y.sum().item()
    first = program(8)
    peak = 0
    for n in range(9, 9 + int(sys.argv[1])):
        program(n)
        peak = max(peak, mappings() - base)
    again = program(8)  # evicted long ago: back from the disk cache
    print(json.dumps({"base": base, "peak": peak, "same": first == again,
                      "compiles": torchtpu.metrics()["compiles"]}))
""")


def test_memory_cache_keeps_within_the_process_memory_mappings(tmp_path):
    # Each loaded XLA CPU program holds memory mappings of its code, and a
    # process may have only vm.max_map_count of them: past that the plugin
    # crashed (about 1,400 such programs). The cache evicts above a budget
    # (half of that limit; here set low to see it work).
    if not os.path.exists("/proc/self/maps"):
        pytest.skip("needs Linux's /proc/self/maps")

    def run_programs(n, **env):
        out = subprocess.run([sys.executable, "-c", MAPPINGS_SCRIPT, str(n)],
                             env=dict(os.environ, TORCHTPU_CACHE_DIR=str(tmp_path), **env),
                             capture_output=True, text=True)
        assert out.returncode == 0, out.stderr
        return json.loads(out.stdout.strip().splitlines()[-1])

    free = run_programs(80)  # about 36 mappings a program
    assert free["same"] and free["peak"] > 2400  # no cap: the mappings grow with the programs
    budget = run_programs(0)["base"] + 600  # what the process holds, plus a little
    capped = run_programs(80, TORCHTPU_CACHE_MAX_MAPPINGS=str(budget))
    assert capped["same"]
    # Checked every 16 programs: at most 16 programs' worth over the budget.
    assert capped["peak"] < 600 + 16 * 60
    assert capped["compiles"] == 0  # all on disk from the first run


FLAGS_SCRIPT = textwrap.dedent("""
    import ctypes, torch, torchtpu
    torch.ones(1, device="tpu").cpu()
    libc = ctypes.CDLL(None)
    libc.getenv.restype = ctypes.c_char_p
    print((libc.getenv(b"XLA_FLAGS") or b"").decode())
""")


@pytest.mark.parametrize("given", [None, "--xla_cpu_enable_fast_math=false",
                                   "--xla_cpu_enable_concurrency_optimized_scheduler=true"])
def test_cpu_plugin_schedules_sequentially_unless_told(given):
    env = dict(os.environ)
    env.pop("XLA_FLAGS", None)
    if given:
        env["XLA_FLAGS"] = given
    out = subprocess.run([sys.executable, "-c", FLAGS_SCRIPT], env=env, capture_output=True,
                         text=True)
    assert out.returncode == 0, out.stderr
    flags = out.stdout.strip().splitlines()[-1].split()
    if given and "scheduler" in given:
        assert flags == [given]  # the user's choice stands
    else:
        assert flags == ([given] if given else []) + [
            "--xla_cpu_enable_concurrency_optimized_scheduler=false"]


def test_memory_cache_hits():
    x = torch.randn(5, 5, device="tpu")
    torch.tpu.synchronize()  # fused mode: x's own program runs apart
    (x + x).cpu()
    torchtpu.reset_metrics()
    for _ in range(3):
        (x + x).cpu()
    m = torchtpu.metrics()
    assert m["compiles"] == 0 and m["cache_hits"] >= 3


def test_recompile_diagnostics():
    torchtpu.reset_metrics()
    for n in range(2, 7):
        (torch.ones(n, 3, device="tpu") * 1.5).sum(0).cpu()  # a new shape each time
    sites = torchtpu.recompiles()
    assert sites, torchtpu.report(file=open(os.devnull, "w"))
    site = sites[0]
    assert "test_cache.py" in site["frame"]
    assert any("shape" in r or "constant" in r for r in site["reasons"])
    text = torchtpu.report(file=open(os.devnull, "w"))
    assert "keep needing new programs" in text


SITES_SCRIPT = textwrap.dedent("""
    import json, torch, torchtpu
    for n in range(2, 7):
        (torch.ones(n, 3, device="tpu") * 1.5).sum(0).cpu()  # a new shape each time
    m = torchtpu.metrics()
    print(json.dumps({"compiles": m["compiles"], "sites": torchtpu.recompiles(),
                      "report": torchtpu.report()}))
""")


def test_recompile_sites_tell_disk_loads_from_compiles(tmp_path):
    # The script lies in a folder named "torchtpu" (a clone of this
    # repository): its lines are still the user's, not torchtpu's.
    folder = tmp_path / "torchtpu" / "examples"
    folder.mkdir(parents=True)
    (folder / "loop.py").write_text(SITES_SCRIPT)
    env = dict(os.environ, TORCHTPU_CACHE_DIR=str(tmp_path / "cache"))

    def sites():
        out = subprocess.run([sys.executable, str(folder / "loop.py")], env=env,
                             capture_output=True, text=True)
        assert out.returncode == 0, out.stderr
        return json.loads(out.stdout.strip().splitlines()[-1])

    cold, warm = sites(), sites()
    assert cold["sites"] and all("loop.py:4" in s["frame"] for s in cold["sites"]), cold
    assert sum(s["compiles"] for s in cold["sites"]) > 0
    assert all(s["from_disk"] == 0 for s in cold["sites"])
    # a warm cache compiles nothing, but the line still needs a new program
    # at every shape: those are loaded from disk, and said to be
    assert warm["compiles"] == 0 and warm["sites"], warm
    assert all(s["compiles"] == 0 and s["from_disk"] >= 3 for s in warm["sites"]), warm
    assert "0 compiled, " in warm["report"] and "from disk" in warm["report"]


def test_recompile_reason_compares_with_every_program_of_the_line():
    # A line that needs two programs each time (two rolls of different
    # shapes) and changes only an attribute (the shift): each new program
    # was compared with the line's previous one, its other roll, and blamed
    # on an input shape change that never happened.
    a, b = torch.randn(5, device="tpu"), torch.randn(7, device="tpu")
    torch.tpu.synchronize()
    torchtpu.reset_metrics()
    for k in range(1, 6):
        (a.roll(k).sum() + b.roll(k).sum()).item()  # same shapes; a new shift
    sites = torchtpu.recompiles()
    assert sites, torchtpu.report(file=open(os.devnull, "w"))
    for site in sites:  # (strict mode: b's first roll is a new input shape at that line)
        reasons = site["reasons"]
        assert reasons.get("input shape or dtype changed", 0) <= 1, sites
        assert reasons.get("a constant or attribute changed (sizes, dims, values)", 0) >= 4, sites


def test_fused_recompiles_name_the_line_that_began_the_graph():
    # A fused graph compiles at its flush: here the end of a backward pass,
    # where no Python frame runs. The report names the line of its first op.
    torchtpu.reset_metrics()
    w = torch.randn(4, 2, device="tpu", requires_grad=True)
    with torchtpu.mode("fused"):
        for n in range(3, 7):  # a new batch size each time
            x = torch.ones(n, 4, device="tpu")  # the graph's first op
            (x @ w).square().sum().backward()
        torch.tpu.synchronize()
    sites = torchtpu.recompiles()
    assert sites, torchtpu.report(file=open(os.devnull, "w"))
    assert all("backward pass" not in s["frame"] for s in sites), sites
    assert any("test_cache.py" in s["frame"] and "fused_recompiles" in s["frame"]
               for s in sites), sites


def test_reset_metrics_forgets_optimizer_steps():
    # After a training loop, a new loop that is not training must be judged
    # by its compile count again (steps seen before would hide it).
    p = torch.nn.Parameter(torch.ones(3, device="tpu"))
    opt = torch.optim.SGD([p], lr=0.1)
    for _ in range(2):
        p.sum().backward()
        opt.step()
    torchtpu.reset_metrics()
    for n in range(2, 7):
        (torch.ones(n, 5, device="tpu") * 2.5).sum(0).cpu()  # a new shape each time
    assert torchtpu.recompiles(), torchtpu.report(file=open(os.devnull, "w"))


def test_warmup_compiles_are_not_recompiles():
    model = torch.nn.Sequential(torch.nn.Linear(6, 7), torch.nn.Linear(7, 3)).tpu()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    torchtpu.reset_metrics()
    for _ in range(4):  # steady: every program compiles in the first step
        model(torch.randn(5, 6, device="tpu")).sum().backward()
        opt.step()
        opt.zero_grad()
    assert torchtpu.recompiles() == []
    for n in range(2, 6):  # a new batch size every step: flagged
        model(torch.randn(n, 6, device="tpu")).sum().backward()
        opt.step()
    assert any(s["steps"] >= 3 for s in torchtpu.recompiles())


def test_steady_inference_loop_after_warm_up_reports_nothing():
    # Layers of different shapes called from one line need a program each in
    # the first pass, then none: warm-up. Without optimizer steps to tell
    # iterations apart, these were reported as a line that keeps compiling.
    shapes = [(9, 17), (17, 31), (31, 13), (13, 5)]  # programs no other test has
    layers = [torch.nn.Linear(a, b).tpu() for a, b in shapes]
    torchtpu.reset_metrics()
    with torch.no_grad():
        for _ in range(5):
            h = torch.ones(7, 9, device="tpu")
            for layer in layers:
                h = layer(h).relu()  # a new program per layer, in the first pass only
            h.sum().item()
        assert torchtpu.recompiles() == [], torchtpu.report(file=open(os.devnull, "w"))
        for n in range(2, 6):  # a new batch size in every iteration still counts
            layers[0](torch.ones(n, 9, device="tpu")).relu().sum().item()
    assert any("test_cache.py" in s["frame"] and s["reads"] >= 3
               for s in torchtpu.recompiles()), torchtpu.report(file=open(os.devnull, "w"))


def test_recompile_reason_of_a_special_cased_exponent_is_a_constant():
    # pow builds some exponents into its program (2 as x * x, 0.5 as sqrt)
    # and takes the others as an input: a loop whose exponent moves between
    # them needs new programs with the same tensors. Those were blamed on an
    # input shape or dtype change.
    x = torch.rand(6, device="tpu") + 0.5
    torch.tpu.synchronize()
    torchtpu.reset_metrics()
    for e in [2.0, 2.5, 0.5, 1.7, 3.0, -1.0]:  # 2.5 and 1.7 share a program
        torch.testing.assert_close(torch.pow(x, e).cpu(), torch.pow(x.cpu(), e))
    sites = [s for s in torchtpu.recompiles() if s["op"] == "pow"]
    assert sites, torchtpu.report(file=open(os.devnull, "w"))
    reasons = sites[0]["reasons"]
    assert "input shape or dtype changed" not in reasons, reasons
    assert all(r.startswith("a constant or attribute changed") for r in reasons), reasons
    assert sum(reasons.values()) == 4, reasons  # five programs
    # 2.0 -> 2.5 took the exponent in as an input: said to be a special value
    assert sum(n for r, n in reasons.items() if "special-cases" in r) == 1, reasons


def test_alpha_of_one_is_compiled_apart_for_real_dtypes_only():
    # add skips its multiply at alpha 1 (exact for real dtypes): a program of
    # its own, said to be for a special value. Complex dtypes multiply by 1
    # as CPU does (0 * inf makes the other part NaN), with alpha an input.
    inf, nan = float("inf"), float("nan")
    torchtpu.reset_metrics()
    x = torch.tensor([1.0, -0.0, inf, nan, -2.5], device="tpu")
    for alpha in [2.0, 1.0, 3.0, 1.0, 0.5]:
        got = torch.add(x, x, alpha=alpha).cpu()
        torch.testing.assert_close(got, torch.add(x.cpu(), x.cpu(), alpha=alpha), equal_nan=True)
    site = [s for s in torchtpu.recompiles(2) if s["op"] == "add"]
    assert len(site) == 1 and site[0]["compiles"] + site[0]["from_disk"] == 2, site
    assert list(site[0]["reasons"]) == [
        "a constant or attribute changed (a number at a value the op special-cases, "
        "as pow's exponent 2 or add's alpha 1)"], site

    a = torch.tensor([0j, 1 + 1j, 2 - 1j, complex(nan, 1)])
    b = torch.tensor([complex(inf, 0), complex(inf, 1), complex(1, -inf), 1 + 2j])
    ta, tb = a.tpu(), b.tpu()
    torch.tpu.synchronize()
    torchtpu.reset_metrics()
    for alpha in [2.0, 1.0, 3.0]:
        for op in (torch.add, torch.sub):
            got = op(ta, tb, alpha=alpha).cpu()
            torch.testing.assert_close(torch.view_as_real(got),
                                       torch.view_as_real(op(a, b, alpha=alpha)), equal_nan=True)
    assert torchtpu.recompiles(2) == [], torchtpu.recompiles(2)
    idx = torch.arange(4)
    for got, want in [(ta.index_add(0, idx.tpu(), tb), a.index_add(0, idx, b)),
                      (torch.addcmul(ta, tb, tb), torch.addcmul(a, b, b))]:
        torch.testing.assert_close(torch.view_as_real(got.cpu()), torch.view_as_real(want),
                                   equal_nan=True)


def test_recompile_reason_when_an_op_reads_other_tensors():
    # The same ops and tensor types, reading one tensor fewer: addmm's beta 0
    # leaves self unread, and x * x reads one tensor where x * y reads two.
    # No input's shape or dtype changed, as the reason said.
    m, c = torch.rand(3, 3, device="tpu"), torch.rand(3, 3, device="tpu")
    torch.tpu.synchronize()
    torchtpu.reset_metrics()
    for beta in [1.0, 0.0, 1.0, 0.0]:
        torch.testing.assert_close(torch.addmm(c, m, m, beta=beta).cpu(),
                                   torch.addmm(c.cpu(), m.cpu(), m.cpu(), beta=beta))
    for other in [m, c, m, c]:
        torch.testing.assert_close((m * other).cpu(), m.cpu() * other.cpu())
    sites = {s["op"]: s["reasons"] for s in torchtpu.recompiles(2)}
    read = ("the tensors it reads changed (one passed twice, or one an op leaves unread at a "
            "special value, as addmm's beta 0)")
    assert sites.get("addmm") == {read: 1} and sites.get("mul") == {read: 1}, sites
