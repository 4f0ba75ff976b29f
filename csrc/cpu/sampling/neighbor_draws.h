// One hop of neighbor sampling over a CSR (or CSC) topology on the CPU:
// uniform with or without replacement, or weighted by edge weight. Each seed
// draws from its own random stream, so a hop does not depend on the number
// of threads, nor on how its seeds are split into chunks.
//
// A hop is planned once (every seed's first edge and count, and where its
// neighbors go), then drawn chunk by chunk: sample_neighbors draws the
// chunks in parallel; Inducer::sample_induce_next also relabels each chunk's
// neighbors as soon as it is drawn.
#pragma once

#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <numeric>
#include <type_traits>
#include <utility>
#include <vector>

#include "common.h"
#include "kernels/sample_neighbors.h"
#include "cpu/runtime/parallel.h"

namespace glt::cpu {
namespace draws {

// Floyd's algorithm beats a partial shuffle up to this many draws.
constexpr int64_t kFloydMax = 32;
// Seeds per chunk of a hop's draws.
constexpr int64_t kChunkSeeds = 256;
// How far ahead the passes below prefetch: enough loads in flight to hide a
// cache miss behind the work on the entries before it.
constexpr int64_t kPrefetchAhead = 16;
// The neighbor pass, which does little else between its random reads, keeps
// more in flight (measured: 32 over 16, +7% batches/s at 1 thread, +4% at 2;
// 64 no more), edge ids too (with them: +19% at 1 thread, +18% at 2).
constexpr int64_t kNeighborPrefetchAhead = 32;
// Seeds per block of a hop's plan (each block's count is summed as it is
// planned), and the blocks below which its offsets are written by one thread.
constexpr int64_t kPlanBlock = 1024;
constexpr int64_t kOffsetBlocksGrain = 16;

// A thread's scratch for the draws of one chunk.
struct Scratch {
  std::vector<int64_t> chosen = std::vector<int64_t>(kFloydMax);
  std::vector<std::pair<double, int64_t>> keyed;
  std::vector<double> cumsum;
};

// Draws the edge positions of one seed (its edges are [begin, begin + deg))
// and hands each to `emit`.
template <typename index_t, typename Emit>
void sample_one(const kernels::CsrView<index_t>& g, int64_t begin, int64_t deg, int64_t k,
                int64_t count, bool replace, Rng& rng, Scratch& scratch, Emit&& emit) {
  const int64_t end = begin + deg;
  if (count == 0) return;
  if (k < 0 || (!g.weights && !replace && count == deg)) {
    for (int64_t p = begin; p < end; ++p) emit(p);
    return;
  }
  if (g.weights == nullptr) {
    if (replace) {
      for (int64_t j = 0; j < count; ++j) emit(begin + rng.uniform(deg));
    } else if (count <= kFloydMax) {
      int64_t* chosen = scratch.chosen.data();
      for (int64_t j = deg - count, m = 0; j < deg; ++j, ++m) {
        const int64_t t = static_cast<int64_t>(rng.uniform(j + 1));
        bool seen = false;
        for (int64_t q = 0; q < m; ++q) seen |= chosen[q] == t;
        chosen[m] = seen ? j : t;
        emit(begin + chosen[m]);
      }
    } else {
      std::vector<int64_t>& perm = scratch.chosen;
      perm.resize(std::max<int64_t>(deg, kFloydMax));
      std::iota(perm.begin(), perm.begin() + deg, 0);
      for (int64_t j = 0; j < count; ++j) {
        const int64_t r = j + static_cast<int64_t>(rng.uniform(deg - j));
        std::swap(perm[j], perm[r]);
        emit(begin + perm[j]);
      }
    }
    return;
  }
  if (replace) {
    std::vector<double>& cumsum = scratch.cumsum;
    cumsum.resize(deg);
    double total = 0.0;
    for (int64_t p = 0; p < deg; ++p) {
      total += std::max(g.weights[begin + p], 0.f);
      cumsum[p] = total;
    }
    for (int64_t j = 0; j < count; ++j) {
      const double u = rng.uniform01() * total;
      const int64_t p = std::lower_bound(cumsum.begin(), cumsum.begin() + deg, u) - cumsum.begin();
      emit(begin + std::min(p, deg - 1));
    }
    return;
  }
  // Efraimidis-Spirakis: the `count` largest log(u) / w keys.
  auto& keyed = scratch.keyed;
  keyed.clear();
  for (int64_t p = begin; p < end; ++p) {
    const float w = g.weights[p];
    if (w > 0.f) keyed.emplace_back(std::log(rng.uniform01()) / w, p);
  }
  if (count < static_cast<int64_t>(keyed.size())) {
    std::nth_element(keyed.begin(), keyed.begin() + count, keyed.end(),
                     [](const auto& a, const auto& b) { return a.first > b.first; });
  }
  for (int64_t j = 0; j < count; ++j) emit(keyed[j].second);
}

// A seed's candidate edges in temporal sampling: the entries of its row of
// time <= the seed's (kernels::temporal_window), and the lines that finds
// them read, to prefetch ahead of it.
template <typename index_t, typename stamp_t>
struct TemporalWindow {
  const index_t* indptr;
  const stamp_t* edge_time;     // each entry's time, each row sorted by it
  const stamp_t* row_max_time;  // each row's last time, or null
  const stamp_t* seed_time;     // each seed's time
  int64_t k;
  bool last;

  void operator()(int64_t i, int64_t s, int64_t* begin, int64_t* end) const {
    kernels::temporal_window(indptr, edge_time, row_max_time, s, seed_time[i], k, last, begin,
                             end);
  }
  // What seed i (row s) reads first beside its row's bounds: its row's last
  // time, where rows have one apart (it needs no bound to find).
  void prefetch_first(int64_t s) const {
    if (row_max_time) __builtin_prefetch(&row_max_time[s]);
  }
  // What the search then reads: the row's last entry, unless the row's
  // time is apart, and its middle (the first probe), unless seed i takes
  // the whole row. indptr[s] (and the row's time) should be cached already.
  void prefetch(int64_t i, int64_t s) const {
    const int64_t begin = indptr[s], end = indptr[s + 1];
    if (begin == end) return;
    if (!row_max_time) {
      __builtin_prefetch(&edge_time[end - 1]);
    } else if (row_max_time[s] <= seed_time[i]) {
      return;
    }
    __builtin_prefetch(&edge_time[begin + (end - begin) / 2]);
  }
};

// One hop's draws: up to `k` neighbors (-1: all) of each of `num_seeds`
// seeds (rows of `g`, in range). Planning takes a parallel pass over the
// seeds (their first edge and count) and allocates the outputs; each chunk
// is then drawn in two passes over independent entries, so that the CPU
// keeps many cache misses in flight: the edge positions each seed draws
// (random numbers only, written where its neighbors go), then the neighbors
// (and edge ids) at those positions.
//
// The seeds may also be spread over the partitions of one host (the
// partitioned constructor): seed i is a row of views[part[i]] and draws from
// the stream of its rank among that partition's seeds under
// rng_seeds[part[i]]. That gives, in seed order, the draws of each
// partition's seeds sampled apart.
template <typename index_t>
class HopDraws {
 public:
  // Seeds of one topology: seed i draws from stream i under `rng_seed`.
  HopDraws(const kernels::CsrView<index_t>& g, const int64_t* seeds, int64_t num_seeds, int64_t k,
           bool replace, int64_t rng_seed)
      : HopDraws({g}, nullptr, nullptr, num_seeds, k, replace, {rng_seed}) {
    plan(seeds, WholeRow{});
  }

  // Seeds of one topology, each drawn among the candidate edges
  // `window(i, seed, &begin, &end)` gives it (a temporal window).
  template <typename Window>
  HopDraws(const kernels::CsrView<index_t>& g, const int64_t* seeds, int64_t num_seeds, int64_t k,
           bool replace, int64_t rng_seed, const Window& window)
      : HopDraws({g}, nullptr, nullptr, num_seeds, k, replace, {rng_seed}) {
    plan(seeds, window);
  }

  // Seeds of several partitions: seed i is a row of views[part[i]] and
  // draws from stream stream[i] (its rank among that partition's seeds)
  // under rng_seeds[part[i]]. The caller has checked that every part[i]
  // names a view with a topology and every seed is a row of it; edge ids
  // (weights) are in every such view or in none.
  HopDraws(std::vector<kernels::CsrView<index_t>> views, const int32_t* part, const int64_t* stream,
           const int64_t* seeds, int64_t num_seeds, int64_t k, bool replace,
           std::vector<int64_t> rng_seeds)
      : HopDraws(std::move(views), part, stream, num_seeds, k, replace, std::move(rng_seeds)) {
    plan(seeds, WholeRow{});
  }

  int64_t total() const { return offsets_[num_seeds_]; }
  // Seed i's neighbors are [offsets()[i], offsets()[i + 1]) of the outputs.
  const int64_t* offsets() const { return offsets_.get(); }
  int64_t num_chunks() const { return (num_seeds_ + kChunkSeeds - 1) / kChunkSeeds; }
  int64_t chunk_begin(int64_t chunk) const { return chunk * kChunkSeeds; }
  int64_t chunk_end(int64_t chunk) const { return std::min(num_seeds_, (chunk + 1) * kChunkSeeds); }

  // Draws every chunk, chunks in parallel.
  void draw_all() {
    glt::cpu::parallel_for(0, num_chunks(), 1, [&](int64_t first, int64_t last) {
      Scratch scratch;
      for (int64_t c = first; c < last; ++c) draw(c, scratch);
    });
  }

  // Draws the neighbors of the seeds of one chunk.
  void draw(int64_t chunk, Scratch& scratch) {
    if (part_) {
      draw_chunk<true>(chunk, scratch);
    } else {
      draw_chunk<false>(chunk, scratch);
    }
  }

  at::Tensor nbrs;    // [total()] neighbor ids
  at::Tensor counts;  // [num_seeds] neighbors per seed
  at::Tensor eids;    // [total()] edge ids, or empty without them

 private:
  const kernels::CsrView<index_t>& view(int64_t i) const {
    return part_ ? views_[part_[i]] : views_[0];
  }

  // A seed's candidate edges: its whole row.
  struct WholeRow {
    void operator()(int64_t, int64_t, int64_t*, int64_t*) const {}
  };

  HopDraws(std::vector<kernels::CsrView<index_t>> views, const int32_t* part, const int64_t* stream,
           int64_t num_seeds, int64_t k, bool replace, std::vector<int64_t> rng_seeds)
      : views_(std::move(views)),
        part_(part),
        stream_(stream),
        num_seeds_(num_seeds),
        k_(k),
        replace_(replace),
        rng_seeds_(std::move(rng_seeds)),
        with_edge_(false),
        first_(new int64_t[num_seeds]),
        degree_(new int64_t[num_seeds]),
        offsets_(new int64_t[num_seeds + 1]) {
    offsets_[0] = 0;
    for (const auto& g : views_) with_edge_ |= g.edge_ids != nullptr;
  }

  // Plans the hop: every seed's candidate edges (its row, or its window)
  // and count, and the outputs' room. Raises a ValueError, naming the row,
  // where a seed is not a row or its row lies outside indices (the seeds'
  // range is checked here, in parallel, not before). The seeds are planned in blocks
  // of kPlanBlock, each block's count summed as it is planned, so that the
  // offsets are written in parallel too (from the blocks' prefix sums).
  template <typename Window>
  void plan(const int64_t* seeds, const Window& window) {
    counts = at::empty({num_seeds_}, at::kLong);
    int64_t* cnt = counts.data_ptr<int64_t>();
    const int64_t num_blocks = (num_seeds_ + kPlanBlock - 1) / kPlanBlock;
    std::vector<int64_t> block_offsets(num_blocks + 1, 0);
    FirstBad bad_seed, bad_row;
    glt::cpu::parallel_for(0, num_blocks, 1, [&](int64_t first_block, int64_t last_block) {
      const int64_t end = std::min(num_seeds_, last_block * kPlanBlock);
      int64_t i = first_block * kPlanBlock;
      for (int64_t b = first_block; b < last_block; ++b) {
        int64_t block_total = 0;
        for (const int64_t block_end = std::min(end, i + kPlanBlock); i < block_end; ++i) {
          plan_seed(seeds, i, end, window, bad_seed, bad_row, cnt);
          block_total += cnt[i];
        }
        block_offsets[b + 1] = block_total;
      }
    });
    if (bad_seed.any()) {
      raise_ids_outside(seeds, num_seeds_, view(bad_seed.position()).num_rows, "seeds");
    }
    if (bad_row.any()) {
      const int64_t i = bad_row.position();
      raise_bad_row(view(i).indptr, seeds[i], view(i).num_entries);
    }
    for (int64_t b = 0; b < num_blocks; ++b) block_offsets[b + 1] += block_offsets[b];
    glt::cpu::parallel_for(0, num_blocks, kOffsetBlocksGrain, [&](int64_t first, int64_t last) {
      for (int64_t b = first; b < last; ++b) {
        int64_t offset = block_offsets[b];
        for (int64_t i = b * kPlanBlock, e = std::min(num_seeds_, i + kPlanBlock); i < e; ++i) {
          offsets_[i] = offset;
          offset += cnt[i];
        }
      }
    });
    offsets_[num_seeds_] = block_offsets[num_blocks];
    nbrs = at::empty({total()}, at::kLong);
    eids = at::empty({with_edge_ ? total() : 0}, at::kLong);
  }

  // plan()'s work for seed i (of a loop up to `end`, which prefetches ahead):
  // its first candidate edge, their number and its count (cnt[i]); notes i
  // where the seed is not a row, or its row lies outside indices.
  template <typename Window>
  void plan_seed(const int64_t* seeds, int64_t i, int64_t end, const Window& window,
                 FirstBad& bad_seed, FirstBad& bad_row, int64_t* cnt) {
    if (i + kPrefetchAhead < end)
      __builtin_prefetch(&view(i + kPrefetchAhead).indptr[seeds[i + kPrefetchAhead]]);
    const auto& g = view(i);
    if (static_cast<uint64_t>(seeds[i]) >= static_cast<uint64_t>(g.num_rows)) {
      bad_seed.note(i);
      first_[i] = degree_[i] = cnt[i] = 0;
      return;
    }
    if constexpr (!std::is_same_v<Window, WholeRow>) {
      if (i + kPrefetchAhead < end) window.prefetch_first(seeds[i + kPrefetchAhead]);
      // Its row's bounds (and time) were prefetched half the distance ago.
      if (i + kPrefetchAhead / 2 < end)
        window.prefetch(i + kPrefetchAhead / 2, seeds[i + kPrefetchAhead / 2]);
    }
    int64_t first = g.indptr[seeds[i]], last = g.indptr[seeds[i] + 1];
    if (!row_in_bounds(first, last, g.num_entries)) {
      bad_row.note(i);
      first = last = 0;
    } else if constexpr (!std::is_same_v<Window, WholeRow>) {
      window(i, seeds[i], &first, &last);
    }
    first_[i] = first;
    degree_[i] = last - first;
    cnt[i] = kernels::sample_count(g, first, last, k_, replace_);
  }

  // draw() for one topology, or for several (kPartitioned): the first pass
  // writes where each drawn edge is (its position; with several topologies,
  // the address of its neighbor and of its edge id), the second the
  // neighbors (and edge ids) found there.
  template <bool kPartitioned>
  void draw_chunk(int64_t chunk, Scratch& scratch) {
    int64_t* out_nbr = nbrs.data_ptr<int64_t>();
    int64_t* out_eid = with_edge_ ? eids.data_ptr<int64_t>() : nullptr;
    const int64_t* cnt = counts.data_ptr<int64_t>();
    const kernels::CsrView<index_t> one = views_[0];
    const int64_t begin = chunk_begin(chunk), end = chunk_end(chunk);
    for (int64_t i = begin; i < end; ++i) {
      const auto& g = kPartitioned ? views_[part_[i]] : one;
      Rng rng(static_cast<uint64_t>(kPartitioned ? rng_seeds_[part_[i]] : rng_seeds_[0]),
              static_cast<uint64_t>(kPartitioned ? stream_[i] : i));
      int64_t* pos = out_nbr + offsets_[i];
      int64_t* epos = kPartitioned && out_eid ? out_eid + offsets_[i] : nullptr;
      sample_one(g, first_[i], degree_[i], k_, cnt[i], replace_, rng, scratch, [&](int64_t p) {
        if constexpr (kPartitioned) {
          *pos++ = reinterpret_cast<intptr_t>(g.indices + p);
          if (epos) *epos++ = reinterpret_cast<intptr_t>(g.edge_ids + p);
        } else {
          *pos++ = p;
        }
      });
    }
    const int64_t lo = offsets_[begin], hi = offsets_[end];
    constexpr int64_t ahead = kNeighborPrefetchAhead;
    for (int64_t o = lo; o < hi; ++o) {
      if constexpr (kPartitioned) {
        if (o + ahead < hi) {
          __builtin_prefetch(reinterpret_cast<const index_t*>(out_nbr[o + ahead]));
          if (out_eid) __builtin_prefetch(reinterpret_cast<const int64_t*>(out_eid[o + ahead]));
        }
        if (out_eid) out_eid[o] = *reinterpret_cast<const int64_t*>(out_eid[o]);
        out_nbr[o] = static_cast<int64_t>(*reinterpret_cast<const index_t*>(out_nbr[o]));
      } else {
        if (o + ahead < hi) {
          __builtin_prefetch(&one.indices[out_nbr[o + ahead]]);
          if (out_eid) __builtin_prefetch(&one.edge_ids[out_nbr[o + ahead]]);
        }
        const int64_t p = out_nbr[o];
        if (out_eid) out_eid[o] = one.edge_ids[p];
        out_nbr[o] = static_cast<int64_t>(one.indices[p]);
      }
    }
  }

  std::vector<kernels::CsrView<index_t>> views_;
  const int32_t* part_;    // null: one topology
  const int64_t* stream_;  // with part_: each seed's rank in its partition
  int64_t num_seeds_;
  int64_t k_;
  bool replace_;
  std::vector<int64_t> rng_seeds_;  // one per view
  bool with_edge_;
  // Per seed, filled by plan (not zeroed first: a hop's seeds take
  // megabytes).
  std::unique_ptr<int64_t[]> first_, degree_, offsets_;
};

}  // namespace draws
}  // namespace glt::cpu
