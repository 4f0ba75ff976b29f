// A whole batch sampled and induced on the device with one host sync, at its
// end: every hop's frontier, sizes and random keys stay on the device.
//
// The hops of kernels/hop_induce.h tell the host their sizes once a hop,
// because the next hop's seeds are the nodes the last one met. Here each
// node type keeps one node list, numbered in order (its local ids), into
// which every insert appends its new nodes; a hop's frontier of a type is
// the range of that list the hop before appended, its ends read by the
// kernels on the device. Each output edge type keeps one buffer of rows,
// cols and edge ids, into which each request writes at the type's count,
// read on the device too. Every buffer is sized ahead by what the fanouts
// allow (a frontier of a type holds at most its node count), so the host
// launches every hop without waiting for one. A request whose frontier turns
// out empty draws nothing and takes no random key: the k-th request that
// draws takes the k-th key, as the hop-by-hop engine draws them.
#pragma once

#include <ATen/ATen.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <optional>
#include <tuple>
#include <vector>

#include "checks.h"
#include "kernels/hop_induce.h"
#include "kernels/id_table.h"

namespace glt {
namespace kernels {

// What a batch is: its seeds and node counts by node type, then its
// requests in hop order (each: its hop, output edge type, seed and neighbor
// node types, fanout >= 0 and topology).
struct BatchPlan {
  std::vector<at::Tensor> seeds;
  std::vector<int64_t> num_nodes;
  int64_t num_hops = 0;
  int64_t num_edge_types = 0;
  std::vector<int64_t> hops, edge_types, src_types, nbr_types, fanouts;
  std::vector<at::Tensor> indptrs, indices;
  std::vector<std::optional<at::Tensor>> edge_ids, edge_weights;
  bool replace = false;
  std::vector<int64_t> rng_seeds;  // the keys, one per request at most

  int64_t num_types() const { return static_cast<int64_t>(seeds.size()); }
  int64_t num_requests() const { return static_cast<int64_t>(hops.size()); }
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

// Checks a plan's shape and tensors; returns each request's topology rows.
inline std::vector<int64_t> checked_batch_plan(const BatchPlan& plan, const at::Device& device) {
  const int64_t types = plan.num_types(), n = plan.num_requests();
  TORCH_CHECK_VALUE(static_cast<int64_t>(plan.num_nodes.size()) == types,
                    "sample_batch expects one node count per node type (", types, "), got ",
                    plan.num_nodes.size());
  for (size_t size : {plan.edge_types.size(), plan.src_types.size(), plan.nbr_types.size(),
                      plan.fanouts.size(), plan.indptrs.size(), plan.indices.size(),
                      plan.edge_ids.size(), plan.edge_weights.size()}) {
    TORCH_CHECK_VALUE(static_cast<int64_t>(size) == n,
                      "sample_batch expects one entry per request (", n,
                      ") in every list, got one of ", size);
  }
  TORCH_CHECK_VALUE(static_cast<int64_t>(plan.rng_seeds.size()) >= n, "sample_batch needs ", n,
                    " random keys, got ", plan.rng_seeds.size());
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
    rows.push_back(check_csr_layout(plan.indptrs[r], plan.indices[r]));
    check_device(plan.indptrs[r], "indptr", device);
    check_edge_data(plan.edge_ids[r], plan.edge_weights[r], plan.indices[r]);
  }
  return rows;
}

// The kernels of a batch besides the hop's (free functions: nvcc takes
// extended lambdas only where the enclosing function is public).

// The first index of `ids` outside [0, num_ids) into *bad (atomic min).
template <typename Backend>
void find_out_of_range(const Backend& backend, const at::Tensor& ids, int64_t num_ids,
                       int64_t* bad) {
  const int64_t* id = ids.data_ptr<int64_t>();
  backend.for_each(ids.numel(), [=] GLT_HOST_DEVICE(int64_t i) {
    if (id[i] < 0 || id[i] >= num_ids) device::atomic_min(bad, i);
  });
}

// marks[t * stride + h] = sizes[t] for each of `types` node types.
template <typename Backend>
void mark_sizes(const Backend& backend, const int64_t* sizes, int64_t* marks, int64_t types,
                int64_t stride, int64_t h) {
  backend.for_each(types, [=] GLT_HOST_DEVICE(int64_t t) { marks[t * stride + h] = sizes[t]; });
}

// A request's key: *key_index = *drawn, the requests with seeds before it;
// then *drawn counts it too if it has seeds.
template <typename Backend>
void take_key(const Backend& backend, const SeedRange& seeds, int64_t* drawn,
              int64_t* key_index) {
  backend.for_each(1, [=] GLT_HOST_DEVICE(int64_t) {
    *key_index = *drawn;
    if (seeds.holds(0)) ++*drawn;
  });
}

// A request's draws into its report and its edge type's count (*edges).
template <typename Backend>
void count_edges(const Backend& backend, int64_t* edges, BoundedHop& hop) {
  const int64_t* last = hop.offsets.data_ptr<int64_t>() + hop.counts.numel();
  int64_t* report = hop.report.data_ptr<int64_t>();
  backend.for_each(1, [=] GLT_HOST_DEVICE(int64_t) {
    report[kTotal] = *last;
    *edges += *last;
  });
}

// A batch's buffers and launches over an inducer's tables
// (InducerImpl::sample_batch). It may run again, for other seeds and keys of
// the same sizes (refill): every launch starts from the initial state and
// empty tables, and touches only the buffers it made, so that a CUDA graph
// of one launch replays the batch (cuda/batch_graphs.h).
template <typename Backend>
class BatchSampling {
 public:
  BatchSampling(Backend backend, std::vector<IdTable>& tables, const at::TensorOptions& options,
                BatchPlan plan)
      : backend_(backend),
        tables_(tables),
        options_(options),
        plan_(std::move(plan)),
        rows_of_(checked_batch_plan(plan_, options.device())),
        bounds_(batch_bounds(plan_)),
        layout_{plan_.num_types(), plan_.num_edge_types, plan_.num_hops, plan_.num_requests()} {
    TORCH_CHECK_VALUE(static_cast<int64_t>(tables.size()) == plan_.num_types(),
                      "sample_batch expects seeds for each of the inducer's ", tables.size(),
                      " node types, got ", plan_.num_types());
    for (auto& seeds : plan_.seeds) seeds = seeds.contiguous();
    initial_ = backend.to_device(layout_.initial(), options.device());
    state_ = at::empty_like(initial_);
    keys_ = backend.to_device(at::tensor(plan_.rng_seeds, at::kLong), options.device());
    for (int64_t t = 0; t < plan_.num_types(); ++t) {
      nodes_.push_back(at::empty({bounds_.nodes[t]}, options));
      reserve_batch_table(tables_[t], bounds_.nodes[t]);
    }
    for (int64_t e = 0; e < plan_.num_edge_types; ++e) {
      const bool with_eids = has_edge_ids(e);
      rows_.push_back(at::empty({bounds_.edges[e]}, options));
      cols_.push_back(at::empty({bounds_.edges[e]}, options));
      eids_.push_back(at::empty({with_eids ? bounds_.edges[e] : 0}, options));
    }
  }

  // Launches every hop; the caller then reads the state (finish).
  void launch() {
    requests_.clear();
    seed_locals_.clear();
    state_.copy_(initial_);
    for (auto& table : tables_) {
      table.keys.fill_(device::kEmptyKey);
      table.vals.fill_(kUnclaimed);
    }
    add_seeds();
    int64_t hop = 0;
    for (int64_t r = 0; r < plan_.num_requests(); ++r) {
      for (; hop < plan_.hops[r]; ++hop) mark_nodes(hop + 1);
      requests_.push_back(run_request(r));
    }
    for (; hop < plan_.num_hops; ++hop) mark_nodes(hop + 1);
  }

  // The seeds and keys of another batch of the same sizes, for the next
  // launch (or replay of one).
  void refill(const std::vector<at::Tensor>& seeds, const std::vector<int64_t>& rng_seeds) {
    TORCH_CHECK_VALUE(
        seeds.size() == plan_.seeds.size() && rng_seeds.size() == plan_.rng_seeds.size(),
        "refill needs seeds and keys of the batch's counts");
    for (size_t t = 0; t < seeds.size(); ++t) {
      TORCH_CHECK_VALUE(seeds[t].sizes() == plan_.seeds[t].sizes(),
                        "refill needs seeds of the batch's sizes");
      plan_.seeds[t].copy_(seeds[t], /*non_blocking=*/true);
    }
    plan_.rng_seeds = rng_seeds;
    keys_.copy_(backend_.to_device(at::tensor(rng_seeds, at::kLong), options_.device()));
  }

  // Reads the state back (the one host sync); raises what a check found
  // after `forget` (the inducer's reset), else cuts the outputs to size:
  // views of the batch's buffers, or copies (`copy_out`) where they are
  // filled again by the next launch.
  BatchOutputs finish(const std::function<void()>& forget, bool copy_out = false) {
    const at::Tensor read = state_.cpu();
    const int64_t* s = read.data_ptr<int64_t>();
    for (int64_t t = 0; t < plan_.num_types(); ++t) {
      const int64_t bad = s[layout_.bad_seed(t)];
      if (bad == kNone) continue;
      forget();
      TORCH_CHECK_VALUE(false, "seeds hold node id ", plan_.seeds[t][bad].item<int64_t>(),
                        ", outside the ", plan_.num_nodes[t], " nodes of their type");
    }
    for (int64_t r = 0; r < plan_.num_requests(); ++r) {
      const int64_t t = plan_.src_types[r], h = plan_.hops[r];
      const int64_t first = h == 0 ? 0 : s[layout_.marks(t, h - 1)];
      const at::Tensor seeds = nodes_[t].narrow(0, first, s[layout_.marks(t, h)] - first);
      const int64_t* report = s + layout_.report(r);
      if (has_failure(report)) {
        forget();
        raise_request_failure(report, seeds, r);
      }
    }
    return outputs(read, copy_out);
  }

 private:
  bool has_edge_ids(int64_t e) const {
    for (int64_t r = 0; r < plan_.num_requests(); ++r) {
      if (plan_.edge_types[r] == e && plan_.edge_ids[r].has_value()) return true;
    }
    return false;
  }

  // Gives a table room for `n` nodes (a new one where it has not); the
  // launch empties it.
  void reserve_batch_table(IdTable& table, int64_t n) {
    if (device::table_capacity(n) > table.capacity) {
      allocate_table(table, device::table_capacity(n), options_);
    }
    table.size = 0;
  }

  int64_t* state(int64_t slot) const { return state_.data_ptr<int64_t>() + slot; }

  // The seeds, checked and added to their types' node lists.
  void add_seeds() {
    for (int64_t t = 0; t < plan_.num_types(); ++t) {
      const at::Tensor& seeds = plan_.seeds[t];
      find_out_of_range(backend_, seeds, plan_.num_nodes[t], state(layout_.bad_seed(t)));
      InsertTargets out;
      out.nodes = nodes_[t].data_ptr<int64_t>();
      insert_bounded(backend_, tables_[t], seeds, nullptr, state(layout_.size(t)),
                     state(layout_.scratch()), out);
      seed_locals_.push_back(lookup_table(backend_, tables_[t], seeds));
    }
    mark_nodes(0);
  }

  // Each type's node count, as the frontiers of hop `h` end (after hop h - 1).
  void mark_nodes(int64_t h) {
    mark_sizes(backend_, state(layout_.size(0)), state(layout_.marks(0, 0)), plan_.num_types(),
               plan_.num_hops + 1, h);
  }

  // Request r: its frontier, its key, its draws and their inserts.
  BoundedHop run_request(int64_t r) {
    const int64_t t = plan_.src_types[r], h = plan_.hops[r], e = plan_.edge_types[r];
    BoundedHop hop;
    hop.report = state_.narrow(0, layout_.report(r), kReportSize);
    if (bounds_.seeds[r] == 0) return hop;
    SeedRange seeds{nodes_[t].data_ptr<int64_t>()};
    seeds.first = h == 0 ? nullptr : state(layout_.marks(t, h - 1));
    seeds.end = state(layout_.marks(t, h));
    seeds.bound = bounds_.seeds[r];
    // The k-th request with seeds takes the k-th key.
    int64_t* key_index = state(layout_.key_index(r));
    take_key(backend_, seeds, state(layout_.drawn()), key_index);
    DrawTargets out;
    out.rows = rows_[e].data_ptr<int64_t>();
    out.eids = plan_.edge_ids[r].has_value() ? eids_[e].data_ptr<int64_t>() : nullptr;
    out.at = state(layout_.edges(e));
    out.keys = keys_.data_ptr<int64_t>();
    out.key_index = key_index;
    out.num_ids = plan_.num_nodes[plan_.nbr_types[r]];
    const at::Tensor& indptr = plan_.indptrs[r];
    const at::Tensor& indices = plan_.indices[r];
    AT_DISPATCH_INDEX_TYPES(indptr.scalar_type(), "sample_batch", [&] {
      const auto& ids = plan_.edge_ids[r];
      const auto& weights = plan_.edge_weights[r];
      const CsrView<index_t> g = csr_view<index_t>(indptr, indices, ids, weights);
      count_bounded(backend_, g, rows_of_[r], indices.numel(), seeds, plan_.fanouts[r],
                    plan_.replace, hop);
      draw_bounded(backend_, g, seeds, plan_.fanouts[r], plan_.replace, bounds_.draws[r], out,
                   hop);
    });
    add_draws(r, hop);
    return hop;
  }

  // Request r's draws added to its neighbor type's node list, their local
  // ids to its edge type's cols; then that edge type's count grows.
  void add_draws(int64_t r, BoundedHop& hop) {
    const int64_t e = plan_.edge_types[r], nt = plan_.nbr_types[r];
    InsertTargets out;
    out.local = cols_[e].data_ptr<int64_t>();
    out.at = state(layout_.edges(e));
    out.nodes = nodes_[nt].data_ptr<int64_t>();
    int64_t* report = hop.report.data_ptr<int64_t>();
    insert_bounded(backend_, tables_[nt], hop.nbrs,
                   hop.offsets.data_ptr<int64_t>() + bounds_.seeds[r], state(layout_.size(nt)),
                   report + kFresh, out);
    count_edges(backend_, state(layout_.edges(e)), hop);
  }

  static bool has_failure(const int64_t* r) {
    // (A frontier's seeds are known to the inducer: none is unseen.)
    return r[kBadSeed] != kNone || r[kBadRow] != kNone || r[kBadNeighbor] != kNone;
  }

  void raise_request_failure(const int64_t* report, const at::Tensor& seeds, int64_t r) const {
    const auto seed = [&](int64_t slot) { return seeds[report[slot]].item<int64_t>(); };
    TORCH_CHECK_VALUE(report[kBadSeed] == kNone, "node ", seed(kBadSeed), " has no row in a ",
                      "topology of ", rows_of_[r], " rows");
    TORCH_CHECK_VALUE(report[kBadRow] == kNone, "indptr gives row ", seed(kBadRow),
                      " entries outside indices");
    const BoundedHop& hop = requests_[r];
    const int64_t entry = hop.positions[report[kBadNeighbor]].item<int64_t>();
    TORCH_CHECK_VALUE(false, "indices holds node id ", plan_.indices[r][entry].item<int64_t>(),
                      ", outside the ", plan_.num_nodes[plan_.nbr_types[r]],
                      " nodes of its type");
  }

  BatchOutputs outputs(const at::Tensor& read, bool copy_out) {
    const int64_t* s = read.data_ptr<int64_t>();
    const auto cut = [&](const at::Tensor& t, int64_t n) {
      const at::Tensor part = t.numel() ? t.narrow(0, 0, n) : t;
      return copy_out ? part.clone() : part;
    };
    std::vector<at::Tensor> nodes, rows, cols, eids, seed_locals;
    for (int64_t t = 0; t < plan_.num_types(); ++t) {
      tables_[t].size = s[layout_.size(t)];
      nodes.push_back(cut(nodes_[t], tables_[t].size));
      seed_locals.push_back(cut(seed_locals_[t], seed_locals_[t].numel()));
    }
    for (int64_t e = 0; e < plan_.num_edge_types; ++e) {
      const int64_t n = s[layout_.edges(e)];
      rows.push_back(cut(rows_[e], n));
      cols.push_back(cut(cols_[e], n));
      eids.push_back(cut(eids_[e], n));
    }
    // The node marks, each request's edge count, how many requests drew.
    auto counts = at::empty({layout_.marks(plan_.num_types(), 0) - layout_.marks(0, 0) +
                             plan_.num_requests() + 1},
                            at::kLong);
    int64_t* c = counts.data_ptr<int64_t>();
    c = std::copy(s + layout_.marks(0, 0), s + layout_.marks(plan_.num_types(), 0), c);
    for (int64_t r = 0; r < plan_.num_requests(); ++r) *c++ = s[layout_.report(r) + kTotal];
    *c = s[layout_.drawn()];
    return {nodes, rows, cols, eids, seed_locals, counts};
  }

  Backend backend_;
  std::vector<IdTable>& tables_;
  at::TensorOptions options_;
  BatchPlan plan_;
  std::vector<int64_t> rows_of_;
  BatchBounds bounds_;
  BatchLayout layout_;
  at::Tensor initial_, state_, keys_;
  std::vector<at::Tensor> nodes_, rows_, cols_, eids_, seed_locals_;
  std::vector<BoundedHop> requests_;
};

}  // namespace kernels
}  // namespace glt
