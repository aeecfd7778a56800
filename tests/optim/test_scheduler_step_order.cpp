// torch's "Detected call of `lr_scheduler.step()` before `optimizer.step()`" in mantissa's
// words: a scheduler whose first step() comes before its optimizer ever stepped warns once;
// the right order, a metric-driven ReduceLROnPlateau and a restored scheduler do not. The
// optimizers' step count it reads, and what does not count (a GradScaler's skipped step, a
// refused 8-bit step).
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "mantissa/core/warning.h"
#include "mantissa/ops/elementwise.h"
#include "mantissa/ops/reduce.h"
#include "mantissa/optim/adam.h"
#include "mantissa/optim/adam8bit.h"
#include "mantissa/optim/adamw.h"
#include "mantissa/optim/grad_scaler.h"
#include "mantissa/optim/lr_scheduler.h"
#include "mantissa/optim/sgd.h"
#include "mantissa/optim/warmup_cosine_lr.h"

namespace mantissa::optim {
namespace {

constexpr const char* kOrderWarning = ".step() was called before";

Tensor param() {
  Tensor p = zeros({2});
  p.requires_grad_();
  return p;
}

void give_grad(const Tensor& p, double value = 1.0) {
  p.set_grad(tensor_of({value, value}, {2}, kFloat32));
}

// scale(sum(p * g)).backward(): the gradient is g times the loss scale.
void scaled_backward(amp::GradScaler& scaler, const Tensor& p, double g) {
  scaler.scale(sum(mul(p, tensor_of({g, g}, {2}, kFloat32)))).backward();
}

std::vector<std::string> order_warnings(const WarningRecorder& r) {
  std::vector<std::string> out;
  for (const std::string& m : r.messages())
    if (m.find(kOrderWarning) != std::string::npos) out.push_back(m);
  return out;
}

TEST(SchedulerStepOrder, SteppedBeforeTheOptimizerWarnsOncePerScheduler) {
  Tensor p = param();
  SGD opt({p}, 1.0);
  StepLR first(opt, 2);
  CosineAnnealingLR second(opt, 10);
  const WarningRecorder recorder;
  for (int i = 0; i < 3; ++i) first.step();
  second.step();
  give_grad(p);
  opt.step();  // too late for both: each warned on its first step only
  first.step();
  second.step();
  const std::vector<std::string> w = order_warnings(recorder);
  ASSERT_EQ(w.size(), 2u);
  EXPECT_EQ(w[0].rfind("StepLR.step() was called before SGD.step() ever ran", 0), 0u) << w[0];
  EXPECT_NE(w[0].find("Call the optimizer's step() first, then the scheduler's"), std::string::npos)
      << w[0];
  EXPECT_EQ(w[1].rfind("CosineAnnealingLR.step() was called before SGD.step()", 0), 0u) << w[1];
}

TEST(SchedulerStepOrder, TheRightOrderNeverWarns) {
  Tensor p = param();
  AdamW opt({p}, adamw_defaults());
  WarmupCosineLR warm(opt, 2, 10);
  LinearLR linear(opt);
  const WarningRecorder recorder;
  for (int i = 0; i < 5; ++i) {
    give_grad(p);
    opt.step();
    warm.step();
    linear.step();
  }
  EXPECT_TRUE(order_warnings(recorder).empty());
}

// torch's ReduceLROnPlateau.step(metrics) has no such check: a metric-driven lr has no first
// value of a schedule to skip (the plateau rule sees an untrained model's metric, no more).
TEST(SchedulerStepOrder, ReduceLROnPlateauDoesNotWarn) {
  SGD opt({param()}, 1.0);
  ReduceLROnPlateau plateau(opt);
  const WarningRecorder recorder;
  plateau.step(1.0);
  plateau.step(1.0);
  EXPECT_TRUE(order_warnings(recorder).empty());
}

// As torch's loaded _step_count: a scheduler restored past its first step, driving an optimizer
// restored in a new process (which has not stepped there yet), continues without the warning.
// A caller that steps in the right order by construction turns the check off.
TEST(SchedulerStepOrder, ARestoredSchedulerOrASkippedCheckDoesNotWarn) {
  Tensor p = param();
  SGD a({p}, 1.0);
  StepLR sa(a, 2);
  give_grad(p);
  a.step();
  sa.step();
  const WarningRecorder recorder;
  SGD b({param()}, 1.0);
  StepLR sb(b, 2);
  sb.load_state_dict(sa.state_dict());
  sb.step();
  SGD c({param()}, 1.0);
  StepLR sc(c, 2);
  sc.skip_step_order_check();
  sc.step();
  EXPECT_TRUE(order_warnings(recorder).empty());
  // A state saved before its first step leaves the check to do, as torch's _step_count of 1.
  SGD d({param()}, 1.0);
  StepLR fresh(d, 2), sd(d, 2);
  sd.load_state_dict(fresh.state_dict());
  sd.step();
  EXPECT_EQ(order_warnings(recorder).size(), 1u);
}

TEST(SchedulerStepOrder, EveryOptimizerCountsItsCompletedSteps) {
  std::vector<std::shared_ptr<Optimizer>> opts;
  std::vector<Tensor> ps;
  for (int i = 0; i < 4; ++i) ps.push_back(param());
  opts.push_back(std::make_shared<SGD>(std::vector<Tensor>{ps[0]}, 0.1));
  opts.push_back(std::make_shared<Adam>(std::vector<Tensor>{ps[1]}, AdamOptions{}));
  opts.push_back(std::make_shared<AdamW>(std::vector<Tensor>{ps[2]}, adamw_defaults()));
  opts.push_back(std::make_shared<Adam8bit>(std::vector<Tensor>{ps[3]}));
  for (size_t i = 0; i < opts.size(); ++i) {
    Optimizer& o = *opts[i];
    EXPECT_EQ(o.step_count(), 0) << o.name();
    give_grad(ps[i]);
    o.step();
    o.step_with_finite_grads();
    EXPECT_EQ(o.step_count(), 2) << o.name();
  }
  // The 8-bit optimizers refuse a step over a non-finite gradient: no update, no count.
  Adam8bit& eight = static_cast<Adam8bit&>(*opts[3]);
  give_grad(ps[3], INFINITY);
  EXPECT_THROW(eight.step(), NonFiniteGradient);
  EXPECT_EQ(eight.step_count(), 2);
}

// A GradScaler that skips the first step never calls the optimizer, so a scheduler stepped
// after it warns, as torch's does (`_opt_called` is still false); the message says that this
// case is harmless.
TEST(SchedulerStepOrder, AFirstStepSkippedByAGradScalerCountsAsNone) {
  Tensor p = param();
  SGD opt({p}, 1.0);
  StepLR sched(opt, 2);
  amp::GradScaler scaler;
  const WarningRecorder recorder;
  scaled_backward(scaler, p, INFINITY);  // the scaled gradient overflows
  EXPECT_FALSE(scaler.step(opt));
  scaler.update();
  EXPECT_EQ(opt.step_count(), 0);
  sched.step();
  const std::vector<std::string> w = order_warnings(recorder);
  ASSERT_EQ(w.size(), 1u);
  EXPECT_NE(w[0].find("GradScaler skipped the first steps"), std::string::npos) << w[0];
  opt.zero_grad();
  scaled_backward(scaler, p, 1.0);
  EXPECT_TRUE(scaler.step(opt));
  scaler.update();
  EXPECT_EQ(opt.step_count(), 1);
}

}  // namespace
}  // namespace mantissa::optim
