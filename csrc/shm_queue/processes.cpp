// The queue's process table: who uses it, who is alive, and the blocks of
// the dead returned to the ring.
#include "shm_queue/layout.h"

#include <fcntl.h>
#include <signal.h>

#include <cstdio>

namespace glt {
namespace shm {

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

}  // namespace shm

using namespace shm;

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

}  // namespace glt
