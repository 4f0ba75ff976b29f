"""The channel message codec (batch/codec.py): a batch bound for a
shared-memory channel carries each edge type's rows and cols as one
``[2, E]`` entry, and its receiver takes that entry as the batch's
``edge_index``, with no copy."""

import pytest
import torch

from graphlearn_torch.batch.codec import decode, encode, with_edge_indices
from graphlearn_torch.batch.pyg import to_pyg
from graphlearn_torch.batch.sampled import EdgeBatch, NodeBatch, SampledBatch
from graphlearn_torch.channel import DeferredTensor, ShmChannel

pytest.importorskip('torch_geometric')

CITES = ('paper', 'cites', 'paper')
WRITES = ('author', 'writes', 'paper')


def hetero_batch() -> SampledBatch:
  g = torch.Generator().manual_seed(0)
  nodes = {
    'paper': NodeBatch(ids=torch.arange(10, 30), x=torch.randn(20, 4, generator=g)),
    'author': NodeBatch(ids=torch.arange(5)),
  }
  edges = {
    CITES: EdgeBatch(
      rows=torch.randint(0, 20, (37,), generator=g),
      cols=torch.randint(0, 20, (37,), generator=g),
      eids=torch.arange(37),
    ),
    WRITES: EdgeBatch(
      rows=torch.zeros(0, dtype=torch.int64), cols=torch.zeros(0, dtype=torch.int64)
    ),
  }
  return SampledBatch(hetero=True, nodes=nodes, edges=edges)


def test_a_batchs_ids_on_the_host_stay_out_of_its_message():
  # (the sampler's own copy, which asks peers for feature rows)
  batch = hetero_batch()
  batch.nodes['paper'].host_ids = batch.nodes['paper'].ids.clone()
  msg = encode(batch)
  assert not any(key.endswith('host_ids') for key in msg)
  assert decode(msg).nodes['paper'].host_ids is None


def test_rows_and_cols_through_a_channel_are_the_edge_index_without_a_copy():
  batch = hetero_batch()
  msg = with_edge_indices(encode(batch))
  for etype in (CITES, WRITES):
    key = 'edge/' + '|'.join(etype)
    assert key + '/rows' not in msg and key + '/cols' not in msg
    assert isinstance(msg[key + '/index'], DeferredTensor)
  channel = ShmChannel(capacity=2, shm_size='1MB')
  channel.send(msg)
  got = decode(channel.recv(timeout_ms=1000))
  data = to_pyg(got)
  for etype, edge in batch.edges.items():
    received = got.edges[etype]
    assert torch.equal(received.rows, edge.rows) and torch.equal(received.cols, edge.cols)
    edge_index = data[etype].edge_index
    assert torch.equal(edge_index, torch.stack([edge.rows, edge.cols]))
    if edge.rows.numel():
      assert edge_index.data_ptr() == received.rows.data_ptr(), 'a copy of the channel bytes'
  assert torch.equal(got.edges[CITES].eids, torch.arange(37))
  assert torch.equal(got.nodes['paper'].x, batch.nodes['paper'].x)


def test_rows_and_cols_of_their_own_are_stacked():
  edge = hetero_batch().edges[CITES]
  edge_index = edge.edge_index()
  assert torch.equal(edge_index, torch.stack([edge.rows, edge.cols]))
  assert edge_index.data_ptr() != edge.rows.data_ptr()
  # adjacent in memory but of another dtype or length: not one tensor's rows
  both = torch.arange(10)
  assert EdgeBatch(rows=both[:5], cols=both[5:]).edge_index().data_ptr() == both.data_ptr()
  shifted = EdgeBatch(rows=both[:4], cols=both[5:9]).edge_index()
  assert torch.equal(shifted, torch.stack([both[:4], both[5:9]]))
  assert shifted.data_ptr() != both.data_ptr()


def test_only_host_rows_and_cols_of_one_kind_are_joined():
  msg = encode(hetero_batch())
  msg['edge/paper|cites|paper/cols'] = msg['edge/paper|cites|paper/cols'].to(torch.int32)
  joined = with_edge_indices(msg)
  assert 'edge/paper|cites|paper/rows' in joined and 'edge/paper|cites|paper/cols' in joined
  assert isinstance(joined['edge/author|writes|paper/index'], DeferredTensor)
  got = decode(
    {k: v.materialize() if isinstance(v, DeferredTensor) else v for k, v in joined.items()}
  )
  assert got.edges[CITES].cols.dtype == torch.int32
