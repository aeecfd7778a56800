// OneCycleLR and ReduceLROnPlateau against torch 2.15's values (printed by
// torch.optim.lr_scheduler with the same arguments; SGD, one parameter group).
#include <gtest/gtest.h>

#include <cmath>

#include "mantissa/mantissa.h"
#include "mantissa/optim/lr_scheduler.h"

namespace mantissa::optim {
namespace {

std::vector<Tensor> one_param() {
  Tensor p = zeros({1});
  p.requires_grad_();
  return {p};
}

TEST(OneCycleLR, MatchesTorchCosine) {
  SGD opt(one_param(), 0.5);
  OneCycleLR sched(opt, /*max_lr=*/0.1, /*total_steps=*/10, /*pct_start=*/0.3, "cos");
  const double torch_lrs[] = {0.0040000000000000036,
                              0.052000000000000005,
                              0.1,
                              0.09504846320134738,
                              0.0811745653949763,
                              0.06112620219362893,
                              0.03887419780637107,
                              0.0188258346050237,
                              0.004951936798652629,
                              4e-07};
  for (int i = 0; i < 10; ++i) {
    EXPECT_NEAR(opt.lr(), torch_lrs[i], 1e-15) << "step " << i;
    if (i < 9) sched.step();
  }
  sched.step();  // step 10 == total_steps is still allowed, 11 is not
  EXPECT_THROW(sched.step(), Error);
}

// A group's hyper-parameters as the optimizer's state dict records them.
nlohmann::json group0(const Optimizer& opt) { return opt.state_dict().meta["param_groups"][0]; }
double beta1(const Optimizer& opt) { return group0(opt)["betas"][0].get<double>(); }
double momentum(const Optimizer& opt) { return group0(opt)["momentum"].get<double>(); }

// cycle_momentum (torch's default): Adam's beta1 and SGD's momentum against torch 2.15.
TEST(OneCycleLR, CyclesMomentumAsTorch) {
  {
    AdamOptions o = adamw_defaults();
    o.lr = 0.5;
    Adam adam(one_param(), o);
    OneCycleLR sched(adam, 0.1, 10, 0.3, "cos");
    const double torch_beta1[] = {0.95,
                                  0.8999999999999999,
                                  0.85,
                                  0.854951556604879,
                                  0.8688255099070633,
                                  0.8888739533021842,
                                  0.9111260466978157,
                                  0.9311744900929366,
                                  0.945048443395121,
                                  0.95};
    for (int i = 0; i < 10; ++i) {
      EXPECT_NEAR(beta1(adam), torch_beta1[i], 1e-15) << "step " << i;
      if (i < 9) sched.step();
    }
    EXPECT_EQ(group0(adam)["betas"][1].get<double>(), 0.999);  // beta2 untouched
  }
  {
    SGD sgd(one_param(), 0.5);  // momentum 0: torch sets it to max_momentum
    OneCycleLR sched(sgd, 0.1, 10, 0.3, "linear");
    const double torch_momentum[] = {0.95,
                                     0.8999999999999999,
                                     0.85,
                                     0.8642857142857142,
                                     0.8785714285714286,
                                     0.8928571428571428,
                                     0.9071428571428571,
                                     0.9214285714285714,
                                     0.9357142857142857,
                                     0.95};
    for (int i = 0; i < 10; ++i) {
      EXPECT_NEAR(momentum(sgd), torch_momentum[i], 1e-15) << "step " << i;
      if (i < 9) sched.step();
    }
  }
  {
    SGD sgd(one_param(), 0.5);
    OneCycleLR sched(sgd, 0.1, 10, 0.3, "cos", 25.0, 1e4, /*cycle_momentum=*/false);
    sched.step();
    EXPECT_EQ(momentum(sgd), 0.0);
    EXPECT_THROW(OneCycleLR(sgd, 0.1, 10, 0.3, "cos", 25.0, 1e4, true, 0.9, 0.8), Error);
  }
}

TEST(OneCycleLR, MatchesTorchLinearAndRejectsBadArguments) {
  SGD opt(one_param(), 0.5);
  OneCycleLR sched(opt, 0.1, 10, 0.3, "linear");
  const double torch_lrs[] = {0.004,
                              0.052000000000000005,
                              0.1,
                              0.08571434285714286,
                              0.07142868571428572,
                              0.05714302857142858,
                              0.042857371428571434,
                              0.028571714285714284,
                              0.014286057142857148,
                              3.999999999976245e-07};
  for (int i = 0; i < 10; ++i) {
    EXPECT_NEAR(opt.lr(), torch_lrs[i], 1e-15) << "step " << i;
    if (i < 9) sched.step();
  }
  EXPECT_THROW(OneCycleLR(opt, 0.1, 0), Error);
  EXPECT_THROW(OneCycleLR(opt, 0.1, 10, 1.5), Error);
  EXPECT_THROW(OneCycleLR(opt, 0.1, 10, 0.3, "cosine"), Error);
}

TEST(ReduceLROnPlateau, MatchesTorchWithThresholdCooldownAndMinLr) {
  SGD opt(one_param(), 1.0);
  ReduceLROnPlateau::Options o;
  o.factor = 0.5;
  o.patience = 2;
  o.threshold = 0.01;
  o.cooldown = 1;
  o.min_lr = 0.1;
  ReduceLROnPlateau sched(opt, o);
  const double metrics[] = {1.0,  0.995, 0.99, 0.98, 0.97, 0.96, 0.96, 0.96,
                            0.96, 0.96,  0.96, 0.96, 0.96, 0.96, 0.96, 0.5};
  const double torch_lrs[] = {1.0, 1.0, 1.0, 1.0, 1.0,  1.0,  1.0,  1.0,
                              0.5, 0.5, 0.5, 0.5, 0.25, 0.25, 0.25, 0.25};
  for (int i = 0; i < 16; ++i) {
    sched.step(metrics[i]);
    EXPECT_DOUBLE_EQ(opt.lr(), torch_lrs[i]) << "step " << i;
  }
  EXPECT_DOUBLE_EQ(sched.best(), 0.5);
  EXPECT_THROW(sched.step(), Error);  // needs the metric
  EXPECT_THROW(sched.step(std::nan("")), Error);
}

TEST(ReduceLROnPlateau, StopsAtMinLrAndResumesFromItsStateDict) {
  SGD opt(one_param(), 1.0);
  ReduceLROnPlateau::Options o;
  o.mode = "max";
  o.patience = 0;
  o.min_lr = 0.05;
  ReduceLROnPlateau sched(opt, o);
  sched.step(1.0);  // best
  sched.step(0.5);  // worse: 0.1
  EXPECT_DOUBLE_EQ(opt.lr(), 0.1);
  const nlohmann::json saved = sched.state_dict();
  sched.step(0.5);  // 0.05 (the floor)
  sched.step(0.5);  // stays
  EXPECT_DOUBLE_EQ(opt.lr(), 0.05);

  SGD opt2(one_param(), 1.0);
  ReduceLROnPlateau restored(opt2, o);
  restored.load_state_dict(saved);
  opt2.set_lr(0.1);  // the optimizer's lr comes back with the optimizer's own state
  EXPECT_DOUBLE_EQ(restored.best(), 1.0);
  restored.step(0.5);
  EXPECT_DOUBLE_EQ(opt2.lr(), 0.05);
  // A StepLR's state does not load into a plateau scheduler.
  StepLR step(opt2, 1);
  EXPECT_THROW(restored.load_state_dict(step.state_dict()), Error);
}

}  // namespace
}  // namespace mantissa::optim
