"""NodeLoader: batches of seed nodes through a sampler into PyG data."""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional, Tuple, Union

import torch

from ..batch.seeds import SeedBatcher
from ..data.dataset import Dataset
from ..sampler.base import BaseSampler, NodeSamplerInput, SamplingType
from ..sampler.schema import RandomStream
from ..typing import InputNodes, NodeType
from ..utils.launched import Launched
from .base import SamplerLoader
from .options import BATCHING, ON_ONE_MACHINE, LoaderOptions, loader_options

if TYPE_CHECKING:  # PyG is imported on first use: sampling processes never need it
  from torch_geometric.data import Data, HeteroData


__all__ = ['NodeLoader', 'SeedBatcher', 'resolve_input_nodes']


def resolve_input_nodes(
  data: Dataset, input_nodes: InputNodes
) -> Tuple[Optional[NodeType], torch.Tensor]:
  """Returns ``(node type, seed ids)`` for a loader's ``input_nodes``.

  Accepts None (every node of a homogeneous graph), a tensor of ids or a
  boolean mask, a node type (all its nodes), or ``(node type, ids or mask)``.
  Without ``data`` (a server-client client) the ids must be given, and are
  checked by the servers.
  """
  ntype, nodes = None, input_nodes
  if isinstance(input_nodes, str):
    ntype, nodes = input_nodes, None
  elif (
    isinstance(input_nodes, (tuple, list))
    and len(input_nodes) == 2
    and isinstance(input_nodes[0], str)
  ):
    ntype, nodes = input_nodes
  if data is None:
    if nodes is None:
      raise ValueError('without a dataset, input_nodes must give the seed ids')
    nodes = torch.as_tensor(nodes)
    return ntype, nodes.nonzero().view(-1) if nodes.dtype == torch.bool else nodes.view(-1)
  hetero = data.is_hetero
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


def seed_times(time, seeds: torch.Tensor, what: str) -> Optional[torch.Tensor]:
  """A loader's seed times (``input_time``, ``edge_label_time``): one per
  seed, 1-D (checked again, with the graph's times, by the sampler).

  Args:
    time: the times, or None.
    seeds: the seeds (ids, or a ``[2, n]`` edge index).
    what: the argument's name, for the errors.
  """
  if time is None:
    return None
  time = torch.as_tensor(time)
  num = seeds.size(-1)
  if time.dim() != 1 or time.numel() != num:
    raise ValueError(f'{what} must hold one time per seed ({num}), got shape {tuple(time.shape)}')
  return time


@loader_options(
  'data',
  'node_sampler',
  'input_nodes',
  'device',
  keyword=BATCHING + ('with_edge',) + ON_ONE_MACHINE,
)
class NodeLoader(SamplerLoader):
  """Iterates over mini-batches of seed nodes, sampled and collated to PyG.

  Args:
    data: the dataset (graph, features, labels).
    node_sampler: samples the neighborhood of a batch of seeds.
    input_nodes: the seeds (see ``resolve_input_nodes``).
    device: where batches go (CUDA falls back to the CPU without a GPU).
    input_time: each seed's time (temporal sampling: a seed reaches only
      the past of its time); batches then carry ``seed_time``.
  """

  def __init__(
    self,
    data: Dataset,
    node_sampler: BaseSampler,
    input_nodes: InputNodes,
    device: torch.device = torch.device('cuda:0'),
    input_time: Optional[torch.Tensor] = None,
    *,
    options: LoaderOptions,
  ):
    self.input_type, self.input_nodes = resolve_input_nodes(data, input_nodes)
    self.with_edge = options.with_edge
    self.input_time = seed_times(input_time, self.input_nodes, 'input_time')
    inputs = (self.input_type, self.input_nodes)
    if self.input_time is not None:
      inputs += (self.input_time,)
    super().__init__(data, node_sampler, self.input_nodes.numel(), device, options, inputs)

  def _sample_batch(self, index: torch.Tensor, random: RandomStream) -> Union[Data, HeteroData]:
    out = self.sampler.sample_from_nodes(self._inputs(index), random=random)
    return self._collate_fn(out, index, SamplingType.NODE, self.input_type)

  def _launch_batch(self, index: torch.Tensor, random: RandomStream) -> Launched:
    if not self._launches_ahead:  # (a subclass that samples otherwise turns it off)
      return super()._launch_batch(index, random)
    launched = self.sampler.launch_from_nodes(self._inputs(index), random=random)
    return launched.then(
      lambda out: self._collate_fn(out, index, SamplingType.NODE, self.input_type)
    )

  def _inputs(self, index: torch.Tensor) -> NodeSamplerInput:
    """The sampler's input of the batch of seed positions ``index``."""
    time = self.input_time[index] if self.input_time is not None else None
    return NodeSamplerInput(self.input_nodes[index], self.input_type, time)
