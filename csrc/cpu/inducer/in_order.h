// Chunks produced in any order by every thread and consumed in order by one
// thread at a time, overlapping the two: a hop's draws (parallel) with the
// inducer's insert of their neighbors (sequential, in order).
#pragma once

#include <algorithm>
#include <atomic>
#include <exception>
#include <memory>
#include <mutex>

#include "cpu/runtime/parallel.h"

namespace glt::cpu {

// Runs produce(c, worker) once for each chunk c in [0, num_chunks) and
// consume(c) for each, in the order c = 0, 1, ...: consume(c) after
// produce(c) has returned and after consume(c - 1), never two at once.
// Up to `threads` workers (run_on_workers), no more than there are chunks,
// produce the chunks; `worker` (in [0, threads)) indexes per-thread
// scratch. The calling thread (worker 0) consumes the chunks that are ready
// between the chunks it produces, so that what consume writes at random
// (the inducer's id maps) stays in one core's caches: consumers passed from
// thread to thread cost 1.38x the batches/s at 2 threads (products-size
// batches). No worker waits for
// another: a helper that finds nothing left to produce leaves; worker 0,
// once nothing is left to produce, consumes what is ready and leaves the
// rest to the helpers still producing, the last of which consumes it.
// Unless `stop_when_produced`: then consuming stops once every chunk is
// produced, leaving a suffix of chunks unconsumed. Returns how many chunks
// were consumed (a prefix). The first exception stops all workers and is
// rethrown.
template <typename Produce, typename Consume>
int64_t produce_consume_in_order(int64_t num_chunks, int64_t threads, Produce&& produce,
                                 Consume&& consume, bool stop_when_produced = false) {
  if (num_chunks == 0) return 0;
  std::unique_ptr<std::atomic<bool>[]> produced(new std::atomic<bool>[num_chunks]);
  for (int64_t c = 0; c < num_chunks; ++c) produced[c].store(false, std::memory_order_relaxed);
  std::atomic<int64_t> next_to_produce{0}, next_to_consume{0}, num_produced{0};
  std::atomic<bool> consuming{false}, failed{false}, caller_left{false};
  std::exception_ptr error;
  std::mutex error_lock;

  // Consumes the ready chunks in order unless another worker is. Sequentially
  // consistent: a producer stores produced[c] and then tries to take the
  // consumer's role; the consumer gives it up and then looks at produced[c]
  // again; one of the two sees the other, so chunk c is consumed.
  auto consume_ready = [&] {
    while (true) {
      int64_t c = next_to_consume.load();
      if (c == num_chunks || !produced[c].load() ||
          (stop_when_produced && num_produced.load() == num_chunks) || consuming.exchange(true)) {
        return;
      }
      c = next_to_consume.load(std::memory_order_relaxed);
      while (c < num_chunks && produced[c].load(std::memory_order_acquire)) {
        if (stop_when_produced && num_produced.load() == num_chunks) break;
        consume(c);
        next_to_consume.store(++c, std::memory_order_release);
      }
      consuming.store(false);
    }
  };
  // A helper woken for no chunk costs a hop of one chunk ~30 us at 2 threads.
  run_on_workers(std::min(threads, num_chunks) - 1, [&](int64_t worker) {
    try {
      while (!failed.load(std::memory_order_relaxed)) {
        if (worker == 0 || caller_left.load()) consume_ready();
        const int64_t p = next_to_produce.fetch_add(1, std::memory_order_relaxed);
        if (p >= num_chunks) break;
        produce(p, worker);
        produced[p].store(true);
        num_produced.fetch_add(1);
      }
      if (worker == 0 && !failed.load()) {
        // Sequentially consistent with the helpers' produced[c] stores: a
        // helper that produces a chunk after this sees caller_left and
        // consumes it, or this consume_ready sees the chunk.
        caller_left.store(true);
        consume_ready();
      }
    } catch (...) {
      std::lock_guard<std::mutex> guard(error_lock);
      if (!error) error = std::current_exception();
      failed.store(true);
    }
  });
  if (error) std::rethrow_exception(error);
  return next_to_consume.load();
}

}  // namespace glt::cpu
