#pragma once
// Internal: the block recipe's 128x1 column cast (fp8_block.h, detail::column_tiles_*_e4m3_*),
// one walk for bfloat16 and float32 sources at every SIMD level, over lane traits L that the
// level's file defines (fp8_block_avx2.cpp, fp8_block_f32_avx2.cpp, fp8_block_avx512.cpp). A
// level's file includes this header after its `#pragma GCC target`, so that the walk takes that
// level's target; L lives in the file's unnamed namespace, so each instantiation is the file's
// own.
//
// A band of `rows` (at most 128) rows, row r at src + r * ld, of `cols` columns: each column's
// largest magnitude bits (a NaN's lie above infinity's) from one pass over the rows in memory
// order, an elementwise maximum over four rows at a time; the columns' scales 32 at a time in
// float32 lanes; a column holding a NaN has its amax found again, each NaN passed over, by a walk
// down the column; then the codes row by row while the rows are in cache, 32 columns a step under
// per-column constants, the steps that need float32 lanes made again after the row (a call in
// the loop would keep the step's constants out of registers). Columns past the last multiple of
// 32 take the same steps through a row buffer padded with zeros (whose code is 0 under scale 1:
// nothing counted or measured). Where `stream`, the full steps' codes are written with streaming
// stores (dst and ldd multiples of 32).
//
// What L gives:
//   Src, Bits          the source's element and its bits (uint16_t and uint16_t, float and
//                      uint32_t), with kAbs, kInfBits and amax_of(bits) (the float it is)
//   Rebias             the 32 columns' per-column constant of the fast codes
//   kVec               the columns one vector holds
//   Vec, magnitude(p), max(a, b), max_into(top, m)
//                      the vector of kVec bits; the magnitude bits of p[0, kVec); their
//                      elementwise maximum; top[0, kVec) = max(top, m) (fold_rows)
//   Acc, Counts        the scales' amax and amax * scale maxima; the float32 lanes' counts
//   scales32(top, for_inf, power_2, epsilon, scale_of, inv, rebias, acc, nan)
//                      32 columns' scales, scale_invs, constants; nan: the columns whose top
//                      is a NaN's (their scale_of and inv are written again). A column outside
//                      the fast codes (a power-of-2 scale 2^e, e below the level's limit, amax *
//                      scale within E4M3's range, no NaN) gets a rebias that makes codes32 fail
//                      on any nonzero value of it, so that the walk tests nothing per column
//   codes32<kStream>(p, rebias, d) -> ok
//                      32 codes under the fast constants (put32<kStream>); false where a value's
//                      code is subnormal or flushed (the caller makes them again)
//   codes32_f32(p, scale_of, d, counts)
//                      32 codes through float32 lanes under each column's scale
//                      (satfinite_codes of f32(x * scale)), their statistics counted
//   finish(acc, counts, amax_max, top_max, st)
//                      the statistics into st
#include <immintrin.h>

#include <algorithm>
#include <cstdint>

#include "kernels/cpu/fp8/fp8_block.h"
#include "kernels/cpu/fp8/fp8_block_scales_avx2.h"

namespace mantissa::kernels::fp8::detail::columns {

// 32 codes into d (32-byte aligned where kStream: a streaming store past the caches).
template <bool kStream>
[[gnu::always_inline]] inline void put32(uint8_t* d, __m256i v) {
  if constexpr (kStream)
    _mm256_stream_si256(reinterpret_cast<__m256i*>(d), v);
  else
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(d), v);
}

// top[0, kVec) = max(top, |p + i * ld| for i < kRows) as bits: the rows' magnitudes folded
// pairwise, then into top.
template <class L, int kRows>
[[gnu::always_inline]] inline void fold_rows(typename L::Bits* top, const typename L::Src* p,
                                             int64_t ld) {
  typename L::Vec m[kRows];
#pragma GCC unroll 4
  for (int k = 0; k < kRows; ++k) m[k] = L::magnitude(p + k * ld);
#pragma GCC unroll 4
  for (int w = 1; w < kRows; w *= 2)
#pragma GCC unroll 4
    for (int k = 0; k + w < kRows; k += 2 * w) m[k] = L::max(m[k], m[k + w]);
  L::max_into(top, m[0]);
}

template <class L>
inline void column_tiles(const typename L::Src* src, int64_t ld, int64_t rows, int64_t cols,
                         uint8_t* dst, int64_t ldd, float* scale_inv, float for_inf, bool power_2,
                         float epsilon, const typename L::Src* next, int64_t next_bytes,
                         bool stream, BlockCastStats& st) {
  using Src = typename L::Src;
  using Bits = typename L::Bits;
  constexpr int64_t kItem = sizeof(Src);
  constexpr int64_t kMaxCols = kColumnGroupBytes / kItem + 32;
  constexpr int kFoldRows = 4;
  const int64_t full = cols / 32 * 32, tail = cols - full, padded = full + (tail ? 32 : 0);
  alignas(64) Src rest[32] = {};
  const auto rest_of = [&](int64_t r) {
    std::copy_n(src + r * ld + full, tail, rest);
    return rest;
  };
  // Each column's largest magnitude bits, read in memory order, kFoldRows rows at a time.
  alignas(64) Bits top_buffer[kMaxCols + 4096 / sizeof(Bits)];
  Bits* top = half_a_page_from(top_buffer, src);
  std::fill_n(top, padded, Bits{0});
  int64_t r = 0;
  for (; r + kFoldRows <= rows; r += kFoldRows) {
    const Src* p = src + r * ld;
    for (int64_t c = 0; c < full; c += L::kVec) fold_rows<L, kFoldRows>(top + c, p + c, ld);
  }
  for (; r < rows; ++r)
    for (int64_t c = 0; c < full; c += L::kVec) fold_rows<L, 1>(top + c, src + r * ld + c, ld);
  if (tail)
    for (r = 0; r < rows; ++r) {
      const Src* p = rest_of(r);
      for (int64_t c = 0; c < 32; c += L::kVec) fold_rows<L, 1>(top + full + c, p + c, 0);
    }
  // The columns' scales 32 at a time.
  alignas(64) typename L::Rebias rebias[kMaxCols];
  alignas(64) float scale_of[kMaxCols];
  alignas(64) float inv[kMaxCols];
  typename L::Acc acc{};
  float amax_max = st.amax;
  double top_max = 0.0;
  for (int64_t c = 0; c < padded; c += 32) {
    uint32_t nan = 0;
    L::scales32(top + c, for_inf, power_2, epsilon, scale_of + c, inv + c, rebias + c, acc, nan);
    for (; nan; nan &= nan - 1) {
      const int64_t j = c + __builtin_ctz(nan);
      Bits bits = 0;
      for (int64_t k = 0; k < rows; ++k) {
        const auto a = static_cast<Bits>(std::bit_cast<Bits>(src[k * ld + j]) & L::kAbs);
        if (a <= L::kInfBits) bits = std::max(bits, a);
      }
      const float amax = L::amax_of(bits);
      const float scale = block_scale(amax, Float8E4M3::kMax, for_inf, power_2, epsilon);
      scale_of[j] = scale;
      inv[j] = block_scale_inverse(scale);
      amax_max = std::max(amax_max, amax);
      fold_top(amax, scale, top_max);
    }
  }
  std::copy_n(inv, cols, scale_inv);
  // The codes row by row, 32 columns a step, while the rows are in cache. The next band's or
  // group's rows are fetched into L2 meanwhile, at the pace of the codes (a demand load every
  // 4 KiB of a row first, touch_pages): each step's lines of the next row at the same columns,
  // while they lie within next_bytes.
  typename L::Counts counts{};
  const int64_t ahead = next != nullptr ? next_bytes : 0;
  const int64_t fetched = std::min(full, ahead / (kItem * 32) * 32);  // steps fetching all lines
  alignas(32) uint8_t rest_codes[32];
  int32_t again[kMaxCols / 32];
  const auto codes_rows = [&]<bool kStream>() {
    for (int64_t r = 0; r < rows; ++r) {
      const Src* p = src + r * ld;
      uint8_t* d = dst + r * ldd;
      const auto* line = reinterpret_cast<const char*>(next + r * ld);
      if (ahead > 0) touch_pages(line, ahead);
      int n = 0;
      const int64_t fetched_here = fetched;
      const auto step = [&](int64_t c) __attribute__((always_inline)) {
        if (!L::template codes32<kStream>(p + c, rebias + c, d + c)) [[unlikely]]
          again[n++] = static_cast<int32_t>(c);
      };
      int64_t c = 0;
      for (; c < fetched_here; c += 32) {
#pragma GCC unroll 2
        for (int64_t b = 0; b < kItem * 32; b += 64)
          _mm_prefetch(line + kItem * c + b, _MM_HINT_T1);
        step(c);
      }
      if (c < full && kItem * c < ahead) {  // the step holding the end of next_bytes
        for (int64_t b = kItem * c; b < ahead; b += 64) _mm_prefetch(line + b, _MM_HINT_T1);
        step(c);
        c += 32;
      }
      for (; c < full; c += 32) step(c);
      for (int i = 0; i < n; ++i)
        L::codes32_f32(p + again[i], scale_of + again[i], d + again[i], counts);
      if (tail) {
        const Src* q = rest_of(r);
        if (!L::template codes32<false>(q, rebias + full, rest_codes))
          L::codes32_f32(q, scale_of + full, rest_codes, counts);
        std::copy_n(rest_codes, tail, d + full);
      }
    }
  };
  if (stream) {
    codes_rows.template operator()<true>();
    _mm_sfence();
  } else {
    codes_rows.template operator()<false>();
  }
  L::finish(acc, counts, amax_max, top_max, st);
}

}  // namespace mantissa::kernels::fp8::detail::columns
