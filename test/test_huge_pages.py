"""Arrays the sampler reads at random on 2 MB pages: a topology's entries
and edge ids as built, its time-sorted copy's, the inducer's id-indexed map,
and the helpers' values against plain torch."""

import re
from pathlib import Path

import pytest
import torch

import graphlearn_torch as glt
from graphlearn_torch._ext import ops
from graphlearn_torch.data.temporal import time_sorted
from graphlearn_torch.utils.huge_pages import converted, gathered

THP = Path('/sys/kernel/mm/transparent_hugepage/enabled')


def thp_mode() -> str:
  """The bracketed mode of transparent huge pages ('never' where unknown)."""
  found = re.search(r'\[(\w+)\]', THP.read_text()) if THP.exists() else None
  return found.group(1) if found else 'never'


def huge_kb(t: torch.Tensor) -> int:
  """The kB of huge pages backing the mapping that holds ``t``'s data."""
  address, kb, inside = t.data_ptr(), 0, False
  for line in Path('/proc/self/smaps').read_text().splitlines():
    head = re.match(r'^([0-9a-f]+)-([0-9a-f]+) ', line)
    if head:
      inside = int(head.group(1), 16) <= address < int(head.group(2), 16)
    elif inside and line.startswith('AnonHugePages:'):
      kb = int(line.split()[1])
  return kb


needs_thp = pytest.mark.skipif(
  thp_mode() not in ('always', 'madvise'), reason='transparent huge pages are off here'
)


def power_law_topology(num_nodes=200_000, num_edges=3_000_000):
  edges = torch.empty(2, num_edges, dtype=torch.int64)
  glt.datasets.power_law_edges(num_nodes, num_edges, exponent=0.5, seed=1, out=edges)
  return glt.data.Topology(edges, layout='CSC')


@needs_thp
def test_a_built_topology_lies_on_huge_pages():
  topo = power_law_topology()
  for t in (topo.indices, topo.edge_ids):
    assert t.numel() * t.element_size() > 8 << 20
    assert huge_kb(t) >= 2048
  timed = time_sorted(topo, torch.randint(0, 1000, (topo.edge_count,)))
  for t in (timed.indices, timed.edge_ids, timed.edge_time):
    assert huge_kb(t) >= 2048


@needs_thp
def test_empty_huge_pages_puts_an_array_on_huge_pages():
  large = ops.empty_huge_pages(4 << 20, torch.int32).fill_(1)  # 16 MB
  assert huge_kb(large) >= 2048 and int(large.sum()) == 4 << 20


def process_huge_kb() -> int:
  """The kB of huge pages backing this process's anonymous memory."""
  for line in Path('/proc/self/smaps_rollup').read_text().splitlines():
    if line.startswith('AnonHugePages:'):
      return int(line.split()[1])
  return 0


@needs_thp
def test_the_inducers_id_indexed_map_lies_on_huge_pages():
  before = process_huge_kb()
  inducer = ops.Inducer(1, [10_000_000])  # a 40 MB map
  assert process_huge_kb() - before >= 32 << 10
  assert inducer.init_nodes([torch.tensor([9_999_999, 3])])[0].tolist() == [9_999_999, 3]


@pytest.mark.parametrize('numel', [0, 5, 3_000_000])
def test_helpers_give_what_torch_gives(numel):
  values = torch.randn(numel, dtype=torch.float64)
  index = torch.randint(0, max(numel, 1), (numel,)) if numel else torch.empty(0, dtype=torch.long)
  assert torch.equal(gathered(values, index), values[index])
  assert torch.equal(converted(values, torch.float32), values.float())
  assert ops.empty_huge_pages(numel, torch.int16).shape == (numel,)


def test_a_negative_size_is_named():
  with pytest.raises(ValueError, match='numel >= 0'):
    ops.empty_huge_pages(-1, torch.int64)
