#pragma once
// Internal: the software fetches of the casts that read a source beyond the caches, for the
// lines the hardware prefetchers bring too late (they stop at each 4 KiB page, and at one thread
// a cast's preparation otherwise waits on memory instead of overlapping the work before it).
// Used by the MX rows (mx/mx_row_groups_avx2.h), the NVFP4 rows (mx/nvfp4_rows_avx2.h,
// nvfp4_rows_bf16_avx2.cpp, nvfp4_cast_avx512.cpp) and the rowwise column copy
// (fp8/rowwise_cast_avx2.cpp). Which fetch, how far and into which cache was measured per cast
// (bench/results 2026-12-01-0005, 0220, 0225, 0245, 0318).
#include <immintrin.h>

namespace mantissa::kernels {

// The fetch of all 8 lines of a 512-byte group (256 bfloat16 values: eight MX blocks, sixteen
// NVFP4 blocks) 4 KiB past it, so that every line is asked for about 8 groups (some 0.2 us)
// before the group's preparation loads it, rather than at the hardware prefetchers' pace or one
// line 2 KiB ahead a group. Out of the caches (16M elements on 2 MiB pages) the MX FP8 rows'
// AVX2 body ran in 0.82-0.87 of the time it took with that one line and the AVX-512
// body in 0.89-0.99; in the caches 0-2 % slower (bench/results 2026-12-01-0005). A float32
// group (16 lines) ran 5-30 % slower with it.
[[gnu::always_inline]] inline void fetch_group_lines_ahead(const void* group) {
  const char* line = static_cast<const char*>(group) + 4096;
#pragma GCC unroll 8
  for (int k = 0; k < 8; ++k) _mm_prefetch(line + 64 * k, _MM_HINT_T0);
}

// The fetch of all kLines lines of a group kAhead bytes past it into L2 (prefetcht1), not L1:
// out of the caches one thread's loads then wait on L2 rather than on memory, and the L1 is
// not filled ahead of the lines the group's cast reads now (the rowwise casts' column and float32
// row fetches, fp8/rowwise_cast_avx2.cpp, gained the same way).
template <int kLines, int kAhead>
[[gnu::always_inline]] inline void fetch_group_lines_to_l2(const void* group) {
  const char* line = static_cast<const char*>(group) + kAhead;
#pragma GCC unroll 16
  for (int k = 0; k < kLines; ++k) _mm_prefetch(line + 64 * k, _MM_HINT_T1);
}

}  // namespace mantissa::kernels
