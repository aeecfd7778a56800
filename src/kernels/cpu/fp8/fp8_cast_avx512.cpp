// AVX-512 (F, BW, VL) FP8 cast and dequantisation. The cast takes the saturating codes of the
// bulk conversion (core/fp8_codes_avx512.h) and adds the amax and the saturation/flush counts;
// the dequantisation reads the codes' bf16 bit patterns from a 256-entry table held in eight
// registers (four two-register word permutes and two mask blends per 32 codes) instead of
// gathering floats, which is slow on recent Intel cores. Tails use the scalar path; every
// function gives the scalar path's bits (tests/fp8/test_fp8_cast.cpp).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
// (GCC 12 reports _mm512_reduce_max_epu32's _mm256_undefined_si256 as uninitialized.)
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>

#include <array>
#include <bit>

#include "core/bf16_rne_avx512.h"
#include "core/fp8_codes_avx512.h"
#include "kernels/cpu/fp8/fp8_cast.h"
#include "mantissa/core/bfloat16.h"
#include "mantissa/core/float8.h"

#define MANTISSA_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,f16c,fma")))

namespace mantissa::kernels::fp8::detail {
namespace {

MANTISSA_AVX512 inline __m512 load16(const void* src, DType dtype, int64_t i) {
  if (dtype == kFloat32) return _mm512_loadu_ps(static_cast<const float*>(src) + i);
  const __m256i h =
      _mm256_loadu_si256(reinterpret_cast<const __m256i*>(static_cast<const uint16_t*>(src) + i));
  if (dtype == kFloat16) return _mm512_cvtph_ps(h);
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

// The bf16 bits of each code's value (scale_inv 1) from the codes in int32 lanes, by arithmetic:
// every FP8 value is a bf16 value. E4M3: a normal code's bits are (m << 4) + (120 << 7) (the
// exponent rebiased from 7 to 127, three mantissa bits moved to the top of bf16's seven), a
// subnormal one is m * 2^-9 (converted exactly); E5M2 is the top byte of an IEEE half. `nan_bits`
// (the table's bits for code 0x7f, the only NaN the cast writes) replaces NaN lanes.
template <int kMant>
MANTISSA_AVX512 inline __m256i widen_codes(__m512i code, __m512i nan_bits) {
  const __m512i m = _mm512_and_si512(code, _mm512_set1_epi32(0x7f));
  __m512i bits;
  if constexpr (kMant == 3) {
    const __m512i normal = _mm512_add_epi32(_mm512_slli_epi32(m, 4), _mm512_set1_epi32(120 << 7));
    const __m512 sub = _mm512_mul_ps(_mm512_cvtepi32_ps(m), _mm512_set1_ps(0x1p-9f));
    const __m512i subbits = _mm512_srli_epi32(_mm512_castps_si512(sub), 16);
    bits = _mm512_mask_mov_epi32(normal, _mm512_cmplt_epu32_mask(m, _mm512_set1_epi32(8)), subbits);
  } else {
    const __m256i half = _mm512_cvtepi32_epi16(_mm512_slli_epi32(m, 8));
    bits = _mm512_srli_epi32(_mm512_castps_si512(_mm512_cvtph_ps(half)), 16);
  }
  bits =
      _mm512_or_si512(bits, _mm512_slli_epi32(_mm512_and_si512(code, _mm512_set1_epi32(0x80)), 8));
  bits = _mm512_mask_mov_epi32(bits, _mm512_cmpeq_epi32_mask(m, _mm512_set1_epi32(0x7f)), nan_bits);
  return _mm512_cvtepi32_epi16(bits);
}

// kWiden: also writes the codes' bf16 bits to `widened` (as dequantize(..., bf16, 1) would).
// The saturation and flush counts accumulate in vector lanes, added up once at the end.
// scales: null (every element times `scale`) or element i times scales[i].
template <int kMant, int kBias, uint32_t kMaxCode, bool kWiden>
MANTISSA_AVX512 CastStats cast_loop(const void* src, DType src_dtype, uint8_t* dst,
                                    uint16_t* widened, uint16_t nan_bits, int64_t n, float scale,
                                    const float* scales, float max_value) {
  const __m512 vscale = _mm512_set1_ps(scale);
  const __m512 vmax = _mm512_set1_ps(max_value);
  const __m512 zero = _mm512_setzero_ps();
  const __m512i one = _mm512_set1_epi32(1);
  const __m512i vnan = _mm512_set1_epi32(nan_bits);
  __m512 amax = zero;
  __m512i sat_lanes = _mm512_setzero_si512(), flush_lanes = _mm512_setzero_si512();
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512 x = load16(src, src_dtype, i);
    // As in the AVX2 loop: max_ps returns its second operand when the first is NaN.
    amax = _mm512_max_ps(_mm512_abs_ps(x), amax);
    const __m512 y = _mm512_mul_ps(x, scales ? _mm512_loadu_ps(scales + i) : vscale);
    // Saturating: overflow and inf give the largest finite code (NaN gives 0x7F).
    const __m512i codes = fp8_codes<kMant, kBias, kMaxCode>(_mm512_castps_si512(y), kMaxCode);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i), _mm512_cvtepi32_epi8(codes));
    if constexpr (kWiden)
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(widened + i), widen_codes<kMant>(codes, vnan));
    const __mmask16 sat = _mm512_cmp_ps_mask(_mm512_abs_ps(y), vmax, _CMP_GT_OQ);
    const __mmask16 flush = _mm512_mask_testn_epi32_mask(_mm512_cmp_ps_mask(x, zero, _CMP_NEQ_OQ),
                                                         codes, _mm512_set1_epi32(0x7f));
    sat_lanes = _mm512_mask_add_epi32(sat_lanes, sat, sat_lanes, one);
    flush_lanes = _mm512_mask_add_epi32(flush_lanes, flush, flush_lanes, one);
  }
  alignas(64) float lanes[16];
  _mm512_store_ps(lanes, amax);
  const DType fp8 = kMant == 3 ? kFloat8_e4m3fn : kFloat8_e5m2;
  const CastStats st = finish_simd_cast(lanes, 16, _mm512_reduce_add_epi32(sat_lanes),
                                        _mm512_reduce_add_epi32(flush_lanes), src, src_dtype, dst,
                                        i, n, scale, fp8, scales);
  if constexpr (kWiden) {
    const float* table = decode_table(fp8);
    for (int64_t k = i; k < n; ++k) widened[k] = float_to_bf16_bits(table[dst[k]]);
  }
  return st;
}

// The bf16 bit pattern of every code's value. Every FP8 value (NaN included) is a bf16 value, so
// widening these bits gives decode_table's floats exactly; `exact` records that this holds.
struct Bf16CodeTable {
  alignas(64) std::array<uint16_t, 256> bits{};
  bool exact = true;
};

const Bf16CodeTable& bf16_code_table(DType fp8) {
  static const auto tables = [] {
    std::array<Bf16CodeTable, 2> t;
    for (int f = 0; f < 2; ++f) {
      const float* decoded = decode_table(f == 0 ? kFloat8_e4m3fn : kFloat8_e5m2);
      for (int c = 0; c < 256; ++c) {
        const uint32_t b = std::bit_cast<uint32_t>(decoded[c]);
        t[f].bits[c] = static_cast<uint16_t>(b >> 16);
        t[f].exact = t[f].exact && (b & 0xffffu) == 0 && float_to_bf16_bits(decoded[c]) == b >> 16;
      }
    }
    return t;
  }();
  return fp8 == kFloat8_e4m3fn ? tables[0] : tables[1];
}

}  // namespace

// amax_avx512 of a bfloat16 or float16 buffer in 16-bit lanes, 64 values a step.
MANTISSA_AVX512 Amax amax16_avx512(const uint16_t* p, DType src_dtype, int64_t n) {
  const __m512i abs = _mm512_set1_epi16(0x7fff);
  const __m512i inf = _mm512_set1_epi16(static_cast<int16_t>(inf_bits_of(src_dtype)));
  __m512i best0 = _mm512_setzero_si512(), best1 = best0, raw0 = best0, raw1 = best0;
  int64_t i = 0;
  for (; i + 64 <= n; i += 64) {
    const __m512i a0 = _mm512_and_si512(_mm512_loadu_si512(p + i), abs);
    const __m512i a1 = _mm512_and_si512(_mm512_loadu_si512(p + i + 32), abs);
    raw0 = _mm512_max_epu16(raw0, a0);
    raw1 = _mm512_max_epu16(raw1, a1);
    best0 = _mm512_mask_max_epu16(best0, _mm512_cmple_epu16_mask(a0, inf), best0, a0);
    best1 = _mm512_mask_max_epu16(best1, _mm512_cmple_epu16_mask(a1, inf), best1, a1);
  }
  alignas(64) uint16_t best[32], raw[32];
  _mm512_store_si512(best, _mm512_max_epu16(best0, best1));
  _mm512_store_si512(raw, _mm512_max_epu16(raw0, raw1));
  uint32_t b = 0, w = 0;
  for (int l = 0; l < 32; ++l) {
    b = best[l] > b ? best[l] : b;
    w = raw[l] > w ? raw[l] : w;
  }
  const Amax lanes = amax_of_bits(b, w, src_dtype);
  if (i == n) return lanes;
  const Amax tail = amax_scalar(p + i, src_dtype, n - i);
  return {tail.amax > lanes.amax ? tail.amax : lanes.amax, tail.nan || lanes.nan};
}

MANTISSA_AVX512 Amax amax_avx512(const void* src, DType src_dtype, int64_t n) {
  if (src_dtype != kFloat32) return amax16_avx512(static_cast<const uint16_t*>(src), src_dtype, n);
  int64_t i = 0;
  __m512i best = _mm512_setzero_si512(), raw = _mm512_setzero_si512();
  const __m512i inf = _mm512_set1_epi32(static_cast<int>(inf_bits_of(src_dtype)));
  const __m512i abs = _mm512_set1_epi32(static_cast<int>(abs_mask_of(src_dtype)));
  for (; i + 16 <= n; i += 16) {
    const __m512i v =
        src_dtype == kFloat32
            ? _mm512_loadu_si512(static_cast<const uint32_t*>(src) + i)
            : _mm512_cvtepu16_epi32(_mm256_loadu_si256(
                  reinterpret_cast<const __m256i*>(static_cast<const uint16_t*>(src) + i)));
    const __m512i a = _mm512_and_si512(v, abs);
    raw = _mm512_max_epu32(raw, a);
    best = _mm512_mask_max_epu32(best, _mm512_cmple_epu32_mask(a, inf), best, a);
  }
  const Amax lanes =
      amax_of_bits(_mm512_reduce_max_epu32(best), _mm512_reduce_max_epu32(raw), src_dtype);
  if (i == n) return lanes;
  const auto* rest = static_cast<const char*>(src) + i * static_cast<int64_t>(src_dtype.itemsize());
  const Amax tail = amax_scalar(rest, src_dtype, n - i);
  return {tail.amax > lanes.amax ? tail.amax : lanes.amax, tail.nan || lanes.nan};
}

MANTISSA_AVX512 CastStats scaled_cast_avx512(const void* src, DType src_dtype, uint8_t* dst,
                                             int64_t n, float scale, DType fp8) {
  if (fp8 == kFloat8_e4m3fn) {
    return cast_loop<3, 7, 0x7e, false>(src, src_dtype, dst, nullptr, 0, n, scale, nullptr,
                                        Float8E4M3::kMax);
  }
  return cast_loop<2, 15, 0x7b, false>(src, src_dtype, dst, nullptr, 0, n, scale, nullptr,
                                       Float8E5M2::kMax);
}

MANTISSA_AVX512 CastStats scaled_cast_each_avx512(const void* src, DType src_dtype, uint8_t* dst,
                                                  int64_t n, const float* scales, DType fp8) {
  if (fp8 == kFloat8_e4m3fn) {
    return cast_loop<3, 7, 0x7e, false>(src, src_dtype, dst, nullptr, 0, n, 0.0f, scales,
                                        Float8E4M3::kMax);
  }
  return cast_loop<2, 15, 0x7b, false>(src, src_dtype, dst, nullptr, 0, n, 0.0f, scales,
                                       Float8E5M2::kMax);
}

MANTISSA_AVX512 CastStats scaled_cast_widened_avx512(const void* src, DType src_dtype, uint8_t* dst,
                                                     uint16_t* widened, int64_t n, float scale,
                                                     DType fp8) {
  const Bf16CodeTable& table = bf16_code_table(fp8);
  if (!table.exact) {  // not on any IEEE machine; keep the two passes then
    const CastStats st = scaled_cast_avx512(src, src_dtype, dst, n, scale, fp8);
    dequantize_avx512(dst, fp8, widened, kBFloat16, n, 1.0f);
    return st;
  }
  if (fp8 == kFloat8_e4m3fn) {
    return cast_loop<3, 7, 0x7e, true>(src, src_dtype, dst, widened, table.bits[0x7f], n, scale,
                                       nullptr, Float8E4M3::kMax);
  }
  return cast_loop<2, 15, 0x7b, true>(src, src_dtype, dst, widened, table.bits[0x7f], n, scale,
                                      nullptr, Float8E5M2::kMax);
}

MANTISSA_AVX512 void dequantize_avx512(const uint8_t* src, DType fp8, void* dst, DType dst_dtype,
                                       int64_t n, float scale_inv) {
  const Bf16CodeTable& table = bf16_code_table(fp8);
  if (!table.exact) {
    dequantize_avx2(src, fp8, dst, dst_dtype, n, scale_inv);
    return;
  }
  __m512i t[8];
  for (int k = 0; k < 8; ++k)
    t[k] = _mm512_load_si512(reinterpret_cast<const __m512i*>(table.bits.data() + 32 * k));
  const bool copy_bits = dst_dtype == kBFloat16 && scale_inv == 1.0f;
  const __m512 vs = _mm512_set1_ps(scale_inv);
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    const __m512i idx =
        _mm512_cvtepu8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + i)));
    // Each permute reads 64 entries with the index's low six bits; bits 6 and 7 pick among them.
    const __m512i q0 = _mm512_permutex2var_epi16(t[0], idx, t[1]);
    const __m512i q1 = _mm512_permutex2var_epi16(t[2], idx, t[3]);
    const __m512i q2 = _mm512_permutex2var_epi16(t[4], idx, t[5]);
    const __m512i q3 = _mm512_permutex2var_epi16(t[6], idx, t[7]);
    const __mmask32 bit6 = _mm512_test_epi16_mask(idx, _mm512_set1_epi16(64));
    const __mmask32 bit7 = _mm512_test_epi16_mask(idx, _mm512_set1_epi16(128));
    const __m512i bits = _mm512_mask_blend_epi16(bit7, _mm512_mask_blend_epi16(bit6, q0, q1),
                                                 _mm512_mask_blend_epi16(bit6, q2, q3));
    if (copy_bits) {
      _mm512_storeu_si512(static_cast<uint16_t*>(dst) + i, bits);
      continue;
    }
    for (int h = 0; h < 2; ++h) {
      const __m256i half =
          h == 0 ? _mm512_castsi512_si256(bits) : _mm512_extracti64x4_epi64(bits, 1);
      const __m512 v = _mm512_mul_ps(
          _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(half), 16)), vs);
      if (dst_dtype == kFloat32) {
        _mm512_storeu_ps(static_cast<float*>(dst) + i + 16 * h, v);
      } else {
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(static_cast<uint16_t*>(dst) + i + 16 * h),
                            _mm512_cvtepi32_epi16(mantissa::bf16_rne(_mm512_castps_si512(v))));
      }
    }
  }
  if (i < n) {
    void* rest = static_cast<char*>(dst) + i * static_cast<int64_t>(dst_dtype.itemsize());
    dequantize_scalar(src + i, fp8, rest, dst_dtype, n - i, scale_inv);
  }
}

}  // namespace mantissa::kernels::fp8::detail
