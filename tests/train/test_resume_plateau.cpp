// A Trainer resume under ReduceLROnPlateau (docs/trainer.md, "What a resume may change"): its
// running state (best, bad epochs, reduced lrs) is carried on, not compared as a schedule, so an
// unchanged run resumes bit for bit (a fresh scheduler's best differs from any saved one, so
// comparing it would refuse every such resume as "another schedule"); a changed option is refused
// as any scheduler's changed setting is, since load_state_dict would adopt the saved one.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

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

struct PlateauFit {
  std::vector<double> lr_after_step;  // the optimizer's lr after each step of this fit
  std::vector<float> params;
};

// 4 epochs of 4 batches; the plateau halves the lr after every epoch but the first (in max mode
// with an absolute threshold of 1000 no val_loss improves on the first one). save_at_step > 0 saves
// `path` after that step.
PlateauFit run(int64_t patience, const std::string& path, int64_t save_at_step, bool resume,
               double lr = 0.1) {
  TrainerOptions o = quiet_options();
  o.max_epochs = 4;
  o.seed = 11;
  PlateauFit r;
  auto cb = std::make_shared<LambdaCallback>();
  cb->batch_end = [&](Trainer& t, int64_t) {
    r.lr_after_step.push_back(t.optimizer()->lr());
    if (t.global_step() == save_at_step) t.save_checkpoint(path);
  };
  o.callbacks.push_back(cb);
  TinyOptions t;
  t.lr = lr;
  t.schedulers = [patience](optim::Optimizer& opt) {
    optim::ReduceLROnPlateau::Options p;
    p.mode = "max";
    p.threshold_mode = "abs";
    p.threshold = 1e3;
    p.factor = 0.5;
    p.patience = patience;
    LRSchedulerConfig c;
    c.scheduler = std::make_shared<optim::ReduceLROnPlateau>(opt, p);
    c.monitor = "val_loss";
    return std::vector<LRSchedulerConfig>{c};
  };
  Trainer trainer(o);
  TinyModule module(t);
  data::DataLoader train(testing::tiny_dataset(), 8, /*shuffle=*/true, 5);
  data::DataLoader val(testing::tiny_dataset(16, 77), 8);
  trainer.fit(module, train, &val, resume ? path : "");
  r.params = flat_params(module);
  return r;
}

TEST(ResumePlateau, AnUnchangedRunResumesBitForBitAndAChangedOptionIsRefused) {
  const fs::path dir =
      fs::temp_directory_path() / ("mantissa_resume_plateau_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string mid = (dir / "step10.safetensors").string();
  const PlateauFit straight = run(0, "", -1, false);
  ASSERT_EQ(straight.lr_after_step.size(), 16u);
  EXPECT_EQ(straight.lr_after_step.back(), 0.1 / 4);  // halved after epochs 1 and 2
  // Step 10 is in epoch 2: the plateau has stepped twice (best set, the lr halved once).
  run(0, mid, 10, false);
  const PlateauFit resumed = run(0, mid, -1, true);
  EXPECT_EQ(resumed.params, straight.params);
  EXPECT_EQ(resumed.lr_after_step,
            std::vector<double>(straight.lr_after_step.begin() + 10, straight.lr_after_step.end()));

  const std::string msg = error_of([&] { run(2, mid, -1, true); });
  EXPECT_NE(msg.find("LR scheduler 0 (ReduceLROnPlateau) has another schedule"), msg.npos) << msg;
  EXPECT_NE(msg.find("patience 0 in the checkpoint, 2 in this run"), msg.npos) << msg;
  fs::remove_all(dir);
}

// A new learning rate on resume is applied as the plateau's new height: the lr it had reduced
// to (halved once by step 10) is scaled by new / old, and the reductions go on from there, as
// under a closed-form schedule whose base lr is replaced (not left at the saved lr while the
// resume warns that the new one is applied).
TEST(ResumePlateau, ANewLearningRateMovesTheReducedLrToTheNewHeight) {
  const fs::path dir =
      fs::temp_directory_path() / ("mantissa_resume_plateau_lr_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string mid = (dir / "step10.safetensors").string();
  const PlateauFit straight = run(0, "", -1, false);
  run(0, mid, 10, false);
  ::testing::internal::CaptureStderr();
  const PlateauFit resumed = run(0, mid, -1, true, 0.2);
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("as the LR schedulers' base"), err.npos) << err;
  ASSERT_EQ(resumed.lr_after_step.size(), 6u);
  for (size_t i = 0; i < 6; ++i) {
    EXPECT_EQ(resumed.lr_after_step[i], 2 * straight.lr_after_step[10 + i]) << "step " << 11 + i;
  }
  fs::remove_all(dir);
}

}  // namespace
}  // namespace mantissa::train
