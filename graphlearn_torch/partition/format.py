"""The on-disk partition format: paths, META.json, and the save_* functions.

See docs/partition_format.md. Every data file is a ``.npy`` (no pickle) that
``load_partition`` memory-maps; META.json records each file's shape, dtype and
sha256 and is completed last, so an interrupted run is recognised.
"""

import json
import os
from typing import Callable, Dict, List, Optional, Tuple, Union

import torch

from ..typing import (
  HOMO_EDGE_TYPE,
  HOMO_NODE_TYPE,
  EdgeType,
  FeaturePartitionData,
  GraphPartitionData,
  NodeType,
  as_str,
)
from .npy import NpyWriter, append_npy, numpy_dtype, read_header, sha256_file, write_npy
from .partition_book import GLTPartitionBook, PartitionBook, RangePartitionBook

FORMAT_NAME = 'graphlearn_torch.partition'
# 2: node and edge times (``node_time.npy``, ``edge_time.npy``) for temporal
# sampling; a version 1 partition (no times) loads as before.
FORMAT_VERSION = 2
META_FILE = 'META.json'


def type_key(type_: Union[NodeType, EdgeType]) -> str:
  """The META.json key of a type (a homogeneous dataset's are '_N' and '_N___E___N')."""
  return as_str(type_)


def type_dir(type_: Union[None, NodeType, EdgeType]) -> str:
  """The path component of a type: '' for a homogeneous dataset."""
  if type_ is None or type_ in (HOMO_NODE_TYPE, HOMO_EDGE_TYPE):
    return ''
  return as_str(type_)


def part_dir(partition_idx: int) -> str:
  return f'part{partition_idx}'


def graph_path(partition_idx: Optional[int], etype=None) -> str:
  """Where a partition's edges live (``partition_idx`` None: the cached whole graph)."""
  base = 'graph' if partition_idx is None else os.path.join(part_dir(partition_idx), 'graph')
  return os.path.join(base, type_dir(etype))


def feature_path(partition_idx: int, group: str, type_=None) -> str:
  return os.path.join(part_dir(partition_idx), group, type_dir(type_))


def book_path(kind: str, type_=None) -> str:
  """``node_pb.npy`` / ``node_pb/<ntype>.npy`` (and the same for edge_pb, labels...)."""
  name = type_dir(type_)
  return os.path.join(kind, f'{name}.npy') if name else f'{kind}.npy'


def split_path(split: str, partition_idx: int, ntype=None) -> str:
  return os.path.join(split, type_dir(ntype), f'part{partition_idx}.npy')


# -- META.json ----------------------------------------------------------------


def read_meta_json(root_dir: str) -> Dict:
  path = os.path.join(root_dir, META_FILE)
  with open(path) as f:
    try:
      return json.load(f)
    except json.JSONDecodeError as e:
      raise ValueError(f'{path} is corrupt ({e}); re-run the partitioner') from e


def _write_meta_json(root_dir: str, meta: Dict) -> None:
  path = os.path.join(root_dir, META_FILE)
  tmp = path + '.tmp'
  with open(tmp, 'w') as f:
    json.dump(meta, f, indent=1, sort_keys=True)
  os.replace(tmp, path)


def _update_meta(root_dir: str, **fields) -> None:
  path = os.path.join(root_dir, META_FILE)
  meta = read_meta_json(root_dir) if os.path.exists(path) else {}
  files = fields.pop('files', None)
  meta.update(fields)
  meta.setdefault('files', {}).update(files or {})
  _write_meta_json(root_dir, meta)


def record_files(root_dir: str, records: Dict[str, Dict]) -> None:
  """Adds files (path relative to ``root_dir`` -> shape/dtype/sha256) to META.json."""
  if records:
    _update_meta(root_dir, files={k.replace(os.sep, '/'): v for k, v in records.items()})


def save_npy(root_dir: str, relpath: str, data) -> None:
  """Writes a tensor to ``root_dir/relpath`` and records it in META.json."""
  record_files(root_dir, {relpath: write_npy(os.path.join(root_dir, relpath), data)})


def save_meta(
  output_dir: str,
  num_parts: int,
  data_cls: str = 'homo',
  node_types: Optional[List[NodeType]] = None,
  edge_types: Optional[List[EdgeType]] = None,
  **fields,
) -> None:
  """Writes the header of META.json (the file table is kept).

  Args:
    output_dir: the partition root.
    num_parts: the number of partitions.
    data_cls: 'homo' or 'hetero'.
    node_types: the node types of a heterogeneous dataset.
    edge_types: the edge types of a heterogeneous dataset.
    **fields: further META fields (num_nodes, num_edges, partitioner, ...).
  """
  if data_cls not in ('homo', 'hetero'):
    raise ValueError(f"data_cls must be 'homo' or 'hetero', got {data_cls!r}")
  os.makedirs(output_dir, exist_ok=True)
  _update_meta(
    output_dir,
    format=FORMAT_NAME,
    version=FORMAT_VERSION,
    num_parts=int(num_parts),
    data_cls=data_cls,
    node_types=list(node_types) if node_types else None,
    edge_types=[list(e) for e in edge_types] if edge_types else None,
    **fields,
  )


def save_times(
  output_dir: str, kind: str, times: Dict[Union[NodeType, EdgeType], torch.Tensor], hetero: bool
) -> None:
  """Writes whole time arrays, ``kind`` 'node_time' (by node id) or
  'edge_time' (by edge id), one per type, and names their types in
  META.json (format version 2).

  Args:
    output_dir: the partition root.
    kind: 'node_time' or 'edge_time'.
    times: checked times by type (``HOMO_NODE_TYPE`` / ``HOMO_EDGE_TYPE``
      keys for a homogeneous dataset).
    hetero: whether the dataset is heterogeneous.
  """
  if kind not in ('node_time', 'edge_time'):
    raise ValueError(f"kind must be 'node_time' or 'edge_time', got {kind!r}")
  for type_, values in times.items():
    save_npy(output_dir, book_path(kind, type_ if hetero else None), values)
  if times:
    path = os.path.join(output_dir, META_FILE)
    named = (read_meta_json(output_dir).get(kind) or []) if os.path.exists(path) else []
    named = sorted(set(named) | {type_key(t) for t in times})
    _update_meta(output_dir, version=FORMAT_VERSION, **{kind: named})


def _book_tensor(book) -> torch.Tensor:
  return book.tensor if isinstance(book, GLTPartitionBook) else torch.as_tensor(book)


def save_node_pb(
  output_dir: str, node_pb: Union[PartitionBook, torch.Tensor], ntype: Optional[NodeType] = None
) -> None:
  """Saves a node partition book (a range book goes into META.json's node_ranges)."""
  if isinstance(node_pb, RangePartitionBook):
    path = os.path.join(output_dir, META_FILE)
    ranges = read_meta_json(output_dir).get('node_ranges', {}) if os.path.exists(path) else {}
    ranges[type_key(ntype or HOMO_NODE_TYPE)] = [list(r) for r in node_pb.partition_ranges]
    _update_meta(output_dir, node_ranges=ranges)
    return
  save_npy(output_dir, book_path('node_pb', ntype), _book_tensor(node_pb))


def save_edge_pb(
  output_dir: str, edge_pb: Union[PartitionBook, torch.Tensor], etype: Optional[EdgeType] = None
) -> None:
  """Saves an edge partition book (partition id by global edge id)."""
  save_npy(output_dir, book_path('edge_pb', etype), _book_tensor(edge_pb))


def _save_graph(output_dir: str, base: str, data: GraphPartitionData) -> None:
  rows, cols = data.edge_index[0], data.edge_index[1]
  save_npy(output_dir, os.path.join(base, 'rows.npy'), rows.to(torch.int64))
  save_npy(output_dir, os.path.join(base, 'cols.npy'), cols.to(torch.int64))
  save_npy(output_dir, os.path.join(base, 'eids.npy'), data.eids.to(torch.int64))
  if data.weights is not None:
    save_npy(output_dir, os.path.join(base, 'weights.npy'), data.weights.to(torch.float32))


def save_graph_partition(
  output_dir: str,
  partition_idx: int,
  graph_partition: GraphPartitionData,
  etype: Optional[EdgeType] = None,
) -> None:
  """Saves the edges of one partition."""
  _save_graph(output_dir, graph_path(partition_idx, etype), graph_partition)


def save_graph_cache(
  output_dir: str,
  graph_partition_list: List[GraphPartitionData],
  etype: Optional[EdgeType] = None,
  with_edge_feat: bool = False,
) -> None:
  """Saves the whole graph (every partition's edges) for ``graph_caching``."""
  parts = list(graph_partition_list)
  weights = None
  if parts and all(p.weights is not None for p in parts):
    weights = torch.cat([p.weights for p in parts])
  whole = GraphPartitionData(
    torch.cat([torch.as_tensor(p.edge_index) for p in parts], dim=1),
    torch.cat([p.eids for p in parts]),
    weights,
  )
  _save_graph(output_dir, graph_path(None, etype), whole)


def write_edge_rows(
  output_dir: str,
  base: str,
  edge_index: Tuple[torch.Tensor, torch.Tensor],
  weights: Optional[torch.Tensor],
  eids: Optional[torch.Tensor],
  renumber: Callable,
  chunk_size: int,
) -> None:
  """Writes the edges ``eids`` (all when None) as ``base/rows.npy``,
  ``cols.npy``, ``eids.npy`` (and ``weights.npy``), ``chunk_size`` edges at
  a time, recorded in META.json.

  Args:
    output_dir: the partition root.
    base: the graph directory, relative to it.
    edge_index: ``(rows, cols)`` of every edge of the type.
    weights: every edge's weight, or None.
    eids: the edges to write (positions), or None for all.
    renumber: ``f(rows, cols) -> (rows, cols)`` in the ids as written.
    chunk_size: edges gathered and written at a time.
  """
  rows, cols = edge_index
  count = rows.numel() if eids is None else eids.numel()
  names = ['rows', 'cols', 'eids'] + (['weights'] if weights is not None else [])
  dtypes = [torch.int64] * 3 + [torch.float32]
  writers = {
    n: NpyWriter(os.path.join(output_dir, base, f'{n}.npy'), (count,), d)
    for n, d in zip(names, dtypes)
  }
  try:
    for s in range(0, count, chunk_size):
      sel = (
        torch.arange(s, min(s + chunk_size, count)) if eids is None else eids[s : s + chunk_size]
      )
      src, dst = renumber(rows[sel].to(torch.int64), cols[sel].to(torch.int64))
      writers['rows'].write(src)
      writers['cols'].write(dst)
      writers['eids'].write(sel)
      if weights is not None:
        writers['weights'].write(weights[sel].to(torch.float32))
  except BaseException:
    for w in writers.values():
      w.abort()
    raise
  record_files(output_dir, {os.path.join(base, f'{n}.npy'): w.close() for n, w in writers.items()})


def write_feature_rows(
  output_dir: str, base: str, table, dtype, rows, ids, chunk_size: int, prefix: str = ''
) -> None:
  """Writes ``table[rows]`` as ``base/<prefix>feats.npy`` (gathered ``chunk_size``
  rows at a time) and ``ids`` as ``base/<prefix>ids.npy``, recorded in META.json."""
  path = os.path.join(base, f'{prefix}feats.npy')
  shape = (rows.numel(),) + tuple(table.shape[1:])
  with NpyWriter(os.path.join(output_dir, path), shape, numpy_dtype(dtype)) as feats:
    for s in range(0, rows.numel(), chunk_size):
      chunk = table[rows[s : s + chunk_size]]
      feats.write(chunk.to(dtype) if chunk.dtype != dtype else chunk)
  record_files(output_dir, {path: feats.record})
  save_npy(output_dir, os.path.join(base, f'{prefix}ids.npy'), ids.to(torch.int64))


def save_feature_partition(
  output_dir: str,
  partition_idx: int,
  feature_partition: FeaturePartitionData,
  group: str = 'node_feat',
  graph_type: Optional[Union[NodeType, EdgeType]] = None,
) -> None:
  """Saves the feature rows (and ids, and cache) of one partition."""
  base = feature_path(partition_idx, group, graph_type)
  save_npy(output_dir, os.path.join(base, 'feats.npy'), feature_partition.feats)
  save_npy(output_dir, os.path.join(base, 'ids.npy'), feature_partition.ids.to(torch.int64))
  save_feature_partition_cache(output_dir, partition_idx, feature_partition, group, graph_type)


def save_feature_partition_chunk(
  output_dir: str,
  partition_idx: int,
  feature_partition: FeaturePartitionData,
  group: str = 'node_feat',
  graph_type: Optional[Union[NodeType, EdgeType]] = None,
) -> None:
  """Appends a chunk of feature rows and ids to a partition's files."""
  base = feature_path(partition_idx, group, graph_type)
  records = {}
  for name, data in (('feats.npy', feature_partition.feats), ('ids.npy', feature_partition.ids)):
    rel = os.path.join(base, name)
    path = os.path.join(output_dir, rel)
    append_npy(path, data)
    dtype, shape, _ = read_header(path)
    records[rel] = {'shape': list(shape), 'dtype': dtype.str, 'sha256': sha256_file(path)}
  record_files(output_dir, records)


def save_feature_partition_cache(
  output_dir: str,
  partition_idx: int,
  feature_partition: FeaturePartitionData,
  group: str = 'node_feat',
  graph_type: Optional[Union[NodeType, EdgeType]] = None,
) -> None:
  """Saves the cached hot rows of other partitions held by one partition."""
  if feature_partition.cache_feats is None:
    return
  base = feature_path(partition_idx, group, graph_type)
  save_npy(output_dir, os.path.join(base, 'cache_feats.npy'), feature_partition.cache_feats)
  save_npy(
    output_dir, os.path.join(base, 'cache_ids.npy'), feature_partition.cache_ids.to(torch.int64)
  )
