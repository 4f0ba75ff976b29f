"""Where and how a distributed loader samples: worker options."""

from typing import List, Optional, Union

import torch

from .rpc import DEFAULT_RPC_TIMEOUT_S


class _BasicDistSamplingWorkerOptions:
  r"""What every kind of sampling worker needs.

  Args:
    num_workers: sampling processes (or 1 for collocated sampling).
    worker_devices: the device of each sampling worker.
    worker_concurrency: batches each worker keeps in flight.
    master_addr: the rendezvous address of the samplers' RPC world.
    master_port: its port.
    num_rpc_threads: threads serving peers' requests in each sampler.
    rpc_timeout: seconds an RPC may take.
  """

  def __init__(
    self,
    num_workers: int = 1,
    worker_devices: Optional[List[torch.device]] = None,
    worker_concurrency: int = 4,
    master_addr: Optional[str] = None,
    master_port: Optional[Union[str, int]] = None,
    num_rpc_threads: Optional[int] = None,
    rpc_timeout: float = DEFAULT_RPC_TIMEOUT_S,
  ):
    if not isinstance(num_workers, int) or num_workers < 1:
      raise ValueError(f'num_workers must be a positive integer, got {num_workers!r}')
    if not isinstance(worker_concurrency, int) or not 1 <= worker_concurrency <= 32:
      raise ValueError(f'worker_concurrency must be in [1, 32], got {worker_concurrency!r}')
    self.num_workers = num_workers
    self.worker_devices = worker_devices
    self.worker_concurrency = worker_concurrency
    self.master_addr = master_addr
    self.master_port = int(master_port) if master_port is not None else None
    self.num_rpc_threads = num_rpc_threads
    self.rpc_timeout = float(rpc_timeout)


class CollocatedDistSamplingWorkerOptions(_BasicDistSamplingWorkerOptions):
  r"""Sample inside the training process, one batch at a time, using the
  training process's own RPC world (``init_rpc`` it first, or give
  ``master_addr`` and ``master_port`` and the loader does).

  Args:
    master_addr: the rendezvous address, if the loader must init RPC.
    master_port: its port.
    num_rpc_threads: threads serving peers' requests.
    rpc_timeout: seconds an RPC may take.
    use_all2all: unsupported; must be False.
  """

  def __init__(
    self,
    master_addr: Optional[str] = None,
    master_port: Optional[Union[str, int]] = None,
    num_rpc_threads: Optional[int] = None,
    rpc_timeout: float = DEFAULT_RPC_TIMEOUT_S,
    use_all2all: bool = False,
  ):
    super().__init__(1, None, 1, master_addr, master_port, num_rpc_threads, rpc_timeout)
    if use_all2all:
      raise ValueError('use_all2all is not supported')
    self.use_all2all = False


class MpDistSamplingWorkerOptions(_BasicDistSamplingWorkerOptions):
  r"""Sample in ``num_workers`` processes that the loader spawns. They form an
  RPC world of their own with the sampling processes of every trainer
  (rendezvous at ``master_addr:master_port``, which must differ from the
  trainers' own), and feed the trainer through a shared-memory channel.

  Args:
    num_workers: sampling processes per trainer.
    worker_devices: unused on the CPU.
    worker_concurrency: batches each sampling process keeps in flight.
    master_addr: the samplers' rendezvous address.
    master_port: its port.
    num_rpc_threads: threads serving peers' requests in each sampler.
    rpc_timeout: seconds an RPC may take, and the longest the trainer waits
      for a batch.
    channel_size: bytes of the trainer's channel (default 256 MB per
      worker).
    pin_memory: page-lock the channel for fast copies to the GPU.
    use_all2all: unsupported; must be False.
  """

  def __init__(
    self,
    num_workers: int = 1,
    worker_devices: Optional[List[torch.device]] = None,
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
    )
    if master_addr is None or master_port is None:
      raise ValueError('MpDistSamplingWorkerOptions needs master_addr and master_port')
    if use_all2all:
      raise ValueError('use_all2all is not supported')
    self.channel_size = channel_size if channel_size is not None else (256 << 20) * num_workers
    self.pin_memory = pin_memory
    self.use_all2all = False
