// The GPT's other pieces on a GPU against the CPU: layer_norm (with and without affine
// parameters), embedding (repeated indices), dropout (statistics and its own masks), views'
// and shared tensors' gradients (select/narrow backward, gradient accumulation), and the
// attention (float32 composed from cuBLAS products; float16 and bfloat16 fused, see
// test_cuda_flash_attention.cpp).
#include <gtest/gtest.h>

#include <cmath>

#include "cuda_op_check.h"
#include "mantissa/ops/attention.h"
#include "mantissa/ops/dropout.h"
#include "mantissa/ops/embedding.h"
#include "mantissa/ops/layer_norm.h"
#include "mantissa/ops/softmax.h"
#include "ops/attention_fused.h"

namespace mantissa {
namespace {
using cuda_test::check_op;
using cuda_test::kGpu;
using cuda_test::randn_cpu;
using cuda_test::tol_of;
using V = std::vector<Tensor>;

TEST(CudaLayerNorm, GptSizedGradientsMatchTheCpu) {
  MANTISSA_REQUIRE_GPU();
  // (4096, 768): the weight and bias gradients' two-stage column sums over many row chunks.
  for (DType dt : {kFloat32, kFloat16, kBFloat16}) {
    const double tol = 2 * tol_of(dt);
    const Tensor x = randn_cpu({16, 256, 768}, 11, 2.0).to(dt);
    const Tensor w = randn_cpu({768}, 12).to(dt);
    const Tensor b = randn_cpu({768}, 13).to(dt);
    check_op(
        std::string(dt.name()) + " gpt", {x, w, b},
        [](const V& v) { return layer_norm(v[0], {768}, v[1], v[2], 1e-5); }, tol, true, 4 * tol);
  }
}

TEST(CudaLayerNorm, ForwardAndGradientsMatchTheCpu) {
  MANTISSA_REQUIRE_GPU();
  for (DType dt : {kFloat32, kFloat64, kBFloat16, kFloat16}) {
    const double tol = 2 * tol_of(dt);
    const Tensor x = add(randn_cpu({3, 67, 771}, 1, 2.0), 3.0).to(dt);
    const Tensor w = randn_cpu({771}, 2).to(dt);
    const Tensor b = randn_cpu({771}, 3).to(dt);
    const std::string n = std::string(dt.name()) + " ";
    check_op(
        n + "affine", {x, w, b},
        [](const V& v) { return layer_norm(v[0], {771}, v[1], v[2], 1e-5); }, tol, true, 4 * tol);
    check_op(
        n + "plain", {x}, [](const V& v) { return layer_norm(v[0], {771}); }, tol, true, 4 * tol);
  }
  // Two normalised dims, > 65535 rows, a transposed input.
  check_op(
      "2 dims", {randn_cpu({5, 9, 13}, 4), randn_cpu({9, 13}, 5), randn_cpu({9, 13}, 6)},
      [](const V& v) {
        return layer_norm(v[0], {9, 13}, v[1], v[2]);
      },
      1e-5, true, 1e-4);
  check_op(
      "many rows", {randn_cpu({70001, 8}, 7), randn_cpu({8}, 8), randn_cpu({8}, 9)},
      [](const V& v) { return layer_norm(v[0], {8}, v[1], v[2]); }, 1e-5, true, 1e-4);
  check_op(
      "transposed", {randn_cpu({40, 30}, 10)},
      [](const V& v) { return layer_norm(v[0].t(), {40}); }, 1e-5, true, 1e-4);
}

TEST(CudaEmbedding, ForwardAndGradientsMatchTheCpu) {
  MANTISSA_REQUIRE_GPU();
  std::vector<int64_t> ids(1000);
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int64_t>((i * i + 3) % 97);
  const Tensor idx = tensor(ids, {8, 125});
  for (DType dt : {kFloat32, kFloat64, kBFloat16}) {
    check_op(
        std::string(dt.name()), {randn_cpu({97, 65}, 1).to(dt), idx},
        [](const V& v) { return embedding(v[0], v[1]); }, 0, true, tol_of(dt));
  }
  check_op(
      "int32 indices", {randn_cpu({97, 65}, 2), idx.to(kInt32)},
      [](const V& v) { return embedding(v[0], v[1]); }, 0, true, 1e-5);
  EXPECT_THROW((void)embedding(randn_cpu({5, 3}, 3).to(kGpu),
                               tensor(std::vector<int64_t>{1, 5}, {2}).to(kGpu)),
               Error);
}

TEST(CudaDropout, KeepsTheRateScalesAndReusesItsMaskInBackward) {
  MANTISSA_REQUIRE_GPU();
  Generator gen(42);
  const Tensor x = ones({1000, 1000}, kFloat32, kGpu).requires_grad_(true);
  const Tensor y = dropout(x, 0.3, true, &gen);
  ASSERT_TRUE(y.is_cuda());
  const std::vector<float> v = y.cpu().to_vector<float>();
  int64_t kept = 0;
  for (float f : v) {
    if (f != 0.0f) {
      ++kept;
      EXPECT_FLOAT_EQ(f, static_cast<float>(1.0 / 0.7));
    }
  }
  EXPECT_NEAR(static_cast<double>(kept) / v.size(), 0.7, 0.005);
  y.backward(ones({1000, 1000}, kFloat32, kGpu));
  EXPECT_EQ(x.grad().cpu().to_vector<float>(), v);  // the same mask and scale
  // Another call draws another mask; p = 1 drops everything.
  EXPECT_NE(dropout(x.detach(), 0.3, true, &gen).cpu().to_vector<float>(), v);
  EXPECT_EQ(sum(dropout(x.detach(), 1.0, true, &gen)).cpu().item<double>(), 0.0);
}

TEST(CudaAutograd, ViewsAndSharedTensorsKeepGradientsOnTheGpu) {
  MANTISSA_REQUIRE_GPU();
  const Tensor x = randn_cpu({6, 35}, 1);
  check_op(
      "select + narrow", {x},
      [](const V& v) {
        return add(mul(v[0].select(0, 2), v[0].select(0, 4)), v[0].narrow(0, 1, 3));
      },
      1e-6);
  // x feeds two consumers: the engine adds the gradients (on the GPU).
  check_op(
      "reuse", {x}, [](const V& v) { return add(mul(v[0], v[0]), tanh(v[0])); }, 1e-5);
}

TEST(CudaAttention, ComposedCausalAttentionMatchesTheCpu) {
  MANTISSA_REQUIRE_GPU();  // needs matmul's CUDA branch (merged separately)
  const Tensor q = randn_cpu({2, 3, 17, 8}, 1), k = randn_cpu({2, 3, 17, 8}, 2),
               v = randn_cpu({2, 3, 17, 8}, 3);
  check_op(
      "causal", {q, k, v},
      [](const V& t) {
        return scaled_dot_product_attention(t[0], t[1], t[2], Tensor(), 0.0, true);
      },
      1e-5, true, 1e-4);
}

// The CPU reference of the fused GPU scaled (causal) softmax: scale, where with a (L, S) mask,
// softmax.
Tensor scaled_softmax_reference(const Tensor& x, double scale, bool causal) {
  Tensor s = mul(x, scale);
  if (causal) {
    const int64_t L = x.size(x.dim() - 2), S = x.size(x.dim() - 1);
    std::vector<double> m(static_cast<size_t>(L * S));
    for (int64_t i = 0; i < L; ++i)
      for (int64_t j = 0; j < S; ++j) m[i * S + j] = j <= i ? 1.0 : 0.0;
    s = where(tensor_of(m, {L, S}, kBool), s, -INFINITY);
  }
  return softmax(s, -1);
}

TEST(CudaAttention, FusedScaledSoftmaxMatchesTheComposedCpuOps) {
  MANTISSA_REQUIRE_GPU();
  // L < S, L > S, rows longer than a warp's 32 lanes and shorter.
  for (const Shape& shape : {Shape{2, 3, 37, 45}, Shape{2, 70, 33}, Shape{5, 7}}) {
    for (DType dt : {kFloat32, kFloat64, kFloat16, kBFloat16}) {
      for (bool causal : {true, false}) {
        const Tensor x = randn_cpu(shape, 7, 3.0).to(dt);
        const double scale = 0.37;
        check_op(
            std::string(dt.name()) + (causal ? " causal " : " full ") +
                std::string(shape_str(shape)),
            {x},
            [scale, causal](const V& v) {
              return v[0].is_cuda() ? detail::scaled_softmax(v[0], scale, causal)
                                    : scaled_softmax_reference(v[0], scale, causal);
            },
            2 * tol_of(dt), true, 4 * tol_of(dt));
      }
    }
  }
}

TEST(CudaAttention, AttentionOnTheGpuMatchesTheCpuAtEveryDtype) {
  MANTISSA_REQUIRE_GPU();
  for (DType dt : {kFloat32, kFloat16, kBFloat16}) {
    const Tensor q = randn_cpu({2, 3, 45, 16}, 1).to(dt), k = randn_cpu({2, 3, 45, 16}, 2).to(dt),
                 v = randn_cpu({2, 3, 45, 16}, 3).to(dt);
    for (bool causal : {true, false})
      check_op(
          std::string(dt.name()) + (causal ? " causal" : " full"), {q, k, v},
          [causal](const V& t) {
            return scaled_dot_product_attention(t[0], t[1], t[2], Tensor(), 0.0, causal);
          },
          4 * tol_of(dt), true, 8 * tol_of(dt));
  }
}

TEST(CudaAttention, PackedSelfAttentionOnTheGpuMatchesTheCpu) {
  MANTISSA_REQUIRE_GPU();
  // MultiheadAttention's packed (B, L, 3E) path: one backward node writing dq, dk, dv into one
  // gradient.
  for (DType dt : {kFloat32, kFloat16, kBFloat16}) {
    const Tensor qkv = randn_cpu({2, 37, 3 * 4 * 16}, 21).to(dt);
    for (bool causal : {true, false})
      check_op(
          std::string(dt.name()) + (causal ? " causal" : " full"), {qkv},
          [causal](const V& t) { return detail::packed_self_attention(t[0], 4, causal); },
          4 * tol_of(dt), true, 8 * tol_of(dt));
  }
}

}  // namespace
}  // namespace mantissa
