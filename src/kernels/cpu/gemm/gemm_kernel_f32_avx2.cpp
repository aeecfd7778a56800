// The micro-kernel of the AVX2 native GEMM: a 6x16 C tile in 12 ymm accumulators, one
// broadcast of A times two ymm of B per row and k step, plus its prologue (bias or the earlier
// K blocks' partial sums) and epilogue (fp32, or rounded once to bf16/f16 by the same
// conversions Tensor::to uses). Edge tiles go through a 6x16 buffer so the hot loop never
// needs masks. Compiled with a per-function target; the driver runs it only on CPUs with
// AVX2, FMA and F16C.
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "core/convert_avx2_lanes.h"
#include "core/convert_simd.h"
#include "kernels/cpu/gemm/gemm_avx2_impl.h"
#include "mantissa/core/bfloat16.h"

#define MANTISSA_GEMM_AVX2 __attribute__((target("avx2,fma,f16c")))

namespace mantissa::kernels::gemm_avx2 {

namespace {

// x rounded to bf16 / f16 (RNE, as Tensor::to rounds) and widened back to fp32 exactly (a bf16's
// bits are the float's top half; F16C both ways).
MANTISSA_GEMM_AVX2 inline __m256 round_through_bf16(__m256 x) {
  return _mm256_castsi256_ps(
      _mm256_slli_epi32(convert_detail::bf16_rne(_mm256_castps_si256(x)), 16));
}
MANTISSA_GEMM_AVX2 inline __m256 round_through_f16(__m256 x) {
  return _mm256_cvtph_ps(_mm256_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT));
}

// Every accumulator of the register tile rounded through `to` (bf16 or f16) in place. Always
// inlined and fully unrolled, so every acc index is a constant: a runtime index would move the
// tile out of registers.
template <int kRows>
MANTISSA_GEMM_AVX2 __attribute__((always_inline)) inline void round_tile_through(
    __m256 (&acc)[kRows][2], DType to) {
  if (to == kBFloat16) {
#pragma GCC unroll 6
    for (int i = 0; i < kRows; ++i) {
      acc[i][0] = round_through_bf16(acc[i][0]);
      acc[i][1] = round_through_bf16(acc[i][1]);
    }
  } else {
#pragma GCC unroll 6
    for (int i = 0; i < kRows; ++i) {
      acc[i][0] = round_through_f16(acc[i][0]);
      acc[i][1] = round_through_f16(acc[i][1]);
    }
  }
}

// x * s with a NaN x kept, quieted, whatever s is (GemmLowbit::row_scale and col_scale): when
// both are NaN the hardware returns its first operand's, and the compiler may swap the operands
// of a multiply.
MANTISSA_GEMM_AVX2 inline __m256 mul_keeping_nan(__m256 x, __m256 s) {
  const __m256 quiet = _mm256_or_ps(x, _mm256_castsi256_ps(_mm256_set1_epi32(0x00400000)));
  return _mm256_blendv_ps(_mm256_mul_ps(x, s), quiet, _mm256_cmp_ps(x, x, _CMP_UNORD_Q));
}

// Where the kernel reads A: a packed fp32 panel, [k][kMR], or A itself, row i of the tile at
// a + i * lda elements (rows past t.m repeat the last one; their sums are dropped), in f32 or bf16.
enum class ARead { kPanel, kRowsF32, kRowsBf16 };

// Row i's value at step k, widened to fp32 and broadcast.
template <ARead kA>
MANTISSA_GEMM_AVX2 inline __m256 broadcast_a(const void* row, int64_t k) {
  if constexpr (kA == ARead::kPanel) {
    return _mm256_broadcast_ss(static_cast<const float*>(row) + k * kMR);
  } else if constexpr (kA == ARead::kRowsF32) {
    return _mm256_broadcast_ss(static_cast<const float*>(row) + k);
  } else {
    // The 32 bits that end with bf16 element k hold it in their top half (little-endian), which
    // is its fp32 value once the bottom half (element k - 1) is cleared: one broadcast load and
    // one AND, no shift, so nothing competes with the FMAs for Zen 3's FMA pipes (the AND runs
    // on the other two) and no packing pass widens A beforehand. k >= 1: element k - 1 is in
    // the row (the caller widens step 0 on its own).
    uint32_t pair;
    std::memcpy(&pair, static_cast<const uint16_t*>(row) + k - 1, sizeof pair);
    return _mm256_and_ps(_mm256_castsi256_ps(_mm256_set1_epi32(static_cast<int32_t>(pair))),
                         _mm256_castsi256_ps(_mm256_set1_epi32(static_cast<int32_t>(0xffff0000u))));
  }
}

template <ARead kA>
MANTISSA_GEMM_AVX2 inline void kernel(int64_t kc, const void* a, int64_t lda, const float* b,
                                      const Tile& t) {
  const bool full = t.m == kMR && t.n == kNR;
  alignas(32) float edge[kMR][kNR];
  __m256 acc[kMR][2];
  if (t.first) {
    const bool preload = t.bias != nullptr && !t.scale_epilogue;
    const __m256 b0 = preload ? _mm256_loadu_ps(t.bias) : _mm256_setzero_ps();
    const __m256 b1 = preload ? _mm256_loadu_ps(t.bias + 8) : _mm256_setzero_ps();
#pragma GCC unroll 6
    for (int i = 0; i < kMR; ++i) {
      acc[i][0] = b0;
      acc[i][1] = b1;
    }
  } else {
    const float* src = t.c;
    int64_t ld = t.ldc;
    if (!full) {
      // Rows and columns past the edge are padding: their sums are computed and dropped.
      std::memset(edge, 0, sizeof edge);
      for (int i = 0; i < t.m; ++i) std::memcpy(edge[i], t.c + i * t.ldc, sizeof(float) * t.n);
      src = &edge[0][0];
      ld = kNR;
    }
#pragma GCC unroll 6
    for (int i = 0; i < kMR; ++i) {
      acc[i][0] = _mm256_loadu_ps(src + i * ld);
      acc[i][1] = _mm256_loadu_ps(src + i * ld + 8);
    }
  }

  // Row i's values: a packed panel interleaves the rows, rows read in place lie lda apart.
  const void* row[kMR];
  const size_t esize = kA == ARead::kRowsBf16 ? sizeof(uint16_t) : sizeof(float);
#pragma GCC unroll 6
  for (int i = 0; i < kMR; ++i)
    row[i] = static_cast<const char*>(a) +
             esize * (kA == ARead::kPanel ? i : std::min(i, t.m - 1) * lda);
  int64_t k = 0;
  if constexpr (kA == ARead::kRowsBf16) {
    // Step 0 widens its elements alone: the 16 bits before them may lie outside A.
    const __m256 b0 = _mm256_load_ps(b);
    const __m256 b1 = _mm256_load_ps(b + 8);
#pragma GCC unroll 6
    for (int i = 0; i < kMR; ++i) {
      const __m256 ai = _mm256_set1_ps(bf16_bits_to_float(*static_cast<const uint16_t*>(row[i])));
      acc[i][0] = _mm256_fmadd_ps(ai, b0, acc[i][0]);
      acc[i][1] = _mm256_fmadd_ps(ai, b1, acc[i][1]);
    }
    b += kNR;
    k = 1;
  }
#pragma GCC unroll 4
  for (; k < kc; ++k) {
    const __m256 b0 = _mm256_load_ps(b);
    const __m256 b1 = _mm256_load_ps(b + 8);
#pragma GCC unroll 6
    for (int i = 0; i < kMR; ++i) {
      const __m256 ai = broadcast_a<kA>(row[i], k);
      acc[i][0] = _mm256_fmadd_ps(ai, b0, acc[i][0]);
      acc[i][1] = _mm256_fmadd_ps(ai, b1, acc[i][1]);
    }
    b += kNR;
  }

  if (t.last && t.scale_epilogue) {
    // (sum * alpha) + bias, two separately rounded fp32 operations (no FMA); with row and
    // column scales, ((sum * alpha) * row_scale) * col_scale + bias, each rounded, a NaN sum
    // keeping its own NaN through the scales.
    const __m256 alpha = _mm256_set1_ps(t.alpha);
    const __m256 b0 = t.bias ? _mm256_loadu_ps(t.bias) : _mm256_setzero_ps();
    const __m256 b1 = t.bias ? _mm256_loadu_ps(t.bias + 8) : _mm256_setzero_ps();
#pragma GCC unroll 6
    for (int i = 0; i < kMR; ++i) {
      acc[i][0] = _mm256_mul_ps(acc[i][0], alpha);
      acc[i][1] = _mm256_mul_ps(acc[i][1], alpha);
    }
    // (Separate loops, each fully unrolled: every acc index stays a constant.)
    if (t.row_scale) {
#pragma GCC unroll 6
      for (int i = 0; i < kMR; ++i) {
        // Rows past t.m are padding (their sums are dropped): they take the last row's scale.
        const __m256 r = _mm256_set1_ps(t.row_scale[i < t.m ? i : t.m - 1]);
        acc[i][0] = mul_keeping_nan(acc[i][0], r);
        acc[i][1] = mul_keeping_nan(acc[i][1], r);
      }
    }
    if (t.col_scale) {
      const __m256 c0 = _mm256_loadu_ps(t.col_scale);
      const __m256 c1 = _mm256_loadu_ps(t.col_scale + 8);
#pragma GCC unroll 6
      for (int i = 0; i < kMR; ++i) {
        acc[i][0] = mul_keeping_nan(acc[i][0], c0);
        acc[i][1] = mul_keeping_nan(acc[i][1], c1);
      }
    }
    if (t.bias && t.bias_after_rounding && t.low_dtype != kFloat32) {
      // The product as the output dtype holds it, then the bias (rounded again below).
      round_tile_through(acc, t.low_dtype);
    }
#pragma GCC unroll 6
    for (int i = 0; i < kMR; ++i) {
      if (t.bias) {
        acc[i][0] = _mm256_add_ps(acc[i][0], b0);
        acc[i][1] = _mm256_add_ps(acc[i][1], b1);
      }
    }
  }

  const bool narrow = t.last && t.c_low != nullptr;
  if (t.last && !narrow && t.round_to != kFloat32) {
    // fp32 output holding the bf16/f16-rounded values (GemmArgs::round_to).
    round_tile_through(acc, t.round_to);
  }
  if (narrow && t.n == kNR) {
    // Full-width rows are rounded straight from the accumulators (a bulk conversion call per
    // 16-value row cost ~10% of a bf16-output GEMM with one K block).
    auto* out = static_cast<uint16_t*>(t.c_low);
    const bool bf16 = t.low_dtype == kBFloat16;
#pragma GCC unroll 6
    for (int i = 0; i < kMR; ++i) {
      if (i >= t.m) break;
      if (bf16) {
        convert_detail::store_bf16x16(out + i * t.ldc_low, acc[i][0], acc[i][1]);
      } else {
        convert_detail::store_f16x16(out + i * t.ldc_low, acc[i][0], acc[i][1]);
      }
    }
    return;
  }
  if (full && !narrow) {
#pragma GCC unroll 6
    for (int i = 0; i < kMR; ++i) {
      _mm256_storeu_ps(t.c + i * t.ldc, acc[i][0]);
      _mm256_storeu_ps(t.c + i * t.ldc + 8, acc[i][1]);
    }
    return;
  }
#pragma GCC unroll 6
  for (int i = 0; i < kMR; ++i) {
    _mm256_store_ps(edge[i], acc[i][0]);
    _mm256_store_ps(edge[i] + 8, acc[i][1]);
  }
  if (narrow) {
    auto* out = static_cast<uint16_t*>(t.c_low);
    for (int i = 0; i < t.m; ++i) {
      if (t.low_dtype == kBFloat16) {
        convert_detail::f32_to_bf16_avx2(edge[i], out + i * t.ldc_low, t.n);
      } else {
        convert_detail::f32_to_f16_avx2(edge[i], out + i * t.ldc_low, t.n);
      }
    }
    return;
  }
  for (int i = 0; i < t.m; ++i) std::memcpy(t.c + i * t.ldc, edge[i], sizeof(float) * t.n);
}

}  // namespace

MANTISSA_GEMM_AVX2 void kernel_f32_avx2(int64_t kc, const float* a, const float* b, const Tile& t) {
  kernel<ARead::kPanel>(kc, a, 0, b, t);
}

MANTISSA_GEMM_AVX2 void kernel_f32_avx2_rows(int64_t kc, const float* a, int64_t lda,
                                             const float* b, const Tile& t) {
  kernel<ARead::kRowsF32>(kc, a, lda, b, t);
}

MANTISSA_GEMM_AVX2 void kernel_bf16_avx2_rows(int64_t kc, const uint16_t* a, int64_t lda,
                                              const float* b, const Tile& t) {
  kernel<ARead::kRowsBf16>(kc, a, lda, b, t);
}

}  // namespace mantissa::kernels::gemm_avx2
