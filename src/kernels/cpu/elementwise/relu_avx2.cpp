// AVX2 level of relu and its gradient (relu_kernels.h): compare-and-mask, 8 f32 or 16 bf16/f16 per
// step, tails through the scalar level (same results). The scalar level's ternaries compile to
// branches GCC does not vectorise at -O2; on the CNN's post-BatchNorm activations (half of them
// negative) they mispredicted so often that the f32 relu was 18% of a 32-true step on Zen 3.
#include <immintrin.h>

#include <type_traits>

#include "kernels/cpu/elementwise/relu_kernels.h"

#define MANTISSA_AVX2 __attribute__((target("avx2")))

namespace mantissa::kernels::cpu {
namespace {

MANTISSA_AVX2 void forward_f32(const float* x, float* y, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_loadu_ps(x + i);
    // x <= 0 (false for NaN, which passes): +0.
    const __m256 nonpos = _mm256_cmp_ps(v, _mm256_setzero_ps(), _CMP_LE_OQ);
    _mm256_storeu_ps(y + i, _mm256_andnot_ps(nonpos, v));
  }
  if (i < n) kReluScalar.forward_f32(x + i, y + i, n - i);
}

MANTISSA_AVX2 void backward_f32(const float* g, const float* x, float* gx, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 pos = _mm256_cmp_ps(_mm256_loadu_ps(x + i), _mm256_setzero_ps(), _CMP_GT_OQ);
    _mm256_storeu_ps(gx + i, _mm256_and_ps(pos, _mm256_loadu_ps(g + i)));
  }
  if (i < n) kReluScalar.backward_f32(g + i, x + i, gx + i, n - i);
}

// bf16/f16 bits as int16 lanes: NaN is (b & 0x7fff) > B::inf; a quiet NaN has B::quiet set.
template <class B>
MANTISSA_AVX2 inline __m256i nan_lanes(__m256i b) {
  return _mm256_cmpgt_epi16(_mm256_and_si256(b, _mm256_set1_epi16(0x7fff)),
                            _mm256_set1_epi16(B::inf));
}
template <class B>
MANTISSA_AVX2 inline __m256i quiet(__m256i b, __m256i nan) {
  return _mm256_or_si256(b, _mm256_and_si256(nan, _mm256_set1_epi16(B::quiet)));
}

template <class B>
MANTISSA_AVX2 void forward_h16(const uint16_t* x, uint16_t* y, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256i b = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + i));
    const __m256i nan = nan_lanes<B>(b);
    // Positive as a signed int16 (sign clear, not +0), or NaN: kept (NaN made quiet).
    const __m256i keep = _mm256_or_si256(_mm256_cmpgt_epi16(b, _mm256_setzero_si256()), nan);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(y + i),
                        _mm256_and_si256(keep, quiet<B>(b, nan)));
  }
  if (i < n) {
    if constexpr (std::is_same_v<B, Bf16Bits>)
      kReluScalar.forward_bf16(x + i, y + i, n - i);
    else
      kReluScalar.forward_f16(x + i, y + i, n - i);
  }
}

template <class B>
MANTISSA_AVX2 void backward_h16(const uint16_t* g, const uint16_t* x, uint16_t* gx, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256i b = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + i));
    const __m256i gb = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(g + i));
    const __m256i pos =
        _mm256_andnot_si256(nan_lanes<B>(b), _mm256_cmpgt_epi16(b, _mm256_setzero_si256()));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(gx + i),
                        _mm256_and_si256(pos, quiet<B>(gb, nan_lanes<B>(gb))));
  }
  if (i < n) {
    if constexpr (std::is_same_v<B, Bf16Bits>)
      kReluScalar.backward_bf16(g + i, x + i, gx + i, n - i);
    else
      kReluScalar.backward_f16(g + i, x + i, gx + i, n - i);
  }
}

}  // namespace

const ReluKernels kReluAvx2{forward_f32,  forward_h16<Bf16Bits>,  forward_h16<F16Bits>,
                            backward_f32, backward_h16<Bf16Bits>, backward_h16<F16Bits>};

}  // namespace mantissa::kernels::cpu
