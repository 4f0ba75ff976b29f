// positions grouped by partition: the stable counting sort of bucket.h.
#include <ATen/ATen.h>
#include <torch/library.h>

#include "cpu/partitions/bucket.h"

namespace glt::cpu {
namespace {

std::tuple<at::Tensor, at::Tensor> bucket_by_partition_kernel(const at::Tensor& partitions,
                                                              int64_t num_partitions) {
  TORCH_CHECK_VALUE(partitions.dim() == 1, "partitions must be 1-D, got shape ",
                    partitions.sizes());
  TORCH_CHECK_VALUE(at::isIntegralType(partitions.scalar_type(), /*includeBool=*/false),
                    "partitions must be an integer tensor, got ", partitions.scalar_type());
  TORCH_CHECK_VALUE(num_partitions >= 1, "num_partitions must be at least 1, got ", num_partitions);
  const auto part = partitions.contiguous();
  const int64_t n = part.numel();
  auto order = at::empty({n}, part.options().dtype(at::kLong));
  auto counts = at::empty({num_partitions}, part.options().dtype(at::kLong));
  AT_DISPATCH_INTEGRAL_TYPES(part.scalar_type(), "bucket_by_partition", [&] {
    bucket(part.data_ptr<scalar_t>(), n, num_partitions, order.data_ptr<int64_t>(),
           counts.data_ptr<int64_t>());
  });
  return {order, counts};
}

}  // namespace

TORCH_LIBRARY_IMPL(glt, CPU, m) {
  m.impl("bucket_by_partition", TORCH_FN(bucket_by_partition_kernel));
}

}  // namespace glt::cpu
