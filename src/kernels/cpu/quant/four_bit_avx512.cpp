// AVX-512 level of the 4-bit dequantization straight to bf16 or fp16 (four_bit.h). Each block's
// sixteen possible values are rounded once into a table of 16-bit words; the codes of 32
// elements (16 packed bytes) then select from it with one VPERMW. This is what the
// oneDNN (AMX / AVX-512 BF16) path of Linear4bit feeds its product, in one pass rather than a
// decode to float32 and a second pass to convert.
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

// 32 elements from 16 packed bytes: each byte's two codes (the high nibble is the even element,
// the low one the odd: bitsandbytes' order) become the two 16-bit halves of a dword, so one
// VPERMW looks up the 32 words in element order in the block's table (its sixteen words, in the
// low half of a register; VPERMW reads all 32 entries, codes stay below 16).
// The 32 words of 16 packed bytes (as zero-extended dwords) looked up in the table.
MANTISSA_AVX512 inline __m512i lookup32(__m512i b, __m512i table) {
  // (b >> 4) | ((b << 16) & 0xF0000): bit-select with the mask as the third operand.
  const __m512i idx = _mm512_ternarylogic_epi32(_mm512_srli_epi32(b, 4), _mm512_slli_epi32(b, 16),
                                                _mm512_set1_epi32(0xF0000), 0xF8);
  return _mm512_permutexvar_epi16(idx, table);
}

MANTISSA_AVX512 inline void expand32(const uint8_t* bytes, __m512i table, uint16_t* out) {
  const __m512i b = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(bytes)));
  _mm512_storeu_si512(out, lookup32(b, table));
}

// The first `count` (< 32) of 32 elements, from an even element: the bytes and the words past
// them are neither read nor written (masked load and store).
MANTISSA_AVX512 inline void expand_partial(const uint8_t* bytes, __m512i table, uint16_t* out,
                                           int64_t count) {
  const __mmask16 byte_mask = static_cast<__mmask16>((1u << ((count + 1) / 2)) - 1);
  const __m512i b = _mm512_cvtepu8_epi32(_mm_maskz_loadu_epi8(byte_mask, bytes));
  _mm512_mask_storeu_epi16(out, static_cast<__mmask32>((uint64_t{1} << count) - 1),
                           lookup32(b, table));
}

}  // namespace

MANTISSA_AVX512 void dequantize_4bit_16_avx512(const uint8_t* packed, const float* absmax,
                                               int64_t first, int64_t count, int64_t blocksize,
                                               FormatId format, bool bf16, bool native_bf16,
                                               uint16_t* out) {
  const __m512 values = _mm512_loadu_ps(four_bit_codebook(format).dequant_values.data());
  const TableRounding mode = !bf16         ? TableRounding::kF16
                             : native_bf16 ? TableRounding::kBf16Native
                                           : TableRounding::kBf16Integer;
  const int64_t end = first + count;
  int64_t k = first;
  int64_t block = first / blocksize;
  int64_t block_end = std::min(end, (block + 1) * blocksize);
  while (k < end) {
    const __m256i words = block_table(values, absmax[block], mode);
    // A range starting at an odd element takes that element's low nibble from a copy; fewer
    // than 32 left in the block take masked loads and stores (a row of a weight whose width is
    // not a multiple of the block starts and ends inside blocks).
    if (k % 2 != 0) {
      alignas(32) uint16_t tab[16];
      _mm256_store_si256(reinterpret_cast<__m256i*>(tab), words);
      out[k - first] = tab[packed[k / 2] & 0xF];
      ++k;
    }
    const __m512i table = _mm512_castsi256_si512(words);
    for (; k + 32 <= block_end; k += 32) expand32(packed + k / 2, table, out + (k - first));
    if (k < block_end) {
      expand_partial(packed + k / 2, table, out + (k - first), block_end - k);
      k = block_end;
    }
    ++block;
    block_end = std::min(end, block_end + blocksize);
  }
}

}  // namespace mantissa::kernels::quant
