"""NeighborLoader: PyG-style mini-batches of sampled neighborhoods."""

from typing import List, Optional, Tuple

import torch

from ..data.dataset import Dataset
from ..sampler.base import EdgeIndex, NodeSamplerInput, SamplerOutput
from ..sampler.neighbor_sampler import NeighborSampler, build_neighbor_sampler
from ..sampler.schema import RandomStream
from ..typing import InputNodes, NumNeighbors
from .node_loader import NodeLoader


class NeighborLoader(NodeLoader):
  """Samples the multi-hop neighborhood of each batch of seed nodes and yields
  PyG ``Data`` (or ``HeteroData``) with ``x``, ``y``, ``edge_index``,
  ``n_id``, ``e_id`` (with ``with_edge``), ``batch_size``, ``input_id``,
  ``num_sampled_nodes`` and ``num_sampled_edges``. The first ``batch_size``
  nodes are the seeds, in order. Needs neither pyg-lib nor torch-sparse.

  On the CPU it samples and gathers features in the calling process, on
  ``torch.get_num_threads()`` threads (at most
  ``graphlearn_torch.utils.set_kernel_threads``' cap): set either to leave
  cores to the model or to other jobs on the host.

  Args:
    data: the dataset.
    num_neighbors: neighbors per hop (-1: all), or a dict of them by edge type.
    input_nodes: the seeds: ids, a mask, a node type, or (node type, ids).
    neighbor_sampler: a sampler to use instead of building one.
    batch_size: seeds per batch.
    shuffle: reshuffle the seeds every epoch.
    drop_last: drop the last incomplete batch.
    with_edge: return edge ids (``e_id``) and edge features (``edge_attr``).
    with_weight: sample neighbors in proportion to edge weights.
    strategy: 'random'.
    device: where batches go (CUDA falls back to the CPU without a GPU).
    as_pyg_v1: yield ``(batch_size, n_id, adjs)`` as PyG 1.x did (homogeneous).
    seed: seeds both sampling and shuffling for reproducible batches.
    replace: sample neighbors with replacement.
    input_time: each seed's time (temporal sampling); batches carry ``seed_time``.
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
    input_nodes: InputNodes,
    neighbor_sampler: Optional[NeighborSampler] = None,
    batch_size: int = 1,
    shuffle: bool = False,
    drop_last: bool = False,
    with_edge: bool = False,
    with_weight: bool = False,
    strategy: str = 'random',
    device: torch.device = torch.device('cuda:0'),
    as_pyg_v1: bool = False,
    seed: Optional[int] = None,
    replace: bool = False,
    input_time: Optional[torch.Tensor] = None,
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
    if as_pyg_v1 and (neighbor_sampler.is_hetero or getattr(neighbor_sampler, 'disjoint', False)):
      raise ValueError('as_pyg_v1 supports homogeneous, non-disjoint sampling only')
    self.as_pyg_v1 = as_pyg_v1
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
      input_time=input_time,
      **kwargs,
    )

  def _sample_batch(self, index: torch.Tensor, random: RandomStream):
    if not self.as_pyg_v1:
      return super()._sample_batch(index, random)
    seeds = self.input_nodes[index]
    out = self.sampler.sample_from_nodes(NodeSamplerInput(seeds, self.input_type), random=random)
    return self._to_pyg_v1(out, seeds.numel())

  def _to_pyg_v1(self, out: SamplerOutput, batch_size: int) -> Tuple[int, torch.Tensor, List]:
    """(batch_size, n_id, adjs): one EdgeIndex per hop, the outermost first."""
    node_cum = torch.tensor(out.num_sampled_nodes).cumsum(0).tolist()
    edge_cum = [0] + torch.tensor(out.num_sampled_edges).cumsum(0).tolist()
    adjs = []
    for hop in range(len(out.num_sampled_edges)):
      lo, hi = edge_cum[hop], edge_cum[hop + 1]
      edge_index = torch.stack([out.row[lo:hi], out.col[lo:hi]])
      e_id = out.edge[lo:hi] if out.edge is not None else None
      adjs.append(EdgeIndex(edge_index, e_id, (node_cum[hop + 1], node_cum[hop])))
    return batch_size, out.node, adjs[::-1]
