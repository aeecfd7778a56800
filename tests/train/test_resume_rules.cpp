// What a resume may change (docs/trainer.md, "What a resume may change"), the step-loss
// history carried by checkpoints, the LR schedule check, and stopping on SIGINT/SIGTERM.
#include <gtest/gtest.h>

#include <pthread.h>
#include <unistd.h>
#include <algorithm>
#include <cmath>

#include <chrono>
#include <csignal>
#include <filesystem>
#include <numbers>
#include <thread>

#include "mantissa/optim/warmup_cosine_lr.h"
#include "mantissa/train/checkpoint/checkpoint.h"
#include "mantissa/train/checkpoint/model_checkpoint.h"
#include "mantissa/train/signals.h"
#include "support/test_util.h"
#include "tiny_module.h"

namespace mantissa::train {
namespace {

namespace fs = std::filesystem;
using mantissa::testing::error_of;
using testing::flat_params;
using testing::LambdaCallback;
using testing::quiet_options;
using testing::TinyModule;
using testing::TinyOptions;

fs::path temp_dir(const std::string& name) {
  const fs::path p =
      fs::temp_directory_path() / ("mantissa_rules_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(p);
  fs::create_directories(p);
  return p;
}

// 32 examples, 2 epochs: 4 batches of 8 per epoch by default, AdamW with dropout (so the
// generator's state matters).
struct Spec {
  int64_t batch_size = 8;
  uint64_t loader_seed = 5;
  std::optional<uint64_t> seed = 17;
  double lr = 0.01;
  int64_t cosine_t_max = 0;  // > 0: CosineAnnealingLR stepped every optimizer step
  int64_t warmup_steps = 0;  // > 0: WarmupCosineLR's linear warm-up, stepped every step
  int64_t max_steps = -1;
  std::string resume;
  int64_t save_at_step = -1;  // saves `save_path` after this global step
  std::string save_path;
  std::string checkpoint_dir;      // a ModelCheckpoint (last.safetensors on interrupt)
  int64_t interrupt_at_step = -1;  // request_interrupt(SIGINT) after this global step
  bool raise_sigint = false;       // ... by raise(SIGINT) instead (handlers installed)
  std::vector<std::string>* events = nullptr;
  int64_t accumulate = 1;               // accumulate_grad_batches
  int64_t interrupt_at_batch = -1;      // request_interrupt(SIGINT) after this many batches
  int64_t every_n_train_steps = 0;      // the ModelCheckpoint's (with checkpoint_dir)
  std::optional<double> weight_decay;   // AdamW's (else its default, 0.01)
  int64_t weight_decay_from_step = -1;  // ... set to weight_decay_then after this global step
  double weight_decay_then = 0;
};

struct Result {
  std::vector<double> losses;
  std::vector<float> params;
  std::vector<double> lr_after_step;  // the optimizer's lr after each step of this fit
  bool interrupted = false;
  int64_t global_step = 0, batches_in_epoch = 0;
};

// Ctrl-C in a terminal sends SIGINT to the process (not to one thread); InterruptHandlers'
// watcher thread receives it, so the flag is set asynchronously: wait for it (at most 5 s).
void send_sigint_to_process_and_wait() {
  ::kill(::getpid(), SIGINT);
  for (int i = 0; i < 5000 && !pending_interrupt(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ASSERT_TRUE(pending_interrupt().has_value()) << "the SIGINT sent to the process never arrived";
}

Result run(const Spec& s) {
  TrainerOptions o = quiet_options();
  o.seed = s.seed;
  o.max_epochs = 2;
  o.max_steps = s.max_steps;
  Result r;
  o.accumulate_grad_batches = s.accumulate;
  auto cb = std::make_shared<LambdaCallback>();
  int64_t batches = 0;
  cb->batch_end = [&](Trainer& t, int64_t) {
    if (++batches == s.interrupt_at_batch) request_interrupt(SIGINT);
    if (t.global_step() == s.weight_decay_from_step) {
      nlohmann::json options = t.optimizer()->group_options(0);
      options["weight_decay"] = s.weight_decay_then;
      t.optimizer()->set_group_options(0, options);
    }
    r.lr_after_step.push_back(t.optimizer()->lr());
    if (t.global_step() == s.save_at_step) t.save_checkpoint(s.save_path);
    if (t.global_step() == s.interrupt_at_step) {
      if (s.raise_sigint) {
        send_sigint_to_process_and_wait();
      } else {
        request_interrupt(SIGINT);
      }
    }
  };
  o.callbacks.push_back(cb);
  if (!s.checkpoint_dir.empty()) {
    ModelCheckpointOptions mc;
    mc.dirpath = s.checkpoint_dir;
    mc.save_top_k = s.every_n_train_steps > 0 ? -1 : 0;
    mc.every_n_train_steps = s.every_n_train_steps;
    o.callbacks.push_back(std::make_shared<ModelCheckpoint>(mc));
  }
  Trainer trainer(o);
  TinyOptions t;
  t.adamw = true;
  t.lr = s.lr;
  t.dropout = 0.3;
  t.events = s.events;
  if (s.weight_decay) {
    t.optimizer = [&s](std::vector<Tensor> params) {
      optim::AdamOptions a = optim::adamw_defaults();
      a.lr = s.lr;
      a.weight_decay = *s.weight_decay;
      return std::make_shared<optim::AdamW>(std::move(params), a);
    };
  }
  if (s.cosine_t_max > 0) {
    const int64_t t_max = s.cosine_t_max;
    t.schedulers = [t_max](optim::Optimizer& opt) {
      return std::vector<LRSchedulerConfig>{
          {std::make_shared<optim::CosineAnnealingLR>(opt, t_max), "step", 1}};
    };
  }
  if (s.warmup_steps > 0) {
    const int64_t warmup = s.warmup_steps;
    t.schedulers = [warmup](optim::Optimizer& opt) {
      return std::vector<LRSchedulerConfig>{
          {std::make_shared<optim::WarmupCosineLR>(opt, warmup, 0), "step", 1}};
    };
  }
  TinyModule module(t);
  data::DataLoader loader(testing::tiny_dataset(32), s.batch_size, /*shuffle=*/true, s.loader_seed);
  trainer.fit(module, loader, nullptr, s.resume);
  r.losses = trainer.step_losses();
  r.params = flat_params(module);
  r.interrupted = trainer.interrupted();
  r.global_step = trainer.global_step();
  r.batches_in_epoch = trainer.batches_in_epoch();
  clear_pending_interrupt();
  return r;
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// ---- training data: refused mid-epoch, applied at an epoch boundary ----

TEST(ResumeRules, BatchSizeChangedMidEpochIsRefused) {
  const fs::path dir = temp_dir("batch_mid");
  const std::string mid = (dir / "mid.safetensors").string();
  run({.save_at_step = 2, .save_path = mid});
  const std::string msg = error_of([&] { run({.batch_size = 16, .resume = mid}); });
  EXPECT_TRUE(contains(msg, "batch size 8 -> 16")) << msg;
  EXPECT_TRUE(contains(msg, "after batch 2 of 4 of epoch 1")) << msg;
  EXPECT_TRUE(contains(msg, mid)) << msg;
  // The shuffle seed decides which examples the rest of the epoch holds: refused as well.
  const std::string seed_msg = error_of([&] { run({.loader_seed = 6, .resume = mid}); });
  EXPECT_TRUE(contains(seed_msg, "shuffle seed 5 -> 6")) << seed_msg;
  fs::remove_all(dir);
}

TEST(ResumeRules, BatchSizeChangedAtAnEpochEndWarnsAndApplies) {
  const fs::path dir = temp_dir("batch_end");
  const std::string end = (dir / "end.safetensors").string();
  const Result first = run({.save_at_step = 4, .save_path = end});  // the end of epoch 1
  ::testing::internal::CaptureStderr();
  const Result resumed = run({.batch_size = 16, .resume = end});
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_TRUE(contains(err, "warning: resuming: this run's training data differ")) << err;
  EXPECT_TRUE(contains(err, "batch size 8 -> 16")) << err;
  EXPECT_TRUE(contains(err, "epoch 2 on starts with this run's settings")) << err;
  // Epoch 2 ran with batches of 16: 2 more steps after the 4 of the checkpoint.
  EXPECT_EQ(resumed.global_step, 6);
  ASSERT_EQ(resumed.losses.size(), 6u);
  for (size_t i = 0; i < 4; ++i) EXPECT_EQ(resumed.losses[i], first.losses[i]);
  fs::remove_all(dir);
}

// ---- seed: the checkpoint's generator state wins ----

TEST(ResumeRules, SeedChangedWarnsAndTheCheckpointStateWins) {
  const fs::path dir = temp_dir("seed");
  const std::string mid = (dir / "mid.safetensors").string();
  const Result full = run({.save_at_step = 2, .save_path = mid});
  ::testing::internal::CaptureStderr();
  const Result resumed = run({.seed = 99, .resume = mid});
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_TRUE(contains(err, "the seed was 17 in the checkpoint and is 99 in this run")) << err;
  EXPECT_TRUE(contains(err, "continue the first run's stream")) << err;
  EXPECT_EQ(resumed.params, full.params);  // dropout drew the first run's numbers
  EXPECT_EQ(resumed.losses, full.losses);
  fs::remove_all(dir);
}

// ---- learning rate: warned and applied ----

TEST(ResumeRules, LearningRateChangedWarnsAndApplies) {
  const fs::path dir = temp_dir("lr");
  const std::string mid = (dir / "mid.safetensors").string();
  run({.save_at_step = 2, .save_path = mid});
  ::testing::internal::CaptureStderr();
  const Result resumed = run({.lr = 0.02, .resume = mid});
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_TRUE(contains(err,
                       "the learning rate was 0.01 in the checkpoint and is 0.02 in this "
                       "run: applying 0.02 from step 2 on"))
      << err;
  ASSERT_FALSE(resumed.lr_after_step.empty());
  for (double lr : resumed.lr_after_step) EXPECT_EQ(lr, 0.02);
}

// Runs `first` to a checkpoint of step 2 and `then` resumed from it, into `resumed`; returns
// what the resumed run said on stderr.
std::string resume_at_step_2(const std::string& name, Spec first, Spec then, Result& resumed) {
  const fs::path dir = temp_dir(name);
  first.save_at_step = 2;
  first.save_path = then.resume = (dir / "mid.safetensors").string();
  run(first);
  ::testing::internal::CaptureStderr();
  resumed = run(then);
  fs::remove_all(dir);
  return ::testing::internal::GetCapturedStderr();
}

TEST(ResumeRules, LearningRateChangedUnderCosineKeepsTheScheduleShape) {
  Result resumed;
  const std::string err =
      resume_at_step_2("lr_cosine", {.cosine_t_max = 8}, {.lr = 0.02, .cosine_t_max = 8}, resumed);
  EXPECT_TRUE(contains(err, "as the LR schedulers' base")) << err;
  ASSERT_EQ(resumed.lr_after_step.size(), 6u);  // steps 3..8
  for (size_t i = 0; i < 6; ++i) {
    const double step = static_cast<double>(3 + i);
    EXPECT_DOUBLE_EQ(resumed.lr_after_step[i],
                     0.02 * (1 + std::cos(std::numbers::pi * step / 8)) / 2)
        << "step " << step;
  }
}

// Under a warm-up the optimizer's lr starts at a fraction of the peak (a tenth over 10 steps):
// the warning compares the peaks, the lrs the runs were given (it said 0.001 and 0.002).
TEST(ResumeRules, LearningRateChangedUnderAWarmUpIsSaidAsThePeak) {
  Result resumed;
  const std::string err = resume_at_step_2("lr_warmup", {.warmup_steps = 10},
                                           {.lr = 0.02, .warmup_steps = 10}, resumed);
  EXPECT_TRUE(contains(err,
                       "the learning rate was 0.01 in the checkpoint and is 0.02 in this run: "
                       "applying 0.02 from step 2 on (as the LR schedulers' base"))
      << err;
  ASSERT_FALSE(resumed.lr_after_step.empty());
  EXPECT_DOUBLE_EQ(resumed.lr_after_step[0], 0.02 * 4 / 10);  // after step 3 of the warm-up
}

// ---- LR schedule: a changed schedule is refused; an unchanged one resumes bit for bit ----

TEST(ResumeRules, ChangedCosineLengthIsRefused) {
  const fs::path dir = temp_dir("cosine_len");
  const std::string mid = (dir / "mid.safetensors").string();
  run({.cosine_t_max = 8, .save_at_step = 2, .save_path = mid});
  const std::string msg = error_of([&] { run({.cosine_t_max = 16, .resume = mid}); });
  EXPECT_TRUE(contains(msg, "LR scheduler 0 (CosineAnnealingLR) has another schedule")) << msg;
  EXPECT_TRUE(contains(msg, "T_max 8 in the checkpoint, 16 in this run")) << msg;
  fs::remove_all(dir);
}

// A checkpoint already at or past this run's max_steps trains nothing: the fit returns at the
// checkpoint's step with its weights, and the changed schedule (which no step would follow) is
// not a reason to refuse it -- the recipes then say "nothing to train".
TEST(ResumeRules, CheckpointPastMaxStepsTrainsNothingWhateverTheSchedule) {
  const fs::path dir = temp_dir("past_max_steps");
  const std::string mid = (dir / "mid.safetensors").string();
  const Result first = run({.cosine_t_max = 8, .save_at_step = 6, .save_path = mid});
  const Result again = run({.cosine_t_max = 4, .max_steps = 4, .resume = mid});
  EXPECT_EQ(again.global_step, 6);
  EXPECT_TRUE(again.lr_after_step.empty());  // no optimizer step
  const std::string msg =
      error_of([&] { run({.cosine_t_max = 4, .max_steps = 7, .resume = mid}); });
  EXPECT_TRUE(contains(msg, "has another schedule")) << msg;  // a step would follow it: refused
  (void)first;
  fs::remove_all(dir);
}

// N steps straight == N/2 steps, stopped by a signal, + a resume for the rest: every weight
// bit for bit, and the resumed run's step losses cover the whole run. Stopping mid-epoch
// (step 3) and at an epoch's end (step 4).
TEST(ResumeRules, UnchangedCosineRunResumesBitForBitAfterAnInterrupt) {
  const Result full = run({.cosine_t_max = 8});
  ASSERT_EQ(full.global_step, 8);
  for (int64_t stop : {3, 4}) {
    const fs::path dir = temp_dir("cosine_exact_" + std::to_string(stop));
    const Result first =
        run({.cosine_t_max = 8, .checkpoint_dir = dir.string(), .interrupt_at_step = stop});
    EXPECT_TRUE(first.interrupted);
    EXPECT_EQ(first.global_step, stop);
    const std::string last = (dir / "last.safetensors").string();
    ASSERT_TRUE(fs::exists(last));
    const Result resumed = run({.cosine_t_max = 8, .resume = last});
    EXPECT_FALSE(resumed.interrupted);
    EXPECT_EQ(resumed.global_step, 8);
    EXPECT_EQ(resumed.params, full.params) << "stopped after step " << stop;
    EXPECT_EQ(resumed.losses, full.losses) << "stopped after step " << stop;
    fs::remove_all(dir);
  }
}

// ---- signals ----

TEST(Interrupt, SigintFromACallbackStopsAfterTheStepAndSavesLast) {
  const fs::path dir = temp_dir("sigint");
  const Result full = run({});
  std::vector<std::string> events;
  Result first;
  {
    InterruptHandlers handlers;
    first = run({.checkpoint_dir = dir.string(),
                 .interrupt_at_step = 2,
                 .raise_sigint = true,
                 .events = &events});
  }
  EXPECT_TRUE(first.interrupted);
  EXPECT_EQ(first.global_step, 2);
  EXPECT_EQ(first.batches_in_epoch, 2);  // stopped inside epoch 1, not at its end
  EXPECT_EQ(std::count(events.begin(), events.end(), "module:training_step"), 2);
  EXPECT_EQ(std::count(events.begin(), events.end(), "module:on_train_end"), 0);
  EXPECT_EQ(std::count(events.begin(), events.end(), "module:on_train_epoch_end"), 0);
  const std::string last = (dir / "last.safetensors").string();
  ASSERT_TRUE(fs::exists(last));
  EXPECT_FALSE(pending_interrupt().has_value());  // the handlers' destructor forgot it
  const Result resumed = run({.resume = last});
  EXPECT_EQ(resumed.params, full.params);
  EXPECT_EQ(resumed.losses, full.losses);
  fs::remove_all(dir);
}

// With gradient accumulation a signal inside a window stops the run after the window's
// optimizer step, not after the batch: a checkpoint written mid-window cannot be resumed.
// 4 batches of 8 per epoch, accumulating 3: steps after batches 3 and 4 of each epoch.
TEST(Interrupt, InsideAnAccumulationWindowStopsAfterItsStep) {
  const Result full = run({.accumulate = 3});
  ASSERT_EQ(full.global_step, 4);
  const fs::path dir = temp_dir("accumulate");
  const Result first =
      run({.checkpoint_dir = dir.string(), .accumulate = 3, .interrupt_at_batch = 1});
  EXPECT_TRUE(first.interrupted);
  EXPECT_EQ(first.global_step, 1);
  EXPECT_EQ(first.batches_in_epoch, 3);  // the window's three batches, then its step
  const std::string last = (dir / "last.safetensors").string();
  ASSERT_TRUE(fs::exists(last));
  const Result resumed = run({.resume = last, .accumulate = 3});
  EXPECT_EQ(resumed.global_step, 4);
  EXPECT_EQ(resumed.params, full.params);
  EXPECT_EQ(resumed.losses, full.losses);
  fs::remove_all(dir);
}

// A run resumed from an every_n_train_steps checkpoint under gradient accumulation starts
// inside no window, but its first batches leave the step where the checkpoint was: that step is
// not saved again (a versioned copy written mid-window would come with a warning, and
// last.safetensors could then not be resumed).
TEST(ResumeRules, AStepCheckpointResumedUnderAccumulationIsNotSavedAgain) {
  const fs::path dir = temp_dir("every_n_accumulate");
  run({.batch_size = 4,
       .max_steps = 1,
       .checkpoint_dir = dir.string(),
       .accumulate = 3,
       .every_n_train_steps = 1});
  const std::string step1 = (dir / "epoch=0-step=1.safetensors").string();
  ASSERT_TRUE(fs::exists(step1));
  ::testing::internal::CaptureStderr();
  const Result resumed = run({.batch_size = 4,
                              .resume = step1,
                              .checkpoint_dir = dir.string(),
                              .accumulate = 3,
                              .every_n_train_steps = 1});
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_FALSE(contains(err, "inside a gradient-accumulation window")) << err;
  EXPECT_EQ(resumed.global_step, 6);
  std::vector<std::string> files;
  for (const auto& entry : fs::directory_iterator(dir))
    files.push_back(entry.path().filename().string());
  std::sort(files.begin(), files.end());
  EXPECT_EQ(files,
            (std::vector<std::string>{"epoch=0-step=1.safetensors", "epoch=0-step=2.safetensors",
                                      "epoch=0-step=3.safetensors", "epoch=1-step=4.safetensors",
                                      "epoch=1-step=5.safetensors", "epoch=1-step=6.safetensors"}));
  fs::remove_all(dir);
}

// A changed optimizer hyper-parameter other than the lr (here AdamW's weight decay) is applied
// from the resume on, with a warning: loading the optimizer's state restores the checkpoint's
// value, as torch.optim's load_state_dict does, so the new one is set again after it. The
// resumed run equals one that changed it itself at that step, bit for bit.
TEST(ResumeRules, ChangedWeightDecayIsAppliedFromTheResumeWithAWarning) {
  const fs::path dir = temp_dir("weight_decay");
  const std::string mid = (dir / "mid.safetensors").string();
  run({.save_at_step = 3, .save_path = mid, .weight_decay = 0.01});
  ::testing::internal::CaptureStderr();
  const Result changed = run({.resume = mid, .weight_decay = 0.5});
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_TRUE(contains(err,
                       "mantissa: warning: resuming: the optimizer's weight_decay was 0.01 in the "
                       "checkpoint and is 0.5 in this run: applying this run's from step 3 on"))
      << err;
  const Result switched =
      run({.weight_decay = 0.01, .weight_decay_from_step = 3, .weight_decay_then = 0.5});
  EXPECT_EQ(changed.params, switched.params);
  EXPECT_EQ(changed.losses, switched.losses);
  // Unchanged: no warning, the same run as one never stopped.
  ::testing::internal::CaptureStderr();
  const Result same = run({.resume = mid, .weight_decay = 0.01});
  EXPECT_FALSE(contains(::testing::internal::GetCapturedStderr(), "weight_decay"));
  EXPECT_EQ(same.params, run({.weight_decay = 0.01}).params);
  EXPECT_NE(same.params, changed.params);
  fs::remove_all(dir);
}

TEST(Interrupt, ASignalBeforeFitStopsBeforeTheFirstStep) {
  const fs::path dir = temp_dir("early");
  request_interrupt(SIGTERM);
  const Result r = run({.checkpoint_dir = dir.string()});
  EXPECT_TRUE(r.interrupted);
  EXPECT_EQ(r.global_step, 0);
  EXPECT_TRUE(fs::exists(dir / "last.safetensors"));
  EXPECT_STREQ(signal_name(SIGTERM), "SIGTERM");
  fs::remove_all(dir);
}

// GNU timeout (and kill to a process group) delivers one SIGTERM twice within microseconds:
// that is one request, which saves a checkpoint, not a second interrupt that exits without one.
TEST(InterruptDeathTest, TheSameSignalTwiceAtOnceIsOneRequest) {
  ::testing::FLAGS_gtest_death_test_style = "threadsafe";
  EXPECT_EXIT(
      {
        InterruptHandlers handlers;
        ::kill(::getpid(), SIGTERM);
        ::kill(::getpid(), SIGTERM);
        std::this_thread::sleep_for(std::chrono::milliseconds(300));
        ::_exit(pending_interrupt() == SIGTERM ? 7 : 8);  // no destructors: the watcher runs
      },
      ::testing::ExitedWithCode(7), "termination requested");
}

TEST(InterruptDeathTest, ASecondSignalExitsAtOnce) {
  ::testing::FLAGS_gtest_death_test_style = "threadsafe";
  EXPECT_EXIT(
      {
        InterruptHandlers handlers;
        ::kill(::getpid(), SIGINT);
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
        ::kill(::getpid(), SIGINT);
        std::this_thread::sleep_for(std::chrono::seconds(5));
      },
      ::testing::ExitedWithCode(128 + SIGINT), "second interrupt");
}

// oneDNN's JIT GEMM kernels point rsp at heap memory while they run, so a signal delivered to a
// thread inside one writes its frame over the heap (a Ctrl-C test failed that way, with garbage
// class targets and crashes). While the handlers are installed no compute thread may take the
// signals; they are given back as they were afterwards.
TEST(Interrupt, ComputeThreadsDoNotTakeTheSignalsWhileHandlersAreInstalled) {
  auto blocked_in_team = [] {
    int threads = 0, blocked = 0;
#pragma omp parallel reduction(+ : threads, blocked)
    {
      sigset_t mask;
      pthread_sigmask(SIG_BLOCK, nullptr, &mask);
      threads += 1;
      blocked += (sigismember(&mask, SIGINT) == 1 && sigismember(&mask, SIGTERM) == 1) ? 1 : 0;
    }
    return std::pair{threads, blocked};
  };
  const auto before = blocked_in_team();
  EXPECT_EQ(before.second, 0);
  {
    InterruptHandlers handlers;
    const auto during = blocked_in_team();
    EXPECT_GE(during.first, 1);
    EXPECT_EQ(during.second, during.first) << "a compute thread could receive SIGINT/SIGTERM";
    ::kill(::getpid(), SIGTERM);  // received by the watcher thread, not by a compute thread
    for (int i = 0; i < 5000 && !pending_interrupt(); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    EXPECT_EQ(pending_interrupt().value_or(0), SIGTERM);
  }
  EXPECT_EQ(blocked_in_team().second, 0);
  EXPECT_FALSE(pending_interrupt().has_value());
}

// ---- the new checkpoint fields are validated ----

TEST(ResumeRules, CorruptRunFieldsAndHistoryAreErrorsNamingTheField) {
  const fs::path dir = temp_dir("fields");
  const std::string mid = (dir / "mid.safetensors").string();
  run({.save_at_step = 2, .save_path = mid});
  const CheckpointContents good = load_checkpoint_file(mid);
  auto with_run_field = [&](const std::string& key, const nlohmann::json& value) {
    CheckpointContents c = good;
    auto meta = nlohmann::json::parse(c.metadata.at(kCheckpointMetadataKey));
    meta["run"][key] = value;
    c.metadata[kCheckpointMetadataKey] = meta.dump();
    return c;
  };
  auto restore_error = [&](const CheckpointContents& c) {
    TrainerOptions o = quiet_options();
    o.max_epochs = 0;  // fit sets the module up and trains nothing
    Trainer t(o);
    TinyModule m(TinyOptions{.lr = 0.01, .adamw = true, .dropout = 0.3});
    data::DataLoader loader(testing::tiny_dataset(32), 8, true, 5);
    t.fit(m, loader);
    return error_of([&] { restore_checkpoint(t, c, "crafted.safetensors"); });
  };
  EXPECT_TRUE(contains(restore_error(with_run_field("batch_size", "8")), "'run.batch_size'"));
  EXPECT_TRUE(contains(restore_error(with_run_field("batch_size", 0)), "'run.batch_size'"));
  EXPECT_TRUE(contains(restore_error(with_run_field("seed", -3)), "'run.seed'"));
  EXPECT_TRUE(contains(restore_error(with_run_field("shuffle", 1)), "'run.shuffle'"));
  EXPECT_TRUE(
      contains(restore_error(with_run_field("configured_lrs", nlohmann::json::array({"x"}))),
               "'run.configured_lrs[0]'"));
  CheckpointContents short_history = good;
  for (auto& [name, t] : short_history.tensors) {
    if (name == "trainer.step_losses") t = tensor_of({1.0}, {1}, kFloat64);
  }
  EXPECT_TRUE(contains(restore_error(short_history), "'trainer.step_losses'"));
  fs::remove_all(dir);
}

}  // namespace
}  // namespace mantissa::train
