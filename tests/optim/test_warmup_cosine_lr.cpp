// WarmupCosineLR: linear warm-up, cosine decay to min_lr_ratio, then flat; its settings are in
// the state dict.
#include <gtest/gtest.h>

#include <cmath>
#include <numbers>

#include "mantissa/core/error.h"
#include "mantissa/optim/sgd.h"
#include "mantissa/optim/warmup_cosine_lr.h"
#include "scheduler_test_util.h"

namespace mantissa::optim {
namespace {

TEST(WarmupCosineLR, WarmsUpDecaysAndStaysAtTheFloor) {
  SGD opt(one_param(), 2.0);
  WarmupCosineLR s(opt, /*warmup_steps=*/4, /*total_steps=*/8, /*min_lr_ratio=*/0.1);
  std::vector<double> lrs = {opt.lr()};
  for (int i = 0; i < 10; ++i) {
    s.step();
    lrs.push_back(opt.lr());
  }
  // Warm-up: 2 * (step + 1) / 4.
  EXPECT_DOUBLE_EQ(lrs[0], 0.5);
  EXPECT_DOUBLE_EQ(lrs[3], 2.0);
  // Decay: t = (step - 4) / 4.
  EXPECT_DOUBLE_EQ(lrs[4], 2.0);
  EXPECT_NEAR(lrs[6], 2.0 * (0.1 + 0.9 * 0.5 * (1 + std::cos(std::numbers::pi * 0.5))), 1e-15);
  EXPECT_NEAR(lrs[8], 0.2, 1e-15);
  EXPECT_NEAR(lrs[10], 0.2, 1e-15);  // past total_steps: the floor
  const nlohmann::json state = s.state_dict();
  EXPECT_EQ(state["name"], "WarmupCosineLR");
  EXPECT_EQ(state["warmup_steps"], 4);
  EXPECT_EQ(state["total_steps"], 8);
  EXPECT_EQ(state["min_lr_ratio"], 0.1);
}

TEST(WarmupCosineLR, NoTotalKeepsThePeakAndNoWarmupStartsThere) {
  SGD opt(one_param(), 1.0);
  WarmupCosineLR s(opt, 0, 0);
  for (int i = 0; i < 3; ++i) s.step();
  EXPECT_EQ(opt.lr(), 1.0);
  EXPECT_THROW(WarmupCosineLR(opt, -1, 10), Error);
  EXPECT_THROW(WarmupCosineLR(opt, 1, 10, 1.5), Error);
}

}  // namespace
}  // namespace mantissa::optim
