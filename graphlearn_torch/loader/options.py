"""The options every loader shares, declared once.

``LoaderOptions`` holds each option's default and its one docstring.
Loaders on one machine and across partitions take these options as
arguments of their own (GLT's signatures, positions included), through
``loader_options``: a loader's ``__init__`` declares only its own
parameters and receives the options as one ``LoaderOptions``; its public
signature and its docstring get the options it takes from here.
"""

import dataclasses
import functools
import inspect
import re
import textwrap
from typing import Dict, Literal, Optional, Sequence, Tuple

import torch

from ..data.dataset import Dataset
from ..sampler.neighbor_sampler import NeighborSampler
from ..sampler.temporal import dataset_times
from ..typing import NumNeighbors


@dataclasses.dataclass
class LoaderOptions:
  r"""What a loader samples and how it batches its seeds.

  Args:
    batch_size: seeds per batch.
    shuffle: reshuffle the seeds every epoch.
    drop_last: drop the last incomplete batch.
    seed: seeds both the shuffling and each batch's sampling, for
      reproducible batches (default: the sampler's seed, else one drawn from
      torch's global generator).
    with_edge: return the sampled edges' ids (``e_id``) and features
      (``edge_attr``).
    with_weight: sample neighbors in proportion to edge weights.
    strategy: 'random'.
    replace: sample neighbors with replacement.
    edge_dir: 'out' or 'in'; must be the dataset's.
    collect_features: gather features and labels into the batches.
    time_attr: temporal sampling by 'node_time' or 'edge_time', the
      dataset's times (``Dataset.init_node_time`` / ``init_edge_time``, or
      the partitioner's), as PyG's ``time_attr`` names a node or edge
      attribute: a seed of time t reaches only the past.
    temporal_strategy: 'uniform' or 'last' (the most recent neighbors).
    disjoint: every seed grows a subgraph of its own; the batch's ``batch``
      vector gives each node's seed (PyG's). Temporal sampling is always
      disjoint.
    subgraph_type: 'directional', 'bidirectional' or 'induced' (PyG's).
    is_sorted: the neighbors are in time order already (checked, not
      sorted).
    concurrent_batches: batches sampled at once when sampling on the CPU,
      each on a thread of its own that runs its kernels alone, in the
      epoch's order (PyG's ``num_workers``, in threads): on many cores,
      more batches a second than one batch on every core. 1: a batch at a
      time, on ``torch.get_num_threads()`` threads.
  """

  batch_size: int = 1
  shuffle: bool = False
  drop_last: bool = False
  seed: Optional[int] = None
  with_edge: bool = False
  with_weight: bool = False
  strategy: str = 'random'
  replace: bool = False
  edge_dir: Literal['in', 'out'] = 'out'
  collect_features: bool = False
  time_attr: Optional[str] = None
  temporal_strategy: str = 'uniform'
  disjoint: bool = False
  subgraph_type: str = 'directional'
  is_sorted: bool = False
  concurrent_batches: int = 1


# The option groups loaders take, beside their positional ones.
BATCHING = ('batch_size', 'shuffle', 'drop_last', 'seed')
TEMPORAL = ('time_attr', 'temporal_strategy', 'disjoint', 'subgraph_type')
# What the loaders on one machine take besides.
ON_ONE_MACHINE = ('concurrent_batches',)

# GLT's distributed loaders call the seed random_seed.
ALIASES = {'random_seed': 'seed'}


def option_docs() -> Dict[str, str]:
  r"""Each option's docstring entry (its lines under ``Args:``), by name."""
  docs, name = {}, None
  args = inspect.getdoc(LoaderOptions).split('Args:\n', 1)[1]
  for line in args.splitlines():
    entry = re.match(r'  (\w+): (.*)', line)
    if entry:
      name = entry.group(1)
      docs[name] = entry.group(2)
    elif name is not None and line.strip():
      docs[name] += ' ' + line.strip()
  return docs


def _option_parameter(name: str, kind) -> inspect.Parameter:
  field = {f.name: f for f in dataclasses.fields(LoaderOptions)}[ALIASES.get(name, name)]
  return inspect.Parameter(name, kind, default=field.default, annotation=field.type)


def _public_signature(
  init, order: Sequence[str], keyword: Sequence[str]
) -> Tuple[inspect.Signature, Tuple[str, ...]]:
  r"""The signature a loader's ``__init__`` shows, and the option names in
  it."""
  own = dict(inspect.signature(init).parameters)
  own.pop('options')
  params = [own.pop('self')]
  options = tuple(n for n in (*order, *keyword) if n not in own)
  for name in order:
    positional = inspect.Parameter.POSITIONAL_OR_KEYWORD
    params.append(own.pop(name) if name in own else _option_parameter(name, positional))
  var_keyword = [p for p in own.values() if p.kind == inspect.Parameter.VAR_KEYWORD]
  for param in own.values():
    if param.kind != inspect.Parameter.VAR_KEYWORD:
      params.append(param.replace(kind=inspect.Parameter.KEYWORD_ONLY))
  for name in keyword:
    if name not in order:
      params.append(_option_parameter(name, inspect.Parameter.KEYWORD_ONLY))
  return inspect.Signature(params + var_keyword), options


def _documented(doc: str, names: Sequence[str]) -> str:
  r"""``doc`` (a class docstring ending in its ``Args:`` section) with the
  entries of the options ``names`` appended."""
  docs = option_docs()
  lines = [
    textwrap.fill(f'{name}: {docs[ALIASES.get(name, name)]}', 78, initial_indent=' ' * 4,
                  subsequent_indent=' ' * 6)
    for name in names
  ]  # fmt: skip
  return doc.rstrip() + '\n' + '\n'.join(lines) + '\n  '


def loader_options(*order: str, keyword: Sequence[str] = ()):
  r"""Gives a loader class the options it takes as arguments.

  The class's ``__init__(self, <own parameters>, options)`` declares only
  the loader's own parameters. Its public signature lists ``order`` first,
  positional (the loader's own parameters and options, in GLT's order),
  then its other own parameters and the options of ``keyword``, keyword
  only, each option with ``LoaderOptions``' default; a call's option values
  reach ``__init__`` as one ``LoaderOptions`` (``options``). A subclass
  hands its ``options`` on as they are: ``super().__init__(...,
  options=options)``. The options' docs join the class's ``Args:``.

  Args:
    *order: the positional parameters after ``self``, in order.
    keyword: the options taken by keyword only.
  """

  def decorate(cls):
    init = cls.__init__
    signature, names = _public_signature(init, order, keyword)

    var_keyword = [p.name for p in signature.parameters.values() if p.kind == p.VAR_KEYWORD]

    @functools.wraps(init)
    def __init__(self, *args, **kwargs):
      if isinstance(kwargs.get('options'), LoaderOptions):  # a subclass's call
        return init(self, *args, **kwargs)
      unknown = sorted(set(kwargs) - set(signature.parameters))
      if unknown and not var_keyword:
        raise TypeError(f'{cls.__name__} got unexpected arguments {unknown}')
      bound = signature.bind(self, *args, **kwargs)
      bound.apply_defaults()
      values = dict(bound.arguments)
      given = {ALIASES.get(n, n): values.pop(n) for n in names}
      extra = values.pop(var_keyword[0]) if var_keyword else {}
      return init(**values, **extra, options=LoaderOptions(**given))

    __init__.__signature__ = signature
    cls.__init__ = __init__
    cls.__doc__ = _documented(cls.__doc__ or '', names)
    return cls

  return decorate


def build_neighbor_sampler(
  data: Dataset,
  num_neighbors: Optional[NumNeighbors],
  options: LoaderOptions,
  device: torch.device,
  with_neg: bool = False,
) -> NeighborSampler:
  r"""The NeighborSampler a loader's options describe for a dataset (its
  graph and edge_dir; its node or edge times where ``time_attr`` names
  them).

  Args:
    data: the dataset.
    num_neighbors: neighbors per hop.
    options: the loader's options.
    device: where outputs go.
    with_neg: prepare negative sampling (link loaders).
  """
  if data.graph is None:
    raise ValueError('the dataset has no graph: call init_graph first')
  return NeighborSampler(
    data.graph,
    num_neighbors,
    device=device,
    with_edge=options.with_edge,
    with_neg=with_neg,
    with_weight=options.with_weight,
    strategy=options.strategy,
    edge_dir=data.edge_dir,
    seed=options.seed,
    replace=options.replace,
    temporal_strategy=options.temporal_strategy,
    disjoint=options.disjoint,
    subgraph_type=options.subgraph_type,
    is_sorted=options.is_sorted,
    **dataset_times(data, options.time_attr),
  )
