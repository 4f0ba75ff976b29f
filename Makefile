# graphlearn_torch: set-up, demo, tests, docs and benchmarks.
#   make demo   set up .venv and train GraphSAGE on 2 partitions (2 trainers, this machine)
#   make test   set up .venv, lint, run the test suite, and (where nvcc is) `make cuda`
#   make test-fast  lint and the tests not marked slow (no spawned processes or builds)
#   make cuda   set up .venv-cuda (torch with CUDA) and build the CUDA kernels (no GPU needed)
#   make docs   set up .venv and build the documentation (docs/_build/html)
#   make bench  set up .venv and run the benchmarks (beside PyG, GLT and DGL where their venvs are)
#   make bench-report  render docs/benchmarks.md and its charts from benchmarks/results
#   make glt-peer  set up .venv-glt: GLT 0.2.4, a peer the benchmarks measure
#   make dgl-peer  set up .venv-dgl: DGL 2.1.0 and GraphBolt, peers the benchmarks measure
#   make pyg-peer  set up .venv-pyg: PyG with pyg-lib built from ../shared/peers
#   make device-ext  build the extension for a GPU machine's Python and torch, to carry there
#   make device-preflight  run the GPU checks' tests on that Python and torch here (no GPU needed)
#   make sanitize  the fast tests and the kernels' host harness under ASan and UBSan
#   make glt-gpu-peer  build GLT 0.2.4 with its CUDA kernels for that machine (build/glt-gpu/pkg)
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

SOURCES := setup.py pyproject.toml $(wildcard csrc/*.h csrc/*.cpp csrc/*/*.h csrc/*/*.cpp csrc/*/*/*.h csrc/*/*/*.cpp csrc/*/*.cu csrc/*/*.cuh)

.PHONY: install demo test test-fast lint docs bench bench-report clean cuda glt-peer device-ext dgl-peer pyg-peer glt-gpu-peer device-preflight sanitize

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

# After the suite, the CUDA build where nvcc is and the disk has room for it
# (CUDA_NEEDS_GB: torch with CUDA in its venv and the build; less once the
# venv is there). Without either it is skipped, and says why.
CUDA_NEEDS_GB ?= $$(test -e $(CUDA_VENV)/.installed && echo 3 || echo 10)
test: lint
	$(PY) -m pytest -q -rs
	@free_gb=$$(df -Pk . | awk 'NR == 2 { print int($$4 / 1048576) }'); \
	if ! command -v nvcc >/dev/null; then echo "nvcc not found: the CUDA build (make cuda) is skipped"; \
	elif [ "$$free_gb" -lt "$(CUDA_NEEDS_GB)" ]; then \
	  echo "$$free_gb GB free on this disk, make cuda needs about $(CUDA_NEEDS_GB): the CUDA build is skipped"; \
	else $(MAKE) cuda; fi

# The inner loop: everything but the tests marked slow (spawned processes,
# builds, whole examples), in a few minutes.
test-fast: lint
	$(PY) -m pytest -q -rs -m 'not slow'

$(CUDA_VENV)/.installed:
	test -x $(CUDA_PY) || $(PYTHON) -m venv $(CUDA_VENV)
	$(CUDA_PY) -m pip install -q --upgrade pip
	$(CUDA_PY) -m pip install -q --no-cache-dir --no-compile torch==$(CUDA_TORCH_VERSION)
	$(CUDA_PY) -m pip install -q --no-cache-dir --no-compile setuptools wheel ninja numpy
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

# PyG's own sampler: torch (our version), torch_geometric, and pyg-lib 0.9.0
# built from its source in ../shared/peers (about 20 minutes on 2 cores).
# pyg-lib's CMake reads torch's C++ ABI with the first python3 on the path:
# the venv's, whose torch it builds against.
PYG_VENV ?= .venv-pyg
PYG_PY := $(PYG_VENV)/bin/python
PYG_LIB_SRC ?= ../shared/peers/pyg-lib-0.9.0-src.tar.gz

$(PYG_VENV)/.installed:
	test -x $(PYG_PY) || $(PYTHON) -m venv $(PYG_VENV)
	$(PYG_PY) -m pip install -q --upgrade pip
	$(PYG_PY) -m pip install -q torch==$(TORCH_VERSION)
	$(PYG_PY) -m pip install -q setuptools wheel ninja cmake numpy torch_geometric
	rm -rf $(PYG_VENV)/src && mkdir -p $(PYG_VENV)/src
	tar -xzf $(PYG_LIB_SRC) -C $(PYG_VENV)/src
	cd $(PYG_VENV)/src/pyg-lib-* && PATH=$(abspath $(PYG_VENV))/bin:$$PATH \
	  $(abspath $(PYG_PY)) -m pip install -q --no-build-isolation --no-deps .
	$(PYG_PY) -c 'import torch_geometric.typing as t; assert t.WITH_PYG_LIB, "pyg-lib does not load"'
	touch $@

pyg-peer: $(PYG_VENV)/.installed

docs: install
	$(PY) -m sphinx -W --keep-going -b html docs docs/_build/html

# Every benchmark, each writing benchmarks/results/<name>.json (the peers'
# venvs where they are set up), then the page rendered from the results.
PEER_FLAGS = $$(test -x $(GLT_PY) && echo --glt-python $(GLT_PY)) \
  $$(test -x $(DGL_PY) && echo --dgl-python $(DGL_PY))
bench: install
	$(PY) benchmarks/bench_sampler.py $(PEER_FLAGS) $$(test -x $(PYG_PY) && echo --pyg-python $(PYG_PY))
	$(PY) benchmarks/bench_temporal.py $$(test -x $(PYG_PY) && echo --pyg-python $(PYG_PY))
	$(PY) benchmarks/bench_contention.py $(PEER_FLAGS)
	$(PY) benchmarks/bench_link.py $$(test -x $(PYG_PY) && echo --pyg-python $(PYG_PY))
	$(PY) benchmarks/bench_partition.py
	$(PY) benchmarks/bench_partition_quality.py
	$(PY) benchmarks/bench_partition_large.py
	$(PY) benchmarks/bench_partition_locality.py
	$(PY) benchmarks/bench_channel.py
	$(PY) benchmarks/bench_dist_sampling.py $$(test -x $(GLT_PY) && echo --glt-python $(GLT_PY))
	$(PY) benchmarks/bench_dist_sampling.py --temporal
	$(PY) benchmarks/profile_dist_rpc.py
	$(PY) benchmarks/bench_server_client.py
	$(PY) benchmarks/fault_suite.py
	if [ "$$(id -u)" = 0 ]; then $(PY) benchmarks/bench_multihost.py; fi
	$(MAKE) bench-report

bench-report: install
	$(PY) -c 'import matplotlib' 2>/dev/null || $(PY) -m pip install -q matplotlib
	$(PY) benchmarks/report.py

clean:
	rm -rf build *.egg-info graphlearn_torch/_C*.so docs/_build $(VENV) $(CUDA_VENV) $(GLT_VENV) $(DGL_VENV) $(PYG_VENV)

# The extension for the GPU machine (docs/cuda.md): its python3 is 3.12
# with torch 2.11.0+cu130, the build PyPI serves for torch==2.11.0. Built
# here, in place (graphlearn_torch/_C.cpython-312-*.so), stripped of debug
# sections, and carried there: the GPU machine spends no time building, and a build
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
	$(DEVICE_PY) tools/check_cuda_build.py --stamp write .

# What the GPU machine's checks (tools/gpu_check.sh) run, run here first on
# its Python and torch with the extension device-ext built: the parts that
# need no GPU (the rest skip), so that a failure the Python or torch version
# alone causes shows here. The package is found through a .pth file, not
# PYTHONPATH, which the peers' own interpreters would inherit.
DEVICE_TEST_PACKAGES ?= torch-geometric==2.8.1 pytest pytest-timeout psutil pyyaml paramiko scipy
DEVICE_TESTS ?= test/test_gpu_data_path.py test/test_gpu_sharing.py test/test_gather_checks.py \
  test/test_channel.py test/test_device_mirror.py \
  test/test_examples_smoke.py test/test_gpu_syncs.py test/test_whole_batch.py \
  test/test_partitioned_batch.py test/test_launched_batches.py test/test_concurrent_batches.py \
  test/test_cuda_kernels.py test/test_dist_fault.py test/test_resume_examples.py \
  test/test_benchmarks_smoke.py -k 'not test_benchmarks_smoke or gpu or dist_sampling or dist_memory or bench_sampler or fault_suite'
device-preflight: $(DEVICE_VENV)/.installed
	$(DEVICE_PY) tools/check_cuda_build.py --stamp check . || \
	  { echo 'the extension is missing or older than the sources: make device-ext first'; exit 1; }
	$(DEVICE_PY) -m pip install -q $(DEVICE_TEST_PACKAGES)
	if ls .whl/*.whl >/dev/null 2>&1; then $(DEVICE_PY) -m pip install -q --no-index --no-deps .whl/*.whl; fi
	echo $(CURDIR) > "$$($(DEVICE_PY) -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')/graphlearn_torch_tree.pth"
	CC=/usr/bin/gcc CXX=/usr/bin/g++ $(DEVICE_PY) -m pytest -q -rs -p no:cacheprovider --timeout 900 $(DEVICE_TESTS)

# The CPU code and the CUDA kernels' bodies under AddressSanitizer and
# UndefinedBehaviorSanitizer: the package built apart (build/sanitized,
# GLT_SANITIZE=1 in setup.py) and the fast tests run against it, then every
# C++ entry point given bad arguments (test/test_op_inputs.py) and the host
# harness's tests with the harness built so (test/kernel_harness.py,
# GLT_HARNESS_SANITIZE=1); the first report stops the run. What
# compute-sanitizer's memcheck finds in a kernel on a GPU, found here first.
HARNESS_TESTS ?= test/test_kernel_bodies.py test/test_gather_bodies.py test/test_hop_induce_bodies.py \
  test/test_hop_pieces_bodies.py \
  test/test_partition_kernel_bodies.py test/test_temporal_kernel.py test/test_whole_batch.py \
  test/test_launched_batches.py
SANITIZED_PYTEST = GLT_HARNESS_SANITIZE=1 PYTHONPATH=$(CURDIR)/build/sanitized/lib \
  ASAN_OPTIONS=detect_leaks=0:alloc_dealloc_mismatch=0 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
  LD_PRELOAD="$$(gcc -print-file-name=libasan.so) $$(gcc -print-file-name=libubsan.so)" \
  $(PY) -m pytest -q -p no:cacheprovider --capture=sys
sanitize: install
	GLT_SANITIZE=1 $(PY) setup.py -q build --build-lib build/sanitized/lib --build-temp build/sanitized/temp
	$(SANITIZED_PYTEST) -m 'not slow'
	$(SANITIZED_PYTEST) test/test_op_inputs.py $(HARNESS_TESTS)

# GLT 0.2.4 from ../shared/peers with its CUDA kernels, for the same GPU
# machine (tools/build_glt_gpu_peer.sh; its patches: benchmarks/peers/glt_cuda):
# build/glt-gpu/pkg, which the GPU benchmarks run beside ours (--glt-gpu).
glt-gpu-peer: $(DEVICE_VENV)/.installed
	CUDA_HOME=$(CUDA_HOME) CUDA_ARCHS='$(CUDA_ARCHS)' DEVICE_PY=$(DEVICE_PY) tools/build_glt_gpu_peer.sh
