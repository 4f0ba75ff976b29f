// One hop of neighbor sampling for any backend (the CUDA kernel, and the host
// backend the tests run it with): one thread per seed, each drawing from its
// own Philox stream, so a batch depends only on the seed and the rng seed.
//
// Semantics (as the CPU kernel): up to `k` neighbors per seed (-1: all);
// uniform without replacement (Floyd's algorithm), with replacement, or
// proportional to the edge weights (Efraimidis-Spirakis keys without
// replacement, inverse-CDF draws with it); edges of weight <= 0 are never
// drawn when sampling by weight.
#pragma once

#include <ATen/ATen.h>

#include <cmath>
#include <cstring>
#include <tuple>
#include <vector>

#include "checks.h"
#include "kernels/device.h"

namespace glt {
namespace kernels {

template <typename index_t>
struct CsrView {
  const index_t* indptr;
  const index_t* indices;
  const int64_t* edge_ids;  // nullable
  const float* weights;     // nullable
  int64_t num_entries;      // of indices: where a row's entries may lie (row_in_bounds)
  int64_t num_rows;         // indptr's length less one
};

// The view of a topology's tensors (edge ids and weights where given).
template <typename index_t>
CsrView<index_t> csr_view(const at::Tensor& indptr, const at::Tensor& indices,
                          const std::optional<at::Tensor>& edge_ids,
                          const std::optional<at::Tensor>& edge_weights) {
  return {indptr.data_ptr<index_t>(), indices.data_ptr<index_t>(),
          edge_ids.has_value() ? edge_ids->data_ptr<int64_t>() : nullptr,
          edge_weights.has_value() ? edge_weights->data_ptr<float>() : nullptr, indices.numel(),
          indptr.numel() - 1};
}

// An array of plain structs (topology views, partition entries) copied to
// `device`, for kernels that pick one per seed. Made before any launch: a
// CUDA graph's launches copy nothing from the host.
template <typename T, typename Backend>
at::Tensor structs_on_device(const Backend& backend, const std::vector<T>& structs,
                             const at::Device& device) {
  auto host = at::empty({static_cast<int64_t>(structs.size() * sizeof(T))}, at::kByte);
  std::memcpy(host.data_ptr(), structs.data(), host.numel());
  return backend.to_device(host, device);
}

template <typename index_t>
GLT_HOST_DEVICE int64_t positive_degree(const CsrView<index_t>& g, int64_t begin, int64_t end) {
  int64_t n = 0;
  for (int64_t p = begin; p < end; ++p) n += g.weights[p] > 0.f;
  return n;
}

// How many neighbors a seed whose candidate edges are [begin, end) gets.
template <typename index_t>
GLT_HOST_DEVICE int64_t sample_count(const CsrView<index_t>& g, int64_t begin, int64_t end,
                                     int64_t k, bool replace) {
  if (k < 0) return end - begin;
  const int64_t deg = g.weights ? positive_degree(g, begin, end) : end - begin;
  if (replace) return deg > 0 ? k : 0;
  return deg < k ? deg : k;
}

// The candidate edges of row `s` for a seed of time `t` when the row's
// entries are sorted by `edge_time`: [begin, end) holds those of time <= t
// (found by binary search: the bound is checked in the draw, nothing is
// filtered afterwards); with `last` and k >= 0, only the k latest of them.
// `row_max_time` (each row's latest time, or null) tells a seed that may
// take the whole row without a read of edge_time: an array of one entry
// per row, read at the row's index as indptr is, where edge_time has one
// per edge.
template <typename index_t, typename stamp_t>
GLT_HOST_DEVICE void temporal_window(const index_t* indptr, const stamp_t* edge_time,
                                     const stamp_t* row_max_time, int64_t s, stamp_t t, int64_t k,
                                     bool last, int64_t* begin, int64_t* end) {
  const int64_t first = indptr[s];
  int64_t lo = first, hi = indptr[s + 1];
  const bool whole_row = row_max_time ? row_max_time[s] <= t : lo < hi && edge_time[hi - 1] <= t;
  if (whole_row) lo = hi;  // no search
  while (lo < hi) {
    const int64_t mid = lo + (hi - lo) / 2;
    if (edge_time[mid] <= t) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  *begin = last && k >= 0 && lo - first > k ? lo - k : first;
  *end = lo;
}

// Draws the `count` edge positions of a seed whose candidate edges are
// [begin, end) into pos[0, count); `keys` is scratch of `count` doubles
// (weighted sampling without replacement).
template <typename index_t>
GLT_HOST_DEVICE void sample_positions(const CsrView<index_t>& g, int64_t begin, int64_t end,
                                      int64_t k, int64_t count, bool replace,
                                      device::Philox& rng, int64_t* pos, double* keys) {
  const int64_t deg = end - begin;
  if (count == 0) return;
  if (k < 0 || (!g.weights && !replace && count == deg)) {
    for (int64_t p = begin; p < end; ++p) pos[p - begin] = p;
    return;
  }
  if (g.weights == nullptr) {
    if (replace) {
      for (int64_t j = 0; j < count; ++j) pos[j] = begin + static_cast<int64_t>(rng.uniform(deg));
      return;
    }
    // Floyd: for j = deg - count .. deg - 1, take a uniform t in [0, j], or
    // j itself when t was taken already.
    for (int64_t j = deg - count, m = 0; j < deg; ++j, ++m) {
      const int64_t t = begin + static_cast<int64_t>(rng.uniform(j + 1));
      bool seen = false;
      for (int64_t q = 0; q < m; ++q) seen |= pos[q] == t;
      pos[m] = seen ? begin + j : t;
    }
    return;
  }
  if (replace) {
    double total = 0.0;
    for (int64_t p = begin; p < end; ++p) total += g.weights[p] > 0.f ? g.weights[p] : 0.f;
    for (int64_t j = 0; j < count; ++j) {
      const double u = rng.uniform01() * total;
      double acc = 0.0;
      int64_t pick = -1;
      for (int64_t p = begin; p < end; ++p) {
        if (g.weights[p] <= 0.f) continue;
        acc += g.weights[p];
        pick = p;
        if (acc >= u) break;
      }
      pos[j] = pick;
    }
    return;
  }
  // Efraimidis-Spirakis: the `count` largest keys log(u) / w; `keys` holds
  // the kept ones, replacing the smallest when a larger one comes.
  int64_t kept = 0;
  for (int64_t p = begin; p < end; ++p) {
    const float w = g.weights[p];
    if (w <= 0.f) continue;
    const double key = log(rng.uniform01()) / w;
    if (kept < count) {
      keys[kept] = key;
      pos[kept++] = p;
      continue;
    }
    int64_t smallest = 0;
    for (int64_t q = 1; q < count; ++q) {
      if (keys[q] < keys[smallest]) smallest = q;
    }
    if (key > keys[smallest]) {
      keys[smallest] = key;
      pos[smallest] = p;
    }
  }
}

// Where seed i draws from: its topology and its Philox stream.
template <typename index_t>
struct SeedSource {
  CsrView<index_t> g;
  uint64_t key, stream;
};

// Samples every seed: returns (neighbors, count per seed, edge ids or an
// empty tensor). `seeds` (int64) and the topologies are on the backend's
// device and checked by the caller; `with_edge` and `weighted` say whether
// the topologies have edge ids and weights. `source(i)` gives seed i's
// SeedSource; `window(i, s, &begin, &end)` the candidate edges of seed i
// (row s): its whole row, or a temporal window.
// Raises the error of seed `i`, whose row lies outside its topology's
// indices (its bounds read on the device, one seed).
template <typename Backend, typename Source>
void raise_bad_seed_row(const Backend& backend, const Source& source, const at::Tensor& seeds,
                        int64_t i) {
  auto row = at::empty({3}, seeds.options().dtype(at::kLong));  // first, last, entries
  int64_t* out = row.data_ptr<int64_t>();
  const int64_t* seed = seeds.data_ptr<int64_t>();
  backend.for_each(1, [=] GLT_HOST_DEVICE(int64_t) {
    const auto g = source(i).g;
    out[0] = g.indptr[seed[i]];
    out[1] = g.indptr[seed[i] + 1];
    out[2] = g.num_entries;
  });
  const std::vector<int64_t> v = read_flags(row);
  raise_bad_row(seeds[i].item<int64_t>(), v[0], v[1], v[2]);
}

template <typename index_t, typename Backend, typename Source, typename Window>
std::tuple<at::Tensor, at::Tensor, at::Tensor> sample_neighbors_impl(
    const Backend& backend, const at::Tensor& seeds, int64_t k, bool replace, bool with_edge,
    bool weighted, Source source, Window window) {
  const auto long_opts = seeds.options().dtype(at::kLong);
  const int64_t n = seeds.numel();
  auto counts = at::empty({n}, long_opts);
  if (n == 0) return {at::empty({0}, long_opts), counts, at::empty({0}, long_opts)};
  auto bounds = at::empty({2 * n}, long_opts);
  const int64_t* seed = seeds.data_ptr<int64_t>();
  int64_t* cnt = counts.data_ptr<int64_t>();
  int64_t* bound = bounds.data_ptr<int64_t>();
  // [the first seed whose row lies outside indices, the total]: one read.
  auto flags = no_flags(2, long_opts);
  int64_t* first_bad = flags.data_ptr<int64_t>();
  backend.for_each(n, [=] GLT_HOST_DEVICE(int64_t i) {
    const CsrView<index_t> g = source(i).g;
    if (!row_in_bounds(g.indptr[seed[i]], g.indptr[seed[i] + 1], g.num_entries)) {
      device::atomic_min(first_bad, i);
      bound[2 * i] = bound[2 * i + 1] = cnt[i] = 0;
      return;
    }
    window(i, seed[i], bound + 2 * i, bound + 2 * i + 1);
    cnt[i] = sample_count(g, bound[2 * i], bound[2 * i + 1], k, replace);
  });
  auto offsets = at::zeros({n + 1}, long_opts);
  offsets.narrow(0, 1, n).copy_(counts.cumsum(0));
  flags.narrow(0, 1, 1).copy_(offsets.narrow(0, n, 1));
  const std::vector<int64_t> read = read_flags(flags);
  if (read[0] != std::numeric_limits<int64_t>::max()) {
    raise_bad_seed_row(backend, source, seeds, read[0]);
  }
  const int64_t total = read[1];
  auto nbrs = at::empty({total}, long_opts);
  auto eids = at::empty({with_edge ? total : 0}, long_opts);
  auto pos = at::empty({total}, long_opts);
  const bool keyed = weighted && !replace && k >= 0;
  auto keys = at::empty({keyed ? total : 0}, seeds.options().dtype(at::kDouble));
  const int64_t* off = offsets.data_ptr<int64_t>();
  int64_t* out_nbr = nbrs.data_ptr<int64_t>();
  int64_t* out_eid = with_edge ? eids.data_ptr<int64_t>() : nullptr;
  int64_t* scratch = pos.data_ptr<int64_t>();
  double* key_scratch = keyed ? keys.data_ptr<double>() : nullptr;
  backend.for_each(n, [=] GLT_HOST_DEVICE(int64_t i) {
    const SeedSource<index_t> src = source(i);
    device::Philox rng(src.key, src.stream);
    const int64_t o = off[i], m = cnt[i];
    int64_t* p = scratch + o;
    sample_positions(src.g, bound[2 * i], bound[2 * i + 1], k, m, replace, rng, p,
                     key_scratch ? key_scratch + o : nullptr);
    for (int64_t j = 0; j < m; ++j) {
      out_nbr[o + j] = static_cast<int64_t>(src.g.indices[p[j]]);
      if (out_eid) out_eid[o + j] = src.g.edge_ids[p[j]];
    }
  });
  return {nbrs, counts, eids};
}

// The SeedSource of every seed of a one-topology hop: its topology, and
// stream i of key `rng_seed` for seed i.
template <typename index_t>
struct OneTopology {
  CsrView<index_t> g;
  uint64_t key;

  OneTopology(const at::Tensor& indptr, const at::Tensor& indices,
              const std::optional<at::Tensor>& edge_ids,
              const std::optional<at::Tensor>& edge_weights, int64_t rng_seed)
      : g(csr_view<index_t>(indptr, indices, edge_ids, edge_weights)),
        key(static_cast<uint64_t>(rng_seed)) {}

  GLT_HOST_DEVICE SeedSource<index_t> operator()(int64_t i) const {
    return {g, key, static_cast<uint64_t>(i)};
  }
};

// The op for any backend: inputs checked, then the kernel.
template <typename Backend>
std::tuple<at::Tensor, at::Tensor, at::Tensor> sample_neighbors(
    const Backend& backend, const at::Tensor& indptr, const at::Tensor& indices,
    const std::optional<at::Tensor>& edge_ids, const std::optional<at::Tensor>& edge_weights,
    const at::Tensor& seeds, int64_t num_neighbors, bool replace, int64_t rng_seed) {
  const auto seed_t =
      checked_sampling_args(indptr, indices, edge_ids, edge_weights, seeds, num_neighbors);
  return AT_DISPATCH_INDEX_TYPES(indptr.scalar_type(), "sample_neighbors", [&] {
    const index_t* ptr = indptr.data_ptr<index_t>();
    auto whole_row = [=] GLT_HOST_DEVICE(int64_t, int64_t s, int64_t* begin, int64_t* end) {
      *begin = ptr[s];
      *end = ptr[s + 1];
    };
    const OneTopology<index_t> source(indptr, indices, edge_ids, edge_weights, rng_seed);
    return sample_neighbors_impl<index_t>(backend, seed_t, num_neighbors, replace,
                                          edge_ids.has_value(), edge_weights.has_value(), source,
                                          whole_row);
  });
}

// The temporal op for any backend (csrc/ops/sample_neighbors_temporal.cpp):
// inputs checked, then the kernel with each seed's temporal window.
template <typename Backend>
std::tuple<at::Tensor, at::Tensor, at::Tensor> sample_neighbors_temporal(
    const Backend& backend, const at::Tensor& indptr, const at::Tensor& indices,
    const std::optional<at::Tensor>& edge_ids, const std::optional<at::Tensor>& edge_weights,
    const at::Tensor& edge_time, const at::Tensor& seeds, const at::Tensor& seed_time,
    int64_t num_neighbors, bool replace, bool last, int64_t rng_seed,
    const std::optional<at::Tensor>& row_max_time) {
  const auto seed_t =
      checked_sampling_args(indptr, indices, edge_ids, edge_weights, seeds, num_neighbors);
  const auto seed_time_t = checked_time_args(edge_time, indices, seed_time, seed_t);
  check_row_max_time(row_max_time, edge_time, indptr);
  return AT_DISPATCH_INDEX_TYPES(indptr.scalar_type(), "sample_neighbors_temporal", [&] {
    using idx_t = index_t;
    // scalar_t: the times' type.
    return GLT_DISPATCH_TIME_TYPES(edge_time.scalar_type(), "sample_neighbors_temporal", [&] {
      const idx_t* ptr = indptr.data_ptr<idx_t>();
      const scalar_t* times = edge_time.data_ptr<scalar_t>();
      const scalar_t* bound = seed_time_t.data_ptr<scalar_t>();
      const scalar_t* row_max = row_max_time ? row_max_time->data_ptr<scalar_t>() : nullptr;
      const int64_t k = num_neighbors;
      auto window = [=] GLT_HOST_DEVICE(int64_t i, int64_t s, int64_t* begin, int64_t* end) {
        temporal_window(ptr, times, row_max, s, bound[i], k, last, begin, end);
      };
      const OneTopology<idx_t> source(indptr, indices, edge_ids, edge_weights, rng_seed);
      return sample_neighbors_impl<idx_t>(backend, seed_t, num_neighbors, replace,
                                          edge_ids.has_value(), edge_weights.has_value(), source,
                                          window);
    });
  });
}

}  // namespace kernels
}  // namespace glt
