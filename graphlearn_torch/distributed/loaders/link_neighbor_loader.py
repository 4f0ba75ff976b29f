"""DistLinkNeighborLoader: link-wise neighbor sampling across partitions."""

from typing import Optional

import torch

from ...loader.link_loader import check_edge_label, check_negatives_fit, get_edge_label_index
from ...loader.node_loader import seed_times
from ...loader.options import TEMPORAL, LoaderOptions, loader_options
from ...sampler.base import EdgeSamplerInput, NegativeSampling, SamplingType
from ...typing import InputEdges, NumNeighbors
from ..data.dataset import DistDataset
from ..sources.options import _BasicDistSamplingWorkerOptions
from .loader import SAMPLING, DistLoader, sampling_config


@loader_options(
  'data',
  'num_neighbors',
  'batch_size',
  'edge_label_index',
  'edge_label',
  'neg_sampling',
  'shuffle',
  'drop_last',
  *SAMPLING,
  keyword=TEMPORAL,
)
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
    edge_label_index: this process's seed edges: a ``[2, n]`` tensor, an
      edge type, ``(edge type, edges)``, or None (the partition's own edges).
    edge_label: a label per seed edge.
    neg_sampling: negative sampling ('binary' or 'triplet', amount).
    to_device: where batches go.
    worker_options: where sampling runs (default: collocated).
    edge_label_time: each seed edge's time (temporal sampling); batches
      carry ``edge_label_time`` (or ``seed_time`` for triplets).
  """

  def __init__(
    self,
    data: Optional[DistDataset],
    num_neighbors: NumNeighbors,
    edge_label_index: InputEdges = None,
    edge_label: Optional[torch.Tensor] = None,
    neg_sampling: Optional[NegativeSampling] = None,
    to_device: Optional[torch.device] = None,
    worker_options: Optional[_BasicDistSamplingWorkerOptions] = None,
    edge_label_time: Optional[torch.Tensor] = None,
    *,
    options: LoaderOptions,
  ):
    input_type, edges = get_edge_label_index(data, edge_label_index)
    neg_sampling = NegativeSampling.cast(neg_sampling)
    check_negatives_fit(neg_sampling, options.batch_size)
    edge_label = check_edge_label(edge_label, edges, neg_sampling)
    config = sampling_config(SamplingType.LINK, num_neighbors, options, neg_sampling is not None)
    time = seed_times(edge_label_time, edges, 'edge_label_time')
    seeds = EdgeSamplerInput(edges[0], edges[1], edge_label, input_type, neg_sampling, time)
    super().__init__(data, seeds, config, to_device, worker_options)
