"""Distributed sampling in worker mode on loopback: every batch is checked
against the full graph (edges, edge ids, fanout per seed, features, labels,
seed coverage). Workers are spawned processes, reaped also on failure."""

import math
import multiprocessing
import os
import traceback

import pytest
import torch

import graphlearn_torch as glt
from graphlearn_torch.distributed.sources.processes import can_fork_sampling_processes
from graphlearn_torch.partition import RandomPartitioner, StreamingPartitioner
from graphlearn_torch.typing import reverse_edge_type

# Spawned processes or builds: left out of make test-fast.
pytestmark = pytest.mark.slow

SPAWN = multiprocessing.get_context('spawn')
TIMEOUT_S = 120
FANOUT = [3, 2]


def free_port() -> int:
  r"""A free loopback port outside the kernel's ephemeral range."""
  return glt.utils.get_free_port('127.0.0.1')


def homo_graph(num_nodes=300, num_edges=2000, seed=0):
  g = torch.Generator().manual_seed(seed)
  return {
    'num_nodes': num_nodes,
    'src': torch.randint(0, num_nodes, (num_edges,), generator=g),
    'dst': torch.randint(0, num_nodes, (num_edges,), generator=g),
    'x': torch.randn(num_nodes, 6, generator=g),
    'y': torch.randint(0, 5, (num_nodes,), generator=g),
    'edge_attr': torch.randn(num_edges, 2, generator=g),
    'train': torch.randperm(num_nodes, generator=g)[:200],
  }


HETERO_SIZES = {'user': 150, 'item': 120}
HETERO_ETYPES = [('user', 'buys', 'item'), ('item', 'sold_to', 'user'), ('user', 'follows', 'user')]


def hetero_graph(seed=0):
  g = torch.Generator().manual_seed(seed)
  out = {'edges': {}, 'x': {}, 'y': {}}
  for i, (s, r, d) in enumerate(HETERO_ETYPES):
    n = 600 + 100 * i
    src = torch.randint(0, HETERO_SIZES[s], (n,), generator=g)
    dst = torch.randint(0, HETERO_SIZES[d], (n,), generator=g)
    out['edges'][(s, r, d)] = (src, dst)
  out['x'] = {t: torch.randn(n, 4, generator=g) for t, n in HETERO_SIZES.items()}
  out['y'] = {'user': torch.randint(0, 3, (HETERO_SIZES['user'],), generator=g)}
  out['train'] = torch.randperm(HETERO_SIZES['user'], generator=g)[:100]
  return out


def partition(root, num_parts, hetero, partitioner=RandomPartitioner):
  if hetero:
    graph = hetero_graph()
    partitioner(
      root,
      num_parts,
      HETERO_SIZES,
      {e: torch.stack(v) for e, v in graph['edges'].items()},
      node_feat=graph['x'],
      node_labels=graph['y'],
      node_split=({'user': graph['train']}, None, None),
      seed=0,
      progress=False,
    ).partition()
  else:
    graph = homo_graph()
    partitioner(
      root,
      num_parts,
      graph['num_nodes'],
      torch.stack([graph['src'], graph['dst']]),
      node_feat=graph['x'],
      edge_feat=graph['edge_attr'],
      node_labels=graph['y'],
      node_split=(graph['train'], None, None),
      seed=0,
      progress=False,
    ).partition()
  torch.save(graph, os.path.join(root, 'full.pt'))


def check_hop_counts(src_local, hop_edges, hop_nodes, degree, fanout, node_offset):
  r"""Every node of a hop's frontier got min(fanout, degree) neighbors."""
  counts = torch.bincount(src_local[hop_edges] - node_offset, minlength=hop_nodes.numel())
  expected = degree[hop_nodes].clamp(max=fanout)
  assert torch.equal(counts[: hop_nodes.numel()], expected), 'fanout not respected'


def check_homo_batch(batch, graph, input_nodes, degree):
  n = graph['num_nodes']
  n_id = batch.n_id
  bs = batch.batch_size
  assert torch.equal(n_id[:bs], input_nodes[batch.input_id]), 'seeds first, in order'
  nbr_local, seed_local = batch.edge_index
  src, dst = n_id[seed_local], n_id[nbr_local]  # edge_dir 'out': seed -> neighbor
  assert torch.equal(graph['src'][batch.e_id], src) and torch.equal(graph['dst'][batch.e_id], dst)
  keys = torch.unique(graph['src'] * n + graph['dst'])
  assert torch.isin(src * n + dst, keys).all(), 'every sampled edge exists'
  assert torch.equal(batch.x, graph['x'][n_id]), 'features are the full table rows'
  assert torch.equal(batch.y, graph['y'][n_id]), 'labels'
  assert torch.equal(batch.edge_attr, graph['edge_attr'][batch.e_id]), 'edge features'
  assert n_id.unique().numel() == n_id.numel(), 'nodes are deduplicated'
  ne, nn = batch.num_sampled_edges, batch.num_sampled_nodes
  offset = 0
  edge_start = 0
  for hop, fanout in enumerate(FANOUT):
    hop_nodes = n_id[offset : offset + nn[hop]]
    hop_edges = torch.arange(edge_start, edge_start + ne[hop])
    check_hop_counts(seed_local, hop_edges, hop_nodes, degree, fanout, offset)
    offset += nn[hop]
    edge_start += ne[hop]
  assert edge_start == nbr_local.numel()


def check_hetero_batch(batch, graph, input_nodes, sizes):
  n_id = batch['user'].n_id
  bs = batch['user'].batch_size
  assert torch.equal(n_id[:bs], input_nodes[batch['user'].input_id])
  for ntype in batch.node_types:
    ids = batch[ntype].n_id
    assert torch.equal(batch[ntype].x, graph['x'][ntype][ids])
    assert ids.unique().numel() == ids.numel()
  assert torch.equal(batch['user'].y, graph['y']['user'][n_id])
  for etype, (src_all, dst_all) in graph['edges'].items():
    out_type = reverse_edge_type(etype)
    if out_type not in batch.edge_types:
      continue
    nbr_local, seed_local = batch[out_type].edge_index
    src = batch[etype[0]].n_id[seed_local]
    dst = batch[etype[-1]].n_id[nbr_local]
    n = sizes[etype[-1]]
    keys = torch.unique(src_all * n + dst_all)
    assert torch.isin(src * n + dst, keys).all(), f'every sampled {etype} edge exists'
    # Hop 0 starts from the seeds (users): each gets min(fanout, degree).
    if etype[0] == 'user':
      deg = torch.bincount(src_all, minlength=sizes['user'])
      first = torch.arange(batch[out_type].num_sampled_edges[0])
      check_hop_counts(seed_local, first, n_id[:bs], deg, FANOUT[0], 0)


def check_link_batch(batch, graph, edges, degree, neg_mode, amount):
  r"""A homogeneous link batch: seed edges and labels, strict negatives,
  sampled edges, fanout, features."""
  n = graph['num_nodes']
  n_id = batch.n_id
  keys = torch.unique(graph['src'] * n + graph['dst'])
  seeds = edges[:, batch.input_id]
  bs = seeds.size(1)
  if neg_mode == 'binary':
    src, dst = n_id[batch.edge_label_index[0]], n_id[batch.edge_label_index[1]]
    assert torch.equal(src[:bs], seeds[0]) and torch.equal(dst[:bs], seeds[1]), 'positives'
    assert batch.edge_label_index.size(1) == bs + math.ceil(bs * amount)
    assert torch.equal(batch.edge_label, torch.cat([torch.ones(bs), torch.zeros(src.numel() - bs)]))
    neg_src, neg_dst = src[bs:], dst[bs:]
  else:
    src = n_id[batch.src_index]
    assert torch.equal(src, seeds[0]) and torch.equal(n_id[batch.dst_pos_index], seeds[1])
    assert tuple(batch.dst_neg_index.shape) == ((bs, amount) if amount > 1 else (bs,))
    neg_dst = n_id[batch.dst_neg_index.reshape(bs, -1)].reshape(-1)
    neg_src = src.repeat_interleave(amount)
  assert not torch.isin(neg_src * n + neg_dst, keys).any(), 'negatives are not edges'
  nbr_local, seed_local = batch.edge_index
  e_src, e_dst = n_id[seed_local], n_id[nbr_local]
  assert torch.isin(e_src * n + e_dst, keys).all(), 'every sampled edge exists'
  assert torch.equal(graph['src'][batch.e_id], e_src), 'edge ids'
  assert torch.equal(batch.x, graph['x'][n_id]) and torch.equal(batch.y, graph['y'][n_id])
  assert n_id.unique().numel() == n_id.numel(), 'nodes are deduplicated'
  first = torch.arange(batch.num_sampled_edges[0])
  hop0 = n_id[: batch.num_sampled_nodes[0]]
  check_hop_counts(seed_local, first, hop0, degree, FANOUT[0], 0)


def check_hetero_link_batch(batch, graph, edges, etype):
  src_t, _, dst_t = etype
  # GLT's layout for edge_dir 'out': the labels sit on the reversed type, reversed
  label_type = reverse_edge_type(etype)
  seeds = edges[:, batch[label_type].input_id]
  bs = seeds.size(1)
  label_index = batch[label_type].edge_label_index.flip(0)
  src = batch[src_t].n_id[label_index[0]]
  dst = batch[dst_t].n_id[label_index[1]]
  assert torch.equal(src[:bs], seeds[0]) and torch.equal(dst[:bs], seeds[1]), 'positives'
  assert torch.equal(batch[label_type].edge_label[bs:], torch.zeros(src.numel() - bs))
  n = HETERO_SIZES[dst_t]
  all_src, all_dst = graph['edges'][etype]
  keys = torch.unique(all_src * n + all_dst)
  assert not torch.isin(src[bs:] * n + dst[bs:], keys).any(), 'negatives are not edges'
  for ntype in batch.node_types:
    assert torch.equal(batch[ntype].x, graph['x'][ntype][batch[ntype].n_id])


def check_subgraph_batch(batch, graph, input_nodes):
  n_id = batch.n_id
  assert torch.equal(n_id[batch.mapping], input_nodes[batch.input_id]), 'mapping'
  inside = torch.zeros(graph['num_nodes'], dtype=torch.bool)
  inside[n_id] = True
  expected = torch.nonzero(inside[graph['src']] & inside[graph['dst']]).view(-1)
  assert torch.equal(torch.sort(batch.e_id).values, expected), 'every edge among the nodes, once'
  nbr_local, seed_local = batch.edge_index
  assert torch.equal(graph['src'][batch.e_id], n_id[seed_local])
  assert torch.equal(graph['dst'][batch.e_id], n_id[nbr_local])
  assert torch.equal(batch.x, graph['x'][n_id])
  assert torch.equal(batch.edge_attr, graph['edge_attr'][batch.e_id])


def make_loader(dist, ds, graph, kind, hetero, rank, options, client=False):
  r"""The loader of a case, its seeds, and a function that checks a batch and
  returns (seed positions, edges). A client's loader gets no dataset (``ds``
  only gives it seeds)."""
  common = dict(collect_features=True, random_seed=rank, worker_options=options, shuffle=True)
  data = None if client else ds
  if kind == 'node' and hetero:
    seeds = ds.train_idx['user']
    loader = dist.DistNeighborLoader(data, FANOUT, ('user', seeds), batch_size=16, **common)

    def check(batch):
      check_hetero_batch(batch, graph, seeds, HETERO_SIZES)
      return batch['user'].input_id, sum(batch[e].edge_index.size(1) for e in batch.edge_types)

  elif kind == 'node':
    seeds = ds.train_idx
    loader = dist.DistNeighborLoader(data, FANOUT, seeds, batch_size=16, with_edge=True, **common)
    degree = torch.bincount(graph['src'], minlength=graph['num_nodes'])

    def check(batch):
      check_homo_batch(batch, graph, seeds, degree)
      return batch.input_id, batch.edge_index.size(1)

  elif kind == 'link' and hetero:
    etype = ('user', 'buys', 'item')
    seeds = torch.stack(graph['edges'][etype])[:, rank::2]
    loader = dist.DistLinkNeighborLoader(
      data, FANOUT, batch_size=16, edge_label_index=(etype, seeds),
      neg_sampling=dist_neg('binary', 1), **common,
    )  # fmt: skip

    def check(batch):
      check_hetero_link_batch(batch, graph, seeds, etype)
      stores = [batch[e] for e in batch.edge_types if 'edge_index' in batch[e]]
      return batch[reverse_edge_type(etype)].input_id, sum(s.edge_index.size(1) for s in stores)

  elif kind.startswith('link'):
    mode, amount = ('binary', 2) if kind == 'link' else ('triplet', 3)
    src, dst = ds.get_graph().topo.to_coo()[:2]  # the partition's own edges
    seeds = torch.stack([src, dst])[:, :300]
    loader = dist.DistLinkNeighborLoader(
      data, FANOUT, batch_size=16, edge_label_index=seeds, neg_sampling=dist_neg(mode, amount),
      with_edge=True, **common,
    )  # fmt: skip
    degree = torch.bincount(graph['src'], minlength=graph['num_nodes'])

    def check(batch):
      check_link_batch(batch, graph, seeds, degree, mode, amount)
      return batch.input_id, batch.edge_index.size(1)

  else:
    fanout = FANOUT if kind == 'subgraph' else None
    seeds = ds.train_idx
    loader = dist.DistSubGraphLoader(
      data, seeds, fanout, batch_size=16, with_edge=True, **common
    )  # fmt: skip

    def check(batch):
      check_subgraph_batch(batch, graph, seeds)
      return batch.input_id, batch.edge_index.size(1)

  return loader, len(seeds if seeds.dim() == 1 else seeds[0]), check


def dist_neg(mode, amount):
  from graphlearn_torch.sampler import NegativeSampling

  return NegativeSampling(mode, amount)


def run_epochs(loader, check, num_seeds, epochs=2):
  r"""Checks every batch of ``epochs`` epochs and that each epoch covers
  every seed once; returns (batches, sampled edges)."""
  batches = edges = 0
  for _epoch in range(epochs):
    seen = []
    for batch in loader:
      input_id, num_edges = check(batch)
      seen.append(input_id)
      edges += num_edges
    covered = torch.sort(torch.cat(seen)).values
    assert torch.equal(covered, torch.arange(num_seeds)), 'each epoch covers every seed once'
    batches += len(seen)
  return batches, edges


def share_host_partitions(share, rank, world_size):
  r"""Sets whether this process's partition shares its topology and feature
  rows with the partitions of this host (its samplers inherit it). ``share``
  '1': all do; '0': none, so every other partition is asked over RPC, as
  across hosts; 'mixed': all but the last rank, so the others run each
  other's steps in place and ask the last one over RPC."""
  on = share == '1' or (share == 'mixed' and rank != world_size - 1)
  os.environ['GLT_SHARE_HOST_PARTITIONS'] = '1' if on else '0'


def join_rpc_world_of_its_own(rank):
  r"""A torch RPC world of one process, as a script may start for itself."""
  init = f'tcp://127.0.0.1:{free_port()}'
  options = torch.distributed.rpc.TensorPipeRpcBackendOptions(init_method=init, rpc_timeout=60)
  torch.distributed.rpc.init_rpc(f'own-{rank}', rank=0, world_size=1, rpc_backend_options=options)


def run_worker(rank, world_size, port, root, hetero, mode, kind, results, share='1'):
  share_host_partitions(share, rank, world_size)
  dist = glt.distributed
  own_rpc = mode == 'mp_forkserver'
  try:
    dist.init_worker_group(world_size, rank, 'trainer')
    if mode == 'collocated':
      dist.init_rpc('127.0.0.1', port, num_rpc_threads=4, rpc_timeout=60)
      options = None
      # The job's processes (all on this host) split its cores among them.
      share = max(1, len(os.sched_getaffinity(0)) // world_size)
      assert glt.utils.kernel_thread_cap() == share, (glt.utils.kernel_thread_cap(), share)
    else:  # samplers in 2 processes per trainer, meeting at `port`
      if own_rpc:  # a trainer with an RPC agent: they start from a fork server
        join_rpc_world_of_its_own(rank)
      assert can_fork_sampling_processes(on_gpu=False) != own_rpc
      options = dist.MpDistSamplingWorkerOptions(
        num_workers=2, worker_concurrency=2, master_addr='127.0.0.1', master_port=port,
        rpc_timeout=60, channel_size='16MB',
      )  # fmt: skip
    ds = dist.DistDataset(edge_dir='out').load(root, rank, graph_mode='CPU')
    graph = torch.load(os.path.join(root, 'full.pt'), weights_only=False)
    loader, num_seeds, check = make_loader(dist, ds, graph, kind, hetero, rank, options)
    batches, edges = run_epochs(loader, check, num_seeds)
    loader.shutdown()
    results.put((rank, 'ok', batches, edges))
  except Exception:
    results.put((rank, traceback.format_exc(), 0, 0))
  finally:
    dist.shutdown_rpc(graceful=True, timeout=30)
    if own_rpc:
      torch.distributed.rpc.shutdown(graceful=False)


def run_spawned(procs, results, timeout=TIMEOUT_S):
  r"""Starts ``procs`` and returns one report of each from ``results``;
  reaps them (killing stragglers), also when a report does not come."""
  for p in procs:
    p.start()
  try:
    return [results.get(timeout=timeout) for _ in procs]
  finally:
    for p in procs:
      p.join(timeout / 4)
      if p.is_alive():
        p.kill()
        p.join()


def run_group(root, world_size, hetero, mode='collocated', kind='node', share='1'):
  port = free_port()
  results = SPAWN.Queue()
  procs = [
    SPAWN.Process(
      target=run_worker, args=(r, world_size, port, root, hetero, mode, kind, results, share)
    )
    for r in range(world_size)
  ]
  return sorted(run_spawned(procs, results))


def assert_ok(reports):
  for rank, status, batches, edges in reports:
    assert status == 'ok', f'rank {rank}:\n{status}'
    assert batches > 0 and edges > 0


# share: whether partitions read each other's topologies and feature tables
# from this host's shared memory (the default) or over RPC (see
# share_host_partitions)
@pytest.mark.parametrize(
  'num_parts,mode,share',
  [
    (2, 'collocated', '1'),
    (2, 'collocated', '0'),
    (3, 'collocated', 'mixed'),
    (2, 'mp', '1'),  # sampling processes forked from their trainers
    (2, 'mp_forkserver', '1'),  # started from fork servers
  ],
)
def test_dist_neighbor_loader_homo(tmp_path, num_parts, mode, share):
  partition(str(tmp_path), num_parts, hetero=False)
  assert_ok(run_group(str(tmp_path), num_parts, hetero=False, mode=mode, share=share))


@pytest.mark.parametrize('hetero', [False, True])
def test_dist_neighbor_loader_on_streaming_partitions(tmp_path, hetero):
  # partitions of another partitioner load and sample as the full graph does
  partition(str(tmp_path), 2, hetero=hetero, partitioner=StreamingPartitioner)
  assert_ok(run_group(str(tmp_path), 2, hetero=hetero, mode='collocated', share='0'))


@pytest.mark.parametrize('mode,share', [('collocated', '1'), ('mp', '1'), ('mp', '0')])
def test_dist_neighbor_loader_hetero(tmp_path, mode, share):
  partition(str(tmp_path), 2, hetero=True)
  assert_ok(run_group(str(tmp_path), 2, hetero=True, mode=mode, share=share))


@pytest.mark.parametrize(
  'num_parts,mode,kind,share',
  [
    (2, 'collocated', 'link', '1'),
    (2, 'collocated', 'link', '0'),
    (3, 'mp', 'link_triplet', 'mixed'),
  ],
)
def test_dist_link_neighbor_loader_homo(tmp_path, num_parts, mode, kind, share):
  partition(str(tmp_path), num_parts, hetero=False)
  assert_ok(run_group(str(tmp_path), num_parts, hetero=False, mode=mode, kind=kind, share=share))


def test_dist_link_neighbor_loader_hetero(tmp_path):
  partition(str(tmp_path), 2, hetero=True)
  assert_ok(run_group(str(tmp_path), 2, hetero=True, mode='mp', kind='link'))


@pytest.mark.parametrize(
  'num_parts,mode,kind,share',
  [(3, 'collocated', 'subgraph', 'mixed'), (2, 'mp', 'subgraph_seeds_only', '0')],
)
def test_dist_subgraph_loader(tmp_path, num_parts, mode, kind, share):
  partition(str(tmp_path), num_parts, hetero=False)
  assert_ok(run_group(str(tmp_path), num_parts, hetero=False, mode=mode, kind=kind, share=share))
