// glt::disjoint_keys on CUDA (see csrc/ops/disjoint_keys.cpp): one thread
// per seed (csrc/kernels/disjoint_keys.h).
#include <c10/cuda/CUDAGuard.h>
#include <torch/library.h>

#include "kernels/disjoint_keys.h"
#include "cuda/backend.cuh"

namespace glt {
namespace cuda {

at::Tensor disjoint_keys_kernel(const at::Tensor& seed_keys, const at::Tensor& nbrs,
                                const at::Tensor& nbr_nums, int64_t bits) {
  const c10::cuda::CUDAGuard guard(seed_keys.device());
  return kernels::disjoint_keys(CudaBackend{}, seed_keys, nbrs, nbr_nums, bits);
}

TORCH_LIBRARY_IMPL(glt, CUDA, m) { m.impl("disjoint_keys", TORCH_FN(disjoint_keys_kernel)); }

}  // namespace cuda
}  // namespace glt
