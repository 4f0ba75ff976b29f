// glt::stitch_neighbors on CUDA (see csrc/ops/stitch_neighbors.cpp): the
// pieces' values checked in one pass, then one thread per seed's run
// (csrc/kernels/partition_ops.h).
#include <c10/cuda/CUDAGuard.h>
#include <torch/library.h>

#include "kernels/partition_ops.h"
#include "cuda/backend.cuh"

namespace glt {
namespace cuda {

std::tuple<at::Tensor, at::Tensor, std::optional<at::Tensor>> stitch_neighbors_kernel(
    int64_t num_seeds, at::TensorList positions, at::TensorList nbr_nums, at::TensorList nbrs,
    at::TensorList edges) {
  const c10::cuda::CUDAGuard guard(positions.empty() ? at::Device(at::kCUDA)
                                                     : positions[0].device());
  return kernels::stitch_neighbors(CudaBackend{}, num_seeds, positions, nbr_nums, nbrs, edges);
}

TORCH_LIBRARY_IMPL(glt, CUDA, m) { m.impl("stitch_neighbors", TORCH_FN(stitch_neighbors_kernel)); }

}  // namespace cuda
}  // namespace glt
