// LR schedulers against hand-computed values of torch's closed forms, their state dicts and
// errors.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "mantissa/core/error.h"
#include "mantissa/optim/lr_scheduler.h"
#include "mantissa/optim/sgd.h"
#include "scheduler_test_util.h"

namespace mantissa::optim {
namespace {

// lr after each of `steps` step() calls, starting with the constructor's value.
template <class S>
std::vector<double> trace(S& sched, int steps) {
  std::vector<double> out = {sched.optimizer().lr()};
  for (int i = 0; i < steps; ++i) {
    sched.step();
    out.push_back(sched.optimizer().lr());
    EXPECT_EQ(sched.get_last_lr()[0], out.back());
  }
  return out;
}

void expect_values(const std::vector<double>& got, const std::vector<double>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-15) << "epoch " << i;
}

TEST(LRScheduler, StepLRDecaysEveryStepSize) {
  SGD opt(one_param(), 1.0);
  StepLR s(opt, /*step_size=*/2, /*gamma=*/0.1);
  expect_values(trace(s, 5), {1.0, 1.0, 0.1, 0.1, 0.01, 0.01});
}

TEST(LRScheduler, CosineAnnealingFollowsTheClosedForm) {
  SGD opt(one_param(), 1.0);
  CosineAnnealingLR s(opt, /*t_max=*/4, /*eta_min=*/0.0);
  // (1 + cos(pi e / 4)) / 2 for e = 0..4, then back up the cosine.
  expect_values(trace(s, 5),
                {1.0, 0.8535533905932737, 0.5, 0.14644660940672624, 0.0, 0.14644660940672624});
}

TEST(LRScheduler, CosineAnnealingRespectsEtaMin) {
  SGD opt(one_param(), 0.1);
  CosineAnnealingLR s(opt, 2, 0.02);
  expect_values(trace(s, 2), {0.1, 0.06, 0.02});
}

TEST(LRScheduler, LinearWarmupThenConstant) {
  SGD opt(one_param(), 0.1);
  LinearLR s(opt, /*start_factor=*/0.25, /*end_factor=*/1.0, /*total_iters=*/4);
  // The constructor applies epoch 0 at once (torch's initial step).
  expect_values(trace(s, 6), {0.025, 0.04375, 0.0625, 0.08125, 0.1, 0.1, 0.1});
}

TEST(LRScheduler, LambdaMultipliesTheBaseLr) {
  SGD opt(one_param(), 0.5);
  LambdaLR s(opt, [](int64_t e) { return 1.0 / static_cast<double>(e + 1); });
  expect_values(trace(s, 3), {0.5, 0.25, 0.5 / 3, 0.125});
}

TEST(LRScheduler, EveryGroupHasItsOwnBase) {
  SGD opt(one_param(), 1.0);
  opt.add_param_group(one_param(), SGDOptions{.lr = 0.1});
  StepLR s(opt, 1, 0.5);
  s.step();
  EXPECT_DOUBLE_EQ(opt.lr(0), 0.5);
  EXPECT_DOUBLE_EQ(opt.lr(1), 0.05);
}

TEST(LRScheduler, StateDictRoundTripContinuesTheSchedule) {
  SGD a(one_param(), 1.0);
  CosineAnnealingLR sa(a, 10);
  for (int i = 0; i < 3; ++i) sa.step();
  const nlohmann::json state = sa.state_dict();
  EXPECT_EQ(state["name"], "CosineAnnealingLR");
  EXPECT_EQ(state["last_epoch"], 3);

  SGD b(one_param(), 1.0);
  CosineAnnealingLR sb(b, 10);
  sb.load_state_dict(state);
  EXPECT_EQ(b.lr(), 1.0);  // the optimizer's lr comes from its own state dict, as in torch
  EXPECT_EQ(sb.get_last_lr(), sa.get_last_lr());
  EXPECT_EQ(sb.last_epoch(), 3);
  sa.step();
  sb.step();
  EXPECT_EQ(b.lr(), a.lr());
}

// As torch's load_state_dict, the saved settings come back with the position: a scheduler built
// with other ones continues the saved schedule (it kept its own settings at the saved position,
// a schedule neither run had: 0.01 here instead of 0.25).
TEST(LRScheduler, LoadStateDictAdoptsTheSavedSettings) {
  SGD a(one_param(), 1.0);
  StepLR sa(a, 2, 0.5);
  for (int i = 0; i < 3; ++i) sa.step();
  SGD b(one_param(), 1.0);
  StepLR sb(b, 3, 0.1);
  sb.load_state_dict(sa.state_dict());
  EXPECT_EQ(sb.state_dict(), sa.state_dict());
  sa.step();
  sb.step();
  EXPECT_EQ(b.lr(), a.lr());
  EXPECT_EQ(b.lr(), 0.25);

  SGD c(one_param(), 1.0), d(one_param(), 1.0);
  CosineAnnealingLR sc(c, 10, 0.1);
  LinearLR sd_linear(d, 0.5, 1.0, 4);
  for (int i = 0; i < 2; ++i) sc.step();
  CosineAnnealingLR sc2(d, 3);
  sc2.load_state_dict(sc.state_dict());
  for (int i = 0; i < 4; ++i) {
    sc.step();
    sc2.step();
    EXPECT_EQ(d.lr(), c.lr()) << i;
  }
  nlohmann::json linear = sd_linear.state_dict();
  LinearLR other_linear(c, 1.0 / 3.0, 1.0, 5);
  other_linear.load_state_dict(linear);
  EXPECT_EQ(other_linear.state_dict(), linear);

  // A saved setting the scheduler could not have been built with is refused, nothing changed.
  nlohmann::json bad = sa.state_dict();
  bad["step_size"] = 0;
  bad["last_epoch"] = 7;
  const nlohmann::json before = sb.state_dict();
  EXPECT_THROW(sb.load_state_dict(bad), Error);
  EXPECT_EQ(sb.state_dict(), before);
  bad["step_size"] = "two";
  EXPECT_THROW(sb.load_state_dict(bad), Error);
  EXPECT_EQ(sb.state_dict(), before);
}

TEST(LRScheduler, BadStateOrArgumentsThrowAndChangeNothing) {
  SGD opt(one_param(), 1.0);
  StepLR s(opt, 2);
  CosineAnnealingLR other(opt, 3);
  EXPECT_THROW(s.load_state_dict(other.state_dict()), Error);
  EXPECT_THROW(s.load_state_dict(nlohmann::json::object()), Error);
  nlohmann::json two_groups = s.state_dict();
  two_groups["base_lrs"] = {1.0, 2.0};
  EXPECT_THROW(s.load_state_dict(two_groups), Error);
  EXPECT_EQ(s.last_epoch(), 0);
  EXPECT_THROW(StepLR(opt, 0), Error);
  EXPECT_THROW(LinearLR(opt, 0.0), Error);
  EXPECT_THROW(CosineAnnealingLR(opt, 0), Error);
  try {
    StepLR(opt, -1);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("step_size"), std::string::npos);
  }
}

// A saved setting must have the setting's JSON type: nlohmann would convert a 2.5 step_size to
// 2, or true to a gamma of 1, and the scheduler would follow a schedule no run had.
TEST(LRScheduler, SavedSettingsOfAnotherJsonTypeAreRefused) {
  SGD opt(one_param(), 1.0);
  StepLR s(opt, 2, 0.5);
  const nlohmann::json good = s.state_dict();
  const std::vector<std::pair<std::string, nlohmann::json>> bad = {
      {"step_size", 2.5}, {"step_size", true}, {"gamma", true}, {"gamma", "0.5"}};
  for (const auto& [key, value] : bad) {
    nlohmann::json state = good;
    state[key] = value;
    try {
      s.load_state_dict(state);
      ADD_FAILURE() << key << " = " << value.dump() << " was accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("mistyped " + key), std::string::npos) << e.what();
    }
    EXPECT_EQ(s.state_dict(), good);
  }
  nlohmann::json linear = LinearLR(opt).state_dict();
  linear["total_iters"] = 5.0;
  LinearLR other(opt);
  EXPECT_THROW(other.load_state_dict(linear), Error);
  nlohmann::json integral_gamma = good;
  integral_gamma["gamma"] = 1;  // an integer is a number: accepted where a double is wanted
  s.load_state_dict(integral_gamma);
}

}  // namespace
}  // namespace mantissa::optim
