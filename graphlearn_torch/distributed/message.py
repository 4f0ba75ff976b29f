"""Sampled batches as channel messages (flat dicts of tensors) and back.

A batch is stored per node type and per edge type, the homogeneous case as
the one-type case: ``node/{type}/ids``, ``node/{type}/x``, ``node/{type}/y``,
``node/{type}/batch`` (the seeds), ``node/{type}/num_sampled``,
``edge/{src|rel|dst}/rows``, ``.../cols``,
``.../eids``, ``.../attr``, ``.../num_sampled``, ``meta/{name}`` and
``#hetero``.
"""

from typing import Dict, Optional, Tuple, Union

import torch
from torch_geometric.data import Data, HeteroData

from ..channel import SampleMessage
from ..loader.transform import to_data, to_hetero_data
from ..sampler.base import HeteroSamplerOutput, SamplerOutput
from ..typing import HOMO_EDGE_TYPE, HOMO_NODE_TYPE, EdgeType, NodeType

_SEP = '/'
_ETYPE_SEP = '|'


def _type_key(t: Union[NodeType, EdgeType]) -> str:
  parts = (t,) if isinstance(t, str) else tuple(t)
  for part in parts:
    if _SEP in part or _ETYPE_SEP in part:
      raise ValueError(f"type names must not hold '{_SEP}' or '{_ETYPE_SEP}': {t!r}")
  return _ETYPE_SEP.join(parts)


def to_message(
  out: Union[SamplerOutput, HeteroSamplerOutput],
  node_feats: Optional[Dict[NodeType, torch.Tensor]] = None,
  node_labels: Optional[Dict[NodeType, torch.Tensor]] = None,
  edge_feats: Optional[Dict[EdgeType, torch.Tensor]] = None,
) -> SampleMessage:
  r"""A sampler output and its gathered data as one message.

  Args:
    out: the sampled subgraph.
    node_feats: features of ``out.node`` by node type (homogeneous:
      ``HOMO_NODE_TYPE``).
    node_labels: labels of ``out.node`` by node type.
    edge_feats: features of ``out.edge`` by output edge type.
  """
  hetero = isinstance(out, HeteroSamplerOutput)

  def typed(x, default_key):
    if x is None:
      return {}
    return x if hetero else {default_key: x}

  msg: SampleMessage = {'#hetero': torch.tensor(int(hetero))}
  num_nodes = typed(out.num_sampled_nodes, HOMO_NODE_TYPE)
  seeds = typed(out.batch, HOMO_NODE_TYPE)
  for ntype, ids in typed(out.node, HOMO_NODE_TYPE).items():
    key = f'node{_SEP}{_type_key(ntype)}{_SEP}'
    msg[key + 'ids'] = ids
    if ntype in seeds:
      msg[key + 'batch'] = seeds[ntype]
    if ntype in num_nodes:
      msg[key + 'num_sampled'] = torch.as_tensor(num_nodes[ntype], dtype=torch.int64)
    if node_feats and node_feats.get(ntype) is not None:
      msg[key + 'x'] = node_feats[ntype]
    if node_labels and node_labels.get(ntype) is not None:
      msg[key + 'y'] = node_labels[ntype]
  num_edges = typed(out.num_sampled_edges, HOMO_EDGE_TYPE)
  edges = typed(out.edge, HOMO_EDGE_TYPE)
  cols = typed(out.col, HOMO_EDGE_TYPE)
  for etype, rows in typed(out.row, HOMO_EDGE_TYPE).items():
    key = f'edge{_SEP}{_type_key(etype)}{_SEP}'
    msg[key + 'rows'] = rows
    msg[key + 'cols'] = cols[etype]
    if etype in edges and edges[etype] is not None:
      msg[key + 'eids'] = edges[etype]
    if etype in num_edges:
      msg[key + 'num_sampled'] = torch.as_tensor(num_edges[etype], dtype=torch.int64)
    if edge_feats and edge_feats.get(etype) is not None:
      msg[key + 'attr'] = edge_feats[etype]
  for name, value in (out.metadata or {}).items():
    if isinstance(value, torch.Tensor):
      msg[f'meta{_SEP}{name}'] = value
  return msg


def _parse(msg: SampleMessage):
  nodes: Dict[NodeType, Dict[str, torch.Tensor]] = {}
  edges: Dict[EdgeType, Dict[str, torch.Tensor]] = {}
  metadata: Dict[str, torch.Tensor] = {}
  for key, value in msg.items():
    kind, _, rest = key.partition(_SEP)
    if kind == 'node':
      ntype, _, field = rest.rpartition(_SEP)
      nodes.setdefault(ntype, {})[field] = value
    elif kind == 'edge':
      etype, _, field = rest.rpartition(_SEP)
      edges.setdefault(tuple(etype.split(_ETYPE_SEP)), {})[field] = value
    elif kind == 'meta':
      metadata[rest] = value
  return nodes, edges, metadata


def message_to_data(
  msg: SampleMessage, input_type=None, **kwargs
) -> Tuple[Union[Data, HeteroData], Dict[str, torch.Tensor]]:
  r"""PyG data from a message, and the message's metadata.

  Args:
    msg: a message made by :func:`to_message`.
    input_type: the seeds' node or edge type (heterogeneous batches).
    **kwargs: more attributes of the batch.
  """
  nodes, edges, metadata = _parse(msg)
  hetero = bool(int(msg['#hetero']))

  def num_list(fields):
    value = fields.get('num_sampled')
    return value.tolist() if value is not None else None

  if not hetero:
    node, edge = nodes[HOMO_NODE_TYPE], edges[HOMO_EDGE_TYPE]
    out = SamplerOutput(
      node=node['ids'],
      row=edge['rows'],
      col=edge['cols'],
      edge=edge.get('eids'),
      batch=node.get('batch'),
      num_sampled_nodes=num_list(node),
      num_sampled_edges=num_list(edge),
      metadata=metadata,
    )
    data = to_data(out, node.get('y'), node.get('x'), edge.get('attr'), **kwargs)
    return data, metadata
  out = HeteroSamplerOutput(
    node={t: f['ids'] for t, f in nodes.items()},
    row={t: f['rows'] for t, f in edges.items()},
    col={t: f['cols'] for t, f in edges.items()},
    edge={t: f['eids'] for t, f in edges.items() if 'eids' in f} or None,
    batch={t: f['batch'] for t, f in nodes.items() if 'batch' in f},
    num_sampled_nodes={t: num_list(f) for t, f in nodes.items()},
    num_sampled_edges={t: num_list(f) for t, f in edges.items()},
    edge_types=list(edges),
    input_type=input_type,
    metadata=metadata,
  )
  data = to_hetero_data(
    out,
    {t: f['y'] for t, f in nodes.items() if 'y' in f},
    {t: f['x'] for t, f in nodes.items() if 'x' in f},
    {t: f['attr'] for t, f in edges.items() if 'attr' in f},
    **kwargs,
  )
  return data, metadata
