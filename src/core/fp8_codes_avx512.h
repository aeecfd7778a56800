#pragma once
// float32 -> FP8 (E4M3 / E5M2) codes in AVX-512 integer arithmetic, shared by the bulk
// conversions (convert_avx512.cpp) and the FP8 cast kernel (kernels/cpu/fp8/fp8_cast_avx512.cpp)
// so both round exactly like the scalar conversion in float8.cpp.
// Only include from files that compile their AVX-512 functions with target attributes.
#include <immintrin.h>

#include <cstdint>

namespace mantissa {

// FP8 code of each float32 lane; the same steps as float8.cpp, in vector form. The subnormal
// range uses the add-a-power-of-two trick with explicit RNE, so MXCSR does not matter.
template <int kMant, int kBias, uint32_t kMaxCode>
__attribute__((target("avx512f,avx512bw,avx512vl"), always_inline)) inline __m512i fp8_codes(
    __m512i x, uint32_t overflow_code) {
  constexpr int kDrop = 23 - kMant;
  constexpr uint32_t kMinNormalBits = (128u - kBias) << 23;
  // 2^(23 + 1 - bias - mant): its ulp is the FP8 subnormal quantum.
  constexpr uint32_t kMagicBits = (127u + 24u - kBias - kMant) << 23;
  const __m512i sign = _mm512_and_si512(_mm512_srli_epi32(x, 24), _mm512_set1_epi32(0x80));
  const __m512i a = _mm512_and_si512(x, _mm512_set1_epi32(0x7fffffff));

  const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(a, kDrop), _mm512_set1_epi32(1));
  const __m512i r =
      _mm512_add_epi32(a, _mm512_add_epi32(lsb, _mm512_set1_epi32((1 << (kDrop - 1)) - 1)));
  const __m512i normal =
      _mm512_sub_epi32(_mm512_srli_epi32(r, kDrop), _mm512_set1_epi32((127 - kBias) << kMant));
  const __m512 magic = _mm512_castsi512_ps(_mm512_set1_epi32(kMagicBits));
  const __m512 sum = _mm512_add_round_ps(_mm512_castsi512_ps(a), magic,
                                         _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  const __m512i sub = _mm512_sub_epi32(_mm512_castps_si512(sum), _mm512_set1_epi32(kMagicBits));

  const __mmask16 is_sub = _mm512_cmplt_epu32_mask(a, _mm512_set1_epi32(kMinNormalBits));
  __m512i code = _mm512_mask_mov_epi32(normal, is_sub, sub);
  const __mmask16 over = _mm512_cmpgt_epu32_mask(code, _mm512_set1_epi32(kMaxCode));
  code = _mm512_mask_mov_epi32(code, over, _mm512_set1_epi32(overflow_code));
  code = _mm512_or_si512(code, sign);
  const __mmask16 nan = _mm512_cmpgt_epu32_mask(a, _mm512_set1_epi32(0x7f800000));
  return _mm512_mask_mov_epi32(code, nan, _mm512_set1_epi32(0x7f));
}

}  // namespace mantissa
