#include "cpu/runtime/huge_pages.h"

#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "checks.h"
#include "cpu/runtime/parallel.h"

namespace glt::cpu {
namespace {

// Huge pages a thread moves at a time.
constexpr int64_t kCollapseChunk = 16;
// Tries at a huge page the kernel had no page or lock for just then.
constexpr int kCollapseTries = 2;
#ifndef MADV_COLLAPSE
constexpr int MADV_COLLAPSE = 25;  // Linux 6.1's, where the headers predate it
#endif

size_t mapped_bytes(size_t nbytes) { return (nbytes + kHugePage - 1) / kHugePage * kHugePage; }

// Moves `pages` huge pages from `start` onto huge pages; returns the bytes
// moved. One call for them all; where it fails (the kernel stops at the
// first huge page it cannot allocate), one page at a time, each tried again
// once where the failure is one of the moment, so what is moved is counted
// exactly. A page the kernel has no memory for, or that the memory cgroup
// has no room for, ends the run.
int64_t collapse_pages(uintptr_t start, int64_t pages) {
  if (madvise(reinterpret_cast<void*>(start), pages * kHugePage, MADV_COLLAPSE) == 0) {
    return pages * kHugePage;
  }
  int64_t moved = 0;
  for (int64_t page = 0; page < pages; ++page) {
    void* at = reinterpret_cast<void*>(start + page * kHugePage);
    int error = 0;
    for (int attempt = 0; attempt < kCollapseTries; ++attempt) {
      error = madvise(at, kHugePage, MADV_COLLAPSE) == 0 ? 0 : errno;
      if (error != EAGAIN) break;
    }
    if (error == 0) moved += kHugePage;
    if (error == ENOMEM || error == EBUSY) break;
  }
  return moved;
}

// Whether each 2 MB page from `first` (of `pages`) lies in one mapping: no
// mapping of /proc/self/maps starts or ends inside it. MADV_COLLAPSE takes
// the whole 2 MB pages of each mapping in its range, so it skips a page two
// mappings share (a heap or region that other advice split) and still
// reports success. Without /proc every page counts as whole.
std::vector<char> whole_pages(uintptr_t first, int64_t pages) {
  std::vector<char> whole(pages, 1);
  const uintptr_t last = first + pages * kHugePage;
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line)) {
    char* rest = nullptr;
    const uintptr_t lo = std::strtoull(line.c_str(), &rest, 16);
    if (rest == nullptr || *rest != '-') continue;
    const uintptr_t hi = std::strtoull(rest + 1, nullptr, 16);
    for (const uintptr_t bound : {lo, hi}) {
      if (bound > first && bound < last && bound % kHugePage != 0) {
        whole[(bound - first) / kHugePage] = 0;
      }
    }
  }
  return whole;
}

// Collapses the runs of whole pages among pages [begin, end) from `first`.
int64_t collapse_whole_runs(uintptr_t first, const std::vector<char>& whole, int64_t begin,
                            int64_t end) {
  int64_t moved = 0;
  for (int64_t page = begin; page < end;) {
    if (!whole[page]) {
      ++page;
      continue;
    }
    int64_t run_end = page;
    while (run_end < end && whole[run_end]) ++run_end;
    moved += collapse_pages(first + page * kHugePage, run_end - page);
    page = run_end;
  }
  return moved;
}

}  // namespace

void* reserve_huge_aligned(size_t length) {
  void* reserved = mmap(nullptr, length + kHugePage, PROT_NONE,
                        MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (reserved == MAP_FAILED) return nullptr;
  const uintptr_t start = reinterpret_cast<uintptr_t>(reserved);
  const uintptr_t aligned = (start + kHugePage - 1) / kHugePage * kHugePage;
  if (aligned > start) munmap(reserved, aligned - start);
  const size_t tail = start + kHugePage - aligned;  // the reservation's end less the room's
  if (tail > 0) munmap(reinterpret_cast<void*>(aligned + length), tail);
  return reinterpret_cast<void*>(aligned);
}

void* allocate_huge_pages(size_t nbytes) {
  if (nbytes < kHugePagesFrom) {
    void* ptr = std::malloc(std::max<size_t>(nbytes, 1));
    if (ptr == nullptr) throw std::bad_alloc();
    return ptr;
  }
  // A fresh mapping (malloc may hand back pages touched already, on which
  // the advice comes too late), on 2 MB bounds.
  const size_t capacity = mapped_bytes(nbytes);
  void* room = reserve_huge_aligned(capacity);
  if (room == nullptr) throw std::bad_alloc();
  void* ptr = mmap(room, capacity, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED,
                   -1, 0);
  if (ptr == MAP_FAILED) {
    munmap(room, capacity);
    throw std::bad_alloc();
  }
#ifdef MADV_HUGEPAGE
  madvise(ptr, capacity, MADV_HUGEPAGE);  // advice: where it fails, plain pages
#endif
  return ptr;
}

void release_huge_pages(void* ptr, size_t nbytes) {
  if (nbytes < kHugePagesFrom) {
    std::free(ptr);
  } else {
    munmap(ptr, mapped_bytes(nbytes));
  }
}

at::Tensor empty_huge_pages(int64_t numel, at::ScalarType dtype) {
  TORCH_CHECK_VALUE(numel >= 0, "empty_huge_pages needs numel >= 0, got ", numel);
  const size_t nbytes = static_cast<size_t>(numel) * at::elementSize(dtype);
  if (nbytes < kHugePagesFrom) return at::empty({numel}, at::TensorOptions().dtype(dtype));
  return at::from_blob(
      allocate_huge_pages(nbytes), {numel},
      [nbytes](void* p) { release_huge_pages(p, nbytes); }, at::TensorOptions().dtype(dtype));
}

int64_t collapse_huge_pages(const at::Tensor& t) {
  TORCH_CHECK_VALUE(t.device().is_cpu() && t.is_contiguous(),
                    "collapse_huge_pages takes a contiguous CPU tensor");
  const uintptr_t start = reinterpret_cast<uintptr_t>(t.data_ptr());
  const uintptr_t first = (start + kHugePage - 1) / kHugePage * kHugePage;
  const uintptr_t last = (start + t.nbytes()) / kHugePage * kHugePage;
  if (last <= first) return 0;
  const int64_t pages = static_cast<int64_t>((last - first) / kHugePage);
  const std::vector<char> whole = whole_pages(first, pages);
  std::atomic<int64_t> moved{0};
  glt::cpu::parallel_for(0, pages, kCollapseChunk, [&](int64_t begin, int64_t end) {
    moved += collapse_whole_runs(first, whole, begin, end);
  });
  return moved.load();
}

}  // namespace glt::cpu
