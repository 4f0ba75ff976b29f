// The inducer for any backend: deduplicates and relabels the nodes met while
// sampling several hops into one local id space per node type, with a hash
// table per type that many threads fill at once.
//
// Its results equal the CPU inducer's exactly: new nodes get local ids in
// order of first appearance. Adding a batch of candidate ids takes four
// passes: (1) every candidate claims its key's slot and offers its position
// to the slot (an atomic max of -(position + 2), so the first occurrence
// wins; slots of known nodes hold their local id >= 0 and ignore offers);
// (2) a candidate is new when the slot holds its own offer; (3) the new ones
// are numbered by a prefix sum and their slots get their local ids; (4)
// every candidate reads its slot's local id.
#pragma once

#include <ATen/ATen.h>

#include <limits>
#include <tuple>
#include <vector>

#include "checks.h"
#include "kernels/hash_table.h"

namespace glt {
namespace kernels {

constexpr int64_t kUnclaimed = std::numeric_limits<int64_t>::min();

// One node type's table: the node ids known and their local ids.
struct IdTable {
  at::Tensor keys, vals;  // hash slots (device::kEmptyKey / kUnclaimed when free)
  int64_t capacity = 0;
  int64_t size = 0;  // nodes known
};

// Free functions rather than members: nvcc takes extended lambdas only in
// functions whose address can be taken.

inline void allocate_table(IdTable& table, int64_t capacity, const at::TensorOptions& options) {
  table.keys = at::full({capacity}, device::kEmptyKey, options);
  table.vals = at::full({capacity}, kUnclaimed, options);
  table.capacity = capacity;
}

// Makes room for `more` nodes, moving the known ones to a larger table.
template <typename Backend>
void reserve_table(const Backend& backend, IdTable& table, int64_t more,
                   const at::TensorOptions& options) {
  const int64_t capacity = device::table_capacity(table.size + more);
  if (capacity <= table.capacity) return;
  IdTable old = table;
  allocate_table(table, capacity, options);
  const int64_t* old_keys = old.keys.data_ptr<int64_t>();
  const int64_t* old_vals = old.vals.data_ptr<int64_t>();
  int64_t* keys = table.keys.data_ptr<int64_t>();
  int64_t* vals = table.vals.data_ptr<int64_t>();
  const uint64_t mask = table.capacity - 1;
  backend.for_each(old.capacity, [=] GLT_HOST_DEVICE(int64_t i) {
    if (old_keys[i] == device::kEmptyKey) return;
    vals[device::hash_insert(keys, mask, old_keys[i])] = old_vals[i];
  });
}

// Local ids of `ids` in a table (-1 for unknown ones).
template <typename Backend>
at::Tensor lookup_table(const Backend& backend, const IdTable& table, const at::Tensor& ids) {
  auto out = at::empty({ids.numel()}, ids.options());
  const int64_t* key = ids.data_ptr<int64_t>();
  const int64_t* keys = table.keys.data_ptr<int64_t>();
  const int64_t* vals = table.vals.data_ptr<int64_t>();
  const uint64_t mask = table.capacity - 1;
  int64_t* local = out.data_ptr<int64_t>();
  backend.for_each(ids.numel(), [=] GLT_HOST_DEVICE(int64_t i) {
    const int64_t slot = key[i] < 0 ? -1 : device::hash_find(keys, mask, key[i]);
    local[i] = slot < 0 ? -1 : vals[slot];
  });
  return out;
}

// Adds `ids` (int64, >= 0) to a table; returns the new ones in order of
// first appearance, and, when `local` is given, every id's local id.
template <typename Backend>
at::Tensor add_to_table(const Backend& backend, IdTable& table, const at::Tensor& ids,
                        at::Tensor* local) {
  const auto options = ids.options();
  const int64_t n = ids.numel();
  reserve_table(backend, table, n, options);
  auto slots = at::empty({n}, options);
  auto first = at::empty({n}, options);
  const int64_t* key = ids.data_ptr<int64_t>();
  int64_t* keys = table.keys.data_ptr<int64_t>();
  int64_t* vals = table.vals.data_ptr<int64_t>();
  int64_t* slot = slots.data_ptr<int64_t>();
  int64_t* is_first = first.data_ptr<int64_t>();
  const uint64_t mask = table.capacity - 1;
  backend.for_each(n, [=] GLT_HOST_DEVICE(int64_t i) {
    const int64_t s = device::hash_insert(keys, mask, key[i]);
    slot[i] = s;
    device::atomic_max(&vals[s], -(i + 2));
  });
  backend.for_each(n, [=] GLT_HOST_DEVICE(int64_t i) { is_first[i] = vals[slot[i]] == -(i + 2); });
  auto rank = first.cumsum(0) - first;  // exclusive prefix sum
  const int64_t count = n ? (rank[n - 1] + first[n - 1]).item<int64_t>() : 0;
  auto fresh = at::empty({count}, options);
  const int64_t* order = rank.data_ptr<int64_t>();
  int64_t* fresh_ids = fresh.data_ptr<int64_t>();
  const int64_t base = table.size;
  backend.for_each(n, [=] GLT_HOST_DEVICE(int64_t i) {
    if (!is_first[i]) return;
    vals[slot[i]] = base + order[i];
    fresh_ids[order[i]] = key[i];
  });
  table.size += count;
  if (local != nullptr) {
    *local = at::empty({n}, options);
    int64_t* out = local->data_ptr<int64_t>();
    backend.for_each(n, [=] GLT_HOST_DEVICE(int64_t i) { out[i] = vals[slot[i]]; });
  }
  return fresh;
}

template <typename Backend>
class InducerImpl {
 public:
  InducerImpl(int64_t num_node_types, Backend backend, at::TensorOptions options)
      : backend_(backend), options_(options.dtype(at::kLong)) {
    TORCH_CHECK_VALUE(num_node_types >= 1, "an Inducer needs at least one node type, got ",
                      num_node_types);
    tables_.resize(num_node_types);
    for (auto& table : tables_) allocate_table(table, device::table_capacity(0), options_);
  }

  int64_t num_node_types() const { return static_cast<int64_t>(tables_.size()); }

  // Registers the seeds; returns them per type without duplicates, in order.
  std::vector<at::Tensor> init_nodes(const std::vector<at::Tensor>& seeds) {
    TORCH_CHECK_VALUE(static_cast<int64_t>(seeds.size()) == num_node_types(),
                      "init_nodes expects one seed tensor per node type (", num_node_types(),
                      "), got ", seeds.size());
    reset();
    std::vector<at::Tensor> out;
    for (size_t t = 0; t < seeds.size(); ++t) {
      const at::Tensor ids = checked_ids(seeds[t], "seeds");
      out.push_back(add_to_table(backend_, tables_[t], ids, nullptr));
    }
    return out;
  }

  // Adds one hop (see the CPU Inducer::induce_next): returns (nodes new to
  // each type in order of first appearance, local seed index per edge, local
  // neighbor index per edge), the indices copied into `row_outs[e]` and
  // `col_outs[e]` when given.
  std::tuple<std::vector<at::Tensor>, std::vector<at::Tensor>, std::vector<at::Tensor>> induce_next(
      const std::vector<int64_t>& src_types, const std::vector<int64_t>& nbr_types,
      const std::vector<at::Tensor>& srcs, const std::vector<at::Tensor>& nbrs,
      const std::vector<at::Tensor>& nbr_nums, const std::vector<at::Tensor>& row_outs = {},
      const std::vector<at::Tensor>& col_outs = {}) {
    const size_t num_etypes = srcs.size();
    TORCH_CHECK_VALUE(src_types.size() == num_etypes && nbr_types.size() == num_etypes &&
                          nbrs.size() == num_etypes && nbr_nums.size() == num_etypes,
                      "induce_next expects src_types, nbr_types, srcs, nbrs and nbr_nums of one "
                      "length");
    check_outputs(row_outs, num_etypes, "row_outs");
    check_outputs(col_outs, num_etypes, "col_outs");
    std::vector<std::vector<at::Tensor>> fresh(tables_.size());
    std::vector<at::Tensor> rows, cols;
    for (size_t e = 0; e < num_etypes; ++e) {
      check_type(src_types[e]);
      check_type(nbr_types[e]);
      const at::Tensor src = checked_ids(srcs[e], "srcs");
      const at::Tensor nbr = checked_ids(nbrs[e], "nbrs");
      const at::Tensor num = checked(nbr_nums[e], "nbr_nums");
      TORCH_CHECK_VALUE(src.numel() == num.numel(),
                        "srcs and nbr_nums differ in length: ", src.numel(), " vs ", num.numel());
      if (num.numel() > 0) {
        TORCH_CHECK_VALUE(num.min().item<int64_t>() >= 0, "nbr_nums must be >= 0");
      }
      const int64_t total = num.numel() ? num.sum().item<int64_t>() : 0;
      TORCH_CHECK_VALUE(total == nbr.numel(), "nbr_nums sums to ", total, " but nbrs holds ",
                        nbr.numel(), " entries");
      const at::Device device = options_.device();
      if (!row_outs.empty()) {
        checked_output(row_outs[e], total, device, "row_outs", {src, nbr, num});
      }
      if (!col_outs.empty()) {
        checked_output(col_outs[e], total, device, "col_outs",
                       {src, nbr, num, row_outs.empty() ? at::Tensor() : row_outs[e]});
      }
      const at::Tensor src_local = local_ids(src_types[e], src);
      if (src_local.numel() > 0) {
        const int64_t worst = src_local.argmin().item<int64_t>();
        TORCH_CHECK_VALUE(src_local[worst].item<int64_t>() >= 0, "source node ",
                          src[worst].item<int64_t>(),
                          " was not seen by the inducer before this hop");
      }
      at::Tensor row = src_local.repeat_interleave(num, /*dim=*/0, /*output_size=*/total);
      at::Tensor col;
      fresh[nbr_types[e]].push_back(add_to_table(backend_, tables_[nbr_types[e]], nbr, &col));
      rows.push_back(row_outs.empty() ? row : row_outs[e].copy_(row));
      cols.push_back(col_outs.empty() ? col : col_outs[e].copy_(col));
    }
    std::vector<at::Tensor> nodes;
    for (auto& parts : fresh) {
      nodes.push_back(parts.empty() ? at::empty({0}, options_) : at::cat(parts));
    }
    return {nodes, rows, cols};
  }

  // Local ids of nodes of type `node_type` (-1 for unknown ones).
  at::Tensor local_ids(int64_t node_type, const at::Tensor& ids) const {
    check_type(node_type);
    return lookup_table(backend_, tables_[node_type], checked(ids, "ids"));
  }

  // Forgets all nodes, keeping the tables for the next batch.
  void reset() {
    for (auto& table : tables_) {
      table.keys.fill_(device::kEmptyKey);
      table.vals.fill_(kUnclaimed);
      table.size = 0;
    }
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

  // Node ids: checked, and none negative.
  at::Tensor checked_ids(const at::Tensor& t, const char* name) const {
    at::Tensor ids = checked(t, name);
    if (ids.numel() > 0) {
      const int64_t lo = ids.min().item<int64_t>();
      TORCH_CHECK_VALUE(lo >= 0, name, " holds ids outside [0, ", INT64_MAX, "): min ", lo);
    }
    return ids;
  }

  Backend backend_;
  at::TensorOptions options_;
  std::vector<IdTable> tables_;
};

}  // namespace kernels
}  // namespace glt
