"""Temporal sampling's configuration for a sampler: which edge types have a
time, the time-sorted topologies the temporal kernel reads, and the seeds'
times (PyG's ``time_attr`` semantics; see ``data.temporal``).

A seed of time ``t`` reaches only the past: with node-level time, neighbors
whose time is <= t; with edge-level time, edges whose time is <= t. Every
node sampled for a seed carries that seed's time on to the next hop, so
temporal sampling is disjoint (each seed grows a subgraph of its own), as in
PyG. ``'uniform'`` draws among the allowed neighbors, ``'last'`` takes the
most recent ones.
"""

from typing import Dict, Optional, Tuple, Union

import torch

from ..data.graph import Graph
from ..data.temporal import entry_time, time_sorted
from ..typing import HOMO_EDGE_TYPE, HOMO_NODE_TYPE, EdgeType, NodeType
from ..utils.device import to_device_async
from ..utils.times import checked_time
from .schema import SamplingSchema

TEMPORAL_STRATEGIES = ('uniform', 'last')
TIME_ATTRS = ('node_time', 'edge_time')

TimeArg = Optional[Union[torch.Tensor, Dict]]


def _by_type(value, key, hetero: bool, what: str) -> Dict:
  if value is None:
    return {}
  if hetero != isinstance(value, dict):
    kind = 'a dict by type' if hetero else 'one tensor'
    raise ValueError(f'{what} must be {kind} for a {"hetero" if hetero else "homo"}geneous graph')
  return dict(value) if hetero else {key: value}


class TemporalSampling:
  """The times a temporal sampler draws by.

  Args:
    graphs: the sampler's graph of each edge type (rows sorted by neighbor
      id).
    schema: the sampler's schema.
    node_time: node-level time: a time per node (a dict by node type for a
      heterogeneous graph; a type without one is not bounded).
    edge_time: edge-level time: a time per edge id (a dict by edge type; an
      edge type without one is not bounded).
    strategy: 'uniform' or 'last'.
    is_sorted: each row's neighbors are in time order already (PyG's
      ``is_sorted``): checked, not sorted.
  """

  def __init__(
    self,
    graphs: Dict[EdgeType, Graph],
    schema: SamplingSchema,
    node_time: TimeArg = None,
    edge_time: TimeArg = None,
    strategy: str = 'uniform',
    is_sorted: bool = False,
  ):
    if strategy not in TEMPORAL_STRATEGIES:
      raise ValueError(f'temporal_strategy must be one of {TEMPORAL_STRATEGIES}, got {strategy!r}')
    if node_time is not None and edge_time is not None:
      raise ValueError('give node_time or edge_time, not both (PyG: one time attribute)')
    hetero = schema.is_hetero
    self.level = 'node' if node_time is not None else 'edge'
    self.schema = schema
    self.last = strategy == 'last'
    node_time = _by_type(node_time, HOMO_NODE_TYPE, hetero, 'node_time')
    edge_time = _by_type(edge_time, HOMO_EDGE_TYPE, hetero, 'edge_time')
    unknown = [t for t in node_time if t not in schema.num_nodes]
    unknown += [e for e in edge_time if e not in graphs]
    if unknown:
      raise ValueError(f'times given for types the graph does not have: {unknown}')
    self.node_time: Dict[NodeType, torch.Tensor] = {}
    self._placed_node_time: Dict[Tuple[NodeType, torch.device], torch.Tensor] = {}
    for t, v in node_time.items():
      what = f'node_time of {t!r}' if hetero else 'node_time'
      self.node_time[t] = checked_time(v, what)
      if self.node_time[t].numel() < schema.num_nodes[t]:
        raise ValueError(f'{what} has {v.numel()} entries for {schema.num_nodes[t]} nodes')
    edge_times = {
      e: checked_time(v, f'edge_time of {e!r}' if hetero else 'edge_time')
      for e, v in edge_time.items()
    }
    dtypes = {t.dtype for t in list(self.node_time.values()) + list(edge_times.values())}
    if len(dtypes) > 1:
      raise ValueError(
        f'every time must have one dtype (int64 or float64), got {sorted(map(str, dtypes))}'
      )
    self.dtype = dtypes.pop() if dtypes else torch.int64
    # The time-sorted copy of each edge type with a time.
    self.graphs: Dict[EdgeType, Graph] = {}
    for etype, g in graphs.items():
      nbr_t = schema.nbr_type(etype)
      if nbr_t in self.node_time:
        time = entry_time(g.topo, node_time=self.node_time[nbr_t])
      elif etype in edge_times:
        time = entry_time(g.topo, edge_time=edge_times[etype])
      else:
        continue
      self.graphs[etype] = Graph(time_sorted(g.topo, time, is_sorted), g.requested_mode, g.device)

  @property
  def enabled(self) -> bool:
    """Whether any edge type is bounded by time."""
    return bool(self.graphs)

  def seed_time(
    self, ntype: NodeType, seeds: torch.Tensor, given: Optional[torch.Tensor]
  ) -> torch.Tensor:
    """The seeds' times: ``given`` (checked, one per seed), or with
    node-level time the seeds' own times (PyG's default).

    Args:
      ntype: the seeds' node type.
      seeds: the seed ids.
      given: the seeds' times (``input_time``, ``edge_label_time``), or None.
    """
    if given is None:
      if ntype not in self.node_time:
        raise ValueError(
          "temporal sampling needs the seeds' times (input_time or edge_label_time)"
          + ('' if self.level == 'node' else ' with edge-level time')
        )
      return self._node_time_on(ntype, seeds.device)[seeds]
    time = torch.as_tensor(given)
    if time.is_floating_point() and self.dtype == torch.int64:
      raise ValueError(f"the seeds' times are {time.dtype}, the graph's times int64")
    time = checked_time(time, "the seeds' times", seeds.numel())
    return to_device_async(time.to(self.dtype), seeds.device)

  def _node_time_on(self, ntype: NodeType, device: torch.device) -> torch.Tensor:
    r"""Node type ``ntype``'s times on ``device``, copied there on first use:
    the seeds' own times are read where the seeds are, without a host sync
    (a time-sorted topology on a GPU holds a time per edge already)."""
    placed = self._placed_node_time.get((ntype, device))
    if placed is None:
      placed = self._placed_node_time[(ntype, device)] = self.node_time[ntype].to(device)
    return placed

  def __getstate__(self):
    return {**self.__dict__, '_placed_node_time': {}}


def batch_seed_time(
  temporal: Optional[TemporalSampling],
  seeds: Dict[NodeType, torch.Tensor],
  given: Optional[Dict[NodeType, torch.Tensor]],
) -> Optional[Dict[NodeType, torch.Tensor]]:
  """A batch's seed times by node type in temporal sampling (None when the
  sampler is not temporal).

  Args:
    temporal: the sampler's temporal sampling, or None.
    seeds: the batch's seeds by node type.
    given: their times by node type (``input_time``, ``edge_label_time``),
      or None for PyG's default (each seed's own node time).

  Raises:
    ValueError: times given to a sampler without a time attribute.
  """
  if temporal is None:
    if given is not None:
      raise ValueError(
        'seed times were given (input_time / edge_label_time), but the sampler has no time '
        'attribute: give time_attr (or node_time / edge_time)'
      )
    return None
  return {
    t: temporal.seed_time(t, s, given[t] if given is not None else None) for t, s in seeds.items()
  }


def dataset_times(data, time_attr: Optional[str]) -> Dict[str, object]:
  """``{'node_time': ...}`` or ``{'edge_time': ...}``: the dataset's times
  that ``time_attr`` names, as NeighborSampler takes them ({} for None).

  Args:
    data: the dataset.
    time_attr: 'node_time', 'edge_time' or None.

  Raises:
    ValueError: an unknown ``time_attr``, or a dataset without those times.
  """
  if time_attr is None:
    return {}
  if time_attr not in TIME_ATTRS:
    raise ValueError(f"time_attr names the dataset's times: one of {TIME_ATTRS}, got {time_attr!r}")
  times = getattr(data, time_attr, None)
  if times is None:
    init = 'init_node_time' if time_attr == 'node_time' else 'init_edge_time'
    raise ValueError(f'time_attr={time_attr!r}, but the dataset has none: call {init} first')
  return {time_attr: times}
