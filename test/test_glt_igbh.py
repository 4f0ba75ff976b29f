"""The RGAT benchmark reference's pipeline on IGBH-format data, as a GLT user
runs it, on the CPU: test/glt_scripts/igbh_data.py writes a small
graph in IGBH's layout; igbh_partition.py partitions it in COO, and again in
two stages with fp16 features and each relation rewritten as CSC;
igbh_rgat.py trains an RGAT on 2 nodes over loopback for one epoch on the COO
partitions, saving a checkpoint, then resumes from it for a second epoch on
the CSC/fp16 ones. Every process is bounded by a timeout and reaped, and
/dev/shm holds the same files at the end."""

import os
import re

import pytest
from test_dist_sampling import free_port
from test_glt_scripts import finish, start

CHANCE = 1 / 19


def shm_files() -> set:
  return set(os.listdir('/dev/shm')) if os.path.isdir('/dev/shm') else set()


def run_one(script, *args, cwd, timeout=300) -> str:
  (out,) = finish([start(script, *args, cwd=cwd)], timeout)
  return out


def train(root, layout, cwd, *ckpt) -> list:
  r"""Both nodes' outputs of one igbh_rgat.py run."""
  ports = [free_port() for _ in range(3)]
  common = [
    '--path', root, '--layout', layout, '--num_nodes', 2, '--master_addr', '127.0.0.1',
    '--training_pg_master_port', ports[0], '--train_loader_master_port', ports[1],
    '--val_loader_master_port', ports[2], '--ckpt_dir', cwd / 'ckpt', *ckpt,
  ]  # fmt: skip
  return finish([start('igbh_rgat.py', '--node_rank', r, *common, cwd=cwd) for r in (0, 1)])


def accuracy(out: str) -> float:
  found = re.findall(r'Validation Accuracy: ([0-9.]+)', out)
  assert found, out[-4000:]
  return float(found[-1])


@pytest.fixture(scope='module')
def igbh(tmp_path_factory):
  raw = tmp_path_factory.mktemp('igbh')
  (out,) = finish([start('igbh_data.py', '--path', raw, '--num_papers', 1200, cwd=raw)])
  return raw


@pytest.mark.slow  # whole example scripts, in processes of their own
def test_igbh_rgat_partitions_trains_and_resumes(igbh, tmp_path):
  shm_before = shm_files()
  coo, csc = tmp_path / 'coo', tmp_path / 'csc'
  out = run_one('igbh_partition.py', '--path', igbh, '--dst_path', coo, cwd=tmp_path)
  assert '-- Done' in out
  out = run_one(
    'igbh_partition.py', '--path', igbh, '--dst_path', csc, '--layout', 'CSC', '--use_fp16',
    '--with_feature', 0, cwd=tmp_path,
  )  # fmt: skip
  assert '-- Building features of each partition ...' in out and '-- Done' in out
  relation = csc / 'tiny-partitions' / 'part1' / 'graph' / 'paper__written_by__author'
  assert (relation / 'rows.pt').exists() and (relation / 'cols.pt').exists()

  first = train(coo, 'COO', tmp_path, '--ckpt_seq_save', 0)
  assert (tmp_path / 'ckpt' / 'model_seq_0.ckpt').exists()
  second = train(csc, 'CSC', tmp_path, '--ckpt_seq_resume', 0, '--ckpt_seq_save', 1)
  for rank, out in enumerate(second):
    assert f'[Trainer {rank}] Resumed from checkpoint 0 at epoch 1' in out, out[-4000:]
    assert f'[Trainer {rank}] Epoch 1:' in out and f'[Trainer {rank}] Exited' in out
  print(
    f'IGBH RGAT: validation accuracy {accuracy(first[0]):.4f} after one epoch (COO), '
    f'{accuracy(second[0]):.4f} after the resumed one (CSC, fp16); chance {CHANCE:.4f}'
  )
  assert accuracy(second[0]) > 3 * CHANCE, second[0][-4000:]
  assert (tmp_path / 'ckpt' / 'model_seq_1.ckpt').exists()
  assert shm_files() == shm_before, 'every shared-memory file was released'
