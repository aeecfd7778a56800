// A fine-tune resumed inside an epoch reports that epoch whole in its metrics: the entry of
// epoch_seconds (and its samples) counts what was trained before the checkpoint, and the lists
// begin with the checkpoint's epochs. On the tiny Llama of tests/fixtures/hf/finetune.
#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "mantissa/recipes/finetune_run.h"
#include "mantissa/train/checkpoint/checkpoint.h"
#include "support/temp_dir.h"

namespace mantissa::recipes {
namespace {

// Each epoch entry's samples (its seconds times its samples/s).
std::vector<int64_t> epoch_samples(const TrainMetrics& m) {
  std::vector<int64_t> out;
  for (size_t e = 0; e < m.epoch_seconds.size(); ++e)
    out.push_back(std::llround(m.epoch_seconds[e] * m.epoch_samples_per_second[e]));
  return out;
}

TEST(FinetuneResumeEpochs, AResumedEpochCountsWhatWasTrainedBeforeTheCheckpoint) {
  mantissa::testing::TempDir dir;
  TrainOptions o;
  FinetuneOptions f;
  o.quiet = true;
  o.threads = 1;
  o.batch_size = 2;
  o.quant.lora_rank = 4;
  o.quant.lora_alpha = 32;
  o.every_n_train_steps = 1;
  o.checkpoint_dir = dir.file("ck");
  f.model_dir = std::string(MANTISSA_FIXTURES_DIR) + "/hf/finetune/llama";
  f.data = std::string(MANTISSA_FIXTURES_DIR) + "/hf/finetune/qa.jsonl";
  f.output_dir = dir.file("out");
  f.block_size = 32;
  f.epochs = 2;
  f.eval_interval = 1000;
  const TrainMetrics through = run_finetune(o, f);
  ASSERT_EQ(through.epoch_seconds.size(), 2u);
  // 67 training blocks of 32 tokens: 34 batches an epoch, the last of one block.
  const int64_t per_epoch = 34;
  EXPECT_EQ(through.steps, 2 * per_epoch);
  const std::vector<int64_t> samples = epoch_samples(through);
  EXPECT_EQ(samples, (std::vector<int64_t>{67, 67}));

  // One step into epoch 1: its part so far is in the checkpoint.
  const std::string ck =
      dir.file("ck/epoch=1-step=" + std::to_string(per_epoch + 1) + ".safetensors");
  const nlohmann::json state = nlohmann::json::parse(
      train::load_checkpoint_file(ck).metadata.at(train::kCheckpointMetadataKey))["module"];
  EXPECT_EQ(state.at("epoch_seconds"), nlohmann::json::array({through.epoch_seconds[0]}));
  EXPECT_EQ(state.at("epoch_samples_so_far"), 2);
  const double before = state.at("epoch_seconds_so_far").get<double>();
  EXPECT_GT(before, 0);

  TrainOptions r = o;
  r.resume = ck;
  r.checkpoint_dir = dir.file("ck_resumed");
  FinetuneOptions rf = f;
  rf.output_dir = dir.file("out_resumed");
  const TrainMetrics resumed = run_finetune(r, rf);
  EXPECT_EQ(resumed.steps, through.steps);
  ASSERT_EQ(resumed.epoch_seconds.size(), 2u);
  EXPECT_EQ(resumed.epoch_seconds[0], through.epoch_seconds[0]);
  EXPECT_GE(resumed.epoch_seconds[1], before);
  EXPECT_EQ(epoch_samples(resumed), samples);
}

}  // namespace
}  // namespace mantissa::recipes
