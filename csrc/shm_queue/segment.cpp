// The queue's segment: made (create) or mapped from another process's
// descriptor (attach), and its counters.
#include "shm_queue/layout.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>

namespace glt {
using namespace shm;

ShmQueue::ShmQueue(int fd, void* base, size_t mapped)
    : fd_(fd),
      base_(static_cast<uint8_t*>(base)),
      mapped_(mapped),
      header_(static_cast<ShmQueueHeader*>(base)) {}

ShmQueue::~ShmQueue() {
  munmap(base_, mapped_);
  close(fd_);
}

uint8_t* ShmQueue::data() const { return base_ + header_->data_offset; }

std::shared_ptr<ShmQueue> ShmQueue::create(int64_t capacity, int64_t shm_size) {
  TORCH_CHECK_VALUE(capacity > 0 && capacity <= (1 << 24), "capacity must be in [1, 2^24], got ",
                    capacity);
  TORCH_CHECK_VALUE(shm_size >= 4096, "shm_size must be at least 4096 bytes, got ", shm_size);
  const uint64_t page = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  const uint64_t slots_offset = align_up(sizeof(ShmQueueHeader));
  const uint64_t data_size = align_up(shm_size);
  const uint64_t backed_map_offset = align_up(slots_offset + 8 * capacity);
  const uint64_t map_words = (data_size + 64 * page - 1) / (64 * page);
  const uint64_t data_offset = align_up(backed_map_offset + 8 * map_words, page);
  const uint64_t mapped = data_offset + data_size;

  const int fd = memfd_create("glt-shm-channel", MFD_CLOEXEC);
  TORCH_CHECK(fd >= 0, "shared-memory channel: memfd_create failed: ", std::strerror(errno));
  // The segment is sparse: memory backs the data ring only as messages reach
  // it (ensure_backed), so a large shm_size costs nothing until used. The
  // header, the slots, the backed-pages map and the first block header are
  // backed now; every page is backed (fallocate) before it is touched, so a
  // lack of memory is an error, never a SIGBUS.
  int rc = ftruncate(fd, static_cast<off_t>(mapped)) == 0 ? 0 : errno;
  if (rc == 0) rc = posix_fallocate(fd, 0, static_cast<off_t>(data_offset + page));
  if (rc != 0) {
    close(fd);
    TORCH_CHECK(false, "shared-memory channel: cannot reserve ", data_offset + page,
                " bytes of shared memory for its header (", std::strerror(rc), ")");
  }
  void* base = mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (base == MAP_FAILED) {
    rc = errno;
    close(fd);
    TORCH_CHECK(false, "shared-memory channel: mmap of ", mapped,
                " bytes failed: ", std::strerror(rc));
  }
  auto* h = static_cast<ShmQueueHeader*>(base);  // a fresh memfd reads as zeros
  h->version = kLayoutVersion;
  h->mapped = mapped;
  h->slots_offset = slots_offset;
  h->data_offset = data_offset;
  h->data_size = data_size;
  h->capacity = static_cast<uint64_t>(capacity);
  h->backed = std::min<uint64_t>(page, data_size);
  h->page = page;
  h->backed_map_offset = backed_map_offset;
  *reinterpret_cast<uint64_t*>(static_cast<uint8_t*>(base) + backed_map_offset) = 1;
  pthread_mutexattr_t attr;
  pthread_mutexattr_init(&attr);
  pthread_mutexattr_setpshared(&attr, PTHREAD_PROCESS_SHARED);
  pthread_mutexattr_setrobust(&attr, PTHREAD_MUTEX_ROBUST);
  pthread_mutex_init(&h->mutex, &attr);
  pthread_mutexattr_destroy(&attr);
  auto* first = reinterpret_cast<BlockHeader*>(static_cast<uint8_t*>(base) + data_offset);
  first->state = kFree;
  first->size = data_size;
  h->magic = kMagic;

  std::shared_ptr<ShmQueue> queue(new ShmQueue(fd, base, mapped));
  Guard guard(h);
  queue->register_self(kOwner);
  return queue;
}

std::shared_ptr<ShmQueue> ShmQueue::attach(int fd) {
  struct stat st;
  if (fstat(fd, &st) != 0) {
    const int rc = errno;
    close(fd);
    TORCH_CHECK(false, "shared-memory channel: the passed descriptor is not usable (",
                std::strerror(rc), ")");
  }
  const size_t mapped = static_cast<size_t>(st.st_size);
  if (mapped < sizeof(ShmQueueHeader)) {
    close(fd);
    TORCH_CHECK(false, "shared-memory channel: the passed descriptor holds ", mapped,
                " bytes, too few for a channel");
  }
  void* base = mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (base == MAP_FAILED) {
    const int rc = errno;
    close(fd);
    TORCH_CHECK(false, "shared-memory channel: mmap failed: ", std::strerror(rc));
  }
  std::shared_ptr<ShmQueue> queue(new ShmQueue(fd, base, mapped));
  const auto* h = queue->header_;
  TORCH_CHECK(h->magic == kMagic && h->mapped == mapped,
              "shared-memory channel: the passed segment is not a channel");
  TORCH_CHECK(h->version == kLayoutVersion, "shared-memory channel: layout version ", h->version,
              " was made by another graphlearn_torch build (this one reads ", kLayoutVersion, ")");
  return queue;
}

bool ShmQueue::empty() const { return size() == 0; }

int64_t ShmQueue::size() const {
  Guard guard(header_);
  return static_cast<int64_t>(header_->q_count);
}

int64_t ShmQueue::capacity() const { return static_cast<int64_t>(header_->capacity); }

int64_t ShmQueue::shm_size() const { return static_cast<int64_t>(header_->data_size); }

int64_t ShmQueue::backed_bytes() const {
  return static_cast<int64_t>(__atomic_load_n(&header_->backed, __ATOMIC_RELAXED));
}

int64_t ShmQueue::waiting_for_room() const {
  return static_cast<int64_t>(__atomic_load_n(&header_->waiting_for_room, __ATOMIC_RELAXED));
}

int64_t ShmQueue::free_bytes() const {
  Guard guard(header_);
  return static_cast<int64_t>(header_->data_size - header_->used);
}

std::map<std::string, int64_t> ShmQueue::stats() const {
  Guard guard(header_);
  const auto* h = header_;
  int64_t processes = 0;
  for (int32_t i = 0; i < kMaxProcs; ++i) processes += h->procs[i].pid != 0;
  return {{"queued", h->q_count},
          {"pending", h->pending},
          {"waiting_for_room", h->waiting_for_room},
          {"used_bytes", h->used},
          {"free_bytes", h->data_size - h->used},
          {"backed_bytes", h->backed},
          {"processes", processes}};
}

}  // namespace glt
