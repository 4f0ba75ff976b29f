"""DistDataset: the Dataset of one partition, plus the partition books that say
where everything else lives."""

import logging
import os
from multiprocessing.reduction import ForkingPickler
from types import SimpleNamespace
from typing import Any, Callable, Dict, List, Literal, Optional, Tuple, Union

import torch

from ..._ext import cuda_kernels_available
from ...data import Dataset, DeviceGroup, Feature, Graph
from ...data.split import random_split as random_positions
from ...partition.format import book_path, split_path
from ...partition.load import cat_feature_cache, load_partition
from ...partition.npy import PartitionFileError, load_npy
from ...partition.partition_book import (
  HeteroEdgePartitionDict,
  HeteroNodePartitionDict,
  PartitionBook,
  as_partition_book,
  share_host_lookups,
  use_host_lookups,
)
from ...partition.reader import PartitionReader
from ...typing import EdgeType, NodeIndex, NodeLabel, NodeType
from ...utils.common import default_id_filter, default_id_select, per_type_values

logger = logging.getLogger(__name__)


def _load_labels(path: str) -> torch.Tensor:
  """A whole label vector from ``.npy`` (mapped) or ``.pt`` (tensors only)."""
  if not os.path.exists(path):
    raise FileNotFoundError(f'label file {path} not found')
  if path.endswith('.npy'):
    return load_npy(path)
  return torch.load(path, weights_only=True)


def _partial_features(
  feat_data, books, partition_idx, hetero, with_gpu, device_groups, device, split_ratio
):
  """Features of one partition (own rows and cache), the feature books, and
  whether a cache was joined to the rows (the table then lives in this
  process's memory rather than in the mapped files). On the GPU path the
  first ``split_ratio`` of the rows stay in GPU memory; by default the
  cached rows, the other partitions' hottest, which come first (GLT's
  layout). In host memory the rows are in id order: the gather reads them
  through row ranks (``Feature.row_ranks``)."""
  in_id_order = not (with_gpu and cuda_kernels_available())
  feats, feat_pbs, joined = {}, {}, False
  for key, data in (feat_data if hetero else {None: feat_data}).items():
    book = books[key] if hetero else books
    cache_ratio, table, id2index, feat_pbs[key] = cat_feature_cache(
      partition_idx, data, book, in_id_order
    )
    ratio = cache_ratio if split_ratio is None else split_ratio
    feats[key] = Feature(table, id2index, ratio, device_groups, device, with_gpu, table.dtype)
    joined = joined or cache_ratio > 0
  return (feats, feat_pbs, joined) if hetero else (feats[None], feat_pbs[None], joined)


class DistDataset(Dataset):
  """The graph, features and labels of one partition, with the partition books.

  Args:
    num_partitions: the number of partitions.
    partition_idx: this partition.
    graph_partition: the partition's Graph (or dict by edge type).
    node_feature_partition: its node Feature (or dict by node type).
    edge_feature_partition: its edge Feature (or dict by edge type).
    whole_node_labels: the labels of all nodes (or dict by node type).
    node_pb: the node partition book (or dict by node type).
    edge_pb: the edge partition book (or dict by edge type).
    node_feat_pb: where each node's feature row is (defaults to node_pb;
      differs when rows of other partitions are cached here).
    edge_feat_pb: the same for edge features.
    edge_dir: 'out' or 'in', as for Dataset.
    graph_caching: whether the graph is the whole graph.
    node_split: ``(train_idx, val_idx, test_idx)`` of this partition.
    id_filter: ``f(node_pb, partition_idx)`` -> the ids this partition owns.
    id_select: ``f(srcs, p_mask, node_pb)`` -> the ``srcs`` that ``p_mask``
      selects (GLT's signature).
  """

  def __init__(
    self,
    num_partitions: int = 1,
    partition_idx: int = 0,
    graph_partition: Union[Graph, Dict[EdgeType, Graph]] = None,
    node_feature_partition: Union[Feature, Dict[NodeType, Feature]] = None,
    edge_feature_partition: Union[Feature, Dict[EdgeType, Feature]] = None,
    whole_node_labels: NodeLabel = None,
    node_pb: Union[PartitionBook, HeteroNodePartitionDict] = None,
    edge_pb: Union[PartitionBook, HeteroEdgePartitionDict] = None,
    node_feat_pb: Union[PartitionBook, HeteroNodePartitionDict] = None,
    edge_feat_pb: Union[PartitionBook, HeteroEdgePartitionDict] = None,
    edge_dir: Literal['in', 'out'] = 'out',
    graph_caching: bool = False,
    node_split: Tuple[NodeIndex, NodeIndex, NodeIndex] = None,
    id_filter: Callable = default_id_filter,
    id_select: Callable = default_id_select,
  ):
    super().__init__(
      graph_partition,
      node_feature_partition,
      edge_feature_partition,
      whole_node_labels,
      edge_dir,
      node_split,
    )
    if not 0 <= int(partition_idx) < int(num_partitions):
      raise ValueError(
        f'partition_idx must be in [0, num_partitions), got {partition_idx} of {num_partitions}'
      )
    self.num_partitions = int(num_partitions)
    self.partition_idx = int(partition_idx)
    self.node_pb = node_pb
    self.edge_pb = edge_pb
    self._node_feat_pb = node_feat_pb
    self._edge_feat_pb = edge_feat_pb
    self.graph_caching = graph_caching
    self.id_filter = id_filter
    self.id_select = id_select
    self.meta: Optional[Dict] = None
    self._reader: Optional[PartitionReader] = None
    self._load_args: Optional[Dict] = None  # how `load` was called: other processes re-map
    self._features_joined = False  # see features_joined

  @property
  def node_feat_pb(self):
    """Where each node's feature row lives (node_pb unless rows are cached)."""
    return self.node_pb if self._node_feat_pb is None else self._node_feat_pb

  @property
  def edge_feat_pb(self):
    return self.edge_pb if self._edge_feat_pb is None else self._edge_feat_pb

  def place_on_gpu(self, device: int) -> None:
    """Places what lives in GPU ``device``'s memory (``Dataset.place_on_gpu``)
    and the partition books' lookup copies its kernels read there: the node
    books where the graphs sample or the node features are read on that GPU,
    the edge feature books where the edge features are. The processes this
    dataset is handed to next read them all by CUDA IPC."""
    super().place_on_gpu(device)
    gpu = torch.device('cuda', device)
    for book in self._books_read_on(gpu):
      book.lookup_tensor(gpu)

  def _books_read_on(self, gpu: torch.device) -> List[PartitionBook]:
    r"""The partition books whose lookup copies on ``gpu`` its kernels read."""

    def read(*values) -> bool:
      return any(
        (isinstance(i, Graph) and i.sampling_device == gpu)
        or (isinstance(i, Feature) and i.with_gpu and i.gpu_index() == gpu.index)
        for i in per_type_values(*values)
      )

    books = []
    if read(self.graph, self.node_features):
      books += [self.node_pb, self.node_feat_pb]
    if read(self.edge_features):
      books.append(self.edge_feat_pb)
    flat = per_type_values(*books)
    return list({id(b): b for b in flat if isinstance(b, PartitionBook)}.values())

  @property
  def built_feature_books(self) -> Tuple[Any, Any]:
    """The node and edge feature partition books this dataset built (with
    a cache of other partitions' rows), each None where the partition's own
    book (``node_pb``, ``edge_pb``) serves."""
    return self._node_feat_pb, self._edge_feat_pb

  @property
  def features_joined(self) -> bool:
    """Whether ``load`` joined the partition's feature rows with its cache
    of other partitions' rows: the tables then live in this process's
    memory, not in the mapped partition files."""
    return self._features_joined

  def _check_feature_rows(self) -> None:
    """A partition holds some feature rows only, by design."""

  def load(
    self,
    root_dir: str,
    partition_idx: int,
    graph_mode: str = 'ZERO_COPY',
    input_layout: Literal['COO', 'CSR', 'CSC'] = 'COO',
    feature_with_gpu: bool = True,
    graph_caching: bool = False,
    device_group_list: Optional[List[DeviceGroup]] = None,
    whole_node_label_file: Union[str, Dict[NodeType, str]] = None,
    device: Optional[int] = None,
    allow_pickle: bool = False,
    verify: bool = False,
    split_ratio: Optional[float] = None,
  ) -> 'DistDataset':
    """Loads one partition written by a partitioner. Feature tables stay
    memory-mapped (pages are read when rows are first gathered).

    Args:
      root_dir: the partition directory.
      partition_idx: the partition to load.
      graph_mode: 'CPU', 'ZERO_COPY' or 'CUDA' (see Graph).
      input_layout: 'COO', the partition's edges; 'CSC' or 'CSR': the
        ``rows.pt`` / ``cols.pt`` a script wrote into each graph directory
        (GLT's convention: ``(indices, indptr)`` for 'CSC', ``(indptr,
        indices)`` for 'CSR'; see ``load_partition``).
      feature_with_gpu: place hot feature rows on the GPU when there is one.
      graph_caching: load the whole graph instead of the partition's edges.
      device_group_list: GPU groups sharing hot feature rows.
      whole_node_label_file: a ``.npy`` or ``.pt`` label file (or a dict of
        them by node type); default: the partition's ``labels.npy``.
      device: the GPU index for GPU modes.
      allow_pickle: accept a GLT 0.2.x (pickle-based) partition.
      verify: check every file's sha256 against META.json.
      split_ratio: with ``feature_with_gpu``, the share of each feature
        table's rows kept in GPU memory (the rest is read through UVA);
        default: the partition's cached rows, which come first.
    """
    input_layout = str(input_layout).upper()
    # The arguments, but verify: other processes load the same files (load_args).
    load_args = {k: v for k, v in locals().items() if k not in ('self', 'verify')}
    return self._load(load_args, verify)

  def _load(
    self, load_args: Dict, verify: bool = False, graph=None, features=None, lookups=(None, None)
  ) -> 'DistDataset':
    """``load`` with its arguments in ``load_args``. ``graph``: the
    partition's graph (a dict by type when heterogeneous) as another process
    built it, so that its edges are neither read nor converted again.
    ``features``: ``(node_features, edge_features, node_feat_pb,
    edge_feat_pb, joined)`` as another process built them (``joined``:
    with the cache), so that they are neither built nor held again.
    ``lookups``: the node books' and edge books' host lookup copies as
    another process shared them (``share_host_lookups``), so that they are
    not made again."""
    a = SimpleNamespace(**load_args)
    (num_parts, idx, graph_data, node_feat_data, edge_feat_data, node_pb, edge_pb) = load_partition(
      a.root_dir,
      a.partition_idx,
      a.graph_caching,
      allow_pickle=a.allow_pickle,
      verify=verify,
      input_layout=a.input_layout,
      with_graph=graph is None,
    )
    hetero = isinstance(graph_data, dict)  # {} when the graph was given
    self.num_partitions, self.partition_idx = num_parts, idx
    self.graph_caching = a.graph_caching
    reader = (
      None
      if a.allow_pickle and not os.path.exists(os.path.join(a.root_dir, 'META.json'))
      else (PartitionReader(a.root_dir))
    )
    self._reader = reader
    self.meta = reader.meta if reader is not None else None
    if graph is None:
      self._init_partition_graph(graph_data, reader, a.input_layout, a.graph_mode, a.device)
    else:
      self.graph = graph

    self.node_pb = node_pb if hetero else as_partition_book(node_pb, num_parts)
    self.edge_pb = edge_pb
    for books, copies in zip((self.node_pb, self.edge_pb), lookups):
      use_host_lookups(books, copies)
    if features is None:
      placement = (a.feature_with_gpu, a.device_group_list, a.device, a.split_ratio)
      self._init_partition_features(node_feat_data, edge_feat_data, node_pb, edge_pb, *placement)
    else:
      (self.node_features, self.edge_features, self._node_feat_pb, self._edge_feat_pb,
       self._features_joined) = features  # fmt: skip
    self._load_labels_and_splits(a.root_dir, reader, a.whole_node_label_file, hetero)
    if reader is not None:
      self._load_times(reader, hetero)
    self._load_args = load_args
    logger.info('loaded partition %d of %d from %s', idx, num_parts, a.root_dir)
    return self

  def _init_partition_graph(self, graph_data, reader, input_layout, graph_mode, device) -> None:
    """The partition's graph from ``load_partition``'s graph data (one
    edge type's, or a dict of them by type), with the node counts of
    META.json where there is one."""
    hetero = isinstance(graph_data, dict)
    graphs = graph_data if hetero else {None: graph_data}
    num_nodes = None
    if reader is not None:
      counts = reader.meta['num_nodes']
      num_nodes = (
        {t: counts[t] for t in reader.node_types()} if hetero else next(iter(counts.values()))
      )
    self.init_graph(
      edge_index={k: g.edge_index for k, g in graphs.items()} if hetero else graph_data.edge_index,
      edge_ids={k: g.eids for k, g in graphs.items()} if hetero else graph_data.eids,
      edge_weights=(
        {k: g.weights for k, g in graphs.items() if g.weights is not None} or None
        if hetero
        else graph_data.weights
      ),
      layout=input_layout,
      graph_mode=graph_mode,
      device=device,
      num_nodes=num_nodes,
    )

  def _init_partition_features(
    self, node_feat_data, edge_feat_data, node_pb, edge_pb, *placement
  ) -> None:
    """The partition's node and edge feature tables (its own rows, and
    the cached rows of others), placed as ``load``'s ``feature_with_gpu``,
    ``device_group_list``, ``device`` and ``split_ratio`` say."""
    hetero = self.is_hetero
    self._node_feat_pb = self._edge_feat_pb = None
    node_joined = edge_joined = False
    if node_feat_data is not None:
      self.node_features, self._node_feat_pb, node_joined = _partial_features(
        node_feat_data, node_pb, self.partition_idx, hetero, *placement
      )
    if edge_feat_data is not None:
      self.edge_features, self._edge_feat_pb, edge_joined = _partial_features(
        edge_feat_data, edge_pb, self.partition_idx, hetero, *placement
      )
    self._features_joined = node_joined or edge_joined

  @property
  def load_args(self) -> Optional[Dict]:
    """The arguments ``load`` was called with (None when the partition was
    not loaded from a directory): another process loads the same files."""
    return self._load_args

  def _load_labels_and_splits(self, root_dir, reader, label_file, hetero) -> None:
    if label_file is not None:
      if isinstance(label_file, dict):
        self.node_labels = {t: _load_labels(p) for t, p in label_file.items()}
      else:
        self.node_labels = _load_labels(label_file)
    if reader is None:
      return
    ntypes = reader.node_types()
    if label_file is None:
      labels = {t: reader.load(book_path('labels', reader.dir_of(t)), False) for t in ntypes}
      labels = {t: y for t, y in labels.items() if y is not None}
      for t, y in labels.items():
        if reader.num_nodes(t) is not None and y.shape[0] < reader.num_nodes(t):
          raise PartitionFileError(
            f'{os.path.join(root_dir, book_path("labels", reader.dir_of(t)))} holds '
            f'{y.shape[0]} labels for {reader.num_nodes(t)} nodes; re-run the partitioner'
          )
      if labels:
        self.node_labels = labels if hetero else next(iter(labels.values()))
    splits = []
    for name in ('train_idx', 'val_idx', 'test_idx'):
      ids = {
        t: reader.load(
          split_path(name, self.partition_idx, reader.dir_of(t)),
          False,
          bounds=(0, reader.num_nodes(t)),
        )
        for t in ntypes
      }
      ids = {t: x for t, x in ids.items() if x is not None}
      splits.append((ids if hetero else next(iter(ids.values()))) if ids else None)
    self.train_idx, self.val_idx, self.test_idx = splits

  def _load_times(self, reader: PartitionReader, hetero: bool) -> None:
    """The partition's node and edge times (whole, memory-mapped), where
    it has them: ``node_time`` / ``edge_time`` as ``init_node_time`` /
    ``init_edge_time`` set them."""
    for kind, types, init in (
      ('node_time', reader.node_types(), self.init_node_time),
      ('edge_time', reader.edge_types(), self.init_edge_time),
    ):
      times = {t: reader.times(kind, t) for t in types}
      times = {t: v for t, v in times.items() if v is not None}
      if times:
        init(times if hetero else next(iter(times.values())))

  def random_node_split(self, num_val: Union[float, int], num_test: Union[float, int]):
    """Splits the nodes this partition owns (``id_filter`` of its node book)
    at random into train, validation and test ids, per labelled node type,
    as GLT's DistDataset does."""
    if self.node_labels is None:
      raise ValueError('random_node_split needs node labels: call init_node_labels first')
    if isinstance(self.node_labels, dict):
      splits = {
        t: random_split(self.id_filter(self.node_pb[t], self.partition_idx), num_val, num_test)
        for t in self.node_labels
      }
      self.init_node_split(tuple({t: s[i] for t, s in splits.items()} for i in range(3)))
    else:
      owned = self.id_filter(self.node_pb, self.partition_idx)
      self.init_node_split(random_split(owned, num_val, num_test))
    return self

  def node_map(self, ntype: Optional[NodeType] = None) -> Optional[torch.Tensor]:
    """The original id of every node when the partitioner renumbered nodes
    (``book='range'``); None when ids are the original ones."""
    if self._reader is None or self.meta.get('book') != 'range':
      return None
    return self._reader.load(book_path('node_map', self._reader.dir_of(ntype)))

  def share_ipc(self):
    """A picklable handle: the partition tensors in shared memory, plus the
    books and partition numbers."""
    return (
      super().share_ipc(),
      self.num_partitions,
      self.partition_idx,
      self.node_pb,
      self.edge_pb,
      self._node_feat_pb,
      self._edge_feat_pb,
      self.graph_caching,
    )

  @classmethod
  def from_ipc_handle(cls, ipc_handle) -> 'DistDataset':
    base, num_parts, idx, node_pb, edge_pb, node_feat_pb, edge_feat_pb, caching = ipc_handle
    plain = Dataset.from_ipc_handle(base)
    ds = cls(
      num_parts,
      idx,
      graph_partition=plain.graph,
      node_feature_partition=plain.node_features,
      edge_feature_partition=plain.edge_features,
      whole_node_labels=plain.node_labels,
      node_pb=node_pb,
      edge_pb=edge_pb,
      node_feat_pb=node_feat_pb,
      edge_feat_pb=edge_feat_pb,
      edge_dir=plain.edge_dir,
      graph_caching=caching,
      node_split=(plain.train_idx, plain.val_idx, plain.test_idx),
    )
    ds._label_id2idx = plain.label_id2idx
    ds.node_time, ds.edge_time = plain.node_time, plain.edge_time
    return ds


def random_split(
  indices: torch.Tensor, num_val: Union[float, int], num_test: Union[float, int]
) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
  """Splits ``indices`` at random into train, validation and test ids (GLT's).

  Args:
    indices: the ids to split.
    num_val: the size of the validation split, or its share when a float.
    num_test: the size of the test split, or its share when a float.
  """
  return tuple(indices[p] for p in random_positions(indices.numel(), num_val, num_test))


def rebuild_dist_dataset(ipc_handle) -> DistDataset:
  """Rebuilds a DistDataset in another process (see ``reduce_dist_dataset``)."""
  kind, payload = ipc_handle
  if kind == 'load':
    edge_dir, load_args, graph, features, lookups = payload
    dataset = DistDataset(edge_dir=edge_dir)
    return dataset._load(load_args, graph=graph, features=features, lookups=lookups)
  return DistDataset.from_ipc_handle(payload)


def _featured_edge_books(dataset: DistDataset):
  r"""The edge books that edge feature gathers look edges up in: those of the
  edge types with features (an edge book's lookup copy takes a byte an edge)."""
  if isinstance(dataset.edge_pb, dict):
    features = dataset.edge_features or {}
    return {t: book for t, book in dataset.edge_pb.items() if features.get(t) is not None}
  return dataset.edge_pb if dataset.edge_features is not None else None


def reduce_dist_dataset(dataset: DistDataset):
  """Pickles a DistDataset for another process. One loaded from a directory
  travels as the directory and its load arguments, and the receiver maps the
  same files again (labels and books: no copy, the page cache is shared),
  with the graph and the feature tables this process built handed over in
  place: the graph moved to shared memory (the receiver neither reads nor
  converts the edges again, nor holds a copy of its own), the feature tables
  as their files or moved to shared memory, with their id-to-row maps
  (``Feature.host_share``), and the lookup copies of the node books and of
  the edge books of edge types with features (an entry a node or an edge)
  in shared memory. Any other moves all its tensors to shared memory."""
  if dataset.load_args is not None:
    # the partition's own books are mapped from its files again there, not
    # copied into shared memory here (an edge book: 2 bytes an edge of the graph)
    books = dataset.built_feature_books
    features = (dataset.node_features, dataset.edge_features, *books, dataset.features_joined)
    edge_books = _featured_edge_books(dataset)
    lookups = (share_host_lookups(dataset.node_pb), share_host_lookups(edge_books))
    payload = (dataset.edge_dir, dataset.load_args, dataset.graph, features, lookups)
    return rebuild_dist_dataset, (('load', payload),)
  return rebuild_dist_dataset, (('ipc', dataset.share_ipc()),)


ForkingPickler.register(DistDataset, reduce_dist_dataset)
