// The CPU backend of the kernel bodies (csrc/kernels): runs a per-thread body
// over [0, n) with ATen's parallel_for, for ops whose CPU kernel is the
// generic one.
#pragma once


#include <cstdint>

#include "cpu/runtime/parallel.h"

namespace glt::cpu {

struct CpuBackend {
  template <typename F>
  void for_each(int64_t n, F f) const {
    glt::cpu::parallel_for(0, n, 4096, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) f(i);
    });
  }
};

}  // namespace glt::cpu
