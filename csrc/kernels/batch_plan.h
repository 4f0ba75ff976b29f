// A whole batch's plan (kernels/batch_sample.h): what the batch is, where
// its device state lives, the room its buffers need, and the checks of the
// plan before anything is launched.
#pragma once

#include <ATen/ATen.h>

#include <algorithm>
#include <cstdint>
#include <optional>
#include <tuple>
#include <vector>

#include "checks.h"
#include "kernels/hop_induce.h"

namespace glt {
namespace kernels {

// What a batch is: its seeds and node counts by node type, then its
// requests in hop order (each: its hop, output edge type, seed and neighbor
// node types, fanout >= 0 and topology).
//
// A batch over the partitions of a host (num_partitions P > 1) gives each
// request P topologies, partition p's at r * P + p of indptrs, indices,
// edge_ids and edge_weights, and each node type a book (books[t][id]: the
// partition of node id): a seed draws from its partition's topology, with
// the stream of its rank among the request's seeds of that partition, under
// the partition's key (the k-th request that draws: rng_seeds[k * P + p]),
// as sampling each partition's seeds apart and stitching them does.
struct BatchPlan {
  std::vector<at::Tensor> seeds;
  std::vector<int64_t> num_nodes;
  int64_t num_hops = 0;
  int64_t num_edge_types = 0;
  std::vector<int64_t> hops, edge_types, src_types, nbr_types, fanouts;
  std::vector<at::Tensor> indptrs, indices;
  std::vector<std::optional<at::Tensor>> edge_ids, edge_weights;
  bool replace = false;
  std::vector<int64_t> rng_seeds;  // the keys, P per request at most
  int64_t num_partitions = 1;
  std::vector<at::Tensor> books;  // per node type, where P > 1

  int64_t num_types() const { return static_cast<int64_t>(seeds.size()); }
  int64_t num_requests() const { return static_cast<int64_t>(hops.size()); }
  // Where partition p's topology of request r is in the topology lists.
  int64_t topology(int64_t r, int64_t p = 0) const { return r * num_partitions + p; }
  bool partitioned() const { return num_partitions > 1; }
};

// A batch's results: by node type its nodes (in local id order); by output
// edge type the local ids of each edge's seed (rows) and neighbor (cols)
// and its edge id (empty without edge ids); by node type the seeds' local
// ids; and `counts` (host): each type's node count after the seeds and
// after each hop, each request's edge count, and how many requests drew.
using BatchOutputs = std::tuple<std::vector<at::Tensor>, std::vector<at::Tensor>,
                                std::vector<at::Tensor>, std::vector<at::Tensor>,
                                std::vector<at::Tensor>, at::Tensor>;

// Where each value lives in a batch's device state (one int64 tensor,
// uploaded once and read back once).
struct BatchLayout {
  int64_t types, etypes, hops, requests;
  int64_t size(int64_t t) const { return t; }  // nodes of type t so far
  int64_t edges(int64_t e) const { return types + e; }  // edges of type e so far
  int64_t drawn() const { return types + etypes; }      // requests that drew so far
  int64_t scratch() const { return drawn() + 1; }
  // nodes of type t after the seeds (h = 0) and after hop h - 1
  int64_t marks(int64_t t, int64_t h) const { return scratch() + 1 + t * (hops + 1) + h; }
  int64_t key_index(int64_t r) const { return marks(types, 0) + r; }
  int64_t report(int64_t r) const { return key_index(requests) + r * kReportSize; }
  int64_t bad_seed(int64_t t) const { return report(requests) + t; }  // first seed out of range
  int64_t total() const { return bad_seed(types); }

  // The state before the batch: counts 0, no failure found.
  at::Tensor initial() const {
    auto state = at::zeros({total()}, at::kLong);
    int64_t* s = state.data_ptr<int64_t>();
    for (int64_t r = 0; r < requests; ++r) {
      std::fill(s + report(r) + kBadSeed, s + report(r) + kReportSize, kNone);
    }
    std::fill(s + bad_seed(0), s + total(), kNone);
    return state;
  }
};

// What the host knows ahead of a batch: how many seeds each request may
// have and draw, and the room every buffer needs.
struct BatchBounds {
  std::vector<int64_t> seeds, draws;  // per request
  std::vector<int64_t> nodes;         // per node type
  std::vector<int64_t> edges;         // per output edge type
};

inline BatchBounds batch_bounds(const BatchPlan& plan) {
  const int64_t types = plan.num_types();
  BatchBounds b;
  b.edges.assign(plan.num_edge_types, 0);
  std::vector<int64_t> frontier, drawn(types, 0), next(types, 0);
  for (const auto& s : plan.seeds) frontier.push_back(s.numel());
  int64_t hop = 0;
  for (int64_t r = 0; r < plan.num_requests(); ++r) {
    for (; hop < plan.hops[r]; ++hop) {  // the frontiers of the next hop
      for (int64_t t = 0; t < types; ++t) {
        frontier[t] = std::min(next[t], plan.num_nodes[t]);
        next[t] = 0;
      }
    }
    b.seeds.push_back(frontier[plan.src_types[r]]);
    check_fanout(plan.fanouts[r], b.seeds[r], "fanouts");
    b.draws.push_back(b.seeds[r] * plan.fanouts[r]);
    for (int64_t* sum : {&next[plan.nbr_types[r]], &drawn[plan.nbr_types[r]],
                         &b.edges[plan.edge_types[r]]}) {
      TORCH_CHECK_VALUE(*sum <= kMaxDraws - b.draws[r],
                        "sample_batch's fanouts ask for more draws than memory can hold");
      *sum += b.draws[r];
    }
  }
  // At most each id of a type once, besides the seeds (which may be out of range).
  for (int64_t t = 0; t < types; ++t) {
    b.nodes.push_back(plan.seeds[t].numel() + std::min(drawn[t], plan.num_nodes[t]));
  }
  return b;
}

// Checks a partitioned plan's books: one per node type, 1-D integers on
// `device`, an entry for every node of the type.
inline void check_batch_books(const BatchPlan& plan, const at::Device& device) {
  if (!plan.partitioned()) return;
  TORCH_CHECK_VALUE(plan.num_partitions <= INT32_MAX, "too many partitions: ",
                    plan.num_partitions);
  TORCH_CHECK_VALUE(static_cast<int64_t>(plan.books.size()) == plan.num_types(),
                    "sample_batch over partitions expects a book per node type (",
                    plan.num_types(), "), got ", plan.books.size());
  for (int64_t t = 0; t < plan.num_types(); ++t) {
    const at::Tensor& book = plan.books[t];
    TORCH_CHECK_VALUE(book.dim() == 1 && at::isIntegralType(book.scalar_type(), false),
                      "a partition book must be a 1-D integer tensor, got ", book.scalar_type(),
                      " of ", book.dim(), " dimensions");
    check_device(book, "books", device);
    TORCH_CHECK_VALUE(book.numel() >= plan.num_nodes[t], "the book of node type ", t, " has ",
                      book.numel(), " entries for ", plan.num_nodes[t], " nodes");
  }
}

// Checks a plan's shape and tensors; returns the rows of each topology.
inline std::vector<int64_t> checked_batch_plan(const BatchPlan& plan, const at::Device& device) {
  const int64_t types = plan.num_types(), n = plan.num_requests();
  const int64_t parts = plan.num_partitions;
  TORCH_CHECK_VALUE(static_cast<int64_t>(plan.num_nodes.size()) == types,
                    "sample_batch expects one node count per node type (", types, "), got ",
                    plan.num_nodes.size());
  TORCH_CHECK_VALUE(parts >= 1, "sample_batch needs num_partitions >= 1, got ", parts);
  for (size_t size : {plan.edge_types.size(), plan.src_types.size(), plan.nbr_types.size(),
                      plan.fanouts.size()}) {
    TORCH_CHECK_VALUE(static_cast<int64_t>(size) == n,
                      "sample_batch expects one entry per request (", n,
                      ") in every list, got one of ", size);
  }
  for (size_t size : {plan.indptrs.size(), plan.indices.size(), plan.edge_ids.size(),
                      plan.edge_weights.size()}) {
    TORCH_CHECK_VALUE(static_cast<int64_t>(size) == n * parts,
                      "sample_batch expects a topology per request and partition (", n * parts,
                      "), got ", size);
  }
  TORCH_CHECK_VALUE(static_cast<int64_t>(plan.rng_seeds.size()) >= n * parts,
                    "sample_batch needs ", n * parts, " random keys, got ",
                    plan.rng_seeds.size());
  check_batch_books(plan, device);
  for (const auto& s : plan.seeds) {
    TORCH_CHECK_VALUE(s.device() == device && s.scalar_type() == at::kLong && s.dim() == 1,
                      "seeds must be 1-D int64 tensors on ", device);
  }
  std::vector<int64_t> rows;
  for (int64_t r = 0; r < n; ++r) {
    const bool in_order = plan.hops[r] >= 0 && plan.hops[r] < plan.num_hops &&
                          (r == 0 || plan.hops[r] >= plan.hops[r - 1]);
    TORCH_CHECK_VALUE(in_order, "sample_batch's requests must come in hop order within [0, ",
                      plan.num_hops, "), got hop ", plan.hops[r]);
    for (int64_t t : {plan.src_types[r], plan.nbr_types[r]}) {
      TORCH_CHECK_VALUE(t >= 0 && t < types, "node type index ", t, " out of range for ", types,
                        " node types");
    }
    TORCH_CHECK_VALUE(plan.edge_types[r] >= 0 && plan.edge_types[r] < plan.num_edge_types,
                      "edge type index ", plan.edge_types[r], " out of range");
    TORCH_CHECK_VALUE(plan.fanouts[r] >= 0,
                      "sample_batch needs fanouts >= 0 (all neighbors has no bound ahead), got ",
                      plan.fanouts[r]);
    for (int64_t i = plan.topology(r); i < plan.topology(r + 1); ++i) {
      rows.push_back(check_csr_layout(plan.indptrs[i], plan.indices[i]));
      check_device(plan.indptrs[i], "indptr", device);
      check_edge_data(plan.edge_ids[i], plan.edge_weights[i], plan.indices[i]);
      const int64_t first = plan.topology(r);
      const bool alike = plan.indptrs[i].scalar_type() == plan.indptrs[first].scalar_type() &&
                         plan.edge_ids[i].has_value() == plan.edge_ids[first].has_value() &&
                         plan.edge_weights[i].has_value() == plan.edge_weights[first].has_value();
      TORCH_CHECK_VALUE(alike, "a request's partitions need topologies of one index type, all ",
                        "with edge ids and weights or none");
    }
  }
  return rows;
}

}  // namespace kernels
}  // namespace glt
