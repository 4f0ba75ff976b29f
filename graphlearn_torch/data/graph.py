"""Graph topology (COO in, CSR or CSC out) and the Graph that samplers read."""

import copy
import logging
import threading
from dataclasses import dataclass
from multiprocessing.reduction import ForkingPickler
from typing import Dict, Literal, NamedTuple, Optional, Tuple

import torch

from .._ext import cuda_kernels_available
from ..typing import TensorDataType
from ..utils.cuda_share import CudaIpcTensor
from ..utils.host_share import HostSharedTensor, HostTensorHandle, host_sharing_available
from ..utils.huge_pages import converted, gathered
from ..utils.memory import check_room_for_rows
from ..utils.tensor import convert_to_tensor
from ..utils.topo import index_dtype, lowest_time, ptr2ind, row_max_times
from .edge_input import as_index, coo_edges
from .unified_tensor import host_view

logger = logging.getLogger(__name__)

GRAPH_MODES = ('CPU', 'ZERO_COPY', 'CUDA')
LAYOUTS = ('COO', 'CSR', 'CSC')


@dataclass(frozen=True)
class TopologyHostHandle:
  """Where a Topology's host-shared tensors live (see ``Topology.host_share``).

  Args:
    layout: 'CSR' or 'CSC'.
    num_cols: the column count.
    indptr: the row pointers' handle.
    indices: the column ids' handle.
    edge_ids: the edge ids' handle.
    edge_weights: the edge weights' handle, or None.
    edge_time: the entries' times' handle (a temporal copy's), or None.
    row_max_time: the rows' last times' handle (a temporal copy's), or None.
  """

  layout: str
  num_cols: int
  indptr: HostTensorHandle
  indices: HostTensorHandle
  edge_ids: HostTensorHandle
  edge_weights: Optional[HostTensorHandle]
  edge_time: Optional[HostTensorHandle] = None
  row_max_time: Optional[HostTensorHandle] = None

  @property
  def pid(self) -> int:
    """The process that holds the tensors open (the one that made the handle)."""
    return self.indptr.pid


_TENSORS = ('indptr', 'indices', 'edge_ids', 'edge_weights', 'edge_time', 'row_max_time')


class Topology:
  """The edges of one graph (or one edge type) in a compressed sparse layout.

  Args:
    edge_index: COO ``[2, E]`` tensor or ``(row, col)`` pair of source and
      destination ids; for CSR input ``(indptr, indices)`` ("rowptr, col")
      over sources; for CSC input ``(indices, indptr)`` ("row, colptr") over
      destinations. These are GLT's orders: the row side always comes first.
    edge_ids: a global id per input edge (default: the input position).
    edge_weights: a non-negative weight per input edge, for weighted sampling.
    input_layout: 'COO', 'CSR' or 'CSC'.
    layout: 'CSR' (rows are sources, for out-edge sampling) or 'CSC' (rows are
      destinations, for in-edge sampling).
    size: ``(num_src_nodes, num_dst_nodes)``; inferred from the largest ids
      when not given. Nodes with larger ids than any edge need it.

  Within a row, entries are sorted by neighbor id; ``edge_ids`` and
  ``edge_weights`` follow the edges through the sort (but in a temporal
  sampler's copy, ``data.temporal.time_sorted``: by ``edge_time``). ``indptr`` and
  ``indices`` are stored as int32 when every entry fits (fewer than 2^31
  edges and columns): half the memory, and fewer cache lines for the
  sampler to read. The COO, CSR and CSC exports are int64.
  """

  def __init__(
    self,
    edge_index,
    edge_ids: Optional[TensorDataType] = None,
    edge_weights: Optional[TensorDataType] = None,
    input_layout: str = 'COO',
    layout: Literal['CSR', 'CSC'] = 'CSR',
    size: Optional[Tuple[int, int]] = None,
  ):
    input_layout, layout = str(input_layout).upper(), str(layout).upper()
    if input_layout not in LAYOUTS:
      raise ValueError(f"input_layout must be one of {LAYOUTS}, got '{input_layout}'")
    if layout not in ('CSR', 'CSC'):
      raise ValueError(f"layout must be 'CSR' or 'CSC', got '{layout}'")
    src, dst, num_src, num_dst = coo_edges(edge_index, input_layout)
    num_edges = src.numel()
    if edge_ids is not None:
      edge_ids = as_index(edge_ids, 'edge_ids')
      if edge_ids.numel() != num_edges:
        raise ValueError(f'edge_ids has {edge_ids.numel()} entries for {num_edges} edges')
    if edge_weights is not None:
      edge_weights = convert_to_tensor(edge_weights).to(torch.float32).reshape(-1)
      if edge_weights.numel() != num_edges:
        raise ValueError(f'edge_weights has {edge_weights.numel()} entries for {num_edges} edges')
      if not bool(torch.isfinite(edge_weights).all()) or bool((edge_weights < 0).any()):
        raise ValueError('edge_weights must be finite and non-negative')

    if size is not None:
      if size[0] < num_src or size[1] < num_dst:
        raise ValueError(
          f'size {tuple(size)} is smaller than the ids in edge_index need: ({num_src}, {num_dst})'
        )
      num_src, num_dst = int(size[0]), int(size[1])

    rows, cols = (src, dst) if layout == 'CSR' else (dst, src)
    num_rows, num_cols = (num_src, num_dst) if layout == 'CSR' else (num_dst, num_src)
    dtype = index_dtype(num_edges, num_cols)
    check_room_for_rows(num_rows, 'size' if size is not None else 'the largest id in edge_index')
    indptr, indices, perm = torch.ops.glt.coo_to_csr(rows, cols, num_rows, num_cols, dtype)
    self._layout = layout
    self._indptr = converted(indptr, dtype)
    self._indices = indices
    self._edge_ids = gathered(edge_ids, perm) if edge_ids is not None else perm  # input positions
    self._edge_weights = gathered(edge_weights, perm) if edge_weights is not None else None
    self._edge_time: Optional[torch.Tensor] = None  # see data.temporal.time_sorted
    self._row_max_time: Optional[torch.Tensor] = None  # each row's last edge_time
    self._num_cols = num_cols
    self._host: Dict[str, HostSharedTensor] = {}  # see host_share

  def __getstate__(self):
    state = dict(self.__dict__)
    state['_host'] = {}  # descriptors of this process; a pickle carries the tensors
    return state

  @property
  def layout(self) -> str:
    return self._layout

  @property
  def indptr(self) -> torch.Tensor:
    return self._indptr

  @property
  def indices(self) -> torch.Tensor:
    return self._indices

  @property
  def edge_ids(self) -> torch.Tensor:
    return self._edge_ids

  @property
  def edge_weights(self) -> Optional[torch.Tensor]:
    return self._edge_weights

  @property
  def edge_time(self) -> Optional[torch.Tensor]:
    """Each entry's time, by which the rows are sorted (a temporal copy's;
    None otherwise)."""
    return self._edge_time

  @property
  def row_max_time(self) -> Optional[torch.Tensor]:
    """Each row's last entry time (its latest; a temporal copy's, None
    otherwise): the sampler takes a seed's whole row by it, without a read
    of ``edge_time``."""
    return self._row_max_time

  @property
  def degrees(self) -> torch.Tensor:
    """The number of entries of each row (out-degrees for CSR, in-degrees for CSC)."""
    return (self._indptr[1:] - self._indptr[:-1]).long()

  @property
  def row_count(self) -> int:
    return self._indptr.numel() - 1

  @property
  def col_count(self) -> int:
    return self._num_cols

  @property
  def edge_count(self) -> int:
    return self._indices.numel()

  def to_coo(self):
    """Returns ``(src, dst, edge_ids, edge_weights)`` in stored order."""
    rows, cols = ptr2ind(self._indptr), self._indices.long()
    if self._layout == 'CSR':
      return rows, cols, self._edge_ids, self._edge_weights
    return cols, rows, self._edge_ids, self._edge_weights

  def _to_layout(self, layout: str):
    topo = self
    if layout != self._layout:
      src, dst, eids, weights = self.to_coo()
      size = (self.row_count, self.col_count)
      if self._layout == 'CSC':
        size = size[::-1]
      topo = Topology((src, dst), eids, weights, 'COO', layout, size=size)
    return topo.indptr.long(), topo.indices.long(), topo.edge_ids, topo.edge_weights

  def to_csr(self):
    """Returns ``(rowptr, col, edge_ids, edge_weights)``: compressed over sources."""
    return self._to_layout('CSR')

  def to_csc(self):
    """Returns ``(row, colptr, edge_ids, edge_weights)``: compressed over
    destinations, indices first (GLT's order)."""
    colptr, rows, eids, weights = self._to_layout('CSC')
    return rows, colptr, eids, weights

  def with_entry_time(self, time: torch.Tensor, order: Optional[torch.Tensor] = None):
    """A copy with each entry's time ``time`` (``edge_time``) and each row's
    entries in ``order`` (stored positions; None: as stored, the tensors
    shared): ``data.temporal.time_sorted``'s copy."""
    out = copy.copy(self)
    out._host = {}
    for name in ('indices', 'edge_ids', 'edge_weights') if order is not None else ():
      tensor = getattr(self, '_' + name)
      setattr(out, '_' + name, gathered(tensor, order) if tensor is not None else None)
    out._edge_time = time.contiguous()
    out._row_max_time = row_max_times(self._indptr, out._edge_time)
    return out

  def resize(self, num_rows: Optional[int] = None, num_cols: Optional[int] = None) -> None:
    """Grows the node counts: empty rows up to ``num_rows`` (nodes without
    edges of this type) and a column count of at least ``num_cols``."""
    extra = (num_rows or 0) - self.row_count
    if extra > 0:
      check_room_for_rows(num_rows, 'num_nodes')
      self._indptr = torch.cat([self._indptr, self._indptr[-1:].expand(extra)])
      if self._row_max_time is not None:  # empty rows: the earliest time
        empty = self._row_max_time.new_full((extra,), lowest_time(self._row_max_time.dtype))
        self._row_max_time = torch.cat([self._row_max_time, empty])
    self._num_cols = max(self._num_cols, num_cols or 0)

  def share_memory_(self) -> 'Topology':
    for name in _TENSORS:
      t = getattr(self, '_' + name)
      if t is not None:
        t.share_memory_()
    return self

  def host_share(self) -> TopologyHostHandle:
    """Moves the tensors into memory that any process of this host can map
    (``utils.host_share``); returns the handle ``from_host_handle`` maps them
    by. Each tensor is copied once, and again only after it was replaced
    (``resize``); its old memory is freed when nothing else holds it. Not
    thread-safe: callers that share from several threads hold a lock.

    Raises:
      HostShareError: the platform cannot share memory that way.
    """
    handles = {}
    for name in _TENSORS:
      tensor = getattr(self, '_' + name)
      if tensor is None:
        handles[name] = None
        continue
      shared = self._host.get(name)
      if shared is None or shared.tensor is not tensor:
        shared = self._host[name] = HostSharedTensor.copy_of(tensor, f'topology {name}')
        setattr(self, '_' + name, shared.tensor)
      handles[name] = shared.handle
    return TopologyHostHandle(self._layout, self._num_cols, **handles)

  @classmethod
  def from_host_handle(cls, handle: TopologyHostHandle) -> 'Topology':
    """The Topology over tensors that another process of this host shared
    (``host_share``), without a copy.

    Args:
      handle: the topology's handle.

    Raises:
      HostShareError: the tensors cannot be mapped here (another host, their
        holder gone).
    """
    host = {
      name: HostSharedTensor.open(getattr(handle, name))
      for name in _TENSORS
      if getattr(handle, name) is not None
    }
    topo = cls.__new__(cls)
    topo._layout, topo._num_cols, topo._host = handle.layout, handle.num_cols, host
    for name in _TENSORS:
      setattr(topo, '_' + name, host[name].tensor if name in host else None)
    return topo

  def __repr__(self) -> str:
    return (
      f'Topology(layout={self._layout}, rows={self.row_count}, cols={self.col_count}, '
      f'edges={self.edge_count}, weighted={self._edge_weights is not None})'
    )


def resolve_graph_mode(mode: str) -> str:
  """Returns the graph mode this machine can serve: the GPU modes fall back
  to 'CPU', with a log line, without a GPU and the CUDA kernels."""
  mode = str(mode).upper()
  if mode not in GRAPH_MODES:
    raise ValueError(f'graph mode must be one of {GRAPH_MODES}, got {mode!r}')
  if mode != 'CPU' and not cuda_kernels_available():
    logger.info("graph mode '%s' needs a GPU and the CUDA kernels; using 'CPU'", mode)
    return 'CPU'
  return mode


class DeviceTopology(NamedTuple):
  """A topology's tensors where the sampling kernels read them.

  Args:
    indptr: row pointers.
    indices: column ids.
    edge_ids: edge ids, one per stored edge.
    edge_weights: edge weights (or None).
    edge_time: each entry's time, by which the rows are sorted, or None.
    row_max_time: each row's last entry time, or None.
  """

  indptr: torch.Tensor
  indices: torch.Tensor
  edge_ids: torch.Tensor
  edge_weights: Optional[torch.Tensor]
  edge_time: Optional[torch.Tensor] = None
  row_max_time: Optional[torch.Tensor] = None


class Graph:
  """A topology placed where the sampler reads it.

  Args:
    topo: the topology.
    mode: 'CPU' (host memory, CPU kernels), 'ZERO_COPY' (pinned host memory
      read in place by the GPU kernels through UVA: for graphs larger than
      GPU memory) or 'CUDA' (GPU memory). Without a GPU and the CUDA kernels
      every mode runs as 'CPU'.
    device: the GPU index for 'ZERO_COPY' and 'CUDA' (default: the current
      one).
  """

  def __init__(self, topo: Topology, mode: str = 'ZERO_COPY', device: Optional[int] = None):
    if not isinstance(topo, Topology):
      raise TypeError(f'Graph needs a Topology, got {type(topo).__name__}')
    self.topo = topo
    self.requested_mode = str(mode).upper()
    self.mode = resolve_graph_mode(mode)
    if self.mode != 'CPU' and device is None:
      device = torch.cuda.current_device()
    self.device = device
    self._placed: Optional[DeviceTopology] = None
    self._placed_from: Optional[torch.Tensor] = None
    # the placed 'CUDA' copy as other processes get it (CUDA IPC, see share_ipc)
    self._gpu_copy: Optional[Tuple[Optional[CudaIpcTensor], ...]] = None
    self._placing = threading.Lock()

  @property
  def sampling_device(self) -> torch.device:
    """Where the sampling kernels run over this graph."""
    return torch.device('cpu') if self.mode == 'CPU' else torch.device('cuda', self.device)

  def __getstate__(self):
    return {k: v for k, v in self.__dict__.items() if k != '_placing'}

  def __setstate__(self, state):
    self.__dict__.update(state, _placing=threading.Lock())

  def set_device(self, device: int) -> None:
    """Samples on GPU ``device`` from now on (a 'CPU' graph stays where it
    is); the topology is placed there on first use."""
    if self.mode != 'CPU' and int(device) != self.device:
      self.device = int(device)
      self._placed = self._placed_from = self._gpu_copy = None

  def lazy_init(self) -> None:
    """Places the topology for the sampler (once; again after the topology
    grew rows)."""
    self.device_topology()

  def place_on_gpu(self, device: int) -> None:
    """Places a 'CUDA' graph for GPU ``device`` now, where it is for that
    GPU: the processes it is handed to next read that copy (``share_ipc``)."""
    if self.mode == 'CUDA' and self.device == device:
      self.lazy_init()

  def device_topology(self) -> DeviceTopology:
    """The topology's tensors on the sampling device: the host tensors in
    'CPU' mode, copies in GPU memory in 'CUDA' mode, views of pinned host
    memory in 'ZERO_COPY' mode."""
    topo = self.topo
    if self._placed is None or self._placed_from is not topo.indptr:
      with self._placing:  # a peer of this host may ask for it meanwhile (HostPeers)
        if self._placed is None or self._placed_from is not topo.indptr:
          self._place(topo)
    return self._placed

  def _place(self, topo: Topology) -> None:
    if self._gpu_copy is not None and self._placed_from is topo.indptr:
      # another process's copy (from_ipc_handle), opened on first use
      self._placed = DeviceTopology(*(c.tensor if c is not None else None for c in self._gpu_copy))
      return
    tensors = (
      topo.indptr,
      topo.indices,
      topo.edge_ids,
      topo.edge_weights,
      topo.edge_time,
      topo.row_max_time,
    )
    if self.mode == 'CUDA':
      placed = [t.to(self.sampling_device) if t is not None else None for t in tensors]
    elif self.mode == 'ZERO_COPY':
      placed = [self._zero_copy(t) if t is not None else None for t in tensors]
    else:
      placed = list(tensors)
    self._placed, self._placed_from = DeviceTopology(*placed), topo.indptr
    self._gpu_copy = (
      tuple(CudaIpcTensor(t) if t is not None else None for t in placed)
      if self.mode == 'CUDA'
      else None
    )

  def _zero_copy(self, t: torch.Tensor) -> torch.Tensor:
    return host_view(t, self.device)

  def export_topology(self) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(indptr, indices, edge_ids)`` of the topology, int64 and on the CPU,
    in its layout (GLT's return: scripts rewrite partitions from it)."""
    topo = self.topo
    return tuple(t.to(torch.int64) for t in (topo.indptr, topo.indices, topo.edge_ids))

  @property
  def row_count(self) -> int:
    return self.topo.row_count

  @property
  def col_count(self) -> int:
    return self.topo.col_count

  @property
  def edge_count(self) -> int:
    return self.topo.edge_count

  def share_ipc(self, gpu_copy: bool = True):
    """Moves the topology to shared memory; returns a picklable handle: the
    host-shared topology's where the platform has them (so that the
    receiving process can share it on with its peers of this host), else
    the topology in torch's shared memory. A 'CUDA' graph placed on its GPU
    hands over its GPU copy too, as the CUDA IPC handle of the process that
    placed it (``CudaIpcTensor``), whether that is this one or the one it
    came from: a receiver sampling on the same GPU reads that copy rather
    than placing one of its own, and hands it on in turn (unless
    ``gpu_copy`` is False: for a receiver that does not read it)."""
    fresh = self._placed_from is self.topo.indptr  # placed here, or received, for these rows
    gpu = self._gpu_copy if fresh and gpu_copy else None
    if host_sharing_available():
      topo = self.topo.host_share()
    else:
      topo = self.topo.share_memory_()
    if fresh:  # the same rows, moved: the placed copy stays current
      self._placed_from = self.topo.indptr
    return topo, self.requested_mode, self.device, gpu

  @classmethod
  def from_ipc_handle(cls, ipc_handle) -> 'Graph':
    topo, mode, device, gpu = ipc_handle
    if isinstance(topo, TopologyHostHandle):
      topo = Topology.from_host_handle(topo)
    graph = cls(topo, mode, device)
    if gpu is not None and graph.mode == 'CUDA':  # read from the first device_topology() on
      graph._gpu_copy, graph._placed_from = gpu, topo.indptr
    return graph

  def __repr__(self) -> str:
    where = '' if self.mode == 'CPU' else f', device={self.device}'
    return f'Graph(mode={self.mode}{where}, {self.topo!r})'


def rebuild_graph(ipc_handle) -> Graph:
  """Rebuilds a Graph in another process from its ``share_ipc`` handle."""
  return Graph.from_ipc_handle(ipc_handle)


def reduce_graph(graph: Graph):
  """Pickles a Graph for multiprocessing as a shared-memory handle (no copy)."""
  return rebuild_graph, (graph.share_ipc(),)


ForkingPickler.register(Graph, reduce_graph)
