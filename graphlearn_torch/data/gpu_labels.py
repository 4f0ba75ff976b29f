"""Node labels gathered on the GPU, for batches whose node ids are there."""

from dataclasses import dataclass
from typing import Dict, Optional, Tuple

import torch

from .._ext import cuda_kernels_available
from ..typing import NodeType
from .gather_checks import GatherChecks
from .unified_tensor import UnifiedTensor


@dataclass
class _PlacedLabels:
  labels: torch.Tensor  # the host labels it was placed from
  id2idx: Optional[torch.Tensor]  # and their map
  table: UnifiedTensor
  gpu_id2idx: Optional[torch.Tensor]


class GpuLabels:
  r"""Each node type's labels as a table the GPU gathers from, placed on
  first use, once per GPU: labels that the host's processes share (a
  dataset handed to sampling processes) are read in place through UVA,
  registered where they lie, so that each process adds no copy; a
  process's own labels are copied to GPU memory beside a graph there
  ('CUDA'), else read through UVA too (``host_view``: registered in place
  from 64 MB up, smaller ones pinned into a copy). A batch sampled on the GPU
  then gets its labels without copying its ids to the host and its labels
  back.
  """

  def __init__(self):
    self._placed: Dict[Tuple[Optional[NodeType], int], _PlacedLabels] = {}

  @staticmethod
  def reads(ids, labels: torch.Tensor) -> bool:
    r"""Whether the labels of ``ids`` are gathered on the GPU: ``ids`` are
    there, the labels are not, and the CUDA kernels are built."""
    return (
      isinstance(ids, torch.Tensor)
      and ids.is_cuda
      and not labels.is_cuda
      and cuda_kernels_available()
    )

  def gather(
    self,
    labels: torch.Tensor,
    id2idx: Optional[torch.Tensor],
    ids: torch.Tensor,
    ntype: Optional[NodeType],
    in_gpu_memory: bool,
    checks: Optional[GatherChecks] = None,
  ) -> torch.Tensor:
    r"""The labels of ``ids`` (through ``id2idx`` when given), gathered on
    ``ids``' GPU.

    Args:
      labels: the node type's labels, in host memory.
      id2idx: the label row of each node id, or None.
      ids: node ids on a GPU.
      ntype: the node type (None: homogeneous).
      in_gpu_memory: whether the graph is in GPU memory: a process's own
        labels go there too.
      checks: where the gather's check of the ids waits to be read with
        the batch's others (by default it is read at once).
    """
    key = (ntype, ids.device.index)
    placed = self._placed.get(key)
    if placed is None or placed.labels is not labels or placed.id2idx is not id2idx:
      placed = self._placed[key] = _place(labels, id2idx, ids.device, in_gpu_memory)
    rows = placed.table.gather(ids, placed.gpu_id2idx, checks)
    return rows.view(rows.size(0), *labels.shape[1:])


def _place(
  labels: torch.Tensor, id2idx: Optional[torch.Tensor], device: torch.device, in_gpu_memory: bool
) -> _PlacedLabels:
  r"""The table of ``labels`` that ``device`` gathers from (on the CPU, a
  plain host table)."""
  table = UnifiedTensor(device.index if device.type == 'cuda' else None, labels.dtype)
  rows = labels.reshape(labels.size(0), -1)
  if in_gpu_memory and not labels.is_shared():
    table.append_shared_tensor(rows.to(device))
  else:
    table.append_cpu_tensor(rows)
  gpu_id2idx = id2idx.to(device) if id2idx is not None else None
  return _PlacedLabels(labels, id2idx, table, gpu_id2idx)
