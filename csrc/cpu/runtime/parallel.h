// The CPU kernels' parallel loops, made to hold up beside other busy
// processes.
//
// at::parallel_for (OpenMP) gives each thread one fixed share of a range, and
// libgomp's threads spin at the end of a region, and between regions, until
// the last share is done. Beside a busy process one of our threads is often
// descheduled: its share then holds up the region, and the spinning threads
// take the cores it needs. Profiled beside one busy process, half of the
// sampler's CPU time went to libgomp's spin loops and it kept a quarter of
// its quiet speed.
//
// Here a range is cut into more chunks than threads, and whichever thread is
// running claims the next chunk: a descheduled thread holds up no more than
// the chunk it is in, and none at all if it wakes after the work is gone. An
// idle thread spins for a few microseconds (long enough to catch the next
// region of the same hop), then sleeps.
#pragma once

#include <ATen/Parallel.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>

namespace glt::cpu {

// Runs job(worker) on the calling thread as worker 0, and on up to `helpers`
// threads of this process's worker pool as workers 1, 2, ...; a helper joins
// only if it wakes while worker 0 is still in job, and the call returns once
// every worker that joined has returned. `job` must therefore claim its work
// from state the workers share, so that worker 0 alone finishes it when no
// helper joins. Worker 0 works alone inside another parallel region (ours or
// ATen's) and while another thread's call holds the pool. Jobs run with
// c10::ParallelGuard set, which torch's own thread pool reads as a parallel
// region (ATen ops inside them then run on their thread alone); torch's
// OpenMP builds do not read it, so a job calls no ATen op that loops in
// parallel. `job` must not throw.
void run_on_workers(int64_t helpers, const std::function<void(int64_t worker)>& job);

// Whether this thread is inside run_on_workers' job (ours) or ATen's
// parallel region: a parallel loop here runs on this thread alone.
bool in_parallel_region();

// The threads our CPU kernels use: torch's count (at::get_num_threads()),
// at most the cap set for this process (by the user, or by the distributed
// start-up for processes that share a host; 0: no cap).
int64_t kernel_threads();
void set_kernel_thread_cap(int64_t cap);
int64_t kernel_thread_cap();

// Runs this thread's CPU kernels, ours and ATen's, on at most `threads`
// threads from now on (0: as many as before the first call): a thread that
// samples one of several batches at once runs them on itself alone, so that
// the batches, not the threads of one batch, share the cores. ATen's are
// held through this thread's OpenMP thread count, where torch runs on OpenMP.
void set_this_thread_kernel_threads(int64_t threads);

// Chunks per thread of a parallel_for: enough that a thread the kernel
// deschedules leaves the rest to the others.
constexpr int64_t kChunksPerThread = 8;

// Calls f(b, e, worker) over sub-ranges [b, e) that partition [begin, end),
// each at least `grain` long (but the last), on up to kernel_threads()
// threads; `worker` (in [0, threads)) indexes per-thread scratch, and no two
// calls with one worker overlap. A range of no more than `grain` runs on this
// thread alone. The first exception stops the claiming and is rethrown.
template <typename F>
void parallel_for_workers(int64_t begin, int64_t end, int64_t grain, const F& f) {
  if (begin >= end) return;
  const int64_t n = end - begin;
  const int64_t threads = kernel_threads();
  grain = std::max<int64_t>(grain, 1);
  if (n <= grain || threads <= 1 || in_parallel_region()) {
    f(begin, end, int64_t{0});
    return;
  }
  const int64_t chunk = std::max(grain, (n + threads * kChunksPerThread - 1) /
                                            (threads * kChunksPerThread));
  const int64_t num_chunks = (n + chunk - 1) / chunk;
  std::atomic<int64_t> next{0};
  std::atomic<bool> failed{false};
  std::exception_ptr error;
  std::mutex error_lock;
  run_on_workers(std::min(threads, num_chunks) - 1, [&](int64_t worker) {
    while (!failed.load(std::memory_order_relaxed)) {
      const int64_t c = next.fetch_add(1, std::memory_order_relaxed);
      if (c >= num_chunks) return;
      try {
        f(begin + c * chunk, std::min(end, begin + (c + 1) * chunk), worker);
      } catch (...) {
        std::lock_guard<std::mutex> guard(error_lock);
        if (!error) error = std::current_exception();
        failed.store(true);
      }
    }
  });
  if (error) std::rethrow_exception(error);
}

// parallel_for_workers for bodies that need no worker index: f(b, e), as
// at::parallel_for calls it.
template <typename F>
void parallel_for(int64_t begin, int64_t end, int64_t grain, const F& f) {
  parallel_for_workers(begin, end, grain,
                       [&](int64_t b, int64_t e, int64_t /*worker*/) { f(b, e); });
}

}  // namespace glt::cpu
