// One hop of neighbor sampling over a CSR (or CSC) topology: uniform with or
// without replacement, or weighted by edge weight (neighbor_draws.h), the
// chunks of seeds drawn in parallel. Each seed draws from its own random
// stream, so results do not depend on the number of threads.
// sample_neighbors_partitioned draws the seeds of several partitions' topologies
// (those of one host) in one hop, as sampling each partition's seeds apart
// and stitching them back into seed order would.
#include <ATen/Dispatch.h>
#include <torch/library.h>

#include <utility>
#include <vector>

#include "checks.h"
#include "cpu/runtime/parallel.h"
#include "cpu/sampling/neighbor_draws.h"
#include "partition_checks.h"

namespace glt::cpu {
namespace {

template <typename index_t>
std::tuple<at::Tensor, at::Tensor, at::Tensor> draw_all(draws::HopDraws<index_t>&& hop) {
  hop.draw_all();
  return {hop.nbrs, hop.counts, hop.eids};
}

// Each seed's partition (narrowed) and its rank among that partition's
// seeds (its random stream), after checking that the partition has a
// topology here and the seed is one of its rows.
struct SeedPartitions {
  std::vector<int32_t> part;
  std::vector<int64_t> stream;
};

SeedPartitions checked_seed_partitions(const std::vector<PartitionTopology>& parts,
                                       const at::Tensor& part_of, const at::Tensor& seeds) {
  const int64_t n = seeds.numel();
  const int64_t num_parts = static_cast<int64_t>(parts.size());
  SeedPartitions out{std::vector<int32_t>(n), std::vector<int64_t>(n)};
  std::vector<int64_t> next(num_parts, 0);
  AT_DISPATCH_INTEGRAL_TYPES(part_of.scalar_type(), "sample_neighbors_partitioned", [&] {
    const scalar_t* in = part_of.data_ptr<scalar_t>();
    const int64_t* seed = seeds.data_ptr<int64_t>();
    for (int64_t i = 0; i < n; ++i) {
      const int64_t p = static_cast<int64_t>(in[i]);
      TORCH_CHECK_VALUE(p >= 0 && p < num_parts && parts[p].num_rows >= 0, "seeds[", i, "] (",
                        seed[i], ") is in partition ", p, ", which has no topology here");
      TORCH_CHECK_VALUE(seed[i] >= 0 && seed[i] < parts[p].num_rows, "seeds[", i, "] is ", seed[i],
                        ", outside the ", parts[p].num_rows, " rows of partition ", p);
      out.part[i] = static_cast<int32_t>(p);
      out.stream[i] = next[p]++;
    }
  });
  return out;
}

template <typename index_t>
std::tuple<at::Tensor, at::Tensor, at::Tensor> sample_neighbors_typed(
    const at::Tensor& indptr, const at::Tensor& indices, const std::optional<at::Tensor>& edge_ids,
    const std::optional<at::Tensor>& edge_weights, const at::Tensor& seeds, int64_t k, bool replace,
    int64_t rng_seed) {
  const auto g = kernels::csr_view<index_t>(indptr, indices, edge_ids, edge_weights);
  return draw_all(
      draws::HopDraws<index_t>(g, seeds.data_ptr<int64_t>(), seeds.numel(), k, replace, rng_seed));
}

}  // namespace

std::tuple<at::Tensor, at::Tensor, at::Tensor> sample_neighbors_kernel(
    const at::Tensor& indptr, const at::Tensor& indices, const std::optional<at::Tensor>& edge_ids,
    const std::optional<at::Tensor>& edge_weights, const at::Tensor& seeds, int64_t num_neighbors,
    bool replace, int64_t rng_seed) {
  const auto seed_t =
      checked_sampling_args(indptr, indices, edge_ids, edge_weights, seeds, num_neighbors,
                            /*check_seed_range=*/false);  // by HopDraws' plan
  return AT_DISPATCH_INDEX_TYPES(indptr.scalar_type(), "sample_neighbors", [&] {
    return sample_neighbors_typed<index_t>(indptr, indices, edge_ids, edge_weights, seed_t,
                                           num_neighbors, replace, rng_seed);
  });
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> sample_neighbors_partitioned_kernel(
    const c10::List<std::optional<at::Tensor>>& indptrs,
    const c10::List<std::optional<at::Tensor>>& indices,
    const c10::List<std::optional<at::Tensor>>& edge_ids,
    const c10::List<std::optional<at::Tensor>>& edge_weights, const at::Tensor& parts,
    const at::Tensor& seeds, int64_t num_neighbors, bool replace, at::IntArrayRef rng_seeds) {
  check_index(seeds, "seeds");
  TORCH_CHECK_VALUE(seeds.device().is_cpu(), "seeds must be a CPU tensor");
  const auto topologies = checked_partitions(indptrs, indices, edge_ids, edge_weights,
                                             rng_seeds.size(), seeds.device());
  check_partition_of_each(parts, seeds, "seed");
  check_fanout(num_neighbors, seeds.numel());
  const auto seed_t = seeds.contiguous();
  const auto seed_parts = checked_seed_partitions(topologies.parts, parts.contiguous(), seed_t);
  const std::vector<int64_t> rng(rng_seeds.begin(), rng_seeds.end());
  return AT_DISPATCH_INDEX_TYPES(topologies.dtype, "sample_neighbors_partitioned", [&] {
    std::vector<kernels::CsrView<index_t>> views(topologies.parts.size(),
                                                 {nullptr, nullptr, nullptr, nullptr, 0});
    for (size_t p = 0; p < views.size(); ++p) {
      const auto& t = topologies.parts[p];
      if (t.num_rows < 0) continue;
      views[p] = kernels::csr_view<index_t>(t.indptr, t.indices, t.edge_ids, t.edge_weights);
    }
    return draw_all(draws::HopDraws<index_t>(std::move(views), seed_parts.part.data(),
                                             seed_parts.stream.data(), seed_t.data_ptr<int64_t>(),
                                             seed_t.numel(), num_neighbors, replace, rng));
  });
}

TORCH_LIBRARY_IMPL(glt, CPU, m) {
  m.impl("sample_neighbors", TORCH_FN(sample_neighbors_kernel));
  m.impl("sample_neighbors_partitioned", TORCH_FN(sample_neighbors_partitioned_kernel));
}

}  // namespace glt::cpu
