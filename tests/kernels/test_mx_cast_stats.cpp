// The statistics the block-format casts count while they encode (kernels/cpu/mx/mx_stats.h)
// against a plain recount over the finished codes and scales, element by element in row-major
// block order: on edge-case blocks (all zero, inf, NaN, a subnormal amax, values at and above
// the element's max, a block cut by the row's end), at every SIMD level, float32 and bfloat16,
// each element format and rounding, the transposed cast, NVFP4 with and without tiles and
// stochastic rounding, and tensors long enough to be split into segments and over threads.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "kernels/cpu/mx/mx_cast.h"
#include "mantissa/core/bfloat16.h"
#include "support/simd_levels.h"

namespace mantissa::kernels::mx {
namespace {

using mantissa::testing::simd_levels_here;

// A rows x cols source of edge-case blocks (block length `block`; cols should leave a short
// last block), the rest normal values of varied magnitude.
std::vector<float> edge_source(int64_t rows, int64_t cols, int64_t block, float elem_max,
                               uint32_t seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(rows * cols));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c)
      x[r * cols + c] = nd(gen) * std::ldexp(1.0f, static_cast<int>(r % 7) * 3 - 9);
  auto block_at = [&](int64_t r, int64_t b) { return x.data() + r * cols + b * block; };
  const float inf = std::numeric_limits<float>::infinity();
  for (int64_t r = 0; r < rows; r += 4) {
    float* z = block_at(r, 0);  // all zero, one -0
    for (int64_t k = 0; k < block; ++k) z[k] = 0.0f;
    z[3] = -0.0f;
    block_at(r, 1)[5] = -inf;                                     // inf
    block_at(r, 2)[7] = std::numeric_limits<float>::quiet_NaN();  // NaN (a NaN scale)
    block_at(r, 2)[8] = 1e6f;     // the tensor's amax in a NaN block
    float* sub = block_at(r, 3);  // subnormal amax
    for (int64_t k = 0; k < block; ++k) sub[k] = (k % 3 == 0 ? -1.0f : 1.0f) * 1e-41f * (k + 1);
    float* at_max = block_at(r, 4);  // at and above the element's max
    at_max[0] = elem_max;
    at_max[1] = -elem_max;
    at_max[2] = elem_max * 1.25f;   // saturates under a floored scale
    at_max[3] = elem_max * 1e-12f;  // flushed in every format
  }
  return x;
}

std::vector<uint16_t> to_bf16(const std::vector<float>& x) {
  std::vector<uint16_t> b(x.size());
  for (size_t i = 0; i < x.size(); ++i) b[i] = float_to_bf16_bits(x[i]);
  return b;
}
std::vector<float> widened(const std::vector<uint16_t>& b) {
  std::vector<float> x(b.size());
  for (size_t i = 0; i < b.size(); ++i) x[i] = bf16_bits_to_float(b[i]);
  return x;
}

uint8_t code_at(const uint8_t* row_codes, int64_t c, bool fp4) {
  return fp4 ? static_cast<uint8_t>((row_codes[c / 2] >> ((c & 1) * 4)) & 15u) : row_codes[c];
}

// The statistics of a finished cast, counted one element at a time in row-major block order.
// mult(r, b): the multiplier block b of row r was cast with (NaN: a NaN scale, saturating
// nothing and not a candidate for `scale`).
template <typename Mult>
MxCastStats recount(const std::vector<float>& x, int64_t rows, int64_t cols, int64_t block,
                    const uint8_t* codes, int64_t code_row, bool fp4, float elem_max, Mult mult_of,
                    bool nvfp4_peak) {
  MxCastStats st;
  float best = -1.0f;
  float ymax = 0.0f;
  const uint8_t mag = fp4 ? 7u : 0x7Fu;
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c0 = 0; c0 < cols; c0 += block) {
      const float m = mult_of(r, c0 / block);
      const bool scaled = !std::isnan(m);
      float amax = 0.0f;
      for (int64_t c = c0; c < std::min(cols, c0 + block); ++c) {
        const float a = std::fabs(x[r * cols + c]);
        if (a > amax) amax = a;
        if (scaled && a * m > elem_max) ++st.saturated;
        if (a > 0.0f && (code_at(codes + r * code_row, c, fp4) & mag) == 0) ++st.flushed;
      }
      if (amax > best) {
        best = amax;
        if (scaled) st.scale = m;
      }
      if (nvfp4_peak) {
        const float y = amax * m;
        if (y > ymax) ymax = y;
      } else if (scaled) {
        st.peak = std::max(st.peak, static_cast<double>(amax) * m / elem_max);
      }
    }
  }
  if (nvfp4_peak) st.peak = static_cast<double>(ymax) / elem_max;
  st.amax = std::max(best, 0.0f);
  return st;
}

void expect_same(const MxCastStats& got, const MxCastStats& want, const std::string& what) {
  EXPECT_EQ(std::bit_cast<uint32_t>(got.amax), std::bit_cast<uint32_t>(want.amax)) << what;
  EXPECT_EQ(std::bit_cast<uint32_t>(got.scale), std::bit_cast<uint32_t>(want.scale)) << what;
  EXPECT_EQ(got.saturated, want.saturated) << what;
  EXPECT_EQ(got.flushed, want.flushed) << what;
  EXPECT_EQ(std::bit_cast<uint64_t>(got.peak), std::bit_cast<uint64_t>(want.peak)) << what;
}

float mx_mult(uint8_t s, E8m0Rounding rounding, float elem_max) {
  if (s == kE8m0Nan) return std::numeric_limits<float>::quiet_NaN();
  return rounding == E8m0Rounding::kFloor ? 1.0f / scalar::floor_divisor(s)
                                          : scalar::rceil_multiplier(s, 0.0f, elem_max);
}

// mx_quantize's statistics (and, with `transposed`, mx_quantize_columns's of x, which are those
// of x^T's rows) against the recount of its own codes and scales (with `transposed`, moved to
// x^T's row-wise layout).
void check_mx(int64_t rows, int64_t cols, bool transposed, uint32_t seed) {
  for (Element e : {Element::kE4m3, Element::kE5m2, Element::kE2m1}) {
    const ElementLimits lim = element_limits(e);
    const bool fp4 = e == Element::kE2m1;
    // The cast's rows (x's, or x^T's, whose blocks the column cast reads down x's columns) hold
    // the edge blocks.
    const int64_t qr = transposed ? cols : rows, qc = transposed ? rows : cols;
    const std::vector<float> edges = edge_source(qr, qc, kMxBlock, lim.max, seed);
    std::vector<float> f32(edges.size());
    for (int64_t r = 0; r < qr; ++r)
      for (int64_t c = 0; c < qc; ++c)
        (transposed ? f32[c * cols + r] : f32[r * qc + c]) = edges[r * qc + c];
    const std::vector<uint16_t> b16 = to_bf16(f32);
    for (DType dt : {kFloat32, kBFloat16}) {
      const void* src = dt == kFloat32 ? static_cast<const void*>(f32.data()) : b16.data();
      const std::vector<float> x = dt == kFloat32 ? f32 : widened(b16);
      std::vector<float> xq(x.size());
      for (int64_t r = 0; r < qr; ++r)
        for (int64_t c = 0; c < qc; ++c)
          xq[r * qc + c] = transposed ? x[c * cols + r] : x[r * qc + c];
      const int64_t nb = (qc + kMxBlock - 1) / kMxBlock, code_row = code_bytes(e, qc);
      for (E8m0Rounding rd : {E8m0Rounding::kFloor, E8m0Rounding::kRceil}) {
        for (SimdLevel level : simd_levels_here()) {
          std::vector<uint8_t> codes(static_cast<size_t>(qr * code_row));
          std::vector<uint8_t> scales(static_cast<size_t>(qr * nb));
          MxCastStats got;
          if (transposed) {
            // x's layout (rows x code_bytes(cols), scales [blocks of rows][cols]) into x^T's.
            const int64_t x_row = code_bytes(e, cols);
            std::vector<uint8_t> xc(static_cast<size_t>(rows * x_row));
            std::vector<uint8_t> xs(static_cast<size_t>(nb * cols));
            mx_quantize_columns(src, dt, rows, cols, e, rd, xc.data(), xs.data(), level, &got);
            for (int64_t c = 0; c < cols; ++c) {
              for (int64_t b = 0; b < nb; ++b) scales[c * nb + b] = xs[b * cols + c];
              for (int64_t r = 0; r < rows; ++r) {
                if (!fp4) {
                  codes[c * code_row + r] = xc[r * x_row + c];
                  continue;
                }
                const int code = (xc[r * x_row + c / 2] >> ((c & 1) * 4)) & 0xF;
                uint8_t& byte = codes[c * code_row + r / 2];
                byte = static_cast<uint8_t>((r & 1) ? (byte | code << 4) : code);
              }
            }
          } else {
            mx_quantize(src, dt, rows, cols, e, rd, codes.data(), scales.data(), level, &got);
          }
          const MxCastStats want = recount(
              xq, qr, qc, kMxBlock, codes.data(), code_row, fp4, lim.max,
              [&](int64_t r, int64_t b) { return mx_mult(scales[r * nb + b], rd, lim.max); },
              false);
          expect_same(got, want,
                      "element " + std::to_string(static_cast<int>(e)) + " dtype " +
                          std::string(dt.name()) + " rounding " +
                          std::to_string(static_cast<int>(rd)) + " level " +
                          std::to_string(static_cast<int>(level)) + " shape " +
                          std::to_string(rows) + "x" + std::to_string(cols));
          EXPECT_GT(want.saturated + want.flushed, 0);  // the edge blocks are counted
        }
      }
    }
  }
}

TEST(MxCastStats, FusedCountsEqualARecountOnEdgeBlocks) {
  check_mx(9, 5 * kMxBlock + 7, false, 1);  // one segment a row, a short last block
}

TEST(MxCastStats, FusedCountsEqualARecountOverSegmentsAndThreads) {
  check_mx(12, 8192 + 3 * kMxBlock + 5, false, 2);  // two segments a row, on threads
}

TEST(MxCastStats, ColumnCastCountsAsItsContiguousTranspose) {
  check_mx(5 * kMxBlock + 7, 21, true, 3);  // a short band, columns beyond the vectors
  check_mx(300, 400, true, 4);              // bands on threads
}

// A NaN block holding the tensor's amax keeps the multiplier of the last block before it that
// raised the maximum, in whichever segment or thread that block lies.
TEST(MxCastStats, ScaleOfANaNBlockHoldingTheAmaxIsTheEarlierRecord) {
  const int64_t rows = 64, cols = 2048;  // 131072 elements: counted on threads
  std::vector<float> x(static_cast<size_t>(rows * cols), 0.5f);
  x[0] = 3.0f;                         // the first record with a scale: multiplier for amax 3
  x[40 * cols + 100] = 1e6f;           // the amax, in a block ...
  x[40 * cols + 101] = std::nanf("");  // ... whose scale is NaN
  std::vector<uint8_t> codes(x.size()), scales(static_cast<size_t>(rows * cols / kMxBlock));
  MxCastStats st;
  mx_quantize(x.data(), kFloat32, rows, cols, Element::kE4m3, E8m0Rounding::kFloor, codes.data(),
              scales.data(), simd_level(), &st);
  EXPECT_EQ(st.amax, 1e6f);
  // 3's block: E8M0 2^(1 - 8) under E4M3's largest power of 2, so the multiplier 2^7.
  EXPECT_EQ(st.scale, 128.0f);
}

void check_nvfp4(int64_t rows, int64_t cols, uint32_t seed) {
  const std::vector<float> f32 = edge_source(rows, cols, kNvfp4Block, kE2m1Max, seed);
  const std::vector<uint16_t> b16 = to_bf16(f32);
  const int64_t nb = (cols + kNvfp4Block - 1) / kNvfp4Block, code_row = (cols + 1) / 2;
  for (DType dt : {kFloat32, kBFloat16}) {
    const void* src = dt == kFloat32 ? static_cast<const void*>(f32.data()) : b16.data();
    const std::vector<float> x = dt == kFloat32 ? f32 : widened(b16);
    for (bool tiles : {false, true}) {
      for (Fp4Rounding rd : {Fp4Rounding::kNearest, Fp4Rounding::kStochastic}) {
        for (SimdLevel level : simd_levels_here()) {
          Nvfp4Encoding enc;
          // A finite tensor scale: the tensor's own is NaN (it holds a NaN).
          enc.tensor_scale = 1e6f / (448.0f * 6.0f);
          enc.tiles_16x16 = tiles;
          enc.rounding = rd;
          enc.seed = 7;
          enc.offset = 3;
          std::vector<uint8_t> codes(static_cast<size_t>(rows * code_row));
          std::vector<uint8_t> scales(static_cast<size_t>(rows * nb));
          MxCastStats got;
          nvfp4_quantize(src, dt, rows, cols, enc, codes.data(), scales.data(), level, &got);
          // Counting changes no byte of the cast.
          std::vector<uint8_t> plain_codes(codes.size()), plain_scales(scales.size());
          nvfp4_quantize(src, dt, rows, cols, enc, plain_codes.data(), plain_scales.data(), level);
          EXPECT_EQ(codes, plain_codes);
          EXPECT_EQ(scales, plain_scales);
          const float inv = 1.0f / enc.tensor_scale;
          MxCastStats want = recount(
              x, rows, cols, kNvfp4Block, codes.data(), code_row, true, kE2m1Max,
              [&](int64_t r, int64_t b) { return inv / scalar::e4m3_value(scales[r * nb + b]); },
              true);
          want.scale = inv;
          expect_same(got, want,
                      std::string("nvfp4 dtype ") + std::string(dt.name()) + " tiles " +
                          std::to_string(tiles) + " rounding " +
                          std::to_string(static_cast<int>(rd)) + " level " +
                          std::to_string(static_cast<int>(level)));
          EXPECT_GT(want.flushed, 0);
        }
      }
    }
  }
}

TEST(MxCastStats, Nvfp4FusedCountsEqualARecountOnEdgeBlocks) {
  check_nvfp4(18, 6 * kNvfp4Block + 5, 5);
  check_nvfp4(20, 8192 + 2 * kNvfp4Block + 3, 6);  // two segments a row, on threads
}

}  // namespace
}  // namespace mantissa::kernels::mx
