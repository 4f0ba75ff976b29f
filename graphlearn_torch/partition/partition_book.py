"""Partition books: which partition owns each node (or edge) id."""

from abc import ABC, abstractmethod
from multiprocessing.reduction import ForkingPickler
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, Union

import torch

from .._ext import has_kernel
from ..typing import EdgeType, NodeType
from ..utils.common import default_id_filter
from ..utils.cuda_share import CudaIpcTensor
from ..utils.tensor import bounds

GpuCopies = Dict[torch.device, CudaIpcTensor]
r"""A book's lookup copies on GPUs, one a GPU: handed to the processes of
this host it is pickled for (multiprocessing's ``ForkingPickler``) as the
CUDA IPC handle of the process that made each, so the processes of a host
read one copy a GPU (a plain pickle, over RPC or to a file, leaves them
out)."""


def gpu_copy(copies: GpuCopies, device: torch.device, make: Callable[[], torch.Tensor]):
  r"""``copies``' tensor on ``device`` (a GPU), made with ``make`` where
  there is none (one received is opened on first use)."""
  if device not in copies:
    copies[device] = CudaIpcTensor(make())
  return copies[device].tensor


class PartitionBook(ABC):
  """Maps global ids to the partition that owns them: ``book[ids]``."""

  @abstractmethod
  def __getitem__(self, ids: torch.Tensor) -> torch.Tensor:
    """The partition id of each id in ``ids``."""

  @property
  @abstractmethod
  def num_parts(self) -> int:
    """The number of partitions."""

  @property
  def offset(self) -> int:
    """The first global id of this partition's range (0 for a tensor book)."""
    return 0

  def partitions(self, ids: torch.Tensor) -> torch.Tensor:
    """The partition of each id, as ``book[ids]`` but in any integer dtype
    (the one fastest to look up).

    Args:
      ids: 1-D global ids.
    """
    return self[ids]

  def lookup_on(self, device: torch.device) -> 'PartitionBook':
    """A book whose :meth:`partitions` takes ids on ``device``: this one
    where it looks ids up on any device.

    Args:
      device: where the ids will be.
    """
    return self

  def lookup_tensor(self, device: torch.device) -> Optional[torch.Tensor]:
    """The book as one tensor on ``device`` (``tensor[id]``: ``id``'s
    partition), for kernels that look ids up themselves; None where the book
    makes none (a book of another kind).

    Args:
      device: where the kernels run.
    """
    return None

  def host_lookup_copy(self) -> Optional[torch.Tensor]:
    r"""The copy of this book that its lookups on the host read, made where
    there is none; None where they read the book itself. Other processes of
    this host are handed it in shared memory (``share_host_lookups``), so
    that a host holds one copy, not one a process."""
    return None

  def use_host_lookup_copy(self, copy: torch.Tensor) -> None:
    r"""Reads ``copy``, another process's :meth:`host_lookup_copy` of this
    book, rather than a copy of its own.

    Args:
      copy: the copy, an entry an id.
    """
    raise ValueError(f'{type(self).__name__} has no host lookup copy')

  def group(
    self, ids: torch.Tensor, num_partitions: Optional[int] = None
  ) -> Tuple[List[torch.Tensor], List[torch.Tensor]]:
    r"""``ids`` grouped by owner: for every partition, the positions in
    ``ids`` of the ids it owns (in order; empty when none) and those ids.

    Args:
      ids: 1-D global ids.
      num_partitions: how many groups (default: ``num_parts``; a partition
        may own no id of this book).
    """
    order, counts, grouped = self.grouped(ids, num_partitions)
    sizes = counts.tolist()
    return list(torch.split(order, sizes)), list(torch.split(grouped, sizes))

  def grouped(
    self, ids: torch.Tensor, num_partitions: Optional[int] = None
  ) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    r"""``ids`` grouped by owner where they lie, the sizes not read on the
    host: ``(order, counts, grouped)``, the positions in ``ids`` of
    partition 0's ids (in order), then 1's, ...; each partition's count;
    ``ids[order]``. :meth:`group` splits them.

    Args:
      ids: 1-D global ids.
      num_partitions: how many groups (default: ``num_parts``).
    """
    order, counts = bucket_by_partition(self[ids], num_partitions or self.num_parts)
    return order, counts, ids.index_select(0, order)


class GLTPartitionBook(PartitionBook):
  """A partition book held as one tensor: ``tensor[id]`` is ``id``'s partition.

  Args:
    tensor: an integer tensor with one entry per id.
    num_parts: the number of partitions (default: the largest entry + 1).
  """

  def __init__(self, tensor: torch.Tensor, num_parts: int = None):
    tensor = torch.as_tensor(tensor)
    if tensor.is_floating_point() or tensor.is_complex() or tensor.dtype == torch.bool:
      raise ValueError(f'a partition book holds integer partition ids, got {tensor.dtype}')
    self.tensor = tensor
    if num_parts is None:
      num_parts = int(self.tensor.max()) + 1 if self.tensor.numel() else 1
    self._num_parts = int(num_parts)

  @property
  def tensor(self) -> torch.Tensor:
    r"""The book: ``tensor[id]`` is ``id``'s partition. Assign a new tensor
    rather than change this one in place: :meth:`group` and
    :meth:`partitions` read a narrowed copy, made on first use and again on
    assignment."""
    return self._tensor

  @tensor.setter
  def tensor(self, value: torch.Tensor) -> None:
    self._tensor = value
    self._narrow = None
    self._copies: Dict[torch.device, GLTPartitionBook] = {}  # lookup_on's
    self._gpu_copies: GpuCopies = {}  # the tensors of lookup_on's copies on GPUs

  def __getstate__(self):
    state = dict(self.__dict__)
    state['_narrow'] = None  # a plain pickle: the receiver narrows its own copy
    state['_copies'] = {}
    state['_gpu_copies'] = {}
    return state

  def for_processes(self) -> tuple:
    r"""What a process of this host it is handed to rebuilds it from
    (``from_processes``): the book, its narrow copy (made here once, read by
    every receiver in shared memory) and its GPU copies (``GpuCopies``)."""
    narrow = self._narrow_book()
    if narrow.device.type == 'cpu':
      narrow.share_memory_()
    return self._tensor, self._num_parts, narrow, dict(self._gpu_copies)

  @classmethod
  def from_processes(cls, tensor, num_parts, narrow, gpu_copies) -> 'GLTPartitionBook':
    r"""The book ``for_processes`` handed over."""
    book = cls(tensor, num_parts)
    book._narrow = narrow
    book._gpu_copies = gpu_copies
    return book

  def _narrow_book(self) -> torch.Tensor:
    r"""The book in the narrowest integer dtype that holds its partitions
    (int8 up to 127 partitions): the copy :meth:`group` and
    :meth:`partitions` look ids up in, an eighth of an int64 book, so its
    lookups stay in cache."""
    if self._narrow is None:
      book = self._tensor
      if book.numel() and not book.dtype.is_floating_point:
        lo, hi = bounds(book)
        # entries outside the dtype's range keep the book's own: the op names them
        for dtype in (torch.int8, torch.int16, torch.int32):
          if lo >= 0 and max(hi, self._num_parts) <= torch.iinfo(dtype).max:
            book = book.to(dtype)
            break
      self._narrow = book
    return self._narrow

  def host_lookup_copy(self) -> Optional[torch.Tensor]:
    if self._tensor.device.type != 'cpu':
      return None
    narrow = self._narrow_book()
    return None if narrow is self._tensor else narrow  # a book too wide to narrow

  def use_host_lookup_copy(self, copy: torch.Tensor) -> None:
    check_lookup_copy(self, copy)
    self._narrow = copy

  def __getitem__(self, ids) -> torch.Tensor:
    if isinstance(ids, torch.Tensor) and ids.dim() == 1 and ids.dtype == torch.int64:
      return self.tensor.index_select(0, ids)  # several times faster than indexing
    return self.tensor[ids]

  def partitions(self, ids: torch.Tensor) -> torch.Tensor:
    if self.tensor.device.type == 'cpu' and ids.dim() == 1 and ids.dtype == torch.int64:
      return self._narrow_book().index_select(0, ids)
    return self[ids]

  def grouped(
    self, ids: torch.Tensor, num_partitions: Optional[int] = None
  ) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    num_partitions = num_partitions or self.num_parts
    one_device = self.tensor.device == ids.device and has_kernel('group_by_partition', ids.device)
    if not (one_device and ids.dim() == 1 and ids.dtype == torch.int64):
      return super().grouped(ids, num_partitions)
    # one kernel: the lookups, the counting sort (a stable sort on a GPU), the
    # ids in group order
    return tuple(torch.ops.glt.group_by_partition(self._narrow_book(), ids, num_partitions))

  def __len__(self) -> int:
    return self.tensor.numel()

  @property
  def num_parts(self) -> int:
    return self._num_parts

  @property
  def device(self) -> torch.device:
    return self.tensor.device

  def to(self, device) -> 'GLTPartitionBook':
    return GLTPartitionBook(self.tensor.to(device), self._num_parts)

  def lookup_on(self, device: torch.device) -> 'GLTPartitionBook':
    """This book where it lies on ``device``, else its narrowest copy
    (:meth:`partitions`' dtype) moved there, made once."""
    device = torch.device(device)
    if self.tensor.device == device:
      return self
    if device not in self._copies:
      if device.type == 'cuda':  # one a GPU on this host (GpuCopies)
        copy = gpu_copy(self._gpu_copies, device, lambda: self._narrow_book().to(device))
      else:
        copy = self._narrow_book().to(device)
      self._copies[device] = GLTPartitionBook(copy, self._num_parts)
    return self._copies[device]

  def lookup_tensor(self, device: torch.device) -> torch.Tensor:
    return self.lookup_on(device).tensor

  def share_memory_(self) -> 'GLTPartitionBook':
    self.tensor.share_memory_()
    return self

  def __repr__(self) -> str:
    return f'GLTPartitionBook(num_ids={len(self)}, num_parts={self.num_parts})'


TensorPartitionBook = GLTPartitionBook


class OffsetId2Index:
  """Maps a global id to its row in a partition that owns a contiguous id
  range: ``row = id - offset``.

  Args:
    offset: the first id of the range.
  """

  def __init__(self, offset: int):
    self.offset = int(offset)

  def __getitem__(self, ids: torch.Tensor) -> torch.Tensor:
    return ids - self.offset

  def to(self, device) -> 'OffsetId2Index':
    return self

  def __repr__(self) -> str:
    return f'OffsetId2Index(offset={self.offset})'


class RangePartitionBook(PartitionBook):
  """A partition book where partition ``i`` owns the ids
  ``[partition_ranges[i][0], partition_ranges[i][1])``; a lookup is a binary
  search over the range ends, with no memory per id.

  Args:
    partition_ranges: ``(start, end)`` per partition, contiguous from 0.
    partition_idx: the partition of the process holding this book.
  """

  def __init__(self, partition_ranges: Sequence[Tuple[int, int]], partition_idx: int = 0):
    ranges = [(int(s), int(e)) for s, e in partition_ranges]
    expected_start = 0
    for i, (start, end) in enumerate(ranges):
      if start != expected_start or end < start:
        raise ValueError(f'partition ranges must be contiguous from 0: range {i} is {start, end}')
      expected_start = end
    if not 0 <= partition_idx < max(len(ranges), 1):
      raise ValueError(f'partition_idx {partition_idx} out of range for {len(ranges)} partitions')
    self.partition_ranges = ranges
    self.partition_idx = int(partition_idx)
    self._ends = torch.tensor([e for _, e in ranges], dtype=torch.int64)
    self._tensors: Dict[torch.device, torch.Tensor] = {}  # lookup_tensor's off GPUs
    self._gpu_copies: GpuCopies = {}  # lookup_tensor's on GPUs
    self._ends_on: Dict[torch.device, torch.Tensor] = {}  # __getitem__'s range ends by device

  def __getstate__(self):
    state = dict(self.__dict__)
    state['_tensors'] = {}  # each process makes its own
    state['_gpu_copies'] = {}  # a plain pickle leaves them out
    state['_ends_on'] = {}
    return state

  def for_processes(self) -> tuple:
    r"""What a process of this host it is handed to rebuilds it from
    (``from_processes``): the ranges and its GPU copies (``GpuCopies``)."""
    return self.partition_ranges, self.partition_idx, dict(self._gpu_copies)

  @classmethod
  def from_processes(cls, ranges, partition_idx, gpu_copies) -> 'RangePartitionBook':
    r"""The book ``for_processes`` handed over."""
    book = cls(ranges, partition_idx)
    book._gpu_copies = gpu_copies
    return book

  def lookup_tensor(self, device: torch.device) -> torch.Tensor:
    """The book as one tensor on ``device``, an entry an id (int8 up to 127
    partitions): ``len(self)`` bytes there, made once a device."""
    device = torch.device(device)
    if device.type == 'cuda':  # one a GPU on this host (GpuCopies)
      return gpu_copy(self._gpu_copies, device, lambda: self._entries().to(device))
    if device not in self._tensors:
      self._tensors[device] = self._entries().to(device)
    return self._tensors[device]

  def host_lookup_copy(self) -> torch.Tensor:
    return self.lookup_tensor(torch.device('cpu'))

  def use_host_lookup_copy(self, copy: torch.Tensor) -> None:
    check_lookup_copy(self, copy)
    self._tensors[torch.device('cpu')] = copy

  def _entries(self) -> torch.Tensor:
    r"""The book as one tensor on the host, an entry an id."""
    sizes = torch.tensor([end - start for start, end in self.partition_ranges])
    dtype = next(
      t for t in (torch.int8, torch.int16, torch.int32) if self.num_parts <= torch.iinfo(t).max
    )
    return torch.repeat_interleave(torch.arange(self.num_parts, dtype=dtype), sizes)

  def __getitem__(self, ids) -> torch.Tensor:
    ids = torch.as_tensor(ids, dtype=torch.int64)
    num_ids = len(self)
    lo, hi = bounds(ids) if ids.numel() else (0, -1)  # (one GPU sync)
    if lo < 0 or hi >= num_ids:
      raise IndexError(f'ids outside [0, {num_ids}) in a range partition book')
    if ids.device not in self._ends_on:
      self._ends_on[ids.device] = self._ends.to(ids.device)
    return torch.searchsorted(self._ends_on[ids.device], ids, right=True)

  def __len__(self) -> int:
    return int(self._ends[-1]) if len(self._ends) else 0

  @property
  def num_parts(self) -> int:
    return len(self.partition_ranges)

  @property
  def offset(self) -> int:
    return self.partition_ranges[self.partition_idx][0]

  @property
  def device(self) -> torch.device:
    return self._ends.device

  @property
  def id2index(self) -> OffsetId2Index:
    """Maps this partition's global ids to its local rows."""
    return OffsetId2Index(self.offset)

  def id_filter(self, node_pb: PartitionBook, partition_idx: int) -> torch.Tensor:
    """The global ids owned by ``partition_idx``."""
    start, end = self.partition_ranges[partition_idx]
    return torch.arange(start, end, dtype=torch.int64)

  def to(self, device) -> 'RangePartitionBook':
    return self

  def share_memory_(self) -> 'RangePartitionBook':
    return self

  def __repr__(self) -> str:
    return f'RangePartitionBook(ranges={self.partition_ranges}, idx={self.partition_idx})'


HeteroNodePartitionDict = Dict[NodeType, PartitionBook]
HeteroEdgePartitionDict = Dict[EdgeType, PartitionBook]
PartitionBookLike = Union[PartitionBook, torch.Tensor]


def as_partition_book(book: PartitionBookLike, num_parts: int = None) -> PartitionBook:
  """Wraps a plain tensor of partition ids as a book; passes books through."""
  if isinstance(book, PartitionBook):
    return book
  return GLTPartitionBook(book, num_parts)


def owned_ids(book: PartitionBookLike, partition_idx: int) -> torch.Tensor:
  """The global ids that ``book`` assigns to ``partition_idx``, ascending."""
  return default_id_filter(book, partition_idx)


def check_lookup_copy(book: PartitionBook, copy: torch.Tensor) -> None:
  r"""Raises a ValueError unless ``copy`` can be ``book``'s host lookup copy:
  an integer tensor on the host with an entry an id of the book."""
  if not isinstance(copy, torch.Tensor) or copy.device.type != 'cpu' or copy.dim() != 1:
    raise ValueError(f'a host lookup copy is a 1-D tensor on the host, got {copy!r:.80}')
  if copy.dtype.is_floating_point or copy.dtype == torch.bool or copy.numel() != len(book):
    raise ValueError(
      f'a host lookup copy of {book!r} holds {len(book)} integer entries, got '
      f'{copy.numel()} of {copy.dtype}'
    )


BooksLike = Union[PartitionBook, Dict[Any, PartitionBook], None]


def share_host_lookups(books: BooksLike) -> Any:
  r"""The host lookup copies of ``books`` (``PartitionBook.host_lookup_copy``:
  made where there are none), moved to shared memory: what
  ``use_host_lookups`` gives the same books in another process of this host.

  Args:
    books: a book, a dict of books by type, or None.

  Returns:
    the copies in ``books``' structure, None for a book that has none.
  """
  if isinstance(books, dict):
    return {key: share_host_lookups(book) for key, book in books.items()}
  copy = books.host_lookup_copy() if isinstance(books, PartitionBook) else None
  return None if copy is None else copy.share_memory_()


def use_host_lookups(books: BooksLike, copies: Any) -> None:
  r"""Has ``books`` read ``copies`` (``share_host_lookups``' of the same books
  in another process of this host) rather than copies of their own.

  Args:
    books: a book, a dict of books by type, or None.
    copies: ``share_host_lookups(books)``.
  """
  if isinstance(copies, dict):
    for key, copy in copies.items():
      if copy is not None:
        use_host_lookups(books[key], copy)
  elif copies is not None:
    books.use_host_lookup_copy(copies)


def bucket_by_partition(
  partitions: torch.Tensor, num_partitions: int
) -> Tuple[torch.Tensor, torch.Tensor]:
  r"""``(order, counts)``: the positions in ``partitions`` naming partition
  0 (in order), then 1, ...; how many name each (not read on the host)."""
  if has_kernel('bucket_by_partition', partitions.device):
    # one kernel: a counting sort on the CPU, a stable sort on a GPU
    return tuple(torch.ops.glt.bucket_by_partition(partitions, num_partitions))
  order = torch.argsort(partitions, stable=True)  # a build without the CUDA kernels
  return order, torch.bincount(partitions, minlength=num_partitions)


def positions_by_partition(partitions: torch.Tensor, num_partitions: int) -> List[torch.Tensor]:
  r"""For every partition, the positions in ``partitions`` that name it (in
  order; empty when none)."""
  order, counts = bucket_by_partition(partitions, num_partitions)
  return list(torch.split(order, counts.tolist()))


def rebuild_tensor_book(*shared) -> GLTPartitionBook:
  r"""A tensor book handed to this process (``GLTPartitionBook.for_processes``)."""
  return GLTPartitionBook.from_processes(*shared)


def rebuild_range_book(*shared) -> RangePartitionBook:
  r"""A range book handed to this process (``RangePartitionBook.for_processes``)."""
  return RangePartitionBook.from_processes(*shared)


ForkingPickler.register(GLTPartitionBook, lambda b: (rebuild_tensor_book, b.for_processes()))
ForkingPickler.register(RangePartitionBook, lambda b: (rebuild_range_book, b.for_processes()))
