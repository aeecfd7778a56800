// run_generate (recipes/generate_run.h) on the tiny GPT-2 of tests/fixtures/hf/finetune, whose
// n_positions is 64: a prompt and --max-new-tokens past its learned positions are refused in the
// flags' terms, with the most --max-new-tokens that fits; up to the last position it generates.
#include <gtest/gtest.h>

#include <string>

#include "mantissa/recipes/generate_run.h"
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

}  // namespace
}  // namespace mantissa::recipes
