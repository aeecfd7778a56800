// config.json parsing: the fixtures' configs read as transformers wrote them, and every field
// that would change the math without being implemented refused by name.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "mantissa/models/hf_config.h"
#include "models/hf_fixtures.h"
#include "support/test_util.h"

namespace mantissa {
namespace {

using models::HfArchitecture;
using models::parse_hf_config;
using models::RopeConfig;
using nlohmann::json;

json fixture_config(const std::string& name) {
  std::ifstream in(testing::hf_fixture_dir(name) + "/config.json");
  return json::parse(in);
}

models::HfConfig parse(const json& j) { return parse_hf_config(j.dump(), "test/config.json"); }

TEST(HfConfig, ReadsTheFixtures) {
  const auto llama = models::load_hf_config(testing::hf_fixture_dir("llama_tied_llama3"));
  EXPECT_EQ(llama.architecture, HfArchitecture::kLlama);
  EXPECT_EQ(llama.vocab_size, 320);
  EXPECT_EQ(llama.num_attention_heads, 4);
  EXPECT_EQ(llama.num_key_value_heads, 2);
  EXPECT_EQ(llama.head_dim, 16);
  EXPECT_TRUE(llama.tie_word_embeddings);
  EXPECT_EQ(llama.rope.type, RopeConfig::Type::kLlama3);
  EXPECT_EQ(llama.rope.factor, 8.0);
  EXPECT_EQ(llama.rope.original_max_position_embeddings, 64);
  EXPECT_EQ(llama.eos_token_ids, std::vector<int64_t>{2});

  const auto linear = models::load_hf_config(testing::hf_fixture_dir("llama_linear_sharded"));
  EXPECT_EQ(linear.head_dim, 32);
  EXPECT_EQ(linear.rope.type, RopeConfig::Type::kLinear);
  EXPECT_EQ(linear.rope.theta, 5000.0);
  EXPECT_TRUE(linear.qkv_bias && linear.o_bias && linear.mlp_bias);
  EXPECT_FALSE(linear.tie_word_embeddings);

  const auto qwen = models::load_hf_config(testing::hf_fixture_dir("qwen2_bf16"));
  EXPECT_EQ(qwen.architecture, HfArchitecture::kQwen2);
  EXPECT_TRUE(qwen.qkv_bias);
  EXPECT_FALSE(qwen.o_bias);
  EXPECT_EQ(qwen.torch_dtype, kBFloat16);

  const auto qwen3 = models::load_hf_config(testing::hf_fixture_dir("qwen3"));
  EXPECT_EQ(qwen3.architecture, HfArchitecture::kQwen3);
  EXPECT_TRUE(qwen3.qk_norm);
  EXPECT_EQ(qwen3.head_dim, 32);  // given: 4 heads * 32 is not hidden_size 64
  EXPECT_FALSE(qwen3.qkv_bias || qwen3.o_bias || qwen3.mlp_bias);
  EXPECT_TRUE(qwen3.tie_word_embeddings);
  EXPECT_EQ(qwen3.sliding_window, 0);
  json q3 = fixture_config("qwen3");
  q3["attention_bias"] = true;
  EXPECT_TRUE(parse(q3).qkv_bias && parse(q3).o_bias);

  const auto mistral = models::load_hf_config(testing::hf_fixture_dir("mistral"));
  EXPECT_EQ(mistral.architecture, HfArchitecture::kMistral);
  EXPECT_EQ(mistral.sliding_window, 4);
  EXPECT_FALSE(mistral.qk_norm || mistral.qkv_bias || mistral.o_bias || mistral.mlp_bias);
  json m = fixture_config("mistral");
  m["sliding_window"] = nullptr;  // recent Mistral releases: full attention
  EXPECT_EQ(parse(m).sliding_window, 0);

  const auto gpt2 = models::load_hf_config(testing::hf_fixture_dir("gpt2"));
  EXPECT_EQ(gpt2.architecture, HfArchitecture::kGpt2);
  EXPECT_EQ(gpt2.intermediate_size, 256);  // n_inner null: 4 * n_embd
  EXPECT_EQ(gpt2.activation, "gelu_tanh");
  EXPECT_EQ(gpt2.max_position_embeddings, 64);
  EXPECT_DOUBLE_EQ(gpt2.attention_dropout, 0.1);
  EXPECT_TRUE(gpt2.tie_word_embeddings);
}

TEST(HfConfig, ReadsRopeThetaAndRopeScalingOfOlderFiles) {
  json j = fixture_config("llama_tied_llama3");
  j.erase("rope_parameters");
  j["rope_theta"] = 500000.0;
  j["rope_scaling"] = {{"type", "linear"}, {"factor", 4.0}};
  const auto c = parse(j);
  EXPECT_EQ(c.rope.theta, 500000.0);
  EXPECT_EQ(c.rope.type, RopeConfig::Type::kLinear);
  EXPECT_EQ(c.rope.factor, 4.0);
  j["rope_scaling"] = nullptr;
  EXPECT_EQ(parse(j).rope.type, RopeConfig::Type::kDefault);
}

// transformers 5 (PretrainedConfig.convert_rope_params_to_dict) lets a rope_scaling that is
// neither null nor {} replace rope_parameters whole, rope_theta included; the values below are
// what AutoConfig.from_pretrained gives for these files (transformers 5.24).
TEST(HfConfig, RopeScalingReplacesRopeParametersAsInTransformers) {
  json j = fixture_config("llama_tied_llama3");
  j["rope_parameters"] = {{"rope_type", "linear"}, {"factor", 2.0}, {"rope_theta", 500000.0}};
  j["rope_scaling"] = {{"rope_type", "linear"}, {"factor", 2.0}};
  auto c = parse(j);  // agreeing type and factor; theta falls back to 10000
  EXPECT_EQ(c.rope.type, RopeConfig::Type::kLinear);
  EXPECT_EQ(c.rope.factor, 2.0);
  EXPECT_EQ(c.rope.theta, 10000.0);

  j["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", 500000.0}};
  j["rope_scaling"] = {{"type", "linear"}, {"factor", 4.0}};
  j["rope_theta"] = 1234.0;
  c = parse(j);  // disagreeing: rope_scaling wins, the top-level rope_theta applies
  EXPECT_EQ(c.rope.type, RopeConfig::Type::kLinear);
  EXPECT_EQ(c.rope.factor, 4.0);
  EXPECT_EQ(c.rope.theta, 1234.0);

  j["rope_scaling"]["rope_theta"] = 250000.0;
  EXPECT_EQ(parse(j).rope.theta, 250000.0);

  for (const json& unset : {json(nullptr), json::object()}) {
    j["rope_scaling"] = unset;  // null or {} leaves rope_parameters in force
    j["rope_parameters"] = {{"rope_type", "linear"}, {"factor", 3.0}, {"rope_theta", 500000.0}};
    c = parse(j);
    EXPECT_EQ(c.rope.type, RopeConfig::Type::kLinear);
    EXPECT_EQ(c.rope.factor, 3.0);
    EXPECT_EQ(c.rope.theta, 500000.0);
  }

  j["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", 500000.0}};
  j["rope_scaling"] = {
      {"rope_type", "yarn"}, {"factor", 4.0}, {"original_max_position_embeddings", 32}};
  testing::expect_error([&] { parse(j); },
                        {"field 'rope_scaling'", "'yarn'", "replaces rope_parameters"});
  j["rope_scaling"] = {{"type", "linear"}, {"factor", 4.0}, {"beta_fast", 32.0}};
  testing::expect_error([&] { parse(j); },
                        {"field 'rope_scaling'", "'beta_fast'", "refused rather than ignored"});
}

struct Refusal {
  std::string fixture;
  std::function<void(json&)> edit;
  std::vector<std::string> pieces;
};

TEST(HfConfig, RefusesWhatItDoesNotImplementByName) {
  const std::vector<Refusal> cases = {
      {"llama_tied_llama3",
       [](json& j) { j["architectures"] = {"Qwen3MoeForCausalLM"}; },
       {"test/config.json", "'Qwen3MoeForCausalLM' is not supported"}},
      {"qwen3", [](json& j) { j["model_type"] = "qwen2"; }, {"model_type", "'qwen3'"}},
      {"llama_tied_llama3", [](json& j) { j["model_type"] = "qwen2"; }, {"model_type"}},
      {"llama_tied_llama3",
       [](json& j) {
         j["rope_parameters"] = {{"rope_type", "yarn"}, {"factor", 2.0}};
       },
       {"rope_parameters", "'yarn'"}},
      {"llama_tied_llama3",
       [](json& j) { j["rope_parameters"]["partial_rotary_factor"] = 0.5; },
       {"partial_rotary_factor"}},
      {"llama_tied_llama3",
       [](json& j) { j["rope_parameters"]["beta_fast"] = 32.0; },
       {"rope_parameters", "'beta_fast'"}},
      {"llama_tied_llama3",
       [](json& j) { j["rope_parameters"].erase("low_freq_factor"); },
       {"rope_parameters", "low_freq_factor"}},
      {"llama_tied_llama3",
       [](json& j) { j["hidden_act"] = "gelu"; },
       {"hidden_act", "'gelu'", "silu"}},
      {"llama_tied_llama3",
       [](json& j) { j["sliding_window"] = 4096; },
       {"'sliding_window'", "not known"}},
      {"llama_tied_llama3",
       [](json& j) { j["some_new_switch"] = true; },
       {"'some_new_switch'", "not known"}},
      {"llama_tied_llama3",
       [](json& j) {
         j["quantization_config"] = {{"quant_method", "gptq"}};
       },
       {"quantization_config"}},
      {"llama_tied_llama3",
       [](json& j) {
         j["auto_map"] = {{"AutoModel", "x.Y"}};
       },
       {"auto_map"}},
      {"llama_tied_llama3",
       [](json& j) { j["num_key_value_heads"] = 3; },
       {"num_key_value_heads", "divide"}},
      {"llama_tied_llama3",
       [](json& j) { j["hidden_size"] = "64"; },
       {"hidden_size", "must be an integer"}},
      {"llama_tied_llama3", [](json& j) { j.erase("vocab_size"); }, {"vocab_size", "missing"}},
      {"llama_tied_llama3", [](json& j) { j["head_dim"] = 15; }, {"head_dim", "even"}},
      {"llama_tied_llama3", [](json& j) { j["torch_dtype"] = "float64"; }, {"torch_dtype"}},
      {"qwen2_bf16", [](json& j) { j["use_sliding_window"] = true; }, {"use_sliding_window"}},
      {"qwen2_bf16",
       [](json& j) {
         j["layer_types"] = {"full_attention", "sliding_attention"};
       },
       {"layer_types", "sliding_attention"}},
      {"qwen2_bf16",
       [](json& j) { j["attention_bias"] = true; },
       {"'attention_bias'", "not known"}},
      {"qwen3", [](json& j) { j["use_sliding_window"] = true; }, {"use_sliding_window"}},
      {"qwen3",
       [](json& j) {
         j["layer_types"] = {"full_attention", "sliding_attention"};
       },
       {"layer_types", "sliding_attention"}},
      {"qwen3", [](json& j) { j["mlp_bias"] = true; }, {"'mlp_bias'", "not known"}},
      // transformers' Mistral ignores layer_types (Ministral alternates windows): refused.
      {"mistral",
       [](json& j) {
         j["layer_types"] = {"full_attention", "sliding_attention"};
       },
       {"'layer_types'", "not known"}},
      {"mistral", [](json& j) { j["attention_bias"] = true; }, {"'attention_bias'", "not known"}},
      {"mistral", [](json& j) { j["sliding_window"] = 0; }, {"sliding_window", "[1,"}},
      {"gpt2",
       [](json& j) { j["activation_function"] = "relu"; },
       {"activation_function", "'relu'"}},
      {"gpt2", [](json& j) { j["reorder_and_upcast_attn"] = true; }, {"reorder_and_upcast_attn"}},
      {"gpt2", [](json& j) { j["add_cross_attention"] = true; }, {"add_cross_attention"}},
      {"gpt2", [](json& j) { j["n_head"] = 5; }, {"n_embd", "n_head 5"}},
  };
  for (const Refusal& r : cases) {
    json j = fixture_config(r.fixture);
    r.edit(j);
    SCOPED_TRACE(j.dump());
    const std::string msg = testing::error_of([&] { parse(j); });
    ASSERT_FALSE(msg.empty()) << "accepted";
    for (const std::string& p : r.pieces)
      EXPECT_NE(msg.find(p), std::string::npos) << msg << "\nlacks: " << p;
  }
}

TEST(HfConfig, RefusesMalformedText) {
  testing::expect_error([] { parse_hf_config("{", "cfg.json"); }, {"cfg.json", "not valid JSON"});
  testing::expect_error([] { parse_hf_config("[1]", "cfg.json"); }, {"cfg.json", "JSON object"});
  testing::expect_error([] { parse_hf_config(R"({"a": 1, "a": 2})", "cfg.json"); },
                        {"cfg.json", "twice"});
  testing::expect_error([] { parse_hf_config(std::string(100, '['), "cfg.json"); }, {"cfg.json"});
  testing::expect_error([] { models::load_hf_config("/nonexistent-model-dir"); },
                        {"/nonexistent-model-dir/config.json"});
}

}  // namespace
}  // namespace mantissa
