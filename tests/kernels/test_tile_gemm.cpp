// The tile products the fused attention runs on (src/kernels/cpu/gemm/tile_gemm.h): every level
// this CPU has (dispatching entry, AVX2, AVX-512) against a double-precision reference, over
// shapes that exercise full register blocks, row tails, partial last vectors, transposed A and
// accumulation. Levels the CPU lacks are skipped.
#include "kernels/cpu/gemm/tile_gemm.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "mantissa/core/cpu_features.h"

namespace mantissa::kernels {
namespace {

using TileFn = void (*)(int64_t, int64_t, int64_t, const float*, int64_t, int64_t, const float*,
                        int64_t, float*, int64_t, bool);

void dispatching(int64_t m, int64_t n, int64_t k, const float* a, int64_t a_rs, int64_t a_cs,
                 const float* b, int64_t ldb, float* c, int64_t ldc, bool accumulate) {
  tile_gemm(m, n, k, a, a_rs, a_cs, b, ldb, c, ldc, accumulate);
}

struct Level {
  std::string name;
  TileFn fn;
  bool available;
};

std::vector<Level> levels() {
  return {{"dispatch", dispatching, true},
          {"avx2", tile_gemm_f32_avx2, simd_level() >= SimdLevel::kAvx2},
          {"avx512", tile_gemm_f32_avx512, simd_level() >= SimdLevel::kAvx512}};
}

std::vector<float> random_values(size_t n, uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> d(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = d(gen);
  return v;
}

// C = [C +] A B with A read at (i * a_rs + p * a_cs); the padding columns of C (ldc > n) must
// come back untouched.
void check_shape(const Level& level, int64_t m, int64_t n, int64_t k, bool a_transposed,
                 bool accumulate) {
  const int64_t lda = a_transposed ? m + 3 : k + 2;  // padded: strides differ from the extents
  const int64_t a_rs = a_transposed ? 1 : lda, a_cs = a_transposed ? lda : 1;
  const int64_t ldb = n + 5, ldc = n + 7;
  const std::vector<float> a = random_values((a_transposed ? k : m) * lda, 1);
  const std::vector<float> b = random_values(k * ldb, 2);
  std::vector<float> c = random_values(m * ldc, 3);
  const std::vector<float> c0 = c;
  level.fn(m, n, k, a.data(), a_rs, a_cs, b.data(), ldb, c.data(), ldc, accumulate);
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < ldc; ++j) {
      const float got = c[i * ldc + j];
      if (j >= n) {
        ASSERT_EQ(got, c0[i * ldc + j]) << level.name << ": padding column " << j << " written";
        continue;
      }
      double want = accumulate ? c0[i * ldc + j] : 0.0, mag = std::fabs(want);
      for (int64_t p = 0; p < k; ++p) {
        const double t = double(a[i * a_rs + p * a_cs]) * b[p * ldb + j];
        want += t;
        mag += std::fabs(t);
      }
      // k roundings of fp32 products and sums, each at most half an ulp of the running magnitude.
      ASSERT_NEAR(got, want, 1e-6 * (k + 1) * (mag + 1e-3))
          << level.name << " m " << m << " n " << n << " k " << k << " at (" << i << ", " << j
          << ")" << (a_transposed ? " A transposed" : "") << (accumulate ? " accumulate" : "");
    }
  }
}

TEST(TileGemm, EveryLevelMatchesDoubleReference) {
  for (const Level& level : levels()) {
    if (!level.available) continue;
    // The attention's own shapes (32-row query blocks, 64-key tiles, head width 32 or 64) and
    // odd ones: row tails of every length, n below, at and just above a vector and a block.
    for (int64_t m : {1, 5, 6, 7, 12, 13, 32})
      for (int64_t n : {1, 7, 8, 9, 16, 17, 31, 32, 64, 65})
        for (int64_t k : {1, 3, 32})
          for (bool tr : {false, true})
            for (bool acc : {false, true}) check_shape(level, m, n, k, tr, acc);
  }
}

TEST(TileGemm, ZeroDepthWritesZerosOrKeepsC) {
  for (const Level& level : levels()) {
    if (!level.available) continue;
    std::vector<float> c(4 * 9, 2.5f);
    level.fn(4, 9, 0, nullptr, 1, 1, nullptr, 9, c.data(), 9, true);
    for (float v : c) ASSERT_EQ(v, 2.5f) << level.name;
    level.fn(4, 9, 0, nullptr, 1, 1, nullptr, 9, c.data(), 9, false);
    for (float v : c) ASSERT_EQ(v, 0.0f) << level.name;
  }
}

}  // namespace
}  // namespace mantissa::kernels
