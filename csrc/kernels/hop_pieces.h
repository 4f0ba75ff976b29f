// A request of a hop drawn from several topologies with some seeds'
// neighbors given (kernels/hop_plan.h's HopPieces), for the device
// inducer's sample_induce_next: a distributed hop whose partitions held here
// are drawn and whose peers' answers are added in the same pass, in seed
// order, with the hop's one host sync. The pieces are checked on the host
// (their layouts, devices and dtypes) and on the device (each seed's
// topology, a given row of at most the fanout), the latter in the request's
// report.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <vector>

#include "checks.h"
#include "kernels/batch_sample.h"
#include "kernels/hop_induce.h"
#include "kernels/hop_plan.h"

namespace glt {
namespace kernels {

// Request e's topologies with pieces: its own, then the pieces'.
struct PieceTopology {
  const at::Tensor& indptr;
  const at::Tensor& indices;
  const std::optional<at::Tensor>& edge_ids;
  const std::optional<at::Tensor>& edge_weights;
};

inline std::vector<PieceTopology> piece_topologies(const HopPlan& plan, size_t e) {
  const HopPieces& pieces = *plan.pieces[e];
  std::vector<PieceTopology> out{
      {plan.indptrs[e], plan.indices[e], plan.edge_ids[e], plan.edge_weights[e]}};
  for (size_t k = 0; k < pieces.indptrs.size(); ++k) {
    out.push_back(
        {pieces.indptrs[k], pieces.indices[k], pieces.edge_ids[k], pieces.edge_weights[k]});
  }
  return out;
}

// Checks request e's pieces on the host, reading no values: lists of one
// length, every topology of the request's own's index dtype and device with
// edge ids where it has them, weights on the drawn ones where it has them
// and none on the given one, whose rows are the request's `num_seeds`
// seeds; `part` an int32 per seed on that device; no times.
inline void check_pieces(const HopPlan& plan, size_t e, int64_t num_seeds) {
  const HopPieces& pieces = *plan.pieces[e];
  const size_t more = pieces.indptrs.size();
  TORCH_CHECK_VALUE(pieces.indices.size() == more && pieces.edge_ids.size() == more &&
                        pieces.edge_weights.size() == more && pieces.rng_seeds.size() == more,
                    "request ", e, "'s pieces need as many indices, edge_ids, edge_weights and ",
                    "rng_seeds as indptrs (", more, ")");
  TORCH_CHECK_VALUE(!pieces.given || more >= 1, "request ", e,
                    "'s pieces give neighbors but hold no topology of them");
  TORCH_CHECK_VALUE(!plan.timed(e), "request ", e, " has pieces and times: pieces draw no times");
  TORCH_CHECK_VALUE(plan.fanouts[e] >= 0, "request ", e,
                    " has pieces and a fanout of -1: pieces need a bound ahead");
  const std::vector<PieceTopology> topologies = piece_topologies(plan, e);
  const PieceTopology& own = topologies[0];
  for (size_t k = 0; k < topologies.size(); ++k) {
    const PieceTopology& t = topologies[k];
    const int64_t rows = check_csr_layout(t.indptr, t.indices);
    check_device(t.indptr, "a piece's indptr", own.indptr.device());
    check_edge_data(t.edge_ids, t.edge_weights, t.indices);
    TORCH_CHECK_VALUE(t.indptr.scalar_type() == own.indptr.scalar_type(), "request ", e,
                      "'s topology ", k, " is ", t.indptr.scalar_type(), ", its first ",
                      own.indptr.scalar_type());
    TORCH_CHECK_VALUE(t.edge_ids.has_value() == own.edge_ids.has_value(), "request ", e,
                      "'s topologies must all have edge ids or none");
    const bool given = pieces.given && k + 1 == topologies.size();
    TORCH_CHECK_VALUE(given ? !t.edge_weights.has_value()
                            : t.edge_weights.has_value() == own.edge_weights.has_value(),
                      "request ", e, "'s drawn topologies must all have weights or none, and ",
                      "its given neighbors none");
    TORCH_CHECK_VALUE(!given || rows == num_seeds, "request ", e, "'s given neighbors have ",
                      rows, " rows for its ", num_seeds, " seeds");
  }
  const at::Tensor& part = pieces.part;
  TORCH_CHECK_VALUE(part.defined() && part.scalar_type() == at::kInt && part.dim() == 1 &&
                        part.numel() == num_seeds && part.is_contiguous(),
                    "request ", e, "'s part must be a contiguous int32 per seed (", num_seeds,
                    ")");
  check_device(part, "part", own.indptr.device());
}

// Request e's pieces as a draw source on the device: each seed's topology
// (part[i] outside them reported as kBadPart, the seed then drawn from
// topology 0) and rank among that topology's seeds, the topologies' views
// and keys (rng_key reads keys[0 * num + k]: key_index points to the 0 after
// them). The tensors here hold what the source points to.
template <typename index_t>
struct PieceSource {
  PartitionedTopologies<index_t> source;
  at::Tensor graphs, keys, part, rank;

  template <typename Backend>
  PieceSource(const Backend& backend, const HopPlan& plan, size_t e, BoundedHop& hop,
              int64_t bound) {
    const HopPieces& pieces = *plan.pieces[e];
    const std::vector<PieceTopology> topologies = piece_topologies(plan, e);
    const int64_t num = static_cast<int64_t>(topologies.size());
    const auto device = hop.report.device();
    std::vector<CsrView<index_t>> views;
    std::vector<int64_t> host_keys{plan.rng_seeds[e]};
    for (const PieceTopology& t : topologies) {
      views.push_back(csr_view<index_t>(t.indptr, t.indices, t.edge_ids, t.edge_weights));
    }
    host_keys.insert(host_keys.end(), pieces.rng_seeds.begin(), pieces.rng_seeds.end());
    host_keys.push_back(0);
    graphs = structs_on_device(backend, views, device);
    keys = backend.to_device(at::tensor(host_keys, at::kLong), device);
    part = checked_parts(backend, pieces.part, num, hop.report.data_ptr<int64_t>());
    rank = rank_in_partition(backend, part, num);
    hop.seed_parts = part;
    hop.draw_parts = at::empty({bound}, part.options());
    source = {reinterpret_cast<const CsrView<index_t>*>(graphs.data_ptr()),
              part.data_ptr<int32_t>(),
              rank.data_ptr<int64_t>(),
              hop.draw_parts.data_ptr<int32_t>(),
              num,
              pieces.given ? num - 1 : -1};
  }

  // The draws' key: topology k's is keys[k].
  DrawTargets targets() const {
    DrawTargets out;
    out.keys = keys.data_ptr<int64_t>();
    out.key_index = keys.data_ptr<int64_t>() + source.num_parts;
    return out;
  }

  // `given`'s copy with entries outside [0, num) reported and made 0.
  template <typename Backend>
  static at::Tensor checked_parts(const Backend& backend, const at::Tensor& given, int64_t num,
                                  int64_t* report) {
    auto part = at::empty_like(given);
    const int32_t* in = given.data_ptr<int32_t>();
    int32_t* out = part.data_ptr<int32_t>();
    backend.for_each(given.numel(), [=] GLT_HOST_DEVICE(int64_t i) {
      const int32_t p = in[i];
      if (p < 0 || p >= num) device::atomic_min(&report[kBadPart], i);
      out[i] = (p < 0 || p >= num) ? 0 : p;
    });
    return part;
  }
};

// Raises what request e's report `r` says its pieces did wrong (a seed's
// topology outside them; a given row longer than the fanout, or a draw's
// neighbor outside the ids, named with its topology), after `reset`; else
// returns.
template <typename Reset>
void raise_piece_failure(const HopPlan& plan, size_t e, const int64_t* r, const BoundedHop& hop,
                         int64_t num_ids, Reset reset) {
  if (r[kBadPart] == kNone && r[kBadRow] == kNone && r[kBadNeighbor] == kNone) return;
  reset();
  const std::vector<PieceTopology> topologies = piece_topologies(plan, e);
  const int64_t num = static_cast<int64_t>(topologies.size());
  TORCH_CHECK_VALUE(r[kBadPart] == kNone, "request ", e, "'s part gives seed ", r[kBadPart],
                    " topology ", plan.pieces[e]->part[r[kBadPart]].item<int32_t>(),
                    ", outside its ", num);
  if (r[kBadRow] != kNone) {
    const int64_t k = hop.seed_parts[r[kBadRow]].item<int32_t>();
    const bool given = plan.pieces[e]->given && k + 1 == num;
    TORCH_CHECK_VALUE(!given, "request ", e, "'s given neighbors of seed ", r[kBadRow],
                      " are more than its fanout (", plan.fanouts[e], ") or outside its indices");
    TORCH_CHECK_VALUE(false, "request ", e, "'s topology ", k, " gives seed ", r[kBadRow],
                      "'s row entries outside indices");
  }
  const int64_t j = r[kBadNeighbor];
  const int64_t k = hop.draw_parts[j].item<int32_t>();
  const int64_t v = topologies[k].indices[hop.positions[j].item<int64_t>()].item<int64_t>();
  TORCH_CHECK_VALUE(false, "request ", e, "'s topology ", k, " holds node id ", v,
                    ", outside [0, ", num_ids, ")");
}

}  // namespace kernels
}  // namespace glt
