// glt::unified_gather_by_book on CUDA (see csrc/ops/unified_gather_by_book.cpp):
// unified_gather's kernel with each id's row found through the partition
// book and its partition's id map as it is copied.
#include <c10/cuda/CUDAGuard.h>
#include <torch/library.h>

#include "kernels/book_gather.h"
#include "cuda/backend.cuh"

namespace glt {
namespace cuda {

at::Tensor unified_gather_by_book_kernel(const at::TensorList parts, at::IntArrayRef slot_parts,
                                         const c10::List<std::optional<at::Tensor>>& slot_maps,
                                         at::IntArrayRef slot_offsets, const at::Tensor& book,
                                         const at::Tensor& slot_of, const at::Tensor& ids,
                                         const std::optional<at::Tensor>& first_bad) {
  const c10::cuda::CUDAGuard guard(ids.device());
  return kernels::unified_gather_by_book(CudaBackend{}, parts.vec(), slot_parts.vec(),
                                         slot_maps, slot_offsets.vec(),
                                         book, slot_of, ids, first_bad);
}

TORCH_LIBRARY_IMPL(glt, CUDA, m) {
  m.impl("unified_gather_by_book", TORCH_FN(unified_gather_by_book_kernel));
}

}  // namespace cuda
}  // namespace glt
