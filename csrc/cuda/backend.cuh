// The CUDA backend of the kernel bodies (csrc/kernels): runs a per-thread
// body over [0, n) with a grid-stride loop on the current stream.
#pragma once

#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>

#include <algorithm>
#include <cstdint>

namespace glt {
namespace cuda {

template <typename F>
__global__ void for_each_kernel(int64_t n, F f) {
  const int64_t stride = static_cast<int64_t>(blockDim.x) * gridDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride) {
    f(i);
  }
}

struct CudaBackend {
  static constexpr int kThreads = 256;
  static constexpr int64_t kMaxBlocks = 1 << 20;

  template <typename F>
  void for_each(int64_t n, F f) const {
    if (n <= 0) return;
    const int64_t blocks = std::min<int64_t>((n + kThreads - 1) / kThreads, kMaxBlocks);
    for_each_kernel<<<blocks, kThreads, 0, at::cuda::getCurrentCUDAStream()>>>(n, f);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  }

  // A small host tensor (a table of pointers, bounds) on `device`, copied
  // from pinned memory on the current stream: the host does not wait.
  at::Tensor to_device(const at::Tensor& host, const at::Device& device) const {
    return host.pin_memory().to(device, /*non_blocking=*/true);
  }
};

}  // namespace cuda
}  // namespace glt
