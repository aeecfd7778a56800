#pragma once
// Internal: the 8-lane helpers that the AVX2 NVFP4 casts share, the row casts
// (nvfp4_rows_avx2.cpp) and the cast of the Hadamard transform's columns
// (nvfp4_rht_columns_avx2.cpp): 8 blocks' E4M3 scale codes and factors, Philox4x32-10 on 8 lanes,
// and E2M1 codes of float32 lanes rounded to nearest or stochastically. Each carries its target
// and is always inlined, so only the AVX2 files that call it compile it.
#include <immintrin.h>

#include <cstdint>

#include "kernels/cpu/mx/mx_lanes_avx2.h"
#include "kernels/cpu/mx/mx_scalar.h"
#include "kernels/cpu/mx/philox_avx2.h"

#define NVFP4_AVX2 __attribute__((target("avx2,fma,f16c"), always_inline)) inline

namespace mantissa::kernels::mx::nvfp4_avx2 {

using namespace scalar;
using namespace avx2_lanes;

// scalar::nvfp4_block_scale for 8 blocks at once: their E4M3 codes, and their factors.
NVFP4_AVX2 __m256i nvfp4_scale_codes(__m256 amax, float tensor_scale) {
  __m256 s =
      _mm256_div_ps(_mm256_div_ps(amax, _mm256_set1_ps(kE2m1Max)), _mm256_set1_ps(tensor_scale));
  s = _mm256_min_ps(_mm256_set1_ps(kE4m3Max), _mm256_max_ps(_mm256_set1_ps(0x1p-6f), s));
  return fp8_codes<3, 7>(s);
}
NVFP4_AVX2 __m256 nvfp4_block_scales(__m256 amax, float tensor_scale, __m256i& code) {
  code = nvfp4_scale_codes(amax, tensor_scale);
  return _mm256_div_ps(_mm256_set1_ps(1.0f / tensor_scale), e4m3_values(code));
}
NVFP4_AVX2 void nvfp4_block_scales(const float* amax, float tensor_scale, uint8_t* code,
                                   float* factor) {
  __m256i c;
  _mm256_storeu_ps(factor, nvfp4_block_scales(_mm256_loadu_ps(amax), tensor_scale, c));
  _mm_storel_epi64(reinterpret_cast<__m128i*>(code), bytes_of(c));
}

// Philox4x32-10 on 8 lanes: kernels/cpu/mx/philox_avx2.h.
using philox_avx2::philox16;
using philox_avx2::philox8_lanes_in_word1;
using philox_avx2::PhiloxKeys8;
using philox_avx2::SrWords8;

// e2m1_codes_stochastic's constants, made once per cast and passed in. Built in the loop, GCC
// makes each one again from a general register wherever the 16 vector registers run out (mov,
// vmovd, vpbroadcastd per constant and block, the broadcast on the shift pipes that Philox
// needs); made here, behind an empty asm that hides their values, they are spilled once and read
// as memory operands instead.
struct StochasticCodeConstants8 {
  __m256i sign, magnitude, half, byte;
  __m256 six, two, to_256ths;
  __attribute__((target("avx2,fma,f16c"))) StochasticCodeConstants8()
      : sign(_mm256_set1_epi32(8)),
        magnitude(_mm256_set1_epi32(0x7FFFFFFF)),
        half(_mm256_set1_epi32(0x3F000000)),
        byte(_mm256_set1_epi32(0xFF)),
        six(_mm256_set1_ps(kE2m1Max)),
        two(_mm256_set1_ps(2.0f)),
        to_256ths(_mm256_set1_ps(512.0f)) {
    asm(""
        : "+x"(sign), "+x"(magnitude), "+x"(half), "+x"(byte), "+x"(six), "+x"(two),
          "+x"(to_256ths));
  }
};

// Byte `byte` (0-3) of each lane of `words`: the lanes' random bits (philox.h, sr_byte).
NVFP4_AVX2 __m256i random_bytes(__m256i words, int byte, const StochasticCodeConstants8& k) {
  return _mm256_and_si256(_mm256_srl_epi32(words, _mm_cvtsi32_si128(8 * byte)), k.byte);
}

// scalar::e2m1_code_stochastic on 8 lanes, `random` each lane's 8 bits (0-255): t as the max of
// min(a, 2) * 512 truncated and (a - bits of 0.5) >> 14 (arithmetic), which is the latter from 2
// on, the former below (where the latter is below it or negative) and both in [1, 2); the code
// (t + random) >> 8 with v's sign. NaN lanes take e2m1_codes' answer; without kNan, v holds no
// NaN the codes keep (a block whose product holds one is cast again by the scalar body).
// e2m1_magnitude_codes_stochastic is the code's magnitude bits from |v| (0-7).
NVFP4_AVX2 __m256i e2m1_magnitude_codes_stochastic(__m256 magnitude, __m256i random,
                                                   const StochasticCodeConstants8& k) {
  const __m256 af = _mm256_min_ps(magnitude, k.six);
  const __m256i below2 = _mm256_cvttps_epi32(_mm256_mul_ps(_mm256_min_ps(af, k.two), k.to_256ths));
  const __m256i from2 = _mm256_srai_epi32(_mm256_sub_epi32(_mm256_castps_si256(af), k.half), 14);
  const __m256i t = _mm256_max_epi32(below2, from2);
  return _mm256_srli_epi32(_mm256_add_epi32(t, random), 8);
}
template <bool kNan = true>
NVFP4_AVX2 __m256i e2m1_codes_stochastic(__m256 v, __m256i random,
                                         const StochasticCodeConstants8& k) {
  const __m256i sign = _mm256_and_si256(_mm256_srli_epi32(_mm256_castps_si256(v), 28), k.sign);
  const __m256i code =
      _mm256_or_si256(e2m1_magnitude_codes_stochastic(
                          _mm256_and_ps(v, _mm256_castsi256_ps(k.magnitude)), random, k),
                      sign);
  if constexpr (!kNan) return code;
  const __m256 nan = _mm256_cmp_ps(v, v, _CMP_UNORD_Q);
  if (_mm256_movemask_ps(nan) == 0) return code;
  return _mm256_blendv_epi8(code, e2m1_codes(v), _mm256_castps_si256(nan));
}

// scalar::e2m1_code's magnitude bits (0-7) on 8 lanes y >= 0 that hold no NaN, by the FPU's
// rounding: with a = min(y, 6) and e = max(exponent(a), 0) (0, 1 or 2), a * 2^(1 - e) rounded to
// the nearest integer, ties to even, is n in 0..4 (e = 0: the grid 0, 0.5, .. 2 in halves) or 2..4
// (e = 1: 2, 3, 4) or 2..3 (e = 2: 4, 6 in twos), and the code n + 2e. A tie between two codes goes
// to the even integer, which is the even code, as E2M1's round to nearest even does.
NVFP4_AVX2 __m256i e2m1_magnitude_codes(__m256 y) {
  const __m256 a = _mm256_min_ps(y, _mm256_set1_ps(kE2m1Max));
  // max(field - 127, 0) by a saturating 16-bit subtract (the field is at most 129).
  const __m256i e =
      _mm256_subs_epu16(_mm256_srli_epi32(_mm256_castps_si256(a), 23), _mm256_set1_epi32(127));
  const __m256 scale = _mm256_castsi256_ps(
      _mm256_sub_epi32(_mm256_set1_epi32(128 << 23), _mm256_slli_epi32(e, 23)));  // 2^(1 - e)
  return _mm256_add_epi32(_mm256_cvtps_epi32(_mm256_mul_ps(a, scale)), _mm256_add_epi32(e, e));
}

// scalar::e2m1_code on 8 lanes that hold no NaN: the magnitude's code with y's sign bit.
NVFP4_AVX2 __m256i e2m1_codes_of_numbers(__m256 y) {
  return _mm256_or_si256(
      e2m1_magnitude_codes(abs8(y)),
      _mm256_and_si256(_mm256_srli_epi32(_mm256_castps_si256(y), 28), _mm256_set1_epi32(8)));
}

}  // namespace mantissa::kernels::mx::nvfp4_avx2

#undef NVFP4_AVX2
