// Disjoint sampling's neighbor keys for any backend (see
// csrc/ops/disjoint_keys.cpp): one thread per seed.
#pragma once

#include <ATen/ATen.h>

#include "checks.h"
#include "kernels/device.h"

namespace glt {
namespace kernels {

// Checks disjoint_keys' inputs; returns (seed keys, neighbors, counts),
// contiguous.
inline std::tuple<at::Tensor, at::Tensor, at::Tensor> checked_disjoint_args(
    const at::Tensor& seed_keys, const at::Tensor& nbrs, const at::Tensor& nbr_nums,
    int64_t bits) {
  check_index(seed_keys, "seed_keys");
  check_index(nbrs, "nbrs");
  check_index(nbr_nums, "nbr_nums");
  check_device(nbrs, "nbrs", seed_keys.device());
  check_device(nbr_nums, "nbr_nums", seed_keys.device());
  TORCH_CHECK_VALUE(bits >= 1 && bits <= 62, "bits must be in [1, 62], got ", bits);
  TORCH_CHECK_VALUE(nbr_nums.numel() == seed_keys.numel(), "nbr_nums has ", nbr_nums.numel(),
                    " entries for ", seed_keys.numel(), " seeds");
  auto keys = seed_keys.contiguous(), nbr = nbrs.contiguous(), num = nbr_nums.contiguous();
  check_range(nbr, int64_t{1} << bits, "nbrs");
  if (num.numel() > 0) {
    TORCH_CHECK_VALUE(num.min().item<int64_t>() >= 0, "nbr_nums must be >= 0");
    const int64_t total = num.sum().item<int64_t>();
    TORCH_CHECK_VALUE(total == nbr.numel(), "nbr_nums sums to ", total, " but nbrs holds ",
                      nbr.numel(), " entries");
  } else {
    TORCH_CHECK_VALUE(nbr.numel() == 0, "nbrs holds ", nbr.numel(), " entries for no seeds");
  }
  return {keys, nbr, num};
}

// Neighbor j of seed i (nbrs grouped seed by seed, nbr_nums[i] each) gets
// the key of seed i with its low `bits` bits replaced by the neighbor's id:
// its seed's subgraph, its own id.
template <typename Backend>
at::Tensor disjoint_keys(const Backend& backend, const at::Tensor& seed_keys,
                         const at::Tensor& nbrs, const at::Tensor& nbr_nums, int64_t bits) {
  const auto [keys, nbr, num] = checked_disjoint_args(seed_keys, nbrs, nbr_nums, bits);
  auto out = at::empty_like(nbr);
  const int64_t n = keys.numel();
  if (n == 0 || nbr.numel() == 0) return out;
  const auto offsets = num.cumsum(0) - num;
  const int64_t* key = keys.data_ptr<int64_t>();
  const int64_t* id = nbr.data_ptr<int64_t>();
  const int64_t* count = num.data_ptr<int64_t>();
  const int64_t* first = offsets.data_ptr<int64_t>();
  int64_t* dst = out.data_ptr<int64_t>();
  const int64_t high = ~((int64_t{1} << bits) - 1);
  backend.for_each(n, [=] GLT_HOST_DEVICE(int64_t i) {
    const int64_t seed = key[i] & high;
    for (int64_t p = first[i], end = first[i] + count[i]; p < end; ++p) dst[p] = seed | id[p];
  });
  return out;
}

}  // namespace kernels
}  // namespace glt
