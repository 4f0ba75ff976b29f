"""Builds the host harness (csrc/testing/host_harness.cpp): the CUDA kernels'
code run on the CPU with OpenMP threads, so that the tests check what the GPU
runs on a machine without one. Compiled once per checkout, Python and torch
into build/host_harness/<python>-<torch> (about 45 s on 2 cores): test runs
under two environments never load each other's build.

With GLT_HARNESS_SANITIZE=1 it is compiled with AddressSanitizer and
UndefinedBehaviorSanitizer instead (build/host_harness_sanitized): the
kernels' out-of-bounds reads and writes, as compute-sanitizer's memcheck
finds them on a GPU, found here. The process must load the sanitizer
runtime first: `make sanitize` runs the harness tests so."""

import functools
import os
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent


@functools.cache
def load_harness():
  from torch.utils import cpp_extension

  sanitize = os.environ.get('GLT_HARNESS_SANITIZE') == '1'
  # the sanitizers of setup.py's GLT_SANITIZE build
  flags = ['-fsanitize=address,undefined', '-fno-sanitize=vptr'] if sanitize else []
  optimize = ['-O1', '-fno-omit-frame-pointer'] if sanitize else ['-O2']
  import torch

  env = f'py{sys.version_info[0]}{sys.version_info[1]}-torch{torch.__version__}'
  build = ROOT / 'build' / ('host_harness_sanitized' if sanitize else 'host_harness') / env
  build.mkdir(parents=True, exist_ok=True)
  return cpp_extension.load(
    name='glt_host_harness_sanitized' if sanitize else 'glt_host_harness',
    sources=[str(ROOT / 'csrc' / 'testing' / 'host_harness.cpp')],
    extra_include_paths=[str(ROOT / 'csrc')],
    extra_cflags=[*optimize, '-fopenmp', *flags],
    extra_ldflags=['-fopenmp', *flags],
    build_directory=str(build),
  )
