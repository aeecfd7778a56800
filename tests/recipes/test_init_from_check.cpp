// --init-from against the hyperparameters its file records (mantissa/recipes/init_from_check.h):
// what the tensors' shapes cannot show (a GPT's --heads) must match the run's flags, by eval's
// rules.
#include <gtest/gtest.h>

#include <string>

#include "mantissa/io/safetensors.h"
#include "mantissa/recipes/init_from_check.h"
#include "support/temp_dir.h"
#include "support/test_util.h"

namespace mantissa::recipes {
namespace {

using mantissa::testing::expect_error;
using mantissa::testing::TempDir;

// A --save-weights file of a GPT recording `hparams`.
std::string weights_file(const TempDir& dir, const nlohmann::json& hparams) {
  const std::string path = dir.file("gpt.safetensors");
  io::save_safetensors(
      path, {{"model.wpe.weight", zeros({16, 32}, kFloat32)}},
      {{"precision", "32-true"}, {"model", "gpt"}, {"hyper_parameters", hparams.dump()}});
  return path;
}

TEST(InitFromCheck, RecordedHeadsMustMatchTheRun) {
  TempDir dir;
  TrainOptions o;
  o.model = "gpt";
  o.quant.init_from = weights_file(dir, {{"model", "gpt"},
                                         {"layers", 1},
                                         {"width", 32},
                                         {"heads", 4},
                                         {"context", 16},
                                         {"text", "corpus.txt"},
                                         {"lora-rank", 0}});
  GptOptions g;
  g.layers = 1;
  g.width = 32;
  g.context = 16;
  g.heads = 2;
  expect_error(
      [&] { check_init_from(o, g); },
      {"[--init-from]", "was trained with --heads 4, but --heads is 2 here", "pass --heads 4"});
  g.heads = 4;
  g.text = "another.txt";  // another corpus is what fine-tuning is for
  o.quant.lora_rank = 8;
  EXPECT_NO_THROW(check_init_from(o, g));
  // An image run: --model is named first.
  TrainOptions mlp;
  mlp.quant.init_from = o.quant.init_from;
  expect_error([&] { check_init_from(mlp); },
               {"[--init-from]", "was trained with --model gpt, but --model is mlp here"});
}

TEST(InitFromCheck, DamagedOrMissingRecordsAreLeftToTheLoad) {
  TempDir dir;
  TrainOptions o;
  o.model = "gpt";
  GptOptions g;
  // A value of the wrong type, one the tensors contradict (context 99 against wpe's 16 rows),
  // and no hyperparameters at all: the load's shape checks say what does not fit.
  for (const nlohmann::json& hparams :
       {nlohmann::json{{"model", "gpt"}, {"heads", "four"}},
        nlohmann::json{{"model", "gpt"}, {"context", 99}}, nlohmann::json::object()}) {
    o.quant.init_from = weights_file(dir, hparams);
    EXPECT_NO_THROW(check_init_from(o, g)) << hparams.dump();
  }
  o.quant.init_from = dir.file("absent.safetensors");
  EXPECT_NO_THROW(check_init_from(o, g));
}

}  // namespace
}  // namespace mantissa::recipes
