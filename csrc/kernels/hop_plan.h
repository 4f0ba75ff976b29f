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

// More topologies for one request of a hop (a distributed hop: the
// partitions held here), and the neighbors of some of its seeds given (drawn
// by peers over RPC): seed i draws from the request's topology part[i] (0:
// its own, k > 0: indptrs[k - 1], ...) with key rng_seeds[k - 1] (the
// request's own for 0) and the stream of its rank among that topology's
// seeds, as drawing each topology's seeds apart does; with `given`, the last
// topology holds given neighbors, a row by seed index, which its seeds take
// whole and in order. The hop is drawn and added in seed order, as the
// pieces stitched would be.
struct HopPieces {
  std::vector<at::Tensor> indptrs, indices;
  std::vector<std::optional<at::Tensor>> edge_ids, edge_weights;
  std::vector<int64_t> rng_seeds;
  at::Tensor part;  // int32, one a seed
  bool given = false;
};

// Request e draws up to fanouts[e] neighbors (-1: all) of srcs[e] (of node
// type src_types[e], already known to the inducer) from the CSR topology
// (indptrs[e], indices[e], optional edge_ids[e] and edge_weights[e]) with
// random seed rng_seeds[e]; its neighbors are of type nbr_types[e]; its
// edges' local ids follow row_prefixes[e] and col_prefixes[e]. Temporal
// requests give edge_times[e] (each entry's time, rows
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
  std::vector<std::optional<HopPieces>> pieces;  // empty, or one entry a request
  // The new nodes are returned on the host too, copied there with the
  // hop's sizes (a distributed hop groups the next hop's seeds there).
  bool fresh_on_host = false;

  size_t num_requests() const { return srcs.size(); }

  // Whether request e has pieces (HopPieces).
  bool has_pieces(size_t e) const { return !pieces.empty() && pieces[e].has_value(); }

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
    for (size_t size :
         {edge_times.size(), seed_times.size(), row_max_times.size(), pieces.size()}) {
      TORCH_CHECK_VALUE(size == 0 || size == n,
                        "sample_induce_next expects edge_times, seed_times, row_max_times and "
                        "pieces empty or with one entry per request (",
                        n, "), got a list of ", size);
    }
  }

  // Whether request e draws by time (gives edge_times[e]).
  bool timed(size_t e) const { return !edge_times.empty() && edge_times[e].has_value(); }

  // Request e's rows' last times, where given.
  std::optional<at::Tensor> row_max_time(size_t e) const {
    return row_max_times.empty() ? std::nullopt : row_max_times[e];
  }

  // Request e's seed times (contiguous), checked against its edge_times and
  // its `seeds`, where it draws by time; none otherwise. Raises where it
  // gives edge_times or seed_times but not both, or row_max_times (checked
  // too) without edge_times.
  std::optional<at::Tensor> checked_seed_times(size_t e, const at::Tensor& seeds) const {
    const bool by_time = timed(e);
    TORCH_CHECK_VALUE(by_time == (!seed_times.empty() && seed_times[e].has_value()), "request ",
                      e, " has edge_times or seed_times but not both");
    std::optional<at::Tensor> times;
    if (by_time) times = checked_time_args(*edge_times[e], indices[e], *seed_times[e], seeds);
    if (row_max_time(e).has_value()) {
      TORCH_CHECK_VALUE(by_time, "request ", e, " has row_max_times but no edge_times");
      check_row_max_time(row_max_times[e], *edge_times[e], indptrs[e]);
    }
    return times;
  }
};

// What a hop drawn and added at once returns: the nodes new to each type (in
// order of first appearance); per request its row_prefixes entry followed
// by the local seed index of each edge drawn, its col_prefixes entry
// followed by their local neighbor index, then sample_neighbors' outputs:
// the neighbors, the neighbors per seed, the edge ids (empty without them);
// last, with fresh_on_host, the new nodes of each type on the host (else
// no entry).
using HopOutputs =
    std::tuple<std::vector<at::Tensor>, std::vector<at::Tensor>, std::vector<at::Tensor>,
               std::vector<at::Tensor>, std::vector<at::Tensor>, std::vector<at::Tensor>,
               std::vector<at::Tensor>>;

}  // namespace kernels
}  // namespace glt
