#!/usr/bin/env bash
# The checks for a machine with an accelerator (a GPU box, a TPU VM) that
# has its own Python with torch and a PJRT plugin installed, and maybe no
# network: builds torchtpu against that Python's torch (no .venv, nothing
# downloaded), then runs the C tests, the smallest example, perflab's
# dispatch and models suites (tpu strict and fused against PyTorch eager on
# the same machine, CPU and CUDA) and part of the Python tests, each under
# its own time limit, most important first, so that a short lease still
# brings back the numbers that matter.
#
#   PYTHON=python3 TORCHTPU_PLUGIN=cuda OUT=device-out tools/device_check.sh
#
# PYTHON: the interpreter whose torch to build against (default python3).
# TORCHTPU_PLUGIN: cuda (default), tpu, cpu or a plugin path.
# OUT: where the results go (default device-out/): summary.md (one line per
# step, then perflab's tables), log.txt (every step's output) and
# perflab.tgz (perflab's JSON and markdown).
# BUDGET: seconds for the whole script (default 540); the Python tests get
# what is left of it.
# Like `make build`, it writes the extension into torchtpu/: where this
# checkout's .venv has another torch, run it in a separate clone.
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
PY=$(command -v "${PYTHON:-python3}") || { echo "no ${PYTHON:-python3}"; exit 2; }
OUT=${OUT:-device-out}
mkdir -p "$OUT" && OUT=$(cd "$OUT" && pwd)
BUILD=$ROOT/build-device
WORK=$BUILD/work
rm -rf "$WORK/perflab" && mkdir -p "$WORK/perflab"  # this run's figures only
SITE=$("$PY" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
export TORCHTPU_PLUGIN=${TORCHTPU_PLUGIN:-cuda}
export TORCHTPU_PLUGIN_PATH=$SITE
export TORCHTPU_CACHE_DIR=$WORK/cache
export PYTHONPATH=$ROOT${PYTHONPATH:+:$PYTHONPATH}
export PYTHONUNBUFFERED=1
START=$(date +%s)
BUDGET=${BUDGET:-540}
: >"$OUT/log.txt"
echo "# device check, $(date -u +%FT%TZ), plugin $TORCHTPU_PLUGIN, commit $(git rev-parse --short HEAD 2>/dev/null)" >"$OUT/summary.md"

left() { echo $((BUDGET - ($(date +%s) - START))); }

# step NAME LIMIT_S COMMAND...: runs COMMAND under a time limit, its output
# appended to log.txt; one line per step in summary.md.
step() {
  local name=$1 limit=$2 t0 rc
  shift 2
  if [ "$limit" -le 5 ]; then
    echo "- $name: not run (no time left)" | tee -a "$OUT/summary.md"
    return 1
  fi
  t0=$(date +%s)
  echo "===== $name (limit ${limit} s): $*" >>"$OUT/log.txt"
  timeout --kill-after=10 "$limit" "$@" >>"$OUT/log.txt" 2>&1
  rc=$?
  echo "- $name: exit $rc in $(($(date +%s) - t0)) s$([ $rc = 124 ] && echo ' (time limit)')" \
    | tee -a "$OUT/summary.md"
  return $rc
}

step info 60 bash -c "nvidia-smi -L 2>/dev/null; nproc; '$PY' -c 'import sys, torch; \
print(sys.version.split()[0], \"torch\", torch.__version__, \"cuda\", torch.cuda.is_available())'; \
ls '$SITE'/jax_plugins '$SITE'/xla_plugins '$SITE'/libtpu 2>/dev/null; true"

step build "$(left)" bash -c "cmake -S '$ROOT' -B '$BUILD' -DTPU_PYTHON='$PY' -DTPU_PLUGIN_PATH='$SITE' \
  >/dev/null && cmake --build '$BUILD' -j$(nproc)" || { echo "build failed: see $OUT/log.txt"; exit 1; }

step c-tests 90 "$BUILD/runtime/tpu_tests"
step hello 90 "$PY" examples/hello.py

# perflab: the host cost per op, then the models one at a time (a limit
# then costs one model), in one process (--no-isolate: no new interpreter
# and client per figure).
step perflab-dispatch 60 "$PY" -m torchtpu.perflab dispatch --no-plots --out "$WORK/perflab"
for model in GPT MLP CNN; do
  step "perflab-$model" "$(( $(left) < 150 ? $(left) - 60 : 150 ))" \
    "$PY" -m torchtpu.perflab models --models "$model" --no-isolate --no-peers --no-plots \
    --impls tpu-strict,tpu-fused,cpu-eager,cuda-eager --threads 0 --out "$WORK/perflab"
  tar czf "$OUT/perflab.tgz" -C "$WORK/perflab" .
done
for md in "$WORK"/perflab/*.md; do
  [ -f "$md" ] && { echo; sed -n '/^## /,$p' "$md"; } >>"$OUT/summary.md"
done

# Python tests last, in the time left (tests that need two devices skip on
# a one-device plugin). A GPU's XLA compiles each program in 50-150 ms, so
# they run several times slower than on the CPU plugin: -vv names each test
# as it runs (pyproject.toml's -q would print dots), so a run cut at the time
# limit still says which tests failed, and pytest-timeout, where installed,
# stops one that hangs.
TIMEOUT_ARG=$("$PY" -c 'import pytest_timeout' 2>/dev/null && echo --timeout=60)
step pytest "$(($(left) - 10))" "$PY" -m pytest -vv --maxfail=50 $TIMEOUT_ARG \
  --durations=10 tests/test_models.py tests/test_modes.py tests/test_autograd.py \
  tests/test_ops_matmul.py tests/test_ops_reduce.py tests/test_ops_nn.py tests/test_optim.py
grep -E " (FAILED|ERROR)|^(FAILED|ERROR)|passed|failed" "$OUT/log.txt" | tail -n 60 >>"$OUT/summary.md"
echo "total $(($(date +%s) - START)) s" | tee -a "$OUT/summary.md"
