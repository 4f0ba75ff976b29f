"""The package installs as users install it: an sdist that carries csrc/ and
builds, and a wheel built from that sdist that installs into a fresh venv
(torch first, as the README says) and samples, imported from outside the
checkout.

One test, about 2.5 minutes on 2 cores (the extension compiles once, and the
fresh venv installs torch and the dependencies from the package registry).
"""

import os
import re
import shutil
import subprocess
import sys
import tarfile
import textwrap
from pathlib import Path

import pytest
import torch

# Spawned processes or builds: left out of make test-fast.
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
# What a copy of the checkout leaves out: build outputs and environments.
NOT_SOURCES = shutil.ignore_patterns(
  '.git', '.venv*', 'build', 'dist', '*.egg-info', '*.so', '__pycache__', '_build', '.*_cache'
)

# Run in the fresh venv, from a directory outside the checkout: the package
# imports from the venv, its extension loads, and a loader samples a graph
# whose neighbourhoods a brute force gives.
SMOKE = textwrap.dedent(
  """
  import sys
  import torch
  import graphlearn_torch as glt
  from graphlearn_torch import _C  # the compiled extension
  venv = sys.argv[1]
  assert glt.__file__.startswith(venv), glt.__file__
  assert _C.__file__.startswith(venv), _C.__file__
  rows = torch.arange(100).repeat_interleave(3)
  cols = (rows * 7 + torch.arange(300) % 3 + 1) % 100
  edge_index = torch.stack([rows, cols])
  ds = glt.data.Dataset(edge_dir='out')
  ds.init_graph(edge_index, graph_mode='CPU', num_nodes=100)
  ds.init_node_features(torch.arange(100, dtype=torch.float32).view(-1, 1))
  loader = glt.loader.NeighborLoader(ds, [-1], torch.arange(100), batch_size=10)
  seen = set()
  for batch in loader:
    src = batch.node[batch.edge_index[1]]
    dst = batch.node[batch.edge_index[0]]
    assert torch.equal(batch.x.view(-1).long(), batch.node)
    seen.update(zip(src.tolist(), dst.tolist()))
  assert seen == set(zip(rows.tolist(), cols.tolist())), 'every edge, once per seed'
  print('sampled', len(seen), 'edges from', glt.__file__)
  """
)


def run(cmd, cwd, timeout, env=None):
  done = subprocess.run(
    [str(c) for c in cmd], cwd=cwd, capture_output=True, text=True, timeout=timeout, env=env
  )
  assert done.returncode == 0, f'{cmd}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}'
  return done.stdout


@pytest.mark.timeout(2400)
def test_sdist_and_wheel_install_into_a_fresh_venv(tmp_path):
  pytest.importorskip('build', reason='the `build` package (pip install build) is not installed')
  src = tmp_path / 'checkout'
  shutil.copytree(ROOT, src, ignore=NOT_SOURCES)

  # The sdist carries every C++/CUDA source and header of csrc/.
  dist = tmp_path / 'dist'
  run([sys.executable, '-m', 'build', '--sdist', '--no-isolation', '-o', dist, '.'], src, 300)
  (sdist,) = dist.glob('*.tar.gz')
  with tarfile.open(sdist) as tar:
    packed = {Path(*Path(n).parts[1:]).as_posix() for n in tar.getnames()}
  csrc = {p.relative_to(src).as_posix() for p in (src / 'csrc').rglob('*') if p.is_file()}
  assert csrc and csrc <= packed, f'missing from the sdist: {sorted(csrc - packed)}'
  assert 'graphlearn_torch/__init__.py' in packed and 'pyproject.toml' in packed

  # The wheel builds from the sdist alone (CPU kernels).
  env = dict(os.environ, WITH_CUDA='OFF', MAX_JOBS=os.environ.get('MAX_JOBS', '2'))
  pip = [sys.executable, '-m', 'pip', 'wheel', '--no-build-isolation', '--no-deps', '-q']
  run([*pip, '-w', dist, sdist], tmp_path, 1200, env)
  (wheel,) = dist.glob('*.whl')

  # A fresh venv: torch first (never an unpinned one), then the wheel. No
  # PYTHONPATH: pip would take a checkout on it for an installed package.
  venv = tmp_path / 'venv'
  fresh = {k: v for k, v in os.environ.items() if k not in ('PYTHONPATH', 'VIRTUAL_ENV')}
  run([sys.executable, '-m', 'venv', venv], tmp_path, 120, fresh)
  py = venv / 'bin' / 'python'
  torch_pin = f'torch=={torch.__version__.split("+")[0]}'
  # No bytecode compiled at install (imports compile what they load).
  install = [py, '-m', 'pip', 'install', '-q', '--no-compile']
  run([*install, torch_pin], tmp_path, 600, fresh)
  run([*install, wheel], tmp_path, 600, fresh)
  (tmp_path / 'outside').mkdir()
  out = run([py, '-c', SMOKE, venv], tmp_path / 'outside', 300, fresh)
  assert 'sampled 300 edges' in out, out


# C++20 names, headers and syntax that a C++17 build rejects (see
# test_csrc_builds_as_cxx17); comments and string literals are not read.
CXX20_ONLY = [
  (
    r'std::(atomic_ref|span|bit_cast|popcount|countl_zero|countr_zero|countl_one|countr_one|'
    r'has_single_bit|bit_width|bit_ceil|bit_floor|ranges|views|jthread|stop_token|format|'
    r'source_location|midpoint|lerp|to_address|assume_aligned|is_constant_evaluated|erase_if|'
    r'ssize|remove_cvref|remove_cvref_t|type_identity|endian|counting_semaphore|'
    r'binary_semaphore|latch|barrier|numbers|strong_ordering|weak_ordering|partial_ordering)\b',
    'a C++20 library name',
  ),
  (
    r'#\s*include\s*<(bit|span|ranges|concepts|compare|format|source_location|numbers|'
    r'semaphore|latch|barrier|stop_token|coroutine|version)>',
    'a C++20 header',
  ),
  (r'<=>', 'the three-way comparison'),
  (r'\b(concept|requires|consteval|constinit|co_await|co_yield|co_return|char8_t)\b', 'a keyword'),
  (r'\[\[\s*(likely|unlikely|no_unique_address)\s*\]\]', 'a C++20 attribute'),
  (r'\.(contains|starts_with|ends_with)\(', 'a C++20 member function'),
]


def cxx_code(text: str) -> str:
  r"""``text`` (C++) without its comments and string literals, lines kept."""
  text = re.sub(r'/\*.*?\*/', lambda m: '\n' * m.group(0).count('\n'), text, flags=re.S)
  text = re.sub(r'"(\\.|[^"\\\n])*"', '""', text)
  return re.sub(r'//[^\n]*', '', text)


def cxx20_uses(root: Path) -> list:
  r"""``path:line: what`` for each C++20-only construct in ``root``'s sources."""
  found = []
  for path in sorted(root.rglob('*')):
    if path.suffix not in ('.h', '.cpp', '.cu', '.cuh'):
      continue
    for number, line in enumerate(cxx_code(path.read_text()).split('\n'), 1):
      found += [f'{path}:{number}: {what}' for pat, what in CXX20_ONLY if re.search(pat, line)]
  return found


def test_csrc_builds_as_cxx17(tmp_path):
  r"""torch before 2.13 builds extensions as C++17 (the GPU machines' torch 2.11
  among them; a C++20 std::atomic_ref broke that build), so csrc stays C++17.
  torch 2.13's own headers need C++20, so no compiler here can check it: the
  sources are searched for what C++17 lacks instead."""
  planted = tmp_path / 'planted.cpp'
  planted.write_text('// std::span in a comment\nstd::atomic_ref<int> r(x);\n')
  assert cxx20_uses(tmp_path) == [f'{planted}:2: a C++20 library name']
  assert cxx20_uses(ROOT / 'csrc') == []


# ATen's and OpenMP's parallel loops: their threads spin at a region's end for
# a descheduled one, which costs three quarters of the sampler's speed beside
# one busy process. csrc/cpu/runtime/parallel.h is the CPU kernels' one way in.
SPINNING_LOOPS = r'\bat::parallel_(for|reduce)\b|#\s*pragma\s+omp\b'


def spinning_loop_uses(root: Path) -> list:
  r"""``path:line`` for each use of ATen's or OpenMP's parallel loops in
  ``root``'s C++ sources (comments and strings not read)."""
  found = []
  for path in sorted(root.rglob('*')):
    if path.suffix not in ('.h', '.cpp'):
      continue
    for number, line in enumerate(cxx_code(path.read_text()).split('\n'), 1):
      found += [f'{path}:{number}'] if re.search(SPINNING_LOOPS, line) else []
  return found


def test_cpu_kernels_run_their_loops_on_glt_parallel_for(tmp_path):
  planted = tmp_path / 'planted.cpp'
  planted.write_text('// at::parallel_for in a comment\nat::parallel_for(0, n, 1, f);\n')
  assert spinning_loop_uses(tmp_path) == [f'{planted}:2']
  assert spinning_loop_uses(ROOT / 'csrc' / 'cpu') == []


# One namespace per backend directory; glt:: itself holds what both share.
BACKEND_NAMESPACES = {'cpu': 'glt::cpu', 'cuda': 'glt::cuda', 'kernels': 'glt::kernels'}


def namespaces_opened(path: Path) -> list:
  r"""The named namespaces ``path`` opens at its top level, as written
  (``namespace glt { namespace cuda {`` counts as ``glt::cuda``)."""
  code = cxx_code(path.read_text())
  return [re.sub(r'\s*\{\s*namespace\s+', '::', m) for m in re.findall(
    r'^namespace\s+([\w:]+(?:\s*\{\s*namespace\s+\w+)*)\s*\{', code, flags=re.M
  )]  # fmt: skip


def test_each_backend_keeps_to_its_namespace():
  wrong = []
  for directory, namespace in BACKEND_NAMESPACES.items():
    for path in sorted((ROOT / 'csrc' / directory).rglob('*')):
      if path.suffix not in ('.h', '.cpp', '.cu', '.cuh'):
        continue
      opened = namespaces_opened(path)
      if not opened or any(not n.startswith(namespace) for n in opened):
        wrong.append(f'{path.name}: {opened}, not {namespace}')
  assert wrong == []
