// Deduplication and relabelling of sampled nodes into local id spaces.
#include <algorithm>

#include "../checks.h"
#include "ops.h"

namespace glt {
namespace {

constexpr int64_t kEmpty = -1;
constexpr int kInitialBits = 10;

inline uint64_t slot_of(int64_t key, int shift) {
  return (static_cast<uint64_t>(key) * 0x9E3779B97F4A7C15ULL) >> shift;
}

at::Tensor to_tensor(const std::vector<int64_t>& v) {
  auto t = at::empty({static_cast<int64_t>(v.size())}, at::kLong);
  std::copy(v.begin(), v.end(), t.data_ptr<int64_t>());
  return t;
}

}  // namespace

IdMap::IdMap()
    : keys_(1 << kInitialBits, kEmpty),
      vals_(1 << kInitialBits),
      mask_((1 << kInitialBits) - 1),
      shift_(64 - kInitialBits),
      size_(0) {}

void IdMap::use_dense(int64_t num_ids) {
  TORCH_CHECK_VALUE(size_ == 0, "use_dense needs an empty map");
  dense_.assign(num_ids, -1);
}

int64_t IdMap::insert(int64_t key, bool* inserted) {
  if (!dense_.empty()) {
    TORCH_CHECK_VALUE(key < static_cast<int64_t>(dense_.size()), "node id ", key,
                      " is out of range for ", dense_.size(), " nodes");
    int32_t& slot = dense_[key];
    *inserted = slot < 0;
    if (*inserted) {
      TORCH_CHECK_VALUE(size_ < INT32_MAX, "too many nodes in one batch");
      slot = static_cast<int32_t>(size_++);
      dense_keys_.push_back(key);
    }
    return slot;
  }
  if (2 * (size_ + 1) > static_cast<int64_t>(keys_.size())) grow();
  uint64_t i = slot_of(key, shift_);
  while (true) {
    const int64_t k = keys_[i];
    if (k == key) {
      *inserted = false;
      return vals_[i];
    }
    if (k == kEmpty) {
      keys_[i] = key;
      vals_[i] = size_;
      *inserted = true;
      return size_++;
    }
    i = (i + 1) & mask_;
  }
}

int64_t IdMap::find(int64_t key) const {
  if (!dense_.empty()) {
    return key < static_cast<int64_t>(dense_.size()) ? dense_[key] : -1;
  }
  uint64_t i = slot_of(key, shift_);
  while (true) {
    const int64_t k = keys_[i];
    if (k == key) return vals_[i];
    if (k == kEmpty) return -1;
    i = (i + 1) & mask_;
  }
}

void IdMap::reserve(int64_t n) {
  if (!dense_.empty()) {
    dense_keys_.reserve(n);
    return;
  }
  while (2 * n > static_cast<int64_t>(keys_.size())) grow();
}

void IdMap::grow() {
  std::vector<int64_t> old_keys(keys_.size() * 2, kEmpty);
  std::vector<int64_t> old_vals(vals_.size() * 2);
  old_keys.swap(keys_);
  old_vals.swap(vals_);
  mask_ = keys_.size() - 1;
  --shift_;
  for (size_t j = 0; j < old_keys.size(); ++j) {
    if (old_keys[j] == kEmpty) continue;
    uint64_t i = slot_of(old_keys[j], shift_);
    while (keys_[i] != kEmpty) i = (i + 1) & mask_;
    keys_[i] = old_keys[j];
    vals_[i] = old_vals[j];
  }
}

void IdMap::clear() {
  if (size_ == 0) return;
  if (!dense_.empty()) {
    for (int64_t key : dense_keys_) dense_[key] = -1;
    dense_keys_.clear();
  } else {
    std::fill(keys_.begin(), keys_.end(), kEmpty);
  }
  size_ = 0;
}

Inducer::Inducer(int64_t num_node_types, const std::vector<int64_t>& num_nodes) {
  TORCH_CHECK_VALUE(num_node_types >= 1, "an Inducer needs at least one node type, got ",
                    num_node_types);
  TORCH_CHECK_VALUE(num_nodes.empty() || static_cast<int64_t>(num_nodes.size()) == num_node_types,
                    "num_nodes needs one entry per node type (", num_node_types, "), got ",
                    num_nodes.size());
  maps_.resize(num_node_types);
  for (size_t t = 0; t < num_nodes.size(); ++t) {
    if (num_nodes[t] > 0) maps_[t].use_dense(num_nodes[t]);
  }
}

void Inducer::check_type(int64_t t) const {
  TORCH_CHECK_VALUE(t >= 0 && t < num_node_types(), "node type index ", t,
              " out of range for ", num_node_types(), " node types");
}

void Inducer::reset() {
  for (auto& m : maps_) m.clear();
}

std::vector<at::Tensor> Inducer::init_nodes(const std::vector<at::Tensor>& seeds) {
  TORCH_CHECK_VALUE(static_cast<int64_t>(seeds.size()) == num_node_types(),
              "init_nodes expects one seed tensor per node type (",
              num_node_types(), "), got ", seeds.size());
  reset();
  std::vector<at::Tensor> out;
  for (size_t t = 0; t < seeds.size(); ++t) {
    check_index(seeds[t], "seeds");
    const auto s = seeds[t].contiguous();
    check_range(s, INT64_MAX, "seeds");
    const int64_t* ptr = s.data_ptr<int64_t>();
    IdMap& map = maps_[t];
    map.reserve(s.numel());
    std::vector<int64_t> unique;
    unique.reserve(s.numel());
    for (int64_t i = 0; i < s.numel(); ++i) {
      bool inserted;
      map.insert(ptr[i], &inserted);
      if (inserted) unique.push_back(ptr[i]);
    }
    out.push_back(to_tensor(unique));
  }
  return out;
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

std::tuple<std::vector<at::Tensor>, std::vector<at::Tensor>,
           std::vector<at::Tensor>>
Inducer::induce_next(const std::vector<int64_t>& src_types,
                     const std::vector<int64_t>& nbr_types,
                     const std::vector<at::Tensor>& srcs,
                     const std::vector<at::Tensor>& nbrs,
                     const std::vector<at::Tensor>& nbr_nums) {
  const size_t num_etypes = srcs.size();
  TORCH_CHECK_VALUE(src_types.size() == num_etypes && nbr_types.size() == num_etypes &&
                  nbrs.size() == num_etypes && nbr_nums.size() == num_etypes,
              "induce_next expects src_types, nbr_types, srcs, nbrs and "
              "nbr_nums of one length");
  std::vector<std::vector<int64_t>> fresh(maps_.size());
  std::vector<at::Tensor> rows, cols;
  for (size_t e = 0; e < num_etypes; ++e) {
    check_type(src_types[e]);
    check_type(nbr_types[e]);
    check_index(srcs[e], "srcs");
    check_index(nbrs[e], "nbrs");
    check_index(nbr_nums[e], "nbr_nums");
    const auto src = srcs[e].contiguous(), nbr = nbrs[e].contiguous(),
               num = nbr_nums[e].contiguous();
    TORCH_CHECK_VALUE(src.numel() == num.numel(), "srcs and nbr_nums differ in length: ",
                src.numel(), " vs ", num.numel());
    if (num.numel() > 0) {
      TORCH_CHECK_VALUE(num.min().item<int64_t>() >= 0, "nbr_nums must be >= 0");
    }
    TORCH_CHECK_VALUE(num.sum().item<int64_t>() == nbr.numel(),
                "nbr_nums sums to ", num.sum().item<int64_t>(), " but nbrs holds ",
                nbr.numel(), " entries");
    check_range(nbr, INT64_MAX, "nbrs");

    const IdMap& src_map = maps_[src_types[e]];
    IdMap& nbr_map = maps_[nbr_types[e]];
    std::vector<int64_t>& new_nodes = fresh[nbr_types[e]];
    auto row = at::empty({nbr.numel()}, at::kLong);
    auto col = at::empty({nbr.numel()}, at::kLong);
    int64_t* r = row.data_ptr<int64_t>();
    int64_t* c = col.data_ptr<int64_t>();
    const int64_t* s = src.data_ptr<int64_t>();
    const int64_t* v = nbr.data_ptr<int64_t>();
    const int64_t* m = num.data_ptr<int64_t>();
    int64_t o = 0;
    for (int64_t i = 0; i < src.numel(); ++i) {
      const int64_t local = src_map.find(s[i]);
      TORCH_CHECK_VALUE(local >= 0, "source node ", s[i],
                  " was not seen by the inducer before this hop");
      for (int64_t j = 0; j < m[i]; ++j, ++o) {
        bool inserted;
        r[o] = local;
        c[o] = nbr_map.insert(v[o], &inserted);
        if (inserted) new_nodes.push_back(v[o]);
      }
    }
    rows.push_back(row);
    cols.push_back(col);
  }
  std::vector<at::Tensor> nodes;
  for (const auto& f : fresh) nodes.push_back(to_tensor(f));
  return {nodes, rows, cols};
}

}  // namespace glt
