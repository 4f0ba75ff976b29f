"""HeldTables: the feature tables of the partitions held on this host as one
table a GPU gathers a distributed batch's rows from in one call."""

from dataclasses import dataclass
from typing import List, Optional, Tuple

import torch

from ...data import Feature
from ...data.unified_tensor import MAX_PARTS
from ...partition.partition_book import OffsetId2Index, PartitionBook


@dataclass(frozen=True)
class HeldTables:
  r"""The tables of the partitions held here, their parts one after another,
  as ``unified_gather_by_book`` reads them: each id's row is found through
  the partition book and its partition's own id map as it is copied, so no
  map of every id into the combined table is made (it would take 8 bytes an
  id in every process that gathers). An id of a partition held elsewhere
  reads row 0, a placeholder for its row fetched from there.

  Args:
    parts: the held tables' parts, partition after partition.
    slot_parts: how many of ``parts`` each held partition (slot) owns.
    slot_maps: each slot's row of each id (None: ``id - slot_offsets[s]``).
    slot_offsets: each slot's first id, where it has no map.
    book: each id's partition, on the GPU.
    slot_of: each partition's slot (int32; -1: held elsewhere), on the GPU.
  """

  parts: List[torch.Tensor]
  slot_parts: List[int]
  slot_maps: List[Optional[torch.Tensor]]
  slot_offsets: List[int]
  book: torch.Tensor
  slot_of: torch.Tensor

  def gather(self, ids: torch.Tensor, first_bad: Optional[torch.Tensor] = None) -> torch.Tensor:
    r"""The rows of ``ids`` (int64, on the GPU); an id without a row raises,
    or with ``first_bad`` marks its position there (see
    ``unified_gather_by_book``)."""
    return torch.ops.glt.unified_gather_by_book(
      self.parts, self.slot_parts, self.slot_maps, self.slot_offsets, self.book, self.slot_of,
      ids, first_bad,
    )  # fmt: skip


def held_tables(
  held: List[Optional[Feature]], book: PartitionBook, device: torch.device
) -> Tuple[Optional[HeldTables], str]:
  r"""``held``'s tables (each partition's Feature, or None where it is held
  elsewhere) as one table that GPU ``device`` gathers from, or None and why
  not: a table held here is not read by that GPU, the book has no tensor
  form (``PartitionBook.lookup_tensor``), or the tables have no rows or
  too many parts.

  Args:
    held: each partition's Feature held on this host, or None.
    book: where each id's row lives (copied to ``device`` where used).
    device: the GPU.
  """
  ours = [f for f in held if f is not None]
  if not all(f.with_gpu and f.device in (None, device.index) for f in ours):
    return None, f'a table held here is not read by {device}'
  book = book.lookup_tensor(device)
  if book is None:
    return None, 'the partition book has no tensor form'
  placed = [f.gpu_table() for f in ours]
  parts = [part for part_list, _ in placed for part in part_list]
  if not 0 < len(parts) <= MAX_PARTS or sum(part.size(0) for part in parts) == 0:
    return None, f'the tables held here have {len(parts)} parts (at most {MAX_PARTS}, some rows)'
  maps, offsets = [], []
  for _, row_map in placed:
    offset = row_map.offset if isinstance(row_map, OffsetId2Index) else 0
    maps.append(row_map.to(device) if isinstance(row_map, torch.Tensor) else None)
    offsets.append(offset)
  slots = torch.full((len(held),), -1, dtype=torch.int32)
  slots[[p for p, f in enumerate(held) if f is not None]] = torch.arange(
    len(ours), dtype=torch.int32
  )
  table = HeldTables(
    parts, [len(part_list) for part_list, _ in placed], maps, offsets, book, slots.to(device)
  )
  return table, ''
