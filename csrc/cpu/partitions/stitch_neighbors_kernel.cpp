// Neighbor pieces stitched into seed order: the counts scattered to their
// seeds, a prefix sum for every seed's start, then each piece's runs copied
// to their starts, in parallel over its seeds.
#include <ATen/ATen.h>
#include <torch/library.h>

#include <algorithm>
#include <optional>
#include <vector>

#include "cpu/runtime/parallel.h"
#include "partition_checks.h"

namespace glt::cpu {
namespace {

// Every piece's own run starts (its runs one after another), checked
// against its neighbors; the counts go to their seeds in `count`.
std::vector<std::vector<int64_t>> piece_starts(const StitchPieces& pieces, int64_t num_seeds,
                                               int64_t* count) {
  std::vector<std::vector<int64_t>> piece_start(pieces.pos.size());
  std::vector<uint8_t> named(num_seeds, 0);  // a seed in two pieces would overrun its run
  for (size_t j = 0; j < pieces.pos.size(); ++j) {
    const int64_t n = pieces.pos[j].numel();
    const int64_t* p = pieces.pos[j].data_ptr<int64_t>();
    const int64_t* c = pieces.num[j].data_ptr<int64_t>();
    auto& start = piece_start[j];
    start.resize(n);
    int64_t total = 0;
    for (int64_t i = 0; i < n; ++i) {
      TORCH_CHECK_VALUE(p[i] >= 0 && p[i] < num_seeds, "stitch_neighbors: piece ", j,
                        " names seed ", p[i], ", outside [0, ", num_seeds, ")");
      TORCH_CHECK_VALUE(!named[p[i]], "stitch_neighbors: seed ", p[i], " is in two places");
      named[p[i]] = 1;
      TORCH_CHECK_VALUE(c[i] >= 0, "stitch_neighbors: piece ", j, " has a negative count");
      start[i] = total;
      total += c[i];
      count[p[i]] = c[i];
    }
    TORCH_CHECK_VALUE(total == pieces.nbr[j].numel(), "stitch_neighbors: piece ", j,
                      "'s counts sum to ", total, " but it has ", pieces.nbr[j].numel(),
                      " neighbors");
  }
  return piece_start;
}

std::tuple<at::Tensor, at::Tensor, std::optional<at::Tensor>> stitch_neighbors_kernel(
    int64_t num_seeds, at::TensorList positions, at::TensorList nbr_nums, at::TensorList nbrs,
    at::TensorList edges) {
  TORCH_CHECK_VALUE(num_seeds >= 0, "stitch_neighbors: num_seeds must be >= 0, got ", num_seeds);
  const StitchPieces pieces = checked_pieces(positions, nbr_nums, nbrs, edges);
  const bool with_edge = !pieces.edge.empty();
  auto nbr_num = at::zeros({num_seeds}, at::kLong);
  int64_t* count = nbr_num.data_ptr<int64_t>();
  const auto piece_start = piece_starts(pieces, num_seeds, count);
  std::vector<int64_t> seed_start(num_seeds);
  int64_t total = 0;
  for (int64_t s = 0; s < num_seeds; ++s) {
    seed_start[s] = total;
    total += count[s];
  }
  auto out_nbr = at::empty({total}, at::kLong);
  std::optional<at::Tensor> out_edge;
  if (with_edge) out_edge = at::empty({total}, at::kLong);
  int64_t* dst_nbr = out_nbr.data_ptr<int64_t>();
  int64_t* dst_edge = with_edge ? out_edge->data_ptr<int64_t>() : nullptr;
  for (size_t j = 0; j < pieces.pos.size(); ++j) {
    const int64_t* p = pieces.pos[j].data_ptr<int64_t>();
    const int64_t* c = pieces.num[j].data_ptr<int64_t>();
    const int64_t* src_nbr = pieces.nbr[j].data_ptr<int64_t>();
    const int64_t* src_edge = with_edge ? pieces.edge[j].data_ptr<int64_t>() : nullptr;
    const int64_t* start = piece_start[j].data();
    glt::cpu::parallel_for(0, pieces.pos[j].numel(), 2048, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        // copy_n, not memcpy: an empty piece of an empty output has null
        // pointers, which memcpy may not be given even for 0 bytes.
        std::copy_n(src_nbr + start[i], c[i], dst_nbr + seed_start[p[i]]);
        if (dst_edge) std::copy_n(src_edge + start[i], c[i], dst_edge + seed_start[p[i]]);
      }
    });
  }
  return {out_nbr, nbr_num, out_edge};
}

}  // namespace

TORCH_LIBRARY_IMPL(glt, CPU, m) { m.impl("stitch_neighbors", TORCH_FN(stitch_neighbors_kernel)); }

}  // namespace glt::cpu
