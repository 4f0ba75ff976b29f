"""Every C++ entry point called with one argument changed at a time.

Each op (and the CPU inducer's methods) has a valid call on a small graph;
each of its arguments is then replaced, one at a time, by what a user may
get wrong: another dtype, dimension or length, a strided or expanded view,
an empty or meta tensor, None, an element set to a value at the edge of its
range (negative, past int32, huge), an int at the edges of its range, a list
one longer or shorter. Every call must return or raise a Python exception
of the kinds torch and our checks raise: never crash, hang or (under make
sanitize's AddressSanitizer) read or write outside its inputs.

Run as a script (test_op_inputs.py does), with the device to call the
ops on (default cpu; on a GPU, each call's kernels are waited for: a fault
there is a CUDA error no bad input may cause): prints ``DONE <calls> <returned>``
at the end, each call's name to stderr before it runs, and every exception
of an unexpected kind. Some changes ask for tens of GB, which the script's
address space (bounded first) refuses; AddressSanitizer cannot run in a
bounded address space, so under it (make sanitize) its allocator refuses
what is too large, and the int 2**31 (a size that may be allocated in
full, 8-16 GB, by mmap, which it does not bound) is left out.
"""

import os
import resource
import sys
from typing import Callable, Dict, Iterator, List, Tuple

import torch

from graphlearn_torch import _C

INT64_MAX = 2**63 - 1
# What a bad input may raise: our checks (ValueError, IndexError), torch's
# dispatcher and allocator (RuntimeError, MemoryError), pybind (TypeError),
# an op without a kernel for the input's device (NotImplementedError).
EXPECTED = (ValueError, IndexError, RuntimeError, MemoryError, TypeError, NotImplementedError)
INT_VALUES = {
  '-1': -1, '0': 0, '1': 1, '-2**40': -(2**40), '2**31': 2**31, '2**40': 2**40,
  'max': INT64_MAX, 'min': -(2**63), '63': 63, '64': 64,
}  # fmt: skip
ELEMENT_VALUES = {
  '-1': -1, '-2**40': -(2**40), '2**31': 2**31, '2**40': 2**40, 'max': INT64_MAX,
  'min': -(2**63), '0': 0, '7': 7,
}  # fmt: skip
FLOAT_VALUES = {'nan': float('nan'), '-inf': float('-inf'), 'inf': float('inf'), '-1': -1.0}

SANITIZED = 'libasan' in os.environ.get('LD_PRELOAD', '')
if SANITIZED:
  del INT_VALUES['2**31']
# Room for allocations beyond what the process holds when it starts them.
ADDRESS_SPACE_ROOM = 3 << 30

Call = Tuple[Callable, list]


def graph():
  """A CSR graph of 6 nodes and 8 edges: indptr, indices, edge ids, weights."""
  indptr = torch.tensor([0, 2, 3, 3, 6, 7, 8])
  indices = torch.tensor([1, 2, 0, 0, 1, 5, 3, 4])
  return indptr, indices, torch.arange(8) * 10, torch.rand(8) + 0.1


def sampling_calls() -> Dict[str, Call]:
  ops = torch.ops.glt
  indptr, indices, eids, w = graph()
  seeds = torch.tensor([0, 3, 5, 3])
  times = torch.arange(8)
  owner = torch.tensor([0, 1, 0, 1, 1, 0])
  f64 = torch.float64
  return {
    'sample_neighbors': (ops.sample_neighbors, [indptr, indices, eids, w, seeds, 2, False, 7]),
    'sample_neighbors replace': (
      ops.sample_neighbors, [indptr, indices, None, w, seeds, 3, True, 7]),
    'sample_neighbors all, int32': (
      ops.sample_neighbors, [indptr.int(), indices.int(), eids, None, seeds, -1, False, 7]),
    'sample_neighbors_temporal': (
      ops.sample_neighbors_temporal,
      [indptr, indices, eids, None, times, seeds, torch.tensor([5, 5, 9, 1]), 2, False, False, 3,
       None]),
    'sample_neighbors_temporal last': (
      ops.sample_neighbors_temporal,
      [indptr, indices, None, None, times.to(f64), seeds, torch.tensor([5, 5, 9, 1], dtype=f64), 2,
       True, True, 3, torch.tensor([1, 2, 2, 5, 6, 7], dtype=f64)]),
    'sample_neighbors_partitioned': (
      ops.sample_neighbors_partitioned,
      [[indptr, indptr], [indices, indices], [eids, eids], [None, None], owner[seeds], seeds, 2,
       False, [1, 2]]),
    'sample_negative': (ops.sample_negative, [indptr, indices, None, True, 6, 5, 3, True, 7]),
    'sample_negative fixed': (
      ops.sample_negative, [indptr, indices, torch.tensor([0, 3, 5]), False, 6, 3, 4, False, 7]),
    'disjoint_keys': (
      ops.disjoint_keys,
      [torch.tensor([0, 1 << 8 | 3]), torch.tensor([4, 5, 6]), torch.tensor([1, 2]), 8]),
  }  # fmt: skip


def graph_calls() -> Dict[str, Call]:
  ops = torch.ops.glt
  indptr, indices, eids, _ = graph()
  n = 6
  return {
    'has_edge': (
      ops.has_edge, [indptr, indices, torch.tensor([0, 3, 5]), torch.tensor([1, 5, 0])]),
    'induced_subgraph': (
      ops.induced_subgraph, [indptr, indices, eids, torch.tensor([0, 1, 3, 5])]),
    'coo_to_csr': (
      ops.coo_to_csr, [torch.tensor([0, 0, 2, 3]), torch.tensor([1, 2, 3, 0]), 4, 4, None]),
    'sort_rows_by_key': (ops.sort_rows_by_key, [indptr, torch.tensor([5, 1, 3, 2, 9, 0, 4, 4])]),
    'propagate_labels_': (
      ops.propagate_labels_,
      [torch.tensor([0, 0, 1, 2]), torch.tensor([1, 2, 0, 5]), None, 0, torch.tensor([2, 0, 1]),
       torch.arange(n), torch.ones(n, 1, dtype=torch.long), torch.ones(n, 1, dtype=torch.long),
       torch.tensor([3]), 5, False]),
    'bucket_by_partition': (ops.bucket_by_partition, [torch.tensor([1, 0, 1, 2]), 3]),
    'group_by_partition': (
      ops.group_by_partition, [torch.tensor([0, 1, 1, 0]), torch.tensor([3, 1, 2]), 2]),
    'stitch_neighbors': (
      ops.stitch_neighbors,
      [3, [torch.tensor([0, 2]), torch.tensor([1])], [torch.tensor([1, 2]), torch.tensor([1])],
       [torch.tensor([5, 6, 7]), torch.tensor([8])],
       [torch.tensor([50, 60, 70]), torch.tensor([80])]]),
  }  # fmt: skip


def feature_calls() -> Dict[str, Call]:
  ops = torch.ops.glt
  table = torch.randn(10, 3)
  parts = [table[:4].clone(), table[4:].clone()]
  flipped = torch.arange(10).flip(0)
  book = torch.tensor([0] * 4 + [1] * 6, dtype=torch.int8)  # ids 0-3: part 0, 4-9: by offset 4
  slot_of = torch.tensor([0, 1], dtype=torch.int32)
  return {
    'gather_rows': (ops.gather_rows, [table, torch.tensor([1, 4, 2]), None, None, 3]),
    'gather_rows mapped': (
      ops.gather_rows, [table, torch.tensor([1, 4, 2]), flipped, torch.tensor([0, 4, 2]), 5]),
    'unified_gather': (ops.unified_gather, [parts, torch.tensor([0, 9, 4]), None, None]),
    'unified_gather mapped': (
      ops.unified_gather,
      [parts, torch.tensor([0, 9, 4]), flipped, torch.tensor([INT64_MAX])]),
    'unified_gather_by_book': (
      ops.unified_gather_by_book,
      [parts, [1, 1], [torch.arange(10), None], [0, 4], book, slot_of, torch.tensor([0, 9, 4]),
       None]),
    'unified_gather_by_book flagged': (
      ops.unified_gather_by_book,
      [parts, [2, 0], [None, flipped], [0, 0], book.long(), slot_of - torch.tensor([0, 2]).int(),
       torch.tensor([0, 9, 4]), torch.tensor([INT64_MAX])]),
    'scatter_rows_': (
      ops.scatter_rows_, [torch.zeros(5, 3), torch.tensor([4, 0]), torch.randn(2, 3)]),
    'concat': (ops.concat, [[torch.arange(3), torch.arange(2)]]),
  }  # fmt: skip


def inducer_calls() -> Dict[str, Call]:
  indptr, indices, eids, w = graph()

  def inducer(num_nodes: List[int]):
    made = _C.Inducer(2, num_nodes)
    made.init_nodes([torch.tensor([0, 3]), torch.tensor([1])])
    return made

  def init_nodes(num_nodes, seeds):
    return _C.Inducer(2, num_nodes).init_nodes(seeds)

  def induce_next(num_nodes, src_types, nbr_types, srcs, nbrs, nbr_nums):
    return inducer(num_nodes).induce_next(src_types, nbr_types, srcs, nbrs, nbr_nums)

  def sample_induce_next(num_nodes, src_types, nbr_types, srcs, fanouts, rng_seeds, prefixes):
    return inducer(num_nodes).sample_induce_next(
      src_types, nbr_types, srcs, [indptr], [indices], [eids], [w], fanouts, False, rng_seeds,
      prefixes, prefixes,
    )  # fmt: skip

  def local_ids(num_nodes, node_type, ids):
    return inducer(num_nodes).local_ids(node_type, ids)

  def temporal_disjoint(bits, keys, edge_times, seed_times, last, row_max_times):
    made = _C.Inducer(1, [], bits)
    frontier = made.init_nodes([keys])
    return made.sample_induce_next(
      [0], [0], frontier, [indptr], [indices], [None], [None], [2], False, [3],
      [torch.empty(0, dtype=torch.long)], [torch.empty(0, dtype=torch.long)],
      edge_times, seed_times, last, row_max_times,
    )  # fmt: skip

  seeds = [torch.tensor([0, 3])]
  return {
    'Inducer.init_nodes': (init_nodes, [[6, 0], [torch.tensor([0, 3, 3]), torch.tensor([1])]]),
    'Inducer.induce_next': (
      induce_next,
      [[6, 6], [0], [1], seeds, [torch.tensor([1, 2, 5])], [torch.tensor([1, 2])]]),
    'Inducer.induce_next hashed': (
      induce_next,
      [[], [0], [0], seeds, [torch.tensor([1, 2, 5])], [torch.tensor([1, 2])]]),
    'Inducer.sample_induce_next': (
      sample_induce_next, [[6, 6], [0], [1], seeds, [2], [5], [torch.tensor([4, 4])]]),
    'Inducer.local_ids': (local_ids, [[], 1, torch.tensor([1, 0, 9])]),
    'Inducer.sample_induce_next temporal, disjoint': (
      temporal_disjoint,
      [8, torch.tensor([0, 1 << 8 | 3, 2 << 8 | 5]), [torch.arange(8)], [torch.tensor([5, 9, 2])],
       True, [torch.tensor([1, 2, 2, 5, 6, 7])]]),
  }  # fmt: skip


def binding_calls() -> Dict[str, Call]:
  """The module's functions besides the ops, and the channel's queue."""
  table = torch.randn(10, 3)

  def channel(capacity, shm_size, keys, templates, index, tensor, timeout_ms):
    queue = _C.ShmQueue(capacity, shm_size)
    _, _, reservation = queue.reserve(keys, templates, timeout_ms)
    try:
      reservation.write(index, tensor)
    except BaseException:
      reservation.abort()
      raise
    reservation.commit()
    return queue.recv(timeout_ms)

  rows = torch.arange(6, dtype=torch.float32)
  return {
    'gather_rows (pool)': (
      _C.gather_rows,
      [table, torch.tensor([1, 4]), torch.arange(10).flip(0), _C.BufferPool(1 << 20),
       torch.tensor([2, 0]), 3]),
    'gather_partitioned_rows': (
      _C.gather_partitioned_rows,
      [[table, None, table[:5].clone()], [None, None, torch.tensor([4, 3, 2, 1, 0, 0])],
       [None, None, None], [0, 0, 0], torch.tensor([0, 2, 2]), torch.tensor([9, 0, 5]), None,
       None]),
    'row_ranks': (_C.row_ranks, [torch.tensor([3, 0, 2, 1])]),
    'empty_huge_pages': (_C.empty_huge_pages, [1000, torch.float32]),
    'collapse_huge_pages': (_C.collapse_huge_pages, [torch.zeros(3 << 19)]),
    'ShmQueue': (channel, [4, 1 << 20, ['x'], [rows], 0, rows, 100]),
  }  # fmt: skip


def every_call() -> Dict[str, Call]:
  return {
    **sampling_calls(), **graph_calls(), **feature_calls(), **inducer_calls(), **binding_calls()
  }  # fmt: skip


def tensor_changes(t: torch.Tensor) -> Iterator[Tuple[str, torch.Tensor]]:
  """What may be wrong with tensor ``t``."""
  for dtype in (torch.int32, torch.int64, torch.float32, torch.bool, torch.uint8, torch.int16):
    if dtype != t.dtype:
      yield str(dtype), t.to(dtype)
  flat = t.reshape(-1)
  yield '0-d', flat[:1].reshape(()) if t.numel() else torch.zeros((), dtype=t.dtype)
  yield '2-d', flat.reshape(-1, 1)
  yield '3-d', flat.reshape(1, 1, -1)
  yield 'empty', t[:0]
  yield 'one shorter', t[:-1]
  yield 'first only', t[:1]
  yield 'one longer', torch.cat([t, t[:1]])
  yield 'doubled', torch.cat([t, t])
  if t.dim():
    yield 'strided', torch.stack([t, t], -1).select(-1, 0)
  yield 'expanded', flat[:1].expand(max(t.numel(), 1))
  yield 'meta', t.to('meta')
  if t.is_cuda:
    yield 'on the CPU', t.cpu()
  if t.is_floating_point():
    for name, v in FLOAT_VALUES.items():
      yield f'all {name}', torch.full_like(t, v)
    return
  if t.dtype == torch.bool:
    return
  info = torch.iinfo(t.dtype)
  for name, v in ELEMENT_VALUES.items():
    if not info.min <= v <= info.max:
      continue
    yield f'all {name}', torch.full_like(t, v)
    for where, at in (('first', 0), ('last', -1)):
      if t.numel():
        changed = t.clone()
        changed.reshape(-1)[at] = v
        yield f'{where} {name}', changed
  if t.numel() > 1:
    yield 'reversed', flat.flip(0).reshape(t.shape)


def list_changes(items: list) -> Iterator[Tuple[str, list]]:
  yield 'empty list', []
  yield 'one shorter', items[:-1]
  yield 'one longer', items + items[-1:]
  for j, item in enumerate(items):
    for name, changed in value_changes(item):
      yield f'[{j}] {name}', items[:j] + [changed] + items[j + 1 :]


def value_changes(value) -> Iterator[Tuple[str, object]]:
  """What may be wrong with one argument."""
  if isinstance(value, torch.Tensor):
    yield from tensor_changes(value)
    yield 'None', None
  elif value is None:
    yield 'a tensor', torch.tensor([0, 1])
  elif isinstance(value, bool):
    yield 'flipped', not value
  elif isinstance(value, int):
    yield from INT_VALUES.items()
  elif isinstance(value, list):
    yield from list_changes(value)


def changed_calls(args: list) -> Iterator[Tuple[str, list]]:
  """``args`` with one of them changed, each way value_changes knows."""
  for i, value in enumerate(args):
    for name, changed in value_changes(value):
      yield f'arg {i}: {name}', args[:i] + [changed] + args[i + 1 :]


def bound_address_space() -> None:
  """Lets this process map at most ADDRESS_SPACE_ROOM more bytes than now."""
  with open('/proc/self/statm') as f:
    mapped = int(f.read().split()[0]) * resource.getpagesize()
  limit = mapped + ADDRESS_SPACE_ROOM
  resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


def on_device(value, device: torch.device):
  """``value`` (an argument: a tensor, or a list of them) on ``device``."""
  if isinstance(value, torch.Tensor):
    return value.to(device)
  if isinstance(value, list):
    return [on_device(v, device) for v in value]
  return value


def device_calls(device: torch.device) -> Dict[str, Call]:
  """The calls of the ops on ``device``: every op on the CPU (and the
  inducer and the module's other functions); on a GPU, the ops (those
  without a CUDA kernel raise NotImplementedError) on tensors there."""
  if device.type == 'cpu':
    return every_call()
  ops = {**sampling_calls(), **graph_calls(), **feature_calls()}
  return {op: (fn, on_device(args, device)) for op, (fn, args) in ops.items()}


def call_once(fn, args: list, device: torch.device) -> bool:
  """Whether ``fn(*args)`` returned (False: it raised what a bad input may).
  On a GPU the call's kernels are waited for: a kernel that faults raises
  here, as a CUDA error, which no bad input may cause."""
  try:
    fn(*args)
    return True
  except EXPECTED as e:
    if 'CUDA error' in str(e):
      raise
    return False
  finally:
    if device.type == 'cuda':
      torch.cuda.synchronize(device)


def main(device: torch.device) -> int:
  if not SANITIZED and device.type == 'cpu':
    bound_address_space()  # (a GPU's runtime maps more than any bound would let it)
  calls = returned = 0
  unexpected = []
  for op, (fn, args) in device_calls(device).items():
    fn(*args)  # the valid call works
    for change, changed in changed_calls(args):
      print(f'{op}, {change}', file=sys.stderr, flush=True)
      calls += 1
      try:
        returned += call_once(fn, changed, device)
      except Exception as e:  # noqa: BLE001 - reported: the test fails on it
        unexpected.append(f'{op}, {change}: {type(e).__name__}: {e}')
        if 'CUDA error' in str(e):
          break  # the device is unusable from here on
  for line in unexpected:
    print(f'UNEXPECTED {line}')
  print(f'DONE {calls} {returned}')
  return 1 if unexpected else 0


if __name__ == '__main__':
  sys.exit(main(torch.device(sys.argv[1] if len(sys.argv) > 1 else 'cpu')))
