// What a kernel body needs to compile both as CUDA device code and as plain
// C++: the host/device qualifier, atomics, 64-bit multiply-high, and the
// Philox4x32-10 counter-based random stream.
//
// Every CUDA kernel of graphlearn_torch is a per-thread body (a
// GLT_HOST_DEVICE function or lambda) run over thread indices by a backend:
// the CUDA backend (csrc/cuda/backend.cuh) launches it on the GPU, the host
// backend (csrc/testing/host_backend.h) runs it over every index with OpenMP
// threads, so the tests check the very code the GPU runs on a machine
// without one. Host atomics (GCC's __atomic builtins) stand in for CUDA's.
#pragma once

#include <cstdint>

// GLT_UNROLL: unroll the next loop (a loop of a constant trip count), in
// nvcc's words or in GCC's.
#if defined(__CUDACC__)
#define GLT_HOST_DEVICE __host__ __device__
#define GLT_INLINE __forceinline__
#define GLT_UNROLL _Pragma("unroll")
#else
#define GLT_HOST_DEVICE
#define GLT_INLINE inline
#define GLT_UNROLL _Pragma("GCC unroll 8")
#endif

namespace glt::kernels::device {

// -- atomics on 64-bit integers ----------------------------------------------

// Stores `desired` at `addr` if it holds `expected`; returns what it held.
GLT_HOST_DEVICE GLT_INLINE int64_t atomic_cas(int64_t* addr, int64_t expected, int64_t desired) {
#if defined(__CUDA_ARCH__)
  return static_cast<int64_t>(atomicCAS(reinterpret_cast<unsigned long long*>(addr),
                                        static_cast<unsigned long long>(expected),
                                        static_cast<unsigned long long>(desired)));
#else
  __atomic_compare_exchange_n(addr, &expected, desired, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
  return expected;  // on failure, the value found
#endif
}

// *addr = max(*addr, value), atomically; returns the old value.
GLT_HOST_DEVICE GLT_INLINE int64_t atomic_max(int64_t* addr, int64_t value) {
#if defined(__CUDA_ARCH__)
  return static_cast<int64_t>(
      atomicMax(reinterpret_cast<long long*>(addr), static_cast<long long>(value)));
#else
  int64_t old = __atomic_load_n(addr, __ATOMIC_SEQ_CST);
  while (old < value && !__atomic_compare_exchange_n(addr, &old, value, true, __ATOMIC_SEQ_CST,
                                                     __ATOMIC_SEQ_CST)) {
  }
  return old;
#endif
}

// *addr = min(*addr, value), atomically; returns the old value.
GLT_HOST_DEVICE GLT_INLINE int64_t atomic_min(int64_t* addr, int64_t value) {
#if defined(__CUDA_ARCH__)
  return static_cast<int64_t>(
      atomicMin(reinterpret_cast<long long*>(addr), static_cast<long long>(value)));
#else
  int64_t old = __atomic_load_n(addr, __ATOMIC_SEQ_CST);
  while (old > value && !__atomic_compare_exchange_n(addr, &old, value, true, __ATOMIC_SEQ_CST,
                                                     __ATOMIC_SEQ_CST)) {
  }
  return old;
#endif
}

// *addr += value, atomically; returns the old value.
GLT_HOST_DEVICE GLT_INLINE int64_t atomic_add(int64_t* addr, int64_t value) {
#if defined(__CUDA_ARCH__)
  return static_cast<int64_t>(atomicAdd(reinterpret_cast<unsigned long long*>(addr),
                                        static_cast<unsigned long long>(value)));
#else
  return __atomic_fetch_add(addr, value, __ATOMIC_SEQ_CST);
#endif
}

// A plain load that another thread's atomic store may have changed.
GLT_HOST_DEVICE GLT_INLINE int64_t atomic_load(const int64_t* addr) {
#if defined(__CUDA_ARCH__)
  return *reinterpret_cast<const volatile int64_t*>(addr);
#else
  return __atomic_load_n(addr, __ATOMIC_SEQ_CST);
#endif
}

// A plain store that another thread's atomic_load may read at once.
GLT_HOST_DEVICE GLT_INLINE void atomic_store(int64_t* addr, int64_t value) {
#if defined(__CUDA_ARCH__)
  *reinterpret_cast<volatile int64_t*>(addr) = value;
#else
  __atomic_store_n(addr, value, __ATOMIC_SEQ_CST);
#endif
}

// -- arithmetic ---------------------------------------------------------------

// The high 64 bits of a * b.
GLT_HOST_DEVICE GLT_INLINE uint64_t mulhi64(uint64_t a, uint64_t b) {
#if defined(__CUDA_ARCH__)
  return __umul64hi(a, b);
#else
  return static_cast<uint64_t>((static_cast<unsigned __int128>(a) * b) >> 64);
#endif
}

GLT_HOST_DEVICE GLT_INLINE uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

// -- Philox4x32-10 --------------------------------------------------------------

// A counter-based random stream (Salmon et al., "Parallel random numbers: as
// easy as 1, 2, 3", SC 2011): the n-th number of stream s under key k is a
// pure function of (k, s, n), so every thread draws its own stream with no
// state shared, and a batch is the same whatever the launch shape.
class Philox {
 public:
  // Stream `stream` under key `seed`, from block `counter` on.
  GLT_HOST_DEVICE Philox(uint64_t seed, uint64_t stream, uint64_t counter = 0)
      : key0_(static_cast<uint32_t>(seed)),
        key1_(static_cast<uint32_t>(seed >> 32)),
        stream_(stream),
        counter_(counter),
        have_(0) {}

  // The next 64 random bits.
  GLT_HOST_DEVICE uint64_t next64() {
    if (have_ == 0) {
      block();
      have_ = 2;
    }
    --have_;
    return have_ == 1 ? (static_cast<uint64_t>(out_[0]) << 32 | out_[1])
                      : (static_cast<uint64_t>(out_[2]) << 32 | out_[3]);
  }

  // Uniform integer in [0, n), n > 0 (Lemire's multiply-shift).
  GLT_HOST_DEVICE uint64_t uniform(uint64_t n) { return mulhi64(next64(), n); }

  // Uniform double in (0, 1].
  GLT_HOST_DEVICE double uniform01() {
    return (static_cast<double>(next64() >> 11) + 1.0) * (1.0 / 9007199254740992.0);
  }

 private:
  GLT_HOST_DEVICE void block() {
    uint32_t c0 = static_cast<uint32_t>(counter_), c1 = static_cast<uint32_t>(counter_ >> 32);
    uint32_t c2 = static_cast<uint32_t>(stream_), c3 = static_cast<uint32_t>(stream_ >> 32);
    uint32_t k0 = key0_, k1 = key1_;
    for (int round = 0; round < 10; ++round) {
      const uint64_t p0 = static_cast<uint64_t>(0xD2511F53u) * c0;
      const uint64_t p1 = static_cast<uint64_t>(0xCD9E8D57u) * c2;
      const uint32_t hi0 = static_cast<uint32_t>(p0 >> 32), lo0 = static_cast<uint32_t>(p0);
      const uint32_t hi1 = static_cast<uint32_t>(p1 >> 32), lo1 = static_cast<uint32_t>(p1);
      c0 = hi1 ^ c1 ^ k0;
      c1 = lo1;
      c2 = hi0 ^ c3 ^ k1;
      c3 = lo0;
      k0 += 0x9E3779B9u;
      k1 += 0xBB67AE85u;
    }
    out_[0] = c0;
    out_[1] = c1;
    out_[2] = c2;
    out_[3] = c3;
    ++counter_;
  }

  uint32_t key0_, key1_;
  uint64_t stream_;
  uint64_t counter_;
  uint32_t out_[4];
  int have_;
};

}  // namespace glt::kernels::device
