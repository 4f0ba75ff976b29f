"""GLT 0.2.x's own example scripts, written against GLT's API with only the
CUDA lines (and OGB's downloading dataset class) changed, run to the end on
a synthetic stand-in: partitioning with sample_prob + FrequencyPartitioner,
worker-mode training on 2 "nodes", and server-client training with 2
servers and 2 clients. Every process is bounded by a timeout and reaped."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import kill_sessions
from test_dist_sampling import free_port

# Spawned processes or builds: left out of make test-fast.
pytestmark = pytest.mark.slow

SCRIPTS = Path(__file__).resolve().parent / 'glt_scripts'
TIMEOUT_S = 300
CHANCE = 1 / 8


def script_env():
  env = dict(os.environ, GLT_SCRIPT_NUM_NODES='3000', OMP_NUM_THREADS='1')
  env['PYTHONPATH'] = os.pathsep.join(filter(None, [str(SCRIPTS), env.get('PYTHONPATH')]))
  return env


def start(script, *args, cwd):
  return subprocess.Popen(
    [sys.executable, str(SCRIPTS / script), *map(str, args)],
    cwd=cwd, env=script_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    start_new_session=True,
  )  # fmt: skip


def finish(procs, timeout=TIMEOUT_S):
  r"""Waits for every process (killing all of them on a timeout); returns
  their outputs."""
  outputs = []
  try:
    for p in procs:
      out, _ = p.communicate(timeout=timeout)
      outputs.append(out)
  finally:
    kill_sessions(procs)
  for p, out in zip(procs, outputs):
    assert p.returncode == 0, f'{p.args[1]} exited {p.returncode}:\n{out[-4000:]}'
  return outputs


@pytest.fixture(scope='module')
def partitioned(tmp_path_factory):
  root = tmp_path_factory.mktemp('glt_products')
  (out,) = finish(
    [
      start(
        'partition_ogbn_dataset.py', '--dataset', 'ogbn-products', '--root_dir', root,
        '--num_partitions', 2, '--num_nbrs', '[5,3]', '--chunk_size', 1000,
        '--cache_ratio', 0.2, cwd=root,
      )
    ]
  )  # fmt: skip
  assert '-- Partitioning graph and features ...' in out
  for name in ('label/label.pt', 'train-partitions/partition1.pt', 'partitions/META.json'):
    assert (root / f'ogbn-products-{name}').exists(), name
  # the FrequencyPartitioner cached other partitions' hot rows
  assert list((root / 'ogbn-products-partitions').rglob('cache_feats.npy'))
  return root


def accuracies(text):
  return [float(a) for a in re.findall(r'Test Accuracy: ([0-9.]+)', text)]


def test_glt_worker_mode_script(partitioned, tmp_path):
  ports = [free_port() for _ in range(3)]
  common = [
    '--dataset_root_dir', partitioned, '--num_dataset_partitions', 2, '--num_nodes', 2,
    '--num_training_procs', 1, '--epochs', 6, '--batch_size', 64, '--in_channel', 32,
    '--out_channel', 8, '--master_addr', '127.0.0.1', '--training_pg_master_port', ports[0],
    '--train_loader_master_port', ports[1], '--test_loader_master_port', ports[2],
  ]  # fmt: skip
  finish(
    [
      start('dist_train_sage_supervised.py', '--node_rank', r, *common, cwd=tmp_path)
      for r in range(2)
    ]
  )
  log = (tmp_path / 'dist_sage_sup.txt').read_text()
  for rank in range(2):
    assert f'[Trainer {rank}] Epoch: 005' in log
    mine = '\n'.join(line for line in log.splitlines() if f'[Trainer {rank}]' in line)
    assert accuracies(mine)[-1] > 3 * CHANCE, log


def test_glt_server_client_scripts(partitioned, tmp_path):
  ports = [free_port() for _ in range(4)]
  shared = ['--dataset_root_dir', partitioned, '--num_dataset_partitions', 2, '--master_addr',
            '127.0.0.1', '--server_client_master_port', ports[0]]  # fmt: skip
  client = [
    '--epochs', 6, '--batch_size', 64, '--in_channel', 32, '--out_channel', 8,
    '--pg_master', '127.0.0.1', '--training_pg_master_port', ports[1],
    '--train_loader_master_port', ports[2], '--test_loader_master_port', ports[3],
  ]  # fmt: skip
  procs = [
    start('sage_supervised_server.py', '--node_rank', r, *shared, cwd=tmp_path) for r in (0, 1)
  ]
  procs += [
    start('sage_supervised_client.py', '--node_rank', r, *shared, *client, cwd=tmp_path)
    for r in (0, 1)
  ]
  outputs = finish(procs)
  for rank, out in zip((0, 1), outputs[2:]):
    assert f'[Client {rank}] Exited' in out
    assert re.search(rf'\[Client {rank}\] Server 0 has \d+ GPUs', out)  # request_server(0, fn)
    final = accuracies(out)[-1]
    assert final > 3 * CHANCE, out
  for rank, out in zip((0, 1), outputs[:2]):
    assert f'[Server {rank}] Exited' in out
