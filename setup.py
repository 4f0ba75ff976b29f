"""Builds graphlearn_torch and its C++ (and, when enabled, CUDA) extension.

Environment:
  WITH_CUDA=auto|ON|OFF  auto (default): compile csrc/cuda only when torch was
                         built with CUDA and nvcc is found. The CPU build
                         never needs nvcc.
  MAX_JOBS=N             parallel compile jobs (ninja).
"""

import glob
import os

from setuptools import find_packages, setup
from torch.utils import cpp_extension

ROOT = os.path.dirname(os.path.abspath(__file__))


def cuda_enabled() -> bool:
  flag = os.environ.get('WITH_CUDA', 'auto').strip().lower()
  if flag in ('off', '0', 'false', 'no'):
    return False
  import torch

  available = torch.version.cuda is not None and cpp_extension.CUDA_HOME is not None
  if flag in ('on', '1', 'true', 'yes'):
    if not available:
      raise RuntimeError('WITH_CUDA=ON but torch has no CUDA or nvcc was not found')
    return True
  return available


def extension():
  sources = sorted(glob.glob('csrc/*.cpp') + glob.glob('csrc/cpu/*.cpp'))
  cxx_flags = ['-O3', '-std=c++17', '-fopenmp', '-Wall', '-Wno-sign-compare']
  kwargs = dict(
    name='graphlearn_torch._C',
    sources=sources,
    include_dirs=[os.path.join(ROOT, 'csrc')],
    extra_compile_args={'cxx': cxx_flags},
    extra_link_args=['-fopenmp'],
  )
  cuda_sources = sorted(glob.glob('csrc/cuda/*.cu') + glob.glob('csrc/cuda/*.cpp'))
  if cuda_enabled() and cuda_sources:
    kwargs['sources'] = sources + cuda_sources
    kwargs['define_macros'] = [('WITH_CUDA', None)]
    kwargs['extra_compile_args']['cxx'].append('-DWITH_CUDA')
    kwargs['extra_compile_args']['nvcc'] = ['-O3', '-std=c++17', '--expt-extended-lambda']
    return cpp_extension.CUDAExtension(**kwargs)
  return cpp_extension.CppExtension(**kwargs)


setup(
  packages=find_packages(include=['graphlearn_torch', 'graphlearn_torch.*']),
  ext_modules=[extension()],
  cmdclass={'build_ext': cpp_extension.BuildExtension.with_options(use_ninja=True)},
)
