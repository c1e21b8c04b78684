# torchtpu: `make demo` and `make test` do all set-up on a fresh machine.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
BUILD := build
JOBS ?= $(shell nproc)
SITE = $(shell $(PY) -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')

.PHONY: all build demo test test-c test-py test-fused asan clean bench-c

all: build

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip

# Dependencies, reinstalled when requirements.txt changes.
$(VENV)/.deps: requirements.txt | $(PY)
	$(PY) -m pip install -q -r requirements.txt
	touch $@

$(BUILD)/CMakeCache.txt: $(VENV)/.deps CMakeLists.txt runtime/CMakeLists.txt binding/CMakeLists.txt
	cmake -S . -B $(BUILD) -DTPU_PYTHON=$(abspath $(PY)) -DTPU_PLUGIN_PATH=$(SITE) >/dev/null

# The package is installed in editable mode once, so that the torch.backends
# entry point autoloads it; the extension is built in place by CMake.
$(VENV)/.installed: pyproject.toml $(VENV)/.deps
	$(PY) -m pip install -q --no-deps --no-build-isolation -e .
	touch $@

build: $(BUILD)/CMakeCache.txt $(VENV)/.installed
	cmake --build $(BUILD) -j$(JOBS)

test-c: build
	$(BUILD)/runtime/tpu_tests

test-py: build
	$(PY) -m pytest tests

# Every Python test again in fused mode: the modes must agree.
test-fused: build
	TORCHTPU_MODE=fused $(PY) -m pytest tests

test: test-c test-py

# Host-side cost of one execute, a transfer, a compile (PJRT layer only).
bench-c: build
	TORCHTPU_PLUGIN_PATH=$(SITE) $(BUILD)/runtime/tpu_bench

demo: build
	$(PY) examples/train_gpt.py

# The runtime and C tests under AddressSanitizer and UBSan. Leak checking is
# left to the tests' own allocation counter: the XLA plugin keeps
# process-lifetime allocations that LeakSanitizer would report.
asan: $(VENV)/.deps
	cmake -S . -B $(BUILD)-asan -DTPU_SANITIZE=ON -DTPU_BUILD_BINDING=OFF -DTPU_PLUGIN_PATH=$(SITE) >/dev/null
	cmake --build $(BUILD)-asan -j$(JOBS)
	ASAN_OPTIONS=detect_leaks=0 $(BUILD)-asan/runtime/tpu_tests

clean:
	rm -rf $(BUILD) $(BUILD)-asan torchtpu/_C*.so

# perflab, the benchmark suite (docs/perflab.md): every suite, results in
# perflab/results/. Options through BENCH_ARGS, e.g. BENCH_ARGS=--quick.
bench: build
	$(PY) -m torchtpu.perflab $(BENCH_ARGS)

# Optional peers for perflab (JAX on the same CPU); bench never needs them.
# requirements.txt constrains the shared dependencies (numpy) to its pins.
peers: $(VENV)/.deps
	$(PY) -m pip install -q -c requirements.txt jax==0.10.2 jaxlib==0.10.2

.PHONY: bench peers

# The model zoo (tests/models/, docs/model_zoo.md): Hugging Face Transformers
# architectures from small configs and a pretrained sentence encoder, on tpu
# against CPU. Its extra dependencies are pinned in requirements-models.txt;
# requirements.txt constrains the shared ones, so torch is never replaced.
# `make test` leaves the zoo out (pyproject.toml's --ignore=tests/models).
$(VENV)/.models-deps: requirements-models.txt $(VENV)/.deps
	$(PY) -m pip install -q -c requirements.txt -r requirements-models.txt
	touch $@

models: build $(VENV)/.models-deps
	HF_HUB_OFFLINE=1 TORCHTPU_ZOO_TABLE=docs/model_zoo.md $(PY) -m pytest tests/models

.PHONY: models

# The OpInfo conformance sweep (tests/conformance/sweep.py): every operator of
# PyTorch's OpInfo databases and every Core ATen overload, on tpu against CPU,
# in crash-isolated worker processes; writes docs/op_coverage.md and .json.
# About an hour on a 2-core machine the first time; the on-disk compile cache
# (TORCHTPU_CACHE_DIR) makes reruns much faster. Options through
# CONFORMANCE_ARGS, e.g. CONFORMANCE_ARGS="--ops add,mul" or "--jobs 4".
conformance: build
	$(PY) tests/conformance/sweep.py $(CONFORMANCE_ARGS)

.PHONY: conformance
