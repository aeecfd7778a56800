// The block recipe's 1x128 tiles of bfloat16 cast to E4M3 on AVX2 (fp8_block.h,
// detail::block_tiles_bf16_e4m3_avx2): each tile's amax from the integer maximum of its
// magnitude bits, its scale, then its 128 codes from the values still in L1, sixteen tiles at a
// time (their maxima, then their scales, then their casts, so that the scalar work of one tile
// does not wait on the last). Under a power-of-2 scale (the recipe's default) with the tile's
// amax * scale within E4M3's range, the codes come sixteen a vector from 16-bit lanes
// (fp8_codes_avx2.h: codes16_pow2_in_range, or codes16_pow2 under the rare scales above 2^120;
// an exponent add and an integer rounding, nothing saturates or flushes); half a tile holding a
// value whose code is subnormal or flushed, and every tile under another scale or holding a NaN
// or an inf, takes float32 lanes (satfinite_codes) with the saturated and flushed counts kept in
// vector lanes across all the tiles of a call. 128x128 blocks are cast a group side by side
// (detail::blocks_128x128_bf16_e4m3_avx2): their maxima in one pass over the group's rows, then
// the casts while the rows are in cache. x^T's tiles are cast from x a band of 128 rows at a time
// (detail::block_columns_bf16_e4m3_avx2): a chunk of columns copied contiguous as their maxima
// are taken, sixteen columns' codes a row under per-column constants, transposed in registers
// and streamed out. The same amax, scale, codes and counts as the per-tile
// calls of the delayed-scaling cast (fp8_cast.h) that the other sources and formats take.
#include <immintrin.h>

#include <algorithm>
#include <bit>
#include <cstdint>
#include <limits>

#include "kernels/cpu/common/byte_transpose_avx2.h"
#include "kernels/cpu/fp8/fp8_block.h"
#include "kernels/cpu/fp8/fp8_block_scales_avx2.h"
#include "kernels/cpu/fp8/fp8_codes_avx2.h"
#include "mantissa/core/bfloat16.h"
#include "mantissa/core/float8.h"

namespace mantissa::kernels::fp8::detail {
namespace {

// The largest magnitude bits among 128 bfloat16 values, NaN passed over.
__attribute__((target("avx2"))) inline uint16_t max_magnitude_128(const uint16_t* s) {
  const __m256i abs = _mm256_set1_epi16(0x7FFF), inf = _mm256_set1_epi16(0x7F80);
  __m256i best = _mm256_setzero_si256();
  for (int j = 0; j < 8; ++j) {
    __m256i a =
        _mm256_and_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + 16 * j)), abs);
    // a <= inf where min(a, inf) == a; NaNs (above inf) become 0.
    a = _mm256_and_si256(a, _mm256_cmpeq_epi16(_mm256_min_epu16(a, inf), a));
    best = _mm256_max_epu16(best, a);
  }
  // The maximum of eight 16-bit lanes as 0xFFFF less the minimum of their complements.
  const __m128i m = _mm_max_epu16(_mm256_castsi256_si128(best), _mm256_extracti128_si256(best, 1));
  const __m128i low = _mm_minpos_epu16(_mm_xor_si128(m, _mm_set1_epi32(-1)));
  return static_cast<uint16_t>(~_mm_cvtsi128_si32(low));
}

// The largest magnitude bits among 128 bfloat16 values, a NaN's included (above 0x7F80).
__attribute__((target("avx2"))) inline uint16_t max_bits_128(const uint16_t* s) {
  const __m256i abs = _mm256_set1_epi16(0x7FFF);
  __m256i b0 = _mm256_setzero_si256(), b1 = _mm256_setzero_si256();
  for (int j = 0; j < 8; j += 2) {
    // Magnitude bits are at most 0x7FFF: a signed maximum orders them.
    b0 = _mm256_max_epi16(
        b0,
        _mm256_and_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + 16 * j)), abs));
    b1 = _mm256_max_epi16(
        b1, _mm256_and_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + 16 * j + 16)),
                             abs));
  }
  const __m256i best = _mm256_max_epi16(b0, b1);
  const __m128i m = _mm_max_epi16(_mm256_castsi256_si128(best), _mm256_extracti128_si256(best, 1));
  const __m128i low = _mm_minpos_epu16(_mm_xor_si128(m, _mm_set1_epi32(-1)));
  return static_cast<uint16_t>(~_mm_cvtsi128_si32(low));
}

// The codes of 8 bfloat16 values (bits h) times `vs` in float32 lanes (satfinite_codes), in
// 32-bit lanes, their saturated and flushed elements counted.
__attribute__((target("avx2"))) inline __m256i codes8_f32(__m128i h, __m256 vs,
                                                          LaneCounts& counts) {
  const __m256 x = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
  return counted_codes<3, 7, 0x7e>(x, _mm256_mul_ps(x, vs), _mm256_set1_ps(Float8E4M3::kMax),
                                   counts);
}

// The same for 16 values at p, the codes in 16-bit lanes.
__attribute__((target("avx2"))) inline __m256i codes16_f32(const uint16_t* p, __m256 vs,
                                                           LaneCounts& counts) {
  const __m256i lo = codes8_f32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)), vs, counts);
  const __m256i hi =
      codes8_f32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 8)), vs, counts);
  return _mm256_permute4x64_epi64(_mm256_packus_epi32(lo, hi), 0xD8);
}

constexpr float kE4m3Max = Float8E4M3::kMax;

__attribute__((target("avx2"))) inline __m256i load16(const uint16_t* p) {
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
}

// The constants of one scale's cast, kept as scalars (a batch of tiles holds one each) and
// broadcast by the cast: the scale for float32 lanes and, where the 16-bit lanes apply (a
// power-of-2 scale 2^e, amax * scale within E4M3's range), codes16_pow2's e << 7 and normal_from,
// and codes16_pow2_in_range's rebias where e <= 120.
struct Lanes {
  float scale;
  int16_t exponent_add, normal_from, rebias;
  bool sixteen, in_range;
};

inline Lanes lanes_of(float amax, float scale) {
  Lanes l{scale, 0, 0, 0, false, false};
  int e = 0;
  if (!pow2_exponent(scale, &e) || !(amax * scale <= kE4m3Max)) return l;
  l.exponent_add = static_cast<int16_t>(e * 128);
  l.normal_from = static_cast<int16_t>(std::max((121 - e) * 128, 0x80));
  l.rebias = static_cast<int16_t>(std::max(120 - e, 0) * 128);
  l.sixteen = true;
  l.in_range = e <= 120;
  return l;
}

// The codes of 128 bfloat16 values at s into d. In 16-bit lanes where they apply and no value is
// a NaN: every product a normal E4M3 value or zero, else (rarely) half of them through float32
// lanes. Otherwise all through float32 lanes.
__attribute__((target("avx2"), always_inline)) inline void cast_128(const uint16_t* s, uint8_t* d,
                                                                    bool nan, const Lanes& l,
                                                                    LaneCounts& counts) {
  const __m256 scale = _mm256_set1_ps(l.scale);
  if (nan || !l.sixteen) {
    for (int q = 0; q < 4; ++q) {
      const __m256i lo = codes16_f32(s + 32 * q, scale, counts);
      const __m256i hi = codes16_f32(s + 32 * q + 16, scale, counts);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(d + 32 * q), pack32_bytes16(lo, hi));
    }
    return;
  }
  const __m256i normal_from = _mm256_set1_epi16(l.normal_from);
  if (l.in_range) [[likely]] {
    const __m256i rebias = _mm256_set1_epi16(l.rebias);
    for (int half = 0; half < 2; ++half) {
      const uint16_t* p = s + 64 * half;
      __m256i low = _mm256_set1_epi16(-1);
      __m256i c0 = codes16_pow2_in_range<3, 7>(load16(p), rebias, &low);
      __m256i c1 = codes16_pow2_in_range<3, 7>(load16(p + 16), rebias, &low);
      __m256i c2 = codes16_pow2_in_range<3, 7>(load16(p + 32), rebias, &low);
      __m256i c3 = codes16_pow2_in_range<3, 7>(load16(p + 48), rebias, &low);
      if (any_below(low, normal_from)) [[unlikely]] {
        c0 = codes16_f32(p, scale, counts);
        c1 = codes16_f32(p + 16, scale, counts);
        c2 = codes16_f32(p + 32, scale, counts);
        c3 = codes16_f32(p + 48, scale, counts);
      }
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(d + 64 * half), pack32_bytes16(c0, c1));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(d + 64 * half + 32), pack32_bytes16(c2, c3));
    }
    return;
  }
  const __m256i exponent_add = _mm256_set1_epi16(l.exponent_add);
  for (int half = 0; half < 2; ++half) {
    const uint16_t* p = s + 64 * half;
    // Four vectors in named registers (an array of them is kept on the stack at -O2).
    __m256i s0, s1, s2, s3;
    __m256i c0 = codes16_pow2<3, 7, 0x7e>(load16(p), exponent_add, normal_from, &s0);
    __m256i c1 = codes16_pow2<3, 7, 0x7e>(load16(p + 16), exponent_add, normal_from, &s1);
    __m256i c2 = codes16_pow2<3, 7, 0x7e>(load16(p + 32), exponent_add, normal_from, &s2);
    __m256i c3 = codes16_pow2<3, 7, 0x7e>(load16(p + 48), exponent_add, normal_from, &s3);
    const __m256i any = _mm256_or_si256(_mm256_or_si256(s0, s1), _mm256_or_si256(s2, s3));
    if (!_mm256_testz_si256(any, any)) [[unlikely]] {
      c0 = codes16_f32(p, scale, counts);
      c1 = codes16_f32(p + 16, scale, counts);
      c2 = codes16_f32(p + 32, scale, counts);
      c3 = codes16_f32(p + 48, scale, counts);
    }
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(d + 64 * half), pack32_bytes16(c0, c1));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(d + 64 * half + 32), pack32_bytes16(c2, c3));
  }
}

}  // namespace

__attribute__((target("avx2"))) void block_tiles_bf16_e4m3_avx2(const uint16_t* src,
                                                                int64_t src_step, int64_t count,
                                                                uint8_t* dst, int64_t dst_step,
                                                                float* scale_inv, int64_t inv_step,
                                                                float for_inf, bool power_2,
                                                                float epsilon, BlockCastStats& st) {
  LaneCounts counts{_mm256_setzero_si256(), _mm256_setzero_si256()};
  // The largest amax and amax * scale in locals (st's fields would be reloaded after each
  // scale_inv store, which the compiler cannot prove apart). Division by fp8_max keeps the order
  // of the products, so the largest peak is the largest product's.
  float amax_max = st.amax;
  double top_max = 0.0;
  // Tiles a batch at a time: the maxima of all, then their scales (scalar chains of a division
  // each, independent of one another), then the casts from L1.
  constexpr int64_t kBatch = 16;
  uint16_t bits[kBatch];
  Lanes lanes[kBatch];
  for (int64_t t0 = 0; t0 < count; t0 += kBatch) {
    const int64_t n = std::min(kBatch, count - t0);
    for (int64_t k = 0; k < n; ++k) bits[k] = max_bits_128(src + (t0 + k) * src_step);
    for (int64_t k = 0; k < n; ++k) {
      const int64_t t = t0 + k;
      const bool nan = bits[k] > 0x7F80;
      const float amax = bf16_bits_to_float(nan ? max_magnitude_128(src + t * src_step) : bits[k]);
      const float scale = block_scale(amax, kE4m3Max, for_inf, power_2, epsilon);
      scale_inv[t * inv_step] = block_scale_inverse(scale);
      amax_max = std::max(amax_max, amax);
      fold_top(amax, scale, top_max);
      lanes[k] = lanes_of(amax, scale);
    }
    for (int64_t k = 0; k < n; ++k)
      cast_128(src + (t0 + k) * src_step, dst + (t0 + k) * dst_step, bits[k] > 0x7F80, lanes[k],
               counts);
  }
  st.amax = amax_max;
  st.peak = std::max(st.peak, top_max / kE4m3Max);
  st.saturated += lane_sum(counts.saturated);
  st.flushed += lane_sum(counts.flushed);
}

__attribute__((target("avx2"))) void block_128x128_bf16_e4m3_avx2(
    const uint16_t* src, int64_t ld, int64_t rows, uint8_t* dst, int64_t ldd, float* scale_inv,
    float for_inf, bool power_2, float epsilon, BlockCastStats& st) {
  bool nan[kBlockLen];
  float amax = 0.0f;
  for (int64_t r = 0; r < rows; ++r) {
    const uint16_t bits = max_bits_128(src + r * ld);
    nan[r] = bits > 0x7F80;
    amax = std::max(amax, bf16_bits_to_float(nan[r] ? max_magnitude_128(src + r * ld) : bits));
  }
  const float scale = block_scale(amax, kE4m3Max, for_inf, power_2, epsilon);
  *scale_inv = block_scale_inverse(scale);
  const Lanes lanes = lanes_of(amax, scale);
  LaneCounts counts{_mm256_setzero_si256(), _mm256_setzero_si256()};
  for (int64_t r = 0; r < rows; ++r) cast_128(src + r * ld, dst + r * ldd, nan[r], lanes, counts);
  double top_max = 0.0;
  fold_top(amax, scale, top_max);
  st.amax = std::max(st.amax, amax);
  st.peak = std::max(st.peak, top_max / kE4m3Max);
  st.saturated += lane_sum(counts.saturated);
  st.flushed += lane_sum(counts.flushed);
}

__attribute__((target("avx2"))) void blocks_128x128_bf16_e4m3_avx2(
    const uint16_t* src, int64_t ld, int64_t rows, int64_t count, uint8_t* dst, int64_t ldd,
    float* scale_inv, float for_inf, bool power_2, float epsilon, const uint16_t* next,
    int64_t next_bytes, BlockCastStats& st) {
  constexpr int64_t kMaxCount = kBlockGroupBytes / (2 * kBlockLen);
  const __m256i abs = _mm256_set1_epi16(0x7FFF);
  // The largest magnitude bits of each block (a NaN's above 0x7F80), a lane for each of 16
  // columns of the block's 128: one read of the rows in memory order.
  __m256i top[kMaxCount];
  for (int64_t j = 0; j < count; ++j) top[j] = _mm256_setzero_si256();
  for (int64_t r = 0; r < rows; ++r) {
    const uint16_t* row = src + r * ld;
    for (int64_t j = 0; j < count; ++j) {
      const uint16_t* s = row + j * kBlockLen;
      __m256i b0 = top[j], b1 = _mm256_setzero_si256();
      for (int v = 0; v < 8; v += 2) {
        // Magnitude bits are at most 0x7FFF: a signed maximum orders them.
        b0 = _mm256_max_epi16(
            b0, _mm256_and_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + 16 * v)),
                                 abs));
        b1 = _mm256_max_epi16(
            b1, _mm256_and_si256(
                    _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + 16 * v + 16)), abs));
      }
      top[j] = _mm256_max_epi16(b0, b1);
    }
  }
  Lanes lanes[kMaxCount];
  bool nan[kMaxCount];
  double top_max = 0.0;
  float amax_max = st.amax;
  for (int64_t j = 0; j < count; ++j) {
    const __m128i m =
        _mm_max_epi16(_mm256_castsi256_si128(top[j]), _mm256_extracti128_si256(top[j], 1));
    const __m128i low = _mm_minpos_epu16(_mm_xor_si128(m, _mm_set1_epi32(-1)));
    const auto bits = static_cast<uint16_t>(~_mm_cvtsi128_si32(low));
    nan[j] = bits > 0x7F80;
    if (nan[j]) continue;  // the block's rows are found again, each NaN passed over, below
    const float amax = bf16_bits_to_float(bits);
    const float scale = block_scale(amax, kE4m3Max, for_inf, power_2, epsilon);
    scale_inv[j] = block_scale_inverse(scale);
    amax_max = std::max(amax_max, amax);
    fold_top(amax, scale, top_max);
    lanes[j] = lanes_of(amax, scale);
  }
  // The casts, again in memory order: the rows are still in L2 or L3. The next group's rows are
  // fetched into L2 meanwhile, so that its amax pass does not wait on memory with nothing to do.
  LaneCounts counts{_mm256_setzero_si256(), _mm256_setzero_si256()};
  const int64_t ahead = next != nullptr ? next_bytes : 0;
  for (int64_t r = 0; r < rows; ++r) {
    const auto* line = reinterpret_cast<const char*>(next + r * ld);
    if (ahead > 0) touch_pages(line, ahead);
    for (int64_t j = 0; j < count; ++j) {
      // The next group's lines at the pace of the casts (kBlockGroupBytes of each row over
      // the group's `count` blocks).
      for (int64_t b = j * 256; b < std::min(ahead, (j + 1) * 256); b += 64)
        _mm_prefetch(line + b, _MM_HINT_T1);
      if (!nan[j])
        cast_128(src + r * ld + j * kBlockLen, dst + r * ldd + j * kBlockLen, false, lanes[j],
                 counts);
    }
  }
  st.amax = amax_max;
  st.peak = std::max(st.peak, top_max / kE4m3Max);
  st.saturated += lane_sum(counts.saturated);
  st.flushed += lane_sum(counts.flushed);
  for (int64_t j = 0; j < count; ++j)
    if (nan[j])
      block_128x128_bf16_e4m3_avx2(src + j * kBlockLen, ld, rows, dst + j * kBlockLen, ldd,
                                   scale_inv + j, for_inf, power_2, epsilon, st);
}

namespace {

// Columns of a band taken at a time: 128 rows of 128 bytes, a 16 KiB copy that stays in L1.
constexpr int64_t kColumnChunk = 64;
constexpr int kChunkGroups = kColumnChunk / 16;

// N groups of 16 columns over the band's 128 rows from p (ld elements apart): group g's rows
// copied to tile[g] (row k at tile[g] + 16 k; the rows themselves, often a multiple of 4 KiB
// apart, would fall in one L1 set) and the largest magnitude bits of each column (a NaN's above
// 0x7F80) into top[g]. The next chunk's bytes of each row are fetched into L1 meanwhile, and
// those eight chunks on into L2 (the rows' strided lines wait on memory otherwise).
template <int N>
__attribute__((target("avx2"), always_inline)) inline void copy_band(
    const uint16_t* p, int64_t ld, uint16_t (*tile)[kBlockLen * 16], __m256i* top) {
  const __m256i abs = _mm256_set1_epi16(0x7FFF);
  __m256i m[N];
  for (int g = 0; g < N; ++g) m[g] = _mm256_setzero_si256();
  for (int64_t k = 0; k < kBlockLen; ++k) {
    const uint16_t* row = p + k * ld;
    _mm_prefetch(reinterpret_cast<const char*>(row + kColumnChunk), _MM_HINT_T0);
    _mm_prefetch(reinterpret_cast<const char*>(row + kColumnChunk + 32), _MM_HINT_T0);
    _mm_prefetch(reinterpret_cast<const char*>(row + 8 * kColumnChunk), _MM_HINT_T1);
    _mm_prefetch(reinterpret_cast<const char*>(row + 8 * kColumnChunk + 32), _MM_HINT_T1);
    for (int g = 0; g < N; ++g) {
      const __m256i h = load16(row + 16 * g);
      _mm256_store_si256(reinterpret_cast<__m256i*>(tile[g] + 16 * k), h);
      // Magnitude bits are at most 0x7FFF: a signed maximum orders them.
      m[g] = _mm256_max_epi16(m[g], _mm256_and_si256(h, abs));
    }
  }
  for (int g = 0; g < N; ++g) top[g] = m[g];
}

// Column j of a group's copy as 128 contiguous values.
inline void gather_column(const uint16_t* tile, int j, uint16_t* column) {
  for (int k = 0; k < kBlockLen; ++k) column[k] = tile[16 * k + j];
}

// The scales of 16 columns from their largest magnitude bits (top, 16-bit lanes; a NaN's above
// 0x7F80), block_scales8 twice: scale_of, inv, amax_of (each column's amax),
// codes16_pow2_in_range's rebias and normal_from in 16-bit lanes. Returns the mask of the columns
// the 16-bit lanes take.
__attribute__((target("avx2"), always_inline)) inline unsigned column_scales16(
    __m256i top, float for_inf, bool power_2, float epsilon, float* inv, float* amax_of,
    float* scale_of, __m256i& rebias, __m256i& normal_from, __m256& amax_acc, __m256d& top_acc) {
  __m256i rb[2], nf[2];
  unsigned fast = 0;
  for (int h = 0; h < 2; ++h) {
    const __m256i b32 =
        _mm256_cvtepu16_epi32(h ? _mm256_extracti128_si256(top, 1) : _mm256_castsi256_si128(top));
    const __m256i nan = _mm256_cmpgt_epi32(b32, _mm256_set1_epi32(0x7F80));
    const __m256 amax = _mm256_castsi256_ps(_mm256_slli_epi32(b32, 16));
    _mm256_storeu_ps(amax_of + 8 * h, amax);
    __m256i ok;
    const __m256i e = block_scales8(amax, nan, for_inf, power_2, epsilon, scale_of + 8 * h,
                                    inv + 8 * h, amax_acc, top_acc, ok);
    fast |= static_cast<unsigned>(_mm256_movemask_ps(_mm256_castsi256_ps(ok))) << (8 * h);
    rb[h] = _mm256_slli_epi32(_mm256_sub_epi32(_mm256_set1_epi32(120), e), 7);
    nf[h] = _mm256_slli_epi32(_mm256_sub_epi32(_mm256_set1_epi32(121), e), 7);
  }
  rebias = _mm256_permute4x64_epi64(_mm256_packs_epi32(rb[0], rb[1]), 0xD8);
  normal_from = _mm256_permute4x64_epi64(_mm256_packs_epi32(nf[0], nf[1]), 0xD8);
  return fast;
}

}  // namespace

__attribute__((target("avx2"))) void block_columns_bf16_e4m3_avx2(
    const uint16_t* src, int64_t ld, int64_t cols, uint8_t* dst, int64_t dst_step, float* scale_inv,
    int64_t inv_step, float for_inf, bool power_2, float epsilon, BlockCastStats& st) {
  LaneCounts counts{_mm256_setzero_si256(), _mm256_setzero_si256()};
  float amax_max = st.amax;
  double top_max = 0.0;
  // The codes bypass the caches (they are not read back here) where every column's 128 codes
  // start on a 32-byte boundary.
  const bool stream = reinterpret_cast<uintptr_t>(dst) % 32 == 0 && dst_step % 32 == 0;
  alignas(32) uint16_t tile[kChunkGroups][kBlockLen * 16];
  alignas(32) uint8_t out[16][kBlockLen];
  alignas(32) uint16_t column[kBlockLen];
  alignas(32) float inv[16], amax_of[16], scale_of[16];
  __m256 amax_acc = _mm256_setzero_ps();
  __m256d top_acc = _mm256_setzero_pd();
  Lanes lanes[16];
  bool nan[16];
  for (int64_t c0 = 0; c0 < cols; c0 += kColumnChunk) {
    const int groups = static_cast<int>(std::min(kColumnChunk, cols - c0) / 16);
    __m256i top[kChunkGroups];
    switch (groups) {
      case 4:
        copy_band<4>(src + c0, ld, tile, top);
        break;
      case 3:
        copy_band<3>(src + c0, ld, tile, top);
        break;
      case 2:
        copy_band<2>(src + c0, ld, tile, top);
        break;
      default:
        copy_band<1>(src + c0, ld, tile, top);
        break;
    }
    for (int g = 0; g < groups; ++g) {
      const int64_t c = c0 + 16 * g;
      const uint16_t* t = tile[g];
      // The columns' scales and their lanes' constants of codes16_pow2_in_range, 16 at a time; a
      // column outside them (a NaN or an inf, a scale not a power of 2 or above 2^120) is cast
      // below from a copy of its tile by the row tiles' body, a NaN's scale found again without it.
      __m256i rb, from;
      unsigned fallback = ~column_scales16(top[g], for_inf, power_2, epsilon, inv, amax_of,
                                           scale_of, rb, from, amax_acc, top_acc) &
                          0xFFFFu;
      const auto nan_bits = static_cast<unsigned>(
          _mm256_movemask_epi8(_mm256_cmpgt_epi16(top[g], _mm256_set1_epi16(0x7F80))));
      for (int j = 0; j < 16; ++j) {
        nan[j] = (nan_bits >> (2 * j)) & 1u;
        if (nan[j]) {
          gather_column(t, j, column);
          const float amax = bf16_bits_to_float(max_magnitude_128(column));
          const float scale = block_scale(amax, kE4m3Max, for_inf, power_2, epsilon);
          inv[j] = block_scale_inverse(scale);
          amax_max = std::max(amax_max, amax);
          fold_top(amax, scale, top_max);
          lanes[j] = lanes_of(amax, scale);
        }
        scale_inv[(c + j) * inv_step] = inv[j];
      }
      __m256i low = _mm256_set1_epi16(-1);
      for (int sub = 0; sub < kBlockLen / 32; ++sub) {
        // Rows k (low 128-bit lane) and k + 16 (high) of the 32 as 16 code bytes each, then
        // transposed into the columns' 32 bytes.
        __m256i x[16];
        const uint16_t* q = t + 16 * 32 * sub;
        for (int k = 0; k < 16; ++k) {
          const __m256i lo = codes16_pow2_in_range<3, 7>(load16(q + 16 * k), rb, &low);
          const __m256i hi = codes16_pow2_in_range<3, 7>(load16(q + 16 * (k + 16)), rb, &low);
          x[k] = _mm256_permute4x64_epi64(_mm256_packus_epi16(lo, hi), 0xD8);
        }
        transpose16x16_bytes(x);
        for (int j = 0; j < 16; ++j)
          _mm256_store_si256(reinterpret_cast<__m256i*>(out[j] + 32 * sub), x[j]);
      }
      // Columns with a value whose code is subnormal or flushed (0 < |h| < normal_from).
      const __m256i below = _mm256_xor_si256(
          _mm256_cmpeq_epi16(_mm256_subs_epu16(_mm256_sub_epi16(from, _mm256_set1_epi16(1)), low),
                             _mm256_setzero_si256()),
          _mm256_set1_epi16(-1));
      const auto below_bits =
          static_cast<unsigned>(_mm256_movemask_epi8(_mm256_packs_epi16(below, below)));
      fallback |= (below_bits & 0xFFu) | ((below_bits >> 8) & 0xFF00u);
      for (unsigned f = fallback; f; f &= f - 1) {
        const int j = __builtin_ctz(f);
        if (!nan[j]) lanes[j] = lanes_of(amax_of[j], scale_of[j]);
        gather_column(t, j, column);
        cast_128(column, out[j], nan[j], lanes[j], counts);
      }
      store_columns16(&out[0][0], kBlockLen, dst, c, dst_step, stream);
    }
  }
  if (stream) _mm_sfence();
  finish_columns(amax_acc, top_acc, amax_max, top_max, counts, st);
}

}  // namespace mantissa::kernels::fp8::detail
