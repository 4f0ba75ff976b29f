"""The batching lifecycle shared by every loader: seed positions in, one
sampled and collated batch out per step, reshuffled every epoch, resumable
from a ``state_dict``."""

from abc import ABC, abstractmethod
from typing import Any, Dict, Iterator, Optional, Sequence, Tuple

import torch

from ..batch.features import gather_batch
from ..batch.labels import label_batch
from ..batch.progress import LoaderProgress, fingerprint
from ..batch.pyg import to_pyg
from ..batch.seeds import SeedBatcher
from ..data.dataset import Dataset
from ..sampler.base import BaseSampler, SamplingType
from ..sampler.schema import RandomStream
from ..utils.device import resolve_device


class BaseLoader(ABC):
  """Iterates over batches of seed positions; subclasses sample and collate.

  Args:
    data: the dataset.
    sampler: the sampler.
    num_seeds: how many seeds (nodes or edges) an epoch covers.
    device: where batches go (CUDA falls back to the CPU without a GPU).
    batch_size: seeds per batch.
    shuffle: reshuffle the seeds every epoch.
    drop_last: drop the last incomplete batch.
    seed: seeds the shuffling and each batch's sampling (default: the
      sampler's seed, else one drawn from torch's global generator).
    inputs: what the seeds are (a state of other seeds is refused).
  """

  def __init__(
    self,
    data: Dataset,
    sampler: BaseSampler,
    num_seeds: int,
    device: torch.device,
    batch_size: int = 1,
    shuffle: bool = False,
    drop_last: bool = False,
    seed: Optional[int] = None,
    inputs: Sequence[Any] = (),
  ):
    self.data = data
    self.sampler = sampler
    self.device = resolve_device(device)
    self.batch_size = batch_size
    if seed is None:
      seed = getattr(sampler, 'seed', None)
    self._batcher = SeedBatcher(num_seeds, batch_size, shuffle, drop_last, seed)
    self._progress = LoaderProgress(
      len(self._batcher),
      lambda: {'dataset': fingerprint(data, inputs), 'batch_size': batch_size},
      self._batcher.seed,
    )
    self._batches: Optional[Iterator[Tuple[int, torch.Tensor]]] = None

  def __len__(self) -> int:
    return len(self._batcher)

  @property
  def _seed_loader(self) -> SeedBatcher:
    """GLT's name for what batches the seeds (its tests take ``len`` of it:
    the batches of an epoch)."""
    return self._batcher

  def __repr__(self) -> str:
    return f'{type(self).__name__}()'  # as GLT's loaders print

  def __iter__(self) -> 'BaseLoader':
    epoch, start = self._progress.start_epoch()
    self._batches = self._batcher.batches(epoch, start)
    return self

  def __next__(self) -> Any:
    if self._batches is None:
      self.__iter__()
    position, index = next(self._batches)
    batch = self._sample_batch(
      index, RandomStream.for_batch(self._progress.seed, self._progress.epoch, position)
    )
    self._progress.count_yielded()
    return batch

  @abstractmethod
  def _sample_batch(self, index: torch.Tensor, random: RandomStream) -> Any:
    """Samples and collates the batch of seed positions ``index``, drawing
    from ``random``, the batch's stream."""

  def state_dict(self) -> Dict[str, Any]:
    """Where the loader is: its seed, the epoch and how many of its batches
    were yielded (``batch.progress``). A new loader of the same data that
    loads it yields the batches this one would have yielded next."""
    return self._progress.state_dict()

  def load_state_dict(self, state: Dict[str, Any]) -> None:
    """Resumes from a ``state_dict``: the next ``iter()`` goes on with the
    batches of its epoch that were not yielded.

    Raises:
      ValueError: the state is of another dataset, seeds or batch size, or
        of another format version.
    """
    self._progress.load_state_dict(state)
    self._batcher.seed = self._progress.seed
    self._batches = None

  def _collate_fn(
    self, out, index: torch.Tensor, sampling_type: SamplingType, input_type, edge_dir: str = 'out'
  ) -> Any:
    """The PyG batch of a sampler output: features and labels gathered, and
    the fields that say what it was sampled for (see ``label_batch``)."""
    batch = gather_batch(self.data, out)
    res = label_batch(to_pyg(batch), sampling_type, batch.metadata, input_type, index, edge_dir)
    return res.to(self.device) if self.device.type != 'cpu' else res


def check_kwargs(loader: object, kwargs: dict) -> None:
  if kwargs:
    raise TypeError(f'{type(loader).__name__} got unexpected arguments {sorted(kwargs)}')
