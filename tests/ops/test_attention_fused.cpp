// The fused attention path (ops/attention_fused.h) against the composed one, which an explicit
// mask selects: the same values and gradients in f64 for causal and unmasked attention, tile
// edges (sizes not a multiple of the tile, one query, odd widths), finite differences, low
// precision against f64, bit-identical reruns, NaN rows, which path a call takes, keys and values
// broadcast over grouped query heads, and the packed self-attention of MultiheadAttention.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "mantissa/autograd/node.h"
#include "mantissa/nn/attention.h"
#include "mantissa/ops/attention.h"
#include "mantissa/ops/reduce.h"
#include "ops/attention_fused.h"
#include "support/test_util.h"

namespace mantissa {
namespace {

using namespace mantissa::testing;

struct Case {
  int64_t B, H, L, S, E, Ev;
  bool causal;
  double scale;  // 0: the default 1/sqrt(E)
};

// The (L, S) bool mask equal to is_causal (or all true): with it the call takes the composed path.
Tensor explicit_mask(int64_t L, int64_t S, bool causal) {
  std::vector<double> m(L * S);
  for (int64_t i = 0; i < L; ++i)
    for (int64_t j = 0; j < S; ++j) m[i * S + j] = !causal || j <= i;
  return tensor_of(m, {L, S}, kBool);
}

std::optional<double> scale_of(const Case& c) {
  return c.scale == 0 ? std::nullopt : std::optional<double>(c.scale);
}

Tensor fused(const Case& c, const std::vector<Tensor>& x) {
  return scaled_dot_product_attention(x[0], x[1], x[2], Tensor(), 0, c.causal, scale_of(c));
}

Tensor composed(const Case& c, const std::vector<Tensor>& x) {
  return scaled_dot_product_attention(x[0], x[1], x[2], explicit_mask(c.L, c.S, c.causal), 0, false,
                                      scale_of(c));
}

std::vector<Tensor> inputs_for(const Case& c, uint64_t seed) {
  return {random_input({c.B, c.H, c.L, c.E}, seed, -2, 2),
          random_input({c.B, c.H, c.S, c.E}, seed + 1, -2, 2),
          random_input({c.B, c.H, c.S, c.Ev}, seed + 2)};
}

// Output and the three input gradients for upstream gradient r.
std::vector<std::vector<double>> values_and_grads(const Tensor& out, const Tensor& r,
                                                  const std::vector<Tensor>& x) {
  for (const Tensor& t : x) t.reset_grad();
  out.backward(r);
  return {vals(out), vals(x[0].grad()), vals(x[1].grad()), vals(x[2].grad())};
}

const std::vector<Case> kCases = {
    {2, 3, 70, 70, 32, 32, true, 0},    // T not a multiple of the query or key tile
    {2, 3, 70, 70, 32, 32, false, 0},   //
    {1, 2, 1, 1, 32, 32, true, 0},      // T = 1
    {1, 2, 1, 9, 8, 8, false, 0},       // one query, several keys
    {2, 1, 37, 45, 5, 7, true, 0.3},    // odd widths, L < S, explicit scale
    {1, 2, 45, 37, 5, 7, true, 0},      // L > S under the causal mask
    {1, 1, 130, 97, 3, 1, false, 1.7},  // several key tiles, Ev = 1
};

TEST(FusedAttention, MatchesComposedInF64) {
  for (const Case& c : kCases) {
    SCOPED_TRACE("L=" + std::to_string(c.L) + " S=" + std::to_string(c.S) +
                 " E=" + std::to_string(c.E) + " causal=" + std::to_string(c.causal));
    const auto x = inputs_for(c, 40);
    Tensor yf = fused(c, x);
    Tensor yc = composed(c, x);
    ASSERT_EQ(yf.grad_fn()->name(), "ScaledDotProductAttentionBackward");
    ASSERT_NE(yc.grad_fn()->name(), "ScaledDotProductAttentionBackward");
    Generator g(5);
    Tensor r = uniform(yf.shape(), -1, 1, kFloat64, &g);
    const auto f = values_and_grads(yf, r, x);
    const auto w = values_and_grads(yc, r, x);
    for (size_t k = 0; k < f.size(); ++k) {
      SCOPED_TRACE("output/grad " + std::to_string(k));
      expect_near_all(f[k], w[k], 1e-12);
    }
  }
}

TEST(FusedAttention, Gradcheck) {
  for (const Case& c : {Case{1, 2, 5, 5, 3, 2, true, 0}, Case{2, 1, 4, 6, 3, 3, false, 0.8},
                        Case{1, 1, 1, 1, 2, 2, true, 0}}) {
    const auto x = inputs_for(c, 50);
    expect_gradcheck([&](const auto& in) { return fused(c, in); }, x);
  }
}

TEST(FusedAttention, LowPrecisionMatchesF64) {
  const Case c{2, 2, 40, 40, 32, 16, true, 0};
  const auto x = inputs_for(c, 60);
  auto fn = [&](const auto& in) { return fused(c, in); };
  expect_matches_f64(fn, x, kFloat32, 1e-5, 1e-5);
  expect_matches_f64(fn, x, kFloat16, 4e-3, 4e-3);
  expect_matches_f64(fn, x, kBFloat16, 3e-2, 3e-2);
}

// fp32 operands whose key count and widths leave remainders in every 4 x 4 block of the K and V
// transposes (and the ViT's 17 keys of width 32).
TEST(FusedAttention, Float32OddShapesMatchF64) {
  for (const Case& c : {Case{1, 2, 17, 19, 7, 5, false, 0}, Case{2, 1, 6, 17, 32, 32, false, 0},
                        Case{1, 1, 3, 2, 3, 9, true, 0}}) {
    SCOPED_TRACE("L=" + std::to_string(c.L) + " S=" + std::to_string(c.S) +
                 " E=" + std::to_string(c.E) + " Ev=" + std::to_string(c.Ev));
    const auto x = inputs_for(c, 70);
    expect_matches_f64([&](const auto& in) { return fused(c, in); }, x, kFloat32, 1e-5, 1e-5);
  }
}

// One query row in float32 or bfloat16 (incremental decoding) takes its scores as dot products
// from K's rows: values and gradients against f64 over one key, key counts past a key tile,
// widths that leave remainders in the dot products' vectors, and keys read through a view with
// room past its last position (as a KV cache holds them).
TEST(FusedAttention, OneQueryRowMatchesF64) {
  for (const Case& c : {Case{1, 2, 1, 1, 64, 64, false, 0}, Case{2, 3, 1, 300, 64, 64, false, 0},
                        Case{1, 2, 1, 37, 5, 7, false, 0.4}, Case{1, 1, 1, 70, 19, 33, true, 0}}) {
    SCOPED_TRACE("S=" + std::to_string(c.S) + " E=" + std::to_string(c.E) +
                 " Ev=" + std::to_string(c.Ev));
    const auto x = inputs_for(c, 75);
    auto fn = [&](const auto& in) { return fused(c, in); };
    expect_matches_f64(fn, x, kFloat32, 1e-5, 1e-5);
    expect_matches_f64(fn, x, kBFloat16, 3e-2, 3e-2);
  }
  const Case c{2, 3, 1, 50, 16, 16, false, 0};
  const auto x = inputs_for(c, 76);
  Tensor room_k = zeros({c.B, c.H, 64, c.E}), room_v = zeros({c.B, c.H, 64, c.Ev});
  room_k.narrow(2, 0, c.S).copy_(x[1].detach());
  room_v.narrow(2, 0, c.S).copy_(x[2].detach());
  const Tensor q = x[0].detach().to(kFloat32);
  const Tensor viewed =
      scaled_dot_product_attention(q, room_k.narrow(2, 0, c.S), room_v.narrow(2, 0, c.S));
  const Tensor dense =
      scaled_dot_product_attention(q, x[1].detach().to(kFloat32), x[2].detach().to(kFloat32));
  EXPECT_EQ(vals(viewed), vals(dense));
}

TEST(FusedAttention, OneQueryRowNanKeyPropagates) {
  const Case c{1, 1, 1, 20, 8, 8, false, 0};
  std::vector<Tensor> x;
  for (const Tensor& t : inputs_for(c, 77)) x.push_back(t.detach().to(kFloat32));
  x[1].data<float>()[7 * 8 + 3] = std::nanf("");
  const auto out = vals(fused(c, x));
  for (double v : out) EXPECT_TRUE(std::isnan(v));
}

TEST(FusedAttention, ThreeAndTwoDimensionalInputs) {
  auto q = random_input({3, 6, 4}, 70), k = random_input({3, 7, 4}, 71),
       v = random_input({3, 7, 5}, 72);
  Tensor y = scaled_dot_product_attention(q, k, v);
  EXPECT_EQ(y.grad_fn()->name(), "ScaledDotProductAttentionBackward");
  expect_near_all(vals(y), vals(scaled_dot_product_attention(q, k, v, explicit_mask(6, 7, false))),
                  1e-12);
  Tensor q2 = q.select(0, 1).detach(), k2 = k.select(0, 1).detach(), v2 = v.select(0, 1).detach();
  expect_near_all(vals(scaled_dot_product_attention(q2, k2, v2, Tensor(), 0, true)),
                  vals(scaled_dot_product_attention(q2, k2, v2, explicit_mask(6, 7, true))), 1e-12);
}

TEST(FusedAttention, BitIdenticalAcrossRunsAndThreadCounts) {
  const Case c{4, 4, 100, 100, 32, 32, true, 0};
  for (DType dt : {kFloat32, kBFloat16}) {
    SCOPED_TRACE(dt.name());
    auto run = [&](int threads) {
#ifdef _OPENMP
      const int before = omp_get_max_threads();
      omp_set_num_threads(threads);
#endif
      std::vector<Tensor> x;
      for (const Tensor& t : inputs_for(c, 80)) x.push_back(t.detach().to(dt).requires_grad_());
      Tensor y = fused(c, x);
      Generator g(6);
      const auto out = values_and_grads(y, uniform(y.shape(), -1, 1, dt, &g), x);
#ifdef _OPENMP
      omp_set_num_threads(before);
#endif
      return out;
    };
    const auto a = run(2), b = run(2), one = run(1);
    EXPECT_EQ(a, b);
    EXPECT_EQ(a, one);
  }
}

TEST(FusedAttention, NanInARowPropagatesAsComposed) {
  const Case c{1, 1, 6, 6, 4, 4, true, 0};
  auto x = inputs_for(c, 90);
  x[0].detach().data<double>()[2 * 4 + 1] = kNaN;  // query 2
  x[1].detach().data<double>()[4 * 4] = kNaN;      // key 4: rows 4 and 5 see it
  const auto f = vals(fused(c, x)), w = vals(composed(c, x));
  for (size_t i = 0; i < f.size(); ++i) {
    EXPECT_EQ(std::isnan(f[i]), std::isnan(w[i])) << "element " << i;
    if (!std::isnan(w[i])) EXPECT_NEAR(f[i], w[i], 1e-12);
  }
  EXPECT_TRUE(std::isnan(f[2 * 4]));
  EXPECT_FALSE(std::isnan(f[3 * 4]));
}

TEST(FusedAttention, MasksAndDropoutTakeTheComposedPath) {
  const Case c{1, 2, 5, 5, 4, 4, false, 0};
  const auto x = inputs_for(c, 100);
  Generator g(1);
  Tensor yd =
      scaled_dot_product_attention(x[0], x[1], x[2], Tensor(), 0.3, false, std::nullopt, &g);
  EXPECT_NE(yd.grad_fn()->name(), "ScaledDotProductAttentionBackward");
  Tensor ym = scaled_dot_product_attention(x[0], x[1], x[2], explicit_mask(5, 5, true));
  EXPECT_NE(ym.grad_fn()->name(), "ScaledDotProductAttentionBackward");
  // A query broadcast against its keys stays composed.
  Tensor qb = random_input({1, 1, 5, 4}, 101);
  Tensor kb = random_input({2, 2, 5, 4}, 102), vb = random_input({2, 2, 5, 4}, 103);
  Tensor yb = scaled_dot_product_attention(qb, kb, vb);
  EXPECT_NE(yb.grad_fn()->name(), "ScaledDotProductAttentionBackward");
}

// Grouped-query attention: keys and values of size 1 in a leading dimension (one key/value head
// per group of query heads, as models/hf_attention.cpp lays them out) take the fused kernel, and
// its values and the gradients summed over each group match the composed form in f64.
TEST(FusedAttention, BroadcastKeysAndValuesMatchComposedInF64) {
  for (bool causal : {true, false}) {
    SCOPED_TRACE(causal ? "causal" : "unmasked");
    const int64_t B = 2, G = 2, rep = 3, L = 37, E = 8, Ev = 5;
    const std::vector<Tensor> x = {random_input({B, G, rep, L, E}, 120, -2, 2),
                                   random_input({B, G, 1, L, E}, 121, -2, 2),
                                   random_input({1, G, 1, L, Ev}, 122)};
    Tensor yf = scaled_dot_product_attention(x[0], x[1], x[2], Tensor(), 0, causal);
    Tensor yc = scaled_dot_product_attention(x[0], x[1], x[2], explicit_mask(L, L, causal));
    ASSERT_EQ(yf.grad_fn()->name(), "ScaledDotProductAttentionBackward");
    ASSERT_NE(yc.grad_fn()->name(), "ScaledDotProductAttentionBackward");
    Generator g(6);
    Tensor r = uniform(yf.shape(), -1, 1, kFloat64, &g);
    const auto f = values_and_grads(yf, r, x);
    const auto w = values_and_grads(yc, r, x);
    ASSERT_EQ(f[2].size(), static_cast<size_t>(B * G * L * E));
    for (size_t k = 0; k < f.size(); ++k) {
      SCOPED_TRACE("output/grad " + std::to_string(k));
      expect_near_all(f[k], w[k], 1e-12);
    }
  }
  const std::vector<Tensor> x = {random_input({1, 2, 2, 4, 3}, 130),
                                 random_input({1, 2, 1, 4, 3}, 131),
                                 random_input({1, 2, 1, 4, 2}, 132)};
  expect_gradcheck(
      [](const auto& in) {
        return scaled_dot_product_attention(in[0], in[1], in[2], Tensor(), 0, true);
      },
      x);
}

// MultiheadAttention's packed path against its general path (forced by an explicit mask).
TEST(FusedAttention, PackedSelfAttentionMatchesGeneralPath) {
  for (bool causal : {true, false}) {
    SCOPED_TRACE(causal ? "causal" : "unmasked");
    manual_seed(3);
    nn::MultiheadAttention mha(12, 3, 0.0, true, kFloat64);
    Tensor x = random_input({2, 9, 12}, 110);
    Generator g(7);
    Tensor r = uniform({2, 9, 12}, -1, 1, kFloat64, &g);
    auto run = [&](bool packed) {
      mha.zero_grad();
      x.reset_grad();
      Tensor y = packed ? mha.forward(x, x, x, Tensor(), causal)
                        : mha.forward(x, x, x, explicit_mask(9, 9, causal), false);
      y.backward(r);
      return std::vector<std::vector<double>>{
          vals(y), vals(x.grad()), vals(mha.in_proj_weight.grad()), vals(mha.in_proj_bias.grad())};
    };
    const auto p = run(true), gen = run(false);
    for (size_t k = 0; k < p.size(); ++k) expect_near_all(p[k], gen[k], 1e-12);
  }
}

TEST(FusedAttention, PackedSelfAttentionGradcheck) {
  Tensor qkv = random_input({2, 4, 12}, 120);
  expect_gradcheck([](const auto& x) { return detail::packed_self_attention(x[0], 2, true); },
                   {qkv});
}

}  // namespace
}  // namespace mantissa
