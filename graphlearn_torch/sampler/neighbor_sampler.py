"""Multi-hop neighbor sampling on one machine (homogeneous and heterogeneous)."""

from typing import Dict, Literal, Optional, Union

import torch

from ..data.graph import Graph
from ..typing import HOMO_EDGE_TYPE, HOMO_NODE_TYPE, EdgeType, NodeType, NumNeighbors
from ..utils.device import resolve_device
from ..utils.launched import Launched
from .base import (
  BaseSampler,
  EdgeSamplerInput,
  HeteroSamplerOutput,
  NeighborOutput,
  NodeSamplerInput,
  SamplerOutput,
)
from .multihop import HopRequest, LocalDraws, MultiHopSampler
from .negative_sampler import RandomNegativeSampler
from .one_hop import sample_one_hop
from .schema import RandomStream, SamplingSchema, check_graphs
from .subgraph_types import bidirectional, checked_subgraph_type, induced_edges
from .temporal import TemporalSampling, TimeArg, batch_seed_time

STRATEGIES = ('random',)


class NeighborSampler(BaseSampler):
  """Samples a fixed number of neighbors per node, hop by hop, from the
  topologies of one machine: the single-machine driver of the multi-hop
  engine (``sampler.multihop``).

  A homogeneous graph is sampled as the one-type case of a heterogeneous
  one, by the same code.

  Args:
    graph: a Graph, or a dict of them by edge type.
    num_neighbors: neighbors per hop (-1: all); for a heterogeneous graph a
      list for every edge type or a dict of lists by edge type (0 skips an
      edge type in a hop).
    device: where outputs go (CUDA falls back to the CPU without a GPU).
      Sampling itself runs where the graphs are: on the CPU, or on the GPU
      of 'CUDA' and 'ZERO_COPY' graphs.
    with_edge: return the ids of the sampled edges.
    with_neg: prepare negative sampling (link sampling).
    with_weight: sample neighbors with probability proportional to edge weight.
    strategy: 'random'.
    edge_dir: 'out' samples out-neighbors (the graph in CSR), 'in'
      in-neighbors (CSC).
    seed: seeds this sampler's random stream; None draws from torch's global
      generator, so ``torch.manual_seed`` governs it.
    replace: sample with replacement.
    node_time: temporal sampling by node time (PyG's ``time_attr`` naming a
      node attribute): a time per node, or a dict by node type. A seed of
      time t reaches only neighbors of time <= t.
    edge_time: temporal sampling by edge time: a time per edge id, or a
      dict by edge type. A seed of time t takes only edges of time <= t.
    temporal_strategy: 'uniform' (among the allowed neighbors) or 'last'
      (the most recent ones).
    disjoint: every seed grows a subgraph of its own; outputs carry each
      node's seed in ``seed_index``. Temporal sampling is always disjoint
      (as in PyG).
    subgraph_type: 'directional' (the sampled edges), 'bidirectional' (each
      sampled edge in both directions, as PyG's ``to_bidirectional``) or
      'induced' (every edge of the graph among the sampled nodes; not
      disjoint).
    is_sorted: each row's neighbors are in time order already: checked
      rather than sorted.
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
    node_time: TimeArg = None,
    edge_time: TimeArg = None,
    temporal_strategy: str = 'uniform',
    disjoint: bool = False,
    subgraph_type: str = 'directional',
    is_sorted: bool = False,
  ):
    if strategy not in STRATEGIES:
      raise ValueError(f'strategy must be one of {STRATEGIES}, got {strategy!r}')
    if edge_dir not in ('in', 'out'):
      raise ValueError(f"edge_dir must be 'in' or 'out', got {edge_dir!r}")
    self.graph = graph
    self.is_hetero = isinstance(graph, dict)
    self.graphs: Dict[EdgeType, Graph] = graph if self.is_hetero else {HOMO_EDGE_TYPE: graph}
    check_graphs(self.graphs, edge_dir, with_weight)
    self.edge_dir = edge_dir
    self.device = resolve_device(device)
    self.with_edge = with_edge
    self.with_neg = with_neg
    self.with_weight = with_weight
    self.strategy = strategy
    self.replace = replace
    self.seed = seed
    self.num_neighbors = num_neighbors
    self.random = RandomStream(seed)
    self.schema = SamplingSchema.from_graphs(self.graphs, edge_dir, self.is_hetero)
    self.schema.pad_rows(self.graphs)
    devices = {g.sampling_device for g in self.graphs.values()}
    if len(devices) != 1:
      raise ValueError(
        f'every edge type must be sampled on one device, got {sorted(map(str, devices))}'
      )
    self.sample_device = devices.pop()
    self.temporal: Optional[TemporalSampling] = None
    if node_time is not None or edge_time is not None:
      self.temporal = TemporalSampling(
        self.graphs, self.schema, node_time, edge_time, temporal_strategy, is_sorted
      )
    self.disjoint = bool(disjoint) or self.temporal is not None
    self.subgraph_type = checked_subgraph_type(subgraph_type, self.disjoint)
    self.engine = MultiHopSampler(
      self.schema,
      num_neighbors,
      with_edge,
      self.random,
      self.device,
      self.sample_device,
      disjoint=self.disjoint,
    )
    self._neg_samplers: Dict[EdgeType, RandomNegativeSampler] = {}
    # A loader launches each batch before it collates the one before
    # (launch_from_nodes): where a GPU draws a whole batch without the host.
    self.launches_ahead = (
      self.sample_device.type == 'cuda' and not self.disjoint and subgraph_type != 'induced'
    )

  @property
  def num_hops(self) -> int:
    return self.engine.num_hops

  # -- sampling ---------------------------------------------------------------

  def sample_one_hop(
    self, input_seeds: torch.Tensor, req_num: int, etype: Optional[EdgeType] = None
  ) -> NeighborOutput:
    """Samples ``req_num`` neighbors (-1: all) of each seed along ``etype``."""
    return sample_one_hop(
      self.graphs[etype if etype is not None else HOMO_EDGE_TYPE].device_topology(),
      input_seeds,
      req_num,
      self.random.kernel_seed(),
      self.with_edge,
      self.with_weight,
      self.replace,
    )

  def _answer(self, request: HopRequest, random: RandomStream) -> NeighborOutput:
    """One hop from this sampler's topologies: drawn within each seed's
    time where the request carries times and its edge type has them."""
    temporal = request.seed_time is not None and request.etype in self.temporal.graphs
    graph = self.temporal.graphs[request.etype] if temporal else self.graphs[request.etype]
    return sample_one_hop(
      graph.device_topology(),
      request.seeds,
      request.fanout,
      random.kernel_seed(),
      self.with_edge,
      self.with_weight,
      self.replace,
      request.seed_time if temporal else None,
      temporal and self.temporal.last,
    )

  def _sample(
    self,
    seed_dict: Dict[NodeType, torch.Tensor],
    random: RandomStream,
    seed_time: Optional[Dict[NodeType, torch.Tensor]] = None,
  ):
    """The engine's multi-hop result, drawn from ``random``: each hop drawn
    and relabelled in one pass (``LocalDraws``; on a GPU with one host sync
    a hop). With ``subgraph_type`` 'induced', the edges are every edge among
    the nodes sampled."""

    def answer(request: HopRequest) -> NeighborOutput:
      return self._answer(request, random)

    res = self.engine.sample(seed_dict, answer, self._local_draws(random), seed_time)
    if self.subgraph_type == 'induced':
      every_neighbor = {
        etype: sample_one_hop(
          g.device_topology(), res.node[self.schema.seed_type(etype)], -1, 0, self.with_edge
        )
        for etype, g in self.graphs.items()
      }
      res = induced_edges(res, self.schema, every_neighbor, self.with_edge)
    return res

  def _local_draws(self, random: RandomStream) -> LocalDraws:
    """This sampler's topologies, for the engine to draw from with ``random``."""
    temporal = self.temporal.graphs if self.temporal is not None else {}
    return LocalDraws(
      {etype: g.device_topology() for etype, g in self.graphs.items()},
      random,
      self.with_edge,
      self.with_weight,
      self.replace,
      {etype: g.device_topology() for etype, g in temporal.items()},
      self.temporal is not None and self.temporal.last,
    )

  def _finish(self, out):
    """The output in the asked subgraph type (bidirectional edges)."""
    return bidirectional(out) if self.subgraph_type == 'bidirectional' else out

  def sample_from_nodes(
    self, inputs: NodeSamplerInput, random: Optional[RandomStream] = None, **kwargs
  ) -> Union[SamplerOutput, HeteroSamplerOutput]:
    """Samples the multi-hop neighborhood of the seed nodes.

    Returns a SamplerOutput for a homogeneous graph, a HeteroSamplerOutput
    otherwise. Seeds come first in ``node`` (deduplicated, in order; in
    disjoint sampling every seed is its own node); ``metadata['seed_local']``
    gives each input seed's local index, and in temporal sampling
    ``metadata['seed_time']`` the seeds' times.

    Args:
      inputs: the seeds (and, in temporal sampling, their times).
      random: the batch's random stream (default: the sampler's).
    """
    inputs = NodeSamplerInput.cast(inputs)
    ntype, seeds = self.engine.node_seeds(inputs)
    given = {ntype: inputs.time} if inputs.time is not None else None
    seed_time = batch_seed_time(self.temporal, {ntype: seeds}, given)
    res = self._sample({ntype: seeds}, random or self.random, seed_time)
    return self._finish(self.engine.node_output(res, ntype, seed_time))

  def launch_from_nodes(
    self, inputs: NodeSamplerInput, random: Optional[RandomStream] = None
  ) -> Launched:
    """``sample_from_nodes`` in two steps: the batch is started here and
    ``result()`` gives its output, the same. On a GPU that draws the whole
    batch at once (no disjoint, temporal or induced sampling, every fanout
    bounded) the GPU draws it while the caller goes on, e.g. to collate the
    batch before; elsewhere the batch is sampled here. A launched batch
    keeps its sampling buffers until ``result()`` or ``discard()``.

    Args:
      inputs: the seeds.
      random: the batch's random stream (default: the sampler's).
    """
    inputs = NodeSamplerInput.cast(inputs)
    random = random or self.random
    launched = None
    if inputs.time is None and self.temporal is None and self.subgraph_type != 'induced':
      ntype, seeds = self.engine.node_seeds(inputs)
      launched = self.engine.launch({ntype: seeds}, self._local_draws(random))
    if launched is None:
      return Launched.done(self.sample_from_nodes(inputs, random))

    def output():
      return self._finish(self.engine.node_output(launched.finish(), ntype))

    return Launched(output, launched.discard)

  def negative_sampler(self, etype: EdgeType) -> RandomNegativeSampler:
    """The negative sampler of edge type ``etype`` (made on first use)."""
    if etype not in self._neg_samplers:
      self._neg_samplers[etype] = RandomNegativeSampler(
        self.graphs[etype], edge_dir=self.edge_dir, generator=self.random.generator
      )
    return self._neg_samplers[etype]

  def sample_from_edges(
    self, inputs: EdgeSamplerInput, random: Optional[RandomStream] = None, **kwargs
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

    Args:
      inputs: the seed edges and negative sampling.
      random: the batch's random stream (default: the sampler's).
    """
    random = random or self.random
    batch, seeds, parts, seed_time = self._link_seeds(inputs, random)
    res = self._sample(seeds, random, seed_time)
    return self._finish(self.engine.link_output(batch, res, parts))

  def launch_from_edges(
    self, inputs: EdgeSamplerInput, random: Optional[RandomStream] = None
  ) -> Launched:
    """``sample_from_edges`` in two steps, as ``launch_from_nodes``: the
    negatives are drawn here, and on a GPU that draws the whole batch at
    once the hops are drawn while the caller goes on. A discarded batch
    leaves the stream where it found it.

    Args:
      inputs: the seed edges and negative sampling.
      random: the batch's random stream (default: the sampler's).
    """
    random = random or self.random
    rewind = random.rewinder()
    batch, seeds, parts, seed_time = self._link_seeds(inputs, random)
    launched = None
    if seed_time is None and self.subgraph_type != 'induced':
      launched = self.engine.launch(seeds, self._local_draws(random))
    if launched is None:
      res = self._sample(seeds, random, seed_time)
      return Launched.done(self._finish(self.engine.link_output(batch, res, parts)))

    def output():
      return self._finish(self.engine.link_output(batch, launched.finish(), parts))

    def discard():
      launched.discard()
      rewind()

    return Launched(output, discard)

  def _link_seeds(self, inputs: EdgeSamplerInput, random: RandomStream):
    """A link batch's checked inputs, its seed nodes (negatives drawn from
    ``random`` included) by type, their pieces' sizes and their times."""
    batch = self.engine.link_batch(inputs)
    strict = None
    if batch.strict_negatives is not None:
      num, src = batch.strict_negatives
      strict = self.negative_sampler(batch.etype).sample(
        num, padding=True, src=src, rng_seed=random.kernel_seed()
      )
    seeds, parts = self.engine.link_seeds(batch, strict, random)
    seed_time = batch_seed_time(self.temporal, seeds, self.engine.link_seed_time(batch))
    return batch, seeds, parts, seed_time

  def subgraph(
    self, inputs: NodeSamplerInput, random: Optional[RandomStream] = None
  ) -> SamplerOutput:
    """The subgraph induced by the seeds and (with ``num_neighbors``) their
    sampled neighbors: every edge of the graph among those nodes.

    As in GLT: ``node`` holds the nodes' ids sorted and deduplicated,
    ``metadata`` is the mapping tensor (each input seed's index in ``node``),
    and edges come row by row of the graph in message-passing order (``row``
    the neighbor-side end). A seed without edges has no neighbors.
    Homogeneous graphs only.

    Args:
      inputs: the seeds.
      random: the batch's random stream (default: the sampler's).
    """
    if self.is_hetero:
      raise ValueError('subgraph sampling supports homogeneous graphs only')
    if self.disjoint:
      raise ValueError('subgraph sampling is neither disjoint nor temporal')
    _, seeds = self.engine.node_seeds(inputs)
    reached = seeds
    if self.num_hops:
      reached = self._sample({HOMO_NODE_TYPE: seeds}, random or self.random).node[HOMO_NODE_TYPE]
    nodes, mapping = self.engine.subgraph_nodes(seeds, reached)
    topo = self.graphs[HOMO_EDGE_TYPE].device_topology()
    rows, cols, eids = torch.ops.glt.induced_subgraph(
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
    if self.engine.fanouts is None:
      raise ValueError('the sampler has no num_neighbors')
    ntype, seeds = self.engine.node_seeds(inputs)
    schema = self.schema
    counts = node_cnt if isinstance(node_cnt, dict) else {ntype: node_cnt}
    sizes = {t: max(int(counts.get(t, 0)), schema.num_nodes[t]) for t in schema.node_types}
    touched = {t: torch.zeros(n, dtype=torch.float64) for t, n in sizes.items()}
    touched[ntype][seeds] = 1.0
    fresh = {t: p.clone() for t, p in touched.items()}
    for hop in range(self.num_hops):
      log_miss = {t: torch.zeros(n, dtype=torch.float64) for t, n in sizes.items()}
      for etype, fanout in self.engine.fanouts.items():
        k = fanout[hop]
        if k == 0:
          continue
        topo = self.graphs[etype].topo
        deg = topo.degrees.double()
        if k < 0:
          pick = torch.ones_like(deg)
        elif self.replace:
          pick = 1.0 - (1.0 - 1.0 / deg.clamp(min=1)) ** k
        else:
          pick = (k / deg.clamp(min=1)).clamp(max=1.0)
        seed_t, nbr_t = schema.seed_type(etype), schema.nbr_type(etype)
        per_row = (fresh[seed_t][: topo.row_count] * pick).clamp(max=1.0 - 1e-12)
        per_edge = torch.repeat_interleave(torch.log1p(-per_row), topo.degrees)
        log_miss[nbr_t].index_add_(0, topo.indices, per_edge)
      hit = {t: -torch.expm1(m) for t, m in log_miss.items()}
      fresh = {t: (1.0 - touched[t]) * hit[t] for t in sizes}
      touched = {t: touched[t] + fresh[t] for t in sizes}
    out = {t: p[: sizes[t]].float() for t, p in touched.items()}
    return out if self.is_hetero else out[HOMO_NODE_TYPE]
