// Chunks produced in any order by every thread and consumed in order by one
// thread at a time, overlapping the two: a hop's draws (parallel) with the
// inducer's insert of their neighbors (sequential, in order).
#pragma once

#include <ATen/Parallel.h>

#include <atomic>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>

#if defined(__x86_64__) || defined(_M_X64)
#include <immintrin.h>
#endif

namespace glt {

// A thread waiting for another's chunk: it pauses a while, then yields its
// core (to the thread it waits for, where threads outnumber cores).
class Backoff {
 public:
  void wait() {
    if (++spins_ < kSpinsBeforeYield) {
#if defined(__x86_64__) || defined(_M_X64)
      _mm_pause();
#endif
      return;
    }
    spins_ = 0;
    std::this_thread::yield();
  }
  void reset() { spins_ = 0; }

 private:
  static constexpr int kSpinsBeforeYield = 64;
  int spins_ = 0;
};

// Runs produce(c, worker) once for each chunk c in [0, num_chunks) and
// consume(c) once for each, in the order c = 0, 1, ...: consume(c) after
// produce(c) has returned and after consume(c - 1), never two at once.
// Every thread of at::parallel_for works: it consumes the chunks that are
// ready when no thread is consuming, and produces the next chunk
// otherwise. `worker` (in [0, threads)) indexes per-thread scratch. The
// first exception stops all threads and is rethrown.
template <typename Produce, typename Consume>
void produce_consume_in_order(int64_t num_chunks, int64_t threads, Produce&& produce,
                              Consume&& consume) {
  if (num_chunks == 0) return;
  std::unique_ptr<std::atomic<bool>[]> produced(new std::atomic<bool>[num_chunks]);
  for (int64_t c = 0; c < num_chunks; ++c) produced[c].store(false, std::memory_order_relaxed);
  std::atomic<int64_t> next_to_produce{0}, next_to_consume{0};
  std::atomic<bool> consuming{false}, failed{false};
  std::exception_ptr error;
  std::mutex error_lock;

  auto work = [&](int64_t worker) {
    Backoff backoff;
    try {
      while (!failed.load(std::memory_order_relaxed)) {
        int64_t c = next_to_consume.load(std::memory_order_acquire);
        if (c == num_chunks) return;
        if (produced[c].load(std::memory_order_acquire) &&
            !consuming.exchange(true, std::memory_order_acquire)) {
          // The consumer: every chunk that is ready, in order.
          c = next_to_consume.load(std::memory_order_relaxed);
          while (c < num_chunks && produced[c].load(std::memory_order_acquire)) {
            consume(c);
            next_to_consume.store(++c, std::memory_order_release);
          }
          consuming.store(false, std::memory_order_release);
          backoff.reset();
          continue;
        }
        const int64_t p = next_to_produce.fetch_add(1, std::memory_order_relaxed);
        if (p < num_chunks) {
          produce(p, worker);
          produced[p].store(true, std::memory_order_release);
          backoff.reset();
        } else {
          backoff.wait();  // all taken: the last chunks are being produced or consumed
        }
      }
    } catch (...) {
      std::lock_guard<std::mutex> guard(error_lock);
      if (!error) error = std::current_exception();
      failed.store(true);
    }
  };
  at::parallel_for(0, threads, 1, [&](int64_t begin, int64_t end) {
    // One worker per thread; a caller already inside a parallel region gets
    // one call with the whole range, and works alone.
    work(begin);
    (void)end;
  });
  if (error) std::rethrow_exception(error);
}

}  // namespace glt
