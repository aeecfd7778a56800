// matmul against a naive double-precision triple loop (torch.matmul semantics written out),
// gradients against finite differences, low precision against f64.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <thread>

#include "kernels/cpu/gemm/gemm_backend.h"
#include "kernels/cpu/onednn/onednn_common.h"
#include "kernels/cpu/onednn/onednn_matmul.h"
#include "mantissa/core/allocator.h"
#include "mantissa/core/generator.h"
#include "mantissa/kernels/kernel_paths.h"
#include "mantissa/ops/matmul.h"
#include "support/test_util.h"

namespace mantissa {
namespace {

using namespace mantissa::testing;

// torch.matmul by definition, in double: values plus sum_k |a||b| per output (error scale).
struct Ref {
  Shape shape;
  std::vector<double> v, mag;
  int64_t K;
};
Ref naive_matmul(const Tensor& a, const Tensor& b) {
  Shape as = a.shape(), bs = b.shape();
  const bool a1 = as.size() == 1, b1 = bs.size() == 1;
  if (a1) as.insert(as.begin(), 1);
  if (b1) bs.push_back(1);
  const size_t nd = std::max(as.size(), bs.size());
  while (as.size() < nd) as.insert(as.begin(), 1);
  while (bs.size() < nd) bs.insert(bs.begin(), 1);
  Shape batch(nd - 2);
  for (size_t d = 0; d + 2 < nd; ++d) batch[d] = std::max(as[d], bs[d]);
  const int64_t M = as[nd - 2], K = as[nd - 1], N = bs[nd - 1];
  const auto av = a.to_vector<double>(), bv = b.to_vector<double>();
  const Shape ast = contiguous_strides(as), bst = contiguous_strides(bs);
  Ref r;
  r.K = K;
  const int64_t nb = numel_of(batch);
  for (int64_t i = 0; i < nb; ++i) {
    int64_t rem = i, ao = 0, bo = 0;
    for (int64_t d = static_cast<int64_t>(batch.size()) - 1; d >= 0; --d) {
      const int64_t idx = rem % batch[d];
      rem /= batch[d];
      if (as[d] != 1) ao += idx * ast[d];
      if (bs[d] != 1) bo += idx * bst[d];
    }
    for (int64_t m = 0; m < M; ++m)
      for (int64_t n = 0; n < N; ++n) {
        double s = 0, mag = 0;
        for (int64_t k = 0; k < K; ++k) {
          const double p = av[ao + m * K + k] * bv[bo + k * N + n];
          s += p;
          mag += std::abs(p);
        }
        r.v.push_back(s);
        r.mag.push_back(mag);
      }
  }
  r.shape = batch;
  if (!a1) r.shape.push_back(M);
  if (!b1) r.shape.push_back(N);
  return r;
}

// Half the relative spacing of the output dtype (one rounding of the result).
double unit_roundoff(DType dt) {
  if (dt == kBFloat16) return std::ldexp(1.0, -8);
  if (dt == kFloat16) return std::ldexp(1.0, -11);
  if (dt == kFloat32) return std::ldexp(1.0, -24);
  return std::ldexp(1.0, -53);
}

// |out - ref| <= u_out |ref| + c * u_acc * sqrt(K) * sum|a||b|: one rounding of the result
// plus the accumulator's (fp32, or double for f64) rounding error growth over K terms.
void expect_matches_naive(const Tensor& a, const Tensor& b) {
  const Tensor out = matmul(a, b);
  const Ref r = naive_matmul(a, b);
  ASSERT_EQ(out.shape(), r.shape) << shape_str(a.shape()) << " @ " << shape_str(b.shape());
  ASSERT_EQ(out.dtype(), a.dtype());
  const auto ov = out.to_vector<double>();
  const double u_acc = a.dtype() == kFloat64 ? std::ldexp(1.0, -53) : std::ldexp(1.0, -24);
  const double u_out = unit_roundoff(a.dtype());
  for (size_t i = 0; i < ov.size(); ++i) {
    const double tol =
        u_out * std::abs(r.v[i]) + 8 * u_acc * std::sqrt(double(r.K)) * r.mag[i] + 1e-300;
    ASSERT_NEAR(ov[i], r.v[i], tol) << shape_str(a.shape()) << " @ " << shape_str(b.shape()) << " "
                                    << a.dtype().name() << " element " << i;
  }
}

const std::vector<std::pair<Shape, Shape>> kShapes = {
    {{7, 13}, {13, 5}},
    {{1, 1}, {1, 1}},
    {{64, 33}, {33, 17}},
    {{2, 1, 3, 4}, {5, 4, 6}},
    {{3}, {3}},
    {{4}, {4, 5}},
    {{2, 3, 4}, {4}},
    {{3, 4}, {4}},
    {{5, 3, 4}, {4, 6}},
    {{4, 5}, {2, 5, 6}},
    {{3}, {2, 3, 4}},
    {{1, 2, 3, 4}, {1, 1, 4, 2}},
    {{2, 4, 1, 3}, {3, 4, 5, 2}} /* not broadcastable: filtered below */};

TEST(Matmul, MatchesNaiveLoopInEveryDtype) {
  for (DType dt : {kFloat64, kFloat32, kFloat16, kBFloat16}) {
    uint64_t seed = 1;
    for (const auto& [sa, sb] : kShapes) {
      if (sa.size() == 4 && sa[1] == 4) continue;
      expect_matches_naive(rnd(sa, dt, seed), rnd(sb, dt, seed + 100));
      ++seed;
    }
  }
}

TEST(Matmul, LargerThanOneCacheBlock) {
  // Crosses the f64 kernel's 32-row, 128-k and 256-column blocks and the parallel threshold.
  for (DType dt : {kFloat64, kFloat32, kBFloat16})
    expect_matches_naive(rnd({70, 300}, dt, 3), rnd({300, 260}, dt, 4));
}

TEST(Matmul, ExactSmallIntegersF32AndBF16) {
  // Small integers are exact in every dtype, so the result is exact too.
  for (DType dt : {kFloat32, kBFloat16, kFloat16, kFloat64}) {
    Tensor a = tensor_of({1, 2, 3, 4, 5, 6}, {2, 3}, dt);
    Tensor b = tensor_of({7, 8, 9, 10, 11, 12}, {3, 2}, dt);
    EXPECT_EQ(matmul(a, b).to_vector<double>(), (std::vector<double>{58, 64, 139, 154}));
    EXPECT_EQ(matmul(a[0], b.t()[1]).item(), 1 * 8 + 2 * 10 + 3 * 12);
  }
}

TEST(Matmul, TransposedAndStridedViews) {
  for (DType dt : {kFloat64, kFloat32, kFloat16, kBFloat16}) {
    Tensor x = rnd({13, 7}, dt, 5), y = rnd({5, 13}, dt, 6);
    expect_matches_naive(x.t(), y.t());                // both transposed-contiguous
    expect_matches_naive(x.t(), rnd({13, 5}, dt, 7));  // left transposed
    Tensor bx = rnd({3, 6, 4}, dt, 8), by = rnd({3, 5, 6}, dt, 9);
    expect_matches_naive(bx.transpose(-1, -2), by.transpose(1, 2));  // batched transposes
    expect_matches_naive(rnd({2, 5, 4}, dt, 10), bx.transpose(0, 1).transpose(1, 2)[0]);
    // Not dense in any order: stepped slices and a permuted batch dim are copied first.
    Tensor big = rnd({14, 10}, dt, 11);
    expect_matches_naive(big.slice(0, 0, 14, 2), big.slice(1, 0, 10, 3).slice(0, 0, 10));
    expect_matches_naive(rnd({4, 3, 6}, dt, 12).transpose(0, 1), rnd({3, 6, 2}, dt, 13));
  }
}

TEST(Matmul, TransposedOperandsAreReadInPlace) {
  // With both operands as transposed views, the only tensor bytes allocated are the output's.
  Tensor x = rnd({64, 48}, kFloat32, 14), y = rnd({32, 64}, kFloat32, 15);
  Tensor xt = x.t(), yt = y.t();
  const int64_t before = memory_allocated();
  reset_peak_memory_stats();
  Tensor out = matmul(xt, yt);
  EXPECT_EQ(max_memory_allocated() - before, static_cast<int64_t>(out.nbytes()));
}

TEST(Matmul, PrimitiveCacheIsReusedForRepeatedShapes) {
  // About oneDNN's cache: keep these products on oneDNN whatever MANTISSA_GEMM says.
  const kernels::GemmBackend before = kernels::gemm_backend();
  kernels::set_gemm_backend(kernels::GemmBackend::kOnednn);
  kernels::onednn_matmul_clear_cache();
  Tensor a = rnd({9, 16}, kFloat32, 16), b = rnd({16, 11}, kFloat32, 17);
  matmul(a, b);
  const size_t after_first = kernels::onednn_matmul_cache_size();
  EXPECT_EQ(after_first, 1u);
  matmul(rnd({9, 16}, kFloat32, 18), rnd({16, 11}, kFloat32, 19));  // same shapes, new data
  EXPECT_EQ(kernels::onednn_matmul_cache_size(), after_first);
  // A new dtype is a new primitive, except where the CPU has no bf16 dot products (AVX-512
  // BF16 or AMX): bf16 is widened there and, like f16, runs the cached f32 primitive.
  const size_t bf16_primitives = kernels::onednn_native_bf16() ? 1 : 0;
  matmul(a.to(kBFloat16), b.to(kBFloat16));
  EXPECT_EQ(kernels::onednn_matmul_cache_size(), after_first + bf16_primitives);
  matmul(a.to(kFloat16), b.to(kFloat16));  // f16 runs the cached f32 primitive
  EXPECT_EQ(kernels::onednn_matmul_cache_size(), after_first + bf16_primitives);
  kernels::set_gemm_backend(before);
}

TEST(Matmul, ConcurrentCallsShareCachedPrimitives) {
  // Threads share the cache (one primitive per shape) but use their own stream and scratchpad.
  Tensor a = rnd({33, 20}, kBFloat16, 60), b = rnd({20, 17}, kBFloat16, 61);
  const auto expected = matmul(a, b).to_vector<double>();
  std::vector<std::thread> threads;
  std::atomic<int> mismatches{0};
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&] {
      for (int i = 0; i < 10; ++i)
        if (matmul(a, b).to_vector<double>() != expected) ++mismatches;
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(mismatches.load(), 0);
}

TEST(Matmul, EmptyDimensions) {
  Tensor out = matmul(zeros({0, 3}), zeros({3, 4}));
  EXPECT_EQ(out.shape(), (Shape{0, 4}));
  for (DType dt : {kFloat64, kFloat32, kBFloat16, kFloat16}) {
    Tensor z = matmul(ones({2, 0}, dt), ones({0, 3}, dt));  // empty sum
    EXPECT_EQ(z.shape(), (Shape{2, 3}));
    EXPECT_EQ(z.to_vector<double>(), std::vector<double>(6, 0.0));
  }
}

TEST(Matmul, EmptyDimensionsBackward) {
  Tensor a = zeros({3, 0}), b = zeros({0, 2});
  a.requires_grad_();
  b.requires_grad_();
  matmul(a, b).backward(ones({3, 2}));
  EXPECT_EQ(a.grad().shape(), (Shape{3, 0}));
  EXPECT_EQ(b.grad().shape(), (Shape{0, 2}));
  Tensor c = zeros({2, 3, 0});  // batched a, unbatched b: the folded weight gradient
  c.requires_grad_();
  matmul(c, b).backward(ones({2, 3, 2}));
  EXPECT_EQ(c.grad().shape(), (Shape{2, 3, 0}));
}

TEST(Matmul, ErrorsNameShapesAndDtypes) {
  try {
    matmul(zeros({7, 13}), zeros({12, 5}));
    FAIL() << "expected an error";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("[matmul]"), std::string::npos) << msg;
    EXPECT_NE(msg.find("[7, 13]"), std::string::npos) << msg;
    EXPECT_NE(msg.find("[12, 5]"), std::string::npos) << msg;
  }
  EXPECT_THROW(matmul(zeros({3}), zeros({4})), Error);
  EXPECT_THROW(matmul(zeros({2, 3, 4}), zeros({5, 4, 6})), Error);  // batch 2 vs 5
  EXPECT_THROW(matmul(scalar_tensor(1.0), zeros({3})), Error);      // 0-dim
  try {
    matmul(zeros({2, 2}), zeros({2, 2}, kBFloat16));
    FAIL() << "expected an error";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("float32"), std::string::npos) << msg;
    EXPECT_NE(msg.find("bfloat16"), std::string::npos) << msg;
  }
  EXPECT_THROW(matmul(zeros({2, 2}, kInt64), zeros({2, 2}, kInt64)), Error);
  EXPECT_THROW(matmul(zeros({2, 2}, kFloat8_e4m3fn), zeros({2, 2}, kFloat8_e4m3fn)), Error);
}

auto mm = [](const std::vector<Tensor>& in) { return matmul(in[0], in[1]); };

TEST(Matmul, GradcheckF64) {
  const std::vector<std::pair<Shape, Shape>> shapes = {
      {{3, 4}, {4, 2}}, {{2, 1, 3, 4}, {5, 4, 2}}, {{4}, {4}},          {{4}, {4, 3}},
      {{2, 3, 4}, {4}}, {{3, 2, 4}, {4, 5}},       {{3, 4}, {2, 4, 2}}, {{1, 3}, {2, 3, 2}}};
  uint64_t seed = 20;
  for (const auto& [sa, sb] : shapes) {
    SCOPED_TRACE(shape_str(sa) + " @ " + shape_str(sb));
    expect_gradcheck(mm, {random_input(sa, seed), random_input(sb, seed + 1)});
    seed += 2;
  }
}

TEST(Matmul, GradientOnlyForInputsThatRequireIt) {
  Tensor a = random_input({3, 4}, 30);
  Tensor b = rnd({4, 2}, kFloat64, 31);
  matmul(a, b).backward(ones({3, 2}, kFloat64));
  EXPECT_TRUE(a.grad().defined());
  EXPECT_FALSE(b.grad().defined());
  // dA = 1 @ B^T: every row of dA holds B's row sums.
  const auto bv = b.to_vector<double>(), ga = a.grad().to_vector<double>();
  for (int64_t i = 0; i < 3; ++i)
    for (int64_t k = 0; k < 4; ++k) EXPECT_NEAR(ga[i * 4 + k], bv[k * 2] + bv[k * 2 + 1], 1e-15);
}

TEST(Matmul, MatchesF64InLowPrecision) {
  const std::vector<std::pair<Shape, Shape>> shapes = {
      {{7, 8}, {8, 5}}, {{2, 1, 3, 8}, {5, 8, 6}}, {{8}, {8, 3}}, {{4, 3, 8}, {8, 2}}, {{8}, {8}}};
  for (DType dt : {kFloat32, kFloat16, kBFloat16}) {
    const auto tol = testing::tolerance_for(dt);
    uint64_t seed = 40;
    for (const auto& [sa, sb] : shapes) {
      SCOPED_TRACE(std::string(dt.name()) + " " + shape_str(sa) + " @ " + shape_str(sb));
      expect_matches_f64(mm, {random_input(sa, seed), random_input(sb, seed + 1)}, dt, tol.atol,
                         tol.rtol);
      seed += 2;
    }
  }
}

TEST(Matmul, TransposedViewsGetCorrectGradients) {
  Tensor x = random_input({4, 3}, 50), y = random_input({2, 4}, 51);
  expect_gradcheck([](const std::vector<Tensor>& in) { return matmul(in[0].t(), in[1].t()); },
                   {x, y});
}

}  // namespace
}  // namespace mantissa
