"""A small graph in IGBH's on-disk layout (the Illinois Graph Benchmark,
heterogeneous), as the RGAT benchmark reference reads it:

  <root>/<size>/processed/<ntype>/node_feat.npy          float32 [n, dim]
  <root>/<size>/processed/paper/node_label_19.npy         float32 [n_paper] (class ids)
  <root>/<size>/processed/<src>__<rel>__<dst>/edge_index.npy   int64 [E, 2]

Node types paper, author, institute, fos; relations paper__cites__paper,
paper__written_by__author, author__affiliated_to__institute and
paper__topic__fos. Papers fall into 19 planted classes: their features are a
class centroid plus noise, they cite mostly papers of their class, and their
topics are the fields of study of their class, so a heterogeneous GNN learns
the labels well above chance (1/19).

  python igbh_data.py --path ROOT [--dataset_size tiny] [--num_papers 1200]
"""

import argparse
import os

import numpy as np

NUM_CLASSES = 19
RELATIONS = {
  ('paper', 'cites', 'paper'),
  ('paper', 'written_by', 'author'),
  ('author', 'affiliated_to', 'institute'),
  ('paper', 'topic', 'fos'),
}


def write(root: str, num_papers: int, dim: int = 16, seed: int = 0) -> None:
  rng = np.random.default_rng(seed)
  counts = {'paper': num_papers, 'author': num_papers // 2, 'institute': 20, 'fos': 2 * NUM_CLASSES}
  label = rng.integers(0, NUM_CLASSES, num_papers)
  centroids = rng.normal(0, 1, (NUM_CLASSES, dim))
  feats = {t: rng.normal(0, 1, (n, dim)).astype(np.float32) for t, n in counts.items()}
  feats['paper'] = (centroids[label] + rng.normal(0, 1.5, (num_papers, dim))).astype(np.float32)
  by_class = [np.flatnonzero(label == c) for c in range(NUM_CLASSES)]
  papers = np.arange(num_papers)
  cites_same = np.array([rng.choice(by_class[c]) for c in np.repeat(label, 3)])
  cites_any = rng.integers(0, num_papers, num_papers)
  edges = {
    ('paper', 'cites', 'paper'): (
      np.concatenate([np.repeat(papers, 3), papers]),
      np.concatenate([cites_same, cites_any]),
    ),
    ('paper', 'written_by', 'author'): (
      np.repeat(papers, 2),
      rng.integers(0, counts['author'], 2 * num_papers),
    ),
    ('author', 'affiliated_to', 'institute'): (
      np.arange(counts['author']),
      rng.integers(0, counts['institute'], counts['author']),
    ),
    ('paper', 'topic', 'fos'): (
      np.repeat(papers, 2),
      np.repeat(label, 2) + NUM_CLASSES * rng.integers(0, 2, 2 * num_papers),
    ),
  }
  processed = os.path.join(root, 'processed')
  for ntype, x in feats.items():
    os.makedirs(os.path.join(processed, ntype), exist_ok=True)
    np.save(os.path.join(processed, ntype, 'node_feat.npy'), x)
  np.save(
    os.path.join(processed, 'paper', f'node_label_{NUM_CLASSES}.npy'), label.astype(np.float32)
  )
  for etype, (src, dst) in edges.items():
    path = os.path.join(processed, '__'.join(etype))
    os.makedirs(path, exist_ok=True)
    np.save(os.path.join(path, 'edge_index.npy'), np.stack([src, dst], axis=1).astype(np.int64))


if __name__ == '__main__':
  p = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  p.add_argument('--path', required=True)
  p.add_argument('--dataset_size', default='tiny')
  p.add_argument('--num_papers', type=int, default=1200)
  args = p.parse_args()
  write(os.path.join(args.path, args.dataset_size), args.num_papers)
