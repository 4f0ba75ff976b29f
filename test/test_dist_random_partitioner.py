"""DistRandomPartitioner: 2 processes on loopback, each holding half of a
graph, partition it together; the partitions are checked against the whole
graph."""

import multiprocessing
import traceback

import pytest
import torch
from conftest import random_edges
from test_dist_sampling import free_port, run_spawned

from graphlearn_torch.partition import load_partition

# Spawned processes or builds: left out of make test-fast.
pytestmark = pytest.mark.slow

SPAWN = multiprocessing.get_context('spawn')
NUM_NODES = {'user': 300, 'item': 200}
NUM_PARTS = 2


def whole_graph(hetero):
  if not hetero:
    ei = random_edges(400, 400, 3000, seed=0)
    return {None: 400}, {None: ei}
  edges = {
    ('user', 'buys', 'item'): random_edges(300, 200, 2000, seed=1),
    ('user', 'follows', 'user'): random_edges(300, 300, 1000, seed=2),
  }
  return dict(NUM_NODES), edges


def features(num_nodes):
  return {t: torch.arange(n * 3, dtype=torch.float32).view(n, 3) for t, n in num_nodes.items()}


def run_partitioner(rank, port, root, hetero, results):
  import graphlearn_torch as glt

  try:
    num_nodes, edges = whole_graph(hetero)
    feats = features(num_nodes)
    # this process's piece: every other edge and every other feature row
    mine_e = {e: torch.arange(rank, ei.size(1), NUM_PARTS) for e, ei in edges.items()}
    mine_n = {t: torch.arange(rank, n, NUM_PARTS) for t, n in num_nodes.items()}
    efeat = {e: ei.t().float() for e, ei in edges.items()}  # an edge's feature: its ends

    def pick(d):
      return d if hetero else d[None]

    torch.manual_seed(rank)
    glt.distributed.DistRandomPartitioner(
      root,
      num_nodes=pick(num_nodes),
      edge_index=pick({e: ei[:, mine_e[e]] for e, ei in edges.items()}),
      edge_ids=pick(mine_e),
      node_feat=pick({t: f[mine_n[t]] for t, f in feats.items()}),
      node_feat_ids=pick(mine_n),
      edge_feat=pick({e: f[mine_e[e]] for e, f in efeat.items()}),
      edge_feat_ids=pick(mine_e),
      num_parts=NUM_PARTS,
      current_partition_idx=rank,
      chunk_size=256,
      master_addr='127.0.0.1',
      master_port=port,
      rpc_timeout=60,
    ).partition()
    results.put((rank, 'ok'))
  except Exception:
    results.put((rank, traceback.format_exc()))
  finally:
    glt.distributed.shutdown_rpc(graceful=True, timeout=30)


@pytest.mark.parametrize('hetero', [False, True])
def test_dist_random_partitioner_covers_the_graph(tmp_path, hetero):
  results = SPAWN.Queue()
  port = free_port()
  procs = [
    SPAWN.Process(target=run_partitioner, args=(r, port, str(tmp_path), hetero, results))
    for r in range(NUM_PARTS)
  ]
  for rank, status in sorted(run_spawned(procs, results, timeout=120)):
    assert status == 'ok', f'rank {rank}:\n{status}'

  num_nodes, edges = whole_graph(hetero)
  feats = features(num_nodes)
  seen_edges = {e: [] for e in edges}
  seen_nodes = {t: [] for t in num_nodes}
  for p in range(NUM_PARTS):
    _, idx, graph, node_feat, edge_feat, node_pb, edge_pb = load_partition(str(tmp_path), p)
    assert idx == p
    unwrap = (lambda d: d) if hetero else (lambda x: {None: x})
    graph, node_feat, edge_feat = unwrap(graph), unwrap(node_feat), unwrap(edge_feat)
    node_pb, edge_pb = unwrap(node_pb), unwrap(edge_pb)
    for etype, ei in edges.items():
      part = graph[etype]
      rows, cols = part.edge_index[0], part.edge_index[1]
      # every edge keeps its ends, and goes with its source's partition
      assert torch.equal(torch.stack([rows, cols]), ei[:, part.eids])
      src_t = etype[0] if hetero else None
      assert bool((torch.as_tensor(node_pb[src_t])[rows] == p).all())
      assert bool((torch.as_tensor(edge_pb[etype])[part.eids] == p).all())
      assert torch.equal(edge_feat[etype].feats, ei[:, edge_feat[etype].ids].t().float())
      seen_edges[etype].append(part.eids)
    for ntype, n in num_nodes.items():
      book = torch.as_tensor(node_pb[ntype])
      assert book.numel() == n and set(book.unique().tolist()) == {0, 1}
      assert abs(int((book == 0).sum()) - n / 2) <= 2, 'balanced'
      feat = node_feat[ntype]
      assert torch.equal(feat.ids, (book == p).nonzero().view(-1)), 'a partition holds its rows'
      assert torch.equal(feat.feats, feats[ntype][feat.ids])
      seen_nodes[ntype].append(feat.ids)
  for etype, ei in edges.items():
    assert torch.equal(torch.sort(torch.cat(seen_edges[etype])).values, torch.arange(ei.size(1)))
  for ntype, n in num_nodes.items():
    assert torch.equal(torch.sort(torch.cat(seen_nodes[ntype])).values, torch.arange(n))
