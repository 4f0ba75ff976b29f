"""The feature gather's CUDA kernel code (``unified_gather``, and
``gather_rows``, its one-part case), run on the CPU through the host harness
over every thread index, against ``index_select`` and the CPU kernel: every
copy width and row offset, tables split into parts, lookups through an id
map, and ids without a row, raised at once or marked for a later read."""

import pytest
import torch
from conftest import random_edges

import graphlearn_torch

OPS = torch.ops.glt


# -- unified_gather: the UVA / GPU-cache table --------------------------------------------


def split_rows(table, bounds):
  """``table`` cut row-wise at ``bounds``: the parts of a unified table
  (hot rows on GPUs first, the rest in host memory)."""
  edges = [0, *bounds, table.size(0)]
  return [table[lo:hi].contiguous() for lo, hi in zip(edges, edges[1:])]


@pytest.mark.parametrize('bounds', [[], [0], [13], [5, 5, 20], [50]], ids=str)
@pytest.mark.parametrize('dtype', [torch.float32, torch.float16, torch.int64])
def test_unified_gather_equals_index_select(harness, threads, bounds, dtype):
  table = (torch.randn(50, 6) * 10).to(dtype)
  parts = split_rows(table, bounds)
  ids = torch.tensor([0, 49, 12, 13, 4, 5, 19, 20, 12, 31])  # every side of every cut
  assert torch.equal(harness.unified_gather(parts, ids, None), table[ids])
  assert torch.equal(OPS.unified_gather(parts, ids, None), table[ids])
  id2index = torch.randperm(50)
  want = table[id2index[ids]]
  assert torch.equal(harness.unified_gather(parts, ids, id2index), want)
  assert torch.equal(OPS.unified_gather(parts, ids, id2index), want)


@pytest.mark.parametrize(
  'dtype,dim,offset',
  [(torch.float32, 4, 0), (torch.float32, 4, 1), (torch.float32, 100, 0), (torch.float16, 3, 0),
   (torch.bool, 5, 0), (torch.float64, 1, 0), (torch.float32, 600, 0), (torch.float32, 600, 1)],
)  # fmt: skip
def test_unified_gather_in_every_copy_width(harness, threads, dtype, dim, offset):
  """Rows copied 16 bytes at a time where rows and addresses allow, in
  narrower units where a row's bytes or a part's address do not (offset: a
  part starting ``offset`` elements into its memory); rows of more units
  than a group of threads copies at once (dim 600) in several rounds."""
  flat = (torch.randn(offset + 40 * dim) * 10).to(dtype)
  table = flat[offset:].view(40, dim)
  parts = split_rows(table, [17])
  ids = torch.tensor([39, 0, 16, 17, 5, 5, 30])
  assert torch.equal(harness.unified_gather(parts, ids, None), table[ids])
  positions = torch.tensor([2, 0, 6, 1, 3, 4, 5])
  out = harness.gather_rows(table, ids, None, positions, 7)
  assert torch.equal(out[positions], table[ids])


def test_unified_gather_of_a_hottest_first_table(harness, threads):
  """The GPU cache's index arithmetic: rows reordered hottest first
  (``sort_by_in_degree``), the first ``split_ratio`` of them in the GPU part;
  a lookup by node id through ``id2index`` gives each node its own row."""
  num_nodes, dim = 40, 3
  feats = torch.arange(num_nodes * dim, dtype=torch.float32).reshape(num_nodes, dim)
  ei = random_edges(num_nodes, num_nodes, 300, seed=5)
  topo = graphlearn_torch.data.Topology(ei, layout='CSC', size=(num_nodes, num_nodes))
  for ratio in (0.0, 0.3, 1.0):
    table, id2index = graphlearn_torch.data.sort_by_in_degree(feats, ratio, topo)
    hot = int(num_nodes * ratio)
    degree = torch.bincount(ei[1], minlength=num_nodes)
    hottest = degree.argsort(descending=True, stable=True)[:hot]
    # the hot part holds exactly the hottest nodes' rows
    assert sorted(id2index[hottest].tolist()) == list(range(hot))
    if 0 < hot < num_nodes:
      cold = torch.ones(num_nodes, dtype=torch.bool)
      cold[hottest] = False
      assert degree[hottest].min() >= degree[cold].max()
    ids = torch.randperm(num_nodes)
    got = harness.unified_gather(split_rows(table, [hot]), ids, id2index)
    assert torch.equal(got, feats[ids])


def test_unified_gather_names_a_bad_id(harness):
  parts = split_rows(torch.randn(10, 3), [4])
  with pytest.raises(ValueError, match='id 12 is out of range'):
    harness.unified_gather(parts, torch.tensor([1, 12, 3]), None)
  with pytest.raises(ValueError, match='id -1 is out of range'):
    OPS.unified_gather(parts, torch.tensor([-1]), None)
  with pytest.raises(ValueError, match='id 1 has no feature row'):
    harness.unified_gather(parts, torch.tensor([0, 1]), torch.tensor([0, 10, 2]))
  with pytest.raises(ValueError, match='one width and dtype'):
    OPS.unified_gather([torch.randn(3, 2), torch.randn(3, 4)], torch.tensor([0]), None)
  with pytest.raises(ValueError, match='1 to 16 parts'):
    OPS.unified_gather([], torch.tensor([0]), None)
  with pytest.raises(ValueError, match='not contiguous'):
    OPS.unified_gather([torch.randn(3, 4).t()], torch.tensor([0]), None)


@pytest.mark.parametrize('gather', ['harness', 'op'])
def test_unified_gather_marks_a_bad_id_for_a_later_read(harness, threads, gather):
  """Given ``first_bad``, a gather raises nothing and reads nothing back:
  the position of its first id without a row lands there (every row of a
  good id still copied), a gather of good ids leaves it as it was."""
  fn = harness.unified_gather if gather == 'harness' else OPS.unified_gather
  table = torch.randn(10, 3)
  parts = split_rows(table, [4])
  unset = torch.iinfo(torch.int64).max
  ids = torch.tensor([1, 7, 12, 3, 40, -2])
  first_bad = torch.tensor([unset])
  out = fn(parts, ids, None, first_bad)
  assert first_bad.item() == 2
  good = torch.tensor([0, 1, 3])
  assert torch.equal(out[good], table[ids[good]])
  id2index = torch.tensor([0, 10, 2, -1])
  for ids, want in ((torch.tensor([0, 2, 2]), unset), (torch.tensor([2, 3, 1]), 1)):
    first_bad = torch.tensor([unset])
    fn(parts, ids, id2index, first_bad)
    assert first_bad.item() == want
  for bad_flag, match in (
    (torch.tensor([unset, unset]), 'one contiguous int64'),
    (torch.tensor([0.0]), 'one contiguous int64'),
  ):
    with pytest.raises(ValueError, match=match):
      fn(parts, torch.tensor([0]), None, bad_flag)


def by_book(gather: str, harness):
  r"""``unified_gather_by_book``: the host harness's kernel body, or the CPU op."""
  return harness.unified_gather_by_book if gather == 'harness' else OPS.unified_gather_by_book


@pytest.mark.parametrize('gather', ['harness', 'op'])
@pytest.mark.parametrize('book_dtype', [torch.int8, torch.int64])
def test_partitions_tables_gathered_as_one_through_the_book(harness, threads, gather, book_dtype):
  """A distributed batch's rows on a GPU where every partition's table is
  held there: the partitions' parts one after another, each id's row found
  through the book and its partition's own map as it is copied, in one
  call, equal each id's row in the full table, whatever maps each
  partition's table uses (an id map, an offset, none); an id whose
  partition's map gives no row is marked, not read from another
  partition's rows, and named when raised."""
  fn = by_book(gather, harness)
  g = torch.Generator().manual_seed(3)
  full = torch.randn(30, 5, generator=g)
  book = torch.cat([torch.zeros(10), torch.randint(1, 3, (20,), generator=g)]).to(book_dtype)
  book[5] = 2  # partition 2's table also holds a row of the first range
  # partition 0: ids 0-9 by offset (as a range partition), its row 5 left unused;
  # partition 1: its ids by an id map, hot rows in one part and the rest in another;
  # partition 2: an id map over rows that hold its ids in reverse order
  own = [torch.nonzero(book == p).view(-1) for p in range(3)]
  maps = [None, torch.full((30,), -1), torch.full((30,), -1)]
  maps[1][own[1]] = torch.arange(own[1].numel())
  maps[2][own[2]] = torch.arange(own[2].numel()).flip(0)
  tables = [full[:10], full[own[1]], full[own[2].flip(0)]]
  parts = [tables[0], tables[1][:3].contiguous(), tables[1][3:].contiguous(), tables[2]]
  slots = torch.tensor([0, 1, 2], dtype=torch.int32)
  layout = ([1, 2, 1], maps, [0, 0, 0])
  ids = torch.randint(0, 30, (200,), generator=g)
  assert torch.equal(fn(parts, *layout, book, slots, ids), full[ids])
  maps[2][own[2][0]] = 99  # past partition 2's rows
  first_bad = torch.full((1,), 1 << 62)
  fn(parts, *layout, book, slots, torch.tensor([0, int(own[2][0]), 7]), first_bad)
  assert first_bad.item() == 1
  with pytest.raises(ValueError, match=f'id {int(own[2][0])} has no feature row in partition 2'):
    fn(parts, *layout, book, slots, torch.tensor([int(own[2][0])]))


@pytest.mark.parametrize('gather', ['harness', 'op'])
def test_rows_of_partitions_held_elsewhere_are_placeholders_then_fetched(harness, threads, gather):
  """A batch's rows on a GPU where only some partitions' tables are held
  there (the rest over RPC): one gather through the book (slot -1 for the
  partitions held elsewhere) gives the held ones' ids' rows and row 0 for
  the others, which the fetched rows then replace (``scatter_rows_``, as
  ``DistFeature`` places them): the full table's rows. A book entry naming
  no partition is no row, not a placeholder."""
  fn = by_book(gather, harness)
  g = torch.Generator().manual_seed(4)
  full = torch.randn(40, 3, generator=g)
  book = torch.randint(0, 3, (40,), generator=g)
  own = [torch.nonzero(book == p).view(-1) for p in range(3)]
  maps = [torch.full((40,), -1) for _ in range(2)]
  for slot, p in enumerate((0, 2)):
    maps[slot][own[p]] = torch.arange(own[p].numel())
  slots = torch.tensor([0, -1, 1], dtype=torch.int32)
  parts = [full[own[0]], full[own[2]]]
  ids = torch.randint(0, 40, (300,), generator=g)
  out = fn(parts, [1, 1], maps, [0, 0], book, slots, ids)
  fetched = torch.nonzero(book[ids] == 1).view(-1)
  assert torch.equal(out[fetched], full[own[0][0]].expand(fetched.numel(), -1))
  torch.ops.glt.scatter_rows_(out, fetched, full[ids[fetched]].contiguous())
  assert torch.equal(out, full[ids])
  bad = book.clone()
  bad[7] = 3  # an entry naming no partition
  with pytest.raises(ValueError, match='the partition book gives id 7 partition 3, outside the 3'):
    fn(parts, [1, 1], maps, [0, 0], bad, slots, torch.tensor([1, 7]))
  with pytest.raises(ValueError, match='id 40 is out of range \\[0, 40\\) of the partition book'):
    fn(parts, [1, 1], maps, [0, 0], book, slots, torch.tensor([40]))


def test_the_book_gather_names_bad_arguments():
  parts = [torch.randn(4, 2), torch.randn(3, 2)]
  book, slots, ids = torch.zeros(7, dtype=torch.int8), torch.tensor([0], dtype=torch.int32), None
  ids = torch.tensor([0, 1])
  cases = [
    (([parts[0]], [2], [None], [0], book, slots, ids), 'slot_parts must split the 1 parts'),
    ((parts, [1], [None], [0], book, slots, ids), 'slot_parts must split the 2 parts'),
    ((parts, [2], [None, None], [0], book, slots, ids), 'one map and offset per slot'),
    ((parts, [2], [None], [0], book.float(), slots, ids), 'book must be a 1-D integer tensor'),
    ((parts, [2], [None], [0], book, slots.long(), ids), 'slot_of must be a 1-D int32 tensor'),
    ((parts, [2], [torch.zeros(7, dtype=torch.int32)], [0], book, slots, ids), 'slot_maps'),
  ]
  for args, match in cases:
    with pytest.raises(ValueError, match=match):
      OPS.unified_gather_by_book(*args)
  assert torch.equal(
    OPS.unified_gather_by_book(parts, [2], [None], [0], book, slots, ids), parts[0][:2]
  )
