"""SubGraphLoader: induced subgraphs around batches of seed nodes."""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional

import torch

from ..data.dataset import Dataset
from ..sampler.base import NodeSamplerInput, SamplingType
from ..sampler.neighbor_sampler import NeighborSampler
from ..sampler.schema import RandomStream
from ..typing import InputNodes, NumNeighbors
from .node_loader import NodeLoader
from .options import LoaderOptions, build_neighbor_sampler, loader_options

if TYPE_CHECKING:  # PyG is imported on first use: sampling processes never need it
  from torch_geometric.data import Data


@loader_options(
  'data',
  'input_nodes',
  'num_neighbors',
  'neighbor_sampler',
  'batch_size',
  'shuffle',
  'drop_last',
  'with_edge',
  'strategy',
  'device',
  'seed',
)
class SubGraphLoader(NodeLoader):
  """Yields, per batch of seeds, the subgraph induced by the seeds and their
  sampled neighbors: every edge of the graph among those nodes. ``mapping``
  gives the seeds' positions in the batch's nodes. Homogeneous graphs.

  Args:
    data: the dataset.
    input_nodes: the seeds.
    num_neighbors: neighbors per hop that join the node set (None: seeds only).
    neighbor_sampler: a sampler to use instead of building one.
    device: where batches go.
  """

  def __init__(
    self,
    data: Dataset,
    input_nodes: InputNodes,
    num_neighbors: Optional[NumNeighbors] = None,
    neighbor_sampler: Optional[NeighborSampler] = None,
    device: torch.device = torch.device('cuda:0'),
    *,
    options: LoaderOptions,
  ):
    if neighbor_sampler is None:
      neighbor_sampler = build_neighbor_sampler(data, num_neighbors, options, device)
    super().__init__(data, neighbor_sampler, input_nodes, device, options=options)
    self._launches_ahead = False  # its batches are subgraphs, sampled one at a time

  def _sample_batch(self, index: torch.Tensor, random: RandomStream) -> Data:
    out = self.sampler.subgraph(
      NodeSamplerInput(self.input_nodes[index], self.input_type), random=random
    )
    return self._collate_fn(out, index, SamplingType.SUBGRAPH, self.input_type)
