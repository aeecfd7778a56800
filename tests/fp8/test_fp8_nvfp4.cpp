// The nvfp4 recipe (TransformerEngine's NVFP4BlockScaling): the layer's three products against a
// reference composed here of the format table's NVFP4 casts (formats::quantize_nvfp4, held to
// torchao's bytes by tests/formats), the random Hadamard transform (tests/kernels/
// test_hadamard.cpp) and a float64 product of the dequantized operands; each disable_* switch
// changes its own product only; the stochastic rounding stream is reproducible from its seed
// and restored by the plugin's state; the statistics; training converges; the recipe's checks.
#include <gtest/gtest.h>

#include "fp8/fp8_training_fixture.h"

#include <bit>
#include <cmath>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "kernels/cpu/mx/hadamard.h"
#include "mantissa/core/warning.h"
#include "mantissa/formats/block_formats.h"
#include "mantissa/fp8/autocast.h"
#include "mantissa/fp8/linear.h"
#include "mantissa/fp8/nvfp4_scaling.h"
#include "mantissa/mantissa.h"
#include "mantissa/train/precisions/transformer_engine_precision.h"
#include "support/test_util.h"

namespace mantissa::fp8 {
namespace {

using testing_fixture::mean_loss;
using testing_fixture::normal_tensor;
using testing_fixture::train_losses;
using namespace mantissa::testing;

constexpr int64_t kM = 200, kIn = 150, kOut = 130;  // 200 tokens: RHT pads to 208
constexpr uint64_t kSeed = 1234;

Recipe nvfp4_recipe(bool no_rht = false, bool no_sr = false, bool no_2d = false) {
  Recipe r;
  r.kind = RecipeKind::kNvfp4;
  r.disable_rht = no_rht;
  r.disable_stochastic_rounding = no_sr;
  r.disable_2d_quantization = no_2d;
  return r;
}

// A matrix in float64 of what the format table's NVFP4 cast of `x` (rows x cols, float32) makes.
struct Dq {
  int64_t rows, cols;
  std::vector<double> v;
};
Dq cast_ref(const std::vector<float>& x, int64_t rows, int64_t cols, bool tiles, bool sr,
            uint64_t offset) {
  formats::Nvfp4Options o;
  o.tiles_16x16 = tiles;
  o.stochastic = sr;
  o.seed = kSeed;
  o.offset = offset;
  const std::vector<float> d =
      formats::dequantize(formats::quantize_nvfp4(std::span<const float>(x), rows, cols, o));
  return {rows, cols, std::vector<double>(d.begin(), d.end())};
}
std::vector<float> transposed(const std::vector<float>& x, int64_t rows, int64_t cols) {
  std::vector<float> t(x.size());
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) t[c * rows + r] = x[r * cols + c];
  return t;
}
// x^T, through the random Hadamard transform along x's rows (zero-padded to whole blocks).
std::vector<float> rht_t(const std::vector<float>& x, int64_t rows, int64_t cols) {
  std::vector<float> t(static_cast<size_t>(cols * kernels::mx::rht_padded(rows)));
  kernels::mx::rht_transpose(x.data(), kFloat32, rows, cols, t.data());
  return t;
}

// Checks got = a @ b^T (+ bias) within the fp32 accumulation bound of the float64 product.
void expect_product(const std::vector<float>& got, const Dq& a, const Dq& b,
                    const std::vector<float>& bias, const char* what) {
  ASSERT_EQ(a.cols, b.cols) << what;
  ASSERT_EQ(got.size(), static_cast<size_t>(a.rows * b.rows)) << what;
  const double u = std::ldexp(1.0, -24), g = (static_cast<double>(a.cols) + 3) * u;
  for (int64_t i = 0; i < a.rows; ++i)
    for (int64_t j = 0; j < b.rows; ++j) {
      double ref = bias.empty() ? 0.0 : bias[static_cast<size_t>(j)], mag = std::fabs(ref);
      for (int64_t k = 0; k < a.cols; ++k) {
        const double p =
            a.v[static_cast<size_t>(i * a.cols + k)] * b.v[static_cast<size_t>(j * b.cols + k)];
        ref += p;
        mag += std::fabs(p);
      }
      ASSERT_LE(std::fabs(got[static_cast<size_t>(i * b.rows + j)] - ref), g * mag + 1e-30)
          << what << " at " << i << "," << j;
    }
}

struct LayerRun {
  std::vector<float> y, dx, dw, db;
  SrStream stream_after;
};

// One forward and backward of a float32 layer (kIn -> kOut) under `recipe`, the stream at
// (kSeed, 0); the upstream gradient is g.
LayerRun run_layer(const Recipe& recipe, Linear& layer, const Tensor& x, const Tensor& g) {
  nvfp4_sr_stream() = {kSeed, 0};
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

std::vector<uint32_t> bits(const std::vector<float>& v) {
  std::vector<uint32_t> b(v.size());
  for (size_t i = 0; i < v.size(); ++i) b[i] = std::bit_cast<uint32_t>(v[i]);
  return b;
}

class Nvfp4Layer : public ::testing::Test {
 protected:
  void SetUp() override {
    manual_seed(4);
    layer = std::make_unique<Linear>(kIn, kOut, true, kFloat32, 1);
    x = normal_tensor({kM, kIn}, 3.0f, 11);
    g = normal_tensor({kM, kOut}, 0.01f, 12);
    // An outlier column, which the transform spreads over its block.
    for (int64_t m = 0; m < kM; m += 7) x.data<float>()[m * kIn + 5] = 80.0f;
    xv = x.to_vector<float>();
    gv = g.to_vector<float>();
    wv = layer->weight.detach().to_vector<float>();
    bv = layer->bias.detach().to_vector<float>();
  }
  // The reference products of `recipe`: y, dx, dW.
  void expect_recipe(const Recipe& r, const LayerRun& got) {
    const bool tiles = !r.disable_2d_quantization, sr = !r.disable_stochastic_rounding;
    const Dq qx = cast_ref(xv, kM, kIn, false, false, 0);
    const Dq qw = cast_ref(wv, kOut, kIn, tiles, false, 0);
    expect_product(got.y, qx, qw, bv, "y");
    // dx = Q(dy) @ Q(W^T)^T; dy takes the stream's offset 0, dy^T (below) offset 1.
    const Dq qdy = cast_ref(gv, kM, kOut, false, sr, 0);
    const Dq qwt = cast_ref(transposed(wv, kOut, kIn), kIn, kOut, tiles, false, 0);
    expect_product(got.dx, qdy, qwt, {}, "dx");
    const int64_t k = r.disable_rht ? kM : kernels::mx::rht_padded(kM);
    const Dq qdyt = cast_ref(r.disable_rht ? transposed(gv, kM, kOut) : rht_t(gv, kM, kOut), kOut,
                             k, false, sr, sr ? 1 : 0);
    const Dq qxt = cast_ref(r.disable_rht ? transposed(xv, kM, kIn) : rht_t(xv, kM, kIn), kIn, k,
                            false, false, 0);
    expect_product(got.dw, qdyt, qxt, {}, "dW");
    EXPECT_EQ(got.stream_after.offset, sr ? 2u : 0u);
  }
  std::unique_ptr<Linear> layer;
  Tensor x, g;
  std::vector<float> xv, gv, wv, bv;
};

TEST_F(Nvfp4Layer, ForwardAndGradientsFollowTheRecipe) {
  const LayerRun r = run_layer(nvfp4_recipe(), *layer, x, g);
  expect_recipe(nvfp4_recipe(), r);
  // db is the column sum of dy, in high precision.
  const auto gs = sum(g, {0}).to_vector<float>();
  for (size_t j = 0; j < r.db.size(); ++j) EXPECT_NEAR(r.db[j], gs[j], 1e-5f);
  // An FP4 product, not the fp32 one.
  const auto y32 = add(matmul(x, layer->weight.detach().t()), layer->bias.detach());
  double diff = 0;
  const auto y32v = y32.to_vector<float>();
  for (size_t i = 0; i < r.y.size(); ++i)
    diff = std::max(diff, std::fabs(double(r.y[i]) - y32v[i]));
  EXPECT_GT(diff, 1e-2);
}

TEST_F(Nvfp4Layer, EachSwitchChangesItsOwnProductOnly) {
  const LayerRun base = run_layer(nvfp4_recipe(), *layer, x, g);
  // disable_rht: dW without the transform; y and dx as before.
  const LayerRun no_rht = run_layer(nvfp4_recipe(true), *layer, x, g);
  expect_recipe(nvfp4_recipe(true), no_rht);
  EXPECT_EQ(bits(no_rht.y), bits(base.y));
  EXPECT_EQ(bits(no_rht.dx), bits(base.dx));
  EXPECT_NE(bits(no_rht.dw), bits(base.dw));
  // disable_stochastic_rounding: the gradients round to nearest; y as before; no draws.
  const LayerRun no_sr = run_layer(nvfp4_recipe(false, true), *layer, x, g);
  expect_recipe(nvfp4_recipe(false, true), no_sr);
  EXPECT_EQ(bits(no_sr.y), bits(base.y));
  EXPECT_NE(bits(no_sr.dx), bits(base.dx));
  EXPECT_NE(bits(no_sr.dw), bits(base.dw));
  // disable_2d_quantization: the weight in 1x16 blocks (y and dx); dW as before.
  const LayerRun no_2d = run_layer(nvfp4_recipe(false, false, true), *layer, x, g);
  expect_recipe(nvfp4_recipe(false, false, true), no_2d);
  EXPECT_NE(bits(no_2d.y), bits(base.y));
  EXPECT_NE(bits(no_2d.dx), bits(base.dx));
  EXPECT_EQ(bits(no_2d.dw), bits(base.dw));
}

TEST_F(Nvfp4Layer, StochasticRoundingRepeatsFromTheSeedOnly) {
  const LayerRun a = run_layer(nvfp4_recipe(), *layer, x, g);
  const LayerRun b = run_layer(nvfp4_recipe(), *layer, x, g);
  EXPECT_EQ(bits(a.dx), bits(b.dx));
  EXPECT_EQ(bits(a.dw), bits(b.dw));
  // Another offset (the next step's) draws other numbers.
  nvfp4_sr_stream() = {kSeed, 2};
  Tensor xin = x.detach();
  xin.requires_grad_(true);
  layer->zero_grad();
  Tensor y;
  {
    Fp8Autocast ac(true, nvfp4_recipe());
    y = (*layer)(xin);
  }
  sum(mul(y, g)).backward();
  EXPECT_NE(bits(xin.grad().to_vector<float>()), bits(a.dx));
  EXPECT_EQ(nvfp4_sr_stream().offset, 4u);
}

// A 16x16 tile's codes read the other way are W^T's: both orientations hold the same numbers.
TEST_F(Nvfp4Layer, TilesGiveTheSameNumbersInBothOrientations) {
  const Dq w = cast_ref(wv, kOut, kIn, true, false, 0);
  const Dq wt = cast_ref(transposed(wv, kOut, kIn), kIn, kOut, true, false, 0);
  for (int64_t r = 0; r < kOut; ++r)
    for (int64_t c = 0; c < kIn; ++c)
      ASSERT_EQ(w.v[static_cast<size_t>(r * kIn + c)], wt.v[static_cast<size_t>(c * kOut + r)]);
  // 1x16 blocks do not.
  const Dq w1 = cast_ref(wv, kOut, kIn, false, false, 0);
  const Dq wt1 = cast_ref(transposed(wv, kOut, kIn), kIn, kOut, false, false, 0);
  int differ = 0;
  for (int64_t r = 0; r < kOut; ++r)
    for (int64_t c = 0; c < kIn; ++c)
      differ += w1.v[static_cast<size_t>(r * kIn + c)] != wt1.v[static_cast<size_t>(c * kOut + r)];
  EXPECT_GT(differ, 0);
}

// A value flushed to -0 counts as flushed as one flushed to +0 does, in full 1x16 blocks (the
// AVX2 loop on CPUs that have it, reading the packed codes) and in a short one (the plain loop).
TEST(Nvfp4, NegativeValuesFlushedToMinusZeroAreCounted) {
  std::vector<float> v(40, 0.0f);
  v[0] = 1000.0f;
  v[1] = -1e-6f;
  v[2] = 1e-6f;
  v[32] = 1000.0f;
  v[33] = -1e-6f;  // the short last block
  for (const DType dt : {kFloat32, kBFloat16}) {
    const Nvfp4Tensor q = quantize_nvfp4(tensor(v, {1, 40}).to(dt), {});
    EXPECT_EQ(q.counts.flushed, 3) << dt.name();
    EXPECT_EQ(q.counts.total, 40);
    EXPECT_EQ(q.amax, 1000.0f);
  }
}

TEST_F(Nvfp4Layer, StatisticsOfTheLastCasts) {
  run_layer(nvfp4_recipe(), *layer, x, g);
  ScalingState& st = *layer->fp8_state();
  float xa = 0, ga = 0;
  for (float v : xv) xa = std::max(xa, std::fabs(v));
  for (float v : gv) ga = std::max(ga, std::fabs(v));
  EXPECT_EQ(st.current_amax(0), xa);
  EXPECT_EQ(st.current_amax(2), ga);
  // The per-tensor encode scale: 448 * 6 / amax.
  EXPECT_NEAR(st.scale_of(0), 2688.0f / xa, 1e-6f * 2688.0f / xa);
  const CastCounts cx = st.take_counts(0);
  EXPECT_EQ(cx.total, kM * kIn);
  // 1x16 blocks of N(0, 3) values beside 80-outliers of the tensor: nothing saturates beyond
  // the E4M3 rounding of the block scales, and small values flush in the outliers' blocks.
  EXPECT_GT(cx.flushed, 0);
  EXPECT_LE(cx.saturated, cx.total / 16);
  EXPECT_GT(cx.peak, 0.9);
}

TEST(Nvfp4, TrainingConverges) {
  const std::vector<float> l = train_losses({{"fp8_recipe", "nvfp4"}});
  for (float v : l) EXPECT_TRUE(std::isfinite(v));
  EXPECT_LT(mean_loss(l, 55, 60), 0.3 * mean_loss(l, 0, 5));
  EXPECT_NE(l, train_losses({{"fp8_recipe", "nvfp4"}, {"fp8_disable_rht", "true"}}));
  EXPECT_NE(l,
            train_losses({{"fp8_recipe", "nvfp4"}, {"fp8_disable_stochastic_rounding", "true"}}));
  EXPECT_NE(l, train_losses({{"fp8_recipe", "nvfp4"}, {"fp8_disable_2d_quantization", "true"}}));
  // The same seed, the same run.
  EXPECT_EQ(l, train_losses({{"fp8_recipe", "nvfp4"}}));
}

TEST(Nvfp4, PluginStateCarriesTheStream) {
  train::TransformerEnginePrecision te(
      "transformer-engine", train::transformer_engine_options_from({{"fp8_recipe", "nvfp4"}}));
  nn::Sequential model;
  model.push_back(std::make_shared<nn::Linear>(16, 16));
  manual_seed(77);
  te.convert_module(model);
  EXPECT_EQ(nvfp4_sr_stream(), (SrStream{77, 0}));
  nvfp4_sr_stream().offset = 41;
  const nlohmann::json s = te.state_dict();
  EXPECT_EQ(s.at("sr_stream").at("seed"), 77u);
  EXPECT_EQ(s.at("sr_stream").at("offset"), 41u);
  EXPECT_EQ(s.at("sr_stream").at("bits_per_element"), 8u);  // philox.h's sr_byte
  EXPECT_EQ(s.at("recipe").at("recipe"), "nvfp4");
  nvfp4_sr_stream() = {};
  {
    WarningRecorder warnings;
    te.load_state_dict(s);
    EXPECT_TRUE(warnings.messages().empty());
  }
  EXPECT_EQ(nvfp4_sr_stream(), (SrStream{77, 41}));
  nlohmann::json bad = s;
  bad["sr_stream"]["offset"] = -1;
  expect_error([&] { te.load_state_dict(bad); }, "must be an object with the unsigned integers");
  EXPECT_EQ(nvfp4_sr_stream(), (SrStream{77, 41}));
}

// A stream written by a build that drew a 32-bit word per element (no bits_per_element) still
// loads and resumes from its seed and offset, with one warning that the draws differ from that
// build's; another draw than 8 bits is refused before anything changes.
TEST(Nvfp4, PluginStateFromTheWordPerElementBuildLoadsWithAWarning) {
  train::TransformerEnginePrecision te(
      "transformer-engine", train::transformer_engine_options_from({{"fp8_recipe", "nvfp4"}}));
  nn::Sequential model;
  model.push_back(std::make_shared<nn::Linear>(16, 16));
  manual_seed(78);
  te.convert_module(model);
  nvfp4_sr_stream().offset = 12;
  nlohmann::json old = te.state_dict();
  old["sr_stream"].erase("bits_per_element");
  nvfp4_sr_stream() = {};
  {
    WarningRecorder warnings;
    te.load_state_dict(old);
    ASSERT_EQ(warnings.messages().size(), 1u);
    EXPECT_NE(warnings.messages()[0].find("32-bit random word per element"), std::string::npos)
        << warnings.messages()[0];
    EXPECT_NE(warnings.messages()[0].find("draws 8 bits per element"), std::string::npos);
  }
  EXPECT_EQ(nvfp4_sr_stream(), (SrStream{78, 12}));
  for (const nlohmann::json& value :
       {nlohmann::json(32), nlohmann::json(-8), nlohmann::json("8")}) {
    nlohmann::json bad = te.state_dict();
    bad["sr_stream"]["offset"] = 99u;
    bad["sr_stream"]["bits_per_element"] = value;
    expect_error([&] { te.load_state_dict(bad); }, "bits_per_element is");
    EXPECT_EQ(nvfp4_sr_stream(), (SrStream{78, 12}));  // unchanged
  }
}

TEST(Nvfp4, RecipeSettings) {
  const Recipe r = nvfp4_recipe();
  EXPECT_EQ(recipe_kind_from_string("NVFP4"), RecipeKind::kNvfp4);
  EXPECT_STREQ(recipe_class_name(RecipeKind::kNvfp4), "NVFP4BlockScaling");
  EXPECT_EQ(r.history_rows(), 1);
  EXPECT_EQ(r.to_string(),
            "NVFP4BlockScaling(fp4_format=E2M1, fp8_format=E4M3, disable_rht=false, "
            "disable_stochastic_rounding=false, disable_2d_quantization=false)");
  const Recipe all = nvfp4_recipe(true, true, true);
  EXPECT_EQ(Recipe::from_json(all.to_json()), all);
  EXPECT_EQ(train::transformer_engine_options_from({{"fp8_recipe", "nvfp4"},
                                                    {"fp8_disable_rht", "true"},
                                                    {"fp8_disable_stochastic_rounding", "true"},
                                                    {"fp8_disable_2d_quantization", "true"}})
                .recipe,
            all);
  Recipe block;
  block.kind = RecipeKind::kBlock;
  block.disable_rht = true;
  expect_error([&] { block.validate(); },
               "disable_rht (--fp8-disable-rht) applies to the nvfp4 recipe only");
  Recipe delayed;
  delayed.disable_2d_quantization = true;
  expect_error([&] { delayed.validate(); }, "--fp8-disable-2d-quantization) applies to the nvfp4");
  Recipe fmt = r;
  fmt.fp8_format = Format::kE4M3;
  expect_error([&] { fmt.validate(); }, "the nvfp4 recipe casts every tensor to E2M1");
  Recipe eps = r;
  eps.amax_epsilon = 1e-3f;
  expect_error([&] { eps.validate(); }, "per-tensor scale is amax / (448 * 6)");
  expect_error(
      [&] {
        train::transformer_engine_options_from({{"fp8_disable_rht", "yes"}});
      },
      "fp8_disable_rht must be 'true' or 'false'");
}

}  // namespace
}  // namespace mantissa::fp8
