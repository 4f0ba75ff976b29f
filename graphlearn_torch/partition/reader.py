"""Reading a partition directory: META.json checks, memory-mapped files,
partition books (``PartitionReader``)."""

import logging
import os
from typing import Dict, Optional, Tuple

import torch

from ..typing import HOMO_EDGE_TYPE, HOMO_NODE_TYPE
from .format import (
  FORMAT_NAME,
  FORMAT_VERSION,
  META_FILE,
  FeaturePartitionData,
  GraphPartitionData,
  book_path,
  feature_path,
  graph_path,
  read_meta_json,
  type_key,
)
from .npy import PartitionFileError, load_npy
from .partition_book import GLTPartitionBook, PartitionBook, RangePartitionBook

logger = logging.getLogger(__name__)

RERUN = 're-run the partitioner (e.g. examples/partition_dataset.py) to rewrite it'


def is_glt_partition(root_dir: str) -> bool:
  """Whether ``root_dir`` holds a GLT 0.2.x (pickle-based) partition."""
  return not os.path.exists(os.path.join(root_dir, META_FILE)) and os.path.exists(
    os.path.join(root_dir, 'META')
  )


def read_meta(root_dir: str) -> Dict:
  """Reads and checks META.json of a partition directory.

  Raises:
    FileNotFoundError: there is no META.json.
    ValueError: it is not ours, is from a newer format version, or the
      partitioning that wrote it did not finish.
  """
  path = os.path.join(root_dir, META_FILE)
  if not os.path.exists(path):
    if is_glt_partition(root_dir):
      raise ValueError(
        f'{root_dir} holds a GLT 0.2.x partition (a pickled META): reading it runs pickle, '
        f'so pass allow_pickle=True if you trust its source'
      )
    raise FileNotFoundError(
      f'{path} not found: {root_dir} is not a partition directory; partition the graph first '
      f'(e.g. examples/partition_dataset.py)'
    )
  meta = read_meta_json(root_dir)
  if not isinstance(meta, dict):
    raise ValueError(f'{path} must hold a JSON object, got a {type(meta).__name__}; {RERUN}')
  if meta.get('format') != FORMAT_NAME:
    raise ValueError(f'{path}: not a graphlearn_torch partition (format {meta.get("format")!r})')
  version = meta.get('version')
  if not isinstance(version, int) or isinstance(version, bool) or version < 1:
    raise ValueError(f'{path}: format version {version!r} is not a version number; {RERUN}')
  if version > FORMAT_VERSION:
    raise ValueError(
      f'{path}: format version {version} comes from a newer graphlearn_torch; this one reads '
      f'versions up to {FORMAT_VERSION}: upgrade graphlearn_torch'
    )
  if 'num_parts' not in meta:
    raise ValueError(f'{path}: the partitioning that wrote it did not finish; {RERUN}')
  _check_meta_fields(path, meta)
  return meta


def _check_meta_fields(path: str, meta: Dict) -> None:
  """The fields that become numbers, types and file names, checked."""
  num_parts = meta['num_parts']
  if not isinstance(num_parts, int) or isinstance(num_parts, bool) or num_parts < 1:
    raise ValueError(f'{path}: num_parts must be a positive integer, got {num_parts!r}')
  if meta.get('data_cls') not in ('homo', 'hetero'):
    raise ValueError(f"{path}: data_cls must be 'homo' or 'hetero', got {meta.get('data_cls')!r}")
  if not isinstance(meta.get('files', {}), dict):
    raise ValueError(f'{path}: files must be an object, got {type(meta["files"]).__name__}')
  if meta['data_cls'] == 'hetero':
    ntypes, etypes = meta.get('node_types'), meta.get('edge_types')
    if not isinstance(ntypes, list) or not ntypes:
      raise ValueError(f'{path}: a heterogeneous partition needs a list of node_types')
    if not isinstance(etypes, list) or not all(isinstance(e, list) and len(e) == 3 for e in etypes):
      raise ValueError(f'{path}: edge_types must be a list of [src, relation, dst] triples')
    for name in ntypes + [part for e in etypes for part in e]:
      check_type_name(name, path)
  for field in ('num_nodes', 'num_edges'):
    counts = meta.get(field)
    if counts is None:
      continue
    if not isinstance(counts, dict) or not all(
      isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in counts.values()
    ):
      raise ValueError(f'{path}: {field} must map types to non-negative integers, got {counts!r}')


def check_type_name(name, where: str) -> None:
  """A node or edge type name that is safe as a path component."""
  bad = (
    not isinstance(name, str)
    or name in ('', '.', '..')
    or any(c in name for c in ('/', '\\', '\0'))
    or os.path.isabs(name)
  )
  if bad:
    raise ValueError(
      f'{where}: type name {name!r} is not allowed: names become directory names, so they must '
      f"be non-empty and hold no '/', '\\', NUL or '..'"
    )


def _load_index(path: str) -> torch.Tensor:
  """A ``torch.save``'d 1-D integer tensor, read without unpickling code."""
  t = torch.load(path, map_location='cpu', weights_only=True)
  if not isinstance(t, torch.Tensor) or t.dim() != 1 or t.is_floating_point():
    raise PartitionFileError(f'{path} must hold a 1-D integer tensor, got {t!r:.80}')
  return t.to(torch.int64)


class PartitionReader:
  """Reads the files of one partition directory, checked against META.json.

  Args:
    root_dir: the partition directory.
    verify: check every file's sha256 (reads each file once).
  """

  def __init__(self, root_dir: str, verify: bool = False):
    self.root_dir = root_dir
    self.meta = read_meta(root_dir)
    self.verify = verify
    self.hetero = self.meta['data_cls'] == 'hetero'

  @property
  def num_parts(self) -> int:
    return int(self.meta['num_parts'])

  def node_types(self):
    return list(self.meta['node_types']) if self.hetero else [HOMO_NODE_TYPE]

  def edge_types(self):
    return [tuple(e) for e in self.meta['edge_types']] if self.hetero else [HOMO_EDGE_TYPE]

  def dir_of(self, t):
    return t if self.hetero else None

  def check_partition_idx(self, partition_idx: int) -> None:
    if not 0 <= int(partition_idx) < self.num_parts:
      raise ValueError(
        f'partition_idx {partition_idx} is out of range: {self.root_dir} has {self.num_parts} '
        f'partitions (0 to {self.num_parts - 1})'
      )

  def exists(self, relpath: str) -> bool:
    return os.path.exists(os.path.join(self.root_dir, relpath))

  def num_nodes(self, ntype) -> Optional[int]:
    """The number of nodes of ``ntype`` that META.json records, if any."""
    return (self.meta.get('num_nodes') or {}).get(type_key(ntype or HOMO_NODE_TYPE))

  def num_edges(self, etype) -> Optional[int]:
    """The number of edges of ``etype`` that META.json records, if any."""
    counts = self.meta.get('num_edges')
    if isinstance(counts, dict):
      return counts.get(type_key(etype or HOMO_EDGE_TYPE))
    return counts if not self.hetero else None

  def _path(self, relpath: str) -> str:
    """``root_dir/relpath``, which must stay inside ``root_dir``."""
    root = os.path.realpath(self.root_dir)
    path = os.path.realpath(os.path.join(root, relpath))
    if os.path.commonpath([root, path]) != root:
      raise PartitionFileError(f'{relpath} resolves to {path}, outside the partition at {root}')
    return path

  def load(
    self, relpath: str, required: bool = True, bounds: Optional[Tuple[int, Optional[int]]] = None
  ) -> Optional[torch.Tensor]:
    """Memory-maps one file; a missing optional file gives None.

    Args:
      relpath: the file, relative to the partition directory.
      required: a missing file is an error (else None).
      bounds: ``(low, high)``: every value must lie in ``[low, high)``
        (``high`` None: no upper bound); checked by one pass over the values.
    """
    path = self._path(relpath)
    record = self.meta['files'].get(relpath.replace(os.sep, '/'))
    if not os.path.exists(path):
      if not required and record is None:
        return None
      raise FileNotFoundError(f'{path} is missing from the partition at {self.root_dir}; {RERUN}')
    if record is None and self.verify:
      raise PartitionFileError(f'{path} is not recorded in {META_FILE}; {RERUN}')
    try:
      tensor = load_npy(path, record, self.verify)
    except PartitionFileError as e:
      raise PartitionFileError(f'{e}; {RERUN}') from e
    if bounds is not None and tensor.numel():
      low, high = bounds
      lo, hi = int(tensor.min()), int(tensor.max())
      if lo < low or (high is not None and hi >= high):
        bad = lo if lo < low else hi
        raise PartitionFileError(
          f'{path} holds {bad}, outside [{low}, {"inf" if high is None else high}); {RERUN}'
        )
    return tensor

  def times(self, kind: str, type_) -> Optional[torch.Tensor]:
    """The whole time array of a type (format version 2), or None when the
    partition has none: 'node_time' by node id, 'edge_time' by edge id.

    Args:
      kind: 'node_time' or 'edge_time'.
      type_: the node or edge type (None for a homogeneous partition).
    """
    relpath = book_path(kind, self.dir_of(type_))
    times = self.load(relpath, required=False)
    if times is None:
      return None
    count = self.num_nodes(type_) if kind == 'node_time' else self.num_edges(type_)
    if times.dim() != 1 or (count is not None and times.numel() != count):
      raise PartitionFileError(
        f'{self._path(relpath)} holds shape {tuple(times.shape)} for {count} '
        f'{"nodes" if kind == "node_time" else "edges"}; {RERUN}'
      )
    return times

  def graph(self, partition_idx: Optional[int], etype) -> GraphPartitionData:
    base = graph_path(partition_idx, self.dir_of(etype))
    src, dst = (etype[0], etype[-1]) if self.hetero else (None, None)
    rows = self.load(os.path.join(base, 'rows.npy'), bounds=(0, self.num_nodes(src)))
    cols = self.load(os.path.join(base, 'cols.npy'), bounds=(0, self.num_nodes(dst)))
    eids = self.load(os.path.join(base, 'eids.npy'), bounds=(0, self.num_edges(etype)))
    weights = self.load(os.path.join(base, 'weights.npy'), required=False)
    for name, t in (('cols', cols), ('eids', eids), ('weights', weights)):
      if t is not None and t.shape[0] != rows.shape[0]:
        raise PartitionFileError(
          f'{os.path.join(self.root_dir, base, name + ".npy")} has {t.shape[0]} entries for '
          f'{rows.shape[0]} edges; {RERUN}'
        )
    return GraphPartitionData(torch.stack([rows, cols]), eids, weights)

  def compressed_graph(
    self, partition_idx: Optional[int], etype, layout: str
  ) -> GraphPartitionData:
    """One graph directory's edges as a script rewrote them for GLT's
    ``DistDataset.load(input_layout=...)``: ``rows.pt`` and ``cols.pt``
    (``torch.save``'d tensors) beside our COO files, ``(indices, indptr)``
    for 'CSC' and ``(indptr, indices)`` for 'CSR'. The edge ids and weights
    stay the COO files' (as GLT reads them); every file must agree with the
    partition's edge and node counts."""
    base = graph_path(partition_idx, self.dir_of(etype))
    src, dst = (etype[0], etype[-1]) if self.hetero else (None, None)
    paths = [self._path(os.path.join(base, f'{n}.pt')) for n in ('rows', 'cols')]
    for path in paths:
      if not os.path.exists(path):
        raise FileNotFoundError(
          f"input_layout='{layout}' reads {path}, which is missing: a partition holds COO edges "
          f"(load it with input_layout='COO') unless rows.pt and cols.pt were written beside them"
        )
    first, second = (_load_index(path) for path in paths)
    eids = self.load(os.path.join(base, 'eids.npy'), bounds=(0, self.num_edges(etype)))
    weights = self.load(os.path.join(base, 'weights.npy'), required=False)
    if layout == 'CSC':  # columns (targets) compressed: (source indices, target indptr)
      indices, indptr = first, second
      indices_path, indptr_path = paths
      indices_of, ptr_of = src, dst
    else:  # rows (sources) compressed: (source indptr, target indices)
      indptr, indices = first, second
      indptr_path, indices_path = paths
      ptr_of, indices_of = src, dst
    num_edges = eids.shape[0]
    if indices.numel() != num_edges:
      raise PartitionFileError(
        f'{indices_path} holds {indices.numel()} edges ({layout} indices), but the partition '
        f'has {num_edges} (eids.npy)'
      )
    nodes = self.num_nodes(ptr_of)
    if indptr.numel() < 1 or (nodes is not None and indptr.numel() > nodes + 1):
      raise PartitionFileError(
        f'{indptr_path} holds {indptr.numel()} entries ({layout} indptr), but the partition '
        f'has {nodes} nodes of that type: at most {nodes} + 1'
      )
    if int(indptr[0]) != 0 or int(indptr[-1]) != num_edges:
      raise PartitionFileError(
        f'{indptr_path} runs from {int(indptr[0])} to {int(indptr[-1])} ({layout} indptr), '
        f"not from 0 to the partition's {num_edges} edges"
      )
    nodes = self.num_nodes(indices_of)
    if num_edges and (
      int(indices.min()) < 0 or (nodes is not None and int(indices.max()) >= nodes)
    ):
      raise PartitionFileError(
        f'{indices_path} holds node ids outside [0, {nodes}) ({layout} indices)'
      )
    if weights is not None and weights.shape[0] != num_edges:
      raise PartitionFileError(
        f'{os.path.join(self.root_dir, base, "weights.npy")} has {weights.shape[0]} entries for '
        f'{num_edges} edges; {RERUN}'
      )
    return GraphPartitionData((first, second), eids, weights)

  def features(self, partition_idx: int, group: str, type_) -> Optional[FeaturePartitionData]:
    base = feature_path(partition_idx, group, self.dir_of(type_))
    feats = self.load(os.path.join(base, 'feats.npy'), required=False)
    if feats is None:
      return None
    count = self.num_nodes(type_) if group == 'node_feat' else self.num_edges(type_)
    ids = self.load(os.path.join(base, 'ids.npy'), bounds=(0, count))
    cache_feats = self.load(os.path.join(base, 'cache_feats.npy'), required=False)
    cache_ids = None
    if cache_feats is not None:
      cache_ids = self.load(os.path.join(base, 'cache_ids.npy'), bounds=(0, count))
    for table, index, name in ((feats, ids, 'ids'), (cache_feats, cache_ids, 'cache_ids')):
      if table is not None and index.numel() != table.shape[0]:
        raise PartitionFileError(
          f'{os.path.join(self.root_dir, base, name + ".npy")} has {index.numel()} ids for '
          f'{table.shape[0]} feature rows; {RERUN}'
        )
    return FeaturePartitionData(feats, ids, cache_feats, cache_ids)

  def node_book(self, ntype, partition_idx: int) -> PartitionBook:
    ranges = (self.meta.get('node_ranges') or {}).get(type_key(ntype))
    if ranges is not None:
      return RangePartitionBook(ranges, partition_idx)
    book = self.load(book_path('node_pb', self.dir_of(ntype)), bounds=(0, self.num_parts))
    return GLTPartitionBook(book, self.num_parts)

  def edge_book(self, etype) -> Optional[PartitionBook]:
    path = book_path('edge_pb', self.dir_of(etype))
    pb = self.load(path, required=False, bounds=(0, self.num_parts))
    return None if pb is None else GLTPartitionBook(pb, self.num_parts)
