"""DistNeighborLoader: node-wise neighbor sampling across partitions."""

from typing import Literal, Optional

import torch

from ..loader.node_loader import seed_times
from ..sampler.base import NodeSamplerInput, SamplingConfig, SamplingType
from ..typing import InputNodes, NumNeighbors
from .dist_dataset import DistDataset
from .dist_loader import DistLoader, node_input
from .sources.options import _BasicDistSamplingWorkerOptions


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
    batch_size: seeds per batch.
    shuffle: reshuffle the seeds every epoch.
    drop_last: drop the last incomplete batch.
    with_edge: return sampled edge ids (and edge features).
    with_weight: sample proportionally to edge weights.
    edge_dir: 'out' or 'in'; must be the dataset's.
    collect_features: gather features and labels into the batches.
    to_device: where batches go.
    random_seed: seeds sampling and shuffling.
    worker_options: where sampling runs (default: collocated).
    input_time: each seed's time (temporal sampling); batches carry
      ``seed_time``.
    time_attr: temporal sampling by the partitions' 'node_time' or
      'edge_time' (written by the partitioner), as PyG's ``time_attr``.
    temporal_strategy: 'uniform' or 'last' (the most recent neighbors).
    disjoint: every seed grows a subgraph of its own; the batch's ``batch``
      vector gives each node's seed. Temporal sampling is always disjoint.
    subgraph_type: 'directional', 'bidirectional' or 'induced' (PyG's).
  """

  def __init__(
    self,
    data: Optional[DistDataset],
    num_neighbors: NumNeighbors,
    input_nodes: InputNodes,
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
    input_time: Optional[torch.Tensor] = None,
    time_attr: Optional[str] = None,
    temporal_strategy: str = 'uniform',
    disjoint: bool = False,
    subgraph_type: str = 'directional',
  ):
    config = SamplingConfig(
      SamplingType.NODE,
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
      time_attr=time_attr,
      temporal_strategy=temporal_strategy,
      disjoint=disjoint,
      subgraph_type=subgraph_type,
    )
    inputs = node_input(data, input_nodes)
    if input_time is not None:
      if not isinstance(inputs, NodeSamplerInput):
        raise ValueError('input_time needs the seeds as ids, not seeds that servers read')
      inputs = NodeSamplerInput(
        inputs.node, inputs.input_type, seed_times(input_time, inputs.node, 'input_time')
      )
    super().__init__(data, inputs, config, to_device, worker_options)
