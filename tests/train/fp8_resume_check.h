#pragma once
// The transformer-engine precision's resume check, run on the CPU (test_transformer_engine_
// precision.cpp) and on a GPU (tests/cuda/test_cuda_fp8.cpp): 6 straight steps against 3 steps,
// a checkpoint, and a resume to 6, bit for bit (losses, weights, FP8 state).
//
// A fit stopped by max_steps inside an epoch validates the final weights, a validation the
// longer run does not have at that step. Its forward records amaxes into the FP8 history, which
// the Trainer puts back after that validation: kept, they would change the resumed run's scales
// (the CLI's
// `--precision transformer-engine --max-steps 12` + `--resume` would differ from 24 straight
// steps from step 15 on). The validation data here is 8x larger than the training data, so its amax
// would raise the input scale's amax at once.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "mantissa/train/checkpoint/model_checkpoint.h"
#include "mantissa/train/trainer.h"
#include "support/temp_dir.h"
#include "tiny_module.h"

namespace mantissa::train::testing {

inline void expect_fp8_resume_bit_exact(const std::string& accelerator) {
  mantissa::testing::TempDir dir;
  struct Result {
    std::vector<double> losses;
    std::vector<float> weights;
    nlohmann::json fp8;
  };
  auto run = [&](int64_t max_steps, const std::string& ckpt_dir, const std::string& resume) {
    TrainerOptions o = quiet_options("transformer-engine");
    o.accelerator = accelerator;
    o.max_epochs = 3;
    o.max_steps = max_steps;
    o.seed = 7;
    o.precision_options = {{"fp8_amax_history_len", "16"}};
    if (!ckpt_dir.empty()) {
      ModelCheckpointOptions mc;
      mc.dirpath = ckpt_dir;
      mc.save_top_k = 0;
      mc.save_last = true;
      o.callbacks.push_back(std::make_shared<ModelCheckpoint>(mc));
    }
    Trainer trainer(o);
    TinyModule module({.lr = 0.05, .adamw = true});
    data::DataLoader train(tiny_dataset(32), 4, /*shuffle=*/true, /*seed=*/1);  // 8 batches
    Generator gen(9);
    auto val_set = std::make_shared<data::TensorDataset>(mul(randn({8, 4}, kFloat32, &gen), 8.0),
                                                         randint(0, 3, {8}, kInt64, &gen));
    data::DataLoader val(val_set, 8);
    trainer.fit(module, train, &val, resume);
    return Result{trainer.step_losses(), flat_params(module),
                  trainer.precision_plugin().state_dict()};
  };
  const Result straight = run(6, "", "");
  const Result first = run(3, dir.str(), "");  // stops after batch 3 of 8, then validates
  const Result resumed = run(6, "", dir.file("last.safetensors"));
  ASSERT_EQ(first.losses.size(), 3u);
  ASSERT_EQ(straight.losses.size(), 6u);
  ASSERT_EQ(resumed.losses.size(), 6u);
  for (size_t i = 0; i < 6; ++i) EXPECT_EQ(resumed.losses[i], straight.losses[i]) << "step " << i;
  EXPECT_EQ(resumed.weights, straight.weights);
  EXPECT_EQ(resumed.fp8, straight.fp8);
  // The first run's state after its final validation is the state its last step left: the
  // history's newest row holds nothing of the validation's 8x larger inputs.
  const auto& h = first.fp8.at("fp8_meta").at("net.0").at("amax_history");
  EXPECT_EQ(h.at(0), nlohmann::json::array({0.0, 0.0, 0.0}));
}

}  // namespace mantissa::train::testing
