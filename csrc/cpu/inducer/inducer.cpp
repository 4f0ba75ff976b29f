// Deduplication and relabelling of sampled nodes into local id spaces.
#include <algorithm>
#include <string>
#include <vector>

#include "checks.h"
#include "cpu/inducer/inducer.h"
#include "cpu/runtime/parallel.h"

namespace glt::cpu {

Inducer::Inducer(int64_t num_node_types, const std::vector<int64_t>& num_nodes,
                 int64_t disjoint_bits)
    : disjoint_bits_(disjoint_bits) {
  TORCH_CHECK_VALUE(num_node_types >= 1, "an Inducer needs at least one node type, got ",
                    num_node_types);
  TORCH_CHECK_VALUE(disjoint_bits >= 0 && disjoint_bits <= 62,
                    "disjoint_bits must be in [0, 62], got ", disjoint_bits);
  TORCH_CHECK_VALUE(disjoint_bits == 0 || num_nodes.empty() ||
                        std::all_of(num_nodes.begin(), num_nodes.end(),
                                    [](int64_t n) { return n <= 0; }),
                    "disjoint keys need hash maps: give no num_nodes with disjoint_bits");
  TORCH_CHECK_VALUE(num_nodes.empty() || static_cast<int64_t>(num_nodes.size()) == num_node_types,
                    "num_nodes needs one entry per node type (", num_node_types, "), got ",
                    num_nodes.size());
  maps_.resize(num_node_types);
  added_.resize(num_node_types);
  for (size_t t = 0; t < num_nodes.size(); ++t) {
    if (num_nodes[t] > 0) maps_[t].use_dense(num_nodes[t]);
  }
}

void Inducer::check_type(int64_t t) const {
  TORCH_CHECK_VALUE(t >= 0 && t < num_node_types(), "node type index ", t, " out of range for ",
                    num_node_types(), " node types");
}

void Inducer::reset() {
  for (auto& m : maps_) m.clear();
  for (auto& a : added_) a = Added{};
}

// `distinct` spares a device inducer its host sync; on the host the seeds
// are added as any others.
std::vector<at::Tensor> Inducer::init_nodes(const std::vector<at::Tensor>& seeds,
                                            bool /*distinct*/) {
  TORCH_CHECK_VALUE(static_cast<int64_t>(seeds.size()) == num_node_types(),
                    "init_nodes expects one seed tensor per node type (", num_node_types(),
                    "), got ", seeds.size());
  reset();
  if (disjoint_bits_ > 0) {
    int64_t num_seeds = 0;
    for (const auto& s : seeds) num_seeds += s.numel();
    for (auto& m : maps_) m.group_keys(static_cast<int>(disjoint_bits_), num_seeds);
  }
  std::vector<at::Tensor> out;
  for (size_t t = 0; t < seeds.size(); ++t) {
    check_index(seeds[t], "seeds");
    const auto s = seeds[t].contiguous();
    check_range(s, INT64_MAX, "seeds");
    // One insert of them all: it prefetches the map entries of the seeds
    // ahead (one at a time, each is a cache miss).
    std::vector<int64_t> local(s.numel());
    maps_[t].insert_all(s.data_ptr<int64_t>(), s.numel(), local.data());
    out.push_back(maps_[t].keys_from(0));
    remember_added(t, out.back(), 0);
  }
  return out;
}

void Inducer::remember_added(int64_t t, const at::Tensor& nodes, int64_t first) {
  added_[t] = Added{nodes, nodes._version(), first};
}

int64_t Inducer::first_local_id_if_added(int64_t t, const at::Tensor& srcs) const {
  const Added& a = added_[t];
  return a.nodes.defined() && srcs.is_same(a.nodes) && srcs._version() == a.version ? a.first : -1;
}

at::Tensor Inducer::local_ids(int64_t node_type, const at::Tensor& ids) const {
  check_type(node_type);
  check_index(ids, "ids");
  const auto in = ids.contiguous();
  auto out = at::empty({in.numel()}, at::kLong);
  const IdMap& map = maps_[node_type];
  const int64_t* src = in.data_ptr<int64_t>();
  int64_t* dst = out.data_ptr<int64_t>();
  for (int64_t i = 0; i < in.numel(); ++i) dst[i] = src[i] < 0 ? -1 : map.find(src[i]);
  return out;
}

std::tuple<std::vector<at::Tensor>, std::vector<at::Tensor>, std::vector<at::Tensor>>
Inducer::induce_next(const std::vector<int64_t>& src_types, const std::vector<int64_t>& nbr_types,
                     const std::vector<at::Tensor>& srcs, const std::vector<at::Tensor>& nbrs,
                     const std::vector<at::Tensor>& nbr_nums,
                     const std::vector<at::Tensor>& row_outs,
                     const std::vector<at::Tensor>& col_outs) {
  check_induce_next_lists(src_types, nbr_types, srcs, nbrs, nbr_nums, row_outs, col_outs);
  const size_t num_etypes = srcs.size();
  std::vector<int64_t> first_fresh(maps_.size());
  for (size_t t = 0; t < maps_.size(); ++t) first_fresh[t] = maps_[t].size();
  std::vector<at::Tensor> rows, cols;
  for (size_t e = 0; e < num_etypes; ++e) {
    check_type(src_types[e]);
    check_type(nbr_types[e]);
    check_index(srcs[e], "srcs");
    check_index(nbrs[e], "nbrs");
    check_index(nbr_nums[e], "nbr_nums");
    const auto src = srcs[e].contiguous(), nbr = nbrs[e].contiguous(),
               num = nbr_nums[e].contiguous();
    TORCH_CHECK_VALUE(src.numel() == num.numel(),
                      "srcs and nbr_nums differ in length: ", src.numel(), " vs ", num.numel());
    const int64_t* m = num.data_ptr<int64_t>();
    std::vector<int64_t> offsets(src.numel() + 1);
    offsets[0] = 0;
    bool negative = false;
    for (int64_t i = 0; i < src.numel(); ++i) {
      negative |= m[i] < 0;
      offsets[i + 1] = offsets[i] + m[i];
    }
    TORCH_CHECK_VALUE(!negative, "nbr_nums must be >= 0");
    TORCH_CHECK_VALUE(offsets.back() == nbr.numel(), "nbr_nums sums to ", offsets.back(),
                      " but nbrs holds ", nbr.numel(), " entries");

    const int64_t n = nbr.numel();
    // Checked before anything is written (row_outs against col_outs too).
    const at::Tensor row =
        row_outs.empty() ? at::empty({n}, at::kLong)
                         : checked_output(row_outs[e], n, at::kCPU, "row_outs", {src, nbr, num});
    const at::Tensor col =
        col_outs.empty()
            ? at::empty({n}, at::kLong)
            : checked_output(col_outs[e], n, at::kCPU, "col_outs", {src, nbr, num, row});
    write_rows(src_types[e], srcs[e], src, offsets.data(), row.data_ptr<int64_t>());
    maps_[nbr_types[e]].insert_all(nbr.data_ptr<int64_t>(), nbr.numel(), col.data_ptr<int64_t>());
    rows.push_back(row);
    cols.push_back(col);
  }
  return {take_added(first_fresh), rows, cols};
}

void Inducer::write_rows(int64_t t, const at::Tensor& srcs, const at::Tensor& src,
                         const int64_t* offsets, int64_t* r) const {
  const IdMap& src_map = maps_[t];
  const int64_t* s = src.data_ptr<int64_t>();
  // The seeds are most often the nodes their type added last hop, whose
  // local ids are consecutive: no lookups then.
  const int64_t first_local = first_local_id_if_added(t, srcs);
  std::atomic<int64_t> unseen{-1};
  glt::cpu::parallel_for(0, src.numel(), 1024, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      const int64_t local = first_local >= 0 ? first_local + i : src_map.find(s[i]);
      if (local < 0) unseen = i;
      std::fill(r + offsets[i], r + offsets[i + 1], local);
    }
  });
  TORCH_CHECK_VALUE(unseen < 0, "source node ", unseen < 0 ? 0 : s[unseen.load()],
                    " was not seen by the inducer before this hop");
}

std::vector<at::Tensor> Inducer::take_added(const std::vector<int64_t>& first_fresh) {
  std::vector<at::Tensor> nodes;
  for (size_t t = 0; t < maps_.size(); ++t) {
    nodes.push_back(maps_[t].keys_from(first_fresh[t]));
    remember_added(t, nodes.back(), first_fresh[t]);
  }
  return nodes;
}

}  // namespace glt::cpu
