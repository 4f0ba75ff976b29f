"""Which seeds make each batch: positions split into batches, reshuffled
every epoch."""

from typing import Iterator, Optional, Tuple

import torch

from ..sampler.schema import checked_seed, draw_seed, mix_seed


class SeedBatcher:
  """Splits ``num_seeds`` seed positions into batches, reshuffled every epoch.

  Epoch ``e``'s order is a function of ``seed`` and ``e`` alone, so any
  epoch's batches can be made again from any position (a resumed loader's).

  Args:
    num_seeds: how many seeds there are.
    batch_size: seeds per batch (> 0).
    shuffle: permute the seeds at the start of every epoch.
    drop_last: drop a last batch smaller than ``batch_size``.
    seed: seeds the shuffling; None draws one from torch's global generator
      (so ``torch.manual_seed`` governs it).
  """

  def __init__(
    self,
    num_seeds: int,
    batch_size: int,
    shuffle: bool = False,
    drop_last: bool = False,
    seed: Optional[int] = None,
  ):
    # A bool is an int to Python, not a batch size (torch's DataLoader refuses it too).
    if not isinstance(batch_size, int) or isinstance(batch_size, bool) or batch_size <= 0:
      raise ValueError(f'batch_size must be a positive integer, got {batch_size!r}')
    self.num_seeds = num_seeds
    self.batch_size = batch_size
    self.shuffle = shuffle
    self.drop_last = drop_last
    self.seed = draw_seed() if seed is None else checked_seed(seed)
    self._epoch = -1  # the last epoch ``__iter__`` started

  @classmethod
  def from_config(cls, num_seeds: int, config) -> 'SeedBatcher':
    r"""The batcher a (distributed) loader's ``SamplingConfig`` describes."""
    return cls(num_seeds, config.batch_size, config.shuffle, config.drop_last, config.seed)

  def __len__(self) -> int:
    if self.drop_last:
      return self.num_seeds // self.batch_size
    return (self.num_seeds + self.batch_size - 1) // self.batch_size

  def order(self, epoch: int) -> torch.Tensor:
    r"""Epoch ``epoch``'s seed positions, in batch order."""
    if not self.shuffle:
      return torch.arange(self.num_seeds)
    generator = torch.Generator().manual_seed(mix_seed(self.seed, epoch))
    return torch.randperm(self.num_seeds, generator=generator)

  def batches(self, epoch: int, start: int = 0) -> Iterator[Tuple[int, torch.Tensor]]:
    r"""``(position, seed positions)`` of epoch ``epoch``'s batches from
    position ``start`` on.

    Args:
      epoch: the epoch (0, 1, ...).
      start: the first batch's position in the epoch.
    """
    order = self.order(epoch)
    for i in range(start, len(self)):
      yield i, order[i * self.batch_size : (i + 1) * self.batch_size]

  def __iter__(self) -> Iterator[torch.Tensor]:
    r"""The next epoch's batches of seed positions."""
    self._epoch += 1
    return (index for _, index in self.batches(self._epoch))
