#include "kernels/cpu/onednn/blocked_convert.h"

#include <immintrin.h>

#include "core/convert_avx2_lanes.h"
#include "kernels/cpu/gemm/transpose8_avx2.h"
#include "mantissa/core/bfloat16.h"
#include "mantissa/core/cpu_features.h"
#include "mantissa/core/error.h"
#include "mantissa/core/half.h"

#define MANTISSA_AVX2_F16C __attribute__((target("avx2,f16c")))

namespace mantissa::kernels {
namespace {

// Channels per step: eight planes in, eight-lane rows out (a block of 16 is two such halves).
constexpr int64_t kGroup = 8;

float widen_one(bool bf16, uint16_t v) {
  return bf16 ? bf16_bits_to_float(v) : half_bits_to_float(v);
}
uint16_t round_one(bool bf16, float f) {
  return bf16 ? float_to_bf16_bits(f) : float_to_half_bits(f);
}

// One image's eight channels from position s0 on: src holds the eight planes (hw apart), dst the
// group's first lane of position 0 (rows `block` apart).
void widen_group_scalar(bool bf16, const uint16_t* src, float* dst, int64_t hw, int64_t block,
                        int64_t s0) {
  for (int64_t s = s0; s < hw; ++s)
    for (int64_t c = 0; c < kGroup; ++c) dst[s * block + c] = widen_one(bf16, src[c * hw + s]);
}
void round_group_scalar(bool bf16, const float* src, uint16_t* dst, int64_t hw, int64_t block,
                        int64_t s0) {
  for (int64_t s = s0; s < hw; ++s)
    for (int64_t c = 0; c < kGroup; ++c) dst[c * hw + s] = round_one(bf16, src[s * block + c]);
}

template <bool kBf16>
MANTISSA_AVX2_F16C void widen_group_avx2(const uint16_t* src, float* dst, int64_t hw,
                                         int64_t block) {
  int64_t s = 0;
  for (; s + 8 <= hw; s += 8) {
    __m256 r[8];
    for (int c = 0; c < 8; ++c) {
      const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + c * hw + s));
      r[c] = kBf16 ? _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16))
                   : _mm256_cvtph_ps(h);
    }
    gemm_avx2::transpose8(r);  // r[j]: position s + j, eight channels
    for (int j = 0; j < 8; ++j) _mm256_storeu_ps(dst + (s + j) * block, r[j]);
  }
  widen_group_scalar(kBf16, src, dst, hw, block, s);
}

template <bool kBf16>
MANTISSA_AVX2_F16C void round_group_avx2(const float* src, uint16_t* dst, int64_t hw,
                                         int64_t block) {
  int64_t s = 0;
  for (; s + 8 <= hw; s += 8) {
    __m256 r[8];
    for (int j = 0; j < 8; ++j) r[j] = _mm256_loadu_ps(src + (s + j) * block);
    gemm_avx2::transpose8(r);  // r[c]: channel c, positions s .. s + 7
    for (int c = 0; c < 8; ++c) {
      __m128i h;
      if constexpr (kBf16) {
        // Each lane's bf16 bits are below 2^16, so the unsigned-saturating pack keeps them.
        const __m256i b = convert_detail::bf16_rne(_mm256_castps_si256(r[c]));
        h = _mm_packus_epi32(_mm256_castsi256_si128(b), _mm256_extracti128_si256(b, 1));
      } else {
        h = _mm256_cvtps_ph(r[c], _MM_FROUND_TO_NEAREST_INT);
      }
      _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + c * hw + s), h);
    }
  }
  round_group_scalar(kBf16, src, dst, hw, block, s);
}

// Calls f(plain group start offset, blocked group start offset) for every (image, 8-channel
// group), in parallel when there is enough work.
template <typename F>
void for_each_group(int64_t n, int64_t c, int64_t hw, int64_t block, F&& f) {
  const int64_t groups = c / kGroup;
#pragma omp parallel for collapse(2) schedule(static) if (n * c * hw >= 65536)
  for (int64_t img = 0; img < n; ++img)
    for (int64_t g = 0; g < groups; ++g) {
      const int64_t ch = g * kGroup;
      f((img * c + ch) * hw, ((img * (c / block) + ch / block) * hw) * block + ch % block);
    }
}

void check(DType low, int64_t c, int64_t block) {
  MANTISSA_CHECK(blocked_convert_applies(low, c, block), "conv2d",
                 "blocked conversion of {} with {} channels in blocks of {} is not supported",
                 low.name(), c, block);
}

}  // namespace

bool blocked_convert_applies(DType low, int64_t channels, int64_t block) {
  return (low == kBFloat16 || low == kFloat16) && (block == 8 || block == 16) && channels > 0 &&
         channels % block == 0;
}

void widen_to_blocked(DType low, const uint16_t* src, float* dst, int64_t n, int64_t c, int64_t hw,
                      int64_t block) {
  check(low, c, block);
  const bool bf16 = low == kBFloat16, avx2 = simd_level() >= SimdLevel::kAvx2;
  for_each_group(n, c, hw, block, [&](int64_t plain, int64_t blocked) {
    if (!avx2)
      widen_group_scalar(bf16, src + plain, dst + blocked, hw, block, 0);
    else if (bf16)
      widen_group_avx2<true>(src + plain, dst + blocked, hw, block);
    else
      widen_group_avx2<false>(src + plain, dst + blocked, hw, block);
  });
}

void round_from_blocked(DType low, const float* src, uint16_t* dst, int64_t n, int64_t c,
                        int64_t hw, int64_t block) {
  check(low, c, block);
  const bool bf16 = low == kBFloat16, avx2 = simd_level() >= SimdLevel::kAvx2;
  for_each_group(n, c, hw, block, [&](int64_t plain, int64_t blocked) {
    if (!avx2)
      round_group_scalar(bf16, src + blocked, dst + plain, hw, block, 0);
    else if (bf16)
      round_group_avx2<true>(src + blocked, dst + plain, hw, block);
    else
      round_group_avx2<false>(src + blocked, dst + plain, hw, block);
  });
}

}  // namespace mantissa::kernels
