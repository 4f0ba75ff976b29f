"""The lifecycle every loader shares, on one machine and across partitions:
an epoch of batches per ``iter()``, each batch collated to PyG data, and the
loader's place in its epochs (``state_dict``), from which a new loader
resumes."""

import collections
import logging
import os
from abc import ABC, abstractmethod
from typing import Any, Callable, Deque, Dict, Iterator, Optional, Sequence, Tuple

import torch

from ..batch.features import gather_batch
from ..batch.labels import label_batch
from ..batch.progress import LoaderProgress, fingerprint
from ..batch.pyg import to_pyg
from ..batch.sampled import SampledBatch
from ..batch.seeds import SeedBatcher
from ..data.dataset import Dataset
from ..sampler.base import BaseSampler, SamplingType
from ..sampler.schema import RandomStream
from ..utils.batch_threads import BatchThreads
from ..utils.device import batch_to_device, resolve_device, to_device_async
from ..utils.launched import Launched
from .options import LoaderOptions

logger = logging.getLogger(__name__)

# GLT_LAUNCH_AHEAD=0: a loader on a GPU samples one batch at a time.
LAUNCH_AHEAD_ENV = 'GLT_LAUNCH_AHEAD'


def launches_ahead() -> bool:
  """Whether loaders launch a batch before they collate the one before
  (``$GLT_LAUNCH_AHEAD``, default on; where their sampler can)."""
  return os.environ.get(LAUNCH_AHEAD_ENV, '1') != '0'


class BaseLoader(ABC):
  """Iterates over an epoch of batches per ``iter()``, resumable from a
  ``state_dict``; subclasses say where an epoch's batches come from.

  Args:
    num_batches: batches per epoch.
    identity: what a state loaded into the loader must match (see
      ``LoaderProgress``).
    seed: the loader's seed (shuffling and sampling).
    device: where batches go (CUDA falls back to the CPU without a GPU).
  """

  def __init__(
    self,
    num_batches: int,
    identity: Callable[[], Dict[str, Any]],
    seed: Optional[int],
    device: torch.device,
  ):
    self.device = resolve_device(device)
    self._progress = LoaderProgress(num_batches, identity, seed)
    self._epoch_started = False

  def __len__(self) -> int:
    return self._progress.num_batches

  def __repr__(self) -> str:
    return f'{type(self).__name__}()'  # as GLT's loaders print

  def __iter__(self) -> 'BaseLoader':
    epoch, start = self._progress.start_epoch()
    self._start_epoch(epoch, start, self._progress.seed)
    self._epoch_started = True
    return self

  def __next__(self) -> Any:
    if not self._epoch_started:
      self.__iter__()
    batch = self._next_batch()
    self._progress.count_yielded()
    return batch

  @abstractmethod
  def _start_epoch(self, epoch: int, start: int, seed: int) -> None:
    """Starts epoch ``epoch`` from its batch ``start``, with the loader's
    ``seed`` (a resumed loader's seed may differ from the one it was made
    with)."""

  @abstractmethod
  def _next_batch(self) -> Any:
    """The epoch's next batch, collated; raises StopIteration after the
    last."""

  def state_dict(self) -> Dict[str, Any]:
    """Where the loader is: its seed, the epoch and how many of its batches
    were yielded (``batch.progress``); small, ``json``- and
    ``torch.save``-able. Batches sampled ahead and not yet yielded are not
    part of it: a loader that loads it samples them again, the same."""
    return self._progress.state_dict()

  def load_state_dict(self, state: Dict[str, Any]) -> None:
    """Resumes from a ``state_dict``: the next ``iter()`` goes on with the
    batches of its epoch that were not yielded, as the uninterrupted loader
    would have.

    Raises:
      ValueError: the state is of another dataset, seeds or batch size (or,
        distributed, world size, rank or servers), or of another format
        version (checked before anything is sampled).
    """
    self._progress.load_state_dict(state)
    self._epoch_started = False

  def _collate(
    self,
    batch: SampledBatch,
    sampling_type: SamplingType,
    input_type,
    input_id: torch.Tensor,
    edge_dir: str = 'out',
  ) -> Any:
    """The PyG batch of a sampled batch, with the fields that say what it
    was sampled for (see ``label_batch``), on the loader's device: the
    seed positions, which a GPU batch alone holds on the host, copied there
    without a host sync; a batch from host memory (a channel's) copied with
    one (``batch_to_device``)."""
    if input_id is not None and self.device.type != 'cpu':
      input_id = to_device_async(input_id, self.device)
    res = label_batch(to_pyg(batch), sampling_type, batch.metadata, input_type, input_id, edge_dir)
    return batch_to_device(res, self.device) if self.device.type != 'cpu' else res


def batch_threads(sampler: BaseSampler, concurrent_batches: int) -> Optional[BatchThreads]:
  r"""The threads that sample ``concurrent_batches`` batches of ``sampler``
  at once, or None: one batch at a time, or a sampler on a GPU (which
  launches a batch ahead instead)."""
  if int(concurrent_batches) < 1:
    raise ValueError(f'concurrent_batches must be >= 1, got {concurrent_batches}')
  if concurrent_batches == 1:
    return None
  device = getattr(sampler, 'sample_device', torch.device('cpu'))
  if device.type != 'cpu':
    logger.info(
      'concurrent_batches=%d is for sampling on the CPU: a sampler on %s samples a batch at a '
      'time, launching the next one ahead',
      concurrent_batches,
      device,
    )
    return None
  return BatchThreads(concurrent_batches)


class SamplerLoader(BaseLoader):
  """A loader on one machine: its seeds batched by a ``SeedBatcher``, each
  batch sampled by its sampler in the calling process and given its
  features and labels from the dataset; subclasses sample a batch.

  Args:
    data: the dataset.
    sampler: the sampler.
    num_seeds: how many seeds (nodes or edges) an epoch covers.
    device: where batches go.
    options: batching (``batch_size``, ``shuffle``, ``drop_last``,
      ``seed``; default seed: the sampler's) and ``concurrent_batches``.
    inputs: what the seeds are (a state of other seeds is refused).
  """

  def __init__(
    self,
    data: Dataset,
    sampler: BaseSampler,
    num_seeds: int,
    device: torch.device,
    options: LoaderOptions,
    inputs: Sequence[Any] = (),
  ):
    self.data = data
    self.sampler = sampler
    self.batch_size = options.batch_size
    seed = options.seed if options.seed is not None else getattr(sampler, 'seed', None)
    self._batcher = SeedBatcher(
      num_seeds, options.batch_size, options.shuffle, options.drop_last, seed
    )
    identity = {'dataset': fingerprint(data, inputs), 'batch_size': options.batch_size}
    super().__init__(len(self._batcher), lambda: identity, self._batcher.seed, device)
    self._batches: Iterator[Tuple[int, torch.Tensor]] = iter(())
    self._epoch = -1
    # On a GPU that draws whole batches, each batch is launched before the
    # one before it is collated, so that the GPU draws it meanwhile
    # (GLT_LAUNCH_AHEAD=0: one batch at a time).
    self._launches_ahead = getattr(sampler, 'launches_ahead', False) and launches_ahead()
    # On the CPU, concurrent_batches > 1: batches sampled at once on threads
    # of their own (in the order of the epoch), each thread's kernels on it alone.
    self._threads = batch_threads(sampler, options.concurrent_batches)
    self._ahead: Deque[Launched] = collections.deque()  # the next batches, launched

  @property
  def _seed_loader(self) -> SeedBatcher:
    """GLT's name for what batches the seeds (its tests take ``len`` of it:
    the batches of an epoch)."""
    return self._batcher

  def _start_epoch(self, epoch: int, start: int, seed: int) -> None:
    self._drop_ahead()
    self._batcher.seed = seed
    self._epoch = epoch
    self._batches = self._batcher.batches(epoch, start)

  def _next_batch(self) -> Any:
    launched = self._ahead.popleft() if self._ahead else self._launch_next()  # StopIteration
    self._launch_ahead()
    return launched.result()

  def _launch_ahead(self) -> None:
    """Launches the batches after the one being finished: one on a GPU that
    draws it meanwhile, enough to keep every batch thread busy, else none."""
    depth = self._threads.num_threads if self._threads is not None else int(self._launches_ahead)
    while len(self._ahead) < depth:
      try:
        self._ahead.append(self._launch_next())
      except StopIteration:
        return
      except Exception as e:  # raised in its turn, by its batch
        self._ahead.append(Launched.failed(e))
        return

  def _launch_next(self) -> Launched:
    """The epoch's next batch, launched; StopIteration after the last."""
    position, index = next(self._batches)
    random = RandomStream.for_batch(self._batcher.seed, self._epoch, position)
    return self._launch_batch(index, random)

  def _drop_ahead(self) -> None:
    """Drops the batches launched ahead (a new epoch, a loaded state)."""
    ahead, self._ahead = self._ahead, collections.deque()
    for launched in ahead:
      launched.discard()

  def shutdown(self) -> None:
    """Drops the batches launched ahead and stops the batch threads
    (``concurrent_batches``; also done when the loader is collected)."""
    self._drop_ahead()
    if self._threads is not None:
      self._threads.shutdown()

  @abstractmethod
  def _sample_batch(self, index: torch.Tensor, random: RandomStream) -> Any:
    """Samples and collates the batch of seed positions ``index``, drawing
    from ``random``, the batch's stream."""

  def _launch_batch(self, index: torch.Tensor, random: RandomStream) -> Launched:
    """``_sample_batch`` launched: by default sampled and collated here, or
    on a batch thread (``concurrent_batches``)."""
    if self._threads is not None:
      return self._threads.launch(self._sample_batch, index, random)
    return Launched.done(self._sample_batch(index, random))

  def _collate_fn(
    self, out, index: torch.Tensor, sampling_type: SamplingType, input_type, edge_dir: str = 'out'
  ) -> Any:
    """The PyG batch of a sampler output: features and labels gathered from
    the dataset, then collated (``_collate``)."""
    batch = gather_batch(self.data, out)
    return self._collate(batch, sampling_type, input_type, index, edge_dir)
