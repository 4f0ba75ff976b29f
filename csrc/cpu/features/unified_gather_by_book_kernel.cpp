// glt::unified_gather_by_book on the CPU (see csrc/ops/unified_gather_by_book.cpp):
// the generic kernel (csrc/kernels/book_gather.h) over host parts.
#include <torch/library.h>

#include "kernels/book_gather.h"
#include "cpu/runtime/backend.h"

namespace glt::cpu {

at::Tensor unified_gather_by_book_kernel(const at::TensorList parts, at::IntArrayRef slot_parts,
                                         const c10::List<std::optional<at::Tensor>>& slot_maps,
                                         at::IntArrayRef slot_offsets, const at::Tensor& book,
                                         const at::Tensor& slot_of, const at::Tensor& ids,
                                         const std::optional<at::Tensor>& first_bad) {
  return kernels::unified_gather_by_book(cpu::CpuBackend{}, parts.vec(), slot_parts.vec(),
                                         slot_maps, slot_offsets.vec(),
                                         book, slot_of, ids, first_bad);
}

TORCH_LIBRARY_IMPL(glt, CPU, m) {
  m.impl("unified_gather_by_book", TORCH_FN(unified_gather_by_book_kernel));
}

}  // namespace glt::cpu
