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
#include <utility>
#include <vector>

#include "checks.h"
#include "kernels/batch_plan.h"
#include "kernels/hop_induce.h"
#include "kernels/id_table.h"

namespace glt {
namespace kernels {

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

// Each seed's partition by `book` (int32; num_parts past the frontier),
// reporting a book entry outside [0, num_parts) (the seed then reads
// partition 0: the batch raises). A seed outside the book reads partition
// 0 too: it is outside its type's nodes, which the batch raises first.
template <typename Backend>
at::Tensor partition_of_seeds(const Backend& backend, const at::Tensor& book,
                              const SeedRange& seeds, int64_t num_parts, int64_t* report) {
  auto part = at::empty({seeds.bound}, book.options().dtype(at::kInt));
  int32_t* out = part.data_ptr<int32_t>();
  const int64_t book_size = book.numel();
  AT_DISPATCH_INTEGRAL_TYPES(book.scalar_type(), "sample_batch", [&] {
    const scalar_t* entry = book.data_ptr<scalar_t>();
    backend.for_each(seeds.bound, [=] GLT_HOST_DEVICE(int64_t i) {
      if (!seeds.holds(i)) {
        out[i] = static_cast<int32_t>(num_parts);
        return;
      }
      const int64_t s = seeds.id(i);
      int64_t p = s >= 0 && s < book_size ? static_cast<int64_t>(entry[s]) : 0;
      if (p < 0 || p >= num_parts) {
        device::atomic_min(&report[kBadPart], i);
        p = 0;
      }
      out[i] = static_cast<int32_t>(p);
    });
  });
  return part;
}

// Each seed's rank among the seeds of its partition before it (part[i] <
// num_parts), from the running count of each partition's seeds.
template <typename Backend>
at::Tensor rank_in_partition(const Backend& backend, const at::Tensor& part, int64_t num_parts) {
  const auto options = part.options().dtype(at::kLong);
  const at::Tensor running =
      part.unsqueeze(1).eq(at::arange(num_parts, part.options())).to(at::kLong).cumsum(0);
  auto rank = at::empty({part.numel()}, options);
  const int64_t* count = running.data_ptr<int64_t>();
  const int32_t* p = part.data_ptr<int32_t>();
  int64_t* out = rank.data_ptr<int64_t>();
  backend.for_each(part.numel(), [=] GLT_HOST_DEVICE(int64_t i) {
    out[i] = p[i] < num_parts ? count[i * num_parts + p[i]] - 1 : 0;
  });
  return rank;
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
    if (plan_.partitioned()) {
      for (int64_t r = 0; r < plan_.num_requests(); ++r) graphs_.push_back(partition_graphs(r));
    }
    for (int64_t e = 0; e < plan_.num_edge_types; ++e) {
      const bool with_eids = has_edge_ids(e);
      rows_.push_back(at::empty({bounds_.edges[e]}, options));
      cols_.push_back(at::empty({bounds_.edges[e]}, options));
      eids_.push_back(at::empty({with_eids ? bounds_.edges[e] : 0}, options));
    }
    find_markers();
  }

  // Launches every hop; the caller then reads the state (finish). The node
  // counts as a hop ends are marked by its last insert (seeds_marker_,
  // hop_marker_), or apart where the hop inserts nothing.
  void launch() {
    requests_.clear();
    seed_locals_.clear();
    state_.copy_(initial_);
    for (auto& table : tables_) clear_table(backend_, table);
    add_seeds();
    if (seeds_marker_ < 0) mark_nodes(0);
    int64_t hop = 0;
    for (int64_t r = 0; r < plan_.num_requests(); ++r) {
      for (; hop < plan_.hops[r]; ++hop) {
        if (hop_marker_[hop] < 0) mark_nodes(hop + 1);
      }
      requests_.push_back(run_request(r));
    }
    for (; hop < plan_.num_hops; ++hop) {
      if (hop_marker_[hop] < 0) mark_nodes(hop + 1);
    }
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
    backend_.copy_to_device(at::tensor(rng_seeds, at::kLong), keys_);
  }

  // Starts the state's copy to the host, behind the launched kernels,
  // without waiting for it: the host may prepare the next batch meanwhile.
  void read_back() { host_state_ = backend_.to_host_async(state_, &state_ready_); }

  // Waits for the state on the host (read_back's copy, started here if it
  // was not: the one host sync); raises what a check found after `forget`
  // (the inducer's reset), else cuts the outputs to size: views of the
  // batch's buffers, or copies (`copy_out`) where they are filled again by
  // the next launch.
  BatchOutputs finish(const std::function<void()>& forget, bool copy_out = false) {
    if (!host_state_.defined()) read_back();
    backend_.wait(state_ready_);
    const at::Tensor read = std::exchange(host_state_, at::Tensor());
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
      if (plan_.edge_types[r] == e && plan_.edge_ids[plan_.topology(r)].has_value()) return true;
    }
    return false;
  }

  // The CsrViews of request r's partitions, on the device.
  at::Tensor partition_graphs(int64_t r) const {
    const int64_t first = plan_.topology(r);
    return AT_DISPATCH_INDEX_TYPES(plan_.indptrs[first].scalar_type(), "sample_batch", [&] {
      std::vector<CsrView<index_t>> graphs;
      for (int64_t i = first; i < plan_.topology(r + 1); ++i) {
        graphs.push_back(csr_view<index_t>(plan_.indptrs[i], plan_.indices[i], plan_.edge_ids[i],
                                           plan_.edge_weights[i]));
      }
      return structs_on_device(backend_, graphs, options_.device());
    });
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
      seed_locals_.push_back(at::empty({seeds.numel()}, options_));
      InsertTargets out;
      out.nodes = nodes_[t].data_ptr<int64_t>();
      out.local = seed_locals_.back().data_ptr<int64_t>();
      if (t == seeds_marker_) mark_with(out, 0);
      insert_bounded(backend_, tables_[t], seeds, nullptr, state(layout_.size(t)),
                     state(layout_.scratch()), out);
    }
  }

  // Each type's node count, as the frontiers of hop `h` end (after hop h - 1).
  void mark_nodes(int64_t h) {
    mark_sizes(backend_, state(layout_.size(0)), state(layout_.marks(0, 0)), plan_.num_types(),
               plan_.num_hops + 1, h);
  }

  // mark_nodes(h) done by the insert of `out`, at its end.
  void mark_with(InsertTargets& out, int64_t h) {
    out.mark.sizes = state(layout_.size(0));
    out.mark.marks = state(layout_.marks(0, 0));
    out.mark.types = plan_.num_types();
    out.mark.stride = plan_.num_hops + 1;
    out.mark.h = h;
  }

  // Which insert ends the seeds (the last type with seeds) and which ends
  // each hop (its last request that draws), -1 where none inserts.
  void find_markers() {
    for (int64_t t = 0; t < plan_.num_types(); ++t) {
      if (plan_.seeds[t].numel() > 0) seeds_marker_ = t;
    }
    hop_marker_.assign(plan_.num_hops, -1);
    for (int64_t r = 0; r < plan_.num_requests(); ++r) {
      if (bounds_.seeds[r] > 0 && bounds_.draws[r] > 0) hop_marker_[plan_.hops[r]] = r;
    }
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
    // The k-th request with seeds takes the k-th key (count_bounded's first
    // thread takes it).
    int64_t* key_index = state(layout_.key_index(r));
    const KeyTake take{state(layout_.drawn()), key_index};
    DrawTargets out;
    out.rows = rows_[e].data_ptr<int64_t>();
    const int64_t first = plan_.topology(r);
    const bool with_edge = plan_.edge_ids[first].has_value();
    out.eids = with_edge ? eids_[e].data_ptr<int64_t>() : nullptr;
    out.at = state(layout_.edges(e));
    out.keys = keys_.data_ptr<int64_t>();
    out.key_index = key_index;
    out.num_ids = plan_.num_nodes[plan_.nbr_types[r]];
    // The draws claim their neighbors' slots as they read them (the table has
    // room for every draw of the batch).
    hop.slots = at::empty({bounds_.draws[r]}, options_);
    out.claims = slot_claims(tables_[plan_.nbr_types[r]], hop.slots);
    AT_DISPATCH_INDEX_TYPES(plan_.indptrs[first].scalar_type(), "sample_batch", [&] {
      if (plan_.partitioned()) {
        draw_partitioned<index_t>(r, seeds, take, out, hop);
        return;
      }
      const SingleTopology<index_t> g{csr_view<index_t>(
          plan_.indptrs[first], plan_.indices[first], plan_.edge_ids[first],
          plan_.edge_weights[first])};
      count_bounded(backend_, g, seeds, plan_.fanouts[r], plan_.replace, hop, take);
      draw_bounded(backend_, g, seeds, plan_.fanouts[r], plan_.replace, g.g.weights != nullptr,
                   with_edge, bounds_.draws[r], out, hop);
    });
    add_draws(r, hop);
    return hop;
  }

  // Request r's draws over the host's partitions: each seed's partition and
  // rank first (kept with the hop for its errors), then its draws.
  template <typename index_t>
  void draw_partitioned(int64_t r, const SeedRange& seeds, const KeyTake& take,
                        const DrawTargets& out, BoundedHop& hop) {
    const int64_t parts = plan_.num_partitions, first = plan_.topology(r);
    const at::Tensor& book = plan_.books[plan_.src_types[r]];
    hop.seed_parts = partition_of_seeds(backend_, book, seeds, parts,
                                        hop.report.data_ptr<int64_t>());
    const at::Tensor rank = rank_in_partition(backend_, hop.seed_parts, parts);
    hop.draw_parts = at::empty({bounds_.draws[r]}, hop.seed_parts.options());
    const PartitionedTopologies<index_t> source{
        reinterpret_cast<const CsrView<index_t>*>(graphs_[r].data_ptr()),
        hop.seed_parts.data_ptr<int32_t>(), rank.data_ptr<int64_t>(),
        hop.draw_parts.data_ptr<int32_t>(), parts};
    count_bounded(backend_, source, seeds, plan_.fanouts[r], plan_.replace, hop, take);
    draw_bounded(backend_, source, seeds, plan_.fanouts[r], plan_.replace,
                 plan_.edge_weights[first].has_value(), plan_.edge_ids[first].has_value(),
                 bounds_.draws[r], out, hop);
  }

  // Request r's draws added to its neighbor type's node list, their local
  // ids to its edge type's cols; then its report's total is its draws and
  // that edge type's count grows by them (the insert's last kernel).
  void add_draws(int64_t r, BoundedHop& hop) {
    const int64_t e = plan_.edge_types[r], nt = plan_.nbr_types[r];
    int64_t* report = hop.report.data_ptr<int64_t>();
    InsertTargets out;
    out.local = cols_[e].data_ptr<int64_t>();
    out.at = state(layout_.edges(e));
    out.nodes = nodes_[nt].data_ptr<int64_t>();
    out.total = report + kTotal;
    out.advance = state(layout_.edges(e));
    if (hop_marker_[plan_.hops[r]] == r) mark_with(out, plan_.hops[r] + 1);
    insert_bounded(backend_, tables_[nt], hop.nbrs,
                   hop.offsets.data_ptr<int64_t>() + bounds_.seeds[r], state(layout_.size(nt)),
                   report + kFresh, out, hop.slots);
  }

  static bool has_failure(const int64_t* r) {
    // (A frontier's seeds are known to the inducer: none is unseen.)
    return r[kBadSeed] != kNone || r[kBadRow] != kNone || r[kBadNeighbor] != kNone ||
           r[kBadPart] != kNone;
  }

  void raise_request_failure(const int64_t* report, const at::Tensor& seeds, int64_t r) const {
    const auto seed = [&](int64_t slot) { return seeds[report[slot]].item<int64_t>(); };
    const BoundedHop& hop = requests_[r];
    if (report[kBadPart] != kNone) {
      const int64_t s = seed(kBadPart);
      TORCH_CHECK_VALUE(false, "the partition book gives node ", s, " partition ",
                        plan_.books[plan_.src_types[r]][s].item<int64_t>(), ", outside the ",
                        plan_.num_partitions, " partitions");
    }
    // The topology a seed (i) or draw (j) read: its partition's.
    const auto topology = [&](const at::Tensor& parts, int64_t i) {
      return plan_.topology(r, parts.defined() ? parts[i].item<int64_t>() : 0);
    };
    if (report[kBadSeed] != kNone) {
      TORCH_CHECK_VALUE(false, "node ", seed(kBadSeed), " has no row in a topology of ",
                        rows_of_[topology(hop.seed_parts, report[kBadSeed])], " rows");
    }
    TORCH_CHECK_VALUE(report[kBadRow] == kNone, "indptr gives row ", seed(kBadRow),
                      " entries outside indices");
    const int64_t j = report[kBadNeighbor];
    const at::Tensor& indices = plan_.indices[topology(hop.draw_parts, j)];
    const int64_t entry = hop.positions[j].item<int64_t>();
    TORCH_CHECK_VALUE(false, "indices holds node id ", indices[entry].item<int64_t>(),
                      ", outside the ", plan_.num_nodes[plan_.nbr_types[r]],
                      " nodes of its type");
  }

  BatchOutputs outputs(const at::Tensor& read, bool copy_out) {
    const int64_t* s = read.data_ptr<int64_t>();
    const auto cut = [](const at::Tensor& t, int64_t n) {
      return t.numel() ? t.narrow(0, 0, n) : t;
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
    if (copy_out) copied_out({&nodes, &rows, &cols, &eids, &seed_locals});
    return {nodes, rows, cols, eids, seed_locals, counts};
  }

  // Replaces the outputs (int64 views of the batch's buffers) by copies, all
  // in one new buffer and by one batched copy: one allocation and, on a GPU,
  // one launch for them all.
  void copied_out(const std::vector<std::vector<at::Tensor>*>& groups) const {
    int64_t total = 0;
    for (const auto* group : groups) {
      for (const auto& t : *group) total += t.numel();
    }
    const at::Tensor buffer = at::empty({total}, options_);
    std::vector<at::Tensor> from, to;
    int64_t at = 0;
    for (auto* group : groups) {
      for (auto& t : *group) {
        const at::Tensor copy = buffer.narrow(0, at, t.numel());
        at += t.numel();
        if (t.numel() > 0) {
          from.push_back(t);
          to.push_back(copy);
        }
        t = copy;
      }
    }
    if (!from.empty()) at::_foreach_copy_(to, from);
  }

  Backend backend_;
  std::vector<IdTable>& tables_;
  at::TensorOptions options_;
  BatchPlan plan_;
  std::vector<int64_t> rows_of_;
  BatchBounds bounds_;
  BatchLayout layout_;
  at::Tensor initial_, state_, keys_;
  at::Tensor host_state_;  // read_back's copy of state_, until finish
  typename Backend::Ready state_ready_{};
  std::vector<at::Tensor> nodes_, rows_, cols_, eids_, seed_locals_;
  std::vector<at::Tensor> graphs_;  // per request, its partitions' CsrViews (partitioned plans)
  int64_t seeds_marker_ = -1;           // find_markers
  std::vector<int64_t> hop_marker_;
  std::vector<BoundedHop> requests_;
};

}  // namespace kernels
}  // namespace glt
