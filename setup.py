"""Builds graphlearn_torch and its C++ (and, when enabled, CUDA) extension.

Environment:
  WITH_CUDA=auto|ON|OFF  auto (default): compile csrc/cuda only when torch was
                         built with CUDA and nvcc is found. The CPU build
                         never needs nvcc.
  TORCH_CUDA_ARCH_LIST   the GPU architectures to compile for (default
                         '8.0;9.0': A100, and H100/H200).
  MAX_JOBS=N             parallel compile jobs (ninja).
  GLT_CPU_UNITY=0        each C++ file on its own (by default they compile in
                         as many groups as MAX_JOBS, like the CUDA files:
                         the torch templates they share are compiled once
                         a group; a clean CPU build in 82 s instead of 174 s
                         on 2 cores, an edit recompiling its whole group).
  GLT_CUDA_UNITY=0       each CUDA file on its own (by default they compile in
                         as many groups as MAX_JOBS, each group one file
                         that includes its share: torch's headers, most of
                         a CUDA file's minute, are then parsed once a group).
  GLT_PCH=0              no precompiled header (by default torch's headers,
                         two thirds of each file's compile time, are parsed
                         once into build_temp/pch and included from there).

The C++ standard is the one torch's extension builder asks for (C++20 for
torch >= 2.13, C++17 before).
"""

import glob
import os
import shutil
import subprocess

from setuptools import find_packages, setup
from torch.utils import cpp_extension

ROOT = os.path.dirname(os.path.abspath(__file__))
DEFAULT_CUDA_ARCHS = '8.0;9.0'
# torch's headers that nearly every C++ file includes: precompiled once.
PRECOMPILED_HEADERS = ('ATen/ATen.h', 'torch/library.h')


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
  # Schemas (csrc/ops), CPU kernels (csrc/cpu/<concept>), the shared-memory
  # queue (csrc/shm_queue), bindings; CUDA kernels (csrc/cuda).
  sources = sorted(
    glob.glob('csrc/*.cpp')
    + glob.glob('csrc/ops/*.cpp')
    + glob.glob('csrc/cpu/**/*.cpp', recursive=True)
    + glob.glob('csrc/shm_queue/*.cpp')
  )
  # No debug info unless GLT_DEBUG_INFO=1: Python's own flags ask for it (-g),
  # and torch's headers make it double the build's time.
  debug_info = '-g' if os.environ.get('GLT_DEBUG_INFO') == '1' else '-g0'
  optimize, sanitizers = ['-O3', debug_info], []
  # GLT_SANITIZE=1 (make sanitize): AddressSanitizer and UndefinedBehavior-
  # Sanitizer in the CPU code, for a build kept apart from the package's.
  if os.environ.get('GLT_SANITIZE') == '1':
    optimize = ['-O1', '-g', '-fno-omit-frame-pointer']
    sanitizers = ['-fsanitize=address,undefined', '-fno-sanitize=vptr']
  cxx_flags = [*optimize, '-fopenmp', '-Wall', '-Wno-sign-compare', *sanitizers]
  link_flags = ['-fopenmp', *sanitizers]
  kwargs = dict(
    name='graphlearn_torch._C',
    sources=sources,
    include_dirs=[os.path.join(ROOT, 'csrc')],
    extra_compile_args={'cxx': cxx_flags},
    extra_link_args=link_flags,
  )
  cuda_sources = sorted(glob.glob('csrc/cuda/*.cu'))
  if cuda_enabled() and cuda_sources:
    os.environ.setdefault('TORCH_CUDA_ARCH_LIST', DEFAULT_CUDA_ARCHS)
    kwargs['sources'] = sources + cuda_sources
    kwargs['define_macros'] = [('WITH_CUDA', None)]
    kwargs['extra_compile_args']['cxx'].append('-DWITH_CUDA')
    kwargs['extra_compile_args']['nvcc'] = ['-O3', '--extended-lambda', '-DWITH_CUDA']
    return cpp_extension.CUDAExtension(**kwargs)
  return cpp_extension.CppExtension(**kwargs)


def _write_if_changed(path: str, text: str) -> None:
  # an unchanged file keeps its time, so ninja does not rebuild from it
  if not os.path.exists(path) or open(path).read() != text:
    with open(path, 'w') as f:
      f.write(text)


class BuildExtension(cpp_extension.BuildExtension):
  """torch's BuildExtension plus a precompiled header of torch's headers and
  a check of how the C++ runtime was linked.

  Some toolchains (a CXX wrapper that adds -static-libstdc++, say) put a
  private copy of libstdc++ into the extension. Beside torch's shared C++
  runtime, any C++ exception thrown in the extension then crashes the process
  (seen as a segfault on the first bad input). Fail the build instead.
  """

  def build_extension(self, ext):
    if os.environ.get('GLT_PCH', '1') != '0' and self.compiler.compiler_type == 'unix':
      self.precompile_headers(ext)
    if os.environ.get('GLT_CPU_UNITY', '1') != '0':
      self.group_sources(ext, '.cpp')
    if os.environ.get('GLT_CUDA_UNITY', '1') != '0':
      self.group_sources(ext, '.cu')
    super().build_extension(ext)

  def group_sources(self, ext, suffix: str) -> None:
    """Replaces the extension's ``suffix`` files (C++ or CUDA) by one file
    per parallel job (``MAX_JOBS``, else the cores), each including its
    share of them: what the files share (torch's templates) is compiled
    once per group instead of once per file."""
    files = [s for s in ext.sources if s.endswith(suffix)]
    jobs = int(os.environ.get('MAX_JOBS') or os.cpu_count() or 1)
    groups = min(len(files), max(jobs, 1))
    if groups == len(files):
      return  # a job per file already
    unity_dir = os.path.join(os.path.abspath(self.build_temp), 'unity')
    os.makedirs(unity_dir, exist_ok=True)
    unity = []
    for g in range(groups):
      # distinct stems: a group's object file is named after it
      path = os.path.join(unity_dir, f'{suffix[1:]}_group{g}{suffix}')
      share = files[g::groups]
      _write_if_changed(path, ''.join(f'#include "{os.path.abspath(s)}"\n' for s in share))
      unity.append(path)
    ext.sources = [s for s in ext.sources if not s.endswith(suffix)] + unity

  def precompile_headers(self, ext) -> None:
    """Compiles ``PRECOMPILED_HEADERS`` with the extension's own C++ flags
    (GCC uses a precompiled header only then) into ``build_temp/pch``, and
    makes every C++ file include it first. A header the compiler finds
    unusable is parsed as text instead: slower, never wrong."""
    pch_dir = os.path.join(os.path.abspath(self.build_temp), 'pch')
    os.makedirs(pch_dir, exist_ok=True)
    header = os.path.join(pch_dir, 'glt_pch.h')
    text = ''.join(f'#include <{name}>\n' for name in PRECOMPILED_HEADERS)
    _write_if_changed(header, text)
    # the same text under a name torch's ninja compile accepts as a source
    source = os.path.join(pch_dir, 'glt_pch.cpp')
    _write_if_changed(source, text)
    (compiled,) = self.compiler.compile(
      [source],
      output_dir=self.build_temp,
      macros=ext.define_macros,
      include_dirs=ext.include_dirs,
      debug=self.debug,
      extra_preargs=['-x', 'c++-header'],
      extra_postargs=ext.extra_compile_args,
      depends=ext.depends,
    )
    gch = header + '.gch'
    if os.path.lexists(gch):
      os.remove(gch)
    os.symlink(compiled, gch)
    ext.extra_compile_args['cxx'] = ext.extra_compile_args['cxx'] + ['-include', header]

  def build_extensions(self):
    super().build_extensions()
    readelf = shutil.which('readelf')
    if readelf is None:
      return
    for ext in self.extensions:
      path = self.get_ext_fullpath(ext.name)
      dynamic = subprocess.run([readelf, '-d', path], capture_output=True, text=True).stdout
      if 'libstdc++' not in dynamic and 'libc++' not in dynamic:
        os.remove(path)
        raise RuntimeError(
          f'{path} was linked without the shared C++ runtime (libstdc++.so): the compiler '
          f'({os.environ.get("CXX", "c++")}) links it statically, which crashes on the first C++ '
          'exception next to torch. Build with a compiler that links it dynamically, e.g. '
          'CC=/usr/bin/gcc CXX=/usr/bin/g++ pip install --no-build-isolation -e .'
        )


setup(
  packages=find_packages(include=['graphlearn_torch', 'graphlearn_torch.*']),
  ext_modules=[extension()],
  cmdclass={'build_ext': BuildExtension.with_options(use_ninja=True)},
)
