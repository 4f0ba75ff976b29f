"""What the distributed GraphSAGE examples share: their dataset and training
arguments, partitions made on first use, and the DDP training loop."""

import argparse
import json
import logging
import os
import shutil
import socket
import sys
import time

import torch
import torch.distributed
from torch.nn.parallel import DistributedDataParallel
from torch_geometric.nn import GraphSAGE

import graphlearn_torch as glt

EXAMPLES = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, EXAMPLES)
import example_args  # noqa: E402

log = logging.getLogger('sage')
DEFAULT_SYNTHETIC_NODES = 20_000


def log_placement(ds, device: torch.device) -> None:
  r"""Logs where the trainer's partition is sampled and its batches go."""
  example_args.log_placement(log, ds, device)


def add_dataset_args(p: argparse.ArgumentParser) -> None:
  r"""Which dataset, where its partitions live, how to make them."""
  p.add_argument('--dataset', default='synthetic', help="'synthetic', 'cora', 'citeseer', ...")
  p.add_argument('--dataset_root_dir', default='data', help='where <dataset>-partitions lives')
  p.add_argument(
    '--raw_dataset_dir', default='../shared/datasets/planetoid', help='raw files to partition'
  )
  p.add_argument('--num_dataset_partitions', type=int, default=2)
  p.add_argument('--synthetic_nodes', type=int, default=DEFAULT_SYNTHETIC_NODES)


def add_training_args(p: argparse.ArgumentParser) -> None:
  r"""The model, the optimizer, batches and epochs (``example_args``), the
  timeout of every wait, and GLT's model sizes (checked against the data)."""
  example_args.add_training_args(p)
  p.add_argument('--timeout', type=float, default=60, help='seconds any wait may take')
  p.add_argument('--in_channel', type=int, default=None, help='feature size (checked)')
  p.add_argument('--out_channel', type=int, default=None, help='classes (checked)')


def add_gpu_args(p: argparse.ArgumentParser) -> None:
  r"""GLT's ``--device``, ``--graph_mode`` and ``--split_ratio``
  (``example_args.add_gpu_args``); in the distributed examples
  ``--split_ratio`` is the share of each partition's feature table kept in
  GPU memory (default: its cached rows)."""
  example_args.add_gpu_args(p)


def trainer_device(args, local_rank: int) -> torch.device:
  r"""The device of this machine's trainer ``local_rank``: with a CUDA
  ``--device``, GPU ``local_rank`` (modulo the GPUs here); the CPU, as
  logged, without a GPU."""
  device = example_args.resolve_gpu_args(args)
  if device.type != 'cuda':
    return device
  device = torch.device('cuda', local_rank % torch.cuda.device_count())
  torch.cuda.set_device(device)
  return device


def training_backend(args, device: torch.device) -> str:
  r"""The training process group's backend: NCCL where each trainer of this
  machine has a GPU of its own; gloo on the CPU, and where trainers share a
  GPU (NCCL refuses two ranks on one GPU)."""
  if device.type != 'cuda':
    return 'gloo'
  if args.num_training_procs > torch.cuda.device_count():
    log.info(
      '%d trainers share %d GPU(s): the training process group uses gloo, not NCCL',
      args.num_training_procs,
      torch.cuda.device_count(),
    )
    return 'gloo'
  return 'nccl'


SMOKE = {'synthetic_nodes': 2_000, 'epochs': 2, 'batch_size': 64}


def parse_args(p: argparse.ArgumentParser, argv=None) -> argparse.Namespace:
  r"""Parses with a ``--smoke`` flag added: a tiny run (``SMOKE``, for CI)."""
  return example_args.parse_args(p, SMOKE, argv)


def set_trainer_threads(processes_per_machine: int) -> int:
  r"""Gives a trainer its share of this machine's cores (at least one) and
  returns it. OpenMP threads spin while they wait, so trainers and sampling
  processes that together ask for more threads than there are cores slow
  each other down many times over."""
  threads = max(1, (os.cpu_count() or 1) // max(processes_per_machine, 1))
  torch.set_num_threads(threads)
  return threads


def partition_dir(args) -> str:
  r"""``<dataset_root_dir>/<dataset>-partitions``; synthetic graphs of other
  sizes than the default get their own directory."""
  name = args.dataset
  if name == 'synthetic' and args.synthetic_nodes != DEFAULT_SYNTHETIC_NODES:
    name = f'synthetic{args.synthetic_nodes}'
  return os.path.join(args.dataset_root_dir, f'{name}-partitions')


def ensure_partitions(args) -> str:
  r"""The partition directory (``add_dataset_args``), partitioned first
  (edge_dir 'in', METIS, seeded) when missing. Partitioning is deterministic
  and lands by an atomic rename, so every machine may do it: on a shared
  file system the first one wins and the others find it done."""
  out = partition_dir(args)
  if os.path.exists(os.path.join(out, 'META.json')):
    return _checked(out, args.num_dataset_partitions)
  import partition_dataset

  staging = f'{out}.partial-{socket.gethostname()}-{os.getpid()}'
  argv = [
    '--dataset', args.dataset, '--dataset_root_dir', args.raw_dataset_dir,
    '--output_dir', staging, '--num_partitions', str(args.num_dataset_partitions),
    '--edge_dir', 'in', '--num_nodes', str(args.synthetic_nodes), '--seed', '0',
  ]  # fmt: skip
  partition_dataset.run(partition_dataset.parse_args(argv))
  try:
    os.rename(staging, out)
  except OSError:  # another machine's copy landed first
    if not os.path.exists(os.path.join(out, 'META.json')):
      raise
    shutil.rmtree(staging)
  return out


def _checked(out: str, num_partitions: int) -> str:
  with open(os.path.join(out, 'META.json')) as f:
    found = json.load(f).get('num_parts')
  if found != num_partitions:
    raise SystemExit(
      f'{out} holds {found} partitions, not --num_dataset_partitions {num_partitions}: '
      'remove it or pass another --dataset_root_dir'
    )
  return out


def node_loader(args, rank: int, data, seeds, shuffle: bool, worker_options, device=None):
  r"""The examples' DistNeighborLoader: in-edges, features collected, a
  seed per trainer, batches on ``device``; ``data`` is None on a
  server-client client."""
  return glt.distributed.DistNeighborLoader(
    data,
    args.fanout,
    seeds,
    batch_size=args.batch_size,
    shuffle=shuffle,
    edge_dir='in',
    collect_features=True,
    random_seed=args.seed + rank,
    worker_options=worker_options,
    to_device=device,
  )


class Checkpoints(example_args.Checkpoints):
  r"""A trainer's checkpoints in ``<directory>/rank<rank>``
  (``example_args.Checkpoints``). Every trainer saves at the same points
  (steps of an epoch that every trainer takes, and each epoch's end), and a
  resumed job goes on from the latest that all of them saved: a state of the
  whole job.

  Args:
    directory: where the trainers' directories are.
    rank: this trainer.
    every: training steps between checkpoints.
    model: the model (unwrapped from DDP).
    optimizer: its optimizer.
    loaders: the loaders by name (``'train'`` among them).
  """

  def __init__(self, directory: str, rank: int, every: int, model, optimizer, loaders):
    super().__init__(os.path.join(directory, f'rank{rank}'), every, model, optimizer, loaders)

  def steps_every_process_takes(self, steps: int) -> int:
    counts = torch.tensor([steps])
    torch.distributed.all_reduce(counts, torch.distributed.ReduceOp.MIN)
    return int(counts)

  def saved_by_all(self, saved: set) -> set:
    everyone = [None] * torch.distributed.get_world_size()
    torch.distributed.all_gather_object(everyone, saved)
    return set.intersection(*everyone)


@torch.no_grad()
def test_accuracy(model, loader) -> torch.Tensor:
  r"""``[correct, total]`` over the loader's seeds."""
  model.eval()
  counts = torch.zeros(2)
  for batch in loader:
    out = model(batch.x, batch.edge_index)[: batch.batch_size]
    counts[0] += int((out.argmax(-1) == batch.y[: batch.batch_size]).sum())
    counts[1] += batch.batch_size
  return counts


def train_ddp(
  args, rank: int, feature_dim: int, num_classes: int, train_loader, test_loader, device=None
):
  r"""Trains a DDP GraphSAGE replica on ``device`` (default: the CPU) for
  ``args.epochs`` epochs (the process group is initialized); logs loss and
  test accuracy (summed over the replicas) each epoch and returns the last
  accuracy. With ``--checkpoint``, saves ``Checkpoints``; with
  ``--resume``, goes on from the latest."""
  device = torch.device(device if device is not None else 'cpu')
  if args.deterministic:
    torch.use_deterministic_algorithms(True)
  for flag, given, found in (
    ('in_channel', args.in_channel, feature_dim),
    ('out_channel', args.out_channel, num_classes),
  ):
    if given is not None and given != found:
      raise SystemExit(f'--{flag} {given} does not match the data ({found})')
  model = DistributedDataParallel(
    GraphSAGE(feature_dim, args.hidden, len(args.fanout), num_classes, dropout=args.dropout).to(
      device
    ),
    device_ids=[device.index] if device.type == 'cuda' else None,
  )
  opt = torch.optim.Adam(model.parameters(), lr=args.lr, weight_decay=args.weight_decay)
  acc = 0.0
  first_epoch, steps_taken = 1, 0
  ckpts = None
  if args.checkpoint:
    loaders = {'train': train_loader, 'test': test_loader}
    ckpts = Checkpoints(args.checkpoint, rank, args.checkpoint_every, model.module, opt, loaders)
    if args.resume:
      first_epoch, steps_taken = ckpts.resume(log)
  for epoch in range(first_epoch, args.epochs + 1):
    taken = steps_taken if epoch == first_epoch else 0

    def on_step(step, epoch=epoch, taken=taken):
      if ckpts is not None:
        ckpts.at_step(epoch, taken + step)

    with model.join():  # replicas hold different numbers of batches
      desc = f'[{rank}] epoch {epoch}'
      loss, train_s = example_args.train_epoch(
        model,
        train_loader,
        opt,
        example_args.seed_forward(model),
        desc,
        args.progress and rank == 0,
        on_step,
      )
    start = time.perf_counter()
    counts = test_accuracy(model.module, test_loader).to(device)
    torch.distributed.all_reduce(counts)
    acc = float(counts[0] / counts[1].clamp(min=1))
    log.info(
      'epoch %d  loss %.4f  test accuracy %.4f  (train %.1f s, test %.1f s)',
      epoch,
      loss,
      acc,
      train_s,
      time.perf_counter() - start,
    )
    if ckpts is not None:
      ckpts.at_epoch_end(epoch)
  if rank == 0:
    log.info('final test accuracy %.4f', acc)
  return acc
