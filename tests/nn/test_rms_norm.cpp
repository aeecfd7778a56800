// nn::RMSNorm: transformers' LlamaRMSNorm arithmetic, dtypes and gradients, and its fused op
// against the composed formula in f64.
#include <gtest/gtest.h>

#include <cmath>

#include "mantissa/autograd/grad_mode.h"
#include "mantissa/autograd/node.h"
#include "mantissa/nn/rms_norm.h"
#include "mantissa/ops/elementwise.h"
#include "mantissa/ops/reduce.h"
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

// fp32 and f64 inputs with a weight of their dtype take the fused op (RMSNormBackward): its
// output and both gradients against the composed formula evaluated in f64 by autograd, with a
// width that is not a multiple of the kernel's 16 lanes.
TEST(RMSNorm, FusedMatchesComposedF64Reference) {
  const int64_t n = 37;
  for (DType dt : {kFloat32, kFloat64}) {
    SCOPED_TRACE(dt.name());
    nn::RMSNorm norm(n, 1e-5, dt);
    {
      NoGradGuard g;
      norm.weight.copy_(random_input({n}, 11).to(dt));
    }
    const Tensor x = random_input({3, 5, n}, 12, -3, 3).to(dt).detach().requires_grad_(true);
    const Tensor y = norm.forward(x);
    ASSERT_EQ(y.grad_fn()->name(), "RMSNormBackward");
    EXPECT_EQ(y.dtype(), dt);
    Generator gen(13);
    const Tensor up = uniform(y.shape(), -1, 1, kFloat64, &gen);
    y.backward(up.to(dt));
    // The reference: the same formula composed from f64 ops.
    const Tensor x64 = x.detach().to(kFloat64).requires_grad_(true);
    const Tensor w64 = norm.weight.detach().to(kFloat64).requires_grad_(true);
    const Tensor ref = mul(w64, mul(x64, rsqrt(add(mean(mul(x64, x64), {-1}, true), 1e-5))));
    ref.backward(up);
    const double tol = dt == kFloat32 ? 5e-6 : 1e-13;
    expect_near_all(vals(y), vals(ref), tol);
    expect_near_all(vals(x.grad()), vals(x64.grad()), tol);
    expect_near_all(vals(norm.weight.grad()), vals(w64.grad()), tol * 15);
  }
  // A bf16 input keeps the composed form (it rounds the normalised value before the weight).
  nn::RMSNorm bf(4, 1e-5, kBFloat16);
  const Tensor xb = random_input({2, 4}, 14).to(kBFloat16);
  EXPECT_NE(bf.forward(xb).grad_fn()->name(), "RMSNormBackward");
}

}  // namespace
}  // namespace mantissa
