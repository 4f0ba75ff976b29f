"""Builds the host harness (csrc/testing/host_harness.cpp): the CUDA kernels'
code run on the CPU with OpenMP threads, so that the tests check what the GPU
runs on a machine without one. Compiled once per checkout into
build/host_harness (about 45 s on 2 cores)."""

import functools
import pathlib

ROOT = pathlib.Path(__file__).resolve().parent.parent


@functools.cache
def load_harness():
  from torch.utils import cpp_extension

  build = ROOT / 'build' / 'host_harness'
  build.mkdir(parents=True, exist_ok=True)
  return cpp_extension.load(
    name='glt_host_harness',
    sources=[str(ROOT / 'csrc' / 'testing' / 'host_harness.cpp')],
    extra_include_paths=[str(ROOT / 'csrc')],
    extra_cflags=['-O2', '-fopenmp'],
    extra_ldflags=['-fopenmp'],
    build_directory=str(build),
  )
