// The size check before a model is built: parameter counts from the sizes alone equal those of
// the built models (the MLP, the GPT, the pretrained fixtures), saturate instead of wrapping for
// absurd sizes, the bits a parameter costs per precision and optimizer, and the refusal's
// figures against the machine's memory and --memory-limit.
#include <gtest/gtest.h>

#include <limits>

#include "mantissa/core/allocator.h"
#include "mantissa/models/causal_lm.h"
#include "mantissa/models/gpt.h"
#include "mantissa/models/hf_config.h"
#include "mantissa/models/mlp.h"
#include "mantissa/recipes/model_footprint.h"
#include "support/test_util.h"

namespace mantissa::recipes {
namespace {

constexpr int64_t kMax = std::numeric_limits<int64_t>::max();

TEST(ModelFootprint, MlpCountIsTheBuiltModels) {
  for (const std::vector<int64_t>& hidden :
       std::vector<std::vector<int64_t>>{{256}, {64, 32}, {}}) {
    const auto net = models::make_mlp(784, hidden, 10, kFloat32);
    EXPECT_EQ(mlp_parameter_count(784, hidden, 10), net->parameter_count());
  }
  EXPECT_EQ(mlp_parameter_count(784, {256}, 10), 203530);  // train's banner for the default
}

TEST(ModelFootprint, GptCountIsTheBuiltModels) {
  for (const bool tied : {true, false}) {
    const models::GPTConfig c{
        .context = 16, .layers = 3, .width = 32, .heads = 2, .tie_embeddings = tied};
    EXPECT_EQ(gpt_parameter_count(c), models::GPT(c).parameter_count()) << tied;
  }
}

TEST(ModelFootprint, PretrainedCountIsTheBuiltModels) {
  for (const char* name :
       {"gpt2", "llama_linear_sharded", "llama_tied_llama3", "qwen2_bf16", "qwen3", "mistral"}) {
    const models::HfConfig c =
        models::load_hf_config(std::string(MANTISSA_FIXTURES_DIR) + "/hf/models/" + name);
    EXPECT_EQ(hf_parameter_count(c), models::CausalLM(c, {}).parameter_count()) << name;
  }
}

TEST(ModelFootprint, AbsurdSizesSaturateInsteadOfWrapping) {
  // --layers 100000000 at width 256: 12 w^2 + 13 w a block, exactly.
  const models::GPTConfig deep{.layers = 100000000, .width = 256, .heads = 8};
  EXPECT_EQ(gpt_parameter_count(deep),
            int64_t{100000000} * (12 * 256 * 256 + 13 * 256) + 256 * 256 + 128 * 256 + 2 * 256);
  // w^2 alone overflows int64 at width 4e9; wrapped, the count could look small.
  EXPECT_EQ(gpt_parameter_count({.layers = 2, .width = 4000000000, .heads = 1}), kMax);
  EXPECT_EQ(mlp_parameter_count(784, {int64_t{1} << 40, int64_t{1} << 40}, 10), kMax);
  models::HfConfig c;
  c.vocab_size = 32000;
  c.hidden_size = int64_t{1} << 32;
  c.intermediate_size = 11008;
  c.num_hidden_layers = 32;
  c.num_attention_heads = 32;
  c.num_key_value_heads = 32;
  c.head_dim = int64_t{1} << 27;
  c.max_position_embeddings = 2048;
  EXPECT_EQ(hf_parameter_count(c), kMax);
  const ModelFootprint f{.parameters = kMax, .bits = {}};
  EXPECT_EQ(f.bytes(), kMax);
}

TEST(ModelFootprint, BitsPerParameterFollowPrecisionAndOptimizer) {
  const ParameterBits fp32 = parameter_bits("32-true", kFloat32, "adamw", false, true);
  EXPECT_EQ(fp32.total(), 128);  // weight, gradient, two moments: 16 bytes
  EXPECT_EQ(parameter_bits("16-true", kFloat16, "adamw", true, true).total(), 16 + 16 + 64);
  EXPECT_EQ(parameter_bits("bf16-true", kBFloat16, "adamw", false, true).total(), 64);
  EXPECT_EQ(parameter_bits("32-true", kFloat32, "sgd", false, true).total(), 96);
  EXPECT_EQ(parameter_bits("32-true", kFloat32, "adamw8bit", false, true).total(), 80);
  EXPECT_EQ(parameter_bits("32-true", kFloat32, "adamw", false, false).total(), 32);
  EXPECT_EQ(parameter_bits("nf4", kFloat32, "adamw", false, true).total(), 4);
  EXPECT_EQ(parameter_bits("int8-training", kFloat32, "adamw", false, true).total(), 8);
}

TEST(ModelFootprint, RefusalGivesTheFiguresAndTheBound) {
  const ModelFootprint f{.parameters = 1200000000000,
                         .bits = parameter_bits("32-true", kFloat32, "adamw", false, true),
                         .precision = "32-true",
                         .optimizer = "adamw"};
  EXPECT_EQ(f.bytes(), int64_t{1200000000000} * 16);
  const int64_t gib = int64_t{1} << 30;
  mantissa::testing::expect_error(
      [&] { check_model_fits(f, {.available = 23 * gib}, "--model gpt (--layers 9)"); },
      {"--model gpt (--layers 9): the model has 1.2e+12 parameters, which take at least 17.5 TiB "
       "in 32-true (weights, gradients and adamw state, 16 bytes a parameter); this machine has "
       "23 GiB available"});
  try {
    check_model_fits(f, {.available = 23 * gib}, "x");
    ADD_FAILURE() << "not refused";
  } catch (const OutOfMemoryError&) {
  }
  // --memory-limit is named when it is the bound exceeded.
  const ModelFootprint small{.parameters = 1000000,
                             .bits = parameter_bits("32-true", kFloat32, "adamw", false, true),
                             .precision = "32-true",
                             .optimizer = "adamw"};
  EXPECT_NO_THROW(check_model_fits(small, {.available = 23 * gib}, "x"));
  mantissa::testing::expect_error(
      [&] {
        check_model_fits(small, {.available = 23 * gib, .limit = 1000000, .limit_text = "1MB"},
                         "x");
      },
      {"which take at least 15.3 MiB", "--memory-limit 1MB allows 977 KiB"});
  // Weights alone (evaluation) are cheaper, and said so.
  const ModelFootprint eval{.parameters = 1000000000,
                            .bits = parameter_bits("bf16-true", kBFloat16, "", false, false),
                            .precision = "bf16-true"};
  mantissa::testing::expect_error([&] { check_model_fits(eval, {.available = gib}, "x"); },
                                  {"1e+09 parameters, which take at least 1.86 GiB in bf16-true "
                                   "(weights, 2 bytes a parameter); this machine has 1 GiB"});
  EXPECT_NO_THROW(check_model_fits(eval, {}, "x"));  // no bound known: nothing to check
}

TEST(ModelFootprint, MachineMemoryIsRead) {
  const std::optional<int64_t> avail = available_memory_bytes();
  ASSERT_TRUE(avail.has_value()) << "/proc/meminfo holds MemAvailable on Linux";
  EXPECT_GT(*avail, 0);
  EXPECT_EQ(memory_size_text(512), "512 B");
  EXPECT_EQ(memory_size_text(int64_t{3} << 40), "3 TiB");
  EXPECT_EQ(memory_size_text(kMax), "more than 8 EiB");
}

}  // namespace
}  // namespace mantissa::recipes
