"""Gathering the features and labels of a sampled batch, from one machine's
tables or from every partition's."""

from typing import Optional, Protocol, Union

import torch

from ..data.dataset import Dataset
from ..data.feature import Feature
from ..data.gather_checks import GatherChecks
from ..sampler.base import HeteroSamplerOutput, SamplerOutput
from ..typing import EdgeType, NodeType, reverse_edge_type
from ..utils.futures import completed, then
from .sampled import SampledBatch


class RowLookup(Protocol):
  r"""Fetches feature rows: a future of the rows of ``ids``, in id order,
  the GPU gathers' checks of their ids left in ``checks`` (read once for
  the batch); ``host_ids``: the ids on the host too, where the sampler had
  them there (node ids on a GPU), else None. ``DistFeature.async_get``
  fetches any partition's."""

  def __call__(
    self,
    ids: torch.Tensor,
    type_: Union[NodeType, EdgeType],
    checks: GatherChecks,
    host_ids: Optional[torch.Tensor] = None,
  ) -> torch.futures.Future: ...


def local_rows(data: Dataset, kind: str) -> RowLookup:
  r"""Row lookups in ``data``'s own node (``kind='node'``) or edge tables."""
  get = data.get_node_feature if kind == 'node' else data.get_edge_feature

  def rows(ids: torch.Tensor, type_, checks: GatherChecks, host_ids=None) -> torch.futures.Future:
    # (host_ids unused: every row is read here, on the ids' device)
    table = get(type_)
    return completed(table.rows(ids, checks) if isinstance(table, Feature) else table[ids])

  return rows


def collect_features(
  batch: SampledBatch,
  data: Dataset,
  node_rows: Optional[RowLookup] = None,
  edge_rows: Optional[RowLookup] = None,
  with_labels: bool = True,
) -> torch.futures.Future:
  r"""Gathers the node features (``x``), labels (``y``) and edge features
  (``attr``) of a batch into it; returns a future of the batch.

  Only types whose features ``data`` has are gathered. Edge features are
  looked up by the graph's edge type: with ``edge_dir='out'`` a batch holds
  edges under the reversed type. The gathers on a GPU check that each id
  has a row once for the whole batch, when they are all launched (one host
  sync a batch, not one a gather).

  Args:
    batch: the batch (changed in place).
    data: the dataset it was sampled from (a ``DistDataset`` too: its
      partition's tables say which types have features, and it has every
      node's labels).
    node_rows: fetches node feature rows (default: ``data``'s own table).
    edge_rows: fetches edge feature rows (default: ``data``'s own table).
    with_labels: gather labels too.
  """
  checks = GatherChecks()
  node_rows = node_rows or local_rows(data, 'node')
  edge_rows = edge_rows or local_rows(data, 'edge')
  pending = []  # (store, field, future)
  for ntype, node in batch.nodes.items():
    if data.get_node_feature(ntype) is not None:
      pending.append((node, 'x', node_rows(node.ids, ntype, checks, node.host_ids)))
    if with_labels:
      node.y = data.gather_node_labels(node.ids, ntype, checks)
  for etype, edge in batch.edges.items():
    if edge.eids is None:
      continue
    stored = reverse_edge_type(etype) if data.edge_dir == 'out' else etype
    if data.get_edge_feature(stored) is not None:
      pending.append((edge, 'attr', edge_rows(edge.eids, stored, checks)))
  if not pending:
    checks.raise_first()
    return completed(batch)

  def fill(collected) -> SampledBatch:
    # collect_all fails as soon as one future does, while others may still
    # run: its own failure first, then every value is there.
    collected.value()
    checks.raise_first()
    for store, name, fut in pending:
      setattr(store, name, fut.value())
    return batch

  return then(torch.futures.collect_all([fut for _, _, fut in pending]), fill)


def gather_batch(data: Dataset, out: Union[SamplerOutput, HeteroSamplerOutput]) -> SampledBatch:
  """The batch of a sampler output with its features and labels from ``data``."""
  return collect_features(SampledBatch.from_output(out), data).wait()
