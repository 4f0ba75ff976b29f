"""The kernels as dispatcher ops (torch.ops.glt): registered with their
schemas and a CPU kernel each, int32 topologies giving what int64 ones give,
and bad input raising a ValueError that names it."""

import pytest
import torch
from conftest import random_edges

from graphlearn_torch._ext import has_kernel

OPS = ('coo_to_csr', 'sample_neighbors', 'sample_negative', 'has_edge', 'induced_subgraph',
       'gather_rows', 'bucket_by_partition', 'group_by_partition', 'scatter_rows_',
       'stitch_neighbors', 'sample_neighbors_partitioned', 'propagate_labels_')  # fmt: skip


@pytest.mark.parametrize('op', OPS)
def test_every_op_has_a_schema_and_a_cpu_kernel(op):
  assert torch._C._dispatch_has_kernel_for_dispatch_key(f'glt::{op}', 'CPU')
  assert has_kernel(op, torch.device('cpu')) and not has_kernel(op, torch.device('meta'))
  schema = getattr(torch.ops.glt, op).default._schema
  assert schema.name == f'glt::{op}'


def topology(dtype):
  ei = random_edges(100, 100, 2000, seed=1)
  indptr, indices, perm = torch.ops.glt.coo_to_csr(ei[0], ei[1], 100, 100)
  weights = torch.rand(2000, generator=torch.Generator().manual_seed(0))
  return indptr.to(dtype), indices.to(dtype), (perm * 3 + 1).contiguous(), weights


def test_int32_topologies_give_what_int64_ones_give():
  wide, narrow = topology(torch.int64), topology(torch.int32)
  seeds = torch.randint(0, 100, (300,))
  for weighted, replace, k in (
    (False, False, 5),
    (False, True, 5),
    (True, False, 3),
    (False, False, -1),
  ):
    a, b = (
      torch.ops.glt.sample_neighbors(*t[:3], t[3] if weighted else None, seeds, k, replace, 42)
      for t in (wide, narrow)
    )
    for x, y in zip(a, b):
      assert torch.equal(x, y) and y.dtype == torch.int64
  rows, cols = torch.randint(0, 100, (2, 1000))
  assert torch.equal(
    torch.ops.glt.has_edge(wide[0], wide[1], rows, cols),
    torch.ops.glt.has_edge(narrow[0], narrow[1], rows, cols),
  )
  nodes = torch.randperm(100)[:40]
  for x, y in zip(
    torch.ops.glt.induced_subgraph(wide[0], wide[1], wide[2], nodes),
    torch.ops.glt.induced_subgraph(narrow[0], narrow[1], narrow[2], nodes),
  ):
    assert torch.equal(x, y)
  for x, y in zip(
    torch.ops.glt.sample_negative(wide[0], wide[1], None, True, 100, 500, 5, True, 7),
    torch.ops.glt.sample_negative(narrow[0], narrow[1], None, True, 100, 500, 5, True, 7),
  ):
    assert torch.equal(x, y)


def test_sample_neighbors_of_many_seeds_gives_every_row_in_seed_order(torch_threads):
  # past the plan's 16 blocks of 1024 seeds, whose offsets come from the
  # blocks' sums; every neighbor drawn (-1), so the rows are the reference
  indptr, indices, _, _ = topology(torch.int64)
  seeds = torch.randint(0, 100, (40_000,), generator=torch.Generator().manual_seed(3))
  nbrs, counts, _ = torch.ops.glt.sample_neighbors(indptr, indices, None, None, seeds, -1, False, 0)
  assert torch.equal(counts, indptr[seeds + 1] - indptr[seeds])
  assert torch.equal(nbrs, torch.cat([indices[indptr[s] : indptr[s + 1]] for s in seeds.tolist()]))
  seeds[30_000] = 100
  with pytest.raises(ValueError, match=r'seeds holds ids outside \[0, 100\): min 0, max 100'):
    torch.ops.glt.sample_neighbors(indptr, indices, None, None, seeds, -1, False, 0)


@pytest.mark.parametrize('dtype', [torch.uint8, torch.int8, torch.int32, torch.int64])
@pytest.mark.parametrize('num_partitions', [1, 3, 7])
@pytest.mark.parametrize('threads', [1, 2])
def test_bucket_by_partition_is_a_stable_sort_of_positions(dtype, num_partitions, threads):
  # over several 32 Ki-position chunks, so that chunks write into each other's groups
  g = torch.Generator().manual_seed(num_partitions)
  parts = torch.randint(0, num_partitions, (150_001,), generator=g).to(dtype)
  old = torch.get_num_threads()
  torch.set_num_threads(threads)
  try:
    order, counts = torch.ops.glt.bucket_by_partition(parts, num_partitions)
  finally:
    torch.set_num_threads(old)
  expected = [torch.nonzero(parts == p).view(-1) for p in range(num_partitions)]
  assert counts.tolist() == [e.numel() for e in expected]
  assert torch.equal(order, torch.cat(expected))


@pytest.mark.parametrize('dtype', [torch.uint8, torch.int32, torch.int64])
@pytest.mark.parametrize('num_partitions', [1, 3, 7])
@pytest.mark.parametrize('threads', [1, 2])
def test_group_by_partition_groups_positions_and_ids(dtype, num_partitions, threads):
  g = torch.Generator().manual_seed(num_partitions)
  book = torch.randint(0, num_partitions, (50_000,), generator=g).to(dtype)
  ids = torch.randint(0, 50_000, (150_001,), generator=g)  # several chunks and lane groups
  old = torch.get_num_threads()
  torch.set_num_threads(threads)
  try:
    order, counts, grouped = torch.ops.glt.group_by_partition(book, ids, num_partitions)
  finally:
    torch.set_num_threads(old)
  parts = book.long()[ids]
  expected = [torch.nonzero(parts == p).view(-1) for p in range(num_partitions)]
  assert counts.tolist() == [e.numel() for e in expected]
  assert torch.equal(order, torch.cat(expected))
  assert torch.equal(grouped, ids[order])


def test_group_by_partition_names_a_bad_id_or_book_entry():
  book = torch.tensor([0, 1, 1, 0])
  order, counts, grouped = torch.ops.glt.group_by_partition(
    book, torch.empty(0, dtype=torch.long), 2
  )
  assert order.numel() == grouped.numel() == 0 and counts.tolist() == [0, 0]
  order, counts, grouped = torch.ops.glt.group_by_partition(
    torch.empty(0, dtype=torch.int8), torch.empty(0, dtype=torch.long), 2
  )  # an empty book with no ids is not an error
  assert order.numel() == 0 and counts.tolist() == [0, 0]
  with pytest.raises(ValueError, match=r"ids\[0\] is 0, outside the book's 0 ids"):
    torch.ops.glt.group_by_partition(torch.empty(0, dtype=torch.int8), torch.tensor([0]), 2)
  with pytest.raises(ValueError, match=r"ids\[1\] is -3, outside the book's 4 ids"):
    torch.ops.glt.group_by_partition(book, torch.tensor([0, -3, 9]), 2)
  with pytest.raises(ValueError, match=r"ids\[1\] is 4, outside the book's 4 ids"):
    torch.ops.glt.group_by_partition(book, torch.tensor([0, 4]), 2)
  with pytest.raises(ValueError, match=r'the book gives id 2 partition 5, outside \[0, 2\)'):
    torch.ops.glt.group_by_partition(torch.tensor([0, 1, 5, 0]), torch.tensor([0, 2]), 2)
  with pytest.raises(ValueError, match='ids must be a 1-D int64 tensor'):
    torch.ops.glt.group_by_partition(book, torch.tensor([0, 1], dtype=torch.int32), 2)
  with pytest.raises(ValueError, match='book must be an integer tensor'):
    torch.ops.glt.group_by_partition(book.float(), torch.tensor([0, 1]), 2)


def test_gather_rows_through_id2index_into_positions():
  g = torch.Generator().manual_seed(3)
  table = torch.randn(5000, 7, generator=g)
  id2index = torch.randperm(20_000, generator=g) % 5000  # ids map to rows many to one
  ids = torch.randint(0, 20_000, (30_000,), generator=g)
  positions = torch.randperm(40_000, generator=g)[:30_000]
  out = torch.ops.glt.gather_rows(table, ids, id2index, positions, 40_000)
  assert out.shape == (40_000, 7)
  assert torch.equal(out[positions], table[id2index[ids]])


@pytest.mark.parametrize('dtype', [torch.float32, torch.float16, torch.int64, torch.bool])
@pytest.mark.parametrize('threads', [1, 2])
def test_scatter_rows_puts_each_row_at_its_position(dtype, threads):
  g = torch.Generator().manual_seed(4)
  out = torch.randint(0, 2, (40_000, 5), generator=g).to(dtype)
  rows = torch.randint(0, 2, (30_000, 5), generator=g).to(dtype)
  positions = torch.randperm(40_000, generator=g)[:30_000]
  expected = out.clone().index_copy_(0, positions, rows)
  old = torch.get_num_threads()
  torch.set_num_threads(threads)
  try:
    assert torch.ops.glt.scatter_rows_(out, positions, rows) is out
  finally:
    torch.set_num_threads(old)
  assert torch.equal(out, expected)


def test_scatter_rows_checks_before_it_writes():
  out, rows = torch.zeros(10, 3), torch.ones(4, 3)
  with pytest.raises(ValueError, match=r'positions\[2\] is 10, out of range \[0, 10\)'):
    torch.ops.glt.scatter_rows_(out, torch.tensor([0, 1, 10, 2]), rows)
  assert not out.any()  # nothing written
  with pytest.raises(ValueError, match='4 positions for 3 rows'):
    torch.ops.glt.scatter_rows_(out, torch.tensor([0, 1, 2, 3]), rows[:3])
  with pytest.raises(ValueError, match='out rows have 3 columns but rows have 2'):
    torch.ops.glt.scatter_rows_(out, torch.tensor([0, 1, 2, 3]), rows[:, :2])
  with pytest.raises(ValueError, match='out is Float but rows are Double'):
    torch.ops.glt.scatter_rows_(out, torch.tensor([0, 1, 2, 3]), rows.double())
  with pytest.raises(ValueError, match='positions must be a 1-D int64 tensor'):
    torch.ops.glt.scatter_rows_(out, torch.tensor([0, 1, 2, 3], dtype=torch.int32), rows)
  with pytest.raises(ValueError, match='out must be contiguous'):
    torch.ops.glt.scatter_rows_(torch.zeros(3, 10).t(), torch.tensor([0, 1, 2, 3]), rows)


@pytest.mark.parametrize('with_edge', [False, True])
@pytest.mark.parametrize('threads', [1, 2])
def test_stitch_neighbors_puts_each_seeds_run_in_seed_order(with_edge, threads):
  g = torch.Generator().manual_seed(5)
  num_seeds = 9000
  owner = torch.randint(0, 3, (num_seeds,), generator=g)
  runs = [
    torch.randint(0, 10**6, (int(k),), generator=g)
    for k in torch.randint(0, 6, (num_seeds,), generator=g)
  ]
  pieces = []
  for p in range(3):
    pos = torch.nonzero(owner == p).view(-1)[1:]  # seed 0 of each piece left out: no run
    pos = pos[torch.randperm(pos.numel(), generator=g)]  # any order
    nbr = torch.cat([runs[i] for i in pos.tolist()])
    num = torch.tensor([runs[i].numel() for i in pos.tolist()], dtype=torch.long)
    pieces.append((pos, num, nbr, nbr * 7 + 1))
  old = torch.get_num_threads()
  torch.set_num_threads(threads)
  try:
    nbr, num, edge = torch.ops.glt.stitch_neighbors(
      num_seeds, *([piece[k] for piece in pieces] for k in range(3)),
      [piece[3] for piece in pieces] if with_edge else [],
    )  # fmt: skip
  finally:
    torch.set_num_threads(old)
  named = set(torch.cat([piece[0] for piece in pieces]).tolist())
  expected = [runs[i] if i in named else runs[i][:0] for i in range(num_seeds)]
  assert num.tolist() == [e.numel() for e in expected]
  assert torch.equal(nbr, torch.cat(expected))
  assert (edge is not None) == with_edge and (not with_edge or torch.equal(edge, nbr * 7 + 1))


def test_stitch_neighbors_checks_its_pieces():
  stitch = torch.ops.glt.stitch_neighbors
  one = torch.tensor([1])
  with pytest.raises(ValueError, match='piece 0 names seed 3, outside'):
    stitch(3, [torch.tensor([3])], [one], [one], [])
  with pytest.raises(ValueError, match='seed 1 is in two places'):
    stitch(3, [torch.tensor([1]), torch.tensor([1])], [one, one], [one, one], [])
  with pytest.raises(ValueError, match="piece 0's counts sum to 2 but it has 1 neighbors"):
    stitch(3, [torch.tensor([0])], [torch.tensor([2])], [one], [])
  with pytest.raises(ValueError, match='one int64 edge id per neighbor'):
    stitch(3, [torch.tensor([0])], [one], [one], [torch.tensor([1, 2])])


def partition_topologies(owner: torch.Tensor, dtype):
  r"""A random graph's edges split by the partition ``owner`` gives their
  row: one topology per partition over every row (rows it does not own
  have no edges), with distinct edge ids and random weights."""
  num_rows = owner.numel()
  ei = random_edges(num_rows, num_rows, 20 * num_rows, seed=3)
  g = torch.Generator().manual_seed(4)
  out = []
  for p in range(int(owner.max()) + 1):
    mine = owner[ei[0]] == p
    indptr, indices, perm = torch.ops.glt.coo_to_csr(ei[0][mine], ei[1][mine], num_rows, num_rows)
    weights = torch.rand(indices.numel(), generator=g)
    out.append((indptr.to(dtype), indices.to(dtype), (perm * 10 + p).contiguous(), weights))
  return out


# (weighted, replace, fanout, with edge ids) of the partitioned hops checked
PARTITIONED_CASES = (
  (False, False, 5, True),
  (False, True, 5, False),
  (True, False, 3, True),
  (True, True, 4, False),
  (False, False, -1, True),
  (False, False, 0, False),
  (False, False, 40, False),
)


@pytest.mark.parametrize('dtype', [torch.int64, torch.int32])
@pytest.mark.parametrize('threads', [1, 2])
def test_sample_neighbors_partitioned_is_each_partitions_draws_stitched(dtype, threads):
  g = torch.Generator().manual_seed(6)
  owner = torch.randint(0, 3, (500,), generator=g)
  topos = partition_topologies(owner, dtype)
  seeds = torch.randint(0, 500, (3000,), generator=g)  # several chunks of 256
  parts = owner[seeds].to(torch.int8)
  rng_seeds = [11, 22, 33]
  old = torch.get_num_threads()
  torch.set_num_threads(threads)
  try:
    for weighted, replace, k, with_edge in PARTITIONED_CASES:
      got = torch.ops.glt.sample_neighbors_partitioned(
        [t[0] for t in topos], [t[1] for t in topos],
        [t[2] if with_edge else None for t in topos],
        [t[3] if weighted else None for t in topos],
        parts, seeds, k, replace, rng_seeds,
      )  # fmt: skip
      pieces = []
      for p, t in enumerate(topos):
        pos = torch.nonzero(parts == p).view(-1)
        nbr, num, edge = torch.ops.glt.sample_neighbors(
          t[0], t[1], t[2] if with_edge else None, t[3] if weighted else None, seeds[pos], k,
          replace, rng_seeds[p],
        )  # fmt: skip
        pieces.append((pos, num, nbr, edge))
      want = torch.ops.glt.stitch_neighbors(
        seeds.numel(), *([piece[j] for piece in pieces] for j in range(3)),
        [piece[3] for piece in pieces] if with_edge else [],
      )  # fmt: skip
      assert torch.equal(got[0], want[0]) and torch.equal(got[1], want[1])
      assert torch.equal(got[2], want[2]) if with_edge else got[2].numel() == 0
  finally:
    torch.set_num_threads(old)


def test_sample_neighbors_partitioned_checks_its_input():
  owner = torch.tensor([0, 1, 0, 1, 2, 2])
  topos = partition_topologies(owner, torch.int64)
  op = torch.ops.glt.sample_neighbors_partitioned
  indptrs, indices = [t[0] for t in topos], [t[1] for t in topos]
  none = [None] * 3
  seeds = torch.tensor([0, 1, 4])
  parts = owner[seeds]
  with pytest.raises(ValueError, match=r'seeds\[2\] \(4\) is in partition 2, which has no'):
    op(indptrs[:2] + [None], indices[:2] + [None], none, none, parts, seeds, 2, False, [1, 2, 3])
  with pytest.raises(ValueError, match=r'seeds\[1\] is 9, outside the 6 rows of partition 1'):
    op(indptrs, indices, none, none, parts, torch.tensor([0, 9, 4]), 2, False, [1, 2, 3])
  with pytest.raises(ValueError, match='of one length, got 3, 3, 3, 3 and 2'):
    op(indptrs, indices, none, none, parts, seeds, 2, False, [1, 2])
  with pytest.raises(ValueError, match="partition 1's topology is Int, the others' Long"):
    op([indptrs[0], indptrs[1].int(), indptrs[2]], [indices[0], indices[1].int(), indices[2]],
       none, none, parts, seeds, 2, False, [1, 2, 3])  # fmt: skip
  with pytest.raises(ValueError, match='edge_ids must be given for every partition'):
    op(indptrs, indices, [topos[0][2], None, None], none, parts, seeds, 2, False, [1, 2, 3])
  with pytest.raises(ValueError, match='one entry per seed'):
    op(indptrs, indices, none, none, parts[:2], seeds, 2, False, [1, 2, 3])
  with pytest.raises(ValueError, match=r'seeds\[0\] \(0\) is in partition 5'):
    op(indptrs, indices, none, none, torch.tensor([5, 1, 2]), seeds, 2, False, [1, 2, 3])
  with pytest.raises(ValueError, match='num_neighbors 4611686018427387904 for 3 seeds asks for'):
    op(indptrs, indices, none, none, parts, seeds, 2**62, True, [1, 2, 3])


@pytest.mark.parametrize('replace', [False, True])
def test_a_fanout_past_what_memory_can_hold_is_named(replace):
  # With replacement every seed draws k: seeds * k must not overflow.
  indptr, indices = torch.tensor([0, 2, 3]), torch.tensor([1, 0, 0])
  seeds = torch.tensor([0, 1, 1])
  with pytest.raises(ValueError, match='num_neighbors 4611686018427387904 for 3 seeds asks for'):
    torch.ops.glt.sample_neighbors(indptr, indices, None, None, seeds, 2**62, replace, 1)
  nbrs, counts, _ = torch.ops.glt.sample_neighbors(
    indptr, indices, None, None, seeds, 2**40, False, 1
  )  # a large fanout without replacement: every neighbor
  assert counts.tolist() == [2, 1, 1] and sorted(nbrs[:2].tolist()) == [0, 1]


def test_bucket_by_partition_of_nothing_and_of_bad_values():
  order, counts = torch.ops.glt.bucket_by_partition(torch.empty(0, dtype=torch.int8), 2)
  assert order.numel() == 0 and counts.tolist() == [0, 0]
  with pytest.raises(ValueError, match=r'partitions\[70000\] is 2, outside \[0, 2\)'):
    parts = torch.zeros(100_000, dtype=torch.int64)
    parts[70_000] = 2
    torch.ops.glt.bucket_by_partition(parts, 2)
  with pytest.raises(ValueError, match='partitions must be an integer tensor'):
    torch.ops.glt.bucket_by_partition(torch.zeros(3), 2)
  with pytest.raises(ValueError, match='num_partitions must be at least 1'):
    torch.ops.glt.bucket_by_partition(torch.zeros(3, dtype=torch.int64), 0)


def test_bad_input_is_a_value_error_naming_it():
  indptr, indices, eids, _ = topology(torch.int64)
  with pytest.raises(ValueError, match='seeds holds ids outside'):
    torch.ops.glt.sample_neighbors(indptr, indices, None, None, torch.tensor([100]), 2, False, 0)
  with pytest.raises(ValueError, match='indices must have indptr'):
    torch.ops.glt.has_edge(indptr, indices.int(), torch.tensor([0]), torch.tensor([0]))
  with pytest.raises(ValueError, match='indptr must be int64 or int32'):
    torch.ops.glt.has_edge(indptr.float(), indices, torch.tensor([0]), torch.tensor([0]))
  with pytest.raises(ValueError, match='nodes must be unique'):
    torch.ops.glt.induced_subgraph(indptr, indices, None, torch.tensor([1, 1]))
  with pytest.raises(ValueError, match='id 7 is out of range'):
    torch.ops.glt.gather_rows(torch.randn(5, 2), torch.tensor([7]), None, None, -1)
  with pytest.raises(ValueError, match='row holds ids outside'):
    torch.ops.glt.coo_to_csr(torch.tensor([5]), torch.tensor([0]), 3, 3)
