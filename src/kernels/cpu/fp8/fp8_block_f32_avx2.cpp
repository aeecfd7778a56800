// The block recipe's float32 casts to E4M3 on AVX2 (fp8_block.h): 1x128 tiles
// (detail::block_tiles_f32_e4m3_avx2), 128x128 blocks a group side by side
// (detail::blocks_128x128_f32_e4m3_avx2) and x^T's 1x128 tiles from x a band of 128 rows at a
// time (detail::block_columns_f32_e4m3_avx2), the float32 counterparts of fp8_block_avx2.cpp's
// bfloat16 bodies. A tile's amax is the integer maximum of its magnitude bits (a NaN's lie above
// infinity's), its scale block_scale's, and its codes come from the values still in L1 or L2.
// Under a power-of-2 scale 2^e (the recipe's default) with the tile's amax * 2^e within E4M3's
// range and e <= 120, a normal product's code is |x|'s bits less (120 - e) << 23, rounded to
// nearest even on the 20 dropped bits by integer adds (x * 2^e is exact: only the exponent
// moves); nothing saturates or flushes there. A tile holding a value whose code would be
// subnormal or flushed, and every tile under another scale or holding a NaN or an inf, takes the
// float32 lanes of the delayed-scaling cast (satfinite_codes of f32(x * scale)) with the
// saturated and flushed counts kept in vector lanes across the call. The same amax, scale, codes
// and counts as the per-tile calls of the delayed-scaling cast (fp8_cast.h).
#include <immintrin.h>

#include <algorithm>
#include <bit>
#include <cstdint>
#include <limits>

#include "kernels/cpu/common/byte_transpose_avx2.h"
#include "kernels/cpu/fp8/fp8_block.h"
#include "kernels/cpu/fp8/fp8_block_scales_avx2.h"
#include "kernels/cpu/fp8/fp8_codes_avx2.h"
#include "mantissa/core/float8.h"

namespace mantissa::kernels::fp8::detail {
namespace {

constexpr float kE4m3Max = Float8E4M3::kMax;
constexpr uint32_t kInfBits = 0x7F800000u;

__attribute__((target("avx2"))) inline __m256i load8i(const float* p) {
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
}

// The largest of eight 32-bit lanes (signed).
__attribute__((target("avx2"))) inline uint32_t lanes_max(__m256i v) {
  __m128i m = _mm_max_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  m = _mm_max_epi32(m, _mm_shuffle_epi32(m, 0x4E));
  m = _mm_max_epi32(m, _mm_shuffle_epi32(m, 0xB1));
  return static_cast<uint32_t>(_mm_cvtsi128_si32(m));
}

// The largest magnitude bits among 128 float32 values, a NaN's included (above kInfBits).
__attribute__((target("avx2"))) inline __m256i max_bits_lanes_128(const float* s, __m256i b0) {
  const __m256i abs = _mm256_set1_epi32(0x7FFFFFFF);
  __m256i b1 = _mm256_setzero_si256();
  for (int j = 0; j < 16; j += 2) {
    // Magnitude bits are at most 0x7FFFFFFF: a signed maximum orders them.
    b0 = _mm256_max_epi32(b0, _mm256_and_si256(load8i(s + 8 * j), abs));
    b1 = _mm256_max_epi32(b1, _mm256_and_si256(load8i(s + 8 * j + 8), abs));
  }
  return _mm256_max_epi32(b0, b1);
}

// The largest magnitude bits among 128 float32 values, NaN passed over.
__attribute__((target("avx2"))) inline uint32_t max_magnitude_128(const float* s) {
  const __m256i abs = _mm256_set1_epi32(0x7FFFFFFF);
  const __m256i above_inf = _mm256_set1_epi32(static_cast<int>(kInfBits + 1));
  __m256i best = _mm256_setzero_si256();
  for (int j = 0; j < 16; ++j) {
    const __m256i a = _mm256_and_si256(load8i(s + 8 * j), abs);
    // NaNs (above inf) become 0.
    best = _mm256_max_epi32(best, _mm256_and_si256(a, _mm256_cmpgt_epi32(above_inf, a)));
  }
  return lanes_max(best);
}

// The constants of one scale's cast: the scale for float32 lanes and, where the integer codes
// apply (scale 2^e with e <= 120, amax * scale within E4M3's range), rebias = ((120 - e) << 23)
// less the rounding's 2^19 - 1, and normal_from - 1, normal_from = (121 - e) << 23 being the
// smallest |x| whose product is a normal E4M3 value.
struct Lanes {
  float scale;
  int32_t rebias, normal_below;
  bool fast;
};

inline Lanes lanes_of(float amax, float scale) {
  Lanes l{scale, 0, 0, false};
  int e = 0;
  if (!pow2_exponent(scale, &e) || e > 120 || !(amax * scale <= kE4m3Max)) return l;
  l.rebias = static_cast<int32_t>(static_cast<uint32_t>(120 - e) << 23) - ((1 << 19) - 1);
  l.normal_below = static_cast<int32_t>((static_cast<uint32_t>(121 - e) << 23) - 1);
  l.fast = true;
  return l;
}

// The codes of 32 values at s into d through float32 lanes: satfinite_codes of f32(x * scale),
// the saturated and flushed elements counted.
__attribute__((target("avx2"), always_inline)) inline void cast_32_f32(const float* s, uint8_t* d,
                                                                       __m256 scale,
                                                                       LaneCounts& counts) {
  const __m256 max = _mm256_set1_ps(kE4m3Max);
  __m256i c[4];
  for (int k = 0; k < 4; ++k) {
    const __m256 x = _mm256_loadu_ps(s + 8 * k);
    c[k] = counted_codes<3, 7, 0x7e>(x, _mm256_mul_ps(x, scale), max, counts);
  }
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(d), pack32_bytes(c[0], c[1], c[2], c[3]));
}

// The code of |x| (bits in 32-bit lanes) under the integer constants: negative where the product
// is below E4M3's normal range (code 0 after the unsigned pack); low takes the minimum of |x| - 1
// (0 wraps to the largest), which finds a lane with 0 < |x| < normal_from.
__attribute__((target("avx2"), always_inline)) inline __m256i code_of(__m256i x, __m256i rebias,
                                                                      __m256i& low) {
  const __m256i a = _mm256_and_si256(x, _mm256_set1_epi32(0x7FFFFFFF));
  low = _mm256_min_epu32(low, _mm256_sub_epi32(a, _mm256_set1_epi32(1)));
  const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(a, 20), _mm256_set1_epi32(1));
  return _mm256_srai_epi32(_mm256_add_epi32(_mm256_sub_epi32(a, rebias), lsb), 20);
}

// The codes of 128 float32 values at s into d: through the integer codes where they apply and no
// value is a NaN, the tile again through float32 lanes where one of its values is not a normal
// product; otherwise through float32 lanes.
__attribute__((target("avx2"), always_inline)) inline void cast_128(const float* s, uint8_t* d,
                                                                    bool nan, const Lanes& l,
                                                                    LaneCounts& counts) {
  const __m256 scale = _mm256_set1_ps(l.scale);
  if (nan || !l.fast) {
    for (int q = 0; q < 4; ++q) cast_32_f32(s + 32 * q, d + 32 * q, scale, counts);
    return;
  }
  const __m256i rebias = _mm256_set1_epi32(l.rebias);
  const __m256i sign_bit = _mm256_set1_epi8(static_cast<char>(0x80));
  const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
  __m256i low = _mm256_set1_epi32(-1);
  for (int q = 0; q < 4; ++q) {
    const float* p = s + 32 * q;
    const __m256i x0 = load8i(p), x1 = load8i(p + 8), x2 = load8i(p + 16), x3 = load8i(p + 24);
    const __m256i c0 = code_of(x0, rebias, low), c1 = code_of(x1, rebias, low);
    const __m256i c2 = code_of(x2, rebias, low), c3 = code_of(x3, rebias, low);
    // The codes (0 to 0x7E) and x's signs (kept by the signed packs) in the same byte order.
    const __m256i codes =
        _mm256_packus_epi16(_mm256_packus_epi32(c0, c1), _mm256_packus_epi32(c2, c3));
    const __m256i signs =
        _mm256_packs_epi16(_mm256_packs_epi32(x0, x1), _mm256_packs_epi32(x2, x3));
    const __m256i bytes = _mm256_or_si256(codes, _mm256_and_si256(signs, sign_bit));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(d + 32 * q),
                        _mm256_permutevar8x32_epi32(bytes, order));
  }
  // A lane with 0 < |x| < normal_from (|x| - 1 below normal_from - 1): a subnormal or flushed
  // code, which the float32 lanes give with their counts.
  const __m256i below = _mm256_set1_epi32(l.normal_below);
  const __m256i ok = _mm256_cmpeq_epi32(_mm256_max_epu32(low, below), low);
  if (_mm256_movemask_epi8(ok) != -1) [[unlikely]]
    for (int q = 0; q < 4; ++q) cast_32_f32(s + 32 * q, d + 32 * q, scale, counts);
}

// One tile's amax from its magnitude bits' maximum (bits), a NaN's (above kInfBits) passed over.
inline float amax_of_bits(const float* s, uint32_t bits) {
  return std::bit_cast<float>(bits > kInfBits ? max_magnitude_128(s) : bits);
}

}  // namespace

__attribute__((target("avx2"))) void block_tiles_f32_e4m3_avx2(const float* src, int64_t src_step,
                                                               int64_t count, uint8_t* dst,
                                                               int64_t dst_step, float* scale_inv,
                                                               int64_t inv_step, float for_inf,
                                                               bool power_2, float epsilon,
                                                               BlockCastStats& st) {
  LaneCounts counts{_mm256_setzero_si256(), _mm256_setzero_si256()};
  float amax_max = st.amax;
  double top_max = 0.0;
  // Tiles a batch at a time: the maxima of all, then their scales (scalar chains of a division
  // each, independent of one another), then the casts from L1.
  constexpr int64_t kBatch = 16;
  uint32_t bits[kBatch];
  Lanes lanes[kBatch];
  for (int64_t t0 = 0; t0 < count; t0 += kBatch) {
    const int64_t n = std::min(kBatch, count - t0);
    for (int64_t k = 0; k < n; ++k)
      bits[k] = lanes_max(max_bits_lanes_128(src + (t0 + k) * src_step, _mm256_setzero_si256()));
    for (int64_t k = 0; k < n; ++k) {
      const int64_t t = t0 + k;
      const float amax = amax_of_bits(src + t * src_step, bits[k]);
      const float scale = block_scale(amax, kE4m3Max, for_inf, power_2, epsilon);
      scale_inv[t * inv_step] = block_scale_inverse(scale);
      amax_max = std::max(amax_max, amax);
      fold_top(amax, scale, top_max);
      lanes[k] = lanes_of(amax, scale);
    }
    for (int64_t k = 0; k < n; ++k)
      cast_128(src + (t0 + k) * src_step, dst + (t0 + k) * dst_step, bits[k] > kInfBits, lanes[k],
               counts);
  }
  st.amax = amax_max;
  st.peak = std::max(st.peak, top_max / kE4m3Max);
  st.saturated += lane_sum(counts.saturated);
  st.flushed += lane_sum(counts.flushed);
}

namespace {

// One 128x128 block whose values hold a NaN: each row's amax with the NaN passed over, then the
// casts through float32 lanes.
__attribute__((target("avx2"))) void block_with_nan(const float* src, int64_t ld, int64_t rows,
                                                    uint8_t* dst, int64_t ldd, float* scale_inv,
                                                    float for_inf, bool power_2, float epsilon,
                                                    float& amax_max, double& top_max,
                                                    LaneCounts& counts) {
  uint32_t bits = 0;
  for (int64_t r = 0; r < rows; ++r) bits = std::max(bits, max_magnitude_128(src + r * ld));
  const float amax = std::bit_cast<float>(bits);
  const float scale = block_scale(amax, kE4m3Max, for_inf, power_2, epsilon);
  *scale_inv = block_scale_inverse(scale);
  amax_max = std::max(amax_max, amax);
  fold_top(amax, scale, top_max);
  const Lanes l = lanes_of(amax, scale);
  for (int64_t r = 0; r < rows; ++r) cast_128(src + r * ld, dst + r * ldd, true, l, counts);
}

}  // namespace

__attribute__((target("avx2"))) void blocks_128x128_f32_e4m3_avx2(
    const float* src, int64_t ld, int64_t rows, int64_t count, uint8_t* dst, int64_t ldd,
    float* scale_inv, float for_inf, bool power_2, float epsilon, const float* next,
    int64_t next_bytes, BlockCastStats& st) {
  constexpr int64_t kMaxCount = kBlockGroupBytes / (4 * kBlockLen);
  // The largest magnitude bits of each block (a NaN's above kInfBits), a lane for each of 8
  // columns of the block's 128: one read of the rows in memory order.
  __m256i top[kMaxCount];
  for (int64_t j = 0; j < count; ++j) top[j] = _mm256_setzero_si256();
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < count; ++j)
      top[j] = max_bits_lanes_128(src + r * ld + j * kBlockLen, top[j]);
  Lanes lanes[kMaxCount];
  bool nan[kMaxCount];
  double top_max = 0.0;
  float amax_max = st.amax;
  for (int64_t j = 0; j < count; ++j) {
    const uint32_t bits = lanes_max(top[j]);
    nan[j] = bits > kInfBits;
    if (nan[j]) continue;  // the block's rows are found again, each NaN passed over, below
    const float amax = std::bit_cast<float>(bits);
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
  constexpr int64_t kBlockBytes = 4 * kBlockLen;
  for (int64_t r = 0; r < rows; ++r) {
    const auto* line = reinterpret_cast<const char*>(next + r * ld);
    if (ahead > 0) touch_pages(line, ahead);
    for (int64_t j = 0; j < count; ++j) {
      // The next group's lines at the pace of the casts.
      for (int64_t b = j * kBlockBytes; b < std::min(ahead, (j + 1) * kBlockBytes); b += 64)
        _mm_prefetch(line + b, _MM_HINT_T1);
      if (!nan[j])
        cast_128(src + r * ld + j * kBlockLen, dst + r * ldd + j * kBlockLen, false, lanes[j],
                 counts);
    }
  }
  for (int64_t j = 0; j < count; ++j)
    if (nan[j])
      block_with_nan(src + j * kBlockLen, ld, rows, dst + j * kBlockLen, ldd, scale_inv + j,
                     for_inf, power_2, epsilon, amax_max, top_max, counts);
  st.amax = amax_max;
  st.peak = std::max(st.peak, top_max / kE4m3Max);
  st.saturated += lane_sum(counts.saturated);
  st.flushed += lane_sum(counts.flushed);
}

}  // namespace mantissa::kernels::fp8::detail

namespace mantissa::kernels::fp8::detail {
namespace {

// Columns of a band taken at a time: 128 rows of 128 bytes, a 16 KiB copy that stays in L1.
constexpr int64_t kColumnChunk = 32;
constexpr int kChunkGroups = kColumnChunk / 16;

// N groups of 16 columns over the band's 128 rows from p (ld elements apart): group g's rows
// copied to tile[g] (row k at tile[g] + 16 k; the rows themselves, often a multiple of 4 KiB
// apart, would fall in one L1 set) and the largest magnitude bits of each column (a NaN's above
// kInfBits) into top[2 g] (columns 0-7) and top[2 g + 1] (8-15). The next chunk's bytes of each
// row are fetched into L1 meanwhile, and those eight chunks on into L2.
template <int N>
__attribute__((target("avx2"), always_inline)) inline void copy_band(const float* p, int64_t ld,
                                                                     float (*tile)[kBlockLen * 16],
                                                                     __m256i* top) {
  const __m256i abs = _mm256_set1_epi32(0x7FFFFFFF);
  __m256i m[2 * N];
  for (int g = 0; g < 2 * N; ++g) m[g] = _mm256_setzero_si256();
  for (int64_t k = 0; k < kBlockLen; ++k) {
    const float* row = p + k * ld;
    _mm_prefetch(reinterpret_cast<const char*>(row + kColumnChunk), _MM_HINT_T0);
    _mm_prefetch(reinterpret_cast<const char*>(row + kColumnChunk + 16), _MM_HINT_T0);
    _mm_prefetch(reinterpret_cast<const char*>(row + 8 * kColumnChunk), _MM_HINT_T1);
    _mm_prefetch(reinterpret_cast<const char*>(row + 8 * kColumnChunk + 16), _MM_HINT_T1);
    for (int g = 0; g < N; ++g)
      for (int h = 0; h < 2; ++h) {
        const __m256i x = load8i(row + 16 * g + 8 * h);
        _mm256_store_si256(reinterpret_cast<__m256i*>(tile[g] + 16 * k + 8 * h), x);
        // Magnitude bits are at most 0x7FFFFFFF: a signed maximum orders them.
        m[2 * g + h] = _mm256_max_epi32(m[2 * g + h], _mm256_and_si256(x, abs));
      }
  }
  for (int g = 0; g < 2 * N; ++g) top[g] = m[g];
}

// Column j of a group's copy as 128 contiguous values.
inline void gather_column(const float* tile, int j, float* column) {
  for (int k = 0; k < kBlockLen; ++k) column[k] = tile[16 * k + j];
}

// The codes of rows k (low 128-bit lane) and k + 16 (high) of a group's copy, 16 bytes each in
// column order, under the columns' integer constants (rb0: columns 0-7, rb1: 8-15).
__attribute__((target("avx2"), always_inline)) inline __m256i codes_of_rows(
    const float* t, __m256i rb0, __m256i rb1, __m256i& low0, __m256i& low1) {
  const __m256i a0 = load8i(t), a1 = load8i(t + 8);
  const __m256i b0 = load8i(t + 16 * 16), b1 = load8i(t + 16 * 16 + 8);
  const __m256i ca = _mm256_packus_epi32(code_of(a0, rb0, low0), code_of(a1, rb1, low1));
  const __m256i cb = _mm256_packus_epi32(code_of(b0, rb0, low0), code_of(b1, rb1, low1));
  const __m256i signs = _mm256_packs_epi16(_mm256_packs_epi32(a0, a1), _mm256_packs_epi32(b0, b1));
  const __m256i bytes =
      _mm256_or_si256(_mm256_packus_epi16(ca, cb),
                      _mm256_and_si256(signs, _mm256_set1_epi8(static_cast<char>(0x80))));
  return _mm256_permutevar8x32_epi32(bytes, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

}  // namespace

__attribute__((target("avx2"))) void block_columns_f32_e4m3_avx2(
    const float* src, int64_t ld, int64_t cols, uint8_t* dst, int64_t dst_step, float* scale_inv,
    int64_t inv_step, float for_inf, bool power_2, float epsilon, BlockCastStats& st) {
  LaneCounts counts{_mm256_setzero_si256(), _mm256_setzero_si256()};
  float amax_max = st.amax;
  double top_max = 0.0;
  // The codes bypass the caches (they are not read back here) where every column's 128 codes
  // start on a 32-byte boundary.
  const bool stream = reinterpret_cast<uintptr_t>(dst) % 32 == 0 && dst_step % 32 == 0;
  alignas(32) float tile[kChunkGroups][kBlockLen * 16];
  alignas(32) uint8_t out[16][kBlockLen];
  alignas(32) float column[kBlockLen];
  alignas(32) float inv[16], amax_of[16], scale_of[16];
  __m256 amax_acc = _mm256_setzero_ps();
  __m256d top_acc = _mm256_setzero_pd();
  Lanes lanes[16];
  bool nan[16];
  for (int64_t c0 = 0; c0 < cols; c0 += kColumnChunk) {
    const int groups = static_cast<int>(std::min(kColumnChunk, cols - c0) / 16);
    __m256i top[2 * kChunkGroups];
    if (groups == 2)
      copy_band<2>(src + c0, ld, tile, top);
    else
      copy_band<1>(src + c0, ld, tile, top);
    for (int g = 0; g < groups; ++g) {
      const int64_t c = c0 + 16 * g;
      const float* t = tile[g];
      // The columns' scales and their lanes' integer constants, 8 at a time; a column outside
      // them (a NaN or an inf, a scale not a power of 2 or above 2^120) is cast below from a copy
      // of its tile by the row tiles' body, a NaN's scale found again without it.
      __m256i rbs[2], belows[2];
      unsigned fallback = 0, nan_bits = 0;
      for (int h = 0; h < 2; ++h) {
        const __m256i b = top[2 * g + h];
        const __m256i nan_lanes =
            _mm256_cmpgt_epi32(b, _mm256_set1_epi32(static_cast<int>(kInfBits)));
        __m256i ok;
        const __m256i e =
            block_scales8(_mm256_castsi256_ps(b), nan_lanes, for_inf, power_2, epsilon,
                          scale_of + 8 * h, inv + 8 * h, amax_acc, top_acc, ok);
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(amax_of + 8 * h), b);
        fallback |= static_cast<unsigned>(_mm256_movemask_ps(_mm256_castsi256_ps(ok))) << (8 * h);
        nan_bits |= static_cast<unsigned>(_mm256_movemask_ps(_mm256_castsi256_ps(nan_lanes)))
                    << (8 * h);
        const __m256i shift = _mm256_slli_epi32(_mm256_sub_epi32(_mm256_set1_epi32(120), e), 23);
        rbs[h] = _mm256_sub_epi32(shift, _mm256_set1_epi32((1 << 19) - 1));
        belows[h] = _mm256_sub_epi32(_mm256_add_epi32(shift, _mm256_set1_epi32(1 << 23)),
                                     _mm256_set1_epi32(1));
      }
      fallback = ~fallback & 0xFFFFu;
      for (int j = 0; j < 16; ++j) {
        nan[j] = (nan_bits >> j) & 1u;
        if (nan[j]) {
          gather_column(t, j, column);
          const float amax = std::bit_cast<float>(max_magnitude_128(column));
          const float scale = block_scale(amax, kE4m3Max, for_inf, power_2, epsilon);
          inv[j] = block_scale_inverse(scale);
          amax_max = std::max(amax_max, amax);
          fold_top(amax, scale, top_max);
          lanes[j] = lanes_of(amax, scale);
        }
        scale_inv[(c + j) * inv_step] = inv[j];
      }
      const __m256i rb0 = rbs[0], rb1 = rbs[1];
      __m256i low0 = _mm256_set1_epi32(-1), low1 = _mm256_set1_epi32(-1);
      for (int sub = 0; sub < kBlockLen / 32; ++sub) {
        // Rows k and k + 16 of the 32 as 16 code bytes each, then transposed into the columns'
        // 32 bytes.
        __m256i x[16];
        const float* q = t + 16 * 32 * sub;
        for (int k = 0; k < 16; ++k) x[k] = codes_of_rows(q + 16 * k, rb0, rb1, low0, low1);
        transpose16x16_bytes(x);
        for (int j = 0; j < 16; ++j)
          _mm256_store_si256(reinterpret_cast<__m256i*>(out[j] + 32 * sub), x[j]);
      }
      // Columns with a value whose code is subnormal or flushed (0 < |x| < normal_from: |x| - 1
      // below normal_from - 1).
      const __m256i ok0 = _mm256_cmpeq_epi32(_mm256_max_epu32(low0, belows[0]), low0);
      const __m256i ok1 = _mm256_cmpeq_epi32(_mm256_max_epu32(low1, belows[1]), low1);
      const unsigned ok = static_cast<unsigned>(_mm256_movemask_ps(_mm256_castsi256_ps(ok0))) |
                          static_cast<unsigned>(_mm256_movemask_ps(_mm256_castsi256_ps(ok1))) << 8;
      fallback |= ~ok & 0xFFFFu;
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
