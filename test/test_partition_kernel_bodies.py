"""The CUDA kernels of the distributed hop's partition ops, run on the CPU
through the host harness (the per-thread bodies and orchestration the CUDA
build launches): bucket_by_partition, group_by_partition, scatter_rows_,
stitch_neighbors and sample_neighbors_partitioned, each equal to the CPU
kernel, or to the harness's own sample_neighbors per partition stitched, and
bad input raising the CPU kernel's ValueError."""

import pytest
import torch
from test_ops import PARTITIONED_CASES, partition_topologies

import graphlearn_torch  # noqa: F401  (registers torch.ops.glt)

# Builds the harness: left out of make test-fast.
pytestmark = pytest.mark.slow

OPS = torch.ops.glt


def assert_equal(got, want):
  assert len(got) == len(want)
  for a, b in zip(got, want):
    assert (a is None) == (b is None) and (a is None or torch.equal(a, b))


@pytest.mark.parametrize('dtype', [torch.uint8, torch.int8, torch.int32, torch.int64])
@pytest.mark.parametrize('num_partitions', [1, 3, 7])
def test_bucket_by_partition_equals_the_cpu_kernel(harness, threads, dtype, num_partitions):
  g = torch.Generator().manual_seed(num_partitions)
  parts = torch.randint(0, num_partitions, (20_001,), generator=g).to(dtype)
  want = OPS.bucket_by_partition(parts, num_partitions)
  assert_equal(harness.bucket_by_partition(parts, num_partitions), want)


@pytest.mark.parametrize('dtype', [torch.uint8, torch.int32, torch.int64])
@pytest.mark.parametrize('num_partitions', [1, 3, 7])
def test_group_by_partition_equals_the_cpu_kernel(harness, threads, dtype, num_partitions):
  g = torch.Generator().manual_seed(num_partitions)
  book = torch.randint(0, num_partitions, (5000,), generator=g).to(dtype)
  ids = torch.randint(0, 5000, (20_001,), generator=g)
  want = OPS.group_by_partition(book, ids, num_partitions)
  assert_equal(harness.group_by_partition(book, ids, num_partitions), want)


@pytest.mark.parametrize('dtype', [torch.float32, torch.float16, torch.int64, torch.bool])
def test_scatter_rows_equals_the_cpu_kernel(harness, threads, dtype):
  g = torch.Generator().manual_seed(4)
  out = torch.randint(0, 2, (4000, 5), generator=g).to(dtype)
  rows = torch.randint(0, 100, (3000, 5), generator=g).to(dtype)
  positions = torch.randperm(4000, generator=g)[:3000]
  want = OPS.scatter_rows_(out.clone(), positions, rows)
  got = out.clone()
  harness.scatter_rows_(got, positions, rows)
  assert torch.equal(got, want)


def stitch_pieces(num_seeds, seed):
  """Three pieces of a hop in any order, some seeds in none, with edge ids."""
  g = torch.Generator().manual_seed(seed)
  owner = torch.randint(0, 3, (num_seeds,), generator=g)
  sizes = torch.randint(0, 6, (num_seeds,), generator=g).tolist()
  runs = [torch.randint(0, 10**6, (k,), generator=g) for k in sizes]
  pieces = []
  for p in range(3):
    pos = torch.nonzero(owner == p).view(-1)[1:]
    pos = pos[torch.randperm(pos.numel(), generator=g)]
    nbr = torch.cat([runs[i] for i in pos.tolist()] + [torch.empty(0, dtype=torch.long)])
    num = torch.tensor([runs[i].numel() for i in pos.tolist()], dtype=torch.long)
    pieces.append((pos, num, nbr, nbr * 7 + 1))
  return [[piece[k] for piece in pieces] for k in range(4)]


@pytest.mark.parametrize('with_edge', [False, True])
def test_stitch_neighbors_equals_the_cpu_kernel(harness, threads, with_edge):
  pos, num, nbr, edge = stitch_pieces(3000, seed=5)
  args = (3000, pos, num, nbr, edge if with_edge else [])
  assert_equal(harness.stitch_neighbors(*args), OPS.stitch_neighbors(*args))


def test_stitch_neighbors_of_empty_pieces(harness):
  empty = torch.empty(0, dtype=torch.long)
  args = (4, [empty, torch.tensor([2]), empty], [empty, torch.tensor([2]), empty],
          [empty, torch.tensor([8, 9]), empty], [])  # fmt: skip
  assert_equal(harness.stitch_neighbors(*args), OPS.stitch_neighbors(*args))


@pytest.mark.parametrize('dtype', [torch.int64, torch.int32])
def test_sample_neighbors_partitioned_is_each_partitions_draws_stitched(harness, threads, dtype):
  g = torch.Generator().manual_seed(6)
  owner = torch.randint(0, 3, (300,), generator=g)
  topos = partition_topologies(owner, dtype)
  seeds = torch.randint(0, 300, (1500,), generator=g)
  parts = owner[seeds].to(torch.int8)
  rng_seeds = [11, 22, 33]
  for weighted, replace, k, with_edge in PARTITIONED_CASES:
    eids = [t[2] if with_edge else None for t in topos]
    weights = [t[3] if weighted else None for t in topos]
    got = harness.sample_neighbors_partitioned(
      [t[0] for t in topos], [t[1] for t in topos], eids, weights, parts, seeds, k, replace,
      rng_seeds,
    )  # fmt: skip
    pieces = []
    for p, t in enumerate(topos):
      pos = torch.nonzero(parts == p).view(-1)
      nbr, num, edge = harness.sample_neighbors(
        t[0], t[1], eids[p], weights[p], seeds[pos], k, replace, rng_seeds[p]
      )
      pieces.append((pos, num, nbr, edge))
    want = OPS.stitch_neighbors(
      seeds.numel(), *([piece[j] for piece in pieces] for j in range(3)),
      [piece[3] for piece in pieces] if with_edge else [],
    )  # fmt: skip
    assert torch.equal(got[0], want[0]) and torch.equal(got[1], want[1])
    assert torch.equal(got[2], want[2]) if with_edge else got[2].numel() == 0


def bad_calls():
  """(op name, args, the CPU kernel's message) for bad input to each op."""
  one = torch.tensor([1])
  book = torch.tensor([0, 1, 1, 0])
  bad_parts = torch.zeros(10_000, dtype=torch.int64)
  bad_parts[7000] = 2
  owner = torch.tensor([0, 1, 0, 1, 2, 2])
  topos = partition_topologies(owner, torch.int64)
  indptrs, indices, none = [t[0] for t in topos], [t[1] for t in topos], [None] * 3
  seeds = torch.tensor([0, 1, 4])
  return [
    ('bucket_by_partition', (bad_parts, 2), r'partitions\[7000\] is 2, outside \[0, 2\)'),
    ('bucket_by_partition', (torch.zeros(3), 2), 'partitions must be an integer tensor'),
    ('group_by_partition', (book, torch.tensor([0, -3, 9]), 2), r"ids\[1\] is -3, outside"),
    ('group_by_partition', (book, torch.tensor([0, 4]), 2), r"ids\[1\] is 4, outside the book"),
    ('group_by_partition', (torch.tensor([0, 1, 5, 0]), torch.tensor([0, 2]), 2),
     r'the book gives id 2 partition 5, outside \[0, 2\)'),
    ('scatter_rows_', (torch.zeros(10, 3), torch.tensor([0, 1, 10, 2]), torch.ones(4, 3)),
     r'positions\[2\] is 10, out of range \[0, 10\)'),
    ('scatter_rows_', (torch.zeros(10, 3), torch.tensor([0, 1, 2]), torch.ones(4, 3)),
     '3 positions for 4 rows'),
    ('stitch_neighbors', (3, [torch.tensor([3])], [one], [one], []), 'piece 0 names seed 3'),
    ('stitch_neighbors', (3, [one, one], [one, one], [one, one], []), 'seed 1 is in two places'),
    ('stitch_neighbors', (3, [torch.tensor([0])], [torch.tensor([2])], [one], []),
     "piece 0's counts sum to 2 but it has 1 neighbors"),
    ('stitch_neighbors', (3, [torch.tensor([0])], [torch.tensor([-1])], [one[:0]], []),
     'piece 0 has a negative count'),
    ('sample_neighbors_partitioned',
     (indptrs[:2] + [None], indices[:2] + [None], none, none, owner[seeds], seeds, 2, False,
      [1, 2, 3]), r'seeds\[2\] \(4\) is in partition 2, which has no'),
    ('sample_neighbors_partitioned',
     (indptrs, indices, none, none, owner[seeds], torch.tensor([0, 9, 4]), 2, False, [1, 2, 3]),
     r'seeds\[1\] is 9, outside the 6 rows of partition 1'),
    ('sample_neighbors_partitioned',
     (indptrs, indices, none, none, torch.tensor([5, 1, 2]), seeds, 2, False, [1, 2, 3]),
     r'seeds\[0\] \(0\) is in partition 5'),
  ]  # fmt: skip


@pytest.mark.parametrize('call', range(len(bad_calls())))
def test_bad_input_raises_the_cpu_kernels_error(harness, call):
  name, args, message = bad_calls()[call]
  for op in (getattr(OPS, name), getattr(harness, name)):
    copies = [a.clone() if isinstance(a, torch.Tensor) else a for a in args]
    with pytest.raises(ValueError, match=message):
      op(*copies)
  if name == 'scatter_rows_':  # nothing written before the check
    out = args[0].clone()
    with pytest.raises(ValueError):
      harness.scatter_rows_(out, *args[1:])
    assert torch.equal(out, args[0])
