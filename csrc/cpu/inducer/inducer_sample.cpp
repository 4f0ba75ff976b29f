// Inducer::sample_induce_next: a hop drawn and added in one pass, each
// chunk of draws inserted into the id maps as soon as it is drawn.
#include <algorithm>
#include <vector>

#include "checks.h"
#include "cpu/inducer/in_order.h"
#include "cpu/sampling/neighbor_draws.h"
#include "cpu/inducer/inducer.h"
#include "cpu/runtime/parallel.h"
#include "kernels/hop_plan.h"

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
struct RequestOutputs {
  std::vector<at::Tensor> rows, cols, nbrs, nbr_nums, eids;
};

// Request e of `plan`, checked; disjoint keys (id_mask >= 0) draw from
// their ids' rows.
CheckedRequest checked_request(const kernels::HopPlan& plan, size_t e, int64_t id_mask) {
  const at::Tensor& indptr = plan.indptrs[e];
  const at::Tensor& row_prefix = plan.row_prefixes[e];
  const at::Tensor& col_prefix = plan.col_prefixes[e];
  TORCH_CHECK_VALUE(indptr.device().is_cpu(), "sample_induce_next draws from CPU topologies, got ",
                    indptr.device());
  check_index(plan.srcs[e], "srcs");
  check_index(row_prefix, "row_prefixes");
  check_index(col_prefix, "col_prefixes");
  check_device(row_prefix, "row_prefixes", indptr.device());
  check_device(col_prefix, "col_prefixes", indptr.device());
  const at::Tensor keys = plan.srcs[e].contiguous();
  const at::Tensor ids = id_mask >= 0 ? at::bitwise_and(keys, id_mask) : keys;
  CheckedRequest r{checked_sampling_args(indptr, plan.indices[e], plan.edge_ids[e],
                                         plan.edge_weights[e], ids, plan.fanouts[e],
                                         /*check_seed_range=*/false),  // by HopDraws' plan
                   keys,
                   row_prefix.contiguous(),
                   col_prefix.contiguous(),
                   at::Tensor(),
                   at::Tensor()};
  r.times = plan.checked_seed_times(e, r.seeds).value_or(at::Tensor());
  r.row_max_time = plan.row_max_time(e).value_or(at::Tensor());
  return r;
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
  map.room_for_hop(total);  // the chunks come one at a time
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

kernels::HopOutputs Inducer::sample_induce_next(const kernels::HopPlan& plan) {
  plan.check_lists();
  const size_t num_requests = plan.num_requests();
  for (size_t e = 0; e < num_requests; ++e) {
    TORCH_CHECK_VALUE(!plan.has_pieces(e), "request ", e, " has pieces: the CPU Inducer draws ",
                      "each request from its one topology (a GPU's inducer draws pieces)");
  }
  // Disjoint keys: the rows drawn are the keys' ids; the neighbors are keyed
  // into their seed's subgraph as they are inserted.
  const int64_t id_mask = disjoint_bits_ > 0 ? (int64_t{1} << disjoint_bits_) - 1 : -1;
  std::vector<CheckedRequest> requests;
  for (size_t e = 0; e < num_requests; ++e) {
    check_type(plan.src_types[e]);
    check_type(plan.nbr_types[e]);
    requests.push_back(checked_request(plan, e, id_mask));
  }

  std::vector<int64_t> first_fresh(maps_.size());
  for (size_t t = 0; t < maps_.size(); ++t) first_fresh[t] = maps_[t].size();
  RequestOutputs out;
  try {
    for (size_t e = 0; e < num_requests; ++e) {
      const CheckedRequest& r = requests[e];
      AT_DISPATCH_INDEX_TYPES(plan.indptrs[e].scalar_type(), "sample_induce_next", [&] {
        const auto g = kernels::csr_view<index_t>(plan.indptrs[e], plan.indices[e],
                                                  plan.edge_ids[e], plan.edge_weights[e]);
        auto draw_and_insert = [&](draws::HopDraws<index_t>& hop) {
          const at::Tensor row = extended(r.row_prefix, hop.total());
          const at::Tensor col = extended(r.col_prefix, hop.total());
          write_rows(plan.src_types[e], plan.srcs[e], r.keys, hop.offsets(),
                     row.data_ptr<int64_t>() + r.row_prefix.numel());
          insert_neighbors(maps_[plan.nbr_types[e]], hop, r.keys.data_ptr<int64_t>(),
                           r.seeds.numel(), id_mask,
                           col.data_ptr<int64_t>() + r.col_prefix.numel());
          out.rows.push_back(row);
          out.cols.push_back(col);
          out.nbrs.push_back(hop.nbrs);
          out.nbr_nums.push_back(hop.counts);
          out.eids.push_back(hop.eids);
        };
        const int64_t* seeds = r.seeds.data_ptr<int64_t>();
        if (!r.times.defined()) {
          draws::HopDraws<index_t> hop(g, seeds, r.seeds.numel(), plan.fanouts[e], plan.replace,
                                       plan.rng_seeds[e]);
          draw_and_insert(hop);
          return;
        }
        using idx_t = index_t;
        const at::Tensor& edge_time = *plan.edge_times[e];
        GLT_DISPATCH_TIME_TYPES(edge_time.scalar_type(), "sample_induce_next", [&] {
          const draws::TemporalWindow<idx_t, scalar_t> window{
              g.indptr, edge_time.data_ptr<scalar_t>(),
              r.row_max_time.defined() ? r.row_max_time.data_ptr<scalar_t>() : nullptr,
              r.times.data_ptr<scalar_t>(), plan.fanouts[e], plan.last};
          draws::HopDraws<idx_t> hop(g, seeds, r.seeds.numel(), plan.fanouts[e], plan.replace,
                                     plan.rng_seeds[e], window);
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
  return {take_added(first_fresh), out.rows, out.cols, out.nbrs, out.nbr_nums, out.eids, {}};
}

}  // namespace glt::cpu
