"""Bad input raises a clear Python exception naming the problem."""

from functools import partial

import pytest
import torch

from graphlearn_torch import _C
from graphlearn_torch.data import Dataset, Feature, Topology
from graphlearn_torch.loader import NeighborLoader
from graphlearn_torch.sampler import NeighborSampler, NodeSamplerInput


@pytest.fixture
def dataset():
  ds = Dataset()
  ds.init_graph(torch.tensor([[0, 1, 2, 3], [1, 2, 3, 0]]), graph_mode='CPU')
  ds.init_node_features(torch.randn(4, 2))
  return ds


def hetero_dataset():
  ds = Dataset()
  ds.init_graph({('a', 'to', 'b'): torch.tensor([[0, 1], [1, 0]])}, graph_mode='CPU')
  return ds


@pytest.mark.parametrize('seeds', [torch.tensor([4]), torch.tensor([-1]), torch.tensor([0, 99])])
def test_seed_out_of_range(dataset, seeds):
  sampler = NeighborSampler(dataset.graph, [2], device='cpu')
  with pytest.raises(ValueError, match='out of range'):
    sampler.sample_from_nodes(NodeSamplerInput(seeds))
  with pytest.raises(ValueError, match='out of range'):
    NeighborLoader(dataset, [2], seeds, device='cpu')


def test_float_seeds(dataset):
  with pytest.raises(ValueError, match='integer'):
    NeighborLoader(dataset, [2], torch.tensor([0.5]), device='cpu')


@pytest.mark.parametrize(
  'edge_index,match',
  [
    (torch.zeros(3, 4, dtype=torch.long), r'shape \[2, num_edges\]'),
    (torch.zeros(4, dtype=torch.long), r'shape \[2, num_edges\]'),
    (torch.zeros(2, 4), 'integer'),
    (torch.tensor([[0, -1], [1, 2]]), 'negative'),
    ((torch.tensor([0, 1]), torch.tensor([1])), 'differ in length'),
  ],
)
def test_bad_edge_index(edge_index, match):
  with pytest.raises(ValueError, match=match):
    Topology(edge_index)
  with pytest.raises(ValueError, match=match):
    Dataset().init_graph(edge_index, graph_mode='CPU')


@pytest.mark.parametrize('fanout', [[0], [2, -2], [2.5], [], 'ab'])
def test_bad_fanout(dataset, fanout):
  with pytest.raises(ValueError, match='num_neighbors'):
    NeighborLoader(dataset, fanout, None, device='cpu')


def test_feature_rows_fewer_than_nodes(dataset):
  with pytest.raises(ValueError, match='answer for 3 ids but the graph has 4 nodes'):
    dataset.init_node_features(torch.randn(3, 2))
  ds = Dataset()
  ds.init_node_features(torch.randn(2, 2))
  with pytest.raises(ValueError, match='answer for 2 ids'):
    ds.init_graph(torch.tensor([[0, 1], [1, 4]]), graph_mode='CPU')


def test_unknown_types():
  ds = hetero_dataset()
  with pytest.raises(ValueError, match="unknown node type 'c'"):
    NeighborLoader(ds, [1], ('c', torch.tensor([0])), device='cpu')
  with pytest.raises(ValueError, match='heterogeneous'):
    NeighborLoader(ds, [1], torch.tensor([0]), device='cpu')
  with pytest.raises(ValueError, match='unknown edge types'):
    NeighborSampler(ds.graph, {('a', 'x', 'b'): [1]}, device='cpu')
  with pytest.raises(KeyError, match='unknown edge type'):
    ds.get_graph(('a', 'x', 'b'))
  sampler = NeighborSampler(ds.graph, [1], device='cpu')
  with pytest.raises(ValueError, match='unknown node type'):
    sampler.sample_from_nodes(NodeSamplerInput(torch.tensor([0]), 'zzz'))


def test_other_bad_arguments(dataset):
  for bad in (0, True, 1.0):
    with pytest.raises(ValueError, match=f'batch_size must be a positive integer, got {bad}'):
      NeighborLoader(dataset, [1], None, batch_size=bad, device='cpu')
  with pytest.raises(TypeError, match='unexpected arguments'):
    NeighborLoader(dataset, [1], None, device='cpu', bogus=1)
  # A seed torch's generators cannot take fails here, naming it (1.5 was
  # cut to 1 for the shuffling and refused by torch for the sampling).
  in_range = r'must be in \[-2\*\*63, 2\*\*64\)'
  for bad, match in ((1.5, 'must be an integer'), ('7', 'must be an integer'), (2**64, in_range)):
    with pytest.raises(ValueError, match=f'seed {match}'):
      NeighborLoader(dataset, [1], None, device='cpu', seed=bad)
  for good in (-(2**63), 2**64 - 1):
    NeighborLoader(dataset, [1], None, device='cpu', seed=good)
  with pytest.raises(ValueError, match='edge weights'):
    NeighborSampler(dataset.graph, [1], device='cpu', with_weight=True)
  with pytest.raises(ValueError, match='graph mode'):
    Dataset().init_graph(torch.tensor([[0], [1]]), graph_mode='GPU-ish')
  with pytest.raises(ValueError, match='edge_weights'):
    Topology(torch.tensor([[0], [1]]), edge_weights=torch.tensor([-1.0]))
  with pytest.raises(ValueError, match='2-D'):
    Feature(torch.randn(2, 2, 2))


def test_kernels_check_their_inputs():
  indptr, indices = torch.tensor([0, 1, 2]), torch.tensor([1, 0])
  sample = torch.ops.glt.sample_neighbors
  with pytest.raises(ValueError, match='seeds holds ids outside'):
    sample(indptr, indices, None, None, torch.tensor([2]), 1, False, 0)
  with pytest.raises(ValueError, match='int64'):
    sample(indptr, indices, None, None, torch.tensor([0], dtype=torch.int32), 1, False, 0)
  with pytest.raises(ValueError, match='indptr ends at'):
    sample(indptr, torch.tensor([1]), None, None, torch.tensor([0]), 1, False, 0)
  with pytest.raises(ValueError, match='edge_ids'):
    sample(indptr, indices, torch.tensor([0]), None, torch.tensor([0]), 1, False, 0)
  with pytest.raises(ValueError, match='col holds ids outside'):
    torch.ops.glt.coo_to_csr(torch.tensor([0]), torch.tensor([5]), 1, 2)
  with pytest.raises(ValueError, match='out of range'):
    _C.gather_rows(torch.randn(3, 2), torch.tensor([3]), None)
  inducer = _C.Inducer(1)
  inducer.init_nodes([torch.tensor([0])])
  with pytest.raises(ValueError, match='not seen by the inducer'):
    inducer.induce_next([0], [0], [torch.tensor([5])], [torch.tensor([1])], [torch.tensor([1])])
  with pytest.raises(ValueError, match='nbr_nums sums to'):
    inducer.induce_next([0], [0], [torch.tensor([0])], [torch.tensor([1])], [torch.tensor([2])])
  with pytest.raises(ValueError, match='node type index'):
    inducer.induce_next([1], [0], [torch.tensor([0])], [torch.tensor([1])], [torch.tensor([1])])


def test_kernels_read_no_row_that_lies_outside_indices():
  # indptr ends at the end of indices, but row 1 runs backwards and row 2
  # past the end: no op reads them (a whole indptr is not checked each call).
  indptr, indices = torch.tensor([0, 2, 1, 5, 3]), torch.tensor([0, 1, 2])
  ops = torch.ops.glt
  bad = 'indptr gives row {} entries \\[{}, {}\\) outside indices \\(3 entries\\)'
  for row, span in ((1, (2, 1)), (2, (1, 5))):
    seeds = torch.tensor([0, row])
    with pytest.raises(ValueError, match=bad.format(row, *span)):
      ops.sample_neighbors(indptr, indices, None, None, seeds, 1, False, 0)
    with pytest.raises(ValueError, match=bad.format(row, *span)):
      times = torch.zeros(3, dtype=torch.long)
      ops.sample_neighbors_temporal(
        indptr, indices, None, None, times, seeds, torch.tensor([5, 5]), 1, False, False, 0
      )
    with pytest.raises(ValueError, match=bad.format(row, *span)):
      ops.has_edge(indptr, indices, seeds, torch.tensor([1, 1]))
    with pytest.raises(ValueError, match=bad.format(row, *span)):
      ops.induced_subgraph(indptr, indices, None, seeds)
    with pytest.raises(ValueError, match=bad.format(row, *span)):
      ops.sample_negative(indptr, indices, seeds, True, 3, 0, 1, True, 0)
    inducer = _C.Inducer(1, [4])
    inducer.init_nodes([torch.tensor([0, row])])
    none = torch.empty(0, dtype=torch.long)
    with pytest.raises(ValueError, match=bad.format(row, *span)):
      inducer.sample_induce_next(
        [0], [0], [seeds], [indptr], [indices], [None], [None], [1], False, [0], [none], [none],
        [], [], True, [],
      )  # fmt: skip
  # the rows that lie in indices are read as before
  row_0 = torch.tensor([0])
  nbrs, counts, _ = ops.sample_neighbors(indptr, indices, None, None, row_0, -1, False, 0)
  assert nbrs.tolist() == [0, 1] and counts.tolist() == [2]
  found = ops.has_edge(indptr, indices, torch.tensor([0, 0]), torch.tensor([0, 2]))
  assert found.tolist() == [True, False]


def test_rev_relation_and_reversal_round_trip():
  from graphlearn_torch.typing import reverse_edge_type

  # a relation named 'rev' (no suffix) reverses to 'rev_rev' and back
  for etype in (('a', 'rev', 'b'), ('a', 'rev_x', 'b'), ('a', 'writes', 'b'), ('a', 'r', 'a')):
    assert reverse_edge_type(reverse_edge_type(etype)) == etype
  ds = Dataset(edge_dir='out')
  ds.init_graph({('a', 'rev', 'b'): torch.tensor([[0, 1], [1, 0]])}, graph_mode='CPU')
  out = NeighborSampler(ds.graph, [2], device='cpu').sample_from_nodes(
    NodeSamplerInput(torch.tensor([0, 1]), 'a')
  )
  assert out.row[('b', 'rev_rev', 'a')].numel() == 2


def test_dataset_counts_and_labels_are_checked():
  with pytest.raises(ValueError, match='num_nodes is 3, but the edges hold node id 5'):
    Dataset().init_graph(torch.tensor([[0, 5], [1, 2]]), graph_mode='CPU', num_nodes=3)
  ds = Dataset()
  ds.init_graph(torch.tensor([[0, 1], [1, 2]]), graph_mode='CPU', num_nodes=4)
  with pytest.raises(ValueError, match='3 node labels for the 4 nodes'):
    ds.init_node_labels(torch.tensor([0, 1, 1]))
  early = Dataset()  # labels before the graph: checked when the graph comes
  early.init_node_labels(torch.tensor([0, 1]))
  with pytest.raises(ValueError, match='2 node labels for the 3 nodes'):
    early.init_graph(torch.tensor([[0, 1], [1, 2]]), graph_mode='CPU')
  ds.init_node_features(torch.randn(4, 2))
  with pytest.raises(TypeError, match='integer ids, got dtype torch.float32'):
    ds.node_features[torch.tensor([0.5, 1.0])]


def test_channel_timeouts_are_checked():
  from graphlearn_torch.channel import QueueTimeoutError, ShmChannel
  from graphlearn_torch.channel.base import timeout_ms_arg

  channel = ShmChannel(shm_size='1MB')
  for bad in (float('nan'), -1, '5', True):
    with pytest.raises(ValueError, match='timeout_ms must be a non-negative number'):
      channel.recv(timeout_ms=bad)
  with pytest.raises(QueueTimeoutError):
    channel.recv(timeout_ms=1.5)
  # inf and absurdly long waits are no timeout at all (not an overflow)
  assert timeout_ms_arg(float('inf')) == -1 and timeout_ms_arg(1e30) == -1


def test_rpc_transports_come_from_the_environment_and_are_checked(monkeypatch):
  from graphlearn_torch.distributed.runtime.rpc_args import DEFAULT_RPC_TRANSPORTS, rpc_transports

  monkeypatch.delenv('GLT_RPC_TRANSPORTS', raising=False)
  assert rpc_transports() == list(DEFAULT_RPC_TRANSPORTS)
  monkeypatch.setenv('GLT_RPC_TRANSPORTS', ' shm, uv ')
  assert rpc_transports() == ['shm', 'uv']
  monkeypatch.setenv('GLT_RPC_TRANSPORTS', 'uv,tcp')
  with pytest.raises(ValueError, match=r"unknown TensorPipe transports \['tcp'\]"):
    rpc_transports()


def test_rpc_channels_come_from_the_environment_and_are_checked(monkeypatch):
  from graphlearn_torch.distributed.runtime.rpc_args import rpc_channels

  monkeypatch.delenv('GLT_RPC_CHANNELS', raising=False)
  assert rpc_channels() is None  # TensorPipe's own choice
  monkeypatch.setenv('GLT_RPC_CHANNELS', 'mpt_uv, basic')
  assert rpc_channels() == ['mpt_uv', 'basic']
  monkeypatch.setenv('GLT_RPC_CHANNELS', 'basic,nvlink')
  with pytest.raises(ValueError, match=r"unknown TensorPipe channels \['nvlink'\]"):
    rpc_channels()


def test_a_taken_rendezvous_port_is_named_with_the_ephemeral_range():
  import socket

  from torch.distributed import rendezvous

  from graphlearn_torch.distributed.runtime.rendezvous import rendezvous_url
  from graphlearn_torch.utils import ephemeral_ports

  with socket.socket() as taken:
    taken.bind(('127.0.0.1', 0))  # the OS's pick: a port of the ephemeral range
    taken.listen()
    port = taken.getsockname()[1]
    assert port in ephemeral_ports()
    with pytest.raises(RuntimeError, match=f'serve the rendezvous at 127.0.0.1:{port}.*ephemeral'):
      next(rendezvous(rendezvous_url('127.0.0.1', port, 5, 'r0'), rank=0, world_size=2))


def test_rpc_settings_are_checked_where_they_are_given():
  # torch's RPC reads a timeout of 0 as no timeout at all: refused, as are
  # ports out of range and thread counts under 1, naming the argument.
  from graphlearn_torch import distributed as dist
  from graphlearn_torch.distributed.runtime.context import set_context

  remote = dist.RemoteDistSamplingWorkerOptions
  mp = partial(dist.MpDistSamplingWorkerOptions, master_addr='localhost', master_port=11111)
  for options in (dist.CollocatedDistSamplingWorkerOptions, mp, remote):
    for bad in (0, -1, float('nan'), float('inf'), '5'):
      with pytest.raises(ValueError, match='rpc_timeout must be a .*number of seconds'):
        options(rpc_timeout=bad)
    for bad in (-1, 65536, 'abc', 8080.0):
      with pytest.raises(ValueError, match='master_port must be a port number'):
        options(master_port=bad)
    for bad in (0, -2, 1.5):
      with pytest.raises(ValueError, match='num_rpc_threads must be a positive integer'):
        options(num_rpc_threads=bad)
    assert options(master_port='12345', rpc_timeout=2, num_rpc_threads=3).rpc_timeout == 2.0
  assert remote(master_port=0).master_port == 0  # a free port of server 0's host
  with pytest.raises(ValueError, match=r'master_port must be a port number in \[1, 65535\]'):
    mp(master_port=0)
  previous = dist.get_context()
  dist.init_worker_group(1, 0, 'rpc-args')
  try:
    with pytest.raises(ValueError, match='rpc_timeout must be a finite number of seconds > 0'):
      dist.init_rpc('localhost', 11111, rpc_timeout=0)  # before any rendezvous
    with pytest.raises(ValueError, match=r'master_port must be a port number in \[1, 65535\]'):
      dist.init_rpc('localhost', 0)
  finally:
    set_context(previous)
