// CausalLM loaded from the fixture directories against transformers: fp32 logits, greedy
// generations, and the KV-cache path against the full forward.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <set>

#include "mantissa/autograd/grad_mode.h"
#include "mantissa/models/generate.h"
#include "mantissa/models/hf_loader.h"
#include "mantissa/ops/loss.h"
#include "mantissa/ops/shape_ops.h"
#include "models/hf_fixtures.h"
#include "support/test_util.h"

namespace mantissa {
namespace {

using models::load_hf_model;
using testing::hf_fixture_dir;
using testing::hf_fixture_names;
using testing::hf_reference;

// Largest |got - want| over the tensor's largest |want|: the relative error at the logits' scale.
double relative_error(const Tensor& got, const Tensor& want) {
  const auto g = got.to_vector<double>(), w = want.to_vector<double>();
  EXPECT_EQ(g.size(), w.size());
  double err = 0, scale = 0;
  for (size_t i = 0; i < w.size(); ++i) {
    err = std::max(err, std::abs(g[i] - w[i]));
    scale = std::max(scale, std::abs(w[i]));
  }
  return err / scale;
}

class HfFixture : public ::testing::TestWithParam<std::string> {};

TEST_P(HfFixture, LogitsEqualTransformersFp32) {
  const auto ref = hf_reference(GetParam());
  auto model = load_hf_model(hf_fixture_dir(GetParam()));
  NoGradGuard no_grad;
  const Tensor logits = model->forward(ref.input_ids);
  ASSERT_EQ(logits.shape(), ref.logits.shape());
  EXPECT_EQ(logits.dtype(), kFloat32);
  EXPECT_LE(relative_error(logits, ref.logits), 1e-5) << GetParam();
}

TEST_P(HfFixture, GreedyTokensEqualTransformersGenerate) {
  const auto ref = hf_reference(GetParam());
  auto model = load_hf_model(hf_fixture_dir(GetParam()));
  const int64_t prompt_len = ref.input_ids.size(1);
  const int64_t new_tokens = ref.greedy.size(1) - prompt_len;
  for (int64_t b = 0; b < ref.input_ids.size(0); ++b) {
    const auto prompt = ref.input_ids.select(0, b).to_vector<int64_t>();
    const auto want =
        ref.greedy.select(0, b).narrow(0, prompt_len, new_tokens).to_vector<int64_t>();
    std::vector<int64_t> streamed;
    const auto got =
        models::generate(*model, prompt, {.max_new_tokens = new_tokens}, [&](int64_t t) {
          streamed.push_back(t);
          return true;
        });
    EXPECT_EQ(got, want) << GetParam() << " row " << b;
    EXPECT_EQ(streamed, got);
  }
}

TEST_P(HfFixture, KvCacheLogitsEqualFullForward) {
  const auto ref = hf_reference(GetParam());
  auto model = load_hf_model(hf_fixture_dir(GetParam()));
  NoGradGuard no_grad;
  const Tensor ids = ref.greedy;  // (2, 22)
  const Tensor full = model->forward(ids);
  // A prefix of 5, single tokens, then a chunk of 3 after cached positions (bottom-right
  // causal mask), then single tokens to the end.
  models::KvCache cache;
  std::vector<Tensor> parts;
  int64_t pos = 0;
  for (int64_t len : {5, 1, 1, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1}) {
    parts.push_back(model->forward(ids.narrow(1, pos, len).contiguous(), cache));
    pos += len;
    EXPECT_EQ(cache.length(), pos);
  }
  ASSERT_EQ(pos, ids.size(1));
  EXPECT_LE(relative_error(cat(parts, 1), full), 1e-5) << GetParam();
}

TEST_P(HfFixture, LossAndGradientsEqualTransformers) {
  const auto ref = hf_reference(GetParam());
  auto model =
      load_hf_model(hf_fixture_dir(GetParam()));  // eval mode: no dropout, as the reference
  const Tensor ids = ref.input_ids;
  const int64_t T = ids.size(1), V = model->config().vocab_size;
  const Tensor logits = model->forward(ids);
  // transformers shifts inside the model: position t predicts token t + 1.
  const Tensor loss = cross_entropy(logits.narrow(1, 0, T - 1).reshape({-1, V}),
                                    ids.narrow(1, 1, T - 1).reshape({-1}));
  EXPECT_NEAR(loss.item(), ref.loss.item(), 1e-5 * std::abs(ref.loss.item())) << GetParam();
  loss.backward();
  size_t compared = 0;
  for (const auto& [key, p] : model->named_parameters()) {
    ASSERT_TRUE(ref.grads.count(key)) << GetParam() << ": no reference gradient for " << key;
    ASSERT_TRUE(p.grad().defined()) << key;
    const Tensor g =
        models::is_conv1d_weight(model->config().architecture, key) ? p.grad().t() : p.grad();
    EXPECT_LE(relative_error(g.contiguous(), ref.grads.at(key)), 1e-4) << GetParam() << " " << key;
    ++compared;
  }
  EXPECT_EQ(compared, ref.grads.size()) << GetParam();
}

INSTANTIATE_TEST_SUITE_P(Hf, HfFixture, ::testing::ValuesIn(hf_fixture_names()));

TEST(HfGenerate, StopsAtEndTokenAndCallback) {
  const auto ref = hf_reference("llama_tied_llama3");
  auto model = load_hf_model(hf_fixture_dir("llama_tied_llama3"));
  const auto prompt = ref.input_ids.select(0, 0).to_vector<int64_t>();
  const auto greedy = ref.greedy.select(0, 0).narrow(0, 10, 12).to_vector<int64_t>();
  // The fourth greedy token as the end token: generation ends with it.
  models::GenerateOptions o{.max_new_tokens = 12};
  o.eos_token_ids = {greedy[3]};
  const auto got = models::generate(*model, prompt, o);
  const auto first = std::find(greedy.begin(), greedy.end(), greedy[3]) - greedy.begin();
  EXPECT_EQ(got, std::vector<int64_t>(greedy.begin(), greedy.begin() + first + 1));
  // The callback stops after the second token.
  int calls = 0;
  const auto two = models::generate(*model, prompt, {.max_new_tokens = 12},
                                    [&](int64_t) { return ++calls < 2; });
  EXPECT_EQ(two, std::vector<int64_t>(greedy.begin(), greedy.begin() + 2));
}

TEST(HfGenerate, SamplingIsSeededAndRespectsTopK) {
  auto model = load_hf_model(hf_fixture_dir("gpt2"));
  const std::vector<int64_t> prompt = {5, 17, 42};
  models::GenerateOptions o{.max_new_tokens = 8, .temperature = 1.0, .top_k = 1, .seed = 3};
  // top_k = 1 is greedy whatever the draws.
  const auto greedy = models::generate(*model, prompt, {.max_new_tokens = 8});
  EXPECT_EQ(models::generate(*model, prompt, o), greedy);
  o.top_k = 0;
  o.temperature = 5.0;
  const auto a = models::generate(*model, prompt, o);
  EXPECT_EQ(models::generate(*model, prompt, o), a);  // same seed, same tokens
  o.seed = 4;
  EXPECT_NE(models::generate(*model, prompt, o), a);
}

TEST(HfGenerate, ChooseNextTokenTopP) {
  Generator gen(1);
  const std::vector<float> logits = {0.0f, std::log(6.0f), std::log(3.0f), std::log(1.0f)};
  // Probabilities 1/11, 6/11, 3/11, 1/11: top_p 0.5 keeps only token 1.
  for (int i = 0; i < 50; ++i)
    EXPECT_EQ(models::choose_next_token(logits, {.temperature = 1.0, .top_p = 0.5}, gen), 1);
  // top_p 0.8 keeps tokens 1 and 2 (6/11 + 3/11 = 0.82); both appear, nothing else.
  std::set<int64_t> seen;
  for (int i = 0; i < 200; ++i)
    seen.insert(models::choose_next_token(logits, {.temperature = 1.0, .top_p = 0.8}, gen));
  EXPECT_EQ(seen, (std::set<int64_t>{1, 2}));
  EXPECT_EQ(models::choose_next_token(logits, {}, gen), 1);  // greedy
}

TEST(HfGenerate, RefusesBadInput) {
  auto model = load_hf_model(hf_fixture_dir("gpt2"));
  testing::expect_error([&] { models::generate(*model, {}, {}); }, "prompt is empty");
  testing::expect_error([&] { models::generate(*model, {320}, {}); }, "outside the vocabulary");
  testing::expect_error([&] { models::generate(*model, {1}, {.max_new_tokens = 64}); },
                        "n_positions 64");
  testing::expect_error([&] { models::generate(*model, {1}, {.top_p = 0}); }, "top_p");
}

}  // namespace
}  // namespace mantissa
