// FP8 block scaling (TransformerEngine's Float8BlockScaling): the quantizers' bytes and scales
// against the fixtures of scripts/make_fp8_block_fixtures.py (TE's documented algorithm
// transcribed in Python) at every SIMD level this CPU has, hand-worked edge tiles, and the
// block-scaled GEMM bit for bit against its definition written out here and within the fp32
// accumulation bound of a float64 product of the dequantized operands.
#include <gtest/gtest.h>

#include "fp8/fp8_training_fixture.h"

#include <array>
#include <bit>
#include <cfloat>
#include <cmath>
#include <limits>
#include <map>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "kernels/cpu/common/stream_codes.h"
#include "kernels/cpu/fp8/fp8_block.h"
#include "mantissa/core/float8.h"
#include "mantissa/fp8/autocast.h"
#include "mantissa/fp8/block_scaling.h"
#include "mantissa/fp8/linear.h"
#include "mantissa/gemm/gemm.h"
#include "mantissa/io/safetensors.h"
#include "mantissa/mantissa.h"
#include "mantissa/train/precisions/transformer_engine_precision.h"
#include "support/simd_levels.h"
#include "support/test_util.h"

namespace mantissa::fp8 {
namespace {

using testing_fixture::train_losses;

namespace kf = kernels::fp8;
using namespace mantissa::testing;

const std::map<std::string, Tensor>& fixtures() {
  static const std::map<std::string, Tensor> m = [] {
    std::map<std::string, Tensor> out;
    const std::string path =
        std::string(MANTISSA_FIXTURES_DIR) + "/fp8/fp8_block_fixtures.safetensors";
    for (auto& [k, t] : io::load_safetensors(path).tensors) out[k] = t.contiguous();
    return out;
  }();
  return m;
}

const Tensor& fixture(const std::string& key) {
  const auto it = fixtures().find(key);
  if (it == fixtures().end()) throw std::runtime_error("no fixture " + key);
  return it->second;
}

std::vector<uint32_t> bits_of(const std::vector<float>& v) {
  std::vector<uint32_t> b(v.size());
  for (size_t i = 0; i < v.size(); ++i) b[i] = std::bit_cast<uint32_t>(v[i]);
  return b;
}

// The codes (1 byte each), scale inverses and statistics of one of the three block casts.
struct BlockCastOut {
  std::vector<uint8_t> codes;
  std::vector<float> inv;
  kf::BlockCastStats stats;
};

enum class BlockCastKind { k1x128, k128x128, k128x1 };

const char* name_of(BlockCastKind kind) {
  return kind == BlockCastKind::k1x128     ? "1x128"
         : kind == BlockCastKind::k128x128 ? "128x128"
                                           : "128x1";
}

// x's (a matrix) block cast of `kind` to E4M3 at `level` under the amax floor `eps`, into
// buffers first filled with `fill`.
BlockCastOut block_cast_at(const Tensor& x, BlockCastKind kind, bool power_2, SimdLevel level,
                           uint8_t fill = 0, float eps = 0.0f) {
  const int64_t rows = x.size(0), cols = x.size(1);
  const int64_t n_inv = kind == BlockCastKind::k1x128 ? rows * kf::block_count(cols)
                        : kind == BlockCastKind::k128x128
                            ? kf::block_count(rows) * kf::block_count(cols)
                            : cols * kf::block_count(rows);
  BlockCastOut out;
  out.codes.assign(static_cast<size_t>(rows * cols), fill);
  out.inv.assign(static_cast<size_t>(n_inv), 0.0f);
  const auto cast = kind == BlockCastKind::k1x128     ? kf::quantize_1x128
                    : kind == BlockCastKind::k128x128 ? kf::quantize_128x128
                                                      : kf::quantize_128x1;
  out.stats = cast(x.data_ptr(), x.dtype(), rows, cols, cols, out.codes.data(), out.inv.data(),
                   kFloat8_e4m3fn, power_2, eps, level);
  return out;
}

// The same bytes, scale bits and statistics.
void expect_same_block_cast(const BlockCastOut& got, const BlockCastOut& want) {
  EXPECT_EQ(got.codes, want.codes);
  EXPECT_EQ(bits_of(got.inv), bits_of(want.inv));
  EXPECT_EQ(std::bit_cast<uint32_t>(got.stats.amax), std::bit_cast<uint32_t>(want.stats.amax));
  EXPECT_EQ(got.stats.saturated, want.stats.saturated);
  EXPECT_EQ(got.stats.flushed, want.stats.flushed);
  EXPECT_EQ(got.stats.peak, want.stats.peak);
}

// The codes' bytes (to_vector would convert their values).
std::vector<uint8_t> bytes_of(const Tensor& codes) {
  const Tensor c = codes.contiguous();
  const auto* p = static_cast<const uint8_t*>(c.data_ptr());
  return std::vector<uint8_t>(p, p + c.numel());
}

TEST(Fp8Block, QuantizersGiveTheFixturesBytesAndScales) {
  const char* cases[] = {"tiles_f32",         "tiles_f32_fp32_scales",
                         "tiles_f32_epsilon", "tiles_bf16_fp32_scales",
                         "blocks_f32",        "blocks_f32_fp32_scales"};
  for (const std::string name : cases) {
    const Tensor& x = fixture(name + ".input");
    const std::vector<float> params = fixture(name + ".params").to_vector<float>();
    const auto want_codes = fixture(name + ".codes").to_vector<uint8_t>();
    const auto want_inv = bits_of(fixture(name + ".scale_inv").to_vector<float>());
    const int64_t rows = x.size(0), cols = x.size(1);
    const bool tiles = params[0] == 1.0f, power_2 = params[1] == 1.0f;
    for (SimdLevel level : simd_levels_here()) {
      SCOPED_TRACE(name + " at " + simd_level_name(level));
      std::vector<uint8_t> codes(static_cast<size_t>(rows * cols));
      std::vector<float> inv(want_inv.size());
      const auto run = tiles ? kf::quantize_1x128 : kf::quantize_128x128;
      run(x.data_ptr(), x.dtype(), rows, cols, cols, codes.data(), inv.data(), kFloat8_e4m3fn,
          power_2, params[2], level);
      EXPECT_EQ(codes, want_codes);
      EXPECT_EQ(bits_of(inv), want_inv);
    }
    // The tensor API gives the same.
    const BlockFp8 q =
        tiles ? quantize_1x128(x, power_2, params[2]) : quantize_128x128(x, power_2, params[2]);
    EXPECT_EQ(bytes_of(q.codes), want_codes) << name;
    EXPECT_EQ(bits_of(q.scale_inv.to_vector<float>()), want_inv) << name;
  }
}

// The fixtures' edge tiles worked out by hand (edge_matrix in the script: 8 x 300, tiles of
// 128, 128 and 44).
TEST(Fp8Block, EdgeTilesFollowTransformerEngine) {
  const Tensor& x = fixture("tiles_f32.input");
  const BlockFp8 p2 = quantize_1x128(x, true, 0.0f);
  const BlockFp8 f32s = quantize_1x128(x, false, 0.0f);
  const BlockFp8 eps = quantize_1x128(x, true, 1e-3f);
  const auto inv = p2.scale_inv.to_vector<float>();
  const auto inv32 = f32s.scale_inv.to_vector<float>();
  const auto codes = bytes_of(p2.codes);
  auto at = [](int64_t r, int64_t t) { return static_cast<size_t>(r * 3 + t); };
  // Row 0 is all zero: amax 0 gives scale 1 in every tile, the cut one included; with epsilon
  // 1e-3 the amax is raised to it: 448 / 1e-3 = 448000, rounded down to 2^18.
  for (int t = 0; t < 3; ++t) {
    EXPECT_EQ(inv[at(0, t)], 1.0f);
    EXPECT_EQ(eps.scale_inv.to_vector<float>()[at(0, t)], std::ldexp(1.0f, -18));
  }
  for (int c = 0; c < 300; ++c) EXPECT_EQ(codes[static_cast<size_t>(c)], 0x00);
  // Row 1: a NaN is passed over by the amax but becomes code 0x7F; an inf tile gets scale 1
  // and the inf saturates to 448 (0x7E, 0xFE for -inf).
  EXPECT_EQ(codes[300 + 5], 0x7F);
  EXPECT_EQ(inv[at(1, 1)], 1.0f);
  EXPECT_EQ(codes[300 + 130], 0x7E);
  EXPECT_EQ(inv[at(1, 2)], 1.0f);
  EXPECT_EQ(codes[300 + 260], 0xFE);
  EXPECT_EQ(codes[300 + 261], 0x7F);
  // The NaN tile's scale comes from its finite values: amax 0.64, 448 / 0.64 = 700 -> 512.
  EXPECT_EQ(inv[at(1, 0)], 1.0f / 512.0f);
  // Row 2, tile 0: a subnormal amax (3e-41): 448 / amax overflows float32, so the scale is
  // FLT_MAX, a power of 2 below it (2^127) when rounded; tile 1's amax 1e-38 overflows too.
  EXPECT_EQ(inv[at(2, 0)], std::ldexp(1.0f, -127));
  EXPECT_EQ(inv32[at(2, 0)], static_cast<float>(1.0 / static_cast<double>(FLT_MAX)));
  EXPECT_EQ(inv[at(2, 1)], std::ldexp(1.0f, -127));
  // Row 3, tile 0: amax exactly 448 gives scale 1; 448 is 0x7E and -448 0xFE.
  EXPECT_EQ(inv[at(3, 0)], 1.0f);
  EXPECT_EQ(codes[900], 0x7E);
  EXPECT_EQ(codes[901], 0xFE);
  // Tile 1 of row 3 has amax 1000: 448 / 1000 = 0.448, rounded down to 0.25 (scale_inv 4) with
  // power-of-2 scales; 1000 * 0.25 = 250 = 1.953125 * 2^7 rounds to 2 * 2^7 (0x78).
  EXPECT_EQ(inv[at(3, 1)], 4.0f);
  EXPECT_EQ(codes[900 + 200], 0x78);
  EXPECT_EQ(inv32[at(3, 1)], static_cast<float>(1.0 / static_cast<double>(448.0f / 1000.0f)));
  // The cut tile (44 elements) of row 3 has amax 1: scale 448 -> 256.
  EXPECT_EQ(inv[at(3, 2)], 1.0f / 256.0f);
  // Row 4: amax 448 (scale 1), midpoints round to even: 1.0625 -> 1 (0x38), -17 -> -16
  // (0xD8), 1.5 * 2^-9 -> 2^-8 (0x02), 1.1875 -> 1.25 (0x3A), 2^-10 -> 0 (tie to even).
  EXPECT_EQ(inv[at(4, 0)], 1.0f);
  const uint8_t want[6] = {0x7E, 0x38, 0xD8, 0x02, 0x3A, 0x00};
  for (int c = 0; c < 6; ++c) EXPECT_EQ(codes[1200 + static_cast<size_t>(c)], want[c]) << c;
  // The statistics: the largest amax (inf passed through as inf), and saturation counted.
  EXPECT_TRUE(std::isinf(p2.amax));
  EXPECT_EQ(p2.counts.saturated, 2);  // the two infinities
  EXPECT_EQ(p2.counts.total, 8 * 300);
}

// A bfloat16 source: an amax whose scale overflows takes bfloat16's largest finite value
// (TE's compute_scale_from_types), not FLT_MAX.
// The column-wise cast (128x1 tiles in x's layout) is the 1x128 cast of x^T made contiguous,
// transposed back: codes, scales, amax and counts, so the fixtures that pin the 1x128 cast pin
// it too; for every source dtype, tiles and columns cut at the edges (300 rows: two full bands
// and a short one; 37 columns: one step of 32 and 5 in a padded step), with NaN,
// inf, values that saturate (epsilon floor) and values that flush, single- and multi-threaded
// sizes. Its dequantized values are those of x^T's 1x128 cast, transposed.
TEST(Fp8Block, ColumnTilesAreTheRowTilesOfTheTransposeTransposedBack) {
  for (const auto& [rows, cols] : {std::pair<int64_t, int64_t>{300, 37}, {1000, 130}, {5, 3}}) {
    std::vector<float> v = wide_normal(rows * cols, 31, 8.0f);
    v[3] = std::numeric_limits<float>::quiet_NaN();
    v[static_cast<size_t>(cols + 1)] = std::numeric_limits<float>::infinity();
    v[static_cast<size_t>(2 * cols)] = 1e-30f;
    for (const DType dt : {kFloat32, kBFloat16, kFloat16}) {
      const Tensor x = tensor(v, {rows, cols}).to(dt);
      for (const float eps : {0.0f, 100.0f}) {
        const BlockFp8 want = quantize_1x128(x.t().contiguous(), true, eps);
        const BlockFp8 got = quantize_128x1(x, true, eps);
        const std::string at = std::string(dt.name()) + " " + std::to_string(rows) + "x" +
                               std::to_string(cols) + " eps " + std::to_string(eps);
        EXPECT_EQ(got.layout, BlockFp8Layout::kColumns);
        ASSERT_EQ(got.codes.shape(), (Shape{rows, cols})) << at;
        ASSERT_EQ(got.scale_inv.shape(), (Shape{kf::block_count(rows), cols})) << at;
        EXPECT_EQ(bytes_of(got.codes), bytes_of(want.codes.t())) << at;
        EXPECT_EQ(bits_of(got.scale_inv.to_vector<float>()),
                  bits_of(want.scale_inv.t().contiguous().to_vector<float>()))
            << at;
        EXPECT_EQ(std::bit_cast<uint32_t>(got.amax), std::bit_cast<uint32_t>(want.amax)) << at;
        EXPECT_EQ(got.counts.saturated, want.counts.saturated) << at;
        EXPECT_EQ(got.counts.flushed, want.counts.flushed) << at;
        EXPECT_EQ(got.counts.total, want.counts.total) << at;
        EXPECT_EQ(got.counts.peak, want.counts.peak) << at;
        EXPECT_EQ(bits_of(dequantize(got).to_vector<float>()),
                  bits_of(dequantize(want).t().contiguous().to_vector<float>()))
            << at;
      }
    }
  }
}

// bfloat16 tiles and blocks cast to E4M3 (the recipe's activations, gradients and weights) at
// every SIMD level give the scalar level's codes, scales and statistics, in 1x128 tiles of the
// rows, 128x1 tiles of the columns and 128x128 blocks: tiles holding a NaN,
// an inf, a subnormal, values that saturate under an epsilon floor and values that flush,
// for both kinds of scale, full tiles and a cut one.
TEST(Fp8Block, Bf16TilesAtEveryLevelAreTheScalarCast) {
  constexpr int64_t rows = 260, cols = 300;
  std::vector<float> v = wide_normal(rows * cols, 7, 8.0f);
  v[5] = std::numeric_limits<float>::quiet_NaN();
  v[static_cast<size_t>(cols + 200)] = -std::numeric_limits<float>::infinity();
  v[static_cast<size_t>(2 * cols + 1)] = 1e-39f;
  for (int64_t c = 0; c < 128; ++c) v[static_cast<size_t>(3 * cols + c)] = 1e-6f * (c % 5);
  v[static_cast<size_t>(3 * cols + 7)] = 3.0f;  // the others flush
  const Tensor x = tensor(v, {rows, cols}).to(kBFloat16);
  const Tensor xt = x.t().contiguous();
  for (const BlockCastKind kind :
       {BlockCastKind::k1x128, BlockCastKind::k128x1, BlockCastKind::k128x128})
    for (const bool power_2 : {true, false})
      for (const float eps : {0.0f, 100.0f}) {
        const BlockCastOut want = block_cast_at(x, kind, power_2, SimdLevel::kScalar, 0, eps);
        EXPECT_GT(want.stats.saturated, 0);
        EXPECT_GT(want.stats.flushed, 0);
        for (SimdLevel level : simd_levels_here()) {
          SCOPED_TRACE(std::string(simd_level_name(level)) + " " + name_of(kind) +
                       (power_2 ? " power-2" : " fp32") + " eps " + std::to_string(eps));
          expect_same_block_cast(block_cast_at(x, kind, power_2, level, 0, eps), want);
        }
      }
  // The row-wise and column-wise casts agree (x's 128x1 tiles are x^T's 1x128 tiles).
  std::vector<uint8_t> codes(static_cast<size_t>(rows * cols));
  std::vector<float> inv(static_cast<size_t>(cols * kf::block_count(rows)));
  kf::quantize_1x128(xt.data_ptr(), kBFloat16, cols, rows, rows, codes.data(), inv.data(),
                     kFloat8_e4m3fn, true, 0.0f);
  const BlockCastOut t = block_cast_at(x, BlockCastKind::k128x1, true, simd_level());
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c)
      ASSERT_EQ(t.codes[static_cast<size_t>(r * cols + c)],
                codes[static_cast<size_t>(c * rows + r)])
          << r << "," << c;
  for (int64_t b = 0; b < kf::block_count(rows); ++b)
    for (int64_t c = 0; c < cols; ++c)
      ASSERT_EQ(std::bit_cast<uint32_t>(t.inv[static_cast<size_t>(b * cols + c)]),
                std::bit_cast<uint32_t>(inv[static_cast<size_t>(c * kf::block_count(rows) + b)]));
}

// Every bfloat16 value cast under power-of-2 scales across the exponent range (the AVX2 tile,
// block and column casts' 16-bit lanes, with the float32 lanes for vectors holding a subnormal
// code or a subnormal x) gives the scalar level's codes, scales and statistics: each tile holds
// an anchor, its largest magnitude, then bfloat16 values of both signs no larger, every one of
// them in turn; the 128x1 tiles are cast from the transpose of those rows, so that they hold the
// same values as the rows' tiles.
TEST(Fp8Block, Bf16TilesUnderPowerOf2ScalesAreTheScalarCastOfEveryValue) {
  std::vector<uint16_t> anchors;
  // -112 and -111: scales of 2^120 and 2^119 (the 16-bit lanes' largest exponents).
  for (const int k :
       {-133, -127, -126, -112, -111, -100, -50, -10, -7, -6, -1, 0, 3, 8, 9, 20, 60, 100, 127})
    for (const uint16_t mant : {0x00, 0x40, 0x7F}) {
      const uint16_t a = k < -126 ? static_cast<uint16_t>(1 << (k + 133))  // subnormal
                                  : static_cast<uint16_t>(((k + 127) << 7) | mant);
      anchors.push_back(a);
    }
  anchors.push_back(0x7F80);  // inf: the float32 lanes
  std::vector<uint16_t> bits;
  for (const uint16_t a : anchors) {
    int64_t placed = 0;
    for (uint32_t p = 0; p <= 0xFFFF; ++p) {
      if ((p & 0x7FFF) > a || (p & 0x7FFF) > 0x7F80) continue;
      if (placed % 127 == 0) bits.push_back(static_cast<uint16_t>(placed % 2 ? a | 0x8000 : a));
      bits.push_back(static_cast<uint16_t>(p));
      ++placed;
    }
    while (placed % 127 != 0) {
      bits.push_back(0);
      ++placed;
    }
  }
  const int64_t cols = 128 * 8, rows = static_cast<int64_t>(bits.size()) / cols + 1;
  bits.resize(static_cast<size_t>(rows * cols), 0x3F80);
  const int64_t tiles = cols * kf::block_count(rows);
  // x (cols x rows) whose x^T is the rows above.
  std::vector<uint16_t> columns(bits.size());
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c)
      columns[static_cast<size_t>(c * rows + r)] = bits[static_cast<size_t>(r * cols + c)];
  // 1x128 tiles, 128x128 blocks (each of whose scales is that of its largest anchor), then the
  // 128x1 tiles of their transpose (the rows' tiles).
  const auto cast = [&](int kind, uint8_t* codes, float* inv, bool power_2, SimdLevel level) {
    if (kind == 2)
      return kf::quantize_128x1(columns.data(), kBFloat16, cols, rows, rows, codes, inv,
                                kFloat8_e4m3fn, power_2, 0.0f, level);
    return kind == 1 ? kf::quantize_128x128(bits.data(), kBFloat16, rows, cols, cols, codes, inv,
                                            kFloat8_e4m3fn, power_2, 0.0f, level)
                     : kf::quantize_1x128(bits.data(), kBFloat16, rows, cols, cols, codes, inv,
                                          kFloat8_e4m3fn, power_2, 0.0f, level);
  };
  for (const int kind : {0, 1, 2})
    for (const bool power_2 : {true, false}) {
      const bool blocks = kind == 1;
      std::vector<uint8_t> want_codes(bits.size()), got_codes(bits.size());
      std::vector<float> want_inv(static_cast<size_t>(tiles)), got_inv(static_cast<size_t>(tiles));
      const kf::BlockCastStats want =
          cast(kind, want_codes.data(), want_inv.data(), power_2, SimdLevel::kScalar);
      EXPECT_GT(want.flushed, 0);
      for (SimdLevel level : simd_levels_here()) {
        SCOPED_TRACE(std::string(simd_level_name(level)) +
                     (blocks      ? " 128x128"
                      : kind == 2 ? " 128x1"
                                  : " 1x128") +
                     (power_2 ? " power-2" : " fp32"));
        const kf::BlockCastStats got = cast(kind, got_codes.data(), got_inv.data(), power_2, level);
        for (size_t i = 0; i < bits.size(); ++i)
          ASSERT_EQ(got_codes[i], want_codes[i]) << "value 0x" << std::hex << bits[i];
        EXPECT_EQ(bits_of(got_inv), bits_of(want_inv));
        EXPECT_EQ(std::bit_cast<uint32_t>(got.amax), std::bit_cast<uint32_t>(want.amax));
        EXPECT_EQ(got.saturated, want.saturated);
        EXPECT_EQ(got.flushed, want.flushed);
        EXPECT_EQ(got.peak, want.peak);
      }
    }
}

// Every bfloat16 value widened to float32 with four patterns of the 16 bits below it (0, 1,
// 0x8000, 0xFFFF: with bfloat16's low mantissa bits, exact ties of E4M3's rounding and values just
// either side), cast under power-of-2 and float32 scales across the exponent range (the AVX2
// float32 bodies' integer codes, and the float32 lanes for tiles holding a subnormal or flushed
// code, an inf or a NaN) gives the scalar level's codes, scales and statistics, as 1x128 tiles,
// 128x128 blocks and 128x1 tiles. Each tile holds an anchor, its largest magnitude (among
// them values at 448 once scaled), then values of both signs no larger, every one in turn.
TEST(Fp8Block, F32TilesUnderEachScaleAreTheScalarCastOfEveryValue) {
  std::vector<uint32_t> anchors;
  for (const int k : {-149, -133, -127, -126, -100, -10, -7, -6, -1, 0, 3, 8, 9, 60, 100, 127})
    for (const uint32_t mant : {0x00u, 0x40u, 0x60u, 0x7Fu}) {
      const uint32_t a = k < -126 ? 1u << (k + 149)  // subnormal
                                  : (static_cast<uint32_t>(k + 127) << 23) | (mant << 16);
      anchors.push_back(a);
    }
  anchors.push_back(0x7F800000u);  // inf (and NaNs among its values): the float32 lanes
  constexpr std::array<uint32_t, 4> kLow = {0x0000u, 0x0001u, 0x8000u, 0xFFFFu};
  std::vector<uint32_t> bits;
  for (const uint32_t a : anchors) {
    int64_t placed = 0;
    for (uint32_t p = 0; p <= 0xFFFF; ++p) {
      if (((p & 0x7FFF) << 16) > a || (p & 0x7FFF) > 0x7F80) continue;
      for (const uint32_t low : kLow) {
        const uint32_t v = (p << 16) | low;
        if ((v & 0x7FFFFFFFu) > a) continue;
        if (placed % 127 == 0) bits.push_back(placed % 2 ? a | 0x80000000u : a);
        bits.push_back(v);
        ++placed;
      }
    }
    while (placed % 127 != 0) {
      bits.push_back(0);
      ++placed;
    }
  }
  const int64_t cols = 128 * 8, rows = static_cast<int64_t>(bits.size()) / cols + 1;
  bits.resize(static_cast<size_t>(rows * cols), 0x3F800000u);
  for (const int kind : {0, 1, 2})  // 1x128, 128x128, 128x1
    for (const bool power_2 : {true, false}) {
      const int64_t n_inv = kind == 1   ? kf::block_count(rows) * kf::block_count(cols)
                            : kind == 2 ? cols * kf::block_count(rows)
                                        : rows * kf::block_count(cols);
      const auto cast = [&](std::vector<uint8_t>& codes, std::vector<float>& inv, SimdLevel level) {
        codes.assign(bits.size(), 0);
        inv.assign(static_cast<size_t>(n_inv), 0.0f);
        if (kind == 2)
          return kf::quantize_128x1(bits.data(), kFloat32, rows, cols, cols, codes.data(),
                                    inv.data(), kFloat8_e4m3fn, power_2, 0.0f, level);
        return kind == 1
                   ? kf::quantize_128x128(bits.data(), kFloat32, rows, cols, cols, codes.data(),
                                          inv.data(), kFloat8_e4m3fn, power_2, 0.0f, level)
                   : kf::quantize_1x128(bits.data(), kFloat32, rows, cols, cols, codes.data(),
                                        inv.data(), kFloat8_e4m3fn, power_2, 0.0f, level);
      };
      std::vector<uint8_t> want_codes, got_codes;
      std::vector<float> want_inv, got_inv;
      const kf::BlockCastStats want = cast(want_codes, want_inv, SimdLevel::kScalar);
      EXPECT_GT(want.flushed, 0);
      for (SimdLevel level : simd_levels_here()) {
        SCOPED_TRACE(std::string(simd_level_name(level)) + " kind " + std::to_string(kind) +
                     (power_2 ? " power-2" : " fp32"));
        const kf::BlockCastStats got = cast(got_codes, got_inv, level);
        for (size_t i = 0; i < bits.size(); ++i)
          ASSERT_EQ(got_codes[i], want_codes[i]) << "value 0x" << std::hex << bits[i];
        EXPECT_EQ(bits_of(got_inv), bits_of(want_inv));
        EXPECT_EQ(std::bit_cast<uint32_t>(got.amax), std::bit_cast<uint32_t>(want.amax));
        EXPECT_EQ(got.saturated, want.saturated);
        EXPECT_EQ(got.flushed, want.flushed);
        EXPECT_EQ(got.peak, want.peak);
      }
    }
}

// Wide matrices at every SIMD level give the scalar level's codes, scales and statistics for
// every source dtype: 1x128 tiles in batches cut at a row's end (19 full tiles and a short one)
// and 128x128 blocks in a group of blocks side by side cut short by the last, narrow block, with a
// NaN, an inf, an all-zero block, one of subnormal values only and one whose values flush, and a
// short last band of rows; and 128x1 tiles (bands of 128 rows cast 32 columns at a time, the
// short last band too, the last 8 columns in a padded step). The first two bands' values lie
// within a few binades (tiles whose codes are all normal: the 16-bit lanes), the last band's
// over many.
TEST(Fp8Block, WideMatricesAtEveryLevelAreTheScalarCast) {
  constexpr int64_t rows = 300, cols = 19 * 128 + 40;
  std::vector<float> v = wide_normal(rows * cols, 11, 1.0f);
  const std::vector<float> wide = wide_normal(rows * cols, 12, 8.0f);
  std::copy(wide.begin() + 256 * cols, wide.end(), v.begin() + 256 * cols);
  const auto at = [&](int64_t r, int64_t c) -> float& {
    return v[static_cast<size_t>(r * cols + c)];
  };
  at(5, 9 * 128 + 3) = std::numeric_limits<float>::quiet_NaN();
  at(200, 17 * 128 + 1) = -std::numeric_limits<float>::infinity();
  for (int64_t r = 0; r < 128; ++r)
    for (int64_t c = 2 * 128; c < 3 * 128; ++c) at(r, c) = 0.0f;
  for (int64_t r = 0; r < 128; ++r)
    for (int64_t c = 12 * 128; c < 13 * 128; ++c) at(r, c) = 1e-39f * ((r + c) % 3);
  for (int64_t r = 128; r < 256; ++r)
    for (int64_t c = 4 * 128; c < 5 * 128; ++c) at(r, c) = 1e-6f * ((r + c) % 5);
  at(130, 4 * 128 + 7) = 3.0f;  // the others flush
  for (const DType dt : {kBFloat16, kFloat32}) {
    const Tensor x = tensor(v, {rows, cols}).to(dt);
    for (const BlockCastKind kind :
         {BlockCastKind::k1x128, BlockCastKind::k128x128, BlockCastKind::k128x1})
      for (const bool power_2 : {true, false}) {
        const BlockCastOut want = block_cast_at(x, kind, power_2, SimdLevel::kScalar);
        EXPECT_GT(want.stats.flushed, 0);
        EXPECT_TRUE(std::isinf(want.stats.amax));
        for (SimdLevel level : simd_levels_here()) {
          SCOPED_TRACE(std::string(dt.name()) + " " + simd_level_name(level) + " " + name_of(kind) +
                       (power_2 ? " power-2" : " fp32"));
          expect_same_block_cast(block_cast_at(x, kind, power_2, level), want);
        }
      }
  }
}

// Zeros of both signs among float32 values whose codes are all normal give the scalar level's
// codes (-0's 0x80), scales and statistics as 1x128 tiles, 128x128 blocks and 128x1 tiles at every
// SIMD level: the AVX2 float32 bodies' integer codes, whose sign byte comes from x's packs.
TEST(Fp8Block, F32ZerosOfBothSignsAmongNormalCodesAreTheScalarCast) {
  constexpr int64_t rows = 128, cols = 4 * 128;
  std::mt19937 gen(5);
  std::uniform_real_distribution<float> mag(0.5f, 4.0f);
  std::vector<float> v(static_cast<size_t>(rows * cols));
  for (size_t i = 0; i < v.size(); ++i) v[i] = (i % 3 == 0 ? -1.0f : 1.0f) * mag(gen);
  for (size_t i = 0; i < v.size(); i += 97) v[i] = -0.0f;
  for (size_t i = 40; i < v.size(); i += 89) v[i] = 0.0f;
  const Tensor x = tensor(v, {rows, cols});
  for (const BlockCastKind kind :
       {BlockCastKind::k1x128, BlockCastKind::k128x128, BlockCastKind::k128x1}) {
    const BlockCastOut want = block_cast_at(x, kind, true, SimdLevel::kScalar);
    EXPECT_EQ(want.stats.flushed, 0);
    EXPECT_EQ(want.codes[0], 0x80);
    for (SimdLevel level : simd_levels_here()) {
      SCOPED_TRACE(std::string(simd_level_name(level)) + " " + name_of(kind));
      expect_same_block_cast(block_cast_at(x, kind, true, level), want);
    }
  }
}

// 128x1 tiles of bfloat16 and float32 (the band casts, 32 columns a step) at every SIMD level
// give the scalar level's codes, scales and statistics, for widths of every kind: 16 columns
// (one padded step), 48 (a step of 32 and a padded one of 16), 150, 560, and 8264 (wider than a
// group of kColumnGroupBytes of each row: five groups of bfloat16, nine of float32), with a short
// last band (300 rows), none (256), or one short band alone (100 rows, whose columns are shared out
// between threads in narrower groups where there are two or more); and columns in both halves of
// a 32-column step and in the next step, in the first group and the last, holding a NaN, an
// inf, all zeros, a subnormal amax (its scale overflows to the source's largest value), values
// at 448 before and after scaling, bfloat16's largest value, a value whose code is subnormal and
// one that flushes, and an amax whose scale lies above 2^120.
TEST(Fp8Block, ColumnTilesOfEveryWidthAndEdgeAreTheScalarCast) {
  for (const int64_t rows : {300, 256, 100})
    for (const int64_t cols : {16, 48, 150, 560, 8264}) {
      if (cols == 8264 && rows == 256) continue;
      std::vector<float> v = wide_normal(rows * cols, 17, 1.0f);
      const float nan = std::numeric_limits<float>::quiet_NaN();
      const float inf = std::numeric_limits<float>::infinity();
      for (const int64_t base : {int64_t{0}, cols > 8300 ? int64_t{8224} : int64_t{0}}) {
        const auto at = [&](int64_t r, int64_t c) -> float& {
          return v[static_cast<size_t>(std::min(r, rows - 1) * cols + (base + c) % cols)];
        };
        for (const int64_t band : {0, 128}) {
          if (band >= rows) continue;
          at(band + 5, 1) = nan;
          at(band + 7, 2) = band ? -inf : inf;
          for (int64_t r = 0; r < std::min<int64_t>(128, rows - band); ++r) {
            at(band + r, 3) = 0.0f;
            at(band + r, 4) = 1e-39f * static_cast<float>(r % 3);   // subnormal, scale overflows
            at(band + r, 11) = 1e-37f * static_cast<float>(r % 4);  // scale 2^127 once power-of-2
            at(band + r, 12) = 3e-35f * static_cast<float>(r % 5);  // scale 2^120 or 2^121
          }
          at(band + 9, 5) = 448.0f;
          at(band + 10, 5) = -448.0f;
          at(band + 11, 6) = 56.0f;           // 448 once scaled by 8
          at(band + 40, 9) = -3.3895314e38f;  // bfloat16's largest value
          at(band + 20, 7) = 1e-4f;           // a subnormal code
          at(band + 30, 8) = -1e-9f;          // flushes
          at(band + 3, 17) = -nan;
          at(band + 100, 18) = -inf;
          at(band + 50, 21) = 1e-4f;
          at(band + 60, 33) = nan;
          at(band + 61, 36) = 1e-4f;
          at(band + 62, 50) = inf;
          at(band + 127, 63) = 1e-9f;
        }
      }
      for (const DType dt : {kBFloat16, kFloat32}) {
        const Tensor x = tensor(v, {rows, cols}).to(dt);
        const int64_t n_inv = cols * kf::block_count(rows);
        for (const bool power_2 : {true, false})
          for (const float eps : {0.0f, 100.0f}) {
            const auto run = [&](SimdLevel level, std::vector<uint8_t>& codes,
                                 std::vector<float>& inv) {
              codes.assign(static_cast<size_t>(rows * cols), 0x55);
              inv.assign(static_cast<size_t>(n_inv), 0.0f);
              return kf::quantize_128x1(x.data_ptr(), dt, rows, cols, cols, codes.data(),
                                        inv.data(), kFloat8_e4m3fn, power_2, eps, level);
            };
            std::vector<uint8_t> want_codes, got_codes;
            std::vector<float> want_inv, got_inv;
            const kf::BlockCastStats want = run(SimdLevel::kScalar, want_codes, want_inv);
            EXPECT_TRUE(std::isinf(want.amax));
            if (eps == 0.0f && cols > 8) EXPECT_GT(want.flushed, 0);
            for (SimdLevel level : simd_levels_here()) {
              SCOPED_TRACE(std::string(dt.name()) + " " + std::to_string(rows) + "x" +
                           std::to_string(cols) + " " + simd_level_name(level) +
                           (power_2 ? " power-2" : " fp32") + " eps " + std::to_string(eps));
              const kf::BlockCastStats got = run(level, got_codes, got_inv);
              EXPECT_EQ(got_codes, want_codes);
              EXPECT_EQ(bits_of(got_inv), bits_of(want_inv));
              EXPECT_EQ(std::bit_cast<uint32_t>(got.amax), std::bit_cast<uint32_t>(want.amax));
              EXPECT_EQ(got.saturated, want.saturated);
              EXPECT_EQ(got.flushed, want.flushed);
              EXPECT_EQ(got.peak, want.peak);
            }
          }
      }
    }
}

// Casts whose codes are written with streaming stores (at least kStreamCodesFrom bytes of them,
// rows on 32-byte boundaries: the 128x128 blocks and 128x1 tiles of bfloat16 and float32), and
// bfloat16's 1x128 tiles of the same size, give the scalar level's codes, scales and statistics
// at every SIMD level, with a short last band, a NaN, an inf, an all-zero tile and column,
// subnormal and flushed codes, 448 once scaled, and amaxes whose scales are 2^119 and 2^120, in
// the first band and the last.
TEST(Fp8Block, StreamedCodesAreTheScalarCast) {
  constexpr int64_t rows = 2050, cols = 4096;
  static_assert(rows * cols >= mantissa::kernels::kStreamCodesFrom);
  std::vector<float> v = wide_normal(rows * cols, 23, 2.0f);
  const auto at = [&](int64_t r, int64_t c) -> float& {
    return v[static_cast<size_t>(r * cols + c)];
  };
  for (const int64_t band : {int64_t{0}, int64_t{2048}}) {
    const int64_t n = std::min<int64_t>(128, rows - band);
    at(band + 1, 70) = std::numeric_limits<float>::quiet_NaN();
    at(band + n - 1, 300) = -std::numeric_limits<float>::infinity();
    for (int64_t r = 0; r < n; ++r) {
      at(band + r, 512 + 5) = 0.0f;                                   // a zero column
      at(band + r, 1030) = 5e-34f * static_cast<float>(1 + r % 3);    // scale 2^119 or 2^118
      at(band + r, 1100) = 2.5e-34f * static_cast<float>(1 + r % 2);  // scale 2^120 or 2^119
    }
    for (int64_t c = 2048; c < 2176; ++c) at(band, c) = 0.0f;  // a zero tile
    at(band, 3000) = 1e-4f;                                    // a subnormal code
    at(band + n / 2, 3001) = -1e-9f;                           // flushes
    at(band, 3100) = 448.0f;
  }
  // Values whose products lie just below E4M3's smallest normal (rounded to it or not).
  for (int64_t c = 3200; c < 3328; ++c)
    at(5, c) = 0.015625f * (1.0f - 0.001f * static_cast<float>(c - 3200));
  for (const DType dt : {kBFloat16, kFloat32}) {
    const Tensor x = tensor(v, {rows, cols}).to(dt);
    for (const BlockCastKind kind :
         {BlockCastKind::k1x128, BlockCastKind::k128x128, BlockCastKind::k128x1}) {
      if (dt == kFloat32 && kind == BlockCastKind::k1x128) continue;
      const BlockCastOut want = block_cast_at(x, kind, true, SimdLevel::kScalar, 0x55);
      EXPECT_GT(want.stats.flushed, 0);
      for (SimdLevel level : simd_levels_here()) {
        SCOPED_TRACE(std::string(dt.name()) + " " + simd_level_name(level) + " " + name_of(kind));
        expect_same_block_cast(block_cast_at(x, kind, true, level, 0x55), want);
      }
    }
  }
}

// 128x128 blocks of rows wider than a group (kBlockGroupBytes of each row: bfloat16 two groups,
// the second of two full blocks and a narrow one; float32 three) at every SIMD level give the
// scalar level's codes, scales and statistics, with a NaN and an inf in the second group, an
// all-zero block in the first and a short last band; and of one short band (100 rows), whose
// blocks are shared out between threads in narrower groups where there are two or more.
TEST(Fp8Block, BlocksOfRowsWiderThanAGroupAreTheScalarCast) {
  for (const int64_t rows : {130, 100}) {
    const int64_t cols = kf::kBlockGroupBytes / 2 + 2 * 128 + 40;
    std::vector<float> v = wide_normal(rows * cols, 13, 4.0f);
    const auto at = [&](int64_t r, int64_t c) -> float& {
      return v[static_cast<size_t>(r * cols + c)];
    };
    const int64_t second = kf::kBlockGroupBytes / 2;  // bfloat16's second group, float32's third
    at(3, second + 5) = std::numeric_limits<float>::quiet_NaN();
    at(rows - 30, second + 130) = std::numeric_limits<float>::infinity();
    at(rows - 1, kf::kBlockGroupBytes / 4 + 7) = -std::numeric_limits<float>::quiet_NaN();
    for (int64_t r = 0; r < std::min<int64_t>(rows, 128); ++r)
      for (int64_t c = 128; c < 256; ++c) at(r, c) = 0.0f;
    for (const DType dt : {kBFloat16, kFloat32}) {
      const Tensor x = tensor(v, {rows, cols}).to(dt);
      for (const bool power_2 : {true, false}) {
        const auto run = [&](SimdLevel level, std::vector<uint8_t>& codes,
                             std::vector<float>& inv) {
          codes.assign(static_cast<size_t>(rows * cols), 0);
          inv.assign(static_cast<size_t>(kf::block_count(rows) * kf::block_count(cols)), 0.0f);
          return kf::quantize_128x128(x.data_ptr(), dt, rows, cols, cols, codes.data(), inv.data(),
                                      kFloat8_e4m3fn, power_2, 0.0f, level);
        };
        std::vector<uint8_t> want_codes, got_codes;
        std::vector<float> want_inv, got_inv;
        const kf::BlockCastStats want = run(SimdLevel::kScalar, want_codes, want_inv);
        EXPECT_TRUE(std::isinf(want.amax));
        for (SimdLevel level : simd_levels_here()) {
          SCOPED_TRACE(std::to_string(rows) + " rows " + std::string(dt.name()) + " " +
                       simd_level_name(level) + (power_2 ? " power-2" : " fp32"));
          const kf::BlockCastStats got = run(level, got_codes, got_inv);
          EXPECT_EQ(got_codes, want_codes);
          EXPECT_EQ(bits_of(got_inv), bits_of(want_inv));
          EXPECT_EQ(std::bit_cast<uint32_t>(got.amax), std::bit_cast<uint32_t>(want.amax));
          EXPECT_EQ(got.saturated, want.saturated);
          EXPECT_EQ(got.flushed, want.flushed);
          EXPECT_EQ(got.peak, want.peak);
        }
      }
    }
  }
}

TEST(Fp8Block, OverflowingScaleIsTheSourceDtypesLargestValue) {
  std::vector<float> v(128, 0.0f);
  v[0] = 1e-39f;  // subnormal in float32 and bfloat16
  const Tensor bf = tensor(v, {1, 128}).to(kBFloat16);
  const float bf16_max = std::bit_cast<float>(0x7F7F0000u);
  EXPECT_EQ(quantize_1x128(bf, false).scale_inv.item<float>(),
            static_cast<float>(1.0 / static_cast<double>(bf16_max)));
  EXPECT_EQ(quantize_1x128(tensor(v, {1, 128}), false).scale_inv.item<float>(),
            static_cast<float>(1.0 / static_cast<double>(FLT_MAX)));
  EXPECT_EQ(quantize_1x128(bf, true).scale_inv.item<float>(), std::ldexp(1.0f, -127));
}

// The product's definition written out: per 128-slice of K the fp32 sum of the code products
// in k order, promoted by fma with the product of the two scales.
std::vector<float> reference_product(const BlockFp8& a, const BlockFp8& b, int64_t M, int64_t N,
                                     int64_t K) {
  // a: [M, K] (1x128 tiles along K); b: [N, K] read transposed.
  const auto ac = bytes_of(a.codes), bc = bytes_of(b.codes);
  const auto as = a.scale_inv.to_vector<float>(), bs = b.scale_inv.to_vector<float>();
  const bool b_tiles = b.format == FormatId::kE4m3Block1x128;
  const int64_t kt = kf::block_count(K);
  std::vector<float> out(static_cast<size_t>(M * N));
  for (int64_t m = 0; m < M; ++m) {
    for (int64_t n = 0; n < N; ++n) {
      float acc = 0.0f;
      for (int64_t kb = 0; kb < kt; ++kb) {
        float part = 0.0f;
        for (int64_t k = kb * 128; k < std::min(K, kb * 128 + 128); ++k)
          part += fp8_e4m3_bits_to_float(ac[static_cast<size_t>(m * K + k)]) *
                  fp8_e4m3_bits_to_float(bc[static_cast<size_t>(n * K + k)]);
        const float sa = as[static_cast<size_t>(m * kt + kb)];
        const float sb = bs[static_cast<size_t>((b_tiles ? n : n / 128) * kt + kb)];
        acc = std::fma(part, sa * sb, acc);
      }
      out[static_cast<size_t>(m * N + n)] = acc;
    }
  }
  return out;
}

TEST(Fp8Block, GemmIsItsDefinitionAtEveryLevel) {
  // K = 300: slices of 128, 128 and 44; M and N cut the register and thread tiles. The second
  // shape spreads over several tasks of rows and columns.
  for (const auto [M, N, K] : {std::array<int64_t, 3>{70, 261, 300}, {300, 530, 260}}) {
    const Tensor x = tensor(wide_normal(M * K, 1, 6.0f), {M, K});
    const Tensor w = tensor(wide_normal(N * K, 2, 6.0f), {N, K});
    const BlockFp8 qx = quantize_1x128(x);
    for (const BlockFp8& qw :
         {quantize_128x128(w), quantize_1x128(w), quantize_128x128(w, false)}) {
      const std::vector<float> want = reference_product(qx, qw, M, N, K);
      for (SimdLevel level : simd_levels_here()) {
        SCOPED_TRACE(simd_level_name(level));
        std::vector<float> out(static_cast<size_t>(M * N));
        const int64_t kt = kf::block_count(K);
        const bool tiles = qw.format == FormatId::kE4m3Block1x128;
        const kf::BlockOperandView va{static_cast<const uint8_t*>(qx.codes.data_ptr()),
                                      K,
                                      1,
                                      qx.scale_inv.data<float>(),
                                      1,
                                      kt,
                                      1,
                                      kFloat8_e4m3fn};
        const kf::BlockOperandView vb{static_cast<const uint8_t*>(qw.codes.data_ptr()),
                                      K,
                                      1,
                                      qw.scale_inv.data<float>(),
                                      tiles ? 1 : 128,
                                      kt,
                                      1,
                                      kFloat8_e4m3fn};
        kf::block_scaled_gemm(va, vb, M, N, K, nullptr, out.data(), level);
        EXPECT_EQ(bits_of(out), bits_of(want));
      }
      // Through the GEMM seam, with a bias added in fp32 after the accumulation.
      const Tensor bias = tensor(wide_normal(N, 3, 1.0f), {N});
      const std::vector<float> y = block_gemm(qx, false, qw, true, bias).to_vector<float>();
      const std::vector<float> bv = bias.to_vector<float>();
      for (int64_t i = 0; i < M * N; ++i)
        ASSERT_EQ(
            std::bit_cast<uint32_t>(y[static_cast<size_t>(i)]),
            std::bit_cast<uint32_t>(want[static_cast<size_t>(i)] + bv[static_cast<size_t>(i % N)]))
            << i;
    }
  }
}

// A tensor's bytes, whatever its dtype.
std::vector<uint8_t> raw_bytes(const Tensor& t) {
  const Tensor c = t.contiguous();
  const auto* p = static_cast<const uint8_t*>(c.data_ptr());
  return std::vector<uint8_t>(p, p + c.numel() * static_cast<int64_t>(c.dtype().itemsize()));
}

// The weight gradient's product from the 128x1 casts of dy and x, read where they lie (A
// transposed, decoded 8 x 8 codes at a time into the panel; B down its stored rows), gives the
// bytes of the product from the 1x128 casts of dy^T and x^T made contiguous, at every level and
// through the GEMM seam, for a float32 and a bfloat16 output: the same codes, scales and sum
// order. K = 300 tokens (slices of 128, 128 and 44); M and N cut the register and thread tiles.
// The seam refuses a 128x1 operand read the other way.
TEST(Fp8Block, GemmOfColumnTilesIsTheProductOfTheTransposedRowTiles) {
  for (const auto [M, N, K] : {std::array<int64_t, 3>{70, 261, 300}, {300, 530, 260}}) {
    const Tensor dy = tensor(wide_normal(K * M, 6, 6.0f), {K, M}).to(kBFloat16);
    const Tensor x = tensor(wide_normal(K * N, 7, 6.0f), {K, N}).to(kBFloat16);
    const BlockFp8 qdy = quantize_128x1(dy), qx = quantize_128x1(x);
    const BlockFp8 qdyt = quantize_1x128(dy.t().contiguous()),
                   qxt = quantize_1x128(x.t().contiguous());
    const int64_t kt = kf::block_count(K);
    const kf::BlockOperandView old_a{static_cast<const uint8_t*>(qdyt.codes.data_ptr()),
                                     K,
                                     1,
                                     qdyt.scale_inv.data<float>(),
                                     1,
                                     kt,
                                     1,
                                     kFloat8_e4m3fn};
    const kf::BlockOperandView old_b{static_cast<const uint8_t*>(qxt.codes.data_ptr()),
                                     K,
                                     1,
                                     qxt.scale_inv.data<float>(),
                                     1,
                                     kt,
                                     1,
                                     kFloat8_e4m3fn};
    const kf::BlockOperandView new_a{static_cast<const uint8_t*>(qdy.codes.data_ptr()),
                                     1,
                                     M,
                                     qdy.scale_inv.data<float>(),
                                     1,
                                     1,
                                     M,
                                     kFloat8_e4m3fn};
    const kf::BlockOperandView new_b{static_cast<const uint8_t*>(qx.codes.data_ptr()),
                                     1,
                                     N,
                                     qx.scale_inv.data<float>(),
                                     1,
                                     1,
                                     N,
                                     kFloat8_e4m3fn};
    for (const DType dt : {kFloat32, kBFloat16}) {
      Tensor want = empty({M, N}, dt);
      kf::block_scaled_gemm(old_a, old_b, M, N, K, nullptr, want.data_ptr(), dt,
                            SimdLevel::kScalar);
      for (SimdLevel level : simd_levels_here()) {
        SCOPED_TRACE(std::string(simd_level_name(level)) + " " + std::string(dt.name()));
        Tensor old_y = empty({M, N}, dt), new_y = empty({M, N}, dt);
        kf::block_scaled_gemm(old_a, old_b, M, N, K, nullptr, old_y.data_ptr(), dt, level);
        kf::block_scaled_gemm(new_a, new_b, M, N, K, nullptr, new_y.data_ptr(), dt, level);
        EXPECT_EQ(raw_bytes(old_y), raw_bytes(want));
        EXPECT_EQ(raw_bytes(new_y), raw_bytes(want));
      }
      EXPECT_EQ(raw_bytes(block_gemm(qdy, true, qx, false, Tensor(), dt)), raw_bytes(want));
      EXPECT_EQ(raw_bytes(block_gemm(qdyt, false, qxt, true, Tensor(), dt)), raw_bytes(want));
    }
  }
  const Tensor x = tensor(wide_normal(300 * 70, 8, 1.0f), {300, 70});
  const BlockFp8 qx = quantize_128x1(x);
  EXPECT_THROW((void)block_gemm(qx, false, qx, true), Error);
}

// A bfloat16 or float16 output holds the float32 product plus the bias rounded as Tensor::to
// rounds it, at every level, for tasks cut by the edges and spread over threads.
TEST(Fp8Block, GemmRoundsA16BitOutputAsTensorTo) {
  for (const auto [M, N, K] : {std::array<int64_t, 3>{70, 261, 300}, {300, 530, 260}}) {
    const Tensor x = tensor(wide_normal(M * K, 1, 6.0f), {M, K});
    const Tensor w = tensor(wide_normal(N * K, 2, 6.0f), {N, K});
    const BlockFp8 qx = quantize_1x128(x), qw = quantize_128x128(w);
    const int64_t kt = kf::block_count(K);
    const kf::BlockOperandView va{static_cast<const uint8_t*>(qx.codes.data_ptr()),
                                  K,
                                  1,
                                  qx.scale_inv.data<float>(),
                                  1,
                                  kt,
                                  1,
                                  kFloat8_e4m3fn};
    const kf::BlockOperandView vb{static_cast<const uint8_t*>(qw.codes.data_ptr()),
                                  K,
                                  1,
                                  qw.scale_inv.data<float>(),
                                  128,
                                  kt,
                                  1,
                                  kFloat8_e4m3fn};
    const Tensor bias = tensor(wide_normal(N, 3, 4.0f), {N});
    for (const bool with_bias : {false, true}) {
      const float* bp = with_bias ? bias.data<float>() : nullptr;
      Tensor y32 = empty({M, N}, kFloat32);
      kf::block_scaled_gemm(va, vb, M, N, K, bp, y32.data<float>(), SimdLevel::kScalar);
      for (const DType dt : {kBFloat16, kFloat16}) {
        const std::vector<uint8_t> want = raw_bytes(y32.to(dt));
        for (SimdLevel level : simd_levels_here()) {
          SCOPED_TRACE(std::string(simd_level_name(level)) + " " + std::string(dt.name()) +
                       (with_bias ? " bias" : ""));
          Tensor y = empty({M, N}, dt);
          kf::block_scaled_gemm(va, vb, M, N, K, bp, y.data_ptr(), dt, level);
          EXPECT_EQ(raw_bytes(y), want);
        }
        // Through the GEMM seam.
        EXPECT_EQ(raw_bytes(block_gemm(qx, false, qw, true, with_bias ? bias : Tensor(), dt)),
                  want);
      }
    }
  }
  // K = 0: no slice writes the accumulator; the output is the bias rounded.
  const uint8_t no_codes[1] = {0};
  const float no_scales[1] = {1.0f};
  const kf::BlockOperandView none{no_codes, 0, 1, no_scales, 1, 1, 1, kFloat8_e4m3fn};
  const Tensor bias = tensor(std::vector<float>{1.0f, -2.5f, 3.0e-3f}, {3});
  for (SimdLevel level : simd_levels_here()) {
    Tensor y = full({2, 3}, 7.0, kBFloat16);
    kf::block_scaled_gemm(none, none, 2, 3, 0, bias.data<float>(), y.data_ptr(), kBFloat16, level);
    EXPECT_EQ(raw_bytes(y), raw_bytes(bias.expand({2, 3}).to(kBFloat16)));
  }
}

// Against float64 over the dequantized operands: within the bound of fp32 summation of 128
// terms per slice and one fma per slice, |err| <= gamma(128 + slices) * sum |a| |b|.
TEST(Fp8Block, GemmIsTheFloat64ProductWithinTheAccumulationBound) {
  const int64_t M = 33, N = 140, K = 515;
  const Tensor x = tensor(wide_normal(M * K, 4, 10.0f), {M, K});
  const Tensor w = tensor(wide_normal(N * K, 5, 10.0f), {N, K});
  const BlockFp8 qx = quantize_1x128(x), qw = quantize_128x128(w);
  const auto xd = dequantize(qx).to_vector<float>(), wd = dequantize(qw).to_vector<float>();
  const auto y = block_gemm(qx, false, qw, true).to_vector<float>();
  const double u = std::ldexp(1.0, -24);
  const double n = 128 + kf::block_count(K) + 1;
  const double gamma = n * u / (1 - n * u);
  for (int64_t m = 0; m < M; ++m) {
    for (int64_t j = 0; j < N; ++j) {
      double ref = 0.0, mag = 0.0;
      for (int64_t k = 0; k < K; ++k) {
        const double p = static_cast<double>(xd[static_cast<size_t>(m * K + k)]) *
                         wd[static_cast<size_t>(j * K + k)];
        ref += p;
        mag += std::fabs(p);
      }
      ASSERT_LE(std::fabs(y[static_cast<size_t>(m * N + j)] - ref), gamma * mag) << m << "," << j;
    }
  }
}

// The backward's orientations: dx = dy @ W reads the weight's 128x128 blocks the other way, and
// dW = dy^T @ x takes both operands quantized along M; each equals the float64 product of its
// dequantized operands within the bound.
TEST(Fp8Block, GemmReadsBlocksInBothOrientations) {
  const int64_t M = 150, N = 200, K = 130;
  const Tensor w = tensor(wide_normal(N * K, 6, 4.0f), {N, K});
  const Tensor dy = tensor(wide_normal(M * N, 7, 4.0f), {M, N});
  const BlockFp8 qw = quantize_128x128(w), qdy = quantize_1x128(dy);
  const auto wd = dequantize(qw).to_vector<float>(), dyd = dequantize(qdy).to_vector<float>();
  const auto dx = block_gemm(qdy, false, qw, false).to_vector<float>();  // [M, K]
  const double u = std::ldexp(1.0, -24);
  for (int64_t m = 0; m < M; ++m) {
    for (int64_t k = 0; k < K; ++k) {
      double ref = 0.0, mag = 0.0;
      for (int64_t n = 0; n < N; ++n) {
        const double p = static_cast<double>(dyd[static_cast<size_t>(m * N + n)]) *
                         wd[static_cast<size_t>(n * K + k)];
        ref += p;
        mag += std::fabs(p);
      }
      const double g = (130.0 + 3) * u;
      ASSERT_LE(std::fabs(dx[static_cast<size_t>(m * K + k)] - ref), g * mag * 1.01)
          << m << "," << k;
    }
  }
  // A 1x128 operand read across its tiles is refused.
  expect_error([&] { block_gemm(qdy, true, qdy, false); }, "must lie along the product's K");
  expect_error([&] { block_gemm(qdy, false, quantize_1x128(w), false); },
               "must lie along the product's K");
}

Recipe block_recipe(bool fp32_scales = false) {
  Recipe r;
  r.kind = RecipeKind::kBlock;
  r.use_fp32_scales = fp32_scales;
  return r;
}

std::vector<uint32_t> bits_of(const Tensor& t) {
  return bits_of(t.contiguous().to(kFloat32).to_vector<float>());
}

// The layer's three products are the recipe's, bit for bit: y from x in 1x128 tiles and W in
// 128x128 blocks (bias in the accumulator), dx from dy's tiles and the same W blocks, dW from
// dy^T's and x^T's tiles along M. 200 rows, 150 inputs and 130 outputs cut every tiling.
TEST(Fp8Block, LinearForwardAndGradientsFollowTheRecipe) {
  for (bool fp32_scales : {false, true}) {
    SCOPED_TRACE(fp32_scales ? "fp32 scales" : "power-of-2 scales");
    manual_seed(4);
    Linear layer(150, 130, true, kFloat32, 1);
    const Tensor x = tensor(wide_normal(200 * 150, 11, 3.0f), {200, 150});
    const Tensor g = tensor(wide_normal(200 * 130, 12, 3.0f), {200, 130});
    Tensor xin = x.detach();
    xin.requires_grad_(true);
    Tensor y;
    {
      Fp8Autocast ac(true, block_recipe(fp32_scales));
      y = layer(xin);
    }
    sum(mul(y, g)).backward();
    const bool p2 = !fp32_scales;
    const Tensor w = layer.weight.detach();
    const BlockFp8 qw = quantize_128x128(w, p2);
    EXPECT_EQ(bits_of(y),
              bits_of(block_gemm(quantize_1x128(x, p2), false, qw, true, layer.bias.detach())));
    EXPECT_EQ(bits_of(xin.grad()), bits_of(block_gemm(quantize_1x128(g, p2), false, qw, false)));
    EXPECT_EQ(bits_of(layer.weight.grad()),
              bits_of(block_gemm(quantize_1x128(g.t().contiguous(), p2), false,
                                 quantize_1x128(x.t().contiguous(), p2), true)));
    const auto db = layer.bias.grad().to_vector<float>();
    const auto gs = sum(g, {0}).to_vector<float>();
    for (size_t j = 0; j < db.size(); ++j)
      EXPECT_NEAR(db[j], gs[j], 1e-4f * std::fabs(gs[j]) + 1e-5f);
    // An FP8 product, not the fp32 one.
    const auto y32 = add(matmul(x, w.t()), layer.bias.detach()).to_vector<float>();
    const auto yv = y.to_vector<float>();
    double diff = 0;
    for (size_t i = 0; i < yv.size(); ++i) diff = std::max(diff, std::fabs(double(yv[i]) - y32[i]));
    EXPECT_GT(diff, 1e-3);
    // The statistics: the largest tile amax of the last casts and the scale it gets.
    const ScalingState& st = *layer.fp8_state();
    float xa = 0;
    for (float v : x.to_vector<float>()) xa = std::max(xa, std::fabs(v));
    EXPECT_EQ(st.current_amax(0), xa);
    EXPECT_EQ(st.scale_of(0), block_scale_of(xa, kFloat32, p2, 0.0f));
  }
}

TEST(Fp8Block, TrainingConverges) {
  const std::vector<float> l = train_losses({{"fp8_recipe", "block"}});
  double first = 0, last = 0;
  for (int i = 0; i < 5; ++i) first += l[static_cast<size_t>(i)] / 5;
  for (int i = 55; i < 60; ++i) last += l[static_cast<size_t>(i)] / 5;
  EXPECT_LT(last, 0.2 * first);
  for (float v : l) EXPECT_TRUE(std::isfinite(v));
  EXPECT_NE(l, train_losses({{"fp8_recipe", "current"}}));
  EXPECT_NE(l, train_losses({{"fp8_recipe", "block"}, {"fp8_fp32_scales", "true"}}));
}

// The recipe's settings: names, checks and the checkpointed JSON.
TEST(Fp8Block, RecipeSettings) {
  const Recipe r = block_recipe();
  EXPECT_EQ(recipe_kind_from_string("Block"), RecipeKind::kBlock);
  EXPECT_TRUE(r.power_2_scales());
  EXPECT_FALSE(block_recipe(true).power_2_scales());
  EXPECT_EQ(r.dtype_of(Role::kGradOutput), kFloat8_e4m3fn);
  EXPECT_EQ(r.history_rows(), 1);
  EXPECT_EQ(Recipe::from_json(block_recipe(true).to_json()), block_recipe(true));
  EXPECT_EQ(r.to_string(),
            "Float8BlockScaling(fp8_format=E4M3, power_2_scale=true, amax_epsilon=0, "
            "x_block_scaling_dim=1, w_block_scaling_dim=2, grad_block_scaling_dim=1)");
  Recipe p2 = r;
  p2.use_power_2_scales = true;
  expect_error([&] { p2.validate(); }, "the block recipe rounds its scales to powers of 2");
  Recipe fmt = r;
  fmt.fp8_format = Format::kE4M3;
  expect_error([&] { fmt.validate(); }, "the block recipe casts every tensor to E4M3");
  Recipe cur;
  cur.kind = RecipeKind::kCurrent;
  cur.use_fp32_scales = true;
  expect_error([&] { cur.validate(); }, "applies to the block recipe only");
  Recipe eps = r;
  eps.amax_epsilon = 1e-4f;
  eps.validate();  // TE's QParams amax_epsilon applies to block scaling
}

}  // namespace
}  // namespace mantissa::fp8
