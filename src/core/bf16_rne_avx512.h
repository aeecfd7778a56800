#pragma once
// float32 -> bf16 rounding in AVX-512 integer arithmetic, shared by the bulk conversions and
// the GEMM epilogue so both round exactly like the scalar conversion in bfloat16.h.
// Only include from files that compile their AVX-512 functions with target attributes.
#include <immintrin.h>

namespace mantissa {

// float32 bits -> bf16 bits in the low half of each lane, RNE in integer arithmetic (so
// subnormals are rounded, not flushed); NaN is made quiet with sign and top payload kept.
__attribute__((target("avx512f,avx512bw,avx512vl"), always_inline)) inline __m512i bf16_rne(
    __m512i x) {
  const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(x, 16), _mm512_set1_epi32(1));
  const __m512i bias = _mm512_add_epi32(lsb, _mm512_set1_epi32(0x7fff));
  const __m512i rounded = _mm512_srli_epi32(_mm512_add_epi32(x, bias), 16);
  const __m512i abs = _mm512_and_si512(x, _mm512_set1_epi32(0x7fffffff));
  const __mmask16 nan = _mm512_cmpgt_epu32_mask(abs, _mm512_set1_epi32(0x7f800000));
  const __m512i quiet = _mm512_or_si512(_mm512_srli_epi32(x, 16), _mm512_set1_epi32(0x40));
  return _mm512_mask_mov_epi32(rounded, nan, quiet);
}

}  // namespace mantissa
