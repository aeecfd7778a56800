// Vector math (src/kernels/cpu/elementwise/vec_math.h): every level this CPU runs is swept densely
// against double-precision libm and measured in ulps of the float result; special values are
// checked exactly. Levels the CPU lacks are skipped.
#include "kernels/cpu/elementwise/vec_math.h"

#ifdef _OPENMP
#include <omp.h>
#endif

#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <string>
#include <vector>

#include "mantissa/mantissa.h"

namespace mantissa::kernels::vm {
namespace {

using Fn = void (*)(const float*, float*, int64_t);
constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

// Distance of y from the exact value r in units of the float ulp at r (2^-149 at the bottom).
double ulp_error(float y, double r) {
  if (std::isnan(r)) return std::isnan(y) ? 0.0 : 1e30;
  if (std::isnan(y)) return 1e30;
  const double ar = std::fabs(r);
  if (ar > std::numeric_limits<float>::max()) {
    // Correct rounding gives inf above FLT_MAX + half an ulp; accept FLT_MAX or inf near it.
    if (std::isinf(y) && (y > 0) == (r > 0)) return 0.0;
    const double top = std::ldexp(1.0, 104);  // ulp of FLT_MAX
    return std::fabs(y - r) / top;
  }
  if (std::isinf(y)) return 1e30;
  int e = 0;
  std::frexp(ar, &e);  // ar = m * 2^e, m in [0.5, 1)
  const double ulp = std::ldexp(1.0, std::max(e - 24, -149));
  return std::fabs(static_cast<double>(y) - r) / ulp;
}

std::vector<float> linspace(float a, float b, int n) {
  std::vector<float> v(n);
  for (int i = 0; i < n; ++i)
    v[i] = static_cast<float>(a + (static_cast<double>(b) - a) * i / (n - 1));
  return v;
}

// Positive floats from the smallest subnormal to FLT_MAX, evenly spaced in bit patterns.
std::vector<float> bit_sweep(int n, bool both_signs) {
  std::vector<float> v;
  for (int i = 0; i < n; ++i) {
    const uint32_t bits = 1u + static_cast<uint32_t>((0x7f7fffffull - 1) * i / (n - 1));
    const float f = std::bit_cast<float>(bits);
    v.push_back(f);
    if (both_signs) v.push_back(-f);
  }
  return v;
}

struct Sweep {
  double max_ulp = 0;
  float worst_x = 0;
};

Sweep sweep(Fn fn, double (*ref)(double), const std::vector<float>& xs) {
  std::vector<float> y(xs.size());
  fn(xs.data(), y.data(), static_cast<int64_t>(xs.size()));
  Sweep s;
  for (size_t i = 0; i < xs.size(); ++i) {
    const double e = ulp_error(y[i], ref(xs[i]));
    if (e > s.max_ulp) {
      s.max_ulp = e;
      s.worst_x = xs[i];
    }
  }
  return s;
}

void expect_sweep(Fn fn, double (*ref)(double), const std::vector<float>& xs, const char* what) {
  const Sweep s = sweep(fn, ref, xs);
  if (std::getenv("VECMATH_VERBOSE"))
    std::printf("%s: %.3f ulp at %g\n", what, s.max_ulp, s.worst_x);
  EXPECT_LE(s.max_ulp, 2.0) << what << ": worst at x = " << s.worst_x;
}

float call(Fn fn, float x) {
  float y = 0;
  fn(&x, &y, 1);
  return y;
}

bool same_bits(float a, float b) {
  return std::bit_cast<uint32_t>(a) == std::bit_cast<uint32_t>(b) ||
         (std::isnan(a) && std::isnan(b));
}

double ref_exp(double x) { return std::exp(x); }
double ref_log(double x) { return std::log(x); }
double ref_tanh(double x) { return std::tanh(x); }
double ref_sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }
double ref_erf(double x) { return std::erf(x); }

class VecMath : public ::testing::TestWithParam<SimdLevel> {
 protected:
  void SetUp() override {
    t_ = vec_math_table(GetParam());
    if (t_ == nullptr) GTEST_SKIP() << "CPU lacks " << simd_level_name(GetParam());
  }
  const VecMathTable* t_ = nullptr;
};

TEST_P(VecMath, ExpSweepAndSpecials) {
  expect_sweep(t_->exp, ref_exp, linspace(-104.f, 89.f, 1 << 20), "exp dense");
  expect_sweep(t_->exp, ref_exp, bit_sweep(1 << 17, true), "exp bits");
  EXPECT_EQ(call(t_->exp, 0.f), 1.f);
  EXPECT_EQ(call(t_->exp, -0.f), 1.f);
  EXPECT_EQ(call(t_->exp, kInf), kInf);
  EXPECT_EQ(call(t_->exp, -kInf), 0.f);
  EXPECT_TRUE(std::isnan(call(t_->exp, kNaN)));
  EXPECT_EQ(call(t_->exp, 89.f), kInf);                // overflow
  EXPECT_EQ(call(t_->exp, 88.72f), std::exp(88.72f));  // largest finite region
  EXPECT_EQ(call(t_->exp, -104.f), 0.f);               // below half the least subnormal
  EXPECT_GT(call(t_->exp, -100.f), 0.f);               // subnormal result, not flushed
  EXPECT_LT(call(t_->exp, -100.f), 1.18e-38f);
}

TEST_P(VecMath, LogSweepAndSpecials) {
  expect_sweep(t_->log, ref_log, bit_sweep(1 << 20, false), "log bits");
  expect_sweep(t_->log, ref_log, linspace(0.25f, 4.f, 1 << 20), "log near 1");
  EXPECT_EQ(call(t_->log, 1.f), 0.f);
  EXPECT_EQ(call(t_->log, 0.f), -kInf);
  EXPECT_EQ(call(t_->log, -0.f), -kInf);
  EXPECT_EQ(call(t_->log, kInf), kInf);
  EXPECT_TRUE(std::isnan(call(t_->log, -1.f)));
  EXPECT_TRUE(std::isnan(call(t_->log, -kInf)));
  EXPECT_TRUE(std::isnan(call(t_->log, kNaN)));
  EXPECT_NEAR(call(t_->log, std::numeric_limits<float>::denorm_min()), -103.27893, 1e-4);
}

TEST_P(VecMath, TanhSweepAndSpecials) {
  expect_sweep(t_->tanh, ref_tanh, linspace(-12.f, 12.f, 1 << 20), "tanh dense");
  expect_sweep(t_->tanh, ref_tanh, bit_sweep(1 << 17, true), "tanh bits");
  EXPECT_TRUE(same_bits(call(t_->tanh, 0.f), 0.f));
  EXPECT_TRUE(same_bits(call(t_->tanh, -0.f), -0.f));
  EXPECT_EQ(call(t_->tanh, kInf), 1.f);
  EXPECT_EQ(call(t_->tanh, -kInf), -1.f);
  EXPECT_EQ(call(t_->tanh, 50.f), 1.f);
  EXPECT_EQ(call(t_->tanh, -1e30f), -1.f);
  EXPECT_TRUE(std::isnan(call(t_->tanh, kNaN)));
}

TEST_P(VecMath, SigmoidSweepAndSpecials) {
  expect_sweep(t_->sigmoid, ref_sigmoid, linspace(-110.f, 30.f, 1 << 20), "sigmoid dense");
  expect_sweep(t_->sigmoid, ref_sigmoid, bit_sweep(1 << 17, true), "sigmoid bits");
  EXPECT_EQ(call(t_->sigmoid, 0.f), 0.5f);
  EXPECT_EQ(call(t_->sigmoid, kInf), 1.f);
  EXPECT_EQ(call(t_->sigmoid, -kInf), 0.f);
  EXPECT_EQ(call(t_->sigmoid, 40.f), 1.f);
  EXPECT_GT(call(t_->sigmoid, -100.f), 0.f);  // subnormal, not flushed
  EXPECT_TRUE(std::isnan(call(t_->sigmoid, kNaN)));
}

TEST_P(VecMath, ErfSweepAndSpecials) {
  expect_sweep(t_->erf, ref_erf, linspace(-6.f, 6.f, 1 << 20), "erf dense");
  expect_sweep(t_->erf, ref_erf, bit_sweep(1 << 17, true), "erf bits");
  EXPECT_TRUE(same_bits(call(t_->erf, 0.f), 0.f));
  EXPECT_TRUE(same_bits(call(t_->erf, -0.f), -0.f));
  EXPECT_EQ(call(t_->erf, kInf), 1.f);
  EXPECT_EQ(call(t_->erf, -kInf), -1.f);
  EXPECT_TRUE(std::isnan(call(t_->erf, kNaN)));
}

// The GELU forms inherit the conditioning of their formulas (1 + erf cancels for x << 0), so
// they are held to an absolute bound scaled by |x| against the same formula in double.
TEST_P(VecMath, GeluForms) {
  const std::vector<float> xs = linspace(-12.f, 12.f, 1 << 18);
  std::vector<float> ye(xs.size()), yt(xs.size());
  t_->gelu_erf(xs.data(), ye.data(), static_cast<int64_t>(xs.size()));
  t_->gelu_tanh(xs.data(), yt.data(), static_cast<int64_t>(xs.size()));
  for (size_t i = 0; i < xs.size(); ++i) {
    const double x = xs[i];
    const double re = 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0)));
    const double u = std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x);
    const double rt = 0.5 * x * (1.0 + std::tanh(u));
    const double tol = 3e-7 * std::max(1.0, std::fabs(x));
    ASSERT_NEAR(ye[i], re, tol) << "gelu erf at x = " << x;
    ASSERT_NEAR(yt[i], rt, tol) << "gelu tanh at x = " << x;
  }
  EXPECT_TRUE(std::isnan(call(t_->gelu_erf, kNaN)));
  EXPECT_TRUE(std::isnan(call(t_->gelu_tanh, kNaN)));
  EXPECT_EQ(call(t_->gelu_erf, kInf), kInf);
  EXPECT_EQ(call(t_->gelu_tanh, kInf), kInf);
}

// SiLU is the product of x and the level's rounded sigmoid (the bits mul(x, sigmoid(x)) gives),
// and its derivative s (1 + x (1 - s)) times g stays within a few float roundings of float64.
TEST_P(VecMath, SiluIsXTimesSigmoidAndItsDerivative) {
  const std::vector<float> xs = linspace(-30.f, 30.f, 1 << 18);
  const auto n = static_cast<int64_t>(xs.size());
  std::vector<float> y(xs.size()), s(xs.size()), g(xs.size()), dx(xs.size());
  t_->silu(xs.data(), y.data(), n);
  t_->sigmoid(xs.data(), s.data(), n);
  for (size_t i = 0; i < xs.size(); ++i) g[i] = 0.5f + static_cast<float>(i % 7) * 0.25f;
  t_->silu_backward(g.data(), xs.data(), dx.data(), n);
  for (size_t i = 0; i < xs.size(); ++i) {
    ASSERT_TRUE(same_bits(y[i], xs[i] * s[i])) << "silu at x = " << xs[i];
    const double x = xs[i], sd = 1.0 / (1.0 + std::exp(-x));
    const double want = g[i] * sd * (1.0 + x * (1.0 - sd));
    ASSERT_NEAR(dx[i], want, 4e-7 * g[i] * std::max(1.0, std::fabs(x))) << "silu' at x = " << x;
  }
  EXPECT_TRUE(std::isnan(call(t_->silu, kNaN)));
  EXPECT_EQ(call(t_->silu, kInf), kInf);
  EXPECT_TRUE(std::isnan(call(t_->silu, -kInf)));  // -inf * sigmoid(-inf) = -inf * 0
}

// erf skips its |x| >= 1 branch for a vector whose lanes are all below 1: a value's erf (and
// GELU, and GELU's derivative) must be the same bits whether its neighbours are small or not.
TEST_P(VecMath, ErfAndGeluIndependentOfNeighbours) {
  const int n = 64;
  std::vector<float> small(n), mixed(n);
  for (int i = 0; i < n; ++i) {
    small[i] = -0.99f + 1.98f * static_cast<float>(i) / (n - 1);  // |x| < 1: erf's first branch
    mixed[i] = i % 2 == 0 ? small[i] : 2.5f;                      // every other lane large
  }
  std::vector<float> ones(n, 1.0f);
  const Fn fns[] = {t_->erf, t_->gelu_erf};
  for (Fn fn : fns) {
    std::vector<float> a(n), b(n);
    fn(small.data(), a.data(), n);
    fn(mixed.data(), b.data(), n);
    for (int i = 0; i < n; i += 2) ASSERT_TRUE(same_bits(a[i], b[i])) << "x = " << small[i];
  }
  std::vector<float> a(n), b(n);
  t_->gelu_erf_backward(ones.data(), small.data(), a.data(), n);
  t_->gelu_erf_backward(ones.data(), mixed.data(), b.data(), n);
  for (int i = 0; i < n; i += 2) ASSERT_TRUE(same_bits(a[i], b[i])) << "x = " << small[i];
}

// An element's result must not depend on its position in the array (tails go through the
// same code), so block and thread boundaries cannot change results.
TEST_P(VecMath, ResultIndependentOfOffsetAndLength) {
  const std::vector<float> xs = linspace(-20.f, 20.f, 203);
  for (Fn fn : {t_->exp, t_->log, t_->tanh, t_->sigmoid, t_->erf, t_->gelu_erf, t_->gelu_tanh}) {
    std::vector<float> all(xs.size());
    fn(xs.data(), all.data(), static_cast<int64_t>(xs.size()));
    for (int off : {1, 5, 17}) {
      std::vector<float> part(xs.size() - off);
      fn(xs.data() + off, part.data(), static_cast<int64_t>(part.size()));
      for (size_t i = 0; i < part.size(); ++i) ASSERT_TRUE(same_bits(part[i], all[i + off]));
    }
    std::vector<float> inplace = xs;  // y == x is allowed
    fn(inplace.data(), inplace.data(), static_cast<int64_t>(inplace.size()));
    for (size_t i = 0; i < xs.size(); ++i) ASSERT_TRUE(same_bits(inplace[i], all[i]));
  }
}

TEST_P(VecMath, ExpShiftSum) {
  for (int n : {2, 7, 16, 37, 1000}) {
    const std::vector<float> xs = linspace(-30.f, 3.f, n);
    const float shift = 3.f;
    std::vector<float> y(n), shifted(n), ref(n);
    const float s = t_->exp_shift_sum(xs.data(), shift, y.data(), n);
    for (int i = 0; i < n; ++i) shifted[i] = xs[i] - shift;
    t_->exp(shifted.data(), ref.data(), n);
    double exact = 0;
    for (int i = 0; i < n; ++i) {
      ASSERT_TRUE(same_bits(y[i], ref[i])) << "n = " << n << ", i = " << i;
      exact += std::exp(static_cast<double>(xs[i]) - shift);
    }
    EXPECT_NEAR(s, exact, 1e-6 * exact) << "n = " << n;
  }
  // A row with NaN sums to NaN; -inf entries add nothing.
  const float row[3] = {1.f, -kInf, 0.f};
  float y[3];
  EXPECT_NEAR(t_->exp_shift_sum(row, 1.f, y, 3), 1.0 + std::exp(-1.0), 1e-6);
  EXPECT_EQ(y[1], 0.f);
  const float bad[2] = {1.f, kNaN};
  EXPECT_TRUE(std::isnan(t_->exp_shift_sum(bad, 1.f, y, 2)));
}

// Rows whose last vector is partial (its unused lanes padded, then cleared before the sum)
// under special shifts: as the whole row's arithmetic says, with no padding leaking in.
TEST_P(VecMath, ExpShiftSumSpecialShiftsWithPartialVectors) {
  for (int n : {2, 7, 9, 17, 20, 33}) {
    std::vector<float> xs = linspace(-4.f, 2.f, n), y(n);
    // Every score far below the shift: all weights and the sum are +0.
    EXPECT_TRUE(same_bits(t_->exp_shift_sum(xs.data(), kInf, y.data(), n), 0.f)) << n;
    for (int i = 0; i < n; ++i) ASSERT_TRUE(same_bits(y[i], 0.f)) << n << ", " << i;
    EXPECT_TRUE(std::isnan(t_->exp_shift_sum(xs.data(), kNaN, y.data(), n))) << n;
    // A row of -inf shifted by its max (-inf): NaN, as softmax of such a row.
    std::vector<float> none(n, -kInf);
    EXPECT_TRUE(std::isnan(t_->exp_shift_sum(none.data(), -kInf, y.data(), n))) << n;
    // -inf scores (masked keys) weigh +0 and leave the sum of the others.
    std::vector<float> masked = xs;
    double exact = 0;
    for (int i = 0; i < n; ++i) {
      if (i % 3 == 1)
        masked[i] = -kInf;
      else
        exact += std::exp(static_cast<double>(masked[i]) - 2.0);
    }
    EXPECT_NEAR(t_->exp_shift_sum(masked.data(), 2.f, y.data(), n), exact, 1e-6 * exact) << n;
    for (int i = 1; i < n; i += 3) ASSERT_TRUE(same_bits(y[i], 0.f)) << n << ", " << i;
  }
}

TEST_P(VecMath, MaxPropagatesNaN) {
  std::vector<float> xs = linspace(-5.f, 7.f, 37);
  std::swap(xs[3], xs[36]);
  for (int n : {0, 1, 15, 16, 37}) {
    float ref = -kInf;
    for (int i = 0; i < n; ++i) ref = std::max(ref, xs[i]);
    EXPECT_EQ(t_->max(xs.data(), n), ref) << "n = " << n;
  }
  for (int pos : {0, 5, 16, 36}) {
    std::vector<float> v = xs;
    v[pos] = kNaN;
    EXPECT_TRUE(std::isnan(t_->max(v.data(), 37))) << "NaN at " << pos;
  }
}

// The sum is the documented tree on every level: partial sum j takes the elements with index
// j (mod 16) in order, then s[j] += s[j + w] for w = 8, 4, 2, 1; so a row's softmax denominator
// has the same bits whatever the CPU.
TEST_P(VecMath, ExpShiftSumIsTheFixedTreeOfSixteenPartialSums) {
  for (int n = 1; n <= 53; ++n) {
    const std::vector<float> xs = linspace(-9.f, 2.5f, n);
    std::vector<float> y(n);
    const float s = t_->exp_shift_sum(xs.data(), 0.75f, y.data(), n);
    float lanes[16] = {};
    for (int i = 0; i < n; ++i) lanes[i % 16] += y[i];
    for (int w = 8; w >= 1; w /= 2)
      for (int j = 0; j < w; ++j) lanes[j] += lanes[j + w];
    ASSERT_TRUE(same_bits(s, lanes[0])) << "n = " << n << ": " << s << " vs " << lanes[0];
  }
}

// Rows of every short length ending right before an unreadable page: the tails neither read
// past the row (no fault) nor write past it (the guard values stay).
TEST_P(VecMath, ShortRowsStayInsideTheirBounds) {
  const long page = sysconf(_SC_PAGESIZE);
  void* mem = mmap(nullptr, 2 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(mem, MAP_FAILED);
  ASSERT_EQ(mprotect(static_cast<char*>(mem) + page, page, PROT_NONE), 0);
  auto* end = reinterpret_cast<float*>(static_cast<char*>(mem) + page);
  for (int n = 1; n <= 40; ++n) {
    float* x = end - n;
    for (int i = 0; i < n; ++i) x[i] = 0.25f * static_cast<float>(i % 7) - 1.0f;
    std::vector<float> y(n + 16, 123.0f);
    const float s = t_->exp_shift_sum(x, 0.5f, y.data(), n);
    double exact = 0;
    for (int i = 0; i < n; ++i) exact += std::exp(static_cast<double>(x[i]) - 0.5);
    EXPECT_NEAR(s, exact, 1e-6 * exact) << "n = " << n;
    for (int i = n; i < n + 16; ++i) ASSERT_EQ(y[i], 123.0f) << "n = " << n << ", i = " << i;
    float ref = -kInf;
    for (int i = 0; i < n; ++i) ref = std::max(ref, x[i]);
    EXPECT_EQ(t_->max(x, n), ref) << "n = " << n;
  }
  munmap(mem, 2 * page);
}

INSTANTIATE_TEST_SUITE_P(Levels, VecMath,
                         ::testing::Values(SimdLevel::kScalar, SimdLevel::kAvx2,
                                           SimdLevel::kAvx512),
                         [](const auto& info) { return std::string(simd_level_name(info.param)); });

TEST(VecMathDispatch, ActiveLevelIsAvailable) {
  EXPECT_NE(vec_math_table(simd_level()), nullptr);
  EXPECT_NE(vec_math_table(SimdLevel::kScalar), nullptr);
  float x = 1.f, y = 0.f;
  exp_f32(&x, &y, 1);
  EXPECT_NEAR(y, 2.7182817f, 3e-7f);
}

// The f32 ops run the active level's kernels, and give the same bits for any thread count
// (the array is above the parallel grain, so blocks and chunks fall at different offsets).
TEST(VecMathOps, F32OpsUseVectorMathDeterministically) {
  const int64_t n = 70001;
  Tensor a = empty({n}, kFloat32);
  const std::vector<float> xs = linspace(-9.f, 9.f, static_cast<int>(n));
  std::copy(xs.begin(), xs.end(), a.data<float>());
  struct Case {
    Tensor (*op)(const Tensor&);
    Fn fn;
  };
  const Case cases[] = {
      {[](const Tensor& t) { return mantissa::exp(t); }, &exp_f32},
      {[](const Tensor& t) { return mantissa::tanh(t); }, &tanh_f32},
      {[](const Tensor& t) { return mantissa::sigmoid(t); }, &sigmoid_f32},
      {[](const Tensor& t) { return mantissa::gelu(t, "none"); }, &gelu_erf_f32},
      {[](const Tensor& t) { return mantissa::gelu(t, "tanh"); }, &gelu_tanh_f32}};
  for (const Case& c : cases) {
    std::vector<float> ref(n);
    c.fn(xs.data(), ref.data(), n);
    for (int threads : {1, 2, 3}) {
#ifdef _OPENMP
      const int saved = omp_get_max_threads();
      omp_set_num_threads(threads);
#endif
      const Tensor y = c.op(a);
#ifdef _OPENMP
      omp_set_num_threads(saved);
#endif
      const float* p = y.data<float>();
      for (int64_t i = 0; i < n; ++i)
        ASSERT_TRUE(same_bits(p[i], ref[i])) << i << " threads " << threads;
    }
  }
}

}  // namespace
}  // namespace mantissa::kernels::vm
