// FP8 block scaling's quantizers (fp8_block.h): each tile's amax, TransformerEngine's scale of
// it, and the delayed-scaling cast of the tile's elements with that scale (whose SIMD levels give
// the scalar bits, so these do too).
#include "kernels/cpu/fp8/fp8_block.h"

#include <immintrin.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <vector>

#include <omp.h>

#include "kernels/cpu/common/stream_codes.h"
#include "kernels/cpu/fp8/fp8_cast.h"
#include "mantissa/core/bfloat16.h"
#include "mantissa/core/error.h"
#include "mantissa/core/float8.h"
#include "mantissa/core/half.h"

namespace mantissa::kernels::fp8 {
namespace {

// The largest magnitude among n values of one IEEE format held in `Bits`, NaN passed over: with
// the sign cleared a non-NaN value's bits order as its magnitude does, and every NaN's lie above
// infinity's, so they are mapped to 0 before the integer max. The AVX-512 and AVX2 versions do
// the same with unsigned vector compares and maxima; an integer max gives the same result at
// every level.
template <typename Bits>
[[gnu::always_inline]] inline Bits max_magnitude_body(const Bits* p, int64_t n, Bits abs_mask,
                                                      Bits inf_bits) {
  Bits best = 0;
  for (int64_t i = 0; i < n; ++i) {
    Bits a = static_cast<Bits>(p[i] & abs_mask);
    a = a > inf_bits ? Bits{0} : a;
    best = a > best ? a : best;
  }
  return best;
}
template <typename Bits>
[[gnu::target("avx512f,avx512bw")]] Bits max_magnitude_avx512(const Bits* p, int64_t n,
                                                              Bits abs_mask, Bits inf_bits) {
  constexpr int64_t kLanes = 64 / sizeof(Bits);
  const bool wide = sizeof(Bits) == 4;
  const __m512i mask = wide ? _mm512_set1_epi32(static_cast<int>(abs_mask))
                            : _mm512_set1_epi16(static_cast<int16_t>(abs_mask));
  const __m512i inf = wide ? _mm512_set1_epi32(static_cast<int>(inf_bits))
                           : _mm512_set1_epi16(static_cast<int16_t>(inf_bits));
  __m512i best = _mm512_setzero_si512();
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    const __m512i a = _mm512_and_si512(_mm512_loadu_si512(p + i), mask);
    if (wide)
      best = _mm512_mask_max_epu32(best, _mm512_cmple_epu32_mask(a, inf), best, a);
    else
      best = _mm512_mask_max_epu16(best, _mm512_cmple_epu16_mask(a, inf), best, a);
  }
  alignas(64) Bits lanes[kLanes];
  _mm512_store_si512(lanes, best);
  Bits out = max_magnitude_body(p + i, n - i, abs_mask, inf_bits);
  for (Bits l : lanes) out = l > out ? l : out;
  return out;
}
template <typename Bits>
[[gnu::target("avx2")]] Bits max_magnitude_avx2(const Bits* p, int64_t n, Bits abs_mask,
                                                Bits inf_bits) {
  constexpr int64_t kLanes = 32 / sizeof(Bits);
  const bool wide = sizeof(Bits) == 4;
  const __m256i mask = wide ? _mm256_set1_epi32(static_cast<int>(abs_mask))
                            : _mm256_set1_epi16(static_cast<int16_t>(abs_mask));
  const __m256i inf = wide ? _mm256_set1_epi32(static_cast<int>(inf_bits))
                           : _mm256_set1_epi16(static_cast<int16_t>(inf_bits));
  __m256i best = _mm256_setzero_si256();
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    __m256i a = _mm256_and_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + i)), mask);
    // a <= inf where min(a, inf) == a; NaNs (above inf) become 0.
    if (wide) {
      a = _mm256_and_si256(a, _mm256_cmpeq_epi32(_mm256_min_epu32(a, inf), a));
      best = _mm256_max_epu32(best, a);
    } else {
      a = _mm256_and_si256(a, _mm256_cmpeq_epi16(_mm256_min_epu16(a, inf), a));
      best = _mm256_max_epu16(best, a);
    }
  }
  alignas(32) Bits lanes[kLanes];
  _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), best);
  Bits out = max_magnitude_body(p + i, n - i, abs_mask, inf_bits);
  for (Bits l : lanes) out = l > out ? l : out;
  return out;
}
template <typename Bits>
Bits max_magnitude(const Bits* p, int64_t n, Bits abs_mask, Bits inf_bits) {
  const SimdLevel level = simd_level();
  if (level >= SimdLevel::kAvx512) return max_magnitude_avx512(p, n, abs_mask, inf_bits);
  if (level >= SimdLevel::kAvx2) return max_magnitude_avx2(p, n, abs_mask, inf_bits);
  return max_magnitude_body(p, n, abs_mask, inf_bits);
}

// max |x| over n elements of `dtype` at element `i` of src, NaN passed over.
float amax_of(const void* src, DType dtype, int64_t i, int64_t n) {
  if (dtype == kFloat32) {
    const auto* p = static_cast<const uint32_t*>(src) + i;
    return std::bit_cast<float>(max_magnitude<uint32_t>(p, n, 0x7FFFFFFFu, 0x7F800000u));
  }
  const auto* p = static_cast<const uint16_t*>(src) + i;
  if (dtype == kBFloat16) return bf16_bits_to_float(max_magnitude<uint16_t>(p, n, 0x7FFF, 0x7F80));
  return half_bits_to_float(max_magnitude<uint16_t>(p, n, 0x7FFF, 0x7C00));
}

const void* at(const void* p, DType dtype, int64_t i) {
  return static_cast<const char*>(p) + i * static_cast<int64_t>(dtype.itemsize());
}

void check(DType src_dtype, DType fp8, int64_t rows, int64_t cols, int64_t ld) {
  MANTISSA_CHECK(src_dtype == kFloat32 || src_dtype == kBFloat16 || src_dtype == kFloat16,
                 "fp8 block cast", "the source must be float32, bfloat16 or float16, got {}",
                 src_dtype.name());
  MANTISSA_CHECK(fp8.is_float8(), "fp8 block cast", "{} is not an FP8 dtype", fp8.name());
  MANTISSA_CHECK(rows >= 0 && cols >= 0 && ld >= cols, "fp8 block cast",
                 "bad shape {} x {} with row stride {}", rows, cols, ld);
}

float fp8_max_of(DType fp8) { return fp8 == kFloat8_e4m3fn ? Float8E4M3::kMax : Float8E5M2::kMax; }

// The SIMD level's cast body, called per tile directly (scaled_cast's dispatcher and its checks
// cost as much as a 128-element cast): the same body scaled_cast runs for one chunk.
using CastFn = CastStats (*)(const void*, DType, uint8_t*, int64_t, float, DType);
CastFn cast_body(SimdLevel level) {
  const SimdLevel l = std::min(level, simd_level());
  if (l >= SimdLevel::kAvx512) return detail::scaled_cast_avx512;
  if (l >= SimdLevel::kAvx2) return detail::scaled_cast_avx2;
  return detail::scaled_cast_scalar;
}

// Whether the AVX2 casts of bfloat16 or float32 to E4M3 (detail::block_tiles_*_e4m3_avx2,
// detail::block_groups_*_e4m3_avx2) take the full tiles and blocks.
bool e4m3_tiles(DType src_dtype, DType fp8, SimdLevel level) {
  return (src_dtype == kBFloat16 || src_dtype == kFloat32) && fp8 == kFloat8_e4m3fn &&
         std::min(level, simd_level()) >= SimdLevel::kAvx2;
}

// count full 1x128 tiles through the AVX2 tile cast of src_dtype (bfloat16 or float32); tile i's
// values at element i * src_step of src.
void e4m3_tiles_avx2(const void* src, DType src_dtype, int64_t src_step, int64_t count,
                     uint8_t* dst, int64_t dst_step, float* scale_inv, int64_t inv_step,
                     float for_inf, bool power_2, float epsilon, BlockCastStats& st) {
  if (src_dtype == kFloat32)
    detail::block_tiles_f32_e4m3_avx2(static_cast<const float*>(src), src_step, count, dst,
                                      dst_step, scale_inv, inv_step, for_inf, power_2, epsilon, st);
  else
    detail::block_tiles_bf16_e4m3_avx2(static_cast<const uint16_t*>(src), src_step, count, dst,
                                       dst_step, scale_inv, inv_step, for_inf, power_2, epsilon,
                                       st);
}

}  // namespace

float largest_finite(DType src_dtype) {
  if (src_dtype == kBFloat16) return bf16_bits_to_float(0x7F7F);
  if (src_dtype == kFloat16) return 65504.0f;
  return std::numeric_limits<float>::max();
}

BlockCastStats quantize_1x128(const void* src, DType src_dtype, int64_t rows, int64_t cols,
                              int64_t ld, uint8_t* codes, float* scale_inv, DType fp8, bool power_2,
                              float epsilon, SimdLevel level) {
  check(src_dtype, fp8, rows, cols, ld);
  const CastFn body = cast_body(level);
  const int64_t tiles = block_count(cols);
  const float max = fp8_max_of(fp8), for_inf = largest_finite(src_dtype);
  // Full tiles of bfloat16 or float32 to E4M3 go through the AVX2 tile cast, a row's in one call.
  const int64_t fast = e4m3_tiles(src_dtype, fp8, level) ? cols / kBlockLen : 0;
  float amax = 0.0f;
  double peak = 0.0;
  int64_t saturated = 0, flushed = 0;
#pragma omp parallel for schedule(static) reduction(max : amax, peak) reduction(+ : saturated, flushed) if (rows * cols > (1 << 15))
  for (int64_t r = 0; r < rows; ++r) {
    if (fast > 0) {
      BlockCastStats st;
      e4m3_tiles_avx2(at(src, src_dtype, r * ld), src_dtype, kBlockLen, fast, codes + r * cols,
                      kBlockLen, scale_inv + r * tiles, 1, for_inf, power_2, epsilon, st);
      amax = std::max(amax, st.amax);
      peak = std::max(peak, st.peak);
      saturated += st.saturated;
      flushed += st.flushed;
    }
    for (int64_t t = fast; t < tiles; ++t) {
      const int64_t c0 = t * kBlockLen, len = std::min(kBlockLen, cols - c0);
      const float tile_amax = amax_of(src, src_dtype, r * ld + c0, len);
      const float scale = block_scale(tile_amax, max, for_inf, power_2, epsilon);
      scale_inv[r * tiles + t] = block_scale_inverse(scale);
      const CastStats st =
          body(at(src, src_dtype, r * ld + c0), src_dtype, codes + r * cols + c0, len, scale, fp8);
      amax = std::max(amax, tile_amax);
      peak = std::max(peak, block_peak(tile_amax, scale, max));
      saturated += st.saturated;
      flushed += st.flushed;
    }
  }
  return {amax, saturated, flushed, peak};
}

BlockCastStats quantize_128x1(const void* src, DType src_dtype, int64_t rows, int64_t cols,
                              int64_t ld, uint8_t* codes, float* scale_inv, DType fp8, bool power_2,
                              float epsilon, SimdLevel level) {
  check(src_dtype, fp8, rows, cols, ld);
  const CastFn body = cast_body(level);
  const int64_t bands = block_count(rows);
  const int64_t item = static_cast<int64_t>(src_dtype.itemsize());
  const float max = fp8_max_of(fp8), for_inf = largest_finite(src_dtype);
  // bfloat16 or float32 to E4M3: the band casts (AVX2; bfloat16's AVX-512 body at that level),
  // kColumnGroupBytes of each row at a time (the last group takes the columns past the last
  // multiple of 32 as well); with fewer bands than threads, a band's columns are shared out in
  // narrower groups.
  const bool fast = e4m3_tiles(src_dtype, fp8, level);
  const bool avx512 = std::min(level, simd_level()) >= SimdLevel::kAvx512;
  const int64_t fast_cols = fast ? cols : 0;
  int64_t group = kColumnGroupBytes / item;
  const int64_t threads = omp_get_max_threads();
  if (fast_cols > 0 && bands < threads && rows * cols > (1 << 15)) {
    const int64_t per_band = (threads + bands - 1) / bands;
    group = std::min(group, std::max<int64_t>(32, (cols / 32 + per_band - 1) / per_band * 32));
  }
  // Codes past the caches' size are streamed (common/stream_codes.h), where every group's rows
  // start on a 32-byte boundary. (The 1x128 cast keeps its codes in cache: streamed, they
  // measured slower.)
  const bool stream = rows * cols >= kStreamCodesFrom &&
                      (reinterpret_cast<uintptr_t>(codes) | static_cast<uintptr_t>(cols)) % 32 == 0;
  // Whole groups, the last one with the rest (fewer than 32 columns past a full group join it).
  const int64_t groups = fast_cols < 32
                             ? (fast_cols > 0)
                             : fast_cols / 32 * 32 / group + (fast_cols / 32 * 32 % group != 0);
  float amax = 0.0f;
  double peak = 0.0;
  int64_t saturated = 0, flushed = 0;
#pragma omp parallel for collapse(2) schedule(static) reduction(max : amax, peak) reduction(+ : saturated, flushed) if (rows * cols > (1 << 15))
  for (int64_t b = 0; b < bands; ++b)
    for (int64_t g = 0; g < groups; ++g) {
      const int64_t r0 = b * kBlockLen, rn = std::min(kBlockLen, rows - r0);
      const int64_t c0 = g * group, cn = g + 1 < groups ? group : fast_cols - c0;
      // The group after this one in the loop's order (the next thread's, at a share's end), its
      // rows no further than this one's.
      const int64_t nr0 = g + 1 < groups ? r0 : r0 + kBlockLen;
      const int64_t nc0 = g + 1 < groups ? c0 + group : 0;
      const void* next = nr0 + rn <= rows ? at(src, src_dtype, nr0 * ld + nc0) : nullptr;
      const int64_t next_bytes = item * std::min(group, fast_cols - nc0);
      BlockCastStats st;
      if (src_dtype == kFloat32)
        detail::column_tiles_f32_e4m3_avx2(static_cast<const float*>(src) + r0 * ld + c0, ld, rn,
                                           cn, codes + r0 * cols + c0, cols,
                                           scale_inv + b * cols + c0, for_inf, power_2, epsilon,
                                           static_cast<const float*>(next), next_bytes, stream, st);
      else
        (avx512 ? detail::column_tiles_bf16_e4m3_avx512 : detail::column_tiles_bf16_e4m3_avx2)(
            static_cast<const uint16_t*>(src) + r0 * ld + c0, ld, rn, cn, codes + r0 * cols + c0,
            cols, scale_inv + b * cols + c0, for_inf, power_2, epsilon,
            static_cast<const uint16_t*>(next), next_bytes, stream, st);
      amax = std::max(amax, st.amax);
      peak = std::max(peak, st.peak);
      saturated += st.saturated;
      flushed += st.flushed;
    }
  // Every column at the scalar level, for float16 sources and for E5M2, a strip of 64 bytes of
  // each row at a time: each tile gathered contiguous, cast by the
  // delayed-scaling cast's body, its codes put back in their column.
  constexpr int64_t kLine = 64;
  const int64_t strip = kLine / item;
  const int64_t strips = (cols - fast_cols + strip - 1) / strip;
#pragma omp parallel for collapse(2) schedule(static) reduction(max : amax, peak) reduction(+ : saturated, flushed) if (rows * (cols - fast_cols) > (1 << 15))
  for (int64_t b = 0; b < bands; ++b)
    for (int64_t i = 0; i < strips; ++i) {
      const int64_t r0 = b * kBlockLen, len = std::min(kBlockLen, rows - r0);
      const int64_t c0 = fast_cols + i * strip, cn = std::min(strip, cols - c0);
      alignas(64) unsigned char tile[kLine * kBlockLen];  // [cn][len] elements, column by column
      alignas(64) uint8_t tile_codes[kLine * kBlockLen];  // [cn][len]
      for (int64_t k = 0; k < len; ++k) {
        const auto* row = static_cast<const unsigned char*>(at(src, src_dtype, (r0 + k) * ld + c0));
        for (int64_t c = 0; c < cn; ++c)
          std::copy_n(row + c * item, item, tile + (c * len + k) * item);
      }
      for (int64_t c = 0; c < cn; ++c) {
        const void* t = tile + c * len * item;
        const float tile_amax = amax_of(t, src_dtype, 0, len);
        const float scale = block_scale(tile_amax, max, for_inf, power_2, epsilon);
        scale_inv[b * cols + c0 + c] = block_scale_inverse(scale);
        const CastStats st = body(t, src_dtype, tile_codes + c * len, len, scale, fp8);
        amax = std::max(amax, tile_amax);
        peak = std::max(peak, block_peak(tile_amax, scale, max));
        saturated += st.saturated;
        flushed += st.flushed;
      }
      for (int64_t k = 0; k < len; ++k)
        for (int64_t c = 0; c < cn; ++c) codes[(r0 + k) * cols + c0 + c] = tile_codes[c * len + k];
    }
  return {amax, saturated, flushed, peak};
}

BlockCastStats quantize_128x128(const void* src, DType src_dtype, int64_t rows, int64_t cols,
                                int64_t ld, uint8_t* codes, float* scale_inv, DType fp8,
                                bool power_2, float epsilon, SimdLevel level) {
  check(src_dtype, fp8, rows, cols, ld);
  const CastFn body = cast_body(level);
  const int64_t block_rows = block_count(rows), block_cols = block_count(cols);
  const float max = fp8_max_of(fp8), for_inf = largest_finite(src_dtype);
  // Blocks 128 columns wide of bfloat16 or float32 to E4M3 go through the AVX2 group casts.
  const bool fast = e4m3_tiles(src_dtype, fp8, level);
  // Blocks are taken a group side by side (kBlockGroupBytes of each row): the amax pass and
  // then the cast read each of the group's rows in memory order, the second time from cache,
  // where a block at a time would read 128 short runs far apart. With fewer bands of blocks than
  // threads, a band's blocks are shared out in narrower groups, so that every thread has one.
  int64_t group = kBlockGroupBytes / (kBlockLen * static_cast<int64_t>(src_dtype.itemsize()));
  const int64_t threads = omp_get_max_threads();
  if (block_rows < threads && rows * cols > (1 << 15)) {
    const int64_t per_band = (threads + block_rows - 1) / block_rows;
    group = std::max<int64_t>(1, std::min(group, (block_cols + per_band - 1) / per_band));
  }
  const int64_t groups = (block_cols + group - 1) / group;
  float amax = 0.0f;
  double peak = 0.0;
  int64_t saturated = 0, flushed = 0;
  // Full-width blocks of bfloat16 or float32 to E4M3: the AVX2 group casts, each thread's share
  // of the groups (in the order band by band, a band's groups left to right) in one call, which
  // reads each group's rows from memory while it casts the group before.
  const int64_t fast_blocks = fast ? cols / kBlockLen : 0;
  // Their codes past the caches' size are streamed (common/stream_codes.h), where every row
  // starts on a 32-byte boundary.
  const bool stream = rows * cols >= kStreamCodesFrom &&
                      (reinterpret_cast<uintptr_t>(codes) | static_cast<uintptr_t>(cols)) % 32 == 0;
  // bfloat16's rows under power-of-2 scales (the recipe's default, whose rows take the 16-bit
  // lanes) in 512-bit lanes where the level and VBMI allow; under other scales every row would
  // leave them for the AVX2 body's float32 lanes.
  const bool avx512_vbmi =
      power_2 && std::min(level, simd_level()) >= SimdLevel::kAvx512 && cpu_features().avx512_vbmi;
  if (fast_blocks > 0) {
#pragma omp parallel reduction(max : amax, peak) reduction(+ : saturated, flushed) if (rows * cols > (1 << 15))
    {
      const int64_t units = block_rows * groups, threads_here = omp_get_num_threads();
      const int64_t t = omp_get_thread_num();
      const int64_t u0 = units * t / threads_here, u1 = units * (t + 1) / threads_here;
      std::vector<detail::BlockGroup> share;
      share.reserve(static_cast<size_t>(u1 - u0));
      for (int64_t u = u0; u < u1; ++u) {
        const int64_t bi = u / groups, bj0 = u % groups * group;
        const int64_t full = std::min(bj0 + group, fast_blocks) - bj0;
        if (full <= 0) continue;
        const int64_t r0 = bi * kBlockLen;
        share.push_back({at(src, src_dtype, r0 * ld + bj0 * kBlockLen),
                         codes + r0 * cols + bj0 * kBlockLen, scale_inv + bi * block_cols + bj0,
                         std::min(kBlockLen, rows - r0), full});
      }
      const auto n = static_cast<int64_t>(share.size());
      BlockCastStats st;
      if (src_dtype == kFloat32)
        detail::block_groups_f32_e4m3_avx2(share.data(), n, ld, cols, for_inf, power_2, epsilon,
                                           stream, st);
      else
        (avx512_vbmi ? detail::block_groups_bf16_e4m3_avx512 : detail::block_groups_bf16_e4m3_avx2)(
            share.data(), n, ld, cols, for_inf, power_2, epsilon, stream, st);
      amax = std::max(amax, st.amax);
      peak = std::max(peak, st.peak);
      saturated += st.saturated;
      flushed += st.flushed;
    }
  }
  // The other blocks (those of other sources and formats, and the last, narrower ones) a group
  // at a time: the maxima over the group's rows, the scales, then the cast's body row by row.
  if (fast_blocks == block_cols) return {amax, saturated, flushed, peak};
#pragma omp parallel for collapse(2) schedule(static) reduction(max : amax, peak) reduction(+ : saturated, flushed) if (rows * cols > (1 << 15))
  for (int64_t bi = 0; bi < block_rows; ++bi) {
    for (int64_t g = 0; g < groups; ++g) {
      const int64_t r0 = bi * kBlockLen, rn = std::min(kBlockLen, rows - r0);
      const int64_t bj1 = std::min(block_cols, (g + 1) * group);
      const int64_t first = std::max(g * group, fast_blocks);
      if (first >= bj1) continue;
      float block_amax[kBlockGroupBytes / (2 * kBlockLen)] = {};
      for (int64_t r = r0; r < r0 + rn; ++r)
        for (int64_t bj = first; bj < bj1; ++bj) {
          const int64_t c0 = bj * kBlockLen, cn = std::min(kBlockLen, cols - c0);
          float& m = block_amax[bj - first];
          m = std::max(m, amax_of(src, src_dtype, r * ld + c0, cn));
        }
      float scale[kBlockGroupBytes / (2 * kBlockLen)];
      for (int64_t bj = first; bj < bj1; ++bj) {
        const float m = block_amax[bj - first];
        scale[bj - first] = block_scale(m, max, for_inf, power_2, epsilon);
        scale_inv[bi * block_cols + bj] = block_scale_inverse(scale[bj - first]);
        amax = std::max(amax, m);
        peak = std::max(peak, block_peak(m, scale[bj - first], max));
      }
      for (int64_t r = r0; r < r0 + rn; ++r)
        for (int64_t bj = first; bj < bj1; ++bj) {
          const int64_t c0 = bj * kBlockLen, cn = std::min(kBlockLen, cols - c0);
          const CastStats st = body(at(src, src_dtype, r * ld + c0), src_dtype,
                                    codes + r * cols + c0, cn, scale[bj - first], fp8);
          saturated += st.saturated;
          flushed += st.flushed;
        }
    }
  }
  return {amax, saturated, flushed, peak};
}

}  // namespace mantissa::kernels::fp8
