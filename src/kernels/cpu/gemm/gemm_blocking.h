#pragma once
// The blocking arithmetic the GEMM drivers share: the AVX2 fp32 one (gemm_native_avx2.cpp,
// through gemm_avx2_impl.h) and float64 one (gemm_native_f64_avx2.cpp) use row_chunks; the
// block-scaled products (fp8/fp8_block_gemm.cpp, mx/mx_gemm.cpp) use decode_once_tasks.
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

// The tasks of a product that decodes each task's rows of A once for all of its columns: tasks
// of up to max_rows rows and all of N, N cut into whole panels of `panel` columns only where the
// row blocks leave threads without a task, then rows cut finer where the column tasks still do.
struct DecodeOnceTasks {
  int64_t cols;       // columns per task (whole panels)
  int64_t col_count;  // column tasks covering N
  int64_t rows;       // rows per task
  int64_t row_count;  // row tasks covering M
};
inline DecodeOnceTasks decode_once_tasks(int64_t M, int64_t N, int64_t panel, int64_t max_rows,
                                         int64_t threads) {
  const int64_t panels = ceil_div(N, panel);
  const int64_t groups = std::clamp<int64_t>(ceil_div(threads, ceil_div(M, max_rows)), 1, panels);
  const int64_t cols = ceil_div(panels, groups) * panel;
  const int64_t col_count = ceil_div(N, cols);
  const int64_t row_tasks = std::max<int64_t>(1, ceil_div(threads, col_count));
  const int64_t rows = std::clamp<int64_t>(ceil_div(M, row_tasks), 1, max_rows);
  return {cols, col_count, rows, ceil_div(M, rows)};
}

}  // namespace mantissa::kernels::gemm_blocking
