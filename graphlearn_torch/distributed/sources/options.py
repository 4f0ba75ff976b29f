"""Where and how a distributed loader samples: worker options."""

from typing import ClassVar, List, Literal, Optional, Union

import torch

from ...utils.units import parse_size
from ..runtime.rpc import DEFAULT_RPC_TIMEOUT_S
from ..runtime.rpc_args import checked_port, checked_threads, checked_timeout

# One device for every sampling worker, or a list taken in turn.
WorkerDevices = Union[torch.device, str, List[Union[torch.device, str]]]


def _device_list(devices: Optional[WorkerDevices], num_workers: int) -> Optional[List]:
  r"""``devices`` as a list: a single device is every worker's (GLT's rule)."""
  if devices is None:
    return None
  if isinstance(devices, (list, tuple)):
    return list(devices)
  return [devices] * num_workers


class _BasicDistSamplingWorkerOptions:
  r"""What every kind of sampling worker needs.

  Args:
    num_workers: sampling processes (or 1 for collocated sampling).
    worker_devices: the device of each sampling worker, or one device for
      all of them (as GLT broadcasts it).
    worker_concurrency: batches each worker keeps in flight.
    master_addr: the rendezvous address of the samplers' RPC world.
    master_port: its port.
    num_rpc_threads: threads serving peers' requests in each sampler.
    rpc_timeout: seconds an RPC may take.
    use_all2all: unsupported (features are fetched by RPC); must be False.
  """

  free_port: ClassVar[bool] = False  # whether master_port 0 means a free port

  def __init__(
    self,
    num_workers: int = 1,
    worker_devices: Optional[WorkerDevices] = None,
    worker_concurrency: int = 4,
    master_addr: Optional[str] = None,
    master_port: Optional[Union[str, int]] = None,
    num_rpc_threads: Optional[int] = None,
    rpc_timeout: float = DEFAULT_RPC_TIMEOUT_S,
    use_all2all: bool = False,
  ):
    if use_all2all:
      raise ValueError('use_all2all is not supported: features are fetched by RPC')
    if not isinstance(num_workers, int) or num_workers < 1:
      raise ValueError(f'num_workers must be a positive integer, got {num_workers!r}')
    if not isinstance(worker_concurrency, int) or not 1 <= worker_concurrency <= 32:
      raise ValueError(f'worker_concurrency must be in [1, 32], got {worker_concurrency!r}')
    self.num_workers = num_workers
    self.worker_devices = _device_list(worker_devices, num_workers)
    self.worker_concurrency = worker_concurrency
    self.master_addr = master_addr
    self.master_port = (
      None if master_port is None else checked_port(master_port, free=self.free_port)
    )
    self.num_rpc_threads = checked_threads(num_rpc_threads)
    self.rpc_timeout = checked_timeout(rpc_timeout)
    self.use_all2all = False


class CollocatedDistSamplingWorkerOptions(_BasicDistSamplingWorkerOptions):
  r"""Sample inside the training process, using the training process's own
  RPC world (``init_rpc`` it first, or give ``master_addr`` and
  ``master_port`` and the loader does).

  Args:
    master_addr: the rendezvous address, if the loader must init RPC.
    master_port: its port.
    num_rpc_threads: threads serving peers' requests.
    rpc_timeout: seconds an RPC may take, and the longest the loader waits
      for a batch.
    use_all2all: unsupported; must be False.
    prefetch_size: batches sampled ahead, in the background, while the
      trainer works on the current one; 0 (GLT's behaviour) samples each
      batch when it is asked for, on the calling thread.
  """

  def __init__(
    self,
    master_addr: Optional[str] = None,
    master_port: Optional[Union[str, int]] = None,
    num_rpc_threads: Optional[int] = None,
    rpc_timeout: float = DEFAULT_RPC_TIMEOUT_S,
    use_all2all: bool = False,
    prefetch_size: int = 0,
  ):
    super().__init__(
      1, None, 1, master_addr, master_port, num_rpc_threads, rpc_timeout, use_all2all
    )
    if not isinstance(prefetch_size, int) or not 0 <= prefetch_size <= 32:
      raise ValueError(f'prefetch_size must be in [0, 32], got {prefetch_size!r}')
    self.prefetch_size = prefetch_size


class MpDistSamplingWorkerOptions(_BasicDistSamplingWorkerOptions):
  r"""Sample in ``num_workers`` processes that the loader spawns. They form an
  RPC world of their own with the sampling processes of every trainer
  (rendezvous at ``master_addr:master_port``, which must differ from the
  trainers' own), and feed the trainer through a shared-memory channel.

  Args:
    num_workers: sampling processes per trainer.
    worker_devices: the GPU each sampling process samples on (taken in
      turn; its partition's graph and features are placed there); the CPU
      without a GPU and the CUDA kernels.
    worker_concurrency: batches each sampling process keeps in flight.
    master_addr: the samplers' rendezvous address.
    master_port: its port.
    num_rpc_threads: threads serving peers' requests in each sampler.
    rpc_timeout: seconds an RPC may take, and the longest the trainer waits
      for a batch.
    channel_size: bytes of the trainer's channel (default 256 MB per
      worker; about 3 batches suffice). Where the workers sample on a GPU
      and the trainer's batches go to a GPU, the trainer holds as many
      bytes on its GPU too, the channel's mirror that batches come through.
    pin_memory: page-lock the channel for fast copies to the GPU (not
      where batches come through the GPU mirror above).
    use_all2all: unsupported; must be False.
  """

  def __init__(
    self,
    num_workers: int = 1,
    worker_devices: Optional[WorkerDevices] = None,
    worker_concurrency: int = 4,
    master_addr: Optional[str] = None,
    master_port: Optional[Union[str, int]] = None,
    num_rpc_threads: Optional[int] = None,
    rpc_timeout: float = DEFAULT_RPC_TIMEOUT_S,
    channel_size: Optional[Union[int, str]] = None,
    pin_memory: bool = False,
    use_all2all: bool = False,
  ):
    super().__init__(
      num_workers,
      worker_devices,
      worker_concurrency,
      master_addr,
      master_port,
      num_rpc_threads,
      rpc_timeout,
      use_all2all,
    )
    if master_addr is None or master_port is None:
      raise ValueError('MpDistSamplingWorkerOptions needs master_addr and master_port')
    self.channel_size = channel_size if channel_size is not None else (256 << 20) * num_workers
    self.pin_memory = pin_memory

  @property
  def channel_capacity(self) -> int:
    r"""Batches the trainer's channel holds: twice those in flight, at
    least 8."""
    return max(8, 2 * self.num_workers * self.worker_concurrency)


class RemoteDistSamplingWorkerOptions(_BasicDistSamplingWorkerOptions):
  r"""Sample on servers (server-client mode): the loader asks each of its
  servers to create a sampling producer over the server's partitions; the
  server samples ahead into a buffer, and the loader pulls ``prefetch_size``
  batches ahead from each server.

  Args:
    server_rank: the server (or servers) to sample on (default: this
      client's share, ``assign_server_by_order()``).
    num_workers: sampling processes on each server, started once per
      server by the job's first loader that asks for more than one (as
      GLT's servers start them); 1 samples in the server's own process.
      With ``worker_concurrency`` it sets how many batches a server samples
      at once for the loader (``num_workers * worker_concurrency``).
    worker_devices: accepted for GLT compatibility: a server samples on the
      CPU, or on the device its partition was loaded to
      (``DistDataset.load(device=...)``) in its own process.
    worker_concurrency: batches each sampling process (or stream) keeps in
      flight.
    master_addr: where the servers' sampling processes meet (default: the
      servers' RPC address, server 0's host).
    master_port: its port (default: a free port of server 0's host).
    num_rpc_threads: threads serving peers' requests in each sampling
      process.
    rpc_timeout: seconds a request to a server may take, and the longest the
      loader waits for a batch.
    buffer_size: bytes of sampled batches a server holds ahead for this
      loader (an int or a string such as '256MB'; default: no byte bound,
      only ``2 * num_workers * worker_concurrency`` batches).
    prefetch_size: batches requested ahead from each server.
    worker_key: a name for the producer in server logs.
    glt_graph: unsupported; must be None.
    workload_type: 'train', 'validate' or 'test': a label for logs.
    use_all2all: unsupported; must be False.
    channel_size: bytes of the loader's channel (default 256 MB per
      sampling process), where the sampling processes of a server on this
      host send its batches straight, with ``num_workers > 1``; a batch
      that finds it full comes through the server.
  """

  free_port = True

  def __init__(
    self,
    server_rank: Optional[Union[int, List[int]]] = None,
    num_workers: int = 1,
    worker_devices: Optional[WorkerDevices] = None,
    worker_concurrency: int = 4,
    master_addr: Optional[str] = None,
    master_port: Optional[Union[str, int]] = None,
    num_rpc_threads: Optional[int] = None,
    rpc_timeout: float = DEFAULT_RPC_TIMEOUT_S,
    buffer_size: Optional[Union[int, str]] = None,
    prefetch_size: int = 4,
    worker_key: str = None,
    glt_graph=None,
    workload_type: Optional[Literal['train', 'validate', 'test']] = None,
    use_all2all: bool = False,
    channel_size: Optional[Union[int, str]] = None,
  ):
    super().__init__(
      num_workers,
      worker_devices,
      worker_concurrency,
      master_addr,
      master_port,
      num_rpc_threads,
      rpc_timeout,
      use_all2all,
    )
    if server_rank is not None:
      ranks = [server_rank] if isinstance(server_rank, int) else list(server_rank)
      if not ranks or any(not isinstance(r, int) or r < 0 for r in ranks):
        raise ValueError(f'server_rank must be a rank or a list of ranks, got {server_rank!r}')
      if len(set(ranks)) != len(ranks):
        raise ValueError(f'server_rank lists a server twice: {server_rank!r}')
    if not isinstance(prefetch_size, int) or prefetch_size < 1:
      raise ValueError(f'prefetch_size must be a positive integer, got {prefetch_size!r}')
    if glt_graph is not None:
      raise ValueError('glt_graph is not supported: servers sample their own partitions')
    if workload_type not in (None, 'train', 'validate', 'test'):
      raise ValueError(f"workload_type must be 'train', 'validate' or 'test': {workload_type!r}")
    self.server_rank = server_rank
    self.buffer_size = parse_size(buffer_size) if buffer_size is not None else None
    self.prefetch_size = prefetch_size
    self.channel_size = channel_size if channel_size is not None else (256 << 20) * num_workers
    self.worker_key = worker_key
    self.workload_type = workload_type

  @property
  def buffer_capacity(self) -> int:
    r"""Batches a server samples ahead for the loader, at most."""
    return 2 * self.num_workers * self.worker_concurrency

  @property
  def channel_capacity(self) -> int:
    r"""Batches the loader's channel holds: those a server samples ahead,
    and those requested."""
    return self.buffer_capacity + self.prefetch_size


AllDistSamplingWorkerOptions = Union[
  CollocatedDistSamplingWorkerOptions,
  MpDistSamplingWorkerOptions,
  RemoteDistSamplingWorkerOptions,
]
