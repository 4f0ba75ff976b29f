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
