"""The CUDA kernels on a GPU (skipped without one): every op against the host
harness, which runs the same code on the CPU (so even random draws must be
equal), and against the CPU kernels where the op is deterministic; the CUDA
inducer against the CPU inducer."""

from collections import Counter

import pytest
import torch
from conftest import random_edges
from scipy import stats
from test_kernel_bodies import csr, flat, run_hops, star
from test_ops import partition_topologies
from test_partition_kernel_bodies import stitch_pieces
from test_temporal_kernel import temporal_csr

import graphlearn_torch
from graphlearn_torch._ext import ops
from graphlearn_torch.data.unified_tensor import host_view
from graphlearn_torch.partition.partition_book import GLTPartitionBook, positions_by_partition


def cuda_kernels_available() -> bool:
  return torch.cuda.is_available() and torch._C._dispatch_has_kernel_for_dispatch_key(
    'glt::sample_neighbors', 'CUDA'
  )


pytestmark = pytest.mark.skipif(
  not cuda_kernels_available(), reason='needs a GPU and a build with the CUDA kernels'
)

OPS = torch.ops.glt


def cuda(*tensors):
  return [t.cuda() if isinstance(t, torch.Tensor) else t for t in tensors]


def assert_all_equal(got, want):
  for a, b in zip(got, want):
    assert torch.equal(a.cpu(), b.cpu())


@pytest.mark.parametrize('dtype', [torch.int64, torch.int32])
@pytest.mark.parametrize('replace', [False, True])
@pytest.mark.parametrize('weighted', [False, True])
@pytest.mark.parametrize('k', [-1, 3, 40])
def test_sample_neighbors_equals_the_host_harness(harness, dtype, replace, weighted, k):
  indptr, indices, eids, weights = csr(300, 300, 20000, seed=1, dtype=dtype, weighted=weighted)
  seeds = torch.randint(0, 300, (500,))
  want = harness.sample_neighbors(indptr, indices, eids, weights, seeds, k, replace, 7)
  got = OPS.sample_neighbors(*cuda(indptr, indices, eids, weights, seeds), k, replace, 7)
  assert got[0].is_cuda
  assert_all_equal(got, want)


@pytest.mark.parametrize('dtype', [torch.int64, torch.int32])
@pytest.mark.parametrize('time_dtype', [torch.int64, torch.float64])
@pytest.mark.parametrize('weighted', [False, True])
@pytest.mark.parametrize('last', [False, True])
@pytest.mark.parametrize('k', [-1, 3, 40])
def test_temporal_sampling_equals_the_host_harness(harness, dtype, time_dtype, weighted, last, k):
  indptr, indices, eids, weights, time = temporal_csr(300, 300, 20000, 2, dtype, time_dtype)
  seeds = torch.randint(0, 300, (500,))
  seed_time = torch.randint(-1, 55, (500,)).to(time_dtype)
  w = weights if weighted else None
  args = (indptr, indices, eids, w, time, seeds, seed_time)
  want = harness.sample_neighbors_temporal(*args, k, False, last, 7)
  got = OPS.sample_neighbors_temporal(*cuda(*args), k, False, last, 7)
  assert got[0].is_cuda
  assert_all_equal(got, want)


def test_disjoint_keys_equal_the_host_harness(harness):
  bits = 20
  seed_keys = (torch.arange(3000) << bits) | torch.randint(0, 1 << bits, (3000,))
  nbr_nums = torch.randint(0, 16, (3000,))
  nbrs = torch.randint(0, 1 << bits, (int(nbr_nums.sum()),))
  want = harness.disjoint_keys(seed_keys, nbrs, nbr_nums, bits)
  got = OPS.disjoint_keys(*cuda(seed_keys, nbrs, nbr_nums), bits)
  assert got.is_cuda and torch.equal(got.cpu(), want)


@pytest.mark.parametrize('replace', [False, True])
def test_uniform_sampling_on_the_gpu_is_uniform(replace):
  indptr, indices, _ = star(10)
  seed = torch.tensor([0])
  counts = Counter()
  for t in range(4000):
    nbr, _, _ = OPS.sample_neighbors(*cuda(indptr, indices), None, None, *cuda(seed), 3, replace, t)
    counts.update(nbr.tolist())
  assert stats.chisquare([counts[v] for v in range(1, 11)]).pvalue > 1e-3


def test_deterministic_ops_equal_the_cpu_kernels():
  ei = random_edges(500, 400, 30000, seed=2)
  assert_all_equal(
    OPS.coo_to_csr(*cuda(ei[0], ei[1]), 520, 400), OPS.coo_to_csr(ei[0], ei[1], 520, 400)
  )
  for dtype in (torch.int64, torch.int32):
    indptr, indices, eids, _ = csr(500, 500, 30000, seed=3, dtype=dtype)
    rows, cols = torch.randint(0, 500, (2, 10000))
    assert_all_equal(
      [OPS.has_edge(*cuda(indptr, indices, rows, cols))],
      [OPS.has_edge(indptr, indices, rows, cols)],
    )
    nodes = torch.randperm(600)[:200]
    assert_all_equal(
      OPS.induced_subgraph(*cuda(indptr, indices, eids, nodes)),
      OPS.induced_subgraph(indptr, indices, eids, nodes),
    )
  table = torch.randn(1000, 33)
  ids = torch.randint(0, 1000, (5000,))
  id2index = torch.randperm(1000)
  assert_all_equal(
    [OPS.gather_rows(*cuda(table, ids, id2index), None, -1)],
    [OPS.gather_rows(table, ids, id2index, None, -1)],
  )
  # a host's partitions' tables as one, rows found through the book: partition 0 by an id
  # map (a part on the GPU, a part read through UVA), 1 by offset, 2 held elsewhere
  book = torch.cat([torch.zeros(400), torch.ones(300), torch.full((300,), 2)]).to(torch.int8)
  id_map = torch.full((1000,), -1)
  id_map[:400] = torch.randperm(400)
  parts = [table[:100].contiguous(), table[100:400].contiguous(), table[400:700].contiguous()]
  slots = torch.tensor([0, 1, -1], dtype=torch.int32)
  gpu_parts = [parts[0].cuda(), host_view(parts[1], 0), parts[2].cuda()]  # UVA
  assert_all_equal(
    [OPS.unified_gather_by_book(gpu_parts, [2, 1], [id_map.cuda(), None], [0, 400],
                                *cuda(book, slots, ids))],
    [OPS.unified_gather_by_book(parts, [2, 1], [id_map, None], [0, 400], book, slots, ids)],
  )  # fmt: skip


@pytest.mark.parametrize('padding', [False, True])
def test_sample_negative_equals_the_host_harness(harness, padding):
  indptr, indices, _, _ = csr(300, 200, 5000, seed=4)
  want = harness.sample_negative(indptr, indices, None, True, 200, 3000, 3, padding, 9)
  got = OPS.sample_negative(*cuda(indptr, indices), None, True, 200, 3000, 3, padding, 9)
  assert_all_equal(got, want)


@pytest.mark.parametrize('num_types', [1, 3])
def test_cuda_inducer_equals_the_cpu_inducer(num_types):
  class OnGpu:  # feeds the CUDA inducer CUDA tensors
    def __init__(self):
      self.inducer = ops.CudaInducer(num_types, torch.cuda.current_device())

    def __getattr__(self, name):
      method = getattr(self.inducer, name)

      def call(*args):
        moved = [
          [t.cuda() for t in a]
          if isinstance(a, list) and a and isinstance(a[0], torch.Tensor)
          else (a.cuda() if isinstance(a, torch.Tensor) else a)
          for a in args
        ]
        return method(*moved)

      return call

  for seed in range(3):
    gpu = run_hops(OnGpu(), num_types, seed)
    cpu = run_hops(ops.Inducer(num_types, []), num_types, seed)
    assert flat(gpu) == flat(cpu)


def test_partition_ops_equal_the_cpu_kernels():
  g = torch.Generator().manual_seed(3)
  parts = torch.randint(0, 5, (100_001,), generator=g).to(torch.int8)
  assert_all_equal(OPS.bucket_by_partition(parts.cuda(), 5), OPS.bucket_by_partition(parts, 5))
  book, ids = parts[:5000], torch.randint(0, 5000, (100_001,), generator=g)
  assert_all_equal(
    OPS.group_by_partition(*cuda(book, ids), 5), OPS.group_by_partition(book, ids, 5)
  )
  out, rows = torch.randn(4000, 100, generator=g), torch.randn(3000, 100, generator=g)
  positions = torch.randperm(4000, generator=g)[:3000]
  want = OPS.scatter_rows_(out.clone(), positions, rows)
  assert torch.equal(OPS.scatter_rows_(*cuda(out, positions, rows)).cpu(), want)
  pos, num, nbr, edge = stitch_pieces(20_000, seed=5)
  got = OPS.stitch_neighbors(20_000, cuda(*pos), cuda(*num), cuda(*nbr), cuda(*edge))
  assert_all_equal(got, OPS.stitch_neighbors(20_000, pos, num, nbr, edge))
  assert torch.equal(OPS.concat(cuda(*nbr)).cpu(), torch.cat(nbr))


def test_partition_book_groups_gpu_ids_as_cpu_ones():
  g = torch.Generator().manual_seed(8)
  book = GLTPartitionBook(torch.randint(0, 4, (5000,), generator=g), 4)
  on_gpu = GLTPartitionBook(book.tensor.cuda(), 4)
  ids = torch.randint(0, 5000, (20_000,), generator=g)
  for got, want in zip(on_gpu.group(ids.cuda()), book.group(ids)):
    assert_all_equal(got, want)
  parts = book.tensor[ids]
  assert_all_equal(positions_by_partition(parts.cuda(), 4), positions_by_partition(parts, 4))


@pytest.mark.parametrize('dtype', [torch.int64, torch.int32])
@pytest.mark.parametrize('weighted', [False, True])
@pytest.mark.parametrize('k', [-1, 5])
def test_sample_neighbors_partitioned_equals_the_host_harness(harness, dtype, weighted, k):
  g = torch.Generator().manual_seed(6)
  owner = torch.randint(0, 3, (2000,), generator=g)
  topos = partition_topologies(owner, dtype)
  seeds = torch.randint(0, 2000, (20_000,), generator=g)
  args = (
    [t[0] for t in topos], [t[1] for t in topos], [t[2] for t in topos],
    [t[3] if weighted else None for t in topos],
  )  # fmt: skip
  want = harness.sample_neighbors_partitioned(*args, owner[seeds], seeds, k, False, [1, 2, 3])
  on_gpu = [[t.cuda() if t is not None else None for t in a] for a in args]
  got = OPS.sample_neighbors_partitioned(*on_gpu, *cuda(owner[seeds], seeds), k, False, [1, 2, 3])
  assert_all_equal(got, want)


def test_every_op_has_a_cuda_kernel():
  for op in (
    'coo_to_csr',
    'sample_neighbors',
    'sample_neighbors_temporal',
    'disjoint_keys',
    'sample_negative',
    'has_edge',
    'induced_subgraph',
    'gather_rows',
    'unified_gather',
    'unified_gather_by_book',
    'sample_neighbors_partitioned',
    'bucket_by_partition',
    'group_by_partition',
    'stitch_neighbors',
    'scatter_rows_',
    'concat',
  ):
    assert torch._C._dispatch_has_kernel_for_dispatch_key(f'glt::{op}', 'CUDA'), op
  assert graphlearn_torch._ext.cuda_kernels_available()
