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

$(STAMP): pyproject.toml uv.lock | $(UV)
	$(UV) sync --frozen
	@touch $(STAMP)

PLAN_SPEC ?= examples/plan-pretrain-70b.yaml
PLAN_OUT ?= out/plan

run: $(STAMP)
	$(VENV)/bin/gpufleet plan $(PLAN_SPEC) --out $(PLAN_OUT)
	@echo "open $(PLAN_OUT)/plan.html (or plan.pdf, plan.md, plan.json)"

# The portal on an emulated cluster with jobs arriving; prints the URL and tokens; Ctrl-C stops.
demo: $(STAMP)
	$(VENV)/bin/gpufleet demo $(DEMO_ARGS)

test: $(STAMP)
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
	$(PY) -m benchmarks

clean:
	rm -rf $(VENV) .tools .mypy_cache .pytest_cache .ruff_cache
