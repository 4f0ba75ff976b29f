// The inducer for any backend: deduplicates and relabels the nodes met while
// sampling several hops into one local id space per node type, with a hash
// table per type that many threads fill at once.
//
// Its results equal the CPU inducer's exactly: new nodes get local ids in
// order of first appearance. Adding a batch of candidate ids takes three
// passes and a prefix sum: (1) every candidate claims its key's slot and
// offers its position to the slot (an atomic max of -(position + 2), so the
// first occurrence wins; slots of known nodes hold their local id >= 0 and
// ignore offers); (2) a candidate is new when the slot holds its own offer;
// the new ones are numbered by a prefix sum; (3) their slots get their local
// ids, and every candidate reads its own: its slot's, or, where the slot
// still holds an offer, the number the prefix sum gave its first occurrence.
#pragma once

#include <ATen/ATen.h>

#include <limits>
#include <memory>
#include <optional>
#include <tuple>
#include <vector>

#include "checks.h"
#include "kernels/batch_sample.h"
#include "kernels/given_hop.h"
#include "kernels/hop_induce.h"
#include "kernels/hop_pieces.h"
#include "kernels/hop_plan.h"
#include "kernels/id_table.h"

namespace glt {
namespace kernels {

template <typename Backend>
class InducerImpl {
 public:
  // `disjoint_bits` > 0: disjoint sampling's keys (each seed's subgraph in
  // the bits above them, a node's id in them), whose ids sample_induce_next
  // draws from and whose subgraphs it keys the neighbors into.
  InducerImpl(int64_t num_node_types, Backend backend, at::TensorOptions options,
              int64_t disjoint_bits = 0)
      : backend_(backend), options_(options.dtype(at::kLong)), disjoint_bits_(disjoint_bits) {
    TORCH_CHECK_VALUE(num_node_types >= 1, "an Inducer needs at least one node type, got ",
                      num_node_types);
    TORCH_CHECK_VALUE(disjoint_bits >= 0 && disjoint_bits <= 62,
                      "disjoint_bits must be in [0, 62], got ", disjoint_bits);
    tables_.resize(num_node_types);
    for (auto& table : tables_) allocate_table(table, device::table_capacity(0), options_);
  }

  int64_t num_node_types() const { return static_cast<int64_t>(tables_.size()); }

  // Registers the seeds; returns them per type without duplicates, in order
  // (one host sync). `distinct`: the caller vouches that the seeds are
  // distinct and non-negative (disjoint sampling's keys of checked seeds),
  // so the tables' sizes are known and no sync is needed: the seeds are
  // returned as they are. (A negative one would not be added, and the hop
  // drawn from it says its seed was not seen.)
  std::vector<at::Tensor> init_nodes(const std::vector<at::Tensor>& seeds, bool distinct = false) {
    check_idle("init_nodes");
    const int64_t num_types = num_node_types();
    TORCH_CHECK_VALUE(static_cast<int64_t>(seeds.size()) == num_types,
                      "init_nodes expects one seed tensor per node type (", num_types, "), got ",
                      seeds.size());
    reset();
    // Per type: the new nodes, the table's size, the first negative id.
    auto tally = at::zeros({2 * num_types}, options_);
    auto negative = at::full({num_types}, kNone, options_);
    int64_t* count = tally.data_ptr<int64_t>();
    std::vector<at::Tensor> ids, fresh;
    for (int64_t t = 0; t < num_types; ++t) {
      ids.push_back(checked(seeds[t], "seeds"));
      const int64_t* id = ids[t].data_ptr<int64_t>();
      int64_t* first_negative = negative.data_ptr<int64_t>() + t;
      if (!distinct) {
        backend_.for_each(ids[t].numel(), [=] GLT_HOST_DEVICE(int64_t i) {
          if (id[i] < 0) device::atomic_min(first_negative, i);
        });
      }
      reserve_table(backend_, tables_[t], ids[t].numel(), options_);
      fresh.push_back(insert_bounded(backend_, tables_[t], ids[t], nullptr, count + num_types + t,
                                     count + t, InsertTargets{}));
      if (distinct) tables_[t].size = ids[t].numel();
    }
    if (distinct) {  // as given: `fresh` skips a negative one
      for (auto& t : ids) t = t.clone();
      return ids;
    }
    const at::Tensor read = at::cat({tally, negative}).cpu();  // the one sync
    const int64_t* r = read.data_ptr<int64_t>();
    std::vector<at::Tensor> out;
    for (int64_t t = 0; t < num_types; ++t) {
      if (r[2 * num_types + t] != kNone) {
        const int64_t lo = ids[t].min().item<int64_t>();
        reset();
        TORCH_CHECK_VALUE(false, "seeds holds ids outside [0, ", INT64_MAX, "): min ", lo);
      }
      tables_[t].size = r[num_types + t];
      out.push_back(fresh[t].narrow(0, 0, r[t]));
    }
    return out;
  }

  // A hop drawn and added at once, with one host sync (kernels/hop_induce.h):
  // the arguments and results of the CPU Inducer::sample_induce_next, its
  // temporal draws and disjoint keys included (each seed in its temporal
  // window, as the sample_neighbors_temporal op draws it; its neighbors
  // keyed as the disjoint_keys op keys them). A hop that fails a check
  // forgets all nodes (reset) before it raises.
  HopOutputs sample_induce_next(const HopPlan& plan) {
    check_idle("sample_induce_next");
    plan.check_lists();
    std::vector<int64_t> host_sizes, pending(tables_.size(), 0);
    for (const auto& table : tables_) host_sizes.push_back(table.size);
    at::Tensor sizes = backend_.to_device(at::tensor(host_sizes, at::kLong), options_.device());
    std::vector<BoundedHop> hops;
    try {  // a request refused after those before it were added: all forgotten
      for (size_t e = 0; e < plan.num_requests(); ++e) {
        check_type(plan.src_types[e]);
        check_type(plan.nbr_types[e]);
        hops.push_back(draw_and_insert(plan, e, sizes, pending[plan.nbr_types[e]]));
      }
    } catch (...) {
      reset();
      throw;
    }
    return finish_hop(hops, plan, sizes);
  }

  // A whole batch drawn and added with one host sync (kernels/batch_sample.h):
  // the seeds by node type, each type's node count, then the requests in
  // hop order (fanouts >= 0; its `rng_seeds`: the keys the requests that
  // draw take in turn). A batch that fails a check forgets all nodes before
  // it raises. (`replay`: the CUDA inducer's graphs; nothing here.)
  BatchOutputs sample_batch(BatchPlan plan, bool /*replay*/ = false) {
    launch_batch(std::move(plan));
    return finish_batch();
  }

  // sample_batch in two calls: launch_batch starts the batch's work and the
  // copy of its sizes to the host and returns without waiting for either
  // (on a GPU: the host may prepare another batch, in another inducer,
  // while this one runs); finish_batch waits for them and gives the
  // outputs. Until then the inducer takes no other batch or hop.
  void launch_batch(BatchPlan plan, bool /*replay*/ = false) {
    check_idle("launch_batch");
    auto batch = std::make_unique<BatchSampling<Backend>>(backend_, tables_, options_,
                                                          std::move(plan));
    try {
      batch->launch();
      batch->read_back();
    } catch (...) {
      reset();
      throw;
    }
    launched_ = std::move(batch);
  }

  BatchOutputs finish_batch() {
    TORCH_CHECK_VALUE(launched_ != nullptr, "finish_batch: no batch was launched");
    const auto batch = std::move(launched_);
    return batch->finish([this] { reset(); });
  }

  // Whether a launched batch waits for finish_batch.
  bool has_launched_batch() const { return launched_ != nullptr; }

  // Refuses `what` while a launched batch waits for finish_batch (this
  // one's, or, `replay_waits`, one a CUDA graph replays for it): the batch
  // still writes the tables.
  void check_idle(const char* what, bool replay_waits = false) const {
    TORCH_CHECK_VALUE(launched_ == nullptr && !replay_waits, what,
                      ": this inducer's launched batch was not finished (finish_batch)");
  }

  // Adds one hop (see the CPU Inducer::induce_next) with one host sync
  // (kernels/given_hop.h): returns (nodes new to each type in order of first
  // appearance, local seed index per edge, local neighbor index per edge),
  // written into `row_outs[e]` and `col_outs[e]` when given. A hop that fails
  // a check forgets all nodes (reset) before it raises; the outputs given
  // then hold what the hop wrote before the check was read.
  GivenHopOutputs induce_next(
      const std::vector<int64_t>& src_types, const std::vector<int64_t>& nbr_types,
      const std::vector<at::Tensor>& srcs, const std::vector<at::Tensor>& nbrs,
      const std::vector<at::Tensor>& nbr_nums, const std::vector<at::Tensor>& row_outs = {},
      const std::vector<at::Tensor>& col_outs = {}) {
    check_idle("induce_next");
    const std::vector<GivenRequest> requests =
        given_requests(src_types, nbr_types, srcs, nbrs, nbr_nums, row_outs, col_outs);
    std::vector<int64_t> host_sizes, pending(tables_.size(), 0);
    for (const auto& table : tables_) host_sizes.push_back(table.size);
    at::Tensor sizes = backend_.to_device(at::tensor(host_sizes, at::kLong), options_.device());
    std::vector<at::Tensor> reports, fresh;
    try {
      for (const GivenRequest& q : requests) {
        reports.push_back(new_report(options_));
        const at::Tensor src_local = lookup_table(backend_, tables_[q.src_type], q.src);
        at::Tensor row = q.row;
        given_rows(backend_, q.src, src_local, q.num, q.nbr, row, reports.back());
        IdTable& table = tables_[q.nbr_type];
        pending[q.nbr_type] += q.nbr.numel();
        reserve_table(backend_, table, pending[q.nbr_type], options_);
        InsertTargets out;
        out.local = q.col.data_ptr<int64_t>();
        int64_t* report = reports.back().data_ptr<int64_t>();
        fresh.push_back(insert_bounded(backend_, table, q.nbr, nullptr,
                                       sizes.data_ptr<int64_t>() + q.nbr_type, report + kFresh,
                                       out));
      }
    } catch (...) {
      reset();
      throw;
    }
    reports.push_back(sizes);
    const at::Tensor read = at::cat(reports).cpu();  // the one sync
    return finish_given_hop(requests, read.data_ptr<int64_t>(), fresh);
  }

  // Local ids of nodes of type `node_type` (-1 for unknown ones).
  at::Tensor local_ids(int64_t node_type, const at::Tensor& ids) const {
    check_idle("local_ids");
    check_type(node_type);
    return lookup_table(backend_, tables_[node_type], checked(ids, "ids"));
  }

  // Forgets all nodes, and a launched batch, keeping the tables for the
  // next batch.
  void reset() {
    launched_.reset();
    for (auto& table : tables_) clear_table(backend_, table);
  }

 private:
  void check_type(int64_t t) const {
    TORCH_CHECK_VALUE(t >= 0 && t < num_node_types(), "node type index ", t, " out of range for ",
                      num_node_types(), " node types");
  }

  at::Tensor checked(const at::Tensor& t, const char* name) const {
    TORCH_CHECK_VALUE(t.device() == options_.device(), name, " must be on ", options_.device(),
                      ", got ", t.device());
    TORCH_CHECK_VALUE(t.scalar_type() == at::kLong, name, " must be int64, got ", t.scalar_type());
    TORCH_CHECK_VALUE(t.dim() == 1, name, " must be 1-D, got shape ", t.sizes());
    return t.contiguous();
  }

  // Draws request e of a hop and adds its neighbors (kernels/hop_induce.h);
  // `pending`: the bound of the type's earlier requests in this hop.
  BoundedHop draw_and_insert(const HopPlan& plan, size_t e, at::Tensor& sizes, int64_t& pending) {
    const at::Tensor& indptr = plan.indptrs[e];
    const at::Tensor& indices = plan.indices[e];
    const std::optional<at::Tensor>& edge_ids = plan.edge_ids[e];
    const std::optional<at::Tensor>& edge_weights = plan.edge_weights[e];
    const int64_t fanout = plan.fanouts[e], nbr_type = plan.nbr_types[e];
    const at::Tensor keys = checked(plan.srcs[e], "srcs");
    const at::Tensor src = seed_ids(keys);
    check_csr_layout(indptr, indices);
    check_device(indptr, "indptr", options_.device());
    check_edge_data(edge_ids, edge_weights, indices);
    check_fanout(fanout, src.numel(), "fanouts");
    BoundedHop hop;
    hop.report = new_report(options_);
    const at::Tensor seed_local = lookup_table(backend_, tables_[plan.src_types[e]], keys);
    const int64_t n = src.numel();
    const SeedRange seeds = seed_range(src, seed_local);
    int64_t bound = 0;
    const std::optional<at::Tensor> seed_time = plan.checked_seed_times(e, src);
    if (plan.has_pieces(e)) check_pieces(plan, e, n);
    AT_DISPATCH_INDEX_TYPES(indptr.scalar_type(), "sample_induce_next", [&] {
      if (plan.has_pieces(e)) {
        bound = draw_pieces<index_t>(plan, e, seeds, hop);
        return;
      }
      const SingleTopology<index_t> g{csr_view<index_t>(indptr, indices, edge_ids, edge_weights)};
      if (!seed_time.has_value()) {
        bound = draw_request(plan, e, g, seeds, hop);
        return;
      }
      using idx_t = index_t;
      const at::Tensor& edge_time = *plan.edge_times[e];
      const std::optional<at::Tensor> row_max = plan.row_max_time(e);
      GLT_DISPATCH_TIME_TYPES(edge_time.scalar_type(), "sample_induce_next", [&] {
        const TemporalTopology<idx_t, scalar_t> window{
            g, edge_time.data_ptr<scalar_t>(),
            row_max.has_value() ? row_max->data_ptr<scalar_t>() : nullptr,
            seed_time->data_ptr<scalar_t>(), fanout, plan.last};
        bound = draw_request(plan, e, window, seeds, hop);
      });
    });
    IdTable& table = tables_[nbr_type];
    pending += bound;
    reserve_table(backend_, table, pending, options_);
    hop.cols = at::empty({bound}, options_);
    int64_t* report = hop.report.data_ptr<int64_t>();
    InsertTargets out;
    out.local = hop.cols.data_ptr<int64_t>();
    out.total = report + kTotal;
    const at::Tensor inserted =
        disjoint_bits_ > 0 ? keyed_draws(backend_, keys, hop, id_mask()) : hop.nbrs;
    hop.fresh = insert_bounded(backend_, table, inserted, hop.offsets.data_ptr<int64_t>() + n,
                               sizes.data_ptr<int64_t>() + nbr_type, report + kFresh, out);
    return hop;
  }

  // Counts and draws request e's neighbors from `source` (kernels/hop_induce.h);
  // returns the hop's bound: the fanout a seed, or (all neighbors, fanout
  // -1: no bound ahead) the total, read here.
  template <typename Source>
  int64_t draw_request(const HopPlan& plan, size_t e, const Source& source,
                       const SeedRange& seeds, BoundedHop& hop) {
    const int64_t fanout = plan.fanouts[e], n = seeds.bound;
    count_bounded(backend_, source, seeds, fanout, plan.replace, hop);
    const int64_t bound = fanout >= 0 ? n * fanout : hop.offsets[n].item<int64_t>();
    DrawTargets targets;
    targets.key = static_cast<uint64_t>(plan.rng_seeds[e]);
    targets.num_ids = num_ids();
    draw_bounded(backend_, source, seeds, fanout, plan.replace, plan.edge_weights[e].has_value(),
                 plan.edge_ids[e].has_value(), bound, targets, hop);
    return bound;
  }

  // Request e's draws over its pieces (kernels/hop_pieces.h, fanout >= 0);
  // returns the bound, as draw_request does.
  template <typename index_t>
  int64_t draw_pieces(const HopPlan& plan, size_t e, const SeedRange& seeds, BoundedHop& hop) {
    const int64_t fanout = plan.fanouts[e], bound = seeds.bound * fanout;
    const PieceSource<index_t> pieces(backend_, plan, e, hop, bound);
    count_bounded(backend_, pieces.source, seeds, fanout, plan.replace, hop);
    DrawTargets targets = pieces.targets();
    targets.num_ids = num_ids();
    draw_bounded(backend_, pieces.source, seeds, fanout, plan.replace,
                 plan.edge_weights[e].has_value(), plan.edge_ids[e].has_value(), bound, targets,
                 hop);
    return bound;
  }

  // induce_next's requests, each checked on the host (lengths, types, the
  // tensors, the outputs given) before any is added; their rows and columns
  // go to the outputs given, else to new buffers.
  std::vector<GivenRequest> given_requests(
      const std::vector<int64_t>& src_types, const std::vector<int64_t>& nbr_types,
      const std::vector<at::Tensor>& srcs, const std::vector<at::Tensor>& nbrs,
      const std::vector<at::Tensor>& nbr_nums, const std::vector<at::Tensor>& row_outs,
      const std::vector<at::Tensor>& col_outs) const {
    check_induce_next_lists(src_types, nbr_types, srcs, nbrs, nbr_nums, row_outs, col_outs);
    const size_t num_etypes = srcs.size();
    const at::Device device = options_.device();
    std::vector<GivenRequest> requests;
    for (size_t e = 0; e < num_etypes; ++e) {
      check_type(src_types[e]);
      check_type(nbr_types[e]);
      GivenRequest q;
      q.src_type = src_types[e];
      q.nbr_type = nbr_types[e];
      q.src = checked(srcs[e], "srcs");
      q.nbr = checked(nbrs[e], "nbrs");
      q.num = checked(nbr_nums[e], "nbr_nums");
      TORCH_CHECK_VALUE(q.src.numel() == q.num.numel(), "srcs and nbr_nums differ in length: ",
                        q.src.numel(), " vs ", q.num.numel());
      const int64_t m = q.nbr.numel();
      q.row = row_outs.empty()
                  ? at::empty({m}, options_)
                  : checked_output(row_outs[e], m, device, "row_outs", {q.src, q.nbr, q.num});
      const at::Tensor row_out = row_outs.empty() ? at::Tensor() : row_outs[e];
      q.col = col_outs.empty() ? at::empty({m}, options_)
                               : checked_output(col_outs[e], m, device, "col_outs",
                                                {q.src, q.nbr, q.num, row_out});
      requests.push_back(std::move(q));
    }
    return requests;
  }

  // induce_next's outputs from the hop's read `r` (each request's report,
  // then the tables' sizes): raises what a check found, after forgetting all
  // nodes; else the tables take their new sizes and each type's new nodes
  // are cut from the inserts' buffers (`fresh`).
  GivenHopOutputs finish_given_hop(const std::vector<GivenRequest>& requests, const int64_t* r,
                                   const std::vector<at::Tensor>& fresh) {
    for (size_t e = 0; e < requests.size(); ++e) {
      const int64_t* report = r + e * kReportSize;
      if (!given_sound(report, requests[e].nbr.numel())) {
        reset();
        raise_given_failure(report, requests[e].src, requests[e].nbr);
      }
    }
    std::vector<std::vector<at::Tensor>> parts(tables_.size());
    std::vector<at::Tensor> rows, cols;
    for (size_t e = 0; e < requests.size(); ++e) {
      parts[requests[e].nbr_type].push_back(fresh[e].narrow(0, 0, r[e * kReportSize + kFresh]));
      rows.push_back(requests[e].row);
      cols.push_back(requests[e].col);
    }
    std::vector<at::Tensor> nodes;
    for (size_t t = 0; t < tables_.size(); ++t) {
      tables_[t].size = r[requests.size() * kReportSize + t];
      nodes.push_back(parts[t].empty() ? at::empty({0}, options_) : at::cat(parts[t]));
    }
    return {nodes, rows, cols};
  }

  // `parts` end to end (an empty tensor with `options` where there are none).
  static at::Tensor joined(const std::vector<at::Tensor>& parts, const at::TensorOptions& options) {
    return parts.empty() ? at::empty({0}, options.dtype(at::kLong)) : at::cat(parts);
  }

  // Reads a hop's reports and the tables' sizes (the one sync), raises what
  // a check found, and cuts the hop's outputs to their sizes.
  HopOutputs finish_hop(const std::vector<BoundedHop>& hops, const HopPlan& plan,
                        const at::Tensor& sizes) {
    std::vector<at::Tensor> parts, fresh_copies;  // (the copies with fresh_on_host)
    for (const auto& hop : hops) {
      parts.push_back(hop.report);
      typename Backend::Ready copied;  // (the read below waits for it)
      if (plan.fresh_on_host) fresh_copies.push_back(backend_.to_host_async(hop.fresh, &copied));
    }
    parts.push_back(sizes);
    const at::Tensor read = at::cat(parts).cpu();
    const int64_t* r = read.data_ptr<int64_t>();
    for (size_t e = 0; e < hops.size(); ++e) {
      if (plan.has_pieces(e)) {
        raise_piece_failure(plan, e, r + e * kReportSize, hops[e], num_ids(), [this] { reset(); });
      }
      raise_failure(r + e * kReportSize, plan.srcs[e], plan.indptrs[e].numel() - 1,
                    plan.indices[e], hops[e], num_ids());
    }
    std::vector<at::Tensor> rows, cols, nbrs, nums, eids;
    std::vector<std::vector<at::Tensor>> fresh(tables_.size()), fresh_host(tables_.size());
    for (size_t e = 0; e < hops.size(); ++e) {
      const BoundedHop& hop = hops[e];
      const int64_t total = r[e * kReportSize + kTotal];
      rows.push_back(
          at::cat({checked(plan.row_prefixes[e], "row_prefixes"), hop.rows.narrow(0, 0, total)}));
      cols.push_back(
          at::cat({checked(plan.col_prefixes[e], "col_prefixes"), hop.cols.narrow(0, 0, total)}));
      nbrs.push_back(hop.nbrs.narrow(0, 0, total));
      nums.push_back(hop.counts);
      eids.push_back(hop.eids.numel() ? hop.eids.narrow(0, 0, total) : hop.eids);
      const int64_t num_fresh = r[e * kReportSize + kFresh];
      fresh[plan.nbr_types[e]].push_back(hop.fresh.narrow(0, 0, num_fresh));
      if (plan.fresh_on_host) {
        fresh_host[plan.nbr_types[e]].push_back(fresh_copies[e].narrow(0, 0, num_fresh));
      }
    }
    std::vector<at::Tensor> nodes, nodes_on_host;
    for (size_t t = 0; t < tables_.size(); ++t) {
      tables_[t].size = r[hops.size() * kReportSize + t];
      nodes.push_back(joined(fresh[t], options_));
      if (plan.fresh_on_host) {
        nodes_on_host.push_back(joined(fresh_host[t], options_.device(at::kCPU)));
      }
    }
    return {nodes, rows, cols, nbrs, nums, eids, nodes_on_host};
  }

  // Raises what a request's report `r` says failed, after forgetting all
  // nodes: `seeds` are the request's seeds, drawn from a topology of
  // `num_rows` rows, whose neighbors must lie in [0, num_ids).
  void raise_failure(const int64_t* r, const at::Tensor& seeds, int64_t num_rows,
                     const at::Tensor& indices, const BoundedHop& hop,
                     int64_t num_ids = INT64_MAX) {
    if (r[kBadSeed] == kNone && r[kUnseenSeed] == kNone && r[kBadRow] == kNone &&
        r[kBadNeighbor] == kNone) {
      return;
    }
    reset();
    const at::Tensor ids = seed_ids(seeds);
    const auto seed = [&](int64_t slot) { return ids[r[slot]].template item<int64_t>(); };
    TORCH_CHECK_VALUE(r[kBadSeed] == kNone, "srcs holds ids outside [0, ", num_rows,
                      "): ", seed(kBadSeed));
    TORCH_CHECK_VALUE(r[kUnseenSeed] == kNone, "source node ", seed(kUnseenSeed),
                      " was not seen by the inducer before this hop");
    TORCH_CHECK_VALUE(r[kBadRow] == kNone, "indptr gives row ", seed(kBadRow),
                      " entries outside indices");
    const int64_t entry = hop.positions[r[kBadNeighbor]].template item<int64_t>();
    const int64_t v = indices[entry].template item<int64_t>();
    TORCH_CHECK_VALUE(v >= 0, "indices holds a negative id: ", v);
    TORCH_CHECK_VALUE(false, "indices holds node id ", v, ", outside the ", num_ids,
                      " nodes of its type");
  }

  // Disjoint keys' id bits (INT64_MAX-wide ids without disjoint keys).
  int64_t id_mask() const { return (int64_t{1} << disjoint_bits_) - 1; }
  // The ids of seeds given as keys: the keys' id bits where they are
  // disjoint sampling's, else the keys themselves.
  at::Tensor seed_ids(const at::Tensor& keys) const {
    return disjoint_bits_ > 0 ? at::bitwise_and(keys, id_mask()) : keys;
  }
  // Neighbor ids at or past this are reported: those a key cannot hold.
  int64_t num_ids() const { return disjoint_bits_ > 0 ? id_mask() + 1 : INT64_MAX; }

  Backend backend_;
  at::TensorOptions options_;
  int64_t disjoint_bits_ = 0;
  std::vector<IdTable> tables_;
  std::unique_ptr<BatchSampling<Backend>> launched_;  // until finish_batch
};

}  // namespace kernels
}  // namespace glt
