"""Link sampling's part of the engine: a batch of seed edges checked
(``LinkBatch``), its negatives, the seed nodes it samples from, and its
output's label metadata."""

from dataclasses import dataclass
from typing import Dict, List, Optional, Tuple, Union

import torch

from ..typing import EdgeType, NodeType
from .base import (
  EdgeSamplerInput,
  HeteroSamplerOutput,
  HopResult,
  NegativeSampling,
  SamplerOutput,
)
from .schema import RandomStream


@dataclass
class LinkBatch:
  """A checked batch of seed edges on its way through link sampling.

  Args:
    etype: the seed edges' type.
    row: their sources.
    col: their destinations.
    label: their labels (or None).
    neg: the negative sampling asked for (or None).
    time: their times (temporal sampling), or None.
  """

  etype: EdgeType
  row: torch.Tensor
  col: torch.Tensor
  label: Optional[torch.Tensor]
  neg: Optional[NegativeSampling]
  time: Optional[torch.Tensor] = None

  @property
  def num_negatives(self) -> int:
    """How many negative pairs (binary) or destinations (triplet) to draw."""
    return 0 if self.neg is None else self.neg.count(self.row.numel())

  @property
  def strict_negatives(self) -> Optional[Tuple[int, Optional[torch.Tensor]]]:
    """``(number, fixed sources)`` of the non-edges to draw from the graph:
    ``(n, None)`` for binary pairs, ``(0, sources)`` for triplet
    destinations; None when none are needed."""
    if self.neg is None or self.neg.weight is not None:
      return None
    if self.neg.is_binary():
      return self.num_negatives, None
    return 0, self.row.repeat_interleave(int(self.neg.amount))


def binary_pair_time(batch: LinkBatch) -> torch.Tensor:
  """The times of a binary link batch's labelled pairs: its edges' times,
  then the negatives', which take the edges' in turn (as PyG)."""
  n = batch.row.numel() + batch.num_negatives
  return batch.time.repeat(-(-n // max(batch.time.numel(), 1)))[:n]


class LinkSampling:
  """``MultiHopSampler``'s methods for batches of seed edges. They use the
  engine's ``schema``, ``sample_device``, ``random`` and ``to_output``."""

  def random_nodes(
    self,
    ntype: NodeType,
    n: int,
    weight: Optional[torch.Tensor],
    random: Optional[RandomStream] = None,
  ) -> torch.Tensor:
    """``n`` random nodes of ``ntype``: uniform, or drawn by ``weight``,
    from ``random`` (default: the engine's stream)."""
    random = random or self.random
    if weight is not None:
      nodes = random.choice(weight.cpu(), n)
    else:
      nodes = random.randint(self.schema.num_nodes[ntype], n)
    return nodes.to(self.sample_device)

  def link_batch(self, inputs: EdgeSamplerInput) -> LinkBatch:
    """Checks a batch of seed edges; says which negatives it needs."""
    inputs = EdgeSamplerInput.cast(inputs)
    etype = self.schema.input_edge_type(inputs.input_type)
    row = self.schema.check_seeds(inputs.row, etype[0], self.sample_device)
    col = self.schema.check_seeds(inputs.col, etype[-1], self.sample_device)
    if row.numel() != col.numel():
      raise ValueError(
        f'seed edges need as many sources as targets: {row.numel()} vs {col.numel()}'
      )
    time = inputs.time
    if time is not None:
      time = torch.as_tensor(time).view(-1)
      if time.numel() != row.numel():
        raise ValueError(f'{time.numel()} edge times for {row.numel()} seed edges')
    return LinkBatch(etype, row, col, inputs.label, inputs.neg_sampling, time)

  def link_seeds(
    self,
    batch: LinkBatch,
    strict_negatives: Optional[torch.Tensor],
    random: Optional[RandomStream] = None,
  ) -> Tuple[Dict[NodeType, torch.Tensor], Dict[NodeType, List[int]]]:
    """The seed nodes of a link batch, its negatives included, by node type,
    and the sizes of the pieces (sources, destinations, negatives) they were
    concatenated from, which ``link_output`` needs.

    Args:
      batch: from ``link_batch``.
      strict_negatives: the ``[2, n]`` non-edges ``batch.strict_negatives``
        asked for (None when it asked for none).
      random: the batch's stream for weighted negatives (default: the
        engine's).
    """
    neg, row, col = batch.neg, batch.row, batch.col
    src_t, dst_t = batch.etype[0], batch.etype[-1]
    if strict_negatives is not None:
      strict_negatives = strict_negatives.to(self.sample_device)
    if neg is None or neg.is_binary():
      src, dst = row, col
      if neg is not None:
        if neg.weight is None:
          neg_src, neg_dst = strict_negatives[0], strict_negatives[1]
        else:
          num_neg = batch.num_negatives
          neg_src = self.random_nodes(src_t, num_neg, None, random)
          neg_dst = self.random_nodes(dst_t, num_neg, neg.weight, random)
        src, dst = torch.cat([row, neg_src]), torch.cat([col, neg_dst])
      pieces = [(src_t, src), (dst_t, dst)]
    else:
      if neg.weight is None:
        neg_dst = strict_negatives[1]
      else:
        neg_dst = self.random_nodes(dst_t, batch.num_negatives, neg.weight, random)
      pieces = [(src_t, row), (dst_t, col), (dst_t, neg_dst)]
    merged = {}
    for t, piece in pieces:
      merged.setdefault(t, []).append(piece)
    parts = {t: [p.numel() for p in ps] for t, ps in merged.items()}
    return {t: torch.cat(ps) for t, ps in merged.items()}, parts

  def link_seed_time(self, batch: LinkBatch) -> Optional[Dict[NodeType, torch.Tensor]]:
    """The seed edges' times laid out as ``link_seeds`` lays out their seed
    nodes, by node type: both ends of an edge take its time, and so do its
    negatives (binary negatives in turn over the edges, as PyG; triplet
    negatives those of their source). None when the batch has no times.

    Args:
      batch: from ``link_batch``.
    """
    time, neg = batch.time, batch.neg
    if time is None:
      return None
    src_t, dst_t = batch.etype[0], batch.etype[-1]
    if neg is None or neg.is_binary():
      pairs = binary_pair_time(batch)
      pieces = [(src_t, pairs), (dst_t, pairs)]
    else:
      pieces = [(src_t, time), (dst_t, time), (dst_t, time.repeat_interleave(int(neg.amount)))]
    merged = {}
    for t, piece in pieces:
      merged.setdefault(t, []).append(piece)
    return {t: torch.cat(ps) for t, ps in merged.items()}

  def link_output(
    self, batch: LinkBatch, res: HopResult, parts: Dict[NodeType, List[int]]
  ) -> Union[SamplerOutput, HeteroSamplerOutput]:
    """The sampler output of a link batch, with its label metadata.

    Args:
      batch: from ``link_batch``.
      res: the sampled hops.
      parts: the seed pieces' sizes from ``link_seeds``.
    """
    src_t, dst_t = batch.etype[0], batch.etype[-1]

    def split(ntype) -> List[torch.Tensor]:
      return list(torch.split(res.seed_local[ntype], parts[ntype]))

    metadata = {}
    neg = batch.neg
    if neg is None or neg.is_binary():
      label = batch.label
      if neg is not None:
        if label is None:
          label = torch.ones(batch.row.numel())
        num_neg = batch.num_negatives
        label = torch.cat([label, label.new_zeros((num_neg,) + tuple(label.shape[1:]))])
      if label is not None:
        metadata['edge_label'] = label
      metadata['edge_label_index'] = torch.stack([split(src_t)[0], split(dst_t)[-1]])
      if batch.time is not None:
        metadata['edge_label_time'] = binary_pair_time(batch)
    else:
      local_dst = split(dst_t)
      metadata['src_index'] = split(src_t)[0]
      metadata['dst_pos_index'] = local_dst[-2]
      dst_neg = local_dst[-1]
      amount = int(neg.amount)
      metadata['dst_neg_index'] = dst_neg if amount == 1 else dst_neg.view(-1, amount)
      if batch.time is not None:
        metadata['seed_time'] = batch.time
    if res.seed_index is not None:
      # Disjoint: each node's seed edge (both ends and the negatives of an
      # edge share its subgraph's number modulo the positives, as in PyG).
      res.seed_index = {t: s % max(batch.row.numel(), 1) for t, s in res.seed_index.items()}
    return self.to_output(res, batch.etype if self.schema.is_hetero else None, metadata)
