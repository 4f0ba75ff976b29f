"""The package installs as users install it: an sdist that carries csrc/ and
builds, and a wheel built from that sdist that installs into a fresh venv
(torch first, as the README says) and samples, imported from outside the
checkout.

One test, about 5 minutes on 2 cores (the extension compiles once, and the
fresh venv installs torch and the dependencies from the package registry).
"""

import os
import shutil
import subprocess
import sys
import tarfile
import textwrap
from pathlib import Path

import pytest
import torch

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
  run([py, '-m', 'pip', 'install', '-q', torch_pin], tmp_path, 600, fresh)
  run([py, '-m', 'pip', 'install', '-q', wheel], tmp_path, 600, fresh)
  (tmp_path / 'outside').mkdir()
  out = run([py, '-c', SMOKE, venv], tmp_path / 'outside', 300, fresh)
  assert 'sampled 300 edges' in out, out
