// Shared-memory queue of tensor messages; see shm_queue.h for the design.
//
// Segment layout: [ShmQueueHeader][slots: capacity x uint64 block offsets]
// [data ring]. A block in the ring is [BlockHeader][TensorMeta, sizes, key
// per tensor][tensor bytes, each 64-byte aligned]. Blocks, free or not, tile
// the data region. Allocation is first-fit: it walks the blocks from the
// region's start, merging runs of free blocks, and splits the first run that
// is large enough. So the channel reuses the bytes it has already touched, and
// the memory it backs and maps stays near the bytes in flight, however large
// shm_size is (next-fit, walking on from the last allocation, cycled through
// all of it: a first pass of page faults and zeroing over the whole region in
// every process). Blocks are freed in any order, so a message the consumer
// keeps for long holds only its own bytes.
#include "shm_queue.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <pthread.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstring>

namespace glt {
namespace {

constexpr uint64_t kMagic = 0x31515348544c4721ULL;  // "!GLTSHQ1"
constexpr uint32_t kLayoutVersion = 3;
constexpr uint64_t kAlign = 64;
constexpr int32_t kMaxProcs = 256;
// Waits sleep at most this long before checking their peers.
constexpr int64_t kSliceMs = 50;
// The lock is held for a few pointer updates; not getting it in this long
// means its holder is stopped or the segment is corrupt.
constexpr int64_t kLockTimeoutS = 30;
constexpr uint64_t kNone = UINT64_MAX;

enum BlockState : uint32_t { kFree = 0, kWriting = 1, kQueued = 2, kReading = 3 };
enum Role : uint32_t { kProducer = 1, kConsumer = 2, kOwner = 4 };

uint64_t align_up(uint64_t n, uint64_t to = kAlign) { return (n + to - 1) / to * to; }

struct ProcEntry {
  int32_t pid;  // 0: unused
  uint32_t roles;
  uint64_t start_time;  // /proc/<pid>/stat field 22; 0 when /proc is unavailable
};

struct BlockHeader {
  uint32_t state;
  int32_t owner;  // process slot, while kWriting or kReading
  uint64_t size;  // bytes of the block, this header included
  uint32_t num_tensors;
  uint32_t meta_bytes;
  uint8_t pad[40];
};
static_assert(sizeof(BlockHeader) == kAlign, "a block header is one alignment unit");

struct TensorMeta {
  uint64_t data_offset;  // from the block's start
  uint64_t nbytes;
  int32_t dtype;
  uint32_t ndim;
  uint32_t key_len;
  uint32_t pad;
  // followed by int64 sizes[ndim], then the key, padded to 8 bytes
};

uint64_t tensor_meta_bytes(const std::string& key, const at::Tensor& t) {
  return sizeof(TensorMeta) + 8 * t.dim() + align_up(key.size(), 8);
}

int64_t now_us() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// Start time of process `pid` in clock ticks since boot, or 0 when it does
// not exist or has exited (a zombie has exited), or /proc cannot say.
uint64_t process_start_time(int32_t pid) {
  char path[64];
  std::snprintf(path, sizeof(path), "/proc/%d/stat", pid);
  const int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  char buf[1024];
  const ssize_t n = read(fd, buf, sizeof(buf) - 1);
  close(fd);
  if (n <= 0) return 0;
  buf[n] = 0;
  const char* p = std::strrchr(buf, ')');  // the command name may hold spaces
  if (p == nullptr || p[1] == 0) return 0;
  p += 2;  // field 3, the state
  if (*p == 'Z' || *p == 'X' || *p == 'x') return 0;
  for (int field = 3; field < 22; ++field) {
    p = std::strchr(p, ' ');
    if (p == nullptr) return 0;
    ++p;
  }
  return std::strtoull(p, nullptr, 10);
}

bool process_alive(const ProcEntry& e) {
  if (e.pid == 0) return false;
  if (e.start_time != 0) return process_start_time(e.pid) == e.start_time;
  return kill(e.pid, 0) == 0 || errno == EPERM;  // no /proc: no zombie or reuse check
}

void futex_wait(uint32_t* addr, uint32_t seen, int64_t ms) {
  timespec ts{static_cast<time_t>(ms / 1000), static_cast<long>((ms % 1000) * 1000000)};
  syscall(SYS_futex, addr, FUTEX_WAIT, seen, &ts, nullptr, 0);
}

void futex_wake_all(uint32_t* addr) {
  syscall(SYS_futex, addr, FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
}

// Copies n bytes into the ring at dst (64-byte aligned: block data offsets
// are) with non-temporal stores where the CPU has them: the consumer, another
// process, reads the bytes later, so the stores bypass this core's cache and
// skip reading the destination lines first (61 MB: 3.2 -> 2.75 ms). Tensors
// under 1 MiB are copied as usual: they may still be in the shared cache
// when the consumer reads them.
void stream_copy(uint8_t* dst, const void* src_ptr, uint64_t n) {
  const auto* src = static_cast<const uint8_t*>(src_ptr);
#if defined(__SSE2__)
  constexpr uint64_t kStreamMin = uint64_t{1} << 20;
  if (n >= kStreamMin && reinterpret_cast<uintptr_t>(dst) % 64 == 0) {
    uint64_t i = 0;
    for (; i + 64 <= n; i += 64) {
      const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i));
      const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i + 16));
      const __m128i c = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i + 32));
      const __m128i d = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i + 48));
      _mm_stream_si128(reinterpret_cast<__m128i*>(dst + i), a);
      _mm_stream_si128(reinterpret_cast<__m128i*>(dst + i + 16), b);
      _mm_stream_si128(reinterpret_cast<__m128i*>(dst + i + 32), c);
      _mm_stream_si128(reinterpret_cast<__m128i*>(dst + i + 48), d);
    }
    _mm_sfence();  // the stores are visible before the message is queued
    std::memcpy(dst + i, src + i, n - i);
    return;
  }
#endif
  std::memcpy(dst, src, n);
}

uint32_t load_seq(uint32_t* seq) { return __atomic_load_n(seq, __ATOMIC_SEQ_CST); }
void bump_seq(uint32_t* seq) { __atomic_add_fetch(seq, 1, __ATOMIC_SEQ_CST); }

}  // namespace

struct ShmQueueHeader {
  uint64_t magic;
  uint32_t version;
  uint32_t pad0;
  uint64_t mapped;
  uint64_t slots_offset;
  uint64_t data_offset;
  uint64_t data_size;
  uint64_t capacity;
  pthread_mutex_t mutex;          // process-shared, robust
  alignas(64) uint32_t recv_seq;  // futex: bumped when a message is queued
  uint32_t send_seq;              // futex: bumped when a slot or bytes free up
  uint64_t used;                  // bytes in blocks that are not free
  uint64_t q_head, q_count;       // slot ring
  uint64_t pending;               // blocks being written: they hold a slot too
  uint64_t backed;                // data bytes [0, backed) have memory behind them
  ProcEntry procs[kMaxProcs];
};

// Holds the queue's robust mutex; a holder that died is recovered from.
class ShmQueue::Guard {
 public:
  explicit Guard(ShmQueueHeader* header) : header_(header) { lock(); }
  ~Guard() {
    if (locked_) pthread_mutex_unlock(&header_->mutex);
  }
  Guard(const Guard&) = delete;
  Guard& operator=(const Guard&) = delete;

  void lock() {
    timespec deadline;
    clock_gettime(CLOCK_REALTIME, &deadline);
    deadline.tv_sec += kLockTimeoutS;
    int rc = pthread_mutex_timedlock(&header_->mutex, &deadline);
    if (rc == EOWNERDEAD) {  // its holder died; every update under it is ordered to be safe
      pthread_mutex_consistent(&header_->mutex);
      rc = 0;
    }
    TORCH_CHECK(rc == 0, "shared-memory channel: cannot take its lock (", std::strerror(rc),
                rc == ETIMEDOUT ? "): another process held it for 30 s" : ")");
    locked_ = true;
  }

  void unlock() {
    pthread_mutex_unlock(&header_->mutex);
    locked_ = false;
  }

  // Unlocks, sleeps until `seq` moves from `seen` or `ms` pass, relocks.
  void wait(uint32_t* seq, uint32_t seen, int64_t ms) {
    unlock();
    futex_wait(seq, seen, std::max<int64_t>(ms, 1));
    lock();
  }

 private:
  ShmQueueHeader* header_;
  bool locked_ = false;
};

// Shared by the tensors of one received message; the last one to go returns
// the block to the ring.
struct ShmBlockRef {
  std::shared_ptr<ShmQueue> queue;
  uint64_t offset;
  ~ShmBlockRef() {
    try {
      queue->release_block(offset);
    } catch (const std::exception& e) {
      TORCH_WARN("shared-memory channel: a received block could not be released: ", e.what());
    }
  }
};

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
  const uint64_t data_offset = align_up(slots_offset + 8 * capacity, page);
  const uint64_t data_size = align_up(shm_size);
  const uint64_t mapped = data_offset + data_size;

  const int fd = memfd_create("glt-shm-channel", MFD_CLOEXEC);
  TORCH_CHECK(fd >= 0, "shared-memory channel: memfd_create failed: ", std::strerror(errno));
  // The segment is sparse: memory backs the data ring only as messages reach
  // it (ensure_backed), so a large shm_size costs nothing until used. The
  // header, the slots and the first block header are backed now; every page
  // is backed (fallocate) before it is touched, so a lack of memory is an
  // error, never a SIGBUS.
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

// Finds or makes this process's entry in the process table; under the lock.
int32_t ShmQueue::register_self(uint32_t role) {
  const int32_t pid = static_cast<int32_t>(getpid());
  if (pid == self_pid_ && (self_roles_ & role) == role) return self_slot_;
  auto* h = header_;
  if (pid != self_pid_) {  // first use, or a forked child: a process of its own
    self_pid_ = pid;
    self_slot_ = -1;
    self_roles_ = 0;
  }
  if (self_slot_ < 0) {
    const uint64_t start = process_start_time(pid);
    int32_t slot = -1;
    for (int32_t i = 0; i < kMaxProcs && slot < 0; ++i) {
      if (h->procs[i].pid == pid && h->procs[i].start_time == start) slot = i;
    }
    for (int32_t i = 0; i < kMaxProcs && slot < 0; ++i) {
      if (h->procs[i].pid == 0) slot = i;
    }
    if (slot < 0) {
      reclaim();  // blocks of the dead go first, then their entries can be reused
      for (int32_t i = 0; i < kMaxProcs && slot < 0; ++i) {
        if (!process_alive(h->procs[i])) slot = i;
      }
    }
    TORCH_CHECK(slot >= 0, "shared-memory channel: more than ", kMaxProcs,
                " live processes use this channel");
    if (h->procs[slot].pid != pid) {
      h->procs[slot].pid = 0;
      h->procs[slot].roles = 0;
      h->procs[slot].start_time = start;
      h->procs[slot].pid = pid;
    }
    self_slot_ = slot;
  }
  h->procs[self_slot_].roles |= role;
  self_roles_ = h->procs[self_slot_].roles;
  return self_slot_;
}

bool ShmQueue::alive(int32_t slot, std::vector<int8_t>* cache) const {
  if (slot < 0 || slot >= kMaxProcs) return false;
  int8_t& known = (*cache)[slot];
  if (known < 0) known = process_alive(header_->procs[slot]) ? 1 : 0;
  return known == 1;
}

// Frees the blocks of processes that died while writing or holding them;
// under the lock. Returns whether anything was freed.
bool ShmQueue::reclaim() {
  auto* h = header_;
  std::vector<int8_t> cache(kMaxProcs, -1);
  bool freed = false;
  for (uint64_t offset = 0; offset < h->data_size;) {
    auto* block = reinterpret_cast<BlockHeader*>(data() + offset);
    TORCH_CHECK(block->size >= sizeof(BlockHeader) && block->size <= h->data_size - offset,
                "shared-memory channel: corrupt block at offset ", offset);
    if ((block->state == kWriting || block->state == kReading) && !alive(block->owner, &cache)) {
      if (block->state == kWriting) h->pending -= 1;
      free_block(block);
      freed = true;
    }
    offset += block->size;
  }
  if (freed) {
    bump_seq(&h->send_seq);
    futex_wake_all(&h->send_seq);
  }
  return freed;
}

// Marks `block` free; allocate merges it with the free blocks after it (once
// nothing is in use, its walk from the start merges the whole region, so a
// message as large as the region fits). Under the lock.
void ShmQueue::free_block(void* ptr) {
  auto* block = static_cast<BlockHeader*>(ptr);
  block->state = kFree;
  header_->used -= block->size;
}

// A block of `bytes` from the data region, or kNone; under the lock. Memory
// backs the block (and the free block's header after it) before either is
// touched; kNone with `*backing_error` set when it cannot.
uint64_t ShmQueue::allocate(uint64_t bytes, int* backing_error) {
  auto* h = header_;
  const uint64_t size = h->data_size;
  for (uint64_t offset = 0; offset < size;) {
    auto* block = reinterpret_cast<BlockHeader*>(data() + offset);
    if (block->state == kFree) {
      while (offset + block->size < size) {  // merge the free blocks that follow
        const uint64_t next_offset = offset + block->size;
        const auto* next = reinterpret_cast<const BlockHeader*>(data() + next_offset);
        if (next->state != kFree) break;
        block->size += next->size;
      }
      if (block->size >= bytes) {
        const uint64_t end = offset + bytes + (block->size > bytes ? sizeof(BlockHeader) : 0);
        *backing_error = ensure_backed(end);
        if (*backing_error != 0) return kNone;
        if (block->size > bytes) {  // sizes are multiples of kAlign: the rest holds a header
          auto* rest = reinterpret_cast<BlockHeader*>(data() + offset + bytes);
          rest->state = kFree;
          rest->owner = -1;
          rest->size = block->size - bytes;
        }
        block->owner = self_slot_;
        block->num_tensors = 0;
        block->meta_bytes = 0;
        block->size = bytes;
        block->state = kWriting;
        h->used += bytes;
        return offset;
      }
    }
    offset += block->size;
  }
  return kNone;
}

void ShmQueue::release_block(uint64_t offset) {
  auto* h = header_;
  {
    Guard guard(h);
    free_block(data() + offset);
    bump_seq(&h->send_seq);
  }
  futex_wake_all(&h->send_seq);
}

int64_t ShmQueue::message_bytes(const std::vector<std::string>& keys,
                                const std::vector<at::Tensor>& tensors) {
  TORCH_CHECK_VALUE(keys.size() == tensors.size(), "got ", keys.size(), " keys for ",
                    tensors.size(), " tensors");
  uint64_t meta = 0;
  uint64_t payload = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const auto& t = tensors[i];
    TORCH_CHECK_VALUE(t.defined(), "message entry '", keys[i], "' is an undefined tensor");
    TORCH_CHECK_VALUE(t.layout() == at::kStrided && !t.is_nested(), "message entry '", keys[i],
                      "' is a ", t.layout(), " tensor; only dense tensors can be sent");
    TORCH_CHECK_VALUE(!t.is_quantized(), "message entry '", keys[i],
                      "' is quantized; dequantize it before sending");
    TORCH_CHECK_VALUE(keys[i].size() < (1u << 16), "message key of ", keys[i].size(),
                      " bytes is too long");
    meta += tensor_meta_bytes(keys[i], t);
    payload += align_up(static_cast<uint64_t>(t.numel()) * t.element_size());
  }
  return static_cast<int64_t>(sizeof(BlockHeader) + align_up(meta) + payload);
}

// Backs the data ring's bytes [0, end) with memory, extending the backed
// prefix; under the lock. Returns 0 or the errno of the failed fallocate.
int ShmQueue::ensure_backed(uint64_t end) {
  auto* h = header_;
  if (end <= h->backed) return 0;
  const uint64_t page = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  end = std::min(align_up(end, page), h->data_size);
  const int rc = posix_fallocate(fd_, static_cast<off_t>(h->data_offset + h->backed),
                                 static_cast<off_t>(end - h->backed));
  if (rc == 0) h->backed = end;
  return rc;
}

std::shared_ptr<ShmReservation> ShmQueue::reserve(const std::vector<std::string>& keys,
                                                  const std::vector<at::Tensor>& templates,
                                                  int64_t timeout_ms, ShmQueueStatus* status,
                                                  std::string* error) {
  const uint64_t bytes = static_cast<uint64_t>(message_bytes(keys, templates));
  auto* h = header_;
  TORCH_CHECK_VALUE(bytes <= h->data_size, "a message of ", bytes, " bytes (", templates.size(),
                    " tensors) does not fit in this channel's shm_size of ", h->data_size,
                    " bytes; create the channel with a larger shm_size (channel_size)");
  const int64_t start = now_us();
  uint64_t offset = kNone;
  {
    Guard guard(h);
    register_self(kProducer);
    int64_t last_check = start;
    while (true) {
      int backing_error = 0;
      if (h->q_count + h->pending < h->capacity) offset = allocate(bytes, &backing_error);
      if (offset != kNone) break;
      if (backing_error != 0) {
        *error = "cannot back a message of " + std::to_string(bytes) +
                 " bytes with shared memory (" + std::strerror(backing_error) +
                 "): " + std::to_string(h->backed) + " of the channel's " +
                 std::to_string(h->data_size) +
                 " bytes have memory; the machine (or this process's memory cgroup) has no more";
        *status = ShmQueueStatus::kNoMemory;
        return nullptr;
      }
      const int64_t now = now_us();
      if (now - last_check >= kSliceMs * 1000) {
        last_check = now;
        if (reclaim()) continue;
        std::vector<int8_t> cache(kMaxProcs, -1);
        bool owner_alive = false;
        int32_t owner_pid = 0;
        for (int32_t i = 0; i < kMaxProcs; ++i) {
          if (h->procs[i].roles & kOwner) {
            owner_pid = h->procs[i].pid;
            owner_alive = alive(i, &cache);
          }
        }
        if (!owner_alive) {
          *error = "the process that created this channel (pid " + std::to_string(owner_pid) +
                   "), its consumer, has exited";
          *status = ShmQueueStatus::kPeerGone;
          return nullptr;
        }
      }
      int64_t wait_ms = kSliceMs;
      if (timeout_ms >= 0) {
        const int64_t left_us = timeout_ms * 1000 - (now - start);
        if (left_us <= 0) {
          *status = ShmQueueStatus::kTimeout;
          return nullptr;
        }
        wait_ms = std::min(wait_ms, (left_us + 999) / 1000);
      }
      guard.wait(&h->send_seq, load_seq(&h->send_seq), wait_ms);
    }
    h->pending += 1;
  }

  // The block is ours (kWriting): lay out its tensors and hand out views
  // of their places. A failure frees it (the reservation's destructor).
  auto* block = reinterpret_cast<BlockHeader*>(data() + offset);
  auto reservation =
      std::shared_ptr<ShmReservation>(new ShmReservation(shared_from_this(), offset));
  reservation->views_.reserve(templates.size());
  uint64_t meta_bytes = 0;
  for (size_t i = 0; i < templates.size(); ++i)
    meta_bytes += tensor_meta_bytes(keys[i], templates[i]);
  uint8_t* meta = reinterpret_cast<uint8_t*>(block) + sizeof(BlockHeader);
  uint64_t data_offset = sizeof(BlockHeader) + align_up(meta_bytes);
  for (size_t i = 0; i < templates.size(); ++i) {
    const auto& t = templates[i];
    TensorMeta m{};
    m.data_offset = data_offset;
    m.nbytes = static_cast<uint64_t>(t.numel()) * t.element_size();
    m.dtype = static_cast<int32_t>(t.scalar_type());
    m.ndim = static_cast<uint32_t>(t.dim());
    m.key_len = static_cast<uint32_t>(keys[i].size());
    std::memcpy(meta, &m, sizeof(m));
    meta += sizeof(m);
    std::memcpy(meta, t.sizes().data(), 8 * t.dim());
    meta += 8 * t.dim();
    std::memcpy(meta, keys[i].data(), keys[i].size());
    meta += align_up(keys[i].size(), 8);
    reservation->views_.push_back(
        at::from_blob(reinterpret_cast<uint8_t*>(block) + data_offset, t.sizes(),
                      at::TensorOptions().dtype(t.scalar_type())));
    data_offset += align_up(m.nbytes);
  }
  block->num_tensors = static_cast<uint32_t>(templates.size());
  block->meta_bytes = static_cast<uint32_t>(meta_bytes);
  return reservation;
}

void ShmQueue::commit(uint64_t offset) {
  auto* h = header_;
  auto* block = reinterpret_cast<BlockHeader*>(data() + offset);
  {
    Guard guard(h);
    block->state = kQueued;
    auto* slots = reinterpret_cast<uint64_t*>(base_ + h->slots_offset);
    slots[(h->q_head + h->q_count) % h->capacity] = offset;
    h->q_count += 1;
    h->pending -= 1;
    bump_seq(&h->recv_seq);
  }
  futex_wake_all(&h->recv_seq);
}

void ShmQueue::abort(uint64_t offset) {
  auto* h = header_;
  {
    Guard guard(h);
    free_block(data() + offset);
    h->pending -= 1;
    bump_seq(&h->send_seq);
  }
  futex_wake_all(&h->send_seq);
}

ShmReservation::ShmReservation(std::shared_ptr<ShmQueue> queue, uint64_t offset)
    : queue_(std::move(queue)), offset_(offset) {}

ShmReservation::~ShmReservation() {
  if (!open_) return;
  try {
    abort();
  } catch (const std::exception& e) {
    TORCH_WARN("shared-memory channel: a reserved block could not be freed: ", e.what());
  }
}

void ShmReservation::check_open(const char* what) const {
  TORCH_CHECK(open_, "cannot ", what,
              " a channel reservation that was already committed or aborted");
}

void ShmReservation::write(int64_t index, const at::Tensor& tensor) {
  check_open("write into");
  TORCH_CHECK_VALUE(index >= 0 && index < static_cast<int64_t>(views_.size()), "entry ", index,
                    " is out of range for a message of ", views_.size(), " tensors");
  const at::Tensor& view = views_[index];
  TORCH_CHECK_VALUE(tensor.sizes() == view.sizes() && tensor.scalar_type() == view.scalar_type(),
                    "entry ", index, " was reserved as ", view.scalar_type(), " of shape ",
                    view.sizes(), ", got ", tensor.scalar_type(), " of shape ", tensor.sizes());
  if (tensor.device().is_cpu() && tensor.is_contiguous()) {
    stream_copy(static_cast<uint8_t*>(view.data_ptr()), tensor.data_ptr(),
                static_cast<uint64_t>(tensor.numel()) * tensor.element_size());
  } else {
    at::Tensor(view).copy_(tensor);
  }
}

void ShmReservation::commit() {
  check_open("commit");
  open_ = false;
  views_.clear();
  // The stores into the block are visible before it is queued: the queue's
  // lock orders them (stream_copy fenced its non-temporal ones).
  queue_->commit(offset_);
}

void ShmReservation::abort() {
  check_open("abort");
  open_ = false;
  views_.clear();
  queue_->abort(offset_);
}

ShmQueueMessage ShmQueue::recv(int64_t timeout_ms) {
  ShmQueueMessage out;
  auto* h = header_;
  const int64_t start = now_us();
  uint64_t offset;
  {
    Guard guard(h);
    const int32_t self = register_self(kConsumer);
    int64_t last_check = start;
    while (h->q_count == 0) {
      const int64_t now = now_us();
      if (now - last_check >= kSliceMs * 1000) {
        last_check = now;
        reclaim();
        std::vector<int8_t> cache(kMaxProcs, -1);
        int32_t producers = 0;
        bool any_alive = false;
        for (int32_t i = 0; i < kMaxProcs; ++i) {
          if (h->procs[i].pid != 0 && (h->procs[i].roles & kProducer)) {
            producers += 1;
            any_alive = any_alive || alive(i, &cache);
          }
        }
        if (producers > 0 && !any_alive && h->q_count == 0) {
          out.status = ShmQueueStatus::kPeerGone;
          out.error = "all " + std::to_string(producers) +
                      " producer processes of this channel have exited and no message is left";
          return out;
        }
      }
      int64_t wait_ms = kSliceMs;
      if (timeout_ms >= 0) {
        const int64_t left_us = timeout_ms * 1000 - (now - start);
        if (left_us <= 0) {
          out.status = ShmQueueStatus::kTimeout;
          return out;
        }
        wait_ms = std::min(wait_ms, (left_us + 999) / 1000);
      }
      guard.wait(&h->recv_seq, load_seq(&h->recv_seq), wait_ms);
    }
    const auto* slots = reinterpret_cast<const uint64_t*>(base_ + h->slots_offset);
    offset = slots[h->q_head];
    h->q_head = (h->q_head + 1) % h->capacity;
    h->q_count -= 1;
    auto* block = reinterpret_cast<BlockHeader*>(data() + offset);
    block->state = kReading;
    block->owner = self;
    bump_seq(&h->send_seq);
  }
  futex_wake_all(&h->send_seq);

  auto* block = reinterpret_cast<BlockHeader*>(data() + offset);
  auto ref = std::make_shared<ShmBlockRef>();
  ref->queue = shared_from_this();
  ref->offset = offset;
  const uint8_t* meta = reinterpret_cast<const uint8_t*>(block) + sizeof(BlockHeader);
  out.keys.reserve(block->num_tensors);
  out.tensors.reserve(block->num_tensors);
  for (uint32_t i = 0; i < block->num_tensors; ++i) {
    TensorMeta m;
    std::memcpy(&m, meta, sizeof(m));
    meta += sizeof(m);
    std::vector<int64_t> sizes(m.ndim);
    std::memcpy(sizes.data(), meta, 8 * m.ndim);
    meta += 8 * m.ndim;
    out.keys.emplace_back(reinterpret_cast<const char*>(meta), m.key_len);
    meta += align_up(m.key_len, 8);
    out.tensors.push_back(at::from_blob(
        reinterpret_cast<uint8_t*>(block) + m.data_offset, sizes, [ref](void*) {},
        at::TensorOptions().dtype(static_cast<at::ScalarType>(m.dtype))));
  }
  return out;  // `ref` goes with the tensors; with none, the block is released here
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

int64_t ShmQueue::free_bytes() const {
  Guard guard(header_);
  return static_cast<int64_t>(header_->data_size - header_->used);
}

std::map<std::string, int64_t> ShmQueue::stats() const {
  Guard guard(header_);
  const auto* h = header_;
  int64_t processes = 0;
  for (int32_t i = 0; i < kMaxProcs; ++i) processes += h->procs[i].pid != 0;
  return {{"queued", h->q_count},      {"pending", h->pending},
          {"used_bytes", h->used},     {"free_bytes", h->data_size - h->used},
          {"backed_bytes", h->backed}, {"processes", processes}};
}

}  // namespace glt
