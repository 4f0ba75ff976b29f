"""Temporal and disjoint sampling across 2 partitions (worker mode, loopback):
every batch equals the single-process sampler's on the full graph, for the
same seeds and times (fanout -1 and 'last' draw deterministically), and no
batch sees the future. Partitions ask each other over RPC (homogeneous) or
read each other's time-sorted topologies in place (heterogeneous). Workers
are spawned processes, reaped also on failure."""

import json
import multiprocessing
import os
import traceback

import pytest
import torch
from test_dist_sampling import run_spawned

import graphlearn_torch as glt
from graphlearn_torch._ext import cuda_kernels_available
from graphlearn_torch.partition import RandomPartitioner

# Spawned processes or builds: left out of make test-fast.
pytestmark = pytest.mark.slow

SPAWN = multiprocessing.get_context('spawn')
TIMEOUT_S = 120
NUM_NODES, NUM_EDGES = 60, 400
HETERO_SIZES = {'user': 40, 'item': 30}
HETERO_ETYPES = [('user', 'buys', 'item'), ('item', 'sold_to', 'user'), ('user', 'follows', 'user')]


def homo_graph():
  g = torch.Generator().manual_seed(3)
  return {
    'edge_index': torch.randint(0, NUM_NODES, (2, NUM_EDGES), generator=g),
    'node_time': torch.randint(0, 30, (NUM_NODES,), generator=g),
    'edge_time': torch.randint(0, 30, (NUM_EDGES,), generator=g),
  }


def hetero_graph():
  g = torch.Generator().manual_seed(4)
  edges = {}
  for s, r, d in HETERO_ETYPES:
    n = 150
    edges[(s, r, d)] = torch.stack(
      [
        torch.randint(0, HETERO_SIZES[s], (n,), generator=g),
        torch.randint(0, HETERO_SIZES[d], (n,), generator=g),
      ]
    )
  return {
    'edge_index': edges,
    # 'item' has no time: it is not bounded (PyG's rule).
    'node_time': {'user': torch.randint(0, 30, (HETERO_SIZES['user'],), generator=g)},
    'edge_time': {e: torch.randint(0, 30, (150,), generator=g) for e in HETERO_ETYPES},
  }


def partition(root, hetero):
  graph = hetero_graph() if hetero else homo_graph()
  RandomPartitioner(
    root,
    2,
    HETERO_SIZES if hetero else NUM_NODES,
    graph['edge_index'],
    node_time=graph['node_time'],
    edge_time=graph['edge_time'],
    seed=0,
    progress=False,
  ).partition()
  return graph


def local_dataset(graph, hetero):
  ds = glt.data.Dataset(edge_dir='out')
  ds.init_graph(
    graph['edge_index'], graph_mode='CPU', num_nodes=HETERO_SIZES if hetero else NUM_NODES
  )
  ds.init_node_time(graph['node_time'])
  ds.init_edge_time(graph['edge_time'])
  return ds


def canonical(batch, disjoint):
  r"""A batch as sets: per node type ``(seed, id)``, per edge type ``(seed,
  source id, destination id)`` (seed 0 throughout when not disjoint)."""
  stores = batch.node_types if hasattr(batch, 'node_types') else [None]
  nodes, seeds = {}, {}
  for t in stores:
    store = batch[t] if t is not None else batch
    seeds[t] = store.batch if disjoint else torch.zeros_like(store.n_id)
    nodes[t] = set(zip(seeds[t].tolist(), store.n_id.tolist()))
  edges = {}
  etypes = batch.edge_types if hasattr(batch, 'edge_types') else [None]
  for e in etypes:
    store = batch[e] if e is not None else batch
    if 'edge_index' not in store:
      continue
    src_t, dst_t = (e[0], e[-1]) if e is not None else (None, None)
    row, col = store.edge_index
    src_ids = (batch[src_t] if src_t else batch).n_id
    dst_ids = (batch[dst_t] if dst_t else batch).n_id
    edges[e] = set(zip(seeds[dst_t][col].tolist(), src_ids[row].tolist(), dst_ids[col].tolist()))
  return nodes, {e: s for e, s in edges.items() if s}


def same_batch(mine, theirs, what, disjoint=True):
  got, want = canonical(mine, disjoint), canonical(theirs, disjoint)
  assert got == want, f'{what}: the distributed batch differs from the single-process one'


def node_cases(hetero):
  r"""``(name, loader kwargs, fanout)`` of the deterministic node cases."""
  fanout = {e: [-1, -1] for e in HETERO_ETYPES} if hetero else [-1, -1]
  # 'last' is deterministic where there are times: an edge type into 'item'
  # (no node time) draws at random, so it takes all.
  last = {e: [2, 2] if e[-1] == 'user' else [-1, -1] for e in HETERO_ETYPES} if hetero else [2, 2]
  return [
    ('node time, all', dict(time_attr='node_time'), fanout),
    ('edge time, all', dict(time_attr='edge_time'), fanout),
    ('node time, last', dict(time_attr='node_time', temporal_strategy='last'), last),
    ('edge time, last', dict(time_attr='edge_time', temporal_strategy='last'), last),
    ('disjoint, no time', dict(disjoint=True), fanout),
    ('bidirectional', dict(subgraph_type='bidirectional'), fanout),
  ]


def check_node_cases(dist, ds, local, graph, hetero, rank):
  ntype = 'user' if hetero else None
  num = HETERO_SIZES['user'] if hetero else NUM_NODES
  g = torch.Generator().manual_seed(rank)
  seeds = torch.randperm(num, generator=g)[:12]
  input_time = torch.randint(0, 30, (12,), generator=g)
  for name, options, fanout in node_cases(hetero):
    times = input_time if 'time_attr' in options else None
    input_nodes = (ntype, seeds) if hetero else seeds
    loader = dist.DistNeighborLoader(
      ds, fanout, input_nodes, batch_size=5, input_time=times, **options
    )
    batches = check_batches(loader, local, fanout, seeds, times, name, ntype, **options)
    assert batches == 3, (name, batches)


def check_batches(loader, local, fanout, seeds, input_time, what, ntype=None, **options) -> int:
  r"""Compares every batch of a distributed node ``loader`` over ``seeds``
  (at ``input_time``, or None) with the single-process ``NeighborLoader``'s
  batch of the same seeds on ``local``; shuts the loader down and returns
  how many batches there were.

  Args:
    ntype: the seeds' node type (heterogeneous graphs).
    **options: the loaders' sampling options.
  """
  disjoint = 'time_attr' in options or options.get('disjoint', False)
  batches = 0
  for batch in loader:
    store = batch[ntype] if ntype is not None else batch
    ids = store.input_id
    times = input_time[ids] if input_time is not None else None
    want = glt.loader.NeighborLoader(
      local, fanout, (ntype, seeds[ids]) if ntype is not None else seeds[ids],
      batch_size=ids.numel(), input_time=times, device='cpu', **options,
    )  # fmt: skip
    same_batch(batch, next(iter(want)), what, disjoint)
    if times is not None:
      assert torch.equal(store.seed_time, times), what
    batches += 1
  loader.shutdown()
  return batches


def check_no_future(dist, ds, graph, rank):
  r"""Random draws ('uniform', fanout 2): no node later than its seed."""
  seeds = torch.arange(rank, NUM_NODES, 2)
  input_time = torch.randint(0, 30, (seeds.numel(),))
  loader = dist.DistNeighborLoader(
    ds, [2, 2], seeds, batch_size=8, input_time=input_time, time_attr='node_time',
    random_seed=rank,
  )  # fmt: skip
  for batch in loader:
    bound = batch.seed_time[batch.batch]
    row = batch.edge_index[0]  # every sampled neighbor (seeds keep their own times)
    assert bool((graph['node_time'][batch.n_id[row]] <= bound[row]).all()), 'from the future'
  loader.shutdown()


def check_link_cases(dist, ds, local, graph, rank):
  edges = graph['edge_index'][:, rank::7]
  time = torch.randint(0, 30, (edges.size(1),))
  loader = dist.DistLinkNeighborLoader(
    ds, [-1, -1], batch_size=6, edge_label_index=edges, edge_label_time=time,
    time_attr='edge_time',
  )  # fmt: skip
  for batch in loader:
    ids = batch.input_id
    want = next(
      iter(
        glt.loader.LinkNeighborLoader(
          local,
          [-1, -1],
          edge_label_index=edges[:, ids],
          edge_label_time=time[ids],
          batch_size=ids.numel(),
          time_attr='edge_time',
          device='cpu',
        )  # fmt: skip
      )
    )
    same_batch(batch, want, 'link, edge time')
    assert torch.equal(batch.edge_label_time, time[ids])
  loader.shutdown()
  # Binary negatives are random: each takes its edge's time, nothing later.
  loader = dist.DistLinkNeighborLoader(
    ds, [3, 3], batch_size=6, edge_label_index=edges, edge_label_time=time,
    neg_sampling='binary', time_attr='node_time', random_seed=rank,
  )  # fmt: skip
  for batch in loader:
    assert torch.equal(batch.edge_label_time, time[batch.input_id].repeat(2))
    bound = batch.edge_label_time[batch.batch]
    row = batch.edge_index[0]
    assert bool((graph['node_time'][batch.n_id[row]] <= bound[row]).all()), 'from the future'
  loader.shutdown()


def check_induced(dist, ds, graph, rank):
  seeds = torch.arange(rank, NUM_NODES, 5)
  loader = dist.DistNeighborLoader(
    ds, [2, 1], seeds, batch_size=6, subgraph_type='induced', random_seed=rank
  )
  n = NUM_NODES
  src, dst = graph['edge_index']
  for batch in loader:
    nodes = batch.n_id
    inside = torch.isin(src, nodes) & torch.isin(dst, nodes)
    want = set(zip(src[inside].tolist(), dst[inside].tolist()))
    row, col = batch.edge_index  # message passing: neighbor -> seed side
    got = list(zip(nodes[col].tolist(), nodes[row].tolist()))
    assert len(got) == int(inside.sum()) and set(got) == want, 'every edge among the nodes'
    assert n > 0
  loader.shutdown()


def check_errors(dist, ds):
  with pytest.raises(ValueError, match='time_attr'):
    dist.DistNeighborLoader(ds, [2], torch.arange(4), time_attr='label_time')
  with pytest.raises(ValueError, match='no time attribute'):
    next(iter(dist.DistNeighborLoader(ds, [2], torch.arange(4), input_time=torch.arange(4))))
  with pytest.raises(ValueError, match='one time per seed'):
    dist.DistNeighborLoader(
      ds, [2], torch.arange(4), input_time=torch.arange(3), time_attr='node_time'
    )
  with pytest.raises(ValueError, match='induced'):
    dist.DistNeighborLoader(
      ds, [2], torch.arange(4), time_attr='node_time', subgraph_type='induced'
    )


def check_sampling_processes(dist, ds, local, rank, port):
  r"""The partitions' times reach sampling processes (which load the
  partition again)."""
  seeds = torch.arange(rank, NUM_NODES, 6)
  input_time = torch.randint(0, 30, (seeds.numel(),))
  options = dist.MpDistSamplingWorkerOptions(
    num_workers=1, master_addr='127.0.0.1', master_port=port, rpc_timeout=60, channel_size='4MB'
  )
  loader = dist.DistNeighborLoader(
    ds, [-1, -1], seeds, batch_size=4, input_time=input_time, time_attr='node_time',
    worker_options=options,
  )  # fmt: skip
  what = 'sampling processes, node time'
  check_batches(loader, local, [-1, -1], seeds, input_time, what, time_attr='node_time')


def run_worker(rank, port, root, hetero, share, results, mp_port=None, graph_mode='CPU'):
  os.environ['GLT_SHARE_HOST_PARTITIONS'] = share
  dist = glt.distributed
  try:
    dist.init_worker_group(2, rank, 'trainer')
    dist.init_rpc('127.0.0.1', port, num_rpc_threads=4, rpc_timeout=60)
    ds = dist.DistDataset(edge_dir='out').load(
      root, rank, graph_mode=graph_mode, device=0 if graph_mode != 'CPU' else None
    )
    graph = hetero_graph() if hetero else homo_graph()
    local = local_dataset(graph, hetero)
    check_node_cases(dist, ds, local, graph, hetero, rank)
    if not hetero:
      check_no_future(dist, ds, graph, rank)
      check_link_cases(dist, ds, local, graph, rank)
      check_induced(dist, ds, graph, rank)
      check_errors(dist, ds)
    if mp_port is not None:
      check_sampling_processes(dist, ds, local, rank, mp_port)
    results.put((rank, 'ok'))
  except BaseException:
    results.put((rank, traceback.format_exc()))
  finally:
    dist.shutdown_rpc(graceful=True, timeout=30)


def run_group(root, hetero, share, graph_mode='CPU'):
  port = glt.utils.get_free_port('127.0.0.1')
  # Homogeneous, on the CPU: a loader with sampling processes too.
  mp_port = None if hetero or graph_mode != 'CPU' else glt.utils.get_free_port('127.0.0.1')
  results = SPAWN.Queue()
  args = (root, hetero, share, results, mp_port, graph_mode)
  procs = [SPAWN.Process(target=run_worker, args=(r, port, *args)) for r in range(2)]
  for rank, status in sorted(run_spawned(procs, results, TIMEOUT_S)):
    assert status == 'ok', f'rank {rank}:\n{status}'


# share '0': the other partition answers over RPC (as across hosts); '1': its
# time-sorted topologies are mapped from this host's shared memory.
@pytest.mark.parametrize('hetero,share', [(False, '0'), (True, '1')])
def test_dist_temporal_equals_one_process(tmp_path, hetero, share):
  partition(str(tmp_path), hetero)
  run_group(str(tmp_path), hetero, share)


@pytest.mark.skipif(not cuda_kernels_available(), reason='needs a GPU and the CUDA kernels')
@pytest.mark.parametrize('hetero,mode', [(False, 'CUDA'), (True, 'ZERO_COPY')])
def test_dist_temporal_on_the_gpu_equals_one_process(tmp_path, hetero, mode):
  partition(str(tmp_path), hetero)
  run_group(str(tmp_path), hetero, '1', mode)


def test_partition_times_on_disk(tmp_path):
  graph = partition(str(tmp_path), hetero=False)
  meta = json.loads((tmp_path / 'META.json').read_text())
  assert meta['version'] == 2 and meta['node_time'] == ['_N'] and meta['edge_time']
  ds = glt.distributed.DistDataset().load(str(tmp_path), 1, graph_mode='CPU')
  assert torch.equal(ds.node_time, graph['node_time'])
  assert torch.equal(ds.edge_time, graph['edge_time'])


def test_range_book_renumbers_node_times(tmp_path):
  graph = homo_graph()
  RandomPartitioner(
    str(tmp_path), 2, NUM_NODES, graph['edge_index'], node_time=graph['node_time'],
    book='range', seed=0, progress=False,
  ).partition()  # fmt: skip
  ds = glt.distributed.DistDataset().load(str(tmp_path), 0, graph_mode='CPU')
  assert torch.equal(ds.node_time, graph['node_time'][ds.node_map()])
  assert ds.edge_time is None


def test_version_1_partition_still_loads(tmp_path):
  graph = homo_graph()
  RandomPartitioner(
    str(tmp_path), 2, NUM_NODES, graph['edge_index'], seed=0, progress=False
  ).partition()
  meta_path = tmp_path / 'META.json'
  meta = json.loads(meta_path.read_text())
  meta['version'] = 1  # what version 1 wrote: no times, no time fields
  for key in ('node_time', 'edge_time'):
    meta.pop(key, None)
  meta_path.write_text(json.dumps(meta))
  ds = glt.distributed.DistDataset().load(str(tmp_path), 0, graph_mode='CPU')
  assert ds.node_time is None and ds.edge_time is None and ds.graph is not None
  # Times added to it afterwards make it a version 2 partition.
  glt.partition.add_partition_times(
    str(tmp_path), node_time=graph['node_time'], edge_time=graph['edge_time']
  )
  assert json.loads(meta_path.read_text())['version'] == 2
  ds = glt.distributed.DistDataset().load(str(tmp_path), 0, graph_mode='CPU')
  assert torch.equal(ds.node_time, graph['node_time'])
  assert torch.equal(ds.edge_time, graph['edge_time'])
  with pytest.raises(ValueError, match='edge_time has 399 entries, expected 400'):
    glt.partition.add_partition_times(str(tmp_path), edge_time=graph['edge_time'][1:])


def test_added_times_follow_a_range_book(tmp_path):
  graph = homo_graph()
  RandomPartitioner(
    str(tmp_path), 2, NUM_NODES, graph['edge_index'], book='range', seed=0, progress=False
  ).partition()
  glt.partition.add_partition_times(str(tmp_path), node_time=graph['node_time'])
  ds = glt.distributed.DistDataset().load(str(tmp_path), 1, graph_mode='CPU')
  assert torch.equal(ds.node_time, graph['node_time'][ds.node_map()])


def test_bad_partition_times_are_named(tmp_path):
  graph = homo_graph()
  with pytest.raises(ValueError, match='node_time .*has 59 rows for 60 nodes'):
    RandomPartitioner(
      str(tmp_path), 2, NUM_NODES, graph['edge_index'], node_time=graph['node_time'][:-1]
    )
  with pytest.raises(ValueError, match='NaN'):
    RandomPartitioner(
      str(tmp_path), 2, NUM_NODES, graph['edge_index'],
      edge_time=torch.full((NUM_EDGES,), float('nan')),
    )  # fmt: skip
  RandomPartitioner(
    str(tmp_path), 2, NUM_NODES, graph['edge_index'], node_time=graph['node_time'], seed=0,
    progress=False,
  ).partition()  # fmt: skip
  from graphlearn_torch.partition.npy import write_npy

  write_npy(str(tmp_path / 'node_time.npy'), graph['node_time'][:-1])  # truncated behind META
  with pytest.raises(Exception, match='node_time.npy'):
    glt.distributed.DistDataset().load(str(tmp_path), 0, graph_mode='CPU')


def run_temporal_client(rank, port, root, results):
  r"""A server-client client: temporal batches sampled by the servers equal
  the single-process sampler's."""
  dist = glt.distributed
  try:
    dist.init_client(2, 2, rank, '127.0.0.1', port, request_timeout=60)
    graph = homo_graph()
    local = local_dataset(graph, hetero=False)
    seeds = torch.arange(rank, NUM_NODES, 4)
    input_time = torch.randint(0, 30, (seeds.numel(),))
    options = dist.RemoteDistSamplingWorkerOptions(num_workers=1, prefetch_size=2, rpc_timeout=60)
    loader = dist.DistNeighborLoader(
      None, [-1, -1], seeds, batch_size=4, input_time=input_time, time_attr='edge_time',
      worker_options=options,
    )  # fmt: skip
    what = 'server-client, edge time'
    batches = check_batches(loader, local, [-1, -1], seeds, input_time, what, time_attr='edge_time')
    results.put(('client', rank, 'ok', batches, batches))
  except BaseException:
    results.put(('client', rank, traceback.format_exc(), 0, 0))
  finally:
    dist.shutdown_client()


def test_server_client_temporal_equals_one_process(tmp_path):
  from test_server_client import spawn_job

  partition(str(tmp_path), hetero=False)
  reports, procs = spawn_job(str(tmp_path), run_temporal_client)
  for role, rank, status, batches, _ in sorted(reports):
    assert status == 'ok', f'{role} {rank}:\n{status}'
    assert role == 'server' or batches == 4
  assert all(p.exitcode == 0 for p in procs), [p.exitcode for p in procs]
