// The stable counting sort of positions by partition that bucket_by_partition
// and group_by_partition share: each chunk of positions counts its
// partitions, a prefix sum over (partition, chunk) gives every chunk its place
// in each group, and the chunks then write their positions in parallel. Two
// sequential passes over the input.
//
// A counter bumped for consecutive positions is a chain of dependent loads
// and stores (one per position, at the store-forwarding latency). A task
// therefore walks kBucketLanes chunks in lockstep, each with its own counters:
// independent chains that the core overlaps.
#pragma once

#include <ATen/ATen.h>

#include <algorithm>
#include <vector>

#include "cpu/runtime/parallel.h"

namespace glt::cpu {

constexpr int64_t kBucketChunk = 1 << 13;
constexpr int64_t kBucketLanes = 4;

// The chunks of a bucket sort of n positions: chunk c covers
// [c * kBucketChunk, min(n, (c + 1) * kBucketChunk)); a group's lanes are
// its kBucketLanes chunks (empty past n).
struct BucketChunks {
  int64_t n, num_partitions, num_chunks, num_groups;
  BucketChunks(int64_t n, int64_t num_partitions)
      : n(n),
        num_partitions(num_partitions),
        num_chunks((n + kBucketChunk - 1) / kBucketChunk),
        num_groups((num_chunks + kBucketLanes - 1) / kBucketLanes) {}
  int64_t size(int64_t c) const {
    return std::clamp<int64_t>(n - c * kBucketChunk, 0, kBucketChunk);
  }
};

// Counts each chunk's positions by partition into place[c * num_partitions
// + p]; returns, per chunk, its first position outside [0, num_partitions)
// (-1: none).
template <typename part_t>
std::vector<int64_t> bucket_counts(const part_t* part, const BucketChunks& chunks,
                                   std::vector<int64_t>& place) {
  const int64_t num_partitions = chunks.num_partitions;
  std::vector<int64_t> first_bad(chunks.num_chunks, -1);
  glt::cpu::parallel_for(0, chunks.num_groups, 1, [&](int64_t gb, int64_t ge) {
    for (int64_t g = gb; g < ge; ++g) {
      const int64_t c0 = g * kBucketLanes;
      int64_t* __restrict__ count = place.data() + c0 * num_partitions;
      const part_t* __restrict__ in = part + c0 * kBucketChunk;
      const int64_t full = chunks.size(c0 + kBucketLanes - 1);  // rows every lane has
      bool bad = false;
      for (int64_t j = 0; j < full; ++j) {
        for (int64_t l = 0; l < kBucketLanes; ++l) {
          const int64_t p = static_cast<int64_t>(in[l * kBucketChunk + j]);
          bad |= p < 0 || p >= num_partitions;
          ++count[l * num_partitions + (bad ? 0 : p)];
        }
      }
      for (int64_t l = 0; l < kBucketLanes; ++l) {  // the lanes' tails (the last group)
        for (int64_t j = full, size = chunks.size(c0 + l); j < size; ++j) {
          const int64_t p = static_cast<int64_t>(in[l * kBucketChunk + j]);
          bad |= p < 0 || p >= num_partitions;
          ++count[l * num_partitions + (bad ? 0 : p)];
        }
      }
      if (!bad) continue;
      for (int64_t c = c0; c < std::min(chunks.num_chunks, c0 + kBucketLanes); ++c) {
        for (int64_t i = c * kBucketChunk, end = i + chunks.size(c); i < end; ++i) {
          if (part[i] < 0 || static_cast<int64_t>(part[i]) >= num_partitions) {
            first_bad[c] = i;
            break;
          }
        }
      }
    }
  });
  return first_bad;
}

// Writes each chunk's positions (and ids) to their places, which `place`
// holds per (chunk, partition) after the prefix sum.
template <typename part_t>
void bucket_write(const part_t* part, const BucketChunks& chunks, std::vector<int64_t>& place,
                  int64_t* order, const int64_t* ids, int64_t* grouped) {
  const int64_t num_partitions = chunks.num_partitions;
  glt::cpu::parallel_for(0, chunks.num_groups, 1, [&](int64_t gb, int64_t ge) {
    for (int64_t g = gb; g < ge; ++g) {
      const int64_t c0 = g * kBucketLanes;
      int64_t* __restrict__ next = place.data() + c0 * num_partitions;
      const part_t* __restrict__ in = part + c0 * kBucketChunk;
      int64_t* __restrict__ out = order;
      int64_t* __restrict__ out_ids = grouped;
      auto put = [&](int64_t l, int64_t j) {
        const int64_t i = (c0 + l) * kBucketChunk + j;
        const int64_t k =
            next[l * num_partitions + static_cast<int64_t>(in[l * kBucketChunk + j])]++;
        out[k] = i;
        if (out_ids) out_ids[k] = ids[i];
      };
      const int64_t full = chunks.size(c0 + kBucketLanes - 1);
      for (int64_t j = 0; j < full; ++j) {
        for (int64_t l = 0; l < kBucketLanes; ++l) put(l, j);
      }
      for (int64_t l = 0; l < kBucketLanes; ++l) {
        for (int64_t j = full, size = chunks.size(c0 + l); j < size; ++j) put(l, j);
      }
    }
  });
}

// Fills order (n positions) and counts (num_partitions); with ids, also
// grouped[k] = ids[order[k]]. Raises a ValueError naming the first value of
// part outside [0, num_partitions).
template <typename part_t>
void bucket(const part_t* part, int64_t n, int64_t num_partitions, int64_t* order, int64_t* counts,
            const int64_t* ids = nullptr, int64_t* grouped = nullptr) {
  const BucketChunks chunks(n, num_partitions);
  // place[c * num_partitions + p]: chunk c's count of partition p, then where
  // its first position of partition p goes.
  std::vector<int64_t> place(chunks.num_groups * kBucketLanes * num_partitions, 0);
  const std::vector<int64_t> first_bad = bucket_counts(part, chunks, place);
  for (int64_t c = 0; c < chunks.num_chunks; ++c) {
    const int64_t i = first_bad[c];
    TORCH_CHECK_VALUE(i < 0, "partitions[", i, "] is ", static_cast<int64_t>(part[i]),
                      ", outside [0, ", num_partitions, ")");
  }
  int64_t start = 0;
  for (int64_t p = 0; p < num_partitions; ++p) {
    counts[p] = 0;
    for (int64_t c = 0; c < chunks.num_chunks; ++c) {
      const int64_t count = place[c * num_partitions + p];
      place[c * num_partitions + p] = start;
      start += count;
      counts[p] += count;
    }
  }
  bucket_write(part, chunks, place, order, ids, grouped);
}

}  // namespace glt::cpu
