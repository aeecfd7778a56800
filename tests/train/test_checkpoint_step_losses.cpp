// The loss history of a checkpoint (tensor trainer.step_losses) goes into the resumed run's
// step_losses() and from there into its metrics: a history holding inf, which no run writes (a
// run stops at a loss that is not finite), is refused naming the file, the tensor and the
// step. It resumed in silence, and the command's metrics JSON reported the inf. NaN (a step
// whose training_step returned no loss) and negative losses (a custom module's) still resume.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <limits>
#include <string>

#include "mantissa/train/checkpoint/checkpoint.h"
#include "support/test_util.h"
#include "tiny_module.h"

namespace mantissa::train {
namespace {

namespace fs = std::filesystem;
using mantissa::testing::expect_error;
using testing::quiet_options;
using testing::TinyModule;

// TinyModule on 32 examples in batches of 8: one epoch is 4 optimizer steps.
std::vector<double> fit(int64_t epochs, const std::string& resume, const std::string& save) {
  TrainerOptions o = quiet_options();
  o.seed = 3;
  o.max_epochs = epochs;
  Trainer trainer(o);
  TinyModule module;
  data::DataLoader loader(testing::tiny_dataset(32), 8, /*shuffle=*/true, 5);
  trainer.fit(module, loader, nullptr, resume);
  if (!save.empty()) trainer.save_checkpoint(save);
  return trainer.step_losses();
}

// The checkpoint at PATH with step 2's loss replaced by VALUE, written to OUT.
std::string with_step_loss(const std::string& path, const std::string& out, double value) {
  CheckpointContents c = load_checkpoint_file(path);
  bool found = false;
  for (auto& [name, t] : c.tensors) {
    if (name != "trainer.step_losses") continue;
    std::vector<double> losses = t.to_vector<double>();
    losses.at(1) = value;
    t = tensor(losses, {static_cast<int64_t>(losses.size())});
    found = true;
  }
  EXPECT_TRUE(found) << "no trainer.step_losses in " << path;
  save_checkpoint_file(out, c);
  return out;
}

TEST(CheckpointStepLosses, AnInfiniteLossIsRefusedNamingTheStep) {
  const fs::path dir =
      fs::temp_directory_path() / ("mantissa_step_losses_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string clean = (dir / "clean.safetensors").string();
  const std::vector<double> trained = fit(1, "", clean);
  ASSERT_EQ(trained.size(), 4u);

  for (double inf :
       {std::numeric_limits<double>::infinity(), -std::numeric_limits<double>::infinity()}) {
    const std::string bad = with_step_loss(clean, (dir / "inf.safetensors").string(), inf);
    expect_error([&] { fit(2, bad, ""); },
                 {"inf.safetensors", "tensor 'trainer.step_losses' holds",
                  "inf for optimizer step 2", "no run writes one: the file is damaged"});
  }
  // NaN and a negative loss are values a run can record: they resume, and the history keeps them.
  const std::vector<double> nan_run =
      fit(2, with_step_loss(clean, (dir / "nan.safetensors").string(), std::nan("")), "");
  ASSERT_EQ(nan_run.size(), 8u);
  EXPECT_TRUE(std::isnan(nan_run[1]));
  EXPECT_EQ(nan_run[0], trained[0]);
  const std::vector<double> negative_run =
      fit(2, with_step_loss(clean, (dir / "negative.safetensors").string(), -0.5), "");
  ASSERT_EQ(negative_run.size(), 8u);
  EXPECT_EQ(negative_run[1], -0.5);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace mantissa::train
