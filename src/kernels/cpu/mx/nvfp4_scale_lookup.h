#pragma once
// Internal: NVFP4's E4M3 block scale codes from the amax's bits by a 16-entry lookup in place of
// nvfp4_scale_codes.h's seven compares, for the AVX-512 stochastic rows (nvfp4_cast_avx512.cpp):
// one permute of 16 lanes holds the table.
//
// With D = bits - A9 (nvfp4_scale_codes.h), the compares' code is 9 + 8 * (D >> 23) plus the
// number of steps step[j] = A(10 + j) - A9 - 1 that L = D's low 23 bits exceed. Cut L's range in
// 16 buckets of 2^19 by D's bits 19-22: in bucket i every step below i * 2^19 is exceeded, none
// from (i + 1) * 2^19 - 1 on, and the others (inside) decide by L, so where each bucket holds at
// most one inside step the count is count[i] + (L > threshold[i]), threshold[i] that step (or
// none). make() checks this for each tensor scale and leaves `ok` false where it fails (the
// caller compares then), so the lookup gives the compares' code wherever it serves. It holds
// wherever the compares serve: two consecutive thresholds' scales differ by a factor of at least
// 1.9375 / 1.8125 (the midpoints around 1.875 * 2^e, the closest in ratio), and amax whose ratio
// is r lie at least (r - 1) * 2^23 apart in bits (a binade's bits grow at 2^23 / 2^e, at least
// 2^23 / amax): (1.9375 / 1.8125 - 1) * 2^23 > 1.1 * 2^19, more than a bucket, where rounding
// moves a threshold by a few units. As 8 * (D >> 23) is the arithmetic D >> 20 less D's bits
// 20-22 (i >> 1), the code is (D >> 20) + add[i] + (L > threshold[i]) with
// add[i] = 9 + count[i] - (i >> 1), before the clamp to 8..126.
#include <immintrin.h>

#include <cstdint>

#include "kernels/cpu/mx/nvfp4_scale_codes.h"

namespace mantissa::kernels::mx::detail {

struct Nvfp4ScaleCodeLookup {
  alignas(64) int32_t add[16] = {};
  alignas(64) int32_t threshold[16] = {};  // a signed compare's right side, INT32_MAX for none
  int32_t base = 0;                        // A9's bits
  uint32_t tensor_scale_bits = 0;
  bool made = false;
  bool ok = false;

  void make(const Nvfp4ScaleCodeThresholds& t) {
    tensor_scale_bits = t.tensor_scale_bits;
    made = true;
    ok = t.ok;
    base = t.base;
    for (int i = 0; i < 16; ++i) {
      const int32_t first = i << 19, last = ((i + 1) << 19) - 1;
      int count = 0, inside = 0;
      threshold[i] = INT32_MAX;
      for (const int32_t step : t.step) {
        if (step < first) {
          ++count;
        } else if (step < last) {
          ++inside;
          threshold[i] = step;
        }
      }
      if (inside > 1) ok = false;
      add[i] = 9 + count - (i >> 1);
    }
  }
};

// This thread's lookup for t's tensor scale (t: nvfp4_scale_code_thresholds).
inline const Nvfp4ScaleCodeLookup& nvfp4_scale_code_lookup(const Nvfp4ScaleCodeThresholds& t) {
  thread_local Nvfp4ScaleCodeLookup l;
  if (!l.made || l.tensor_scale_bits != t.tensor_scale_bits) l.make(t);
  return l;
}

// The E4M3 scale codes of 16 blocks' amax bits (numbers >= 0, l.ok): (D >> 20) + add[i] +
// (L > threshold[i]), clamped to 8..126 (the permutes read D >> 19's low 4 bits, i).
__attribute__((target("avx512f,avx512bw,avx512vl"), always_inline)) inline __m512i scale_codes16(
    const Nvfp4ScaleCodeLookup& l, __m512i bits) {
  const __m512i d = _mm512_sub_epi32(bits, _mm512_set1_epi32(l.base));
  const __m512i i = _mm512_srli_epi32(d, 19);
  const __m512i c = _mm512_add_epi32(_mm512_srai_epi32(d, 20),
                                     _mm512_permutexvar_epi32(i, _mm512_load_si512(l.add)));
  const __mmask16 above =
      _mm512_cmpgt_epi32_mask(_mm512_and_si512(d, _mm512_set1_epi32(0x7FFFFF)),
                              _mm512_permutexvar_epi32(i, _mm512_load_si512(l.threshold)));
  return _mm512_min_epi32(_mm512_max_epi32(_mm512_mask_add_epi32(c, above, c, _mm512_set1_epi32(1)),
                                           _mm512_set1_epi32(8)),
                          _mm512_set1_epi32(126));
}

}  // namespace mantissa::kernels::mx::detail
