// ProgressBar with an injected clock and stream: exact lines, '\r' redraws on a terminal,
// rate limiting, plain lines otherwise.
#include "mantissa/train/progress_bar_callback.h"
#include "mantissa/train/report/metric_text.h"
#include "mantissa/train/report/progress_bar.h"
#include "mantissa/train/trainer.h"
#include "tiny_module.h"

#include <gtest/gtest.h>

#include <fmt/format.h>

#include <cmath>
#include <optional>
#include <sstream>

namespace mantissa::train {
namespace {

struct FakeClock {
  double now = 100.0;
  ProgressBar::Clock fn() {
    return [this] { return now; };
  }
};

TEST(ProgressBar, RenderFields) {
  std::ostringstream out;
  FakeClock clock;
  ProgressBar bar(out, {.is_tty = false, .bar_width = 10}, clock.fn());
  bar.start_epoch(0, 2, 8);
  EXPECT_EQ(bar.render(), "Epoch 1/2 [          ] 0/8 00:00<--:--");
  clock.now += 2.0;
  bar.update(2, 64, {{"loss", 0.123456}, {"acc", 0.5}});
  // 2 of 8 steps in 2 s: 6 s left; 64 samples / 2 s = 32 samples/s.
  EXPECT_EQ(bar.render(),
            "Epoch 1/2 [==>       ] 2/8 00:02<00:06 loss (epoch mean) 0.1235 32 samples/s acc 0.5");
  clock.now += 6.0;
  bar.update(8, 64, {{"loss", 0.1}});
  EXPECT_EQ(bar.render(),
            "Epoch 1/2 [==========] 8/8 00:08<00:00 loss (epoch mean) 0.1117 16 samples/s acc 0.5");
}

// Under ddp rank 0 draws for the job: samples/s counts every rank's batch (as the epoch lines
// and the metrics JSON do), the mean loss stays rank 0's own.
TEST(ProgressBar, SamplesPerSecondIsTheWholeJobs) {
  std::ostringstream out;
  FakeClock clock;
  ProgressBar bar(out, {.is_tty = false, .bar_width = 10}, clock.fn());
  bar.start_epoch(0, 2, 8, /*ranks=*/2);
  clock.now += 2.0;
  bar.update(2, 64, {{"loss", 0.25}});
  // 2 ranks x 64 samples / 2 s = 64 samples/s.
  EXPECT_EQ(bar.render(),
            "Epoch 1/2 [==>       ] 2/8 00:02<00:06 loss (epoch mean) 0.25 64 samples/s");
}

TEST(ProgressBar, UnknownLength) {
  std::ostringstream out;
  FakeClock clock;
  ProgressBar bar(out, {.is_tty = false}, clock.fn());
  bar.start_epoch(4, 0, -1);
  clock.now += 3725;  // 1 h 2 min 5 s
  bar.update(10, 1, {});
  EXPECT_EQ(bar.render(), "Epoch 5 10 1:02:05 0 samples/s");
}

TEST(ProgressBar, PlainLinesAreRateLimited) {
  std::ostringstream out;
  FakeClock clock;
  ProgressBar bar(out, {.is_tty = false, .plain_seconds = 10.0, .bar_width = 4}, clock.fn());
  bar.start_epoch(0, 1, 100);
  for (int s = 1; s <= 100; ++s) {
    clock.now += 0.5;  // 50 s in all: a line at 10, 20, 30, 40, 50 s
    bar.update(s, 1, {{"loss", 1.0 / s}});
  }
  bar.end_epoch({{"val_acc", 0.75}});
  const std::string text = out.str();
  EXPECT_EQ(text.find('\r'), std::string::npos);
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 6);  // 5 periodic + the final one
  EXPECT_NE(text.find("Epoch 1/1 [>   ] 20/100 00:10<00:40 loss (epoch mean) 0.1799 2 samples/s\n"),
            std::string::npos)
      << text;
  EXPECT_TRUE(text.ends_with(
      "Epoch 1/1 [====] 100/100 00:50<00:00 loss (epoch mean) 0.05187 2 samples/s val_acc 0.75\n"))
      << text;
}

// Validation time is not training time, so the bar's samples/s agrees with the epoch line; and
// "loss" is the epoch's, not the last step's.
TEST(ProgressBar, ValidationPausesAreNotTrainingTime) {
  std::ostringstream out;
  FakeClock clock;
  ProgressBar bar(out, {.is_tty = false, .bar_width = 4}, clock.fn());
  bar.start_epoch(0, 1, 4);
  clock.now += 2.0;
  bar.update(2, 100, {{"loss", 3.0}});
  bar.pause();
  clock.now += 30.0;  // a validation pass
  // While paused, the rate and ETA stay those of the training time.
  EXPECT_EQ(bar.render(), "Epoch 1/1 [==> ] 2/4 00:32<00:02 loss (epoch mean) 3 50 samples/s");
  bar.resume();
  clock.now += 2.0;
  bar.update(4, 100, {{"loss", 1.0}});
  bar.update(4, 0, {{"loss", INFINITY}});  // a skipped fp16 step does not enter the mean
  // 200 samples in 4 s of training (34 s of wall time); mean of 3 and 1.
  EXPECT_EQ(bar.render(), "Epoch 1/1 [====] 4/4 00:34<00:00 loss (epoch mean) 2 50 samples/s");
}

// Regression: with a short last batch the bar's plain mean of step losses disagreed with the
// epoch line, whose mean weights each step by its samples.
TEST(ProgressBar, MeanLossWeightsEachStepBySamples) {
  std::ostringstream out;
  FakeClock clock;
  ProgressBar bar(out, {.is_tty = false, .bar_width = 4}, clock.fn());
  bar.start_epoch(0, 1, 2);
  clock.now += 1.0;
  bar.update(1, 100, {{"loss", 1.0}});
  bar.update(2, 20, {{"loss", 4.0}});
  // (100 x 1 + 20 x 4) / 120 = 1.5 (a plain mean of the steps would read 2.5).
  EXPECT_EQ(bar.render(), "Epoch 1/1 [====] 2/2 00:01<00:00 loss (epoch mean) 1.5 120 samples/s");
}

TEST(ProgressBar, TerminalRedrawsOneLine) {
  std::ostringstream out;
  FakeClock clock;
  ProgressBar bar(out, {.is_tty = true, .refresh_seconds = 0.1, .bar_width = 4}, clock.fn());
  bar.start_epoch(0, 1, 4);
  clock.now += 0.05;
  bar.update(1, 8, {{"loss", 12.5}});  // within 0.1 s of the start: not drawn
  EXPECT_EQ(out.str(), "");
  clock.now += 0.15;
  bar.update(2, 8, {{"loss", 2}});
  EXPECT_EQ(out.str(), "\rEpoch 1/1 [==> ] 2/4 00:00<00:00 loss (epoch mean) 7.25 80 samples/s");
  out.str("");
  clock.now += 1.0;
  bar.update(4, 8, {{"loss", 1}});
  bar.end_epoch();
  // A periodic redraw and the final one, which ends the line; 24 samples in 1.2 s.
  const std::string s = out.str();
  EXPECT_EQ(s.front(), '\r');
  EXPECT_EQ(s.back(), '\n');
  EXPECT_EQ(std::count(s.begin(), s.end(), '\n'), 1);
  EXPECT_NE(s.find("[====] 4/4 00:01<00:00 loss (epoch mean) 5.167 20 samples/s"),
            std::string::npos)
      << s;
}

TEST(ProgressBar, ShorterLinePadsOverPrevious) {
  std::ostringstream out;
  FakeClock clock;
  ProgressBar bar(out, {.is_tty = true, .refresh_seconds = 0, .bar_width = 2}, clock.fn());
  bar.start_epoch(0, 1, 2);
  clock.now += 1;
  bar.update(1, 1000, {{"loss", 123.25}});
  const size_t first = out.str().size() - 1;  // without '\r'
  out.str("");
  clock.now += 1000;
  bar.update(2, 1, {{"loss", 1}});
  const std::string s = out.str();
  EXPECT_EQ(s.size() - 1, first);  // padded to the earlier width
  EXPECT_EQ(s.back(), ' ');
}

}  // namespace
// The summary lines' losses: four decimals, scientific once that would not read as a number,
// and NaN without fmt's sign.
// Under max_steps the bar's total is the batches the epoch will train: a run that stops after 3
// of 8 batches shows 3/3 at its end, not 3/8 (with an ETA for batches it never trains).
TEST(ProgressBarCallback, TotalStopsAtMaxSteps) {
  for (int64_t accumulate : {1, 2}) {
    std::ostringstream out;
    FakeClock clock;
    auto cb = std::make_shared<ProgressBarCallback>(std::make_unique<ProgressBar>(
        out, ProgressBarOptions{.is_tty = false, .bar_width = 10}, clock.fn()));
    TrainerOptions o = testing::quiet_options();
    o.max_epochs = 2;
    o.max_steps = 3;
    o.accumulate_grad_batches = accumulate;
    o.callbacks.push_back(cb);
    Trainer trainer(o);
    testing::TinyModule module;
    data::DataLoader loader(testing::tiny_dataset(64), 8);  // 8 batches
    trainer.fit(module, loader);
    EXPECT_EQ(trainer.global_step(), 3);
    const std::string want = accumulate == 1 ? "3/3" : "6/6";
    EXPECT_NE(out.str().find(want), std::string::npos) << out.str();
    EXPECT_EQ(out.str().find("/8"), std::string::npos) << out.str();
  }
}

// A module whose loss is item-weighted (transformers' num_items_in_batch, the fine-tune's token
// average): each batch returns its share of the step's loss, so under accumulation a batch's
// loss is a fraction of the step's. The bar shows the mean of the steps' losses.
class ItemWeightedModule : public testing::TinyModule {
 public:
  Tensor training_step(const data::Example& batch, int64_t batch_idx) override {
    const Tensor mean = TinyModule::training_step(batch, batch_idx);
    return mul(mean, static_cast<double>(batch.input.size(0)) * trainer().item_loss_scale());
  }
  std::optional<int64_t> loss_items(const data::Example& batch) override {
    return batch.input.size(0);
  }
};

TEST(ProgressBarCallback, EpochMeanIsTheStepsLossesUnderAccumulation) {
  std::ostringstream out;
  FakeClock clock;
  auto cb = std::make_shared<ProgressBarCallback>(std::make_unique<ProgressBar>(
      out, ProgressBarOptions{.is_tty = false, .bar_width = 4}, clock.fn()));
  TrainerOptions o = testing::quiet_options();
  o.max_epochs = 1;
  o.accumulate_grad_batches = 2;
  o.callbacks.push_back(cb);
  Trainer trainer(o);
  ItemWeightedModule module;
  data::DataLoader loader(testing::tiny_dataset(64), 8);  // 8 batches: 4 steps
  trainer.fit(module, loader);
  ASSERT_EQ(trainer.step_losses().size(), 4u);
  double sum = 0;
  for (double l : trainer.step_losses()) sum += l;
  // A step's loss is its 16 samples' mean cross-entropy (about ln 3 for 3 classes); its two
  // batches' shares are about half of it each.
  EXPECT_GT(sum / 4, 0.8);
  const std::string want = fmt::format("loss (epoch mean) {:.4g}\n", sum / 4);
  EXPECT_NE(out.str().find("[====] 8/8 00:00<00:00 " + want), std::string::npos)
      << out.str() << "\nwant: " << want;
}

TEST(MetricText, FourDecimalsScientificWhenHugeAndUnsignedNan) {
  EXPECT_EQ(train::metric_text(2.46716), "2.4672");
  EXPECT_EQ(train::metric_text(-0.5), "-0.5000");
  EXPECT_EQ(train::metric_text(999999.0), "999999.0000");
  EXPECT_EQ(train::metric_text(531533518596163.6), "5.3153e+14");
  EXPECT_EQ(train::metric_text(-4.4e23), "-4.4000e+23");
  EXPECT_EQ(train::metric_text(-std::nan("")), "nan");
  EXPECT_EQ(train::metric_text(INFINITY), "inf");
  EXPECT_EQ(train::metric_text(-INFINITY), "-inf");
}

}  // namespace mantissa::train
