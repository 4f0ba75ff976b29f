# graphlearn_torch: set-up, demo, tests and benchmarks.
#   make demo   set up .venv and train GraphSAGE with our NeighborLoader
#   make test   set up .venv, lint, and run the test suite
#   make bench  set up .venv and run the benchmarks
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
TORCH_VERSION ?= 2.13.0
SHARED ?= ../shared/datasets
DEMO_ARGS ?= $(if $(wildcard $(SHARED)/planetoid/ind.cora.graph),--dataset cora --root $(SHARED)/planetoid --epochs 50,--dataset synthetic)

SOURCES := setup.py pyproject.toml $(wildcard csrc/*.h csrc/*.cpp csrc/*/*.h csrc/*/*.cpp csrc/*/*.cu)

.PHONY: install demo test lint bench clean

# torch is pinned and installed first, so nothing pulls a CUDA build of it;
# the package is then built against it with --no-build-isolation.
$(VENV)/.installed: $(SOURCES)
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q torch==$(TORCH_VERSION)
	$(PY) -m pip install -q setuptools wheel ninja
	$(PY) -m pip install -q --no-build-isolation -e '.[test]'
	touch $@

install: $(VENV)/.installed

demo: install
	$(PY) examples/train_sage.py $(DEMO_ARGS)

lint: install
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .

test: lint
	$(PY) -m pytest -q -rs

bench: install
	$(PY) benchmarks/bench_sampler.py
	$(PY) benchmarks/bench_link.py
	$(PY) benchmarks/bench_partition.py
	$(PY) benchmarks/bench_channel.py
	$(PY) benchmarks/bench_dist_sampling.py

clean:
	rm -rf build *.egg-info graphlearn_torch/_C*.so $(VENV)
