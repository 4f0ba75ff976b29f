// Large arrays the kernels read at random (a topology's rows and entries, an
// id-indexed map) on 2 MB pages. A random read of an array far larger than
// the TLB's reach costs a page walk on 4 KB pages; on 2 MB pages the TLB
// covers 512x more. Linux backs memory advised with MADV_HUGEPAGE by
// transparent huge pages on first touch where
// /sys/kernel/mm/transparent_hugepage/enabled is 'always' or 'madvise'
// (most distributions' default); elsewhere it stays on plain pages.
#pragma once

#include <ATen/ATen.h>

#include <cstddef>
#include <new>

namespace glt::cpu {

// The size of a huge page (x86-64's and ARM64's with 4 KB base pages).
constexpr size_t kHugePage = size_t{2} << 20;
// Arrays from this size on (one huge page) take huge pages.
constexpr size_t kHugePagesFrom = kHugePage;

// `length` bytes (whole pages) of address room at a 2 MB-aligned address,
// reserved (no memory behind it) for a mapping placed over it with
// MAP_FIXED, or nullptr where there is no room: a huge page longer
// reserved, the rest given back.
void* reserve_huge_aligned(size_t length);

// `nbytes` of uninitialized memory, given back with release_huge_pages:
// from kHugePagesFrom on, a fresh mapping, 2 MB aligned, advised as huge
// pages before anything touches it. Throws std::bad_alloc when there is no
// memory.
void* allocate_huge_pages(size_t nbytes);
void release_huge_pages(void* ptr, size_t nbytes);

// An uninitialized 1-D CPU tensor of `numel` elements on memory from
// allocate_huge_pages.
at::Tensor empty_huge_pages(int64_t numel, at::ScalarType dtype);

// Moves the pages of `t`'s memory that fill whole 2 MB pages, each within one
// mapping, onto huge pages now, in place and in parallel (MADV_COLLAPSE,
// Linux 6.1 on): for arrays the kernels did not allocate, such as a user's
// feature table, or a shared file's where map_shared_file
// (cpu/runtime/shared_file.h) mapped it (shared memory takes huge pages this
// way only where its mapping is 2 MB-aligned; then even where shmem_enabled
// is 'never', but not 'deny'). Returns the
// bytes moved; memory the kernel will not move (an older kernel, shared
// memory mapped elsewhere, no free huge page, a full memory cgroup) stays as
// it is.
int64_t collapse_huge_pages(const at::Tensor& t);

// A std::vector's allocator of memory from allocate_huge_pages.
template <typename T>
struct HugePageAllocator {
  using value_type = T;
  HugePageAllocator() = default;
  template <typename U>
  HugePageAllocator(const HugePageAllocator<U>&) {}
  T* allocate(size_t n) { return static_cast<T*>(allocate_huge_pages(n * sizeof(T))); }
  void deallocate(T* p, size_t n) { release_huge_pages(p, n * sizeof(T)); }
  template <typename U>
  bool operator==(const HugePageAllocator<U>&) const {
    return true;
  }
  template <typename U>
  bool operator!=(const HugePageAllocator<U>&) const {
    return false;
  }
};

}  // namespace glt::cpu
