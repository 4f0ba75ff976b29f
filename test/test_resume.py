"""Loaders resume mid-epoch: a state taken after k batches, loaded into a
new loader in a fresh process, yields exactly the batches the uninterrupted
loader yielded from there on (the rest of the epoch and the next one), in
every loader and mode: local NeighborLoader, LinkNeighborLoader and
SubGraphLoader, and the Dist loaders collocated, multiprocess and
server-client. Bad states are refused by name. Processes are spawned and
reaped also on failure."""

import asyncio
import io
import json
import threading
import traceback

import pytest
import torch
from test_dist_sampling import SPAWN, TIMEOUT_S, free_port, partition, run_spawned

import graphlearn_torch as glt
from graphlearn_torch.data import Dataset
from graphlearn_torch.loader import LinkNeighborLoader, NeighborLoader, SubGraphLoader
from graphlearn_torch.sampler import NegativeSampling

# Spawned processes or builds: left out of make test-fast.
pytestmark = pytest.mark.slow

TAKEN_AFTER = 3  # batches of the second epoch yielded when the state is taken


def flatten(batch) -> dict:
  r"""Every tensor of a PyG batch, by a path of its store and name."""
  out = {}

  def walk(prefix, value):
    if isinstance(value, torch.Tensor):
      out[prefix] = value
    elif isinstance(value, dict):
      for key, item in value.items():
        walk(f'{prefix}/{key}', item)
    elif isinstance(value, (int, float)):
      out[prefix] = torch.tensor(value)

  walk('', batch.to_dict())
  return out


def pack(obj) -> bytes:
  r"""``obj`` as bytes: tensors put on a queue as they are would be shared
  memory that dies with the process that sent them."""
  buffer = io.BytesIO()
  torch.save(obj, buffer)
  return buffer.getvalue()


def unpack(data: bytes):
  return torch.load(io.BytesIO(data), weights_only=False)


def assert_same_batches(got, want):
  assert len(got) == len(want), f'{len(got)} batches, the uninterrupted run {len(want)}'
  for i, (g, w) in enumerate(zip(got, want)):
    assert g.keys() == w.keys(), f'batch {i}: fields {sorted(g)} vs {sorted(w)}'
    for key in w:
      assert torch.equal(g[key], w[key]), f'batch {i}: {key} differs'


def rest_of_run(loader, epochs: int = 2) -> list:
  r"""The batches of ``epochs`` iterations of ``loader`` (the first one
  resumes where a loaded state left off)."""
  return [flatten(batch) for _ in range(epochs) for batch in loader]


def uninterrupted(loader) -> tuple:
  r"""Epoch 0 whole, then epoch 1 with a state taken after
  ``TAKEN_AFTER`` batches; returns (state, the batches after it through
  epoch 2)."""
  for _ in loader:
    pass
  it = iter(loader)
  for _ in range(TAKEN_AFTER):
    next(it)
  state = json.loads(json.dumps(loader.state_dict()))  # plain data
  # (a for loop over ``it`` would call iter() again: a new epoch)
  rest = [flatten(next(it)) for _ in range(len(loader) - TAKEN_AFTER)]
  with pytest.raises(StopIteration):
    next(it)
  return state, rest + [flatten(batch) for batch in loader]


# -- local loaders ------------------------------------------------------------


def local_dataset(hetero: bool) -> Dataset:
  g = torch.Generator().manual_seed(0)
  ds = Dataset(edge_dir='out')
  if hetero:
    ds.init_graph(
      {
        ('user', 'buys', 'item'): torch.stack(
          [torch.randint(0, 40, (300,), generator=g), torch.randint(0, 50, (300,), generator=g)]
        ),
        ('item', 'rev', 'user'): torch.stack(
          [torch.randint(0, 50, (300,), generator=g), torch.randint(0, 40, (300,), generator=g)]
        ),
      },
      graph_mode='CPU',
    )
    ds.init_node_features(
      {'user': torch.randn(40, 4, generator=g), 'item': torch.randn(50, 4, generator=g)}
    )
  else:
    ds.init_graph(torch.randint(0, 80, (2, 600), generator=g), graph_mode='CPU')
    ds.init_node_features(torch.randn(80, 4, generator=g))
    ds.init_node_labels(torch.randint(0, 3, (80,), generator=g))
  return ds


def local_loader(kind: str, seed=7):
  ds = local_dataset(kind == 'hetero')
  common = dict(batch_size=8, shuffle=True, device='cpu', seed=seed)
  if kind == 'hetero':
    return NeighborLoader(ds, [3, 2], ('user', torch.arange(40)), **common)
  if kind == 'link':
    edges = ds.get_graph().topo.to_coo()
    return LinkNeighborLoader(
      ds, [3, 2], edge_label_index=torch.stack(edges[:2])[:, :100],
      neg_sampling=NegativeSampling('binary', 1), with_edge=True, **common,
    )  # fmt: skip
  if kind == 'subgraph':
    return SubGraphLoader(ds, torch.arange(60), [2], with_edge=True, **common)
  return NeighborLoader(ds, [3, 2], torch.arange(70), with_edge=True, **common)


def resume_local(kind, seed, state, results):
  try:
    torch.manual_seed(12345)  # unlike the first run's: the state carries the seed
    loader = local_loader(kind, seed)
    loader.load_state_dict(state)
    results.put(('ok', pack(rest_of_run(loader))))
  except Exception:
    results.put((traceback.format_exc(), None))


@pytest.mark.parametrize(
  'kind,seed',
  [('node', 7), ('node', None), ('hetero', 7), ('link', 7), ('subgraph', None)],
)
def test_local_loader_resumes_in_a_fresh_process(kind, seed):
  torch.manual_seed(0)
  state, want = uninterrupted(local_loader(kind, seed))
  results = SPAWN.Queue()
  [(status, got)] = run_spawned(
    [SPAWN.Process(target=resume_local, args=(kind, seed, state, results))], results
  )
  assert status == 'ok', status
  assert_same_batches(unpack(got), want)


def test_state_at_an_epochs_end_resumes_with_the_next_epoch():
  loader = local_loader('node')
  first = [flatten(b) for b in loader]
  state = loader.state_dict()
  want = [flatten(b) for b in loader]
  resumed = local_loader('node')
  resumed.load_state_dict(state)
  got = [flatten(b) for b in resumed]
  assert_same_batches(got, want)
  assert not all(torch.equal(a['/n_id'], b['/n_id']) for a, b in zip(first, want)), 'reshuffled'


def test_bad_states_are_refused_by_name():
  loader = local_loader('node')
  next(iter(loader))
  state = loader.state_dict()
  other_size = NeighborLoader(
    local_dataset(False), [3, 2], torch.arange(70), batch_size=16, device='cpu'
  )
  with pytest.raises(ValueError, match='another number of batches|another batch size'):
    other_size.load_state_dict(state)
  other_seeds = NeighborLoader(
    local_dataset(False), [3, 2], torch.arange(1, 71), batch_size=8, device='cpu'
  )
  with pytest.raises(ValueError, match='another dataset or other seeds'):
    other_seeds.load_state_dict(state)
  with pytest.raises(ValueError, match='format version 99'):
    local_loader('node').load_state_dict({**state, 'version': 99})
  with pytest.raises(ValueError, match='not a graphlearn_torch loader state'):
    local_loader('node').load_state_dict({'epoch': 0})
  with pytest.raises(ValueError, match='another dataset'):
    local_loader('hetero').load_state_dict(state)


def test_a_state_of_another_world_size_rank_or_servers_is_refused():
  from graphlearn_torch.batch import LoaderProgress

  ours = {'dataset': 'd', 'batch_size': 8, 'world_size': 2, 'rank': 0, 'servers': [0, 1]}
  state = LoaderProgress(10, ours, seed=1).state_dict()
  for key, value, what in (
    ('world_size', 4, 'another world size'),
    ('rank', 1, 'another rank'),
    ('servers', [0], 'other servers'),
  ):
    loaded = LoaderProgress(10, {**ours, key: value}, seed=2)
    with pytest.raises(ValueError, match=f'{what}: its {key} is'):
      loaded.load_state_dict(state)
    assert loaded.seed == 2, 'nothing taken from a refused state'


# -- distributed loaders ----------------------------------------------------------


def dist_loader(dist, ds, rank, options, seeds=None, client=False):
  seeds = ds.train_idx if seeds is None else seeds
  return dist.DistNeighborLoader(
    None if client else ds, [3, 2], seeds, batch_size=8, shuffle=True, with_edge=True,
    collect_features=True, worker_options=options, random_seed=None,
  )  # fmt: skip


def run_trainer(rank, port, root, mode, state, results):
  r"""A worker-mode trainer: the uninterrupted run (``state`` None) or the
  resumed one."""
  dist = glt.distributed
  torch.manual_seed(100 * rank + (0 if state is None else 1))  # seeds differ: the state's wins
  try:
    dist.init_worker_group(2, rank, 'trainer')
    if mode == 'collocated':
      dist.init_rpc('127.0.0.1', port, num_rpc_threads=4, rpc_timeout=60)
      options = dist.CollocatedDistSamplingWorkerOptions(prefetch_size=3)
    else:
      options = dist.MpDistSamplingWorkerOptions(
        num_workers=2, worker_concurrency=2, master_addr='127.0.0.1', master_port=port,
        rpc_timeout=60, channel_size='16MB',
      )  # fmt: skip
    ds = dist.DistDataset(edge_dir='out').load(root, rank, graph_mode='CPU')
    loader = dist_loader(dist, ds, rank, options)
    if state is None:
      results.put((rank, 'ok', pack(uninterrupted(loader))))
    else:
      loader.load_state_dict(state)
      results.put((rank, 'ok', pack(rest_of_run(loader))))
    loader.shutdown()
  except Exception:
    results.put((rank, traceback.format_exc(), None))
  finally:
    dist.shutdown_rpc(graceful=True, timeout=30)


def run_server(rank, port, root, results):
  dist = glt.distributed
  try:
    ds = dist.DistDataset(edge_dir='out').load(root, rank, graph_mode='CPU')
    dist.init_server(2, rank, ds, '127.0.0.1', port, num_clients=1, request_timeout=60)
    dist.wait_and_shutdown_server(timeout=TIMEOUT_S)
    results.put((f'server {rank}', 'ok', None))
  except Exception:
    results.put((f'server {rank}', traceback.format_exc(), None))


def run_client(rank, port, root, mode, state, results):
  dist = glt.distributed
  torch.manual_seed(0 if state is None else 1)
  try:
    dist.init_client(2, 1, 0, '127.0.0.1', port, request_timeout=60)
    seeds = torch.cat([
      dist.DistDataset(edge_dir='out').load(root, p, graph_mode='CPU').train_idx for p in (0, 1)
    ])  # fmt: skip
    options = dist.RemoteDistSamplingWorkerOptions(
      num_workers=2, worker_concurrency=2, prefetch_size=2, rpc_timeout=60
    )
    loader = dist_loader(dist, None, 0, options, seeds=seeds, client=True)
    if state is None:
      results.put(('client', 'ok', pack(uninterrupted(loader))))
    else:
      loader.load_state_dict(state)
      results.put(('client', 'ok', pack(rest_of_run(loader))))
    loader.shutdown()
  except Exception:
    results.put(('client', traceback.format_exc(), None))
  finally:
    dist.shutdown_client()


def run_dist_job(root, mode, states=None):
  r"""One job of ``mode``; returns its reports by process. ``states``: the
  loader state of each trainer (or of the client) to resume from."""
  port = free_port()
  results = SPAWN.Queue()
  if mode == 'server':
    procs = [SPAWN.Process(target=run_server, args=(r, port, root, results)) for r in (0, 1)]
    state = states['client'] if states else None
    procs.append(SPAWN.Process(target=run_client, args=(0, port, root, mode, state, results)))
  else:
    procs = [
      SPAWN.Process(
        target=run_trainer, args=(r, port, root, mode, states[r] if states else None, results)
      )
      for r in (0, 1)
    ]
  reports = {}
  for who, status, found in run_spawned(procs, results):
    assert status == 'ok', f'{who}:\n{status}'
    reports[who] = found
  return {k: unpack(v) for k, v in reports.items() if v is not None}


@pytest.mark.parametrize('mode', ['collocated', 'mp', 'server'])
def test_dist_loader_resumes_in_a_fresh_job(tmp_path, mode):
  partition(str(tmp_path), 2, hetero=False)
  first = run_dist_job(str(tmp_path), mode)
  resumed = run_dist_job(str(tmp_path), mode, {who: state for who, (state, _) in first.items()})
  assert resumed.keys() == first.keys()
  for who, (_, want) in first.items():
    assert len(want) > TAKEN_AFTER
    lost, repeated = lost_and_repeated(resumed[who], want)
    print(f'{mode} {who}: {len(want)} batches after the state; lost {lost}, repeated {repeated}')
    assert_same_batches(resumed[who], want)


def run_collocated_three_ways(rank, port, root, results):
  r"""A collocated trainer's epoch sampled three ways, the same seed: on the
  calling thread (no prefetching), on the event loop's thread (asked from
  inside a running event loop, as in a notebook, where no other loop can
  run), and prefetched; with whether the loop's thread ran."""
  dist = glt.distributed
  try:
    dist.init_worker_group(2, rank, 'trainer')
    dist.init_rpc('127.0.0.1', port, num_rpc_threads=4, rpc_timeout=60)
    ds = dist.DistDataset(edge_dir='out').load(root, rank, graph_mode='CPU')

    def epoch(prefetch):
      options = dist.CollocatedDistSamplingWorkerOptions(prefetch_size=prefetch)
      loader = dist.DistNeighborLoader(
        ds, [3, 2], ds.train_idx, batch_size=8, shuffle=True, with_edge=True,
        collect_features=True, worker_options=options, random_seed=5,
      )  # fmt: skip
      batches, loop_thread = [], False
      for batch in loader:
        batches.append(flatten(batch))
        loop_thread |= any(t.name == 'glt-event-loop' for t in threading.enumerate())
      loader.shutdown()
      return batches, loop_thread

    async def from_a_running_loop():
      return epoch(0)

    ways = (epoch(0), asyncio.run(from_a_running_loop()), epoch(2))
    results.put((rank, 'ok', pack(ways)))
  except Exception:
    results.put((rank, traceback.format_exc(), None))
  finally:
    dist.shutdown_rpc(graceful=True, timeout=30)


def test_collocated_batches_are_the_same_on_either_thread(tmp_path):
  partition(str(tmp_path), 2, hetero=False)
  port, results = free_port(), SPAWN.Queue()
  procs = [
    SPAWN.Process(target=run_collocated_three_ways, args=(r, port, str(tmp_path), results))
    for r in (0, 1)
  ]
  for rank, status, found in run_spawned(procs, results):
    assert status == 'ok', f'trainer {rank}:\n{status}'
    (here, here_thread), (in_loop, in_loop_thread), (prefetched, _) = unpack(found)
    assert not here_thread and in_loop_thread
    assert len(here) > 3
    assert_same_batches(in_loop, here)
    assert_same_batches(prefetched, here)


def lost_and_repeated(got, want):
  r"""How many of the uninterrupted run's batches the resumed one lacks,
  and how many it has beyond them (by their seeds' input ids, per epoch)."""

  def keys(batches):
    epoch, seen, out = 0, set(), []
    for batch in batches:
      key = tuple(batch['/input_id'].tolist())
      if key in seen:  # a seed set seen this epoch again: the next epoch
        epoch, seen = epoch + 1, set()
      seen.add(key)
      out.append((epoch, key))
    return out

  want_keys, got_keys = keys(want), keys(got)
  lost = len(set(want_keys) - set(got_keys))
  repeated = len(got_keys) - len(set(got_keys)) + len(set(got_keys) - set(want_keys))
  return lost, repeated


# -- checkpoints and the whole job -------------------------------------------------


def test_checkpoint_carries_the_loaders_and_the_random_state(tmp_path):
  model = torch.nn.Linear(4, 2)
  opt = torch.optim.Adam(model.parameters())
  loader = local_loader('node', seed=None)
  next(iter(loader))
  glt.utils.save_ckpt(3, str(tmp_path), model, opt, epoch=0.1, loaders={'train': loader})
  want_draw = torch.rand(3)
  want = [flatten(next(loader)) for _ in range(2)]
  fresh = local_loader('node', seed=None)
  torch.manual_seed(99)
  assert glt.utils.load_ckpt(3, str(tmp_path), model, opt, loaders={'train': fresh}) == 0.1
  assert torch.equal(torch.rand(3), want_draw), "torch's random state restored"
  assert_same_batches([flatten(next(iter(fresh))) for _ in range(1)] + [flatten(next(fresh))], want)
  with pytest.raises(KeyError, match="no state of loaders \\['test'\\]"):
    glt.utils.load_ckpt(3, str(tmp_path), model, opt, loaders={'train': fresh, 'test': fresh})
