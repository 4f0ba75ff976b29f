// One hop over the partitions of one host for any backend (the CUDA kernel,
// and the host backend the tests run it with): seed i draws from partition
// parts[i]'s topology with the stream its rank among that partition's seeds
// gives it, under that partition's key, so the hop equals sampling each
// partition's seeds apart (sample_neighbors, in seed order) and stitching.
//
// The partitions' topologies are one table on the device (pointers and row
// counts, uploaded without a wait); a seed's ranks come from a stable sort of
// the seeds by partition.
#pragma once

#include <ATen/ATen.h>

#include <tuple>
#include <vector>

#include "checks.h"
#include "kernels/partition_ops.h"
#include "kernels/sample_neighbors.h"
#include "partition_checks.h"

namespace glt {
namespace kernels {

// A partition's entry in the device table: its topology (num_rows -1: none
// here) and its key.
template <typename index_t>
struct PartitionEntry {
  CsrView<index_t> g;
  int64_t num_rows;
  uint64_t key;
};

// The SeedSource of seed i: its partition's topology, and stream rank[i]
// under the partition's key.
template <typename index_t>
struct PartitionedSource {
  const PartitionEntry<index_t>* table;
  const int32_t* part;
  const int64_t* rank;

  GLT_HOST_DEVICE SeedSource<index_t> operator()(int64_t i) const {
    const PartitionEntry<index_t>& e = table[part[i]];
    return {e.g, e.key, static_cast<uint64_t>(rank[i])};
  }
};

// The partitions' table as bytes on `device` (PartitionEntry<index_t> each).
template <typename index_t, typename Backend>
at::Tensor partition_table(const Backend& backend, const PartitionTopologies& topologies,
                           at::IntArrayRef rng_seeds, const at::Device& device) {
  const size_t num = topologies.parts.size();
  std::vector<PartitionEntry<index_t>> entries(num);
  for (size_t p = 0; p < num; ++p) {
    const PartitionTopology& t = topologies.parts[p];
    entries[p] = {{nullptr, nullptr, nullptr, nullptr, 0}, t.num_rows,
                  static_cast<uint64_t>(rng_seeds[p])};
    if (t.num_rows < 0) continue;
    entries[p].g = csr_view<index_t>(t.indptr, t.indices, t.edge_ids, t.edge_weights);
  }
  return structs_on_device(backend, entries, device);
}

// Each seed's partition (narrowed to int32) and its rank among that
// partition's seeds, after checking that the partition has a topology here
// and the seed is one of its rows (an error naming the first that is not).
template <typename index_t, typename Backend>
std::pair<at::Tensor, at::Tensor> seed_ranks(const Backend& backend,
                                             const PartitionTopologies& topologies,
                                             const PartitionEntry<index_t>* table,
                                             const at::Tensor& parts, const at::Tensor& seeds) {
  const int64_t n = seeds.numel();
  const int64_t num_parts = static_cast<int64_t>(topologies.parts.size());
  const auto options = seeds.options();
  auto part = at::empty({n}, options.dtype(at::kInt));
  auto counts = at::zeros({num_parts}, options);
  auto flags = no_flags(1, options);
  const int64_t* seed = seeds.data_ptr<int64_t>();
  int32_t* out_part = part.data_ptr<int32_t>();
  int64_t* count = counts.data_ptr<int64_t>();
  int64_t* first_bad = flags.data_ptr<int64_t>();
  AT_DISPATCH_INTEGRAL_TYPES(parts.scalar_type(), "sample_neighbors_partitioned", [&] {
    const scalar_t* in = parts.data_ptr<scalar_t>();
    backend.for_each(n, [=] GLT_HOST_DEVICE(int64_t i) {
      const int64_t p = static_cast<int64_t>(in[i]);
      const bool ok = p >= 0 && p < num_parts && seed[i] >= 0 && seed[i] < table[p].num_rows;
      if (ok) {
        device::atomic_add(&count[p], 1);
      } else {
        device::atomic_min(first_bad, i);
      }
      out_part[i] = static_cast<int32_t>(ok ? p : 0);
    });
  });
  const int64_t bad = n ? read_flags(flags)[0] : INT64_MAX;
  if (bad != INT64_MAX) {
    const int64_t p = parts[bad].item<int64_t>(), s = seeds[bad].item<int64_t>();
    TORCH_CHECK_VALUE(p >= 0 && p < num_parts && topologies.parts[p].num_rows >= 0, "seeds[", bad,
                      "] (", s, ") is in partition ", p, ", which has no topology here");
    TORCH_CHECK_VALUE(false, "seeds[", bad, "] is ", s, ", outside the ",
                      topologies.parts[p].num_rows, " rows of partition ", p);
  }
  const auto order = stable_order(part);
  const auto start = counts.cumsum(0) - counts;
  auto rank = at::empty({n}, options);
  const int64_t* in_order = order.data_ptr<int64_t>();
  const int64_t* first = start.data_ptr<int64_t>();
  int64_t* out_rank = rank.data_ptr<int64_t>();
  const int32_t* part_of = part.data_ptr<int32_t>();
  backend.for_each(n, [=] GLT_HOST_DEVICE(int64_t k) {
    const int64_t i = in_order[k];
    out_rank[i] = k - first[part_of[i]];
  });
  return {part, rank};
}

// The op for any backend: inputs checked, then the kernel.
template <typename Backend>
std::tuple<at::Tensor, at::Tensor, at::Tensor> sample_neighbors_partitioned(
    const Backend& backend, const c10::List<std::optional<at::Tensor>>& indptrs,
    const c10::List<std::optional<at::Tensor>>& indices,
    const c10::List<std::optional<at::Tensor>>& edge_ids,
    const c10::List<std::optional<at::Tensor>>& edge_weights, const at::Tensor& parts,
    const at::Tensor& seeds, int64_t num_neighbors, bool replace, at::IntArrayRef rng_seeds) {
  check_index(seeds, "seeds");
  const auto topologies = checked_partitions(indptrs, indices, edge_ids, edge_weights,
                                             rng_seeds.size(), seeds.device());
  check_partition_of_each(parts, seeds, "seed");
  check_fanout(num_neighbors, seeds.numel());
  const auto seed_t = seeds.contiguous(), part_t = parts.contiguous();
  bool with_edge = false, weighted = false;
  for (const PartitionTopology& t : topologies.parts) {
    with_edge |= t.edge_ids.has_value();
    weighted |= t.edge_weights.has_value();
  }
  return AT_DISPATCH_INDEX_TYPES(topologies.dtype, "sample_neighbors_partitioned", [&] {
    const at::Tensor table_t =
        partition_table<index_t>(backend, topologies, rng_seeds, seeds.device());
    const auto* table = reinterpret_cast<const PartitionEntry<index_t>*>(table_t.data_ptr());
    const std::pair<at::Tensor, at::Tensor> ranked =
        seed_ranks<index_t>(backend, topologies, table, part_t, seed_t);  // (part, rank)
    const PartitionedSource<index_t> source{table, ranked.first.data_ptr<int32_t>(),
                                            ranked.second.data_ptr<int64_t>()};
    auto whole_row = [=] GLT_HOST_DEVICE(int64_t i, int64_t s, int64_t* begin, int64_t* end) {
      const index_t* ptr = table[source.part[i]].g.indptr;
      *begin = ptr[s];
      *end = ptr[s + 1];
    };
    return sample_neighbors_impl<index_t>(backend, seed_t, num_neighbors, replace, with_edge,
                                          weighted, source, whole_row);
  });
}

}  // namespace kernels
}  // namespace glt
