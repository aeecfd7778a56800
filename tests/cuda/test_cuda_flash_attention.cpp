// The GPU's fused (flash) attention kernels, float16 and bfloat16, against the CPU's fused
// kernel from the same inputs: outputs and the three gradients at shapes that cross tile edges
// (64 query rows per block, 64 or 32 keys per step), widths 32 / 64 / 128 and ones padded up to
// them, L != S, strided and misaligned operands (the scalar-load path), the GPT's packed (B, L,
// 3E) projection; bit-identical gradients when run twice (no atomics); and float32 still on the
// composed form (cuBLAS products, exact float32).
#include <gtest/gtest.h>

#include <cmath>

#include <cstdlib>
#include "cuda_op_check.h"

#include "mantissa/autograd/node.h"
#include "mantissa/models/gpt.h"
#include "mantissa/ops/attention.h"
#include "mantissa/ops/shape_ops.h"
#include "mantissa/optim/adamw.h"
#include "mantissa/train/precision_registry.h"
#include "ops/attention_fused.h"

namespace mantissa {
namespace {
using cuda_test::check_op;
using cuda_test::kGpu;
using cuda_test::randn_cpu;
using cuda_test::tol_of;
using V = std::vector<Tensor>;

Tensor sdpa(const V& t, bool causal) {
  return scaled_dot_product_attention(t[0], t[1], t[2], Tensor(), 0.0, causal);
}

struct Case {
  int64_t B, H, L, S, E;
};

TEST(CudaFlashAttention, MatchesTheCpuAcrossTileEdgesAndWidths) {
  MANTISSA_REQUIRE_GPU();
  // 64-row tiles with a remainder; L < S and L > S; widths at 32, 64, 128 and padded (24, 40, 96).
  const Case cases[] = {{2, 3, 130, 130, 64}, {1, 2, 37, 45, 40},  {2, 1, 70, 33, 128},
                        {1, 2, 193, 193, 32}, {1, 1, 65, 200, 24}, {1, 2, 100, 64, 96}};
  for (DType dt : {kFloat16, kBFloat16}) {
    for (const Case& c : cases) {
      const Tensor q = randn_cpu({c.B, c.H, c.L, c.E}, 1).to(dt);
      const Tensor k = randn_cpu({c.B, c.H, c.S, c.E}, 2).to(dt);
      const Tensor v = randn_cpu({c.B, c.H, c.S, c.E}, 3).to(dt);
      for (bool causal : {true, false})
        check_op(
            std::string(dt.name()) + (causal ? " causal " : " full ") + std::to_string(c.L) + "x" +
                std::to_string(c.S) + " E=" + std::to_string(c.E),
            {q, k, v}, [causal](const V& t) { return sdpa(t, causal); }, 4 * tol_of(dt), true,
            8 * tol_of(dt));
    }
  }
}

TEST(CudaFlashAttention, RunsOnTheGpuForHalvesOnlyAndIsDeterministic) {
  MANTISSA_REQUIRE_GPU();
  for (DType dt : {kFloat16, kBFloat16}) {
    SCOPED_TRACE(dt.name());
    const Tensor w = randn_cpu({2, 4, 150, 64}, 7).to(dt).to(kGpu);
    std::vector<Tensor> grads[2];
    for (int run = 0; run < 2; ++run) {
      V leaves;
      for (uint32_t seed : {4u, 5u, 6u})
        leaves.push_back(randn_cpu({2, 4, 150, 64}, seed).to(dt).to(kGpu).requires_grad_(true));
      const Tensor y = sdpa(leaves, true);
      ASSERT_EQ(y.grad_fn()->name(), "ScaledDotProductAttentionBackward");
      sum(mul(y, w)).backward();
      for (const Tensor& t : leaves) grads[run].push_back(t.grad());
    }
    for (size_t i = 0; i < 3; ++i)
      EXPECT_EQ(cuda_test::rel_error(grads[0][i], grads[1][i]), 0.0)
          << "two backward passes gave different gradients for input " << i;
  }
  // float32 keeps the composed form on a GPU (its products are exact float32 cuBLAS calls).
  const Tensor q = randn_cpu({1, 2, 20, 16}, 8).to(kGpu).requires_grad_(true);
  const Tensor y = sdpa({q, q, q}, false);
  EXPECT_NE(y.grad_fn()->name(), "ScaledDotProductAttentionBackward");
}

TEST(CudaFlashAttention, StridedAndMisalignedOperandsMatchTheCpu) {
  MANTISSA_REQUIRE_GPU();
  for (DType dt : {kFloat16, kBFloat16}) {
    // (B, L, H, E) transposed to (B, H, L, E): rows H * E apart, heads E apart (no copy).
    check_op(
        std::string(dt.name()) + " transposed heads", {randn_cpu({2, 90, 3, 64}, 9).to(dt)},
        [](const V& t) {
          const Tensor x = t[0].transpose(1, 2);
          return sdpa({x, mul(x, 0.5), add(x, 1.0)}, true);
        },
        4 * tol_of(dt), true, 8 * tol_of(dt));
    // Narrowed by one column: every row starts 2 bytes off a 16-byte boundary.
    check_op(
        std::string(dt.name()) + " misaligned", {randn_cpu({1, 2, 77, 65}, 10).to(dt)},
        [](const V& t) {
          const Tensor x = t[0].narrow(3, 1, 64);
          return sdpa({x, mul(x, -0.7), x}, false);
        },
        4 * tol_of(dt), true, 8 * tol_of(dt));
  }
}

TEST(CudaFlashAttention, PackedGptSizedSelfAttentionMatchesTheCpu) {
  MANTISSA_REQUIRE_GPU();
  // The GPT-2-sized model's attention: 12 heads of 64 over a context of 256, causal.
  for (DType dt : {kFloat16, kBFloat16}) {
    const Tensor qkv = randn_cpu({2, 256, 3 * 768}, 11).to(dt);
    check_op(
        std::string(dt.name()) + " gpt-2", {qkv},
        [](const V& t) { return detail::packed_self_attention(t[0], 12, true); }, 4 * tol_of(dt),
        true, 8 * tol_of(dt));
  }
}

// AdamW steps of a small GPT (head width 64, context 256) in `precision` on the GPU with the
// attention form `form` ("fused" or "composed"), the same initial weights and batch each time:
// the loss of every step.
std::vector<double> gpt_losses(const std::string& precision, const char* form, int steps) {
  setenv("MANTISSA_CUDA_ATTENTION", form, 1);
  manual_seed(0);
  models::GPT gpt({.context = 256, .layers = 2, .width = 128, .heads = 2});
  std::unique_ptr<train::Precision> plugin = train::precision_plugin_from_string(precision, "gpu");
  plugin->convert_module(gpt);
  gpt.to(kGpu);
  optim::AdamW opt(gpt.parameters(), 1e-3);
  Generator gen(3);
  const Tensor tokens = randint(0, 256, {4, 257}, kInt64, &gen).to(kGpu);
  const Tensor x = tokens.narrow(1, 0, 256).contiguous(), y = tokens.narrow(1, 1, 256).contiguous();
  std::vector<double> losses;
  for (int i = 0; i < steps; ++i) {
    opt.zero_grad();
    Tensor loss;
    {
      train::ScopePtr scope = plugin->forward_context();
      loss = models::GPT::loss(gpt.forward(x), y);
    }
    loss.backward();
    opt.step();
    losses.push_back(loss.item());
  }
  unsetenv("MANTISSA_CUDA_ATTENTION");
  return losses;
}

TEST(CudaFlashAttention, GptTrainsAsWithTheComposedForm) {
  MANTISSA_REQUIRE_GPU();
  // The fused kernels change only roundings: each step's loss within a few per cent of the
  // composed form's.
  const std::vector<double> fused = gpt_losses("bf16-true", "fused", 30);
  const std::vector<double> composed = gpt_losses("bf16-true", "composed", 30);
  for (size_t i = 0; i < fused.size(); ++i)
    EXPECT_NEAR(fused[i], composed[i], 0.03 * composed[i])
        << "step " << i << ": fused " << fused[i] << ", composed " << composed[i];
  EXPECT_LT(fused.back(), fused.front() - 0.5) << "it learns";
}

TEST(CudaFlashAttention, TheFp8ForwardTakesTheComposedFormUnlessTheEnvironmentSaysFused) {
  MANTISSA_REQUIRE_GPU();
  unsetenv("MANTISSA_CUDA_ATTENTION");
  std::unique_ptr<train::Precision> te =
      train::precision_plugin_from_string("transformer-engine", "gpu");
  const Tensor q = randn_cpu({1, 2, 40, 64}, 12).to(kBFloat16).to(kGpu).requires_grad_(true);
  auto node = [&] { return sdpa({q, q, q}, true).grad_fn()->name(); };
  EXPECT_EQ(node(), "ScaledDotProductAttentionBackward");  // outside: fused
  {
    train::ScopePtr scope = te->forward_context();
    EXPECT_NE(node(), "ScaledDotProductAttentionBackward");  // composed
    setenv("MANTISSA_CUDA_ATTENTION", "fused", 1);
    EXPECT_EQ(node(), "ScaledDotProductAttentionBackward");
    unsetenv("MANTISSA_CUDA_ATTENTION");
  }
  EXPECT_EQ(node(), "ScaledDotProductAttentionBackward");  // the scope closed
}

}  // namespace
}  // namespace mantissa
