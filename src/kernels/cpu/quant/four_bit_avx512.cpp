// AVX-512 level of the 4-bit dequantization straight to bf16 or fp16 (four_bit.h). Each block's
// sixteen possible values are rounded once into a table of 16-bit words; the codes of 64
// elements (32 packed bytes) then select its low and high bytes with two vpshufb. This is what the
// oneDNN (AMX / AVX-512 BF16) path of Linear4bit feeds its product, where it used to decode to
// float32 and convert in a second pass.
// GCC 12 warns -Wmaybe-uninitialized inside AVX-512 intrinsics (GCC bug 105593); spurious.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <algorithm>

#include "core/bf16_rne_avx512.h"
#include "kernels/cpu/quant/four_bit.h"

#define MANTISSA_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx2,f16c")))

namespace mantissa::kernels::quant {
namespace {

enum class TableRounding { kBf16Integer, kBf16Native, kF16 };

// The block's table: round(table[c] * absmax) as sixteen 16-bit words. kBf16Native rounds with
// VCVTNEPS2BF16 (AVX-512 BF16; written as inline assembly so that this file needs no BF16
// target and runs it only where the CPU has it), which rounds like bf16_rne except that it
// flushes subnormal inputs to zero: a block whose nonzero absmax is below 2^-100 (a product
// could be subnormal) takes the integer rounding. NaN and inf round alike in both.
MANTISSA_AVX512 inline __m256i block_table(__m512 values, float absmax, TableRounding mode) {
  const __m512 prod = _mm512_mul_ps(values, _mm512_set1_ps(absmax));
  if (mode == TableRounding::kF16)
    return _mm512_cvtps_ph(prod, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  const float mag = absmax < 0.0f ? -absmax : absmax;
  if (mode == TableRounding::kBf16Native && !(mag != 0.0f && mag < 0x1p-100f)) {
    __m256i words;
    asm("vcvtneps2bf16 %1, %0" : "=v"(words) : "v"(prod));
    return words;
  }
  return _mm512_cvtepi32_epi16(bf16_rne(_mm512_castps_si512(prod)));
}

// The table's low bytes and high bytes, each broadcast to the four 128-bit lanes (vpshufb reads
// within a lane): one in-lane byte shuffle and one qword permute split the sixteen words.
MANTISSA_AVX512 inline void split_table(__m256i words, __m512i* lo, __m512i* hi) {
  const __m256i even_odd = _mm256_setr_epi8(0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15, 0,
                                            2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15);
  const __m256i t = _mm256_permute4x64_epi64(_mm256_shuffle_epi8(words, even_odd), 0xD8);
  *lo = _mm512_broadcast_i32x4(_mm256_castsi256_si128(t));
  *hi = _mm512_broadcast_i32x4(_mm256_extracti128_si256(t, 1));
}

// 64 elements from 32 packed bytes, as 16-bit words from the table split into its low bytes
// (tab_lo) and high bytes (tab_hi), each broadcast to the four 128-bit lanes for vpshufb.
// The bytes are first spread so that the in-lane unpacks at the end leave the words in order:
// lane L gets packed dwords L and 4 + L (elements 8L..8L+7 and 32+8L..32+8L+7), each byte
// twice, once per element.
struct Expand64 {
  __m512i dwords, twice, nibble;
  MANTISSA_AVX512 Expand64() {
    alignas(64) int32_t d[16];
    alignas(64) uint8_t t[64];
    for (int lane = 0; lane < 4; ++lane) {
      d[4 * lane] = lane;
      d[4 * lane + 1] = 4 + lane;
      d[4 * lane + 2] = d[4 * lane + 3] = 0;
      for (int j = 0; j < 16; ++j) t[16 * lane + j] = static_cast<uint8_t>(j / 2);
    }
    dwords = _mm512_load_si512(d);
    twice = _mm512_load_si512(t);
    nibble = _mm512_set1_epi8(0x0F);
  }
  // Even elements take the high nibble, odd ones the low (bitsandbytes' order).
  MANTISSA_AVX512 inline void run(const uint8_t* bytes, __m512i tab_lo, __m512i tab_hi,
                                  uint16_t* out) const {
    const __m512i src =
        _mm512_castsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(bytes)));
    const __m512i x = _mm512_shuffle_epi8(_mm512_permutexvar_epi32(dwords, src), twice);
    const __m512i codes = _mm512_and_si512(
        _mm512_mask_blend_epi8(0xAAAAAAAAAAAAAAAAull, _mm512_srli_epi16(x, 4), x), nibble);
    const __m512i lo = _mm512_shuffle_epi8(tab_lo, codes);
    const __m512i hi = _mm512_shuffle_epi8(tab_hi, codes);
    _mm512_storeu_si512(out, _mm512_unpacklo_epi8(lo, hi));
    _mm512_storeu_si512(out + 32, _mm512_unpackhi_epi8(lo, hi));
  }
};

}  // namespace

MANTISSA_AVX512 void dequantize_4bit_16_avx512(const uint8_t* packed, const float* absmax,
                                               int64_t first, int64_t count, int64_t blocksize,
                                               FourBitType type, bool bf16, bool native_bf16,
                                               uint16_t* out) {
  const __m512 values = _mm512_loadu_ps(four_bit_dequant_values(type).data());
  const TableRounding mode = !bf16         ? TableRounding::kF16
                             : native_bf16 ? TableRounding::kBf16Native
                                           : TableRounding::kBf16Integer;
  const Expand64 expand;
  const int64_t end = first + count;
  int64_t k = first;
  int64_t block = first / blocksize;
  int64_t block_end = std::min(end, (block + 1) * blocksize);
  while (k < end) {
    const __m256i words = block_table(values, absmax[block], mode);
    // Ragged starts and ends (odd index, fewer than 64 left in the block) read a copy.
    const bool ragged = (k % 2) != 0 || (block_end - k) % 64 != 0;
    alignas(32) uint16_t tab[16];
    if (ragged) _mm256_store_si256(reinterpret_cast<__m256i*>(tab), words);
    for (; k < block_end && (k % 2 != 0); ++k) out[k - first] = tab[packed[k / 2] & 0xF];
    if (k + 64 <= block_end) {
      __m512i tab_lo, tab_hi;
      split_table(words, &tab_lo, &tab_hi);
      for (; k + 64 <= block_end; k += 64)
        expand.run(packed + k / 2, tab_lo, tab_hi, out + (k - first));
    }
    for (; k < block_end; ++k) {
      const uint8_t byte = packed[k / 2];
      out[k - first] = tab[(k % 2) ? (byte & 0xF) : (byte >> 4)];
    }
    ++block;
    block_end = std::min(end, block_end + blocksize);
  }
}

}  // namespace mantissa::kernels::quant
