// One hop of temporal neighbor sampling on the CPU: each seed draws, as
// sample_neighbors does (neighbor_draws.h), among the entries of its row
// whose time is at most the seed's, found by binary search in the row's
// time-sorted entries while the hop is planned.
#include <ATen/Dispatch.h>
#include <torch/library.h>

#include "checks.h"
#include "cpu/sampling/neighbor_draws.h"

namespace glt::cpu {
namespace {

template <typename index_t, typename stamp_t>
std::tuple<at::Tensor, at::Tensor, at::Tensor> sample_temporal_typed(
    const at::Tensor& indptr, const at::Tensor& indices, const std::optional<at::Tensor>& edge_ids,
    const std::optional<at::Tensor>& edge_weights, const at::Tensor& edge_time,
    const at::Tensor& seeds, const at::Tensor& seed_time, int64_t k, bool replace, bool last,
    int64_t rng_seed, const std::optional<at::Tensor>& row_max_time) {
  const auto g = kernels::csr_view<index_t>(indptr, indices, edge_ids, edge_weights);
  const draws::TemporalWindow<index_t, stamp_t> window{
      g.indptr, edge_time.data_ptr<stamp_t>(),
      row_max_time.has_value() ? row_max_time->data_ptr<stamp_t>() : nullptr,
      seed_time.data_ptr<stamp_t>(), k, last};
  draws::HopDraws<index_t> hop(g, seeds.data_ptr<int64_t>(), seeds.numel(), k, replace, rng_seed,
                               window);
  hop.draw_all();
  return {hop.nbrs, hop.counts, hop.eids};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> sample_neighbors_temporal_kernel(
    const at::Tensor& indptr, const at::Tensor& indices, const std::optional<at::Tensor>& edge_ids,
    const std::optional<at::Tensor>& edge_weights, const at::Tensor& edge_time,
    const at::Tensor& seeds, const at::Tensor& seed_time, int64_t num_neighbors, bool replace,
    bool last, int64_t rng_seed, const std::optional<at::Tensor>& row_max_time) {
  const auto seed_t =
      checked_sampling_args(indptr, indices, edge_ids, edge_weights, seeds, num_neighbors,
                            /*check_seed_range=*/false);  // by HopDraws' plan
  const auto seed_time_t = checked_time_args(edge_time, indices, seed_time, seed_t);
  check_row_max_time(row_max_time, edge_time, indptr);
  return AT_DISPATCH_INDEX_TYPES(indptr.scalar_type(), "sample_neighbors_temporal", [&] {
    using idx_t = index_t;
    return GLT_DISPATCH_TIME_TYPES(edge_time.scalar_type(), "sample_neighbors_temporal", [&] {
      return sample_temporal_typed<idx_t, scalar_t>(indptr, indices, edge_ids, edge_weights,
                                                    edge_time, seed_t, seed_time_t, num_neighbors,
                                                    replace, last, rng_seed, row_max_time);
    });
  });
}

}  // namespace

TORCH_LIBRARY_IMPL(glt, CPU, m) {
  m.impl("sample_neighbors_temporal", TORCH_FN(sample_neighbors_temporal_kernel));
}

}  // namespace glt::cpu
