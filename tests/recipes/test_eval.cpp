// `mantissa eval` (apps/eval_command.cpp): the weights of a checkpoint or a --save-weights file
// evaluated without training give exactly the numbers the training run reported for them, for
// an image model and for the GPT; weights that do not fit the model are a clear error.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "mantissa/data/fashion_mnist.h"
#include "mantissa/io/safetensors.h"
#include "mantissa/recipes/gpt_run.h"
#include "mantissa/recipes/image_run.h"
#include "support/temp_dir.h"
#include "support/test_util.h"

namespace mantissa::recipes {
namespace {

namespace fs = std::filesystem;
using mantissa::testing::expect_error;
using mantissa::testing::TempDir;

TEST(Eval, ImageCheckpointGivesTheTrainedRunsFinalTestAccuracy) {
  if (!fs::exists(data::FashionMNIST::default_root() + "/train-images-idx3-ubyte.gz"))
    GTEST_SKIP() << "Fashion-MNIST is not installed (scripts/setup.sh installs it)";
  TempDir dir;
  for (const char* precision : {"32-true", "bf16-true"}) {
    SCOPED_TRACE(precision);
    TrainOptions o;
    o.epochs = 1;
    o.batch_size = 128;
    o.train_subset = 512;
    o.hidden = "32";
    o.seed = 3;
    o.quiet = true;
    o.progress_bar = false;
    o.precision = precision;
    o.checkpoint_dir = dir.file(std::string("ckpt_") + precision);
    const TrainMetrics trained = run_training(o);

    TrainOptions e;
    e.hidden = "32";
    e.precision = precision;
    e.quiet = true;
    e.progress_bar = false;
    e.evaluate_checkpoint = o.checkpoint_dir + "/last.safetensors";
    const TrainMetrics evaluated = run_evaluation(e);
    ASSERT_TRUE(evaluated.final_test_accuracy.has_value());
    EXPECT_EQ(*evaluated.final_test_accuracy, *trained.final_test_accuracy);
    EXPECT_EQ(*evaluated.final_test_loss, *trained.final_test_loss);
    EXPECT_TRUE(evaluated.step_losses.empty());

    // --predictions: one row per test image whose classes give the same accuracy.
    e.predictions_csv = dir.file(std::string("pred_") + precision + ".csv");
    const TrainMetrics with_predictions = run_evaluation(e);
    EXPECT_EQ(*with_predictions.final_test_accuracy, *trained.final_test_accuracy);
    std::ifstream csv(e.predictions_csv);
    std::string line;
    ASSERT_TRUE(std::getline(csv, line));
    EXPECT_EQ(line, "index,predicted,label");
    int64_t rows = 0, correct = 0, index = 0, predicted = 0, label = 0;
    char comma1 = 0, comma2 = 0;
    while (csv >> index >> comma1 >> predicted >> comma2 >> label) {
      EXPECT_EQ(index, rows);
      EXPECT_TRUE(predicted >= 0 && predicted < 10);
      correct += predicted == label;
      ++rows;
    }
    EXPECT_EQ(rows, 10000);  // the Fashion-MNIST test set
    EXPECT_DOUBLE_EQ(static_cast<double>(correct) / static_cast<double>(rows),
                     *trained.final_test_accuracy);
    e.predictions_csv.clear();

    // Another width does not fit: the error names the file and the first bad key.
    e.hidden = "16";
    expect_error([&] { run_evaluation(e); }, "do not fit");
  }
}

// A 1-layer GPT of width 32 over 2000 bytes of text in `dir` (its run options in o), saving its
// weights to gpt.safetensors there.
GptOptions tiny_gpt_run(TempDir& dir, TrainOptions& o) {
  std::string text;
  while (text.size() < 2000) text += "the quick brown fox jumps over the lazy dog. ";
  text.resize(2000);
  std::ofstream(dir.file("text.txt")) << text;
  o.model = "gpt";
  o.batch_size = 8;
  o.seed = 1;
  o.quiet = true;
  GptOptions g;
  g.text = dir.file("text.txt");
  g.layers = 1;
  g.width = 32;
  g.heads = 2;
  g.context = 16;
  g.sample_tokens = 0;
  g.save_weights = dir.file("gpt.safetensors");
  return g;
}

TEST(Eval, GptWeightsFileGivesTheTrainedRunsValidationLoss) {
  TempDir dir;
  TrainOptions o;
  o.lr = 1e-2;
  GptOptions g = tiny_gpt_run(dir, o);
  g.warmup_steps = 2;
  g.eval_batches = 100;  // more than the validation text has: the final validation sees it all
  g.max_steps = 4;
  const TrainMetrics trained = run_gpt_training(o, g);
  ASSERT_TRUE(trained.val_loss_nats_per_char.has_value());

  TrainOptions e = o;
  e.evaluate_checkpoint = g.save_weights;
  const TrainMetrics evaluated = run_gpt_evaluation(e, g);
  ASSERT_TRUE(evaluated.val_loss_nats_per_char.has_value());
  EXPECT_DOUBLE_EQ(*evaluated.val_loss_nats_per_char, *trained.val_loss_nats_per_char);

  GptOptions wider = g;
  wider.width = 64;
  expect_error([&] { run_gpt_evaluation(e, wider); }, "do not fit");
  e.evaluate_checkpoint = dir.file("missing.safetensors");
  expect_error([&] { run_gpt_evaluation(e, g); }, "missing.safetensors");
}

// `path` with the tensors of `names` set to `value` (finite: the load checks take it), as
// `damaged`.
std::string with_values(const std::string& path, const std::vector<std::string>& names, float value,
                        const std::string& damaged) {
  io::SafetensorsFile file = io::load_safetensors(path);
  for (auto& [name, t] : file.tensors) {
    if (std::find(names.begin(), names.end(), name) == names.end()) continue;
    float* p = t.data<float>();
    for (int64_t i = 0; i < t.numel(); ++i) p[i] = value;
  }
  // Weights set by hand, not damage to a written file: without the checksums (which would
  // refuse any change) the evaluation judges them.
  file.metadata.erase("mantissa.checksums");
  io::save_safetensors(damaged, file.tensors, file.metadata);
  return damaged;
}

// An evaluation whose loss is NaN or inf is an error, not a result: eval printed "validation
// loss nan" (or "test loss nan") and exited 0. Weights at the edge of float32 (finite, so the
// load takes them) overflow in the forward pass.
TEST(Eval, NonFiniteLossIsAnError) {
  TempDir dir;
  TrainOptions o;
  GptOptions g = tiny_gpt_run(dir, o);
  g.max_steps = 1;
  run_gpt_training(o, g);
  TrainOptions e = o;
  e.evaluate_checkpoint = with_values(g.save_weights, {"model.ln_f.weight", "model.ln_f.bias"},
                                      3e38f, dir.file("overflow.safetensors"));
  e.metrics_json = dir.file("eval.json");
  expect_error([&] { run_gpt_evaluation(e, g); },
               {"[eval] " + e.evaluate_checkpoint + ": the validation loss is ",
                ": these weights give non-finite outputs in 32-true"});
  EXPECT_FALSE(fs::exists(e.metrics_json));  // no result to report

  if (!fs::exists(data::FashionMNIST::default_root() + "/train-images-idx3-ubyte.gz"))
    GTEST_SKIP() << "Fashion-MNIST is not installed (scripts/setup.sh installs it)";
  TrainOptions image;
  image.max_steps = 1;
  image.train_subset = 64;
  image.hidden = "16";
  image.quiet = true;
  image.progress_bar = false;
  image.checkpoint_dir = dir.file("ckpt");
  run_training(image);
  TrainOptions ie;
  ie.hidden = "16";
  ie.quiet = true;
  ie.progress_bar = false;
  ie.evaluate_checkpoint = with_values(image.checkpoint_dir + "/last.safetensors",
                                       {"model.net.2.weight", "model.net.2.bias"}, 3e38f,
                                       dir.file("overflow_mlp.safetensors"));
  expect_error([&] { run_evaluation(ie); },
               {"[eval] " + ie.evaluate_checkpoint + ": the test loss is ",
                ": these weights give non-finite outputs in 32-true"});
}

}  // namespace
}  // namespace mantissa::recipes
