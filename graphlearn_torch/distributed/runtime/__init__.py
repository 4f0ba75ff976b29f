"""The distributed runtime: the RPC world and its collectives (``rpc``), calls
to another process's service (``service``), the bounded rendezvous, the
process's role in the job (``context``), the event loop batches are sampled
on, and the client's plumbing (``client``)."""
