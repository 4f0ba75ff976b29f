"""Where a loader is in its epochs, as a small state that a new loader of
the same data resumes from (``state_dict`` / ``load_state_dict``, as
torchdata's ``StatefulDataLoader`` has them).

A loader's batches are a function of its seed, the epoch and the batch's
position in it (``SeedBatcher.order``, ``RandomStream.for_batch``), so the
state is only that seed, the epoch and how many of its batches were yielded:
never the batches, nor what was sampled ahead and not yet yielded."""

import enum
import hashlib
from typing import Any, Callable, Dict, Iterable, Optional, Tuple, Union

import torch

from ..sampler.schema import draw_seed

STATE_FORMAT = 'graphlearn_torch.loader_state'
STATE_VERSION = 1

# What a state must agree on with the loader that loads it, and what to
# call a disagreement.
_IDENTITY_NAMES = {
  'dataset': 'another dataset or other seeds',
  'num_batches': 'another number of batches per epoch',
  'batch_size': 'another batch size',
  'world_size': 'another world size',
  'rank': 'another rank',
  'servers': 'other servers',
}


def fingerprint(data: Any = None, inputs: Iterable[Any] = ()) -> str:
  r"""A short digest of a loader's graph (each edge type's sizes) and of
  its inputs, so that a state taken on other data does not match it.

  Args:
    data: a ``Dataset`` (or a ``DistDataset``'s partition); None on a
      server-client client.
    inputs: the seeds, or what names them: tensors (by content), plain
      values, enums, and containers and objects of them (by their fields).
  """
  digest = hashlib.blake2b(digest_size=12)
  graphs = getattr(data, 'graph', None)
  if graphs is not None:
    items = sorted(graphs.items(), key=repr) if isinstance(graphs, dict) else [(None, graphs)]
    for etype, graph in items:
      topo = graph.topo
      digest.update(repr((etype, topo.row_count, topo.col_count, topo.edge_count)).encode())
  _feed(digest, list(inputs))
  return digest.hexdigest()


def _feed(digest, value: Any) -> None:
  if isinstance(value, torch.Tensor):
    value = value.detach().cpu().contiguous()
    digest.update(repr(('tensor', value.dtype, tuple(value.shape))).encode())
    digest.update(value.view(-1).view(torch.uint8).numpy().tobytes())
  elif value is None or isinstance(value, (str, int, float, bool)):
    digest.update(repr(value).encode())
  elif isinstance(value, enum.Enum):
    digest.update(repr((type(value).__name__, value.value)).encode())
  elif isinstance(value, (list, tuple)):
    digest.update(f'{type(value).__name__}{len(value)}'.encode())
    for item in value:
      _feed(digest, item)
  elif isinstance(value, dict) or hasattr(value, '__dict__'):
    fields = value if isinstance(value, dict) else vars(value)
    digest.update(f'{type(value).__name__}{len(fields)}'.encode())
    for key in sorted(fields, key=repr):
      _feed(digest, key)
      _feed(digest, fields[key])
  else:
    raise TypeError(f'cannot fingerprint a {type(value).__name__}')


class LoaderProgress:
  r"""A loader's seed and its place in its epochs.

  ``start_epoch`` says which epoch an ``iter()`` runs and from which batch:
  the next epoch from its first batch, or, once after ``load_state_dict``,
  the loaded epoch from its first batch not yet yielded.

  Args:
    num_batches: batches per epoch.
    identity: what a loaded state must match besides ``num_batches``
      (``batch_size``, ``dataset`` and, where they apply, ``world_size``,
      ``rank``, ``servers``; see ``fingerprint``), or a function that says
      it (called once, when a state is first taken or loaded: a
      fingerprint of many seeds takes a while).
    seed: the loader's seed (shuffling and sampling); None draws one from
      torch's global generator (``torch.manual_seed`` governs it).
  """

  def __init__(
    self,
    num_batches: int,
    identity: Union[Dict[str, Any], Callable[[], Dict[str, Any]]],
    seed: Optional[int] = None,
  ):
    self.num_batches = int(num_batches)
    self._identity = identity
    self.seed = draw_seed() if seed is None else int(seed)
    self.epoch = -1  # the epoch in progress (or last run); -1 before the first
    self.yielded = 0  # its batches yielded so far
    self.extra: Dict[str, Any] = {}  # a source's own part (per-server counts)
    self._resume = False

  def start_epoch(self) -> Tuple[int, int]:
    r"""``(epoch, first batch position)`` of the epoch an ``iter()`` starts."""
    if self._resume:
      self._resume = False
      return self.epoch, self.yielded
    self.epoch += 1
    self.yielded = 0
    self.extra = {}
    return self.epoch, 0

  @property
  def identity(self) -> Dict[str, Any]:
    r"""What a loaded state must match."""
    if callable(self._identity):
      self._identity = self._identity()
    return {'num_batches': self.num_batches, **self._identity}

  def count_yielded(self) -> None:
    r"""Counts one more batch yielded to the user."""
    self.yielded += 1

  def state_dict(self) -> Dict[str, Any]:
    r"""The state: plain ints and strings (``json``- and
    ``torch.save``-able)."""
    return {
      'format': STATE_FORMAT,
      'version': STATE_VERSION,
      'identity': self.identity,
      'seed': self.seed,
      'epoch': self.epoch,
      'yielded': self.yielded,
      'extra': dict(self.extra),
    }

  def load_state_dict(self, state: Dict[str, Any]) -> None:
    r"""Resumes from ``state``: the next ``iter()`` goes on with the batches
    of its epoch that were not yielded (or with the next epoch, when all
    were).

    Raises:
      ValueError: the state is not a loader state of this format version,
        or was taken from a loader of other data, batch size, world size,
        rank or servers (named).
    """
    if not isinstance(state, dict) or state.get('format') != STATE_FORMAT:
      raise ValueError(f'not a graphlearn_torch loader state (no {STATE_FORMAT!r} format key)')
    if state.get('version') != STATE_VERSION:
      raise ValueError(
        f'the loader state is of format version {state.get("version")!r}; this version of '
        f'graphlearn_torch reads version {STATE_VERSION}'
      )
    theirs, ours = state.get('identity', {}), self.identity
    for key in sorted(set(ours) | set(theirs)):
      if theirs.get(key) != ours.get(key):
        what = _IDENTITY_NAMES.get(key, f'another {key}')
        raise ValueError(
          f'the loader state was taken from a loader of {what}: its {key} is '
          f"{theirs.get(key)!r}, this loader's {ours.get(key)!r}"
        )
    epoch, yielded = int(state['epoch']), int(state['yielded'])
    if not 0 <= yielded <= self.num_batches:
      raise ValueError(f'the loader state yielded {yielded} of {self.num_batches} batches')
    self.seed = int(state['seed'])
    self.epoch, self.yielded = epoch, yielded
    self.extra = dict(state.get('extra', {}))
    self._resume = 0 <= epoch and yielded < self.num_batches
