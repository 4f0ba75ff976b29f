"""NodeLoader: batches of seed nodes through a sampler into PyG data."""

from typing import Iterator, Optional, Tuple, Union

import torch
from torch_geometric.data import Data, HeteroData

from ..data.dataset import Dataset
from ..sampler.base import BaseSampler, HeteroSamplerOutput, NodeSamplerInput, SamplerOutput
from ..typing import InputNodes, NodeType, reverse_edge_type
from ..utils.device import resolve_device
from .transform import to_data, to_hetero_data


class SeedBatcher:
  """Splits ``num_seeds`` seed positions into batches, reshuffled every epoch.

  Args:
    num_seeds: how many seeds there are.
    batch_size: seeds per batch (> 0).
    shuffle: permute the seeds at the start of every epoch.
    drop_last: drop a last batch smaller than ``batch_size``.
    seed: seeds the shuffling; None uses torch's global generator.
  """

  def __init__(
    self,
    num_seeds: int,
    batch_size: int,
    shuffle: bool = False,
    drop_last: bool = False,
    seed: Optional[int] = None,
  ):
    if not isinstance(batch_size, int) or batch_size <= 0:
      raise ValueError(f'batch_size must be a positive integer, got {batch_size!r}')
    self.num_seeds = num_seeds
    self.batch_size = batch_size
    self.shuffle = shuffle
    self.drop_last = drop_last
    self._generator = torch.Generator().manual_seed(seed) if seed is not None else None

  def __len__(self) -> int:
    if self.drop_last:
      return self.num_seeds // self.batch_size
    return (self.num_seeds + self.batch_size - 1) // self.batch_size

  def __iter__(self) -> Iterator[torch.Tensor]:
    if self.shuffle:
      order = torch.randperm(self.num_seeds, generator=self._generator)
    else:
      order = torch.arange(self.num_seeds)
    for i in range(len(self)):
      yield order[i * self.batch_size : (i + 1) * self.batch_size]


def resolve_input_nodes(
  data: Dataset, input_nodes: InputNodes
) -> Tuple[Optional[NodeType], torch.Tensor]:
  """Returns ``(node type, seed ids)`` for a loader's ``input_nodes``.

  Accepts None (every node of a homogeneous graph), a tensor of ids or a
  boolean mask, a node type (all its nodes), or ``(node type, ids or mask)``.
  """
  hetero = data.is_hetero
  ntype, nodes = None, input_nodes
  if isinstance(input_nodes, str):
    ntype, nodes = input_nodes, None
  elif (
    isinstance(input_nodes, (tuple, list))
    and len(input_nodes) == 2
    and isinstance(input_nodes[0], str)
  ):
    ntype, nodes = input_nodes
  if hetero and ntype is None:
    raise ValueError('the dataset is heterogeneous: give input_nodes as (node_type, ids)')
  if not hetero and ntype is not None:
    raise ValueError(f'the dataset is homogeneous but input_nodes names node type {ntype!r}')
  if hetero and ntype not in (data.get_node_types() or []):
    raise ValueError(f'unknown node type {ntype!r}; known: {data.get_node_types()}')
  num_nodes = data.num_nodes(ntype)
  if nodes is None:
    return ntype, torch.arange(num_nodes)
  nodes = torch.as_tensor(nodes)
  if nodes.dtype == torch.bool:
    if nodes.numel() != num_nodes:
      raise ValueError(f'an input_nodes mask must have {num_nodes} entries, got {nodes.numel()}')
    return ntype, nodes.nonzero().view(-1)
  if nodes.is_floating_point():
    raise ValueError(f'input_nodes must hold integer node ids, got dtype {nodes.dtype}')
  nodes = nodes.to(torch.int64).view(-1)
  if nodes.numel() and (int(nodes.min()) < 0 or int(nodes.max()) >= num_nodes):
    bad = int(nodes.min()) if int(nodes.min()) < 0 else int(nodes.max())
    raise ValueError(f'input node id {bad} is out of range [0, {num_nodes})')
  return ntype, nodes


class NodeLoader:
  """Iterates over mini-batches of seed nodes, sampled and collated to PyG.

  Args:
    data: the dataset (graph, features, labels).
    node_sampler: samples the neighborhood of a batch of seeds.
    input_nodes: the seeds (see ``resolve_input_nodes``).
    device: where batches go (CUDA falls back to the CPU without a GPU).
    batch_size: seeds per batch.
    shuffle: reshuffle the seeds every epoch.
    drop_last: drop the last incomplete batch.
    seed: seeds the shuffling.
  """

  def __init__(
    self,
    data: Dataset,
    node_sampler: BaseSampler,
    input_nodes: InputNodes,
    device: torch.device = torch.device('cuda:0'),
    **kwargs,
  ):
    self.data = data
    self.sampler = node_sampler
    self.device = resolve_device(device)
    self.input_type, self.input_nodes = resolve_input_nodes(data, input_nodes)
    batch_size = kwargs.pop('batch_size', 1)
    shuffle = kwargs.pop('shuffle', False)
    drop_last = kwargs.pop('drop_last', False)
    seed = kwargs.pop('seed', None)
    self.with_edge = kwargs.pop('with_edge', False)
    if kwargs:
      raise TypeError(f'{type(self).__name__} got unexpected arguments {sorted(kwargs)}')
    self.batch_size = batch_size
    self._batcher = SeedBatcher(self.input_nodes.numel(), batch_size, shuffle, drop_last, seed)
    self._batches = None

  def __len__(self) -> int:
    return len(self._batcher)

  def __iter__(self) -> 'NodeLoader':
    self._batches = iter(self._batcher)
    return self

  def __next__(self) -> Union[Data, HeteroData]:
    if self._batches is None:
      self._batches = iter(self._batcher)
    index = next(self._batches)
    seeds = self.input_nodes[index]
    out = self.sampler.sample_from_nodes(NodeSamplerInput(seeds, self.input_type))
    return self._collate_fn(out, index)

  def _collate_fn(self, out: Union[SamplerOutput, HeteroSamplerOutput], input_id: torch.Tensor):
    """Gathers features and labels of a sampled subgraph into PyG data."""
    data, dev = self.data, self.device
    batch_size = input_id.numel()
    if isinstance(out, SamplerOutput):
      feat = data.get_node_feature()
      efeat = data.get_edge_feature()
      labels = data.gather_node_labels(out.node)
      res = to_data(
        out,
        batch_labels=labels,
        node_feats=feat[out.node] if feat is not None else None,
        edge_feats=efeat[out.edge] if efeat is not None and out.edge is not None else None,
        batch_size=batch_size,
        input_id=input_id,
      )
      return res.to(dev) if dev.type != 'cpu' else res

    node_feats, labels, edge_feats = {}, {}, {}
    for ntype, nodes in out.node.items():
      feat = data.get_node_feature(ntype)
      if feat is not None:
        node_feats[ntype] = feat[nodes]
      label = data.gather_node_labels(nodes, ntype)
      if label is not None:
        labels[ntype] = label
    if out.edge is not None:
      for etype, eids in out.edge.items():
        orig = reverse_edge_type(etype) if data.edge_dir == 'out' else etype
        efeat = data.get_edge_feature(orig)
        if efeat is not None:
          edge_feats[etype] = efeat[eids]
    res = to_hetero_data(out, labels, node_feats, edge_feats)
    res[self.input_type].batch_size = batch_size
    res[self.input_type].input_id = input_id
    return res.to(dev) if dev.type != 'cpu' else res
