# The two set-up commands: `make demo` and `make test`. Each creates .venv on first use.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/prhsim run --world gridscene --modalities 3

# PYTHONDONTWRITEBYTECODE is cleared for the suite: its workers and its many subprocesses then compile each module
# once instead of each on its own (where the environment sets it: the suite 273 s -> 217 s on 2 cores).
test: $(STAMP)
	PYTHONDONTWRITEBYTECODE= $(BIN)/python -m pytest -n auto --maxprocesses 4 --dist worksteal

bench: $(STAMP)
	$(BIN)/python benchmarks/bench_run.py
	$(BIN)/python benchmarks/bench_injectivity.py
	$(BIN)/python benchmarks/bench_kronecker.py
	$(BIN)/python benchmarks/bench_sparse.py
	$(BIN)/python benchmarks/bench_sigreg.py
	$(BIN)/python benchmarks/bench_vmap_seeds.py
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
	rm -rf $(VENV) runs .pytest_cache .hypothesis
