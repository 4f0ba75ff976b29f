// Unified virtual addressing: views of pinned host memory as CUDA tensors,
// and peer access between GPUs.
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <cuda_runtime.h>

#include "cuda/uva.h"

namespace glt {
namespace cuda {

at::Tensor uva_view(const at::Tensor& host, int64_t device) {
  TORCH_CHECK_VALUE(host.device().is_cpu(), "uva_view needs a host tensor, got one on ",
                    host.device());
  TORCH_CHECK_VALUE(host.is_contiguous(), "uva_view needs a contiguous tensor");
  TORCH_CHECK_VALUE(host.numel() == 0 || host.is_pinned(),
                    "uva_view needs pinned host memory: call .pin_memory() first");
  const c10::cuda::CUDAGuard guard(static_cast<c10::DeviceIndex>(device));
  void* device_ptr = nullptr;
  if (host.numel() > 0) {
    C10_CUDA_CHECK(cudaHostGetDevicePointer(&device_ptr, host.data_ptr(), 0));
  }
  return at::from_blob(
      device_ptr, host.sizes(), host.strides(), [keep = host](void*) {},
      host.options().device(at::kCUDA, static_cast<c10::DeviceIndex>(device)));
}

bool enable_peer_access(int64_t device, int64_t peer) {
  if (device == peer) return true;
  int can = 0;
  C10_CUDA_CHECK(cudaDeviceCanAccessPeer(&can, static_cast<int>(device), static_cast<int>(peer)));
  if (!can) return false;
  const c10::cuda::CUDAGuard guard(static_cast<c10::DeviceIndex>(device));
  const cudaError_t err = cudaDeviceEnablePeerAccess(static_cast<int>(peer), 0);
  if (err == cudaErrorPeerAccessAlreadyEnabled) {
    (void)cudaGetLastError();  // clear it
    return true;
  }
  C10_CUDA_CHECK(err);
  return true;
}

}  // namespace cuda
}  // namespace glt
