"""DistSubGraphLoader: induced subgraphs around seed nodes, across partitions."""

from typing import Optional

import torch

from ...loader.options import LoaderOptions, loader_options
from ...sampler.base import SamplingType
from ...typing import InputNodes, NumNeighbors
from ..data.dataset import DistDataset
from ..sources.options import _BasicDistSamplingWorkerOptions
from .loader import BATCHING_AND_SAMPLING, DistLoader, node_input, sampling_config


@loader_options(
  'data',
  'input_nodes',
  'num_neighbors',
  *BATCHING_AND_SAMPLING,
)
class DistSubGraphLoader(DistLoader):
  r"""Mini-batches of seed nodes with the subgraph induced by them and (with
  ``num_neighbors``) their sampled neighbors: every edge of the whole graph
  among those nodes. Batches carry ``mapping``, the seeds' local indices.
  Homogeneous graphs only.

  Args:
    data: this process's partition.
    input_nodes: this process's seeds: ids, a mask or ``(node type, ids)``.
    num_neighbors: neighbors per hop; None keeps just the seeds.
    to_device: where batches go.
    worker_options: where sampling runs (default: collocated).
  """

  def __init__(
    self,
    data: Optional[DistDataset],
    input_nodes: InputNodes,
    num_neighbors: Optional[NumNeighbors] = None,
    to_device: Optional[torch.device] = None,
    worker_options: Optional[_BasicDistSamplingWorkerOptions] = None,
    *,
    options: LoaderOptions,
  ):
    if data is not None and data.is_hetero:
      raise ValueError('DistSubGraphLoader supports homogeneous graphs only')
    config = sampling_config(SamplingType.SUBGRAPH, num_neighbors, options)
    super().__init__(data, node_input(data, input_nodes), config, to_device, worker_options)
