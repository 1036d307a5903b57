# The two set-up commands: `make demo` and `make test`. Each creates .venv on first use.
# `make test-core` runs the same suite in .venv-core, which holds the core dependencies alone (no JAX, no torch).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
CORE_VENV := .venv-core
CORE_BIN := $(CORE_VENV)/bin
CORE_STAMP := $(CORE_VENV)/.installed
PYTEST := python -m pytest -n auto --maxprocesses 4 --dist worksteal

.PHONY: demo test test-core bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test]'
	touch $(STAMP)

$(CORE_STAMP): pyproject.toml
	$(PYTHON) -m venv $(CORE_VENV)
	$(CORE_BIN)/python -m pip install --quiet --upgrade pip
	$(CORE_BIN)/python -m pip install --quiet -e '.[test-core]'
	touch $(CORE_STAMP)

demo: $(STAMP)
	$(BIN)/prhsim run --world gridscene --modalities 3

# PYTHONDONTWRITEBYTECODE is cleared for the suite: its workers and its many subprocesses then compile each module
# once instead of each on its own (where the environment sets it: the suite 273 s -> 217 s on 2 cores).
test: $(STAMP)
	PYTHONDONTWRITEBYTECODE= $(BIN)/$(PYTEST)

# The core suite: the tests that need an optional package (jax, torch, ...) skip, the rest must pass without them.
test-core: $(CORE_STAMP)
	PYTHONDONTWRITEBYTECODE= $(CORE_BIN)/$(PYTEST)

bench: $(STAMP)
	$(BIN)/python benchmarks/bench_run.py
	$(BIN)/python benchmarks/bench_injectivity.py
	$(BIN)/python benchmarks/bench_kronecker.py
	$(BIN)/python benchmarks/bench_sparse.py
	$(BIN)/python benchmarks/bench_sigreg.py
	$(BIN)/python benchmarks/bench_vmap_seeds.py
	$(BIN)/python benchmarks/bench_sweep_workers.py --quick
	$(BIN)/python benchmarks/bench_sample_efficiency.py
	$(BIN)/python benchmarks/bench_knn.py
	$(BIN)/python benchmarks/bench_knn_gpu.py
	$(BIN)/python benchmarks/bench_convergence.py
	$(BIN)/python benchmarks/bench_minibatch_bias.py
	$(BIN)/python benchmarks/bench_calibrate.py
	$(BIN)/python benchmarks/bench_calibrate_vs_reference.py --threads 1
	$(BIN)/python benchmarks/bench_real_step.py
	$(BIN)/python benchmarks/bench_extract.py

clean:
	rm -rf $(VENV) $(CORE_VENV) runs .pytest_cache .hypothesis
