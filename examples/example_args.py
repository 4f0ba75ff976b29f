"""What every example shares: the model and training flags, ``--smoke`` (a
tiny run, for CI), the entry point, the training epoch of node
classification, and keeping the best epoch."""

import argparse
import logging
import os
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
  epochs, ``--seed``, checkpoints (``--checkpoint``, ``--checkpoint_every``,
  ``--resume``, ``--deterministic``; see ``Checkpoints``) and
  ``--progress``/``--no-progress`` (progress bars; by default only when
  stderr is a terminal, so that a log file gets the one-line epoch summaries
  alone); the keywords set the defaults."""
  p.add_argument('--fanout', type=int, nargs='+', default=[10, 10], help='one per layer')
  p.add_argument('--hidden', type=int, default=hidden)
  p.add_argument('--dropout', type=float, default=dropout)
  p.add_argument('--lr', type=float, default=lr)
  p.add_argument('--weight_decay', type=float, default=5e-4)
  p.add_argument('--batch_size', type=int, default=batch_size)
  p.add_argument('--epochs', type=int, default=epochs)
  p.add_argument('--seed', type=int, default=0)
  p.add_argument(
    '--checkpoint',
    default=None,
    help='a directory: save the model, optimizer and loaders there every --checkpoint_every '
    'steps and after every epoch',
  )
  p.add_argument('--checkpoint_every', type=int, default=50, help='training steps')
  p.add_argument(
    '--resume', action='store_true', help='go on from the latest checkpoint in --checkpoint'
  )
  p.add_argument(
    '--deterministic',
    action='store_true',
    help='deterministic torch kernels: a resumed run ends with the same model',
  )
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


SEQ_PER_EPOCH = 1_000_000
r"""Checkpoint ``epoch * SEQ_PER_EPOCH + step``: ``step`` training steps of
``epoch`` taken (0: epoch ``epoch - 1`` done, its evaluation included)."""


class Checkpoints:
  r"""Checkpoints of a training run in ``directory``: the model, the
  optimizer, the loaders (and whatever else has ``state_dict``) and torch's
  random state (``glt.utils.save_ckpt``), every ``every`` steps and after
  every epoch.

  Args:
    directory: where they go.
    every: training steps between checkpoints.
    model: the model.
    optimizer: its optimizer.
    stateful: the loaders (``'train'`` among them) and other objects with
      ``state_dict`` / ``load_state_dict``, by name.
  """

  def __init__(self, directory: str, every: int, model, optimizer, stateful: Dict[str, object]):
    self.directory = directory
    self.every = every
    self.model, self.optimizer, self.stateful = model, optimizer, stateful
    self.steps_taken_by_all = self.steps_every_process_takes(len(stateful['train']))

  def steps_every_process_takes(self, steps: int) -> int:
    r"""The steps of an epoch that every training process takes (one here)."""
    return steps

  def saved_by_all(self, saved: set) -> set:
    r"""The checkpoints every training process saved (one here)."""
    return saved

  def _save(self, epoch: int, step: int) -> None:
    import graphlearn_torch as glt

    seq = epoch * SEQ_PER_EPOCH + step
    glt.utils.save_ckpt(seq, self.directory, self.model, self.optimizer, epoch, self.stateful)

  def at_step(self, epoch: int, step: int) -> None:
    r"""Saves after ``step`` steps of ``epoch`` if it is a checkpoint: a
    multiple of ``every`` that every process takes, short of its last (a
    loader that yielded its last batch starts the next epoch)."""
    if step % self.every == 0 and step < self.steps_taken_by_all:
      self._save(epoch, step)

  def at_epoch_end(self, epoch: int) -> None:
    r"""Saves after epoch ``epoch`` (its evaluation included)."""
    self._save(epoch + 1, 0)

  def resume(self, log: logging.Logger) -> Tuple[int, int]:
    r"""Loads the latest checkpoint (every process saved); returns ``(epoch,
    steps taken in it)`` to go on from, ``(1, 0)`` when there is none."""
    import graphlearn_torch as glt

    saved = set()
    if os.path.isdir(self.directory):
      for name in os.listdir(self.directory):
        if name.startswith('model_seq_') and name.endswith('.ckpt'):
          saved.add(int(name[len('model_seq_') : -len('.ckpt')]))
    saved = self.saved_by_all(saved)
    if not saved:
      log.info('no checkpoint to resume from in %s: starting over', self.directory)
      return 1, 0
    seq = max(saved)
    glt.utils.load_ckpt(seq, self.directory, self.model, self.optimizer, self.stateful)
    epoch, step = divmod(seq, SEQ_PER_EPOCH)
    log.info('resumed from checkpoint %d: epoch %d after %d steps', seq, epoch, step)
    return epoch, step


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
  after the last; returns the best epoch (``BestEpoch.log``). With
  ``--checkpoint``, saves ``Checkpoints``; with ``--resume``, goes on from
  the latest.

  Args:
    evaluate: ``split -> accuracy`` for 'val' and 'test'.
  """
  if args.deterministic:
    torch.use_deterministic_algorithms(True)
  best = BestEpoch('accuracy')
  first_epoch, steps_taken, ckpts = 1, 0, None
  if args.checkpoint:
    ckpts = Checkpoints(
      args.checkpoint, args.checkpoint_every, model, opt, {'train': loader, 'best': best}
    )
    if args.resume:
      first_epoch, steps_taken = ckpts.resume(log)
  for epoch in range(first_epoch, args.epochs + 1):
    on_step = None
    if ckpts is not None:
      taken = steps_taken if epoch == first_epoch else 0

      def on_step(step, epoch=epoch, taken=taken):
        ckpts.at_step(epoch, taken + step)

    desc = f'epoch {epoch}'
    loss, seconds = train_epoch(model, loader, opt, forward, desc, args.progress, on_step)
    if epoch % eval_every == 0 or epoch == args.epochs:
      val = evaluate('val')
      best.update(epoch, val, lambda: evaluate('test'))
      log.info('epoch %3d  loss %.4f  val %.4f  (%.2fs)', epoch, loss, val, seconds)
    if ckpts is not None:
      ckpts.at_epoch_end(epoch)
  return best.log(log)


class BestEpoch:
  r"""The epoch with the best validation score and its test score.

  Args:
    metric: the score's name in the log.
  """

  def __init__(self, metric: str):
    self.metric = metric
    self.val, self.test, self.epoch = -1.0, 0.0, 0

  def state_dict(self) -> Dict[str, float]:
    r"""The best epoch so far (a checkpoint keeps it)."""
    return {'val': self.val, 'test': self.test, 'epoch': self.epoch}

  def load_state_dict(self, state: Dict[str, float]) -> None:
    self.val, self.test, self.epoch = state['val'], state['test'], state['epoch']

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
