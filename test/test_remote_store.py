"""PyG's remote backend over our servers, on loopback: 2 servers hold the
partitions, and each of 2 clients reads features, labels, sizes and edges
through RemoteFeatureStore / RemoteGraphStore, checked against the whole
graph, then trains-style iterates PyG's NodeLoader over the store pair."""

import os
import traceback

import pytest
import torch
from test_dist_sampling import partition
from test_server_client import NUM_CLIENTS, NUM_SERVERS, spawn_job


def pairs(src: torch.Tensor, dst: torch.Tensor) -> list:
  return sorted(zip(src.tolist(), dst.tolist()))


def check_stores(graph, hetero: bool) -> None:
  from torch_geometric.data import TensorAttr
  from torch_geometric.loader import NodeLoader

  import graphlearn_torch as glt

  features, edges = glt.distributed.remote_stores()
  if hetero:
    xs, ys = graph['x'], graph['y']
    edge_lists = graph['edges']
    sizes = {t: x.size(0) for t, x in xs.items()}
  else:
    xs, ys = {None: graph['x']}, {None: graph['y']}
    edge_lists = {None: (graph['src'], graph['dst'])}
    sizes = {None: graph['num_nodes']}

  expected = {(t, 'x') for t in xs} | {(t, 'y') for t in ys}
  assert {(a.group_name, a.attr_name) for a in features.get_all_tensor_attrs()} == expected
  for ntype, x in xs.items():
    ids = torch.randperm(x.size(0))[:40]
    assert torch.equal(features.get_tensor(ntype, 'x', ids), x[ids])
    assert torch.equal(features.get_tensor(ntype, 'x', None), x), 'index None: every row'
    assert torch.equal(features.get_tensor(ntype, 'x', slice(5, 9)), x[5:9])
    assert tuple(features.get_tensor_size(ntype, 'x', None)) == tuple(x.shape)
  for ntype, y in ys.items():
    ids = torch.randperm(y.size(0))[:40]
    got_x, got_y = features.multi_get_tensor(
      [TensorAttr(ntype, 'x', ids), TensorAttr(ntype, 'y', ids)]
    )
    assert torch.equal(got_x, xs[ntype][ids]) and torch.equal(got_y, y[ids])
  try:
    features.put_tensor(torch.zeros(1, 1), group_name=None, attr_name='z', index=None)
    raise AssertionError('a write to the read-only store was taken')
  except NotImplementedError as e:
    assert 'read-only' in str(e)
  try:
    features.get_tensor('nowhere', 'x', torch.tensor([0]))
    raise AssertionError('an unknown node type was answered')
  except KeyError as e:
    assert 'nowhere' in str(e)

  attrs = edges.get_all_edge_attrs()
  assert {a.edge_type for a in attrs} == set(edge_lists)
  for attr in attrs:
    etype = attr.edge_type
    src_t, dst_t = (etype[0], etype[-1]) if hetero else (None, None)
    assert tuple(attr.size) == (sizes[src_t], sizes[dst_t])
    src, dst = edges.get_edge_index(etype, layout='coo')
    assert pairs(src, dst) == pairs(*edge_lists[etype]), 'every edge once, from both servers'

  # PyG's own NodeLoader over the pair, sampling with our sampler
  seed_type = 'user' if hetero else None
  sampler = glt.sampler.PyGNeighborSampler((features, edges), [3, 2])
  seeds = torch.arange(0, sizes[seed_type], 7)
  loader = NodeLoader(
    (features, edges), sampler, input_nodes=(seed_type, seeds) if hetero else seeds,
    batch_size=16,
  )  # fmt: skip
  covered = []
  for batch in loader:
    store = batch[seed_type] if hetero else batch
    covered.append(store.n_id[: store.batch_size])
    for ntype, x in xs.items():
      node_store = batch[ntype] if hetero else batch
      if 'n_id' in node_store:
        assert torch.equal(node_store.x, x[node_store.n_id])
    for etype, (src, dst) in edge_lists.items():
      edge_store = batch[etype] if hetero else batch
      if 'edge_index' not in edge_store or edge_store.edge_index.numel() == 0:
        continue
      src_ids = (batch[etype[0]] if hetero else batch).n_id[edge_store.edge_index[0]]
      dst_ids = (batch[etype[-1]] if hetero else batch).n_id[edge_store.edge_index[1]]
      assert set(zip(src_ids.tolist(), dst_ids.tolist())) <= set(zip(src.tolist(), dst.tolist()))
  assert torch.equal(torch.cat(covered).sort().values, seeds)


def run_store_client(rank, port, root, hetero, results):
  import graphlearn_torch as glt

  dist = glt.distributed
  try:
    dist.init_client(NUM_SERVERS, NUM_CLIENTS, rank, '127.0.0.1', port, request_timeout=60)
    graph = torch.load(os.path.join(root, 'full.pt'), weights_only=False)
    check_stores(graph, hetero)
    results.put(('client', rank, 'ok', 1, 1))
  except Exception:
    results.put(('client', rank, traceback.format_exc(), 0, 0))
  finally:
    dist.shutdown_client()


def run_store_job(root, hetero):
  reports, procs = spawn_job(root, run_store_client, hetero)
  for role, rank, status, _, _ in sorted(reports):
    assert status == 'ok', f'{role} {rank}:\n{status}'
  assert all(p.exitcode == 0 for p in procs), [p.exitcode for p in procs]


@pytest.mark.slow  # spawned processes
def test_remote_stores_homo(tmp_path):
  partition(str(tmp_path), NUM_SERVERS, hetero=False)
  run_store_job(str(tmp_path), hetero=False)


@pytest.mark.slow  # spawned processes
def test_remote_stores_hetero(tmp_path):
  partition(str(tmp_path), NUM_SERVERS, hetero=True)
  run_store_job(str(tmp_path), hetero=True)
