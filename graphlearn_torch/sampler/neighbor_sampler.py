"""Multi-hop neighbor sampling on one machine (homogeneous and heterogeneous)."""

import math
from dataclasses import dataclass
from typing import Dict, Generator, List, Literal, Optional, Tuple, Union

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
from .base import (
  BaseSampler,
  EdgeSamplerInput,
  HeteroSamplerOutput,
  NegativeSampling,
  NeighborOutput,
  NodeSamplerInput,
  SamplerOutput,
)
from .negative_sampler import RandomNegativeSampler

STRATEGIES = ('random',)

# One draw of a hop: (edge type, seed nodes, neighbors per seed).
HopRequest = Tuple[EdgeType, torch.Tensor, int]

# Node types up to this size get an id-indexed inducer map (4 bytes a node).
DENSE_INDUCER_MAX_NODES = 1 << 26


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


@dataclass
class LinkBatch:
  """A checked batch of seed edges on its way through link sampling.

  Args:
    etype: the seed edges' type.
    row: their sources.
    col: their destinations.
    label: their labels (or None).
    neg: the negative sampling asked for (or None).
  """

  etype: EdgeType
  row: torch.Tensor
  col: torch.Tensor
  label: Optional[torch.Tensor]
  neg: Optional[NegativeSampling]

  @property
  def num_negatives(self) -> int:
    """How many negative pairs (binary) or destinations (triplet) to draw."""
    if self.neg is None:
      return 0
    if self.neg.is_binary():
      return math.ceil(self.row.numel() * self.neg.amount)
    return self.row.numel() * int(self.neg.amount)

  @property
  def strict_negatives(self) -> Optional[Tuple[int, Optional[torch.Tensor]]]:
    """``(number, fixed sources)`` of the non-edges to draw from the graph:
    ``(n, None)`` for binary pairs, ``(0, sources)`` for triplet
    destinations; None when none are needed."""
    if self.neg is None or self.neg.weight is not None:
      return None
    if self.neg.is_binary():
      return self.num_negatives, None
    return 0, self.row.repeat_interleave(int(self.neg.amount))


def hop_counts(counts: List[int], device: torch.device) -> torch.Tensor:
  """Per-hop counts of one type as a tensor that ends at the last hop the
  type appeared in (``[4, 0, 3, 0]`` -> ``[4, 0, 3]``)."""
  end = len(counts)
  while end > 0 and counts[end - 1] == 0:
    end -= 1
  return torch.tensor(counts[:end], dtype=torch.int64, device=device)


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
    for etype, g in self._graphs.items():
      # A node with no edges of this type past the topology's last row (a
      # destination-only node, say) has no neighbors: give it an empty row.
      g.topo.resize(num_rows=self._num_nodes[self._seed_type(etype)])
    self.num_neighbors = num_neighbors
    self._fanouts = self._normalize_fanouts(num_neighbors) if num_neighbors is not None else None
    self._inducer = None
    self._neg_samplers: Dict[EdgeType, RandomNegativeSampler] = {}

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
    # An id-indexed map (4 bytes a node) where that stays small; else hashing.
    sizes = [self._num_nodes[t] for t in self._node_types]
    return ops.Inducer(len(sizes), [n if n <= DENSE_INDUCER_MAX_NODES else 0 for n in sizes])

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
    """Samples every hop here, one edge type after another."""
    steps = self.sample_steps(seed_dict)
    try:
      requests = next(steps)
      while True:
        requests = steps.send([self.sample_one_hop(src, k, etype) for etype, src, k in requests])
    except StopIteration as done:
      return done.value

  def sample_steps(
    self, seed_dict: Dict[NodeType, torch.Tensor], inducer=None
  ) -> Generator[List[HopRequest], List[NeighborOutput], _HopResult]:
    """Multi-hop sampling with the one-hop draws left to the caller.

    Yields, once per hop, the hop's requests ``(edge type, seeds, fanout)``
    and takes back their NeighborOutputs in the same order; returns the
    deduplicated and relabelled result. ``_sample`` answers the requests
    from the local graph; the distributed sampler from whichever partition
    owns each seed. ``inducer`` (default: the sampler's own) must not be
    shared by two unfinished runs.
    """
    if self._fanouts is None:
      raise ValueError('the sampler has no num_neighbors')
    inducer = inducer if inducer is not None else self.get_inducer()
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
      requests = [
        (etype, frontier[self._seed_type(etype)], fanout[hop])
        for etype, fanout in self._fanouts.items()
        if fanout[hop] != 0 and frontier[self._seed_type(etype)].numel() > 0
      ]
      outs = (yield requests) if requests else []
      sampled = [(etype, out) for (etype, _, _), out in zip(requests, outs)]
      src_types = [self._type_index[self._seed_type(etype)] for etype, _, _ in requests]
      nbr_types = [self._type_index[self._nbr_type(etype)] for etype, _, _ in requests]
      srcs = [src for _, src, _ in requests]
      nbrs = [out.nbr for out in outs]
      nums = [out.nbr_num for out in outs]
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
    """The sampler output of sampled hops, on the sampler's device.

    ``batch`` holds the seeds (deduplicated, by node type). A heterogeneous
    output holds only the node and edge types that were sampled (its
    ``edge_types`` names them all), and counts them per hop in tensors that
    end at the last hop the type appeared in (GLT's layout)."""

    def dev(x):
      if isinstance(x, dict):
        return {k: dev(v) for k, v in x.items()}
      return x.to(self.device) if isinstance(x, torch.Tensor) else x

    seeds = {t: nodes[: res.num_sampled_nodes[t][0]] for t, nodes in res.node.items()}
    if not self.is_hetero:
      return SamplerOutput(
        node=dev(res.node[HOMO_NODE_TYPE]),
        row=dev(res.row[HOMO_EDGE_TYPE]),
        col=dev(res.col[HOMO_EDGE_TYPE]),
        edge=dev(res.edge[HOMO_EDGE_TYPE]) if res.edge is not None else None,
        batch=dev(seeds[HOMO_NODE_TYPE]),
        num_sampled_nodes=res.num_sampled_nodes[HOMO_NODE_TYPE],
        num_sampled_edges=res.num_sampled_edges[HOMO_EDGE_TYPE],
        device=self.device,
        metadata=dev(metadata),
      )
    ntypes = [t for t, nodes in res.node.items() if nodes.numel() > 0]
    etypes = [e for e, rows in res.row.items() if rows.numel() > 0]
    # edge_types names every output edge type of the graph, sampled or not
    # (as in GLT); HeteroSamplerOutput.with_every_type fills in the others.
    return HeteroSamplerOutput(
      node=dev({t: res.node[t] for t in ntypes}),
      row=dev({e: res.row[e] for e in etypes}),
      col=dev({e: res.col[e] for e in etypes}),
      edge=dev({e: res.edge[e] for e in etypes}) if res.edge is not None else None,
      batch=dev({t: s for t, s in seeds.items() if s.numel() > 0}),
      num_sampled_nodes={t: hop_counts(res.num_sampled_nodes[t], self.device) for t in ntypes},
      num_sampled_edges={e: hop_counts(res.num_sampled_edges[e], self.device) for e in etypes},
      edge_types=list(res.row),
      input_type=input_type,
      device=self.device,
      metadata=dev(metadata),
    )

  def _negative_sampler(self, etype: EdgeType) -> RandomNegativeSampler:
    if etype not in self._neg_samplers:
      self._neg_samplers[etype] = RandomNegativeSampler(
        self._graphs[etype], edge_dir=self.edge_dir, generator=self._generator
      )
    return self._neg_samplers[etype]

  def _random_nodes(self, ntype: NodeType, n: int, weight: Optional[torch.Tensor]) -> torch.Tensor:
    if weight is not None:
      return torch.multinomial(weight.float(), n, replacement=True, generator=self._generator)
    return torch.randint(0, self._num_nodes[ntype], (n,), generator=self._generator)

  def sample_from_edges(
    self, inputs: EdgeSamplerInput, **kwargs
  ) -> Union[SamplerOutput, HeteroSamplerOutput]:
    """Samples the neighborhood of both endpoints of seed edges, with
    optional negative sampling.

    Binary negative sampling adds ``ceil(amount * num_edges)`` pairs that are
    not edges (strict: checked against the graph) and returns
    ``metadata['edge_label_index']`` (local ids) and ``metadata['edge_label']``
    (1, or the given labels, for positives; 0 for negatives). Triplet
    sampling draws ``amount`` non-adjacent destinations per source and
    returns ``src_index``, ``dst_pos_index`` and ``dst_neg_index``. With a
    ``NegativeSampling.weight``, negative destinations follow that node
    distribution instead (not checked against the graph).
    """
    batch = self.link_batch(inputs)
    strict = None
    if batch.strict_negatives is not None:
      num, src = batch.strict_negatives
      strict = self._negative_sampler(batch.etype).sample(num, padding=True, src=src)
    seeds, parts = self.link_seeds(batch, strict)
    res = self._sample(seeds)
    return self.link_output(batch, res, parts)

  def link_batch(self, inputs: EdgeSamplerInput) -> LinkBatch:
    """Checks a batch of seed edges; says which negatives it needs."""
    inputs = EdgeSamplerInput.cast(inputs)
    if self.is_hetero:
      etype = inputs.input_type
      if etype is None or tuple(etype) not in self._graphs:
        raise ValueError(f'unknown edge type {etype!r}; known: {list(self._graphs)}')
      etype = tuple(etype)
    else:
      etype = HOMO_EDGE_TYPE
    row = self._check_seeds(inputs.row, etype[0])
    col = self._check_seeds(inputs.col, etype[-1])
    if row.numel() != col.numel():
      raise ValueError(
        f'seed edges need as many sources as targets: {row.numel()} vs {col.numel()}'
      )
    return LinkBatch(etype, row, col, inputs.label, inputs.neg_sampling)

  def link_seeds(
    self, batch: LinkBatch, strict_negatives: Optional[torch.Tensor]
  ) -> Tuple[Dict[NodeType, torch.Tensor], Dict[NodeType, List[int]]]:
    """The seed nodes of a link batch, its negatives included, by node type,
    and the sizes of the pieces (sources, destinations, negatives) they were
    concatenated from, which ``link_output`` needs.

    Args:
      batch: from ``link_batch``.
      strict_negatives: the ``[2, n]`` non-edges ``batch.strict_negatives``
        asked for (None when it asked for none).
    """
    neg, row, col = batch.neg, batch.row, batch.col
    src_t, dst_t = batch.etype[0], batch.etype[-1]
    if neg is None or neg.is_binary():
      src, dst = row, col
      if neg is not None:
        if neg.weight is None:
          neg_src, neg_dst = strict_negatives[0], strict_negatives[1]
        else:
          num_neg = batch.num_negatives
          neg_src = self._random_nodes(src_t, num_neg, None)
          neg_dst = self._random_nodes(dst_t, num_neg, neg.weight)
        src, dst = torch.cat([row, neg_src]), torch.cat([col, neg_dst])
      pieces = [(src_t, src), (dst_t, dst)]
    else:
      if neg.weight is None:
        neg_dst = strict_negatives[1]
      else:
        neg_dst = self._random_nodes(dst_t, batch.num_negatives, neg.weight)
      pieces = [(src_t, row), (dst_t, col), (dst_t, neg_dst)]
    merged = {}
    for t, piece in pieces:
      merged.setdefault(t, []).append(piece)
    parts = {t: [p.numel() for p in ps] for t, ps in merged.items()}
    return {t: torch.cat(ps) for t, ps in merged.items()}, parts

  def link_output(
    self, batch: LinkBatch, res: _HopResult, parts: Dict[NodeType, List[int]]
  ) -> Union[SamplerOutput, HeteroSamplerOutput]:
    """The sampler output of a link batch, with its label metadata.

    Args:
      batch: from ``link_batch``.
      res: the sampled hops.
      parts: the seed pieces' sizes from ``link_seeds``.
    """
    src_t, dst_t = batch.etype[0], batch.etype[-1]

    def split(ntype) -> List[torch.Tensor]:
      return list(torch.split(res.seed_local[ntype], parts[ntype]))

    metadata = {}
    neg = batch.neg
    if neg is None or neg.is_binary():
      label = batch.label
      if neg is not None:
        if label is None:
          label = torch.ones(batch.row.numel())
        num_neg = batch.num_negatives
        label = torch.cat([label, label.new_zeros((num_neg,) + tuple(label.shape[1:]))])
      if label is not None:
        metadata['edge_label'] = label
      metadata['edge_label_index'] = torch.stack([split(src_t)[0], split(dst_t)[-1]])
    else:
      local_dst = split(dst_t)
      metadata['src_index'] = split(src_t)[0]
      metadata['dst_pos_index'] = local_dst[-2]
      dst_neg = local_dst[-1]
      amount = int(neg.amount)
      metadata['dst_neg_index'] = dst_neg if amount == 1 else dst_neg.view(-1, amount)
    return self._to_output(res, batch.etype if self.is_hetero else None, metadata)

  def subgraph(self, inputs: NodeSamplerInput) -> SamplerOutput:
    """The subgraph induced by the seeds and (with ``num_neighbors``) their
    sampled neighbors: every edge of the graph among those nodes.

    As in GLT: ``node`` holds the nodes' ids sorted and deduplicated,
    ``metadata`` is the mapping tensor (each input seed's index in ``node``),
    and edges come row by row of the graph in message-passing order (``row``
    the neighbor-side end). A seed without edges has no neighbors.
    Homogeneous graphs only.
    """
    if self.is_hetero:
      raise ValueError('subgraph sampling supports homogeneous graphs only')
    inputs = NodeSamplerInput.cast(inputs)
    seeds = self._check_seeds(inputs.node, HOMO_NODE_TYPE)
    reached = self._sample({HOMO_NODE_TYPE: seeds}).node[HOMO_NODE_TYPE] if self._fanouts else seeds
    nodes = torch.unique(reached)
    mapping = torch.searchsorted(nodes, seeds)
    topo = self._graphs[HOMO_EDGE_TYPE].topo
    rows, cols, eids = ops.induced_subgraph(
      topo.indptr, topo.indices, topo.edge_ids if self.with_edge else None, nodes
    )
    return SamplerOutput(
      node=nodes.to(self.device),
      row=cols.to(self.device),
      col=rows.to(self.device),
      edge=eids.to(self.device) if self.with_edge else None,
      device=self.device,
      metadata=mapping.to(self.device),
    )

  def sample_prob(
    self, inputs: NodeSamplerInput, node_cnt: Union[int, Dict[NodeType, int]]
  ) -> Union[torch.Tensor, Dict[NodeType, torch.Tensor]]:
    """Per node, the probability of being touched when sampling from these
    seeds with this sampler's fanouts (what FrequencyPartitioner weighs).

    Computed hop by hop over the whole graph: a node first reached in hop h
    picks each neighbor with probability min(1, k / degree) in hop h + 1
    (1 - (1 - 1/degree)^k with replacement), and picks from different nodes
    are taken as independent. Exact for one hop.

    Args:
      inputs: the seeds (and their node type).
      node_cnt: the number of nodes (a dict by node type for a
        heterogeneous graph); sets the output's length.
    """
    inputs = NodeSamplerInput.cast(inputs)
    if self._fanouts is None:
      raise ValueError('the sampler has no num_neighbors')
    ntype = inputs.input_type if self.is_hetero else HOMO_NODE_TYPE
    if ntype not in self._type_index:
      raise ValueError(f'unknown node type {ntype!r}; known: {self._node_types}')
    counts = node_cnt if isinstance(node_cnt, dict) else {ntype: node_cnt}
    sizes = {t: max(int(counts.get(t, 0)), self._num_nodes[t]) for t in self._node_types}
    touched = {t: torch.zeros(n, dtype=torch.float64) for t, n in sizes.items()}
    touched[ntype][self._check_seeds(inputs.node, ntype)] = 1.0
    fresh = {t: p.clone() for t, p in touched.items()}
    for hop in range(self.num_hops):
      log_miss = {t: torch.zeros(n, dtype=torch.float64) for t, n in sizes.items()}
      for etype, fanout in self._fanouts.items():
        k = fanout[hop]
        if k == 0:
          continue
        topo = self._graphs[etype].topo
        deg = topo.degrees.double()
        if k < 0:
          pick = torch.ones_like(deg)
        elif self.replace:
          pick = 1.0 - (1.0 - 1.0 / deg.clamp(min=1)) ** k
        else:
          pick = (k / deg.clamp(min=1)).clamp(max=1.0)
        seed_t, nbr_t = self._seed_type(etype), self._nbr_type(etype)
        per_row = (fresh[seed_t][: topo.row_count] * pick).clamp(max=1.0 - 1e-12)
        per_edge = torch.repeat_interleave(torch.log1p(-per_row), topo.degrees)
        log_miss[nbr_t].index_add_(0, topo.indices, per_edge)
      hit = {t: -torch.expm1(m) for t, m in log_miss.items()}
      fresh = {t: (1.0 - touched[t]) * hit[t] for t in sizes}
      touched = {t: touched[t] + fresh[t] for t in sizes}
    out = {t: p[: sizes[t]].float() for t, p in touched.items()}
    return out if self.is_hetero else out[HOMO_NODE_TYPE]


def build_neighbor_sampler(
  data,
  num_neighbors: Optional[NumNeighbors],
  device: torch.device,
  with_edge: bool = False,
  with_neg: bool = False,
  with_weight: bool = False,
  strategy: str = 'random',
  seed: Optional[int] = None,
  replace: bool = False,
) -> NeighborSampler:
  """The NeighborSampler a loader builds for a dataset (its graph and edge_dir)."""
  if data.graph is None:
    raise ValueError('the dataset has no graph: call init_graph first')
  return NeighborSampler(
    data.graph,
    num_neighbors,
    device=device,
    with_edge=with_edge,
    with_neg=with_neg,
    with_weight=with_weight,
    strategy=strategy,
    edge_dir=data.edge_dir,
    seed=seed,
    replace=replace,
  )
