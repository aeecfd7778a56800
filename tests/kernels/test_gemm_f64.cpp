// The float64 GEMM (kernels/cpu/gemm/gemm_f64.h): the AVX2+FMA kernel and the blocked reference
// it falls back to on CPUs without AVX2 (forced here through gemm_f64_reference_forced), both
// against long-double sums written from the definition, on shapes around the 6x8 micro-tile and
// the 72 x 256 x 256 cache blocks, row-major and transposed operands with padding (NaN, so a
// stray read poisons the result), batches with broadcast entries, a strided C and accumulation.
// Also: bit-identical with 1 and 2 threads, and matmul on float64 tensors routes here.
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "kernels/cpu/gemm/gemm_f64.h"
#include "mantissa/core/cpu_features.h"
#include "mantissa/mantissa.h"
#include "support/test_util.h"

namespace mantissa {
namespace {

using kernels::GemmF64Args;

// Runs the body with the reference path forced (or not), restoring the hook afterwards.
struct ForceReference {
  explicit ForceReference(bool on) : before(kernels::gemm_f64_reference_forced().load()) {
    kernels::gemm_f64_reference_forced() = on;
  }
  ~ForceReference() { kernels::gemm_f64_reference_forced() = before; }
  bool before;
};

// The paths this CPU can run: the reference always, the AVX2 kernel at SIMD level avx2 or above.
std::vector<bool> paths() {
  std::vector<bool> forced{true};
  if (simd_level() >= SimdLevel::kAvx2) forced.push_back(false);
  return forced;
}

// batch operands of rows x cols, each row-major (ld = cols + pad) or transposed (ld = rows + pad),
// laid out one after another; entry i is at offsets[i] (entries past `distinct` repeat the first,
// as broadcast batch dims do). Padding is NaN; values uniform in [-1, 1).
struct Operand {
  std::vector<double> data;
  kernels::StridedMatrix m{};
  std::vector<int64_t> offsets;
  double at(int64_t i, int64_t r, int64_t c) const {
    return data[offsets[i] + r * m.row_stride + c * m.col_stride];
  }
};

Operand make(int64_t batch, int64_t distinct, int64_t rows, int64_t cols, bool transposed,
             int64_t pad, std::mt19937& rng) {
  Operand o;
  const int64_t inner = transposed ? rows : cols, outer = transposed ? cols : rows;
  const int64_t ld = inner + pad, size = outer * ld;
  o.data.assign(distinct * size, std::numeric_limits<double>::quiet_NaN());
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  for (int64_t d = 0; d < distinct; ++d)
    for (int64_t r = 0; r < outer; ++r)
      for (int64_t j = 0; j < inner; ++j) o.data[d * size + r * ld + j] = u(rng);
  o.m = {o.data.data(), transposed ? 1 : ld, transposed ? ld : 1};
  for (int64_t i = 0; i < batch; ++i) o.offsets.push_back(i < distinct ? i * size : 0);
  return o;
}

struct Case {
  int64_t batch, M, N, K;
  bool at, bt;  // A, B transposed
  int64_t ldc_pad;
  bool accumulate;
  int64_t distinct_b;  // B entries before the rest repeat the first (broadcast)
};

// C (batch x M x ldc, ldc = N + ldc_pad; padding NaN, untouched) against long-double sums:
// |c - want| within 1e-14 of sum_k |a b| (+ |c0| when accumulating): K <= 600 terms of relative
// error 2^-53 each.
void check(const Case& cs, std::mt19937& rng) {
  SCOPED_TRACE(::testing::Message()
               << cs.batch << "x" << cs.M << "x" << cs.N << "x" << cs.K << " at " << cs.at << " bt "
               << cs.bt << " ldc+" << cs.ldc_pad << " acc " << cs.accumulate);
  const Operand a = make(cs.batch, cs.batch, cs.M, cs.K, cs.at, 3, rng);
  const Operand b = make(cs.batch, cs.distinct_b, cs.K, cs.N, cs.bt, 5, rng);
  const int64_t ldc = cs.N + cs.ldc_pad;
  std::vector<double> c0(cs.batch * cs.M * ldc);
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  for (int64_t i = 0; i < static_cast<int64_t>(c0.size()); ++i)
    c0[i] = i % ldc < cs.N ? u(rng) : std::numeric_limits<double>::quiet_NaN();
  std::vector<std::vector<double>> results;
  for (bool forced : paths()) {
    SCOPED_TRACE(forced ? "reference" : "avx2");
    ForceReference force(forced);
    std::vector<double> c = c0;
    GemmF64Args g;
    g.batch = cs.batch;
    g.M = cs.M;
    g.N = cs.N;
    g.K = cs.K;
    g.a = a.m;
    g.a_offsets = a.offsets.data();
    g.b = b.m;
    g.b_offsets = b.offsets.data();
    g.c = c.data();
    g.ldc = ldc;
    g.accumulate = cs.accumulate;
    kernels::gemm_f64(g);
    for (int64_t i = 0; i < cs.batch; ++i)
      for (int64_t r = 0; r < cs.M; ++r) {
        for (int64_t j = 0; j < ldc; ++j) {
          const int64_t at = (i * cs.M + r) * ldc + j;
          if (j >= cs.N) {
            ASSERT_TRUE(std::isnan(c[at])) << "padding of C written at " << r << ", " << j;
            continue;
          }
          long double want = cs.accumulate ? c0[at] : 0.0L,
                      mag = cs.accumulate ? std::fabs(c0[at]) : 0.0;
          for (int64_t k = 0; k < cs.K; ++k) {
            const long double p = static_cast<long double>(a.at(i, r, k)) * b.at(i, k, j);
            want += p;
            mag += std::fabs(static_cast<double>(p));
          }
          ASSERT_NEAR(c[at], static_cast<double>(want), 1e-14 * mag + 1e-300)
              << "entry " << i << " at " << r << ", " << j;
        }
      }
    results.push_back(c);
  }
  // The two paths agree to a relative 1e-12 where the sums are not cancelled.
  if (results.size() == 2)
    for (size_t i = 0; i < results[0].size(); ++i)
      if (!std::isnan(results[0][i]))
        ASSERT_NEAR(results[0][i], results[1][i], 1e-12 * (1.0 + std::fabs(results[0][i])));
}

TEST(GemmF64, OddShapesAndEdgeTilesMatchLongDouble) {
  std::mt19937 rng(42);
  const int64_t shapes[][3] = {{1, 1, 1},   {7, 13, 5},   {65, 33, 129}, {6, 8, 256},
                               {5, 7, 257}, {73, 9, 300}, {13, 263, 17}, {150, 70, 520}};
  for (const auto& s : shapes)
    for (int t = 0; t < 4; ++t)
      check({1, s[0], s[1], s[2], (t & 1) != 0, (t & 2) != 0, 0, false, 1}, rng);
}

TEST(GemmF64, BatchBroadcastStridedCAndAccumulate) {
  std::mt19937 rng(7);
  check({3, 7, 13, 5, false, false, 4, false, 1}, rng);
  check({4, 20, 17, 33, true, false, 1, true, 2}, rng);
  check({2, 65, 33, 129, false, true, 3, true, 2}, rng);
  check({5, 1, 9, 300, true, true, 0, true, 5}, rng);
}

// Every C element is one fixed sequence of FMAs over k whichever thread computes it.
TEST(GemmF64, BitIdenticalAcrossThreadCounts) {
  std::mt19937 rng(3);
  const Operand a = make(2, 2, 150, 300, false, 0, rng);
  const Operand b = make(2, 2, 300, 270, true, 0, rng);
  std::vector<std::vector<double>> out;
  const int before = omp_get_max_threads();
  for (int threads : {1, 2, 2}) {
    omp_set_num_threads(threads);
    std::vector<double> c(2 * 150 * 270);
    GemmF64Args g;
    g.batch = 2;
    g.M = 150;
    g.N = 270;
    g.K = 300;
    g.a = a.m;
    g.a_offsets = a.offsets.data();
    g.b = b.m;
    g.b_offsets = b.offsets.data();
    g.c = c.data();
    kernels::gemm_f64(g);
    out.push_back(c);
  }
  omp_set_num_threads(before);
  EXPECT_EQ(out[0], out[1]);
  EXPECT_EQ(out[1], out[2]);
}

// matmul on float64 tensors (batched, broadcast, a transposed operand, bias) takes gemm_f64 on
// either path and matches the long-double sums.
TEST(GemmF64, MatmulAndLinearOnFloat64) {
  for (bool forced : paths()) {
    SCOPED_TRACE(forced ? "reference" : "avx2");
    ForceReference force(forced);
    const Tensor a = testing::rnd({3, 37, 70}, kFloat64, 1);
    const Tensor b = testing::rnd({70, 41}, kFloat64, 2).t().contiguous().t();
    const Tensor y = matmul(a, b);
    const std::vector<double> av = testing::vals(a), bv = testing::vals(b.contiguous()),
                              yv = testing::vals(y);
    for (int64_t i = 0; i < 3; ++i)
      for (int64_t r = 0; r < 37; ++r)
        for (int64_t j = 0; j < 41; ++j) {
          long double want = 0;
          for (int64_t k = 0; k < 70; ++k)
            want += static_cast<long double>(av[(i * 37 + r) * 70 + k]) * bv[k * 41 + j];
          ASSERT_NEAR(yv[(i * 37 + r) * 41 + j], static_cast<double>(want), 1e-13);
        }
  }
}

}  // namespace
}  // namespace mantissa
