"""GLT's general helpers (``utils.common``)."""

import os
import pickle
import random
import socket
from typing import Any, Dict, Iterator, List, Optional

import numpy as np
import torch

from ..typing import reverse_edge_type
from .tensor import id2idx


def ensure_dir(dir_path: str) -> None:
  """Creates ``dir_path`` (and its parents) if it does not exist."""
  os.makedirs(dir_path, exist_ok=True)


def append_tensor_to_file(filename: str, tensor: torch.Tensor) -> None:
  """Appends ``tensor`` to ``filename`` as one more pickled chunk: GLT
  0.2.x's feature-chunk files (``feats.pkl``, ``ids.pkl``)."""
  with open(filename, 'ab') as f:
    pickle.dump(tensor, f)


def load_and_concatenate_tensors(
  filename: str, device: Optional[torch.device] = None
) -> torch.Tensor:
  """Reads every pickled chunk of a GLT chunk file (``append_tensor_to_file``)
  and concatenates them on ``device``. Unpickling can run code: read only
  files from a trusted source."""
  chunks: List[torch.Tensor] = []
  with open(filename, 'rb') as f:
    while True:
      try:
        chunks.append(torch.as_tensor(pickle.load(f)))
      except EOFError:
        break
  if not chunks:
    raise ValueError(f'{filename} holds no tensor chunks')
  return torch.cat(chunks).to(device or 'cpu')


def default_id_filter(node_pb, partition_idx: int) -> torch.Tensor:
  """The ids, ascending, that partition book ``node_pb`` (a tensor of
  partition ids, or one of ``graphlearn_torch.partition``'s books) assigns to
  ``partition_idx``."""
  ranges = getattr(node_pb, 'partition_ranges', None)
  if ranges is not None:  # a range book: partition i owns [start_i, end_i)
    start, end = ranges[partition_idx]
    return torch.arange(start, end, dtype=torch.int64)
  book = torch.as_tensor(getattr(node_pb, 'tensor', node_pb))
  return torch.nonzero(book == partition_idx).view(-1)


def default_id_select(srcs: torch.Tensor, p_mask: torch.Tensor, node_pb=None) -> torch.Tensor:
  """The ``srcs`` where ``p_mask`` holds (GLT's default selection of a
  partition's ids; ``node_pb`` is unused)."""
  return torch.masked_select(srcs, p_mask)


def seed_everything(seed: int) -> None:
  """Seeds Python's ``random``, NumPy and torch (CPU and CUDA). Samplers built
  without a seed of their own draw from torch's generator, so this seeds them
  too.

  Args:
    seed: the seed.
  """
  random.seed(seed)
  np.random.seed(seed)
  torch.manual_seed(seed)
  if torch.cuda.is_available():
    torch.cuda.manual_seed_all(seed)


def ephemeral_ports() -> range:
  r"""The kernel's ephemeral port range (``ip_local_port_range``): the ports
  it hands to port-0 binds and to the local end of outgoing connections, so
  one of them that is free now can be taken a moment later by any of the
  connections RPC makes (EADDRINUSE, or a stray connection into the wrong
  listener). ``range(32768, 61000)``, Linux's default, where it cannot be read.
  """
  try:
    with open('/proc/sys/net/ipv4/ip_local_port_range') as f:
      low, high = map(int, f.read().split())
  except (OSError, ValueError):
    low, high = 32768, 60999
  return range(low, high + 1)


def get_free_port(host: str = 'localhost', count: int = 1) -> int:
  r"""A TCP port ``p`` on ``host`` with ``p .. p + count - 1`` all free a
  moment ago, outside the kernel's ephemeral range (see
  :func:`ephemeral_ports`), so that no connection can take it before it is
  bound.

  Args:
    host: the address to bind.
    count: how many consecutive ports must be free.

  Raises:
    RuntimeError: if 200 random tries find none.
  """
  ephemeral = ephemeral_ports()
  low, high = ephemeral.start, ephemeral.stop
  candidates = [p for p in range(10000, 65537 - count) if p + count <= low or p >= high]
  for base in random.Random().sample(candidates, min(200, len(candidates))):
    try:
      for port in range(base, base + count):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
          s.bind((host, port))
    except OSError:
      continue
    return base
  raise RuntimeError(
    f'no {count} free consecutive port(s) on {host} outside the ephemeral range '
    f'{ephemeral.start}-{ephemeral.stop - 1}'
  )


def per_type_values(*values: Any) -> Iterator[Any]:
  r"""The values of ``values``, each a dict by type (heterogeneous data) or
  one value (homogeneous), those that are None left out."""
  for value in values:
    items = value.values() if isinstance(value, dict) else [value]
    yield from (item for item in items if item is not None)


def merge_dict(in_dict: Dict[Any, Any], out_dict: Dict[Any, List[Any]]) -> None:
  """Appends each value of ``in_dict`` to the list under its key in ``out_dict``."""
  for k, v in in_dict.items():
    out_dict.setdefault(k, []).append(v)


def count_dict(in_dict: Dict[Any, Any], out_dict: Dict[Any, List[int]], target_len: int) -> None:
  """Appends ``len(value)`` of each entry of ``in_dict`` to ``out_dict[key]``,
  padding that list with zeros to ``target_len - 1`` entries first."""
  for k, v in in_dict.items():
    counts = out_dict.setdefault(k, [])
    counts += [0] * (target_len - len(counts) - 1)
    counts.append(len(v))


def index_select(data: Any, index: Any) -> Any:
  """Indexes every tensor of a (nested) dict, list or tuple with ``index``; a
  ``(start, end)`` tuple index slices."""
  if data is None:
    return None
  if isinstance(data, dict):
    return {k: index_select(v, index) for k, v in data.items()}
  if isinstance(data, (list, tuple)):
    return type(data)(index_select(v, index) for v in data)
  if isinstance(index, tuple):
    start, end = index
    return data[start:end]
  return data[index]


def _output_edge_types(edge_types, edge_dir: str):
  if edge_dir != 'out':
    return list(edge_types)
  return [reverse_edge_type(e) if e[0] != e[-1] else e for e in edge_types]


def merge_hetero_sampler_output(
  in_sample: Any, out_sample: Any, device=None, edge_dir: str = 'out'
):
  """Merges two heterogeneous sampler outputs into ``out_sample``: the union
  of their nodes (sorted by id per type), their edges relabelled to it.

  Args:
    in_sample: one HeteroSamplerOutput.
    out_sample: the other; updated and returned.
    device: unused (the tensors' own device is kept); GLT's argument.
    edge_dir: 'out' turns the edge types into their reversed output types.
  """

  def global_ids(sample):
    rows = {k: sample.node[k[0]][v] for k, v in sample.row.items()}
    cols = {k: sample.node[k[-1]][v] for k, v in sample.col.items()}
    return rows, cols

  in_rows, in_cols = global_ids(in_sample)
  out_rows, out_cols = global_ids(out_sample)
  for ntype, nodes in in_sample.node.items():
    if ntype in out_sample.node:
      nodes = torch.cat([out_sample.node[ntype], nodes])
    out_sample.node[ntype] = nodes.unique()
  for k in in_rows:
    out_rows[k] = torch.cat([out_rows[k], in_rows[k]]) if k in out_rows else in_rows[k]
    out_cols[k] = torch.cat([out_cols[k], in_cols[k]]) if k in out_cols else in_cols[k]
  out_sample.row = {k: id2idx(out_sample.node[k[0]])[v] for k, v in out_rows.items()}
  out_sample.col = {k: id2idx(out_sample.node[k[-1]])[v] for k, v in out_cols.items()}
  if in_sample.edge is not None and out_sample.edge is not None:
    for k, v in in_sample.edge.items():
      out_sample.edge[k] = torch.cat([out_sample.edge[k], v]) if k in out_sample.edge else v
  if out_sample.edge_types is not None and in_sample.edge_types is not None:
    merged = list(dict.fromkeys(list(out_sample.edge_types) + list(in_sample.edge_types)))
    out_sample.edge_types = _output_edge_types(merged, edge_dir)
  return out_sample


def format_hetero_sampler_output(in_sample: Any, edge_dir: str = 'out'):
  """Sorts and deduplicates the nodes of each type of a heterogeneous sampler
  output and, for ``edge_dir='out'``, turns its edge types into the reversed
  output types (GLT's helper; the edges are not relabelled)."""
  for k in in_sample.node:
    in_sample.node[k] = in_sample.node[k].unique()
  if in_sample.edge_types is not None:
    in_sample.edge_types = _output_edge_types(in_sample.edge_types, edge_dir)
  return in_sample
