// MultiheadAttention's two forms of the input projection (include/mantissa/nn/attention.h):
// PyTorch's in_proj_weight / in_proj_bias parameters, or a Linear child "in_proj" that the
// precision plugins can replace (the GPT's form). Both start from the same values and compute
// the same bits; files written in the parameter form load into the Linear form; the plugins
// reach the GPT's projection.
#include <gtest/gtest.h>

#include "mantissa/autograd/grad_mode.h"
#include "mantissa/models/gpt.h"
#include "mantissa/nn/attention.h"
#include "mantissa/nn/linear.h"
#include "mantissa/nn/transformer.h"
#include "mantissa/ops/reduce.h"
#include "mantissa/quant/linear4bit.h"
#include "mantissa/train/precisions/bitsandbytes_precision.h"
#include "support/test_util.h"

namespace mantissa {
namespace {

using namespace mantissa::testing;

std::shared_ptr<nn::TransformerBlock> block(bool in_proj_linear) {
  manual_seed(11);
  return std::make_shared<nn::TransformerBlock>(nn::TransformerBlockOptions{
      .embed_dim = 16, .num_heads = 2, .causal = true, .in_proj_linear = in_proj_linear});
}

TEST(AttentionInProj, BothFormsStartEqualAndComputeTheSameBits) {
  auto params = block(false), linear = block(true);
  auto a = params->attn(), b = linear->attn();
  EXPECT_FALSE(b->in_proj_weight.defined());
  EXPECT_EQ(vals(a->in_proj_weight), vals(b->input_projection_weight()));
  EXPECT_EQ(vals(a->in_proj_bias), vals(b->input_projection_bias()));
  // Everything drawn after the projection (out_proj, the MLP) is equal too.
  EXPECT_EQ(vals(params->mlp()->fc2()->weight), vals(linear->mlp()->fc2()->weight));
  EXPECT_NE(linear->state_dict().keys(), params->state_dict().keys());

  Generator g(3);
  const Tensor x = uniform({2, 5, 16}, -1, 1, kFloat32, &g);
  const Tensor xa = x.clone().requires_grad_(true), xb = x.clone().requires_grad_(true);
  const Tensor ya = params->forward(xa), yb = linear->forward(xb);
  EXPECT_EQ(vals(ya), vals(yb));
  sum(ya).backward();
  sum(yb).backward();
  EXPECT_EQ(vals(xa.grad()), vals(xb.grad()));
  EXPECT_EQ(vals(a->in_proj_weight.grad()), vals(b->input_projection_weight().grad()));
  EXPECT_EQ(vals(a->in_proj_bias.grad()), vals(b->input_projection_bias().grad()));
}

TEST(AttentionInProj, ParameterFormFilesLoadIntoTheLinearForm) {
  auto params = block(false), linear = block(true);
  Generator g(5);
  {
    NoGradGuard no_grad;
    params->attn()->in_proj_weight.copy_(uniform({48, 16}, -1, 1, kFloat32, &g));
    params->attn()->in_proj_bias.copy_(uniform({48}, -1, 1, kFloat32, &g));
  }
  const nn::StateDict old_layout = params->state_dict();
  ASSERT_TRUE(old_layout.contains("attn.in_proj_weight"));
  linear->load_state_dict(old_layout);  // strict: every key matched after the rename
  EXPECT_EQ(vals(linear->attn()->input_projection_weight()), vals(params->attn()->in_proj_weight));
  EXPECT_EQ(vals(linear->attn()->input_projection_bias()), vals(params->attn()->in_proj_bias));
  // The current layout loads as it is, and the parameter form does not take the Linear's keys.
  linear->load_state_dict(linear->state_dict());
  expect_error([&] { params->load_state_dict(linear->state_dict()); }, "attn.in_proj.weight");
}

TEST(AttentionInProj, LinearFormRefusesCrossAttention) {
  nn::MultiheadAttention mha(16, 2, 0.0, true, kFloat32, nullptr, /*in_proj_linear=*/true);
  Generator g(7);
  const Tensor q = uniform({1, 3, 16}, -1, 1, kFloat32, &g);
  const Tensor kv = uniform({1, 4, 16}, -1, 1, kFloat32, &g);
  expect_error([&] { mha.forward(q, kv, kv, Tensor(), false); }, "self-attention only");
  EXPECT_EQ(mha.forward(q).shape(), (Shape{1, 3, 16}));
}

// The GPT's q/k/v projection is a Linear, so nf4 quantizes it like the other projections and
// --quant-ignore can name it.
TEST(AttentionInProj, GptProjectionIsQuantizedByTheBitsandbytesPlugin) {
  manual_seed(3);
  models::GPT gpt({.context = 8, .layers = 2, .width = 32, .heads = 2, .dtype = kFloat32});
  train::BitsandbytesPrecision("nf4").convert_module(gpt);
  EXPECT_NE(dynamic_cast<quant::Linear4bit*>(&gpt.get_submodule("h0.attn.in_proj")), nullptr);
  EXPECT_NE(dynamic_cast<quant::Linear4bit*>(&gpt.get_submodule("h1.attn.in_proj")), nullptr);
  // 2 blocks x (in_proj, out_proj, fc1, fc2).
  EXPECT_EQ(train::BitsandbytesPrecision::quantized_stats(gpt).layers, 8);

  manual_seed(3);
  models::GPT kept({.context = 8, .layers = 2, .width = 32, .heads = 2, .dtype = kFloat32});
  train::BitsandbytesPrecision("nf4", kFloat32, {"h0.attn.in_proj"}).convert_module(kept);
  EXPECT_NE(dynamic_cast<nn::Linear*>(&kept.get_submodule("h0.attn.in_proj")), nullptr);
  EXPECT_EQ(train::BitsandbytesPrecision::quantized_stats(kept).layers, 7);
  Generator g(2);
  const Tensor tokens = randint(0, 256, {2, 8}, kInt64, &g);
  EXPECT_EQ(kept.forward(tokens).shape(), (Shape{2, 8, 256}));
}

}  // namespace
}  // namespace mantissa
