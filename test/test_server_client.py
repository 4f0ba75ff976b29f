"""Server-client mode on loopback: 2 servers hold the partitions, 2 clients
train on batches the servers sample. Every batch is checked against the full
graph, and every epoch covers each client's seeds once. Processes are spawned
and reaped also on failure."""

import os
import subprocess
import sys
import traceback
from pathlib import Path

import pytest
import torch
from conftest import kill_sessions
from test_dist_sampling import (
  SPAWN,
  TIMEOUT_S,
  free_port,
  make_loader,
  partition,
  run_epochs,
  run_spawned,
)

# Spawned processes or builds: left out of make test-fast.
pytestmark = pytest.mark.slow

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


# How a server samples: in its own process; in sampling processes that send
# batches straight to the client's channel; in sampling processes whose
# batches mostly find the client's channel too small and come through the
# server.
SERVER_SAMPLING = {
  'in-server': dict(num_workers=1),
  'processes': dict(num_workers=2),
  'processes-relayed': dict(num_workers=2, channel_size='8KB'),
}


def run_client(rank, port, root, hetero, kind, server_rank, sampling, results):
  import graphlearn_torch as glt

  dist = glt.distributed
  try:
    dist.init_client(NUM_SERVERS, NUM_CLIENTS, rank, '127.0.0.1', port, request_timeout=60)
    # The client reads its seeds from partition `rank`; servers do the rest.
    ds = dist.DistDataset(edge_dir='out').load(root, rank, graph_mode='CPU')
    graph = torch.load(os.path.join(root, 'full.pt'), weights_only=False)
    options = dist.RemoteDistSamplingWorkerOptions(
      server_rank=server_rank, worker_concurrency=2, prefetch_size=2, rpc_timeout=60,
      **SERVER_SAMPLING[sampling],
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


def spawn_job(root, client, *client_args):
  r"""2 servers and 2 clients (``client(rank, port, root, *client_args,
  results)``); returns their reports and processes once all have reported."""
  port = free_port()
  results = SPAWN.Queue()
  procs = [SPAWN.Process(target=run_server, args=(r, port, root, results)) for r in range(2)]
  procs += [
    SPAWN.Process(target=client, args=(r, port, root, *client_args, results))
    for r in range(NUM_CLIENTS)
  ]
  return run_spawned(procs, results), procs


def run_job(root, hetero, kind, server_rank=None, sampling='processes'):
  reports, procs = spawn_job(root, run_client, hetero, kind, server_rank, sampling)
  for role, rank, status, batches, edges in sorted(reports):
    assert status == 'ok', f'{role} {rank}:\n{status}'
    if role == 'client':
      assert batches > 0 and edges > 0
  assert all(p.exitcode == 0 for p in procs), [p.exitcode for p in procs]


@pytest.mark.parametrize(
  'server_rank,sampling',
  [(None, 'processes'), ([0, 1], 'processes'), (None, 'in-server'), ([0, 1], 'processes-relayed')],
)
def test_server_client_node_homo(tmp_path, server_rank, sampling):
  partition(str(tmp_path), NUM_SERVERS, hetero=False)
  run_job(str(tmp_path), hetero=False, kind='node', server_rank=server_rank, sampling=sampling)


def test_server_client_node_hetero(tmp_path):
  partition(str(tmp_path), NUM_SERVERS, hetero=True)
  run_job(str(tmp_path), hetero=True, kind='node')


def test_server_client_link_homo(tmp_path):
  partition(str(tmp_path), NUM_SERVERS, hetero=False)
  run_job(str(tmp_path), hetero=False, kind='link_triplet', server_rank=[1, 0])


def test_server_client_link_hetero(tmp_path):
  partition(str(tmp_path), NUM_SERVERS, hetero=True)
  run_job(str(tmp_path), hetero=True, kind='link')


def run_requests_client(rank, port, root, results):
  r"""Dataset access through the servers, and a loader over a
  RemoteNodeSplitSamplerInput, checked against the full graph."""
  import math

  import graphlearn_torch as glt
  from graphlearn_torch.distributed import DistServer, request_server
  from graphlearn_torch.sampler import RemoteNodeSplitSamplerInput
  from graphlearn_torch.typing import Split

  dist = glt.distributed
  try:
    dist.init_client(NUM_SERVERS, NUM_CLIENTS, rank, '127.0.0.1', port, request_timeout=60)
    graph = torch.load(os.path.join(root, 'full.pt'), weights_only=False)
    assert dist.assign_server_by_order() == [rank]
    assert dist.get_clients_to_servers() == {0: [0], 1: [1]}
    assert float(dist.rpc_global_request_by_rank(1, torch.add, (torch.ones(1), 1))) == 2.0
    num_parts, part, ntypes, etypes = request_server(rank, DistServer.get_dataset_meta)
    assert (num_parts, part, ntypes, etypes) == (NUM_SERVERS, rank, None, None)
    ids = torch.randperm(graph['num_nodes'])[:50]
    x = request_server(rank, DistServer.get_node_feature, None, ids)
    assert torch.equal(x, graph['x'][ids]), 'features of any partition, through one server'
    assert torch.equal(request_server(rank, DistServer.get_node_label, None, ids), graph['y'][ids])
    assert request_server(rank, DistServer.get_num_classes) == int(graph['y'].max()) + 1
    src, dst = request_server(rank, DistServer.get_edge_index, None, 'coo')
    keys = graph['src'] * graph['num_nodes'] + graph['dst']
    assert torch.isin(src * graph['num_nodes'] + dst, keys).all()
    total = sum(request_server(s, DistServer.get_edge_size, None) for s in range(NUM_SERVERS))
    assert total == graph['src'].numel(), 'the servers hold every edge once'
    owner = request_server(rank, DistServer.get_node_partition_id, None, ids)
    assert owner.shape == ids.shape and int(owner.max()) < NUM_SERVERS

    # GLT's requests of plain functions: run without the server; errors come back raised.
    assert request_server(rank, torch.cuda.device_count) == torch.cuda.device_count()
    assert float(request_server(rank, torch.add, torch.ones(1), 1)) == 2.0
    try:
      request_server(rank, math.sqrt, -1.0)
      raise AssertionError('a server error came back as a value')
    except ValueError as e:
      assert 'math domain error' in str(e)
    try:
      request_server(rank, DistServer.get_node_feature, None, torch.tensor([10**9]))
      raise AssertionError('a bad id came back as a value')
    except Exception as e:
      assert 'out of range' in str(e) or 'outside' in str(e), e

    # Each server reads its own partition's training split: as a RemoteSamplerInput,
    # as GLT's Split, and from a seed file (one path, or a list with one per server).
    ds = dist.DistDataset(edge_dir='out').load(root, rank, graph_mode='CPU')
    seed_file = os.path.join(root, f'train_seeds{rank}.pt')
    torch.save(ds.train_idx.clone(), seed_file)
    for input_nodes in (RemoteNodeSplitSamplerInput('train'), Split.train, seed_file, [seed_file]):
      loader = dist.DistNeighborLoader(
        None, [3, 2], input_nodes, batch_size=16, collect_features=True,
      )  # fmt: skip
      seen = torch.cat([batch.n_id[: batch.batch_size] for batch in loader])
      assert torch.equal(torch.sort(seen).values, torch.sort(ds.train_idx).values), input_nodes
      for batch in loader:
        assert torch.equal(batch.x, graph['x'][batch.n_id])
      loader.shutdown()
    results.put(('client', rank, 'ok', 1, 1))
  except Exception:
    results.put(('client', rank, traceback.format_exc(), 0, 0))
  finally:
    dist.shutdown_client()


def test_server_dataset_requests_and_remote_split(tmp_path):
  partition(str(tmp_path), NUM_SERVERS, hetero=False)
  reports, _ = spawn_job(str(tmp_path), run_requests_client)
  for role, rank, status, _, _ in sorted(reports):
    assert status == 'ok', f'{role} {rank}:\n{status}'


def test_remote_options_and_inputs(tmp_path):
  import graphlearn_torch as glt
  from graphlearn_torch.sampler import RemoteNodePathSamplerInput, RemoteNodeSplitSamplerInput

  dist = glt.distributed
  opts = dist.RemoteDistSamplingWorkerOptions(
    server_rank=[0, 1], num_workers=2, worker_concurrency=3, buffer_size='1MB'
  )
  assert opts.buffer_size == 1 << 20 and opts.buffer_capacity == 12
  for bad in (
    dict(server_rank=[0, 0]),
    dict(server_rank=-1),
    dict(prefetch_size=0),
    dict(workload_type='eval'),
    dict(use_all2all=True),
  ):
    with pytest.raises(ValueError):
      dist.RemoteDistSamplingWorkerOptions(**bad)
  ds = glt.data.Dataset()
  ds.train_idx = torch.tensor([3, 1, 2])
  inputs = RemoteNodeSplitSamplerInput('train').to_local_sampler_input(ds)
  assert torch.equal(inputs.node, torch.tensor([3, 1, 2])) and inputs.input_type is None
  with pytest.raises(ValueError, match='no valid split'):
    RemoteNodeSplitSamplerInput('valid').to_local_sampler_input(ds)
  with pytest.raises(ValueError):
    RemoteNodeSplitSamplerInput('dev')
  path = tmp_path / 'seeds.pt'
  torch.save(torch.tensor([[5, 6], [7, 8]]), path)
  inputs = RemoteNodePathSamplerInput(str(path), 'paper').to_local_sampler_input(ds)
  assert torch.equal(inputs.node, torch.tensor([5, 6, 7, 8])) and inputs.input_type == 'paper'
  with pytest.raises(FileNotFoundError, match='no seed file'):
    RemoteNodePathSamplerInput(str(tmp_path / 'none.pt')).to_local_sampler_input(ds)


def test_clients_need_init_client():
  import graphlearn_torch as glt

  with pytest.raises(RuntimeError, match='init_client'):
    glt.distributed.request_server(0, glt.distributed.DistServer.get_dataset_meta)
  with pytest.raises(RuntimeError, match='init_client'):
    glt.distributed.assign_server_by_order()
  glt.distributed.shutdown_client()  # a no-op outside a client


def run_example_pair(server_args, client_args, timeout, common_timeout=60) -> str:
  r"""Runs examples/distributed/server_client_mode as 2 servers + 2 clients
  (``*_args`` added to each side's command line); checks that both sides exit
  cleanly and returns the clients' log. Each side runs in a process group of
  its own, killed whole at the end: a side that times out leaves no spawned
  server or client behind."""
  examples = Path(__file__).resolve().parents[1] / 'examples/distributed/server_client_mode'
  job, pg = free_port(), free_port()
  common = ['--master_port', str(job), '--timeout', str(common_timeout)]
  sides = []
  try:
    servers = subprocess.Popen(
      [sys.executable, str(examples / 'sage_supervised_server.py'), *server_args, *common],
      stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, start_new_session=True,
    )  # fmt: skip
    sides.append(servers)
    clients = subprocess.Popen(
      [
        sys.executable, str(examples / 'sage_supervised_client.py'), '--no-progress',
        '--training_pg_master_port', str(pg), *client_args, *common,
      ],
      stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, start_new_session=True,
    )  # fmt: skip
    sides.append(clients)
    _, client_log = clients.communicate(timeout=timeout)
    _, server_log = servers.communicate(timeout=60)
  finally:
    kill_sessions(sides)
  assert clients.returncode == 0, client_log[-4000:]
  assert servers.returncode == 0, server_log[-4000:]
  return client_log
