"""MetisPartitioner: min edge-cut partitioning with METIS (through pymetis)."""

import ctypes
import importlib.util
import logging
from typing import Dict, Optional

import numpy as np
import torch

from ..typing import NodeType
from .partitioner import PartitionerBase

logger = logging.getLogger(__name__)


def has_pymetis() -> bool:
  """Whether pymetis (METIS's Python binding) is installed."""
  return importlib.util.find_spec('pymetis') is not None


def _import_pymetis():
  try:
    import pymetis
  except ImportError as e:
    raise ImportError(
      "MetisPartitioner needs pymetis: pip install pymetis (or graphlearn-torch'[metis]')"
    ) from e
  return pymetis


METIS_NOPTIONS = 40
METIS_OK = 1


def metis_kway(
  indptr: torch.Tensor,
  indices: torch.Tensor,
  vweights: Optional[torch.Tensor],
  num_parts: int,
  ufactor: int,
  seed: Optional[int],
  eweights: Optional[torch.Tensor] = None,
) -> torch.Tensor:
  """METIS_PartGraphKway on a CSR graph with ``vweights`` ``[n, ncon]``
  (ncon balance constraints; None: one, the node count) and ``eweights``
  (one per entry of ``indices``; None: all ones).

  pymetis's ``part_graph`` passes a single constraint, so this calls the
  METIS_PartGraphKway that pymetis ships through ctypes, with its idx_t.
  """
  pymetis = _import_pymetis()
  from pymetis import _internal

  idx_dtype = pymetis.zero_copy_dtype()
  idx_t = {np.dtype(np.int64): ctypes.c_int64, np.dtype(np.int32): ctypes.c_int32}[
    np.dtype(idx_dtype)
  ]
  lib = ctypes.CDLL(_internal.__file__)
  ptr = ctypes.POINTER(idx_t)

  def arr(t: torch.Tensor) -> np.ndarray:
    return np.ascontiguousarray(t.numpy(), dtype=idx_dtype)

  n = indptr.numel() - 1
  if num_parts > n:
    # METIS prints "too many parts" and answers METIS_OK with a degenerate
    # assignment (every node in one or two parts), so this is checked here.
    raise ValueError(f'METIS cannot cut {n} nodes into {num_parts} parts: ask for at most {n}')
  xadj, adjncy = arr(indptr), arr(indices)
  ncon = 1 if vweights is None else vweights.size(1)
  vwgt = None if vweights is None else arr(vweights.contiguous().view(-1))
  adjwgt = None if eweights is None else arr(eweights)
  options = np.zeros(METIS_NOPTIONS, dtype=idx_dtype)
  lib.METIS_SetDefaultOptions(options.ctypes.data_as(ptr))
  options[int(pymetis.OptionKey.UFACTOR)] = ufactor
  options[int(pymetis.OptionKey.NUMBERING)] = 0
  if seed is not None:
    options[int(pymetis.OptionKey.SEED)] = seed
  part = np.zeros(n, dtype=idx_dtype)
  objval = idx_t(0)
  args = [idx_t(n), idx_t(ncon), idx_t(num_parts)]
  status = lib.METIS_PartGraphKway(
    ctypes.byref(args[0]),
    ctypes.byref(args[1]),
    xadj.ctypes.data_as(ptr),
    adjncy.ctypes.data_as(ptr),
    None if vwgt is None else vwgt.ctypes.data_as(ptr),
    None,
    None if adjwgt is None else adjwgt.ctypes.data_as(ptr),
    ctypes.byref(args[2]),
    None,
    None,
    options.ctypes.data_as(ptr),
    ctypes.byref(objval),
    part.ctypes.data_as(ptr),
  )
  if status != METIS_OK:
    raise RuntimeError(f'METIS_PartGraphKway failed with status {status}')
  return torch.from_numpy(part.astype(np.int64, copy=False))


def symmetric_adjacency(rows: torch.Tensor, cols: torch.Tensor, num_nodes: int) -> tuple:
  """The CSR ``(indptr, indices)`` of the undirected simple graph of these
  edges: both directions, no self-loops, no duplicates (what METIS needs)."""
  keep = rows != cols
  src = torch.cat([rows[keep], cols[keep]])
  dst = torch.cat([cols[keep], rows[keep]])
  del keep
  indptr, indices, perm = torch.ops.glt.coo_to_csr(src, dst, num_nodes, num_nodes)  # sorted rows
  del src, dst, perm
  if indices.numel() == 0:
    return indptr, indices
  row_of = torch.repeat_interleave(torch.arange(num_nodes), indptr[1:] - indptr[:-1])
  fresh = torch.ones(indices.numel(), dtype=torch.bool)
  fresh[1:] = (indices[1:] != indices[:-1]) | (row_of[1:] != row_of[:-1])
  counts = torch.zeros(num_nodes + 1, dtype=torch.int64)
  counts[1:] = torch.bincount(row_of[fresh], minlength=num_nodes)
  return torch.cumsum(counts, 0), indices[fresh]


class MetisPartitioner(PartitionerBase):
  """Partitions with METIS to minimise the edge cut, keeping node counts
  balanced, and optionally the training nodes and the edges as well (as DGL's
  ``partition_graph`` does). A heterogeneous graph is partitioned as one graph
  over all node types, with each type's node count balanced.

  Takes the arguments of :class:`PartitionerBase`, and these.

  Args:
    balance_train: also balance the training nodes (``node_split[0]``).
    balance_edges: also balance the edges (each node weighs its degree).
    imbalance: the tolerated imbalance per constraint, as METIS's ufactor
      (1 + imbalance is the allowed max/mean; default 0.03).
    seed: METIS's random seed.
  """

  name = 'metis'

  def __init__(
    self,
    *args,
    balance_train: bool = False,
    balance_edges: bool = False,
    imbalance: float = 0.03,
    seed: Optional[int] = 0,
    **kwargs,
  ):
    super().__init__(*args, **kwargs)
    self.balance_train = balance_train
    self.balance_edges = balance_edges
    self.imbalance = float(imbalance)
    self.seed = seed
    total = sum(self.num_nodes.values())
    if 0 < total < self.num_parts:
      raise ValueError(
        f'MetisPartitioner cannot cut {total} nodes into {self.num_parts} parts: ask for at '
        f'most {total} (RandomPartitioner leaves the extra partitions empty)'
      )
    if balance_train and not self.node_split.get('train_idx'):
      raise ValueError('balance_train needs the training nodes: pass node_split=(train, val, test)')
    _import_pymetis()

  def _assign_nodes(self) -> Dict[NodeType, torch.Tensor]:
    ntypes = list(self.num_nodes)
    offsets, total = {}, 0
    for t in ntypes:
      offsets[t], total = total, total + self.num_nodes[t]
    if self.num_parts == 1 or total == 0:
      return {t: torch.zeros(self.num_nodes[t], dtype=torch.int64) for t in ntypes}

    rows = torch.cat([r.to(torch.int64) + offsets[e[0]] for e, (r, _) in self.edge_index.items()])
    cols = torch.cat([c.to(torch.int64) + offsets[e[-1]] for e, (_, c) in self.edge_index.items()])
    degree = None
    if self.balance_edges:
      degree = torch.bincount(rows, minlength=total) + torch.bincount(cols, minlength=total)
    logger.info('metis: building the undirected graph of %d nodes, %d edges', total, rows.numel())
    indptr, indices = symmetric_adjacency(rows, cols, total)
    del rows, cols

    # Constraints (one weight column each): nodes of each type, then training
    # nodes, then edges.
    columns = []
    for t in ntypes:
      col = torch.zeros(total, dtype=torch.int64)
      col[offsets[t] : offsets[t] + self.num_nodes[t]] = 1
      columns.append(col)
    if self.balance_train:
      col = torch.zeros(total, dtype=torch.int64)
      for t, ids in self.node_split['train_idx'].items():
        col[ids + offsets[t]] = 1
      columns.append(col)
    if degree is not None:
      columns.append(degree.clamp(min=1))
    vweights = torch.stack(columns, dim=1) if len(columns) > 1 else None
    logger.info(
      'metis: partitioning %d nodes, %d undirected edges into %d parts (%d constraints)',
      total,
      indices.numel() // 2,
      self.num_parts,
      len(columns),
    )
    ufactor = max(1, int(round(self.imbalance * 1000)))
    assignment = metis_kway(indptr, indices, vweights, self.num_parts, ufactor, self.seed)
    return {t: assignment[offsets[t] : offsets[t] + self.num_nodes[t]].clone() for t in ntypes}
