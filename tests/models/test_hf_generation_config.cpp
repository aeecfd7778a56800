// generation_config.json -> generate's options, and what is reported as not applied.
#include <gtest/gtest.h>

#include "mantissa/models/hf_generation_config.h"
#include "models/hf_fixtures.h"
#include "support/temp_dir.h"
#include "support/test_util.h"

namespace mantissa {
namespace {

using models::parse_hf_generation_config;

models::HfConfig config_with_eos(std::vector<int64_t> eos) {
  models::HfConfig c;
  c.eos_token_ids = std::move(eos);
  return c;
}

TEST(HfGenerationConfig, FixtureIsGreedyWithItsEndToken) {
  const std::string dir = testing::hf_fixture_dir("llama_tied_llama3");
  const auto d = models::load_hf_generation_defaults(dir, models::load_hf_config(dir));
  EXPECT_EQ(d.options.temperature, 0.0);
  EXPECT_EQ(d.options.eos_token_ids, std::vector<int64_t>{2});
  EXPECT_TRUE(d.not_applied.empty());
  testing::TempDir empty;
  const auto none = models::load_hf_generation_defaults(empty.str(), config_with_eos({7}));
  EXPECT_EQ(none.options.eos_token_ids, std::vector<int64_t>{7});
  EXPECT_EQ(none.options.temperature, 0.0);
}

TEST(HfGenerationConfig, SamplingSettingsAndEndTokenLists) {
  const auto d = parse_hf_generation_config(
      R"({"do_sample": true, "temperature": 0.6, "top_p": 0.9,
          "eos_token_id": [128001, 128008, 128009], "max_new_tokens": 77})",
      "g.json", config_with_eos({5}));
  EXPECT_EQ(d.options.temperature, 0.6);
  EXPECT_EQ(d.options.top_k, 50);  // transformers' default when sampling
  EXPECT_EQ(d.options.top_p, 0.9);
  EXPECT_EQ(d.options.max_new_tokens, 77);
  EXPECT_EQ(d.options.eos_token_ids, (std::vector<int64_t>{128001, 128008, 128009}));
  // Greedy: sampling settings are moot, not reported.
  const auto g = parse_hf_generation_config(R"({"temperature": 0.6, "top_p": 0.9})", "g.json",
                                            config_with_eos({5}));
  EXPECT_EQ(g.options.temperature, 0.0);
  EXPECT_EQ(g.options.eos_token_ids, std::vector<int64_t>{5});
  EXPECT_TRUE(g.not_applied.empty());
}

TEST(HfGenerationConfig, ReportsWhatGenerateDoesNotImplement) {
  const auto d = parse_hf_generation_config(
      R"({"repetition_penalty": 1.1, "num_beams": 4, "max_length": 4096, "num_beams_x": 1,
          "repetition_penalty_ok": null, "no_repeat_ngram_size": 0})",
      "g.json", config_with_eos({}));
  EXPECT_EQ(d.not_applied, (std::vector<std::string>{"max_length=4096", "num_beams=4",
                                                     "num_beams_x=1", "repetition_penalty=1.1"}));
  testing::expect_error(
      [] { parse_hf_generation_config(R"({"do_sample": true, "top_p": 2})", "g.json", {}); },
      {"g.json", "top_p"});
  testing::expect_error(
      [] { parse_hf_generation_config(R"({"eos_token_id": "x"})", "g.json", {}); },
      {"g.json", "eos_token_id"});
  testing::expect_error([] { parse_hf_generation_config("{", "g.json", {}); },
                        {"g.json", "not valid JSON"});
}

TEST(HfGenerationConfig, SaysWhichKeysItTookAndItsStartToken) {
  models::HfConfig config = config_with_eos({5});
  config.bos_token_id = 1;
  const auto d = parse_hf_generation_config(
      R"({"do_sample": true, "temperature": 0.7, "max_new_tokens": 3, "bos_token_id": 4})",
      "g.json", config);
  EXPECT_EQ(d.set_keys, (std::set<std::string>{"do_sample", "temperature", "max_new_tokens"}));
  EXPECT_EQ(d.bos_token_id, 4);
  // Greedy: the sampling keys are not taken; config.json's BOS when the file has none.
  const auto g = parse_hf_generation_config(R"({"temperature": 0.7})", "g.json", config);
  EXPECT_TRUE(g.set_keys.empty());
  EXPECT_EQ(g.bos_token_id, 1);
}

TEST(HfGenerationConfig, RefusesTokensPastTheVocabulary) {
  models::HfConfig config = config_with_eos({});
  config.vocab_size = 320;
  testing::expect_error(
      [&] { parse_hf_generation_config(R"({"eos_token_id": [0, 5000]})", "g.json", config); },
      {"g.json", "'eos_token_id' holds token 5000", "vocab_size 320"});
  testing::expect_error(
      [&] { parse_hf_generation_config(R"({"bos_token_id": 320})", "g.json", config); },
      {"g.json", "'bos_token_id' holds token 320"});
  EXPECT_EQ(parse_hf_generation_config(R"({"eos_token_id": 319})", "g.json", config)
                .options.eos_token_ids,
            std::vector<int64_t>{319});
}

}  // namespace
}  // namespace mantissa
