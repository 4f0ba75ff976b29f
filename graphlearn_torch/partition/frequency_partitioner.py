"""FrequencyPartitioner: nodes go to the partition whose training seeds reach
them most often, and each partition replicates the hottest rows it does not own."""

from typing import Dict, List, Optional, Union

import torch

from ..typing import HOMO_NODE_TYPE, NodeType
from .npy import as_tensor
from .partitioner import PartitionerBase


class FrequencyPartitioner(PartitionerBase):
  """Places nodes by access probability, GLT's hotness-aware partitioning.

  ``probs[i][v]`` is the probability that sampling from partition i's
  training seeds touches node v (``NeighborSampler.sample_prob``). Nodes are
  taken in chunks of ``chunk_size``; within a chunk each partition receives an
  equal share, and a node goes to the partition that wants it most among those
  with room left (so node counts stay balanced). Each partition then caches the
  feature rows of the nodes it reaches most often among those it does not own
  (``probs`` is the hotness).

  Args: those of PartitionerBase, and
    probs: per partition, a ``[num_nodes]`` probability tensor (a dict of such
      lists by node type for a heterogeneous graph).
    cache_memory_budget: bytes of cached feature rows per partition (an int, or
      a dict by node type).
    cache_ratio: the cached rows per partition as a share of the node count
      (used when cache_memory_budget is not given).
  """

  name = 'frequency'

  def __init__(
    self,
    output_dir: str,
    num_parts: int,
    num_nodes,
    edge_index,
    probs: Union[List[torch.Tensor], Dict[NodeType, List[torch.Tensor]]],
    node_feat=None,
    node_feat_dtype: torch.dtype = torch.float32,
    edge_feat=None,
    edge_feat_dtype: torch.dtype = torch.float32,
    edge_weights=None,
    edge_assign_strategy: str = 'by_src',
    cache_memory_budget: Optional[Union[int, Dict[NodeType, int]]] = None,
    cache_ratio: Optional[Union[float, Dict[NodeType, float]]] = None,
    chunk_size: int = 10000,
    **kwargs,
  ):
    super().__init__(
      output_dir,
      num_parts,
      num_nodes,
      edge_index,
      node_feat,
      node_feat_dtype,
      edge_feat,
      edge_feat_dtype,
      edge_weights,
      edge_assign_strategy,
      chunk_size,
      cache_memory_budget=cache_memory_budget,
      cache_ratio=cache_ratio,
      **kwargs,
    )
    hetero = self.data_cls == 'hetero'
    if hetero != isinstance(probs, dict):
      raise TypeError(f'probs must {"" if hetero else "not "}be a dict by node type')
    probs = probs if hetero else {HOMO_NODE_TYPE: probs}
    self.probs: Dict[NodeType, torch.Tensor] = {}
    for ntype, n in self.num_nodes.items():
      if ntype not in probs:
        raise ValueError(f'probs has no entry for node type {ntype!r}')
      per_part = [as_tensor(p).to(torch.float32).reshape(-1) for p in probs[ntype]]
      if len(per_part) != self.num_parts:
        raise ValueError(f'probs of {ntype!r}: {len(per_part)} tensors for {num_parts} partitions')
      for p in per_part:
        if p.numel() != n:
          raise ValueError(f'probs of {ntype!r}: a tensor of {p.numel()} entries for {n} nodes')
      self.probs[ntype] = torch.stack(per_part) if per_part else torch.empty(0, n)

  def _assign_nodes(self) -> Dict[NodeType, torch.Tensor]:
    return {t: self._assign_type(self.probs[t]) for t in self.num_nodes}

  def _assign_type(self, probs: torch.Tensor) -> torch.Tensor:
    num_parts, num_nodes = probs.shape
    pb = torch.empty(num_nodes, dtype=torch.int64)
    for start in range(0, num_nodes, self.chunk_size):
      chunk = probs[:, start : start + self.chunk_size].t().clone()  # [nodes, parts]
      n = chunk.size(0)
      room = torch.full((num_parts,), -(-n // num_parts), dtype=torch.int64)
      out = torch.full((n,), -1, dtype=torch.int64)
      # Rounds of proposals: each unplaced node asks for its favourite partition
      # with room; a partition takes the most eager askers up to its room.
      while bool((out < 0).any()):
        waiting = torch.nonzero(out < 0).view(-1)
        wants = chunk[waiting].clone()
        wants[:, room == 0] = -1.0
        best_prob, best = wants.max(dim=1)
        order = torch.argsort(best_prob, descending=True, stable=True)
        waiting, best = waiting[order], best[order]
        for p in torch.unique(best).tolist():
          askers = waiting[best == p][: int(room[p])]
          out[askers] = p
          room[p] -= askers.numel()
      pb[start : start + n] = out
    return pb

  def _hotness(self, node_pb: Dict[NodeType, torch.Tensor]) -> Dict[NodeType, torch.Tensor]:
    return self.probs
