// glt::sample_neighbors_partitioned on CUDA (see
// csrc/ops/sample_neighbors_partitioned.cpp): one thread per seed over a table
// of the partitions' topologies, each seed in its partition's stream
// (csrc/kernels/sample_partitioned.h).
#include <c10/cuda/CUDAGuard.h>
#include <torch/library.h>

#include "kernels/sample_partitioned.h"
#include "cuda/backend.cuh"

namespace glt {
namespace cuda {

std::tuple<at::Tensor, at::Tensor, at::Tensor> sample_neighbors_partitioned_kernel(
    const c10::List<std::optional<at::Tensor>>& indptrs,
    const c10::List<std::optional<at::Tensor>>& indices,
    const c10::List<std::optional<at::Tensor>>& edge_ids,
    const c10::List<std::optional<at::Tensor>>& edge_weights, const at::Tensor& parts,
    const at::Tensor& seeds, int64_t num_neighbors, bool replace, at::IntArrayRef rng_seeds) {
  const c10::cuda::CUDAGuard guard(seeds.device());
  return kernels::sample_neighbors_partitioned(CudaBackend{}, indptrs, indices, edge_ids,
                                               edge_weights, parts, seeds, num_neighbors, replace,
                                               rng_seeds);
}

TORCH_LIBRARY_IMPL(glt, CUDA, m) {
  m.impl("sample_neighbors_partitioned", TORCH_FN(sample_neighbors_partitioned_kernel));
}

}  // namespace cuda
}  // namespace glt
