// peft adapters both ways against transformers + peft
// (tests/fixtures/hf/finetune, written by make_peft_fixtures.py): mantissa
// loading peft's adapter gives PeftModel's logits, the adapter mantissa writes
// reloads to the same logits with peft's key names, the merged model directory
// gives merge_and_unload's logits, and configs that ask for what is not
// implemented are refused.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "mantissa/autograd/grad_mode.h"
#include "mantissa/io/safetensors.h"
#include "mantissa/models/hf_loader.h"
#include "mantissa/models/peft_adapter.h"
#include "mantissa/nn/lora.h"
#include "mantissa/recipes/hf_model_output.h"
#include "models/hf_fixtures.h"
#include "support/temp_dir.h"
#include "support/test_util.h"

namespace mantissa {
namespace {

using mantissa::testing::expect_error;
namespace fs = std::filesystem;

std::string fixture(const std::string& name) { return testing::hf_finetune_fixture(name); }

Tensor reference(const std::string& model, const std::string& key) {
  for (const auto& [name, t] :
       io::load_safetensors(fixture(model) + "/reference.safetensors").tensors)
    if (name == key) return t;
  ADD_FAILURE() << "no " << key;
  return {};
}

// Largest |got - want| over the largest |want|.
double relative_error(const Tensor& got, const Tensor& want) {
  const auto g = got.to_vector<double>(), w = want.to_vector<double>();
  EXPECT_EQ(g.size(), w.size());
  double err = 0, scale = 0;
  for (size_t i = 0; i < std::min(g.size(), w.size()); ++i) {
    err = std::max(err, std::abs(g[i] - w[i]));
    scale = std::max(scale, std::abs(w[i]));
  }
  return err / scale;
}

Tensor logits_with_adapter(const std::string& model_dir, const std::string& adapter_dir,
                           const Tensor& ids) {
  auto model = models::load_hf_model(model_dir);
  models::load_peft_adapter(*model, adapter_dir);
  NoGradGuard no_grad;
  return model->forward(ids);
}

class PeftFixture : public ::testing::TestWithParam<std::string> {};

TEST_P(PeftFixture, PeftAdapterGivesPeftModelLogits) {
  const std::string m = GetParam();
  const Tensor got =
      logits_with_adapter(fixture(m), fixture(m) + "/adapter", reference(m, "input_ids"));
  const Tensor want = reference(m, "logits_adapter");
  EXPECT_LE(relative_error(got, want), 1e-5) << m;
  // The adapter matters: without it the logits are another model's.
  auto base = models::load_hf_model(fixture(m));
  NoGradGuard no_grad;
  EXPECT_GT(relative_error(base->forward(reference(m, "input_ids")), want), 1e-3);
}

TEST_P(PeftFixture, WrittenAdapterReloadsToTheSameLogits) {
  const std::string m = GetParam();
  mantissa::testing::TempDir dir;
  auto model = models::load_hf_model(fixture(m));
  models::load_peft_adapter(*model, fixture(m) + "/adapter");
  const models::PeftAdapterConfig config =
      models::read_peft_adapter_config(fixture(m) + "/adapter");
  models::save_peft_adapter(*model, config, dir.str());
  // peft's key names and every adapter tensor of peft's file.
  const auto theirs =
      io::read_safetensors_header(fixture(m) + "/adapter/adapter_model.safetensors");
  const auto ours = io::read_safetensors_header(dir.file("adapter_model.safetensors"));
  std::vector<std::string> a, b;
  for (const auto& t : theirs.tensors) a.push_back(t.name);
  for (const auto& t : ours.tensors) b.push_back(t.name);
  std::sort(a.begin(), a.end());
  std::sort(b.begin(), b.end());
  EXPECT_EQ(a, b);
  const models::PeftAdapterConfig again = models::read_peft_adapter_config(dir.str());
  EXPECT_EQ(again.r, config.r);
  EXPECT_EQ(again.lora_alpha, config.lora_alpha);
  EXPECT_EQ(again.fan_in_fan_out, m == "gpt2");
  const Tensor ids = reference(m, "input_ids");
  NoGradGuard no_grad;
  const Tensor first = model->forward(ids);
  const Tensor reloaded = logits_with_adapter(fixture(m), dir.str(), ids);
  EXPECT_EQ(relative_error(reloaded, first), 0.0);
}

TEST_P(PeftFixture, MergedDirectoryGivesMergedLogits) {
  const std::string m = GetParam();
  mantissa::testing::TempDir dir;
  auto model = models::load_hf_model(fixture(m));
  models::load_peft_adapter(*model, fixture(m) + "/adapter");
  recipes::write_merged_model_directory(fixture(m),
                                        models::read_peft_adapter_config(fixture(m) + "/adapter"),
                                        nn::lora_state_dict(*model), dir.str());
  for (const char* f :
       {"config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"})
    EXPECT_TRUE(fs::exists(dir.file(f))) << f;
  // In the source dtype, under transformers' keys (GPT-2's Conv1D weights [in,
  // out] again).
  const auto header = io::read_safetensors_header(dir.file("model.safetensors"));
  const auto source = io::read_safetensors_header(fixture(m) + "/model.safetensors");
  ASSERT_EQ(header.tensors.size(), source.tensors.size());
  for (const auto& t : header.tensors) {
    const auto same = std::find_if(source.tensors.begin(), source.tensors.end(),
                                   [&](const auto& s) { return s.name == t.name; });
    ASSERT_NE(same, source.tensors.end()) << t.name;
    EXPECT_EQ(t.shape, same->shape) << t.name;
    EXPECT_EQ(t.dtype, same->dtype) << t.name;
  }
  auto merged = models::load_hf_model(dir.str());
  NoGradGuard no_grad;
  const Tensor got = merged->forward(reference(m, "input_ids"));
  // GPT-2's, Qwen3's and Mistral's files are fp32: merge_and_unload's logits.
  // Llama's is bf16: the merged weights are rounded to bf16 as peft's merged
  // model saved in the source dtype would be.
  EXPECT_LE(relative_error(got, reference(m, "logits_merged")), m == "llama" ? 3e-2 : 1e-5) << m;
}

INSTANTIATE_TEST_SUITE_P(Models, PeftFixture,
                         ::testing::Values("llama", "gpt2", "qwen3", "mistral"));

TEST(PeftAdapter, UnimplementedConfigFieldsAreRefusedByName) {
  mantissa::testing::TempDir dir;
  const std::string src = fixture("llama") + "/adapter/";
  fs::copy_file(src + "adapter_model.safetensors", dir.file("adapter_model.safetensors"));
  std::ifstream in(src + "adapter_config.json");
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const auto with = [&](const std::string& from, const std::string& to) {
    std::string t = text;
    const size_t at = t.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    t.replace(at, from.size(), to);
    std::ofstream(dir.file("adapter_config.json")) << t;
  };
  with("\"use_dora\": false", "\"use_dora\": true");
  expect_error([&] { models::read_peft_adapter_config(dir.str()); },
               {"adapter_config.json': field 'use_dora' is true", "does not implement"});
  with("\"use_rslora\": false", "\"use_rslora\": true");
  expect_error([&] { models::read_peft_adapter_config(dir.str()); }, {"field 'use_rslora'"});
  with("\"peft_type\": \"LORA\"", "\"peft_type\": \"IA3\"");
  expect_error([&] { models::read_peft_adapter_config(dir.str()); },
               {"field 'peft_type' is \"IA3\"; only LoRA adapters"});
  // A rank that does not fit the file's tensors names the tensor.
  with("\"r\": 4", "\"r\": 2");
  auto model = models::load_hf_model(fixture("llama"));
  expect_error([&] { models::load_peft_adapter(*model, dir.str()); },
               {"adapter_model.safetensors'", "has shape [4, ", "the model's adapter has [2, "});
  expect_error([&] { models::read_peft_adapter_config(dir.file("none")); },
               {"cannot open", "adapter_config.json"});
}

// An adapter of another base model, whose target_modules name no layer of this one (a Llama's
// on a GPT-2), is refused as that, naming its config file and the base it records; the model
// is left without adapters.
TEST(PeftAdapter, AnotherBaseModelsAdapterIsRefusedAsThat) {
  auto model = models::load_hf_model(fixture("gpt2"));
  const std::string adapter = fixture("llama") + "/adapter";
  EXPECT_EQ(mantissa::testing::error_of([&] { models::load_peft_adapter(*model, adapter); }),
            "[adapter] '" + adapter +
                "/adapter_config.json': the adapter's target_modules [up_proj, down_proj, v_proj, "
                "gate_proj, o_proj, q_proj, k_proj] match no layer of this model: it was trained "
                "on another base model (its base_model_name_or_path: "
                "'tests/fixtures/hf/finetune/llama'); apply it to that one");
  EXPECT_TRUE(nn::lora_state_dict(*model).empty());
}

// peft's target_modules as a string is a regular expression that a layer's whole name must match
// (check_target_module_exists: re.fullmatch). The fixture's q_proj and v_proj adapters, with the
// list ["q_proj", "v_proj"] and with the regex "model\.layers\.\d+\.self_attn\.(q|v)_proj", wrap
// the same layers and give the same logits; the regex is written back as the string, which
// reloads so too and merges. "(q|v)_proj" (a suffix, not a whole name) matches no layer and is
// refused naming it; a malformed regex is refused naming the file and the pattern.
TEST(PeftAdapter, RegexTargetModulesMatchWholeLayerNames) {
  mantissa::testing::TempDir dir;
  const std::string src = fixture("llama") + "/adapter/";
  io::NamedTensors qv;
  for (const auto& [name, t] : io::load_safetensors(src + "adapter_model.safetensors").tensors)
    if (name.find(".q_proj.") != std::string::npos || name.find(".v_proj.") != std::string::npos)
      qv.emplace_back(name, t);
  std::ifstream in(src + "adapter_config.json");
  const nlohmann::json peft_config = nlohmann::json::parse(in);
  const auto write_adapter = [&](const std::string& sub, const nlohmann::json& targets) {
    fs::create_directories(dir.file(sub));
    io::save_safetensors(dir.file(sub + "/adapter_model.safetensors"), qv, {{"format", "pt"}});
    nlohmann::json c = peft_config;
    c["target_modules"] = targets;
    std::ofstream(dir.file(sub + "/adapter_config.json")) << c.dump(2);
    return dir.file(sub);
  };
  const std::string regex = "model\\.layers\\.\\d+\\.self_attn\\.(q|v)_proj";
  const std::string as_list = write_adapter("list", {"q_proj", "v_proj"});
  const std::string as_regex = write_adapter("regex", regex);
  const models::PeftAdapterConfig config = models::read_peft_adapter_config(as_regex);
  EXPECT_EQ(config.target_regex, regex);
  EXPECT_TRUE(config.target_modules.empty());

  const Tensor ids = reference("llama", "input_ids");
  auto listed = models::load_hf_model(fixture("llama"));
  auto matched = models::load_hf_model(fixture("llama"));
  const std::vector<std::string> wrapped = models::load_peft_adapter(*listed, as_list);
  EXPECT_EQ(models::load_peft_adapter(*matched, as_regex), wrapped);
  EXPECT_EQ(wrapped.size() * 2, qv.size());
  for (const std::string& name : wrapped)
    EXPECT_TRUE(name.ends_with("self_attn.q_proj") || name.ends_with("self_attn.v_proj")) << name;
  NoGradGuard no_grad;
  const Tensor want = listed->forward(ids);
  EXPECT_EQ(relative_error(matched->forward(ids), want), 0.0);
  auto base = models::load_hf_model(fixture("llama"));
  EXPECT_GT(relative_error(base->forward(ids), want), 1e-4);

  models::save_peft_adapter(*matched, config, dir.file("written"));
  std::ifstream written(dir.file("written/adapter_config.json"));
  EXPECT_EQ(nlohmann::json::parse(written).at("target_modules"), regex);
  EXPECT_EQ(relative_error(logits_with_adapter(fixture("llama"), dir.file("written"), ids), want),
            0.0);
  EXPECT_NO_THROW(recipes::write_merged_model_directory(
      fixture("llama"), config, nn::lora_state_dict(*matched), dir.file("merged")));

  const std::string suffix = write_adapter("suffix", "(q|v)_proj");
  EXPECT_EQ(mantissa::testing::error_of([&] {
              models::load_peft_adapter(*models::load_hf_model(fixture("llama")), suffix);
            }),
            "[adapter] '" + suffix +
                "/adapter_config.json': the adapter's target_modules, the regular expression "
                "'(q|v)_proj', matches no layer of this model (it must match a layer's whole "
                "name, such as 'model.layers.0.self_attn.q_proj'): correct it, or apply the "
                "adapter to the base model it was trained on (its base_model_name_or_path: "
                "'tests/fixtures/hf/finetune/llama')");
  const std::string bad = write_adapter("bad", "model\\.layers\\.(\\d+");
  expect_error([&] { models::read_peft_adapter_config(bad); },
               {"[adapter] '" + bad +
                    "/adapter_config.json': field 'target_modules' (a regular expression, as "
                    "peft reads a string): the regular expression "
                    "'model\\\\.layers\\\\.(\\\\d+' does not compile",
                "missing closing parenthesis"});
}

}  // namespace
}  // namespace mantissa
