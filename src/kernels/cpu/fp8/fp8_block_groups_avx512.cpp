// The block recipe's 128x128 blocks of bfloat16 cast to E4M3 on AVX-512 with VBMI (fp8_block.h,
// detail::block_groups_bf16_e4m3_avx512): the group walk of fp8_block_groups.h over 512-bit
// lanes. A block's maxima fold 32 values a vector (vpmaxsw on the magnitude bits). Under a
// power-of-2 scale 2^e, e < 120, with amax * scale within E4M3's range (the recipe's common
// case), a row of a block takes the AVX2 body's fast codes (fast_codes32: |h| less the rebias
// ((120 - e) << 7) - 6 with unsigned saturation, avg with bit 4 of |h|, the code in bits 3-10),
// the code shifted into bits 8-14 and h's sign kept in bit 15 by one vpternlog, and 64 codes from
// the high bytes of two vectors by one vpermt2b, in place of the AVX2 body's packs and permutes
// (in cache, 1024 x 1024 on Zen 4: 0.080 -> 0.072 ns a value). quantize_128x128 takes it under
// power-of-2 scales only: under others every row would leave it. A row holding a nonzero value
// whose product lies below E4M3's smallest normal (|h| below ((121 - e) << 7): its code may be
// subnormal or flushed), and every block under another scale, take the AVX2 body's cast
// (tile_bf16_e4m3_avx2); a block holding a NaN its walk (nan_block_bf16_e4m3_avx2). The same amax,
// scale, codes and counts as the AVX2 walk.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
// (GCC 12 reports the AVX-512 intrinsics' _mm512_undefined_* operands as uninitialized.)
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>

#include <cstdint>

#include "kernels/cpu/fp8/fp8_block.h"
#include "kernels/cpu/fp8/fp8_codes_avx2.h"
#include "mantissa/core/bfloat16.h"
#include "mantissa/core/float8.h"

// The group walk takes this file's target (fp8_block_groups.h).
#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512vbmi")
#include "kernels/cpu/fp8/fp8_block_groups.h"

namespace mantissa::kernels::fp8::detail {
namespace {

// 64 codes into d; where kStream, with streaming stores (d 32-byte aligned, in one store where
// it is 64-byte aligned).
template <bool kStream>
[[gnu::always_inline]] inline void put64(uint8_t* d, __m512i v) {
  if constexpr (kStream) {
    if ((reinterpret_cast<uintptr_t>(d) & 63) == 0) {
      _mm512_stream_si512(reinterpret_cast<__m512i*>(d), v);
    } else {
      _mm256_stream_si256(reinterpret_cast<__m256i*>(d), _mm512_castsi512_si256(v));
      _mm256_stream_si256(reinterpret_cast<__m256i*>(d + 32), _mm512_extracti64x4_epi64(v, 1));
    }
  } else {
    _mm512_storeu_si512(d, v);
  }
}

// The group walk's lanes for bfloat16 on AVX-512: a block's folded bits are 32 lanes of 16-bit
// magnitude bits; only the counts of the rare casts are kept.
struct Bf16GroupsAvx512 {
  using Src = uint16_t;
  using Top = __m512i;
  using Counts = BlockCastStats;
  static constexpr uint32_t kInfBits = 0x7F80;
  // A block's amax and scale (for the AVX2 cast) and, where the fast codes apply (a power-of-2
  // scale 2^e with e < 120, amax * scale within E4M3's range), their rebias ((120 - e) << 7) - 6
  // and below = ((121 - e) << 7) - 1: a nonzero |h| with |h| - 1 below it has a product below
  // E4M3's smallest normal.
  struct Lanes {
    float amax, scale;
    uint16_t rebias, below;
    bool fast;
  };
  [[gnu::always_inline]] static __m512i fold(const uint16_t* s, __m512i top) {
    const __m512i abs = _mm512_set1_epi16(0x7FFF);
    // Magnitude bits are at most 0x7FFF: a signed maximum orders them.
    const __m512i m0 = _mm512_max_epi16(_mm512_and_si512(_mm512_loadu_si512(s), abs),
                                        _mm512_and_si512(_mm512_loadu_si512(s + 32), abs));
    const __m512i m1 = _mm512_max_epi16(_mm512_and_si512(_mm512_loadu_si512(s + 64), abs),
                                        _mm512_and_si512(_mm512_loadu_si512(s + 96), abs));
    return _mm512_max_epi16(top, _mm512_max_epi16(m0, m1));
  }
  [[gnu::always_inline]] static uint32_t top_bits(__m512i top) {
    const __m256i t =
        _mm256_max_epi16(_mm512_castsi512_si256(top), _mm512_extracti64x4_epi64(top, 1));
    const __m128i m = _mm_max_epi16(_mm256_castsi256_si128(t), _mm256_extracti128_si256(t, 1));
    const __m128i low = _mm_minpos_epu16(_mm_xor_si128(m, _mm_set1_epi32(-1)));
    return static_cast<uint16_t>(~_mm_cvtsi128_si32(low));
  }
  static float amax_of(uint32_t bits) { return bf16_bits_to_float(static_cast<uint16_t>(bits)); }
  static Lanes lanes_of(float amax, float scale) {
    Lanes l{amax, scale, 0, 0, false};
    int e = 0;
    if (!pow2_exponent(scale, &e) || e >= 120 || !(amax * scale <= Float8E4M3::kMax)) return l;
    l.rebias = static_cast<uint16_t>(((120 - e) << 7) - 6);
    l.below = static_cast<uint16_t>(((121 - e) << 7) - 1);
    l.fast = true;
    return l;
  }
  // The codes of 128 values at p into d: the fast codes where every nonzero value's product is
  // a normal E4M3 value (with streaming stores where kStream, d 32-byte aligned), else the AVX2
  // body's cast.
  template <bool kStream>
  [[gnu::always_inline]] static void cast(const uint16_t* p, uint8_t* d, const Lanes& l,
                                          BlockCastStats& counts) {
    if (l.fast) [[likely]] {
      const __m512i abs = _mm512_set1_epi16(0x7FFF), one = _mm512_set1_epi16(1);
      const __m512i rb = _mm512_set1_epi16(static_cast<int16_t>(l.rebias));
      // The smallest |h| - 1 (0 wraps to 0xFFFF), and each vector's code in bits 8-14 with h's
      // sign in bit 15 (bits 0-7 unused).
      __m512i low = _mm512_set1_epi16(-1), f[4];
#pragma GCC unroll 4
      for (int q = 0; q < 4; ++q) {
        const __m512i h = _mm512_loadu_si512(p + 32 * q);
        const __m512i a = _mm512_and_si512(h, abs);
        low = _mm512_min_epu16(low, _mm512_sub_epi16(a, one));
        const __m512i r = _mm512_avg_epu16(_mm512_subs_epu16(a, rb),
                                           _mm512_and_si512(_mm512_srli_epi16(a, 4), one));
        // (r << 5) where the mask 0x7F00 is set, h elsewhere.
        f[q] =
            _mm512_ternarylogic_epi32(_mm512_slli_epi16(r, 5), h, _mm512_set1_epi16(0x7F00), 0xE4);
      }
      if (_mm512_cmplt_epu16_mask(low, _mm512_set1_epi16(static_cast<int16_t>(l.below))) == 0)
          [[likely]] {
        // Byte 2i + 1 of (f[2k], f[2k + 1]) for i < 64: their high bytes.
        const __m512i odd = _mm512_set_epi64(
            0x7F7D7B7977757371, 0x6F6D6B6967656361, 0x5F5D5B5957555351, 0x4F4D4B4947454341,
            0x3F3D3B3937353331, 0x2F2D2B2927252321, 0x1F1D1B1917151311, 0x0F0D0B0907050301);
#pragma GCC unroll 2
        for (int k = 0; k < 2; ++k)
          put64<kStream>(d + 64 * k, _mm512_permutex2var_epi8(f[2 * k], odd, f[2 * k + 1]));
        return;
      }
    }
    tile_bf16_e4m3_avx2(p, d, l.amax, l.scale, counts);
  }
  static void nan_block(const uint16_t* src, int64_t ld, int64_t rows, uint8_t* dst, int64_t ldd,
                        float* scale_inv, float for_inf, bool power_2, float epsilon,
                        float& amax_max, double& top_max, BlockCastStats& counts) {
    nan_block_bf16_e4m3_avx2(src, ld, rows, dst, ldd, scale_inv, for_inf, power_2, epsilon,
                             amax_max, top_max, counts);
  }
};

}  // namespace

void block_groups_bf16_e4m3_avx512(const BlockGroup* groups, int64_t n, int64_t ld, int64_t ldd,
                                   float for_inf, bool power_2, float epsilon, bool stream,
                                   BlockCastStats& st) {
  groups::block_groups<Bf16GroupsAvx512>(groups, n, ld, ldd, for_inf, power_2, epsilon, stream, st);
}

}  // namespace mantissa::kernels::fp8::detail

#pragma GCC pop_options
