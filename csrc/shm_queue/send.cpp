// Sending: a block reserved for a message, its tensors written in place
// (ShmReservation), then queued or freed.
#include "shm_queue/layout.h"

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace glt {
using namespace shm;

namespace {

// Copies n bytes into the ring at dst (64-byte aligned: block data offsets
// are) with non-temporal stores where the CPU has them: the consumer, another
// process, reads the bytes later, so the stores bypass this core's cache and
// skip reading the destination lines first (61 MB: 3.2 -> 2.75 ms). Tensors
// under 1 MiB are copied as usual: they may still be in the shared cache
// when the consumer reads them.
void stream_copy(uint8_t* dst, const void* src_ptr, uint64_t n) {
  if (n == 0) return;  // an empty tensor's pointer may be null, which memcpy may not get
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

}  // namespace

// Whether the process that created the queue (its consumer) lives; under the
// lock. Says who it was in `*error` when not.
bool ShmQueue::owner_alive(std::string* error) const {
  std::vector<int8_t> cache(kMaxProcs, -1);
  bool owner_alive = false;
  int32_t owner_pid = 0;
  for (int32_t i = 0; i < kMaxProcs; ++i) {
    if (header_->procs[i].roles & kOwner) {
      owner_pid = header_->procs[i].pid;
      owner_alive = alive(i, &cache);
    }
  }
  if (!owner_alive) {
    *error = "the process that created this channel (pid " + std::to_string(owner_pid) +
             "), its consumer, has exited";
  }
  return owner_alive;
}

namespace {

// Counts a producer among those waiting for room from its first failed try
// until it leaves take_block, whichever way; under the queue's lock. (A
// producer that dies while it waits stays counted: the consumer may then
// free bytes it keeps a little sooner than it needs to, nothing worse.)
class WaitingForRoom {
 public:
  explicit WaitingForRoom(uint64_t* count) : count_(count) {}
  ~WaitingForRoom() {
    if (counted_) *count_ -= 1;
  }
  WaitingForRoom(const WaitingForRoom&) = delete;
  WaitingForRoom& operator=(const WaitingForRoom&) = delete;
  void start() {
    if (!counted_) *count_ += 1;
    counted_ = true;
  }

 private:
  uint64_t* count_;
  bool counted_ = false;
};

}  // namespace

// Waits for a slot and a block of `bytes`, of which the first `touched` get
// written, reclaiming the blocks of dead processes while it waits; returns
// the block's offset (kWriting, counted in `pending`), or kNone with
// `*status` and `*error` set.
uint64_t ShmQueue::take_block(uint64_t bytes, uint64_t touched, int64_t timeout_ms,
                              ShmQueueStatus* status, std::string* error) {
  auto* h = header_;
  const int64_t start = now_us();
  Guard guard(h);
  register_self(kProducer);
  WaitingForRoom waiting(&h->waiting_for_room);  // released before the guard
  int64_t last_check = start;
  while (true) {
    int backing_error = 0;
    uint64_t offset = kNone;
    if (h->q_count + h->pending < h->capacity) offset = allocate(bytes, touched, &backing_error);
    if (offset != kNone) {
      h->pending += 1;
      return offset;
    }
    if (backing_error != 0) {
      *error = "cannot back a message of " + std::to_string(touched) +
               " bytes with shared memory (" + std::strerror(backing_error) +
               "): " + std::to_string(h->backed) + " of the channel's " +
               std::to_string(h->data_size) +
               " bytes have memory; the machine (or this process's memory cgroup) has no more";
      *status = ShmQueueStatus::kNoMemory;
      return kNone;
    }
    waiting.start();
    const int64_t now = now_us();
    if (now - last_check >= kSliceMs * 1000) {
      last_check = now;
      if (reclaim()) continue;
      if (!owner_alive(error)) {
        *status = ShmQueueStatus::kPeerGone;
        return kNone;
      }
    }
    const int64_t wait_ms = wait_slice_ms(timeout_ms, start, now);
    if (wait_ms < 0) {
      *status = ShmQueueStatus::kTimeout;
      return kNone;
    }
    guard.wait(&h->send_seq, load_seq(&h->send_seq), wait_ms);
  }
}

namespace {

// Where a message's entries lie in its block: the entries written there
// first, those that live elsewhere after them (never touched, so never
// backed: layout.h).
struct MessageLayout {
  uint64_t bytes = 0;    // the block's
  uint64_t touched = 0;  // what gets written: the block's [0, touched)
  uint64_t meta_bytes = 0;
  std::vector<uint64_t> places;  // each entry's offset in the block
};

MessageLayout message_layout(const std::vector<std::string>& keys,
                             const std::vector<at::Tensor>& templates,
                             const std::vector<bool>& elsewhere) {
  TORCH_CHECK_VALUE(elsewhere.empty() || elsewhere.size() == templates.size(), "got ",
                    elsewhere.size(), " 'elsewhere' flags for ", templates.size(), " tensors");
  MessageLayout layout;
  layout.bytes = static_cast<uint64_t>(ShmQueue::message_bytes(keys, templates));
  for (size_t i = 0; i < templates.size(); ++i)
    layout.meta_bytes += tensor_meta_bytes(keys[i], templates[i]);
  layout.places.resize(templates.size());
  uint64_t end = sizeof(BlockHeader) + align_up(layout.meta_bytes);
  for (const bool placing_elsewhere : {false, true}) {
    if (placing_elsewhere) layout.touched = end;
    for (size_t i = 0; i < templates.size(); ++i) {
      if ((!elsewhere.empty() && elsewhere[i]) != placing_elsewhere) continue;
      layout.places[i] = end;
      end += align_up(static_cast<uint64_t>(templates[i].numel()) * templates[i].element_size());
    }
  }
  return layout;
}

}  // namespace

std::shared_ptr<ShmReservation> ShmQueue::reserve(const std::vector<std::string>& keys,
                                                  const std::vector<at::Tensor>& templates,
                                                  const std::vector<bool>& elsewhere,
                                                  int64_t timeout_ms, ShmQueueStatus* status,
                                                  std::string* error) {
  const MessageLayout layout = message_layout(keys, templates, elsewhere);
  TORCH_CHECK_VALUE(layout.bytes <= header_->data_size, "a message of ", layout.bytes, " bytes (",
                    templates.size(), " tensors) does not fit in this channel's shm_size of ",
                    header_->data_size,
                    " bytes; create the channel with a larger shm_size (channel_size)");
  const uint64_t offset = take_block(layout.bytes, layout.touched, timeout_ms, status, error);
  if (offset == kNone) return nullptr;
  return lay_out(offset, keys, templates, layout.places, layout.meta_bytes);
}

int64_t ShmQueue::new_backing(const std::vector<std::string>& keys,
                              const std::vector<at::Tensor>& templates,
                              const std::vector<bool>& elsewhere) {
  const MessageLayout layout = message_layout(keys, templates, elsewhere);
  return static_cast<int64_t>(backing_for(layout.bytes, layout.touched));
}

// Writes the meta of a message's entries into its block (ours: kWriting) and
// hands out views of their places; a failure frees the block (the
// reservation's destructor).
std::shared_ptr<ShmReservation> ShmQueue::lay_out(uint64_t offset,
                                                 const std::vector<std::string>& keys,
                                                 const std::vector<at::Tensor>& templates,
                                                 const std::vector<uint64_t>& places,
                                                 uint64_t meta_bytes) {
  auto* block = reinterpret_cast<BlockHeader*>(data() + offset);
  auto reservation =
      std::shared_ptr<ShmReservation>(new ShmReservation(shared_from_this(), offset));
  reservation->views_.reserve(templates.size());
  uint8_t* meta = reinterpret_cast<uint8_t*>(block) + sizeof(BlockHeader);
  for (size_t i = 0; i < templates.size(); ++i) {
    const auto& t = templates[i];
    TensorMeta m{};
    m.data_offset = places[i];
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
    reservation->views_.push_back(at::from_blob(reinterpret_cast<uint8_t*>(block) + places[i],
                                                t.sizes(),
                                                at::TensorOptions().dtype(t.scalar_type())));
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

}  // namespace glt
