"""Host syncs of a batch sampled on the GPU: the inducer draws every hop of
a batch in one call, its frontiers, sizes and checks kept on the device, so
the batch stops the GPU once, at its end (to learn how many nodes and edges
it holds); a loader's batch once more, to read the checks of its feature
and label gathers. Counted with torch's sync debug mode, which warns at every
synchronizing CUDA call (a scalar read, a copy to the host), ours included.
Needs a GPU and the CUDA kernels."""

import collections
import warnings
from typing import Callable, List

import pytest
import torch
from conftest import random_edges, said_by_the_library
from torch_geometric.data import Data

from graphlearn_torch._ext import cuda_kernels_available
from graphlearn_torch.data import Dataset
from graphlearn_torch.loader import NeighborLoader
from graphlearn_torch.sampler import NeighborSampler, NodeSamplerInput
from graphlearn_torch.sampler.whole_batch import CUDA_GRAPHS_ENV
from graphlearn_torch.utils.device import batch_to_device

pytestmark = pytest.mark.skipif(
  not cuda_kernels_available(), reason='needs a GPU and a build with the CUDA kernels'
)


def host_syncs(fn: Callable[[], object]) -> List[warnings.WarningMessage]:
  r"""The synchronizing CUDA calls ``fn`` makes, one warning each."""
  torch.cuda.synchronize()
  with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter('always')
    torch.cuda.set_sync_debug_mode('warn')
    try:
      fn()
    finally:
      torch.cuda.set_sync_debug_mode('default')
  return [w for w in caught if 'synchronizing' in str(w.message)]


@pytest.fixture(scope='module', autouse=True)
def sync_debug_mode_started():
  r"""The debug mode switched on and off once before any count: its first
  switch reports a sync of torch's own."""
  host_syncs(lambda: None)


@pytest.mark.parametrize('graphs', ['1', '0'], ids=['cuda-graphs', 'kernel-by-kernel'])
@pytest.mark.parametrize('mode', ['CUDA', 'ZERO_COPY'])
@pytest.mark.parametrize('fanout', [[10, 5, 5], [4, 4]])
def test_a_sampled_batch_syncs_once(monkeypatch, graphs, mode, fanout):
  monkeypatch.setenv(CUDA_GRAPHS_ENV, graphs)
  num_nodes = 2000
  ds = Dataset(edge_dir='in')
  ds.init_graph(random_edges(num_nodes, num_nodes, 20_000, seed=5), graph_mode=mode)
  sampler = NeighborSampler(ds.graph, fanout, device=torch.device('cuda', 0), edge_dir='in', seed=1)
  # As a loader gives them: a batch of the CPU's seed ids.
  seeds = torch.randperm(num_nodes, generator=torch.Generator().manual_seed(2))[:256]
  for _ in range(2):  # warm-up: placement, allocations, the batch's CUDA graph
    sampler.sample_from_nodes(NodeSamplerInput(seeds))
  out = None

  def batch():
    nonlocal out
    out = sampler.sample_from_nodes(NodeSamplerInput(seeds))

  syncs = host_syncs(batch)
  assert out.node.numel() > seeds.numel()  # the batch grew past its seeds
  where = collections.Counter(f'{w.filename}:{w.lineno}' for w in syncs)
  assert len(syncs) <= 1, f'{len(syncs)} host syncs in a {len(fanout)}-hop batch, at: {dict(where)}'


@pytest.mark.parametrize('kind', ['temporal', 'disjoint'])
@pytest.mark.parametrize('fanout', [[10, 5, 5], [4, 4]])
def test_a_temporal_or_disjoint_batch_syncs_once_a_hop(kind, fanout):
  """Temporal and disjoint batches are drawn hop by hop: each hop in its
  seeds' time windows and keyed into their subgraphs by the inducer in one
  call (sample_induce_next), which stops the GPU once."""
  num_nodes = 2000
  ds = Dataset(edge_dir='in')
  ds.init_graph(random_edges(num_nodes, num_nodes, 20_000, seed=5), graph_mode='CUDA')
  g = torch.Generator().manual_seed(3)
  if kind == 'temporal':
    options = dict(node_time=torch.randint(0, 100, (num_nodes,), generator=g))
  else:
    options = dict(disjoint=True)
  cuda = torch.device('cuda', 0)
  sampler = NeighborSampler(ds.graph, fanout, device=cuda, edge_dir='in', seed=1, **options)
  seeds = torch.randperm(num_nodes, generator=g)[:256]
  for _ in range(2):  # warm-up: placement, allocations
    sampler.sample_from_nodes(NodeSamplerInput(seeds))
  out = []
  syncs = host_syncs(lambda: out.append(sampler.sample_from_nodes(NodeSamplerInput(seeds))))
  assert out[0].node.numel() > seeds.numel()
  where = collections.Counter(f'{w.filename}:{w.lineno}' for w in syncs)
  assert len(syncs) <= len(fanout), f'{len(syncs)} host syncs in a {kind} batch, at: {dict(where)}'


@pytest.mark.parametrize('graphs', ['1', '0'], ids=['cuda-graphs', 'kernel-by-kernel'])
def test_a_launched_batch_syncs_at_its_result_alone(monkeypatch, graphs):
  """launch_from_nodes starts a batch without waiting for the GPU; its
  result waits once."""
  monkeypatch.setenv(CUDA_GRAPHS_ENV, graphs)
  num_nodes = 2000
  ds = Dataset(edge_dir='in')
  ds.init_graph(random_edges(num_nodes, num_nodes, 20_000, seed=5), graph_mode='CUDA')
  sampler = NeighborSampler(
    ds.graph, [10, 5], device=torch.device('cuda', 0), edge_dir='in', seed=1
  )
  seeds = torch.randperm(num_nodes, generator=torch.Generator().manual_seed(2))[:256]
  for _ in range(2):  # warm-up: placement, allocations, the batch's CUDA graph
    sampler.launch_from_nodes(NodeSamplerInput(seeds)).result()
  launched = []
  syncs = host_syncs(lambda: launched.append(sampler.launch_from_nodes(NodeSamplerInput(seeds))))
  assert not syncs, [f'{w.filename}:{w.lineno}' for w in syncs]
  out = []
  syncs = host_syncs(lambda: out.append(launched[0].result()))
  assert len(syncs) <= 1, [f'{w.filename}:{w.lineno}' for w in syncs]
  assert out[0].node.numel() > seeds.numel()


@pytest.mark.parametrize('mode', ['CUDA', 'ZERO_COPY'])
def test_a_loader_batch_syncs_at_its_sampling_and_its_gathers_checks(mode):
  """A NeighborLoader batch on the GPU with features (a fifth of the rows in
  GPU memory) and labels: the sampler's one sync, and one more that reads
  the checks of all its gathers; the labels are gathered on the GPU, and
  the seed positions go there without a sync."""
  num_nodes = 2000
  ds = Dataset(edge_dir='in')
  ds.init_graph(random_edges(num_nodes, num_nodes, 20_000, seed=5), graph_mode=mode)
  ds.init_node_features(torch.randn(num_nodes, 16), split_ratio=0.2, with_gpu=True)
  ds.init_node_labels(torch.arange(num_nodes))
  loader = NeighborLoader(
    ds, [10, 5], torch.arange(num_nodes), batch_size=256, shuffle=True, device='cuda'
  )
  batches = iter(loader)
  # warm-up: placement, allocations, the batch's CUDA graph in each of the
  # two inducers that take turns (a batch is launched before the one before
  # it is collated)
  for _ in range(4):
    next(batches)
  out = None

  def batch():
    nonlocal out
    out = next(batches)

  syncs = host_syncs(batch)
  assert out.y.is_cuda and torch.equal(out.y, out.n_id)
  where = collections.Counter(f'{w.filename}:{w.lineno}' for w in syncs)
  assert len(syncs) <= 2, f'{len(syncs)} host syncs in a loader batch, at: {dict(where)}'


@pytest.mark.parametrize('num_types', [1, 2])
def test_a_hop_of_given_neighbors_syncs_once(num_types):
  """The CUDA inducer's induce_next (a hop drawn elsewhere: over RPC, or
  temporal): its inputs' checks and its new nodes' count are read at once,
  with the table sizes; a bad hop is still named, and forgotten."""
  from graphlearn_torch._ext import ops

  cuda = torch.device('cuda', 0)
  inducer = ops.CudaInducer(num_types, 0)
  g = torch.Generator().manual_seed(3)
  seeds = [torch.randint(0, 1000, (64,), generator=g).to(cuda) for _ in range(num_types)]
  frontier = inducer.init_nodes(seeds)
  nums = [torch.randint(0, 8, (f.numel(),), generator=g).to(cuda) for f in frontier]
  nbrs = [torch.randint(0, 5000, (int(n.sum()),), generator=g).to(cuda) for n in nums]
  types = list(range(num_types))
  nbr_types = [num_types - 1 - t for t in types]
  warm = ops.CudaInducer(num_types, 0)  # allocations of a first hop
  warm.induce_next(types, nbr_types, warm.init_nodes(seeds), nbrs, nums)
  hop = []
  syncs = host_syncs(
    lambda: hop.append(inducer.induce_next(types, nbr_types, frontier, nbrs, nums))
  )
  where = collections.Counter(f'{w.filename}:{w.lineno}' for w in syncs)
  assert len(syncs) <= 1, f'{len(syncs)} host syncs in a hop, at: {dict(where)}'
  cpu = ops.Inducer(num_types, [])
  cpu_frontier = cpu.init_nodes([s.cpu() for s in seeds])
  host = ([n.cpu() for n in nbrs], [n.cpu() for n in nums])
  expected = cpu.induce_next(types, nbr_types, cpu_frontier, *host)
  assert [[t.cpu().tolist() for t in part] for part in hop[0]] == [
    [t.tolist() for t in part] for part in expected
  ]
  one = torch.tensor([1], device=cuda)
  with pytest.raises(ValueError, match='source node 123456789 was not seen'):
    inducer.induce_next([0], [0], [torch.tensor([123456789], device=cuda)], [one], [one])
  assert inducer.local_ids(0, frontier[0]).eq(-1).all()


def test_tensors_go_to_the_host_with_one_sync():
  """A request's pieces for peers over RPC leave the GPU together."""
  from graphlearn_torch.utils.device import to_host_at_once

  tensors = [torch.arange(10, device='cuda'), torch.rand(5, device='cuda'), torch.arange(3)]
  out = []
  syncs = host_syncs(lambda: out.extend(to_host_at_once(tensors)))
  assert len(syncs) == 1, [f'{w.filename}:{w.lineno}' for w in syncs]
  assert all(t.is_cpu for t in out)
  assert all(torch.equal(o, t.cpu()) for o, t in zip(out, tensors))


def test_a_book_groups_gpu_ids_with_one_sync():
  """A hop's seeds grouped by owner for peers over RPC: one sync, the
  kernel's checks; the group sizes stay on the GPU, to be read with the
  pieces that go out (the test above)."""
  from graphlearn_torch.partition import GLTPartitionBook

  book = GLTPartitionBook(torch.randint(0, 3, (100,), generator=torch.Generator().manual_seed(0)))
  cuda = torch.device('cuda', 0)
  on_gpu = book.lookup_on(cuda)
  ids = torch.randint(0, 100, (500,), generator=torch.Generator().manual_seed(1)).to(cuda)
  on_gpu.grouped(ids, 3)  # warm-up
  out = []
  syncs = host_syncs(lambda: out.append(on_gpu.grouped(ids, 3)))
  assert len(syncs) <= 1, [f'{w.filename}:{w.lineno}' for w in syncs]
  for got, want in zip(out[0], book.grouped(ids.cpu(), 3)):
    assert torch.equal(got.cpu(), want)


def test_a_hop_over_rpc_is_stitched_on_the_gpu_without_a_sync():
  """A hop's pieces, one drawn on the GPU and one from a peer (on the
  host), stitched into seed order on the GPU: as the op stitches them,
  with no host sync."""
  from test_stitch import random_pieces

  from graphlearn_torch.distributed.sampling.peer_requests import stitched_on_gpu

  cuda = torch.device('cuda', 0)
  parts = random_pieces(3000, 2, seed=0, with_edge=True)
  want = stitched_on_gpu(3000, parts, True, torch.device('cpu'))
  parts[0] = (parts[0][0], parts[0][1].to(cuda))  # drawn here
  stitched_on_gpu(3000, parts, True, cuda)  # warm-up
  out = []
  syncs = host_syncs(lambda: out.append(stitched_on_gpu(3000, parts, True, cuda)))
  assert not syncs, [f'{w.filename}:{w.lineno}' for w in syncs]
  got = out[0]
  for field in ('nbr', 'nbr_num', 'edge'):
    assert getattr(got, field).is_cuda
    assert torch.equal(getattr(got, field).cpu(), getattr(want, field))


def test_rows_from_peers_are_placed_on_the_gpu_without_a_sync():
  """Feature rows peers sent (on the host) put in their places among rows
  gathered on the GPU: as the scatter_rows_ op puts them, with no host sync."""
  from test_placed_rows import random_pieces

  from graphlearn_torch.distributed.data.feature import placed_on_gpu

  cuda = torch.device('cuda', 0)
  pieces = random_pieces(5000, 100, 2, torch.float32, seed=0)
  want = placed_on_gpu(torch.zeros(5000, 100), pieces)
  out = torch.zeros(5000, 100, device=cuda)
  placed_on_gpu(out.clone(), pieces)  # warm-up
  syncs = host_syncs(lambda: placed_on_gpu(out, pieces))
  assert not syncs, [f'{w.filename}:{w.lineno}' for w in syncs]
  assert torch.equal(out.cpu(), want)


def test_a_range_book_reads_gpu_ids_once():
  from graphlearn_torch.partition import RangePartitionBook

  book = RangePartitionBook([(0, 40), (40, 100)])
  ids = torch.randint(0, 100, (500,), device='cuda')
  book[ids]  # its range ends placed on the GPU once
  syncs = host_syncs(lambda: book[ids])
  assert len(syncs) <= 1, [f'{w.filename}:{w.lineno}' for w in syncs]
  assert torch.equal(book[ids].cpu(), (ids >= 40).long().cpu())


def test_a_batch_from_host_memory_goes_to_the_gpu_with_one_sync():
  """A batch from a channel (host memory) moves to the GPU with one sync
  for all its host tensors, nested ones too; one already there with none."""
  host = Data(
    x=torch.randn(100, 8), edge_index=torch.randint(0, 100, (2, 300)), y=[torch.arange(100)]
  )
  expected = {'x': host.x.clone(), 'edge_index': host.edge_index.clone(), 'y': host.y[0].clone()}
  moved = []
  syncs = host_syncs(lambda: moved.append(batch_to_device(host, torch.device('cuda', 0))))
  assert len(syncs) == 1
  batch = moved[0]
  assert batch.x.is_cuda and batch.edge_index.is_cuda and batch.y[0].is_cuda
  assert torch.equal(batch.x.cpu(), expected['x']) and torch.equal(batch.y[0].cpu(), expected['y'])
  assert torch.equal(batch.edge_index.cpu(), expected['edge_index'])
  assert not host_syncs(lambda: batch_to_device(batch, torch.device('cuda', 0)))


@pytest.mark.parametrize('graphs', ['1', '0'], ids=['cuda-graphs', 'kernel-by-kernel'])
def test_a_batch_over_a_hosts_partitions_syncs_once(monkeypatch, graphs):
  """The distributed sampler's batch where a host's partitions are all on
  its GPU: each seed drawn from its partition's topology (found in the book
  on the GPU), every hop in one call, one sync."""
  from test_partitioned_batch import host_partitions, whole_batch

  from graphlearn_torch.sampler.schema import RandomStream

  monkeypatch.setenv(CUDA_GRAPHS_ENV, graphs)
  num_nodes = 2000
  ds = Dataset(edge_dir='in')
  ds.init_graph(random_edges(num_nodes, num_nodes, 20_000, seed=5), graph_mode='CUDA')
  cuda = torch.device('cuda', 0)
  sampler = NeighborSampler(ds.graph, [10, 5, 5], device=cuda, edge_dir='in', seed=1)
  parts = host_partitions(sampler, 2)
  parts.books = {t: b.to(cuda) for t, b in parts.books.items()}
  ntype = sampler.schema.node_types[0]
  seeds = {ntype: torch.randperm(num_nodes, device=cuda)[:256]}
  for i in range(2):  # warm-up: allocations, the batch's CUDA graph
    whole_batch(sampler.engine, seeds, parts, RandomStream(i))
  out = None

  def batch():
    nonlocal out
    out = whole_batch(sampler.engine, seeds, parts, RandomStream(2))

  syncs = host_syncs(batch)
  assert out.node[ntype].numel() > 256
  where = collections.Counter(f'{w.filename}:{w.lineno}' for w in syncs)
  assert len(syncs) <= 1, f'{len(syncs)} host syncs in a 3-hop batch, at: {dict(where)}'


def count_dist_batch_syncs(rank, port, sampling_port, root, results, share='1'):
  r"""Worker ``rank`` of a 2-partition group on one GPU ('ZERO_COPY', both
  partitions read by it, or each its own with the other over RPC where
  ``share`` is '0'); rank 0 counts the syncs of a node batch of its
  ``DistNeighborSampler`` after two warm-up batches of the same shape, then
  of the batch made a message with its features and labels."""
  import asyncio

  from test_dist_sampling import share_host_partitions

  import graphlearn_torch as glt
  from graphlearn_torch.distributed.sampling.neighbor_sampler import DistNeighborSampler
  from graphlearn_torch.distributed.sources.messages import MessageSampler
  from graphlearn_torch.sampler.base import SamplingType
  from graphlearn_torch.sampler.schema import RandomStream

  dist = glt.distributed
  said = said_by_the_library()
  share_host_partitions(share, rank, 2)
  try:
    dist.init_worker_group(2, rank, 'trainer')
    load = dict(graph_mode='ZERO_COPY', feature_with_gpu=True, device=0, split_ratio=0.5)
    ds = dist.DistDataset(edge_dir='out').load(root, rank, **load)
    dist.init_rpc('127.0.0.1', sampling_port, rpc_timeout=60)
    sampler = DistNeighborSampler(ds, [10, 5], device=torch.device('cuda', 0), seed=1)
    loop = asyncio.new_event_loop()
    seeds = ds.train_idx[:64]

    def batch(i):
      inputs = NodeSamplerInput(seeds)
      return loop.run_until_complete(sampler.sample(SamplingType.NODE, inputs, RandomStream(i)))

    messages = MessageSampler(sampler, collect_features=True, on_device=True)

    def message(i):
      inputs = NodeSamplerInput(seeds)
      return loop.run_until_complete(
        messages.message(SamplingType.NODE, inputs, None, RandomStream(i))
      )

    count = None
    if rank == 0:
      host_syncs(lambda: None)  # the debug mode's first switch syncs on its own
      for i in range(2):
        batch(i)
        message(i)
      where = []
      for run in (batch, message):
        syncs = host_syncs(lambda run=run: run(2))
        where.append(sorted({f'{w.filename}:{w.lineno}' for w in syncs}))
        count = (count or ()) + (len(syncs),)
      count = (count, where, said.messages)
    dist.shutdown_rpc()
    results.put((rank, 'ok', count))
  except Exception:
    import traceback

    results.put((rank, traceback.format_exc(), None))


@pytest.mark.slow  # spawned processes
def test_a_distributed_batch_over_a_hosts_partitions_syncs_once(tmp_path):
  """Both partitions of a worker group on this host's GPU: a node batch of
  the distributed sampler is drawn over them in one call and syncs once;
  with its features and labels, gathered on the GPU from both partitions'
  tables in one call, twice, as a single machine's loader batch."""
  from test_dist_sampling import SPAWN, free_port, partition, run_spawned

  partition(str(tmp_path), 2, hetero=False)
  results = SPAWN.Queue()
  ports = (free_port(), free_port())
  procs = [
    SPAWN.Process(target=count_dist_batch_syncs, args=(r, *ports, str(tmp_path), results))
    for r in range(2)
  ]
  reports = sorted(run_spawned(procs, results, 180))
  for rank, status, _ in reports:
    assert status == 'ok', f'rank {rank}:\n{status}'
  (batch_syncs, message_syncs), where, said = reports[0][2]
  # the paths the library says it takes: the one-call ones, no fallback
  assert "partition 0 draws its batches on cuda:0 in one call over this host's 2 partitions" in said
  assert 'features of ids on cuda:0: gathered there in one call from partitions [0, 1]' in said
  assert batch_syncs <= 1, f'{batch_syncs} host syncs in a 2-hop distributed batch, at: {where[0]}'
  # the batch's, and the feature and label gathers' checks (as one machine's)
  assert message_syncs <= 2, f'{message_syncs} host syncs in a message, at: {where[1]}'


@pytest.mark.slow  # spawned processes
def test_a_distributed_batch_with_a_partition_over_rpc_syncs_once_a_hop(tmp_path):
  """The other partition over RPC (as on another host): the batch's seeds
  are grouped on the host, where they come from, and each hop's new nodes
  come there with the hop's sizes (the hop's one sync), so the next hop's
  seeds for the peer go out without another; this partition's seeds are
  drawn by the inducer in the pass that adds the peer's answer (hop_pieces).
  With features, the peer is asked for its rows by the batch's ids on the
  host, where the hops brought them (none), the rows are put in place on the
  GPU (none), and the gathers' checks are read (one)."""
  from test_dist_sampling import SPAWN, free_port, partition, run_spawned

  partition(str(tmp_path), 2, hetero=False)
  results = SPAWN.Queue()
  ports = (free_port(), free_port())
  procs = [
    SPAWN.Process(target=count_dist_batch_syncs, args=(r, *ports, str(tmp_path), results, '0'))
    for r in range(2)
  ]
  reports = sorted(run_spawned(procs, results, 180))
  for rank, status, _ in reports:
    assert status == 'ok', f'rank {rank}:\n{status}'
  (batch_syncs, message_syncs), where, said = reports[0][2]
  assert (
    'features of ids on cuda:0: gathered there in one call from partitions [0], the others over RPC'
    in said
  )
  assert 'the inducer draws those held here and adds the answers in one pass a hop' in said
  hops = 2
  assert batch_syncs <= hops, f'{batch_syncs} host syncs in a 2-hop batch, at: {where[0]}'
  assert message_syncs <= hops + 1, f'{message_syncs} host syncs in a message, at: {where[1]}'
