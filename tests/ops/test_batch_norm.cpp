// batch_norm: hand-computed statistics and running-statistics updates, gradients against
// finite differences in train and eval mode, low precision against f64, mixed dtypes (bf16
// input with fp32 parameters), the f16/bf16 row kernels bit for bit, and errors.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "kernels/cpu/norm/batch_norm_kernels.h"
#include "mantissa/amp/autocast.h"
#include "mantissa/core/bfloat16.h"
#include "mantissa/core/half.h"
#include "mantissa/ops/batch_norm.h"
#include "support/test_util.h"

namespace mantissa {
namespace {

using namespace mantissa::testing;

TEST(BatchNorm, TrainingNormalisesWithBiasedBatchVariance) {
  // One channel holding {1, 2, 3, 4}: mean 2.5, biased variance 1.25.
  const Tensor x = tensor_of({1, 2, 3, 4}, {2, 1, 1, 2}, kFloat64);
  const Tensor y = batch_norm(x, Tensor(), Tensor(), Tensor(), Tensor(), true);
  const double is = 1 / std::sqrt(1.25 + 1e-5);
  expect_near_all(vals(y), {-1.5 * is, -0.5 * is, 0.5 * is, 1.5 * is}, 1e-15);
  // Affine: y * w + b per channel.
  const Tensor y2 = batch_norm(x, Tensor(), Tensor(), tensor_of({2}, {1}, kFloat64),
                               tensor_of({-1}, {1}, kFloat64), true);
  expect_near_all(vals(y2), {-3 * is - 1, -is - 1, is - 1, 3 * is - 1}, 1e-15);
}

TEST(BatchNorm, RunningStatisticsAfterTwoStepsMatchHandComputedValues) {
  Tensor rm = zeros({1}, kFloat32), rv = ones({1}, kFloat32);
  // Step 1: {1,2,3,4}: mean 2.5, unbiased variance 5/3.
  batch_norm(tensor_of({1, 2, 3, 4}, {2, 1, 2}, kFloat32), rm, rv, Tensor(), Tensor(), true);
  EXPECT_NEAR(rm.item(), 0.25, 1e-7);
  EXPECT_NEAR(rv.item(), 0.9 + 0.1 * 5.0 / 3.0, 1e-7);
  // Step 2: {2,4,6,8}: mean 5, unbiased variance 20/3; momentum 0.1.
  batch_norm(tensor_of({2, 4, 6, 8}, {2, 1, 2}, kFloat32), rm, rv, Tensor(), Tensor(), true);
  EXPECT_NEAR(rm.item(), 0.9 * 0.25 + 0.5, 1e-7);
  EXPECT_NEAR(rv.item(), 0.9 * (0.9 + 0.1 * 5.0 / 3.0) + 0.1 * 20.0 / 3.0, 1e-6);
  EXPECT_EQ(rm.dtype(), kFloat32);
  // Eval normalises with them.
  const Tensor y = batch_norm(tensor_of({1.725}, {1, 1}, kFloat32), rm, rv);
  EXPECT_NEAR(y.item(), 1.0 / std::sqrt(rv.item() + 1e-5), 1e-6);
}

TEST(BatchNorm, GradcheckTrainAndEvalF64) {
  const Tensor rm = tensor_of({0.1, -0.2, 0.3}, {3}, kFloat64);
  const Tensor rv = tensor_of({0.5, 1.5, 2.0}, {3}, kFloat64);
  for (bool training : {true, false}) {
    SCOPED_TRACE(training ? "train" : "eval");
    expect_gradcheck(
        [&](const std::vector<Tensor>& in) {
          // Fresh running-stat copies: gradcheck calls fn many times.
          return batch_norm(in[0], rm.clone(), rv.clone(), in[1], in[2], training);
        },
        {random_input({3, 3, 2, 3}, 1), random_input({3}, 2, 0.5, 1.5), random_input({3}, 3)});
  }
  // Without affine parameters, on a 2-D [N, C] input.
  expect_gradcheck(
      [](const std::vector<Tensor>& in) {
        return batch_norm(in[0], Tensor(), Tensor(), Tensor(), Tensor(), true);
      },
      {random_input({5, 4}, 4)});
}

TEST(BatchNorm, LowPrecisionMatchesF64) {
  const auto fn = [](const std::vector<Tensor>& in) {
    return batch_norm(in[0], Tensor(), Tensor(), in[1], in[2], true);
  };
  const std::vector<Tensor> in = {random_input({4, 3, 3, 3}, 11), random_input({3}, 12, 0.5, 1.5),
                                  random_input({3}, 13)};
  // Outputs are O(2): tolerances of the storage dtype, a little wider for the gradient sums.
  expect_matches_f64(fn, in, kFloat32, 1e-5, 1e-5);
  expect_matches_f64(fn, in, kFloat16, 8e-3, 4e-3);
  expect_matches_f64(fn, in, kBFloat16, 6e-2, 1.6e-2);
}

TEST(BatchNorm, Bf16InputWithFp32ParametersAndStatistics) {
  const Tensor x = rnd({4, 2, 3, 3}, kBFloat16, 21);
  Tensor w = tensor_of({1.5, 0.5}, {2}, kFloat32).requires_grad_(true);
  Tensor b = tensor_of({0.1, -0.1}, {2}, kFloat32).requires_grad_(true);
  Tensor xr = x.clone().requires_grad_(true);
  Tensor rm = zeros({2}, kFloat32), rv = ones({2}, kFloat32);
  const Tensor y = batch_norm(xr, rm, rv, w, b, true);
  EXPECT_EQ(y.dtype(), kBFloat16);
  y.to(kFloat32).backward(rnd({4, 2, 3, 3}, kBFloat16, 22).to(kFloat32));
  EXPECT_EQ(w.grad().dtype(), kFloat32);
  EXPECT_EQ(b.grad().dtype(), kFloat32);
  EXPECT_EQ(xr.grad().dtype(), kBFloat16);
  // The same in f64 on the same (bf16-exact) values: statistics are computed from the bf16
  // input in >= fp32, so the running statistics agree to fp32 precision, not bf16.
  Tensor w64 = w.detach().to(kFloat64).requires_grad_(true);
  Tensor b64 = b.detach().to(kFloat64).requires_grad_(true);
  Tensor rm64 = zeros({2}, kFloat64), rv64 = ones({2}, kFloat64);
  const Tensor y64 = batch_norm(x.to(kFloat64), rm64, rv64, w64, b64, true);
  y64.backward(rnd({4, 2, 3, 3}, kBFloat16, 22).to(kFloat32).to(kFloat64));
  expect_near_all(vals(rm), vals(rm64), 1e-7);
  expect_near_all(vals(rv), vals(rv64), 1e-6);
  const auto yv = vals(y), y64v = vals(y64);
  for (size_t i = 0; i < yv.size(); ++i)
    EXPECT_NEAR(yv[i], y64v[i], 1e-2 * std::abs(y64v[i]) + 1e-3);
  expect_near_all(vals(w.grad()), vals(w64.grad()), 1e-5);
  expect_near_all(vals(b.grad()), vals(b64.grad()), 1e-5);
}

TEST(BatchNorm, RowTailsAndAnOffsetMeanMatchF64) {
  // 37 values per row (two full vectors and a tail) around a large mean with a small spread:
  // the statistics must not cancel, in train and eval mode, forward and backward.
  std::vector<double> v = vals(rnd({3, 2, 37}, kFloat64, 41));
  for (double& e : v) e = 100.0 + 0.01 * e;
  const Tensor base = tensor_of(v, {3, 2, 37}, kFloat64);
  const std::vector<Tensor> in = {base, random_input({2}, 42, 0.5, 1.5), random_input({2}, 43)};
  for (bool training : {true, false}) {
    SCOPED_TRACE(training ? "train" : "eval");
    const auto fn = [training](const std::vector<Tensor>& t) {
      const Tensor rm = tensor_of({100.0, 100.001}, {2}, kFloat64);
      const Tensor rv = tensor_of({3e-5, 4e-5}, {2}, kFloat64);
      return batch_norm(t[0], rm.to(t[0].dtype()), rv.to(t[0].dtype()), t[1], t[2], training);
    };
    expect_matches_f64(fn, in, kFloat32, 2e-3, 1e-4);
    expect_matches_f64(fn, in, kBFloat16, 0.15, 2e-2);
  }
}

TEST(BatchNorm, RowKernelsRoundBf16ToNearestEvenOnEveryLevel) {
  // affine(x, 1, c) = x + c: one rounding, which must be BFloat16(float) bit for bit (NaN
  // made quiet, ties to even, overflow to inf).
  std::vector<uint16_t> x;
  for (uint32_t b = 0; b < 0x10000; b += 7) x.push_back(static_cast<uint16_t>(b));
  x.push_back(0x7f81);                // a signalling NaN
  const float c = 3.0517578125e-05f;  // 2^-15: many sums fall exactly on ties
  for (const auto* table : {&kernels::cpu::kBnBaseline, &kernels::cpu::bn_kernels()}) {
    std::vector<uint16_t> y(x.size());
    table->bf16.affine(x.data(), y.data(), static_cast<int64_t>(x.size()), 1.0f, c);
    for (size_t i = 0; i < x.size(); ++i) {
      const float want = static_cast<float>(BFloat16::from_bits(x[i])) + c;
      ASSERT_EQ(y[i], BFloat16(want).x) << "input bits " << x[i];
    }
  }
}

TEST(BatchNorm, RowKernelsRoundF16ToNearestEvenOnEveryLevel) {
  // The f16 rows read and write f16 directly: affine(x, 1, c) = x + c must be Half(float) bit
  // for bit (subnormals, ties to even, overflow to inf, NaN), and sum() must widen exactly.
  std::vector<Half> x;
  for (uint32_t b = 0; b < 0x10000; b += 5) x.push_back(Half::from_bits(static_cast<uint16_t>(b)));
  x.push_back(Half::from_bits(0x7d01));  // a signalling NaN
  const float c = 6.103515625e-05f;      // 2^-14: the smallest normal f16, many ties
  for (const auto* table : {&kernels::cpu::kBnBaseline, &kernels::cpu::bn_kernels()}) {
    std::vector<Half> y(x.size());
    table->f16.affine(x.data(), y.data(), static_cast<int64_t>(x.size()), 1.0f, c);
    for (size_t i = 0; i < x.size(); ++i) {
      const float want = static_cast<float>(x[i]) + c;
      ASSERT_EQ(y[i].x, Half(want).x) << "input bits " << x[i].x;
    }
    const std::vector<Half> ones_and_half = {Half(1.0f), Half(0.5f), Half(-0.25f)};
    EXPECT_EQ(table->f16.sum(ones_and_half.data(), 3), 1.25f);
  }
}

TEST(BatchNorm, F16EqualsF32OnTheWidenedValuesRoundedOnce) {
  // f16 goes through the row kernels in place of its dtype: the output and the input gradient
  // must be the f32 computation on the widened values, rounded to f16 once (what widening,
  // computing in f32 and Tensor::to gave before); parameter gradients and running statistics
  // equal the f32 ones exactly. 37 values per row exercise the tails.
  const Tensor x16 = rnd({3, 2, 37}, kFloat16, 51);
  const Tensor g16 = rnd({3, 2, 37}, kFloat16, 52);
  for (bool training : {true, false}) {
    SCOPED_TRACE(training ? "train" : "eval");
    auto run = [&](DType dt, Tensor& gx, Tensor& gw, Tensor& gb, Tensor& rm) {
      Tensor xin = x16.to(dt).clone().requires_grad_(true);
      Tensor w = tensor_of({1.5, 0.75}, {2}, kFloat32).requires_grad_(true);
      Tensor b = tensor_of({0.1, -0.2}, {2}, kFloat32).requires_grad_(true);
      rm = tensor_of({0.05, -0.05}, {2}, kFloat32);
      Tensor rv = tensor_of({1.1, 0.9}, {2}, kFloat32);
      Tensor y = batch_norm(xin, rm, rv, w, b, training);
      y.backward(g16.to(dt));
      gx = xin.grad();
      gw = w.grad();
      gb = b.grad();
      return y;
    };
    Tensor gx16, gw16, gb16, rm16, gx32, gw32, gb32, rm32;
    const Tensor y16 = run(kFloat16, gx16, gw16, gb16, rm16);
    const Tensor y32 = run(kFloat32, gx32, gw32, gb32, rm32);
    ASSERT_EQ(y16.dtype(), kFloat16);
    ASSERT_EQ(gx16.dtype(), kFloat16);
    EXPECT_EQ(vals(y16), vals(y32.to(kFloat16)));
    EXPECT_EQ(vals(gx16), vals(gx32.to(kFloat16)));
    EXPECT_EQ(vals(gw16), vals(gw32));
    EXPECT_EQ(vals(gb16), vals(gb32));
    EXPECT_EQ(vals(rm16), vals(rm32));
  }
}

TEST(BatchNorm, UnderAutocastKeepsTheInputDtype) {
  const Tensor x = rnd({3, 2, 2, 2}, kBFloat16, 31);
  const Tensor w = ones({2}, kFloat32), b = zeros({2}, kFloat32);
  Tensor rm = zeros({2}, kFloat32), rv = ones({2}, kFloat32);
  amp::autocast ac;
  EXPECT_EQ(batch_norm(x, rm, rv, w, b, true).dtype(), kBFloat16);
  EXPECT_EQ(batch_norm(x.to(kFloat32), rm, rv, w, b, true).dtype(), kFloat32);
  EXPECT_EQ(rm.dtype(), kFloat32);
}

TEST(BatchNorm, BadInputsGiveClearErrors) {
  const Tensor x = rnd({2, 3, 2, 2}, kFloat32, 1);
  expect_error([&] { batch_norm(x, Tensor(), Tensor(), ones({4}, kFloat32), Tensor(), true); },
               {"[batch_norm]", "weight must have shape [3]", "[2, 3, 2, 2]", "[4]"});
  expect_error([&] { batch_norm(x, Tensor(), Tensor()); }, "needs running_mean and running_var");
  expect_error(
      [&] {
        batch_norm(rnd({1, 3}, kFloat32, 2), Tensor(), Tensor(), Tensor(), Tensor(), true);
      },
      {"more than one value per channel", "[1, 3]"});
  expect_error(
      [&] { batch_norm(rnd({3}, kFloat32, 2), Tensor(), Tensor(), Tensor(), Tensor(), true); },
      "[N, C, *]");
  expect_error([&] { batch_norm(x, zeros({3}, kFloat32), Tensor(), Tensor(), Tensor(), true); },
               "both be given");
}

}  // namespace
}  // namespace mantissa
