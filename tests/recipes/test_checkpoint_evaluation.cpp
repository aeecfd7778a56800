// `mantissa eval` as a library call: a C++ caller of run_checkpoint_evaluation gets the checks
// of the checkpoint against the options that the command line gets.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>

#include <nlohmann/json.hpp>

#include "mantissa/io/safetensors.h"
#include "mantissa/mantissa.h"
#include "mantissa/recipes/checkpoint_evaluation.h"
#include "mantissa/train/checkpoint/checkpoint.h"
#include "support/temp_dir.h"
#include "support/test_util.h"
#include "support/tiny_gpt.h"

namespace mantissa::recipes {
namespace {

// An MLP 784-16-10 checkpoint whose first layer holds LoRA adapters of rank 4.
std::string save_lora_checkpoint(const mantissa::testing::TempDir& dir,
                                 const nlohmann::json& meta) {
  const std::string path = dir.file("lora.safetensors");
  const io::NamedTensors tensors = {{"model.net.0.base_layer.weight", zeros({16, 784})},
                                    {"model.net.0.base_layer.bias", zeros({16})},
                                    {"model.net.0.lora_A.weight", zeros({4, 784})},
                                    {"model.net.0.lora_B.weight", zeros({16, 4})},
                                    {"model.net.2.weight", zeros({10, 16})},
                                    {"model.net.2.bias", zeros({10})}};
  io::save_safetensors(path, tensors, {{train::kCheckpointMetadataKey, meta.dump()}});
  return path;
}

TEST(CheckpointEvaluation, LibraryCallerGetsTheLoraRankCheck) {
  mantissa::testing::TempDir dir;
  const std::string path = save_lora_checkpoint(dir, {{"precision", "32-true"}});
  TrainOptions o;
  o.hidden = "16";
  GptOptions g;
  EXPECT_EQ(mantissa::testing::error_of([&] { run_checkpoint_evaluation(path, o, g); }),
            "[eval] " + path +
                " holds LoRA adapters of rank 4: pass --lora-rank 4 and the run's --lora-alpha "
                "(and its --precision and --quant-ignore for quantized bases)");
}

TEST(CheckpointEvaluation, PrecisionAndModelComeFromTheFileUnlessGiven) {
  mantissa::testing::TempDir dir;
  const std::string path = save_lora_checkpoint(
      dir, {{"precision", "bf16-mixed"},
            {"hyper_parameters", {{"model", "mlp"}, {"hidden", "16"}, {"lora-rank", 4}}}});
  TrainOptions o;
  GptOptions g;
  settle_evaluation_options(
      path, [](const std::string&) { return false; }, o, g);
  EXPECT_EQ(o.precision, "bf16-mixed");
  EXPECT_EQ(o.hidden, "16");
  EXPECT_EQ(o.quant.lora_rank, 4);
  EXPECT_EQ(o.evaluate_checkpoint, path);
  // A given precision wins; the file's LoRA adapters cannot go under a converted base.
  o = TrainOptions{};
  EXPECT_EQ(mantissa::testing::error_of([&] {
              o.precision = "nf4";
              settle_evaluation_options(
                  path, [](const std::string& flag) { return flag == "precision"; }, o, g);
            }),
            "[eval] " + path +
                " holds LoRA adapters over bf16-mixed weights; converting the base under "
                "trained adapters is not supported: leave out --precision");
}

std::string read(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// The refusal to replace an earlier run's --metrics-json is the library call's, as train's and
// finetune's are their run functions': it comes before the checkpoint is read, and
// overwrite_output_dir lets the evaluation replace the file.
TEST(CheckpointEvaluation, LibraryCallerGetsTheMetricsJsonRefusal) {
  mantissa::testing::TempDir dir;
  TrainOptions t;
  t.model = "gpt";
  t.batch_size = 4;
  t.quiet = true;
  GptOptions tg =
      mantissa::testing::tiny_gpt(std::string(MANTISSA_FIXTURES_DIR) + "/hf/finetune/corpus.txt");
  tg.max_steps = 2;
  tg.save_weights = dir.file("gpt.safetensors");
  run_gpt_training(t, tg);

  TrainOptions o;
  o.model = "gpt";
  o.quiet = true;
  o.metrics_json = dir.file("m.json");
  std::ofstream(o.metrics_json) << "{}\n";
  GptOptions g;
  g.text = tg.text;
  const std::string refusal =
      "[eval] --metrics-json '" + o.metrics_json +
      "' already exists (3 bytes), and this run would replace it; give a new file, or pass "
      "--overwrite-output-dir to replace it";
  EXPECT_EQ(mantissa::testing::error_of([&] { run_checkpoint_evaluation(tg.save_weights, o, g); }),
            refusal);
  // Before the checkpoint is read: a missing one is not what is reported.
  EXPECT_EQ(mantissa::testing::error_of(
                [&] { run_checkpoint_evaluation(dir.file("missing.safetensors"), o, g); }),
            refusal);
  EXPECT_EQ(read(o.metrics_json), "{}\n");

  o.overwrite_output_dir = true;
  const TrainMetrics m = run_checkpoint_evaluation(tg.save_weights, o, g);
  ASSERT_TRUE(m.val_loss_nats_per_char.has_value());
  const nlohmann::json j = nlohmann::json::parse(read(o.metrics_json));
  EXPECT_EQ(j.at("val_loss_nats_per_char").get<double>(), *m.val_loss_nats_per_char);

  // An empty file holds no earlier run's numbers.
  TrainOptions e;
  e.model = "gpt";
  e.quiet = true;
  e.metrics_json = dir.file("empty.json");
  std::ofstream(e.metrics_json).flush();
  GptOptions eg;
  eg.text = tg.text;
  run_checkpoint_evaluation(tg.save_weights, e, eg);
  EXPECT_EQ(nlohmann::json::parse(read(e.metrics_json)).at("val_loss_nats_per_char").get<double>(),
            *m.val_loss_nats_per_char);
}

}  // namespace
}  // namespace mantissa::recipes
