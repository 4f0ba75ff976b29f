# graphlearn_torch: set-up, demo, tests, docs and benchmarks.
#   make demo   set up .venv and train GraphSAGE on 2 partitions (2 trainers, this machine)
#   make test   set up .venv, lint, run the test suite, and (where nvcc is) `make cuda`
#   make cuda   set up .venv-cuda (torch with CUDA) and build the CUDA kernels (no GPU needed)
#   make docs   set up .venv and build the documentation (docs/_build/html)
#   make bench  set up .venv and run the benchmarks (beside GLT and DGL where their venvs are)
#   make glt-peer  set up .venv-glt: GLT 0.2.4, the peer bench_sampler.py measures
#   make device-ext  build the extension for the lent GPU machine's Python and torch, to carry
#   make dgl-peer  set up .venv-dgl: DGL 2.1.0 and GraphBolt, the other peer bench_sampler.py measures
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
TORCH_VERSION ?= 2.13.0
DEMO_ARGS ?=
# The CUDA build: a torch with CUDA in its own venv; CUDA_ARCHS bounds the
# compile time (the package itself defaults to 8.0;9.0).
CUDA_VENV ?= .venv-cuda
CUDA_PY := $(CUDA_VENV)/bin/python
CUDA_TORCH_VERSION ?= 2.14.1
CUDA_HOME ?= /usr/local/cuda
CUDA_ARCHS ?= 9.0

# GLT 0.2.4 (PyPI's CUDA-linked wheel, which runs on a CPU machine) in its own
# venv: it imports as graphlearn_torch too. torch 2.4 is the newest its wheel
# loads with and imports on a machine without a GPU (2.5 fails at import).
GLT_VENV ?= .venv-glt
GLT_PY := $(GLT_VENV)/bin/python

SOURCES := setup.py pyproject.toml $(wildcard csrc/*.h csrc/*.cpp csrc/*/*.h csrc/*/*.cpp csrc/*/*.cu csrc/*/*.cuh)

.PHONY: install demo test lint docs bench clean cuda glt-peer device-ext dgl-peer

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
	@if command -v nvcc >/dev/null; then $(MAKE) cuda; else echo "nvcc not found: the CUDA build (make cuda) is skipped"; fi

$(CUDA_VENV)/.installed:
	test -x $(CUDA_PY) || $(PYTHON) -m venv $(CUDA_VENV)
	$(CUDA_PY) -m pip install -q --upgrade pip
	$(CUDA_PY) -m pip install -q torch==$(CUDA_TORCH_VERSION)
	$(CUDA_PY) -m pip install -q setuptools wheel ninja numpy
	touch $@

# Compile and link with WITH_CUDA=ON into build/cuda, then load the module
# and check that every op has a CUDA kernel. torch's CUDA headers include
# cusparse.h, which the venv's nvidia/cu13 wheel has and the toolkit may not.
cuda: $(CUDA_VENV)/.installed
	CUDA_HOME=$(CUDA_HOME) WITH_CUDA=ON TORCH_CUDA_ARCH_LIST='$(CUDA_ARCHS)' \
	  CPATH="$$($(CUDA_PY) -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')/nvidia/cu13/include$${CPATH:+:$$CPATH}" \
	  $(CUDA_PY) setup.py -q build_ext --build-lib build/cuda/lib --build-temp build/cuda/temp
	$(CUDA_PY) tools/check_cuda_build.py build/cuda/lib

$(GLT_VENV)/.installed:
	test -x $(GLT_PY) || $(PYTHON) -m venv $(GLT_VENV)
	$(GLT_PY) -m pip install -q torch==2.4.1 torch_geometric==2.6.1 numpy
	$(GLT_PY) -m pip install -q --no-deps graphlearn-torch==0.2.4
	touch $@

glt-peer: $(GLT_VENV)/.installed

# DGL 2.1.0 (the newest DGL wheel on PyPI for Python 3.11; its GraphBolt
# library is built for torch 2.0-2.2.1) in its own venv, with the torch and
# torchdata GraphBolt loads with, and numpy < 2 (the wheel's ABI).
DGL_VENV ?= .venv-dgl
DGL_PY := $(DGL_VENV)/bin/python

$(DGL_VENV)/.installed:
	test -x $(DGL_PY) || $(PYTHON) -m venv $(DGL_VENV)
	$(DGL_PY) -m pip install -q torch==2.2.1 'numpy<2' torchdata==0.7.1 pandas pyyaml pydantic psutil
	$(DGL_PY) -m pip install -q dgl==2.1.0
	touch $@

dgl-peer: $(DGL_VENV)/.installed

docs: install
	$(PY) -m sphinx -W --keep-going -b html docs docs/_build/html

bench: install
	$(PY) benchmarks/bench_sampler.py $$(test -x $(GLT_PY) && echo --glt-python $(GLT_PY)) \
	  $$(test -x $(DGL_PY) && echo --dgl-python $(DGL_PY))
	$(PY) benchmarks/bench_link.py
	$(PY) benchmarks/bench_partition.py
	$(PY) benchmarks/bench_channel.py
	$(PY) benchmarks/bench_dist_sampling.py
	$(PY) benchmarks/bench_server_client.py

clean:
	rm -rf build *.egg-info graphlearn_torch/_C*.so docs/_build $(VENV) $(CUDA_VENV) $(GLT_VENV)

# The extension for the lent GPU machine (docs/cuda.md): its python3 is 3.12
# with torch 2.11.0+cu130, the build PyPI serves for torch==2.11.0. Built
# here, in place (graphlearn_torch/_C.cpython-312-*.so), stripped of debug
# sections, and carried there: no device time goes to the build, and a build
# that breaks under that torch breaks here first. DEVICE_PYTHON: a Python
# 3.12 (pyenv's, for one).
DEVICE_PYTHON ?= python3.12
DEVICE_VENV ?= .venv-device
DEVICE_TORCH_VERSION ?= 2.11.0
DEVICE_PY := $(DEVICE_VENV)/bin/python

$(DEVICE_VENV)/.installed:
	test -x $(DEVICE_PY) || $(DEVICE_PYTHON) -m venv $(DEVICE_VENV)
	$(DEVICE_PY) -m pip install -q torch==$(DEVICE_TORCH_VERSION) 'setuptools<82' wheel ninja numpy
	touch $@

device-ext: $(DEVICE_VENV)/.installed
	CUDA_HOME=$(CUDA_HOME) CC=/usr/bin/gcc CXX=/usr/bin/g++ WITH_CUDA=ON TORCH_CUDA_ARCH_LIST='$(CUDA_ARCHS)' \
	  CPATH="$$($(DEVICE_PY) -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')/nvidia/cu13/include$${CPATH:+:$$CPATH}" \
	  $(DEVICE_PY) setup.py -q build_ext --inplace --build-temp build/device/temp
	strip --strip-debug graphlearn_torch/_C.cpython-312-*.so
	$(DEVICE_PY) tools/check_cuda_build.py .
