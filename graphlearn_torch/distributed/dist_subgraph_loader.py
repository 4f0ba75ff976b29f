"""DistSubGraphLoader: induced subgraphs around seed nodes, across partitions."""

from typing import Literal, Optional

import torch

from ..sampler.base import SamplingConfig, SamplingType
from ..typing import InputNodes, NumNeighbors
from .dist_dataset import DistDataset
from .dist_loader import DistLoader, node_input
from .sources.options import _BasicDistSamplingWorkerOptions


class DistSubGraphLoader(DistLoader):
  r"""Mini-batches of seed nodes with the subgraph induced by them and (with
  ``num_neighbors``) their sampled neighbors: every edge of the whole graph
  among those nodes. Batches carry ``mapping``, the seeds' local indices.
  Homogeneous graphs only.

  Args:
    data: this process's partition.
    input_nodes: this process's seeds: ids, a mask or ``(node type, ids)``.
    num_neighbors: neighbors per hop; None keeps just the seeds.
    batch_size: seeds per batch.
    shuffle: reshuffle the seeds every epoch.
    drop_last: drop the last incomplete batch.
    with_edge: return edge ids (and edge features).
    with_weight: sample proportionally to edge weights.
    edge_dir: 'out' or 'in'; must be the dataset's.
    collect_features: gather features and labels into the batches.
    to_device: where batches go.
    random_seed: seeds sampling and shuffling.
    worker_options: where sampling runs (default: collocated).
  """

  def __init__(
    self,
    data: Optional[DistDataset],
    input_nodes: InputNodes,
    num_neighbors: Optional[NumNeighbors] = None,
    batch_size: int = 1,
    shuffle: bool = False,
    drop_last: bool = False,
    with_edge: bool = False,
    with_weight: bool = False,
    edge_dir: Literal['in', 'out'] = 'out',
    collect_features: bool = False,
    to_device: Optional[torch.device] = None,
    random_seed: Optional[int] = None,
    worker_options: Optional[_BasicDistSamplingWorkerOptions] = None,
  ):
    if data is not None and data.is_hetero:
      raise ValueError('DistSubGraphLoader supports homogeneous graphs only')
    config = SamplingConfig(
      SamplingType.SUBGRAPH,
      num_neighbors,
      batch_size,
      shuffle,
      drop_last,
      with_edge,
      collect_features,
      with_neg=False,
      with_weight=with_weight,
      edge_dir=edge_dir,
      seed=random_seed,
    )
    super().__init__(data, node_input(data, input_nodes), config, to_device, worker_options)
