// The mxfp4 recipe's opt-in switches, Tseng et al.'s MXFP4 training (docs/fp8.md "MX recipes";
// --fp8-enable-stochastic-rounding, --fp8-enable-rht): the stochastically rounded cast
// (kernels/cpu/mx/mxfp4_sr.h) element by element against philox.h's sr_byte and the E2M1
// rounding, unbiased over many draws and reproducible from (seed, offset); the layer's backward
// products against a float64 product of operands composed here (the transform through
// rht_transpose, the casts through the element reference or the format table's mxfp4), and in
// expectation over draws against the float64 gradients of the unquantized operands; the forward
// and the switches-off recipe unchanged; the stream in the plugin's state; the settings.
#include <gtest/gtest.h>

#include "fp8/fp8_training_fixture.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "kernels/cpu/mx/hadamard.h"
#include "kernels/cpu/mx/mx_cast.h"
#include "kernels/cpu/mx/mxfp4_sr.h"
#include "kernels/cpu/mx/philox.h"
#include "mantissa/formats/block_formats.h"
#include "mantissa/fp8/autocast.h"
#include "mantissa/fp8/linear.h"
#include "mantissa/fp8/mx_linear.h"
#include "mantissa/fp8/nvfp4_scaling.h"
#include "mantissa/mantissa.h"
#include "mantissa/train/precisions/transformer_engine_precision.h"
#include "support/test_util.h"

namespace mantissa::fp8 {
namespace {

namespace km = kernels::mx;
using testing_fixture::mean_loss;
using testing_fixture::normal_tensor;
using testing_fixture::train_losses;
using namespace mantissa::testing;

constexpr uint64_t kSeed = 2025;

// The value of code i of a row of E2M1 codes.
float e2m1_at(const uint8_t* codes, int64_t i) {
  return km::scalar::kE2m1Values[(codes[i / 2] >> ((i & 1) * 4)) & 0xF];
}

// One cast by mxfp4_quantize_sr, dequantized in float64 (code * block scale * f32(4/3)).
struct SrCast {
  std::vector<uint8_t> codes, scales;
  km::MxCastStats stats;
};
SrCast sr_cast(const std::vector<float>& x, int64_t rows, int64_t cols, uint64_t offset,
               DType dt = kFloat32, SimdLevel level = simd_level()) {
  SrCast c;
  c.codes.assign(static_cast<size_t>(rows * ((cols + 1) / 2)), 0xAB);
  c.scales.assign(static_cast<size_t>(rows * ((cols + 31) / 32)), 0xAB);
  const Tensor src = tensor(x, {rows, cols}).to(dt).contiguous();
  km::mxfp4_quantize_sr(src.data_ptr(), dt, rows, cols, kSeed, offset, c.codes.data(),
                        c.scales.data(), level, &c.stats);
  return c;
}
std::vector<double> dequantized(const SrCast& c, int64_t rows, int64_t cols) {
  std::vector<double> v(static_cast<size_t>(rows * cols));
  const int64_t cb = (cols + 1) / 2, sb = (cols + 31) / 32;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t i = 0; i < cols; ++i)
      v[static_cast<size_t>(r * cols + i)] =
          static_cast<double>(e2m1_at(c.codes.data() + r * cb, i)) *
          km::scalar::e8m0_value(c.scales[static_cast<size_t>(r * sb + i / 32)]) *
          static_cast<double>(km::kMxfp4SrTensorScale);
  return v;
}

// The cast element by element, as its definition reads: E8M0 floor scale of the block, x / 2^e
// times 3/4, rounded up with probability of its distance from the lower E2M1 neighbour, decided
// by the byte sr_byte(seed, offset, r, c) (mx_scalar.h, e2m1_code_stochastic).
void expect_element_reference(const std::vector<float>& x, int64_t rows, int64_t cols,
                              uint64_t offset, const SrCast& got) {
  const int64_t cb = (cols + 1) / 2, sb = (cols + 31) / 32;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t b = 0; b * 32 < cols; ++b) {
      const int64_t n = std::min<int64_t>(32, cols - b * 32);
      float amax = 0;
      bool nan = false;
      for (int64_t i = 0; i < n; ++i) {
        const float a = std::fabs(x[static_cast<size_t>(r * cols + b * 32 + i)]);
        nan |= a != a;
        amax = std::max(amax, a);
      }
      const uint8_t s = nan ? km::kE8m0Nan : km::scalar::e8m0_floor(amax, 2);
      ASSERT_EQ(got.scales[static_cast<size_t>(r * sb + b)], s) << r << "," << b;
      for (int64_t i = 0; i < n; ++i) {
        const int64_t c = b * 32 + i;
        const float y =
            (x[static_cast<size_t>(r * cols + c)] / km::scalar::floor_divisor(s)) * 0.75f;
        const uint8_t want = km::scalar::e2m1_code_stochastic(
            y, km::sr_byte(kSeed, offset, static_cast<uint64_t>(r), static_cast<uint64_t>(c)));
        const uint8_t code = (got.codes[static_cast<size_t>(r * cb + c / 2)] >> ((c & 1) * 4)) & 15;
        ASSERT_EQ(code, want) << r << "," << c << " y " << y;
      }
    }
}

// Element by element, with edge blocks: all-zero, NaN, inf, subnormal amax, a block's largest
// value a power of 2 and just below the next (the 3/4 pre-scale keeps it below 6), rows cut
// short (70 columns: a short last block; 69: an odd row, its last byte's high nibble 0), and a
// cast long enough for threads; at every SIMD level.
TEST(Mxfp4Sr, CastIsTheElementReference) {
  for (const auto& [rows, cols] : {std::pair<int64_t, int64_t>{5, 70}, {4, 69}, {300, 260}}) {
    std::vector<float> x = wide_normal(rows * cols, 7, 6.0f);
    for (int64_t i = 0; i < 32; ++i) x[static_cast<size_t>(i)] = 0.0f;  // block (0, 0) zero
    x[40] = std::numeric_limits<float>::quiet_NaN();                    // block (0, 1) NaN
    x[static_cast<size_t>(cols + 3)] = std::numeric_limits<float>::infinity();
    for (int64_t i = 0; i < 32; ++i)  // block (2, 0): subnormal amax
      x[static_cast<size_t>(2 * cols + i)] = 1e-39f * static_cast<float>(i % 5);
    x[static_cast<size_t>(3 * cols)] = 8.0f;  // block (3, 0): amax at a power of 2...
    x[static_cast<size_t>(3 * cols + 1)] = std::nextafter(8.0f, 0.0f);    // ...and just below
    x[static_cast<size_t>(3 * cols + 32)] = std::nextafter(16.0f, 0.0f);  // block (3, 1)
    for (const uint64_t offset : {uint64_t{0}, uint64_t{5}, (uint64_t{1} << 40) + 3}) {
      SCOPED_TRACE(std::to_string(rows) + "x" + std::to_string(cols) + " offset " +
                   std::to_string(offset));
      const SrCast c = sr_cast(x, rows, cols, offset);
      expect_element_reference(x, rows, cols, offset, c);
      // Every SIMD level gives the same bytes and statistics.
      for (const SimdLevel level : {SimdLevel::kScalar, SimdLevel::kAvx2, SimdLevel::kAvx512}) {
        if (simd_level() < level) continue;
        const SrCast l = sr_cast(x, rows, cols, offset, kFloat32, level);
        EXPECT_EQ(l.codes, c.codes) << static_cast<int>(level);
        EXPECT_EQ(l.scales, c.scales) << static_cast<int>(level);
        EXPECT_EQ(l.stats.flushed, c.stats.flushed) << static_cast<int>(level);
        EXPECT_EQ(l.stats.amax, c.stats.amax) << static_cast<int>(level);
      }
      // Reproducible: the same (seed, offset), the same bytes; bfloat16 sources as their widened
      // values.
      const SrCast again = sr_cast(x, rows, cols, offset);
      EXPECT_EQ(again.codes, c.codes);
      EXPECT_EQ(again.scales, c.scales);
      std::vector<float> xb = tensor(x, {rows, cols}).to(kBFloat16).to(kFloat32).to_vector<float>();
      const SrCast b = sr_cast(x, rows, cols, offset, kBFloat16);
      expect_element_reference(xb, rows, cols, offset, b);
      // Only the inf saturates (the 3/4 pre-scale keeps every finite element within 6).
      EXPECT_EQ(c.stats.saturated, 1);
    }
    // Another offset draws other numbers.
    EXPECT_NE(sr_cast(x, rows, cols, 1).codes, sr_cast(x, rows, cols, 2).codes);
  }
}

// The mean over 4000 draws of each element's value is the element, within the rule's bias bound
// (1/256 of an E2M1 step) and 5 standard errors of one draw's spread (an E2M1 step), where round
// to nearest is off by a quarter step or more; each draw is one of the element's two E2M1
// neighbours.
TEST(Mxfp4Sr, CastIsUnbiased) {
  // One block: its largest element 5.0 sets the scale 2^(2 - 2) = 1, so y = 3/4 x.
  std::vector<float> x = {5.0f,  1.0f,   1.7f,  -2.2f, 0.3f,  0.01f, -4.9f,  3.1f,
                          0.6f,  -0.45f, 2.65f, 4.4f,  1e-4f, -0.7f, 3.95f,  -1.2f,
                          2.1f,  0.9f,   -3.3f, 1.45f, 0.05f, 4.05f, -0.25f, 2.9f,
                          -1.9f, 0.35f,  3.6f,  -0.8f, 1.1f,  -2.7f, 0.15f,  4.6f};
  const int64_t n = static_cast<int64_t>(x.size());
  constexpr int kDraws = 4000;
  std::vector<double> mean(x.size(), 0.0);
  for (int d = 0; d < kDraws; ++d) {
    const SrCast c = sr_cast(x, 1, n, static_cast<uint64_t>(d));
    ASSERT_EQ(c.scales[0], 127);
    const std::vector<double> v = dequantized(c, 1, n);
    for (int64_t i = 0; i < n; ++i) {
      const double y = 0.75 * x[static_cast<size_t>(i)], q = v[static_cast<size_t>(i)] * 0.75;
      const double step = std::fabs(y) < 2 ? 0.5 : (std::fabs(y) < 4 ? 1.0 : 2.0);
      ASSERT_LE(std::fabs(q - y), step * (1 + 1e-6)) << i;  // a neighbour of y
      mean[static_cast<size_t>(i)] += v[static_cast<size_t>(i)] / kDraws;
    }
  }
  int nearest_biased = 0;
  for (int64_t i = 0; i < n; ++i) {
    const double xi = x[static_cast<size_t>(i)], y = 0.75 * xi;
    const double step = std::fabs(y) < 2 ? 0.5 : (std::fabs(y) < 4 ? 1.0 : 2.0);
    const double se = step / 0.75 / 2 / std::sqrt(static_cast<double>(kDraws));
    // The rule's bias, below step / 256 of y (mx_scalar.h, e2m1_code_stochastic), and five
    // standard errors.
    const double bias = step / 0.75 / 256;
    EXPECT_NEAR(mean[static_cast<size_t>(i)], xi, bias + 5 * se + 1e-6 * std::fabs(xi)) << i;
    const double rtn = km::scalar::kE2m1Values[km::scalar::e2m1_code(static_cast<float>(y))];
    if (std::fabs(std::copysign(rtn, y) / 0.75 - xi) > 5 * se) ++nearest_biased;
  }
  EXPECT_GT(nearest_biased, n / 2);  // the test tells stochastic rounding from round to nearest
}

// The layer with the switches, its kIn -> kOut float32 weight, kM tokens: 200 cut 1x32 blocks
// and pad the transform (200 -> 208, 130 -> 144).
constexpr int64_t kM = 200, kIn = 150, kOut = 130;

Recipe mxfp4(bool sr, bool rht) {
  Recipe r;
  r.kind = RecipeKind::kMxfp4;
  r.enable_stochastic_rounding = sr;
  r.enable_rht = rht;
  return r;
}

struct LayerRun {
  std::vector<float> y, dx, dw, db;
  SrStream stream_after;
};
LayerRun run_layer(const Recipe& recipe, Linear& layer, const Tensor& x, const Tensor& g,
                   bool reset_stream = true) {
  if (reset_stream) nvfp4_sr_stream() = {kSeed, 0};
  layer.zero_grad();
  Tensor xin = x.detach();
  xin.requires_grad_(true);
  Tensor y;
  {
    Fp8Autocast ac(true, recipe);
    y = layer(xin);
  }
  sum(mul(y, g)).backward();
  return {y.to_vector<float>(), xin.grad().to_vector<float>(),
          layer.weight.grad().to_vector<float>(), layer.bias.grad().to_vector<float>(),
          nvfp4_sr_stream()};
}

std::vector<float> transposed(const std::vector<float>& x, int64_t rows, int64_t cols) {
  std::vector<float> t(x.size());
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) t[c * rows + r] = x[r * cols + c];
  return t;
}

// A backward operand as the recipe defines it, from the float32 matrix `rows_along_k` of
// `rows` x `k` (the operand's rows, before any transform) and float64 dequantized: with `rht`
// the rows zero-padded to whole blocks and transformed (through rht_transpose of the transpose),
// then the stochastically rounded cast (element reference) or the format table's mxfp4.
struct Operand {
  int64_t rows, k;
  std::vector<double> v;
};
Operand operand(const std::vector<float>& rows_along_k, int64_t rows, int64_t k, bool sr, bool rht,
                uint64_t offset) {
  std::vector<float> m = rows_along_k;
  int64_t kk = k;
  if (rht) {
    kk = km::rht_padded(k);
    m.assign(static_cast<size_t>(rows * kk), 0.0f);
    const std::vector<float> t = transposed(rows_along_k, rows, k);  // k x rows
    km::rht_transpose(t.data(), kFloat32, k, rows, m.data());        // rows x kk
  }
  if (sr) {
    const SrCast c = sr_cast(m, rows, kk, offset);
    expect_element_reference(m, rows, kk, offset, c);
    return {rows, kk, dequantized(c, rows, kk)};
  }
  const std::vector<float> d =
      formats::dequantize(formats::quantize_mxfp4(m, rows, kk, formats::MxOptions{}));
  return {rows, kk, std::vector<double>(d.begin(), d.end())};
}

// got = a @ b^T within the fp32 accumulation bound of the float64 product (the tensor scales'
// product applied once more).
void expect_product(const std::vector<float>& got, const Operand& a, const Operand& b,
                    const char* what) {
  ASSERT_EQ(a.k, b.k) << what;
  ASSERT_EQ(got.size(), static_cast<size_t>(a.rows * b.rows)) << what;
  const double bound = (static_cast<double>(a.k) + 4) * std::ldexp(1.0, -24);
  for (int64_t i = 0; i < a.rows; ++i)
    for (int64_t j = 0; j < b.rows; ++j) {
      double ref = 0, mag = 0;
      for (int64_t kk = 0; kk < a.k; ++kk) {
        const double p =
            a.v[static_cast<size_t>(i * a.k + kk)] * b.v[static_cast<size_t>(j * b.k + kk)];
        ref += p;
        mag += std::fabs(p);
      }
      ASSERT_LE(std::fabs(got[static_cast<size_t>(i * b.rows + j)] - ref), bound * mag + 1e-30)
          << what << " at " << i << "," << j;
    }
}

class Mxfp4SrLayer : public ::testing::Test {
 protected:
  void SetUp() override {
    manual_seed(4);
    layer = std::make_unique<Linear>(kIn, kOut, true, kFloat32, 1);
    x = normal_tensor({kM, kIn}, 3.0f, 11);
    g = normal_tensor({kM, kOut}, 1e-3f, 12);
  }
  std::unique_ptr<Linear> layer;
  Tensor x, g;
};

// Each switch set: y and db as the recipe's without switches (the forward is torchao's), dx and
// dW the float64 products of the operands composed here, the draws in the recipe's order (W^T
// and x^T in forward, then dy, then dy^T), four offsets taken under stochastic rounding and none
// without.
TEST_F(Mxfp4SrLayer, BackwardProductsAreTheRecipesComposition) {
  const LayerRun plain = run_layer(mxfp4(false, false), *layer, x, g);
  EXPECT_EQ(plain.stream_after, (SrStream{kSeed, 0}));
  const std::vector<float> xv = x.to_vector<float>(), gv = g.to_vector<float>(),
                           wv = layer->weight.detach().to_vector<float>();
  const std::vector<float> wt = transposed(wv, kOut, kIn), xt = transposed(xv, kM, kIn),
                           gt = transposed(gv, kM, kOut);
  for (const auto& [sr, rht] : {std::pair{true, false}, {false, true}, {true, true}}) {
    SCOPED_TRACE(mxfp4(sr, rht).to_string());
    const LayerRun r = run_layer(mxfp4(sr, rht), *layer, x, g);
    EXPECT_EQ(r.stream_after, (SrStream{kSeed, sr ? 4u : 0u}));
    EXPECT_EQ(r.y, plain.y);
    EXPECT_EQ(r.db, plain.db);
    EXPECT_NE(r.dx, plain.dx);
    EXPECT_NE(r.dw, plain.dw);
    // dx = Q(dy) Q(W^T)^T, K = kOut; dW = Q(dy^T) Q(x^T)^T, K = kM.
    expect_product(r.dx, operand(gv, kM, kOut, sr, rht, 2), operand(wt, kIn, kOut, sr, rht, 0),
                   "dx");
    expect_product(r.dw, operand(gt, kOut, kM, sr, rht, 3), operand(xt, kIn, kM, sr, rht, 1), "dW");
    // Reproducible from the stream.
    const LayerRun again = run_layer(mxfp4(sr, rht), *layer, x, g);
    EXPECT_EQ(again.dx, r.dx);
    EXPECT_EQ(again.dw, r.dw);
  }
}

// With stochastic rounding the gradients are unbiased: their mean over 300 steps' draws is the
// float64 product of the unquantized operands (dx = dy W, dW = dy^T x; the transform is
// orthogonal), each element within 6 standard errors of the draws' own spread. Without
// stochastic rounding the error of round to nearest stays: one draw's error against the same
// reference is larger than the mean's by far.
TEST(Mxfp4Sr, StochasticGradientsAreUnbiased) {
  const int64_t M = 64, K = 48, N = 40;
  manual_seed(5);
  Linear small(K, N, true, kFloat32, 1);
  const Tensor xs = normal_tensor({M, K}, 2.0f, 21), gs = normal_tensor({M, N}, 1.0f, 22);
  const std::vector<float> xv = xs.to_vector<float>(), gv = gs.to_vector<float>(),
                           wv = small.weight.detach().to_vector<float>();
  std::vector<double> dx_ref(static_cast<size_t>(M * K), 0.0),
      dw_ref(static_cast<size_t>(N * K), 0.0);
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = 0; n < N; ++n)
      for (int64_t k = 0; k < K; ++k) {
        dx_ref[static_cast<size_t>(m * K + k)] +=
            static_cast<double>(gv[static_cast<size_t>(m * N + n)]) *
            wv[static_cast<size_t>(n * K + k)];
        dw_ref[static_cast<size_t>(n * K + k)] +=
            static_cast<double>(gv[static_cast<size_t>(m * N + n)]) *
            xv[static_cast<size_t>(m * K + k)];
      }
  for (const bool rht : {false, true}) {
    SCOPED_TRACE(rht ? "with the transform" : "without the transform");
    constexpr int kSteps = 300;
    std::vector<double> sx(dx_ref.size()), sx2(dx_ref.size()), sw(dw_ref.size()),
        sw2(dw_ref.size());
    nvfp4_sr_stream() = {kSeed, 0};
    for (int s = 0; s < kSteps; ++s) {
      const LayerRun r = run_layer(mxfp4(true, rht), small, xs, gs, false);
      for (size_t i = 0; i < sx.size(); ++i) {
        sx[i] += r.dx[i];
        sx2[i] += static_cast<double>(r.dx[i]) * r.dx[i];
      }
      for (size_t i = 0; i < sw.size(); ++i) {
        sw[i] += r.dw[i];
        sw2[i] += static_cast<double>(r.dw[i]) * r.dw[i];
      }
    }
    auto check = [&](const std::vector<double>& s1, const std::vector<double>& s2,
                     const std::vector<double>& ref, const std::vector<float>& rtn,
                     const char* what) {
      double err_mean = 0, err_rtn = 0;
      for (size_t i = 0; i < ref.size(); ++i) {
        const double mean = s1[i] / kSteps;
        const double var = std::max(s2[i] / kSteps - mean * mean, 0.0);
        const double se = std::sqrt(var / (kSteps - 1));
        ASSERT_LE(std::fabs(mean - ref[i]), 6 * se + 1e-5 * std::fabs(ref[i]) + 1e-6)
            << what << " " << i;
        err_mean += (mean - ref[i]) * (mean - ref[i]);
        err_rtn += (rtn[i] - ref[i]) * (rtn[i] - ref[i]);
      }
      EXPECT_LT(std::sqrt(err_mean), 0.25 * std::sqrt(err_rtn)) << what;
    };
    const LayerRun rtn = run_layer(mxfp4(false, rht), small, xs, gs);
    check(sx, sx2, dx_ref, rtn.dx, "dx");
    check(sw, sw2, dw_ref, rtn.dw, "dW");
  }
}

TEST_F(Mxfp4SrLayer, StatisticsOfTheStochasticGradientCast) {
  run_layer(mxfp4(true, false), *layer, x, g);
  ScalingState& st = *layer->fp8_state();
  float ga = 0;
  for (float v : g.to_vector<float>()) ga = std::max(ga, std::fabs(v));
  EXPECT_EQ(st.current_amax(2), ga);
  // The multiplier of the block holding amax: 3/4 / 2^(floor(log2 amax) - 2).
  EXPECT_EQ(st.scale_of(2), 0.75f * std::ldexp(1.0f, 2 - std::ilogb(ga)));
  const CastCounts c = st.take_counts(2);
  EXPECT_EQ(c.total, kM * kOut);
  EXPECT_EQ(c.saturated, 0);
  EXPECT_GT(c.peak, 0.5);
  EXPECT_LT(c.peak, 1.0);
}

TEST(Mxfp4Sr, TrainingConvergesAndEachSwitchChangesIt) {
  const std::vector<float> plain = train_losses({{"fp8_recipe", "mxfp4"}});
  const std::map<std::string, std::string> both = {{"fp8_recipe", "mxfp4"},
                                                   {"fp8_enable_stochastic_rounding", "true"},
                                                   {"fp8_enable_rht", "true"}};
  const std::vector<float> l = train_losses(both);
  for (float v : l) EXPECT_TRUE(std::isfinite(v));
  EXPECT_LT(mean_loss(l, 55, 60), 0.3 * mean_loss(l, 0, 5));
  EXPECT_NE(l, plain);
  EXPECT_EQ(l, train_losses(both));  // the plugin seeds the stream from the run's seed
  const std::vector<float> sr =
      train_losses({{"fp8_recipe", "mxfp4"}, {"fp8_enable_stochastic_rounding", "true"}});
  const std::vector<float> rht =
      train_losses({{"fp8_recipe", "mxfp4"}, {"fp8_enable_rht", "true"}});
  EXPECT_NE(sr, plain);
  EXPECT_NE(rht, plain);
  EXPECT_NE(sr, l);
  EXPECT_NE(rht, l);
}

TEST(Mxfp4Sr, PluginStateCarriesTheStreamUnderStochasticRounding) {
  for (const bool sr : {false, true}) {
    train::TransformerEnginePrecision te(
        "transformer-engine",
        train::transformer_engine_options_from(
            {{"fp8_recipe", "mxfp4"}, {"fp8_enable_stochastic_rounding", sr ? "true" : "false"}}));
    nn::Sequential model;
    model.push_back(std::make_shared<nn::Linear>(16, 16));
    nvfp4_sr_stream() = {1, 1};
    manual_seed(77);
    te.convert_module(model);
    const nlohmann::json s = te.state_dict();
    EXPECT_EQ(s.at("recipe").at("enable_stochastic_rounding"), sr);
    if (!sr) {
      EXPECT_FALSE(s.contains("sr_stream"));
      EXPECT_EQ(nvfp4_sr_stream(), (SrStream{1, 1}));  // not seeded: no draws
      continue;
    }
    EXPECT_EQ(nvfp4_sr_stream(), (SrStream{77, 0}));
    nvfp4_sr_stream().offset = 9;
    const nlohmann::json s9 = te.state_dict();
    EXPECT_EQ(s9.at("sr_stream").at("offset"), 9u);
    nvfp4_sr_stream() = {};
    te.load_state_dict(s9);
    EXPECT_EQ(nvfp4_sr_stream(), (SrStream{77, 9}));
    // A checkpoint of the recipe without the switch does not resume with it.
    nlohmann::json other = s9;
    other["recipe"]["enable_stochastic_rounding"] = false;
    expect_error([&] { te.load_state_dict(other); },
                 "scale_calculation_mode=FLOOR) but this run uses "
                 "MXLinearConfig(elem_dtype=float4_e2m1fn_x2, block_size=32, "
                 "scale_calculation_mode=FLOOR, stochastic_rounding=true, rht=false)");
  }
  nvfp4_sr_stream() = {};
}

TEST(Mxfp4Sr, RecipeSettings) {
  const Recipe plain = mxfp4(false, false), both = mxfp4(true, true);
  EXPECT_EQ(Recipe::from_json(both.to_json()), both);
  EXPECT_EQ(Recipe::from_json(mxfp4(true, false).to_json()), mxfp4(true, false));
  EXPECT_EQ(Recipe::from_json({{"recipe", "mxfp4"}}), plain);  // files written before the switches
  EXPECT_EQ(plain.to_string(),
            "MXLinearConfig(elem_dtype=float4_e2m1fn_x2, block_size=32, "
            "scale_calculation_mode=FLOOR)");
  EXPECT_EQ(mxfp4(false, true).to_string(),
            "MXLinearConfig(elem_dtype=float4_e2m1fn_x2, block_size=32, "
            "scale_calculation_mode=FLOOR, stochastic_rounding=false, rht=true)");
  EXPECT_FALSE(plain.uses_sr_stream());
  EXPECT_FALSE(mxfp4(false, true).uses_sr_stream());
  EXPECT_TRUE(mxfp4(true, false).uses_sr_stream());
  EXPECT_EQ(train::transformer_engine_options_from({{"fp8_recipe", "mxfp4"},
                                                    {"fp8_enable_stochastic_rounding", "true"},
                                                    {"fp8_enable_rht", "true"}})
                .recipe,
            both);
  // The switches elsewhere: refused, naming field, flag and what to do.
  Recipe nv;
  nv.kind = RecipeKind::kNvfp4;
  nv.enable_rht = true;
  expect_error([&] { nv.validate(); },
               "enable_rht (--fp8-enable-rht) applies to the mxfp4 recipe only (Tseng et al.'s "
               "MXFP4 training), not to nvfp4: the nvfp4 recipe has it on unless "
               "--fp8-disable-rht; leave --fp8-enable-rht out");
  Recipe m8;
  m8.kind = RecipeKind::kMxfp8;
  m8.enable_stochastic_rounding = true;
  expect_error([&] { m8.validate(); },
               "enable_stochastic_rounding (--fp8-enable-stochastic-rounding) applies to the "
               "mxfp4 recipe only (Tseng et al.'s MXFP4 training), not to mxfp8: leave it out or "
               "use --fp8-recipe mxfp4");
  expect_error(
      [&] {
        train::transformer_engine_options_from({{"fp8_enable_stochastic_rounding", "true"}});
      },
      "not to delayed");
  Recipe off = plain;
  off.disable_stochastic_rounding = true;
  expect_error([&] { off.validate(); },
               "applies to the nvfp4 recipe only (TransformerEngine's NVFP4BlockScaling), not to "
               "mxfp4: leave it out or use --fp8-recipe nvfp4 (the mxfp4 recipe has it off unless "
               "--fp8-enable-stochastic-rounding)");
  expect_error(
      [&] {
        train::transformer_engine_options_from({{"fp8_recipe", "mxfp4"}, {"fp8_enable_rht", "1"}});
      },
      "fp8_enable_rht must be 'true' or 'false', got '1'");
}

}  // namespace
}  // namespace mantissa::fp8
