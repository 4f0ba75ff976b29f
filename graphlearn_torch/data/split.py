"""Seed splits: train, validation and test ids drawn at random."""

from typing import Tuple, Union

import torch


def random_split(
  num_total: int, num_val: Union[float, int], num_test: Union[float, int]
) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
  """Splits ``range(num_total)`` at random into train, validation and test ids.

  Args:
    num_total: the number of ids.
    num_val: the size of the validation split, or its share when < 1.
    num_test: the size of the test split, or its share when < 1.
  """
  num_val = round(num_total * num_val) if isinstance(num_val, float) else int(num_val)
  num_test = round(num_total * num_test) if isinstance(num_test, float) else int(num_test)
  if num_val < 0 or num_test < 0 or num_val + num_test > num_total:
    raise ValueError(f'cannot take {num_val} validation and {num_test} test ids of {num_total}')
  perm = torch.randperm(num_total)
  val, test = perm[:num_val], perm[num_val : num_val + num_test]
  train = perm[num_val + num_test :]
  return train.sort().values, val.sort().values, test.sort().values
