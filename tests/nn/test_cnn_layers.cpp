// The CNN layer modules: Conv2d init and dtype, BatchNorm2d buffers and modes (fp32 running
// statistics after Module::to(kBFloat16)), pooling/flatten shapes, and the reference CNN.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "mantissa/amp/autocast.h"
#include "mantissa/models/cnn.h"
#include "mantissa/nn/batchnorm.h"
#include "mantissa/nn/conv.h"
#include "mantissa/nn/pooling.h"
#include "mantissa/ops/batch_norm.h"
#include "mantissa/ops/reduce.h"
#include "support/test_util.h"

namespace mantissa {
namespace {

using namespace mantissa::testing;

TEST(Conv2dModule, KaimingUniformBoundsAndDirectDtype) {
  manual_seed(3);
  nn::Conv2d conv(8, 16, {3, 3}, {.padding = {1, 1}, .groups = 2});
  EXPECT_EQ(conv.weight.shape(), (Shape{16, 4, 3, 3}));
  const double bound = 1 / std::sqrt(4.0 * 9.0);  // fan_in = in / groups * kH * kW
  const auto w = vals(conv.weight), b = vals(conv.bias);
  const double wmax = std::abs(*std::max_element(
      w.begin(), w.end(), [](double a, double c) { return std::abs(a) < std::abs(c); }));
  EXPECT_LE(wmax, bound);
  EXPECT_GE(wmax, 0.9 * bound);  // 576 uniform draws reach close to the bound
  for (double v : b) EXPECT_LE(std::abs(v), bound);
  // Created directly in bf16, and the same draws rounded once.
  manual_seed(3);
  nn::Conv2d conv16(8, 16, {3, 3}, {.padding = {1, 1}, .groups = 2}, kBFloat16);
  EXPECT_EQ(conv16.weight.dtype(), kBFloat16);
  expect_near_all(vals(conv16.weight), vals(conv.weight.to(kBFloat16)), 0);
  EXPECT_EQ(conv.forward(rnd({2, 8, 5, 5}, kFloat32, 1)).shape(), (Shape{2, 16, 5, 5}));
  EXPECT_EQ(conv.extra_repr(),
            "8, 16, kernel_size=(3, 3), stride=(1, 1), padding=(1, 1), groups=2");
  expect_error([] { nn::Conv2d(3, 4, {3, 3}, {.groups = 2}); }, "divisible by groups=2");
}

TEST(BatchNorm2dModule, TracksStatisticsAndSwitchesToThemInEval) {
  nn::BatchNorm2d bn(2);
  const auto names = bn.state_dict().keys();
  EXPECT_EQ(names, (std::vector<std::string>{"weight", "bias", "running_mean", "running_var",
                                             "num_batches_tracked"}));
  // Channel 0 holds {1,2,3,4}, channel 1 holds {2,4,6,8}.
  const Tensor x = tensor_of({1, 2, 2, 4, 3, 4, 6, 8}, {2, 2, 1, 2}, kFloat32);
  bn.forward(x);
  bn.forward(x);
  EXPECT_EQ(bn.num_batches_tracked.item(), 2.0);
  // Two updates towards mean m and unbiased variance v: 0.19 m and 0.81 + 0.19 v.
  expect_near_all(vals(bn.running_mean), {0.19 * 2.5, 0.19 * 5.0}, 1e-6);
  expect_near_all(vals(bn.running_var), {0.81 + 0.19 * 5.0 / 3.0, 0.81 + 0.19 * 20.0 / 3.0}, 1e-6);
  bn.eval();
  const Tensor y = bn.forward(x);
  EXPECT_NEAR(y.to_vector<double>()[0], (1 - 0.475) / std::sqrt(0.81 + 0.19 * 5.0 / 3.0 + 1e-5),
              1e-6);
  EXPECT_EQ(bn.num_batches_tracked.item(), 2.0);  // eval does not count
  expect_error(
      [&] {
        bn.forward(rnd({2, 3, 2, 2}, kFloat32, 1));
      },
      {"[BatchNorm2d]", "3 channels", "built for 2"});
}

TEST(BatchNorm2dModule, RunningStatisticsStayFp32InABf16Module) {
  nn::BatchNorm2d bn(3);
  bn.to(kBFloat16);
  EXPECT_EQ(bn.weight.dtype(), kBFloat16);
  EXPECT_EQ(bn.bias.dtype(), kBFloat16);
  EXPECT_EQ(bn.running_mean.dtype(), kFloat32);
  EXPECT_EQ(bn.running_var.dtype(), kFloat32);
  EXPECT_EQ(bn.num_batches_tracked.dtype(), kInt64);
  const Tensor x = rnd({4, 3, 5, 5}, kBFloat16, 7);
  const Tensor y = bn.forward(x);
  EXPECT_EQ(y.dtype(), kBFloat16);
  EXPECT_EQ(bn.running_mean.dtype(), kFloat32);
  // The statistics of the bf16 batch, computed in fp32 or better (not rounded to bf16).
  Tensor rm = zeros({3}, kFloat64), rv = ones({3}, kFloat64);
  batch_norm(x.to(kFloat64), rm, rv, Tensor(), Tensor(), true);
  expect_near_all(vals(bn.running_mean), vals(rm), 1e-8);
  expect_near_all(vals(bn.running_var), vals(rv), 1e-7);
  // Also in a model converted as a whole, and to f16.
  auto cnn = models::make_cnn();
  cnn->to(kFloat16);
  for (const auto& [name, t] : cnn->named_buffers()) {
    if (name.find("running") != std::string::npos) EXPECT_EQ(t.dtype(), kFloat32) << name;
  }
  for (const auto& [name, p] : cnn->named_parameters()) EXPECT_EQ(p.dtype(), kFloat16) << name;
}

TEST(PoolingModules, ShapesAndDefaultStride) {
  const Tensor x = rnd({2, 3, 9, 8}, kFloat32, 3);
  EXPECT_EQ(nn::MaxPool2d({2, 2}).forward(x).shape(), (Shape{2, 3, 4, 4}));
  EXPECT_EQ(nn::MaxPool2d({3, 3}, {1, 1}, {1, 1}).forward(x).shape(), (Shape{2, 3, 9, 8}));
  EXPECT_EQ(nn::AvgPool2d({3, 2}).forward(x).shape(), (Shape{2, 3, 3, 4}));
  EXPECT_EQ(nn::AdaptiveAvgPool2d({1, 1}).forward(x).shape(), (Shape{2, 3, 1, 1}));
  EXPECT_EQ(nn::Flatten().forward(x).shape(), (Shape{2, 216}));
  EXPECT_EQ(nn::Flatten(2).forward(x).shape(), (Shape{2, 3, 72}));
}

TEST(CnnModel, ArchitectureAndFlatInputs) {
  manual_seed(0);
  auto cnn = models::make_cnn();
  // conv1 320 + bn 64 + conv2 18496 + bn 128 + fc1 401536 + fc2 1290.
  EXPECT_EQ(cnn->parameter_count(), 320 + 64 + 18496 + 128 + 3136 * 128 + 128 + 1290);
  const Tensor flat = rnd({3, 784}, kFloat32, 5);
  const Tensor y = cnn->forward(flat);
  EXPECT_EQ(y.shape(), (Shape{3, 10}));
  cnn->eval();
  expect_near_all(vals(cnn->forward(flat)), vals(cnn->forward(flat.reshape({3, 1, 28, 28}))), 0);
  expect_error([&] { cnn->forward(rnd({3, 100}, kFloat32, 6)); }, {"[cnn]", "[3, 100]"});
  // bf16 autocast: the logits come out of the last Linear in bf16, gradients reach fp32 weights.
  cnn->train();
  Tensor logits;
  {
    amp::autocast ac;
    logits = cnn->forward(flat);
  }
  EXPECT_EQ(logits.dtype(), kBFloat16);
  sum(logits.to(kFloat32)).backward();
  for (const auto& [name, p] : cnn->named_parameters()) {
    ASSERT_TRUE(p.grad().defined()) << name;
    EXPECT_EQ(p.grad().dtype(), kFloat32) << name;
  }
}

// A square kernel or window as one number, as in torch (Conv2d(1, 8, 3), MaxPool2d(2)): the
// same layers as the Size2 spellings, drawn from the same seed.
TEST(CnnLayers, OneNumberMeansASquareKernel) {
  manual_seed(7);
  nn::Conv2d square(1, 8, 3, {.padding = {1, 1}});
  manual_seed(7);
  nn::Conv2d pair(1, 8, Size2{3, 3}, {.padding = {1, 1}});
  EXPECT_EQ(square.weight.shape(), (Shape{8, 1, 3, 3}));
  EXPECT_EQ(square.extra_repr(), pair.extra_repr());
  const Tensor x = randn({2, 1, 6, 6});
  EXPECT_EQ(vals(square.forward(x)), vals(pair.forward(x)));
  EXPECT_EQ(nn::MaxPool2d(2).extra_repr(), nn::MaxPool2d(Size2{2, 2}).extra_repr());
  EXPECT_EQ(nn::AvgPool2d(2).extra_repr(), nn::AvgPool2d(Size2{2, 2}).extra_repr());
  EXPECT_EQ(nn::MaxPool2d(2).forward(x).shape(), (Shape{2, 1, 3, 3}));
}

}  // namespace
}  // namespace mantissa
