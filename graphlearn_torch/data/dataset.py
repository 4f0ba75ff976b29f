"""Dataset: the graph, features, labels and seed splits of one machine."""

import logging
from multiprocessing.reduction import ForkingPickler
from typing import Dict, Iterator, List, Literal, Optional, Sequence, Tuple, Union

import torch

from ..typing import EdgeType, NodeIndex, NodeLabel, NodeType, TensorDataType
from ..utils.common import per_type_values
from ..utils.tensor import as_node_ids, convert_to_tensor, squeeze
from .feature import DeviceGroup, Feature
from .gather_checks import GatherChecks
from .gpu_labels import GpuLabels
from .graph import Graph, Topology
from .per_type import HOMO, by_type, per_type, unwrap
from .split import random_split
from .temporal import checked_times

logger = logging.getLogger(__name__)


class Dataset:
  """The graph, node/edge features, labels and seed splits of a graph.

  A homogeneous dataset holds one Graph, Feature and label tensor; a
  heterogeneous one holds dicts keyed by PyG edge types ``(src, rel, dst)``
  and node types.

  Args:
    graph: a Graph or a dict of them by edge type.
    node_features: a Feature or a dict of them by node type.
    edge_features: a Feature or a dict of them by edge type.
    node_labels: a label tensor or a dict of them by node type.
    edge_dir: 'out' samples out-neighbors (CSR), 'in' in-neighbors (CSC).
    node_split: ``(train_idx, val_idx, test_idx)``.
  """

  def __init__(
    self,
    graph: Union[Graph, Dict[EdgeType, Graph]] = None,
    node_features: Union[Feature, Dict[NodeType, Feature]] = None,
    edge_features: Union[Feature, Dict[EdgeType, Feature]] = None,
    node_labels: NodeLabel = None,
    edge_dir: Literal['in', 'out'] = 'out',
    node_split: Tuple[NodeIndex, NodeIndex, NodeIndex] = None,
  ):
    if edge_dir not in ('in', 'out'):
      raise ValueError(f"edge_dir must be 'in' or 'out', got {edge_dir!r}")
    self.graph = graph
    self.node_features = node_features
    self.edge_features = edge_features
    self.node_labels = squeeze(convert_to_tensor(node_labels))
    self._label_id2idx = None
    self._gpu_labels = GpuLabels()  # placed on first use, never shared
    self.edge_dir = edge_dir
    self.train_idx = self.val_idx = self.test_idx = None
    # Times for temporal sampling (init_node_time / init_edge_time).
    self.node_time = None
    self.edge_time = None
    if node_split is not None:
      self.init_node_split(node_split)

  # -- structure --------------------------------------------------------------

  @property
  def is_hetero(self) -> bool:
    return any(
      isinstance(x, dict)
      for x in (self.graph, self.node_features, self.edge_features, self.node_labels)
    )

  def _seed_side(self, etype: Optional[EdgeType]) -> Optional[NodeType]:
    """The node type indexed by the rows of an edge type's topology."""
    if etype is None:
      return None
    return etype[0] if self.edge_dir == 'out' else etype[-1]

  def num_nodes(self, ntype: Optional[NodeType] = None) -> int:
    """The number of nodes of a type as the graph, features and labels tell."""
    count = 0
    for etype, graph in by_type(self.graph, self.is_hetero, 'graph').items():
      topo = graph.topo
      src_count, dst_count = (
        (topo.row_count, topo.col_count)
        if topo.layout == 'CSR'
        else (topo.col_count, topo.row_count)
      )
      if etype is None or etype[0] == ntype:
        count = max(count, src_count)
      if etype is None or etype[-1] == ntype:
        count = max(count, dst_count)
    feat = self.get_node_feature(ntype) if self.node_features is not None else None
    if feat is not None and feat.id2index is None:
      count = max(count, feat.size(0))
    return count

  def _grow_graphs(self, ntype: Optional[NodeType], num_nodes: int) -> None:
    """Adds empty rows so every node of ``ntype`` can be a sampling seed."""
    for etype, graph in by_type(self.graph, self.is_hetero, 'graph').items():
      if self._seed_side(etype) == ntype:
        graph.topo.resize(num_rows=num_nodes)

  # -- initialisation ---------------------------------------------------------

  def init_graph(
    self,
    edge_index: Union[TensorDataType, Dict[EdgeType, TensorDataType]] = None,
    edge_ids: Union[TensorDataType, Dict[EdgeType, TensorDataType]] = None,
    edge_weights: Union[TensorDataType, Dict[EdgeType, TensorDataType]] = None,
    layout: Union[str, Dict[EdgeType, str]] = 'COO',
    graph_mode: str = 'ZERO_COPY',
    directed: bool = False,
    device: Optional[int] = None,
    num_nodes: Optional[Union[int, Dict[NodeType, int]]] = None,
  ):
    """Builds the graph from edges.

    Args:
      edge_index: COO ``[2, E]`` (or CSR/CSC pairs, see ``layout``), or a
        dict of them by edge type.
      edge_ids: global edge ids (default: input positions).
      edge_weights: edge weights for weighted sampling.
      layout: the input layout, 'COO', 'CSR' or 'CSC' (or a dict by type).
      graph_mode: 'CPU', 'ZERO_COPY' or 'CUDA' (see Graph).
      directed: accepted for GLT compatibility; edges are used as given.
      device: the GPU index for GPU graph modes.
      num_nodes: node count (or dict by node type) when some nodes have larger
        ids than any edge; inferred otherwise.
    """
    if edge_index is None:
      return self
    hetero = isinstance(edge_index, dict)
    edges = by_type(edge_index, hetero, 'edge_index')
    eids = by_type(edge_ids, hetero, 'edge_ids')
    weights = by_type(edge_weights, hetero, 'edge_weights')
    layouts = per_type(layout, edges.keys())
    for etype in edges:
      if hetero and not (isinstance(etype, tuple) and len(etype) == 3):
        raise ValueError(f'edge types must be (src, rel, dst) tuples, got {etype!r}')

    # Node counts per type, so every topology of a type agrees on them.
    counts: Dict[Optional[NodeType], int] = dict(by_type(num_nodes, hetero, 'num_nodes'))
    given = dict(counts)
    topo_layout = 'CSR' if self.edge_dir == 'out' else 'CSC'
    graphs = {}
    for etype, ei in edges.items():
      topo = Topology(ei, eids.get(etype), weights.get(etype), layouts[etype], topo_layout)
      src_count, dst_count = (
        (topo.row_count, topo.col_count)
        if topo_layout == 'CSR'
        else (topo.col_count, topo.row_count)
      )
      src_t, dst_t = (etype[0], etype[-1]) if hetero else (HOMO, HOMO)
      for ntype, needed in ((src_t, src_count), (dst_t, dst_count)):
        if ntype in given and needed > given[ntype]:
          what = 'num_nodes' if ntype == HOMO else f'num_nodes[{ntype!r}]'
          raise ValueError(
            f'{what} is {given[ntype]}, but the edges{"" if ntype == HOMO else f" of {etype}"} '
            f'hold node id {needed - 1}: give the real node count'
          )
      counts[src_t] = max(counts.get(src_t, 0), src_count)
      counts[dst_t] = max(counts.get(dst_t, 0), dst_count)
      graphs[etype] = topo
    if self.node_features is not None:
      for ntype, feat in by_type(self.node_features, hetero, 'node_features').items():
        if feat.id2index is None:
          counts[ntype] = max(counts.get(ntype, 0), feat.size(0))
    for etype, topo in graphs.items():
      src_t, dst_t = (etype[0], etype[-1]) if hetero else (HOMO, HOMO)
      rows, cols = (src_t, dst_t) if topo_layout == 'CSR' else (dst_t, src_t)
      topo.resize(counts[rows], counts[cols])
      graphs[etype] = Graph(topo, graph_mode, device)
    self.graph = unwrap(graphs, hetero)
    self._check_feature_rows()
    self._check_labels()
    return self

  def init_node_features(
    self,
    node_feature_data: Union[TensorDataType, Dict[NodeType, TensorDataType]] = None,
    id2idx: Union[TensorDataType, Dict[NodeType, TensorDataType], Sequence] = None,
    sort_func=None,
    split_ratio: Union[float, Dict[NodeType, float]] = 0.0,
    device_group_list: Optional[List[DeviceGroup]] = None,
    device: Optional[int] = None,
    with_gpu: bool = True,
    dtype: Optional[torch.dtype] = None,
  ):
    """Sets the node feature tables.

    Args:
      node_feature_data: ``[num_nodes, dim]`` or a dict of them by node type.
      id2idx: maps node ids to rows (default: rows are ids).
      sort_func: reorders the rows hottest first, so the first
        ``split_ratio`` of them are the ones kept on the GPU:
        ``sort_func(table, split_ratio, topology) -> (table, id2idx)``, such
        as ``data.sort_by_in_degree`` (GLT's); applied to tables given
        without ``id2idx``, with the topology whose rows are the type's
        nodes (call ``init_graph`` first).
      split_ratio: the share of rows kept on the GPU (GPU path).
      device_group_list: GPU groups sharing hot rows (GPU path).
      device: the GPU index (GPU path).
      with_gpu: use the GPU when there is one.
      dtype: cast the tables to this dtype (default: keep theirs).
    """
    if node_feature_data is None:
      return self
    hetero = isinstance(node_feature_data, dict)
    reordered = set()
    if sort_func is not None and id2idx is None:
      tables, maps = {}, {}
      ratios = per_type(split_ratio, by_type(node_feature_data, hetero, 'node_feature_data'))
      for ntype, table in by_type(node_feature_data, hetero, 'node_feature_data').items():
        tables[ntype], maps[ntype] = sort_func(
          convert_to_tensor(table), ratios.get(ntype, 0.0), self._rows_topology(ntype)
        )
        if maps[ntype] is not None:
          reordered.add(ntype)
      node_feature_data, id2idx = unwrap(tables, hetero), unwrap(maps, hetero)
    self.node_features = unwrap(
      self._build_features(
        node_feature_data, id2idx, split_ratio, device_group_list, device, with_gpu, dtype, hetero
      ),
      hetero,
    )
    for ntype, feat in by_type(self.node_features, hetero, 'node_features').items():
      if feat.id2index is None or ntype in reordered:
        self._grow_graphs(ntype, feat.size(0))
    self._check_feature_rows()
    return self

  def _rows_topology(self, ntype: Optional[NodeType]) -> Optional[Topology]:
    """A topology whose rows are the nodes of ``ntype`` (None without one)."""
    for etype, graph in by_type(self.graph, self.is_hetero, 'graph').items():
      if self._seed_side(etype) == ntype:
        return graph.topo
    return None

  def init_edge_features(
    self,
    edge_feature_data: Union[TensorDataType, Dict[EdgeType, TensorDataType]] = None,
    id2idx: Union[TensorDataType, Dict[EdgeType, TensorDataType]] = None,
    split_ratio: Union[float, Dict[EdgeType, float]] = 0.0,
    device_group_list: Optional[List[DeviceGroup]] = None,
    device: Optional[int] = None,
    with_gpu: bool = True,
    dtype: Optional[torch.dtype] = None,
  ):
    """Sets the edge feature tables, looked up by edge id (see init_node_features)."""
    if edge_feature_data is None:
      return self
    hetero = isinstance(edge_feature_data, dict)
    self.edge_features = unwrap(
      self._build_features(
        edge_feature_data, id2idx, split_ratio, device_group_list, device, with_gpu, dtype, hetero
      ),
      hetero,
    )
    return self

  @staticmethod
  def _build_features(data, id2idx, split_ratio, groups, device, with_gpu, dtype, hetero):
    tables = by_type(data, hetero, 'feature data')
    maps = by_type(id2idx, hetero, 'id2idx')
    ratios = per_type(split_ratio, tables.keys())
    out = {}
    for key, table in tables.items():
      table = convert_to_tensor(table)
      out[key] = Feature(
        table,
        maps.get(key),
        ratios.get(key, 0.0),
        groups,
        device,
        with_gpu,
        dtype if dtype is not None else table.dtype,
      )
    return out

  def _check_feature_rows(self) -> None:
    if self.graph is None or self.node_features is None:
      return
    hetero = self.is_hetero
    for ntype, feat in by_type(self.node_features, hetero, 'node_features').items():
      need = self.num_nodes(ntype)
      if feat.num_ids < need:
        what = f"node type '{ntype}'" if hetero else 'the graph'
        raise ValueError(
          f'node features answer for {feat.num_ids} ids but {what} has {need} nodes; '
          f'give one feature row per node (or an id2idx covering every node)'
        )

  def init_node_labels(
    self,
    node_label_data: Union[TensorDataType, Dict[NodeType, TensorDataType]] = None,
    id2idx: Union[TensorDataType, Dict[NodeType, TensorDataType], Sequence] = None,
  ):
    """Sets node labels (a tensor, or a dict by node type), optionally through id2idx."""
    if node_label_data is None:
      return self
    self.node_labels = squeeze(convert_to_tensor(node_label_data))
    self._label_id2idx = convert_to_tensor(id2idx, torch.int64)
    self._check_labels()
    return self

  def _check_labels(self) -> None:
    """Labels given by position must cover every node of the graph."""
    if self.node_labels is None or self._label_id2idx is not None or self.graph is None:
      return
    for ntype, y in by_type(self.node_labels, self.is_hetero, 'node_labels').items():
      needed = self.num_nodes(ntype)
      if y.size(0) < needed:
        what = 'the graph' if ntype is HOMO else f'node type {ntype!r}'
        raise ValueError(f'{y.size(0)} node labels for the {needed} nodes of {what}')

  def init_node_time(self, node_time: Union[TensorDataType, Dict[NodeType, TensorDataType]]):
    """Sets each node's time (a tensor, or a dict by node type) for temporal
    sampling: with a loader's ``time_attr='node_time'``, a seed of time t
    reaches only nodes of time <= t (``data.temporal``)."""
    self.node_time = checked_times(node_time, 'node_time')
    return self

  def init_edge_time(self, edge_time: Union[TensorDataType, Dict[EdgeType, TensorDataType]]):
    """Sets each edge's time by edge id (a tensor, or a dict by edge type)
    for temporal sampling: with a loader's ``time_attr='edge_time'``, a seed
    of time t takes only edges of time <= t."""
    self.edge_time = checked_times(edge_time, 'edge_time')
    return self

  def init_node_split(self, node_split: Tuple[NodeIndex, NodeIndex, NodeIndex] = None):
    """Sets ``(train_idx, val_idx, test_idx)``: ids or boolean masks (dicts by node type)."""
    if node_split is None:
      return self
    train, val, test = (as_node_ids(x, n) for x, n in zip(node_split, ('train', 'val', 'test')))
    self.train_idx, self.val_idx, self.test_idx = train, val, test
    return self

  def random_node_split(self, num_val: Union[float, int], num_test: Union[float, int]):
    """Splits the labelled nodes at random into train, validation and test ids."""
    if self.node_labels is None:
      raise ValueError('random_node_split needs node labels: call init_node_labels first')
    if isinstance(self.node_labels, dict):
      splits = {t: random_split(y.size(0), num_val, num_test) for t, y in self.node_labels.items()}
      self.init_node_split(tuple({t: s[i] for t, s in splits.items()} for i in range(3)))
    else:
      self.init_node_split(random_split(self.node_labels.size(0), num_val, num_test))
    return self

  # -- accessors --------------------------------------------------------------

  @staticmethod
  def _get(value, key, what: str):
    if value is None:
      return None
    if isinstance(value, dict):
      if key is None:
        raise ValueError(f'the dataset is heterogeneous: name the {what} type')
      if key not in value:
        raise KeyError(f'unknown {what} type {key!r}; known: {sorted(value, key=str)}')
      return value[key]
    return value

  def get_graph(self, etype: Optional[EdgeType] = None) -> Optional[Graph]:
    return self._get(self.graph, etype, 'edge')

  def get_node_types(self) -> Optional[List[NodeType]]:
    if not self.is_hetero:
      return None
    types = set()
    if isinstance(self.graph, dict):
      for src, _, dst in self.graph:
        types.update((src, dst))
    for value in (self.node_features, self.node_labels):
      if isinstance(value, dict):
        types.update(value)
    return sorted(types)

  def get_edge_types(self) -> Optional[List[EdgeType]]:
    if isinstance(self.graph, dict):
      return list(self.graph.keys())
    return None

  def get_node_feature(self, ntype: Optional[NodeType] = None) -> Optional[Feature]:
    if isinstance(self.node_features, dict) and ntype not in self.node_features:
      return None
    return self._get(self.node_features, ntype, 'node')

  def get_edge_feature(self, etype: Optional[EdgeType] = None) -> Optional[Feature]:
    if isinstance(self.edge_features, dict) and etype not in self.edge_features:
      return None
    return self._get(self.edge_features, etype, 'edge')

  def get_node_label(self, ntype: Optional[NodeType] = None) -> Optional[torch.Tensor]:
    if isinstance(self.node_labels, dict) and ntype not in self.node_labels:
      return None
    return self._get(self.node_labels, ntype, 'node')

  @property
  def label_id2idx(self):
    """The map from node ids to label rows given to ``init_node_labels``
    (None: labels are indexed by node id)."""
    return self._label_id2idx

  def gather_node_labels(
    self, ids: torch.Tensor, ntype: Optional[NodeType] = None, checks: Optional[GatherChecks] = None
  ):
    """Labels of the nodes ``ids`` (through id2idx when one was given): on
    the GPU for ids there (``GpuLabels``, checked in ``checks`` if given)."""
    labels = self.get_node_label(ntype)
    if labels is None:
      return None
    id2idx = self._label_id2idx
    if isinstance(id2idx, dict):
      id2idx = id2idx.get(ntype)
    if GpuLabels.reads(ids, labels):
      in_gpu = any(getattr(g, 'mode', None) == 'CUDA' for g in self._placed_items())
      return self._gpu_labels.gather(labels, id2idx, ids, ntype, in_gpu, checks)
    ids = torch.as_tensor(ids, dtype=torch.int64).reshape(-1).to(labels.device)
    if id2idx is not None:
      ids = id2idx.index_select(0, ids)
    return labels.index_select(0, ids)  # several times faster than indexing

  def _placed_items(self) -> Iterator[Union[Graph, Feature]]:
    return per_type_values(self.graph, self.node_features, self.edge_features)

  def set_device(self, device: int) -> None:
    """Samples and looks features up on GPU ``device`` (where the graphs and
    features use the GPU; a sampling process given its own GPU calls it
    before first use)."""
    for item in self._placed_items():
      item.set_device(device)

  def place_on_gpu(self, device: int) -> None:
    """Places here what lives in GPU ``device``'s memory (``Graph`` and
    ``Feature.place_on_gpu``), so that the processes this dataset is handed
    to next (a loader's sampling processes) read it by CUDA IPC rather than
    each placing a copy of its own."""
    for item in self._placed_items():
      item.place_on_gpu(device)

  # -- sharing across processes -----------------------------------------------

  def share_ipc(self):
    """Moves every tensor to shared memory; returns a picklable handle."""

    def share(x):
      if isinstance(x, dict):
        return {k: share(v) for k, v in x.items()}
      if isinstance(x, (Graph, Feature)):
        return (type(x), x.share_ipc())
      if isinstance(x, torch.Tensor):
        return x.share_memory_()
      return x

    return (
      self.edge_dir,
      share(self.graph),
      share(self.node_features),
      share(self.edge_features),
      share(self.node_labels),
      share(self._label_id2idx),
      tuple(share(x) for x in (self.train_idx, self.val_idx, self.test_idx)),
      (share(self.node_time), share(self.edge_time)),
    )

  @classmethod
  def from_ipc_handle(cls, ipc_handle) -> 'Dataset':
    def rebuild(x):
      if isinstance(x, dict):
        return {k: rebuild(v) for k, v in x.items()}
      if isinstance(x, tuple) and len(x) == 2 and x[0] in (Graph, Feature):
        return x[0].from_ipc_handle(x[1])
      return x

    edge_dir, graph, nfeat, efeat, labels, label_map, split, times = ipc_handle
    ds = cls(rebuild(graph), rebuild(nfeat), rebuild(efeat), labels, edge_dir)
    ds._label_id2idx = label_map
    ds.train_idx, ds.val_idx, ds.test_idx = split
    ds.node_time, ds.edge_time = times
    return ds

  def __repr__(self) -> str:
    return (
      f'{type(self).__name__}(edge_dir={self.edge_dir}, graph={self.graph!r}, '
      f'node_features={self.node_features!r})'
    )


def rebuild_dataset(ipc_handle) -> Dataset:
  """Rebuilds a Dataset in another process from its ``share_ipc`` handle."""
  return Dataset.from_ipc_handle(ipc_handle)


def reduce_dataset(dataset: Dataset):
  """Pickles a Dataset for multiprocessing as a shared-memory handle (no copy)."""
  return rebuild_dataset, (dataset.share_ipc(),)


ForkingPickler.register(Dataset, reduce_dataset)
