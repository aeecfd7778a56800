// AVX2 8-bit Adam kernels (adam8bit_kernels.h): the scalar kernels eight lanes at a time, with
// gathers for the map lookups. Compiled for "avx2" only, not "fma", so the compiler cannot
// contract a product and a sum into one rounding: the bits equal the scalar kernels'.
#include <immintrin.h>

#include <algorithm>
#include <cmath>

#include "kernels/cpu/optim/adam8bit_kernels.h"
#include "kernels/cpu/quant/blockwise_dynamic.h"

#define MANTISSA_AVX2 __attribute__((target("avx2")))

namespace mantissa::kernels::optim {
namespace {

using quant::CodeIndexTable;

MANTISSA_AVX2 inline __m256 abs_ps(__m256 x) { return _mm256_andnot_ps(_mm256_set1_ps(-0.0f), x); }

MANTISSA_AVX2 inline float hmax(__m256 x) {
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, x);
  float r = lanes[0];
  for (int i = 1; i < 8; ++i) r = std::max(r, lanes[i]);
  return r;
}

// Eight codes to eight int32 lanes.
MANTISSA_AVX2 inline __m256i load_codes(const uint8_t* q) {
  return _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(q)));
}

// The low byte of each int32 lane, stored as eight bytes.
MANTISSA_AVX2 inline void store_codes(uint8_t* q, __m256i idx) {
  const __m256i pick =
      _mm256_setr_epi8(0, 4, 8, 12, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, 0, 4, 8, 12, -1,
                       -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1);
  const __m256i packed = _mm256_permutevar8x32_epi32(_mm256_shuffle_epi8(idx, pick),
                                                     _mm256_setr_epi32(0, 4, 1, 1, 1, 1, 1, 1));
  _mm_storel_epi64(reinterpret_cast<__m128i*>(q), _mm256_castsi256_si128(packed));
}

// CodeIndexTable::index on eight lanes (one gather).
MANTISSA_AVX2 inline __m256i nearest_index(const CodeIndexTable& t, __m256 x) {
  const __m256i bits = _mm256_castps_si256(x);
  const __m256i key = _mm256_srli_epi32(_mm256_and_si256(bits, _mm256_set1_epi32(0x7fffffff)), 15);
  __m256i bin =
      _mm256_sub_epi32(key, _mm256_set1_epi32(static_cast<int>(CodeIndexTable::kMinKey) - 1));
  bin = _mm256_max_epi32(bin, _mm256_setzero_si256());
  bin = _mm256_min_epi32(bin, _mm256_set1_epi32(CodeIndexTable::kBinsPerSign - 1));
  const __m256i negative = _mm256_srai_epi32(bits, 31);  // all ones for x < 0
  bin = _mm256_add_epi32(
      bin, _mm256_and_si256(negative, _mm256_set1_epi32(CodeIndexTable::kBinsPerSign)));
  const __m256i e = _mm256_i32gather_epi32(reinterpret_cast<const int*>(t.entry.data()), bin, 4);
  const __m256i low_mask = _mm256_set1_epi32(0x7fff);
  const __m256i low = _mm256_and_si256(bits, low_mask), mid = _mm256_and_si256(e, low_mask);
  // Past the bin's midpoint: low > mid for x > 0, low < mid for x < 0; only where there is one.
  const __m256i has = _mm256_set1_epi32(static_cast<int>(CodeIndexTable::kHasMidpoint));
  const __m256i past = _mm256_and_si256(
      _mm256_blendv_epi8(_mm256_cmpgt_epi32(low, mid), _mm256_cmpgt_epi32(mid, low), negative),
      _mm256_cmpeq_epi32(_mm256_and_si256(e, has), has));
  const __m256i first = _mm256_and_si256(_mm256_srli_epi32(e, 16), _mm256_set1_epi32(0xff));
  // past is all ones (-1) where true: subtracting it adds one.
  return _mm256_sub_epi32(first, past);
}

}  // namespace

MANTISSA_AVX2 void adam8bit_block_avx2(const Adam8bitScalars& s, const Adam8bitMaps& maps, float* p,
                                       const float* g, uint8_t* q1, uint8_t* q2, float* absmax1,
                                       float* absmax2, int64_t n) {
  if (n <= 0) return;
  if (!maps.index1->exact || !maps.index2->exact) {
    adam8bit_block_scalar(s, maps, p, g, q1, q2, absmax1, absmax2, n);
    return;
  }
  alignas(32) float m[kAdam8bitBlockSize];
  alignas(32) float v[kAdam8bitBlockSize];
  const float a1 = *absmax1, a2 = *absmax2;
  const __m256 va1 = _mm256_set1_ps(a1), va2 = _mm256_set1_ps(a2);
  const __m256 b1 = _mm256_set1_ps(s.beta1), omb1 = _mm256_set1_ps(s.one_minus_beta1);
  const __m256 b2 = _mm256_set1_ps(s.beta2), omb2 = _mm256_set1_ps(s.one_minus_beta2);
  const __m256 step = _mm256_set1_ps(s.step_size), eps = _mm256_set1_ps(s.eps_scaled);
  const __m256 decay = _mm256_set1_ps(s.decay);
  __m256 max1 = _mm256_setzero_ps(), max2 = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 gi = _mm256_loadu_ps(g + i);
    const __m256 c1 = _mm256_i32gather_ps(maps.code1, load_codes(q1 + i), 4);
    const __m256 c2 = _mm256_i32gather_ps(maps.code2, load_codes(q2 + i), 4);
    const __m256 mi =
        _mm256_add_ps(_mm256_mul_ps(_mm256_mul_ps(c1, va1), b1), _mm256_mul_ps(omb1, gi));
    const __m256 vi = _mm256_add_ps(_mm256_mul_ps(_mm256_mul_ps(c2, va2), b2),
                                    _mm256_mul_ps(_mm256_mul_ps(omb2, gi), gi));
    _mm256_store_ps(m + i, mi);
    _mm256_store_ps(v + i, vi);
    max1 = _mm256_max_ps(max1, abs_ps(mi));
    max2 = _mm256_max_ps(max2, abs_ps(vi));
    const __m256 denom = _mm256_add_ps(_mm256_sqrt_ps(vi), eps);
    __m256 pi =
        _mm256_add_ps(_mm256_loadu_ps(p + i), _mm256_mul_ps(step, _mm256_div_ps(mi, denom)));
    if (s.apply_decay) pi = _mm256_mul_ps(pi, decay);
    _mm256_storeu_ps(p + i, pi);
  }
  float new_a1 = hmax(max1), new_a2 = hmax(max2);
  for (; i < n; ++i) {
    const float gi = g[i];
    const float mi = maps.code1[q1[i]] * a1 * s.beta1 + s.one_minus_beta1 * gi;
    const float vi = maps.code2[q2[i]] * a2 * s.beta2 + s.one_minus_beta2 * gi * gi;
    m[i] = mi;
    v[i] = vi;
    new_a1 = std::max(new_a1, std::fabs(mi));
    new_a2 = std::max(new_a2, std::fabs(vi));
    float pi = p[i] + s.step_size * (mi / (std::sqrt(vi) + s.eps_scaled));
    if (s.apply_decay) pi = pi * s.decay;
    p[i] = pi;
  }
  *absmax1 = new_a1;
  *absmax2 = new_a2;

  if (new_a1 == 0.0f) {
    std::fill(q1, q1 + n, maps.zero_index1);
  } else {
    const float inv = 1.0f / new_a1;
    const __m256 scale = _mm256_set1_ps(inv);
    const __m256i one = _mm256_set1_epi32(1);
    const __m256i nonnegative_from = _mm256_set1_epi32(maps.nonnegative_from1);
    int64_t j = 0;
    for (; j + 8 <= n; j += 8) {
      const __m256 mj = _mm256_load_ps(m + j);
      __m256i q = nearest_index(*maps.index1, _mm256_mul_ps(mj, scale));
      // Sign fix: where the entry's sign bit (q < nonnegative_from) differs from m's, step
      // toward m's sign.
      const __m256i differ = _mm256_xor_si256(_mm256_cmpgt_epi32(nonnegative_from, q),
                                              _mm256_srai_epi32(_mm256_castps_si256(mj), 31));
      const __m256i positive =
          _mm256_castps_si256(_mm256_cmp_ps(mj, _mm256_setzero_ps(), _CMP_GT_OQ));
      // +1 where m > 0, else -1.
      const __m256i toward =
          _mm256_sub_epi32(_mm256_and_si256(positive, _mm256_set1_epi32(2)), one);
      q = _mm256_add_epi32(q, _mm256_and_si256(differ, toward));
      store_codes(q1 + j, q);
    }
    for (; j < n; ++j) {
      int q = maps.index1->index(m[j] * inv);
      if ((q < maps.nonnegative_from1) != std::signbit(m[j])) q += m[j] > 0.0f ? 1 : -1;
      q1[j] = static_cast<uint8_t>(q);
    }
  }
  if (new_a2 == 0.0f) {
    std::fill(q2, q2 + n, maps.zero_index2);
  } else {
    const float inv = 1.0f / new_a2;
    const __m256 scale = _mm256_set1_ps(inv);
    int64_t j = 0;
    for (; j + 8 <= n; j += 8)
      store_codes(q2 + j, nearest_index(*maps.index2, _mm256_mul_ps(_mm256_load_ps(v + j), scale)));
    for (; j < n; ++j) q2[j] = maps.index2->index(v[j] * inv);
  }
}

MANTISSA_AVX2 void adam32_span_avx2(const Adam8bitScalars& s, float* p, const float* g, float* m,
                                    float* v, int64_t n) {
  const __m256 b1 = _mm256_set1_ps(s.beta1), omb1 = _mm256_set1_ps(s.one_minus_beta1);
  const __m256 b2 = _mm256_set1_ps(s.beta2), omb2 = _mm256_set1_ps(s.one_minus_beta2);
  const __m256 step = _mm256_set1_ps(s.step_size), eps = _mm256_set1_ps(s.eps_scaled);
  const __m256 decay = _mm256_set1_ps(s.decay);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 gi = _mm256_loadu_ps(g + i);
    const __m256 mi =
        _mm256_add_ps(_mm256_mul_ps(_mm256_loadu_ps(m + i), b1), _mm256_mul_ps(omb1, gi));
    const __m256 vi = _mm256_add_ps(_mm256_mul_ps(_mm256_loadu_ps(v + i), b2),
                                    _mm256_mul_ps(_mm256_mul_ps(omb2, gi), gi));
    _mm256_storeu_ps(m + i, mi);
    _mm256_storeu_ps(v + i, vi);
    const __m256 denom = _mm256_add_ps(_mm256_sqrt_ps(vi), eps);
    __m256 pi =
        _mm256_add_ps(_mm256_loadu_ps(p + i), _mm256_mul_ps(step, _mm256_div_ps(mi, denom)));
    if (s.apply_decay) pi = _mm256_mul_ps(pi, decay);
    _mm256_storeu_ps(p + i, pi);
  }
  if (i < n) adam32_span_scalar(s, p + i, g + i, m + i, v + i, n - i);
}

}  // namespace mantissa::kernels::optim
