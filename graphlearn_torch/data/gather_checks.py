"""Checks of several GPU gathers read back together.

A gather on the GPU learns whether every id had a row only by reading a
flag back, a host sync that stops the CPU until the GPU is done. The
gathers of one batch (each node type's features, the edges', the labels)
each mark their flag on the device instead, and the batch reads them all
with one sync before it is handed over.
"""

from typing import Callable, Dict, List, Tuple

import torch

UNMARKED = torch.iinfo(torch.int64).max
r"""A flag's value while its gather has met no id without a row."""


class GatherChecks:
  r"""The pending checks of a batch's gathers.

  Each gather takes a flag (``flag``): one int64 on its device, where the
  gather kernel marks the position of its first id without a row.
  ``raise_first`` reads every flag with one host sync a device; where one
  is marked, it runs that gather again, checked, which raises the error
  naming the id.
  """

  def __init__(self):
    self._pending: Dict[torch.device, List[Tuple[torch.Tensor, Callable[[], object]]]] = {}

  def flag(self, device: torch.device, checked_gather: Callable[[], object]) -> torch.Tensor:
    r"""A new flag on ``device`` for a gather.

    Args:
      device: the device the gather runs on.
      checked_gather: the same gather, checked (it raises on a bad id).
    """
    flag = torch.full((1,), UNMARKED, dtype=torch.int64, device=device)
    self._pending.setdefault(torch.device(device), []).append((flag, checked_gather))
    return flag

  def __len__(self) -> int:
    return sum(len(pending) for pending in self._pending.values())

  def raise_first(self) -> None:
    r"""Raises the error of the first gather that met an id without a row;
    forgets the checks either way."""
    pending, self._pending = self._pending, {}
    for checks in pending.values():
      marks = torch.cat([flag for flag, _ in checks]).tolist()  # the one host sync
      for mark, (_, checked_gather) in zip(marks, checks):
        if mark != UNMARKED:
          checked_gather()
          raise RuntimeError(
            f'a gather marked id position {mark} as without a row, but the same gather, '
            'checked, found every row'
          )
