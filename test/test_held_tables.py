"""HeldTables: the feature tables of the partitions held on a host as one
table a GPU gathers a distributed batch's rows from, each id's row found
through the partition book (unified_gather_by_book). Run here on the CPU op
with tables that say a GPU reads them (the op is the same on either)."""

from dataclasses import dataclass
from typing import List, Optional, Union

import torch

from graphlearn_torch.data import Feature
from graphlearn_torch.distributed.data.held_tables import held_tables
from graphlearn_torch.partition.partition_book import GLTPartitionBook, OffsetId2Index

CPU = torch.device('cpu')


@dataclass
class ReadByTheDevice:
  r"""A partition's table as a GPU reads it (``Feature.gpu_table``): its parts
  and its id map."""

  parts: List[torch.Tensor]
  id2index: Union[None, torch.Tensor, OffsetId2Index]
  with_gpu: bool = True
  device: Optional[int] = None

  def gpu_table(self):
    return self.parts, self.id2index


def test_held_tables_give_each_ids_row_of_the_full_table():
  g = torch.Generator().manual_seed(5)
  full = torch.randn(60, 4, generator=g)
  book = torch.cat([torch.randint(1, 4, (40,), generator=g), torch.zeros(20)]).long()
  own = [torch.nonzero(book == p).view(-1) for p in range(4)]
  maps = {p: torch.full((60,), -1) for p in (2, 3)}
  for p, id_map in maps.items():
    id_map[own[p]] = torch.arange(own[p].numel())
  held = [
    # ids 40-59 by offset (a range partition's), hot rows in one part and the rest in another
    ReadByTheDevice([full[40:45].contiguous(), full[45:].contiguous()], OffsetId2Index(40)),
    None,  # held on another host: its rows come over RPC
    ReadByTheDevice([full[own[2]]], maps[2]),
    ReadByTheDevice([full[own[3]]], maps[3]),
  ]
  table, reason = held_tables(held, GLTPartitionBook(book), CPU)
  assert table is not None, reason
  assert table.slot_parts == [2, 1, 1] and table.slot_offsets == [40, 0, 0]
  assert table.slot_of.tolist() == [0, -1, 1, 2] and table.slot_of.dtype == torch.int32
  ids = torch.randint(0, 60, (500,), generator=g)
  rows = table.gather(ids)
  here = book[ids] != 1
  assert torch.equal(rows[here], full[ids[here]])
  assert torch.equal(rows[~here], full[40].expand(int((~here).sum()), -1))  # placeholders


def test_tables_a_gpu_does_not_read_are_gathered_elsewhere():
  book = GLTPartitionBook(torch.zeros(10, dtype=torch.long))
  on_host = Feature(torch.randn(10, 3))
  table, reason = held_tables([on_host], book, CPU)
  assert table is None and reason == 'a table held here is not read by cpu'
  empty = ReadByTheDevice([torch.empty(0, 3)], None)
  table, reason = held_tables([empty], book, CPU)
  assert table is None and 'have 1 parts' in reason
