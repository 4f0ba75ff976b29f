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

// One cudaHostRegister of a storage's memory, undone when the last view over
// it goes, before the storage can be let go (it holds the storage).
struct Registration {
  at::Storage storage;
  explicit Registration(at::Storage s) : storage(std::move(s)) {}
  ~Registration() {
    const std::lock_guard<std::mutex> lock(registry_mutex());
    (void)cudaHostUnregister(storage.mutable_data());  // a destructor must not throw
  }
};

// The device address of host byte `ptr` where CUDA maps it (memory it pinned
// or registered), else nullptr. cudaPointerGetAttributes answers for any host
// address (unregistered memory is cudaMemoryTypeUnregistered), where
// cudaHostGetDevicePointer fails with an error compute-sanitizer reports.
const char* mapped_address(const char* ptr) {
  cudaPointerAttributes attributes{};
  C10_CUDA_CHECK(cudaPointerGetAttributes(&attributes, ptr));
  return attributes.type == cudaMemoryTypeHost
             ? static_cast<const char*>(attributes.devicePointer)
             : nullptr;
}

// Whether bytes [ptr, ptr + bytes) lie in memory CUDA has registered (pinned
// memory, a channel's): both ends have device addresses, one apart by the
// range (registered ranges are contiguous).
bool registered_otherwise(const char* ptr, size_t bytes) {
  const char* first = mapped_address(ptr);
  const char* last = mapped_address(ptr + bytes - 1);
  return first != nullptr && last != nullptr &&
         last - first == static_cast<ptrdiff_t>(bytes - 1);
}

// The registration of `host`'s storage, made on its first view. The
// registrations this process made are kept by base address: CUDA's own table
// of registered ranges is per process too, and a second view of a storage
// (of the same rows or others) must keep the first registration alive rather
// than make its own (which CUDA refuses) or lose it when the first view goes.
// Whole storages are registered, so views of one storage never register
// overlapping pages. nullptr where CUDA maps the tensor's bytes already
// (pinned memory, a channel's), registered otherwise.
std::shared_ptr<Registration> registration_of(const at::Tensor& host) {
  static std::unordered_map<void*, std::weak_ptr<Registration>> registered;
  const at::Storage& storage = host.storage();
  void* base = storage.mutable_data();
  std::unique_lock<std::mutex> lock(registry_mutex());
  const auto found = registered.find(base);
  if (auto existing = found == registered.end() ? nullptr : found->second.lock()) {
    lock.unlock();  // the last view may go meanwhile: this one is then the last, unregistering
    TORCH_CHECK_VALUE(existing->storage.nbytes() >= storage.nbytes(), "registered_view: ",
                      storage.nbytes(), " bytes asked where a view registered ",
                      existing->storage.nbytes());
    return existing;
  }
  if (registered_otherwise(static_cast<const char*>(host.data_ptr()), host.nbytes())) {
    return nullptr;
  }
  const cudaError_t err = cudaHostRegister(base, storage.nbytes(),
                                           cudaHostRegisterMapped | cudaHostRegisterPortable);
  if (err != cudaSuccess) {
    (void)cudaGetLastError();  // clear it
    TORCH_CHECK(err != cudaErrorHostMemoryAlreadyRegistered,
                "registered_view: part of the tensor's memory is registered with CUDA and part "
                "is not");
    C10_CUDA_CHECK(err);
  }
  auto made = std::make_shared<Registration>(storage);
  registered[base] = made;
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
  auto registration = registration_of(host);
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
