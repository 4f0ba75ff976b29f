// Inducer::sample_batch: every hop of a batch drawn and added in one call,
// each hop by sample_induce_next, as the engine drives it hop by hop.
#include <algorithm>
#include <vector>

#include "checks.h"
#include "cpu/inducer/inducer.h"
#include "kernels/batch_plan.h"

namespace glt::cpu {
namespace {

// Raises where a type's seeds hold an id outside its nodes (the GPU batch's
// words).
void check_batch_seeds(const kernels::BatchPlan& plan) {
  for (int64_t t = 0; t < plan.num_types(); ++t) {
    const at::Tensor& seeds = plan.seeds[t];
    const int64_t* s = seeds.data_ptr<int64_t>();
    const int64_t n = plan.num_nodes[t];
    const int64_t* bad = std::find_if(s, s + seeds.numel(), [n](int64_t id) {
      return id < 0 || id >= n;
    });
    TORCH_CHECK_VALUE(bad == s + seeds.numel(), "seeds hold node id ", *bad, ", outside the ", n,
                      " nodes of their type");
  }
}

// Edge ids by output edge type, one tensor per hop that drew that type,
// joined (empty where none were drawn).
at::Tensor joined(const std::vector<at::Tensor>& pieces) {
  if (pieces.empty()) return at::empty({0}, at::kLong);
  return pieces.size() == 1 ? pieces[0] : at::cat(pieces);
}

}  // namespace

kernels::BatchOutputs Inducer::sample_batch(kernels::BatchPlan plan, bool /*replay*/) {
  kernels::checked_batch_plan(plan, at::Device(at::kCPU));
  for (auto& seeds : plan.seeds) seeds = seeds.contiguous();
  TORCH_CHECK_VALUE(!plan.partitioned(), "the CPU Inducer draws a batch from one topology per ",
                    "request: a host's partitions are drawn a batch at once on a GPU");
  TORCH_CHECK_VALUE(disjoint_bits_ == 0, "an Inducer of disjoint keys draws a batch hop by hop");
  TORCH_CHECK_VALUE(plan.num_types() == num_node_types(),
                    "sample_batch expects seeds for each of the inducer's ", num_node_types(),
                    " node types, got ", plan.num_types());
  check_batch_seeds(plan);
  const int64_t types = plan.num_types(), hops = plan.num_hops, etypes = plan.num_edge_types;
  // The node marks (each type's count after the seeds and after each hop),
  // each request's edge count, how many requests drew.
  at::Tensor counts = at::zeros({types * (hops + 1) + plan.num_requests() + 1}, at::kLong);
  int64_t* marks = counts.data_ptr<int64_t>();
  int64_t* totals = marks + types * (hops + 1);
  const auto mark = [&](int64_t h) {
    for (int64_t t = 0; t < types; ++t) marks[t * (hops + 1) + h] = maps_[t].size();
  };
  std::vector<at::Tensor> frontier = init_nodes(plan.seeds);
  std::vector<at::Tensor> seed_locals;
  for (int64_t t = 0; t < types; ++t) seed_locals.push_back(local_ids(t, plan.seeds[t]));
  mark(0);
  // Each output edge type's rows and cols so far (a hop's extend them), and
  // its edge ids a hop at a time.
  std::vector<at::Tensor> rows(etypes, at::empty({0}, at::kLong)), cols = rows;
  std::vector<std::vector<at::Tensor>> eids(etypes);
  int64_t drawn = 0;  // the k-th request that draws takes the k-th key
  for (int64_t r = 0, h = 0; h < hops; ++h) {
    kernels::HopPlan hop;
    std::vector<int64_t> asked;  // the plan's requests in `hop`
    for (; r < plan.num_requests() && plan.hops[r] == h; ++r) {
      const at::Tensor& srcs = frontier[plan.src_types[r]];
      if (srcs.numel() == 0) continue;  // draws nothing, takes no key
      const int64_t e = plan.edge_types[r];
      for (int64_t a : asked) {
        TORCH_CHECK_VALUE(plan.edge_types[a] != e, "sample_batch's requests of a hop need ",
                          "distinct edge types, got edge type ", e, " twice in hop ", h);
      }
      asked.push_back(r);
      hop.src_types.push_back(plan.src_types[r]);
      hop.nbr_types.push_back(plan.nbr_types[r]);
      hop.srcs.push_back(srcs);
      hop.indptrs.push_back(plan.indptrs[r]);
      hop.indices.push_back(plan.indices[r]);
      hop.edge_ids.push_back(plan.edge_ids[r]);
      hop.edge_weights.push_back(plan.edge_weights[r]);
      hop.fanouts.push_back(plan.fanouts[r]);
      hop.rng_seeds.push_back(plan.rng_seeds[drawn++]);
      hop.row_prefixes.push_back(rows[e]);
      hop.col_prefixes.push_back(cols[e]);
    }
    hop.replace = plan.replace;
    if (asked.empty()) {
      for (auto& nodes : frontier) nodes = at::empty({0}, at::kLong);
      mark(h + 1);
      continue;
    }
    const auto [added, hop_rows, hop_cols, nbrs, nbr_nums, hop_eids, on_host] =
        sample_induce_next(hop);
    for (size_t i = 0; i < asked.size(); ++i) {
      const int64_t e = plan.edge_types[asked[i]];
      totals[asked[i]] = hop_rows[i].numel() - rows[e].numel();
      rows[e] = hop_rows[i];
      cols[e] = hop_cols[i];
      if (plan.edge_ids[asked[i]].has_value()) eids[e].push_back(hop_eids[i]);
    }
    frontier = added;
    mark(h + 1);
  }
  totals[plan.num_requests()] = drawn;
  std::vector<at::Tensor> nodes, edge_ids;
  for (int64_t t = 0; t < types; ++t) nodes.push_back(maps_[t].keys_from(0));
  for (int64_t e = 0; e < etypes; ++e) edge_ids.push_back(joined(eids[e]));
  return {nodes, rows, cols, edge_ids, seed_locals, counts};
}

}  // namespace glt::cpu
