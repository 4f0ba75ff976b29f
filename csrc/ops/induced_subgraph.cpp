// glt::induced_subgraph(indptr, indices, edge_ids?, nodes)
//     -> (local rows, local cols, edge ids)
//
// The edges among `nodes` (unique int64 ids): every stored entry (v, u) with
// both ends in the set, as positions in `nodes`, row by row of `nodes` and
// each row's entries in stored order; with the edges' ids from `edge_ids`
// (empty without). A node past the topology's rows has no entries.
#include <torch/library.h>

TORCH_LIBRARY_FRAGMENT(glt, m) {
  m.def(
      "induced_subgraph(Tensor indptr, Tensor indices, Tensor? edge_ids, Tensor nodes) -> "
      "(Tensor, Tensor, Tensor)");
}
