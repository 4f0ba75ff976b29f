"""Every example answers ``--help`` and runs to completion in its ``--smoke``
(tiny) setting on the synthetic default data, with no download; the
single-machine GraphSAGE example also reads OGB's on-disk layout."""

import os
import re
import subprocess
import sys
from argparse import Namespace
from pathlib import Path

import pytest
import torch
from test_dist_sampling import free_port
from test_examples_partition import write_fake_ogbn_arxiv, write_fake_ogbn_mag
from test_server_client import run_example_pair

import graphlearn_torch as glt
from graphlearn_torch._ext import cuda_kernels_available

# Spawned processes or builds: left out of make test-fast.
pytestmark = pytest.mark.slow

EXAMPLES = Path(__file__).resolve().parents[1] / 'examples'
ALL = [
  'train_sage_ogbn_products.py',
  'train_rgcn_mag.py',
  'link_pred_sage.py',
  'temporal_link_pred.py',
  'partition_dataset.py',
  'distributed/dist_train_sage_supervised.py',
  'distributed/server_client_mode/sage_supervised_server.py',
  'distributed/server_client_mode/sage_supervised_client.py',
]


def run_example(name, *args, timeout=300) -> str:
  r"""Runs an example; checks it exits 0 and returns its stdout + stderr."""
  done = subprocess.run(
    [sys.executable, str(EXAMPLES / name), *args],
    capture_output=True, text=True, timeout=timeout, cwd=EXAMPLES.parent,
  )  # fmt: skip
  out = done.stdout + done.stderr
  assert done.returncode == 0, out[-4000:]
  return out


# Each example's --help, all in one interpreter (each would import torch and
# PyG again): the help text each prints, after a line naming it.
HELP = """
import contextlib, io, os, runpy, sys
for path in sys.argv[1:]:
  sys.argv, text = [path, '--help'], io.StringIO()
  sys.path.insert(0, os.path.dirname(path))
  with contextlib.redirect_stdout(text):
    try:
      runpy.run_path(path, run_name='__main__')
    except SystemExit as e:
      assert e.code in (0, None), (path, e.code)
  sys.path.pop(0)
  print('=== ' + path)
  print(text.getvalue())
"""


def test_help():
  done = subprocess.run(
    [sys.executable, '-c', HELP, *(str(EXAMPLES / name) for name in ALL)],
    capture_output=True, text=True, timeout=300, cwd=EXAMPLES.parent,
  )  # fmt: skip
  assert done.returncode == 0, done.stderr[-4000:]
  texts = dict(part.split('\n', 1) for part in done.stdout.split('=== ')[1:])
  assert sorted(texts) == sorted(str(EXAMPLES / name) for name in ALL)
  for path, out in texts.items():
    assert out.startswith('usage:') and '--smoke' in out, (path, out[:500])


def final(pattern: str, out: str) -> float:
  found = re.findall(pattern, out)
  assert found, out[-4000:]
  return float(found[-1])


def gpu_flags(graph_mode: str = 'ZERO_COPY') -> tuple:
  r"""GLT's GPU flags: batches and model on the GPU, the topology placed by
  ``graph_mode``, a fifth of the feature rows in GPU memory."""
  return ('--device', 'cuda', '--graph_mode', graph_mode, '--split_ratio', '0.2')


# Both GPU graph modes on a GPU; without one they fall back alike, so one is enough.
NEEDS_GPU = pytest.mark.skipif(
  not cuda_kernels_available(), reason='needs a GPU and the CUDA kernels'
)
GPU_GRAPH_MODES = ['ZERO_COPY', pytest.param('CUDA', marks=NEEDS_GPU)]


def check_gpu_flags(out: str, graph_mode: str = 'ZERO_COPY') -> None:
  r"""GLT's GPU flags ran on the GPU path, or on a machine without one fell
  back to the CPU path, saying so."""
  if cuda_kernels_available():
    placed = f'graph mode {graph_mode}, sampled on cuda:0; batches and model on cuda'
  else:
    fallback = f"graph mode '{graph_mode}' needs a GPU and the CUDA kernels; using 'CPU'"
    assert fallback in out, out[-4000:]
    placed = 'graph mode CPU, sampled on cpu; batches and model on cpu'
  assert placed in out, out[-4000:]


def assert_quiet(out: str) -> None:
  r"""A log, not a terminal: no progress bar (tqdm's '%|' and rates) and no
  warnings, only log lines."""
  assert '%|' not in out and 'it/s' not in out, out[-4000:]
  assert 'Warning' not in out, out[-4000:]


def test_train_sage_smoke():
  out = run_example('train_sage_ogbn_products.py', '--smoke')
  assert_quiet(out)
  assert final(r'test accuracy ([0-9.]+)', out) > 0.2, 'above chance (8 classes)'


def test_progress_bar_on_request():
  out = run_example('train_sage_ogbn_products.py', '--smoke', '--progress')
  assert 'epoch 1:' in out and '%|' in out, out[-4000:]


@pytest.mark.parametrize('graph_mode', GPU_GRAPH_MODES)
def test_train_sage_smoke_with_gpu_flags(graph_mode):
  out = run_example('train_sage_ogbn_products.py', '--smoke', *gpu_flags(graph_mode))
  check_gpu_flags(out, graph_mode)
  assert final(r'test accuracy ([0-9.]+)', out) > 0.2, 'above chance (8 classes)'


def test_train_sage_reads_the_ogb_layout(tmp_path):
  pytest.importorskip('ogb')
  write_fake_ogbn_arxiv(tmp_path)
  out = run_example(
    'train_sage_ogbn_products.py', '--smoke', '--dataset', 'ogbn-arxiv', '--root', str(tmp_path)
  )
  assert 'ogbn-arxiv: 80 nodes, 300 edges, 128 features, 40 classes' in out
  final(r'test accuracy ([0-9.]+)', out)


def test_rgcn_mag_smoke():
  out = run_example('train_rgcn_mag.py', '--smoke')
  assert "'paper': 2000, 'author': 1000" in out
  assert final(r'test accuracy ([0-9.]+)', out) > 0.2


def test_rgcn_mag_reads_the_ogb_layout(tmp_path):
  pytest.importorskip('ogb')
  write_fake_ogbn_mag(tmp_path)
  out = run_example(
    'train_rgcn_mag.py', '--smoke', '--dataset', 'ogbn-mag', '--root', str(tmp_path)
  )
  assert_quiet(out)
  assert "ogbn-mag: {'author': 120, 'field_of_study': 30, 'institution': 10, 'paper': 200}" in out
  assert final(r'test accuracy ([0-9.]+)', out) > 0.4, 'above chance (4 classes)'


def test_link_prediction_smoke():
  out = run_example('link_pred_sage.py', '--smoke')
  # chance is 0.5; over the smoke's 496 test edges and as many non-edges an
  # ROC-AUC's standard error is about 0.015, and two epochs reach about 0.56
  assert final(r'test ROC-AUC ([0-9.]+)', out) > 0.52, 'better than chance'


def test_temporal_link_prediction_smoke():
  out = run_example('temporal_link_pred.py', '--smoke')
  assert 'no batch saw the future' in out
  assert 0.0 <= final(r'test ROC-AUC ([0-9.]+)', out) <= 1.0


def test_temporal_link_prediction_leak_check_can_fail():
  # The example's check on a batch whose seed times are moved into the past:
  # its sampled edges are then later than their seeds, and it must say so.
  sys.path.insert(0, str(EXAMPLES))
  try:
    import temporal_link_pred as example
  finally:
    sys.path.remove(str(EXAMPLES))
  args = example.parser().parse_args([])
  vars(args).update(example.SMOKE)
  data = example.purchases_graph(args)
  sampler = glt.sampler.PyGNeighborSampler(data, [5, 5], time_attr='time')
  batch = next(iter(example.loader(data, sampler, data[example.BUYS].time > 50, args, False)))
  example.check_no_leakage(batch, data)
  batch[example.BUYS].edge_label_time = batch[example.BUYS].edge_label_time - 40
  with pytest.raises(AssertionError, match='leakage'):
    example.check_no_leakage(batch, data)


def test_partition_smoke(tmp_path):
  out = run_example('partition_dataset.py', '--smoke', '--output_dir', str(tmp_path / 'parts'))
  assert 'synthetic: 2000 nodes' in out
  assert out.count('max/mean') == 1, 'the summary table, once'
  written = set(os.listdir(tmp_path / 'parts'))
  assert {'META.json', 'node_pb.npy', 'edge_pb.npy', 'part0', 'part1'} <= written, written


@pytest.mark.parametrize('graph_mode', GPU_GRAPH_MODES)
def test_worker_mode_smoke_with_gpu_flags(tmp_path, graph_mode):
  ports = [str(free_port()) for _ in range(3)]
  out = run_example(
    'distributed/dist_train_sage_supervised.py', '--smoke', '--dataset_root_dir', str(tmp_path),
    '--training_pg_master_port', ports[0], '--train_loader_master_port', ports[1],
    '--test_loader_master_port', ports[2], *gpu_flags(graph_mode),
  )  # fmt: skip
  check_gpu_flags(out, graph_mode)
  # the sampling processes log as their trainers do, and say how they draw
  if cuda_kernels_available():
    drawn = "draws its batches on cuda:0 in one call over this host's 2 partitions"
  else:
    drawn = 'draws its batches hop by hop on cpu (the partition samples on the CPU)'
  assert drawn in out, out[-4000:]
  assert_quiet(out)  # no torch.distributed deprecation warning from the RPC start-up
  assert out.count('max/mean') == 1, 'the partition summary, once'
  assert final(r'final test accuracy ([0-9.]+)', out) > 0.3, 'well above chance (8 classes)'
  assert (tmp_path / 'synthetic2000-partitions' / 'META.json').exists()


def test_trainers_sharing_a_gpu_train_over_gloo(monkeypatch):
  r"""NCCL refuses two ranks on one GPU (seen on a one-GPU machine: 'invalid
  usage' at the first all-reduce of the worker-mode example's 2 trainers), so
  the example's training group uses gloo where its trainers share GPUs."""
  monkeypatch.syspath_prepend(str(EXAMPLES / 'distributed'))
  import sage_common

  monkeypatch.setattr(torch.cuda, 'device_count', lambda: 1)
  gpu = torch.device('cuda', 0)
  assert sage_common.training_backend(Namespace(num_training_procs=2), gpu) == 'gloo'
  assert sage_common.training_backend(Namespace(num_training_procs=1), gpu) == 'nccl'
  cpu = torch.device('cpu')
  assert sage_common.training_backend(Namespace(num_training_procs=1), cpu) == 'gloo'


def test_server_client_smoke(tmp_path):
  log = run_example_pair(['--smoke', '--dataset_root_dir', str(tmp_path)], ['--smoke'], 300)
  assert_quiet(log)
  accuracy = final(r'\[client 0\] final test accuracy ([0-9.]+)', log)
  print(f'server-client example, --smoke: final test accuracy {accuracy:.4f}')
  assert accuracy > 0.3, 'well above chance (8 classes)'
