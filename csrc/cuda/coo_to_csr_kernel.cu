// glt::coo_to_csr on CUDA (see csrc/ops/coo_to_csr.cpp): two stable sorts
// and a histogram (csrc/kernels/graph_ops.h).
#include <c10/cuda/CUDAGuard.h>
#include <torch/library.h>

#include "kernels/graph_ops.h"
#include "cuda/backend.cuh"

namespace glt {
namespace cuda {

std::tuple<at::Tensor, at::Tensor, at::Tensor> coo_to_csr_kernel(
    const at::Tensor& row, const at::Tensor& col, int64_t num_rows, int64_t num_cols,
    c10::optional<at::ScalarType> indices_dtype) {
  const c10::cuda::CUDAGuard guard(row.device());
  return kernels::coo_to_csr(CudaBackend{}, row, col, num_rows, num_cols, indices_dtype);
}

TORCH_LIBRARY_IMPL(glt, CUDA, m) { m.impl("coo_to_csr", TORCH_FN(coo_to_csr_kernel)); }

}  // namespace cuda
}  // namespace glt
