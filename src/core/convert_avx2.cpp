// AVX2 (+F16C) conversion kernels: the path for CPUs without AVX-512. Tails shorter than one
// vector use the scalar conversions, which these kernels match bit for bit.
#include <immintrin.h>

#include <algorithm>
#include <cstdint>

#include "core/convert_avx2_lanes.h"
#include "core/convert_simd.h"
#include "mantissa/core/bfloat16.h"
#include "mantissa/core/half.h"

#define MANTISSA_AVX2 __attribute__((target("avx2")))
#define MANTISSA_AVX2_F16C __attribute__((target("avx2,f16c")))
// For the streaming kernels' per-block lambdas, which would otherwise be called per 32 bytes.
#define MANTISSA_AVX2_BLOCK __attribute__((target("avx2"), always_inline))
#define MANTISSA_AVX2_F16C_BLOCK __attribute__((target("avx2,f16c"), always_inline))

namespace mantissa::convert_detail {
namespace {

// How far ahead of its loads (in floats: 2 KB) a conversion whose lane arithmetic is long asks
// for its source. Such a loop fills the out-of-order window with arithmetic, so the core has
// fewer loads in flight than memory needs to stream (measured on a Golden Cove core at the AVX2
// level: f32 -> bf16 over 16M elements 25-34 GB/s against F16C's 47).
constexpr int64_t kPrefetchFloats = 512;

// FP8 codes of eight floats, plus kCodeBias; a NaN's lies above every other. A float add rounds
// each value to nearest even at its FP8 step: m is the power of two whose ulp is that step
// (2^(e + 23 - kMant) in binade e; below the smallest normal, and in that binade, whose step is
// the same, the power whose ulp is the subnormal step), so s = |x| + m holds the number d of
// steps in its low bits, and the code is d plus 2^kMant per binade above the smallest normal
// one: (s - m) + (m >> (23 - kMant)) - kCodeBias. A carry into the next binade makes d
// 2^(kMant + 1), which gives that binade's first code. Overflow saturates first, in the float
// domain: min_ps returns its second operand when either is NaN, so a NaN passes, its m is the
// subnormal one (the exponent add wraps negative) and s is a NaN, whose bits lie far above
// every code. Nine operations per vector against eighteen for integer rounding in the normal
// range beside a separate subnormal path (llvm-mca, Zen 3: 5.5 -> 3.3 cycles per 8 values with
// the packing). AVX2 has no embedded rounding, so this relies on MXCSR being round-to-nearest
// (the default, which nothing in mantissa changes); no step makes a float32 subnormal, so
// FTZ/DAZ do not matter.
template <int kMant, int kBias>
constexpr int kCodeBias = (127 + 24 - kBias - kMant) << kMant;

template <int kMant, int kBias>
MANTISSA_AVX2 inline __m256i fp8_codes_biased(__m256i x, __m256 overflow) {
  constexpr int kDrop = 23 - kMant;
  constexpr int kMagicBits = (127 + 24 - kBias - kMant) << 23;
  const __m256 a = _mm256_castsi256_ps(_mm256_and_si256(x, _mm256_set1_epi32(0x7fffffff)));
  const __m256 clamped = _mm256_min_ps(overflow, a);
  const __m256i e = _mm256_and_si256(_mm256_castps_si256(clamped), _mm256_set1_epi32(0x7f800000));
  const __m256i m = _mm256_max_epi32(_mm256_add_epi32(e, _mm256_set1_epi32(kDrop << 23)),
                                     _mm256_set1_epi32(kMagicBits));
  const __m256i s = _mm256_castps_si256(_mm256_add_ps(clamped, _mm256_castsi256_ps(m)));
  return _mm256_add_epi32(_mm256_sub_epi32(s, m), _mm256_srli_epi32(m, kDrop));
}

// Two vectors of biased codes (and their floats) as 16-bit values that packs_epi16 turns into
// the FP8 bytes: code for a positive float, code - 128 (the byte 0x80 | code) for a negative
// one, and for NaN a value above 127, which saturates to 0x7F, NaN's code in both formats,
// signless. The sign costs two operations per 16 values here against three per 8 in 32-bit
// lanes: packs_epi32 turns a float's bits into -32768 when negative (as an int32 a negative
// non-NaN float is at most -2^23) and 0..32767 when positive, and min/max map those to
// -kCodeBias - 128 and -kCodeBias. A negative NaN's bits may land in between: still far below
// its code.
template <int kMant, int kBias>
MANTISSA_AVX2 inline __m256i fp8_words(__m256i c0, __m256i c1, __m256i x0, __m256i x1) {
  constexpr int kBias16 = kCodeBias<kMant, kBias>;
  const __m256i sign =
      _mm256_max_epi16(_mm256_min_epi16(_mm256_packs_epi32(x0, x1), _mm256_set1_epi16(-kBias16)),
                       _mm256_set1_epi16(-kBias16 - 128));
  return _mm256_add_epi16(_mm256_packs_epi32(c0, c1), sign);
}

MANTISSA_AVX2 inline __m256i load_bits(const float* p) {
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
}

// The float whose code is the overflow code under `mode`: every larger value saturates to it.
template <int kMant, int kBias, uint32_t kMaxCode, uint32_t kNoSatCode>
MANTISSA_AVX2 inline __m256 fp8_overflow(Fp8Saturation mode) {
  const uint32_t overflow_code = mode == Fp8Saturation::kSatFinite ? kMaxCode : kNoSatCode;
  return _mm256_castsi256_ps(_mm256_set1_epi32(
      static_cast<int>((overflow_code << (23 - kMant)) + ((127u - kBias) << 23))));
}

// The codes of src[0..32), in order: four vectors of codes packed into 32 bytes.
template <int kMant, int kBias>
MANTISSA_AVX2 inline __m256i fp8_codes32(const float* src, __m256 overflow) {
  _mm_prefetch(reinterpret_cast<const char*>(src + kPrefetchFloats), _MM_HINT_T0);
  _mm_prefetch(reinterpret_cast<const char*>(src + kPrefetchFloats + 16), _MM_HINT_T0);
  const __m256i x0 = load_bits(src), x1 = load_bits(src + 8);
  const __m256i x2 = load_bits(src + 16), x3 = load_bits(src + 24);
  const __m256i w01 = fp8_words<kMant, kBias>(fp8_codes_biased<kMant, kBias>(x0, overflow),
                                              fp8_codes_biased<kMant, kBias>(x1, overflow), x0, x1);
  const __m256i w23 = fp8_words<kMant, kBias>(fp8_codes_biased<kMant, kBias>(x2, overflow),
                                              fp8_codes_biased<kMant, kBias>(x3, overflow), x2, x3);
  // The packs work within 128-bit lanes: bytes come out as x0[0..3] x1[0..3] x2[0..3]
  // x3[0..3] x0[4..7] ...; the dword permute puts them back in order.
  const __m256i bytes = _mm256_packs_epi16(w01, w23);
  return _mm256_permutevar8x32_epi32(bytes, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

template <int kMant, int kBias, uint32_t kMaxCode, uint32_t kNoSatCode>
MANTISSA_AVX2 void f32_to_fp8(const float* src, uint8_t* dst, int64_t n, Fp8Saturation mode,
                              uint8_t (*scalar)(float, Fp8Saturation)) {
  const __m256 overflow = fp8_overflow<kMant, kBias, kMaxCode, kNoSatCode>(mode);
  int64_t i = 0;
  for (; i + 32 <= n; i += 32)
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + i),
                        fp8_codes32<kMant, kBias>(src + i, overflow));
  for (; i + 8 <= n; i += 8) {
    const __m256i x = load_bits(src + i);
    const __m256i c = fp8_codes_biased<kMant, kBias>(x, overflow);
    const __m256i b =
        _mm256_packs_epi16(fp8_words<kMant, kBias>(c, c, x, x), _mm256_setzero_si256());
    // Bytes 0..3 of each 128-bit lane are the lane's four codes; join the two lanes.
    const __m128i joined =
        _mm_unpacklo_epi32(_mm256_castsi256_si128(b), _mm256_extracti128_si256(b, 1));
    _mm_storel_epi64(reinterpret_cast<__m128i*>(dst + i), joined);
  }
  for (; i < n; ++i) dst[i] = scalar(src[i], mode);
}

}  // namespace

MANTISSA_AVX2 void f32_to_bf16_avx2(const float* src, uint16_t* dst, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    _mm_prefetch(reinterpret_cast<const char*>(src + i + kPrefetchFloats), _MM_HINT_T0);
    store_bf16x16(dst + i, _mm256_loadu_ps(src + i), _mm256_loadu_ps(src + i + 8));
  }
  for (; i < n; ++i) dst[i] = float_to_bf16_bits(src[i]);
}

MANTISSA_AVX2 void bf16_to_f32_avx2(const uint16_t* src, float* dst, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i));
    const __m256i f = _mm256_slli_epi32(_mm256_cvtepu16_epi32(b), 16);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + i), f);
  }
  for (; i < n; ++i) dst[i] = bf16_bits_to_float(src[i]);
}

MANTISSA_AVX2_F16C void f32_to_f16_avx2(const float* src, uint16_t* dst, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i), h);
  }
  for (; i < n; ++i) dst[i] = float_to_half_bits(src[i]);
}

MANTISSA_AVX2_F16C void f16_to_f32_avx2(const uint16_t* src, float* dst, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i));
    _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(h));
  }
  for (; i < n; ++i) dst[i] = half_bits_to_float(src[i]);
}

// The streaming forms (convert_simd.h): the elements before the first 32-byte boundary of dst
// and the tail go through the plain kernel above; the aligned middle is stored with
// non-temporal stores, 32 bytes per store, and an SFENCE orders them before the caller's later
// stores (another thread reading dst after the parallel region's barrier sees them).
namespace {

template <typename D>
int64_t elements_to_boundary(const D* dst, int64_t n) {
  const auto misalign = reinterpret_cast<uintptr_t>(dst) & 31;
  if (misalign % sizeof(D) != 0) return n;  // never aligns: all of it the plain way
  return std::min<int64_t>(n, static_cast<int64_t>(((32 - misalign) & 31) / sizeof(D)));
}

// The streaming form of `plain`: plain over the head and the tail, block(i) (the 32 bytes of
// output of elements [i, i + 32 / sizeof(D))) stored non-temporally in between.
// (Compiled for F16C too, so that the f16 kernels' blocks inline; every CPU at level avx2 has it.)
template <typename S, typename D, typename Block>
MANTISSA_AVX2_F16C inline void stream_between(const S* src, D* dst, int64_t n,
                                              void (*plain)(const S*, D*, int64_t), Block block) {
  constexpr int64_t kStep = 32 / static_cast<int64_t>(sizeof(D));
  const int64_t head = elements_to_boundary(dst, n);
  plain(src, dst, head);
  int64_t i = head;
  for (; i + kStep <= n; i += kStep)
    _mm256_stream_si256(reinterpret_cast<__m256i*>(dst + i), block(i));
  _mm_sfence();
  plain(src + i, dst + i, n - i);
}

// f32_to_fp8 with the 32-byte blocks stored non-temporally (as stream_between; the head before
// the first 32-byte boundary of dst and the tail the plain way).
template <int kMant, int kBias, uint32_t kMaxCode, uint32_t kNoSatCode>
MANTISSA_AVX2 void f32_to_fp8_stream(const float* src, uint8_t* dst, int64_t n, Fp8Saturation mode,
                                     uint8_t (*scalar)(float, Fp8Saturation)) {
  const int64_t head = elements_to_boundary(dst, n);
  f32_to_fp8<kMant, kBias, kMaxCode, kNoSatCode>(src, dst, head, mode, scalar);
  const __m256 overflow = fp8_overflow<kMant, kBias, kMaxCode, kNoSatCode>(mode);
  int64_t i = head;
  for (; i + 32 <= n; i += 32)
    _mm256_stream_si256(reinterpret_cast<__m256i*>(dst + i),
                        fp8_codes32<kMant, kBias>(src + i, overflow));
  _mm_sfence();
  f32_to_fp8<kMant, kBias, kMaxCode, kNoSatCode>(src + i, dst + i, n - i, mode, scalar);
}

}  // namespace

MANTISSA_AVX2 void f32_to_bf16_avx2_stream(const float* src, uint16_t* dst, int64_t n) {
  stream_between(src, dst, n, f32_to_bf16_avx2, [src](int64_t i) MANTISSA_AVX2_BLOCK {
    _mm_prefetch(reinterpret_cast<const char*>(src + i + kPrefetchFloats), _MM_HINT_T0);
    return bf16x16(_mm256_loadu_ps(src + i), _mm256_loadu_ps(src + i + 8));
  });
}

MANTISSA_AVX2 void bf16_to_f32_avx2_stream(const uint16_t* src, float* dst, int64_t n) {
  stream_between(src, dst, n, bf16_to_f32_avx2, [src](int64_t i) MANTISSA_AVX2_BLOCK {
    const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i));
    return _mm256_slli_epi32(_mm256_cvtepu16_epi32(b), 16);
  });
}

MANTISSA_AVX2_F16C void f32_to_f16_avx2_stream(const float* src, uint16_t* dst, int64_t n) {
  stream_between(src, dst, n, f32_to_f16_avx2, [src](int64_t i) MANTISSA_AVX2_F16C_BLOCK {
    const __m128i lo = _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT);
    const __m128i hi = _mm256_cvtps_ph(_mm256_loadu_ps(src + i + 8), _MM_FROUND_TO_NEAREST_INT);
    return _mm256_inserti128_si256(_mm256_castsi128_si256(lo), hi, 1);
  });
}

MANTISSA_AVX2_F16C void f16_to_f32_avx2_stream(const uint16_t* src, float* dst, int64_t n) {
  stream_between(src, dst, n, f16_to_f32_avx2, [src](int64_t i) MANTISSA_AVX2_F16C_BLOCK {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i));
    return _mm256_castps_si256(_mm256_cvtph_ps(h));
  });
}

void f32_to_fp8_e4m3_avx2(const float* src, uint8_t* dst, int64_t n, Fp8Saturation mode) {
  f32_to_fp8<3, 7, 0x7eu, 0x7fu>(src, dst, n, mode, float_to_fp8_e4m3_bits);
}

void f32_to_fp8_e5m2_avx2(const float* src, uint8_t* dst, int64_t n, Fp8Saturation mode) {
  f32_to_fp8<2, 15, 0x7bu, 0x7cu>(src, dst, n, mode, float_to_fp8_e5m2_bits);
}

void f32_to_fp8_e4m3_avx2_stream(const float* src, uint8_t* dst, int64_t n, Fp8Saturation mode) {
  f32_to_fp8_stream<3, 7, 0x7eu, 0x7fu>(src, dst, n, mode, float_to_fp8_e4m3_bits);
}

void f32_to_fp8_e5m2_avx2_stream(const float* src, uint8_t* dst, int64_t n, Fp8Saturation mode) {
  f32_to_fp8_stream<2, 15, 0x7bu, 0x7cu>(src, dst, n, mode, float_to_fp8_e5m2_bits);
}

}  // namespace mantissa::convert_detail
