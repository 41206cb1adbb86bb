# Cascade developer targets. `make demo` and `make test` are the README's two commands.
VENV := .venv
BIN := $(VENV)/bin
PYTEST ?= $(BIN)/pytest
# Test modules with `gpu` tests; `make test-gpu` collects only these (the rest import the
# cluster stack, which a bare GPU machine need not have).
GPU_TESTS ?= tests/unit/test_engine_cuda.py
NODES ?= 4
EXAMPLE ?= examples/01-minimal
# pytest-xdist workers of `make test`: the cluster tests run in order on one (one dev
# cluster, tests/conftest.py) while the unit tier runs beside them.
TEST_WORKERS ?= 2
export PATH := $(CURDIR)/$(BIN):$(PATH)

.PHONY: setup crds lint test test-unit test-gpu test-integration test-helm test-packaging demo down clean

setup:
	bash hack/setup.sh

crds: setup
	$(BIN)/python -m cascade_api.crd

lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/lint-imports

test: setup lint
	$(BIN)/pytest -m "not slow" -q -n $(TEST_WORKERS) --durations=30

test-unit: setup
	$(BIN)/pytest tests/unit -q

test-gpu:  # where a CUDA device is: the engine on it (hack/gpu-check.sh runs this and the benches)
	$(PYTEST) -m gpu $(GPU_TESTS) -q -p no:cacheprovider -rA

test-integration: setup
	$(BIN)/pytest -m integration -q

test-helm: setup
	$(BIN)/pytest -m helm -q

# Resolves '.[gateway]', '.[operator]', '.[worker]' into a fresh venv with pip (PyPI).
test-packaging: setup
	$(BIN)/pytest -m packaging -q

demo: setup
	bash hack/demo.sh $(NODES) $(EXAMPLE)

down:
	$(BIN)/cascade dev down

clean: down
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache
