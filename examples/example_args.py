"""What every example shares: the model and training flags, ``--smoke`` (a
tiny run, for CI), the entry point, the training epoch of node
classification, and keeping the best epoch."""

import argparse
import logging
import sys
import threading
import time
from typing import Callable, Dict, Optional, Sequence, Tuple

import torch
import torch.nn.functional as F
from tqdm import tqdm

# tqdm's default lock is a multiprocessing one: a named semaphore in
# /dev/shm, which a job killed whole (SIGKILL) leaves behind. The examples'
# bars are drawn by one thread of each process.
tqdm.set_lock(threading.RLock())


def add_training_args(
  p: argparse.ArgumentParser,
  *,
  hidden: int = 64,
  dropout: float = 0.5,
  lr: float = 0.01,
  batch_size: int = 32,
  epochs: int = 10,
) -> None:
  r"""``--fanout`` (one per layer), the model, the optimizer, batches,
  epochs, ``--seed`` and ``--progress``/``--no-progress`` (progress bars;
  by default only when stderr is a terminal, so that a log file gets the
  one-line epoch summaries alone); the keywords set the defaults."""
  p.add_argument('--fanout', type=int, nargs='+', default=[10, 10], help='one per layer')
  p.add_argument('--hidden', type=int, default=hidden)
  p.add_argument('--dropout', type=float, default=dropout)
  p.add_argument('--lr', type=float, default=lr)
  p.add_argument('--weight_decay', type=float, default=5e-4)
  p.add_argument('--batch_size', type=int, default=batch_size)
  p.add_argument('--epochs', type=int, default=epochs)
  p.add_argument('--seed', type=int, default=0)
  p.add_argument(
    '--progress',
    action=argparse.BooleanOptionalAction,
    default=None,
    help='progress bars (default: only when stderr is a terminal)',
  )


def add_gpu_args(p: argparse.ArgumentParser) -> None:
  r"""GLT's GPU flags: ``--device`` (where batches and the model go, and
  feature rows are gathered), ``--graph_mode`` ('CPU', 'ZERO_COPY': the
  topology in pinned host memory read by GPU sampling, 'CUDA': in GPU
  memory) and ``--split_ratio`` (the share of feature rows, the hottest by
  in-degree, kept in GPU memory). Without a GPU and the CUDA kernels every
  one of them falls back to the CPU path, with a log line."""
  p.add_argument('--device', default='cpu', help="'cpu', or 'cuda' / 'cuda:N'")
  p.add_argument('--graph_mode', default='CPU', choices=['CPU', 'ZERO_COPY', 'CUDA'])
  p.add_argument('--split_ratio', type=float, default=0.0, help='feature rows kept on the GPU')


def resolve_gpu_args(args: argparse.Namespace) -> torch.device:
  r"""The device ``--device`` names here (the CPU without a GPU)."""
  from graphlearn_torch.utils import resolve_device

  return resolve_device(args.device)


def log_placement(log: logging.Logger, ds, device: torch.device) -> None:
  r"""Logs where ``ds`` (a ``glt.data.Dataset``) is sampled, by graph mode
  and device, and where the batches and the model go (``device``): after a
  GPU flag fell back to the CPU this line says so too."""
  graphs = ds.graph.values() if isinstance(ds.graph, dict) else [ds.graph]
  where = sorted({f'graph mode {g.mode}, sampled on {g.sampling_device}' for g in graphs})
  log.info('%s; batches and model on %s', ' / '.join(where), device)


def parse_args(
  p: argparse.ArgumentParser, smoke: Dict[str, object], argv: Optional[Sequence[str]] = None
) -> argparse.Namespace:
  r"""Parses with a ``--smoke`` flag added, which sets ``smoke``'s values
  (those the parser knows) over the others."""
  p.add_argument('--smoke', action='store_true', help=f'a tiny run: {smoke}')
  args = p.parse_args(argv)
  if args.smoke:
    vars(args).update({k: v for k, v in smoke.items() if k in vars(args)})
  if getattr(args, 'progress', False) is None:
    args.progress = sys.stderr.isatty()
  return args


def main(parser: argparse.ArgumentParser, run: Callable, smoke: Dict[str, object]) -> None:
  r"""An example's entry point: logging to stderr, arguments, ``run(args)``."""
  logging.basicConfig(level=logging.INFO, format='%(asctime)s %(message)s', datefmt='%H:%M:%S')
  run(parse_args(parser, smoke))


Forward = Callable[[object], Tuple[torch.Tensor, torch.Tensor]]


def seed_forward(model: torch.nn.Module) -> Forward:
  r"""``batch -> (logits, labels)`` of a homogeneous batch's seed nodes."""

  def forward(batch):
    size = batch.batch_size
    return model(batch.x, batch.edge_index)[:size], batch.y[:size]

  return forward


def train_epoch(
  model: torch.nn.Module,
  loader,
  opt: torch.optim.Optimizer,
  forward: Forward,
  desc: str,
  progress: bool,
  on_step: Optional[Callable[[int], None]] = None,
) -> Tuple[float, float]:
  r"""One epoch of node classification (cross-entropy on the seeds) with a
  progress bar; returns ``(mean loss per seed, seconds)``.

  Args:
    on_step: called with the number of steps taken after each step.
  """
  model.train()
  start, total_loss, seen = time.perf_counter(), 0.0, 0
  bar = tqdm(loader, desc=desc, leave=False, disable=not progress)
  for step, batch in enumerate(bar, 1):
    opt.zero_grad()
    out, y = forward(batch)
    loss = F.cross_entropy(out, y)
    loss.backward()
    opt.step()
    total_loss += loss.item() * y.numel()
    seen += y.numel()
    bar.set_postfix(loss=f'{loss.item():.4f}')
    if on_step is not None:
      on_step(step)
  return total_loss / max(seen, 1), time.perf_counter() - start


def fit(
  model: torch.nn.Module,
  loader,
  opt: torch.optim.Optimizer,
  forward: Forward,
  evaluate: Callable[[str], float],
  args: argparse.Namespace,
  log: logging.Logger,
  eval_every: int = 1,
) -> Dict[str, float]:
  r"""Trains ``args.epochs`` epochs, validating every ``eval_every`` and
  after the last; returns the best epoch (``BestEpoch.log``).

  Args:
    evaluate: ``split -> accuracy`` for 'val' and 'test'.
  """
  best = BestEpoch('accuracy')
  for epoch in range(1, args.epochs + 1):
    loss, seconds = train_epoch(model, loader, opt, forward, f'epoch {epoch}', args.progress)
    if epoch % eval_every == 0 or epoch == args.epochs:
      val = evaluate('val')
      best.update(epoch, val, lambda: evaluate('test'))
      log.info('epoch %3d  loss %.4f  val %.4f  (%.2fs)', epoch, loss, val, seconds)
  return best.log(log)


class BestEpoch:
  r"""The epoch with the best validation score and its test score.

  Args:
    metric: the score's name in the log.
  """

  def __init__(self, metric: str):
    self.metric = metric
    self.val, self.test, self.epoch = -1.0, 0.0, 0

  def update(self, epoch: int, val: float, test: Callable[[], float]) -> None:
    r"""Keeps ``epoch`` if ``val`` beats the best so far; ``test()`` is
    evaluated only then."""
    if val > self.val:
      self.val, self.test, self.epoch = val, test(), epoch

  def log(self, log: logging.Logger) -> Dict[str, float]:
    r"""Logs the best epoch; returns ``{'val', 'test', 'epoch'}``."""
    log.info(
      'best val %s %.4f at epoch %d: test %s %.4f',
      self.metric, self.val, self.epoch, self.metric, self.test,
    )  # fmt: skip
    return {'val': self.val, 'test': self.test, 'epoch': self.epoch}
