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

// The first free block of at least `bytes` (first fit), merged with the free
// blocks that follow it on the way, or kNone; under the lock.
uint64_t ShmQueue::first_fit(uint64_t bytes) {
  const uint64_t size = header_->data_size;
  for (uint64_t offset = 0; offset < size;) {
    auto* block = reinterpret_cast<BlockHeader*>(data() + offset);
    if (block->state == kFree) {
      while (offset + block->size < size) {  // merge the free blocks that follow
        const uint64_t next_offset = offset + block->size;
        const auto* next = reinterpret_cast<const BlockHeader*>(data() + next_offset);
        if (next->state != kFree) break;
        block->size += next->size;
      }
      if (block->size >= bytes) return offset;
    }
    offset += block->size;
  }
  return kNone;
}

// A block of `bytes` from the data region, or kNone; under the lock. Memory
// backs the `touched` bytes it starts with (and the free block's header after
// it) before they are touched; kNone with `*backing_error` set when it cannot.
uint64_t ShmQueue::allocate(uint64_t bytes, uint64_t touched, int* backing_error) {
  const uint64_t offset = first_fit(bytes);
  if (offset == kNone) return kNone;
  auto* block = reinterpret_cast<BlockHeader*>(data() + offset);
  *backing_error = ensure_backed(offset, offset + touched);
  if (*backing_error == 0 && block->size > bytes) {
    *backing_error = ensure_backed(offset + bytes, offset + bytes + sizeof(BlockHeader));
  }
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
  header_->used += bytes;
  return offset;
}

// The bytes of memory a block of `bytes`, of which the first `touched` get
// written, would newly take were it allocated now (the block allocate would
// choose): `touched` where none is free.
uint64_t ShmQueue::backing_for(uint64_t bytes, uint64_t touched) {
  Guard guard(header_);
  const uint64_t offset = first_fit(bytes);
  if (offset == kNone) return touched;
  uint64_t unbacked = unbacked_bytes(offset, offset + touched);
  if (reinterpret_cast<const BlockHeader*>(data() + offset)->size > bytes) {
    // the next block's header, on a page of its own or the last one written
    const uint64_t after = std::max(offset + bytes, align_up(offset + touched, header_->page));
    unbacked += unbacked_bytes(after, offset + bytes + sizeof(BlockHeader));
  }
  return unbacked;
}

// Whether memory backs page `p` of the data ring (the backed-pages map).
bool ShmQueue::page_backed(uint64_t p) const {
  const auto* map = reinterpret_cast<const uint64_t*>(base_ + header_->backed_map_offset);
  return (map[p / 64] >> (p % 64)) & 1;
}

// The bytes of the pages of the data ring's [begin, end) with no memory yet;
// under the lock.
uint64_t ShmQueue::unbacked_bytes(uint64_t begin, uint64_t end) const {
  const uint64_t page = header_->page;
  const uint64_t last = (std::min(end, header_->data_size) + page - 1) / page;
  uint64_t pages = 0;
  for (uint64_t p = begin / page; p < last; ++p) pages += !page_backed(p);
  return pages * page;
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

// Backs the pages of the data ring's bytes [begin, end) that have no memory
// yet, a run of them a fallocate; under the lock. Returns 0 or the errno of a
// failed fallocate.
int ShmQueue::ensure_backed(uint64_t begin, uint64_t end) {
  auto* h = header_;
  auto* backed = reinterpret_cast<uint64_t*>(base_ + h->backed_map_offset);
  const uint64_t page = h->page;
  const uint64_t last = (std::min(end, h->data_size) + page - 1) / page;
  for (uint64_t p = begin / page; p < last;) {
    if (p % 64 == 0 && backed[p / 64] == ~uint64_t{0}) {  // a word of backed pages
      p += 64;
      continue;
    }
    if (page_backed(p)) {
      ++p;
      continue;
    }
    uint64_t run_end = p + 1;
    while (run_end < last && !page_backed(run_end)) ++run_end;
    const uint64_t from = p * page;
    const uint64_t to = std::min(run_end * page, h->data_size);
    const int rc = posix_fallocate(fd_, static_cast<off_t>(h->data_offset + from),
                                   static_cast<off_t>(to - from));
    if (rc != 0) return rc;
    for (; p < run_end; ++p) backed[p / 64] |= uint64_t{1} << (p % 64);
    __atomic_store_n(&h->backed, h->backed + (to - from), __ATOMIC_RELAXED);
  }
  return 0;
}

}  // namespace glt
