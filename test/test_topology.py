import numpy as np
import pytest
import torch
from conftest import random_edges

from graphlearn_torch.data import Topology
from graphlearn_torch.data.graph import index_dtype

coo_to_csr = torch.ops.glt.coo_to_csr


def brute_rows(src, dst, num_rows, eids):
  """Per row, the sorted list of (neighbor, edge id)."""
  rows = [[] for _ in range(num_rows)]
  for s, d, e in zip(src.tolist(), dst.tolist(), eids.tolist()):
    rows[s].append((d, e))
  return [sorted(r) for r in rows]


def topo_rows(indptr, indices, eids):
  return [
    sorted(
      zip(indices[indptr[i] : indptr[i + 1]].tolist(), eids[indptr[i] : indptr[i + 1]].tolist())
    )
    for i in range(indptr.numel() - 1)
  ]


@pytest.mark.parametrize('layout', ['CSR', 'CSC'])
def test_coo_to_compressed_matches_brute_force(layout):
  ei = random_edges(30, 40, 500, seed=0)
  eids = torch.randperm(500) + 1000
  weights = torch.rand(500)
  topo = Topology(ei, eids, weights, layout=layout)
  src, dst = (ei[0], ei[1]) if layout == 'CSR' else (ei[1], ei[0])
  num_rows = int(src.max()) + 1
  assert topo.row_count == num_rows
  assert topo.edge_count == 500
  assert topo_rows(topo.indptr, topo.indices, topo.edge_ids) == brute_rows(src, dst, num_rows, eids)
  # entries of a row are sorted by neighbor id
  for i in range(num_rows):
    seg = topo.indices[topo.indptr[i] : topo.indptr[i + 1]]
    assert bool((seg[1:] >= seg[:-1]).all())
  # weights follow their edges
  pos = {int(e): i for i, e in enumerate(eids)}
  expect = torch.stack([weights[pos[int(e)]] for e in topo.edge_ids])
  assert torch.equal(topo.edge_weights, expect)
  assert torch.equal(topo.degrees, torch.bincount(src, minlength=num_rows))


def test_to_coo_csr_csc_round_trip():
  ei = random_edges(20, 20, 200, seed=1)
  topo = Topology(ei, layout='CSR')
  src, dst, eids, _ = topo.to_coo()
  assert torch.equal(ei[:, eids], torch.stack([src, dst]))
  indices, indptr, eids_csc, _ = topo.to_csc()  # GLT's order: (row, colptr, ...)
  rows = torch.repeat_interleave(torch.arange(indptr.numel() - 1), indptr[1:] - indptr[:-1])
  assert torch.equal(ei[:, eids_csc], torch.stack([indices, rows]))
  csr = topo.to_csr()
  assert torch.equal(csr[0], topo.indptr) and torch.equal(csr[1], topo.indices)


def test_compact_storage_and_int64_exports():
  ei = random_edges(20, 20, 200, seed=3)
  for layout in ('CSR', 'CSC'):
    topo = Topology(ei, layout=layout)
    assert topo.indptr.dtype == topo.indices.dtype == torch.int32
    wide = coo_to_csr(*((ei[0], ei[1]) if layout == 'CSR' else (ei[1], ei[0])), 20, 20)
    assert wide[0].dtype == torch.int64
    assert torch.equal(topo.indptr.long(), wide[0]) and torch.equal(topo.indices.long(), wide[1])
    assert topo.degrees.dtype == torch.int64
    assert torch.equal(topo.degrees, wide[0][1:] - wide[0][:-1])
    exports = (*topo.to_coo()[:2], *topo.to_csr()[:2], *topo.to_csc()[:2])
    assert all(t.dtype == torch.int64 for t in exports)


def test_index_dtype_switches_to_int64_past_int32():
  top = 2**31 - 1
  assert index_dtype(top, top) == torch.int32
  assert index_dtype(top + 1, 10) == torch.int64
  assert index_dtype(10, top + 1) == torch.int64


def test_csr_input_layout_and_size():
  ei = random_edges(10, 12, 60, seed=2)
  ref = Topology(ei, layout='CSR', size=(15, 20))
  assert ref.row_count == 15 and ref.col_count == 20
  again = Topology((ref.indptr, ref.indices), ref.edge_ids, input_layout='CSR', layout='CSR')
  assert torch.equal(again.indptr, ref.indptr[: again.row_count + 1])
  assert torch.equal(again.edge_ids, ref.edge_ids)
  csc = Topology((ref.indptr, ref.indices), ref.edge_ids, input_layout='CSR', layout='CSC')
  assert torch.equal(
    ei[:, csc.edge_ids][1], torch.repeat_interleave(torch.arange(csc.row_count), csc.degrees)
  )


def test_parallel_build_is_stable_and_thread_independent(thread_count):
  ei = random_edges(1000, 1000, 200_000, seed=3)
  results = []
  for n in (1, 2):
    torch.set_num_threads(n)
    results.append(coo_to_csr(ei[0], ei[1], 1000, 1000))
  for a, b in zip(*results):
    assert torch.equal(a, b)
  indptr, indices, perm = results[0]
  # stable: equal (row, col) pairs keep input order
  key = ei[0][perm] * 1000 + ei[1][perm]
  same = key[1:] == key[:-1]
  assert bool((perm[1:][same] > perm[:-1][same]).all())
  order = np.lexsort((np.arange(200_000), ei[1].numpy(), ei[0].numpy()))
  assert np.array_equal(perm.numpy(), order)


def test_empty_graph():
  topo = Topology(torch.empty(2, 0, dtype=torch.long), size=(3, 3))
  assert topo.row_count == 3 and topo.edge_count == 0
  assert torch.equal(topo.indptr, torch.zeros(4, dtype=torch.long))


@pytest.mark.parametrize('dtype', [torch.int64, torch.int32])
def test_build_over_several_buckets_matches_lexsort(thread_count, dtype):
  # Enough edges for several buckets of rows (each about 2 MB of output),
  # with empty rows at the end and one long row.
  num_rows, num_cols, n = 300_000, 5_000, 1_500_000
  g = torch.Generator().manual_seed(4)
  rows = torch.randint(0, num_rows, (n,), generator=g)
  rows[: n // 10] = 7
  cols = torch.randint(0, num_cols, (n,), generator=g)
  order = np.lexsort((np.arange(n), cols.numpy(), rows.numpy()))
  indptr_expect = torch.cat(
    [torch.zeros(1, dtype=torch.long), torch.bincount(rows, minlength=num_rows + 5).cumsum(0)]
  )
  by_col = torch.from_numpy(np.lexsort((rows.numpy(), cols.numpy())))
  for threads in (1, 2):
    torch.set_num_threads(threads)
    indptr, indices, perm = coo_to_csr(rows, cols, num_rows + 5, num_cols, dtype)
    assert indices.dtype == dtype and perm.dtype == torch.int64
    assert np.array_equal(perm.numpy(), order)
    assert torch.equal(indices.long(), cols[perm])
    assert torch.equal(indptr, indptr_expect)
    # Input sorted by column: every row comes out sorted without a sort.
    _, sorted_indices, sorted_perm = coo_to_csr(
      rows[by_col], cols[by_col], num_rows + 5, num_cols, dtype
    )
    assert torch.equal(by_col[sorted_perm], perm) and torch.equal(sorted_indices, indices)


def test_build_with_column_ids_past_32_bits():
  # A column and a position do not fit in one 64-bit key: rows sort as pairs.
  g = torch.Generator().manual_seed(6)
  rows = torch.randint(0, 50, (5000,), generator=g)
  cols = torch.randint(0, 2**60, (5000,), generator=g)
  cols[::5] = cols[0]  # ties keep input order
  indptr, indices, perm = coo_to_csr(rows, cols, 50, 2**60)
  assert np.array_equal(perm.numpy(), np.lexsort((np.arange(5000), cols.numpy(), rows.numpy())))
  assert torch.equal(indices, cols[perm])


def test_coo_to_csr_checks_the_indices_dtype():
  rows, cols = torch.tensor([0, 1]), torch.tensor([1, 0])
  with pytest.raises(ValueError, match='indices_dtype must be int32 or int64'):
    coo_to_csr(rows, cols, 2, 2, torch.int16)
  with pytest.raises(ValueError, match='indices_dtype int32 cannot hold 2 edges over 2147483653'):
    coo_to_csr(rows, cols, 2, 2**31 + 5, torch.int32)


def test_coo_to_csr_takes_sizes_up_to_the_largest_int():
  # The bit widths of the sizes up to 2**63 - 1 (a loop of shifts that
  # overflowed there once never ended).
  rows, cols = torch.tensor([0, 2, 0]), torch.tensor([5, 1, 3])
  indptr, indices, perm = coo_to_csr(rows, cols, 3, 2**63 - 1)
  assert indptr.tolist() == [0, 2, 2, 3]
  assert indices.tolist() == [3, 5, 1] and perm.tolist() == [2, 0, 1]


sort_rows_by_key = torch.ops.glt.sort_rows_by_key


@pytest.mark.parametrize('key_dtype', [torch.int64, torch.float64])
@pytest.mark.parametrize('ptr_dtype', [torch.int64, torch.int32])
def test_sort_rows_by_key_is_a_stable_sort_of_each_row(thread_count, key_dtype, ptr_dtype):
  g = torch.Generator().manual_seed(5)
  degrees = torch.randint(0, 40, (30_000,), generator=g)
  degrees[::7] = 0
  degrees[100] = 5000
  indptr = torch.cat([torch.zeros(1, dtype=torch.long), degrees.cumsum(0)])
  rows = torch.repeat_interleave(torch.arange(degrees.numel()), degrees)
  keys = torch.randint(0, 10, (rows.numel(),), generator=g).to(key_dtype)  # many ties
  keys[: int(indptr[3])] = 0  # the first rows are sorted
  decreasing = ((keys[1:] < keys[:-1]) & (rows[1:] == rows[:-1])).nonzero()
  for threads in (1, 2):
    torch.set_num_threads(threads)
    order, first = sort_rows_by_key(indptr.to(ptr_dtype), keys)
    assert np.array_equal(
      order.numpy(), np.lexsort((np.arange(rows.numel()), keys.numpy(), rows.numpy()))
    )
    assert first == int(rows[int(decreasing[0]) + 1])
    again, none = sort_rows_by_key(indptr.to(ptr_dtype), keys[order])
    assert again.numel() == 0 and none == -1


def test_sort_rows_by_key_checks_its_inputs():
  keys = torch.arange(5)
  for indptr, match in (
    (torch.tensor([1, 5]), 'indptr must start at 0'),
    (torch.tensor([0, 4, 3, 5]), 'indptr must be non-decreasing, but row 1 ends at 3'),
    (torch.tensor([0, 4]), 'indptr ends at 4 but keys holds 5 entries'),
    (torch.tensor([0.0, 5.0]), 'indptr must be int32 or int64'),
  ):
    with pytest.raises(ValueError, match=match):
      sort_rows_by_key(indptr, keys)
  with pytest.raises(ValueError, match='keys must be int64 or float64'):
    sort_rows_by_key(torch.tensor([0, 5]), keys.float())


def test_a_topology_past_the_memory_left_names_its_largest_id(monkeypatch):
  # A stray id of 2**40 asks for an 8 TB index pointer: refused before it
  # is allocated, naming where the row count came from.
  import graphlearn_torch.utils.memory as memory
  from graphlearn_torch.data import Dataset
  from graphlearn_torch.utils import coo_to_csr as utils_coo_to_csr

  monkeypatch.setattr(memory, 'available_memory', lambda: (1 << 30, 'a test'))
  stray = torch.tensor([[0, 1, 2**40], [1, 2, 0]])
  with pytest.raises(MemoryError, match='rows come from the largest id in edge_index'):
    Dataset().init_graph(stray, graph_mode='CPU')
  with pytest.raises(MemoryError, match=r'1,099,511,627,777 rows needs 8,796,093,022,224 bytes'):
    utils_coo_to_csr(stray[0], stray[1])
  with pytest.raises(MemoryError, match='rows come from num_nodes'):
    Dataset().init_graph(stray[:, :2], graph_mode='CPU', num_nodes=2**40)
  ds = Dataset()  # within the memory left: built
  ds.init_graph(stray[:, :2], graph_mode='CPU', num_nodes=1000)
  assert ds.graph.topo.indptr.numel() == 1001
