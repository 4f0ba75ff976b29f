// glt::induced_subgraph on CUDA (see csrc/ops/induced_subgraph.cpp): the
// nodes in a hash table, then one thread per node counts and emits its
// row's edges among them.
#include <c10/cuda/CUDAGuard.h>
#include <torch/library.h>

#include "kernels/graph_ops.h"
#include "cuda/backend.cuh"

namespace glt {
namespace cuda {

std::tuple<at::Tensor, at::Tensor, at::Tensor> induced_subgraph_kernel(
    const at::Tensor& indptr, const at::Tensor& indices, const std::optional<at::Tensor>& edge_ids,
    const at::Tensor& nodes) {
  const c10::cuda::CUDAGuard guard(indptr.device());
  return kernels::induced_subgraph(CudaBackend{}, indptr, indices, edge_ids, nodes);
}

TORCH_LIBRARY_IMPL(glt, CUDA, m) { m.impl("induced_subgraph", TORCH_FN(induced_subgraph_kernel)); }

}  // namespace cuda
}  // namespace glt
