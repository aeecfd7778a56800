// Packing for the AVX2 native GEMM (gemm_avx2_impl.h): copies a panel of A (kMR rows) or B
// (kNR columns) from any strides into the kernel's zero-padded fp32 layout, widening bf16
// (16-bit shift), f16 (F16C) and the FP8 formats (through f16: E5M2 is the top byte of an f16,
// E4M3 an f16 with its exponent rebiased by a multiply by 2^8) on the way. The layouts matmul and
// Linear produce take vector paths: operands contiguous along the panel (a row-major B, a
// transposed A) are copied k row by k row; operands contiguous along k (a row-major A, a transposed
// B such as a Linear weight) go through 8x8 transposes. Other strides fall back to element-wise
// copies.
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "kernels/cpu/fp8/fp8_cast.h"
#include "kernels/cpu/gemm/gemm_avx2_impl.h"
#include "kernels/cpu/gemm/transpose8_avx2.h"
#include "mantissa/core/bfloat16.h"

#define MANTISSA_GEMM_AVX2 __attribute__((target("avx2,fma,f16c")))

namespace mantissa::kernels::gemm_avx2 {
namespace {

enum class Src { kF32, kBf16, kF16, kE4M3, kE5M2 };

// One element (f16 through F16C's scalar form, as the vector loads: the software conversion
// made a transposed A's 6-row panels, whose rows take this path, 10 % of a 16-mixed GPT step).
template <Src S>
MANTISSA_GEMM_AVX2 inline float load1(const void* p, int64_t i) {
  if constexpr (S == Src::kF32) return static_cast<const float*>(p)[i];
  if constexpr (S == Src::kBf16) return bf16_bits_to_float(static_cast<const uint16_t*>(p)[i]);
  if constexpr (S == Src::kF16) return _cvtsh_ss(static_cast<const uint16_t*>(p)[i]);
  if constexpr (S == Src::kE4M3 || S == Src::kE5M2) {
    static const float* const table =
        fp8::detail::decode_table(S == Src::kE4M3 ? kFloat8_e4m3fn : kFloat8_e5m2);
    return table[static_cast<const uint8_t*>(p)[i]];
  }
}

// The eight FP8 codes in the low 8 bytes of `codes` to fp32, exactly as
// fp8::detail::decode_table does.
template <Src S>
MANTISSA_GEMM_AVX2 inline __m256 decode8_fp8(__m128i codes) {
  const __m128i w = _mm_cvtepu8_epi16(codes);
  if constexpr (S == Src::kE5M2) {
    return _mm256_cvtph_ps(_mm_slli_epi16(w, 8));  // E5M2 is an f16 without its low byte
  } else {
    // E4M3 magnitude bits as an f16 with exponent bias 15 instead of 7: exact (also the
    // subnormals, which stay f16 subnormals), then * 2^8. Only S.1111.111 is NaN in E4M3.
    const __m128i mag = _mm_and_si128(w, _mm_set1_epi16(0x7F));
    const __m128i sign = _mm_and_si128(_mm_slli_epi16(w, 8), _mm_set1_epi16(-0x8000));
    const __m128i h = _mm_or_si128(sign, _mm_slli_epi16(mag, 7));
    const __m256 v = _mm256_mul_ps(_mm256_cvtph_ps(h), _mm256_set1_ps(256.0f));
    const __m128i nan16 = _mm_cmpeq_epi16(mag, _mm_set1_epi16(0x7F));
    if (_mm_testz_si128(nan16, nan16)) return v;
    static const float* const table = fp8::detail::decode_table(kFloat8_e4m3fn);
    const __m256 nan = _mm256_blendv_ps(_mm256_set1_ps(table[0x7F]), _mm256_set1_ps(table[0xFF]),
                                        _mm256_castsi256_ps(_mm256_cvtepi16_epi32(sign)));
    return _mm256_blendv_ps(v, nan, _mm256_castsi256_ps(_mm256_cvtepi16_epi32(nan16)));
  }
}

// Eight FP8 codes to fp32.
template <Src S>
MANTISSA_GEMM_AVX2 inline __m256 load8_fp8(const uint8_t* p) {
  return decode8_fp8<S>(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
}

// Four and six FP8 codes to fp32 (the low lanes; the others hold +0). The bytes are loaded into
// a register piece by piece: assembling them in memory first made the wider load wait on the
// narrower stores (a store-forwarding stall on every k row of a transposed A panel).
template <Src S>
MANTISSA_GEMM_AVX2 inline __m256 load4_fp8(const uint8_t* p) {
  uint32_t four;
  std::memcpy(&four, p, sizeof four);
  return decode8_fp8<S>(_mm_cvtsi32_si128(static_cast<int>(four)));
}
template <Src S>
MANTISSA_GEMM_AVX2 inline __m256 load6_fp8(const uint8_t* p) {
  uint32_t four;
  uint16_t two;
  std::memcpy(&four, p, sizeof four);
  std::memcpy(&two, p + 4, sizeof two);
  return decode8_fp8<S>(_mm_insert_epi16(_mm_cvtsi32_si128(static_cast<int>(four)), two, 2));
}

// Elements i..i+7, widened to fp32 (exactly: both widenings are exact).
template <Src S>
MANTISSA_GEMM_AVX2 inline __m256 load8(const void* p, int64_t i) {
  if constexpr (S == Src::kF32) {
    return _mm256_loadu_ps(static_cast<const float*>(p) + i);
  } else if constexpr (S == Src::kE4M3 || S == Src::kE5M2) {
    return load8_fp8<S>(static_cast<const uint8_t*>(p) + i);
  } else {
    const __m128i h =
        _mm_loadu_si128(reinterpret_cast<const __m128i*>(static_cast<const uint16_t*>(p) + i));
    if constexpr (S == Src::kBf16) {
      return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
    } else {
      return _mm256_cvtph_ps(h);
    }
  }
}

// Elements i..i+3 (the 6-wide A panels' first four).
template <Src S>
MANTISSA_GEMM_AVX2 inline __m128 load4(const void* p, int64_t i) {
  if constexpr (S == Src::kF32) {
    return _mm_loadu_ps(static_cast<const float*>(p) + i);
  } else if constexpr (S == Src::kBf16 || S == Src::kF16) {
    const __m128i h =
        _mm_loadl_epi64(reinterpret_cast<const __m128i*>(static_cast<const uint16_t*>(p) + i));
    if constexpr (S == Src::kBf16)
      return _mm_castsi128_ps(_mm_slli_epi32(_mm_cvtepu16_epi32(h), 16));
    return _mm_cvtph_ps(h);
  } else {
    return _mm256_castps256_ps128(load4_fp8<S>(static_cast<const uint8_t*>(p) + i));
  }
}

// Elements i..i+5 (a 6-wide A panel's k row), one conversion for all six: four and two 16-bit
// values in one register, six FP8 codes in one decode; f32 as a load4 and two elements.
template <Src S>
MANTISSA_GEMM_AVX2 inline __m256 load6(const void* p, int64_t i) {
  if constexpr (S == Src::kBf16 || S == Src::kF16) {
    const auto* h = static_cast<const uint16_t*>(p) + i;
    uint32_t last_two;
    std::memcpy(&last_two, h + 4, sizeof last_two);
    const __m128i six = _mm_insert_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(h)),
                                         static_cast<int>(last_two), 2);
    if constexpr (S == Src::kBf16)
      return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(six), 16));
    return _mm256_cvtph_ps(six);
  } else if constexpr (S == Src::kE4M3 || S == Src::kE5M2) {
    return load6_fp8<S>(static_cast<const uint8_t*>(p) + i);
  } else {
    return _mm256_set_m128(_mm_setr_ps(load1<S>(p, i + 4), load1<S>(p, i + 5), 0.0f, 0.0f),
                           load4<S>(p, i));
  }
}

// The first `lanes` (6 or 8) floats of v to dst.
MANTISSA_GEMM_AVX2 inline void store_lanes(float* dst, __m256 v, int lanes) {
  if (lanes == 8) {
    _mm256_storeu_ps(dst, v);
  } else {
    _mm_storeu_ps(dst, _mm256_castps256_ps128(v));
    _mm_storel_pi(reinterpret_cast<__m64*>(dst + 4), _mm256_extractf128_ps(v, 1));
  }
}

// dst[k * W + p] = src(p, k) = src[p * ps + k * ks] for p < count, k < K; zero for p >= count.
template <Src S, int W>
MANTISSA_GEMM_AVX2 void pack(const void* src, int64_t ps, int64_t ks, int count, int64_t K,
                             float* dst) {
  static_assert(W == 6 || W % 8 == 0, "store_lanes writes 6 or 8 lanes");
  if (count < W) std::memset(dst, 0, sizeof(float) * static_cast<size_t>(K) * W);
  if (ps == 1) {
    // Each k row of the panel is contiguous in src. Rows lie ks elements apart, usually a whole
    // row of a large matrix (a weight gradient's tokens), and every panel takes a few dozen
    // bytes of each: the rows a few steps ahead are requested early, or the copy waits on
    // memory for each of them (packing was a quarter of the ViT's weight gradients).
    constexpr int64_t kAhead = 16;
    constexpr int64_t kElem = S == Src::kF32 ? 4 : (S == Src::kBf16 || S == Src::kF16) ? 2 : 1;
    const auto* bytes = static_cast<const char*>(src);
    for (int64_t k = 0; k < K; ++k) {
      const int64_t base = k * ks;
      if (k + kAhead < K) {
        const char* ahead = bytes + (base + kAhead * ks) * kElem;
        __builtin_prefetch(ahead);
        __builtin_prefetch(ahead + (count - 1) * kElem);
      }
      float* d = dst + k * W;
      if (W == 6 && count == 6) {
        // A full 6-wide panel (a weight gradient's dY^T): one conversion per k row, not three.
        store_lanes(d, load6<S>(src, base), 6);
        continue;
      }
      int p = 0;
      for (; p + 8 <= count; p += 8) _mm256_storeu_ps(d + p, load8<S>(src, base + p));
      for (; p + 4 <= count; p += 4) _mm_storeu_ps(d + p, load4<S>(src, base + p));
      for (; p < count; ++p) d[p] = load1<S>(src, base + p);
    }
  } else if (ks == 1) {
    // Each panel row/column is contiguous along k: 8 k steps of 8 of them at a time. The rows
    // are separate streams, one line each every few steps: the lines a few steps ahead are
    // requested early (without, the loads' waits were a third of the 6-row A panels' packing).
    constexpr int64_t kAheadBytes = 256;
    constexpr int64_t kElem = S == Src::kF32 ? 4 : (S == Src::kBf16 || S == Src::kF16) ? 2 : 1;
    const auto* bytes = static_cast<const char*>(src);
    for (int p0 = 0; p0 < count; p0 += 8) {
      const int rows = std::min(8, count - p0), lanes = std::min(8, W - p0);
      int64_t k = 0;
      for (; k + 8 <= K; k += 8) {
        if ((k * kElem) % 64 == 0 && (k + 8) * kElem + kAheadBytes <= K * kElem)
          for (int i = 0; i < rows; ++i)
            __builtin_prefetch(bytes + ((p0 + i) * ps + k) * kElem + kAheadBytes);
        __m256 r[8];
#pragma GCC unroll 8
        for (int i = 0; i < 8; ++i)
          r[i] = i < rows ? load8<S>(src, (p0 + i) * ps + k) : _mm256_setzero_ps();
        transpose8(r);
#pragma GCC unroll 8
        for (int j = 0; j < 8; ++j) store_lanes(dst + (k + j) * W + p0, r[j], lanes);
      }
      for (; k < K; ++k)
        for (int i = 0; i < rows; ++i) dst[k * W + p0 + i] = load1<S>(src, (p0 + i) * ps + k);
    }
  } else {
    for (int64_t k = 0; k < K; ++k)
      for (int p = 0; p < count; ++p) dst[k * W + p] = load1<S>(src, p * ps + k * ks);
  }
}

template <int W>
void pack_any(DType dtype, const void* src, int64_t ps, int64_t ks, int count, int64_t K,
              float* dst) {
  if (dtype == kBFloat16) {
    pack<Src::kBf16, W>(src, ps, ks, count, K, dst);
  } else if (dtype == kFloat16) {
    pack<Src::kF16, W>(src, ps, ks, count, K, dst);
  } else if (dtype == kFloat8_e4m3fn) {
    pack<Src::kE4M3, W>(src, ps, ks, count, K, dst);
  } else if (dtype == kFloat8_e5m2) {
    pack<Src::kE5M2, W>(src, ps, ks, count, K, dst);
  } else {
    pack<Src::kF32, W>(src, ps, ks, count, K, dst);
  }
}

template <Src S>
MANTISSA_GEMM_AVX2 void widen_rows(const void* src, int64_t ps, int rows, int64_t K, float* dst,
                                   int64_t ld) {
  for (int p = 0; p < rows; ++p) {
    const int64_t base = p * ps;
    int64_t k = 0;
    for (; k + 8 <= K; k += 8) _mm256_storeu_ps(dst + p * ld + k, load8<S>(src, base + k));
    for (; k < K; ++k) dst[p * ld + k] = load1<S>(src, base + k);
  }
}

}  // namespace

bool widens_a_block(DType dtype, int64_t ks) {
  return (dtype == kBFloat16 || dtype == kFloat16) && ks == 1;
}

// Rows start 16 floats past a multiple of 16, so that the six rows a tile reads do not lie a
// multiple of 1 KiB apart (K 256), which maps every fourth of them to the same L1 set.
int64_t widened_rows_ld(int64_t K) { return (K + 15) / 16 * 16 + 16; }

int64_t widened_block_floats(int64_t rows, int64_t K) {
  return (rows + kMR - 1) / kMR * kMR * widened_rows_ld(K);
}

void widen_a_block(DType dtype, const void* src, int64_t ps, int rows, int64_t K, float* dst) {
  const int64_t ld = widened_rows_ld(K);
  const int padded = (rows + kMR - 1) / kMR * kMR;
  std::fill(dst + rows * ld, dst + padded * ld, 0.0f);
  if (dtype == kBFloat16)
    widen_rows<Src::kBf16>(src, ps, rows, K, dst, ld);
  else
    widen_rows<Src::kF16>(src, ps, rows, K, dst, ld);
}

void pack_a(DType dtype, const void* src, int64_t ps, int64_t ks, int count, int64_t K,
            float* dst) {
  pack_any<kMR>(dtype, src, ps, ks, count, K, dst);
}

void pack_b(DType dtype, const void* src, int64_t ps, int64_t ks, int count, int64_t K,
            float* dst) {
  pack_any<kNR>(dtype, src, ps, ks, count, K, dst);
}

void pack_b_wide(DType dtype, const void* src, int64_t ps, int64_t ks, int count, int64_t K,
                 float* dst) {
  pack_any<kNRWide>(dtype, src, ps, ks, count, K, dst);
}

}  // namespace mantissa::kernels::gemm_avx2
