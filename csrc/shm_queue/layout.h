// The shared-memory queue's segment layout and the helpers its parts share
// (see shm_queue.h for the design, and the parts: segment.cpp, processes.cpp,
// ring.cpp, send.cpp, recv.cpp).
//
// Segment layout: [ShmQueueHeader][slots: capacity x uint64 block offsets]
// [backed pages: a bit a page of the data ring][data ring]. A block in the
// ring is [BlockHeader][TensorMeta, sizes, key per tensor][tensor bytes,
// each 64-byte aligned]. Blocks, free or not, tile the data region.
// Allocation is first-fit: it walks the blocks from the region's start,
// merging runs of free blocks, and splits the first run that is large
// enough. So the channel reuses the bytes it has already touched, and the
// memory it backs and maps stays near the bytes in flight, however large
// shm_size is (next-fit, walking on from the last allocation, cycled through
// all of it: a first pass of page faults and zeroing over the whole region in
// every process). Blocks are freed in any order, so a message the consumer
// keeps for long holds only its own bytes.
//
// Memory backs a page of the ring (fallocate) before anything touches it. A
// block's entries that live elsewhere (a device mirror's: shm_channel.py) are
// laid out after the others and never touched, so their pages stay holes:
// the ring's backed pages are a set (a bit a page), not a prefix.
#pragma once

#include <errno.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstring>

#include "shm_queue.h"

namespace glt {
namespace shm {

constexpr uint64_t kMagic = 0x31515348544c4721ULL;  // "!GLTSHQ1"
constexpr uint32_t kLayoutVersion = 5;
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

inline uint64_t align_up(uint64_t n, uint64_t to = kAlign) { return (n + to - 1) / to * to; }

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

inline uint64_t tensor_meta_bytes(const std::string& key, const at::Tensor& t) {
  return sizeof(TensorMeta) + 8 * t.dim() + align_up(key.size(), 8);
}

inline int64_t now_us() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// Start time of process `pid` in clock ticks since boot, or 0 when it does
// not exist or has exited (a zombie has exited), or /proc cannot say.
uint64_t process_start_time(int32_t pid);
bool process_alive(const ProcEntry& e);

inline void futex_wait(uint32_t* addr, uint32_t seen, int64_t ms) {
  timespec ts{static_cast<time_t>(ms / 1000), static_cast<long>((ms % 1000) * 1000000)};
  syscall(SYS_futex, addr, FUTEX_WAIT, seen, &ts, nullptr, 0);
}

inline void futex_wake_all(uint32_t* addr) {
  syscall(SYS_futex, addr, FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
}

inline uint32_t load_seq(uint32_t* seq) { return __atomic_load_n(seq, __ATOMIC_SEQ_CST); }
inline void bump_seq(uint32_t* seq) { __atomic_add_fetch(seq, 1, __ATOMIC_SEQ_CST); }

// How long a wait for a message or for room may still sleep: kSliceMs, less
// what is left of `timeout_ms` (forever if negative) since `start_us`; -1
// when the timeout has passed.
inline int64_t wait_slice_ms(int64_t timeout_ms, int64_t start_us, int64_t now) {
  if (timeout_ms < 0) return kSliceMs;
  const int64_t left_us = timeout_ms * 1000 - (now - start_us);
  if (left_us <= 0) return -1;
  return std::min(kSliceMs, (left_us + 999) / 1000);
}

}  // namespace shm

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
  uint64_t waiting_for_room;      // producers waiting for a slot or a block now
  uint64_t backed;                // data bytes with memory behind them
  uint64_t page;                  // the bytes of a page of the backed-pages map
  uint64_t backed_map_offset;     // a bit a data page, set once the page is backed
  shm::ProcEntry procs[shm::kMaxProcs];
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
    deadline.tv_sec += shm::kLockTimeoutS;
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
    shm::futex_wait(seq, seen, std::max<int64_t>(ms, 1));
    lock();
  }

 private:
  ShmQueueHeader* header_;
  bool locked_ = false;
};

}  // namespace glt
