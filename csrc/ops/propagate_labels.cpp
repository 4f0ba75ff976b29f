// glt::propagate_labels_(src, dst, weight, start, order, label, node_weight, load, cap, salt,
//                         move_on_tie) -> (moved, gain)
//
// One block of a pass of size-bounded label propagation, node by node: the
// streaming partitioner's clustering (labels are clusters) and refinement
// (labels are partitions). The block holds the edges out of the nodes
// [start, start + order.numel()): `src` (int64, less `start`), `dst` (int64
// global ids) and `weight` (int64, or None for ones). The nodes are visited
// in `order` (a permutation of the block's local ids); each takes the label
// its edges weigh most into, among the labels l that stay within `cap`
// (load[l] + node_weight[node] <= cap in every column), when that weighs
// more than its own label. Ties between other labels go to the one with the
// largest splitmix64(label ^ salt); with `move_on_tie`, a node also leaves
// its own label for one that weighs as much and has a larger key (so that,
// with one salt for every block, clusters of equal pull merge in one
// direction instead of stalling). Every decision sees the moves before it,
// so the gain of a move is exact. Updates `label` ([nodes], int64) and
// `load` ([labels, columns], int64) in place; returns the nodes moved and
// the summed edge weight the moves brought inside their labels (the drop of
// the undirected cut weight).
#include <torch/library.h>

TORCH_LIBRARY_FRAGMENT(glt, m) {
  m.def(
      "propagate_labels_(Tensor src, Tensor dst, Tensor? weight, int start, Tensor order, "
      "Tensor(a!) label, Tensor node_weight, Tensor(b!) load, Tensor cap, int salt, "
      "bool move_on_tie) -> (int, int)");
}
