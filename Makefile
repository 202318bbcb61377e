# Two entry points: `make demo` and `make test`. Both create or refresh .venv/ and install
# everything (torch==2.13.0 first: the CPU wheel on the machine; then pinned requirements),
# so they work on a fresh machine. Nothing is downloaded at run time.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test venv bench clean browser

$(STAMP): requirements.txt pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --disable-pip-version-check torch==2.13.0
	$(BIN)/pip install -q --disable-pip-version-check -r requirements.txt
	$(BIN)/pip install -q --disable-pip-version-check --no-deps -e .
	touch $(STAMP)

venv: $(STAMP)

demo: $(STAMP)
	$(BIN)/python -m codeexecutor.demo

test: $(STAMP) browser
	$(BIN)/python -m pytest -q $(PYTEST_ARGS)

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

clean:
	rm -rf $(VENV) demo_out runs
