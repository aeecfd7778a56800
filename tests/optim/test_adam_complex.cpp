// Adam and AdamW refuse complex parameters when they are given them (the constructor and
// add_param_group), as docs/complex.md says, not at the first step(): SGD is the optimizer
// that steps complex parameters.
#include <gtest/gtest.h>

#include <string>

#include "mantissa/optim/adam.h"
#include "mantissa/optim/adamw.h"
#include "mantissa/optim/sgd.h"
#include "support/test_util.h"

namespace mantissa::optim {
namespace {

using mantissa::testing::error_of;

Tensor complex_param() { return zeros({2, 3}, kComplex64).requires_grad_(); }

constexpr const char* kRefusal =
    "not supported for complex tensors (dtype complex64); see docs/complex.md for the ops that "
    "are (parameter 1 of the group; optim::SGD steps complex parameters)";

TEST(AdamComplex, ConstructorRefusesAComplexParameter) {
  const Tensor real = zeros({2}, kFloat32).requires_grad_();
  const std::string adamw = error_of([&] { AdamW opt({real, complex_param()}); });
  EXPECT_NE(adamw.find(std::string("[AdamW] ") + kRefusal), std::string::npos) << adamw;
  const std::string adam = error_of([&] { Adam opt({real, complex_param()}, AdamOptions{}); });
  EXPECT_NE(adam.find(std::string("[Adam] ") + kRefusal), std::string::npos) << adam;
}

TEST(AdamComplex, AddParamGroupRefusesAComplexParameterAndKeepsTheGroups) {
  const Tensor real = zeros({2}, kFloat32).requires_grad_();
  AdamW opt({real});
  const std::string msg = error_of([&] {
    opt.add_param_group({zeros({1}, kFloat32).requires_grad_(), complex_param()});
  });
  EXPECT_NE(msg.find(std::string("[AdamW] ") + kRefusal), std::string::npos) << msg;
  EXPECT_EQ(opt.num_param_groups(), 1u);
  // SGD still takes them (docs/complex.md).
  SGD sgd({complex_param()}, 0.1);
  EXPECT_EQ(sgd.num_param_groups(), 1u);
}

}  // namespace
}  // namespace mantissa::optim
