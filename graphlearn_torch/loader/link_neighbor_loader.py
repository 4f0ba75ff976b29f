"""LinkNeighborLoader: PyG-style mini-batches around seed edges."""

from typing import Optional

import torch

from ..data.dataset import Dataset
from ..sampler.base import NegativeSampling
from ..sampler.neighbor_sampler import NeighborSampler
from ..typing import InputEdges, NumNeighbors
from .link_loader import LinkLoader
from .options import ON_ONE_MACHINE, TEMPORAL, LoaderOptions, build_neighbor_sampler, loader_options


@loader_options(
  'data',
  'num_neighbors',
  'neighbor_sampler',
  'edge_label_index',
  'edge_label',
  'neg_sampling',
  'with_edge',
  'with_weight',
  'batch_size',
  'shuffle',
  'drop_last',
  'strategy',
  'device',
  'seed',
  keyword=('replace', 'is_sorted') + TEMPORAL + ON_ONE_MACHINE,
)
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
    device: where batches go (CUDA falls back to the CPU without a GPU).
    edge_label_time: each seed edge's time (temporal sampling); batches
      carry ``edge_label_time`` (or ``seed_time`` for triplets).
  """

  def __init__(
    self,
    data: Dataset,
    num_neighbors: NumNeighbors,
    neighbor_sampler: Optional[NeighborSampler] = None,
    edge_label_index: InputEdges = None,
    edge_label: Optional[torch.Tensor] = None,
    neg_sampling: Optional[NegativeSampling] = None,
    device: torch.device = torch.device('cuda:0'),
    edge_label_time: Optional[torch.Tensor] = None,
    *,
    options: LoaderOptions,
  ):
    if neighbor_sampler is None:
      neighbor_sampler = build_neighbor_sampler(
        data, num_neighbors, options, device, with_neg=neg_sampling is not None
      )
    super().__init__(
      data,
      neighbor_sampler,
      edge_label_index,
      edge_label,
      neg_sampling,
      device,
      data.edge_dir,
      edge_label_time,
      options=options,
    )
