// The CPU kernels' random stream (input checks are in checks.h; the CUDA
// kernels draw from Philox streams, kernels/device.h).
#pragma once

#include <ATen/ATen.h>

#include <cstdint>

namespace glt {

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
