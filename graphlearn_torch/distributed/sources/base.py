"""Where a distributed loader's batches come from.

A :class:`BatchSource` hands a ``DistLoader`` the messages of an epoch's
batches; the loader only decodes and collates them. There is one source per
place sampling can run:

- ``DistCollocatedSamplingProducer`` (``collocated``): in the
  training process, on its event loop, optionally a few batches ahead;
- ``DistMpSamplingProducer`` (``multiprocess``): in sampling processes the
  loader spawns, which send batches through a shared-memory channel;
- ``RemoteBatchSource`` (``remote``): on servers, which sample ahead
  and answer the client's fetches (server-client mode).
"""

from abc import ABC, abstractmethod
from typing import Callable, Optional

from ...channel import SampleMessage

# What a source waits for a batch beyond the RPC timeout: a sampler whose
# request to a peer times out (a lost host) reports which peer it was, and
# that report must arrive before the source's own wait ends without a cause.
ERROR_MARGIN_S = 10.0


def batch_wait_ms(rpc_timeout: float) -> float:
  r"""Milliseconds a source waits for the next batch (``rpc_timeout`` plus
  ``ERROR_MARGIN_S``)."""
  return (rpc_timeout + ERROR_MARGIN_S) * 1000


class BatchSource(ABC):
  r"""An epoch-by-epoch supply of sampled batches, as channel messages
  (``batch.codec``) that carry their input ids.

  A loader makes its source, calls ``init`` once, then ``start_epoch`` and
  ``next_message`` every epoch, and ``shutdown`` at the end. Batches come in
  their epoch's order, and each draws from its own random stream
  (``RandomStream.for_batch(seed, epoch, position)``): an epoch started at
  a later position yields exactly the rest of it."""

  @abstractmethod
  def init(self, meanwhile: Optional[Callable[[], None]] = None) -> None:
    r"""Starts sampling where this source samples (collective where the
    sampling processes form an RPC world with the other loaders').

    Args:
      meanwhile: the loader's own start-up work, run while the source waits
        for its samplers where it can (sampling processes starting, servers
        creating producers).
    """

  @abstractmethod
  def __len__(self) -> int:
    r"""Batches per epoch."""

  @abstractmethod
  def start_epoch(
    self, epoch: Optional[int] = None, start: int = 0, seed: Optional[int] = None
  ) -> int:
    r"""Starts epoch ``epoch`` (default: the one after the last) from batch
    position ``start`` (what is left of the last one is dropped); returns
    how many batches it will yield.

    Args:
      epoch: the epoch.
      start: its first batch position to yield.
      seed: the loader's seed from now on (default: the sampling config's),
        e.g. a resumed loader's.
    """

  @abstractmethod
  def next_message(self) -> Optional[SampleMessage]:
    r"""The epoch's next batch, or None when the epoch has yielded all of
    them.

    Raises:
      SamplingError: the batch could not be sampled.
      TimeoutError: it did not come within the source's timeout.
    """

  @abstractmethod
  def shutdown(self) -> None:
    r"""Stops sampling and frees what the source holds (idempotent)."""
