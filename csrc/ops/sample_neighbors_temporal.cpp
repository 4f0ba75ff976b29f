// glt::sample_neighbors_temporal(indptr, indices, edge_ids?, edge_weights?,
//                                edge_time, seeds, seed_time, num_neighbors,
//                                replace, last, rng_seed, row_max_time?)
//     -> (neighbors, count per seed, edge ids)
//
// One hop of temporal neighbor sampling: sample_neighbors (see
// sample_neighbors.cpp) where seed i may only take edges of time <=
// seed_time[i]. Each row's entries must be sorted by `edge_time` (one time
// per entry of indices: the edge's own time, or its neighbor's for node-level
// time), so that the allowed edges are a prefix of the row, found by binary
// search inside the draw. `last` takes the num_neighbors latest allowed edges
// (PyG's temporal_strategy='last'), else the draw is among all of them
// ('uniform'). Times are int64 or float64, the seeds' of the edges' dtype.
// `row_max_time`, each row's last time (of an empty row: any), spares the
// seeds that may take their whole row a read of edge_time (data.graph's
// time-sorted Topology carries it).
#include <torch/library.h>

TORCH_LIBRARY_FRAGMENT(glt, m) {
  m.def(
      "sample_neighbors_temporal(Tensor indptr, Tensor indices, Tensor? edge_ids, "
      "Tensor? edge_weights, Tensor edge_time, Tensor seeds, Tensor seed_time, int num_neighbors, "
      "bool replace, bool last, int rng_seed, Tensor? row_max_time=None) "
      "-> (Tensor, Tensor, Tensor)");
}
