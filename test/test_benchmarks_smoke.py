"""Every script of benchmarks/ runs, in a small setting, as a user runs it,
and writes its results: a table with rows for each of its tables. The peer
scripts (glt_peer.py, dgl_peer.py, pyg_peer.py, pyg_temporal_peer.py,
pyg_link_peer.py, glt_dist_peer.py, dgl_dist_peer.py, startup_peer.py,
glt_gpu_peer.py) run
through the benchmarks that call them where their environments are set up
(make glt-peer, dgl-peer, pyg-peer; glt_gpu_peer.py on a GPU, where make
glt-gpu-peer built GLT's package). The report renders a page, with its
charts, from the committed results."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / 'benchmarks'
sys.path.insert(0, str(ROOT / 'test'))
from netns_hosts import unavailable_reason  # noqa: E402

pytestmark = pytest.mark.slow

TINY = ['--scale', '0.004', '--batches', '4']
DIST = ['--num_nodes', '20000', '--batches', '8']


def peer_flags(*names) -> list:
  r"""``--<name>-python`` for each peer whose environment is set up here
  (its make target finished: ``.installed``)."""
  flags = []
  for name in names:
    venv = ROOT / f'.venv-{name}'
    if (venv / '.installed').exists():
      flags += [f'--{name}-python', str(venv / 'bin' / 'python')]
  return flags


def glt_gpu_flag() -> list:
  r"""``--glt-gpu`` where GLT's CUDA build is (make glt-gpu-peer); the GPU
  benchmarks run it only on a GPU."""
  pkg = ROOT / 'build' / 'glt-gpu' / 'pkg'
  return ['--glt-gpu', str(pkg)] if (pkg / 'graphlearn_torch').is_dir() else []


def dgl_on_loopback() -> list:
  r"""``--dgl-python`` where DGL is set up and its machines can each get a
  /dev/shm of their own (a mount namespace: root)."""
  return peer_flags('dgl') if os.geteuid() == 0 else []


# (script, arguments, the results file it writes, its table keys)
SCRIPTS = [
  ('bench_sampler.py', [*TINY, '--threads', '1', '2', '--sizes', '1', '8',
                        *peer_flags('glt', 'dgl', 'pyg')],
   'bench_sampler', ['sampling', 'gather', 'threads', 'sizes']),
  ('bench_temporal.py', [*TINY, *peer_flags('pyg')], 'bench_temporal', ['temporal']),
  ('bench_startup.py', ['--scale', '0.004', '--rounds', '1', *peer_flags('pyg')], 'bench_startup',
   ['startup']),
  ('bench_contention.py', [*TINY, '--threads', '1'], 'bench_contention',
   ['contention', 'collocated']),
  ('bench_link.py', ['--scale', '0.004', '--batches', '2', '--pairs', '20000', '--pyg_pairs',
                     '2000', *peer_flags('pyg')], 'bench_link', ['link']),
  ('bench_partition.py', ['--scale', '0.002', '--parts', '2'], 'bench_partition', ['partition']),
  ('bench_partition_quality.py', ['--parts', '2', '--community_nodes', '5000'],
   'bench_partition_quality', ['quality']),
  ('bench_partition_large.py', ['--nodes', '4000', '--edges', '80000', '--parts', '2', '--keep'],
   'bench_partition_large', ['partition_large']),
  ('bench_channel.py', ['--sizes', '256KB', '--gb', '0.02'], 'bench_channel', ['channel']),
  *([('bench_channel.py', ['--sizes', '256KB', '--gb', '0.02', '--gpu', '0'], 'bench_channel_gpu',
      ['channel'])] if torch.cuda.is_available() else []),
  ('bench_dist_sampling.py', [*DIST, *peer_flags('glt'), *dgl_on_loopback(), '--start_rounds', '2'],
   'bench_dist_sampling',
   ['worker_mode'] + (['vs_glt', 'startup_vs_glt'] if peer_flags('glt') else [])
   + (['vs_dgl'] if dgl_on_loopback() else [])),
  ('bench_server_client.py', [*DIST, '--runs', '1'], 'bench_server_client', ['server_client']),
  ('profile_dist_rpc.py', DIST, 'profile_dist_rpc', ['rpc', 'remote_share']),
  ('bench_cache_memory.py', DIST, 'bench_cache_memory', ['cache_memory']),
  ('bench_dist_memory.py', [*DIST, '--rounds', '1'], 'bench_dist_memory', ['memory']),
  ('fault_suite.py', ['--only', 'partition: values'], 'fault_suite', ['faults']),
  ('ab_builds.py', [str(ROOT), str(ROOT), '--rounds', '1', *TINY], 'ab_builds', ['ab']),
  ('bench_gpu_sampler.py', [*TINY, *glt_gpu_flag()], 'bench_gpu_sampler', ['gpu_sampling']),
  ('bench_gpu_feature.py', ['--scale', '0.004', '--repeat', '1', *glt_gpu_flag()],
   'bench_gpu_feature_dim100', ['gpu_gather']),
  ('bench_gpu_train.py', ['--num_nodes', '4000', '--workers', '0'], 'bench_gpu_train', ['train']),
  ('bench_multihost.py', ['--num_nodes', '20000', '--batches', '4', '--concurrency', '4',
                         '--delays', *peer_flags('glt', 'dgl')], 'bench_multihost',
   ['multihost'] + [f'vs_{p}' for p in ('glt', 'dgl') if peer_flags(p)]),
]  # fmt: skip


def run(script: str, args: list, cwd: Path, timeout: float = 900) -> subprocess.CompletedProcess:
  env = {k: v for k, v in os.environ.items() if k not in ('GLT_PYTHON', 'DGL_PYTHON', 'PYG_PYTHON')}
  return subprocess.run(
    [sys.executable, str(BENCH / script), *args],
    cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout,
  )  # fmt: skip


@pytest.mark.parametrize('script, args, name, keys', SCRIPTS, ids=[s[2] for s in SCRIPTS])
def test_every_benchmark_runs_and_writes_its_results(tmp_path, script, args, name, keys):
  if script == 'bench_multihost.py' and unavailable_reason() is not None:
    pytest.skip(f'no network-namespace hosts here: {unavailable_reason()}')
  writes = script.startswith('bench_partition')
  workdir = ['--workdir', str(tmp_path / 'work')] if writes else []
  done = run(script, [*args, *workdir, '--results', str(tmp_path)], ROOT)
  assert done.returncode == 0, done.stderr[-4000:]
  doc = json.loads((tmp_path / f'{name}.json').read_text())
  assert doc['command'].startswith(f'python benchmarks/{script}')
  assert doc['machine']['cores'] == os.cpu_count()
  assert 1 <= doc['machine']['physical_cores'] <= os.cpu_count()
  tables = {t['key']: t for t in doc['tables']}
  assert sorted(tables) == sorted(keys)
  for table in tables.values():
    assert table['rows'] and all(len(r) == len(table['columns']) for r in table['rows'])
    assert table['title'] in done.stdout  # printed too


def test_the_locality_benchmark_reads_the_kept_partitions(tmp_path):
  work = ['--workdir', str(tmp_path / 'work'), '--results', str(tmp_path)]
  tiny = ['--nodes', '4000', '--edges', '80000', '--parts', '4', '--keep', '4']
  done = run('bench_partition_large.py', [*tiny, *work], ROOT)
  assert done.returncode == 0, done.stderr[-4000:]
  done = run('bench_partition_locality.py', ['--batches', '2', '--batch_size', '16', *work], ROOT)
  assert done.returncode == 0, done.stderr[-4000:]
  doc = json.loads((tmp_path / 'bench_partition_locality.json').read_text())
  (table,) = doc['tables']
  assert [r[0] for r in table['rows']] == ['random', 'streaming']
  random, streaming = table['rows']
  assert streaming[1] < random[1] and streaming[3] < random[3]  # lower cut, fewer remote rows


def import_report():
  sys.path.insert(0, str(BENCH))
  try:
    import report
  finally:
    sys.path.remove(str(BENCH))
  return report


def test_a_machine_is_named_by_its_cores_and_their_hardware_threads():
  report = import_report()
  machine = {'cpu': 'Xeon', 'cores': 16, 'memory_gib': 126.0, 'gpu': 'NVIDIA H200'}
  assert report.machine_name(machine) == 'NVIDIA H200, 16 cores (Xeon), 126 GiB'  # older results
  machine['physical_cores'] = 16
  assert report.machine_name(machine) == 'NVIDIA H200, 16 cores (Xeon), 126 GiB'
  machine['physical_cores'] = 8
  assert report.machine_name(machine) == 'NVIDIA H200, 16 CPU threads on 8 cores (Xeon), 126 GiB'


def test_the_report_renders_a_page_with_charts(tmp_path):
  pytest.importorskip('matplotlib')
  report = import_report()
  results = report.load_results(ROOT / 'benchmarks' / 'results')
  page = report.render(results, tmp_path)
  charted = [t for doc in results.values() for t in doc['tables'] if t.get('chart')]
  assert len(list(tmp_path.glob('*.png'))) == len(charted)
  for section in report.SECTIONS:
    assert f'## {section.title}' in page
  for name, doc in results.items():
    assert f'`{doc["command"]}`' in page or name not in {
      n for s in report.SECTIONS for n, _ in s.tables
    }
