// Packing a bitsandbytes NF4/FP4 B operand (gemm_lowbit.h) into the AVX2 GEMM's fp32 panels:
// nibbles are looked up in the 16-entry table, multiplied by their block's absmax and rounded
// to the layer's compute dtype, the same values quant::dequantize stores, but only a K block
// of one panel at a time. A Linear's forward reads its weight transposed (each panel column is
// a weight row, contiguous along k): those columns are decoded into a small stage and
// transposed by the f32 packer. Its input gradient reads the weight as it is (each k row of the
// panel is contiguous): decoded in place. Runs of 16 elements that start on a multiple of 16
// lie in one block (every block size is a multiple of 16) and in 8 whole bytes: a vector path
// of table lookups in the block's 16 scaled and rounded values; the rest is scalar.
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "kernels/cpu/gemm/gemm_avx2_impl.h"
#include "mantissa/core/bfloat16.h"

#define MANTISSA_GEMM_AVX2 __attribute__((target("avx2,fma,f16c")))

namespace mantissa::kernels::gemm_avx2 {
namespace {

MANTISSA_GEMM_AVX2 inline float round_scalar(float v, DType to) {
  if (to == kBFloat16) return bf16_bits_to_float(float_to_bf16_bits(v));
  if (to == kFloat16)
    return _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtps_ph(_mm_set_ss(v), _MM_FROUND_TO_NEAREST_INT)));
  return v;
}

MANTISSA_GEMM_AVX2 inline float decode1(const GemmFourBit& s, int64_t i) {
  const uint8_t byte = s.packed[i >> 1];
  const int code = (i & 1) ? (byte & 0xF) : (byte >> 4);
  return round_scalar(s.table[code] * s.absmax[i / s.blocksize], s.round_to);
}

// bf16 RNE as float_to_bf16_bits (NaN kept quiet with its sign), back in fp32.
MANTISSA_GEMM_AVX2 inline __m256 round_bf16(__m256 v) {
  const __m256i x = _mm256_castps_si256(v);
  const __m256i hi = _mm256_set1_epi32(static_cast<int>(0xFFFF0000u));
  const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(x, 16), _mm256_set1_epi32(1));
  const __m256i r =
      _mm256_and_si256(_mm256_add_epi32(x, _mm256_add_epi32(_mm256_set1_epi32(0x7FFF), lsb)), hi);
  const __m256i q = _mm256_and_si256(_mm256_or_si256(x, _mm256_set1_epi32(0x400000)), hi);
  const __m256 nan = _mm256_cmp_ps(v, v, _CMP_UNORD_Q);
  return _mm256_blendv_ps(_mm256_castsi256_ps(r), _mm256_castsi256_ps(q), nan);
}

MANTISSA_GEMM_AVX2 inline __m256 round_vec(__m256 v, DType to) {
  if (to == kBFloat16) return round_bf16(v);
  if (to == kFloat16) return _mm256_cvtph_ps(_mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT));
  return v;
}

MANTISSA_GEMM_AVX2 inline __m256 lookup16(__m256 lo, __m256 hi, __m256i idx) {
  const __m256 a = _mm256_permutevar8x32_ps(lo, idx);
  const __m256 b = _mm256_permutevar8x32_ps(hi, idx);
  return _mm256_blendv_ps(a, b, _mm256_castsi256_ps(_mm256_slli_epi32(idx, 28)));
}

// out[j] = decode1(s, first + j) for j < n.
MANTISSA_GEMM_AVX2 void decode_run(const GemmFourBit& s, int64_t first, int64_t n, float* out) {
  const int64_t end = first + n;
  int64_t i = first;
  for (; i < end && (i & 15) != 0; ++i) out[i - first] = decode1(s, i);
  if (i + 16 <= end) {
    // The 16 values a block can hold, round(table[c] * absmax) for every code c, are computed
    // once per block; then each element is one lookup (the same bits as decode1).
    const __m256 lo = _mm256_loadu_ps(s.table), hi = _mm256_loadu_ps(s.table + 8);
    const __m256i nib = _mm256_set1_epi32(0xF);
    int64_t block = -1;
    __m256 slo = lo, shi = hi;
    for (; i + 16 <= end; i += 16) {
      if (i / s.blocksize != block) {
        block = i / s.blocksize;
        const __m256 scale = _mm256_set1_ps(s.absmax[block]);
        slo = round_vec(_mm256_mul_ps(lo, scale), s.round_to);
        shi = round_vec(_mm256_mul_ps(hi, scale), s.round_to);
      }
      const __m256i bytes =
          _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(s.packed + i / 2)));
      const __m256 even = lookup16(slo, shi, _mm256_srli_epi32(bytes, 4));
      const __m256 odd = lookup16(slo, shi, _mm256_and_si256(bytes, nib));
      const __m256 a = _mm256_unpacklo_ps(even, odd);  // e0 e1 e2 e3 | e8 e9 e10 e11
      const __m256 b = _mm256_unpackhi_ps(even, odd);  // e4 e5 e6 e7 | e12 e13 e14 e15
      float* o = out + (i - first);
      _mm256_storeu_ps(o, _mm256_permute2f128_ps(a, b, 0x20));
      _mm256_storeu_ps(o + 8, _mm256_permute2f128_ps(a, b, 0x31));
    }
  }
  for (; i < end; ++i) out[i - first] = decode1(s, i);
}

}  // namespace

MANTISSA_GEMM_AVX2 void pack_b_four_bit(const GemmFourBit& src, int64_t first, int64_t ps,
                                        int64_t ks, int count, int64_t K, float* dst) {
  if (ks == 1) {
    // Panel columns contiguous along k: decode each into a stage, then transpose into the panel.
    constexpr int64_t kStageK = 256;
    alignas(32) float stage[kNR * kStageK];
    for (int64_t k0 = 0; k0 < K; k0 += kStageK) {
      const int64_t kn = std::min(kStageK, K - k0);
      for (int p = 0; p < count; ++p) decode_run(src, first + p * ps + k0, kn, stage + p * kn);
      pack_b(kFloat32, stage, kn, 1, count, kn, dst + k0 * kNR);
    }
    return;
  }
  if (count < kNR) std::memset(dst, 0, sizeof(float) * static_cast<size_t>(K) * kNR);
  if (ps == 1) {
    for (int64_t k = 0; k < K; ++k) decode_run(src, first + k * ks, count, dst + k * kNR);
    return;
  }
  for (int64_t k = 0; k < K; ++k)
    for (int p = 0; p < count; ++p) dst[k * kNR + p] = decode1(src, first + p * ps + k * ks);
}

}  // namespace mantissa::kernels::gemm_avx2
