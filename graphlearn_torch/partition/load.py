"""GLT's partition loaders (``load_partition``, ``load_graph_partition_data``,
``load_feature_partition_data``, ``cat_feature_cache``,
``build_partition_feature``), over ``PartitionReader``, and
``add_partition_times``."""

import logging
import os
from typing import Dict, Optional, Tuple, Union

import torch

from ..typing import HOMO_EDGE_TYPE, HOMO_NODE_TYPE
from ..utils.times import checked_time
from .format import (
  FeaturePartitionData,
  GraphPartitionData,
  book_path,
  feature_path,
  save_times,
  write_feature_rows,
)
from .npy import as_tensor, load_npy
from .partition_book import GLTPartitionBook, PartitionBook, RangePartitionBook, owned_ids
from .reader import RERUN, PartitionReader, is_glt_partition

logger = logging.getLogger(__name__)


def _unwrap(d: Dict, hetero: bool):
  return d if hetero else next(iter(d.values()), None)


def load_partition(
  root_dir: str,
  partition_idx: int,
  graph_caching: bool = False,
  device: torch.device = torch.device('cpu'),
  allow_pickle: bool = False,
  verify: bool = False,
  input_layout: str = 'COO',
  with_graph: bool = True,
) -> Tuple:
  """Loads one partition: ``(num_parts, partition_idx, graph_data,
  node_feat_data, edge_feat_data, node_pb, edge_pb)``, dicts by type for a
  heterogeneous dataset. Tensors memory-map the files (pages are read when
  touched).

  Args:
    root_dir: the partition directory.
    partition_idx: the partition to load.
    graph_caching: load the whole graph instead of the partition's edges
      (the directory must have been written with ``graph_caching=True``).
    device: only the CPU is supported for loading; tensors move later.
    allow_pickle: read a GLT 0.2.x (pickle-based) partition; only for
      partitions from a trusted source, as unpickling can run code.
    verify: check every file's sha256 against META.json.
    input_layout: 'COO' (the partition's own edges), or 'CSC' / 'CSR': the
      ``rows.pt`` and ``cols.pt`` a script wrote into each graph directory
      for GLT's ``DistDataset.load(input_layout=...)`` (graph data's
      ``edge_index`` is then the pair of them).
    with_graph: read the graph data; False leaves it None (the caller has
      the graph already).
  """
  input_layout = str(input_layout).upper()
  if input_layout not in ('COO', 'CSC', 'CSR'):
    raise ValueError(f"input_layout must be 'COO', 'CSC' or 'CSR', got {input_layout!r}")
  if is_glt_partition(root_dir) and allow_pickle:
    from .glt_format import load_glt_partition

    return load_glt_partition(root_dir, partition_idx, graph_caching)
  reader = PartitionReader(root_dir, verify)
  reader.check_partition_idx(partition_idx)
  if graph_caching and not reader.meta.get('graph_caching'):
    raise ValueError(
      f'{root_dir} was partitioned without graph_caching: partition again with '
      f'partition(graph_caching=True), or load with graph_caching=False'
    )
  graph_idx = None if graph_caching else partition_idx
  if not with_graph:
    graph = {}
  elif input_layout == 'COO':
    graph = {e: reader.graph(graph_idx, e) for e in reader.edge_types()}
  else:
    graph = {e: reader.compressed_graph(graph_idx, e, input_layout) for e in reader.edge_types()}
  node_feat = {t: reader.features(partition_idx, 'node_feat', t) for t in reader.node_types()}
  edge_feat = {e: reader.features(partition_idx, 'edge_feat', e) for e in reader.edge_types()}
  node_pb = {t: reader.node_book(t, partition_idx) for t in reader.node_types()}
  edge_pb = {e: reader.edge_book(e) for e in reader.edge_types()}
  node_feat = {t: f for t, f in node_feat.items() if f is not None}
  edge_feat = {e: f for e, f in edge_feat.items() if f is not None}
  h = reader.hetero
  return (
    reader.num_parts,
    int(partition_idx),
    _unwrap(graph, h),
    _unwrap(node_feat, h) if node_feat else None,
    _unwrap(edge_feat, h) if edge_feat else None,
    _unwrap(node_pb, h),
    _unwrap(edge_pb, h),
  )


def load_graph_partition_data(
  graph_data_dir: str, device: torch.device = torch.device('cpu')
) -> Optional[GraphPartitionData]:
  """Loads ``rows/cols/eids[/weights].npy`` of one graph directory (unchecked
  against META.json; ``load_partition`` checks)."""
  if not os.path.exists(os.path.join(graph_data_dir, 'rows.npy')):
    return None
  rows, cols, eids = (
    load_npy(os.path.join(graph_data_dir, f'{n}.npy')) for n in ('rows', 'cols', 'eids')
  )
  weights_path = os.path.join(graph_data_dir, 'weights.npy')
  weights = load_npy(weights_path) if os.path.exists(weights_path) else None
  return GraphPartitionData(torch.stack([rows, cols]), eids, weights)


def load_feature_partition_data(
  feature_data_dir: str, device: torch.device = torch.device('cpu')
) -> Optional[FeaturePartitionData]:
  """Loads ``feats/ids[/cache_feats/cache_ids].npy`` of one feature directory."""
  if not os.path.exists(os.path.join(feature_data_dir, 'feats.npy')):
    return None

  def opt(name):
    path = os.path.join(feature_data_dir, name)
    return load_npy(path) if os.path.exists(path) else None

  return FeaturePartitionData(
    load_npy(os.path.join(feature_data_dir, 'feats.npy')),
    load_npy(os.path.join(feature_data_dir, 'ids.npy')),
    opt('cache_feats.npy'),
    opt('cache_ids.npy'),
  )


def book_tensor(book: Union[PartitionBook, torch.Tensor]) -> torch.Tensor:
  """The partition id of every id, materialised as a tensor."""
  if isinstance(book, RangePartitionBook):
    sizes = torch.tensor([e - s for s, e in book.partition_ranges])
    return torch.repeat_interleave(torch.arange(len(sizes)), sizes)
  return book.tensor if isinstance(book, GLTPartitionBook) else torch.as_tensor(book)


def cat_feature_cache(
  partition_idx: int,
  feat_pdata: FeaturePartitionData,
  feat_pb: Union[PartitionBook, torch.Tensor],
  in_id_order: bool = False,
) -> Tuple[float, torch.Tensor, object, PartitionBook]:
  """Joins a partition's own feature rows with its cache of other partitions'
  hot rows, cached rows first (GLT's layout; with ``in_id_order``, all rows
  in ascending id order instead, which the host's one-pass gather reads
  through row ranks rather than the id-to-row map).

  Returns:
    ``(cache_ratio, feats, id2index, feat_pb)``: the cached share of the
    rows, the joined table, the map from global id to row (an id that is
    both cached and owned maps to its cache row), and a book that sends the
    cached ids to this partition. Without a cache the rows stay
    memory-mapped, and a range book's id2index is an offset (no memory per
    id).
  """
  feats, ids = feat_pdata.feats, feat_pdata.ids
  has_cache = feat_pdata.cache_feats is not None and feat_pdata.cache_feats.size(0) > 0
  if not has_cache and isinstance(feat_pb, RangePartitionBook):
    return 0.0, feats, feat_pb.id2index, feat_pb
  id2index = torch.full((len(feat_pb),), -1, dtype=torch.int64)
  if not has_cache:
    id2index[ids] = torch.arange(ids.numel())
    return 0.0, feats, id2index, feat_pb
  cache_ids = feat_pdata.cache_ids
  num_cached = cache_ids.numel()
  if in_id_order:
    # One row per id: an id both cached and owned has the same row twice.
    held = torch.unique(torch.cat([cache_ids, ids]))  # sorted
    table = torch.empty((held.numel(), *feats.shape[1:]), dtype=feats.dtype)
    table[torch.searchsorted(held, ids)] = feats
    table[torch.searchsorted(held, cache_ids)] = feat_pdata.cache_feats
    id2index[held] = torch.arange(held.numel())
    feats = table
  else:
    id2index[ids] = torch.arange(num_cached, num_cached + ids.numel())
    id2index[cache_ids] = torch.arange(num_cached)  # written last: the cache row wins
    feats = torch.cat([feat_pdata.cache_feats, feats])
  book = book_tensor(feat_pb).clone()
  book[cache_ids] = partition_idx
  num_parts = feat_pb.num_parts if isinstance(feat_pb, PartitionBook) else None
  return num_cached / (num_cached + ids.numel()), feats, id2index, GLTPartitionBook(book, num_parts)


def _per_type_tables(tables, hetero: bool, homo_type) -> Dict:
  """Feature tables by type: none for None (GLT skips a missing group), the
  one table under ``homo_type`` for a homogeneous partition."""
  if tables is None:
    return {}
  if hetero:
    if not isinstance(tables, dict):
      raise TypeError(f'a heterogeneous partition needs features by type, got {type(tables)}')
    return tables
  return {homo_type: tables}


def build_partition_feature(
  root_dir: str,
  partition_idx: int,
  chunk_size: int = 10000,
  node_feat=None,
  node_feat_dtype: torch.dtype = torch.float32,
  edge_feat=None,
  edge_feat_dtype: torch.dtype = torch.float32,
) -> None:
  """Writes (or replaces) the features of one existing partition from whole
  feature tables, following the partition books on disk.

  Args:
    root_dir: the partition directory.
    partition_idx: the partition to write.
    chunk_size: rows gathered and written at a time.
    node_feat: ``[num_nodes, dim]`` by original node id (a dict by type when
      heterogeneous).
    node_feat_dtype: the dtype to store node features in.
    edge_feat: ``[num_edges, dim]`` by edge id (a dict by type when heterogeneous).
    edge_feat_dtype: the dtype to store edge features in.
  """
  reader = PartitionReader(root_dir)
  reader.check_partition_idx(partition_idx)

  def write(group, type_, table, dtype, rows, ids):
    base = feature_path(partition_idx, group, reader.dir_of(type_))
    write_feature_rows(root_dir, base, as_tensor(table), dtype, rows, ids, chunk_size)

  tables = _per_type_tables(node_feat, reader.hetero, HOMO_NODE_TYPE)
  for ntype, table in tables.items():
    ids = owned_ids(reader.node_book(ntype, partition_idx), partition_idx)
    node_map = reader.load(book_path('node_map', reader.dir_of(ntype)), required=False)
    rows = ids if node_map is None else node_map[ids]
    write('node_feat', ntype, table, node_feat_dtype, rows, ids)
  tables = _per_type_tables(edge_feat, reader.hetero, HOMO_EDGE_TYPE)
  for etype, table in tables.items():
    book = reader.edge_book(etype)
    if book is None:
      raise FileNotFoundError(f'{root_dir} has no edge partition book for {etype}; {RERUN}')
    eids = owned_ids(book, partition_idx)
    write('edge_feat', etype, table, edge_feat_dtype, eids, eids)


def add_partition_times(root_dir: str, node_time=None, edge_time=None) -> None:
  """Writes (or replaces) the node or edge times of an existing partition
  directory, for temporal sampling: one partitioned without times, by an
  older graphlearn_torch (format version 1, which this upgrades to 2), or
  by ``DistRandomPartitioner``.

  Args:
    root_dir: the partition directory.
    node_time: each node's time by original node id (a dict by node type
      when heterogeneous); a range book's renumbering is applied.
    edge_time: each edge's time by edge id (a dict by edge type).
  """
  reader = PartitionReader(root_dir)
  for kind, given, homo_type, count in (
    ('node_time', node_time, HOMO_NODE_TYPE, reader.num_nodes),
    ('edge_time', edge_time, HOMO_EDGE_TYPE, reader.num_edges),
  ):
    times = {}
    for type_, values in _per_type_tables(given, reader.hetero, homo_type).items():
      what = f'{kind} of {type_!r}' if reader.hetero else kind
      known = reader.node_types() if kind == 'node_time' else reader.edge_types()
      if type_ not in known:
        raise ValueError(f'{what}: {root_dir} has no such type (it has {known})')
      times[type_] = checked_time(as_tensor(values), what, count(reader.dir_of(type_)))
      node_map = reader.load(book_path('node_map', reader.dir_of(type_)), required=False)
      if kind == 'node_time' and node_map is not None:
        times[type_] = times[type_][node_map]
    save_times(root_dir, kind, times, reader.hetero)
