// The host backend of the kernel bodies (csrc/kernels): runs a per-thread
// body over every index of [0, n) on the CPU, with OpenMP threads taking
// small interleaved chunks, so that the hash tables' compare-and-swap inserts
// meet real concurrency. Only the tests build it (test/test_kernel_bodies.py).
#pragma once

#include <ATen/ATen.h>
#include <omp.h>

#include <atomic>
#include <cstdint>

namespace glt {
namespace testing {

struct HostBackend {
  // How many for_each calls (on a GPU, kernel launches) this process made.
  static std::atomic<int64_t>& launches() {
    static std::atomic<int64_t> count{0};
    return count;
  }

  template <typename F>
  void for_each(int64_t n, F f) const {
    if (n <= 0) return;  // as the CUDA backend, which launches nothing
    launches().fetch_add(1, std::memory_order_relaxed);
#pragma omp parallel for schedule(dynamic, 7)
    for (int64_t i = 0; i < n; ++i) f(i);
  }

  // The CUDA backend's upload of a small host tensor: here, the tensor.
  at::Tensor to_device(const at::Tensor& host, const at::Device&) const { return host; }
  void copy_to_device(const at::Tensor& host, at::Tensor& dst) const { dst.copy_(host); }

  // The CUDA backend's copy to the host behind the launched work, and the
  // wait for it: here the work is done and the tensor is on the host.
  using Ready = int;
  at::Tensor to_host_async(const at::Tensor& t, Ready*) const { return t; }
  void wait(const Ready&) const {}
};

}  // namespace testing
}  // namespace glt
