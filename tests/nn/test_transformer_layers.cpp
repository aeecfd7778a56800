// nn::LayerNorm, nn::Embedding, nn::MultiheadAttention, nn::TransformerBlock: parameters and
// init, MHA against a hand-written reference, end-to-end gradients (f64), causality, autocast.
#include <gtest/gtest.h>

#include <cmath>

#include "mantissa/amp/autocast.h"
#include "mantissa/nn/embedding.h"
#include "mantissa/nn/functional.h"
#include "mantissa/nn/init.h"
#include "mantissa/nn/transformer.h"
#include "mantissa/ops/attention.h"
#include "mantissa/ops/elementwise.h"
#include "mantissa/ops/matmul.h"
#include "mantissa/ops/reduce.h"
#include "mantissa/ops/shape_ops.h"
#include "mantissa/ops/softmax.h"
#include "support/test_util.h"

namespace mantissa {
namespace {

using namespace mantissa::testing;

TEST(TransformerLayers, LayerNormAndEmbeddingParameters) {
  nn::LayerNorm ln({6}, 1e-5, true, true, kBFloat16);
  EXPECT_EQ(ln.weight.dtype(), kBFloat16);
  EXPECT_EQ(vals(ln.weight), std::vector<double>(6, 1.0));
  EXPECT_EQ(vals(ln.bias), std::vector<double>(6, 0.0));
  EXPECT_EQ(ln.named_parameters().size(), 2u);
  Generator g(1);
  nn::Embedding emb(1000, 16, kFloat32, &g, 0.02);
  const auto w = vals(emb.weight);
  double s2 = 0;
  for (double x : w) s2 += x * x;
  EXPECT_NEAR(std::sqrt(s2 / static_cast<double>(w.size())), 0.02, 0.001);
  EXPECT_EQ(emb.forward(tensor<int64_t>({3, 999}, {1, 2})).shape(), (Shape{1, 2, 16}));
}

Tensor lower_triangle(int64_t n) {
  std::vector<double> v(static_cast<size_t>(n * n));
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < n; ++j) v[static_cast<size_t>(i * n + j)] = j <= i ? 1 : 0;
  return tensor_of(v, {n, n}, kBool);
}

// Reference MHA from the parameters, with per-head loops and plain ops (no fused projection).
Tensor reference_mha(nn::MultiheadAttention& m, const Tensor& x, bool causal) {
  const int64_t E = m.embed_dim(), H = m.num_heads(), D = E / H;
  const int64_t T = x.size(1);
  std::vector<Tensor> heads;
  for (int64_t h = 0; h < H; ++h) {
    auto proj = [&](int64_t part) {
      Tensor w = m.in_proj_weight.narrow(0, part * E + h * D, D);
      Tensor b = m.in_proj_bias.narrow(0, part * E + h * D, D);
      return add(matmul(x, w.t()), b);
    };
    Tensor s = div(matmul(proj(0), proj(1).transpose(1, 2)), std::sqrt(static_cast<double>(D)));
    if (causal) s = where(lower_triangle(T), s, -INFINITY);
    heads.push_back(matmul(softmax(s, -1), proj(2)));
  }
  return nn::functional::linear(cat(heads, 2), m.out_proj()->weight, m.out_proj()->bias);
}

TEST(TransformerLayers, MultiheadAttentionMatchesReference) {
  manual_seed(3);
  nn::MultiheadAttention mha(8, 2, 0.0, true, kFloat64);
  // Non-zero biases so their placement is tested.
  nn::init::uniform_(mha.in_proj_bias, -1, 1);
  nn::init::uniform_(mha.out_proj()->bias, -1, 1);
  Tensor x = random_input({2, 5, 8}, 4);
  for (bool causal : {false, true}) {
    const auto got = vals(mha.forward(x, x, x, Tensor(), causal));
    const auto want = vals(reference_mha(mha, x, causal));
    for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-12) << i;
  }
  // Cross-attention path (separate projections) agrees with the fused one on equal inputs.
  Tensor x2 = x.clone();
  const auto cross = vals(mha.forward(x, x2, x2.clone(), Tensor(), true));
  const auto self = vals(mha.forward(x, x, x, Tensor(), true));
  for (size_t i = 0; i < cross.size(); ++i) EXPECT_NEAR(cross[i], self[i], 1e-12);
}

TEST(TransformerLayers, MultiheadAttentionGradcheck) {
  manual_seed(5);
  nn::MultiheadAttention mha(4, 2, 0.0, true, kFloat64);
  Tensor x = random_input({1, 3, 4}, 6);
  std::vector<Tensor> inputs = {x, mha.in_proj_weight, mha.in_proj_bias, mha.out_proj()->weight};
  expect_gradcheck([&](const auto& v) { return mha.forward(v[0], v[0], v[0], Tensor(), true); },
                   inputs);
}

TEST(TransformerLayers, BlockGradcheckAndCausality) {
  manual_seed(7);
  nn::TransformerBlock block(
      {.embed_dim = 4, .num_heads = 2, .mlp_ratio = 2, .causal = true, .dtype = kFloat64});
  Tensor x = random_input({1, 3, 4}, 8);
  std::vector<Tensor> inputs = {x, block.ln1()->weight, block.mlp()->fc1()->weight,
                                block.attn()->in_proj_weight};
  expect_gradcheck([&](const auto& v) { return block.forward(v[0]); }, inputs);
  // Output at t < 2 is unchanged when token 2 changes.
  Tensor x2 = x.detach().clone();
  x2.narrow(1, 2, 1).fill_(5);
  const auto a = vals(block.forward(x.detach()).narrow(1, 0, 2));
  const auto b = vals(block.forward(x2).narrow(1, 0, 2));
  EXPECT_EQ(a, b);
}

TEST(TransformerLayers, BlockUnderBf16Autocast) {
  manual_seed(9);
  nn::TransformerBlock block({.embed_dim = 16, .num_heads = 4, .causal = true});
  Generator g(1);
  Tensor x = randn({2, 5, 16}, kFloat32, &g);
  Tensor y, attn_out;
  {
    amp::autocast ac;
    attn_out = block.attn()->forward(x);
    y = block.forward(x);
  }
  EXPECT_EQ(attn_out.dtype(), kBFloat16);
  EXPECT_EQ(y.dtype(), kFloat32);  // fp32 residual + bf16 branch promotes
  sum(y).backward();
  for (const auto& [name, p] : block.named_parameters()) {
    ASSERT_TRUE(p.grad().defined()) << name;
    EXPECT_EQ(p.grad().dtype(), kFloat32) << name;
  }
  // bf16 autocast output close to fp32.
  const auto ref = vals(block.forward(x));
  const auto low = vals(y);
  for (size_t i = 0; i < ref.size(); ++i)
    EXPECT_NEAR(low[i], ref[i], 0.1 + 0.03 * std::abs(ref[i]));
}

TEST(TransformerLayers, Errors) {
  expect_error([] { nn::MultiheadAttention(10, 3); }, {"MultiheadAttention", "10", "3"});
  nn::MultiheadAttention mha(8, 2);
  expect_error([&] { mha.forward(zeros({2, 5, 6})); }, {"MultiheadAttention", "[2, 5, 6]"});
  expect_error([] { nn::LayerNorm({0}); }, "LayerNorm");
}

}  // namespace
}  // namespace mantissa
