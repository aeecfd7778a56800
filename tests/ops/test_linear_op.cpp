// linear as an op (mantissa/ops/linear.h): nn::Linear and nn::functional::linear are thin
// callers of it, so all three give the same bits, one LinearBackward node and one autocast
// entry. The numerics themselves are tested in tests/nn/test_linear.cpp.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "amp/autocast_dispatch.h"
#include "mantissa/amp/autocast.h"
#include "mantissa/autograd/node.h"
#include "mantissa/nn/functional.h"
#include "mantissa/nn/linear.h"
#include "mantissa/ops/linear.h"
#include "support/test_util.h"

namespace mantissa {
namespace {

using namespace mantissa::testing;

bool same_bits(const Tensor& a, const Tensor& b) {
  const Tensor x = a.contiguous(), y = b.contiguous();
  return x.dtype() == y.dtype() && x.shape() == y.shape() &&
         std::memcmp(x.data_ptr(), y.data_ptr(), x.numel() * x.dtype().itemsize()) == 0;
}

TEST(LinearOp, FunctionalAndModuleCallTheOp) {
  nn::Linear layer(6, 4);
  Tensor x = rnd({3, 6}, kFloat32, 11);
  Tensor want = linear(x, layer.weight, layer.bias);
  EXPECT_TRUE(same_bits(nn::functional::linear(x, layer.weight, layer.bias), want));
  EXPECT_TRUE(same_bits(layer.forward(x), want));
  ASSERT_NE(want.grad_fn(), nullptr);
  EXPECT_EQ(want.grad_fn()->name(), "LinearBackward");
}

TEST(LinearOp, OneAutocastEntryNamedLinear) {
  std::vector<std::string> names;
  amp::detail::t_policy_trace = &names;
  Tensor y;
  {
    amp::autocast region(DeviceType::kCPU, kBFloat16);
    y = nn::functional::linear(rnd({2, 5}, kFloat32, 1), rnd({3, 5}, kFloat32, 2));
  }
  amp::detail::t_policy_trace = nullptr;
  EXPECT_EQ(y.dtype(), kBFloat16);
  EXPECT_EQ(names, std::vector<std::string>{"linear"});
}

}  // namespace
}  // namespace mantissa
