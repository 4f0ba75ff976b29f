// glt::scatter_rows_ on CUDA (see csrc/ops/scatter_rows.cpp): the positions
// checked in one pass, then one thread per element
// (csrc/kernels/partition_ops.h).
#include <c10/cuda/CUDAGuard.h>
#include <torch/library.h>

#include "kernels/partition_ops.h"
#include "cuda/backend.cuh"

namespace glt {
namespace cuda {

at::Tensor& scatter_rows_kernel(at::Tensor& out, const at::Tensor& positions,
                                const at::Tensor& rows) {
  const c10::cuda::CUDAGuard guard(out.device());
  return kernels::scatter_rows_(CudaBackend{}, out, positions, rows);
}

TORCH_LIBRARY_IMPL(glt, CUDA, m) { m.impl("scatter_rows_", TORCH_FN(scatter_rows_kernel)); }

}  // namespace cuda
}  // namespace glt
