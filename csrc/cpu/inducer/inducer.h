// The CPU inducer: deduplicates and relabels the nodes met while sampling.
#pragma once

#include <ATen/ATen.h>

#include <optional>
#include <tuple>
#include <vector>

#include "cpu/inducer/id_map.h"
#include "kernels/batch_plan.h"
#include "kernels/hop_plan.h"

namespace glt::cpu {

// Deduplicates and relabels the nodes met while sampling several hops into
// one local id space per node type. A homogeneous graph has one node type.
class Inducer {
 public:
  // `num_nodes[t]` > 0 gives type t an id-indexed map over [0, num_nodes[t]).
  // `disjoint_bits` > 0: the nodes are disjoint sampling's keys
  // (seed << disjoint_bits) | id, and each batch's hash maps keep every
  // seed's keys in a region of their own (IdMap::group_keys).
  explicit Inducer(int64_t num_node_types, const std::vector<int64_t>& num_nodes = {},
                   int64_t disjoint_bits = 0);

  // Registers the seeds; returns them per type without duplicates, in order.
  std::vector<at::Tensor> init_nodes(const std::vector<at::Tensor>& seeds, bool distinct = false);

  // Adds one hop. For each sampled edge type e: seeds `srcs[e]` of type
  // `src_types[e]` (already known) with `nbr_nums[e]` neighbors each in
  // `nbrs[e]` of type `nbr_types[e]`. Returns (nodes new to each type, in
  // order of first appearance; local seed index per edge; local neighbor
  // index per edge). The local indices are written into `row_outs[e]` and
  // `col_outs[e]` when given (as slices of buffers that hold every hop).
  std::tuple<std::vector<at::Tensor>, std::vector<at::Tensor>, std::vector<at::Tensor>> induce_next(
      const std::vector<int64_t>& src_types, const std::vector<int64_t>& nbr_types,
      const std::vector<at::Tensor>& srcs, const std::vector<at::Tensor>& nbrs,
      const std::vector<at::Tensor>& nbr_nums, const std::vector<at::Tensor>& row_outs = {},
      const std::vector<at::Tensor>& col_outs = {});

  // Draws one hop (kernels::HopPlan) and adds it, in one pass: each chunk
  // of a request's draws is inserted as soon as it is drawn (while other
  // threads draw the next chunks) where the inserts are sequential, below 4
  // threads. Request e draws as the sample_neighbors op does with
  // rng_seeds[e] (temporal requests: as sample_neighbors_temporal does), and
  // the hop equals sample_neighbors then induce_next (kernels::HopOutputs).
  // Everything is checked before anything is inserted, but a neighbor id out
  // of range (a corrupt topology) may be met after part of the hop was
  // inserted: the inducer then forgets all nodes (reset) before it raises.
  // An inducer of disjoint keys takes `srcs[e]` as keys, draws from their
  // ids' rows and keys each neighbor into its seed's subgraph as it inserts
  // it.
  kernels::HopOutputs sample_induce_next(const kernels::HopPlan& plan);

  // Draws and adds every hop of a batch (kernels::BatchPlan, one topology a
  // request) in one call, as sample_induce_next hop by hop: the k-th request
  // with seeds takes the k-th key of plan.rng_seeds, one whose frontier is
  // empty draws nothing. Returns kernels::BatchOutputs, as the GPU's
  // sample_batch does (`replay`, its CUDA graphs, has no CPU meaning).
  kernels::BatchOutputs sample_batch(kernels::BatchPlan plan, bool replay = false);

  // Local ids of known nodes of type `node_type` (-1 for unknown ones).
  at::Tensor local_ids(int64_t node_type, const at::Tensor& ids) const;

  // Forgets all nodes, keeping the allocated memory for the next batch.
  void reset();
  int64_t num_node_types() const { return static_cast<int64_t>(maps_.size()); }

 private:
  void check_type(int64_t t) const;
  // Writes the local id of seed srcs[i] (of type t) at r[offsets[i],
  // offsets[i + 1]); `src` is srcs, contiguous.
  void write_rows(int64_t t, const at::Tensor& srcs, const at::Tensor& src, const int64_t* offsets,
                  int64_t* r) const;
  // The nodes each type added since it had first_fresh[t] (remembered).
  std::vector<at::Tensor> take_added(const std::vector<int64_t>& first_fresh);
  // Remembers `nodes` as the nodes type t just added, from local id `first`.
  void remember_added(int64_t t, const at::Tensor& nodes, int64_t first);
  // The local id of srcs[0] when `srcs` is, unchanged, the tensor of nodes
  // its type last added (whose local ids are consecutive); else -1.
  int64_t first_local_id_if_added(int64_t t, const at::Tensor& srcs) const;
  std::vector<IdMap> maps_;
  int64_t disjoint_bits_ = 0;
  struct Added {
    at::Tensor nodes;
    int64_t version = 0;
    int64_t first = -1;
  };
  std::vector<Added> added_;  // per node type
};

}  // namespace glt::cpu
