// One hop's requests for an inducer that draws and adds them at once
// (sample_induce_next, on the CPU and on a device), and the check of its
// lists' lengths both make first.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <optional>
#include <tuple>
#include <vector>

#include "checks.h"

namespace glt {
namespace kernels {

// Request e draws up to fanouts[e] neighbors (-1: all) of srcs[e] (of node
// type src_types[e], already known to the inducer) from the CSR topology
// (indptrs[e], indices[e], optional edge_ids[e] and edge_weights[e]) with
// random seed rng_seeds[e]; its neighbors are of type nbr_types[e]; its
// edges' local ids follow row_prefixes[e] and col_prefixes[e]. Temporal
// requests (the CPU inducer's) give edge_times[e] (each entry's time, rows
// sorted by it), seed_times[e] (one per seed) and optionally
// row_max_times[e] (each row's last time); `last` takes the latest allowed
// entries. The time lists are empty or hold an entry per request.
struct HopPlan {
  std::vector<int64_t> src_types, nbr_types;
  std::vector<at::Tensor> srcs, indptrs, indices;
  std::vector<std::optional<at::Tensor>> edge_ids, edge_weights;
  std::vector<int64_t> fanouts;
  bool replace = false;
  std::vector<int64_t> rng_seeds;
  std::vector<at::Tensor> row_prefixes, col_prefixes;
  std::vector<std::optional<at::Tensor>> edge_times, seed_times, row_max_times;
  bool last = false;

  size_t num_requests() const { return srcs.size(); }

  // Raises a ValueError unless every list holds an entry per request (the
  // time lists: or none).
  void check_lists() const {
    const size_t n = num_requests();
    for (size_t size : {src_types.size(), nbr_types.size(), indptrs.size(), indices.size(),
                        edge_ids.size(), edge_weights.size(), fanouts.size(), rng_seeds.size(),
                        row_prefixes.size(), col_prefixes.size()}) {
      TORCH_CHECK_VALUE(size == n, "sample_induce_next expects one entry per request (", n,
                        ") in each list, got a list of ", size);
    }
    for (size_t size : {edge_times.size(), seed_times.size(), row_max_times.size()}) {
      TORCH_CHECK_VALUE(size == 0 || size == n,
                        "sample_induce_next expects edge_times, seed_times and row_max_times "
                        "empty or with one entry per request (",
                        n, "), got a list of ", size);
    }
  }

  // Whether request e draws by time (gives edge_times[e]).
  bool timed(size_t e) const { return !edge_times.empty() && edge_times[e].has_value(); }
};

// What a hop drawn and added at once returns: the nodes new to each type (in
// order of first appearance); per request its row_prefixes entry followed
// by the local seed index of each edge drawn, its col_prefixes entry
// followed by their local neighbor index, then sample_neighbors' outputs:
// the neighbors, the neighbors per seed, the edge ids (empty without them).
using HopOutputs =
    std::tuple<std::vector<at::Tensor>, std::vector<at::Tensor>, std::vector<at::Tensor>,
               std::vector<at::Tensor>, std::vector<at::Tensor>, std::vector<at::Tensor>>;

}  // namespace kernels
}  // namespace glt
