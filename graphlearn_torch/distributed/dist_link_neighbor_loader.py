"""DistLinkNeighborLoader: link-wise neighbor sampling across partitions."""

from typing import Literal, Optional

import torch

from ..loader.link_loader import check_edge_label, get_edge_label_index
from ..loader.node_loader import seed_times
from ..sampler.base import EdgeSamplerInput, NegativeSampling, SamplingConfig, SamplingType
from ..typing import InputEdges, NumNeighbors
from .dist_dataset import DistDataset
from .dist_loader import DistLoader
from .sources.options import _BasicDistSamplingWorkerOptions


class DistLinkNeighborLoader(DistLoader):
  r"""Mini-batches of seed edges, with negatives and the multi-hop
  neighborhoods of their endpoints, sampled across the partitions of a
  distributed dataset.

  Batches carry ``edge_label_index`` and ``edge_label`` (binary negative
  sampling, or none), or ``src_index``, ``dst_pos_index`` and
  ``dst_neg_index`` (triplet), as ``LinkNeighborLoader``'s do. Negatives are
  strict: each pair is checked against the partition that stores its edges.

  Args:
    data: this process's partition.
    num_neighbors: neighbors per hop (a dict by edge type when heterogeneous).
    batch_size: seed edges per batch.
    edge_label_index: this process's seed edges: a ``[2, n]`` tensor, an
      edge type, ``(edge type, edges)``, or None (the partition's own edges).
    edge_label: a label per seed edge.
    neg_sampling: negative sampling ('binary' or 'triplet', amount).
    shuffle: reshuffle the seeds every epoch.
    drop_last: drop the last incomplete batch.
    with_edge: return sampled edge ids (and edge features).
    with_weight: sample proportionally to edge weights.
    edge_dir: 'out' or 'in'; must be the dataset's.
    collect_features: gather features and labels into the batches.
    to_device: where batches go.
    random_seed: seeds sampling, negatives and shuffling.
    worker_options: where sampling runs (default: collocated).
    edge_label_time: each seed edge's time (temporal sampling); batches
      carry ``edge_label_time`` (or ``seed_time`` for triplets).
    time_attr: temporal sampling by the partitions' 'node_time' or
      'edge_time' (written by the partitioner), as PyG's ``time_attr``.
    temporal_strategy: 'uniform' or 'last' (the most recent neighbors).
    disjoint: every seed grows a subgraph of its own; the batch's ``batch``
      vector gives each node's seed edge. Temporal sampling is always
      disjoint.
    subgraph_type: 'directional', 'bidirectional' or 'induced' (PyG's).
  """

  def __init__(
    self,
    data: Optional[DistDataset],
    num_neighbors: NumNeighbors,
    batch_size: int = 1,
    edge_label_index: InputEdges = None,
    edge_label: Optional[torch.Tensor] = None,
    neg_sampling: Optional[NegativeSampling] = None,
    shuffle: bool = False,
    drop_last: bool = False,
    with_edge: bool = False,
    with_weight: bool = False,
    edge_dir: Literal['in', 'out'] = 'out',
    collect_features: bool = False,
    to_device: Optional[torch.device] = None,
    random_seed: Optional[int] = None,
    worker_options: Optional[_BasicDistSamplingWorkerOptions] = None,
    edge_label_time: Optional[torch.Tensor] = None,
    time_attr: Optional[str] = None,
    temporal_strategy: str = 'uniform',
    disjoint: bool = False,
    subgraph_type: str = 'directional',
  ):
    input_type, edges = get_edge_label_index(data, edge_label_index)
    neg_sampling = NegativeSampling.cast(neg_sampling)
    edge_label = check_edge_label(edge_label, edges, neg_sampling)
    config = SamplingConfig(
      SamplingType.LINK,
      num_neighbors,
      batch_size,
      shuffle,
      drop_last,
      with_edge,
      collect_features,
      with_neg=neg_sampling is not None,
      with_weight=with_weight,
      edge_dir=edge_dir,
      seed=random_seed,
      time_attr=time_attr,
      temporal_strategy=temporal_strategy,
      disjoint=disjoint,
      subgraph_type=subgraph_type,
    )
    time = seed_times(edge_label_time, edges, 'edge_label_time')
    seeds = EdgeSamplerInput(edges[0], edges[1], edge_label, input_type, neg_sampling, time)
    super().__init__(data, seeds, config, to_device, worker_options)
