// The vector decoders of the block-scaled products' panels (kernels/cpu/gemm/code_panels.h):
// every code's value, NaN bits included, equals the tables the products' scalar loops read
// (core/float8's E4M3 for the FP8 block product, kernels/cpu/mx/mx_scalar.h's for the MX and
// NVFP4 product), for every length up to a few vectors (the zero-padded tail); the scale
// multiplies each value once; and the panel transpose equals the plain loop for shapes cut at
// every edge.
#include <gtest/gtest.h>

#include <bit>
#include <cstdint>
#include <numeric>
#include <vector>

#include "kernels/cpu/gemm/code_panels.h"
#include "kernels/cpu/mx/mx_scalar.h"
#include "mantissa/core/float8.h"

namespace mantissa::kernels::code_panels {
namespace {

namespace ms = mx::scalar;

std::vector<uint8_t> all_codes(int repeat) {
  std::vector<uint8_t> c(static_cast<size_t>(256 * repeat));
  for (size_t i = 0; i < c.size(); ++i) c[i] = static_cast<uint8_t>((i * 7 + i / 256) & 0xFF);
  return c;
}

uint32_t bits(float f) { return std::bit_cast<uint32_t>(f); }

TEST(CodePanels, E4m3EqualsBothTablesBitForBitAtEveryLength) {
  if (!available(simd_level())) GTEST_SKIP() << "no AVX2 on this CPU";
  const std::vector<uint8_t> codes = all_codes(2);
  for (const bool core_table : {true, false}) {
    const auto value = [&](uint8_t c) {
      return core_table ? fp8_e4m3_bits_to_float(c) : ms::e4m3_value(c);
    };
    const E4m3Nans nans{value(0x7F), value(0xFF)};
    for (const float scale : {1.0f, 0x1p-7f, 3.0f}) {
      for (int64_t n : {int64_t{1}, int64_t{15}, int64_t{16}, int64_t{33}, int64_t{512}}) {
        std::vector<float> out(static_cast<size_t>(n), -1.0f);
        decode_e4m3(codes.data(), n, scale, nans, out.data());
        for (int64_t i = 0; i < n; ++i)
          ASSERT_EQ(bits(out[i]), bits(value(codes[i]) * scale))
              << "code " << int{codes[i]} << " scale " << scale << " n " << n;
      }
    }
  }
}

// A row of scaled blocks in one call equals the per-block decode with each block's scale (a
// scale of 1 included, which E4M3 leaves unmultiplied), for full, short and odd last blocks.
TEST(CodePanels, RowsOfBlocksEqualTheDecodeOfEachBlock) {
  if (!available(simd_level())) GTEST_SKIP() << "no AVX2 on this CPU";
  const std::vector<uint8_t> codes = all_codes(2);
  const E4m3Nans nans{ms::e4m3_value(0x7F), ms::e4m3_value(0xFF)};
  const float scales[] = {1.0f, 0x1p-7f, 0x1p+9f, 3.0f, 1.0f, 0x1p-120f, 0.5f, 2.0f};
  for (const int64_t block : {int64_t{32}, int64_t{16}})
    for (const int64_t n : {int64_t{256}, int64_t{224}, int64_t{200}, int64_t{37}, int64_t{5}}) {
      if (n > 8 * block) continue;
      for (const bool e4m3 : {true, false}) {
        std::vector<float> got(static_cast<size_t>(n), -1.0f), want(got);
        if (e4m3)
          decode_e4m3_blocks(codes.data(), n, block, scales, nans, got.data());
        else
          decode_e5m2_blocks(codes.data(), n, block, scales, got.data());
        for (int64_t b0 = 0, q = 0; b0 < n; b0 += block, ++q) {
          const int64_t len = std::min(block, n - b0);
          if (e4m3)
            decode_e4m3(codes.data() + b0, len, scales[q], nans, want.data() + b0);
          else
            decode_e5m2(codes.data() + b0, len, scales[q], want.data() + b0);
        }
        for (int64_t i = 0; i < n; ++i)
          ASSERT_EQ(bits(got[static_cast<size_t>(i)]), bits(want[static_cast<size_t>(i)]))
              << (e4m3 ? "E4M3" : "E5M2") << " block " << block << " n " << n << " at " << i;
        for (int64_t i = 0; i < n; ++i) {  // and the values are the table's times the scale
          const uint8_t c = codes[static_cast<size_t>(i)];
          const float value = e4m3 ? ms::e4m3_value(c) : ms::e5m2_value(c);
          ASSERT_EQ(bits(got[static_cast<size_t>(i)]), bits(value * scales[i / block])) << i;
        }
      }
    }
}

TEST(CodePanels, E4m3StripsPutEachValueInItsStripAtEveryLength) {
  if (!available(simd_level())) GTEST_SKIP() << "no AVX2 on this CPU";
  const std::vector<uint8_t> codes = all_codes(2);
  const E4m3Nans nans{fp8_e4m3_bits_to_float(0x7F), fp8_e4m3_bits_to_float(0xFF)};
  for (const int64_t width : {int64_t{16}, int64_t{32}}) {
    const int64_t strip = width * 3;  // a strip's other rows stay untouched
    for (int64_t n : {int64_t{1}, int64_t{15}, int64_t{16}, int64_t{40}, int64_t{256}}) {
      const int64_t strips = (n + width - 1) / width;
      std::vector<float> out(static_cast<size_t>(strips * strip), -1.0f);
      decode_e4m3_strips(codes.data(), n, nans, out.data(), width, strip);
      for (int64_t s = 0; s < strips; ++s)
        for (int64_t i = 0; i < strip; ++i) {
          const int64_t j = s * width + i;
          const float want = i < width && j < n ? fp8_e4m3_bits_to_float(codes[j]) : -1.0f;
          ASSERT_EQ(bits(out[s * strip + i]), bits(want))
              << "strip " << s << " place " << i << " width " << width << " n " << n;
        }
    }
  }
}

// A stored row with a scale per element (blocks along the columns) into strips: every value the
// MX table's times its own scale (NaN codes under NaN and finite scales, scales whose products
// are subnormal or overflow, 0 against -0), the tail of every length, nothing else written.
TEST(CodePanels, ScaledStripsEqualTheTableTimesEachElementsScale) {
  if (!available(simd_level())) GTEST_SKIP() << "no AVX2 on this CPU";
  const std::vector<uint8_t> codes = all_codes(2);
  const float nan = ms::e8m0_value(0xFF);
  const float kinds[] = {0.375f, 0x1p-127f, 0.0f, -0.0f, nan, 0x1p127f, 1.0f, 0x1p-9f, 2.0f};
  const E4m3Nans nans{ms::e4m3_value(0x7F), ms::e4m3_value(0xFF)};
  for (const int64_t width : {int64_t{16}, int64_t{32}}) {
    for (int64_t n : {int64_t{2}, int64_t{15}, int64_t{16}, int64_t{46}, int64_t{256}}) {
      const int64_t strip = width * 5 + 3;
      std::vector<float> scales(static_cast<size_t>(n));
      for (size_t j = 0; j < scales.size(); ++j) scales[j] = kinds[(j * 5 + j / 9) % 9];
      for (const int e : {0, 1, 2}) {  // E4M3, E5M2, E2M1
        if (e == 2 && n % 2 != 0) continue;
        std::vector<float> out(static_cast<size_t>(((n + width - 1) / width) * strip), -7.0f);
        if (e == 0)
          decode_e4m3_scaled_strips(codes.data(), n, scales.data(), nans, out.data(), width, strip);
        else if (e == 1)
          decode_e5m2_scaled_strips(codes.data(), n, scales.data(), out.data(), width, strip);
        else
          decode_e2m1_scaled_strips(codes.data(), n, scales.data(), out.data(), width, strip);
        std::vector<bool> written(out.size(), false);
        for (int64_t j = 0; j < n; ++j) {
          const uint8_t c = e == 2 ? (codes[j / 2] >> ((j & 1) * 4)) & 15 : codes[j];
          const float value = e == 0   ? ms::e4m3_value(c)
                              : e == 1 ? ms::e5m2_value(c)
                                       : ms::kE2m1Values[c];
          const size_t at = static_cast<size_t>(j / width * strip + j % width);
          ASSERT_EQ(bits(out[at]), bits(value * scales[j]))
              << "format " << e << " n " << n << " width " << width << " element " << j << " code "
              << int{c};
          written[at] = true;
        }
        for (size_t i = 0; i < out.size(); ++i)
          if (!written[i]) ASSERT_EQ(out[i], -7.0f) << "n " << n << " at " << i;
      }
    }
  }
}

TEST(CodePanels, E5m2EqualsTheMxTableBitForBit) {
  if (!available(simd_level())) GTEST_SKIP() << "no AVX2 on this CPU";
  const std::vector<uint8_t> codes = all_codes(1);
  for (const float scale : {1.0f, 0x1p100f}) {
    std::vector<float> out(codes.size());
    decode_e5m2(codes.data(), static_cast<int64_t>(codes.size()) - 3, scale, out.data());
    for (size_t i = 0; i + 3 < codes.size(); ++i)
      ASSERT_EQ(bits(out[i]), bits(ms::e5m2_value(codes[i]) * scale)) << int{codes[i]};
  }
}

TEST(CodePanels, E2m1EqualsTheTableForEveryByteAndEvenLength) {
  if (!available(simd_level())) GTEST_SKIP() << "no AVX2 on this CPU";
  const std::vector<uint8_t> packed = all_codes(1);  // every byte: two codes each
  for (int64_t n : {int64_t{2}, int64_t{14}, int64_t{16}, int64_t{30}, int64_t{512}}) {
    std::vector<float> out(static_cast<size_t>(n));
    decode_e2m1(packed.data(), n, 0.375f, out.data());
    for (int64_t i = 0; i < n; ++i) {
      const uint8_t code = (packed[i / 2] >> ((i & 1) * 4)) & 15;
      ASSERT_EQ(bits(out[i]), bits(ms::kE2m1Values[code] * 0.375f)) << "element " << i;
    }
  }
  // -0 (code 8) keeps its sign.
  const uint8_t minus_zero[8] = {0x88, 0x88, 0x88, 0x88, 0x88, 0x88, 0x88, 0x88};
  float out[16];
  decode_e2m1(minus_zero, 16, 1.0f, out);
  for (float v : out) EXPECT_EQ(bits(v), 0x80000000u);
}

// A row of E2M1 blocks of 16, each with its own scale (of every sign and size: a product that
// is subnormal or overflows, a zero scale against -0 codes), into one row or into strips: every
// value the table's times its block's scale, the short last block too, nothing else written.
TEST(CodePanels, E2m1BlocksEqualTheTableTimesEachBlocksScale) {
  if (!available(simd_level())) GTEST_SKIP() << "no AVX2 on this CPU";
  const std::vector<uint8_t> packed = all_codes(2);
  const float kinds[] = {0.375f, -1.5f, 0.0f, -0.0f, 0x1p-140f, 0x1p126f, -0x1p127f, 448.0f};
  for (const int64_t width : {int64_t{16}, int64_t{32}, int64_t{1024}}) {
    for (int64_t n :
         {int64_t{2}, int64_t{16}, int64_t{30}, int64_t{48}, int64_t{256}, int64_t{262}}) {
      const int64_t strip = width * 5 + 3;
      std::vector<float> scales(static_cast<size_t>((n + 15) / 16));
      for (size_t q = 0; q < scales.size(); ++q) scales[q] = kinds[(q * 3) % 8];
      std::vector<float> out(static_cast<size_t>(((n + width - 1) / width) * strip + width), -7.0f);
      decode_e2m1_blocks(packed.data(), n, scales.data(), out.data(), width, strip);
      std::vector<bool> written(out.size(), false);
      for (int64_t j = 0; j < n; ++j) {
        const uint8_t code = (packed[j / 2] >> ((j & 1) * 4)) & 15;
        const size_t at = static_cast<size_t>(j / width * strip + j % width);
        ASSERT_EQ(bits(out[at]), bits(ms::kE2m1Values[code] * scales[j / 16]))
            << "n " << n << " width " << width << " element " << j << " code " << int{code};
        written[at] = true;
      }
      for (size_t i = 0; i < out.size(); ++i)
        if (!written[i]) ASSERT_EQ(out[i], -7.0f) << "n " << n << " width " << width << " at " << i;
    }
  }
}

// Stored rows decoded into a k-major panel: every value the table's times the row's scale where
// given (NaN codes included, in 8 x 8 blocks with and without one), shapes cut at every edge,
// nothing outside the panel written.
TEST(CodePanels, E4m3TransposedEqualsTheTableAtEveryEdge) {
  if (!available(simd_level())) GTEST_SKIP() << "no AVX2 on this CPU";
  for (const bool core_table : {true, false}) {
    const auto value = [&](uint8_t c) {
      return core_table ? fp8_e4m3_bits_to_float(c) : ms::e4m3_value(c);
    };
    const E4m3Nans nans{value(0x7F), value(0xFF)};
    for (const bool with_nan : {false, true}) {
      for (const bool scaled : {false, true}) {
        for (int64_t rows : {1, 7, 8, 16, 21}) {
          for (int64_t cols : {1, 8, 9, 32, 131}) {
            const int64_t ld = cols + 5, ldd = rows + 3;
            std::vector<uint8_t> codes(static_cast<size_t>(rows * ld));
            for (size_t i = 0; i < codes.size(); ++i) {
              const auto c = static_cast<uint8_t>((i * 37 + i / 7) & 0xFF);
              // Without NaNs every 8 x 8 block takes the shifts alone.
              codes[i] = with_nan || (c & 0x7F) != 0x7F ? c : static_cast<uint8_t>(c - 1);
            }
            std::vector<float> scales(static_cast<size_t>(rows));
            for (int64_t r = 0; r < rows; ++r) scales[r] = r % 3 == 0 ? 0x1p-9f : 0x1p5f * r;
            std::vector<float> dst(static_cast<size_t>(cols * ldd), -1.0f);
            decode_e4m3_transposed(codes.data(), ld, rows, cols, nans, dst.data(), ldd,
                                   scaled ? scales.data() : nullptr);
            for (int64_t c = 0; c < cols; ++c) {
              for (int64_t r = 0; r < rows; ++r) {
                const uint8_t code = codes[r * ld + c];
                const float want = scaled ? value(code) * scales[r] : value(code);
                ASSERT_EQ(bits(dst[c * ldd + r]), bits(want))
                    << rows << "x" << cols << " code " << int{code} << " scaled " << scaled;
              }
              for (int64_t r = rows; r < ldd; ++r) ASSERT_EQ(dst[c * ldd + r], -1.0f);
            }
          }
        }
      }
    }
  }
}

TEST(CodePanels, E2m1TransposedEqualsTheTableAtEveryEdge) {
  if (!available(simd_level())) GTEST_SKIP() << "no AVX2 on this CPU";
  for (const bool scaled : {false, true}) {
    for (int64_t rows : {1, 7, 8, 16, 21}) {
      for (int64_t cols : {2, 8, 10, 16, 32, 130}) {
        const int64_t ld = cols / 2 + 3, ldd = rows + 3;
        std::vector<uint8_t> packed(static_cast<size_t>(rows * ld));
        for (size_t i = 0; i < packed.size(); ++i)
          packed[i] = static_cast<uint8_t>((i * 53 + i / 5) & 0xFF);
        std::vector<float> scales(static_cast<size_t>(rows));
        // Every sign and size of scale: negative, zero, a subnormal product, an overflowing one.
        const float odd[] = {0x1p-20f, -0.75f, 0.0f, -0.0f, 0x1p-140f, 0x1p126f, -0x1p127f};
        for (int64_t r = 0; r < rows; ++r) scales[r] = r % 2 == 0 ? 0.375f : odd[(r / 2) % 7];
        std::vector<float> dst(static_cast<size_t>(cols * ldd), -1.0f);
        decode_e2m1_transposed(packed.data(), ld, rows, cols, dst.data(), ldd,
                               scaled ? scales.data() : nullptr);
        for (int64_t c = 0; c < cols; ++c) {
          for (int64_t r = 0; r < rows; ++r) {
            const uint8_t code = (packed[r * ld + c / 2] >> ((c & 1) * 4)) & 15;
            const float v = ms::kE2m1Values[code];
            ASSERT_EQ(bits(dst[c * ldd + r]), bits(scaled ? v * scales[r] : v))
                << rows << "x" << cols << " code " << int{code};
          }
          for (int64_t r = rows; r < ldd; ++r) ASSERT_EQ(dst[c * ldd + r], -1.0f);
        }
      }
    }
  }
}

TEST(CodePanels, TransposeEqualsTheLoopAtEveryEdge) {
  if (!available(simd_level())) GTEST_SKIP() << "no AVX2 on this CPU";
  for (int64_t rows : {1, 7, 8, 16, 13}) {
    for (int64_t cols : {1, 8, 9, 128, 131}) {
      const int64_t lds = cols + 3, ldd = rows + 5;
      std::vector<float> src(static_cast<size_t>(rows * lds));
      std::iota(src.begin(), src.end(), 0.0f);
      std::vector<float> dst(static_cast<size_t>(cols * ldd), -1.0f);
      transpose_into(src.data(), lds, rows, cols, dst.data(), ldd);
      for (int64_t c = 0; c < cols; ++c) {
        for (int64_t r = 0; r < rows; ++r)
          ASSERT_EQ(dst[c * ldd + r], src[r * lds + c]) << rows << "x" << cols;
        for (int64_t r = rows; r < ldd; ++r) ASSERT_EQ(dst[c * ldd + r], -1.0f);  // untouched
      }
    }
  }
}

}  // namespace
}  // namespace mantissa::kernels::code_panels
