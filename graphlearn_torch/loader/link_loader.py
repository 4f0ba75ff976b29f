"""LinkLoader: batches of seed edges (with negative sampling) into PyG data."""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal, Optional, Tuple, Union

import torch

from ..data.dataset import Dataset
from ..sampler.base import BaseSampler, EdgeSamplerInput, NegativeSampling, SamplingType
from ..sampler.schema import RandomStream
from ..typing import EdgeType, InputEdges
from ..utils.launched import Launched
from ..utils.memory import require_memory
from .base import SamplerLoader
from .node_loader import seed_times
from .options import BATCHING, ON_ONE_MACHINE, LoaderOptions, loader_options

if TYPE_CHECKING:  # PyG is imported on first use: sampling processes never need it
  from torch_geometric.data import Data, HeteroData


def get_edge_label_index(
  data: Dataset, edge_label_index: InputEdges
) -> Tuple[Optional[EdgeType], torch.Tensor]:
  """Returns ``(edge type, [2, n] seed edges)`` for a link loader.

  Accepts None (every edge of a homogeneous graph), a ``[2, n]`` tensor or a
  (src, dst) pair, an edge type (all its edges), or ``(edge type, edges)``.
  Without ``data`` (a server-client client) the edges must be given, and
  their ids are checked by the servers.
  """
  hetero = data.is_hetero if data is not None else False
  etype, edges = None, edge_label_index
  if (
    isinstance(edge_label_index, tuple)
    and len(edge_label_index) == 3
    and all(isinstance(x, str) for x in edge_label_index)
  ):
    etype, edges = edge_label_index, None
  elif (
    isinstance(edge_label_index, (tuple, list))
    and len(edge_label_index) == 2
    and isinstance(edge_label_index[0], tuple)
  ):
    etype, edges = tuple(edge_label_index[0]), edge_label_index[1]
  if data is None and edges is None:
    raise ValueError('without a dataset, edge_label_index must give the seed edges')
  if hetero and etype is None:
    raise ValueError('the dataset is heterogeneous: give edge_label_index as (edge_type, edges)')
  if hetero and etype not in (data.get_edge_types() or []):
    raise ValueError(f'unknown edge type {etype!r}; known: {data.get_edge_types()}')
  if edges is None:
    src, dst, _, _ = data.get_graph(etype).topo.to_coo()
    return etype, torch.stack([src, dst])
  if isinstance(edges, (tuple, list)):
    edges = torch.stack([torch.as_tensor(edges[0]), torch.as_tensor(edges[1])])
  edges = torch.as_tensor(edges)
  if edges.dim() != 2 or edges.size(0) != 2:
    raise ValueError(f'edge_label_index must have shape [2, num_edges], got {tuple(edges.shape)}')
  if edges.is_floating_point():
    raise ValueError(f'edge_label_index must hold integer node ids, got dtype {edges.dtype}')
  edges = edges.to(torch.int64)
  if data is None:
    return etype, edges
  src_t, dst_t = (etype[0], etype[-1]) if hetero else (None, None)
  for row, ntype, what in ((0, src_t, 'source'), (1, dst_t, 'destination')):
    n = data.num_nodes(ntype)
    ids = edges[row]
    if ids.numel() and (int(ids.min()) < 0 or int(ids.max()) >= n):
      bad = int(ids.min()) if int(ids.min()) < 0 else int(ids.max())
      raise ValueError(f'edge_label_index holds {what} node id {bad}, out of range [0, {n})')
  return etype, edges


def check_negatives_fit(neg_sampling: Optional[NegativeSampling], batch_size: int) -> None:
  """Raises MemoryError when a batch's negatives alone (their node ids)
  would take more memory than this process can get: an ``amount`` that
  asks for that many is a mistake to name, not an allocation to attempt.

  Args:
    neg_sampling: the loader's negative sampling (None: no negatives).
    batch_size: seed edges per batch.
  """
  if neg_sampling is None:
    return
  count = neg_sampling.count(batch_size)
  nbytes = count * (16 if neg_sampling.is_binary() else 8)  # int64 pairs, or destinations
  require_memory(
    nbytes,
    lambda available, source: (
      f'neg_sampling amount {neg_sampling.amount} asks for {count:,} negatives a batch of '
      f'{batch_size} seed edges ({nbytes / 2**30:.1f} GiB of node ids alone), more than the '
      f'{available / 2**30:.1f} GiB this process can get ({source}); lower the amount or '
      'batch_size'
    ),
  )


def check_edge_label(
  edge_label: Optional[torch.Tensor],
  edge_label_index: torch.Tensor,
  neg_sampling: Optional[NegativeSampling],
) -> Optional[torch.Tensor]:
  """Checks a link loader's edge labels; shifts them up by one under binary
  negative sampling when they hold 0, as PyG does (0 means "negative").

  Args:
    edge_label: a label per seed edge, or None.
    edge_label_index: the ``[2, n]`` seed edges.
    neg_sampling: the loader's negative sampling.
  """
  if edge_label is None:
    return None
  edge_label = torch.as_tensor(edge_label)
  if edge_label.size(0) != edge_label_index.size(1):
    raise ValueError(
      f'edge_label has {edge_label.size(0)} entries for {edge_label_index.size(1)} seed edges'
    )
  if neg_sampling is not None and neg_sampling.is_binary():
    if edge_label.numel() and int(edge_label.min()) == 0:
      edge_label = edge_label + 1
  return edge_label


@loader_options(
  'data',
  'link_sampler',
  'edge_label_index',
  'edge_label',
  'neg_sampling',
  'device',
  'edge_dir',
  keyword=BATCHING + ('with_edge',) + ON_ONE_MACHINE,
)
class LinkLoader(SamplerLoader):
  """Iterates over mini-batches of seed edges, sampled and collated to PyG.

  Batches carry ``edge_label_index`` and ``edge_label`` (binary negative
  sampling, or none), or ``src_index``, ``dst_pos_index`` and
  ``dst_neg_index`` (triplet), indexing the batch's nodes, plus ``input_id``.

  Args:
    data: the dataset.
    link_sampler: samples the neighborhood of seed edges' endpoints.
    edge_label_index: the seed edges (see ``get_edge_label_index``).
    edge_label: a label per seed edge.
    neg_sampling: negative sampling ('binary' or 'triplet', amount).
    device: where batches go (CUDA falls back to the CPU without a GPU).
    edge_dir: the sampling direction of the sampler.
    edge_label_time: each seed edge's time (temporal sampling: both ends,
      and the edge's negatives, reach only the past of it); batches then
      carry ``edge_label_time`` (binary) or ``seed_time`` (triplet).
  """

  def __init__(
    self,
    data: Dataset,
    link_sampler: BaseSampler,
    edge_label_index: InputEdges = None,
    edge_label: Optional[torch.Tensor] = None,
    neg_sampling: Optional[NegativeSampling] = None,
    device: torch.device = torch.device('cuda:0'),
    edge_dir: Literal['out', 'in'] = 'out',
    edge_label_time: Optional[torch.Tensor] = None,
    *,
    options: LoaderOptions,
  ):
    self.input_type, self.edge_label_index = get_edge_label_index(data, edge_label_index)
    self.neg_sampling = NegativeSampling.cast(neg_sampling)
    check_negatives_fit(self.neg_sampling, options.batch_size)
    self.edge_label = check_edge_label(edge_label, self.edge_label_index, self.neg_sampling)
    self.edge_dir = edge_dir
    self.edge_label_time = seed_times(edge_label_time, self.edge_label_index, 'edge_label_time')
    inputs = (self.input_type, self.edge_label_index, self.edge_label, self.neg_sampling)
    if self.edge_label_time is not None:
      inputs += (self.edge_label_time,)
    num_seeds = self.edge_label_index.size(1)
    super().__init__(data, link_sampler, num_seeds, device, options, inputs)

  def _sample_batch(self, index: torch.Tensor, random: RandomStream) -> Union[Data, HeteroData]:
    out = self.sampler.sample_from_edges(self._inputs(index), random=random)
    return self._collate_fn(out, index, SamplingType.LINK, self.input_type, self.edge_dir)

  def _launch_batch(self, index: torch.Tensor, random: RandomStream) -> Launched:
    if not self._launches_ahead:
      return super()._launch_batch(index, random)
    launched = self.sampler.launch_from_edges(self._inputs(index), random=random)
    return launched.then(
      lambda out: self._collate_fn(out, index, SamplingType.LINK, self.input_type, self.edge_dir)
    )

  def _inputs(self, index: torch.Tensor) -> EdgeSamplerInput:
    """The sampler's input of the batch of seed edge positions ``index``."""
    edges = self.edge_label_index[:, index]
    label = self.edge_label[index] if self.edge_label is not None else None
    time = self.edge_label_time[index] if self.edge_label_time is not None else None
    return EdgeSamplerInput(edges[0], edges[1], label, self.input_type, self.neg_sampling, time)
