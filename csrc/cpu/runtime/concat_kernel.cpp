// 1-D concatenation: each part copied to its place, parallel over the
// output in ranges of whole parts or pieces of one.
#include <ATen/ATen.h>
#include <torch/library.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "cpu/runtime/parallel.h"
#include "partition_checks.h"

namespace glt::cpu {
namespace {

at::Tensor concat_kernel(at::TensorList parts) {
  const std::vector<at::Tensor> inputs = checked_concat_parts(parts);
  std::vector<int64_t> offsets{0};
  for (const at::Tensor& part : inputs) offsets.push_back(offsets.back() + part.numel());
  at::Tensor out = at::empty({offsets.back()}, parts[0].options());
  const int64_t item = out.element_size();
  char* dst = static_cast<char*>(out.data_ptr());
  // Over output positions: a range copies the pieces of the parts it covers.
  glt::cpu::parallel_for(0, offsets.back(), 1 << 15, [&](int64_t begin, int64_t end) {
    size_t p = std::upper_bound(offsets.begin(), offsets.end(), begin) - offsets.begin() - 1;
    for (int64_t at = begin; at < end; ++p) {
      const int64_t stop = std::min(end, offsets[p + 1]);
      if (stop > at) {
        const char* src = static_cast<const char*>(inputs[p].data_ptr());
        std::memcpy(dst + at * item, src + (at - offsets[p]) * item, (stop - at) * item);
      }
      at = std::max(at, stop);
    }
  });
  return out;
}

}  // namespace

TORCH_LIBRARY_IMPL(glt, CPU, m) { m.impl("concat", TORCH_FN(concat_kernel)); }

}  // namespace glt::cpu
