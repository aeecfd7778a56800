// Hugging Face causal LMs on a GPU: the fixtures' logits against transformers' (fp32), greedy
// generation with the KV cache, a bf16 model under autocast, and a 4-bit model's cached decoding.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "cuda/cuda_test_util.h"
#include "mantissa/amp/autocast.h"
#include "mantissa/autograd/grad_mode.h"
#include "mantissa/models/generate.h"
#include "mantissa/models/hf_loader.h"
#include "mantissa/ops/shape_ops.h"
#include "models/hf_fixtures.h"

namespace mantissa {
namespace {

using cuda_test::kGpu;

double relative_error(const Tensor& got, const Tensor& want) {
  const auto g = got.to(kCPU).to_vector<double>(), w = want.to_vector<double>();
  double err = 0, scale = 0;
  for (size_t i = 0; i < w.size(); ++i) {
    err = std::max(err, std::abs(g[i] - w[i]));
    scale = std::max(scale, std::abs(w[i]));
  }
  return err / scale;
}

TEST(CudaHfModels, LogitsAndGreedyTokensEqualTransformers) {
  MANTISSA_REQUIRE_GPU();
  for (const std::string& name : testing::hf_fixture_names()) {
    SCOPED_TRACE(name);
    const auto ref = testing::hf_reference(name);
    auto model = models::load_hf_model(testing::hf_fixture_dir(name));
    model->to(kGpu);
    {
      NoGradGuard g;
      const Tensor logits = model->forward(ref.input_ids.to(kGpu));
      EXPECT_TRUE(logits.is_cuda());
      EXPECT_LE(relative_error(logits, ref.logits), 1e-4);
      // The cache on the GPU: a prefix, then one token at a time.
      models::KvCache cache;
      const Tensor ids = ref.greedy.to(kGpu);
      std::vector<Tensor> parts = {model->forward(ids.narrow(1, 0, 10).contiguous(), cache)};
      for (int64_t t = 10; t < ids.size(1); ++t)
        parts.push_back(model->forward(ids.narrow(1, t, 1).contiguous(), cache));
      EXPECT_LE(relative_error(cat(parts, 1), model->forward(ids).to(kCPU)), 1e-4);
    }
    const auto prompt = ref.input_ids.select(0, 0).to_vector<int64_t>();
    const auto want = ref.greedy.select(0, 0).narrow(0, 10, 12).to_vector<int64_t>();
    EXPECT_EQ(models::generate(*model, prompt, {.max_new_tokens = 12}), want);
  }
}

TEST(CudaHfModels, Bf16AutocastAndFourBitRun) {
  MANTISSA_REQUIRE_GPU();
  const auto ref = testing::hf_reference("llama_tied_llama3");
  auto model = models::load_hf_model(testing::hf_fixture_dir("llama_tied_llama3"));
  model->to(kGpu);
  NoGradGuard g;
  {
    amp::autocast ac(DeviceType::kCUDA, kBFloat16);
    EXPECT_LT(relative_error(model->forward(ref.input_ids.to(kGpu)), ref.logits), 0.05);
  }
  auto q =
      models::load_hf_model(testing::hf_fixture_dir("llama_tied_llama3"), {.quantization = "nf4"});
  auto cpu_logits = q->forward(ref.greedy);
  q->to(kGpu);
  const Tensor ids = ref.greedy.to(kGpu);
  EXPECT_LT(relative_error(q->forward(ids), cpu_logits), 0.05);
  models::KvCache cache;
  const Tensor a = q->forward(ids.narrow(1, 0, 12).contiguous(), cache);
  const Tensor b = q->forward(ids.narrow(1, 12, 10).contiguous(), cache);
  EXPECT_LT(relative_error(cat({a, b}, 1), cpu_logits), 0.05);
}

}  // namespace
}  // namespace mantissa
