# gpufleet developer loop. `make run` and `make test` work on a machine with only
# python3, make and git: uv is bootstrapped into .tools/ when it is not on PATH.
SHELL := /bin/bash
.DEFAULT_GOAL := run

UV ?= $(shell command -v uv 2>/dev/null || echo $(CURDIR)/.tools/bin/uv)
VENV := .venv
STAMP := $(VENV)/.synced
PY := $(VENV)/bin/python
export UV_PYTHON_DOWNLOADS := never
# Trust the machine's CA store, as pip and curl do (TLS-inspecting proxies, private mirrors).
export UV_SYSTEM_CERTS ?= 1

.PHONY: run demo test check lint typecheck format bench clean

$(UV):
	python3 scripts/bootstrap_uv.py $(dir $(UV))

# Bytecode is compiled here and before each run: where PYTHONDONTWRITEBYTECODE is set (as on
# the project's CI machine) Python still reads .pyc files but never writes them, and every
# process would compile ~1,100 modules again (1.2 s for `gpufleet --help`, 0.5 s with them;
# 2 s of each multi-team plan). compileall only rewrites files that changed.
$(STAMP): pyproject.toml uv.lock | $(UV)
	$(UV) sync --frozen --compile-bytecode
	@touch $(STAMP)

BYTECODE = @$(PY) -m compileall -q -j 0 src >/dev/null

PLAN_SPEC ?= examples/plan-pretrain-70b.yaml
PLAN_OUT ?= out/plan

run: $(STAMP)
	$(BYTECODE)
	$(VENV)/bin/gpufleet plan $(PLAN_SPEC) --out $(PLAN_OUT)
	@echo "open $(PLAN_OUT)/plan.html (or plan.pdf, plan.md, plan.json)"

# The portal on an emulated cluster with jobs arriving; prints the URL and tokens; Ctrl-C stops.
demo: $(STAMP)
	$(BYTECODE)
	$(VENV)/bin/gpufleet demo $(DEMO_ARGS)

test: $(STAMP)
	$(BYTECODE)
	$(PY) -m pytest -q -n auto

lint: $(STAMP)
	$(VENV)/bin/ruff format --check src tests scripts benchmarks
	$(VENV)/bin/ruff check src tests scripts benchmarks

typecheck: $(STAMP)
	$(VENV)/bin/mypy src

check: lint typecheck test

format: $(STAMP)
	$(VENV)/bin/ruff format src tests scripts benchmarks
	$(VENV)/bin/ruff check --fix src tests scripts benchmarks

bench: $(STAMP)
	$(BYTECODE)
	$(PY) -m benchmarks

clean:
	rm -rf $(VENV) .tools .mypy_cache .pytest_cache .ruff_cache
