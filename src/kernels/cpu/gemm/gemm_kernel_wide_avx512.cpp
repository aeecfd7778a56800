// The wide micro-kernel of the AVX2-path driver (gemm_avx2_impl.h), for CPUs with AVX-512: a
// 6x32 C tile in 12 zmm accumulators, one broadcast of A times two zmm of B per row and k step.
// The driver, the packed A panels ([k][6]) and the widening packers are the 6x16 kernel's; only
// the B panels are twice as wide ([k][32]). Each output element is the same sequence of FMAs
// (bias first, then k in order) as on the 6x16 kernel and the AVX-512 f32 kernel, so a bf16 or
// f16 product gives the bits of the f32 product of its widened operands on every path.
// It is what bf16 and f16 products run on where AVX-512 has no bf16 (or f16) arithmetic: they
// are widened while packed, as on AVX2, at twice the vector width (gemm_native.h).
// GCC 12 warns -W(maybe-)uninitialized about the _mm512_undefined_* placeholders inside
// AVX-512 intrinsics (bug 105593); spurious.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

#include <immintrin.h>

#include "core/bf16_rne_avx512.h"
#include "kernels/cpu/gemm/gemm_avx2_impl.h"
#include "kernels/cpu/gemm/gemm_epilogue_avx512.h"

#define MANTISSA_GEMM_WIDE __attribute__((target("avx512f,avx512bw,avx512vl,avx2,fma,f16c")))

namespace mantissa::kernels::gemm_avx2 {

namespace {

constexpr int kRound = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;
static_assert(gemm::kNR == kNRWide, "gemm::column_masks covers the 14x32 kernel's 32 columns");

// x rounded to bf16 / f16 (RNE, as Tensor::to rounds) and widened back to fp32 exactly.
MANTISSA_GEMM_WIDE inline __m512 round_through_bf16(__m512 x) {
  return _mm512_castsi512_ps(_mm512_slli_epi32(bf16_rne(_mm512_castps_si512(x)), 16));
}
MANTISSA_GEMM_WIDE inline __m512 round_through_f16(__m512 x) {
  return _mm512_cvtph_ps(_mm512_cvtps_ph(x, kRound));
}

// x rounded once to bf16 / f16, the lanes in `mask` stored at dst.
MANTISSA_GEMM_WIDE inline void store_low(uint16_t* dst, __mmask16 mask, __m512 x, bool bf16) {
  if (bf16) {
    _mm512_mask_cvtepi32_storeu_epi16(dst, mask, bf16_rne(_mm512_castps_si512(x)));
  } else {
    _mm256_mask_storeu_epi16(dst, mask, _mm512_cvtps_ph(x, kRound));
  }
}

}  // namespace

// The tile's body, with A element (i, k) at a[i * lda + k] (kRowsApart: rows of fp32 values
// contiguous in k) or at a[k * kMR + i] (a packed panel).
template <bool kRowsApart>
MANTISSA_GEMM_WIDE inline void wide_tile(int64_t kc, const float* a, int64_t lda, const float* b,
                                         const Tile& t) {
  // Lane masks of the tile's two zmm column halves (the 14x32 kernel's, also 32 wide); rows
  // past t.m are padding, computed and dropped (never loaded or stored).
  __mmask16 lo, hi;
  gemm::column_masks(t.n, lo, hi);
  __m512 acc[kMR][2];
  if (t.first) {
    // The bias is zero padded to whole panels.
    const __m512 b0 = t.bias ? _mm512_loadu_ps(t.bias) : _mm512_setzero_ps();
    const __m512 b1 = t.bias ? _mm512_loadu_ps(t.bias + 16) : _mm512_setzero_ps();
#pragma GCC unroll 6
    for (int i = 0; i < kMR; ++i) {
      acc[i][0] = b0;
      acc[i][1] = b1;
    }
  } else {
#pragma GCC unroll 6
    for (int i = 0; i < kMR; ++i) {
      const bool row = i < t.m;
      acc[i][0] = _mm512_maskz_loadu_ps(row ? lo : 0, t.c + i * t.ldc);
      acc[i][1] = _mm512_maskz_loadu_ps(row ? hi : 0, t.c + i * t.ldc + 16);
    }
  }

#pragma GCC unroll 4
  for (int64_t k = 0; k < kc; ++k) {
    const __m512 b0 = _mm512_loadu_ps(b);
    const __m512 b1 = _mm512_loadu_ps(b + 16);
#pragma GCC unroll 6
    for (int i = 0; i < kMR; ++i) {
      const __m512 ai = _mm512_set1_ps(kRowsApart ? a[i * lda + k] : a[i]);
      acc[i][0] = _mm512_fmadd_ps(ai, b0, acc[i][0]);
      acc[i][1] = _mm512_fmadd_ps(ai, b1, acc[i][1]);
    }
    if (!kRowsApart) a += kMR;
    b += kNRWide;
  }

  if (t.last && t.c_low != nullptr) {
    auto* out = static_cast<uint16_t*>(t.c_low);
    const bool bf16 = t.low_dtype == kBFloat16;
#pragma GCC unroll 6
    for (int i = 0; i < kMR; ++i) {
      if (i >= t.m) break;
      store_low(out + i * t.ldc_low, lo, acc[i][0], bf16);
      store_low(out + i * t.ldc_low + 16, hi, acc[i][1], bf16);
    }
    return;
  }
  if (t.last && t.round_to != kFloat32) {
    // fp32 output holding the bf16/f16-rounded values (GemmArgs::round_to).
    const bool bf16 = t.round_to == kBFloat16;
#pragma GCC unroll 6
    for (int i = 0; i < kMR; ++i) {
      acc[i][0] = bf16 ? round_through_bf16(acc[i][0]) : round_through_f16(acc[i][0]);
      acc[i][1] = bf16 ? round_through_bf16(acc[i][1]) : round_through_f16(acc[i][1]);
    }
  }
#pragma GCC unroll 6
  for (int i = 0; i < kMR; ++i) {
    if (i >= t.m) break;
    _mm512_mask_storeu_ps(t.c + i * t.ldc, lo, acc[i][0]);
    _mm512_mask_storeu_ps(t.c + i * t.ldc + 16, hi, acc[i][1]);
  }
}

MANTISSA_GEMM_WIDE void kernel_f32_wide_avx512(int64_t kc, const float* a, const float* b,
                                               const Tile& t) {
  wide_tile<false>(kc, a, kMR, b, t);
}

MANTISSA_GEMM_WIDE void kernel_f32_wide_avx512_rows(int64_t kc, const float* a, int64_t lda,
                                                    const float* b, const Tile& t) {
  wide_tile<true>(kc, a, lda, b, t);
}

}  // namespace mantissa::kernels::gemm_avx2
