"""What the sampling engine knows of a graph (``SamplingSchema``: its types,
their sizes, which side of an edge type its seeds are on) and its
randomness (``RandomStream``)."""

import hashlib
import numbers
from dataclasses import dataclass
from typing import Callable, Dict, List, Optional

import torch

from ..data.graph import Graph
from ..typing import (
  HOMO_EDGE_TYPE,
  HOMO_NODE_TYPE,
  EdgeType,
  NodeType,
  NumNeighbors,
  reverse_edge_type,
)
from ..utils.device import to_device_async
from ..utils.tensor import bounds


def check_graphs(graphs: Dict[EdgeType, Graph], edge_dir: str, with_weight: bool = False) -> None:
  """Checks that topologies can be sampled as asked.

  Args:
    graphs: a Graph per edge type.
    edge_dir: 'out' needs CSR topologies, 'in' CSC.
    with_weight: weighted sampling needs edge weights.
  """
  expected = 'CSR' if edge_dir == 'out' else 'CSC'
  for etype, g in graphs.items():
    if not isinstance(g, Graph):
      raise TypeError(f'graph of {etype} must be a Graph, got {type(g).__name__}')
    if g.topo.layout != expected:
      raise ValueError(
        f"edge_dir '{edge_dir}' needs a {expected} topology, but {etype} is {g.topo.layout}"
      )
    if with_weight and g.topo.edge_weights is None:
      raise ValueError(f'with_weight=True but the graph of {etype} has no edge weights')


class SamplingSchema:
  """The node and edge types of a graph as a sampler walks it.

  With ``edge_dir='out'`` an edge type's topology has a row per source node
  (its seeds are sources, its neighbors destinations) and sampled edges are
  returned under the reversed type, in message-passing direction; with
  ``'in'`` the other way round.

  Args:
    edge_types: the graph's edge types (``[HOMO_EDGE_TYPE]`` when
      homogeneous).
    num_nodes: the number of nodes of each node type.
    edge_dir: 'out' or 'in'.
    is_hetero: whether the graph is heterogeneous.
  """

  def __init__(
    self,
    edge_types: List[EdgeType],
    num_nodes: Dict[NodeType, int],
    edge_dir: str,
    is_hetero: bool,
  ):
    if edge_dir not in ('in', 'out'):
      raise ValueError(f"edge_dir must be 'in' or 'out', got {edge_dir!r}")
    self.edge_types = list(edge_types)
    self.edge_dir = edge_dir
    self.is_hetero = is_hetero
    self.node_types: List[NodeType] = sorted({t for e in self.edge_types for t in (e[0], e[-1])})
    self.type_index = {t: i for i, t in enumerate(self.node_types)}
    self.num_nodes = {t: int(num_nodes.get(t, 0)) for t in self.node_types}

  @classmethod
  def from_graphs(
    cls, graphs: Dict[EdgeType, Graph], edge_dir: str, is_hetero: bool
  ) -> 'SamplingSchema':
    """The schema of topologies by edge type: a node type has as many nodes
    as the largest row or column count that names it.

    Args:
      graphs: a Graph per edge type.
      edge_dir: how they are stored ('out': CSR, 'in': CSC).
      is_hetero: whether the graph is heterogeneous.
    """
    schema = cls(list(graphs), {}, edge_dir, is_hetero)
    for etype, g in graphs.items():
      for ntype, count in (
        (schema.seed_type(etype), g.row_count),
        (schema.nbr_type(etype), g.col_count),
      ):
        schema.num_nodes[ntype] = max(schema.num_nodes[ntype], count)
    return schema

  def pad_rows(self, graphs: Dict[EdgeType, Graph]) -> None:
    """Gives every node of an edge type's seed type a row of its topology
    (empty for a node without such edges: a destination-only node, say), so
    that any node can be a seed."""
    for etype, g in graphs.items():
      g.topo.resize(num_rows=self.num_nodes[self.seed_type(etype)])

  def seed_type(self, etype: EdgeType) -> NodeType:
    """The node type of an edge type's rows: the side its seeds are on."""
    return etype[0] if self.edge_dir == 'out' else etype[-1]

  def nbr_type(self, etype: EdgeType) -> NodeType:
    """The node type an edge type's sampled neighbors have."""
    return etype[-1] if self.edge_dir == 'out' else etype[0]

  def out_edge_type(self, etype: EdgeType) -> EdgeType:
    """The type under which edges sampled along ``etype`` are returned."""
    return reverse_edge_type(etype) if self.edge_dir == 'out' else etype

  def input_node_type(self, input_type: Optional[NodeType]) -> NodeType:
    """The node type of seeds given as ``input_type`` (checked)."""
    if not self.is_hetero:
      return HOMO_NODE_TYPE
    if input_type is None:
      raise ValueError('the graph is heterogeneous: NodeSamplerInput needs an input_type')
    if input_type not in self.type_index:
      raise ValueError(f'unknown node type {input_type!r}; known: {self.node_types}')
    return input_type

  def input_edge_type(self, input_type: Optional[EdgeType]) -> EdgeType:
    """The edge type of seed edges given as ``input_type`` (checked)."""
    if not self.is_hetero:
      return HOMO_EDGE_TYPE
    if input_type is None or tuple(input_type) not in self.edge_types:
      raise ValueError(f'unknown edge type {input_type!r}; known: {self.edge_types}')
    return tuple(input_type)

  def check_seeds(
    self, seeds, ntype: NodeType, device: torch.device = torch.device('cpu')
  ) -> torch.Tensor:
    """``seeds`` as a 1-D int64 tensor of ids of ``ntype`` on ``device``.

    Raises:
      ValueError: they are not integers, or one is out of range.
    """
    if not isinstance(seeds, torch.Tensor):
      seeds = torch.as_tensor(seeds)
    if seeds.dtype != torch.int64:
      if seeds.is_floating_point() or seeds.dtype == torch.bool:
        raise ValueError(f'seed node ids must be integers, got dtype {seeds.dtype}')
      seeds = seeds.to(torch.int64)
    if seeds.dim() != 1:
      seeds = seeds.reshape(-1)
    # Checked where they are (on a GPU, one read of both bounds), then sent
    # to the device without stopping the host.
    if seeds.numel():
      lo, hi = bounds(seeds)
      n = self.num_nodes[ntype]
      if lo < 0 or hi >= n:
        what = f"node type '{ntype}'" if self.is_hetero else 'the graph'
        bad = lo if lo < 0 else hi
        raise ValueError(
          f'seed node id {bad} is out of range: {what} has {n} nodes (ids 0..{n - 1}); '
          f'a graph with isolated high-id nodes needs num_nodes in Dataset.init_graph'
        )
    return to_device_async(seeds, device)

  def normalize_fanouts(self, num_neighbors: NumNeighbors) -> Dict[EdgeType, List[int]]:
    """``num_neighbors`` as a list of per-hop fanouts for every edge type
    (checked; an edge type a dict leaves out gets 0, skipped, in every hop)."""

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
      unknown = [k for k in num_neighbors if k not in self.edge_types]
      if unknown:
        raise ValueError(f'num_neighbors names unknown edge types {unknown}')
      fanouts = {
        etype: check(list(v), f'[{etype}]', allow_zero=True) for etype, v in num_neighbors.items()
      }
      hops = {len(v) for v in fanouts.values()}
      if len(hops) != 1:
        raise ValueError('num_neighbors must give every edge type the same number of hops')
      num_hops = hops.pop()
      return {etype: fanouts.get(etype, [0] * num_hops) for etype in self.edge_types}
    values = check(num_neighbors, '', allow_zero=False)
    return {etype: values for etype in self.edge_types}


SEED_BOUND = 2**62
r"""Seeds (of streams and of kernel calls) lie in ``[0, SEED_BOUND)``."""


def mix_seed(seed: int, *keys: int) -> int:
  r"""A seed in ``[0, SEED_BOUND)`` made of ``seed`` and ``keys``: distinct
  keys give unrelated seeds (a hash, not a sum), the same ones the same seed
  in every process and run.

  Args:
    seed: the seed to derive from.
    keys: what the derived seed is for (an epoch, a batch position, a
      partition, ...).
  """
  text = ','.join(str(int(k)) for k in (seed, *keys)).encode()
  return int.from_bytes(hashlib.blake2b(text, digest_size=8).digest(), 'little') % SEED_BOUND


def checked_seed(seed) -> Optional[int]:
  r"""``seed`` as an int in the range torch's generators take, or None.

  Args:
    seed: a seed given by the user (None: none given).
  """
  if seed is None:
    return None
  if isinstance(seed, bool) or not isinstance(seed, numbers.Integral):
    raise ValueError(f'seed must be an integer, got {seed!r}')
  if not -(2**63) <= seed < 2**64:
    raise ValueError(f'seed must be in [-2**63, 2**64), the range torch takes, got {seed}')
  return int(seed)


def draw_seed() -> int:
  r"""A seed drawn from torch's global generator (``torch.manual_seed``
  governs it)."""
  return int(torch.randint(0, SEED_BOUND, (1,)))


class RandomStream:
  """A sampler's randomness: its own generator when seeded, else torch's
  global one (so ``torch.manual_seed`` governs it).

  A loader gives each batch a stream of its own (``for_batch``), so that a
  batch's draws depend on which batch it is, not on what was sampled before
  it, in which process or in which order: the batches of a resumed loader
  are those of the uninterrupted run.

  Args:
    seed: seeds the stream; None draws from torch's global generator.
  """

  def __init__(self, seed: Optional[int] = None):
    self.seed = checked_seed(seed)
    self.generator = torch.Generator().manual_seed(self.seed) if seed is not None else None

  @classmethod
  def for_batch(cls, seed: int, *keys: int) -> 'RandomStream':
    r"""The stream of one batch: seeded with ``mix_seed(seed, *keys)``.

    Args:
      seed: the loader's sampling seed.
      keys: the batch's place, e.g. its epoch and its position in it.
    """
    return cls(mix_seed(seed, *keys))

  def kernel_seed(self) -> int:
    """A seed for one call of a C++ sampling kernel."""
    return int(torch.randint(0, SEED_BOUND, (1,), generator=self.generator))

  def kernel_seeds(self, n: int) -> List[int]:
    """The next ``n`` kernel seeds in one draw: those ``n`` calls of
    ``kernel_seed`` give (the generator draws a tensor's values in order)."""
    if n == 0:
      return []
    return torch.randint(0, SEED_BOUND, (n,), generator=self.generator).tolist()

  def kernel_seeds_ahead(self, n: int) -> 'KernelSeedsAhead':
    """The next ``n`` kernel seeds, drawn now, for a caller that learns
    later how many it took: ``KernelSeedsAhead.keep(k)`` leaves the stream
    past the first ``k`` of them, as ``kernel_seeds(k)`` would have (one
    draw where all are kept)."""
    rewind = self.rewinder()
    return KernelSeedsAhead(self.kernel_seeds(n), self, rewind)

  def rewinder(self) -> Callable[[], None]:
    """A function that puts the stream back where it stands now."""
    generator = self.generator if self.generator is not None else torch.default_generator
    state = generator.get_state()
    return lambda: generator.set_state(state)

  def randint(self, high: int, n: int) -> torch.Tensor:
    """``n`` uniform integers in ``[0, high)``."""
    return torch.randint(0, high, (n,), generator=self.generator)

  def choice(self, weight: torch.Tensor, n: int) -> torch.Tensor:
    """``n`` indices drawn with replacement, proportionally to ``weight``."""
    return torch.multinomial(weight.float(), n, replacement=True, generator=self.generator)


@dataclass
class KernelSeedsAhead:
  """Kernel seeds drawn ahead of knowing how many are taken
  (``RandomStream.kernel_seeds_ahead``).

  Args:
    seeds: the seeds drawn.
    stream: the stream they came from.
    rewind: puts the stream back where it stood before the draw.
  """

  seeds: List[int]
  stream: RandomStream
  rewind: Callable[[], None]

  def keep(self, taken: int) -> None:
    """Leaves the stream past the first ``taken`` seeds alone."""
    if taken != len(self.seeds):
      self.rewind()
      self.stream.kernel_seeds(taken)
