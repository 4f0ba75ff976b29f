"""Remote sampling: a client loader's batches sampled on servers
(server-client mode)."""

import logging
from typing import Callable, Dict, List, Optional, Sequence, Tuple, Union

import torch

from ...batch.codec import batch_place, is_receipt, raise_if_error
from ...channel import QueueTimeoutError, RemoteReceivingChannel, SampleMessage, ShmChannel
from ...sampler.base import EdgeSamplerInput, NodeSamplerInput, RemoteSamplerInput, SamplingConfig
from ...utils.host_share import boot_id, share_host_partitions
from ..runtime.client import async_request_server, request_server
from ..runtime.context import DistRole, assign_server_by_order, get_context
from ..runtime.rpc import rpc_is_initialized
from ..runtime.service import rpc_service_request_async
from .base import BatchSource, batch_wait_ms
from .options import RemoteDistSamplingWorkerOptions

logger = logging.getLogger(__name__)

RemoteInput = Union[
  NodeSamplerInput, EdgeSamplerInput, RemoteSamplerInput, List[RemoteSamplerInput]
]


class _Fetch:
  r"""Fetches a producer's next batch from its server, waiting longer than
  the servers' own requests: a server whose sampling stalls on a lost peer
  reports which peer it was before this fetch would time out on the server.

  Args:
    rpc_timeout: the RPC timeout (seconds).
  """

  def __init__(self, rpc_timeout: float):
    self.timeout = batch_wait_ms(rpc_timeout) / 1000

  def __call__(self, server_rank: int, producer_id: int) -> torch.futures.Future:
    return rpc_service_request_async(
      DistRole.SERVER, server_rank, 'fetch_one_sampled_message', (producer_id,),
      timeout=self.timeout,
    )  # fmt: skip


def round_robin(sizes: Sequence[int], start: int) -> Tuple[List[int], int]:
  r"""Where a round robin over servers stands after ``start`` batches: the
  batches taken from each, and the server whose turn is next. It takes
  server 0's first batch, then server 1's, ..., skipping servers with none
  left.

  Args:
    sizes: each server's batches.
    start: batches taken.
  """
  taken, turn = [0] * len(sizes), 0
  for _ in range(start):
    while taken[turn] >= sizes[turn]:
      turn = (turn + 1) % len(sizes)
    taken[turn] += 1
    turn = (turn + 1) % len(sizes)
  return taken, turn


class RemoteBatchSource(BatchSource):
  r"""Has servers sample a client loader's batches: one sampling producer
  per server, created at ``init``, which samples ahead; the client pulls
  ``prefetch_size`` batches ahead from each, and yields the servers'
  batches in turn (``round_robin``), each server's in their order.

  Args:
    sampler_input: seeds that are split evenly among the servers (batches'
      input ids index them), a RemoteSamplerInput each server reads from
      its own partition, or a list of inputs, one per server.
    sampling_config: what to sample and how to batch it.
    worker_options: the servers and how they sample.
  """

  def __init__(
    self,
    sampler_input: RemoteInput,
    sampling_config: SamplingConfig,
    worker_options: RemoteDistSamplingWorkerOptions,
  ):
    self.sampler_input = sampler_input
    self.sampling_config = sampling_config
    self.worker_options = worker_options
    self.servers: List[int] = []
    self.producer_ids: List[int] = []
    self._sizes: List[int] = []  # each server's batches per epoch
    self._epoch = -1
    self._remaining = 0
    self._next: List[int] = []  # each server's batch position due next
    self._early: List[Dict[int, SampleMessage]] = []  # came before their turn
    self._turn = 0
    self._channel: Optional[RemoteReceivingChannel] = None
    # Each server's batches sent straight here (a server of this host with
    # sampling processes), else None; those that came before their turn.
    self._direct: List[Optional[ShmChannel]] = []
    self._held: List[Dict[int, SampleMessage]] = []

  def _server_inputs(self) -> List[Tuple[int, object, int]]:
    r"""``(server rank, its input, the offset of its input ids)`` per server."""
    opts = self.worker_options
    servers = opts.server_rank if opts.server_rank is not None else assign_server_by_order()
    servers = [servers] if isinstance(servers, int) else list(servers)
    num_servers = get_context().num_servers()
    bad = [s for s in servers if s >= num_servers]
    if bad:
      raise ValueError(f'server_rank {bad} is outside the {num_servers} servers')
    inputs = self.sampler_input
    if isinstance(inputs, (list, tuple)):
      if len(inputs) != len(servers):
        raise ValueError(f'{len(inputs)} inputs for {len(servers)} servers: give one per server')
      return [(s, inp, 0) for s, inp in zip(servers, inputs)]
    if isinstance(inputs, RemoteSamplerInput):  # each server reads its own
      return [(s, inputs, 0) for s in servers]
    bounds = torch.linspace(0, len(inputs), len(servers) + 1).long().tolist()
    return [(s, inputs[torch.arange(lo, hi)], lo) for s, lo, hi in zip(servers, bounds, bounds[1:])]

  def _start_sampling_pools(self) -> None:
    r"""Has every server start its sampling processes (once per job: a later
    loader finds them started), which meet where server 0 says."""
    opts = self.worker_options
    address = request_server(0, 'sampling_pool_address', opts.master_addr, opts.master_port)
    futures = [
      (s, async_request_server(s, 'start_sampling_pool', opts, address))
      for s in range(get_context().num_servers())
    ]
    for server, fut in futures:
      try:
        fut.wait()
      except Exception as e:
        raise RuntimeError(
          f'server {server} failed to start its sampling processes: {type(e).__name__}: {e}'
        ) from e

  def _direct_channels(self, servers: List[int]) -> List[Optional[ShmChannel]]:
    r"""A channel for each server of this host, where its sampling
    processes send this loader's batches straight (as a trainer's own
    sampling processes do), else None."""
    if not share_host_partitions():
      return [None] * len(servers)
    here = boot_id()
    hosts = [async_request_server(s, boot_id) for s in servers]
    opts = self.worker_options
    return [
      ShmChannel(opts.channel_capacity, opts.channel_size) if host.wait() == here else None
      for host in hosts
    ]

  def init(self, meanwhile: Optional[Callable[[], None]] = None) -> None:
    r"""Creates a sampling producer on each server (each destroyed again
    when another fails to create one), running ``meanwhile`` while the
    servers create them; first has the servers start their sampling
    processes when the options ask for more than one per server."""
    server_inputs = self._server_inputs()
    self._direct = [None] * len(server_inputs)
    if self.worker_options.num_workers > 1:
      self._start_sampling_pools()
      self._direct = self._direct_channels([s for s, _, _ in server_inputs])
    ctx = get_context()
    created = []
    for (server, inputs, offset), channel in zip(server_inputs, self._direct):
      fut = async_request_server(
        server,
        'create_sampling_producer',
        inputs,
        self.sampling_config,
        self.worker_options,
        client_rank=ctx.rank,
        input_offset=offset,
        client_channel=channel.host_handle() if channel is not None else None,
      )
      created.append((server, fut))
    try:
      if meanwhile is not None:
        meanwhile()
      errors = []
      for server, fut in created:
        try:
          self.producer_ids.append(fut.wait())
          self.servers.append(server)
        except Exception as e:  # destroy the others' producers first
          errors.append(e)
      if errors:
        raise errors[0]
      sizes = self._on_producers('get_sampling_producer_size')
    except BaseException:
      self.shutdown()
      raise
    self._sizes = [n for _, n in sizes]
    self._channel = RemoteReceivingChannel(
      self.servers,
      self.producer_ids,
      self.worker_options.prefetch_size,
      fetch=_Fetch(self.worker_options.rpc_timeout),
    )

  def _on_producers(self, method: str, args: Optional[List[tuple]] = None) -> List:
    r"""``method(producer id, *args[i])`` on each server ``i`` at once (no
    more arguments by default); the results in server order. A failure
    names its server."""
    args = args if args is not None else [()] * len(self.servers)
    futures = [
      (s, async_request_server(s, method, p, *a))
      for s, p, a in zip(self.servers, self.producer_ids, args)
    ]
    results = []
    for server, fut in futures:
      try:
        results.append(fut.wait())
      except Exception as e:
        raise RuntimeError(
          f'server {server} failed to answer {method}: {type(e).__name__}: {e}'
        ) from e
    return results

  def __len__(self) -> int:
    return sum(self._sizes)

  def start_epoch(
    self, epoch: Optional[int] = None, start: int = 0, seed: Optional[int] = None
  ) -> int:
    timeout = self.worker_options.rpc_timeout
    if not self._channel.drain(timeout):  # the last epoch was left unfinished
      raise TimeoutError(f'the servers did not answer within {timeout} s')
    self._epoch = self._epoch + 1 if epoch is None else epoch
    taken, self._turn = round_robin(self._sizes, start)
    args = [(self._epoch, t, seed) for t in taken]
    counts = self._on_producers('start_new_epoch_sampling', args)
    self._channel.reset(counts)
    self._next = taken
    self._early = [{} for _ in self.servers]
    self._held = [{} for _ in self.servers]
    self._remaining = sum(counts)
    return self._remaining

  def next_message(self) -> Optional[SampleMessage]:
    if self._remaining == 0:
      return None
    while self._next[self._turn] >= self._sizes[self._turn]:
      self._turn = (self._turn + 1) % len(self._sizes)
    i = self._turn
    wait_ms = batch_wait_ms(self.worker_options.rpc_timeout)
    early = self._early[i]
    while self._next[i] not in early:
      msg = self._channel.recv(timeout_ms=wait_ms, server=i)
      raise_if_error(msg)
      early[batch_place(msg)[1]] = msg
    msg = early.pop(self._next[i])
    if is_receipt(msg):  # the batch itself is in this loader's channel
      msg = self._take_direct(i, self._next[i])
    self._next[i] += 1
    self._turn = (i + 1) % len(self._sizes)
    self._remaining -= 1
    return msg

  def _take_direct(self, i: int, position: int) -> SampleMessage:
    r"""Batch ``position`` of server ``i``, sent to this loader's channel
    before its receipt came; the batches of it that come before their turn
    are held, those of an abandoned epoch dropped."""
    held = self._held[i]
    msg = held.pop(position, None)
    while msg is None:
      try:
        sent = self._direct[i].recv(timeout_ms=batch_wait_ms(self.worker_options.rpc_timeout))
      except QueueTimeoutError as e:
        raise RuntimeError(
          f'batch {position} of server {self.servers[i]} was not in the channel its receipt names'
        ) from e
      epoch, at = batch_place(sent)
      if epoch != self._epoch:
        continue
      if at == position:
        msg = sent
      else:
        held[at] = sent
    return msg

  def shutdown(self) -> None:
    self._direct, self._held = [], []
    ids, self.producer_ids = self.producer_ids, []
    ctx = get_context()
    if not ids or not rpc_is_initialized() or ctx is None or not ctx.is_client():
      return  # the client has left: the servers destroyed its producers
    futures = [
      (s, async_request_server(s, 'destroy_sampling_producer', p))
      for s, p in zip(self.servers, ids)
    ]
    for server, fut in futures:
      try:
        fut.wait()
      except Exception as e:  # a dead server has nothing left to destroy
        logger.warning('server %d did not destroy its sampling producer: %s', server, e)
