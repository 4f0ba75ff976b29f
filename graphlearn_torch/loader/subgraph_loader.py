"""SubGraphLoader: induced subgraphs around batches of seed nodes."""

from typing import Optional

import torch
from torch_geometric.data import Data

from ..data.dataset import Dataset
from ..sampler.base import NodeSamplerInput, SamplingType
from ..sampler.neighbor_sampler import NeighborSampler, build_neighbor_sampler
from ..sampler.schema import RandomStream
from ..typing import InputNodes, NumNeighbors
from .node_loader import NodeLoader


class SubGraphLoader(NodeLoader):
  """Yields, per batch of seeds, the subgraph induced by the seeds and their
  sampled neighbors: every edge of the graph among those nodes. ``mapping``
  gives the seeds' positions in the batch's nodes. Homogeneous graphs.

  Args:
    data: the dataset.
    input_nodes: the seeds.
    num_neighbors: neighbors per hop that join the node set (None: seeds only).
    neighbor_sampler: a sampler to use instead of building one.
    batch_size, shuffle, drop_last: batching.
    with_edge: return edge ids (``e_id``) and edge features.
    strategy: 'random'.
    device: where batches go.
    seed: seeds sampling and shuffling.
  """

  def __init__(
    self,
    data: Dataset,
    input_nodes: InputNodes,
    num_neighbors: Optional[NumNeighbors] = None,
    neighbor_sampler: Optional[NeighborSampler] = None,
    batch_size: int = 1,
    shuffle: bool = False,
    drop_last: bool = False,
    with_edge: bool = False,
    strategy: str = 'random',
    device: torch.device = torch.device('cuda:0'),
    seed: Optional[int] = None,
    **kwargs,
  ):
    if neighbor_sampler is None:
      neighbor_sampler = build_neighbor_sampler(
        data,
        num_neighbors,
        device=device,
        with_edge=with_edge,
        strategy=strategy,
        seed=seed,
      )
    super().__init__(
      data,
      neighbor_sampler,
      input_nodes,
      device,
      batch_size=batch_size,
      shuffle=shuffle,
      drop_last=drop_last,
      seed=seed,
      with_edge=with_edge,
      **kwargs,
    )

  def _sample_batch(self, index: torch.Tensor, random: RandomStream) -> Data:
    out = self.sampler.subgraph(
      NodeSamplerInput(self.input_nodes[index], self.input_type), random=random
    )
    return self._collate_fn(out, index, SamplingType.SUBGRAPH, self.input_type)
