#pragma once
// The blocking arithmetic both AVX2 GEMM drivers share: the fp32 one (gemm_native_avx2.cpp,
// through gemm_avx2_impl.h) and the float64 one (gemm_native_f64_avx2.cpp).
#include <algorithm>
#include <cstdint>

namespace mantissa::kernels::gemm_blocking {

inline int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// The fewest blocks of at most max_block covering extent, made equal and rounded up to unit.
inline int64_t block_size(int64_t extent, int64_t max_block, int64_t unit) {
  return ceil_div(ceil_div(extent, ceil_div(extent, max_block)), unit) * unit;
}

// The tasks' row chunks: a task is one (batch entry, N block) pair over a chunk of M rows
// (whole panels of `mr` rows; each chunk packs its own copy of the B block). Rows are split when
// there are fewer pairs than threads, or too few to divide evenly among them (3 N blocks on 2
// threads left one thread idle a third of the time).
struct RowChunks {
  int64_t rows;   // rows per chunk, a multiple of mr
  int64_t count;  // chunks covering M
};
inline RowChunks row_chunks(int64_t pairs, int64_t M, int64_t mr, int64_t threads) {
  const int64_t panels = ceil_div(M, mr);
  int64_t chunks = std::min(panels, ceil_div(threads, pairs));
  while (chunks < panels && pairs * chunks < 8 * threads && pairs * chunks % threads != 0) ++chunks;
  const int64_t rows = ceil_div(ceil_div(M, chunks), mr) * mr;
  return {rows, ceil_div(M, rows)};
}

}  // namespace mantissa::kernels::gemm_blocking
