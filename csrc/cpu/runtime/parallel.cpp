// The worker pool behind run_on_workers: helper threads that spin a few
// microseconds for the next job, then sleep on a condition variable.
#include "cpu/runtime/parallel.h"

#include <c10/util/ParallelGuard.h>
#include <dlfcn.h>
#include <pthread.h>

#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <thread>
#include <vector>

#if defined(__x86_64__) || defined(_M_X64)
#include <immintrin.h>
#endif

namespace glt::cpu {
namespace {

// How long an idle thread spins before it sleeps: long enough to catch the
// next loop of the same hop (microseconds apart), short enough that a thread
// between hops leaves its core to whoever needs it (20 us: chosen by timing
// the sampler quiet and beside busy processes). GLT_WORKER_SPIN_US (read
// once) moves it, for machines whose sleeping threads wake slowly (a
// virtual machine's idle cores), where helpers spinning across a batch's
// hops may sample faster.
constexpr int64_t kDefaultSpinUs = 20;

std::chrono::microseconds spin_time() {
  static const std::chrono::microseconds spin = [] {
    const char* value = std::getenv("GLT_WORKER_SPIN_US");
    const long long parsed = value ? std::atoll(value) : -1;
    return std::chrono::microseconds(parsed >= 0 ? parsed : kDefaultSpinUs);
  }();
  return spin;
}
// Pauses between two reads of the clock while spinning.
constexpr int kPausesPerClockRead = 32;

inline void cpu_pause() {
#if defined(__x86_64__) || defined(_M_X64)
  _mm_pause();
#else
  std::this_thread::yield();
#endif
}

// Spins until done() or spin_time() has passed; returns done().
template <typename Done>
bool spin_until(Done&& done) {
  const auto deadline = std::chrono::steady_clock::now() + spin_time();
  while (true) {
    for (int i = 0; i < kPausesPerClockRead; ++i) {
      if (done()) return true;
      cpu_pause();
    }
    if (std::chrono::steady_clock::now() >= deadline) return done();
  }
}

// The job state, one word: its generation (bumped per job), whether helpers
// may still join, and how many have joined and not yet returned.
constexpr uint64_t kJoinedMask = (uint64_t{1} << 31) - 1;
constexpr uint64_t kOpen = uint64_t{1} << 31;
constexpr int kGenerationShift = 32;

inline uint64_t generation(uint64_t state) { return state >> kGenerationShift; }
inline uint64_t joined(uint64_t state) { return state & kJoinedMask; }

thread_local bool in_job = false;

// Marks this thread as running a job (ours) and ATen's parallel guard with it.
class JobGuard {
 public:
  JobGuard() : aten_(true), previous_(in_job) { in_job = true; }
  ~JobGuard() { in_job = previous_; }

 private:
  c10::ParallelGuard aten_;
  bool previous_;
};

class WorkerPool {
 public:
  // This process's pool: made on first use, and made anew in a child after
  // fork (the parent's helper threads do not exist there; the parent's pool is
  // left as it is, never freed).
  static WorkerPool& instance() {
    static std::once_flag at_fork;
    std::call_once(at_fork, [] { pthread_atfork(nullptr, nullptr, [] { current = nullptr; }); });
    WorkerPool* pool = current.load(std::memory_order_acquire);
    if (pool) return *pool;
    // No lock (a child forked while another thread held it would wait
    // forever): the first pool stored wins. Pools start their helpers on their
    // first job, so a losing one has none.
    auto* made = new WorkerPool();
    if (current.compare_exchange_strong(pool, made, std::memory_order_acq_rel)) return *made;
    delete made;
    return *pool;
  }

  // Runs the job on this thread and the helpers that join; false (and runs
  // nothing) when another thread's job holds the pool.
  bool try_run(int64_t helpers, const std::function<void(int64_t)>& job) {
    std::unique_lock<std::mutex> held(submit_, std::try_to_lock);
    if (!held.owns_lock()) return false;
    grow(helpers);
    job_ = &job;
    wanted_.store(helpers, std::memory_order_relaxed);
    const uint64_t next_generation = generation(state_.load(std::memory_order_relaxed)) + 1;
    state_.store((next_generation << kGenerationShift) | kOpen, std::memory_order_seq_cst);
    // Sleepers, read after the store: a helper that counted itself asleep
    // before it looks for the job again under sleep_lock_ is woken.
    const int64_t asleep = sleeping_.load(std::memory_order_seq_cst);
    if (asleep > 0) {
      // Waking every sleeper is one system call, each one apart a call each.
      std::lock_guard<std::mutex> guard(sleep_lock_);
      if (asleep <= helpers) {
        wake_helpers_.notify_all();
      } else {
        for (int64_t i = 0; i < helpers; ++i) wake_helpers_.notify_one();
      }
    }
    {
      JobGuard guard;
      job(0);
    }
    // Closed: no helper joins from here; wait for those that did.
    const uint64_t closed = state_.fetch_and(~kOpen, std::memory_order_acq_rel) & ~kOpen;
    if (joined(closed) > 0 &&
        !spin_until([&] { return joined(state_.load(std::memory_order_acquire)) == 0; })) {
      std::unique_lock<std::mutex> lock(sleep_lock_);
      caller_asleep_.store(true, std::memory_order_seq_cst);
      helpers_done_.wait(lock, [&] { return joined(state_.load(std::memory_order_seq_cst)) == 0; });
      caller_asleep_.store(false, std::memory_order_relaxed);
    }
    return true;
  }

 private:
  WorkerPool() = default;

  void grow(int64_t helpers) {
    while (static_cast<int64_t>(num_threads_) < helpers) {
      std::thread(&WorkerPool::helper_loop, this).detach();
      ++num_threads_;
    }
  }

  // Waits for a job of another generation than `seen`; returns its state.
  uint64_t wait_for_job(uint64_t seen) {
    uint64_t state = state_.load(std::memory_order_acquire);
    auto fresh = [&] {
      state = state_.load(std::memory_order_seq_cst);
      return generation(state) != seen;
    };
    if (spin_until(fresh)) return state;
    std::unique_lock<std::mutex> lock(sleep_lock_);
    sleeping_.fetch_add(1, std::memory_order_seq_cst);
    wake_helpers_.wait(lock, fresh);
    sleeping_.fetch_sub(1, std::memory_order_relaxed);
    return state;
  }

  void helper_loop() {
    uint64_t seen = generation(state_.load(std::memory_order_acquire));
    while (true) {
      uint64_t state = wait_for_job(seen);
      seen = generation(state);
      // Join as worker joined + 1 while the job is open and wants more.
      while ((state & kOpen) && generation(state) == seen &&
             static_cast<int64_t>(joined(state)) < wanted_.load(std::memory_order_relaxed)) {
        if (state_.compare_exchange_weak(state, state + 1, std::memory_order_acq_rel)) {
          {
            JobGuard guard;
            (*job_)(static_cast<int64_t>(joined(state)) + 1);
          }
          const uint64_t left = state_.fetch_sub(1, std::memory_order_seq_cst) - 1;
          if (joined(left) == 0 && !(left & kOpen) &&
              caller_asleep_.load(std::memory_order_seq_cst)) {
            std::lock_guard<std::mutex> guard(sleep_lock_);
            helpers_done_.notify_one();
          }
          break;
        }
      }
    }
  }

  static std::atomic<WorkerPool*> current;  // never freed: its helpers are detached

  std::mutex submit_;  // one job at a time
  std::atomic<uint64_t> state_{0};
  std::atomic<int64_t> wanted_{0};
  const std::function<void(int64_t)>* job_ = nullptr;
  size_t num_threads_ = 0;  // under submit_
  std::mutex sleep_lock_;
  std::condition_variable wake_helpers_, helpers_done_;
  std::atomic<int64_t> sleeping_{0};
  std::atomic<bool> caller_asleep_{false};
};

std::atomic<WorkerPool*> WorkerPool::current{nullptr};

// A process setting, as torch's thread count is.
std::atomic<int64_t> thread_cap{0};
// This thread's own cap (set_this_thread_kernel_threads; 0: none).
thread_local int64_t this_thread_cap = 0;

// The omp_set_num_threads of the OpenMP runtime torch runs on (its own copy
// of libgomp, which this extension does not link), or null where torch's
// CPU parallelism is not OpenMP. It sets the calling thread's count alone.
using SetOmpThreads = void (*)(int);
SetOmpThreads torch_omp_set_num_threads() {
  static const SetOmpThreads set = []() -> SetOmpThreads {
    Dl_info torch_cpu;
    if (!dladdr(reinterpret_cast<void*>(&at::get_num_threads), &torch_cpu)) return nullptr;
    void* library = dlopen(torch_cpu.dli_fname, RTLD_NOW | RTLD_NOLOAD);
    if (library == nullptr) return nullptr;
    // searched in libtorch_cpu and the libraries it loaded, libgomp among them
    return reinterpret_cast<SetOmpThreads>(dlsym(library, "omp_set_num_threads"));
  }();
  return set;
}

}  // namespace

int64_t kernel_threads() {
  int64_t threads = at::get_num_threads();
  const int64_t cap = thread_cap.load(std::memory_order_relaxed);
  if (cap > 0) threads = std::min(threads, cap);
  return this_thread_cap > 0 ? std::min(threads, this_thread_cap) : threads;
}

void set_this_thread_kernel_threads(int64_t threads) {
  TORCH_CHECK_VALUE(threads >= 0, "a thread's kernel threads must be >= 0 (0: as before), got ",
                    threads);
  // torch's count on this thread before the first call: what 0 gives back.
  // Reading it first also runs torch's set-up of a new thread, which would
  // otherwise undo the count set below at this thread's first ATen op.
  thread_local const int torch_threads = at::get_num_threads();
  this_thread_cap = threads;
  if (SetOmpThreads set = torch_omp_set_num_threads()) {
    set(threads > 0 ? static_cast<int>(threads) : torch_threads);
  }
}

void set_kernel_thread_cap(int64_t cap) {
  TORCH_CHECK_VALUE(cap >= 0, "the kernel thread cap must be >= 0 (0: none), got ", cap);
  thread_cap.store(cap, std::memory_order_relaxed);
}

int64_t kernel_thread_cap() { return thread_cap.load(std::memory_order_relaxed); }

bool in_parallel_region() { return in_job || at::in_parallel_region(); }

void run_on_workers(int64_t helpers, const std::function<void(int64_t worker)>& job) {
  if (helpers <= 0 || in_parallel_region() || !WorkerPool::instance().try_run(helpers, job)) {
    JobGuard guard;
    job(0);
  }
}

}  // namespace glt::cpu
