"""Arrays the sampler reads at random on 2 MB pages: a topology's entries
and edge ids as built, its time-sorted copy's, the inducer's id-indexed map,
a CPU feature table (moved in place), a host-shared copy in every
mapping, and the helpers' values against plain torch."""

import ctypes
import mmap
import os
import re
from functools import partial
from pathlib import Path

import numpy as np
import pytest
import torch

import graphlearn_torch as glt
from graphlearn_torch._ext import ops
from graphlearn_torch.data import feature as feature_module
from graphlearn_torch.data.temporal import time_sorted
from graphlearn_torch.utils.host_share import HostSharedTensor
from graphlearn_torch.utils.huge_pages import (
  HUGE_PAGE,
  collapse,
  converted,
  gathered,
  in_private_memory,
  whole_huge_pages,
)

THP = Path('/sys/kernel/mm/transparent_hugepage/enabled')


def thp_mode() -> str:
  """The bracketed mode of transparent huge pages ('never' where unknown)."""
  found = re.search(r'\[(\w+)\]', THP.read_text()) if THP.exists() else None
  return found.group(1) if found else 'never'


def smaps_fields(start: int, end: int, field: str) -> list:
  """``(header line, kB of field)`` of each mapping of /proc/self/smaps
  that holds bytes of [start, end)."""
  found, inside = [], False
  for line in Path('/proc/self/smaps').read_text().splitlines():
    head = re.match(r'^([0-9a-f]+)-([0-9a-f]+) ', line)
    if head:
      inside = int(head.group(1), 16) < end and int(head.group(2), 16) > start
      header = line
    elif inside and line.startswith(field + ':'):
      found.append((header, int(line.split()[1])))
  return found


def huge_kb(t: torch.Tensor, field: str = 'AnonHugePages') -> int:
  """The kB of huge pages backing the mapping that holds ``t``'s data (of
  shared memory: field 'ShmemPmdMapped')."""
  return sum(kb for _, kb in smaps_fields(t.data_ptr(), t.data_ptr() + 1, field))


def skip_where_the_kernel_has_no_huge_page_now():
  """Skips the test where a fresh 8 MB mapping advised as huge pages gets
  none either: the kernel has no free huge page just then (its memory
  fragmented, or the memory cgroup full), which is not ours to test."""
  huge = 2 << 20
  control = mmap.mmap(-1, 5 * huge, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
  control.madvise(mmap.MADV_HUGEPAGE)
  array = torch.frombuffer(control, dtype=torch.uint8).fill_(1)
  got = huge_kb(array)
  del array
  if got == 0:
    pytest.skip('the kernel has no free huge page just now')


def assert_on_huge_pages(t: torch.Tensor, kb: int = 2048, field: str = 'AnonHugePages'):
  """Asserts ``t`` lies on at least ``kb`` kB of huge pages (``huge_kb``'s
  ``field``), where the kernel has any to give."""
  if huge_kb(t, field) < kb:
    skip_where_the_kernel_has_no_huge_page_now()
    assert huge_kb(t, field) >= kb


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
    assert_on_huge_pages(t)
  timed = time_sorted(topo, torch.randint(0, 1000, (topo.edge_count,)))
  for t in (timed.indices, timed.edge_ids, timed.edge_time):
    assert_on_huge_pages(t)


@needs_thp
def test_empty_huge_pages_puts_an_array_on_huge_pages():
  large = ops.empty_huge_pages(4 << 20, torch.int32).fill_(1)  # 16 MB
  assert int(large.sum()) == 4 << 20
  assert_on_huge_pages(large)


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
  if process_huge_kb() - before < 32 << 10:
    skip_where_the_kernel_has_no_huge_page_now()
    assert process_huge_kb() - before >= 32 << 10
  assert inducer.init_nodes([torch.tensor([9_999_999, 3])])[0].tolist() == [9_999_999, 3]


SPLIT_COUNTERS = ('thp_split_pmd', 'thp_split_page', 'thp_migration_split', 'thp_swpout_fallback')


def huge_page_splits() -> int:
  """The huge pages the kernel has split so far, machine-wide (reclaim,
  swap, NUMA migration, any process's partial unmap): /proc/vmstat's
  counters."""
  path = Path('/proc/vmstat')
  if not path.exists():
    return 0
  counts = dict(line.split() for line in path.read_text().splitlines())
  return sum(int(counts.get(name, 0)) for name in SPLIT_COUNTERS)


KPF_THP = 1 << 22  # /proc/kpageflags: the frame is part of a transparent huge page
PFN_BITS = (1 << 55) - 1


def frames_of(start: int) -> np.ndarray:
  """The page frames of the 512 pages of the 2 MB page at ``start`` (0 for a
  page not present, or where this process may not read frames)."""
  with open('/proc/self/pagemap', 'rb') as pagemap:
    pagemap.seek(start // 4096 * 8)
    entries = np.frombuffer(pagemap.read(512 * 8), dtype=np.uint64)
  present = (entries >> np.uint64(63)) == 1
  return np.where(present, entries & np.uint64(PFN_BITS), 0).astype(np.int64)


def on_a_huge_page(start: int) -> bool:
  """Whether the 2 MB page at ``start`` lies whole on one transparent huge
  page: 512 frames in a row from a 2 MB bound, the first a THP's."""
  frames = frames_of(start)
  head = int(frames[0])
  if head == 0 or head % 512 or not np.array_equal(frames, head + np.arange(512)):
    return False
  with open('/proc/kpageflags', 'rb') as kpageflags:
    kpageflags.seek(head * 8)
    return bool(int.from_bytes(kpageflags.read(8), 'little') & KPF_THP)


def frames_readable() -> bool:
  """Whether this process may read its page frames and their flags (root)."""
  probe = np.ones(1024, dtype=np.int64)
  return os.access('/proc/kpageflags', os.R_OK) and frames_of(probe.ctypes.data)[0] != 0


def huge_bytes(t: torch.Tensor) -> int:
  """The bytes of ``t``'s whole 2 MB pages that lie on huge pages, page by
  page from their frames where this process may read them (whatever
  mappings hold ``t``), else smaps' count for the mapping ``t`` starts in."""
  if not frames_readable():
    return huge_kb(t) << 10
  start = -(-t.data_ptr() // HUGE_PAGE) * HUGE_PAGE
  end = start + whole_huge_pages(t)
  return sum(HUGE_PAGE for page in range(start, end, HUGE_PAGE) if on_a_huge_page(page))


def mappings_of(t: torch.Tensor) -> list:
  """The mappings that hold ``t``'s bytes, each with its kB on huge pages
  (smaps), to say where a miscount lies."""
  end = t.data_ptr() + t.numel() * t.element_size()
  return [f'{head} | {kb} kB' for head, kb in smaps_fields(t.data_ptr(), end, 'AnonHugePages')]


def collapsed_and_held(t: torch.Tensor, move) -> tuple:
  """Runs ``move`` (a collapse of ``t``) and returns the bytes it says it
  moved, the bytes of ``t`` on huge pages just after, and how many huge
  pages the kernel split meanwhile anywhere."""
  splits = huge_page_splits()
  moved = move()
  return moved, huge_bytes(t), huge_page_splits() - splits


def skip_where_the_kernel_split_pages_meanwhile(held: int, moved: int, splits: int):
  """Skips where fewer bytes lie on huge pages than were moved and the
  kernel split huge pages in between: a page the kernel splits after it
  moved it (reclaim, migration) is the kernel's doing, not a miscount."""
  if held < moved and splits > 0:
    pytest.skip(f'the kernel split {splits} huge pages while the test read them back')


def collapse_works() -> bool:
  """Whether this kernel moves a private table onto huge pages in place."""
  return THP.exists() and ops.collapse_huge_pages(torch.ones(2 << 20)) > 0


@pytest.mark.skipif(not collapse_works(), reason='this kernel has no MADV_COLLAPSE')
def test_a_cpu_feature_table_is_moved_onto_huge_pages_in_place(monkeypatch):
  table = torch.randn(100_000, 64)  # 25 MB
  values, address = table.clone(), table.data_ptr()
  reported = {}

  def spied_collapse(t, name):
    reported[t.data_ptr()] = collapsed_and_held(t, lambda: collapse(t, name))
    return reported[t.data_ptr()][0]

  monkeypatch.setattr(feature_module, 'collapse', spied_collapse)
  feature = glt.data.Feature(table, with_gpu=False)
  assert feature.feature_tensor.data_ptr() == address and torch.equal(table, values)
  moved, held, splits = reported[address]
  skip_where_the_kernel_split_pages_meanwhile(held, moved, splits)
  assert held >= moved, mappings_of(table)  # what it says it moved lies on huge pages
  ids = torch.randint(0, 100_000, (5_000,))
  assert torch.equal(feature[ids], values[ids])
  if moved < whole_huge_pages(table):  # the kernel's free huge pages, not ours
    pytest.skip(f'the kernel moved {moved >> 20} MB of the table just now: no free huge pages')
  assert moved >= 16 << 20


def huge_aligned_region(pages: int) -> tuple:
  """A private anonymous mapping with room for ``pages`` 2 MB pages from a
  2 MB bound, and that bound's offset in it."""
  region = mmap.mmap(-1, (pages + 1) * HUGE_PAGE, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
  address = ctypes.addressof(ctypes.c_byte.from_buffer(region))
  return region, -(-address // HUGE_PAGE) * HUGE_PAGE - address


def filled_table(region: mmap.mmap, offset: int, pages: int) -> torch.Tensor:
  """A float table over ``pages`` 2 MB pages of ``region`` from ``offset``,
  written (so backed)."""
  count = pages * HUGE_PAGE // 4
  return torch.frombuffer(region, dtype=torch.float32, offset=offset, count=count).fill_(1)


@pytest.mark.skipif(not collapse_works(), reason='this kernel has no MADV_COLLAPSE')
def test_collapse_counts_what_the_kernel_moved_where_it_moves_a_part():
  huge = HUGE_PAGE
  region, offset = huge_aligned_region(8)
  region.madvise(mmap.MADV_NOHUGEPAGE, offset + 5 * huge, 3 * huge)  # refused there
  table = filled_table(region, offset, 8)
  moved, held, splits = collapsed_and_held(table, partial(ops.collapse_huge_pages, table))
  assert moved == 5 * huge
  skip_where_the_kernel_split_pages_meanwhile(held, moved, splits)
  assert held == moved
  del table


@pytest.mark.skipif(not collapse_works(), reason='this kernel has no MADV_COLLAPSE')
@pytest.mark.skipif(not frames_readable(), reason='reading page frames needs root')
def test_collapse_counts_no_page_that_two_mappings_share():
  huge = HUGE_PAGE
  region, offset = huge_aligned_region(12)
  # Two mappings from here on, meeting inside the table's fourth 2 MB page.
  region.madvise(mmap.MADV_DONTFORK, offset, 3 * huge + 67 * mmap.PAGESIZE)
  table = filled_table(region, offset, 12)
  assert len(mappings_of(table)) == 2
  moved, held, splits = collapsed_and_held(table, partial(ops.collapse_huge_pages, table))
  assert moved <= 11 * huge  # not the page the mappings share
  skip_where_the_kernel_split_pages_meanwhile(held, moved, splits)
  assert held == moved
  del table


@pytest.mark.skipif(not collapse_works(), reason='this kernel has no MADV_COLLAPSE')
def test_a_host_shared_copy_lies_on_huge_pages_in_every_mapping():
  values = torch.randn(5_000_000)  # 20 MB
  shared = HostSharedTensor.copy_of(values, 'test table')
  opened = HostSharedTensor.open(shared.handle)  # as another process maps it
  for t in (shared.tensor, opened.tensor):
    assert torch.equal(t, values) and t.is_shared()
    assert_on_huge_pages(t, 16 << 10, field='ShmemPmdMapped')


def test_map_shared_file_maps_2mb_aligned_and_names_bad_input():
  fd = os.memfd_create('glt-test', os.MFD_CLOEXEC)
  try:
    os.ftruncate(fd, 3 << 20)
    mapped = ops.map_shared_file(fd, 3 << 20)
    assert mapped.data_ptr() % (2 << 20) == 0 and mapped.numel() == 3 << 20
    mapped.fill_(7)
    again = ops.map_shared_file(fd, 3 << 20)
    assert int(again[-1]) == 7 and again.is_shared()  # the same file, shared memory to torch
    with pytest.raises(ValueError, match='not a file of 4194304 bytes or more'):
      ops.map_shared_file(fd, 4 << 20)
  finally:
    os.close(fd)
  read_end, write_end = os.pipe()
  with pytest.raises(ValueError, match='not a file'):
    ops.map_shared_file(read_end, 10)
  os.close(read_end)
  os.close(write_end)
  with pytest.raises(ValueError, match='descriptor and nbytes > 0'):
    ops.map_shared_file(-1, 10)
  with pytest.raises(RuntimeError, match='cannot map descriptor'):
    ops.map_shared_file(fd, 10)  # closed


def test_shared_mapped_and_small_tables_stay_as_they_are(tmp_path):
  shared = torch.ones(4 << 20).share_memory_()
  assert not in_private_memory(shared) and collapse(shared, 'shared table') == 0
  path = tmp_path / 'table.npy'
  np.save(path, np.ones((4 << 20,), dtype=np.float32))
  mapped = torch.from_numpy(np.load(path, mmap_mode='c'))
  assert not in_private_memory(mapped) and collapse(mapped, 'mapped table') == 0
  assert in_private_memory(torch.ones(4 << 20)) and in_private_memory(torch.ones(3))
  assert ops.collapse_huge_pages(torch.ones(1000)) == 0
  with pytest.raises(ValueError, match='contiguous CPU tensor'):
    ops.collapse_huge_pages(torch.ones(8, 8).t())


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
