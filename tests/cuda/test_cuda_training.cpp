// The Trainer on a GPU: a small classifier trained in each precision the CUDA backend runs,
// against the same run on the CPU (same initial weights and batches), and a checkpoint of a GPU
// run read back on the CPU.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "../support/temp_dir.h"
#include "../train/tiny_module.h"
#include "cuda_test_util.h"
#include "mantissa/io/safetensors.h"

namespace mantissa::train {
namespace {

using testing::quiet_options;
using testing::TinyModule;
using testing::TinyOptions;

struct FitResult {
  std::vector<double> losses;
  std::vector<float> params;
  Device device;
};

FitResult fit(const std::string& precision, const std::string& accelerator, int epochs = 3) {
  TrainerOptions o = quiet_options(precision);
  o.accelerator = accelerator;
  o.seed = 7;
  o.max_epochs = epochs;
  Trainer trainer(o);
  manual_seed(7);  // the same initial weights on both devices
  TinyModule module(TinyOptions{.lr = 0.01, .adamw = true});
  data::DataLoader train(testing::tiny_dataset(256, 11), 32);
  data::DataLoader val(testing::tiny_dataset(64, 12), 32);
  trainer.fit(module, train, &val);
  FitResult r{trainer.step_losses(), testing::flat_params(module), trainer.device()};
  for (const auto& p : module.parameters()) EXPECT_EQ(p.device(), trainer.device());
  return r;
}

// Relative distance of two loss curves (max over steps).
double curve_gap(const std::vector<double>& a, const std::vector<double>& b) {
  EXPECT_EQ(a.size(), b.size());
  double gap = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i)
    gap = std::max(gap, std::abs(a[i] - b[i]) / std::max(std::abs(b[i]), 1e-6));
  return gap;
}

TEST(CudaTrainer, EveryGpuPrecisionFollowsTheCpuRun) {
  MANTISSA_REQUIRE_GPU();
  // fp32/fp64: the same arithmetic up to summation order; fp16 and bf16: their rounding.
  const std::vector<std::pair<std::string, double>> cases = {
      {"32-true", 1e-4},    {"64-true", 1e-9}, {"16-mixed", 2e-2},
      {"bf16-mixed", 5e-2}, {"16-true", 3e-2}, {"bf16-true", 1e-1}};
  for (const auto& [precision, tol] : cases) {
    SCOPED_TRACE(precision);
    const FitResult cpu = fit(precision, "cpu");
    const FitResult gpu = fit(precision, "gpu");
    EXPECT_EQ(cpu.device, kCPU);
    EXPECT_EQ(gpu.device, cuda_device(0));
    ASSERT_EQ(gpu.losses.size(), 24u);  // 3 epochs of 8 batches
    EXPECT_LT(curve_gap(gpu.losses, cpu.losses), tol);
    // It learns: the last epoch's mean loss is below the first's (single batches are noisy).
    const auto epoch_mean = [&](size_t e) {
      double sum = 0;
      for (size_t i = 8 * e; i < 8 * e + 8; ++i) sum += gpu.losses[i];
      return sum / 8;
    };
    EXPECT_LT(epoch_mean(2), epoch_mean(0));
  }
}

TEST(CudaTrainer, AutoPicksTheGpuAndTheCheckpointLoadsOnTheCpu) {
  MANTISSA_REQUIRE_GPU();
  mantissa::testing::TempDir dir;
  TrainerOptions o = quiet_options("32-true");
  o.accelerator = "auto";
  o.seed = 3;
  Trainer trainer(o);
  EXPECT_EQ(trainer.device(), cuda_device(0));
  TinyModule module(TinyOptions{.adamw = true});
  data::DataLoader train(testing::tiny_dataset(64, 1), 16);
  trainer.fit(module, train, nullptr);
  const std::string path = dir.file("gpu.safetensors");
  trainer.save_checkpoint(path);
  const io::NamedTensors saved = io::load_safetensors(path).tensors;
  for (const auto& [name, p] : module.named_parameters()) {
    SCOPED_TRACE(name);
    ASSERT_TRUE(p.is_cuda());
    bool found = false;
    for (const auto& [key, t] : saved) {
      if (key.size() >= name.size() &&
          key.compare(key.size() - name.size(), name.size(), name) == 0 && t.shape() == p.shape()) {
        EXPECT_EQ(cuda_test::rel_error(t, p), 0.0);
        found = true;
        break;
      }
    }
    EXPECT_TRUE(found);
  }
}

}  // namespace
}  // namespace mantissa::train
