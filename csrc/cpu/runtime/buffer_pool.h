// A cache of large host buffers for kernel outputs. A fresh multi-megabyte
// buffer costs a page fault per page on first touch (slower than filling it,
// and slower still from several threads at once); reusing a released one
// costs nothing. Each pool belongs to one owner (a Feature), so no state is
// global, and a tensor from a pool may outlive the pool.
#pragma once

#include <ATen/ATen.h>

#include <map>
#include <memory>
#include <mutex>

namespace glt::cpu {

class BufferPool : public std::enable_shared_from_this<BufferPool> {
 public:
  // Keeps at most `max_cached_bytes` of released buffers for reuse.
  explicit BufferPool(int64_t max_cached_bytes);
  ~BufferPool();
  BufferPool(const BufferPool&) = delete;
  BufferPool& operator=(const BufferPool&) = delete;

  // An uninitialised contiguous CPU tensor; large ones come from the pool.
  at::Tensor empty(at::IntArrayRef sizes, at::ScalarType dtype);
  int64_t cached_bytes() const;
  void clear();

 private:
  void release(void* ptr, size_t capacity);

  mutable std::mutex mu_;
  std::multimap<size_t, void*> free_;  // capacity -> block
  size_t cached_ = 0;
  const size_t max_cached_;
};

}  // namespace glt::cpu
