// The data ring: first-fit blocks (see layout.h), backed by memory as
// messages first reach them.
#include "shm_queue/layout.h"

#include <fcntl.h>

namespace glt {
using namespace shm;

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

}  // namespace glt
