"""PyG's remote backend over our servers: a client's ``FeatureStore`` and
``GraphStore`` whose tensors and edges the servers of server-client mode
answer, so that PyG's loaders (with ``PyGNeighborSampler``) and any code
written against PyG's store interfaces run on the partitioned graph.

  glt.distributed.init_client(num_servers, num_clients, rank, master_addr, port)
  feature_store, graph_store = glt.distributed.remote_stores()
  sampler = glt.sampler.PyGNeighborSampler((feature_store, graph_store), [15, 10])
  loader = torch_geometric.loader.NodeLoader(
    (feature_store, graph_store), sampler, input_nodes=seeds, batch_size=1024)

Node features ('x') and labels ('y') are fetched by id from one server,
which gathers the rows of every partition; the edge index of an edge type is
the union of every server's partition edges (one server's, when each holds
the whole graph), fetched once and kept.
"""

from typing import Dict, List, Optional, Tuple

import torch
from torch_geometric.data import EdgeAttr, FeatureStore, GraphStore, TensorAttr
from torch_geometric.data.graph_store import EdgeLayout

from ...typing import EdgeType, NodeType
from ..runtime.client import async_request_server, request_server
from ..runtime.context import get_context
from .server import DistServer, StoreMeta

ATTR_REQUESTS = {'x': DistServer.get_node_feature, 'y': DistServer.get_node_label}


def _default_server() -> int:
  ctx = get_context()
  if ctx is None or not ctx.is_client():
    raise RuntimeError('remote stores need a client: call init_client first')
  return ctx.rank % ctx.num_servers()


def _read_only(store, *args, **kwargs) -> bool:
  r"""Writes to a remote store are refused: the servers' partitions are
  fixed for the job."""
  raise NotImplementedError(f'{type(store).__name__} is read-only')


class RemoteFeatureStore(FeatureStore):
  r"""Node features ('x') and labels ('y') by node type, served by a server.

  ``group_name`` is the node type (None for a homogeneous graph),
  ``attr_name`` 'x' or 'y', and ``index`` node ids (None or ``:``: all).

  Args:
    server_rank: the server that answers (default: the client's rank modulo
      the servers, as ``assign_server_by_order`` spreads clients).
  """

  def __init__(self, server_rank: Optional[int] = None):
    super().__init__()
    self.server_rank = _default_server() if server_rank is None else int(server_rank)
    self.server_meta: StoreMeta = request_server(self.server_rank, DistServer.get_store_meta)

  _put_tensor = _read_only
  _remove_tensor = _read_only

  def _key(self, attr: TensorAttr) -> Tuple[Optional[NodeType], str]:
    key = (attr.group_name, attr.attr_name)
    if key not in self.server_meta.tensor_sizes:
      raise KeyError(
        f'no tensor {attr.attr_name!r} of node type {attr.group_name!r} on the servers; '
        f'they hold {sorted(self.server_meta.tensor_sizes, key=str)}'
      )
    return key

  def _ids(self, attr: TensorAttr, num_nodes: int) -> torch.Tensor:
    index = attr.index
    if index is None:
      return torch.arange(num_nodes)
    if isinstance(index, slice):
      return torch.arange(num_nodes)[index]
    return torch.as_tensor(index, dtype=torch.int64).view(-1)

  def _request(self, attr: TensorAttr) -> torch.futures.Future:
    ntype, name = self._key(attr)
    ids = self._ids(attr, self.server_meta.num_nodes[ntype])
    return async_request_server(self.server_rank, ATTR_REQUESTS[name], ntype, ids)

  def _get_tensor(self, attr: TensorAttr) -> torch.Tensor:
    return self._request(attr).wait()

  def _multi_get_tensor(self, attrs: List[TensorAttr]) -> List[torch.Tensor]:
    futures = [self._request(attr) for attr in attrs]  # in flight together
    return [f.wait() for f in futures]

  def _get_tensor_size(self, attr: TensorAttr) -> Tuple[int, ...]:
    return tuple(self.server_meta.tensor_sizes[self._key(attr)])

  def get_all_tensor_attrs(self) -> List[TensorAttr]:
    return [TensorAttr(ntype, name, None) for ntype, name in self.server_meta.tensor_sizes]


class RemoteGraphStore(GraphStore):
  r"""The graph's edges by edge type, in COO, from the servers' partitions.

  Args:
    server_ranks: the servers to gather edges from (default: all).
  """

  def __init__(self, server_ranks: Optional[List[int]] = None):
    super().__init__()
    ctx = get_context()
    if ctx is None or not ctx.is_client():
      raise RuntimeError('remote stores need a client: call init_client first')
    ranks = list(range(ctx.num_servers())) if server_ranks is None else list(server_ranks)
    self.server_meta: StoreMeta = request_server(ranks[0], DistServer.get_store_meta)
    self.server_ranks = ranks[:1] if self.server_meta.graph_caching else ranks
    self._edges: Dict[Optional[EdgeType], torch.Tensor] = {}

  _put_edge_index = _read_only
  _remove_edge_index = _read_only

  def _size(self, etype: Optional[EdgeType]) -> Tuple[int, int]:
    src, dst = (etype[0], etype[-1]) if etype is not None else (None, None)
    return self.server_meta.num_nodes[src], self.server_meta.num_nodes[dst]

  def _get_edge_index(self, edge_attr: EdgeAttr) -> Optional[Tuple[torch.Tensor, torch.Tensor]]:
    etype = edge_attr.edge_type
    if etype not in self.server_meta.edge_types:
      held = self.server_meta.edge_types
      raise KeyError(f'no edge type {etype!r} on the servers; they hold {held}')
    if edge_attr.layout != EdgeLayout.COO:
      return None  # PyG converts from COO (GraphStore.csr / csc)
    if etype not in self._edges:
      futures = [
        async_request_server(r, DistServer.get_edge_index, etype, 'coo') for r in self.server_ranks
      ]
      parts = [f.wait() for f in futures]
      self._edges[etype] = torch.stack(
        [torch.cat([src for src, _ in parts]), torch.cat([dst for _, dst in parts])]
      )
    edges = self._edges[etype]
    return edges[0], edges[1]

  def get_all_edge_attrs(self) -> List[EdgeAttr]:
    return [
      EdgeAttr(etype, EdgeLayout.COO, is_sorted=False, size=self._size(etype))
      for etype in self.server_meta.edge_types
    ]


def remote_stores(
  server_rank: Optional[int] = None,
) -> Tuple[RemoteFeatureStore, RemoteGraphStore]:
  r"""A client's ``(FeatureStore, GraphStore)`` over the servers: the pair
  PyG's loaders and ``PyGNeighborSampler`` take as ``data``.

  Args:
    server_rank: the server that answers feature requests (see
      ``RemoteFeatureStore``).
  """
  return RemoteFeatureStore(server_rank), RemoteGraphStore()
