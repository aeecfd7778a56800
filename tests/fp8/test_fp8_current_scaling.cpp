// Current scaling (TransformerEngine 2.x's Float8CurrentScaling): the scale each cast takes from
// its own tensor, and the bytes it writes, against TE's formula and the OCP FP8 formats worked
// out here independently (fp8_reference.h: a decoder of the format bits and a nearest-code
// search); the recipe's names, checks and JSON; the layer's scales in forward and backward; the
// cross-rank amax reduction; and a short training run that converges and differs from delayed
// scaling.
#include "mantissa/fp8/current_scaling.h"

#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "fp8/fp8_reference.h"
#include "fp8/fp8_training_fixture.h"
#include "mantissa/fp8/autocast.h"
#include "mantissa/fp8/linear.h"
#include "mantissa/mantissa.h"
#include "mantissa/train/precisions/transformer_engine_precision.h"

namespace mantissa::fp8 {
namespace {

using testing_fixture::train_losses;

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

// TE's scale, written out from its definition: 1 for an amax of 0, inf or NaN; else
// fp8_max / amax rounded once to float (the double quotient rounds to the same float: 53 bits
// are more than 2 * 24 + 2), FLT_MAX past the float range, and with power_2 the largest power
// of 2 not above it.
float expected_scale(float amax, float fp8_max, bool power_2 = false) {
  if (amax == 0.0f || std::isinf(amax) || std::isnan(amax)) return 1.0f;
  const double q = static_cast<double>(fp8_max) / static_cast<double>(amax);
  float s = q > static_cast<double>(FLT_MAX) ? FLT_MAX : static_cast<float>(q);
  if (power_2) {
    int e = 0;
    std::frexp(s, &e);  // s = m * 2^e, m in [0.5, 1)
    s = std::ldexp(1.0f, e - 1);
  }
  return s;
}

using reference::decode;

// The saturating round-to-nearest-even code of y (fp8_reference.h).
uint8_t expected_code(float y, bool e4m3) { return reference::encode(y, e4m3); }

Recipe current_recipe(bool power_2 = false, Format format = Format::kHybrid) {
  Recipe r;
  r.kind = RecipeKind::kCurrent;
  r.use_power_2_scales = power_2;
  r.fp8_format = format;
  return r;
}

// Casts `values` under current scaling into slot 0 and checks the scale, amax, scale_inv and
// every byte against the expectation above.
void check_cast(const std::vector<float>& values, float amax, DType fp8, bool power_2) {
  SCOPED_TRACE(::testing::Message()
               << "amax " << amax << ", " << fp8.name() << ", power_2 " << power_2);
  const bool e4m3 = fp8 == kFloat8_e4m3fn;
  const float max = e4m3 ? 448.0f : 57344.0f;
  const Tensor x = tensor(values, {static_cast<int64_t>(values.size())});
  EXPECT_EQ(tensor_amax(x), amax);
  ScalingState state(kNumRoles, 1);
  const Fp8Tensor q = quantize_current(x, fp8, state, 0, current_recipe(power_2));
  const float scale = expected_scale(amax, max, power_2);
  EXPECT_EQ(state.scale_of(0), scale);
  EXPECT_EQ(state.current_amax(0), amax);
  EXPECT_EQ(state.scale_amax(0), amax);
  EXPECT_EQ(q.scale_inv, 1.0f / scale);
  const auto* codes = static_cast<const uint8_t*>(q.data.data_ptr());
  for (size_t i = 0; i < values.size(); ++i) {
    const uint8_t want = expected_code(values[i] * scale, e4m3);
    EXPECT_EQ(codes[i], want) << "element " << i << " = " << values[i] << " (scaled "
                              << values[i] * scale << ")";
  }
}

TEST(Fp8CurrentScaling, ScaleIsTransformerEnginesFormula) {
  for (float max : {448.0f, 57344.0f}) {
    for (float amax : {1.0f, 3.0f, 0.1f, 448.0f, 57344.0f, 1e6f, 2.5e-5f, 1e-30f}) {
      EXPECT_EQ(current_scale(amax, max, false, 0.0f), expected_scale(amax, max)) << amax;
      EXPECT_EQ(current_scale(amax, max, true, 0.0f), expected_scale(amax, max, true)) << amax;
    }
  }
  // Worked values: 448 / 3 = 149.333..., its power of 2 below is 128.
  EXPECT_EQ(current_scale(3.0f, 448.0f, false, 0.0f), 448.0f / 3.0f);
  EXPECT_EQ(current_scale(3.0f, 448.0f, true, 0.0f), 128.0f);
  EXPECT_EQ(current_scale(448.0f, 448.0f, false, 0.0f), 1.0f);  // amax at the format max
  EXPECT_EQ(current_scale(896.0f, 448.0f, false, 0.0f), 0.5f);  // beyond it: scale below 1
  EXPECT_EQ(current_scale(0.0f, 448.0f, false, 0.0f), 1.0f);
  EXPECT_EQ(current_scale(kInf, 448.0f, false, 0.0f), 1.0f);
  EXPECT_EQ(current_scale(kNaN, 448.0f, true, 0.0f), 1.0f);
  // A subnormal amax: the quotient overflows float, FLT_MAX; as a power of 2, 2^127.
  EXPECT_EQ(current_scale(1e-40f, 448.0f, false, 0.0f), FLT_MAX);
  EXPECT_EQ(current_scale(1e-40f, 448.0f, true, 0.0f), std::ldexp(1.0f, 127));
  // The epsilon floor: an amax below it (0 included) is raised to it.
  EXPECT_EQ(current_scale(0.0f, 448.0f, false, 0.5f), 896.0f);
  EXPECT_EQ(current_scale(0.25f, 448.0f, false, 0.5f), 896.0f);
  EXPECT_EQ(current_scale(2.0f, 448.0f, false, 0.5f), 224.0f);
}

TEST(Fp8CurrentScaling, CastBytesAndScaleMatchTheFormula) {
  std::mt19937 rng(7);
  std::normal_distribution<float> nd(0.0f, 2.0f);
  std::vector<float> v(257);
  for (float& x : v) x = nd(rng);
  v[3] = 0.0f;
  v[4] = -0.0f;
  float amax = 0.0f;
  for (float x : v) amax = std::max(amax, std::fabs(x));
  for (DType fp8 : {kFloat8_e4m3fn, kFloat8_e5m2})
    for (bool p2 : {false, true}) check_cast(v, amax, fp8, p2);
}

TEST(Fp8CurrentScaling, EdgeCases) {
  for (DType fp8 : {kFloat8_e4m3fn, kFloat8_e5m2}) {
    for (bool p2 : {false, true}) {
      check_cast({0.0f, -0.0f, 0.0f}, 0.0f, fp8, p2);              // amax 0: scale 1
      check_cast({1.0f, -kInf, 2.0f}, kInf, fp8, p2);              // inf: scale 1, saturates
      check_cast({1.5f, kNaN, -3.0f, 0.25f}, 3.0f, fp8, p2);       // NaN passed over
      check_cast({kNaN, kNaN}, 0.0f, fp8, p2);                     // only NaN: amax 0
      check_cast({448.0f, -100.0f, 1.0f}, 448.0f, fp8, p2);        // at E4M3's max
      check_cast({57344.0f, 3.0f}, 57344.0f, fp8, p2);             // at E5M2's max
      check_cast({1e6f, -2.0f, 7.0f}, 1e6f, fp8, p2);              // beyond both
      check_cast({1e-40f, -5e-41f, 0.0f}, 1e-40f, fp8, p2);        // subnormal amax
      check_cast({3e-39f, 1.2e-38f, -1e-39f}, 1.2e-38f, fp8, p2);  // near FLT_MIN
    }
  }
}

TEST(Fp8CurrentScaling, AmaxOfHalfTensorsIsExact) {
  const Tensor x = tensor(std::vector<float>{0.5f, -3.25f, kNaN, 1e-3f}, {4});
  EXPECT_EQ(tensor_amax(x.to(kBFloat16)), 3.25f);
  EXPECT_EQ(tensor_amax(x.to(kFloat16)), 3.25f);
  const Tensor inf = tensor(std::vector<float>{0.5f, -kInf}, {2});
  EXPECT_EQ(tensor_amax(inf.to(kBFloat16)), kInf);
  EXPECT_EQ(tensor_amax(inf.to(kFloat16)), kInf);
  EXPECT_EQ(tensor_amax(zeros({0}, kFloat32)), 0.0f);
  // A large tensor (the threaded path): the largest magnitude wherever it is.
  Tensor big = zeros({200003}, kFloat32);
  big.data<float>()[123457] = -9.5f;
  big.data<float>()[5] = kNaN;
  EXPECT_EQ(tensor_amax(big), 9.5f);
}

TEST(Fp8CurrentScaling, RecipeNamesChecksAndJson) {
  EXPECT_EQ(recipe_kind_from_string("current"), RecipeKind::kCurrent);
  EXPECT_EQ(recipe_kind_from_string("Delayed"), RecipeKind::kDelayed);
  try {
    recipe_kind_from_string("curent");
    FAIL() << "no error";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("unknown fp8 recipe 'curent' (did you mean 'current'?)"), std::string::npos)
        << m;
    EXPECT_NE(
        m.find("valid recipes are: delayed, current, rowwise, rowwise-gw-hp, block, mxfp8, mxfp4"),
        std::string::npos)
        << m;
  }
  Recipe r = current_recipe(true, Format::kE4M3);
  EXPECT_EQ(Recipe::from_json(r.to_json()), r);
  EXPECT_EQ(r.to_json().at("recipe"), "current");
  EXPECT_FALSE(r.to_json().contains("amax_history_len"));
  EXPECT_EQ(r.to_string(),
            "Float8CurrentScaling(fp8_format=E4M3, use_power_2_scales=true, amax_epsilon=0)");
  EXPECT_EQ(r.history_rows(), 1);
  EXPECT_EQ(Recipe{}.history_rows(), 1024);
  EXPECT_EQ(Recipe::from_json({{"fp8_format", "E4M3"}}).kind, RecipeKind::kDelayed);
  // Delayed-only fields under current, current-only ones under delayed: refused by name.
  Recipe bad = current_recipe();
  bad.margin = 2;
  EXPECT_THROW(bad.validate(), Error);
  bad = current_recipe();
  bad.amax_history_len = 16;
  EXPECT_THROW(bad.validate(), Error);
  Recipe delayed_p2;
  delayed_p2.use_power_2_scales = true;
  try {
    delayed_p2.validate();
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("applies to the current and rowwise-gw-hp recipes only"),
              std::string::npos)
        << e.what();
  }
  // The checkpoint's recipe against the run's, naming both.
  const std::string m = recipe_mismatch(current_recipe(), Recipe{});
  EXPECT_NE(m.find("the FP8 recipe 'current' (Float8CurrentScaling("), std::string::npos) << m;
  EXPECT_NE(m.find("this run uses 'delayed' (DelayedScaling("), std::string::npos) << m;
  EXPECT_NE(m.find("resume with --fp8-recipe current"), std::string::npos) << m;
}

Tensor randn_tensor(const Shape& shape, float stddev, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.0f, stddev);
  std::vector<float> v(static_cast<size_t>(numel_of(shape)));
  for (auto& x : v) x = nd(rng);
  return tensor(v, shape);
}

float amax_of(const Tensor& t) {
  float a = 0.0f;
  for (float v : t.contiguous().to_vector<float>()) a = std::max(a, std::fabs(v));
  return a;
}

// The dequantized current-scaled copy of t, from the independent expectation above.
Tensor expected_dequantized(const Tensor& t, bool e4m3) {
  const float scale = expected_scale(amax_of(t), e4m3 ? 448.0f : 57344.0f);
  std::vector<float> v = t.contiguous().to_vector<float>();
  for (float& x : v)
    x = static_cast<float>(decode(expected_code(x * scale, e4m3), e4m3)) * (1.0f / scale);
  return tensor(v, t.shape());
}

TEST(Fp8CurrentScaling, LinearScalesEachTensorFromItsOwnAmax) {
  manual_seed(3);
  Linear layer(24, 12, true, kFloat32, 1);
  const Tensor x = randn_tensor({10, 24}, 3.0f, 11);
  const Tensor g = randn_tensor({10, 12}, 1e-3f, 12);
  Tensor xin = x.detach();
  xin.requires_grad_(true);
  Tensor y;
  {
    Fp8Autocast ac(true, current_recipe());
    y = layer(xin);
    y = layer(xin);  // a second forward: the weight's cast comes from the cache
  }
  EXPECT_EQ(layer.weight_cache().hits, 1);
  sum(mul(y, g)).backward();
  const ScalingState& st = *layer.fp8_state();
  EXPECT_EQ(st.scale_of(0), expected_scale(amax_of(x), 448.0f));
  EXPECT_EQ(st.scale_of(1), expected_scale(amax_of(layer.weight), 448.0f));
  EXPECT_EQ(st.scale_of(2), expected_scale(amax_of(g), 57344.0f));  // HYBRID: E5M2 gradients
  EXPECT_EQ(st.current_amax(2), amax_of(g));
  EXPECT_EQ(st.history_len(), 1);
  // The forward is the product of the two dequantized operands (fp32 accumulation).
  const Tensor xq = expected_dequantized(x, true), wq = expected_dequantized(layer.weight, true);
  const Tensor ref = add(matmul(xq, wq.t()), layer.bias.detach());
  const std::vector<float> got = y.detach().to_vector<float>(), want = ref.to_vector<float>();
  for (size_t i = 0; i < got.size(); ++i)
    EXPECT_NEAR(got[i], want[i], 1e-5f * (1.0f + std::fabs(want[i]))) << i;
  // The input gradient is Q(g) @ Q(W).
  const Tensor gq = expected_dequantized(g, false);
  const std::vector<float> dx = xin.grad().to_vector<float>(),
                           dx_ref = matmul(gq, wq).to_vector<float>();
  for (size_t i = 0; i < dx.size(); ++i)
    EXPECT_NEAR(dx[i], dx_ref[i], 1e-5f * (1e-3f + std::fabs(dx_ref[i]))) << i;
}

TEST(Fp8CurrentScaling, AmaxGoesThroughTheRankReducer) {
  // A reducer standing in for the other ranks: their amax is 4 times this rank's.
  set_amax_reducer([](float* a, int64_t n) {
    for (int64_t i = 0; i < n; ++i) a[i] *= 4.0f;
  });
  const Tensor x = tensor(std::vector<float>{1.0f, -2.0f, 0.5f}, {3});
  ScalingState state(kNumRoles, 1);
  quantize_current(x, kFloat8_e4m3fn, state, 0, current_recipe());
  set_amax_reducer(nullptr);
  EXPECT_EQ(state.current_amax(0), 8.0f);
  EXPECT_EQ(state.scale_of(0), 56.0f);  // 448 / 8
}

TEST(Fp8CurrentScaling, TrainingConvergesAndDiffersFromDelayed) {
  const std::vector<float> current = train_losses({{"fp8_recipe", "current"}});
  const std::vector<float> delayed = train_losses({{"fp8_recipe", "delayed"}});
  using testing_fixture::mean_loss;
  std::printf("current: first %.4f last %.4f; delayed: first %.4f last %.4f\n",
              mean_loss(current, 0, 5), mean_loss(current, 55, 60), mean_loss(delayed, 0, 5),
              mean_loss(delayed, 55, 60));
  EXPECT_LT(mean_loss(current, 55, 60), 0.2 * mean_loss(current, 0, 5));
  // Step 1 differs already: delayed scaling casts with scale 1 before any amax is seen.
  EXPECT_NE(current[0], delayed[0]);
  EXPECT_NE(current, delayed);
}

}  // namespace
}  // namespace mantissa::fp8
