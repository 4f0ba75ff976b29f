"""DistNeighborLoader: node-wise neighbor sampling across partitions."""

from typing import Optional

import torch

from ...loader.node_loader import seed_times
from ...loader.options import TEMPORAL, LoaderOptions, loader_options
from ...sampler.base import NodeSamplerInput, SamplingType
from ...typing import InputNodes, NumNeighbors
from ..data.dataset import DistDataset
from ..sources.options import _BasicDistSamplingWorkerOptions
from .loader import BATCHING_AND_SAMPLING, DistLoader, node_input, sampling_config


@loader_options(
  'data',
  'num_neighbors',
  'input_nodes',
  *BATCHING_AND_SAMPLING,
  keyword=TEMPORAL,
)
class DistNeighborLoader(DistLoader):
  r"""Mini-batches of seed nodes with their multi-hop neighborhoods, sampled
  across the partitions of a distributed dataset.

  Threads: collocated sampling (the default) runs in this process on
  ``torch.get_num_threads()`` threads, at most this process's share of the
  host's cores (``init_rpc`` sets it: cores // the job's processes on this
  host; ``graphlearn_torch.utils.set_kernel_threads`` or
  ``GLT_KERNEL_THREADS`` override it); sampling processes
  (``MpDistSamplingWorkerOptions``) use 1 thread each.

  Args:
    data: this process's partition (None on a server-client client).
    num_neighbors: neighbors per hop (a dict by edge type when heterogeneous).
    input_nodes: this process's seeds: ids, a mask, a node type or
      ``(node type, ids)``; on a client also what GLT takes there, read by
      the servers: a ``Split`` (each server's split), a seed-file path (each
      server reads it), a list of paths (one per server), any of those as
      ``(node type, ...)``, or RemoteSamplerInputs.
    to_device: where batches go.
    worker_options: where sampling runs (default: collocated).
    input_time: each seed's time (temporal sampling); batches carry
      ``seed_time``.
  """

  def __init__(
    self,
    data: Optional[DistDataset],
    num_neighbors: NumNeighbors,
    input_nodes: InputNodes,
    to_device: Optional[torch.device] = None,
    worker_options: Optional[_BasicDistSamplingWorkerOptions] = None,
    input_time: Optional[torch.Tensor] = None,
    *,
    options: LoaderOptions,
  ):
    config = sampling_config(SamplingType.NODE, num_neighbors, options)
    inputs = node_input(data, input_nodes)
    if input_time is not None:
      if not isinstance(inputs, NodeSamplerInput):
        raise ValueError('input_time needs the seeds as ids, not seeds that servers read')
      inputs = NodeSamplerInput(
        inputs.node, inputs.input_type, seed_times(input_time, inputs.node, 'input_time')
      )
    super().__init__(data, inputs, config, to_device, worker_options)
