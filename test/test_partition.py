"""Partitioners round-trip: every edge, feature row, label and seed of the input
is found exactly once in the partitions, where the books say it is."""

import pickle
from multiprocessing.reduction import ForkingPickler

import numpy as np
import pytest
import torch
from conftest import random_edges

from graphlearn_torch.distributed import DistDataset
from graphlearn_torch.partition import (
  FrequencyPartitioner,
  MetisPartitioner,
  RandomPartitioner,
  RangePartitionBook,
  StreamingPartitioner,
  load_partition,
  read_meta,
)
from graphlearn_torch.partition.load import PartitionReader, book_tensor
from graphlearn_torch.partition.partition_book import owned_ids

NUM_PARTS = 3
PARTITIONERS = ('random', 'frequency', 'metis', 'streaming')


def make_partitioner(kind, root, num_nodes, edge_index, probs=None, **kwargs):
  args = (root, NUM_PARTS, num_nodes, edge_index)
  if kind == 'frequency':
    return FrequencyPartitioner(*args, probs, cache_ratio=0.1, chunk_size=64, **kwargs)
  cls, extra = {
    'random': (RandomPartitioner, {'seed': 0}),
    'metis': (MetisPartitioner, {}),
    'streaming': (StreamingPartitioner, {'max_block_edges': 300}),  # several blocks a graph
  }[kind]
  return cls(*args, **extra, **kwargs)


def random_probs(num_nodes, seed):
  g = torch.Generator().manual_seed(seed)
  return [
    torch.rand(num_nodes, generator=g) * (torch.rand(num_nodes, generator=g) < 0.5)
    for _ in range(NUM_PARTS)
  ]


class TypeData:
  """The input of one node type or edge type, for checking."""

  def __init__(self, **kw):
    self.__dict__.update(kw)


def check_type_roundtrip(reader, parts, ntype_data, etype_data, strategy, probs=None):
  """Checks the partitions of one dataset against the input, type by type.

  ``parts[p]`` is load_partition's tuple; the dicts map types to TypeData.
  """
  hetero = reader.hetero

  def pick(x, key):
    return x[key] if hetero else x

  # Node books and the original id of every written node id.
  original = {}
  books = {}
  for ntype, nd in ntype_data.items():
    book = pick(parts[0][5], ntype)
    books[ntype] = book_tensor(book)
    assert books[ntype].numel() == nd.num_nodes
    node_map = reader.load(f'node_map{"/" + ntype if hetero else ""}.npy', required=False)
    if isinstance(book, RangePartitionBook):
      assert node_map is not None
      # Partition p owns [start, end) of the new ids: the book's ranges.
      for p, (start, end) in enumerate(book.partition_ranges):
        assert (books[ntype][start:end] == p).all()
      original[ntype] = node_map
      assert torch.equal(torch.sort(node_map).values, torch.arange(nd.num_nodes))
    else:
      assert node_map is None
      original[ntype] = torch.arange(nd.num_nodes)

  # Edges: the union of the partitions is exactly the input.
  for etype, ed in etype_data.items():
    src_t, dst_t = etype[0], etype[-1]
    seen_eids = []
    for p, part in enumerate(parts):
      g = pick(part[2], etype)
      eids = g.eids
      rows, cols = original[src_t][g.edge_index[0]], original[dst_t][g.edge_index[1]]
      assert torch.equal(rows, ed.rows[eids]) and torch.equal(cols, ed.cols[eids])
      if ed.weights is not None:
        assert torch.equal(g.weights, ed.weights[eids])
      owner_side = g.edge_index[0] if strategy == 'by_src' else g.edge_index[1]
      owner_type = src_t if strategy == 'by_src' else dst_t
      assert (books[owner_type][owner_side] == p).all()
      edge_pb = pick(part[6], etype)
      assert (edge_pb[eids] == p).all()
      if ed.feats is not None:
        ef = pick(part[4], etype)
        assert torch.equal(torch.sort(ef.ids).values, torch.sort(eids).values)
        assert torch.equal(ef.feats, ed.feats[ef.ids])
      seen_eids.append(eids)
    all_eids = torch.cat(seen_eids)
    assert torch.equal(torch.sort(all_eids).values, torch.arange(ed.rows.numel()))

  # Node features: each row in the partition its book names, identical.
  for ntype, nd in ntype_data.items():
    if nd.feats is None:
      continue
    for p, part in enumerate(parts):
      fd = pick(part[3], ntype)
      owned = owned_ids(pick(part[5], ntype), p)
      assert torch.equal(fd.ids, owned)
      assert torch.equal(fd.feats, nd.feats[original[ntype][fd.ids]])
      if probs is None:
        assert fd.cache_ids is None
        continue
      # Cache: the hottest rows of other partitions, in hotness order.
      cache_orig = original[ntype][fd.cache_ids]
      hot = probs[ntype][p].clone()
      assert (books[ntype][fd.cache_ids] != p).all()
      assert torch.equal(fd.cache_feats, nd.feats[cache_orig])
      hot[original[ntype][owned]] = -1
      k = fd.cache_ids.numel()
      assert k == min(int(nd.num_nodes * 0.1), int((hot > 0).sum()))
      expected = torch.topk(hot, k).values
      assert torch.allclose(hot[cache_orig], expected)


def homo_inputs(num_nodes=300, num_edges=2000, seed=0):
  edges = random_edges(num_nodes, num_nodes, num_edges, seed)
  g = torch.Generator().manual_seed(seed)
  nd = TypeData(
    num_nodes=num_nodes,
    feats=torch.randn(num_nodes, 5, generator=g),
    labels=torch.randint(0, 4, (num_nodes,), generator=g),
  )
  ed = TypeData(
    rows=edges[0],
    cols=edges[1],
    weights=torch.rand(num_edges, generator=g),
    feats=torch.randn(num_edges, 3, generator=g),
  )
  return nd, ed


@pytest.mark.parametrize('kind', PARTITIONERS)
@pytest.mark.parametrize('book', ['tensor', 'range'])
@pytest.mark.parametrize('strategy', ['by_src', 'by_dst'])
def test_homo_roundtrip(tmp_path, kind, book, strategy):
  nd, ed = homo_inputs()
  train = torch.randperm(nd.num_nodes)[:60]
  probs = random_probs(nd.num_nodes, 1) if kind == 'frequency' else None
  summary = make_partitioner(
    kind,
    str(tmp_path),
    nd.num_nodes,
    torch.stack([ed.rows, ed.cols]),
    probs=probs,
    node_feat=nd.feats,
    edge_feat=ed.feats,
    edge_weights=ed.weights,
    edge_assign_strategy=strategy,
    node_labels=nd.labels,
    node_split=(train, None, None),
    book=book,
    progress=False,
  ).partition()
  reader = PartitionReader(str(tmp_path), verify=True)
  parts = [load_partition(str(tmp_path), p, verify=True) for p in range(NUM_PARTS)]
  assert all(part[0] == NUM_PARTS for part in parts)
  check_type_roundtrip(
    reader,
    parts,
    {'_N': nd},
    {('_N', '_E', '_N'): ed},
    strategy,
    {'_N': probs} if probs else None,
  )
  # Summary figures agree with the data.
  pb = book_tensor(parts[0][5])
  original = reader.load('node_map.npy', required=False)
  original = torch.arange(nd.num_nodes) if original is None else original
  pb_orig = torch.empty_like(pb)
  pb_orig[original] = pb
  assert summary.nodes['_N'] == torch.bincount(pb, minlength=NUM_PARTS).tolist()
  assert summary.cut_edges == int((pb_orig[ed.rows] != pb_orig[ed.cols]).sum())
  # Labels and seeds follow the (possibly renumbered) ids.
  labels = reader.load('labels.npy')
  assert torch.equal(labels, nd.labels[original])
  seeds = []
  for p in range(NUM_PARTS):
    ids = reader.load(f'train_idx/part{p}.npy')
    assert (pb[ids] == p).all()
    seeds.append(original[ids])
  assert torch.equal(torch.sort(torch.cat(seeds)).values, torch.sort(train).values)
  assert reader.load('val_idx/part0.npy', required=False) is None


@pytest.mark.parametrize('kind', PARTITIONERS)
@pytest.mark.parametrize('book', ['tensor', 'range'])
def test_hetero_roundtrip(tmp_path, kind, book):
  sizes = {'paper': 200, 'author': 120}
  etypes = [
    ('author', 'writes', 'paper'),
    ('paper', 'cites', 'paper'),
    ('paper', 'rev_writes', 'author'),
  ]
  g = torch.Generator().manual_seed(3)
  ntype_data = {
    t: TypeData(num_nodes=n, feats=torch.randn(n, 4, generator=g), labels=None)
    for t, n in sizes.items()
  }
  ntype_data['author'].feats = None  # a node type without features
  etype_data = {}
  for i, e in enumerate(etypes):
    edges = random_edges(sizes[e[0]], sizes[e[-1]], 700, 10 + i)
    etype_data[e] = TypeData(rows=edges[0], cols=edges[1], weights=None, feats=None)
  etype_data[etypes[1]].feats = torch.randn(700, 2, generator=g)
  probs = {t: random_probs(n, 5) for t, n in sizes.items()} if kind == 'frequency' else None
  make_partitioner(
    kind,
    str(tmp_path),
    sizes,
    {e: torch.stack([d.rows, d.cols]) for e, d in etype_data.items()},
    probs=probs,
    node_feat={'paper': ntype_data['paper'].feats},
    edge_feat={etypes[1]: etype_data[etypes[1]].feats},
    book=book,
    progress=False,
  ).partition()
  meta = read_meta(str(tmp_path))
  assert meta['data_cls'] == 'hetero' and sorted(meta['node_types']) == sorted(sizes)
  reader = PartitionReader(str(tmp_path), verify=True)
  parts = [load_partition(str(tmp_path), p) for p in range(NUM_PARTS)]
  check_type_roundtrip(reader, parts, ntype_data, etype_data, 'by_src', probs)


def test_dist_dataset_load_homo(tmp_path):
  nd, ed = homo_inputs(seed=4)
  train = torch.arange(0, 300, 5)
  RandomPartitioner(
    str(tmp_path),
    NUM_PARTS,
    nd.num_nodes,
    torch.stack([ed.rows, ed.cols]),
    node_feat=nd.feats,
    edge_weights=ed.weights,
    node_labels=nd.labels,
    node_split=(train, None, None),
    seed=1,
    progress=False,
  ).partition()
  for p in range(NUM_PARTS):
    ds = DistDataset(edge_dir='out').load(str(tmp_path), p, graph_mode='CPU')
    assert ds.num_partitions == NUM_PARTS and ds.partition_idx == p
    owned = owned_ids(ds.node_pb, p)
    assert torch.equal(ds.node_features[owned], nd.feats[owned])
    assert torch.equal(ds.node_labels, nd.labels)
    assert (ds.node_pb[ds.train_idx] == p).all()
    # The local CSR holds exactly the out-edges of owned nodes.
    topo = ds.graph.topo
    assert topo.row_count == nd.num_nodes
    mine = ds.node_pb[ed.rows] == p
    assert topo.edge_count == int(mine.sum())
    indptr, indices = topo.indptr, topo.indices
    for v in owned[:20].tolist():
      got = sorted(indices[indptr[v] : indptr[v + 1]].tolist())
      assert got == sorted(ed.cols[ed.rows == v].tolist())
    # Rows of other partitions are not here: a clear error.
    other = torch.nonzero(ds.node_pb.tensor != p).view(-1)[:1]
    with pytest.raises(ValueError, match='no feature row'):
      ds.node_features[other]


def test_frequency_cache_in_dist_dataset(tmp_path):
  nd, ed = homo_inputs(seed=6)
  probs = random_probs(nd.num_nodes, 7)
  FrequencyPartitioner(
    str(tmp_path),
    NUM_PARTS,
    nd.num_nodes,
    torch.stack([ed.rows, ed.cols]),
    probs,
    node_feat=nd.feats,
    cache_ratio=0.2,
    book='range',
    progress=False,
  ).partition()
  for p in range(NUM_PARTS):
    ds = DistDataset().load(str(tmp_path), p, graph_mode='CPU')
    original = ds.node_map()
    local = torch.nonzero(ds.node_feat_pb.tensor == p).view(-1)
    assert local.numel() > owned_ids(ds.node_pb, p).numel()  # owned rows + the cache
    assert torch.equal(ds.node_features[local], nd.feats[original[local]])
    assert ds.features_joined
    check_joined_features_travel_shared(ds, local)


def check_joined_features_travel_shared(ds, local):
  r"""A DistDataset pickled for another process takes its joined feature
  table along in shared memory (the receiver neither joins nor holds a copy
  of its own): a write through one is seen through the other."""
  copy = pickle.loads(ForkingPickler.dumps(ds))
  assert copy.features_joined
  assert torch.equal(copy.node_feat_pb.tensor, ds.node_feat_pb.tensor)
  assert torch.equal(copy.node_features[local], ds.node_features[local])
  table = ds.node_features.feature_tensor
  table[0] += 1
  assert torch.equal(copy.node_features.feature_tensor[0], table[0])


def test_balance_train_and_edges(tmp_path):
  num_nodes = 3000
  # A graph with locality: ids close to each other are linked.
  g = torch.Generator().manual_seed(0)
  src = torch.randint(0, num_nodes, (30000,), generator=g)
  dst = (src + torch.randint(-30, 31, (30000,), generator=g)).clamp(0, num_nodes - 1)
  # Training seeds crowd in the first third of the id range.
  train = torch.cat([torch.arange(0, 1000, 2), torch.arange(1000, 3000, 20)])
  edge_index = torch.stack([src, dst])
  plain = MetisPartitioner(
    str(tmp_path / 'a'), 4, num_nodes, edge_index, progress=False
  ).partition()
  balanced = MetisPartitioner(
    str(tmp_path / 'b'),
    4,
    num_nodes,
    edge_index,
    node_split=(train, None, None),
    balance_train=True,
    balance_edges=True,
    progress=False,
  ).partition()
  assert plain.train_nodes == {}
  assert balanced.node_balance() <= 1.05
  assert balanced.train_balance() <= 1.10
  assert balance_of(balanced.edges) <= 1.10
  assert balanced.cut_ratio < 0.25


def balance_of(counts_by_type):
  counts = np.array(list(counts_by_type.values())[0])
  return counts.max() / counts.mean()


def test_dist_dataset_load_hetero_and_label_file(tmp_path):
  sizes = {'paper': 150, 'author': 90}
  etype = ('author', 'writes', 'paper')
  edges = random_edges(90, 150, 600, 21)
  feats = torch.randn(150, 3)
  RandomPartitioner(
    str(tmp_path / 'p'),
    2,
    sizes,
    {etype: edges},
    node_feat={'paper': feats},
    edge_assign_strategy='by_dst',
    seed=0,
    progress=False,
  ).partition()
  labels = torch.arange(150) % 7
  np.save(tmp_path / 'paper_labels.npy', labels.numpy())
  for p in range(2):
    ds = DistDataset(edge_dir='in').load(
      str(tmp_path / 'p'),
      p,
      graph_mode='CPU',
      whole_node_label_file={'paper': str(tmp_path / 'paper_labels.npy')},
    )
    assert ds.is_hetero and set(ds.node_pb) == set(sizes)
    owned = owned_ids(ds.node_pb['paper'], p)
    assert torch.equal(ds.get_node_feature('paper')[owned], feats[owned])
    assert torch.equal(ds.get_node_label('paper'), labels)
    # In-edge (CSC) topology of the papers this partition owns, complete.
    topo = ds.get_graph(etype).topo
    assert topo.layout == 'CSC' and topo.row_count == 150 and topo.col_count == 90
    mine = ds.node_pb['paper'][edges[1]] == p
    assert topo.edge_count == int(mine.sum())


def brute_force_hotness(num_nodes, rows, cols, pb, seeds, fanouts, by_src):
  r"""Expected reads of every node when sampling from each partition's seeds:
  a visit hands each of the node's sampled-side neighbors min(1, k / degree)
  visits in the next hop; the reads of all hops add up. Python loops."""
  adj = {}
  for r, c in zip(rows.tolist(), cols.tolist()):
    seed, nbr = (r, c) if by_src else (c, r)
    adj.setdefault(seed, []).append(nbr)
  out = []
  for p in range(NUM_PARTS):
    visits = {v: 1.0 for v in seeds.tolist() if int(pb[v]) == p}
    hot = [0.0] * num_nodes
    for k in fanouts:
      nxt = {}
      for v, w in visits.items():
        nbrs = adj.get(v, [])
        for u in nbrs:
          nxt[u] = nxt.get(u, 0.0) + w * min(1.0, k / len(nbrs))
      visits = nxt
      for u, w in visits.items():
        hot[u] += w
    out.append(torch.tensor(hot))
  return out


@pytest.mark.parametrize('strategy', ['by_src', 'by_dst'])
def test_metis_cache_holds_the_hottest_remote_rows(tmp_path, strategy):
  nd, ed = homo_inputs(seed=8)
  train = torch.randperm(nd.num_nodes, generator=torch.Generator().manual_seed(9))[:120]
  MetisPartitioner(
    str(tmp_path),
    NUM_PARTS,
    nd.num_nodes,
    torch.stack([ed.rows, ed.cols]),
    node_feat=nd.feats,
    edge_assign_strategy=strategy,
    node_split=(train, None, None),
    cache_ratio=0.1,
    cache_num_neighbors=[3, 2],
    progress=False,
  ).partition()
  reader = PartitionReader(str(tmp_path))
  parts = [load_partition(str(tmp_path), p) for p in range(NUM_PARTS)]
  pb = book_tensor(parts[0][5])
  expected = brute_force_hotness(
    nd.num_nodes, ed.rows, ed.cols, pb, train, [3, 2], strategy == 'by_src'
  )
  assert not reader.hetero
  for p, part in enumerate(parts):
    fd = part[3]
    assert (pb[fd.cache_ids] != p).all(), 'only other partitions rows are cached'
    assert torch.equal(fd.cache_feats, nd.feats[fd.cache_ids])
    hot = expected[p].clone()
    hot[pb == p] = -1
    k = fd.cache_ids.numel()
    assert k == min(int(nd.num_nodes * 0.1), int((hot > 0).sum())) and k > 0
    assert torch.allclose(hot[fd.cache_ids], torch.topk(hot, k).values), 'hottest first'
