"""The GPU data path: UnifiedTensor and Feature gathers (hot rows in GPU
memory, the rest read through UVA), the 'CUDA' and 'ZERO_COPY' graph modes,
loaders that sample on the GPU, and distributed sampling placed on GPUs.

Without a GPU and the CUDA kernels every GPU option must keep the CPU path
(with a log line) and give the CPU path's results; those tests run on every
machine. The tests marked ``gpu`` need a GPU and are skipped without one."""

import logging
import os

import pytest
import torch
from conftest import random_edges
from test_dist_sampling import FANOUT, SPAWN, check_homo_batch, free_port, partition, run_spawned
from test_neighbor_sampler import HOMO_E, HOMO_T, check_output

import graphlearn_torch as glt
from graphlearn_torch._ext import cuda_kernels_available
from graphlearn_torch.data import Dataset, Feature, UnifiedTensor, sort_by_in_degree
from graphlearn_torch.distributed.sources.sampling_process import worker_device
from graphlearn_torch.loader import LinkNeighborLoader, NeighborLoader, SubGraphLoader
from graphlearn_torch.sampler import NegativeSampling, NeighborSampler, NodeSamplerInput

GPU = cuda_kernels_available()
gpu = pytest.mark.skipif(not GPU, reason='needs a GPU and a build with the CUDA kernels')
cpu_only = pytest.mark.skipif(GPU, reason='checks the fallback of a machine without a GPU')
TIMEOUT_S = 180


def homo_dataset(graph_mode, num_nodes=60, num_edges=500, edge_dir='out', **feature_args):
  ei = random_edges(num_nodes, num_nodes, num_edges, seed=3)
  x = torch.randn(num_nodes, 5, generator=torch.Generator().manual_seed(1))
  ds = Dataset(edge_dir=edge_dir)
  ds.init_graph(ei, graph_mode=graph_mode, num_nodes=num_nodes)
  ds.init_node_features(x, **feature_args)
  ds.init_node_labels(torch.arange(num_nodes))
  return ds, ei, x


# -- UnifiedTensor and Feature ----------------------------------------------------------


def split_devices(num_rows, split_ratio):
  """The parts of a table with ``split_ratio`` of its rows on GPU 0."""
  hot = int(num_rows * split_ratio)
  return [hot, num_rows - hot], [0, -1]


@pytest.mark.parametrize('split_ratio', [0.0, 0.3, 1.0])
def test_unified_tensor_equals_index_select(split_ratio):
  table = torch.randn(100, 8)
  rows, devices = split_devices(100, split_ratio)
  parts = [p for p in torch.split(table, rows) if p.size(0)]
  devices = [d for d, n in zip(devices, rows) if n]
  unified = UnifiedTensor(0 if GPU else None)
  unified.init_from(parts, devices)
  ids = torch.tensor([0, 99, 29, 30, 31, 5, 5, 70])  # both sides of the split
  got = unified[ids.cuda() if GPU else ids]
  assert got.device.type == ('cuda' if GPU else 'cpu')
  assert torch.equal(got.cpu(), table[ids])
  assert unified.shape == table.shape
  id2index = torch.randperm(100)
  assert torch.equal(unified.gather(ids, id2index).cpu(), table[id2index[ids]])
  with pytest.raises(ValueError, match='id 100 is out of range'):
    unified[torch.tensor([1, 100])]


def test_unified_tensor_checks_its_parts():
  unified = UnifiedTensor(0 if GPU else None)
  with pytest.raises(ValueError, match='empty'):
    unified[torch.tensor([0])]
  unified.append_cpu_tensor(torch.randn(4, 3))
  with pytest.raises(ValueError, match='one width'):
    unified.append_cpu_tensor(torch.randn(4, 2))
  with pytest.raises(ValueError, match='2 tensors for 1 devices'):
    UnifiedTensor(None).init_from([torch.randn(2, 2)] * 2, [-1])


def test_unified_tensor_shares_its_parts():
  table = torch.randn(30, 4)
  unified = UnifiedTensor(0 if GPU else None)
  unified.init_from([table[:10], table[10:]], [0, -1])
  other = UnifiedTensor.new_from_ipc(unified.share_ipc(), 0 if GPU else None)
  ids = torch.randperm(30)
  assert torch.equal(other[ids].cpu(), table[ids])


@pytest.mark.parametrize('split_ratio', [0.0, 0.3, 1.0])
def test_feature_with_gpu_equals_index_select(split_ratio, caplog):
  table = torch.randn(50, 6)
  id2index = torch.randperm(50)
  caplog.set_level(logging.INFO)
  feature = Feature(table, id2index, split_ratio=split_ratio, device=0, with_gpu=True)
  assert feature.with_gpu == GPU
  if not GPU and split_ratio > 0:
    assert 'stays in host memory' in caplog.text
  ids = torch.tensor([3, 49, 0, 17, 17, 25])
  want = table[id2index[ids]]
  got = feature[ids.cuda() if GPU else ids]
  assert got.device.type == ('cuda' if GPU else 'cpu'), 'CUDA ids give CUDA rows'
  assert torch.equal(got.cpu(), want)
  assert torch.equal(feature.cpu_get(ids), want), 'the CPU path is unchanged'


@pytest.mark.parametrize('split_ratio', [0.0, 0.3, 1.0])
def test_hottest_rows_first_and_lookups_by_id(split_ratio):
  """``sort_func`` reorders the rows hottest first (the ones a GPU keeps)
  and lookups by node id still give each node its own row."""
  ds, ei, x = homo_dataset(
    'CPU', edge_dir='in', sort_func=sort_by_in_degree, split_ratio=split_ratio, with_gpu=True
  )
  feature = ds.node_features
  hot = int(60 * split_ratio)
  degree = torch.bincount(ei[1], minlength=60)
  first = torch.argsort(feature.id2index)[:hot]  # the nodes of the first rows
  rest = torch.argsort(feature.id2index)[hot:]
  if 0 < hot < 60:
    assert degree[first].min() >= degree[rest].max(), 'the hottest rows come first'
  ids = torch.randperm(60)
  assert torch.equal(feature[ids].cpu(), x[ids])
  assert torch.equal(feature.cpu_get(ids), x[ids])


# -- graph modes ------------------------------------------------------------------------


@cpu_only
@pytest.mark.parametrize('mode', ['ZERO_COPY', 'CUDA'])
def test_gpu_graph_modes_fall_back_to_the_cpu(mode, caplog):
  caplog.set_level(logging.INFO)
  ds, ei, _ = homo_dataset(mode)
  graph = ds.get_graph()
  assert graph.mode == 'CPU' and graph.requested_mode == mode
  assert graph.sampling_device == torch.device('cpu')
  assert f"graph mode '{mode}' needs a GPU" in caplog.text
  ds.place_on_gpu(0)  # nothing to place without a GPU
  cpu_ds, _, _ = homo_dataset('CPU')
  batches = [
    list(NeighborLoader(d, [3, 2], torch.arange(60), batch_size=16, device='cuda', seed=5))
    for d in (ds, cpu_ds)
  ]
  for got, want in zip(*batches):
    assert got.x.device.type == 'cpu'
    assert torch.equal(got.n_id, want.n_id) and torch.equal(got.edge_index, want.edge_index)


def mp_options(**kwargs):
  return glt.distributed.MpDistSamplingWorkerOptions(
    master_addr='127.0.0.1', master_port=free_port(), **kwargs
  )


@cpu_only
def test_worker_devices_fall_back_to_the_cpu(caplog):
  caplog.set_level(logging.INFO)
  options = mp_options(num_workers=2, worker_devices=['cuda:0'])
  assert worker_device(options, 1) is None
  assert 'sampling on the CPU' in caplog.text
  assert worker_device(mp_options(), 0) is None


@gpu
def test_worker_devices_are_taken_in_turn():
  options = mp_options(worker_devices=['cuda:0', 'cpu'])
  assert worker_device(options, 0) == torch.device('cuda', 0)
  assert worker_device(options, 1) is None


@gpu
@pytest.mark.parametrize('mode', ['CPU', 'ZERO_COPY', 'CUDA'])
@pytest.mark.parametrize('edge_dir', ['out', 'in'])
@pytest.mark.parametrize('fanout,replace', [([3, 2], False), ([-1, 2], False), ([4, 3], True)])
def test_each_graph_mode_samples_correctly(mode, edge_dir, fanout, replace):
  ds, ei, _ = homo_dataset(mode, edge_dir=edge_dir)
  want_device = 'cpu' if mode == 'CPU' else 'cuda'
  assert ds.get_graph().sampling_device.type == want_device
  if mode == 'ZERO_COPY':
    assert ds.get_graph().device_topology().indptr.is_cuda
    assert ds.get_graph().topo.indptr.device.type == 'cpu'
  sampler = NeighborSampler(
    ds.graph, fanout, device='cpu', with_edge=True, edge_dir=edge_dir, seed=7, replace=replace
  )
  for seeds in (torch.tensor([0, 5, 9, 13]), torch.tensor([3, 3, 8]), torch.arange(60)):
    out = sampler.sample_from_nodes(NodeSamplerInput(seeds))
    assert out.node.device.type == 'cpu', 'outputs land on the sampler device'
    check_output(out, {HOMO_E: ei}, seeds, HOMO_T, {HOMO_E: fanout}, edge_dir, replace)


@gpu
@pytest.mark.parametrize('mode', ['ZERO_COPY', 'CUDA'])
@pytest.mark.parametrize('edge_dir', ['out', 'in'])
@pytest.mark.parametrize('level', ['node_time', 'edge_time'])
def test_temporal_sampling_on_the_gpu_equals_the_cpu(mode, edge_dir, level):
  # 'last' (and fanout -1) draw no random numbers: the GPU's batches must be
  # the CPU's, node for node, through the CUDA inducer's disjoint keys.
  g = torch.Generator().manual_seed(4)
  times = {'node_time': torch.randint(0, 40, (60,), generator=g)}
  if level == 'edge_time':
    times = {'edge_time': torch.randint(0, 40, (500,), generator=g)}
  seeds = torch.randint(0, 60, (20,), generator=g)
  seed_time = torch.randint(0, 40, (20,), generator=g)
  outs = []
  for m in ('CPU', mode):
    ds, _, _ = homo_dataset(m, edge_dir=edge_dir)
    sampler = NeighborSampler(
      ds.graph, [3, -1], device='cpu', with_edge=True, edge_dir=edge_dir,
      temporal_strategy='last', **times,
    )  # fmt: skip
    outs.append(sampler.sample_from_nodes(NodeSamplerInput(seeds, time=seed_time)))
  cpu, gpu_out = outs
  for field in ('node', 'row', 'col', 'edge', 'seed_index'):
    assert torch.equal(getattr(cpu, field), getattr(gpu_out, field)), field


@gpu
@pytest.mark.parametrize('mode', ['ZERO_COPY', 'CUDA'])
def test_loaders_give_gpu_batches(mode):
  ds, ei, x = homo_dataset(mode, split_ratio=0.3, with_gpu=True)
  keys = set((ei[0] * 60 + ei[1]).tolist())

  def check_edges(batch):
    assert batch.x.is_cuda and batch.edge_index.is_cuda and batch.n_id.is_cuda
    assert torch.equal(batch.x.cpu(), x[batch.n_id.cpu()])
    src, dst = batch.n_id[batch.edge_index].cpu()  # edge_dir 'out': messages nbr -> seed
    assert set((dst * 60 + src).tolist()) <= keys

  for batch in NeighborLoader(ds, [3, 2], torch.arange(60), batch_size=16, device='cuda'):
    check_edges(batch)
    assert batch.y.is_cuda and torch.equal(batch.y.cpu(), batch.n_id.cpu())  # labels: the ids
  link = LinkNeighborLoader(
    ds, [3], edge_label_index=ei[:, :64], neg_sampling=NegativeSampling('binary', 1),
    batch_size=16, device='cuda',
  )  # fmt: skip
  for batch in link:
    check_edges(batch)
    assert batch.edge_label_index.is_cuda and batch.edge_label.is_cuda
  for batch in SubGraphLoader(ds, torch.arange(60), [3], batch_size=16, device='cuda'):
    check_edges(batch)


@gpu
@pytest.mark.parametrize('mode', ['ZERO_COPY', 'CUDA'])
def test_gpu_batches_gather_labels_on_the_gpu_and_name_a_bad_id(mode):
  """Labels of a GPU batch are gathered there (through their id map too),
  and a feature table or a label map short of the graph's nodes fails the
  batch with an error naming the id, after the batch's gathers."""
  num_nodes = 60
  ds, _, x = homo_dataset(mode, split_ratio=0.3, with_gpu=True)
  id2idx = torch.randperm(num_nodes)
  labels = torch.randn(num_nodes, 2)
  ds.init_node_labels(labels, id2idx=id2idx)
  loader = NeighborLoader(ds, [3, 2], torch.arange(num_nodes), batch_size=16, device='cuda')
  for batch in loader:
    assert batch.y.is_cuda and torch.equal(batch.y.cpu(), labels[id2idx[batch.n_id.cpu()]])
  short = Dataset(edge_dir='out')
  short.graph = ds.graph
  short.node_features = Feature(x[:40], split_ratio=0.3, with_gpu=True)
  with pytest.raises(ValueError, match='is out of range \\[0, 40\\) of the feature'):
    for _ in NeighborLoader(short, [3, 2], torch.arange(num_nodes), batch_size=60, device='cuda'):
      pass
  short.node_features = ds.node_features
  short.init_node_labels(labels[:30], id2idx=id2idx)  # ids mapped past row 29 have none
  with pytest.raises(ValueError, match='has no feature row'):
    for _ in NeighborLoader(short, [3, 2], torch.arange(num_nodes), batch_size=60, device='cuda'):
      pass


# -- distributed: a 2-partition worker-mode run, on the GPU path and the CPU path -------


def canonical_run(
  rank, port, sampling_port, root, gpu_options, collocated, results, fanouts, share
):
  """One trainer of a 2-partition worker-mode run, sampling in a sampling
  process or in the trainer (``collocated``), the other partition mapped
  from this host (``share`` '1') or asked over RPC ('0', as between
  hosts); reports each batch as sorted global edges, sorted nodes and
  whether features match. With fanout -1 (every neighbor) the result is
  the same whatever samples it; with ``FANOUT`` each batch is checked
  against the full graph."""
  dist = glt.distributed
  os.environ['GLT_SHARE_HOST_PARTITIONS'] = share  # this spawned process's (and its children's)
  try:
    dist.init_worker_group(2, rank, 'trainer')
    load = dict(graph_mode='CPU', feature_with_gpu=False)
    device = torch.device('cpu')
    if gpu_options:
      load = dict(graph_mode='ZERO_COPY', feature_with_gpu=True, device=0, split_ratio=0.5)
      device = torch.device('cuda', 0)
    ds = dist.DistDataset(edge_dir='out').load(root, rank, **load)
    options = None  # collocated: the trainer samples, in the RPC world it joins here
    if collocated:
      dist.init_rpc('127.0.0.1', sampling_port, rpc_timeout=60)
    else:
      options = dist.MpDistSamplingWorkerOptions(
        num_workers=1, worker_concurrency=2, master_addr='127.0.0.1', master_port=sampling_port,
        rpc_timeout=60, channel_size='16MB', worker_devices=[device] if gpu_options else None,
        pin_memory=gpu_options,
      )  # fmt: skip
    loader = dist.DistNeighborLoader(
      ds, fanouts, ds.train_idx, batch_size=32, with_edge=True, collect_features=True,
      worker_options=options, to_device=device if gpu_options else None, random_seed=5,
    )  # fmt: skip
    graph = torch.load(os.path.join(root, 'full.pt'), weights_only=False)
    degree = torch.bincount(graph['src'], minlength=graph['num_nodes'])
    report = []
    for batch in loader:
      assert batch.x.device.type == ('cuda' if gpu_options and GPU else 'cpu')
      batch = batch.to('cpu')
      if fanouts == FANOUT:
        check_homo_batch(batch, graph, ds.train_idx, degree)
      n_id = batch.n_id
      edges = torch.stack([n_id[batch.edge_index[1]], n_id[batch.edge_index[0]]])
      order = torch.argsort(edges[0] * graph['num_nodes'] + edges[1])
      report.append(
        (
          int(batch.input_id.min()),
          edges[:, order].tolist(),
          sorted(n_id.tolist()),
          torch.equal(batch.x, graph['x'][n_id]),
        )
      )
    loader.shutdown()
    if collocated:
      dist.shutdown_rpc()
    results.put((rank, 'ok', sorted(report)))
  except Exception:
    import traceback

    results.put((rank, traceback.format_exc(), None))


def run_two_trainers(root, gpu_options, collocated=False, fanouts=(-1, -1), share='1'):
  results = SPAWN.Queue()
  ports = (free_port(), free_port())
  args = (root, gpu_options, collocated, results, list(fanouts), share)
  procs = [SPAWN.Process(target=canonical_run, args=(r, *ports, *args)) for r in range(2)]
  reports = sorted(run_spawned(procs, results, TIMEOUT_S))
  for rank, status, _ in reports:
    assert status == 'ok', f'rank {rank}:\n{status}'
  return [report for *_, report in reports]


HOSTS = pytest.mark.parametrize('share', ['1', '0'], ids=['one-host', 'rpc'])


@pytest.mark.slow  # spawned processes
@pytest.mark.parametrize('collocated', [False, True], ids=['sampling-process', 'collocated'])
@HOSTS
def test_two_partition_worker_mode_with_gpu_options_equals_the_cpu_path(
  tmp_path, collocated, share
):
  """On a GPU: graphs in 'ZERO_COPY', hot rows on the GPU, samplers on the
  GPU (the hops, the inducer and the feature gathers of both partitions
  where this host holds both; else the other partition's hop pieces and
  rows over RPC, moved to the GPU as they come), batches on the GPU.
  Without one: the same options fall back. Either way, every batch equals
  the CPU path's."""
  partition(str(tmp_path), 2, hetero=False)
  want = run_two_trainers(str(tmp_path), gpu_options=False, collocated=collocated, share=share)
  got = run_two_trainers(str(tmp_path), gpu_options=True, collocated=collocated, share=share)
  assert got == want
  for report in got:
    assert report and all(features_match for *_, features_match in report)


@pytest.mark.slow  # spawned processes
@pytest.mark.parametrize('collocated', [False, True], ids=['sampling-process', 'collocated'])
@pytest.mark.parametrize('share', ['1', pytest.param('0', marks=gpu)], ids=['one-host', 'rpc'])
def test_two_partition_sampled_batches_with_gpu_options_are_valid_and_repeat(
  tmp_path, collocated, share
):
  """Fanouts with a bound: on a GPU each batch is drawn over both partitions
  in one call (the host's partitions on the GPU: every hop, the inducer and
  the gathers there), or, over RPC, hop by hop with its pieces meeting on
  the GPU; without one, the CPU path. Either way every batch is a valid
  sample of the full graph (edges, per-hop counts, features, labels), and a
  second run with the same seed gives the same batches."""
  partition(str(tmp_path), 2, hetero=False)
  run = dict(gpu_options=True, collocated=collocated, fanouts=FANOUT, share=share)
  first = run_two_trainers(str(tmp_path), **run)
  again = run_two_trainers(str(tmp_path), **run)
  assert first == again
  assert all(report for report in first)
