// nn::RMSNorm: transformers' LlamaRMSNorm arithmetic, dtypes and gradients.
#include <gtest/gtest.h>

#include <cmath>

#include "mantissa/autograd/grad_mode.h"
#include "mantissa/nn/rms_norm.h"
#include "support/test_util.h"

namespace mantissa {
namespace {

using namespace mantissa::testing;

TEST(RMSNorm, NormalisesByRootMeanSquare) {
  nn::RMSNorm norm(4, 1e-6, kFloat64);
  {
    NoGradGuard g;
    norm.weight.copy_(tensor_of({1, 2, 0.5, -1}, {4}, kFloat64));
  }
  const Tensor x = tensor_of({1, -2, 3, 4, 0, 0, 0, 0}, {2, 4}, kFloat64);
  const auto y = vals(norm.forward(x));
  const double r = 1 / std::sqrt((1 + 4 + 9 + 16) / 4.0 + 1e-6);
  EXPECT_NEAR(y[0], 1 * r * 1, 1e-15);
  EXPECT_NEAR(y[1], -2 * r * 2, 1e-15);
  EXPECT_NEAR(y[2], 3 * r * 0.5, 1e-15);
  EXPECT_NEAR(y[3], 4 * r * -1, 1e-15);
  EXPECT_EQ(y[4], 0.0);  // eps keeps a zero row finite
  EXPECT_EQ(norm.weight.requires_grad(), true);
  expect_error([&] { norm.forward(zeros({2, 3}, kFloat64)); }, "RMSNorm");
}

TEST(RMSNorm, Bf16InputNormalisesInFp32AndRoundsBeforeTheWeight) {
  nn::RMSNorm norm(3, 1e-5, kBFloat16);
  const Tensor x = tensor_of({0.7, -1.3, 2.9}, {1, 3}, kBFloat16);
  const Tensor y = norm.forward(x);
  EXPECT_EQ(y.dtype(), kBFloat16);
  const auto xv = vals(x);
  const float ms = static_cast<float>((xv[0] * xv[0] + xv[1] * xv[1] + xv[2] * xv[2]) / 3);
  const float r = 1.0f / std::sqrt(ms + 1e-5f);
  const Tensor want = tensor_of({xv[0] * r, xv[1] * r, xv[2] * r}, {1, 3}, kFloat32).to(kBFloat16);
  EXPECT_EQ(vals(y), vals(want));
}

TEST(RMSNorm, GradientsMatchFiniteDifferences) {
  nn::RMSNorm norm(5, 1e-3, kFloat64);
  {
    NoGradGuard g;
    norm.weight.copy_(random_input({5}, 3).detach());
  }
  // The weight is passed as an input too: the check perturbs it in place.
  expect_gradcheck([&](const std::vector<Tensor>& in) { return norm.forward(in[0]); },
                   {random_input({2, 3, 5}, 4), norm.weight});
}

}  // namespace
}  // namespace mantissa
