"""Our neighbor sampler behind PyG's ``BaseSampler`` interface, so that PyG's
own ``NodeLoader`` and ``LinkLoader`` (their transforms, ``filter_per_worker``
and worker processes) sample with it on a machine without pyg-lib or
torch-sparse.

  from torch_geometric.loader import NodeLoader
  sampler = glt.sampler.PyGNeighborSampler(data, num_neighbors=[15, 10])
  loader = NodeLoader(data, node_sampler=sampler, input_nodes=data.train_mask,
                      batch_size=1024, shuffle=True)
"""

import warnings
from typing import Dict, List, Optional, Tuple, Union

import torch
import torch_geometric.sampler as pyg
from torch_geometric.data import Data, FeatureStore, GraphStore, HeteroData, remote_backend_utils
from torch_geometric.sampler.base import NumNeighbors as PyGNumNeighbors
from torch_geometric.sampler.base import SubgraphType

from ..data.dataset import Dataset
from ..typing import EdgeType
from .base import EdgeSamplerInput, HeteroSamplerOutput, NegativeSampling, NodeSamplerInput
from .neighbor_sampler import NeighborSampler

PyGData = Union[Data, HeteroData, Tuple[FeatureStore, GraphStore]]


class PyGNeighborSampler(pyg.BaseSampler):
  r"""A neighbor sampler for PyG's ``NodeLoader`` and ``LinkLoader``,
  constructed as PyG's ``torch_geometric.sampler.NeighborSampler`` is, that
  samples with graphlearn_torch's kernels.

  Batches follow PyG's layout: seeds first in ``n_id``, ``edge_index`` in
  message-passing order (row: the sampled neighbor, col: the node it was
  sampled for), ``e_id`` the sampled edges' positions in the input
  ``edge_index`` (see ``edge_permutation``), per-hop ``num_sampled_nodes``
  and ``num_sampled_edges``, and ``input_id``/``batch_size`` (node batches)
  or ``edge_label_index``/``edge_label`` (binary) and ``src_index``/
  ``dst_pos_index``/``dst_neg_index`` (triplet) for link batches.

  Binary negative edges are strict (checked not to be edges of the graph),
  unlike PyG's, which draws node pairs at random.

  Args:
    data: a ``Data``, a ``HeteroData``, or a ``(FeatureStore, GraphStore)``
      pair whose graph store answers ``get_edge_index`` in COO.
    num_neighbors: neighbors per hop (-1: all), as PyG takes it: a list, a
      dict of lists by edge type, or a ``NumNeighbors``.
    subgraph_type: 'directional' (PyG's default), 'bidirectional' or
      'induced' (not disjoint), as PyG defines them.
    replace: sample with replacement.
    disjoint: every seed grows a subgraph of its own; batches carry PyG's
      ``batch`` vector. Temporal sampling is always disjoint, as in PyG.
    temporal_strategy: 'uniform' or 'last' (the most recent neighbors).
    time_attr: temporal sampling: a node attribute (a seed of time t
      reaches only nodes of time <= t) or an edge attribute (only edges of
      time <= t) of ``data`` (``Data``/``HeteroData``).
    weight_attr: an edge attribute of ``data`` to sample neighbors by (with
      probability proportional to it).
    is_sorted: the neighbors are in time order already (checked, not
      sorted).
    share_memory: move the sampling topology to shared memory, for data
      loader workers started by 'spawn'.
    directed: PyG's deprecated flag: False samples induced subgraphs
      (``subgraph_type='induced'``, with PyG's warning).
    sample_direction: 'forward' samples neighbors along incoming edges (a
      seed's sources), 'backward' along outgoing ones (its destinations);
      both return edges in the graph's direction, under its edge types,
      as PyG does.
    seed: seeds the sampler's random stream (None: torch's global
      generator, which each data loader worker seeds differently).
  """

  def __init__(
    self,
    data: PyGData,
    num_neighbors: Union[PyGNumNeighbors, List[int], Dict[EdgeType, List[int]]],
    subgraph_type: Union[SubgraphType, str] = 'directional',
    replace: bool = False,
    disjoint: bool = False,
    temporal_strategy: str = 'uniform',
    time_attr: Optional[str] = None,
    weight_attr: Optional[str] = None,
    is_sorted: bool = False,
    share_memory: bool = False,
    directed: bool = True,
    sample_direction: str = 'forward',
    seed: Optional[int] = None,
  ):
    if sample_direction not in ('forward', 'backward'):
      raise ValueError(
        f"sample_direction must be 'forward' or 'backward', got {sample_direction!r}"
      )
    if not directed:
      subgraph_type = SubgraphType.induced
      warnings.warn(
        "The usage of the 'directed' argument in 'PyGNeighborSampler' is deprecated. Use "
        "`subgraph_type='induced'` instead.",
        stacklevel=2,
      )
    # Backward: the seeds' out-edges, sampled as our edge_dir 'out'.
    self.backward = sample_direction == 'backward'
    edge_dir = 'out' if self.backward else 'in'
    edges, num_nodes, weights, self._edge_permutation = _graph_of(data, weight_attr)
    self.is_hetero = isinstance(edges, dict)
    self.node_types = list(num_nodes) if self.is_hetero else None
    self.edge_types = list(edges) if self.is_hetero else None
    fanouts = PyGNumNeighbors(num_neighbors)
    self.num_hops = fanouts.num_hops
    self.dataset = Dataset(edge_dir=edge_dir)
    self.dataset.init_graph(edges, edge_weights=weights, graph_mode='CPU', num_nodes=num_nodes)
    if share_memory:
      self.dataset.share_ipc()
    self.sampler = NeighborSampler(
      self.dataset.graph,
      fanouts.get_values(self.edge_types),
      device=torch.device('cpu'),
      with_edge=True,
      with_neg=True,
      with_weight=weight_attr is not None,
      edge_dir=edge_dir,
      seed=seed,
      replace=replace,
      temporal_strategy=temporal_strategy,
      disjoint=disjoint,
      subgraph_type=SubgraphType(subgraph_type).value,
      is_sorted=is_sorted,
      **_times_of(data, time_attr),
    )
    self.disjoint = self.sampler.disjoint
    # The edge type each output edge type of ours stands for (ours are the
    # reverse types when backward).
    self._graph_edge_type = {
      self.sampler.schema.out_edge_type(e): e for e in self.sampler.schema.edge_types
    }

  @property
  def edge_permutation(self):
    r"""None for ``Data``/``HeteroData`` (sampled edge ids are positions in
    ``edge_index``); for a graph store that holds CSR or CSC, the map from
    its edges converted to COO to its own edge ids."""
    return self._edge_permutation

  def sample_from_nodes(
    self, index: pyg.NodeSamplerInput, **kwargs
  ) -> Union[pyg.SamplerOutput, pyg.HeteroSamplerOutput]:
    r"""Samples the neighborhoods of a batch of seed nodes (PyG's layout;
    ``metadata`` is ``(input_id, seed_time)``).

    Args:
      index: the batch's seeds (and their times) from PyG's ``NodeLoader``.
    """
    out = self.sampler.sample_from_nodes(NodeSamplerInput(index.node, index.input_type, index.time))
    if not torch.equal(out.metadata['seed_local'], torch.arange(index.node.numel())):
      raise ValueError(
        'a batch holds the same seed node twice; PyG batches need each seed once '
        '(deduplicate input_nodes)'
      )
    return self._to_pyg(out, (index.input_id, index.time))

  def sample_from_edges(
    self, index: pyg.EdgeSamplerInput, neg_sampling: Optional[pyg.NegativeSampling] = None
  ) -> Union[pyg.SamplerOutput, pyg.HeteroSamplerOutput]:
    r"""Samples the neighborhoods of both ends of a batch of seed edges, with
    optional negative sampling (PyG's layout; ``metadata`` is
    ``(input_id, edge_label_index, edge_label, None)`` or, for triplets,
    ``(input_id, src_index, dst_pos_index, dst_neg_index, None)``).

    Args:
      index: the batch's seed edges from PyG's ``LinkLoader``.
      neg_sampling: PyG's negative sampling settings.
    """
    neg = None
    if neg_sampling is not None:
      if neg_sampling.src_weight is not None:
        raise NotImplementedError('negative sampling by src_weight is not supported')
      neg = NegativeSampling(neg_sampling.mode.value, neg_sampling.amount, neg_sampling.dst_weight)
    out = self.sampler.sample_from_edges(
      EdgeSamplerInput(index.row, index.col, index.label, index.input_type, neg, index.time)
    )
    meta = out.metadata
    if neg is not None and neg.is_triplet():
      fields = (meta['src_index'], meta['dst_pos_index'], meta['dst_neg_index'])
      src_time = meta.get('seed_time')
    else:
      fields = (meta['edge_label_index'], meta.get('edge_label'))
      src_time = meta.get('edge_label_time')
    return self._to_pyg(out, (index.input_id, *fields, src_time))

  def _to_pyg(self, out, metadata: tuple) -> Union[pyg.SamplerOutput, pyg.HeteroSamplerOutput]:
    # PyG counts per hop in lists: nodes for the seeds and every hop, edges
    # for every hop, for every type (zeros where a type was not reached).
    # (None where the subgraph type drops them, as PyG's).
    def counts(values, length: int) -> Optional[List[int]]:
      if values is None:
        return None
      values = [int(v) for v in values]
      return values + [0] * (length - len(values))

    def by_type(values, keys, length: int):
      return None if values is None else {k: counts(values[k], length) for k in keys}

    # Ours run neighbor -> seed; backward, that is the graph's edge reversed.
    rows, cols = (out.col, out.row) if self.backward else (out.row, out.col)
    if not isinstance(out, HeteroSamplerOutput):
      return pyg.SamplerOutput(
        node=out.node,
        row=rows,
        col=cols,
        edge=out.edge,
        batch=out.seed_index,
        num_sampled_nodes=counts(out.num_sampled_nodes, self.num_hops + 1),
        num_sampled_edges=counts(out.num_sampled_edges, self.num_hops),
        metadata=metadata,
      )
    out = out.with_every_type()
    rows, cols = (out.col, out.row) if self.backward else (out.row, out.col)

    def graph_types(values):
      if values is None:
        return None
      return {self._graph_edge_type[k]: v for k, v in values.items()}

    return pyg.HeteroSamplerOutput(
      node=out.node,
      row=graph_types(rows),
      col=graph_types(cols),
      edge=graph_types(out.edge),
      batch=out.seed_index,
      num_sampled_nodes=by_type(out.num_sampled_nodes, out.node, self.num_hops + 1),
      num_sampled_edges=graph_types(by_type(out.num_sampled_edges, out.row, self.num_hops)),
      metadata=metadata,
    )


def _times_of(data: PyGData, time_attr: Optional[str]) -> dict:
  r"""``{'node_time': ...}`` or ``{'edge_time': ...}``: the attribute
  ``time_attr`` of ``data`` as NeighborSampler takes it (by type for a
  ``HeteroData``; edge times by position in ``edge_index``), or {}."""
  if time_attr is None:
    return {}
  if not isinstance(data, (Data, HeteroData)):
    raise NotImplementedError('time_attr is supported for Data and HeteroData')
  if isinstance(data, Data):
    if data.is_node_attr(time_attr):
      return {'node_time': data[time_attr]}
    if data.is_edge_attr(time_attr):
      return {'edge_time': data[time_attr]}
    raise ValueError(f"the time attribute '{time_attr}' is neither a node nor an edge attribute")
  node_time = {t: data[t][time_attr] for t in data.node_types if time_attr in data[t]}
  edge_time = {e: data[e][time_attr] for e in data.edge_types if time_attr in data[e]}
  if node_time and edge_time:
    raise ValueError(f"the time attribute '{time_attr}' holds both node and edge times")
  if not node_time and not edge_time:
    raise ValueError(f"the time attribute '{time_attr}' is neither a node nor an edge attribute")
  return {'node_time': node_time} if node_time else {'edge_time': edge_time}


def _homo_num_nodes(feature_store: FeatureStore, graph_store: GraphStore) -> Optional[int]:
  r"""The node count of a homogeneous store pair: the edges' size, else the
  node features' rows, else None (the edges' largest id)."""
  sizes = [max(a.size) for a in graph_store.get_all_edge_attrs() if a.size is not None]
  if sizes:
    return max(sizes)
  for attr in feature_store.get_all_tensor_attrs():
    size = feature_store.get_tensor_size(attr)
    if size is not None:
      return int(size[0])
  return None


def _graph_of(data: PyGData, weight_attr: Optional[str]):
  r"""``(edge_index, num_nodes, edge weights, edge permutation)`` of PyG
  data, as tensors or dicts by type; the permutation (None: none) maps the
  positions in ``edge_index`` to the edge ids of a graph store."""

  def plain(t: torch.Tensor) -> torch.Tensor:
    return t.as_subclass(torch.Tensor)  # PyG's EdgeIndex, say

  if isinstance(data, Data):
    if data.edge_index is None:
      raise ValueError('the Data has no edge_index (a SparseTensor adj_t is not supported)')
    weights = plain(data[weight_attr]) if weight_attr is not None else None
    return plain(data.edge_index), data.num_nodes, weights, None
  if isinstance(data, HeteroData):
    edges = {et: plain(data[et].edge_index) for et in data.edge_types}
    num_nodes = {nt: data[nt].num_nodes for nt in data.node_types}
    weights = None
    if weight_attr is not None:
      weights = {et: plain(data[et][weight_attr]) for et in data.edge_types}
    return edges, num_nodes, weights, None
  if isinstance(data, (tuple, list)) and len(data) == 2:
    feature_store, graph_store = data
    if weight_attr is not None:
      raise NotImplementedError('weight_attr is not supported for (FeatureStore, GraphStore)')
    if not graph_store.get_all_edge_attrs():
      raise ValueError('the graph store holds no edges')
    # COO of every edge type, converted from the stored layout (``perm``
    # maps the converted edges back to the stored ones).
    row, col, perm = graph_store.coo()
    if not isinstance(row, dict):
      edge_index = torch.stack([plain(row), plain(col)])
      return edge_index, _homo_num_nodes(feature_store, graph_store), None, perm
    edges = {et: torch.stack([plain(row[et]), plain(col[et])]) for et in row}
    ntypes = dict.fromkeys(t for et in edges for t in (et[0], et[-1]))
    num_nodes = {t: remote_backend_utils.num_nodes(feature_store, graph_store, t) for t in ntypes}
    return edges, num_nodes, None, perm
  raise TypeError(
    'PyGNeighborSampler samples a Data, a HeteroData or a (FeatureStore, GraphStore) '
    f'pair, got {type(data).__name__}'
  )


__all__ = ['PyGNeighborSampler']
