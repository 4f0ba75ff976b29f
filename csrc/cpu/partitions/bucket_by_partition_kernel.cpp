// positions grouped by partition: the stable counting sort of bucket.h.
#include <ATen/ATen.h>
#include <torch/library.h>

#include "cpu/partitions/bucket.h"
#include "partition_checks.h"

namespace glt::cpu {
namespace {

std::tuple<at::Tensor, at::Tensor> bucket_by_partition_kernel(const at::Tensor& partitions,
                                                              int64_t num_partitions) {
  const auto part = checked_bucket_args(partitions, num_partitions);
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
