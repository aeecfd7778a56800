// GPT sampling with a KV cache: cached logits equal forward's rows, and samples (greedy and
// seeded) equal a full recompute of the last `context` bytes per step, across the context
// boundary, in fp32, bf16 and with 4-bit LoRA layers; a replaced block slot falls back.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "mantissa/mantissa.h"
#include "mantissa/models/gpt.h"
#include "mantissa/nn/lora.h"
#include "mantissa/nn/replace.h"
#include "mantissa/quant/linear4bit.h"
#include "support/test_util.h"

namespace mantissa {
namespace {

using namespace mantissa::testing;

models::GPTConfig small(DType dtype = kFloat32) {
  return {.context = 24, .layers = 2, .width = 32, .heads = 4, .dtype = dtype};
}

// Greedy decoding by full recompute: each byte is the first argmax of forward's last row over
// the last `context` bytes (what sample did before the cache).
std::string greedy_by_recompute(models::GPT& m, std::string text, int64_t steps) {
  NoGradGuard ng;
  m.eval();
  const auto ctx = static_cast<size_t>(m.config().context);
  for (int64_t s = 0; s < steps; ++s) {
    const std::string window = text.substr(text.size() - std::min(text.size(), ctx));
    const Tensor logits = m.forward(data::encode_bytes(window).unsqueeze(0));
    const auto l = logits.select(1, logits.size(1) - 1).select(0, 0).to_vector<double>();
    text.push_back(static_cast<char>(std::max_element(l.begin(), l.end()) - l.begin()));
  }
  m.train();
  return text;
}

TEST(GptKvCache, CachedLogitsEqualForwardRows) {
  manual_seed(3);
  models::GPT m(small());
  m.eval();
  NoGradGuard ng;
  const Tensor tokens = data::encode_bytes("the cache holds keys and").unsqueeze(0);  // 24 bytes
  const Tensor full = m.forward(tokens);
  ASSERT_TRUE(m.kv_cacheable());
  models::KvCache cache;
  // Prefill 10 positions, then one at a time up to the context.
  const Tensor prefill = m.forward(tokens.narrow(1, 0, 10), cache);
  EXPECT_EQ(cache.length(), 10);
  EXPECT_EQ(prefill.to_vector<float>(), full.narrow(1, 0, 10).to_vector<float>());
  for (int64_t t = 10; t < 24; ++t) {
    const Tensor step = m.forward(tokens.narrow(1, t, 1), cache);
    EXPECT_EQ(cache.length(), t + 1);
    const auto got = step.to_vector<float>();
    const auto want = full.narrow(1, t, 1).to_vector<float>();
    float worst = 0;
    for (size_t i = 0; i < got.size(); ++i) worst = std::max(worst, std::abs(got[i] - want[i]));
    EXPECT_LE(worst, 1e-5f) << "position " << t;
  }
  expect_error([&] { m.forward(tokens.narrow(1, 0, 1), cache); }, "context");
  expect_error([&] { m.forward(tokens.narrow(1, 0, 2), cache); }, "");
}

TEST(GptKvCache, GreedyMatchesRecomputeAcrossContext) {
  manual_seed(4);
  models::GPT m(small());
  // 3 prompt bytes + 60 generated: 21 steps within the context of 24, the rest sliding.
  const std::string want = greedy_by_recompute(m, "abc", 60);
  EXPECT_EQ(m.sample("abc", 60, 0.0), want);
  EXPECT_EQ(m.sample("", 60, 0.0), greedy_by_recompute(m, "\n", 60).substr(1));
  // A prompt longer than the context.
  EXPECT_EQ(m.sample(std::string(30, 'q'), 5, 0.0),
            greedy_by_recompute(m, std::string(30, 'q'), 5));
}

TEST(GptKvCache, SeededSampleMatchesFallback) {
  manual_seed(5);
  models::GPT m(small());
  Generator a(11);
  const std::string cached = m.sample("xy", 50, 1.0, 0, &a);
  // Replacing a block slot by another module type turns the cache off (full recompute).
  auto block = m.child("h1");
  struct Wrapped : nn::Module {
    std::shared_ptr<nn::Module> inner;
    explicit Wrapped(std::shared_ptr<nn::Module> b) : Module("Wrapped"), inner(std::move(b)) {}
    Tensor forward(const Tensor& x) override { return inner->forward(x); }
  };
  m.replace_child("h1", std::make_shared<Wrapped>(block));
  EXPECT_FALSE(m.kv_cacheable());
  Generator b(11);
  EXPECT_EQ(m.sample("xy", 50, 1.0, 0, &b), cached);
  expect_error(
      [&] {
        models::KvCache c;
        m.forward(data::encode_bytes("x").unsqueeze(0), c);
      },
      "KV cache");
}

TEST(GptKvCache, Bf16AndQuantizedLoraLayers) {
  manual_seed(6);
  models::GPT m16(small(kBFloat16));
  EXPECT_EQ(m16.sample("abc", 40, 0.0), greedy_by_recompute(m16, "abc", 40));
  manual_seed(7);
  models::GPT q(small());
  const int replaced = nn::replace_modules(
      q,
      [](const std::string&, nn::Module& mod) {
        return dynamic_cast<nn::Linear*>(&mod) != nullptr;
      },
      [](const std::string&, std::shared_ptr<nn::Module> mod) -> std::shared_ptr<nn::Module> {
        return quant::Linear4bit::from_linear(*std::dynamic_pointer_cast<nn::Linear>(mod));
      });
  EXPECT_EQ(replaced, 8);  // in_proj, out_proj, fc1, fc2 of both blocks
  nn::apply_lora(q, {.r = 4, .alpha = 8.0});
  ASSERT_TRUE(q.kv_cacheable());
  EXPECT_EQ(q.sample("abc", 40, 0.0), greedy_by_recompute(q, "abc", 40));
}

}  // namespace
}  // namespace mantissa
