"""What real GLT 0.2.x clients call beyond GLT's own tests: the
pipeline of an RGAT benchmark reference on IGBH-format data, point by point
(``partition.base``'s readers, ``export_topology``'s tuple, CSC/CSR graph
files rewritten by a script, two-stage fp16 features, a single
``worker_devices``, checkpoints) and the loader reprs GLT's tests print.
Each is checked against brute force on a small graph, or the COO path."""

import os

import pytest
import torch
from conftest import random_edges

import graphlearn_torch as glt
from graphlearn_torch.distributed import (
  DistDataset,
  MpDistSamplingWorkerOptions,
)
from graphlearn_torch.distributed.sources.sampling_process import worker_device
from graphlearn_torch.partition import PartitionFileError, RandomPartitioner
from graphlearn_torch.partition.partition_book import owned_ids
from graphlearn_torch.typing import as_str

SIZES = {'paper': 120, 'author': 80}
CITES = ('paper', 'cites', 'paper')
WRITES = ('author', 'writes', 'paper')
EDGES = {CITES: random_edges(120, 120, 700, 1), WRITES: random_edges(80, 120, 400, 2)}
FEATS = {'paper': torch.randn(120, 6), 'author': torch.randn(80, 6)}


def partition(root: str, with_feature: bool = True) -> str:
  RandomPartitioner(
    root, 2, SIZES, EDGES, node_feat=FEATS, edge_assign_strategy='by_src', chunk_size=32,
    seed=0, progress=False,
  ).partition(with_feature)  # fmt: skip
  return root


def neighbor_sets(topo) -> dict:
  r"""``{(column or row, neighbor, edge id)}`` of a topology, order aside."""
  indptr, indices, eids = topo
  out = set()
  for c in range(indptr.numel() - 1):
    for p in range(int(indptr[c]), int(indptr[c + 1])):
      out.add((c, int(indices[p]), int(eids[p])))
  return out


def test_partition_base_has_glts_readers():
  from graphlearn_torch.partition import base

  for name in (
    'load_graph_partition_data', 'load_feature_partition_data', 'load_partition',
    'build_partition_feature', 'cat_feature_cache',
  ):  # fmt: skip
    assert getattr(base, name) is getattr(glt.partition, name), name


@pytest.mark.parametrize('edge_dir', ['in', 'out'])
def test_export_topology_is_glts_int64_tuple(edge_dir):
  src, dst = EDGES[CITES]
  ds = glt.data.Dataset(edge_dir=edge_dir)
  ds.init_graph(EDGES[CITES], graph_mode='CPU', num_nodes=120)
  indptr, indices, eids = ds.get_graph().export_topology()
  assert all(t.dtype == torch.int64 for t in (indptr, indices, eids))
  # CSC (in): columns are targets, indices sources; CSR (out): the reverse.
  col, nbr = (dst, src) if edge_dir == 'in' else (src, dst)
  want = {(int(col[e]), int(nbr[e]), e) for e in range(src.numel())}
  assert neighbor_sets((indptr, indices, eids)) == want


def rewrite_as(root: str, layout: str) -> None:
  r"""The reference pipeline's step 1: each relation's partition read back
  through ``partition.base``, rebuilt in a ``DistDataset`` from COO, and its
  topology saved as ``rows.pt`` / ``cols.pt`` in GLT's order."""
  for p in range(2):
    for etype in EDGES:
      path = os.path.join(root, f'part{p}', 'graph', as_str(etype))
      graph = glt.partition.base.load_graph_partition_data(path, torch.device('cpu'))
      ds = DistDataset(edge_dir='in' if layout == 'CSC' else 'out')
      ds.init_graph(
        edge_index={etype: graph.edge_index}, edge_ids={etype: graph.eids}, layout='COO',
        graph_mode='CPU',
      )  # fmt: skip
      indptr, indices, _ = ds.get_graph(etype).export_topology()
      first, second = (indices, indptr) if layout == 'CSC' else (indptr, indices)
      torch.save(first, os.path.join(path, 'rows.pt'))
      torch.save(second, os.path.join(path, 'cols.pt'))


@pytest.mark.parametrize('layout', ['CSC', 'CSR'])
def test_a_partition_rewritten_as_csc_or_csr_loads_as_its_coo_does(tmp_path, layout):
  root = partition(str(tmp_path / 'p'))
  rewrite_as(root, layout)
  edge_dir = 'in' if layout == 'CSC' else 'out'
  for p in range(2):
    coo = DistDataset(edge_dir=edge_dir).load(root, p, graph_mode='CPU')
    packed = DistDataset(edge_dir=edge_dir).load(root, p, graph_mode='CPU', input_layout=layout)
    for etype in EDGES:
      got = neighbor_sets(packed.get_graph(etype).export_topology())
      want = neighbor_sets(coo.get_graph(etype).export_topology())
      # The edge ids stay the COO files' (GLT reads eids.pt unrewritten): compare edges.
      assert {g[:2] for g in got} == {w[:2] for w in want}
      assert len(got) == len(want) > 0
    owned = owned_ids(packed.node_pb['paper'], p)
    assert torch.equal(packed.get_node_feature('paper')[owned], FEATS['paper'][owned])


def test_rewritten_files_that_disagree_with_the_partition_are_named(tmp_path):
  root = partition(str(tmp_path / 'p'), with_feature=False)
  rewrite_as(root, 'CSC')
  path = os.path.join(root, 'part0', 'graph', as_str(WRITES))
  rows, cols = (torch.load(os.path.join(path, f'{n}.pt')) for n in ('rows', 'cols'))

  def load_with(name, tensor):
    torch.save(tensor, os.path.join(path, name))
    try:
      DistDataset(edge_dir='in').load(root, 0, graph_mode='CPU', input_layout='CSC')
    finally:
      torch.save(rows if name == 'rows.pt' else cols, os.path.join(path, name))

  with pytest.raises(PartitionFileError, match=r'rows\.pt holds \d+ edges .*eids\.npy'):
    load_with('rows.pt', torch.cat([rows, rows[:1]]))
  with pytest.raises(PartitionFileError, match=r'cols\.pt runs from 0 to'):
    load_with('cols.pt', torch.cat([cols[:-1], cols[-1:] + 1]))
  with pytest.raises(PartitionFileError, match=r'cols\.pt holds \d+ entries .*at most 120 \+ 1'):
    load_with('cols.pt', torch.cat([cols, cols[-1:].repeat(200)]))
  with pytest.raises(PartitionFileError, match=r'rows\.pt holds node ids outside \[0, 80\)'):
    load_with('rows.pt', rows + 80)
  with pytest.raises(PartitionFileError, match=r'rows\.pt must hold a 1-D integer tensor'):
    load_with('rows.pt', rows.float())
  os.remove(os.path.join(path, 'rows.pt'))
  with pytest.raises(FileNotFoundError, match=r"input_layout='CSC' reads .*rows\.pt"):
    DistDataset(edge_dir='in').load(root, 0, graph_mode='CPU', input_layout='CSC')


def test_two_stage_partitioning_with_fp16_features(tmp_path):
  root = partition(str(tmp_path / 'p'), with_feature=False)
  for p in range(2):
    glt.partition.base.build_partition_feature(
      root, p, 16, node_feat=FEATS, node_feat_dtype=torch.float16, edge_feat=None,
      edge_feat_dtype=None,
    )  # fmt: skip
  for p in range(2):
    ds = DistDataset(edge_dir='in').load(root, p, graph_mode='CPU')
    for ntype, feats in FEATS.items():
      owned = owned_ids(ds.node_pb[ntype], p)
      got = ds.get_node_feature(ntype)[owned]
      assert got.dtype == torch.float16 and torch.equal(got, feats[owned].half())


def test_one_worker_device_is_every_workers():
  cpu = torch.device('cpu')
  rendezvous = dict(master_addr='localhost', master_port=1)  # not dialled here
  options = MpDistSamplingWorkerOptions(num_workers=2, worker_devices=cpu, **rendezvous)
  assert options.worker_devices == [cpu, cpu]
  assert worker_device(options, 1) is None  # a CPU sampler
  many = MpDistSamplingWorkerOptions(num_workers=2, worker_devices=(cpu, 'cuda:1'), **rendezvous)
  assert many.worker_devices == [cpu, 'cuda:1']


def test_checkpoints_round_trip_at_glts_path(tmp_path):
  torch.manual_seed(0)
  model = torch.nn.Linear(4, 3)
  opt = torch.optim.Adam(model.parameters(), lr=0.1)
  model(torch.randn(5, 4)).sum().backward()
  opt.step()
  glt.utils.common.save_ckpt(7, str(tmp_path / 'ckpt'), model, opt, epoch=1.5)
  saved = torch.load(tmp_path / 'ckpt' / 'model_seq_7.ckpt', weights_only=True)
  assert set(saved) == {'seq', 'epoch', 'model_state_dict', 'optimizer_state_dict'}
  assert os.listdir(tmp_path / 'ckpt') == ['model_seq_7.ckpt'], 'no partial file left'

  fresh = torch.nn.Linear(4, 3)
  fresh_opt = torch.optim.Adam(fresh.parameters(), lr=0.1)
  assert glt.utils.load_ckpt(7, str(tmp_path / 'ckpt'), fresh, fresh_opt) == 1.5
  for a, b in zip(model.parameters(), fresh.parameters()):
    assert torch.equal(a, b)
  state, fresh_state = opt.state_dict()['state'], fresh_opt.state_dict()['state']
  assert all(torch.equal(state[0][k], fresh_state[0][k]) for k in ('exp_avg', 'exp_avg_sq'))
  assert glt.utils.common.load_ckpt(8, str(tmp_path / 'ckpt'), fresh) == -1, 'none: start over'
  glt.utils.save_ckpt(9, str(tmp_path / 'ckpt'), model)
  with pytest.raises(KeyError, match='holds no optimizer state'):
    glt.utils.load_ckpt(9, str(tmp_path / 'ckpt'), fresh, fresh_opt)


def test_loaders_print_their_class_and_count_their_seed_batches():
  ds = glt.data.Dataset(edge_dir='out')
  ds.init_graph(EDGES[CITES], graph_mode='CPU', num_nodes=120)
  link = glt.loader.LinkNeighborLoader(
    ds, [2, 2], edge_label_index=EDGES[CITES][:, :50], batch_size=16
  )
  node = glt.loader.NeighborLoader(ds, [2], torch.arange(120), batch_size=50, drop_last=True)
  assert str(link) == 'LinkNeighborLoader()' and repr(node) == 'NeighborLoader()'
  assert len(link._seed_loader) == len(link) == 4  # ceil(50 / 16)
  assert len(node._seed_loader) == len(node) == 2  # 120 // 50
