// run_generate (recipes/generate_run.h) on the tiny GPT-2 of tests/fixtures/hf/finetune, whose
// n_positions is 64: a prompt and --max-new-tokens past its learned positions are refused in the
// flags' terms, with the most --max-new-tokens that fits; up to the last position it generates.
// A Llama's past max_position_embeddings are warned of.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "mantissa/core/warning.h"
#include "mantissa/recipes/generate_run.h"
#include "support/temp_dir.h"
#include "support/test_util.h"

namespace mantissa::recipes {
namespace {

using mantissa::testing::error_of;

TEST(GenerateRun, Gpt2PositionsBeyondNPositionsAreRefusedInTheFlagsTerms) {
  GenerateRunOptions o;
  o.model_dir = std::string(MANTISSA_FIXTURES_DIR) + "/hf/finetune/gpt2";
  o.prompt = "The little robot";
  o.max_new_tokens = 1;
  const auto prompt_tokens = static_cast<int64_t>(run_generate(o, nullptr).prompt_ids.size());
  ASSERT_LT(prompt_tokens, 64);
  o.max_new_tokens = 100;
  EXPECT_EQ(error_of([&] { run_generate(o, nullptr); }),
            "[generate] --max-new-tokens 100 after the prompt's " + std::to_string(prompt_tokens) +
                " tokens needs " + std::to_string(prompt_tokens + 100) +
                " positions, more than the model's n_positions 64 (config.json: GPT-2 has a "
                "learned position for each of those only); give --max-new-tokens " +
                std::to_string(64 - prompt_tokens) + " or less");
  // Up to the last position (fewer when an end token comes first).
  o.max_new_tokens = 64 - prompt_tokens;
  const size_t generated = run_generate(o, nullptr).new_ids.size();
  EXPECT_GE(generated, 1u);
  EXPECT_LE(generated, static_cast<size_t>(64 - prompt_tokens));
  o.prompt = std::string(200, 'a');
  o.max_new_tokens = 1;
  const std::string error = error_of([&] { run_generate(o, nullptr); });
  EXPECT_TRUE(error.starts_with("[generate] --prompt encodes to ")) << error;
  EXPECT_TRUE(
      error.ends_with(" tokens, which fill the model's n_positions 64 (config.json: GPT-2 "
                      "has a learned position for each of those only) and leave none to "
                      "generate; give a shorter --prompt"))
      << error;
}

// A Llama (rotary positions) runs on past max_position_embeddings, warned as finetune's
// --block-size past it is; up to it, no warning.
TEST(GenerateRun, LlamaPositionsBeyondMaxPositionEmbeddingsAreWarned) {
  namespace fs = std::filesystem;
  const mantissa::testing::TempDir temp;
  const fs::path dir = temp.str();
  const fs::path fixture = fs::path(MANTISSA_FIXTURES_DIR) / "hf/finetune/llama";
  for (const char* name :
       {"model.safetensors", "tokenizer.json", "tokenizer_config.json", "generation_config.json"})
    fs::copy_file(fixture / name, dir / name);
  std::ifstream in(fixture / "config.json");
  std::string config((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::string from = "\"max_position_embeddings\": 256";
  ASSERT_NE(config.find(from), std::string::npos);
  config.replace(config.find(from), from.size(), "\"max_position_embeddings\": 16");
  std::ofstream(dir / "config.json") << config;

  GenerateRunOptions o;
  o.model_dir = dir.string();
  o.prompt = "The little robot";
  o.max_new_tokens = 1;
  int64_t prompt_tokens = 0;
  {
    WarningRecorder warnings;
    prompt_tokens = static_cast<int64_t>(run_generate(o, nullptr).prompt_ids.size());
    EXPECT_TRUE(warnings.messages().empty());
  }
  ASSERT_LT(prompt_tokens, 16);
  o.max_new_tokens = 16 - prompt_tokens;
  {
    WarningRecorder warnings;
    run_generate(o, nullptr);
    EXPECT_TRUE(warnings.messages().empty());
  }
  o.max_new_tokens = 20;
  WarningRecorder warnings;
  EXPECT_FALSE(run_generate(o, nullptr).new_ids.empty());
  EXPECT_EQ(warnings.messages(),
            std::vector<std::string>{
                "--max-new-tokens 20 after the prompt's " + std::to_string(prompt_tokens) +
                " tokens may reach " + std::to_string(prompt_tokens + 20) +
                " positions, more than the model's max_position_embeddings 16 (config.json): it "
                "runs (rotary positions), but the model was not trained on positions that far"});
}

}  // namespace
}  // namespace mantissa::recipes
