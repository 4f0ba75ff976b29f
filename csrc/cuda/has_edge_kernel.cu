// glt::has_edge on CUDA (see csrc/ops/has_edge.cpp): one thread per pair.
#include <c10/cuda/CUDAGuard.h>
#include <torch/library.h>

#include "kernels/graph_ops.h"
#include "cuda/backend.cuh"

namespace glt {
namespace cuda {

at::Tensor has_edge_kernel(const at::Tensor& indptr, const at::Tensor& indices,
                           const at::Tensor& rows, const at::Tensor& cols) {
  const c10::cuda::CUDAGuard guard(indptr.device());
  return kernels::has_edge(CudaBackend{}, indptr, indices, rows, cols);
}

TORCH_LIBRARY_IMPL(glt, CUDA, m) { m.impl("has_edge", TORCH_FN(has_edge_kernel)); }

}  // namespace cuda
}  // namespace glt
