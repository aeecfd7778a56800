#pragma once
// Internal: a row cast's fetch, once a group of blocks, of the source's line 2 KiB past the
// group. The hardware prefetchers stop at each 4 KiB page, so without it the first lines of every
// page come on demand (a TLB walk and a memory latency each) to the next group's preparation,
// which the cast of the group before it then waits on. On 4 KiB pages one fetch a group cut the
// MX and NVFP4 row casts' CPU time by 15-25 % (bench/results, MX rows and NVFP4 round 6); on the
// allocator's 2 MiB pages it neither pays nor costs (bench/results 1750). Used by the MX rows
// (mx/mx_row_groups_avx2.h) and the NVFP4 rows (mx/nvfp4_rows_avx2.h).
#include <immintrin.h>

namespace mantissa::kernels {

[[gnu::always_inline]] inline void fetch_page_ahead(const void* group) {
  _mm_prefetch(static_cast<const char*>(group) + 2048, _MM_HINT_T0);
}

}  // namespace mantissa::kernels
