// AVX-512 (F, BW, VL, VBMI) body of the MX column casts to E2M1 under the floor scale without
// statistics, in 256-bit vectors: mx_columns_e2m1_floor.h's chunk with fewer instructions a step
// than the AVX2 level's lookup. The index's bit of |x| worth two steps is a test into a mask and
// a masked add (in place of an and, a compare and a subtract); the index is b itself (the table's
// 16 steps folded into the column's offset), packed to bytes with unsigned saturation, which
// makes the flushed elements' negative indices 0; the codes are one vpermb of its low 5 bits (in
// place of two pshufb, an add and a maximum); 64 columns' pairs put in order by one vpermt2b of
// their low bytes (in place of a pack and one or two permutes). 512-bit vectors would take as many
// pipe cycles on Zen 4, which splits them in two. With statistics, under rceil and without VBMI,
// the AVX-512 level runs the AVX2 bodies (mx_columns_e2m1_avx2.cpp). GCC 12 warns
// -Wmaybe-uninitialized inside AVX-512 intrinsics (GCC bug 105593); spurious.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <type_traits>

#include "mantissa/core/cpu_features.h"

#include "kernels/cpu/common/stream_codes.h"
#include "kernels/cpu/fp8/fp8_codes_avx2.h"
#include "kernels/cpu/mx/mx_cast.h"
#include "kernels/cpu/mx/mx_columns_levels.h"
#include "kernels/cpu/mx/mx_lanes_avx2.h"

// The ISA is enabled after every header, so no inline library code is built for it; with FMA and
// F16C, which the AVX2 level's helpers this file shares take.
#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512vbmi,fma,f16c")

#include "kernels/cpu/mx/mx_blocks_avx2.h"
#include "kernels/cpu/mx/mx_columns_avx2.h"
#include "kernels/cpu/mx/mx_columns_e2m1_floor.h"

namespace mantissa::kernels::mx::detail {
namespace {

// The VBMI level's Lookup (mx_columns_e2m1_floor.h): q = b, vpermb's table the code of each b in
// [0, 31] (b <= 20 on the columns it casts: y < 8).
struct Fp4VbmiLookup : Fp4ColumnConsts {
  static constexpr int kSteps = 16;
  __m256i table, bit6, bit22, one16, one32;
  __m256i pairs16, pairs32;  // vpermt2b's indexes of the pairs' low bytes in column order
  Fp4VbmiLookup()
      : table(_mm256_setr_epi8(0, 1, 1, 1, 1, 1, 1, 2, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7, 7, 7, 7,
                               7, 7, 7, 7, 7, 7, 7, 7, 7)),
        bit6(_mm256_set1_epi16(1 << 6)),
        bit22(_mm256_set1_epi32(1 << 22)),
        one16(_mm256_set1_epi16(1)),
        one32(_mm256_set1_epi32(1)),
        pairs16(_mm256_setr_epi8(0, 2, 4, 6, 16, 18, 20, 22, 8, 10, 12, 14, 24, 26, 28, 30, 32, 34,
                                 36, 38, 48, 50, 52, 54, 40, 42, 44, 46, 56, 58, 60, 62)),
        pairs32(_mm256_setr_epi8(0, 2, 16, 18, 4, 6, 20, 22, 8, 10, 24, 26, 12, 14, 28, 30, 32, 34,
                                 48, 50, 36, 38, 52, 54, 40, 42, 56, 58, 44, 46, 60, 62)) {}
  [[gnu::always_inline]] __m256i round16(__m256i t, __m256i a) const {
    return _mm256_mask_add_epi16(t, _mm256_test_epi16_mask(a, bit6), t, one16);
  }
  [[gnu::always_inline]] __m256i round32(__m256i t, __m256i a) const {
    return _mm256_mask_add_epi32(t, _mm256_test_epi32_mask(a, bit22), t, one32);
  }
  [[gnu::always_inline]] static __m256i pack16(__m256i v0, __m256i v1) {
    return _mm256_packus_epi16(v0, v1);
  }
  [[gnu::always_inline]] __m256i codes(__m256i q) const {
    return _mm256_permutexvar_epi8(q, table);
  }
  template <bool kBf16>
  [[gnu::always_inline]] __m256i order(__m256i p0, __m256i p1) const {
    return _mm256_permutex2var_epi8(p0, kBf16 ? pairs16 : pairs32, p1);
  }
};

}  // namespace

void avx512::mx_columns_e2m1(const void* src, DType dtype, int64_t rows, int64_t cols,
                             E8m0Rounding r, uint8_t* codes, uint8_t* scales, MxStatsRun* runs) {
  if (r != E8m0Rounding::kFloor || runs || !cpu_features().avx512_vbmi)
    return avx2::mx_columns_e2m1(src, dtype, rows, cols, r, codes, scales, runs);
  floor_columns<Fp4VbmiLookup>(src, dtype, rows, cols, codes, scales, nullptr);
}

}  // namespace mantissa::kernels::mx::detail

#pragma GCC pop_options
