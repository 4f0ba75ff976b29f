// The CUDA backend of the kernel bodies (csrc/kernels): runs a per-thread
// body over [0, n) with a grid-stride loop on the current stream.
#pragma once

#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>
#include <ATen/cuda/CUDAEvent.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAException.h>

#include <algorithm>
#include <cstdint>
#include <memory>

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
  // A small host tensor copied into `dst` (on the device) from pinned memory
  // on the current stream: no allocation on the device, no wait.
  void copy_to_device(const at::Tensor& host, at::Tensor& dst) const {
    dst.copy_(host.pin_memory(), /*non_blocking=*/true);
  }

  // `t` copied to pinned host memory on the current stream, behind the work
  // launched before; `*ready` is recorded after the copy, for wait.
  using Ready = std::shared_ptr<at::cuda::CUDAEvent>;
  at::Tensor to_host_async(const at::Tensor& t, Ready* ready) const {
    at::Tensor host = at::empty(t.sizes(), t.options().device(at::kCPU).pinned_memory(true));
    host.copy_(t, /*non_blocking=*/true);
    *ready = std::make_shared<at::cuda::CUDAEvent>();
    (*ready)->record(at::cuda::getCurrentCUDAStream());
    return host;
  }
  // Waits for the copy `ready` marks: a host sync, which torch's sync debug
  // mode reports as its own synchronizing calls are.
  void wait(const Ready& ready) const {
    if (!ready) return;
    c10::cuda::warn_or_error_on_sync();
    ready->synchronize();
  }
};

}  // namespace cuda
}  // namespace glt
