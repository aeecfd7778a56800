// Adam/AdamW span kernels, AVX2 (32 bytes) level. Compiled for the baseline target with the ISA
// enabled by pragma after every header; called only when cpu_features() has avx2.
#include <immintrin.h>

#include <cmath>
#include <cstdint>
#include <cstring>

#include "core/convert_avx2_lanes.h"
#include "kernels/cpu/optim/adam_kernels.h"
#include "mantissa/core/bfloat16.h"

#pragma GCC push_options
#pragma GCC target("avx2")

namespace mantissa::optim::detail {
namespace {

constexpr int kVectorBytes = 32;  // the register width
using F = float __attribute__((vector_size(kVectorBytes)));
using D = double __attribute__((vector_size(kVectorBytes)));
inline F sqrt_of(F x) { return reinterpret_cast<F>(_mm256_sqrt_ps(reinterpret_cast<__m256>(x))); }
inline D sqrt_of(D x) { return reinterpret_cast<D>(_mm256_sqrt_pd(reinterpret_cast<__m256d>(x))); }

#include "kernels/cpu/optim/adam_span_impl.h"

inline __m256 as_ps(F a) { return reinterpret_cast<__m256>(a); }

inline F widen_bf16(const uint16_t* p) {
  const __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  return reinterpret_cast<F>(_mm256_castsi256_ps(_mm256_slli_epi32(w, 16)));
}

// Round to nearest even, for lanes that hold no NaN (bf16_rne without its NaN blend).
inline __m256i bf16_rne_finite(F x) {
  const __m256i b = _mm256_castps_si256(as_ps(x));
  const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(b, 16), _mm256_set1_epi32(1));
  return _mm256_srli_epi32(_mm256_add_epi32(b, _mm256_add_epi32(lsb, _mm256_set1_epi32(0x7fff))),
                           16);
}

// Sixteen rounded lanes (two vectors, each below 2^16) stored in order.
inline void store16(uint16_t* p, __m256i lo, __m256i hi) {
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(p),
                      _mm256_permute4x64_epi64(_mm256_packus_epi32(lo, hi), 0xd8));
}

inline bool any_nan(F a) {
  return _mm256_movemask_ps(_mm256_cmp_ps(as_ps(a), as_ps(a), _CMP_UNORD_Q)) != 0;
}

// adam_span<float> on bf16 storage, 16 elements a step: widen, the same adam_math, round to
// bf16 (RNE), in registers: the bits of the fp32 blocks of fused_loop.h, in one pass.
template <bool kL2, bool kAmsgrad>
void adam_span_bf16(const AdamCoeffs<float>& coeffs, uint16_t* p, const uint16_t* g, uint16_t* m,
                    uint16_t* v, uint16_t* v_max, int64_t n) {
  const AdamCoeffs<float> c = coeffs;  // a local copy: the stores below cannot change it
  constexpr int64_t kW = 16;
  int64_t i = 0;
  auto update = [&](int64_t j, F& pv, F& mv, F& vv, F& xv) {
    pv = widen_bf16(p + j);
    mv = widen_bf16(m + j);
    vv = widen_bf16(v + j);
    if constexpr (kAmsgrad) xv = widen_bf16(v_max + j);
    adam_math<kL2, kAmsgrad>(pv, widen_bf16(g + j), mv, vv, xv, c);
  };
  // A half whose results hold a NaN takes bf16_rne, which quiets it.
  auto put = [](uint16_t* dst, F lo, F hi) {
    if (any_nan(lo) || any_nan(hi)) {
      store16(dst, convert_detail::bf16_rne(_mm256_castps_si256(as_ps(lo))),
              convert_detail::bf16_rne(_mm256_castps_si256(as_ps(hi))));
    } else {
      store16(dst, bf16_rne_finite(lo), bf16_rne_finite(hi));
    }
  };
  for (; i + kW <= n; i += kW) {
    F p0, m0, v0, x0{}, p1, m1, v1, x1{};
    update(i, p0, m0, v0, x0);
    update(i + 8, p1, m1, v1, x1);
    put(p + i, p0, p1);
    put(m + i, m0, m1);
    put(v + i, v0, v1);
    if constexpr (kAmsgrad) put(v_max + i, x0, x1);
  }
  adam_bf16_tail<kL2, kAmsgrad>(c, p, g, m, v, v_max, i, n);
}

}  // namespace

AdamSpanBf16Fn adam_span_bf16_avx2(bool l2, bool amsgrad) {
  if (l2) return amsgrad ? &adam_span_bf16<true, true> : &adam_span_bf16<true, false>;
  return amsgrad ? &adam_span_bf16<false, true> : &adam_span_bf16<false, false>;
}

template <typename A>
AdamSpanFn<A> adam_span_avx2(bool l2, bool amsgrad) {
  return adam_span_for<A>(l2, amsgrad);
}
template AdamSpanFn<float> adam_span_avx2<float>(bool, bool);
template AdamSpanFn<double> adam_span_avx2<double>(bool, bool);

}  // namespace mantissa::optim::detail

#pragma GCC pop_options
