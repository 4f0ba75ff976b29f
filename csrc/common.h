// Shared helpers for the graphlearn_torch kernels: input checks and a
// counter-based random number generator.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>

namespace glt {

// Checks that `t` is a 1-D int64 CPU tensor; `name` appears in the error.
inline void check_index(const at::Tensor& t, const char* name) {
  TORCH_CHECK_VALUE(t.device().is_cpu(), name, " must be a CPU tensor, got one on ",
              t.device());
  TORCH_CHECK_VALUE(t.scalar_type() == at::kLong, name, " must be int64, got ",
              t.scalar_type());
  TORCH_CHECK_VALUE(t.dim() == 1, name, " must be 1-D, got shape ", t.sizes());
}

// Checks that every value of the 1-D int64 tensor `t` lies in [0, upper).
inline void check_range(const at::Tensor& t, int64_t upper, const char* name) {
  if (t.numel() == 0) return;
  const int64_t lo = t.min().item<int64_t>();
  const int64_t hi = t.max().item<int64_t>();
  TORCH_CHECK_VALUE(lo >= 0 && hi < upper, name, " holds ids outside [0, ", upper,
              "): min ", lo, ", max ", hi);
}

// Checks a compressed sparse topology; returns its number of rows.
inline int64_t check_csr(const at::Tensor& indptr, const at::Tensor& indices) {
  check_index(indptr, "indptr");
  check_index(indices, "indices");
  TORCH_CHECK_VALUE(indptr.numel() >= 1, "indptr must hold at least one entry");
  TORCH_CHECK_VALUE(indptr.is_contiguous() && indices.is_contiguous(),
                    "indptr and indices must be contiguous");
  const int64_t num_rows = indptr.numel() - 1;
  const int64_t end = indptr[num_rows].item<int64_t>();
  TORCH_CHECK_VALUE(end == indices.numel(), "indptr ends at ", end, " but indices holds ",
                    indices.numel(), " entries");
  return num_rows;
}

inline uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

// SplitMix64 stream keyed by (seed, stream). Each seed node of a batch gets
// its own stream, so a batch is the same whatever the thread count.
class Rng {
 public:
  Rng(uint64_t seed, uint64_t stream)
      : state_(mix64(seed ^ mix64(stream + 0x9E3779B97F4A7C15ULL))) {}

  uint64_t next() {
    state_ += 0x9E3779B97F4A7C15ULL;
    return mix64(state_);
  }

  // Uniform integer in [0, n), n > 0 (Lemire's multiply-shift).
  uint64_t uniform(uint64_t n) {
    return static_cast<uint64_t>(
        (static_cast<unsigned __int128>(next()) * n) >> 64);
  }

  // Uniform double in (0, 1].
  double uniform01() {
    return (static_cast<double>(next() >> 11) + 1.0) * 0x1.0p-53;
  }

 private:
  uint64_t state_;
};

}  // namespace glt
