// One hop of neighbor sampling over a CSR (or CSC) topology: uniform with or
// without replacement, or weighted by edge weight (neighbor_draws.h), the
// chunks of seeds drawn in parallel. Each seed draws from its own random
// stream, so results do not depend on the number of threads.
#include <ATen/Parallel.h>
#include <torch/library.h>

#include "../checks.h"
#include "neighbor_draws.h"

namespace glt {
namespace {

template <typename index_t>
std::tuple<at::Tensor, at::Tensor, at::Tensor> sample_neighbors_typed(
    const at::Tensor& indptr, const at::Tensor& indices, const std::optional<at::Tensor>& edge_ids,
    const std::optional<at::Tensor>& edge_weights, const at::Tensor& seeds, int64_t k, bool replace,
    int64_t rng_seed) {
  const kernels::CsrView<index_t> g{
      indptr.data_ptr<index_t>(), indices.data_ptr<index_t>(),
      edge_ids.has_value() ? edge_ids->data_ptr<int64_t>() : nullptr,
      edge_weights.has_value() ? edge_weights->data_ptr<float>() : nullptr};
  draws::HopDraws<index_t> hop(g, seeds.data_ptr<int64_t>(), seeds.numel(), k, replace, rng_seed);
  at::parallel_for(0, hop.num_chunks(), 1, [&](int64_t first, int64_t last) {
    draws::Scratch scratch;
    for (int64_t c = first; c < last; ++c) hop.draw(c, scratch);
  });
  return {hop.nbrs, hop.counts, hop.eids};
}

}  // namespace

std::tuple<at::Tensor, at::Tensor, at::Tensor> sample_neighbors_kernel(
    const at::Tensor& indptr, const at::Tensor& indices, const std::optional<at::Tensor>& edge_ids,
    const std::optional<at::Tensor>& edge_weights, const at::Tensor& seeds, int64_t num_neighbors,
    bool replace, int64_t rng_seed) {
  const auto seed_t =
      checked_sampling_args(indptr, indices, edge_ids, edge_weights, seeds, num_neighbors);
  return AT_DISPATCH_INDEX_TYPES(indptr.scalar_type(), "sample_neighbors", [&] {
    return sample_neighbors_typed<index_t>(indptr, indices, edge_ids, edge_weights, seed_t,
                                           num_neighbors, replace, rng_seed);
  });
}

TORCH_LIBRARY_IMPL(glt, CPU, m) { m.impl("sample_neighbors", TORCH_FN(sample_neighbors_kernel)); }

}  // namespace glt
