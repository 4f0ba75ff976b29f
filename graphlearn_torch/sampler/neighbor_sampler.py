"""Multi-hop neighbor sampling on one machine (homogeneous and heterogeneous)."""

from dataclasses import dataclass
from typing import Dict, List, Literal, Optional, Union

import torch

from .._ext import ops
from ..data.graph import Graph
from ..typing import (
  HOMO_EDGE_TYPE,
  HOMO_NODE_TYPE,
  EdgeType,
  NodeType,
  NumNeighbors,
  reverse_edge_type,
)
from ..utils.device import resolve_device
from .base import BaseSampler, HeteroSamplerOutput, NeighborOutput, NodeSamplerInput, SamplerOutput

STRATEGIES = ('random',)


@dataclass
class _HopResult:
  """Sampled nodes and edges of all hops, per node type and output edge type."""

  node: Dict[NodeType, torch.Tensor]
  row: Dict[EdgeType, torch.Tensor]
  col: Dict[EdgeType, torch.Tensor]
  edge: Optional[Dict[EdgeType, torch.Tensor]]
  num_sampled_nodes: Dict[NodeType, List[int]]
  num_sampled_edges: Dict[EdgeType, List[int]]
  seed_local: Dict[NodeType, torch.Tensor]


class NeighborSampler(BaseSampler):
  """Samples a fixed number of neighbors per node, hop by hop.

  A homogeneous graph is sampled as the one-type case of a heterogeneous
  one, by the same code.

  Args:
    graph: a Graph, or a dict of them by edge type.
    num_neighbors: neighbors per hop (-1: all); for a heterogeneous graph a
      list for every edge type or a dict of lists by edge type (0 skips an
      edge type in a hop).
    device: where outputs go (CUDA falls back to the CPU without a GPU).
    with_edge: return the ids of the sampled edges.
    with_neg: prepare negative sampling (link sampling).
    with_weight: sample neighbors with probability proportional to edge weight.
    strategy: 'random'.
    edge_dir: 'out' samples out-neighbors (the graph in CSR), 'in'
      in-neighbors (CSC).
    seed: seeds this sampler's random stream; None draws from torch's global
      generator, so ``torch.manual_seed`` governs it.
    replace: sample with replacement.
  """

  def __init__(
    self,
    graph: Union[Graph, Dict[EdgeType, Graph]],
    num_neighbors: Optional[NumNeighbors] = None,
    device: torch.device = torch.device('cuda:0'),
    with_edge: bool = False,
    with_neg: bool = False,
    with_weight: bool = False,
    strategy: str = 'random',
    edge_dir: Literal['in', 'out'] = 'out',
    seed: Optional[int] = None,
    replace: bool = False,
  ):
    if strategy not in STRATEGIES:
      raise ValueError(f'strategy must be one of {STRATEGIES}, got {strategy!r}')
    if edge_dir not in ('in', 'out'):
      raise ValueError(f"edge_dir must be 'in' or 'out', got {edge_dir!r}")
    self.graph = graph
    self.is_hetero = isinstance(graph, dict)
    self._graphs: Dict[EdgeType, Graph] = graph if self.is_hetero else {HOMO_EDGE_TYPE: graph}
    for etype, g in self._graphs.items():
      if not isinstance(g, Graph):
        raise TypeError(f'graph of {etype} must be a Graph, got {type(g).__name__}')
      expected = 'CSR' if edge_dir == 'out' else 'CSC'
      if g.topo.layout != expected:
        raise ValueError(
          f"edge_dir '{edge_dir}' needs a {expected} topology, but {etype} is {g.topo.layout}"
        )
      if with_weight and g.topo.edge_weights is None:
        raise ValueError(f'with_weight=True but the graph of {etype} has no edge weights')
    self.edge_dir = edge_dir
    self.device = resolve_device(device)
    self.with_edge = with_edge
    self.with_neg = with_neg
    self.with_weight = with_weight
    self.strategy = strategy
    self.replace = replace
    self.seed = seed
    self._generator = torch.Generator().manual_seed(seed) if seed is not None else None

    self._node_types: List[NodeType] = sorted(
      {t for etype in self._graphs for t in (etype[0], etype[-1])}
    )
    self._type_index = {t: i for i, t in enumerate(self._node_types)}
    self._num_nodes: Dict[NodeType, int] = {t: 0 for t in self._node_types}
    for etype, g in self._graphs.items():
      seed_t, nbr_t = self._seed_type(etype), self._nbr_type(etype)
      self._num_nodes[seed_t] = max(self._num_nodes[seed_t], g.row_count)
      self._num_nodes[nbr_t] = max(self._num_nodes[nbr_t], g.col_count)
    self.num_neighbors = num_neighbors
    self._fanouts = self._normalize_fanouts(num_neighbors) if num_neighbors is not None else None
    self._inducer = None

  # -- configuration ----------------------------------------------------------

  def _seed_type(self, etype: EdgeType) -> NodeType:
    return etype[0] if self.edge_dir == 'out' else etype[-1]

  def _nbr_type(self, etype: EdgeType) -> NodeType:
    return etype[-1] if self.edge_dir == 'out' else etype[0]

  def _out_edge_type(self, etype: EdgeType) -> EdgeType:
    """The type under which edges sampled along ``etype`` are returned."""
    return reverse_edge_type(etype) if self.edge_dir == 'out' else etype

  def _normalize_fanouts(self, num_neighbors: NumNeighbors) -> Dict[EdgeType, List[int]]:
    def check(values, where: str, allow_zero: bool) -> List[int]:
      if not isinstance(values, (list, tuple)) or not values:
        raise ValueError(f'num_neighbors{where} must be a non-empty list, got {values!r}')
      out = []
      for v in values:
        if not isinstance(v, int) or isinstance(v, bool):
          raise ValueError(f'num_neighbors{where} must hold integers, got {v!r}')
        if v < -1 or (v == 0 and not allow_zero):
          raise ValueError(f'num_neighbors{where} must be -1 (all neighbors) or positive, got {v}')
        out.append(v)
      return out

    if isinstance(num_neighbors, dict):
      if not self.is_hetero:
        raise ValueError('num_neighbors is a dict but the graph is homogeneous')
      unknown = [k for k in num_neighbors if k not in self._graphs]
      if unknown:
        raise ValueError(f'num_neighbors names unknown edge types {unknown}')
      fanouts = {
        etype: check(list(v), f'[{etype}]', allow_zero=True) for etype, v in num_neighbors.items()
      }
      hops = {len(v) for v in fanouts.values()}
      if len(hops) != 1:
        raise ValueError('num_neighbors must give every edge type the same number of hops')
      num_hops = hops.pop()
      return {etype: fanouts.get(etype, [0] * num_hops) for etype in self._graphs}
    values = check(num_neighbors, '', allow_zero=False)
    return {etype: values for etype in self._graphs}

  @property
  def num_hops(self) -> int:
    return len(next(iter(self._fanouts.values()))) if self._fanouts else 0

  def _rng_seed(self) -> int:
    return int(torch.randint(0, 2**62, (1,), generator=self._generator))

  def get_inducer(self, input_batch_size: int = 0):
    """The sampler's reusable inducer (one id space per node type)."""
    if self._inducer is None:
      self._inducer = self.create_inducer(input_batch_size)
    return self._inducer

  def create_inducer(self, input_batch_size: int = 0):
    return ops.Inducer(len(self._node_types))

  def lazy_init_sampler(self) -> None:
    """Prepares the graphs for sampling (nothing to do on the CPU)."""
    for g in self._graphs.values():
      g.lazy_init()

  # -- sampling ---------------------------------------------------------------

  def _check_seeds(self, seeds: torch.Tensor, ntype: NodeType) -> torch.Tensor:
    if not isinstance(seeds, torch.Tensor):
      seeds = torch.as_tensor(seeds)
    if seeds.is_floating_point() or seeds.dtype == torch.bool:
      raise ValueError(f'seed node ids must be integers, got dtype {seeds.dtype}')
    seeds = seeds.to(torch.int64).reshape(-1).cpu()
    if seeds.numel():
      lo, hi, n = int(seeds.min()), int(seeds.max()), self._num_nodes[ntype]
      if lo < 0 or hi >= n:
        what = f"node type '{ntype}'" if self.is_hetero else 'the graph'
        bad = lo if lo < 0 else hi
        raise ValueError(
          f'seed node id {bad} is out of range: {what} has {n} nodes (ids 0..{n - 1}); '
          f'a graph with isolated high-id nodes needs num_nodes in Dataset.init_graph'
        )
    return seeds

  def sample_one_hop(
    self, input_seeds: torch.Tensor, req_num: int, etype: Optional[EdgeType] = None
  ) -> NeighborOutput:
    """Samples ``req_num`` neighbors (-1: all) of each seed along ``etype``."""
    topo = self._graphs[etype if etype is not None else HOMO_EDGE_TYPE].topo
    nbr, nbr_num, eid = ops.sample_neighbors(
      topo.indptr,
      topo.indices,
      topo.edge_ids if self.with_edge else None,
      topo.edge_weights if self.with_weight else None,
      input_seeds,
      int(req_num),
      self.replace,
      self._rng_seed(),
    )
    return NeighborOutput(nbr, nbr_num, eid if self.with_edge else None)

  def _sample(self, seed_dict: Dict[NodeType, torch.Tensor]) -> _HopResult:
    if self._fanouts is None:
      raise ValueError('the sampler has no num_neighbors')
    inducer = self.get_inducer()
    empty = torch.empty(0, dtype=torch.int64)
    seeds = [seed_dict.get(t, empty) for t in self._node_types]
    frontier = dict(zip(self._node_types, inducer.init_nodes(seeds)))
    seed_local = {t: inducer.local_ids(self._type_index[t], s) for t, s in seed_dict.items()}
    nodes = {t: [f] for t, f in frontier.items()}
    num_nodes = {t: [f.numel()] for t, f in frontier.items()}
    out_etypes = {etype: self._out_edge_type(etype) for etype in self._graphs}
    rows = {out_etypes[e]: [] for e in self._graphs}
    cols = {out_etypes[e]: [] for e in self._graphs}
    edges = {out_etypes[e]: [] for e in self._graphs}
    num_edges = {out_etypes[e]: [0] * self.num_hops for e in self._graphs}

    for hop in range(self.num_hops):
      sampled, src_types, nbr_types, srcs, nbrs, nums = [], [], [], [], [], []
      for etype, fanout in self._fanouts.items():
        src = frontier[self._seed_type(etype)]
        if fanout[hop] == 0 or src.numel() == 0:
          continue
        out = self.sample_one_hop(src, fanout[hop], etype)
        sampled.append((etype, out))
        src_types.append(self._type_index[self._seed_type(etype)])
        nbr_types.append(self._type_index[self._nbr_type(etype)])
        srcs.append(src)
        nbrs.append(out.nbr)
        nums.append(out.nbr_num)
      new_nodes, hop_rows, hop_cols = inducer.induce_next(src_types, nbr_types, srcs, nbrs, nums)
      for (etype, out), r, c in zip(sampled, hop_rows, hop_cols):
        key = out_etypes[etype]
        rows[key].append(c)  # message passing: neighbor -> the node it was sampled for
        cols[key].append(r)
        if out.edge is not None:
          edges[key].append(out.edge)
        num_edges[key][hop] = c.numel()
      frontier = dict(zip(self._node_types, new_nodes))
      for t, f in frontier.items():
        nodes[t].append(f)
        num_nodes[t].append(f.numel())

    def cat(parts):
      return torch.cat(parts) if parts else empty

    return _HopResult(
      node={t: cat(v) for t, v in nodes.items()},
      row={k: cat(v) for k, v in rows.items()},
      col={k: cat(v) for k, v in cols.items()},
      edge={k: cat(v) for k, v in edges.items()} if self.with_edge else None,
      num_sampled_nodes=num_nodes,
      num_sampled_edges=num_edges,
      seed_local=seed_local,
    )

  def sample_from_nodes(
    self, inputs: NodeSamplerInput, **kwargs
  ) -> Union[SamplerOutput, HeteroSamplerOutput]:
    """Samples the multi-hop neighborhood of the seed nodes.

    Returns a SamplerOutput for a homogeneous graph, a HeteroSamplerOutput
    otherwise. Seeds come first in ``node`` (deduplicated, in order);
    ``metadata['seed_local']`` gives each input seed's local index.
    """
    inputs = NodeSamplerInput.cast(inputs)
    if self.is_hetero:
      ntype = inputs.input_type
      if ntype is None:
        raise ValueError('the graph is heterogeneous: NodeSamplerInput needs an input_type')
      if ntype not in self._type_index:
        raise ValueError(f'unknown node type {ntype!r}; known: {self._node_types}')
    else:
      ntype = HOMO_NODE_TYPE
    seeds = self._check_seeds(inputs.node, ntype)
    res = self._sample({ntype: seeds})
    return self._to_output(res, ntype, metadata={'seed_local': res.seed_local[ntype]})

  def _to_output(
    self, res: _HopResult, input_type, metadata
  ) -> Union[SamplerOutput, HeteroSamplerOutput]:
    def dev(x):
      if isinstance(x, dict):
        return {k: dev(v) for k, v in x.items()}
      return x.to(self.device) if isinstance(x, torch.Tensor) else x

    if not self.is_hetero:
      return SamplerOutput(
        node=dev(res.node[HOMO_NODE_TYPE]),
        row=dev(res.row[HOMO_EDGE_TYPE]),
        col=dev(res.col[HOMO_EDGE_TYPE]),
        edge=dev(res.edge[HOMO_EDGE_TYPE]) if res.edge is not None else None,
        num_sampled_nodes=res.num_sampled_nodes[HOMO_NODE_TYPE],
        num_sampled_edges=res.num_sampled_edges[HOMO_EDGE_TYPE],
        device=self.device,
        metadata=dev(metadata),
      )
    return HeteroSamplerOutput(
      node=dev(res.node),
      row=dev(res.row),
      col=dev(res.col),
      edge=dev(res.edge),
      num_sampled_nodes=res.num_sampled_nodes,
      num_sampled_edges=res.num_sampled_edges,
      edge_types=list(res.row.keys()),
      input_type=input_type,
      device=self.device,
      metadata=dev(metadata),
    )

  def sample_from_edges(self, inputs, **kwargs):
    raise NotImplementedError(
      'link sampling (sample_from_edges) is not available yet in graphlearn_torch'
    )

  def subgraph(self, inputs):
    raise NotImplementedError('subgraph sampling is not available yet in graphlearn_torch')
