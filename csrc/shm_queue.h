// A bounded multi-producer queue of tensor messages in shared memory.
//
// One segment (an anonymous memfd: it never has a name in /dev/shm, so
// nothing is left behind whoever dies) holds a header, a ring of message
// slots and a ring of data bytes. A producer reserves a block of the data
// ring under a process-shared robust mutex, writes its tensors into it
// without the lock (copies them, or computes them in place through a
// reservation), and queues the block. The consumer pops a block and gets
// tensors that view it directly; the block returns to the ring when the last
// of those tensors is released.
//
// Crash safety: every process that uses the queue is recorded (pid and start
// time) in the header. Blocks being written by a producer that died, or held
// by a consumer that died, are reclaimed by whoever waits for room; the mutex
// is robust, so a holder's death does not lock the others out; waits sleep
// on futexes in short slices and check their peers between slices, so a
// consumer whose producers all died, or a producer whose consumer died, gets
// an error rather than a hang.
//
// The implementation, by concern, is in csrc/shm_queue/: the segment's
// layout (layout.h), making and mapping it (segment.cpp), the process table
// (processes.cpp), the data ring's blocks (ring.cpp), sending (send.cpp) and
// receiving (recv.cpp).
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace glt {

struct ShmQueueHeader;
class ShmQueue;

// One message's block, reserved by ShmQueue::reserve and being written: its
// tensors' places are `views()`, which the writer fills (`write` copies a
// tensor into one), then `commit` queues the message and `abort` frees the
// block; a reservation dropped with neither is aborted. The views are valid
// until then only: the consumer owns the bytes once the message is queued.
class ShmReservation {
 public:
  ~ShmReservation();
  ShmReservation(const ShmReservation&) = delete;
  ShmReservation& operator=(const ShmReservation&) = delete;

  const std::vector<at::Tensor>& views() const { return views_; }
  // Copies `tensor` (the reserved shape and dtype) into entry `index`.
  void write(int64_t index, const at::Tensor& tensor);
  void commit();
  void abort();

 private:
  ShmReservation(std::shared_ptr<ShmQueue> queue, uint64_t offset);
  void check_open(const char* what) const;

  std::shared_ptr<ShmQueue> queue_;
  uint64_t offset_;
  std::vector<at::Tensor> views_;
  bool open_ = true;

  friend class ShmQueue;
};

enum class ShmQueueStatus : int {
  kOk = 0,
  kTimeout = 1,   // nothing to receive, or no room to send, within the timeout
  kPeerGone = 2,  // all producers (recv) or the owner (reserve) exited
  kNoMemory = 3,  // no memory could back the message (reserve)
};

struct ShmQueueMessage {
  ShmQueueStatus status = ShmQueueStatus::kOk;
  std::string error;  // why, when status is kPeerGone
  std::vector<std::string> keys;
  std::vector<at::Tensor> tensors;
};

class ShmQueue : public std::enable_shared_from_this<ShmQueue> {
 public:
  // A new segment of `shm_size` data bytes and `capacity` message slots. Memory
  // backs the data bytes as messages first reach them (an error, never a
  // SIGBUS, when there is none).
  static std::shared_ptr<ShmQueue> create(int64_t capacity, int64_t shm_size);
  // Maps the segment behind `fd`, a descriptor passed from another process;
  // the queue owns `fd` from then on.
  static std::shared_ptr<ShmQueue> attach(int fd);
  ~ShmQueue();
  ShmQueue(const ShmQueue&) = delete;
  ShmQueue& operator=(const ShmQueue&) = delete;

  // Reserves one block for a message whose tensors have the keys, shapes
  // and dtypes of `templates` (tensors on the meta device will do); the
  // caller writes the tensors into it (ShmReservation) and queues it. The
  // entries flagged in `elsewhere` (empty: none) get places that are never
  // written or backed: their bytes live elsewhere at the same offsets (a
  // device mirror). Waits at most `timeout_ms` for room (forever if negative,
  // while the owner lives); null, with `status` and `error` set, when none
  // came. A message larger than the ring is a ValueError.
  std::shared_ptr<ShmReservation> reserve(const std::vector<std::string>& keys,
                                          const std::vector<at::Tensor>& templates,
                                          const std::vector<bool>& elsewhere,
                                          int64_t timeout_ms, ShmQueueStatus* status,
                                          std::string* error);
  // Pops the oldest message; its tensors view shared memory.
  ShmQueueMessage recv(int64_t timeout_ms);

  bool empty() const;
  int64_t size() const;  // queued messages
  int64_t capacity() const;
  int64_t shm_size() const;  // data ring bytes
  int64_t backed_bytes() const;  // data ring bytes with memory behind them (a hint: no lock)
  int64_t free_bytes() const;
  // Producers waiting for a slot or a block now (a hint: no lock). While the
  // consumer waits for a message, a waiting producer is waiting for bytes
  // only the consumer can free.
  int64_t waiting_for_room() const;
  // A snapshot of the queue's state: queued, pending (being written),
  // waiting_for_room, used, free and backed bytes, processes (live entries
  // in the table).
  std::map<std::string, int64_t> stats() const;
  int fd() const { return fd_; }
  // The mapping, for cudaHostRegister by the consumer.
  uintptr_t mapping_address() const { return reinterpret_cast<uintptr_t>(base_); }
  int64_t mapping_size() const { return static_cast<int64_t>(mapped_); }
  // Bytes of memory the message (as `reserve` takes it) would newly back,
  // were it reserved now: 0 once the ring's bytes it would take are backed
  // (a hint: another producer may reserve first).
  int64_t new_backing(const std::vector<std::string>& keys,
                      const std::vector<at::Tensor>& templates,
                      const std::vector<bool>& elsewhere);
  // Bytes a message of these tensors takes in the ring (header and padding
  // included).
  static int64_t message_bytes(const std::vector<std::string>& keys,
                               const std::vector<at::Tensor>& tensors);

 private:
  class Guard;
  ShmQueue(int fd, void* base, size_t mapped);
  int32_t register_self(uint32_t role);
  bool alive(int32_t slot, std::vector<int8_t>* cache) const;
  bool owner_alive(std::string* error) const;
  bool producers_gone(std::string* error) const;
  bool reclaim();
  uint64_t take_block(uint64_t bytes, uint64_t touched, int64_t timeout_ms,
                      ShmQueueStatus* status, std::string* error);
  std::shared_ptr<ShmReservation> lay_out(uint64_t offset, const std::vector<std::string>& keys,
                                          const std::vector<at::Tensor>& templates,
                                          const std::vector<uint64_t>& places,
                                          uint64_t meta_bytes);
  uint64_t pop_block(int64_t timeout_ms, ShmQueueMessage* out);
  void free_block(void* block);
  uint64_t first_fit(uint64_t bytes);
  uint64_t allocate(uint64_t bytes, uint64_t touched, int* backing_error);
  int ensure_backed(uint64_t begin, uint64_t end);
  uint64_t backing_for(uint64_t bytes, uint64_t touched);
  bool page_backed(uint64_t page) const;
  uint64_t unbacked_bytes(uint64_t begin, uint64_t end) const;
  void release_block(uint64_t offset);
  void commit(uint64_t offset);  // queues a reserved block
  void abort(uint64_t offset);   // frees a reserved block
  uint8_t* data() const;

  int fd_;
  uint8_t* base_;
  size_t mapped_;
  ShmQueueHeader* header_;
  int32_t self_slot_ = -1;
  int32_t self_pid_ = 0;
  uint32_t self_roles_ = 0;

  friend struct ShmBlockRef;
  friend class ShmReservation;
};

}  // namespace glt
