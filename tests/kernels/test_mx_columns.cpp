// The MX cast with blocks along the columns (E4M3, E5M2, E2M1) of a bfloat16 or float32 source
// (kernels/cpu/mx/mx_cast.h, mx_quantize_columns): codes in the source's layout, one scale per
// 32 x 1 block of a column. Every code, scale and statistic must be the scalar row-wise cast's of
// the contiguous transpose, transposed back (so the torchao fixtures of the row-wise cast pin
// these codes too), at every level: every bfloat16 value (as float32: with low mantissa bits set
// too) under every kind of block scale, the edge blocks of each body, a short last band of rows
// and columns beyond the vectors' groups (E2M1: an odd count), into buffers at several offsets.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include <omp.h>

#include "kernels/cpu/mx/mx_cast.h"
#include "mantissa/core/bfloat16.h"
#include "support/simd_levels.h"

namespace mantissa::kernels::mx {
namespace {

using mantissa::testing::simd_levels_here;

struct Aligned {
  explicit Aligned(size_t n)
      : p(static_cast<uint8_t*>(std::aligned_alloc(64, (n + 127) / 64 * 64))) {}
  ~Aligned() { std::free(p); }
  Aligned(const Aligned&) = delete;
  Aligned& operator=(const Aligned&) = delete;
  uint8_t* p;
};

bool same_stats(const MxCastStats& a, const MxCastStats& b) {
  return std::memcmp(&a.amax, &b.amax, sizeof(float)) == 0 &&
         std::memcmp(&a.scale, &b.scale, sizeof(float)) == 0 && a.saturated == b.saturated &&
         a.flushed == b.flushed && std::memcmp(&a.peak, &b.peak, sizeof(double)) == 0;
}

// What mx_quantize_columns must give for a rows x cols source whose transpose is t: the scalar
// row-wise cast of t, its codes and scales transposed back into the source's layout.
struct Want {
  std::vector<uint8_t> codes, scales;
  MxCastStats stats;
};
Want want_columns(const std::vector<uint8_t>& t, DType dtype, int64_t rows, int64_t cols, Element e,
                  E8m0Rounding rd) {
  const int64_t nb = (rows + kMxBlock - 1) / kMxBlock;
  const int64_t t_row = code_bytes(e, rows), row = code_bytes(e, cols);
  std::vector<uint8_t> tc(static_cast<size_t>(cols * t_row)), ts(static_cast<size_t>(cols * nb));
  Want w;
  mx_quantize(t.data(), dtype, cols, rows, e, rd, tc.data(), ts.data(), SimdLevel::kScalar,
              &w.stats);
  w.codes.assign(static_cast<size_t>(rows * row), 0);
  w.scales.resize(ts.size());
  for (int64_t c = 0; c < cols; ++c) {
    for (int64_t b = 0; b < nb; ++b) w.scales[b * cols + c] = ts[c * nb + b];
    for (int64_t r = 0; r < rows; ++r) {
      if (e != Element::kE2m1) {
        w.codes[r * row + c] = tc[c * t_row + r];
      } else {
        const int code = (tc[c * t_row + r / 2] >> ((r & 1) * 4)) & 0xF;
        w.codes[r * row + c / 2] |= static_cast<uint8_t>(code << ((c & 1) * 4));
      }
    }
  }
  return w;
}

// rows x cols bfloat16: every bit pattern in turn, and in each block of 32 rows of a column one
// element of a magnitude from `amaxes` (scales from 2^126 down to 2^-127; saturating under the
// floor, flushed, subnormal codes, inf).
std::vector<uint16_t> edge_source(int64_t rows, int64_t cols) {
  const float amaxes[] = {1.0f,     448.0f,          3e-5f,       0x1p-120f,
                          0x1p100f, 57344.0f * 1.5f, 0x1.8p-130f, 1.2e38f};
  std::vector<uint16_t> x(static_cast<size_t>(rows * cols));
  uint32_t pattern = 0;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) {
      const float a = amaxes[(c + r / 32) % 8];
      x[r * cols + c] = r % 32 == (c * 7) % 32 ? float_to_bf16_bits(c % 2 ? -a : a)
                                               : static_cast<uint16_t>(pattern++ & 0xFFFF);
    }
  return x;
}

// rows x cols of `dtype` from edge_source: bfloat16 as it is, float32 with the low 16 bits of
// each value (but the block anchors') from a counter, so rounding sees every kind of tail.
std::vector<uint8_t> source_of(int64_t rows, int64_t cols, DType dtype) {
  const std::vector<uint16_t> b = edge_source(rows, cols);
  std::vector<uint8_t> out(b.size() * dtype.itemsize());
  if (dtype == kBFloat16) {
    std::memcpy(out.data(), b.data(), out.size());
    return out;
  }
  for (size_t i = 0; i < b.size(); ++i) {
    const int64_t r = static_cast<int64_t>(i) / cols, c = static_cast<int64_t>(i) % cols;
    const uint32_t tail = r % 32 == (c * 7) % 32 ? 0 : static_cast<uint32_t>(i * 40503u) & 0xFFFF;
    const uint32_t bits = static_cast<uint32_t>(b[i]) << 16 | tail;
    std::memcpy(out.data() + 4 * i, &bits, 4);
  }
  return out;
}

// One source through mx_quantize_columns at every level, with and without statistics, into
// buffers at each offset (filled with 0xAB first), against want_columns; returns the casts
// compared.
int compare_levels(const std::vector<uint8_t>& xs, const std::vector<uint8_t>& t, DType dtype,
                   int64_t rows, int64_t cols, Element e, E8m0Rounding rd,
                   const std::vector<int64_t>& offsets, const std::vector<SimdLevel>& levels,
                   MxCastStats* want_stats = nullptr) {
  const Want want = want_columns(t, dtype, rows, cols, e, rd);
  if (want_stats) *want_stats = want.stats;
  const size_t n = want.codes.size(), ns = want.scales.size();
  int compared = 0;
  for (const SimdLevel level : levels)
    for (const int64_t offset : offsets)
      for (const bool stats : {false, true}) {
        Aligned codes(n + static_cast<size_t>(offset)), scales(ns);
        std::memset(codes.p, 0xAB, n + static_cast<size_t>(offset));
        std::memset(scales.p, 0xAB, ns);
        MxCastStats got;
        mx_quantize_columns(xs.data(), dtype, rows, cols, e, rd, codes.p + offset, scales.p, level,
                            stats ? &got : nullptr);
        const std::string at =
            std::string(dtype.name()) + " " + std::to_string(rows) + " x " + std::to_string(cols) +
            " element " + std::to_string(static_cast<int>(e)) +
            (rd == E8m0Rounding::kFloor ? " floor" : " rceil") + " at " + simd_level_name(level) +
            " offset " + std::to_string(offset) + (stats ? " with statistics" : "");
        EXPECT_EQ(0, std::memcmp(codes.p + offset, want.codes.data(), n)) << at;
        EXPECT_EQ(0, std::memcmp(scales.p, want.scales.data(), ns)) << at;
        if (stats) EXPECT_TRUE(same_stats(got, want.stats)) << at;
        ++compared;
      }
  return compared;
}

void check_every_value(DType dtype) {
  // 256 rows: eight block rows; 1100 columns: more than one chunk of the bodies, and 12 columns
  // beyond their groups of 32. 281600 elements: on threads, every bfloat16 bit pattern.
  const int64_t rows = 256, cols = 1100;
  const size_t item = dtype.itemsize();
  const std::vector<uint8_t> x = source_of(rows, cols, dtype);
  std::vector<uint8_t> t(x.size());  // x^T
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c)
      std::memcpy(t.data() + (c * rows + r) * item, x.data() + (r * cols + c) * item, item);
  int compared = 0;
  for (const Element e : {Element::kE4m3, Element::kE5m2, Element::kE2m1})
    for (const E8m0Rounding rd : {E8m0Rounding::kFloor, E8m0Rounding::kRceil}) {
      MxCastStats want;
      compared +=
          compare_levels(x, t, dtype, rows, cols, e, rd, {0, 32, 7}, simd_levels_here(), &want);
      EXPECT_GT(want.flushed, 0);
      if (rd == E8m0Rounding::kFloor) EXPECT_GT(want.saturated, 0);
    }
  EXPECT_EQ(compared, 3 * 2 * 3 * 2 * static_cast<int>(simd_levels_here().size()));
}

TEST(MxColumns, EveryValueGivesTheTransposedScalarBytesAndStatisticsBf16) {
  check_every_value(kBFloat16);
}

TEST(MxColumns, EveryValueGivesTheTransposedScalarBytesAndStatisticsF32) {
  check_every_value(kFloat32);
}

// rows x cols bfloat16 values x as `dtype` (float32: widened, exact), and their transpose.
std::pair<std::vector<uint8_t>, std::vector<uint8_t>> source_and_transpose(
    const std::vector<uint16_t>& x, int64_t rows, int64_t cols, DType dtype) {
  const size_t item = dtype.itemsize();
  std::vector<uint8_t> xs(x.size() * item), t(x.size() * item);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) {
      const uint16_t b = x[static_cast<size_t>(r * cols + c)];
      const uint32_t wide = static_cast<uint32_t>(b) << 16;
      const void* v = dtype == kBFloat16 ? static_cast<const void*>(&b) : &wide;
      std::memcpy(xs.data() + (r * cols + c) * item, v, item);
      std::memcpy(t.data() + (c * rows + r) * item, v, item);
    }
  return {xs, t};
}

// Blocks the E2M1 column body meets rarely: all zero, every element at the format's max (6)
// times a power of 2 with its neighbours, a subnormal or zero element beside a large one, an
// infinite or NaN element, amax at the top and bottom of the scales; 12 block rows of 112 columns
// (one step of 64 and 48 beyond it); bfloat16 and the same values in float32.
void check_e2m1_edges(DType dtype) {
  const int64_t rows = 384, cols = 112;
  std::vector<uint16_t> x(static_cast<size_t>(rows * cols), 0);
  const float kinds[] = {0.0f, 6.0f, 0x1p-126f, 0x1.8p120f, 0.25f, 0x1p-133f, 3e38f, 1.0f};
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) {
      const int kind = static_cast<int>((c / 4 + r / 32) % 10);
      const int64_t i = r * cols + c;
      float v = 0.0f;
      if (kind < 8) {
        // Around kinds[kind]: the grid's points and the midpoints between them, scaled.
        const float steps[] = {0.0f, 0.25f, 0.5f, 0.75f, 1.0f, 1.25f, 1.5f, 1.75f,
                               2.0f, 2.5f,  3.0f, 3.5f,  4.0f, 5.0f,  6.0f, 6.5f};
        v = kinds[kind] * steps[(r + c) % 16] / 6.0f;
        if (r % 32 == c % 32) v = kinds[kind];
      } else if (kind == 8) {
        v = r % 32 == c % 32 ? (c % 2 ? std::numeric_limits<float>::infinity()
                                      : std::numeric_limits<float>::quiet_NaN())
                             : static_cast<float>(r - c);
      } else {
        v = r % 32 == 5 ? 1e30f : 0x1p-130f * static_cast<float>(c % 3);
      }
      x[static_cast<size_t>(i)] = float_to_bf16_bits((r + c) % 3 == 0 ? -v : v);
    }
  const auto [xs, t] = source_and_transpose(x, rows, cols, dtype);
  for (const E8m0Rounding rd : {E8m0Rounding::kFloor, E8m0Rounding::kRceil}) {
    MxCastStats want;
    compare_levels(xs, t, dtype, rows, cols, Element::kE2m1, rd, {0, 16, 3}, simd_levels_here(),
                   &want);
    EXPECT_GT(want.flushed, 0);
  }
}

TEST(MxColumns, E2m1EdgeBlocksGiveTheScalarBytesAndStatisticsBf16) { check_e2m1_edges(kBFloat16); }

TEST(MxColumns, E2m1EdgeBlocksGiveTheScalarBytesAndStatisticsF32) { check_e2m1_edges(kFloat32); }

// FP8 blocks at the edges of the column body's 16-bit lanes: a multiplier at and around
// 2^(127 - bias), the largest under which a zero's code is 0 there (amax the element max times
// 2^-121 .. 2^-119, and E5M2's 2^-113 .. 2^-111), beside zeros, signed zeros and the element max
// with its neighbours; all-zero blocks, a subnormal element beside a large one, inf and NaN. 12
// block rows of 48 columns, each element format and rounding, at every level; bfloat16 and the
// same values in float32.
void check_fp8_edges(DType dtype) {
  const int64_t rows = 384, cols = 48;
  const float kinds[] = {448.0f * 0x1p-121f,
                         448.0f * 0x1p-120f,
                         448.0f * 0x1p-119f,
                         57344.0f * 0x1p-113f,
                         57344.0f * 0x1p-112f,
                         57344.0f * 0x1p-111f,
                         0.0f,
                         448.0f,
                         57344.0f,
                         1.0f};
  std::vector<uint16_t> x(static_cast<size_t>(rows * cols), 0);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) {
      const int kind = static_cast<int>((c / 4 + r / 32) % 12);
      float v = 0.0f;
      if (kind < 10) {
        // The amax, zeros and values a few codes below it, rounding ties among them.
        const float steps[] = {0.0f,    -0.0f, 1.0f,     0.9375f, 0.96875f, 0.5f, 0.0f,  0.25f,
                               0.1875f, 0.0f,  0.03125f, 0.0f,    1.03125f, 0.0f, 0.75f, 0.0f};
        v = kinds[kind] * steps[(r + c) % 16];
        if (r % 32 == c % 32) v = kinds[kind];
      } else if (kind == 10) {
        v = r % 32 == c % 32 ? (c % 2 ? std::numeric_limits<float>::infinity()
                                      : std::numeric_limits<float>::quiet_NaN())
                             : static_cast<float>(r - c);
      } else {
        v = r % 32 == 5 ? 1e30f : 0x1p-130f * static_cast<float>(c % 3);
      }
      x[static_cast<size_t>(r * cols + c)] = float_to_bf16_bits((r + c) % 3 == 0 ? -v : v);
    }
  const auto [xs, t] = source_and_transpose(x, rows, cols, dtype);
  int compared = 0;
  for (const Element e : {Element::kE4m3, Element::kE5m2})
    for (const E8m0Rounding rd : {E8m0Rounding::kFloor, E8m0Rounding::kRceil})
      compared += compare_levels(xs, t, dtype, rows, cols, e, rd, {0, 32}, simd_levels_here());
  EXPECT_EQ(compared, 2 * 2 * 2 * 2 * static_cast<int>(simd_levels_here().size()));
}

TEST(MxColumns, Fp8EdgeBlocksGiveTheScalarBytesAndStatisticsBf16) { check_fp8_edges(kBFloat16); }

TEST(MxColumns, Fp8EdgeBlocksGiveTheScalarBytesAndStatisticsF32) { check_fp8_edges(kFloat32); }

// FP8 blocks with one nonzero element below the normal codes in a single row (a subnormal code or
// a flushed one; the row differs from block to block, some blocks have none), the other rows
// normal values and signed zeros: the bodies take such a row's step in float32 lanes and the other
// rows in their own; 9 block rows and 80 columns (two steps of 32 and 16 beyond), each element
// format and rounding, with and without statistics, at every level.
void check_fp8_low_rows(DType dtype) {
  const int64_t rows = 288, cols = 80;
  std::vector<uint16_t> x(static_cast<size_t>(rows * cols));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) {
      const int64_t b = r / 32;
      const auto h = static_cast<uint32_t>((r * cols + c) * 2654435761u);
      float v = static_cast<float>((h >> 8) & 0xFFFF) / 4096.0f - 8.0f;
      if (h % 7 == 0) v = (h & 8) ? -0.0f : 0.0f;
      if ((c + b) % 5 != 0 && r % 32 == (c * 3 + b) % 32)
        v = std::ldexp(1.0f, -12 - static_cast<int>((c + 2 * b) % 16));
      x[static_cast<size_t>(r * cols + c)] = float_to_bf16_bits((r + c) % 3 == 0 ? -v : v);
    }
  const auto [xs, t] = source_and_transpose(x, rows, cols, dtype);
  for (const Element e : {Element::kE4m3, Element::kE5m2})
    for (const E8m0Rounding rd : {E8m0Rounding::kFloor, E8m0Rounding::kRceil}) {
      MxCastStats want;
      compare_levels(xs, t, dtype, rows, cols, e, rd, {0}, simd_levels_here(), &want);
      if (e == Element::kE4m3) EXPECT_GT(want.flushed, 0);
    }
}

TEST(MxColumns, Fp8LowElementsInSingleRowsGiveTheScalarBytesAndStatisticsBf16) {
  check_fp8_low_rows(kBFloat16);
}

TEST(MxColumns, Fp8LowElementsInSingleRowsGiveTheScalarBytesAndStatisticsF32) {
  check_fp8_low_rows(kFloat32);
}

// Every element format at every level on a short last band of 7 rows (551 rows) and 277
// columns (8 groups of 32, 21 beyond them, an odd count for E2M1's nibbles): every bfloat16 bit
// pattern, and block by block all-zero blocks (signed zeros), blocks at each element max with a
// bfloat16 ulp either side of it, a subnormal amax, inf and NaN beside finite values.
void check_short_bands(DType dtype) {
  const int64_t rows = 551, cols = 277;
  std::vector<uint16_t> x(static_cast<size_t>(rows * cols));
  uint32_t pattern = 0;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) {
      const int kind = static_cast<int>((c + 3 * (r / 32)) % 11);
      const bool anchor = r % 32 == (c * 5) % 32;
      float v = 0.0f;
      uint16_t b = 0;
      switch (kind) {
        case 1:  // all zero
          b = (r + c) % 2 ? 0x8000 : 0;
          break;
        case 2:  // the E4M3 max or a bfloat16 ulp either side of it, values below
        case 3:  // the E5M2 max likewise, under a scale of 2^-20
        case 6:  // the E2M1 max likewise
          v = (kind == 2 ? 448.0f : (kind == 3 ? 57344.0f * 0x1p-20f : 6.0f)) *
              (anchor ? 1.0f + static_cast<float>(c % 3 - 1) / 224.0f
                      : 1.0f - static_cast<float>((r + c) % 9) / 64.0f);
          b = float_to_bf16_bits((r + c) % 3 ? v : -v);
          break;
        case 4:  // a subnormal amax
          b = static_cast<uint16_t>((anchor ? 0x7F : (r * 7 + c) % 0x80) |
                                    ((r + c) % 2 ? 0x8000 : 0));
          break;
        case 5:  // inf or NaN beside finite values
          b = anchor ? ((c % 2) ? 0x7F80 : 0x7FC1) : float_to_bf16_bits(static_cast<float>(r - c));
          break;
        default:  // every bit pattern in turn
          b = static_cast<uint16_t>(pattern++ & 0xFFFF);
      }
      x[static_cast<size_t>(r * cols + c)] = b;
    }
  ASSERT_GE(pattern, 65536u);
  const auto [xs, t] = source_and_transpose(x, rows, cols, dtype);
  for (const Element e : {Element::kE4m3, Element::kE5m2, Element::kE2m1})
    for (const E8m0Rounding rd : {E8m0Rounding::kFloor, E8m0Rounding::kRceil}) {
      MxCastStats want;
      compare_levels(xs, t, dtype, rows, cols, e, rd, {0}, simd_levels_here(), &want);
      if (rd == E8m0Rounding::kFloor) EXPECT_GT(want.saturated, 0);
    }
}

TEST(MxColumns, ShortBandsAndColumnsGiveTheTransposedScalarBytesBf16) {
  check_short_bands(kBFloat16);
}

TEST(MxColumns, ShortBandsAndColumnsGiveTheTransposedScalarBytesF32) {
  check_short_bands(kFloat32);
}

// A rows x cols bfloat16 source of hashed values in [-0.5, 0.5), one in 389 of them times `tiny`.
std::vector<uint16_t> hashed_source(int64_t rows, int64_t cols, float tiny) {
  std::vector<uint16_t> x(static_cast<size_t>(rows * cols));
  for (int64_t i = 0; i < rows * cols; ++i) {
    const auto h = static_cast<uint32_t>(i * 2654435761u) ^ static_cast<uint32_t>(i >> 9);
    float v = static_cast<float>((h >> 8) & 0xFFFF) / 65536.0f - 0.5f;
    if (h % 389 == 0) v *= tiny;
    x[static_cast<size_t>(i)] = float_to_bf16_bits(v);
  }
  return x;
}

// A band whose FP8 codes reach the cast-wide threshold for storing them past the caches (8 MiB:
// 4096 x 2048 on one thread): its codes, scales and statistics must still be the scalar level's,
// with the columns the lanes leave (an inf, a NaN, nonzero elements below the normal codes of
// their block: a step's codes in float32 lanes) among the streamed ones.
void check_streamed_band(DType dtype) {
  const int64_t rows = 4096, cols = 2048;
  std::vector<uint16_t> x = hashed_source(rows, cols, 0x1p-13f);  // subnormal codes; some flushed
  x[static_cast<size_t>(777 * cols + 100)] = 0x7F80;              // inf
  x[static_cast<size_t>(2049 * cols + 301)] = 0xFFC1;             // NaN
  const auto [xs, t] = source_and_transpose(x, rows, cols, dtype);
  const int threads = omp_get_max_threads();
  omp_set_num_threads(1);
  const size_t n = static_cast<size_t>(rows * cols), ns = n / kMxBlock;
  for (const auto [e, rd] : {std::pair{Element::kE4m3, E8m0Rounding::kRceil},
                             std::pair{Element::kE5m2, E8m0Rounding::kFloor}}) {
    Aligned want(n), want_scales(ns), got(n), got_scales(ns);
    MxCastStats want_stats, got_stats;
    mx_quantize_columns(xs.data(), dtype, rows, cols, e, rd, want.p, want_scales.p,
                        SimdLevel::kScalar, &want_stats);
    EXPECT_GT(want_stats.flushed, 0);
    for (const SimdLevel level : simd_levels_here()) {
      std::memset(got.p, 0xAB, n);
      mx_quantize_columns(xs.data(), dtype, rows, cols, e, rd, got.p, got_scales.p, level,
                          &got_stats);
      const std::string at = std::string(dtype.name()) + " element " +
                             std::to_string(static_cast<int>(e)) + " at " + simd_level_name(level);
      EXPECT_EQ(0, std::memcmp(got.p, want.p, n)) << at;
      EXPECT_EQ(0, std::memcmp(got_scales.p, want_scales.p, ns)) << at;
      EXPECT_TRUE(same_stats(got_stats, want_stats)) << at;
    }
  }
  omp_set_num_threads(threads);
}

TEST(MxColumns, StreamedBandGivesTheScalarBytesAndStatisticsBf16) {
  check_streamed_band(kBFloat16);
}

TEST(MxColumns, StreamedBandGivesTheScalarBytesAndStatisticsF32) { check_streamed_band(kFloat32); }

// E2M1 codes of a cast at the threshold (8 MiB: 4096 x 4096) go past the caches under the floor
// scale, on one thread (one band) and on two (two bands of 4 MiB each, the cast's codes counted
// by the team): codes, scales and statistics must still be the scalar level's, with the columns
// the table leaves (an inf, a NaN, a tiny amax) redone by the scalar body among the streamed ones.
void check_streamed_e2m1(DType dtype) {
  const int64_t rows = 4096, cols = 4096;
  std::vector<uint16_t> x = hashed_source(rows, cols, 0x1p-5f);  // flushed to zero codes
  x[static_cast<size_t>(777 * cols + 100)] = 0x7F80;             // inf
  x[static_cast<size_t>(2049 * cols + 301)] = 0xFFC1;            // NaN
  for (int64_t r = 1024; r < 1056; ++r) x[static_cast<size_t>(r * cols + 4000)] = 0x0001;  // tiny
  const auto [xs, t] = source_and_transpose(x, rows, cols, dtype);
  const int threads = omp_get_max_threads();
  const size_t n = static_cast<size_t>(rows * cols) / 2, ns = n * 2 / kMxBlock;
  for (const bool stats : {false, true}) {
    Aligned want(n), want_scales(ns), got(n), got_scales(ns);
    MxCastStats want_stats, got_stats;
    mx_quantize_columns(xs.data(), dtype, rows, cols, Element::kE2m1, E8m0Rounding::kFloor, want.p,
                        want_scales.p, SimdLevel::kScalar, stats ? &want_stats : nullptr);
    for (const int team : {1, 2}) {
      omp_set_num_threads(team);
      for (const SimdLevel level : simd_levels_here()) {
        std::memset(got.p, 0xAB, n);
        mx_quantize_columns(xs.data(), dtype, rows, cols, Element::kE2m1, E8m0Rounding::kFloor,
                            got.p, got_scales.p, level, stats ? &got_stats : nullptr);
        const std::string at = std::string(dtype.name()) + " on " + std::to_string(team) +
                               " threads, statistics " + std::to_string(stats) + " at " +
                               simd_level_name(level);
        EXPECT_EQ(0, std::memcmp(got.p, want.p, n)) << at;
        EXPECT_EQ(0, std::memcmp(got_scales.p, want_scales.p, ns)) << at;
        if (stats) EXPECT_TRUE(same_stats(got_stats, want_stats)) << at;
      }
    }
    omp_set_num_threads(threads);
  }
}

TEST(MxColumns, StreamedE2m1GivesTheScalarBytesAndStatisticsBf16) {
  check_streamed_e2m1(kBFloat16);
}

TEST(MxColumns, StreamedE2m1GivesTheScalarBytesAndStatisticsF32) { check_streamed_e2m1(kFloat32); }

}  // namespace
}  // namespace mantissa::kernels::mx
