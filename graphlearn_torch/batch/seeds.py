"""Which seeds make each batch: positions split into batches, reshuffled
every epoch."""

from typing import Iterator, Optional

import torch


class SeedBatcher:
  """Splits ``num_seeds`` seed positions into batches, reshuffled every epoch.

  Args:
    num_seeds: how many seeds there are.
    batch_size: seeds per batch (> 0).
    shuffle: permute the seeds at the start of every epoch.
    drop_last: drop a last batch smaller than ``batch_size``.
    seed: seeds the shuffling; None uses torch's global generator.
  """

  def __init__(
    self,
    num_seeds: int,
    batch_size: int,
    shuffle: bool = False,
    drop_last: bool = False,
    seed: Optional[int] = None,
  ):
    if not isinstance(batch_size, int) or batch_size <= 0:
      raise ValueError(f'batch_size must be a positive integer, got {batch_size!r}')
    self.num_seeds = num_seeds
    self.batch_size = batch_size
    self.shuffle = shuffle
    self.drop_last = drop_last
    self._generator = torch.Generator().manual_seed(seed) if seed is not None else None

  @classmethod
  def from_config(cls, num_seeds: int, config) -> 'SeedBatcher':
    r"""The batcher a (distributed) loader's ``SamplingConfig`` describes."""
    return cls(num_seeds, config.batch_size, config.shuffle, config.drop_last, config.seed)

  def __len__(self) -> int:
    if self.drop_last:
      return self.num_seeds // self.batch_size
    return (self.num_seeds + self.batch_size - 1) // self.batch_size

  def __iter__(self) -> Iterator[torch.Tensor]:
    if self.shuffle:
      order = torch.randperm(self.num_seeds, generator=self._generator)
    else:
      order = torch.arange(self.num_seeds)
    for i in range(len(self)):
      yield order[i * self.batch_size : (i + 1) * self.batch_size]
