// fp8::Linear, LayerNorm and LayerNormLinear: exact match with an emulation reference built
// from dequantised operands, closeness to the fp32 layer within FP8 precision, gradients vs
// finite differences, delayed scale updates over steps, weight-cast caching, NaN handling,
// odd shapes and state-dict resume.
#include "mantissa/fp8/linear.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "mantissa/autograd/grad_mode.h"
#include "mantissa/fp8/autocast.h"
#include "mantissa/fp8/layer_norm.h"
#include "mantissa/fp8/tensor.h"
#include "mantissa/kernels/kernel_paths.h"
#include "mantissa/nn/functional.h"
#include "mantissa/ops/elementwise.h"
#include "mantissa/ops/layer_norm.h"
#include "mantissa/ops/matmul.h"
#include "mantissa/ops/reduce.h"

namespace mantissa::fp8 {
namespace {

Tensor randn(const Shape& shape, float stddev, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.0f, stddev);
  std::vector<float> v(static_cast<size_t>(numel_of(shape)));
  for (auto& x : v) x = nd(rng);
  return tensor(v, shape);
}

void set_scales(ScalingState& s, float x, float w, float dy) {
  s.scale.data<float>()[0] = x;
  s.scale.data<float>()[1] = w;
  s.scale.data<float>()[2] = dy;
}

// Runs forward and backward of `layer` on x with upstream gradient g inside fp8 autocast.
struct LayerRun {
  Tensor y, dx, dw, db;
};
LayerRun run(Linear& layer, const Tensor& x_in, const Tensor& g,
             const DelayedScaling& recipe = {}) {
  Tensor x = x_in.detach();
  x.requires_grad_(true);
  layer.zero_grad();
  Tensor y;
  {
    Fp8Autocast ac(true, recipe);
    y = layer(x);
  }
  sum(mul(y, g)).backward();
  return {y.detach(), x.grad(), layer.weight.grad(),
          layer.bias.defined() ? layer.bias.grad() : Tensor()};
}

Tensor dq(const Tensor& t, DType f8, float scale) { return dequantize(quantize(t, f8, scale).q); }

// `got` (M, N) is an fp32 accumulation of the exact products a (M, K) @ b (K, N) plus bias: with
// power-of-two scales every product and the scaling are exact, so only the summation order can
// move a result, and by at most (K + 1) * 2^-24 * (sum |a_ik b_kj| + |bias_j|) from the fp64
// sum. Where the products run on the fp32 GEMM (no native bf16 dot products) the order is
// that GEMM's, and the bits must equal matmul's.
void expect_fp32_sum_of_exact_products(const Tensor& got, const Tensor& a, const Tensor& b,
                                       const Tensor& bias = Tensor()) {
  const int64_t M = a.size(0), K = a.size(1), N = b.size(1);
  const std::vector<float> g = got.reshape({M, N}).to_vector<float>();
  const std::vector<float> av = a.contiguous().to_vector<float>(),
                           bv = b.contiguous().to_vector<float>();
  const std::vector<float> biasv = bias.defined() ? bias.to_vector<float>() : std::vector<float>();
  for (int64_t i = 0; i < M; ++i) {
    for (int64_t j = 0; j < N; ++j) {
      double ref = biasv.empty() ? 0.0 : biasv[j], mag = std::fabs(ref);
      for (int64_t k = 0; k < K; ++k) {
        const double p = static_cast<double>(av[i * K + k]) * bv[k * N + j];
        ref += p;
        mag += std::fabs(p);
      }
      ASSERT_LE(std::fabs(g[i * N + j] - ref), (K + 1) * std::ldexp(mag, -24))
          << "element (" << i << ", " << j << ")";
    }
  }
  if (!has_native_bf16()) {
    const Tensor ref = bias.defined() ? add(matmul(a, b), bias) : matmul(a, b);
    EXPECT_EQ(got.reshape({M, N}).to_vector<float>(), ref.to_vector<float>());
  }
}

TEST(Fp8Linear, ExactlyTheEmulationReferenceWithPowerOfTwoScales) {
  Linear layer(48, 24, true, kFloat32, 8);
  const Tensor x = randn({6, 5, 48}, 1.5f, 1), g = randn({6, 5, 24}, 0.01f, 2);
  set_scales(*layer.fp8_state(), 64.0f, 1024.0f, 65536.0f);
  const LayerRun r = run(layer, x, g);

  const Tensor x2 = x.reshape({30, 48}), g2 = g.reshape({30, 24});
  const Tensor qx = dq(x2, kFloat8_e4m3fn, 64.0f);
  const Tensor qw = dq(layer.weight.detach(), kFloat8_e4m3fn, 1024.0f);
  const Tensor qg = dq(g2, kFloat8_e5m2, 65536.0f);
  expect_fp32_sum_of_exact_products(r.y, qx, qw.t(), layer.bias.detach());
  expect_fp32_sum_of_exact_products(r.dx, qg, qw);
  expect_fp32_sum_of_exact_products(r.dw, qg.t(), qx);
  EXPECT_EQ(r.db.to_vector<float>(), sum(g2, {0}).to_vector<float>());
}

TEST(Fp8Linear, E4M3RecipeCastsGradientsToE4M3) {
  Linear layer(16, 8, false, kFloat32, 4);
  const Tensor x = randn({4, 16}, 1.0f, 3), g = randn({4, 8}, 1.0f, 4);
  DelayedScaling e4;
  e4.fp8_format = Format::kE4M3;
  e4.amax_history_len = 4;
  const LayerRun r = run(layer, x, g, e4);
  const Tensor qg = dq(g, kFloat8_e4m3fn, 1.0f), qw = dq(layer.weight.detach(), kFloat8_e4m3fn, 1);
  EXPECT_EQ(r.dx.to_vector<float>(), matmul(qg, qw).to_vector<float>());
}

// Against the fp32 layer: each operand carries at most half an FP8 ulp of relative error
// (2^-4 for E4M3, 2^-3 for E5M2) once scaled into the normal range, so a product term is off
// by at most about (2^-4 + 2^-4) (forward) or (2^-3 + 2^-4) (backward) of its magnitude.
TEST(Fp8Linear, CloseToFp32WithinFp8Precision) {
  Linear layer(64, 32, true, kFloat32, 16);
  const Tensor x = randn({20, 64}, 2.0f, 5), g = randn({20, 32}, 1e-3f, 6);
  run(layer, x, g);  // step 1 runs at scale 1 and sets the scales from the amaxes
  const LayerRun r = run(layer, x, g);
  const Tensor w = layer.weight.detach();
  const Tensor y32 = nn::functional::linear(x, w, layer.bias.detach());
  const Tensor dx32 = matmul(g, w), dw32 = matmul(g.t(), x);
  // Values far below the amax land in the subnormal range, where the error is absolute: at
  // most half a quantum (2^-10 of E4M3, relative to 448) times the other operand, per term.
  auto check = [](const Tensor& got, const Tensor& want, const Tensor& a, const Tensor& b,
                  double rel) {
    const Tensor mag = matmul(abs(a), abs(b));  // sum_k |a_ik| |b_kj|
    const double k = static_cast<double>(a.size(1));
    const double amax_a = max(abs(a)).item<double>(), amax_b = max(abs(b)).item<double>();
    const double abs_tol = k * std::ldexp(1.0, -10) * 2 * amax_a * amax_b / 448.0;
    const auto gv = got.to_vector<float>(), wv = want.to_vector<float>(),
               mv = mag.to_vector<float>();
    for (size_t i = 0; i < gv.size(); ++i) {
      ASSERT_LE(std::fabs(gv[i] - wv[i]), rel * mv[i] + abs_tol) << i;
    }
  };
  const double fwd = (std::ldexp(1.0, -3) + std::ldexp(1.0, -8)) * 1.01;
  const double bwd = (std::ldexp(1.0, -3) + std::ldexp(1.0, -4) + std::ldexp(1.0, -7)) * 1.01;
  check(r.y, y32, x, w.t(), fwd);
  check(r.dx, dx32, g, w, bwd);
  check(r.dw, dw32, g.t(), x, bwd);
}

// Finite differences of the smooth function the FP8 layer approximates (quantisation makes
// the emulated function piecewise constant in x, so its own differences are zero or jumps).
// Relative error of one product of an E5M2 and an E4M3 value (half an ulp each), plus the
// scaled-tensor saturation headroom being exact: (1 + 2^-3)(1 + 2^-4) - 1.
constexpr double kFp8ProductError = 0.125 + 0.0625 + 0.125 * 0.0625;

TEST(Fp8Linear, GradientsMatchFiniteDifferences) {
  Linear layer(8, 4, true, kFloat32, 4);
  const Tensor x = randn({3, 8}, 1.0f, 7), g = randn({3, 4}, 1.0f, 8);
  run(layer, x, g);
  const LayerRun r = run(layer, x, g);
  auto loss = [&](const Tensor& xx, const Tensor& ww) {
    return sum(mul(nn::functional::linear(xx.to(kFloat64), ww.to(kFloat64),
                                          layer.bias.detach().to(kFloat64)),
                   g.to(kFloat64)))
        .item();
  };
  const double h = 1e-3;
  const Tensor w = layer.weight.detach().clone();
  for (int64_t i = 0; i < x.numel(); ++i) {
    Tensor xp = x.clone(), xm = x.clone();
    xp.data<float>()[i] += static_cast<float>(h);
    xm.data<float>()[i] -= static_cast<float>(h);
    const double fd = (loss(xp, w) - loss(xm, w)) / (2 * h);
    // dx[b][k] = sum_o g[b][o] w[o][k] on FP8 operands: each product is off by at most the
    // two operands' relative rounding (E5M2 gradient 2^-3, E4M3 weight 2^-4), so the bound is
    // that times sum |g||w| (cancellation makes a relative bound on the sum meaningless).
    const int64_t b = i / 8, k = i % 8;
    double mag = 0;
    for (int64_t o = 0; o < 4; ++o)
      mag += std::fabs(g.data<float>()[b * 4 + o]) * std::fabs(w.data<float>()[o * 8 + k]);
    EXPECT_NEAR(r.dx.data<float>()[i], fd, kFp8ProductError * mag + 1e-3) << i;
  }
  for (int64_t i = 0; i < w.numel(); ++i) {
    Tensor wp = w.clone(), wm = w.clone();
    wp.data<float>()[i] += static_cast<float>(h);
    wm.data<float>()[i] -= static_cast<float>(h);
    const double fd = (loss(x, wp) - loss(x, wm)) / (2 * h);
    // dw[o][k] = sum_b g[b][o] x[b][k]: E5M2 gradient times E4M3 input, as above.
    const int64_t o = i / 8, k = i % 8;
    double mag = 0;
    for (int64_t b = 0; b < 3; ++b)
      mag += std::fabs(g.data<float>()[b * 4 + o]) * std::fabs(x.data<float>()[b * 8 + k]);
    EXPECT_NEAR(r.dw.data<float>()[i], fd, kFp8ProductError * mag + 1e-3) << i;
  }
}

TEST(Fp8Linear, ScalesUpdateAfterForwardAndBackward) {
  Linear layer(16, 8, true, kFloat32, 4);
  const Tensor x = randn({4, 16}, 1.0f, 9), g = randn({4, 8}, 0.1f, 10);
  const float ax = max(abs(x)).item<float>();
  const float aw = max(abs(layer.weight.detach())).item<float>();
  const float ag = max(abs(g)).item<float>();
  ScalingState& s = *layer.fp8_state();
  Tensor xx = x.detach();
  Tensor y;
  {
    Fp8Autocast ac;
    y = layer(xx);
    EXPECT_EQ(s.scale_of(0), 1.0f);  // not yet: the update runs at the scope's exit
  }
  EXPECT_EQ(s.scale_of(0), 448.0f / ax);
  EXPECT_EQ(s.scale_of(1), 448.0f / aw);
  EXPECT_EQ(s.scale_of(2), 1.0f);
  sum(mul(y, g)).backward();
  EXPECT_EQ(s.scale_of(2), 57344.0f / ag);  // HYBRID: E5M2 gradients
  EXPECT_EQ(s.history_of(0).back(), ax);
  EXPECT_EQ(s.history_of(2).back(), ag);
  // Step 2 with a larger input: "max" takes the window's maximum.
  const Tensor x2 = mul(x, 3.0);
  {
    Fp8Autocast ac;
    Tensor xx2 = x2.detach();
    y = layer(xx2);
  }
  EXPECT_EQ(s.scale_of(0), 448.0f / (3.0f * ax));
}

TEST(Fp8Linear, EvalForwardRecordsAmaxWithoutUpdating) {
  Linear layer(16, 8, true, kFloat32, 4);
  const Tensor x = randn({4, 16}, 1.0f, 11);
  {
    NoGradGuard ng;
    Fp8Autocast ac;
    layer(x);
  }
  EXPECT_EQ(layer.fp8_state()->scale_of(0), 1.0f);
  EXPECT_EQ(layer.fp8_state()->current_amax(0), max(abs(x)).item<float>());
}

TEST(Fp8Linear, BackwardScalesUpdateOnceAllModulesRan) {
  Linear a(16, 16, true, kFloat32, 4), b(16, 8, true, kFloat32, 4);
  Tensor x = randn({4, 16}, 1.0f, 12);
  Tensor y;
  {
    Fp8Autocast ac;
    y = b(a(x));
  }
  sum(y).backward();
  // b's dy is all ones; a's dy is ones @ Wb.
  EXPECT_EQ(b.fp8_state()->scale_of(2), 57344.0f);
  EXPECT_NE(a.fp8_state()->scale_of(2), 1.0f);
  EXPECT_EQ(a.fp8_state()->current_amax(2), 0.0f);  // consumed by the update
}

TEST(Fp8Linear, OutsideAutocastIsPlainLinear) {
  Linear layer(12, 5);
  const Tensor x = randn({3, 12}, 1.0f, 13);
  EXPECT_EQ(layer(x).to_vector<float>(),
            nn::functional::linear(x, layer.weight, layer.bias).to_vector<float>());
  EXPECT_EQ(layer.fp8_state()->current_amax(0), 0.0f);
}

TEST(Fp8Linear, WeightCastIsCachedUntilTheWeightChanges) {
  Linear layer(16, 8, true, kFloat32, 4);
  const Tensor x = randn({4, 16}, 1.0f, 14);
  Fp8Autocast ac;
  const Tensor y1 = layer(x);
  const Tensor y2 = layer(x);
  EXPECT_EQ(layer.weight_cache().hits, 1);
  EXPECT_EQ(y1.to_vector<float>(), y2.to_vector<float>());
  {
    NoGradGuard ng;
    layer.weight.copy_(mul(layer.weight, 2.0));  // what an optimizer step does
  }
  const Tensor y3 = layer(x);
  EXPECT_EQ(layer.weight_cache().hits, 1);  // re-cast
  EXPECT_NE(y3.to_vector<float>(), y1.to_vector<float>());
}

TEST(Fp8Linear, NaNInputKeepsScaleAndAmax) {
  Linear layer(8, 4, true, kFloat32, 4);
  Tensor x = randn({2, 8}, 1.0f, 15);
  x.data<float>()[3] = std::numeric_limits<float>::quiet_NaN();
  Tensor y;
  {
    Fp8Autocast ac;
    y = layer(x);
  }
  const auto yv = y.to_vector<float>();
  EXPECT_TRUE(std::isnan(yv[0]));  // row 0 holds the NaN: 0x7F decodes to NaN
  EXPECT_FALSE(std::isnan(yv[4]));
  x.data<float>()[3] = 0.0f;
  EXPECT_EQ(layer.fp8_state()->scale_of(0), 448.0f / max(abs(x)).item<float>());
}

TEST(Fp8Linear, AnyShapeWorksWithoutPadding) {
  Linear layer(5, 3, true, kFloat32, 2);
  const Tensor x = randn({7, 5}, 1.0f, 16), g = randn({7, 3}, 1.0f, 17);
  const LayerRun r = run(layer, x, g);
  EXPECT_EQ(r.y.shape(), (Shape{7, 3}));
  EXPECT_EQ(r.dx.shape(), (Shape{7, 5}));
}

TEST(Fp8Linear, StateDictHoldsMetaAndResumesExactly) {
  manual_seed(3);
  Linear a(16, 8, true, kFloat32, 4);
  DelayedScaling r4;  // the layer's length: a recipe of another one would resize it
  r4.amax_history_len = 4;
  const Tensor x = randn({4, 16}, 1.0f, 18), g = randn({4, 8}, 1.0f, 19);
  run(a, x, g, r4);
  run(a, mul(x, 2.0), g, r4);
  const nn::StateDict sd = a.state_dict();
  EXPECT_TRUE(sd.contains("fp8_scale"));
  EXPECT_TRUE(sd.contains("fp8_amax_history"));
  EXPECT_EQ(sd.at("fp8_amax_history").shape(), (Shape{4, 3}));
  Linear b(16, 8, true, kFloat32, 4);
  b.load_state_dict(sd);
  const LayerRun ra = run(a, x, g, r4), rb = run(b, x, g, r4);
  EXPECT_EQ(ra.y.to_vector<float>(), rb.y.to_vector<float>());
  EXPECT_EQ(ra.dw.to_vector<float>(), rb.dw.to_vector<float>());
  EXPECT_EQ(a.fp8_state()->history_of(1), b.fp8_state()->history_of(1));
}

TEST(Fp8Linear, Bf16ModuleKeepsFp32MetaAndComputesInBf16) {
  Linear layer(16, 8, true, kFloat32, 4);
  layer.to(kBFloat16);
  EXPECT_EQ(layer.fp8_state()->scale.dtype(), kFloat32);
  const Tensor x = randn({4, 16}, 1.0f, 20).to(kBFloat16), g = randn({4, 8}, 1.0f, 21);
  const LayerRun r = run(layer, x, g.to(kBFloat16));
  EXPECT_EQ(r.y.dtype(), kBFloat16);
  EXPECT_EQ(r.dw.dtype(), kBFloat16);
}

TEST(Fp8Linear, HistoryLengthCanChange) {
  Linear layer(4, 4, true, kFloat32, 3);
  layer.fp8_state()->record_amax(0, 5.0f);
  layer.set_amax_history_len(6);
  EXPECT_EQ(layer.fp8_state()->history_len(), 6);
  EXPECT_EQ(layer.fp8_state()->current_amax(0), 5.0f);
  EXPECT_EQ(layer.state_dict().at("fp8_amax_history").shape(), (Shape{6, 3}));
}

// A layer used directly under Fp8Autocast takes the recipe's history length (not the 1024 rows
// it is built with): an outlier at step 1 leaves the window after amax_history_len updates.
TEST(Fp8Linear, FollowsTheActiveRecipesHistoryLength) {
  Linear layer(8, 8, true, kFloat32);  // 1024 rows
  DelayedScaling r;
  r.amax_history_len = 2;
  const Tensor x = randn({4, 8}, 1.0f, 31);
  const float ax = max(abs(x)).item<float>();
  for (int step = 0; step < 5; ++step) {
    Fp8Autocast ac(true, r);
    layer(step == 0 ? mul(x, 100.0) : x);
  }
  EXPECT_EQ(layer.fp8_state()->history_len(), 2);
  EXPECT_EQ(layer.state_dict().at("fp8_amax_history").shape(), (Shape{2, 3}));
  EXPECT_EQ(layer.fp8_state()->scale_of(0), 448.0f / ax);
  // Outside a scope the length stays; the next recipe resizes it again (zero-padded).
  layer(x);
  EXPECT_EQ(layer.fp8_state()->history_len(), 2);
  {
    Fp8Autocast ac(true, DelayedScaling{});
    layer(x);
  }
  EXPECT_EQ(layer.fp8_state()->history_len(), 1024);
  LayerNormLinear lnl(8, 8, true, 1e-5, kFloat32);
  {
    Fp8Autocast ac(true, r);
    lnl(x);
  }
  EXPECT_EQ(lnl.fp8_state()->history_len(), 2);
}

TEST(Fp8LayerNorm, IsTheHighPrecisionNorm) {
  nn::LayerNorm ref({12});
  auto ln = LayerNorm::from_layer_norm(ref);
  const Tensor x = randn({3, 12}, 2.0f, 22);
  Fp8Autocast ac;
  EXPECT_EQ((*ln)(x).to_vector<float>(), ref(x).to_vector<float>());
  EXPECT_TRUE(ln->weight.is_same(ref.weight));
}

TEST(Fp8LayerNormLinear, EqualsNormThenFp8Linear) {
  LayerNormLinear fused(16, 8, true, 1e-5, kFloat32, 4);
  const Tensor x = randn({5, 16}, 3.0f, 23);
  Tensor y;
  {
    Fp8Autocast ac;
    y = fused(x);
  }
  const Tensor normed =
      layer_norm(x, {16}, fused.layer_norm_weight.detach(), fused.layer_norm_bias.detach(), 1e-5);
  const Tensor ref = add(
      matmul(dq(normed, kFloat8_e4m3fn, 1.0f), dq(fused.weight.detach(), kFloat8_e4m3fn, 1.0f).t()),
      fused.bias.detach());
  EXPECT_EQ(y.to_vector<float>(), ref.to_vector<float>());
  const auto keys = fused.state_dict().keys();
  EXPECT_EQ(keys, (std::vector<std::string>{"layer_norm_weight", "layer_norm_bias", "weight",
                                            "bias", "fp8_scale", "fp8_amax_history"}));
}

}  // namespace
}  // namespace mantissa::fp8
