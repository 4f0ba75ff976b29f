// One block of size-bounded label propagation, node by node (the schema's
// comment in ops/propagate_labels.cpp says what it computes).
#include <ATen/ATen.h>
#include <torch/library.h>

#include <cstdint>
#include <tuple>
#include <vector>

#include "checks.h"

namespace glt::cpu {
namespace {

uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// The block's edges grouped by source (a stable counting sort).
struct LocalAdjacency {
  std::vector<int64_t> indptr, dst, weight;
};

LocalAdjacency group_by_source(const at::Tensor& src, const at::Tensor& dst,
                               const at::Tensor& weight, int64_t num_local) {
  const int64_t num_edges = src.numel();
  const int64_t* s = src.data_ptr<int64_t>();
  const int64_t* d = dst.data_ptr<int64_t>();
  const int64_t* w = weight.defined() ? weight.data_ptr<int64_t>() : nullptr;
  LocalAdjacency adj{std::vector<int64_t>(num_local + 1, 0), std::vector<int64_t>(num_edges),
                     std::vector<int64_t>(num_edges, 1)};
  for (int64_t e = 0; e < num_edges; ++e) ++adj.indptr[s[e] + 1];
  for (int64_t v = 0; v < num_local; ++v) adj.indptr[v + 1] += adj.indptr[v];
  std::vector<int64_t> next(adj.indptr.begin(), adj.indptr.end() - 1);
  for (int64_t e = 0; e < num_edges; ++e) {
    const int64_t at = next[s[e]]++;
    adj.dst[at] = d[e];
    if (w) adj.weight[at] = w[e];
  }
  return adj;
}

void check_permutation(const at::Tensor& order) {
  const int64_t n = order.numel();
  const int64_t* o = order.data_ptr<int64_t>();
  std::vector<bool> seen(n, false);
  for (int64_t i = 0; i < n; ++i) {
    TORCH_CHECK_VALUE(o[i] >= 0 && o[i] < n && !seen[o[i]],
                      "order must be a permutation of [0, ", n, "), found ", o[i]);
    seen[o[i]] = true;
  }
}

void check_args(const at::Tensor& src, const at::Tensor& dst, const at::Tensor& weight,
                int64_t start, const at::Tensor& order, const at::Tensor& label,
                const at::Tensor& node_weight, const at::Tensor& load, const at::Tensor& cap) {
  for (const auto& [t, name] : {std::pair{src, "src"}, {dst, "dst"}, {order, "order"},
                                {label, "label"}, {cap, "cap"}}) {
    check_index(t, name);
    TORCH_CHECK_VALUE(t.device().is_cpu(), name, " must be a CPU tensor");
  }
  TORCH_CHECK_VALUE(label.is_contiguous(), "label must be contiguous (it is updated in place)");
  TORCH_CHECK_VALUE(src.numel() == dst.numel(), "src and dst must have the same length, got ",
                    src.numel(), " and ", dst.numel());
  const int64_t num_nodes = label.numel(), num_local = order.numel();
  TORCH_CHECK_VALUE(start >= 0 && start <= num_nodes - num_local, "the block of ", num_local,
                    " nodes from node ", start, " must lie within the ", num_nodes,
                    " labelled nodes");
  check_permutation(order);
  check_range(src, num_local, "src");
  check_range(dst, num_nodes, "dst");
  if (weight.defined()) {
    check_index(weight, "weight");
    TORCH_CHECK_VALUE(weight.numel() == src.numel(), "weight must hold one entry per edge, got ",
                      weight.numel(), " for ", src.numel());
    check_range(weight - 1, std::numeric_limits<int64_t>::max(), "weight - 1");
  }
  const int64_t cols = cap.numel();
  TORCH_CHECK_VALUE(load.scalar_type() == at::kLong && load.dim() == 2 && load.size(1) == cols &&
                        load.is_contiguous() && load.device().is_cpu(),
                    "load must be a contiguous CPU int64 tensor [labels, ", cols,
                    "], got shape ", load.sizes());
  TORCH_CHECK_VALUE(node_weight.scalar_type() == at::kLong && node_weight.dim() == 2 &&
                        node_weight.size(0) == num_nodes && node_weight.size(1) == cols &&
                        node_weight.device().is_cpu(),
                    "node_weight must be a CPU int64 tensor [", num_nodes, ", ", cols,
                    "], got shape ", node_weight.sizes());
  check_range(label, load.size(0), "label");
}

std::tuple<int64_t, int64_t> propagate_labels_kernel(
    const at::Tensor& src_arg, const at::Tensor& dst_arg,
    const c10::optional<at::Tensor>& weight_arg, int64_t start, const at::Tensor& order_arg,
    at::Tensor& label, const at::Tensor& node_weight_arg, at::Tensor& load,
    const at::Tensor& cap_arg, int64_t salt, bool move_on_tie) {
  const at::Tensor src = src_arg.contiguous(), dst = dst_arg.contiguous();
  const at::Tensor order = order_arg.contiguous(), cap = cap_arg.contiguous();
  const at::Tensor node_weight = node_weight_arg.contiguous();
  const at::Tensor weight = weight_arg.has_value() ? weight_arg->contiguous() : at::Tensor();
  check_args(src, dst, weight, start, order, label, node_weight, load, cap);
  const int64_t num_local = order.numel(), cols = cap.numel();
  const LocalAdjacency adj = group_by_source(src, dst, weight, num_local);
  int64_t* lab = label.data_ptr<int64_t>();
  int64_t* ld = load.data_ptr<int64_t>();
  const int64_t* nw = node_weight.data_ptr<int64_t>();
  const int64_t* cp = cap.data_ptr<int64_t>();
  const int64_t* visit = order.data_ptr<int64_t>();
  std::vector<int64_t> into(load.size(0), 0), touched;
  const auto key_of = [salt](int64_t l) { return splitmix64(static_cast<uint64_t>(l ^ salt)); };
  const auto fits = [&](int64_t l, const int64_t* w) {
    for (int64_t c = 0; c < cols; ++c)
      if (ld[l * cols + c] + w[c] > cp[c]) return false;
    return true;
  };
  int64_t moved = 0, gain = 0;
  for (int64_t i = 0; i < num_local; ++i) {
    const int64_t v = visit[i], node = start + v, own = lab[node];
    const int64_t* w = nw + node * cols;
    touched.clear();
    for (int64_t e = adj.indptr[v]; e < adj.indptr[v + 1]; ++e) {
      const int64_t l = lab[adj.dst[e]];
      if (into[l] == 0) touched.push_back(l);
      into[l] += adj.weight[e];
    }
    // With move_on_tie, the own label competes in the ties like any other.
    int64_t best = -1, best_into = into[own];
    uint64_t best_key = move_on_tie ? key_of(own) : 0;
    for (const int64_t l : touched) {
      if (l == own || into[l] < best_into) continue;
      const uint64_t key = key_of(l);
      const bool better = into[l] > best_into || ((best >= 0 || move_on_tie) && key > best_key);
      if (better && fits(l, w)) best = l, best_into = into[l], best_key = key;
    }
    if (best >= 0) {
      gain += best_into - into[own];
      for (int64_t c = 0; c < cols; ++c) ld[own * cols + c] -= w[c], ld[best * cols + c] += w[c];
      lab[node] = best;
      ++moved;
    }
    for (const int64_t l : touched) into[l] = 0;
  }
  return {moved, gain};
}

}  // namespace

TORCH_LIBRARY_IMPL(glt, CPU, m) {
  m.impl("propagate_labels_", TORCH_FN(propagate_labels_kernel));
}

}  // namespace glt::cpu
