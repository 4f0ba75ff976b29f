"""Server-client mode on loopback: 2 servers hold the partitions, 2 clients
train on batches the servers sample. Every batch is checked against the full
graph, and every epoch covers each client's seeds once. Processes are spawned
and reaped also on failure."""

import os
import traceback

import pytest
import torch
from test_dist_sampling import SPAWN, TIMEOUT_S, free_port, make_loader, partition, run_epochs

NUM_SERVERS = 2
NUM_CLIENTS = 2


def run_server(rank, port, root, results):
  import graphlearn_torch as glt

  dist = glt.distributed
  try:
    ds = dist.DistDataset(edge_dir='out').load(root, rank, graph_mode='CPU')
    dist.init_server(
      NUM_SERVERS, rank, ds, '127.0.0.1', port, num_clients=NUM_CLIENTS, num_rpc_threads=8,
      request_timeout=60,
    )  # fmt: skip
    dist.wait_and_shutdown_server(timeout=TIMEOUT_S)
    results.put(('server', rank, 'ok', 0, 0))
  except Exception:
    results.put(('server', rank, traceback.format_exc(), 0, 0))


def run_client(rank, port, root, hetero, kind, server_rank, results):
  import graphlearn_torch as glt

  dist = glt.distributed
  try:
    dist.init_client(NUM_SERVERS, NUM_CLIENTS, rank, '127.0.0.1', port, request_timeout=60)
    # The client reads its seeds from partition `rank`; servers do the rest.
    ds = dist.DistDataset(edge_dir='out').load(root, rank, graph_mode='CPU')
    graph = torch.load(os.path.join(root, 'full.pt'), weights_only=False)
    options = dist.RemoteDistSamplingWorkerOptions(
      server_rank=server_rank, num_workers=2, worker_concurrency=2, prefetch_size=2,
      rpc_timeout=60,
    )  # fmt: skip
    loader, num_seeds, check = make_loader(
      dist, ds, graph, kind, hetero, rank, options, client=True
    )
    batches, edges = run_epochs(loader, check, num_seeds)
    loader.shutdown()
    results.put(('client', rank, 'ok', batches, edges))
  except Exception:
    results.put(('client', rank, traceback.format_exc(), 0, 0))
  finally:
    glt.distributed.shutdown_client()


def run_job(root, hetero, kind, server_rank=None):
  port = free_port()
  results = SPAWN.Queue()
  procs = [SPAWN.Process(target=run_server, args=(r, port, root, results)) for r in range(2)]
  procs += [
    SPAWN.Process(target=run_client, args=(r, port, root, hetero, kind, server_rank, results))
    for r in range(NUM_CLIENTS)
  ]
  for p in procs:
    p.start()
  try:
    reports = [results.get(timeout=TIMEOUT_S) for _ in procs]
  finally:
    for p in procs:
      p.join(TIMEOUT_S / 4)
      if p.is_alive():
        p.kill()
        p.join()
  for role, rank, status, batches, edges in sorted(reports):
    assert status == 'ok', f'{role} {rank}:\n{status}'
    if role == 'client':
      assert batches > 0 and edges > 0
  assert all(p.exitcode == 0 for p in procs), [p.exitcode for p in procs]


@pytest.mark.parametrize('server_rank', [None, [0, 1]])
def test_server_client_node_homo(tmp_path, server_rank):
  partition(str(tmp_path), NUM_SERVERS, hetero=False)
  run_job(str(tmp_path), hetero=False, kind='node', server_rank=server_rank)


def test_server_client_node_hetero(tmp_path):
  partition(str(tmp_path), NUM_SERVERS, hetero=True)
  run_job(str(tmp_path), hetero=True, kind='node')


def test_server_client_link_homo(tmp_path):
  partition(str(tmp_path), NUM_SERVERS, hetero=False)
  run_job(str(tmp_path), hetero=False, kind='link_triplet', server_rank=[1, 0])


def test_server_client_link_hetero(tmp_path):
  partition(str(tmp_path), NUM_SERVERS, hetero=True)
  run_job(str(tmp_path), hetero=True, kind='link')
