// One hop of neighbor sampling over a CSR (or CSC) topology: uniform with or
// without replacement, or weighted by edge weight. Parallel over seeds; each
// seed draws from its own random stream, so results do not depend on the
// number of threads.
#include <ATen/Parallel.h>
#include <torch/library.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <utility>
#include <vector>

#include "../checks.h"
#include "../common.h"
#include "../kernels/sample_neighbors.h"

namespace glt {
namespace {

// Floyd's algorithm beats a partial shuffle up to this many draws.
constexpr int64_t kFloydMax = 32;

template <typename index_t>
using Csr = kernels::CsrView<index_t>;
using kernels::sample_count;

// How far ahead the passes below prefetch: enough loads in flight to hide a
// cache miss behind the work on the entries before it.
constexpr int64_t kPrefetchAhead = 16;

// Draws the edge positions of one seed (its edges are [begin, begin + deg))
// and hands each to `emit`.
template <typename index_t, typename Emit>
void sample_one(const Csr<index_t>& g, int64_t begin, int64_t deg, int64_t k, int64_t count,
                bool replace, Rng& rng, std::vector<int64_t>& scratch,
                std::vector<std::pair<double, int64_t>>& keyed, std::vector<double>& cumsum,
                Emit&& emit) {
  const int64_t end = begin + deg;
  if (count == 0) return;
  if (k < 0 || (!g.weights && !replace && count == deg)) {
    for (int64_t p = begin; p < end; ++p) emit(p);
    return;
  }
  if (g.weights == nullptr) {
    if (replace) {
      for (int64_t j = 0; j < count; ++j) emit(begin + rng.uniform(deg));
    } else if (count <= kFloydMax) {
      int64_t* chosen = scratch.data();
      for (int64_t j = deg - count, m = 0; j < deg; ++j, ++m) {
        const int64_t t = static_cast<int64_t>(rng.uniform(j + 1));
        bool seen = false;
        for (int64_t q = 0; q < m; ++q) seen |= chosen[q] == t;
        chosen[m] = seen ? j : t;
        emit(begin + chosen[m]);
      }
    } else {
      scratch.resize(std::max<int64_t>(deg, kFloydMax));
      std::iota(scratch.begin(), scratch.begin() + deg, 0);
      for (int64_t j = 0; j < count; ++j) {
        const int64_t r = j + static_cast<int64_t>(rng.uniform(deg - j));
        std::swap(scratch[j], scratch[r]);
        emit(begin + scratch[j]);
      }
    }
    return;
  }
  if (replace) {
    cumsum.resize(deg);
    double total = 0.0;
    for (int64_t p = 0; p < deg; ++p) {
      total += std::max(g.weights[begin + p], 0.f);
      cumsum[p] = total;
    }
    for (int64_t j = 0; j < count; ++j) {
      const double u = rng.uniform01() * total;
      const int64_t p = std::lower_bound(cumsum.begin(), cumsum.begin() + deg, u) - cumsum.begin();
      emit(begin + std::min(p, deg - 1));
    }
    return;
  }
  // Efraimidis-Spirakis: the `count` largest log(u) / w keys.
  keyed.clear();
  for (int64_t p = begin; p < end; ++p) {
    const float w = g.weights[p];
    if (w > 0.f) keyed.emplace_back(std::log(rng.uniform01()) / w, p);
  }
  if (count < static_cast<int64_t>(keyed.size())) {
    std::nth_element(keyed.begin(), keyed.begin() + count, keyed.end(),
                     [](const auto& a, const auto& b) { return a.first > b.first; });
  }
  for (int64_t j = 0; j < count; ++j) emit(keyed[j].second);
}

// Three passes, each over independent entries so that the CPU keeps many
// cache misses in flight: (1) every seed's first edge and count, (2) the edge
// positions each seed draws (random numbers only, written where its
// neighbors go), (3) the neighbors (and edge ids) at those positions.
template <typename index_t>
std::tuple<at::Tensor, at::Tensor, at::Tensor> sample_neighbors_typed(
    const at::Tensor& indptr, const at::Tensor& indices, const std::optional<at::Tensor>& edge_ids,
    const std::optional<at::Tensor>& edge_weights, const at::Tensor& seeds, int64_t k, bool replace,
    int64_t rng_seed) {
  const Csr<index_t> g{indptr.data_ptr<index_t>(), indices.data_ptr<index_t>(),
                       edge_ids.has_value() ? edge_ids->data_ptr<int64_t>() : nullptr,
                       edge_weights.has_value() ? edge_weights->data_ptr<float>() : nullptr};
  const int64_t n = seeds.numel();
  const int64_t* seed = seeds.data_ptr<int64_t>();
  const auto options = seeds.options();

  auto counts = at::empty({n}, options);
  int64_t* cnt = counts.data_ptr<int64_t>();
  std::vector<int64_t> first(n), degree(n);
  at::parallel_for(0, n, 1024, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      if (i + kPrefetchAhead < end) __builtin_prefetch(&g.indptr[seed[i + kPrefetchAhead]]);
      first[i] = g.indptr[seed[i]];
      degree[i] = g.indptr[seed[i] + 1] - first[i];
      cnt[i] = sample_count(g, seed[i], k, replace);
    }
  });
  std::vector<int64_t> offsets(n + 1, 0);
  for (int64_t i = 0; i < n; ++i) offsets[i + 1] = offsets[i] + cnt[i];
  const int64_t total = offsets[n];

  const bool with_eid = edge_ids.has_value();
  at::Tensor nbrs = at::empty({total}, options);
  at::Tensor eids = at::empty({with_eid ? total : 0}, options);
  int64_t* out_nbr = nbrs.data_ptr<int64_t>();
  int64_t* out_eid = with_eid ? eids.data_ptr<int64_t>() : nullptr;
  at::parallel_for(0, n, 256, [&](int64_t begin, int64_t end) {
    std::vector<int64_t> scratch(kFloydMax);
    std::vector<std::pair<double, int64_t>> keyed;
    std::vector<double> cumsum;
    for (int64_t i = begin; i < end; ++i) {
      Rng rng(static_cast<uint64_t>(rng_seed), static_cast<uint64_t>(i));
      int64_t* pos = out_nbr + offsets[i];
      sample_one(g, first[i], degree[i], k, cnt[i], replace, rng, scratch, keyed, cumsum,
                 [&](int64_t p) { *pos++ = p; });
    }
    const int64_t lo = offsets[begin], hi = offsets[end];
    for (int64_t o = lo; o < hi; ++o) {
      if (o + kPrefetchAhead < hi) __builtin_prefetch(&g.indices[out_nbr[o + kPrefetchAhead]]);
      const int64_t p = out_nbr[o];
      if (out_eid) out_eid[o] = g.edge_ids[p];
      out_nbr[o] = static_cast<int64_t>(g.indices[p]);
    }
  });
  return {nbrs, counts, eids};
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
