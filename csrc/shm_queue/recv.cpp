// Receiving: the oldest message popped, its tensors views of its block,
// which returns to the ring when the last of them is released.
#include "shm_queue/layout.h"

namespace glt {
using namespace shm;

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

// Whether every producer that used the queue has exited (none ever did is
// not gone); under the lock. Says how many in `*error` when they have.
bool ShmQueue::producers_gone(std::string* error) const {
  std::vector<int8_t> cache(kMaxProcs, -1);
  int32_t producers = 0;
  bool any_alive = false;
  for (int32_t i = 0; i < kMaxProcs; ++i) {
    if (header_->procs[i].pid != 0 && (header_->procs[i].roles & kProducer)) {
      producers += 1;
      any_alive = any_alive || alive(i, &cache);
    }
  }
  if (producers == 0 || any_alive) return false;
  *error = "all " + std::to_string(producers) +
           " producer processes of this channel have exited and no message is left";
  return true;
}

// Waits for a queued message and takes the oldest (kReading, owned by this
// process); returns its block's offset, or kNone with `out`'s status set.
uint64_t ShmQueue::pop_block(int64_t timeout_ms, ShmQueueMessage* out) {
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
        if (h->q_count == 0 && producers_gone(&out->error)) {
          out->status = ShmQueueStatus::kPeerGone;
          return kNone;
        }
      }
      const int64_t wait_ms = wait_slice_ms(timeout_ms, start, now);
      if (wait_ms < 0) {
        out->status = ShmQueueStatus::kTimeout;
        return kNone;
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
  return offset;
}

ShmQueueMessage ShmQueue::recv(int64_t timeout_ms) {
  ShmQueueMessage out;
  const uint64_t offset = pop_block(timeout_ms, &out);
  if (offset == kNone) return out;

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
    std::vector<int64_t> sizes(m.ndim);  // none for a 0-dim tensor: its data() may be null
    if (m.ndim > 0) std::memcpy(sizes.data(), meta, 8 * m.ndim);
    meta += 8 * m.ndim;
    out.keys.emplace_back(reinterpret_cast<const char*>(meta), m.key_len);
    meta += align_up(m.key_len, 8);
    out.tensors.push_back(at::from_blob(
        reinterpret_cast<uint8_t*>(block) + m.data_offset, sizes, [ref](void*) {},
        at::TensorOptions().dtype(static_cast<at::ScalarType>(m.dtype))));
  }
  return out;  // `ref` goes with the tensors; with none, the block is released here
}

}  // namespace glt
