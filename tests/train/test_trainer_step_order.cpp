// The Trainer steps its LR schedulers after the optimizer, so it never shows the scheduler's
// "called before the optimizer's step()" warning: not in a plain 32-true run, and not when the
// first optimizer step was skipped (a GradScaler's overflow under 16-mixed, a training_step that
// returned no loss), where torch's check would fire with the order right.
#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "mantissa/core/warning.h"
#include "tiny_module.h"

namespace mantissa::train {
namespace {

using testing::LambdaCallback;
using testing::quiet_options;
using testing::TinyModule;
using testing::TinyOptions;

int64_t order_warnings(const WarningRecorder& r) {
  int64_t n = 0;
  for (const std::string& m : r.messages()) n += m.find(".step() was called before") != m.npos;
  return n;
}

// A StepLR stepped every optimizer step and a CosineAnnealingLR every epoch.
std::vector<LRSchedulerConfig> two_schedulers(optim::Optimizer& opt) {
  return {{std::make_shared<optim::StepLR>(opt, 2, 0.5), "step", 1},
          {std::make_shared<optim::CosineAnnealingLR>(opt, 4), "epoch", 1}};
}

TEST(TrainerSchedulers, NoStepOrderWarningIn32TrueOr16MixedRuns) {
  struct Case {
    std::string precision;
    bool skip_first_step;
  };
  for (const Case& c : {Case{"32-true", false}, Case{"32-true", true}, Case{"16-mixed", false},
                        Case{"16-mixed", true}}) {
    const std::string what = c.precision + (c.skip_first_step ? ", first step skipped" : "");
    TinyOptions t;
    t.schedulers = two_schedulers;
    if (c.skip_first_step && c.precision == "16-mixed") {
      // fp16 gradients of a 1e30-times loss overflow: the GradScaler skips the step.
      t.loss_multiplier = [](int64_t step) { return step == 0 ? 1e30 : 1.0; };
    } else if (c.skip_first_step) {
      t.skip = [](int64_t step) { return step == 0; };  // no loss, no optimizer step
    }
    TrainerOptions o = quiet_options(c.precision);
    o.max_epochs = 2;
    int64_t steps_after_first_batch = -1;
    auto cb = std::make_shared<LambdaCallback>();
    cb->batch_end = [&](Trainer& trainer, int64_t) {
      if (steps_after_first_batch < 0) steps_after_first_batch = trainer.optimizer()->step_count();
    };
    o.callbacks.push_back(cb);
    const WarningRecorder recorder;
    Trainer trainer(o);
    TinyModule module(t);
    data::DataLoader loader(testing::tiny_dataset(32), 8);
    trainer.fit(module, loader);
    EXPECT_EQ(order_warnings(recorder), 0) << what;
    // The case under test happened: the schedulers stepped after a first step that did or
    // did not update.
    EXPECT_EQ(steps_after_first_batch, c.skip_first_step ? 0 : 1) << what;
    EXPECT_EQ(trainer.global_step(), 8) << what;
  }
}

}  // namespace
}  // namespace mantissa::train
