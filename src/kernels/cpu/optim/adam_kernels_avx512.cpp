// Adam/AdamW span kernels, AVX-512F (64 bytes) level. Compiled for the baseline target with the ISA
// enabled by pragma after every header; called only when cpu_features() has avx512f.
// GCC 12 warns -Wmaybe-uninitialized inside AVX-512 intrinsics (GCC bug 105593); spurious.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#include <immintrin.h>

#include <cmath>
#include <cstdint>
#include <cstring>

#include "core/bf16_rne_avx512.h"
#include "kernels/cpu/optim/adam_kernels.h"
#include "mantissa/core/bfloat16.h"

#pragma GCC push_options
#pragma GCC target("avx512f")

namespace mantissa::optim::detail {
namespace {

constexpr int kVectorBytes = 64;  // the register width
using F = float __attribute__((vector_size(kVectorBytes)));
using D = double __attribute__((vector_size(kVectorBytes)));
inline F sqrt_of(F x) { return reinterpret_cast<F>(_mm512_sqrt_ps(reinterpret_cast<__m512>(x))); }
inline D sqrt_of(D x) { return reinterpret_cast<D>(_mm512_sqrt_pd(reinterpret_cast<__m512d>(x))); }

#include "kernels/cpu/optim/adam_span_impl.h"

#define MANTISSA_AVX512BW __attribute__((target("avx512f,avx512bw,avx512vl")))

MANTISSA_AVX512BW inline F widen_bf16(const uint16_t* p) {
  const __m512i w = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  return reinterpret_cast<F>(_mm512_castsi512_ps(_mm512_slli_epi32(w, 16)));
}
// RNE to bf16. kNative: VCVTNEPS2BF16 (AVX-512 BF16; inline assembly, so this file needs no BF16
// target and runs it only where the CPU has it), which rounds as bf16_rne except that it flushes
// subnormal inputs: a vector holding one takes the integer rounding.
template <bool kNative>
MANTISSA_AVX512BW inline void narrow_bf16(uint16_t* p, F x) {
  const __m512i bits = _mm512_castps_si512(reinterpret_cast<__m512>(x));
  __m256i h;
  if constexpr (kNative) {
    const __m512i mag = _mm512_and_si512(bits, _mm512_set1_epi32(0x7fffffff));
    const __mmask16 sub = _mm512_mask_cmplt_epu32_mask(_mm512_test_epi32_mask(mag, mag), mag,
                                                       _mm512_set1_epi32(0x00800000));
    if (sub == 0) {
      asm("vcvtneps2bf16 %1, %0" : "=v"(h) : "v"(reinterpret_cast<__m512>(x)));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), h);
      return;
    }
  }
  h = _mm512_cvtepi32_epi16(bf16_rne(bits));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), h);
}

// adam_span<float> on bf16 storage: widen, the same adam_math, narrow with RNE.
template <bool kL2, bool kAmsgrad, bool kNative>
MANTISSA_AVX512BW void adam_span_bf16(const AdamCoeffs<float>& c, uint16_t* p, const uint16_t* g,
                                      uint16_t* m, uint16_t* v, uint16_t* v_max, int64_t n) {
  constexpr int64_t kW = 16;
  int64_t i = 0;
  for (; i + kW <= n; i += kW) {
    F pv = widen_bf16(p + i), mv = widen_bf16(m + i), vv = widen_bf16(v + i), xv{};
    if constexpr (kAmsgrad) xv = widen_bf16(v_max + i);
    adam_math<kL2, kAmsgrad>(pv, widen_bf16(g + i), mv, vv, xv, c);
    narrow_bf16<kNative>(p + i, pv);
    narrow_bf16<kNative>(m + i, mv);
    narrow_bf16<kNative>(v + i, vv);
    if constexpr (kAmsgrad) narrow_bf16<kNative>(v_max + i, xv);
  }
  adam_bf16_tail<kL2, kAmsgrad>(c, p, g, m, v, v_max, i, n);
}

}  // namespace

AdamSpanBf16Fn adam_span_bf16_avx512(bool l2, bool amsgrad, bool native_bf16) {
  if (native_bf16) {
    if (l2) return amsgrad ? &adam_span_bf16<true, true, true> : &adam_span_bf16<true, false, true>;
    return amsgrad ? &adam_span_bf16<false, true, true> : &adam_span_bf16<false, false, true>;
  }
  if (l2) return amsgrad ? &adam_span_bf16<true, true, false> : &adam_span_bf16<true, false, false>;
  return amsgrad ? &adam_span_bf16<false, true, false> : &adam_span_bf16<false, false, false>;
}

template <typename A>
AdamSpanFn<A> adam_span_avx512(bool l2, bool amsgrad) {
  return adam_span_for<A>(l2, amsgrad);
}
template AdamSpanFn<float> adam_span_avx512<float>(bool, bool);
template AdamSpanFn<double> adam_span_avx512<double>(bool, bool);

}  // namespace mantissa::optim::detail

#pragma GCC pop_options
