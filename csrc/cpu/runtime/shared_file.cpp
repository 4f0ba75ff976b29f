#include "cpu/runtime/shared_file.h"

#include <ATen/MapAllocator.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "checks.h"
#include "cpu/runtime/huge_pages.h"

namespace glt::cpu {
namespace {

// As torch maps a descriptor another process handed it: shared memory, the
// descriptor kept (and closed with the mapping), nothing created.
constexpr int kFlags = at::ALLOCATOR_MAPPED_SHAREDMEM | at::ALLOCATOR_MAPPED_NOCREATE |
                       at::ALLOCATOR_MAPPED_KEEPFD | at::ALLOCATOR_MAPPED_FROMFD;

// `length` bytes of `fd` mapped shared at a 2 MB-aligned address, or
// nullptr.
void* map_aligned(int fd, size_t length) {
  void* room = reserve_huge_aligned(length);
  if (room == nullptr) return nullptr;
  void* mapped = mmap(room, length, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd, 0);
  if (mapped != MAP_FAILED) return mapped;
  munmap(room, length);
  return nullptr;
}

// torch's MapAllocator (what is_shared() and torch's multiprocessing look
// for) with its mapping moved 2 MB-aligned; where that mapping fails, the
// one torch made stays (the same file, on 4 KB page table entries).
class AlignedMapAllocator : public at::MapAllocator {
 public:
  AlignedMapAllocator(int fd, size_t size) : at::MapAllocator(at::WITH_FD, "", fd, kFlags, size) {
    const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    const size_t length = (static_cast<size_t>(size_) + page - 1) / page * page;
    void* aligned = map_aligned(fd_, length);
    if (aligned != nullptr) {
      munmap(base_ptr_, size_);
      base_ptr_ = aligned;  // what close() unmaps
    }
  }
  ~AlignedMapAllocator() override { close(); }
};

// The deleter torch gives a MapAllocator's data (not exported), read off a
// mapping of its own of `fd`.
c10::DeleterFnPtr map_allocator_deleter(int fd) {
  const int probe = dup(fd);
  TORCH_CHECK(probe >= 0, "map_shared_file: cannot duplicate descriptor ", fd, ": ",
              std::strerror(errno));
  return at::MapAllocator::makeDataPtr(at::WITH_FD, "", probe, kFlags, 1, nullptr).get_deleter();
}

}  // namespace

at::Tensor map_shared_file(int64_t fd, int64_t nbytes) {
  TORCH_CHECK_VALUE(fd >= 0 && nbytes > 0,
                    "map_shared_file needs a descriptor and nbytes > 0, got descriptor ", fd,
                    " and ", nbytes, " bytes");
  struct stat file;
  TORCH_CHECK(fstat(static_cast<int>(fd), &file) == 0, "map_shared_file: cannot map descriptor ",
              fd, ": ", std::strerror(errno));
  TORCH_CHECK_VALUE(S_ISREG(file.st_mode) && file.st_size >= nbytes,
                    "map_shared_file: descriptor ", fd, " is not a file of ", nbytes,
                    " bytes or more");
  static const c10::DeleterFnPtr deleter = map_allocator_deleter(static_cast<int>(fd));
  const int own = dup(static_cast<int>(fd));
  TORCH_CHECK(own >= 0, "map_shared_file: cannot map descriptor ", fd, ": ", std::strerror(errno));
  AlignedMapAllocator* mapping = nullptr;
  try {
    mapping = new AlignedMapAllocator(own, static_cast<size_t>(nbytes));
  } catch (...) {
    ::close(own);  // the mapping never took it
    throw;
  }
  c10::DataPtr data(mapping->data(), mapping, deleter, at::kCPU);
  c10::Storage storage(c10::Storage::use_byte_size_t(), nbytes, std::move(data), nullptr, false);
  return at::empty({0}, at::kByte).set_(storage, 0, {nbytes}, {1});
}

}  // namespace glt::cpu
