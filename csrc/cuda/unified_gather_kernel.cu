// glt::unified_gather on CUDA (see csrc/ops/unified_gather.cpp): a group of
// threads per row, each with several 16-byte units (or narrower ones) in
// flight, reading GPU memory (peer access for other GPUs' parts) and pinned
// host memory through UVA.
#include <c10/cuda/CUDAGuard.h>
#include <torch/library.h>

#include "kernels/unified_gather.h"
#include "cuda/backend.cuh"

namespace glt {
namespace cuda {

at::Tensor unified_gather_kernel(const at::TensorList parts, const at::Tensor& ids,
                                 const std::optional<at::Tensor>& id2index,
                                 const std::optional<at::Tensor>& first_bad) {
  const c10::cuda::CUDAGuard guard(ids.device());
  return kernels::unified_gather(CudaBackend{}, parts.vec(), ids, id2index, first_bad);
}

TORCH_LIBRARY_IMPL(glt, CUDA, m) { m.impl("unified_gather", TORCH_FN(unified_gather_kernel)); }

}  // namespace cuda
}  // namespace glt
