"""Host-shared tensors, topologies and feature tables: mapped by handle from
other processes of this host (spawned, with timeouts, reaped), refused when
the handle does not name them, and used in place by the partitions of a
distributed group that run on one host, which watch each other's
processes."""

import dataclasses
import gc
import multiprocessing
import os
import pickle
import traceback

import pytest
import torch
from conftest import said_by_the_library

import graphlearn_torch as glt
from graphlearn_torch.data.feature import FeatureHostHandle
from graphlearn_torch.partition.partition_book import OffsetId2Index
from graphlearn_torch.utils.host_share import (
  HostSharedTensor,
  HostShareError,
  ProcessWatch,
  host_sharing_available,
)

SPAWN = multiprocessing.get_context('spawn')
TIMEOUT_S = 120

pytestmark = [
  pytest.mark.skipif(not host_sharing_available(), reason='needs Linux memfds'),
  pytest.mark.slow,  # spawned processes: left out of make test-fast
]


def run_child(target, *args):
  r"""Runs ``target(*args, queue)`` in a spawned process; returns what it
  put on the queue (a traceback string fails the test)."""
  queue = SPAWN.Queue()
  proc = SPAWN.Process(target=target, args=(*args, queue))
  proc.start()
  try:
    result = queue.get(timeout=TIMEOUT_S)
  finally:
    proc.join(TIMEOUT_S / 4)
    if proc.is_alive():
      proc.kill()
      proc.join()
  if isinstance(result, str):
    pytest.fail(result)
  return result


def open_and_write(handle, queue):
  try:
    shared = HostSharedTensor.open(handle)
    total = shared.tensor.sum().item()
    shared.tensor[0, 0] = 42.0  # the holder sees it
    queue.put((total, shared.handle.pid != handle.pid))
  except Exception:
    queue.put(traceback.format_exc())


def test_a_tensor_is_mapped_by_another_process():
  t = torch.randn(1000, 7)
  shared = HostSharedTensor.copy_of(t)
  assert torch.equal(shared.tensor, t) and shared.tensor.dtype == t.dtype
  total, own_handle = run_child(open_and_write, shared.handle)
  assert total == pytest.approx(t.sum().item(), rel=1e-5)
  assert own_handle, 'the mapping process holds a descriptor of its own to hand on'
  assert shared.tensor[0, 0].item() == 42.0


@pytest.mark.parametrize('tensor', [torch.empty(0, 3), torch.arange(5), torch.tensor(7)])
def test_odd_shapes(tensor):
  shared = HostSharedTensor.copy_of(tensor)
  again = HostSharedTensor.open(shared.handle)
  assert again.tensor.shape == tensor.shape and torch.equal(again.tensor, tensor)


def test_handles_that_do_not_name_the_tensor_are_refused():
  shared = HostSharedTensor.copy_of(torch.arange(100.0))
  for bad in (
    dataclasses.replace(shared.handle, token=bytes(16)),  # another pid namespace's fd
    dataclasses.replace(shared.handle, fd=0),  # not a memfd
    dataclasses.replace(shared.handle, shape=(50,)),  # not its size
    dataclasses.replace(shared.handle, boot_id='another host'),
    dataclasses.replace(shared.handle, pid=2**22 + 1),  # no such process
  ):
    with pytest.raises(HostShareError):
      HostSharedTensor.open(bad)


def test_the_descriptor_closes_with_its_holder():
  shared = HostSharedTensor.copy_of(torch.arange(10))
  handle, tensor = shared.handle, shared.tensor
  assert os.path.exists(f'/proc/self/fd/{handle.fd}')
  del shared
  gc.collect()
  assert not os.path.exists(f'/proc/self/fd/{handle.fd}')
  assert torch.equal(tensor, torch.arange(10)), 'the mapping outlives the descriptor'
  with pytest.raises(HostShareError):
    HostSharedTensor.open(handle)


@pytest.mark.parametrize('map_kind', ['rows', 'id2index', 'offset'])
def test_feature_from_host_handle(map_kind):
  g = torch.Generator().manual_seed(0)
  table = torch.randn(50, 4, generator=g)
  id2index = {
    'rows': None,
    'id2index': torch.randperm(50, generator=g),
    'offset': OffsetId2Index(100),
  }[map_kind]
  num_ids = 150 if map_kind == 'offset' else 50
  first_id = 100 if map_kind == 'offset' else 0
  feature = glt.data.Feature(table, id2index)
  handle = feature.host_share()
  assert isinstance(handle, FeatureHostHandle)
  assert feature.host_share() == handle, 'moved once'
  peer = glt.data.Feature.from_host_handle(handle)
  ids = torch.randint(first_id, num_ids, (200,), generator=g)
  expected = table[ids - first_id] if id2index is None or map_kind == 'offset' else None
  if map_kind == 'id2index':
    expected = table[id2index[ids]]
  assert torch.equal(feature.cpu_get(ids), expected)
  assert torch.equal(peer.cpu_get(ids), expected)
  # with the rows of another partition, in one pass, as DistFeature gathers them
  parts = torch.randint(0, 2, (200,), generator=g)
  out = feature.cpu_get_partitioned([None, peer], parts, ids)
  assert torch.equal(out[parts == 1], expected[parts == 1])


def test_a_feature_shared_on_the_host_keeps_its_holders_placement():
  """A peer of this host maps a feature table as its holder places it (its
  share of GPU rows, GPU and groups), not as a plain host table: a gather
  on that GPU then reads the holder's GPU parts (test_gpu_data_path)."""
  g = torch.Generator().manual_seed(0)
  table, id2index = torch.randn(40, 3, generator=g), torch.randperm(40, generator=g)
  feature = glt.data.Feature(table, id2index, split_ratio=0.25, device=0, with_gpu=True)
  handle = feature.share_on_host(None)
  assert isinstance(handle.tables, FeatureHostHandle)
  peer = glt.data.Feature.from_ipc_handle(handle)
  assert (peer.split_ratio, peer.device, peer.with_gpu) == (0.25, 0, feature.with_gpu)
  ids = torch.randint(0, 40, (100,), generator=g)
  assert torch.equal(peer[ids].cpu(), table[id2index[ids]])


def test_a_peer_sampling_on_the_cpu_maps_a_holders_graphs_as_host_topologies():
  """A peer of this host that samples on the CPU maps a holder's graphs
  (a 'CUDA' one's too) as their host-shared topologies, read in place."""
  from graphlearn_torch.distributed.sampling.host_peers import map_topologies, share_graphs

  topo = small_topology(weighted=True)
  graphs = {('n', 'e', 'n'): glt.data.Graph(topo, mode='CPU'), ('n', 'f', 'n'): None}
  graphs[('n', 'f', 'n')] = glt.data.Graph(small_topology(weighted=False), mode='CUDA', device=0)
  mapped = map_topologies(share_graphs(graphs, None), None)
  for etype, graph in graphs.items():
    got = mapped[etype]
    assert got.indices.device.type == 'cpu'
    assert torch.equal(got.indptr, graph.topo.indptr)
    assert torch.equal(got.indices, graph.topo.indices)
    assert torch.equal(got.edge_ids, graph.topo.edge_ids)


def rows_of_pickled_feature(feature, ids, queue):
  try:
    # a Feature pickled to a process arrives host-shared, and hands its
    # table on by a handle of its own
    handle = feature.host_share()
    queue.put((feature.cpu_get(ids).tolist(), handle.table.pid == os.getpid()))
  except Exception:
    queue.put(traceback.format_exc())


def test_a_pickled_feature_is_host_shared():
  table = torch.randn(40, 5)
  feature = glt.data.Feature(table, torch.arange(39, -1, -1))
  ids = torch.tensor([0, 39, 7, 7])
  rows, own = run_child(rows_of_pickled_feature, feature, ids)
  assert torch.equal(torch.tensor(rows), table[39 - ids]) and own


# -- topologies ----------------------------------------------------------------


def small_topology(weighted: bool) -> glt.data.Topology:
  g = torch.Generator().manual_seed(3)
  edges = torch.randint(0, 40, (2, 300), generator=g)
  weights = torch.rand(300, generator=g) if weighted else None
  return glt.data.Topology(edges, edge_weights=weights, size=(45, 40))


def same_topology(a: glt.data.Topology, b: glt.data.Topology) -> bool:
  return (a.layout, a.row_count, a.col_count) == (b.layout, b.row_count, b.col_count) and all(
    (x is None and y is None) or torch.equal(x, y)
    for x, y in zip(
      (a.indptr, a.indices, a.edge_ids, a.edge_weights),
      (b.indptr, b.indices, b.edge_ids, b.edge_weights),
    )
  )


@pytest.mark.parametrize('weighted', [False, True])
def test_topology_from_host_handle(weighted):
  topo = small_topology(weighted)
  before = [t.clone() for t in (topo.indptr, topo.indices, topo.edge_ids)]
  handle = topo.host_share()
  assert topo.host_share() == handle, 'moved once'
  assert (handle.edge_weights is None) != weighted
  peer = glt.data.Topology.from_host_handle(handle)
  assert same_topology(peer, topo)
  assert all(torch.equal(a, b) for a, b in zip((peer.indptr, peer.indices, peer.edge_ids), before))
  topo.resize(num_rows=50)  # a new indptr: shared again, the rest as it was
  again = topo.host_share()
  assert again.indptr != handle.indptr and again.indices == handle.indices
  assert glt.data.Topology.from_host_handle(again).row_count == 50
  with pytest.raises(HostShareError):
    glt.data.Topology.from_host_handle(dataclasses.replace(handle, indices=handle.indptr))


def test_a_time_sorted_topology_shares_its_times():
  topo = small_topology(weighted=False)
  time = torch.randint(0, 9, (topo.edge_count,), generator=torch.Generator().manual_seed(2))
  sorted_copy = glt.data.temporal.time_sorted(topo, time)
  peer = glt.data.Topology.from_host_handle(sorted_copy.host_share())
  assert same_topology(peer, sorted_copy)
  assert torch.equal(peer.edge_time, sorted_copy.edge_time)
  assert torch.equal(peer.row_max_time, sorted_copy.row_max_time)


def topology_of_pickled_graph(graph, queue):
  try:
    # a Graph pickled to a process arrives host-shared, and hands its
    # topology on by handles of its own without a copy
    handle = graph.topo.host_share()
    topo = graph.topo
    queue.put(((topo.indptr.tolist(), topo.indices.tolist()), handle.pid == os.getpid()))
  except Exception:
    queue.put(traceback.format_exc())


def test_a_pickled_graph_is_host_shared():
  topo = small_topology(weighted=False)
  (indptr, indices), own = run_child(topology_of_pickled_graph, glt.data.Graph(topo, 'CPU'))
  assert indptr == topo.indptr.tolist() and indices == topo.indices.tolist() and own


def test_a_topology_pickles_without_its_descriptors():
  topo = small_topology(weighted=True)
  topo.host_share()
  again = pickle.loads(pickle.dumps(topo))
  assert same_topology(again, topo)


# -- watching processes -------------------------------------------------------


def wait_for_a_line(conn):
  conn.recv()


def test_a_watch_tells_when_a_process_exited():
  parent, child = SPAWN.Pipe()
  proc = SPAWN.Process(target=wait_for_a_line, args=(child,))
  proc.start()
  try:
    watch = ProcessWatch()
    watch.add(proc.pid, 'the test child')
    watch.check()  # alive: nothing to say
    parent.send('go')
    proc.join(TIMEOUT_S)
    assert proc.exitcode == 0
    with pytest.raises(RuntimeError, match='the test child exited'):
      watch.check()
  finally:
    if proc.is_alive():
      proc.kill()
      proc.join()
  with pytest.raises(HostShareError, match='cannot watch'):
    watch.add(proc.pid, 'reaped')


# -- partitions on one host ---------------------------------------------------


def in_place_neighbors_are_the_graphs(service, graph, rank) -> bool:
  r"""Whether all neighbors of the other partition's nodes, sampled here
  from its mapped topology, are the full graph's."""
  other = 1 - rank
  nodes = glt.partition.partition_book.owned_ids(service.dist_graph.node_pb, other)[:50]
  out = service.sample_one_hop(nodes, -1, None, with_edge=True, partition=other)
  src = torch.repeat_interleave(nodes, out.nbr_num)
  got = sorted(zip(src.tolist(), out.nbr.tolist(), out.edge.tolist()))
  pick = torch.isin(graph['src'], nodes)
  ids = torch.nonzero(pick).view(-1)
  want = sorted(zip(graph['src'][pick].tolist(), graph['dst'][pick].tolist(), ids.tolist()))
  return got == want


def host_partition(rank, port, root, share):
  r"""This rank's partition of ``root`` (one of 2 on this host, sharing
  with the other when ``share`` is '1') and its PartitionService."""
  from graphlearn_torch.distributed import PartitionService

  os.environ['GLT_SHARE_HOST_PARTITIONS'] = share
  dist = glt.distributed
  dist.init_worker_group(2, rank, 'trainer')
  dist.init_rpc('127.0.0.1', port, num_rpc_threads=2, rpc_timeout=60)
  # a share of GPU rows that a peer's mapped tables must keep (none on a CPU machine)
  ds = dist.DistDataset(edge_dir='out').load(root, rank, graph_mode='CPU', split_ratio=0.25)
  return ds, PartitionService(ds)


def feature_worker(rank, port, root, share, queue):
  dist = glt.distributed
  try:
    ds, service = host_partition(rank, port, root, share)
    graph = torch.load(os.path.join(root, 'full.pt'), weights_only=False)
    g = torch.Generator().manual_seed(rank)
    ids = torch.randint(0, graph['num_nodes'], (500,), generator=g)
    eids = torch.randint(0, graph['src'].numel(), (500,), generator=g)
    ok = torch.equal(service.node_feature.get(ids), graph['x'][ids]) and torch.equal(
      service.edge_feature.get(eids), graph['edge_attr'][eids]
    )
    peers = (
      sorted(service.host_peers.topologies),
      sorted(service.node_feature.host_peers),
      sorted(service.edge_feature.host_peers),
    )
    if service.host_peers.topologies:
      ok = ok and in_place_neighbors_are_the_graphs(service, graph, rank)
    placement = lambda f: (f.split_ratio, f.device, f.with_gpu)  # noqa: E731
    for peer in service.node_feature.host_peers.values():
      ok = ok and placement(peer) == placement(ds.node_features)
    dist.barrier()  # the peer is done reading this one's rows over RPC
    queue.put((rank, ok, peers))
  except Exception:
    queue.put((rank, traceback.format_exc(), None))
  finally:
    dist.shutdown_rpc(graceful=True, timeout=30)


def run_on_two_partitions(root: str, hetero: bool, worker, arg):
  r"""Partitions test_dist_sampling's graph in 2 under ``root`` and runs
  ``worker(rank, port, root, arg, queue)`` for both ranks; returns their
  reports in rank order."""
  from test_dist_sampling import free_port, partition, run_spawned

  partition(root, 2, hetero=hetero)
  queue = SPAWN.Queue()
  port = free_port()
  procs = [SPAWN.Process(target=worker, args=(r, port, root, arg, queue)) for r in range(2)]
  return sorted(run_spawned(procs, queue, TIMEOUT_S))


@pytest.mark.parametrize('share', ['1', '0'])
def test_partitions_on_one_host_share_topologies_and_rows(tmp_path, share):
  reports = run_on_two_partitions(str(tmp_path), False, feature_worker, share)
  for rank, ok, peers in reports:
    assert ok is True, f'rank {rank}:\n{ok}'
    other = [1 - rank]
    assert peers == ((other, other, other) if share == '1' else ([], [], []))


class Collected:
  r"""A channel that keeps what is sent into it."""

  def __init__(self):
    self.messages = []

  def send(self, msg):
    self.messages.append(msg)


def glt_sampler_messages(ds, fanout, seeds) -> list:
  r"""The batch of ``seeds`` as GLT's DistNeighborSampler returns it, and as
  it sends it into a channel (the same seed as one_call_worker's)."""
  channel = Collected()
  returned = glt.distributed.DistNeighborSampler(ds, fanout, with_edge=True, seed=5)
  sent = glt.distributed.DistNeighborSampler(ds, fanout, with_edge=True, seed=5, channel=channel)
  try:
    message = returned.sample_from_nodes(seeds, timeout=60)
    assert sent.sample_from_nodes(seeds, timeout=60) is None
    assert sent.wait_all(60)
  finally:
    returned.shutdown_loop()
    sent.shutdown_loop()
  return [message] + channel.messages


def one_call_worker(rank, port, root, hetero, queue):
  r"""Samples the same seeds with a sampler that draws each hop of both
  partitions in one call and with one that samples each partition's seeds
  apart and stitches them; reports whether the batches are equal."""
  dist = glt.distributed
  try:
    from graphlearn_torch.batch import SampledBatch, encode
    from graphlearn_torch.distributed import ConcurrentEventLoop
    from graphlearn_torch.distributed.sampling.neighbor_sampler import DistNeighborSampler
    from graphlearn_torch.sampler import NodeSamplerInput, SamplingType

    said = said_by_the_library()
    ds, service = host_partition(rank, port, root, '1')
    g = torch.Generator().manual_seed(rank)
    if hetero:
      seeds = NodeSamplerInput(torch.randint(0, 150, (90,), generator=g), 'user')
      fanout = {etype: [3, 2] for etype in ds.get_edge_types()}
    else:
      seeds = NodeSamplerInput(torch.randint(0, 300, (200,), generator=g))
      fanout = [4, 3, 2]
    batches, one_call_here = [], []
    loop = ConcurrentEventLoop(1)
    try:
      for one_call in (True, False):
        sampler = DistNeighborSampler(
          ds, fanout, with_edge=True, edge_dir='out', seed=5, service=service
        )
        one_call_here.append(service.samples_every_partition())
        service.draws_hops_in_one_call = one_call
        out = loop.run_task(sampler.sample(SamplingType.NODE, seeds), timeout=60)
        batches.append(encode(SampledBatch.from_output(out)))
    finally:
      loop.shutdown_loop()
    batches += glt_sampler_messages(ds, fanout, seeds)
    equal = [
      batch.keys() == batches[0].keys() and all(torch.equal(batches[0][k], batch[k]) for k in batch)
      for batch in batches[1:]
    ]
    dist.barrier()
    queue.put((rank, 'ok', (one_call_here, equal, len(batches[0]), said.messages)))
  except Exception:
    queue.put((rank, traceback.format_exc(), None))
  finally:
    dist.shutdown_rpc(graceful=True, timeout=30)


@pytest.mark.parametrize('hetero', [False, True])
def test_one_call_hops_give_the_stitched_pieces(tmp_path, hetero):
  for rank, status, found in run_on_two_partitions(str(tmp_path), hetero, one_call_worker, hetero):
    assert status == 'ok', f'rank {rank}:\n{status}'
    here, equal, num_fields, said = found
    assert here == [True, True], 'both partitions are on this host'
    # the stitched pieces, GLT's sampler's returned batch and its sent batch
    # are each the one-call batch
    assert equal == [True, True, True], f'rank {rank}: {equal}'
    assert num_fields > 4
    on_cpu = 'hop by hop on cpu (the partition samples on the CPU)'
    assert f'partition {rank} draws its batches {on_cpu}' in said, said
