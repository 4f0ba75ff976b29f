"""Partition books: ids grouped by the partition that owns them, through
the book's narrowed copy, with wide entries named rather than wrapped."""

import pickle

import pytest
import torch

from graphlearn_torch.partition import GLTPartitionBook, RangePartitionBook
from graphlearn_torch.partition.partition_book import share_host_lookups, use_host_lookups


@pytest.mark.parametrize('kind', ['tensor', 'range'])
def test_a_book_groups_ids_by_owner(kind):
  g = torch.Generator().manual_seed(0)
  if kind == 'tensor':
    owners = torch.randint(0, 3, (1000,), generator=g)
    book = GLTPartitionBook(owners)
  else:
    book = RangePartitionBook([(0, 300), (300, 700), (700, 1000)])
    owners = torch.cat([torch.full((n,), p) for p, n in enumerate((300, 400, 300))])
  ids = torch.randint(0, 1000, (5000,), generator=g)
  # one more group than the book knows of: a partition may own none of its ids
  positions, grouped = book.group(ids, 4)
  assert len(positions) == len(grouped) == 4
  for p in range(4):
    expected = torch.nonzero(owners[ids] == p).view(-1)
    assert torch.equal(positions[p], expected)
    assert torch.equal(grouped[p], ids[expected])
  assert torch.equal(book.partitions(ids).long(), owners[ids])
  # the same groups end to end, their sizes apart (nothing read on the host)
  order, counts, in_order = book.grouped(ids, 4)
  assert counts.tolist() == [pos.numel() for pos in positions]
  assert torch.equal(order, torch.cat(positions)) and torch.equal(in_order, torch.cat(grouped))


@pytest.mark.parametrize('num_parts', [2, 300, 40000])
def test_a_book_groups_through_its_narrowed_copy_and_follows_a_new_tensor(num_parts):
  # group and partitions look ids up in a copy of the book in the narrowest
  # dtype (int8 up to 127 partitions); they must answer as the book does, wide ones included,
  # and follow a tensor assigned to the book
  g = torch.Generator().manual_seed(1)
  owners = torch.randint(0, num_parts, (2000,), generator=g)
  book = GLTPartitionBook(owners, num_parts)
  ids = torch.randint(0, 2000, (3000,), generator=g)

  def check():
    positions, grouped = book.group(ids)
    for p in owners[ids].unique().tolist():
      expected = torch.nonzero(owners[ids] == p).view(-1)
      assert torch.equal(positions[p], expected)
      assert torch.equal(grouped[p], ids[expected])
    assert sum(pos.numel() for pos in positions) == ids.numel()
    assert torch.equal(book.partitions(ids).long(), owners[ids])

  check()
  owners = owners.clone()
  owners[ids[0]] = (int(owners[ids[0]]) + 1) % num_parts
  book.tensor = owners
  check()
  copy = pickle.loads(pickle.dumps(book))
  positions, _ = copy.group(ids)
  assert torch.equal(positions[int(owners[ids[0]])][:1], torch.tensor([0]))


def test_a_book_entry_beyond_the_narrow_dtype_is_named_not_wrapped():
  # 2 partitions, but one entry is 257: an int8 copy would read it as 1
  owners = torch.zeros(100, dtype=torch.int64)
  owners[7] = 257
  book = GLTPartitionBook(owners, 2)
  with pytest.raises(ValueError, match='the book gives id 7 partition 257, outside'):
    book.group(torch.tensor([3, 7]))
  assert book.partitions(torch.tensor([3, 7])).tolist() == [0, 257]


def test_a_book_looks_ids_up_on_another_device_through_its_narrowed_copy():
  book = GLTPartitionBook(torch.tensor([0, 1, 1, 0, 2], dtype=torch.int64))
  assert book.lookup_on(torch.device('cpu')) is book
  moved = book.lookup_on(torch.device('meta'))  # a device without the book
  assert moved.tensor.device.type == 'meta' and moved.tensor.dtype == torch.int8
  assert moved.num_parts == 3 and book.tensor.device.type == 'cpu'
  ranges = RangePartitionBook([(0, 3), (3, 5)], 0)
  assert ranges.lookup_on(torch.device('meta')) is ranges  # it looks up on any device


def test_a_book_of_fractional_or_boolean_entries_is_refused():
  for book in (torch.tensor([0.0, 1.0]), torch.tensor([True, False])):
    with pytest.raises(ValueError, match='integer partition ids'):
      GLTPartitionBook(book)


def test_a_range_book_as_one_tensor_gives_each_ids_partition():
  book = RangePartitionBook([(0, 4), (4, 4), (4, 11)], partition_idx=2)
  table = book.lookup_tensor(torch.device('cpu'))
  assert table.dtype == torch.int8 and table is book.lookup_tensor('cpu')  # made once
  assert torch.equal(table.long(), book[torch.arange(11)])
  again = pickle.loads(pickle.dumps(book))  # each process makes its own
  assert torch.equal(again.lookup_tensor('cpu'), table) and again.lookup_tensor('cpu') is not table


def read_narrow_after(book, ready, written, out):
  r"""Reports the narrow copy's first entry of a ``book`` handed to this
  (spawned) process, once the parent wrote it."""
  ready.set()
  written.wait(60)
  out.put(int(book.for_processes()[2][0]))


@pytest.mark.slow  # a spawned process
def test_a_book_handed_to_a_process_shares_its_narrow_copy():
  r"""A book handed to a process of this host (multiprocessing's pickling)
  brings its narrow copy in shared memory: every process reads one copy of
  it, rather than each narrowing its own (an entry an id): a write to it
  here is seen there."""
  import multiprocessing

  spawn = multiprocessing.get_context('spawn')
  book = GLTPartitionBook(torch.tensor([0, 1, 1, 0, 2] * 100, dtype=torch.int64))
  ready, written, out = spawn.Event(), spawn.Event(), spawn.Queue()
  child = spawn.Process(target=read_narrow_after, args=(book, ready, written, out))
  child.start()
  try:
    assert ready.wait(120), 'the child did not start'
    narrow = book.for_processes()[2]
    assert narrow.dtype == torch.int8 and narrow.is_shared()
    narrow[0] = 2
    written.set()
    assert out.get(timeout=60) == 2
  finally:
    child.join(60)
    if child.is_alive():
      child.kill()


def test_a_book_rebuilt_for_a_process_keeps_its_copies_and_a_plain_pickle_does_not():
  book = GLTPartitionBook(torch.tensor([0, 1, 1, 0, 2], dtype=torch.int64))
  tensor, num_parts, narrow, gpu_copies = book.for_processes()
  rebuilt = GLTPartitionBook.from_processes(tensor, num_parts, narrow, gpu_copies)
  assert rebuilt.for_processes()[2] is narrow and rebuilt.num_parts == 3
  assert torch.equal(
    rebuilt.partitions(torch.tensor([4, 1])), torch.tensor([2, 1], dtype=torch.int8)
  )
  assert pickle.loads(pickle.dumps(book)).for_processes()[3] == {}
  ranges = RangePartitionBook([(0, 4), (4, 9)], 1)
  again = RangePartitionBook.from_processes(*ranges.for_processes())
  assert again.partition_ranges == ranges.partition_ranges and again.partition_idx == 1


def test_books_read_the_host_lookup_copies_they_are_given():
  # Another process of the host hands its copies over in shared memory
  # (DistDataset's pickling): a book reads the one given, not one of its own.
  owners = torch.tensor([0, 1, 1, 0, 2] * 20)
  books = {'tensor': GLTPartitionBook(owners), 'range': RangePartitionBook([(0, 40), (40, 100)])}
  given = share_host_lookups({**books, 'none': None})
  assert given['none'] is None
  assert given['tensor'].dtype == given['range'].dtype == torch.int8
  assert all(copy.is_shared() for copy in (given['tensor'], given['range']))
  again = {
    'tensor': GLTPartitionBook(owners.clone()),
    'range': RangePartitionBook([(0, 40), (40, 100)]),
  }
  use_host_lookups(again, given)
  ids = torch.tensor([99, 0, 41, 2, 39])
  for kind, book in again.items():
    assert book.host_lookup_copy() is given[kind]
    assert torch.equal(book.partitions(ids).long(), books[kind][ids])
  assert torch.equal(again['range'].lookup_tensor('cpu'), given['range'])


def test_a_host_lookup_copy_of_another_book_is_refused():
  book = GLTPartitionBook(torch.tensor([0, 1, 1, 0, 2] * 20))
  with pytest.raises(ValueError, match='holds 100 integer entries, got 99 of torch.int8'):
    book.use_host_lookup_copy(torch.zeros(99, dtype=torch.int8))
  with pytest.raises(ValueError, match='got 100 of torch.float32'):
    book.use_host_lookup_copy(torch.zeros(100))
  with pytest.raises(ValueError, match='a 1-D tensor on the host'):
    book.use_host_lookup_copy(torch.zeros(10, 10, dtype=torch.int8))
  assert torch.equal(book.partitions(torch.tensor([4])), torch.tensor([2], dtype=torch.int8))


def test_a_book_its_lookups_read_itself_has_no_host_lookup_copy():
  # a negative entry cannot narrow: the lookups read the book (which names it)
  assert GLTPartitionBook(torch.tensor([0, -1, 1]), 2).host_lookup_copy() is None
  assert share_host_lookups(GLTPartitionBook(torch.tensor([0, -1, 1]), 2)) is None
