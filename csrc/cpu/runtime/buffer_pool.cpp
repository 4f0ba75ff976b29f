#include "cpu/runtime/buffer_pool.h"

#include "cpu/runtime/huge_pages.h"

namespace glt::cpu {
namespace {

constexpr size_t kAlign = size_t{2} << 20;     // huge-page aligned blocks
constexpr size_t kMinPooled = size_t{1} << 20;  // smaller: plain allocation

}  // namespace

BufferPool::BufferPool(int64_t max_cached_bytes)
    : max_cached_(static_cast<size_t>(std::max<int64_t>(max_cached_bytes, 0))) {}

BufferPool::~BufferPool() { clear(); }

void BufferPool::clear() {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& [capacity, ptr] : free_) release_huge_pages(ptr, capacity);
  free_.clear();
  cached_ = 0;
}

int64_t BufferPool::cached_bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return static_cast<int64_t>(cached_);
}

at::Tensor BufferPool::empty(at::IntArrayRef sizes, at::ScalarType dtype) {
  int64_t numel = 1;
  for (int64_t s : sizes) numel *= s;
  const size_t nbytes = static_cast<size_t>(numel) * at::elementSize(dtype);
  const auto options = at::TensorOptions().dtype(dtype);
  if (nbytes < kMinPooled) return at::empty(sizes, options);

  void* ptr = nullptr;
  size_t capacity = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    // The smallest cached block that fits without wasting more than half.
    auto it = free_.lower_bound(nbytes);
    if (it != free_.end() && it->first <= 2 * nbytes) {
      capacity = it->first;
      ptr = it->second;
      cached_ -= capacity;
      free_.erase(it);
    }
  }
  if (ptr == nullptr) {
    // Headroom so a slightly larger next batch reuses this block.
    capacity = (nbytes + nbytes / 4 + kAlign - 1) / kAlign * kAlign;
    ptr = allocate_huge_pages(capacity);
  }
  std::weak_ptr<BufferPool> owner = weak_from_this();
  return at::from_blob(
      ptr, sizes,
      [owner, capacity](void* p) {
        if (auto pool = owner.lock()) {
          pool->release(p, capacity);
        } else {
          release_huge_pages(p, capacity);
        }
      },
      options);
}

void BufferPool::release(void* ptr, size_t capacity) {
  std::lock_guard<std::mutex> lock(mu_);
  // Make room by dropping the largest blocks first.
  while (cached_ + capacity > max_cached_ && !free_.empty()) {
    auto last = std::prev(free_.end());
    cached_ -= last->first;
    release_huge_pages(last->second, last->first);
    free_.erase(last);
  }
  if (cached_ + capacity > max_cached_) {
    release_huge_pages(ptr, capacity);
    return;
  }
  free_.emplace(capacity, ptr);
  cached_ += capacity;
}

}  // namespace glt::cpu
