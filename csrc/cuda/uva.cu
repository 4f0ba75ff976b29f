// Unified virtual addressing: views of pinned host memory as CUDA tensors,
// and peer access between GPUs.
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <cuda_runtime.h>

#include <memory>
#include <mutex>
#include <unordered_map>

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

namespace {

// Guards the registrations below: a registration is made and undone under it.
std::mutex& registry_mutex() {
  static std::mutex mutex;
  return mutex;
}

// One cudaHostRegister of a range, undone when the last view over it goes.
struct Registration {
  void* ptr;
  size_t bytes;
  Registration(void* p, size_t n) : ptr(p), bytes(n) {}
  ~Registration() {
    const std::lock_guard<std::mutex> lock(registry_mutex());
    (void)cudaHostUnregister(ptr);  // a destructor must not throw
  }
};

// The registrations this process made, by base address: CUDA's own table of
// registered ranges is per process too, and a second view of a range must
// keep the first registration alive rather than make its own (which CUDA
// refuses) or lose it when the first view goes.
std::shared_ptr<Registration> registration_of(void* ptr, size_t bytes) {
  static std::unordered_map<void*, std::weak_ptr<Registration>> registered;
  const std::lock_guard<std::mutex> lock(registry_mutex());
  if (auto existing = registered[ptr].lock()) {
    TORCH_CHECK_VALUE(existing->bytes >= bytes, "registered_view: ", bytes,
                      " bytes asked where a view registered ", existing->bytes);
    return existing;
  }
  const cudaError_t err =
      cudaHostRegister(ptr, bytes, cudaHostRegisterMapped | cudaHostRegisterPortable);
  if (err == cudaErrorHostMemoryAlreadyRegistered) {
    (void)cudaGetLastError();  // registered otherwise (a channel, pinned memory): use it
    registered.erase(ptr);
    return nullptr;
  }
  C10_CUDA_CHECK(err);
  auto made = std::make_shared<Registration>(ptr, bytes);
  registered[ptr] = made;
  return made;
}

}  // namespace

at::Tensor registered_view(const at::Tensor& host, int64_t device) {
  TORCH_CHECK_VALUE(host.device().is_cpu(), "registered_view needs a host tensor, got one on ",
                    host.device());
  TORCH_CHECK_VALUE(host.is_contiguous(), "registered_view needs a contiguous tensor");
  const auto options = host.options().device(at::kCUDA, static_cast<c10::DeviceIndex>(device));
  if (host.numel() == 0) return at::empty(host.sizes(), options);
  const c10::cuda::CUDAGuard guard(static_cast<c10::DeviceIndex>(device));
  auto registration = registration_of(host.data_ptr(), host.nbytes());
  void* device_ptr = nullptr;
  C10_CUDA_CHECK(cudaHostGetDevicePointer(&device_ptr, host.data_ptr(), 0));
  return at::from_blob(
      device_ptr, host.sizes(), host.strides(), [keep = host, registration](void*) {}, options);
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
