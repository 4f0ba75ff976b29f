"""LinkNeighborLoader: PyG-style mini-batches around seed edges."""

from typing import Optional

import torch

from ..data.dataset import Dataset
from ..sampler.base import NegativeSampling
from ..sampler.neighbor_sampler import NeighborSampler, build_neighbor_sampler
from ..typing import InputEdges, NumNeighbors
from .link_loader import LinkLoader


class LinkNeighborLoader(LinkLoader):
  """Samples the multi-hop neighborhood of the endpoints of each batch of
  seed edges (plus negatives) and yields PyG ``Data``/``HeteroData`` with the
  fields of PyG's LinkNeighborLoader.

  Args:
    data: the dataset.
    num_neighbors: neighbors per hop (-1: all), or a dict by edge type.
    neighbor_sampler: a sampler to use instead of building one.
    edge_label_index: the seed edges: ``[2, n]``, an edge type, or
      (edge type, edges); all edges when None.
    edge_label: a label per seed edge.
    neg_sampling: ``NegativeSampling('binary' | 'triplet', amount)``.
    with_edge: return edge ids and edge features.
    with_weight: sample neighbors in proportion to edge weights.
    batch_size: seed edges per batch.
    shuffle: reshuffle the seed edges every epoch.
    drop_last: drop the last incomplete batch.
    strategy: 'random'.
    device: where batches go (CUDA falls back to the CPU without a GPU).
    seed: seeds sampling and shuffling.
    replace: sample neighbors with replacement.
    edge_label_time: each seed edge's time (temporal sampling); batches
      carry ``edge_label_time`` (or ``seed_time`` for triplets).
    time_attr: temporal sampling: 'node_time' or 'edge_time', the
      dataset's times (``Dataset.init_node_time`` / ``init_edge_time``) to
      sample by, as PyG's ``time_attr`` names a node or edge attribute.
    temporal_strategy: 'uniform' or 'last' (the most recent neighbors).
    disjoint: every seed grows a subgraph of its own; the batch's
      ``batch`` then gives each node's seed (PyG's). Temporal sampling is
      always disjoint.
    subgraph_type: 'directional', 'bidirectional' or 'induced' (PyG's).
    is_sorted: the neighbors are in time order already (checked, not
      sorted).
  """

  def __init__(
    self,
    data: Dataset,
    num_neighbors: NumNeighbors,
    neighbor_sampler: Optional[NeighborSampler] = None,
    edge_label_index: InputEdges = None,
    edge_label: Optional[torch.Tensor] = None,
    neg_sampling: Optional[NegativeSampling] = None,
    with_edge: bool = False,
    with_weight: bool = False,
    batch_size: int = 1,
    shuffle: bool = False,
    drop_last: bool = False,
    strategy: str = 'random',
    device: torch.device = torch.device('cuda:0'),
    seed: Optional[int] = None,
    replace: bool = False,
    edge_label_time: Optional[torch.Tensor] = None,
    time_attr: Optional[str] = None,
    temporal_strategy: str = 'uniform',
    disjoint: bool = False,
    subgraph_type: str = 'directional',
    is_sorted: bool = False,
    **kwargs,
  ):
    if neighbor_sampler is None:
      neighbor_sampler = build_neighbor_sampler(
        data,
        num_neighbors,
        device=device,
        with_edge=with_edge,
        with_neg=neg_sampling is not None,
        with_weight=with_weight,
        strategy=strategy,
        seed=seed,
        replace=replace,
        time_attr=time_attr,
        temporal_strategy=temporal_strategy,
        disjoint=disjoint,
        subgraph_type=subgraph_type,
        is_sorted=is_sorted,
      )
    super().__init__(
      data,
      neighbor_sampler,
      edge_label_index,
      edge_label,
      neg_sampling,
      device,
      data.edge_dir,
      batch_size=batch_size,
      shuffle=shuffle,
      drop_last=drop_last,
      seed=seed,
      edge_label_time=edge_label_time,
      **kwargs,
    )
