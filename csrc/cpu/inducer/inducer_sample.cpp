// Inducer::sample_induce_next: a hop drawn and added in one pass, each
// chunk of draws inserted into the id maps as soon as it is drawn.
#include <algorithm>
#include <vector>

#include "checks.h"
#include "cpu/inducer/in_order.h"
#include "cpu/sampling/neighbor_draws.h"
#include "cpu/inducer/inducer.h"
#include "cpu/runtime/parallel.h"

namespace glt::cpu {
namespace {

// A request of sample_induce_next, checked: its seeds (ids) and keys (the
// ids, or disjoint sampling's keys), prefixes contiguous, its seeds' times
// (undefined unless temporal) and its rows' last times (undefined unless
// given).
struct CheckedRequest {
  at::Tensor seeds, keys;
  at::Tensor row_prefix, col_prefix;
  at::Tensor times, row_max_time;
};

// What the requests of a hop give back, request by request.
struct HopOutputs {
  std::vector<at::Tensor> rows, cols, nbrs, nbr_nums, eids;
};

void check_request_lists(size_t num_requests, const std::vector<size_t>& sizes,
                         const std::vector<size_t>& optional_sizes) {
  for (size_t size : sizes) {
    TORCH_CHECK_VALUE(size == num_requests,
                      "sample_induce_next expects one entry per request (", num_requests,
                      ") in each list, got a list of ", size);
  }
  for (size_t size : optional_sizes) {
    TORCH_CHECK_VALUE(size == 0 || size == num_requests,
                      "sample_induce_next expects edge_times, seed_times and row_max_times empty "
                      "or with one entry per request (",
                      num_requests, "), got a list of ", size);
  }
}

CheckedRequest checked_request(const at::Tensor& indptr, const at::Tensor& indices,
                               const std::optional<at::Tensor>& edge_ids,
                               const std::optional<at::Tensor>& edge_weights,
                               const at::Tensor& srcs, int64_t id_mask, int64_t fanout,
                               const at::Tensor& row_prefix, const at::Tensor& col_prefix) {
  TORCH_CHECK_VALUE(indptr.device().is_cpu(), "sample_induce_next draws from CPU topologies, got ",
                    indptr.device());
  check_index(srcs, "srcs");
  check_index(row_prefix, "row_prefixes");
  check_index(col_prefix, "col_prefixes");
  check_device(row_prefix, "row_prefixes", indptr.device());
  check_device(col_prefix, "col_prefixes", indptr.device());
  const at::Tensor keys = srcs.contiguous();
  const at::Tensor ids = id_mask >= 0 ? at::bitwise_and(keys, id_mask) : keys;
  return {checked_sampling_args(indptr, indices, edge_ids, edge_weights, ids, fanout,
                                /*check_seed_range=*/false),  // by HopDraws' plan
          keys,
          row_prefix.contiguous(), col_prefix.contiguous(), at::Tensor()};
}

// `prefix` followed by room for n more values (copied by our parallel loop,
// not Tensor::copy_, whose OpenMP region spins beside busy processes).
at::Tensor extended(const at::Tensor& prefix, int64_t n) {
  at::Tensor grown = at::empty({prefix.numel() + n}, at::kLong);
  const int64_t* src = prefix.data_ptr<int64_t>();
  int64_t* dst = grown.data_ptr<int64_t>();
  glt::cpu::parallel_for(0, prefix.numel(), 1 << 16, [&](int64_t begin, int64_t end) {
    std::copy(src + begin, src + end, dst + begin);
  });
  return grown;
}

// Inserts a hop's neighbors into `map` as they are drawn, their local ids
// at col_tail; in disjoint sampling (id_mask >= 0) each keyed into its
// seed's subgraph (the seed's key bits above id_mask).
template <typename index_t>
void insert_neighbors(IdMap& map, draws::HopDraws<index_t>& hop, const int64_t* src_key,
                      int64_t num_seeds, int64_t id_mask, int64_t* col_tail) {
  const int64_t total = hop.total();
  const int64_t* nbr = hop.nbrs.template data_ptr<int64_t>();
  const int64_t* offsets = hop.offsets();
  // The keys of the neighbors of seeds [first, last), at
  // nbr_key[offsets[first] - base ...].
  std::vector<int64_t> key_buffer;
  auto keyed = [&](int64_t first, int64_t last, int64_t base) -> const int64_t* {
    if (id_mask < 0) return nbr + offsets[first];
    key_buffer.resize(offsets[last] - offsets[first]);
    for (int64_t i = first; i < last; ++i) {
      const int64_t seed = src_key[i] & ~id_mask;
      for (int64_t p = offsets[i]; p < offsets[i + 1]; ++p) key_buffer[p - base] = seed | nbr[p];
    }
    return key_buffer.data();
  };
  // One thread at a time inserts the chunks in order as they are drawn. With
  // enough threads the draws run ahead of it: what it has not inserted when
  // the last chunk is drawn is then inserted by all threads (map.insert_all,
  // in parallel), rather than by it alone. (Measured at 2 threads with the
  // parallel insert forced: 1.46x the batches/s of drawing the whole hop
  // first, then inserting it in parallel.)
  const bool finish_in_parallel = map.inserts_in_parallel(total);
  // Room for the whole hop first: the chunks fill the seeds' regions one
  // seed after another, and a table sized only for the chunks so far gives
  // each seed's region a share of it too small for its neighbors (probe
  // chains of hundreds of slots: 70x slower on a disjoint batch's first hop).
  map.reserve(map.size() + total);
  const int64_t threads = kernel_threads();
  std::vector<draws::Scratch> scratch(threads);
  const int64_t consumed = produce_consume_in_order(
      hop.num_chunks(), threads,
      [&](int64_t chunk, int64_t worker) {
        // Each chunk's ids checked by the thread that drew them, in
        // parallel, not by the one inserting in order.
        hop.draw(chunk, scratch[worker]);
        const int64_t lo = offsets[hop.chunk_begin(chunk)], hi = offsets[hop.chunk_end(chunk)];
        map.check_keys(nbr + lo, hi - lo);
      },
      [&](int64_t chunk) {
        const int64_t first = hop.chunk_begin(chunk), last = hop.chunk_end(chunk);
        const int64_t lo = offsets[first], hi = offsets[last];
        const int64_t* chunk_keys = keyed(first, last, lo);
        if (id_mask >= 0) map.check_keys(chunk_keys, hi - lo);  // disjoint keys
        map.insert_in_order(chunk_keys, hi - lo, col_tail + lo);
      },
      finish_in_parallel);
  if (consumed < hop.num_chunks()) {
    const int64_t first = hop.chunk_begin(consumed), lo = offsets[first];
    map.insert_all(keyed(first, num_seeds, lo), total - lo, col_tail + lo);
  }
}

}  // namespace

std::tuple<std::vector<at::Tensor>, std::vector<at::Tensor>, std::vector<at::Tensor>,
           std::vector<at::Tensor>, std::vector<at::Tensor>, std::vector<at::Tensor>>
Inducer::sample_induce_next(const std::vector<int64_t>& src_types,
                            const std::vector<int64_t>& nbr_types,
                            const std::vector<at::Tensor>& srcs,
                            const std::vector<at::Tensor>& indptrs,
                            const std::vector<at::Tensor>& indices,
                            const std::vector<std::optional<at::Tensor>>& edge_ids,
                            const std::vector<std::optional<at::Tensor>>& edge_weights,
                            const std::vector<int64_t>& fanouts, bool replace,
                            const std::vector<int64_t>& rng_seeds,
                            const std::vector<at::Tensor>& row_prefixes,
                            const std::vector<at::Tensor>& col_prefixes,
                            const std::vector<std::optional<at::Tensor>>& edge_times,
                            const std::vector<std::optional<at::Tensor>>& seed_times,
                            bool last,
                            const std::vector<std::optional<at::Tensor>>& row_max_times) {
  const size_t num_requests = srcs.size();
  check_request_lists(num_requests,
                      {src_types.size(), nbr_types.size(), indptrs.size(), indices.size(),
                       edge_ids.size(), edge_weights.size(), fanouts.size(), rng_seeds.size(),
                       row_prefixes.size(), col_prefixes.size()},
                      {edge_times.size(), seed_times.size(), row_max_times.size()});
  // Disjoint keys: the rows drawn are the keys' ids; the neighbors are keyed
  // into their seed's subgraph as they are inserted.
  const int64_t id_mask = disjoint_bits_ > 0 ? (int64_t{1} << disjoint_bits_) - 1 : -1;
  std::vector<CheckedRequest> requests;
  for (size_t e = 0; e < num_requests; ++e) {
    check_type(src_types[e]);
    check_type(nbr_types[e]);
    auto& r = requests.emplace_back(checked_request(indptrs[e], indices[e], edge_ids[e],
                                                    edge_weights[e], srcs[e], id_mask,
                                                    fanouts[e], row_prefixes[e], col_prefixes[e]));
    const bool timed = !edge_times.empty() && edge_times[e].has_value();
    TORCH_CHECK_VALUE(timed == (!seed_times.empty() && seed_times[e].has_value()),
                      "request ", e, " has edge_times or seed_times but not both");
    if (timed) r.times = checked_time_args(*edge_times[e], indices[e], *seed_times[e], r.seeds);
    if (!row_max_times.empty() && row_max_times[e].has_value()) {
      TORCH_CHECK_VALUE(timed, "request ", e, " has row_max_times but no edge_times");
      check_row_max_time(row_max_times[e], *edge_times[e], indptrs[e]);
      r.row_max_time = *row_max_times[e];
    }
  }

  std::vector<int64_t> first_fresh(maps_.size());
  for (size_t t = 0; t < maps_.size(); ++t) first_fresh[t] = maps_[t].size();
  HopOutputs out;
  try {
    for (size_t e = 0; e < num_requests; ++e) {
      const CheckedRequest& r = requests[e];
      AT_DISPATCH_INDEX_TYPES(indptrs[e].scalar_type(), "sample_induce_next", [&] {
        const auto g =
            kernels::csr_view<index_t>(indptrs[e], indices[e], edge_ids[e], edge_weights[e]);
        auto draw_and_insert = [&](draws::HopDraws<index_t>& hop) {
          const at::Tensor row = extended(r.row_prefix, hop.total());
          const at::Tensor col = extended(r.col_prefix, hop.total());
          write_rows(src_types[e], srcs[e], r.keys, hop.offsets(),
                     row.data_ptr<int64_t>() + r.row_prefix.numel());
          insert_neighbors(maps_[nbr_types[e]], hop, r.keys.data_ptr<int64_t>(), r.seeds.numel(),
                           id_mask, col.data_ptr<int64_t>() + r.col_prefix.numel());
          out.rows.push_back(row);
          out.cols.push_back(col);
          out.nbrs.push_back(hop.nbrs);
          out.nbr_nums.push_back(hop.counts);
          out.eids.push_back(hop.eids);
        };
        const int64_t* seeds = r.seeds.data_ptr<int64_t>();
        if (!r.times.defined()) {
          draws::HopDraws<index_t> hop(g, seeds, r.seeds.numel(), fanouts[e], replace,
                                       rng_seeds[e]);
          draw_and_insert(hop);
          return;
        }
        using idx_t = index_t;
        GLT_DISPATCH_TIME_TYPES(edge_times[e]->scalar_type(), "sample_induce_next", [&] {
          const draws::TemporalWindow<idx_t, scalar_t> window{
              g.indptr, edge_times[e]->data_ptr<scalar_t>(),
              r.row_max_time.defined() ? r.row_max_time.data_ptr<scalar_t>() : nullptr,
              r.times.data_ptr<scalar_t>(), fanouts[e], last};
          draws::HopDraws<idx_t> hop(g, seeds, r.seeds.numel(), fanouts[e], replace, rng_seeds[e],
                                     window);
          draw_and_insert(hop);
        });
      });
    }
  } catch (...) {
    // A part of the hop inserted is forgotten with the rest.
    bool inserted = false;
    for (size_t t = 0; t < maps_.size(); ++t) inserted |= maps_[t].size() != first_fresh[t];
    if (inserted) reset();
    throw;
  }
  return {take_added(first_fresh), out.rows, out.cols, out.nbrs, out.nbr_nums, out.eids};
}

}  // namespace glt::cpu
