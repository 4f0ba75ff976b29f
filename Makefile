# graphlearn_torch: set-up, demo, tests, docs and benchmarks.
#   make demo   set up .venv and train GraphSAGE on 2 partitions (2 trainers, this machine)
#   make test   set up .venv, lint, and run the test suite
#   make docs   set up .venv and build the documentation (docs/_build/html)
#   make bench  set up .venv and run the benchmarks
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
TORCH_VERSION ?= 2.13.0
DEMO_ARGS ?=

SOURCES := setup.py pyproject.toml $(wildcard csrc/*.h csrc/*.cpp csrc/*/*.h csrc/*/*.cpp csrc/*/*.cu)

.PHONY: install demo test lint docs bench clean

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
	$(PY) examples/distributed/dist_train_sage_supervised.py $(DEMO_ARGS)

lint: install
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .

test: lint
	$(PY) -m pytest -q -rs

docs: install
	$(PY) -m sphinx -W --keep-going -b html docs docs/_build/html

bench: install
	$(PY) benchmarks/bench_sampler.py
	$(PY) benchmarks/bench_link.py
	$(PY) benchmarks/bench_partition.py
	$(PY) benchmarks/bench_channel.py
	$(PY) benchmarks/bench_dist_sampling.py
	$(PY) benchmarks/bench_server_client.py

clean:
	rm -rf build *.egg-info graphlearn_torch/_C*.so docs/_build $(VENV)
