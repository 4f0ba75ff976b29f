"""GPU data shared between processes: tables and topologies placed on a GPU
once and read by every process they reach by CUDA IPC (a trainer's sampling
processes, the peers of a host), and host memory registered with CUDA where
it lies rather than copied into pinned memory. The tests marked ``gpu``
need a GPU and are skipped without one."""

import pickle

import pytest
import torch
from test_dist_sampling import SPAWN, run_spawned
from test_gpu_data_path import gpu, homo_dataset
from test_neighbor_sampler import HOMO_E

from graphlearn_torch.data import Feature
from graphlearn_torch.data.unified_tensor import REGISTER_IN_PLACE_BYTES, host_view
from graphlearn_torch.partition import GLTPartitionBook
from graphlearn_torch.utils.cuda_share import CudaIpcTensor


def measured_in_child(read, args, results):
  r"""What ``read(*args)`` allocates on GPU 0 in this (spawned) process, and
  what it gives (a tensor, as a list)."""
  try:
    torch.cuda.set_device(0)
    before = torch.cuda.memory_allocated(0)
    out = read(*args)
    results.put((torch.cuda.memory_allocated(0) - before, out.cpu().tolist()))
  except Exception as e:  # the parent fails the test with it
    results.put((None, f'{type(e).__name__}: {e}'))


def measured(read, args):
  r"""``(allocated, output)`` of ``read(*args)`` run in a spawned process
  (``measured_in_child``)."""
  results = SPAWN.Queue()
  process = SPAWN.Process(target=measured_in_child, args=(read, args, results))
  [report] = run_spawned([process], results)
  return report


def rows_of_placed(ds, ids):
  r"""The rows of ``ids`` of a process handed ``ds``, which it samples on
  GPU 0 (its topology placed there)."""
  ds.set_device(0)
  ds.graph.device_topology()
  return ds.node_features[ids]


@gpu
@pytest.mark.slow  # a spawned process
def test_gpu_parts_placed_once_are_read_by_cuda_ipc():
  ds, _, x = homo_dataset(
    'CUDA', num_nodes=2000, num_edges=200_000, split_ratio=0.5, device=0, with_gpu=True
  )
  ds.place_on_gpu(0)  # as a loader does before it starts its sampling processes
  ids = torch.randperm(x.size(0))
  allocated, rows = measured(rows_of_placed, (ds, ids))
  assert allocated is not None, rows
  assert torch.equal(torch.tensor(rows), x[ids])
  # the gather's output is the child's own; the topology, the hot rows and
  # the id map are not copied
  topology = sum(t.numel() * t.element_size() for t in ds.graph.device_topology() if t is not None)
  assert allocated < topology, "the GPU copy of the topology is the parent's"


def book_entries_on_gpu(book, ids):
  r"""Each of ``ids``' partition, from ``book``'s lookup copy on GPU 0."""
  return book.lookup_tensor(torch.device('cuda', 0))[ids.cuda()]


@gpu
@pytest.mark.slow  # a spawned process
def test_a_books_gpu_copy_made_once_is_read_by_cuda_ipc():
  owners = torch.randint(0, 3, (4_000_000,))
  book = GLTPartitionBook(owners, 3)
  book.lookup_tensor(torch.device('cuda', 0))  # as DistDataset.place_on_gpu does
  ids = torch.randint(0, owners.numel(), (1000,))
  allocated, parts = measured(book_entries_on_gpu, (book, ids))
  assert allocated is not None, parts
  assert parts == owners[ids].tolist()
  assert allocated < owners.numel(), "the child reads the parent's copy (an int8 entry an id)"


def test_a_received_cuda_ipc_tensor_is_handed_on_as_its_origin():
  """The hand-on logic, without a GPU: a CudaIpcTensor opened from an
  origin pickles as that same origin again, through any number of
  processes, rather than as a handle of its own (which CUDA IPC cannot
  make for memory a process did not allocate)."""
  origin = (torch.arange, (5,))  # stands in for torch's (rebuild_cuda_tensor, args)
  received = pickle.loads(pickle.dumps(CudaIpcTensor(torch.empty(0), origin)))
  assert not received.opened and 'not opened' in repr(received), 'opened on first use only'
  assert torch.equal(received.tensor, torch.arange(5)) and received.origin == origin
  again = pickle.loads(pickle.dumps(received))
  assert again.origin == origin and torch.equal(again.tensor, torch.arange(5))
  assert 'received' in repr(again)


def handed_on_by_child(ds, ids, results):
  r"""A trainer handed a placed ``ds``: it places ``ds`` as a loader does
  before it starts its sampling processes, then hands it to a process of
  its own (``rows_of_placed``); reports what it allocated on GPU 0 and the
  grandchild's report."""
  try:
    torch.cuda.set_device(0)
    ds.set_device(0)
    before = torch.cuda.memory_allocated(0)
    ds.place_on_gpu(0)
    placed = torch.cuda.memory_allocated(0) - before
    inner = SPAWN.Queue()
    grandchild = SPAWN.Process(target=measured_in_child, args=(rows_of_placed, (ds, ids), inner))
    [(allocated, rows)] = run_spawned([grandchild], inner)
    results.put((placed, allocated, rows))
  except Exception as e:  # the parent fails the test with it
    results.put((None, None, f'{type(e).__name__}: {e}'))


@gpu
@pytest.mark.slow  # spawned processes
def test_a_placed_copy_is_read_by_every_process_it_reaches():
  """A launcher places a partition on its GPU for the trainers it starts
  there; a trainer hands it on to its sampling processes: neither copies
  the topology or the hot rows (CudaIpcTensor travels as the launcher's
  CUDA IPC handle), and both read the launcher's rows."""
  ds, _, x = homo_dataset(
    'CUDA', num_nodes=2000, num_edges=200_000, split_ratio=0.5, device=0, with_gpu=True
  )
  ds.place_on_gpu(0)
  ids = torch.randperm(x.size(0))
  results = SPAWN.Queue()
  [(placed, allocated, rows)] = run_spawned(
    [SPAWN.Process(target=handed_on_by_child, args=(ds, ids, results))], results
  )
  assert placed is not None and allocated is not None, rows
  assert torch.equal(torch.tensor(rows), x[ids])
  topology = sum(t.numel() * t.element_size() for t in ds.graph.device_topology() if t is not None)
  assert placed < topology and allocated < topology, "the GPU copy is the launcher's"


def rows_of_a_hosts_share(handle, ids):
  r"""The rows of ``ids`` of a Feature mapped by ``handle``
  (``Feature.share_on_host``), gathered on GPU 0."""
  return Feature.from_ipc_handle(handle)[ids.cuda()]


@gpu
@pytest.mark.slow  # a spawned process
def test_a_peer_of_the_host_reads_a_placed_tables_gpu_parts_and_id_map():
  """A partition's feature table handed to another process of its host
  (HostPeers) for the GPU it is placed on: that process gathers from the
  holder's hot rows and id map by CUDA IPC, placing no copy of either."""
  num_rows = 200_000
  x = torch.randn(num_rows, 5, generator=torch.Generator().manual_seed(2))
  id2index = torch.randperm(num_rows)
  feature = Feature(x, id2index, split_ratio=0.5, device=0, with_gpu=True)
  handle = feature.share_on_host(0)
  assert handle.gpu_parts and handle.gpu_id2index is not None, 'placed for the GPU asked for'
  ids = torch.randint(0, num_rows, (1000,))
  allocated, rows = measured(rows_of_a_hosts_share, (handle, ids))
  assert allocated is not None, rows
  assert torch.equal(torch.tensor(rows), x[id2index[ids]])
  assert allocated < id2index.numel() * 8, "the id map and hot rows are the holder's"


def indices_of_a_hosts_graphs(handles):
  r"""The indices of the one graph of ``handles`` (HostPeers'
  ``share_graphs``), mapped for sampling on GPU 0."""
  from graphlearn_torch.distributed.sampling.host_peers import map_topologies

  [topo] = map_topologies(handles, 0).values()
  return topo.indices


@gpu
@pytest.mark.slow  # a spawned process
def test_a_peer_of_the_host_samples_a_cuda_graphs_gpu_copy():
  """A partition's 'CUDA' graph handed to another process of its host
  (HostPeers) that samples on its GPU: that process reads the holder's
  copy in GPU memory by CUDA IPC (not the host topology through UVA, and
  no copy of its own)."""
  from graphlearn_torch.distributed.sampling.host_peers import share_graphs

  ds, _, _ = homo_dataset('CUDA', num_nodes=2000, num_edges=200_000)
  handles = share_graphs({HOMO_E: ds.graph}, 0)
  placed = ds.graph.device_topology()
  allocated, indices = measured(indices_of_a_hosts_graphs, (handles,))
  assert allocated is not None, indices
  assert torch.equal(torch.tensor(indices), ds.graph.topo.indices.to(torch.int64))
  assert allocated < placed.indices.numel() * placed.indices.element_size(), "the holder's copy"


@gpu
def test_shared_host_memory_is_read_where_it_lies():
  shared = torch.arange(1000, dtype=torch.float32).share_memory_()
  private = torch.arange(1000, dtype=torch.float32)
  view = host_view(shared, 0)
  assert view.device == torch.device('cuda', 0)
  assert view.data_ptr() == shared.data_ptr()  # registered in place: UVA maps it 1:1
  assert torch.equal(view.cpu(), shared)
  shared[7] = -1.0  # one memory: the GPU sees the host's writes
  assert view[7].item() == -1.0
  copied = host_view(private, 0)
  assert copied.data_ptr() != private.data_ptr() and torch.equal(copied.cpu(), private)
  assert torch.equal(host_view(shared, 0).cpu(), shared)  # registered twice: viewed
  del view
  torch.cuda.synchronize()


@gpu
def test_a_large_private_table_is_read_where_it_lies():
  rows = REGISTER_IN_PLACE_BYTES // 4 // 16 + 1
  table = torch.arange(rows * 16, dtype=torch.float32).view(rows, 16)
  cold = table[rows // 2 :]  # a view into the table's storage, as a feature split's
  view = host_view(cold, 0)
  assert view.data_ptr() == cold.data_ptr(), 'registered in place, not copied'
  whole = host_view(table, 0)  # another view of the same storage: one registration
  assert whole.data_ptr() == table.data_ptr()
  del view
  torch.cuda.synchronize()
  table[-1, -1] = -1.0  # the registration outlives the first view
  ids = torch.tensor([0, rows // 2, rows - 1], device='cuda:0')
  assert torch.equal(whole[ids].cpu(), table[ids.cpu()])
  del whole
  torch.cuda.synchronize()
  again = host_view(table, 0)  # registered anew once every view has gone
  assert again.data_ptr() == table.data_ptr() and again[-1, -1].item() == -1.0
