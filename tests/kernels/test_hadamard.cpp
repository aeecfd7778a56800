// The 16-point random Hadamard transform of NVFP4's weight-gradient operands
// (kernels/cpu/mx/hadamard.h): its matrix is TransformerEngine's diag(s) @ H / 4 with TE's sign
// vector (written out here from transformer_engine/pytorch/custom_recipes/quantization_nvfp4.py,
// get_wgrad_sign_vector, independently of the kernel's table) and the Sylvester H of TE's
// documentation (docs/features/low_precision_training/nvfp4/nvfp4.rst); it is orthogonal; it
// matches a float64 reference on random data; the fused transpose equals transpose + pad +
// transform bit for bit, for float32 and bfloat16 sources and rows cut at a block's edge; every
// SIMD level gives the baseline's bits; the amax it reports is the largest it wrote; the NVFP4
// cast of the transform made without storing it gives the stored transform's bytes, and the
// scalar body's where a block's factor overflows to infinity; and a product of two transformed
// operands equals the product of the originals.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <type_traits>
#include <vector>

#include "kernels/cpu/mx/hadamard.h"
#include "mantissa/core/bfloat16.h"
#include "mantissa/core/cpu_features.h"
#include "mantissa/core/error.h"

namespace mantissa::kernels::mx {
namespace {

// TransformerEngine's get_wgrad_sign_vector, copied by hand from its source.
constexpr double kTeSigns[16] = {1, 1, 1, -1, 1, -1, -1, -1, -1, -1, -1, 1, -1, 1, -1, -1};

// Rows 0..3 of the 16 x 16 Hadamard matrix as TE's NVFP4 page prints it.
constexpr int kTeHadamardRows[4][16] = {
    {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1},
    {1, -1, 1, -1, 1, -1, 1, -1, 1, -1, 1, -1, 1, -1, 1, -1},
    {1, 1, -1, -1, 1, 1, -1, -1, 1, 1, -1, -1, 1, 1, -1, -1},
    {1, -1, -1, 1, 1, -1, -1, 1, 1, -1, -1, 1, 1, -1, -1, 1},
};

double hadamard(int i, int j) { return __builtin_popcount(i & j) % 2 == 0 ? 1.0 : -1.0; }

// y = b @ (diag(s) H) / 4 in float64.
std::vector<double> reference(const std::vector<float>& x) {
  std::vector<double> y(x.size(), 0.0);
  for (size_t b = 0; b < x.size(); b += 16)
    for (int j = 0; j < 16; ++j) {
      double acc = 0.0;
      for (int i = 0; i < 16; ++i) acc += kTeSigns[i] * x[b + i] * hadamard(i, j);
      y[b + j] = acc / 4.0;
    }
  return y;
}

TEST(Hadamard, SylvesterMatrixIsTheOneTransformerEngineDocuments) {
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 16; ++j) EXPECT_EQ(hadamard(i, j), kTeHadamardRows[i][j]) << i << "," << j;
  for (int i = 0; i < 16; ++i) EXPECT_EQ(kRhtSigns[i], kTeSigns[i]) << i;
}

TEST(Hadamard, MatrixIsSignsTimesHadamardOverFourAndOrthogonal) {
  // Row i of the transform's matrix is the transform of the unit vector e_i.
  std::vector<float> m(16 * 16, 0.0f);
  for (int i = 0; i < 16; ++i) m[i * 16 + i] = 1.0f;
  rht_blocks(m.data(), static_cast<int64_t>(m.size()));
  for (int i = 0; i < 16; ++i)
    for (int j = 0; j < 16; ++j)
      EXPECT_EQ(m[i * 16 + j], static_cast<float>(kTeSigns[i] * hadamard(i, j) / 4.0))
          << i << "," << j;
  // M M^T = I: every entry is +-1/4, so the sums are exact.
  for (int i = 0; i < 16; ++i)
    for (int j = 0; j < 16; ++j) {
      double dot = 0.0;
      for (int k = 0; k < 16; ++k) dot += double(m[i * 16 + k]) * m[j * 16 + k];
      EXPECT_EQ(dot, i == j ? 1.0 : 0.0) << i << "," << j;
    }
}

TEST(Hadamard, MatchesFloat64ReferenceOnRandomData) {
  std::mt19937 rng(7);
  std::normal_distribution<float> nd(0.0f, 3.0f);
  std::vector<float> x(16 * 37);
  for (float& v : x) v = nd(rng);
  const std::vector<double> want = reference(x);
  std::vector<float> y = x;
  rht_blocks(y.data(), static_cast<int64_t>(y.size()));
  double norm_x = 0.0, norm_y = 0.0;
  for (size_t i = 0; i < x.size(); ++i) {
    // Four float additions of values below 16 * max|x|: a few ulps of the block's scale.
    EXPECT_NEAR(y[i], want[i], 4e-6 * (1.0 + std::fabs(want[i]))) << i;
    norm_x += double(x[i]) * x[i];
    norm_y += double(y[i]) * y[i];
  }
  EXPECT_NEAR(norm_y, norm_x, 1e-5 * norm_x);  // orthogonal: the norm is kept
}

template <typename T>
void check_transpose(int64_t rows, int64_t cols) {
  std::mt19937 rng(static_cast<uint32_t>(rows * 131 + cols));
  std::uniform_real_distribution<float> ud(-5.0f, 5.0f);
  std::vector<T> src(rows * cols);
  for (T& v : src) v = T(ud(rng));
  const int64_t padded = rht_padded(rows);
  // Transpose, pad with zeros, transform: what the fused pass must equal bit for bit.
  std::vector<float> want(cols * padded, 0.0f);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) want[c * padded + r] = static_cast<float>(src[r * cols + c]);
  rht_blocks(want.data(), static_cast<int64_t>(want.size()));
  std::vector<float> got(cols * padded, -1.0f);
  rht_transpose(src.data(), std::is_same_v<T, float> ? kFloat32 : kBFloat16, rows, cols,
                got.data());
  for (size_t i = 0; i < want.size(); ++i)
    ASSERT_EQ(std::bit_cast<uint32_t>(got[i]), std::bit_cast<uint32_t>(want[i]))
        << rows << "x" << cols << " at " << i;
}

TEST(Hadamard, FusedTransposeEqualsTransposePadTransform) {
  check_transpose<float>(16, 16);
  check_transpose<float>(37, 5);     // rows cut inside a block, fewer columns than a strip
  check_transpose<float>(64, 300);   // columns cut inside a strip
  check_transpose<float>(257, 259);  // long enough to go over threads
  check_transpose<BFloat16>(48, 33);
  check_transpose<BFloat16>(3, 70);
}

// Every SIMD level this CPU has runs the baseline's bits (the products are by +-1 and 1/4 only).
TEST(Hadamard, EveryLevelGivesTheBaselineBits) {
  const int64_t rows = 53, cols = 77, padded = rht_padded(rows);
  std::mt19937 rng(5);
  std::normal_distribution<float> nd(0.0f, 7.0f);
  std::vector<float> src(rows * cols);
  for (float& v : src) v = nd(rng);
  std::vector<BFloat16> src16(src.begin(), src.end());
  for (bool bf16 : {false, true}) {
    const void* p = bf16 ? static_cast<const void*>(src16.data()) : src.data();
    const DType d = bf16 ? kBFloat16 : kFloat32;
    std::vector<float> want(cols * padded);
    rht_transpose(p, d, rows, cols, want.data(), SimdLevel::kScalar);
    for (SimdLevel level : {SimdLevel::kAvx2, SimdLevel::kAvx512}) {
      if (level > simd_level()) continue;
      std::vector<float> got(cols * padded, -1.0f);
      rht_transpose(p, d, rows, cols, got.data(), level);
      for (size_t i = 0; i < want.size(); ++i)
        ASSERT_EQ(std::bit_cast<uint32_t>(got[i]), std::bit_cast<uint32_t>(want[i]))
            << simd_level_name(level) << (bf16 ? " bf16 " : " f32 ") << i;
      std::vector<float> blocks = want, base = want;
      rht_blocks(base.data(), static_cast<int64_t>(base.size()), SimdLevel::kScalar);
      rht_blocks(blocks.data(), static_cast<int64_t>(blocks.size()), level);
      for (size_t i = 0; i < base.size(); ++i)
        ASSERT_EQ(std::bit_cast<uint32_t>(blocks[i]), std::bit_cast<uint32_t>(base[i])) << i;
    }
  }
}

// The amax rht_transpose reports is the largest |value| it wrote, or NaN where it wrote one.
TEST(Hadamard, TransposeReportsTheLargestMagnitudeItWrote) {
  const int64_t rows = 45, cols = 70, padded = rht_padded(rows);
  std::mt19937 rng(11);
  std::normal_distribution<float> nd(0.0f, 2.0f);
  std::vector<float> src(rows * cols);
  for (float& v : src) v = nd(rng);
  src[30 * cols + 69] = -1e4f;  // in a cut tile
  for (bool nan : {false, true}) {
    if (nan) src[3 * cols + 5] = std::numeric_limits<float>::quiet_NaN();
    for (SimdLevel level : {SimdLevel::kScalar, SimdLevel::kAvx2, SimdLevel::kAvx512}) {
      if (level > simd_level()) continue;
      std::vector<float> out(cols * padded);
      float amax = -1.0f;
      rht_transpose(src.data(), kFloat32, rows, cols, out.data(), level, &amax);
      float want = 0.0f;
      bool any_nan = false;
      for (float v : out) {
        any_nan |= v != v;
        want = std::max(want, std::fabs(v));
      }
      ASSERT_EQ(any_nan, nan);
      if (nan)
        EXPECT_TRUE(std::isnan(amax)) << simd_level_name(level);
      else
        EXPECT_EQ(std::bit_cast<uint32_t>(amax), std::bit_cast<uint32_t>(want))
            << simd_level_name(level);
    }
  }
}

// A NaN keeps its sign through the transform (its sign is multiplied in, as a product keeps a
// NaN's; the butterflies pass it on), in a row of either sign, at every level: the E2M1 code of
// a NaN carries its sign. Every output of its block is that NaN, quieted.
TEST(Hadamard, NaNKeepsItsSignInEveryRowAtEveryLevel) {
  const int64_t rows = 16, cols = 24;
  for (int64_t r = 0; r < rows; ++r) {
    for (const uint32_t nan : {0x7FC00001u, 0xFFC00002u, 0x7F800003u}) {  // a signalling one too
      std::vector<float> src(rows * cols, 1.5f);
      src[r * cols + 9] = std::bit_cast<float>(nan);
      for (SimdLevel level : {SimdLevel::kScalar, SimdLevel::kAvx2, SimdLevel::kAvx512}) {
        if (level > simd_level()) continue;
        std::vector<float> out(cols * rows);
        rht_transpose(src.data(), kFloat32, rows, cols, out.data(), level, nullptr);
        for (int64_t i = 0; i < rows; ++i)
          ASSERT_EQ(std::bit_cast<uint32_t>(out[9 * rows + i]), nan | 0x00400000u)
              << "row " << r << " output " << i << " " << simd_level_name(level);
      }
    }
  }
}

// rht_transpose_amax and rht_transpose_nvfp4 give the amax and the NVFP4 bytes of the stored
// transform's cast, rounded to nearest and stochastically, for float32 and bfloat16 sources
// cut inside a block and a strip, with a NaN, at every level.
void check_unstored_cast(int64_t rows, int64_t cols, bool nan) {
  std::mt19937 rng(static_cast<uint32_t>(rows * 7 + cols));
  std::normal_distribution<float> nd(0.0f, 3.0f);
  std::vector<float> src(rows * cols);
  for (float& v : src) v = nd(rng);
  src[(rows / 2) * cols + cols / 3] = 900.0f;
  if (nan) src[(rows - 1) * cols + cols - 1] = std::numeric_limits<float>::quiet_NaN();
  std::vector<BFloat16> src16(src.begin(), src.end());
  const int64_t padded = rht_padded(rows), code_row = padded / 2, scale_row = padded / 16;
  for (bool bf16 : {false, true}) {
    const void* p = bf16 ? static_cast<const void*>(src16.data()) : src.data();
    const DType d = bf16 ? kBFloat16 : kFloat32;
    for (SimdLevel level : {SimdLevel::kScalar, SimdLevel::kAvx2, SimdLevel::kAvx512}) {
      if (level > simd_level()) continue;
      std::vector<float> t(cols * padded);
      float amax = 0.0f;
      rht_transpose(p, d, rows, cols, t.data(), level, &amax);
      const float unstored = rht_transpose_amax(p, d, rows, cols, level);
      ASSERT_EQ(std::bit_cast<uint32_t>(unstored), std::bit_cast<uint32_t>(amax))
          << simd_level_name(level) << (bf16 ? " bf16" : " f32");
      for (Fp4Rounding rd : {Fp4Rounding::kNearest, Fp4Rounding::kStochastic}) {
        Nvfp4Encoding e;
        // A finite scale where the transform holds a NaN (its own would be NaN).
        e.tensor_scale = nan ? 1.0f : nvfp4_tensor_scale_of(amax);
        e.rounding = rd;
        e.seed = 11;
        e.offset = 4;
        std::vector<uint8_t> want_codes(cols * code_row), want_scales(cols * scale_row);
        nvfp4_quantize(t.data(), kFloat32, cols, padded, e, want_codes.data(), want_scales.data(),
                       level);
        std::vector<uint8_t> codes(want_codes.size(), 0xAB), scales(want_scales.size(), 0xAB);
        rht_transpose_nvfp4(p, d, rows, cols, e, codes.data(), scales.data(), level);
        EXPECT_EQ(codes, want_codes) << simd_level_name(level) << " rounding "
                                     << static_cast<int>(rd) << (bf16 ? " bf16" : " f32");
        EXPECT_EQ(scales, want_scales) << simd_level_name(level) << " rounding "
                                       << static_cast<int>(rd) << (bf16 ? " bf16" : " f32");
      }
    }
  }
}

TEST(Hadamard, CastOfTheUnstoredTransformEqualsTheStoredOnes) {
  check_unstored_cast(37, 21, false);    // rows cut inside a block, columns inside a strip
  check_unstored_cast(300, 40, false);   // runs of 256 rows and a cut one
  check_unstored_cast(64, 300, true);    // a NaN; on threads
  check_unstored_cast(520, 130, false);  // long enough to go over threads
  check_unstored_cast(128, 24, true);    // whole blocks and 8-column strips; a NaN in a tile
}

// Under a tiny tensor scale, a block whose amax is 0 or subnormal has an infinite factor
// ((1 / tensor scale) / value(scale code) overflows), and its zeros times that factor are NaN,
// whose E2M1 code is 3. The cast from the transform's registers sends such an 8-column group to
// the scalar body; its codes and scales are the scalar level's cast of the stored transform.
TEST(Hadamard, CastOfBlocksWithAnInfiniteFactorIsTheScalarBodys) {
  const int64_t rows = 64, cols = 24, padded = rht_padded(rows);
  const int64_t code_row = padded / 2, scale_row = padded / 16;
  std::mt19937 rng(17);
  std::normal_distribution<float> nd(0.0f, 3.0f);
  std::vector<float> src(rows * cols);
  for (float& v : src) v = nd(rng);
  for (int64_t r = 16; r < 32; ++r) {
    for (int64_t c : {0, 1, 2}) src[r * cols + c] = 0.0f;  // beside finite factors in the group
    for (int64_t c = 8; c < 16; ++c) src[r * cols + c] = 0.0f;  // a whole group of 8
  }
  for (int64_t r = 32; r < 48; ++r) src[r * cols + 5] = (r % 2 ? 1.0f : -1.0f) * 1e-40f;
  for (int64_t r = 48; r < 64; ++r)
    for (int64_t c = 16; c < 24; ++c) src[r * cols + c] = 0.0f;
  std::vector<BFloat16> src16(src.begin(), src.end());
  int checked = 0;
  for (bool bf16 : {false, true}) {
    const void* p = bf16 ? static_cast<const void*>(src16.data()) : src.data();
    const DType d = bf16 ? kBFloat16 : kFloat32;
    std::vector<float> t(cols * padded);
    rht_transpose(p, d, rows, cols, t.data(), SimdLevel::kScalar);
    // 1e-38: the zero and subnormal blocks' factors overflow; 2e-39: 1 / scale itself does.
    for (float ts : {1e-38f, 2e-39f}) {
      for (Fp4Rounding rd : {Fp4Rounding::kNearest, Fp4Rounding::kStochastic}) {
        Nvfp4Encoding e;
        e.tensor_scale = ts;
        e.rounding = rd;
        e.seed = 5;
        e.offset = 2;
        std::vector<uint8_t> want_codes(cols * code_row), want_scales(cols * scale_row);
        nvfp4_quantize(t.data(), kFloat32, cols, padded, e, want_codes.data(), want_scales.data(),
                       SimdLevel::kScalar);
        if (rd == Fp4Rounding::kNearest) {
          // Column 0's block of rows 16-31 is all zero: NaN products, magnitude code 3 (the
          // sign is the NaN's).
          for (int64_t i = 0; i < 8; ++i) ASSERT_EQ(want_codes[16 / 2 + i] & 0x77, 0x33) << i;
        }
        for (SimdLevel level : {SimdLevel::kAvx2, SimdLevel::kAvx512}) {
          if (level > simd_level()) continue;
          std::vector<uint8_t> codes(want_codes.size(), 0xAB), scales(want_scales.size(), 0xAB);
          rht_transpose_nvfp4(p, d, rows, cols, e, codes.data(), scales.data(), level);
          std::ostringstream what;
          what << simd_level_name(level) << " scale " << ts << " rounding " << static_cast<int>(rd)
               << (bf16 ? " bf16" : " f32");
          EXPECT_EQ(codes, want_codes) << what.str();
          EXPECT_EQ(scales, want_scales) << what.str();
          ++checked;
        }
      }
    }
  }
  if (checked == 0) GTEST_SKIP() << "no AVX2 on this CPU";
}

TEST(Hadamard, ProductOfTransformedOperandsIsUnchanged) {
  // dW = dY^T X over K = rows: RHT on both transposed operands along K keeps the product.
  const int64_t rows = 50, p = 7, q = 9, padded = rht_padded(rows);
  std::mt19937 rng(3);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> a(rows * p), b(rows * q);
  for (float& v : a) v = nd(rng);
  for (float& v : b) v = nd(rng);
  std::vector<float> at(p * padded), bt(q * padded);
  rht_transpose(a.data(), kFloat32, rows, p, at.data());
  rht_transpose(b.data(), kFloat32, rows, q, bt.data());
  for (int64_t i = 0; i < p; ++i)
    for (int64_t j = 0; j < q; ++j) {
      double want = 0.0, got = 0.0;
      for (int64_t m = 0; m < rows; ++m) want += double(a[m * p + i]) * b[m * q + j];
      for (int64_t m = 0; m < padded; ++m) got += double(at[i * padded + m]) * bt[j * padded + m];
      EXPECT_NEAR(got, want, 1e-5 * (1.0 + std::fabs(want))) << i << "," << j;
    }
}

TEST(Hadamard, RefusesPartialBlocksAndOtherDtypes) {
  std::vector<float> x(20, 1.0f);
  EXPECT_THROW(rht_blocks(x.data(), 20), Error);
  std::vector<double> d(16, 1.0);
  std::vector<float> out(16);
  EXPECT_THROW(rht_transpose(d.data(), kFloat64, 16, 1, out.data()), Error);
}

}  // namespace
}  // namespace mantissa::kernels::mx
