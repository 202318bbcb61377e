# Two entry points: `make demo` and `make test`. Both create or refresh .venv/ and install
# everything (torch==2.13.0 first: the CPU wheel on the machine; then pinned requirements),
# so they work on a fresh machine. Nothing is downloaded at run time.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test test-fast test-integration venv venvs test-versions bench clean browser rehearse lint format
# The other interpreters the model-free code must agree on (light environments, no torch).
OTHER_PYTHONS := 3.12 3.13
MODEL_FREE_TESTS := tests/test_tracer.py tests/test_sandbox.py tests/test_sandbox_reads.py tests/test_zygote.py tests/test_function_sources.py \
	tests/test_render.py tests/test_inline.py tests/test_mutation.py tests/test_functions.py tests/test_curricula.py \
	tests/test_bad_input.py tests/test_batch.py tests/test_cli.py tests/test_format.py tests/test_versions.py \
	tests/test_data_format.py tests/test_interpreter_check.py

# TORCH_INDEX: a torch build index for GPUs the default wheel lacks kernels for, e.g. a V100
# cluster: make venv TORCH_INDEX=https://download.pytorch.org/whl/cu126 (docs/cluster.md). The
# build is reinstalled from it (pip counts 2.13.0+cu130 as 2.13.0); on an existing .venv remove
# .venv/.installed first, or the environment is taken as made.
TORCH ?= torch==2.13.0
TORCH_INDEX ?=

$(STAMP): requirements.txt pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --disable-pip-version-check $(if $(TORCH_INDEX),--force-reinstall --index-url $(TORCH_INDEX)) "$(TORCH)"
	$(BIN)/pip install -q --disable-pip-version-check -r requirements.txt
	$(BIN)/pip install -q --disable-pip-version-check --no-deps -e .
	touch $(STAMP)

venv: $(STAMP)

# .venv-3.12 and .venv-3.13, where pyenv or PATH has those interpreters (skipped with a
# message where not): the model-free dependencies at the same pins (requirements-light.txt).
venvs:
	@for v in $(OTHER_PYTHONS); do \
	  py=$$(command -v python$$v 2>/dev/null); \
	  { [ -n "$$py" ] && $$py -c pass 2>/dev/null; } || py=$$(ls -d $${PYENV_ROOT:-$$HOME/.pyenv}/versions/$$v.*/bin/python$$v 2>/dev/null | sort -V | tail -1); \
	  if [ -z "$$py" ]; then echo "note: no Python $$v here; its model-free tests are skipped"; continue; fi; \
	  if [ ! -f .venv-$$v/.installed ] || [ requirements-light.txt -nt .venv-$$v/.installed ]; then \
	    $$py -m venv .venv-$$v && \
	    .venv-$$v/bin/pip install -q --disable-pip-version-check -r requirements-light.txt -c requirements.txt && \
	    .venv-$$v/bin/pip install -q --disable-pip-version-check --no-deps -e . && touch .venv-$$v/.installed \
	    || { echo "note: could not set up .venv-$$v; its model-free tests are skipped"; rm -rf .venv-$$v; }; \
	  fi; \
	done

# The model-free tests again under each light environment (the same ground truth on each).
test-versions: venvs
	@for v in $(OTHER_PYTHONS); do \
	  if [ -x .venv-$$v/bin/python ]; then echo "== model-free tests on Python $$v"; \
	    $(if $(XDIST),OMP_NUM_THREADS=1) .venv-$$v/bin/python -m pytest -q -p no:cacheprovider $(XDIST) $(MODEL_FREE_TESTS) || exit 1; fi; \
	done

demo: $(STAMP)
	$(BIN)/python -m codeexecutor.demo

# Two tiers (pyproject.toml's markers): the fast one (commands called in-process, units,
# small end-to-end checks) and the integration one (pretrain end to end, the training
# child killed and resumed, the ZeRO runs over gloo, the smoke GPU run, the other
# interpreters). `make test` runs both; the slowest tests are listed at the end.
FAST := -m "not slow and not gpu and not integration"
INTEGRATION := -m "integration and not slow and not gpu"
# The tests run in TEST_WORKERS processes (pytest-xdist), each test file whole in one of them
# (its module fixtures built once); the session's demo data and overfit models are built
# once and shared (tests/conftest_data.py). Each worker's torch and its children keep to one
# OpenMP thread: two workers on two cores, rather than four threads waiting on each other.
# TEST_WORKERS=1 runs them serially, in this process.
TEST_WORKERS ?= 2
XDIST := $(if $(filter 1,$(TEST_WORKERS)),,-n $(TEST_WORKERS) --dist loadfile)
PYTEST := $(if $(XDIST),OMP_NUM_THREADS=1) $(BIN)/python -m pytest -q $(XDIST)

test: $(STAMP) browser venvs lint
	$(PYTEST) --durations=15 $(PYTEST_ARGS)
	$(MAKE) --no-print-directory test-versions

test-fast: $(STAMP) lint
	$(PYTEST) --durations=10 $(FAST) $(PYTEST_ARGS)

test-integration: $(STAMP) browser venvs
	$(PYTEST) --durations=10 $(INTEGRATION) $(PYTEST_ARGS)
	$(MAKE) --no-print-directory test-versions

# The code's own checks (pyproject.toml): ruff's lint and format, and the import layers
# (ARCHITECTURE.md) as import-linter's contract. `make format` applies ruff's fixes.
lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports

format: $(STAMP)
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .

# Debian's chromium, for the tests that open the trace viewer headless (driven by Playwright, no browser download).
browser:
	@command -v chromium >/dev/null 2>&1 || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1 && \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; } || \
	  echo "warning: chromium could not be installed; the HTML rendering test will be skipped"

# The product benchmarks on the shared data (about 10 minutes on 2 cores), then one table.
bench: $(STAMP)
	test -d demo_out/data/codenetmut/codenetmut || $(BIN)/python -m codeexecutor.demo --only data
	$(BIN)/python benchmarks/bench_exec.py
	$(BIN)/python benchmarks/bench_mutation.py
	$(BIN)/python benchmarks/bench_inline.py --programs 1000
	$(BIN)/python benchmarks/bench_build.py --programs 200
	$(BIN)/python benchmarks/bench_generate.py
	$(BIN)/python benchmarks/bench_generate.py --trace-batch
	$(BIN)/python benchmarks/bench_train.py
	$(BIN)/python benchmarks/summary.py

# The compiled row step under the torch a lent GPU runs (the recorded runs': 2.11), rehearsed at
# toy width on the CPU, stage by stage of the GPU recipe: graph breaks and recompiles
# (benchmarks/rehearse_compile.py). Its own environment: that torch, the rest read from .venv. Not in CI.
DEVICE_TORCH ?= 2.11.0
REHEARSAL := .venv-torch$(DEVICE_TORCH)
rehearse: $(STAMP)
	test -x $(REHEARSAL)/bin/python || $(PYTHON) -m venv $(REHEARSAL)
	$(REHEARSAL)/bin/python -c "import torch; assert torch.__version__.startswith('$(DEVICE_TORCH)')" 2>/dev/null || \
	  $(REHEARSAL)/bin/python -m pip install -q --disable-pip-version-check torch==$(DEVICE_TORCH)
	$(BIN)/python -c "import sysconfig; print(sysconfig.get_paths()['purelib'])" > \
	  "$$($(REHEARSAL)/bin/python -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")/_codeexecutor_venv.pth"
	pwd >> "$$($(REHEARSAL)/bin/python -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")/_codeexecutor_venv.pth"
	TORCH_LOGS=recompiles $(REHEARSAL)/bin/python benchmarks/rehearse_compile.py --tokens 2048 \
	  --out benchmarks/results/rehearse-torch-$(DEVICE_TORCH).json

clean:
	rm -rf $(VENV) .venv-3.12 .venv-3.13 .venv-torch* demo_out runs
