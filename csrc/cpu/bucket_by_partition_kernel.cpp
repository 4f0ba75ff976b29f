// Stable counting sort of positions by partition: each chunk of positions
// counts its partitions, a prefix sum over (partition, chunk) gives every
// chunk its place in each group, and the chunks then write their positions in
// parallel. Two sequential passes over the input.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/library.h>

#include <algorithm>
#include <vector>

namespace glt {
namespace {

constexpr int64_t kChunk = 1 << 15;

template <typename part_t>
void bucket(const part_t* part, int64_t n, int64_t num_partitions, int64_t* order,
            int64_t* counts) {
  const int64_t num_chunks = (n + kChunk - 1) / kChunk;
  // place[c * num_partitions + p]: chunk c's count of partition p, then where
  // its first position of partition p goes.
  std::vector<int64_t> place(num_chunks * num_partitions, 0);
  std::vector<int64_t> first_bad(num_chunks, -1);
  at::parallel_for(0, num_chunks, 1, [&](int64_t cb, int64_t ce) {
    for (int64_t c = cb; c < ce; ++c) {
      int64_t* count = place.data() + c * num_partitions;
      for (int64_t i = c * kChunk, end = std::min(n, i + kChunk); i < end; ++i) {
        const int64_t p = static_cast<int64_t>(part[i]);
        if (p < 0 || p >= num_partitions) {
          first_bad[c] = i;
          break;
        }
        ++count[p];
      }
    }
  });
  for (int64_t c = 0; c < num_chunks; ++c) {
    const int64_t i = first_bad[c];
    TORCH_CHECK_VALUE(i < 0, "partitions[", i, "] is ", static_cast<int64_t>(part[i]),
                      ", outside [0, ", num_partitions, ")");
  }
  int64_t start = 0;
  for (int64_t p = 0; p < num_partitions; ++p) {
    counts[p] = 0;
    for (int64_t c = 0; c < num_chunks; ++c) {
      const int64_t count = place[c * num_partitions + p];
      place[c * num_partitions + p] = start;
      start += count;
      counts[p] += count;
    }
  }
  at::parallel_for(0, num_chunks, 1, [&](int64_t cb, int64_t ce) {
    for (int64_t c = cb; c < ce; ++c) {
      int64_t* next = place.data() + c * num_partitions;
      for (int64_t i = c * kChunk, end = std::min(n, i + kChunk); i < end; ++i)
        order[next[static_cast<int64_t>(part[i])]++] = i;
    }
  });
}

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

}  // namespace glt
