// The AVX2 (+FMA, F16C) NVFP4 cast of the random Hadamard transform's columns (hadamard.cpp):
// 16 rows x 8 columns transformed in registers (hadamard_avx2.h), register i holding element i of
// 8 blocks, cast from those registers without a store of the transform: the 8 blocks' amax,
// scales and factors as one vector, each element's codes rounded to nearest or stochastically
// (bytes of the 256-column groups' Philox words, one row a lane), and the codes transposed into
// each block's bytes. Blocks whose factor is NaN or infinite run the scalar body from the
// transform's rows.
#include <immintrin.h>

#include <limits>
#include <optional>

#include "kernels/cpu/mx/hadamard_avx2.h"
#include "kernels/cpu/mx/mx_cast.h"
#include "kernels/cpu/mx/nvfp4_lanes_avx2.h"

// The ISA is enabled after every header, so no inline library code is built for it.
#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")

namespace mantissa::kernels::mx::detail {
namespace {

using namespace scalar;
using namespace avx2_lanes;
using namespace nvfp4_avx2;

// The codes of 8 blocks held across registers (lane k of y[i]: element i of block k) as each
// block's 8 bytes, the even element in the low nibble: block k's at dst[k * stride].
inline void store_e2m1_columns(const __m256i* c, uint8_t* dst, int64_t stride) {
  __m256i p[8];
  for (int j = 0; j < 8; ++j) p[j] = _mm256_or_si256(c[2 * j], _mm256_slli_epi32(c[2 * j + 1], 4));
  // Per 128-bit half h: byte 4j + k' is pair j of block 4h + k' (pairs 0-3, then 4-7).
  const __m256i lo =
      _mm256_packus_epi16(_mm256_packus_epi32(p[0], p[1]), _mm256_packus_epi32(p[2], p[3]));
  const __m256i hi =
      _mm256_packus_epi16(_mm256_packus_epi32(p[4], p[5]), _mm256_packus_epi32(p[6], p[7]));
  // 4x4 byte transposes: dword k' becomes block 4h + k''s four pairs.
  const __m256i order = _mm256_setr_epi8(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15, 0, 4,
                                         8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
  const __m256i a = _mm256_shuffle_epi8(lo, order), b = _mm256_shuffle_epi8(hi, order);
  const __m256i q01 = _mm256_unpacklo_epi32(a, b);  // per half: blocks 4h, 4h + 1
  const __m256i q23 = _mm256_unpackhi_epi32(a, b);  // per half: blocks 4h + 2, 4h + 3
  const __m128i r[4] = {_mm256_castsi256_si128(q01), _mm256_castsi256_si128(q23),
                        _mm256_extracti128_si256(q01, 1), _mm256_extracti128_si256(q23, 1)};
  for (int t = 0; t < 4; ++t) {
    _mm_storel_epi64(reinterpret_cast<__m128i*>(dst + (2 * t) * stride), r[t]);
    _mm_storeh_pd(reinterpret_cast<double*>(dst + (2 * t + 1) * stride), _mm_castsi128_pd(r[t]));
  }
}

}  // namespace

void nvfp4_rht_columns_avx2(const void* src, DType dtype, int64_t cols, int64_t c0, int64_t m_begin,
                            int64_t m_end, const Nvfp4Encoding& e, uint8_t* codes, int64_t code_row,
                            uint8_t* scales, int64_t scale_row) {
  const bool sr = e.rounding == Fp4Rounding::kStochastic;
  const float ts = e.tensor_scale;
  std::optional<PhiloxKeys8> keys;
  if (sr) keys.emplace(e.seed);
  const StochasticCodeConstants8 sr_constants;
  const PhiloxCounter base = sr_counter(0, static_cast<uint64_t>(c0), e.offset);
  const __m256i rows_of_lanes = _mm256_add_epi32(_mm256_set1_epi32(static_cast<int>(base[1])),
                                                 _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  __m256i words[kRhtSize][4];  // element i's word q of the 256-column group, lane: the row
  int64_t group = -1;
  const __m256i abs_mask = _mm256_set1_epi32(0x7FFFFFFF);
  for (int64_t m0 = m_begin; m0 < m_end; m0 += kRhtSize) {
    __m256 v[kRhtSize];
    rht_avx2::butterflies8(src, dtype, cols, m0, c0, v);
    __m256i bits = _mm256_setzero_si256();
#pragma GCC unroll 16
    for (int64_t i = 0; i < kRhtSize; ++i) {
      v[i] = _mm256_mul_ps(v[i], _mm256_set1_ps(0.25f));
      bits = _mm256_max_epu32(bits, _mm256_and_si256(_mm256_castps_si256(v[i]), abs_mask));
    }
    const __m256i nan = _mm256_cmpgt_epi32(bits, _mm256_set1_epi32(0x7F800000));
    const __m256 amax = _mm256_castsi256_ps(
        _mm256_blendv_epi8(bits, _mm256_set1_epi32(static_cast<int>(kQuietNan)), nan));
    __m256i scale_codes;
    const __m256 factor = nvfp4_block_scales(amax, ts, scale_codes);
    uint8_t* cp = codes + c0 * code_row + m0 / 2;
    uint8_t* sp = scales + c0 * scale_row + m0 / kNvfp4Block;
    if (_mm256_movemask_ps(_mm256_cmp_ps(
            factor, _mm256_set1_ps(std::numeric_limits<float>::infinity()), _CMP_NLT_UQ)) != 0) {
      // A NaN or infinite factor (x = 0 makes x * factor NaN): the blocks from the transform's
      // rows, by the scalar body.
      rht_avx2::transpose8(v);
      rht_avx2::transpose8(v + 8);
      alignas(32) float rows[8][kRhtSize];
      for (int k = 0; k < 8; ++k) {
        _mm256_store_ps(rows[k], v[k]);
        _mm256_store_ps(rows[k] + 8, v[8 + k]);
        if (sr) {
          kScalarKernels.nvfp4_encode_sr(rows[k], kFloat32, kRhtSize, ts, nullptr, e.seed, e.offset,
                                         c0 + k, m0, cp + k * code_row, sp + k * scale_row);
        } else {
          kScalarKernels.nvfp4_encode(rows[k], kFloat32, kRhtSize, ts, nullptr, cp + k * code_row,
                                      sp + k * scale_row);
        }
      }
      continue;
    }
    alignas(16) uint8_t sb[16];
    _mm_storel_epi64(reinterpret_cast<__m128i*>(sb), bytes_of(scale_codes));
    for (int k = 0; k < 8; ++k) sp[k * scale_row] = sb[k];
    __m256i c[kRhtSize];
    if (sr) {
      const auto m = static_cast<uint64_t>(m0);
      if (m0 >> 8 != group) {
        // Element i of every block of the group reads counter block 16 * group + i
        // (philox.h, sr_byte).
        group = m0 >> 8;
        for (int64_t i = 0; i < kRhtSize; ++i)
          philox8_lanes_in_word1(*keys, static_cast<uint32_t>(sr_group_block(m) + i), rows_of_lanes,
                                 base[2], base[3], words[i]);
      }
      const int q = sr_word_index(m), byte = sr_byte_index(m);
      // No NaN here: one would have made a factor NaN, and the blocks the scalar body's above.
#pragma GCC unroll 16
      for (int64_t i = 0; i < kRhtSize; ++i)
        c[i] = e2m1_codes_stochastic<false>(_mm256_mul_ps(v[i], factor),
                                            random_bytes(words[i][q], byte, sr_constants),
                                            sr_constants);
    } else {
#pragma GCC unroll 16
      for (int64_t i = 0; i < kRhtSize; ++i)
        c[i] = e2m1_codes_of_numbers(_mm256_mul_ps(v[i], factor));
    }
    store_e2m1_columns(c, cp, code_row);
  }
}

}  // namespace mantissa::kernels::mx::detail

#pragma GCC pop_options
