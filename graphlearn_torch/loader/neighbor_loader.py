"""NeighborLoader: PyG-style mini-batches of sampled neighborhoods."""

from typing import List, Optional, Tuple

import torch

from ..data.dataset import Dataset
from ..sampler.base import EdgeIndex, NodeSamplerInput, SamplerOutput
from ..sampler.neighbor_sampler import NeighborSampler
from ..sampler.schema import RandomStream
from ..typing import InputNodes, NumNeighbors
from .node_loader import NodeLoader
from .options import ON_ONE_MACHINE, TEMPORAL, LoaderOptions, build_neighbor_sampler, loader_options


@loader_options(
  'data',
  'num_neighbors',
  'input_nodes',
  'neighbor_sampler',
  'batch_size',
  'shuffle',
  'drop_last',
  'with_edge',
  'with_weight',
  'strategy',
  'device',
  'as_pyg_v1',
  'seed',
  keyword=('replace', 'is_sorted') + TEMPORAL + ON_ONE_MACHINE,
)
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
    device: where batches go (CUDA falls back to the CPU without a GPU).
    as_pyg_v1: yield ``(batch_size, n_id, adjs)`` as PyG 1.x did (homogeneous).
    input_time: each seed's time (temporal sampling); batches carry ``seed_time``.
  """

  def __init__(
    self,
    data: Dataset,
    num_neighbors: NumNeighbors,
    input_nodes: InputNodes,
    neighbor_sampler: Optional[NeighborSampler] = None,
    device: torch.device = torch.device('cuda:0'),
    as_pyg_v1: bool = False,
    input_time: Optional[torch.Tensor] = None,
    *,
    options: LoaderOptions,
  ):
    if neighbor_sampler is None:
      neighbor_sampler = build_neighbor_sampler(data, num_neighbors, options, device)
    if as_pyg_v1 and (neighbor_sampler.is_hetero or getattr(neighbor_sampler, 'disjoint', False)):
      raise ValueError('as_pyg_v1 supports homogeneous, non-disjoint sampling only')
    self.as_pyg_v1 = as_pyg_v1
    super().__init__(data, neighbor_sampler, input_nodes, device, input_time, options=options)
    self._launches_ahead = self._launches_ahead and not as_pyg_v1  # its own batches

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
