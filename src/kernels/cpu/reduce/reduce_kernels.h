#pragma once
// Reduction kernels over a contiguous tensor viewed as [outer, r, inner]: the reduced dims form
// the middle extent r, the kept dims the outer and inner extents (reduce_layout arranges this,
// permuting into a copy only for layouts like "reduce dims 0 and 2 of 4").
//
// Determinism: work is split into items of fixed size (row chunks of kChunk elements, column
// blocks of kColumns), independent of the thread count, and partial results are combined in
// a fixed order, so results are bit-identical for any number of threads.
#include <algorithm>
#include <cstdint>
#include <limits>
#include <utility>
#include <vector>

#include "core/reduce_layout.h"
#include "kernels/cpu/elementwise/elementwise_loops.h"

namespace mantissa::kernels {

using ::mantissa::detail::reduce_layout;
using ::mantissa::detail::ReduceLayout;

// Combining rules: an identity and an associative combine (applied in a fixed order).
struct SumOp {
  template <typename A>
  static constexpr A identity() {
    return A(0);
  }
  template <typename A>
  static A combine(A acc, A v) {
    return acc + v;
  }
};

// Max with NaN propagation: once a NaN is seen it stays (v != v only for NaN).
struct MaxOp {
  template <typename A>
  static constexpr A identity() {
    if constexpr (std::numeric_limits<A>::has_infinity) {
      return -std::numeric_limits<A>::infinity();
    } else {
      return std::numeric_limits<A>::lowest();
    }
  }
  template <typename A>
  static A combine(A acc, A v) {
    return (v > acc || v != v) ? v : acc;
  }
};

inline constexpr int64_t kChunk = 8192;   // elements of a row one work item reduces
inline constexpr int64_t kColumns = 256;  // columns one work item reduces in [r, inner]
inline constexpr int kLanes = 16;         // independent accumulators (vectorisable)

// Reduces n contiguous elements with 16 lanes, combined pairwise at the end.
template <typename Op, typename A, typename T>
A reduce_run(const T* p, int64_t n) {
  A lanes[kLanes];
  for (int j = 0; j < kLanes; ++j) lanes[j] = Op::template identity<A>();
  alignas(64) acc_t<T> buf[kBlock];
  for (int64_t b = 0; b < n; b += kBlock) {
    const int64_t m = std::min(kBlock, n - b);
    const acc_t<T>* v = load_block(p + b, 1, m, buf);
    int64_t i = 0;
    for (; i + kLanes <= m; i += kLanes)
      for (int j = 0; j < kLanes; ++j) lanes[j] = Op::combine(lanes[j], static_cast<A>(v[i + j]));
    for (int j = 0; i < m; ++i, ++j) lanes[j] = Op::combine(lanes[j], static_cast<A>(v[i]));
  }
  for (int w = kLanes / 2; w > 0; w /= 2)
    for (int j = 0; j < w; ++j) lanes[j] = Op::combine(lanes[j], lanes[j + w]);
  return lanes[0];
}

// Calls fn(o, k0, m) for each block of m <= kColumns columns [k0, k0 + m) of each outer
// index o: the fixed work partition of the kernels whose reduced dim is strided by `inner`.
template <typename F>
void for_column_blocks(const ReduceLayout& l, bool par, F&& fn) {
  const int64_t blocks = (l.inner + kColumns - 1) / kColumns;
#pragma omp parallel for schedule(static) if (par)
  for (int64_t w = 0; w < l.outer * blocks; ++w) {
    const int64_t k0 = (w % blocks) * kColumns;
    fn(w / blocks, k0, std::min(kColumns, l.inner - k0));
  }
}

// acc[o * inner + k] = reduce over i of x[(o * r + i) * inner + k], in type A.
template <typename Op, typename A, typename T>
void reduce_kernel(const T* x, const ReduceLayout& l, A* acc) {
  const int64_t total = l.outer * l.r * l.inner;
  const bool par = total > kParallelGrain;
  if (l.r == 0) {
    std::fill(acc, acc + l.outer * l.inner, Op::template identity<A>());
    return;
  }
  if (l.inner == 1) {
    // Each row is a contiguous run: split long rows into fixed chunks, combine in order.
    const int64_t chunks = (l.r + kChunk - 1) / kChunk;
    if (chunks == 1) {
#pragma omp parallel for schedule(static) if (par)
      for (int64_t o = 0; o < l.outer; ++o) acc[o] = reduce_run<Op, A>(x + o * l.r, l.r);
      return;
    }
    std::vector<A> part(static_cast<size_t>(l.outer * chunks));
#pragma omp parallel for schedule(static) if (par)
    for (int64_t w = 0; w < l.outer * chunks; ++w) {
      const int64_t o = w / chunks;
      const int64_t c = w % chunks;
      const int64_t begin = c * kChunk;
      part[w] = reduce_run<Op, A>(x + o * l.r + begin, std::min(kChunk, l.r - begin));
    }
    for (int64_t o = 0; o < l.outer; ++o) {
      A s = part[o * chunks];
      for (int64_t c = 1; c < chunks; ++c) s = Op::combine(s, part[o * chunks + c]);
      acc[o] = s;
    }
    return;
  }
  // Reduced dim strided by `inner`: accumulate whole rows of a column block at once.
  for_column_blocks(l, par, [&](int64_t o, int64_t k0, int64_t m) {
    A col[kColumns];
    for (int64_t j = 0; j < m; ++j) col[j] = Op::template identity<A>();
    alignas(64) acc_t<T> buf[kColumns];
    for (int64_t i = 0; i < l.r; ++i) {
      const acc_t<T>* v = load_block(x + (o * l.r + i) * l.inner + k0, 1, m, buf);
      for (int64_t j = 0; j < m; ++j) col[j] = Op::combine(col[j], static_cast<A>(v[j]));
    }
    std::copy(col, col + m, acc + o * l.inner + k0);
  });
}

// Value and index of the first maximum along r (a NaN counts as the maximum, first one wins).
// vals may be null (argmax).
template <typename T>
void argmax_kernel(const T* x, const ReduceLayout& l, T* vals, int64_t* idx) {
  using A = acc_t<T>;
  const bool par = l.outer * l.r * l.inner > kParallelGrain;
  for_column_blocks(l, par, [&](int64_t o, int64_t k0, int64_t m) {
    A best[kColumns];
    int64_t at[kColumns];
    for (int64_t j = 0; j < m; ++j) {
      best[j] = load(x[o * l.r * l.inner + k0 + j]);
      at[j] = 0;
    }
    for (int64_t i = 1; i < l.r; ++i) {
      const T* row = x + (o * l.r + i) * l.inner + k0;
      for (int64_t j = 0; j < m; ++j) {
        const A v = load(row[j]);
        if (v > best[j] || (v != v && best[j] == best[j])) {
          best[j] = v;
          at[j] = i;
        }
      }
    }
    for (int64_t j = 0; j < m; ++j) {
      const int64_t out = o * l.inner + k0 + j;
      idx[out] = at[j];
      if (vals != nullptr) vals[out] = x[(o * l.r + at[j]) * l.inner + k0 + j];
    }
  });
}

}  // namespace mantissa::kernels
