// glt::concat on CUDA (see csrc/ops/concat.cpp): torch's batched copy, one
// launch (csrc/kernels/partition_ops.h).
#include <c10/cuda/CUDAGuard.h>
#include <torch/library.h>

#include "kernels/partition_ops.h"
#include "cuda/backend.cuh"

namespace glt {
namespace cuda {

at::Tensor concat_kernel(at::TensorList parts) {
  const c10::cuda::CUDAGuard guard(parts.empty() ? at::Device(at::kCUDA) : parts[0].device());
  return kernels::concat(parts);
}

TORCH_LIBRARY_IMPL(glt, CUDA, m) { m.impl("concat", TORCH_FN(concat_kernel)); }

}  // namespace cuda
}  // namespace glt
