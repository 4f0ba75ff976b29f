"""``glt.utils.spawn`` forks its processes from a fork server that imported
the job's modules once: they hold little memory of their own, start in the
caller's environment (also one changed after the server started), working
directory and ``sys.argv``, and fail the job as spawned ones do."""

import gc
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import graphlearn_torch as glt
from graphlearn_torch.utils.spawn import fork_server_modules

# Spawned processes: left out of make test-fast.
pytestmark = pytest.mark.slow


def private_mb() -> float:
  r"""This process's pages no other process shares, in MB."""
  with open('/proc/self/smaps_rollup') as f:
    fields = dict(line.split(':', 1) for line in f if line.startswith('Private'))
  return sum(int(v.split()[0]) for v in fields.values()) / 1024


def report(index, out_dir):
  gc.collect()  # frozen objects stay shared through a full collection
  state = {
    'private_mb': private_mb(),
    'variable': os.environ.get('GLT_SPAWN_TEST'),
    'removed': 'GLT_SPAWN_TEST_REMOVED' in os.environ,
    'cwd': os.getcwd(),
    'argv': sys.argv,
    'frozen': gc.get_freeze_count() > 0,
  }
  with open(os.path.join(out_dir, f'{index}.json'), 'w') as f:
    json.dump(state, f)


def run_reports(tmp_path, start_method):
  glt.utils.spawn(report, args=(str(tmp_path),), nprocs=2, start_method=start_method)
  return [json.loads((tmp_path / f'{i}.json').read_text()) for i in range(2)]


def test_forked_processes_start_in_the_callers_state(tmp_path, monkeypatch):
  monkeypatch.setenv('GLT_SPAWN_TEST_REMOVED', '1')
  (tmp_path / 'first').mkdir()
  run_reports(tmp_path / 'first', None)  # the fork server starts with this environment
  monkeypatch.setenv('GLT_SPAWN_TEST', 'changed after the server started')
  monkeypatch.delenv('GLT_SPAWN_TEST_REMOVED')
  workdir = tmp_path / 'workdir'
  workdir.mkdir()
  monkeypatch.chdir(workdir)
  for state in run_reports(tmp_path, None):
    assert state['variable'] == 'changed after the server started'
    assert not state['removed']
    assert state['cwd'] == str(workdir)
    assert state['argv'] == sys.argv
    assert state['frozen']


def test_forked_processes_share_the_imported_modules(tmp_path):
  # A spawned process holds torch's and this library's import of its own
  # (over 100 MB); one forked from the fork server holds a few MB. Measured
  # in a script of its own, as a job runs, whose fork server spawn starts.
  code = (
    'import json, pathlib, sys\n'
    f'sys.path.insert(0, {str(Path(__file__).parent)!r})\n'
    'import test_spawn\n'
    f'root = pathlib.Path({str(tmp_path)!r})\n'
    'for method in ("forkserver", "spawn"):\n'
    '  (root / method).mkdir()\n'
    '  states = test_spawn.run_reports(root / method, method)\n'
    '  print(json.dumps([method, [s["private_mb"] for s in states]]))\n'
  )
  out = subprocess.run(
    [sys.executable, '-c', code], capture_output=True, text=True, timeout=300, check=True
  )
  private = dict(json.loads(line) for line in out.stdout.splitlines())
  assert all(mb > 100 for mb in private['spawn']), private
  assert all(mb < 50 for mb in private['forkserver']), private


def test_unknown_start_method():
  with pytest.raises(ValueError, match="start_method must be 'forkserver' or 'spawn'"):
    glt.utils.spawn(report, args=('.',), start_method='fork')


@pytest.mark.parametrize(
  'gpus, expected',
  [
    (0, ['__main__', 'train', 'torch', 'graphlearn_torch', 'torch_geometric']),
    (1, ['torch', 'graphlearn_torch']),
  ],
)
def test_a_gpu_host_fork_server_imports_only_what_starts_no_cuda(monkeypatch, gpus, expected):
  # A process forked from one that started the CUDA driver cannot use CUDA,
  # and importing PyG started it on a GPU host: there the server imports
  # torch and this library only, which start nothing (the package leaves
  # PyG out: test_architecture).
  monkeypatch.setattr(torch.cuda, 'device_count', lambda: gpus)
  preload = ['__main__', 'train', 'torch', 'graphlearn_torch', 'torch_geometric']
  assert fork_server_modules(preload) == expected
  sampler = fork_server_modules(['__main__', 'graphlearn_torch.distributed.sources.processes'])
  assert sampler == (
    ['graphlearn_torch.distributed.sources.processes']
    if gpus
    else ['__main__', 'graphlearn_torch.distributed.sources.processes']
  )
