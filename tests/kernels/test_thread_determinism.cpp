// Threaded kernels partition their work in a fixed way, so a result depends on the input only:
// the same with 1 and 2 OpenMP threads, and the same on every repeated run. Shapes are above
// kParallelGrain so the parallel paths actually run. Also checks the values of the kernels
// that were made parallel or vectorised (sum_to's column sums, softmax along a non-last dim,
// GELU's backward) against straightforward references.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <vector>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "mantissa/mantissa.h"
#include "support/test_util.h"

namespace mantissa {
namespace {

using namespace mantissa::testing;

// Runs fn with `threads` OpenMP threads and returns the values of every tensor it produced.
std::vector<std::vector<double>> run_with(int threads,
                                          const std::function<std::vector<Tensor>()>& fn) {
#ifdef _OPENMP
  const int before = omp_get_max_threads();
  omp_set_num_threads(threads);
#endif
  std::vector<std::vector<double>> out;
  for (const Tensor& t : fn()) out.push_back(vals(t));
#ifdef _OPENMP
  omp_set_num_threads(before);
#endif
  return out;
}

// Bit-identical for 1 and 2 threads, and for two runs at 2 threads.
void expect_thread_invariant(const std::function<std::vector<Tensor>()>& fn) {
  const auto one = run_with(1, fn);
  const auto two = run_with(2, fn);
  const auto again = run_with(2, fn);
  ASSERT_EQ(one.size(), two.size());
  for (size_t k = 0; k < one.size(); ++k) {
    ASSERT_EQ(one[k].size(), two[k].size());
    for (size_t i = 0; i < one[k].size(); ++i) {
      // NaN-free inputs: plain equality is bit equality here (no -0 vs 0 ambiguity matters).
      ASSERT_EQ(one[k][i], two[k][i]) << "output " << k << " element " << i;
      ASSERT_EQ(two[k][i], again[k][i]) << "output " << k << " element " << i;
    }
  }
}

// Gradients of sum(f(x) * r) with respect to x: f's backward with upstream gradient r.
std::vector<Tensor> forward_backward(const Tensor& x0, const std::function<Tensor(Tensor)>& f) {
  Tensor x = x0.detach().clone().requires_grad_();
  Tensor y = f(x);
  Generator g(7);
  Tensor r = uniform(y.shape(), -1, 1, y.dtype(), &g);
  y.backward(r);
  return {y.detach(), x.grad()};
}

TEST(ThreadDeterminism, SumToColumnSumsMatchSerialRowOrder) {
  for (DType dt : {kFloat32, kBFloat16}) {
    SCOPED_TRACE(dt.name());
    Generator g(3);
    Tensor grad = uniform({300, 1000}, -1, 1, kFloat32, &g).to(dt);
    expect_thread_invariant([&] { return std::vector<Tensor>{sum_to(grad, {1000})}; });
    // The reference: for each column, the rows added in order in fp32, rounded once.
    const auto gv = vals(grad);
    const auto out = vals(sum_to(grad, {1, 1000}));
    for (int64_t j = 0; j < 1000; ++j) {
      float acc = 0;
      for (int64_t i = 0; i < 300; ++i) acc += static_cast<float>(gv[i * 1000 + j]);
      const double want = vals(tensor<float>({acc}, {1}).to(dt))[0];
      ASSERT_EQ(out[j], want) << "column " << j;
    }
  }
}

TEST(ThreadDeterminism, SumToOverLeadingDimsOf3dAndBiasGradient) {
  Generator g(4);
  Tensor a = uniform({8, 64, 96}, -1, 1, kFloat32, &g);
  Tensor s = sum_to(a, {64, 96});
  const auto av = vals(a), sv = vals(s);
  for (int64_t j = 0; j < 64 * 96; j += 97) {
    double ref = 0;
    for (int64_t b = 0; b < 8; ++b) ref += av[b * 64 * 96 + j];
    EXPECT_NEAR(sv[j], ref, 1e-5);
  }
  // Broadcast add's backward reduces the bias gradient through sum_to.
  Tensor x = uniform({512, 128}, -1, 1, kFloat32, &g);
  Tensor bias = uniform({128}, -1, 1, kFloat32, &g);
  Tensor upstream = uniform({512, 128}, -1, 1, kFloat32, &g);
  expect_thread_invariant([&] {
    Tensor b = bias.detach().clone().requires_grad_();
    Tensor y = add(x, b);
    y.backward(upstream);
    return std::vector<Tensor>{b.grad()};
  });
}

// linear's bias gradient (row chunks summed in a fixed order) and layer norm's forward and
// three gradients, over more rows than one chunk.
TEST(ThreadDeterminism, LinearBiasGradientAndLayerNorm) {
  for (DType dt : {kFloat32, kBFloat16}) {
    SCOPED_TRACE(dt.name());
    Generator g(11);
    Tensor x = uniform({1100, 96}, -1, 1, kFloat32, &g).to(dt);
    Tensor w = uniform({200, 96}, -1, 1, kFloat32, &g).to(dt);
    Tensor bias = uniform({200}, -1, 1, kFloat32, &g).to(dt);
    Tensor up = uniform({1100, 200}, -1, 1, kFloat32, &g).to(dt);
    expect_thread_invariant([&] {
      Tensor b = bias.detach().clone().requires_grad_();
      nn::functional::linear(x, w, b).backward(up);
      return std::vector<Tensor>{b.grad()};
    });
    // The bias gradient is the column sum of the upstream gradient.
    Tensor b = bias.detach().clone().requires_grad_();
    nn::functional::linear(x, w, b).backward(up);
    const auto upv = vals(up), gb = vals(b.grad());
    for (int64_t j = 0; j < 200; j += 7) {
      double ref = 0;
      for (int64_t i = 0; i < 1100; ++i) ref += upv[i * 200 + j];
      EXPECT_NEAR(gb[j], ref, dt == kFloat32 ? 1e-3 : 0.02 * std::abs(ref) + 0.05);
    }
    Tensor lw = uniform({96}, -1, 1, kFloat32, &g).to(dt),
           lb = uniform({96}, -1, 1, kFloat32, &g).to(dt);
    Tensor lup = uniform({1100, 96}, -1, 1, kFloat32, &g).to(dt);
    expect_thread_invariant([&] {
      Tensor xi = x.detach().clone().requires_grad_(), wi = lw.detach().clone().requires_grad_(),
             bi = lb.detach().clone().requires_grad_();
      Tensor y = layer_norm(xi, {96}, wi, bi);
      y.backward(lup);
      return std::vector<Tensor>{y.detach(), xi.grad(), wi.grad(), bi.grad()};
    });
  }
}

TEST(ThreadDeterminism, SoftmaxAndLogSoftmaxBothDims) {
  Generator g(5);
  for (DType dt : {kFloat32, kBFloat16}) {
    Tensor x = uniform({64, 48, 32}, -4, 4, kFloat32, &g).to(dt);
    for (int64_t dim : {-1, 1, 0}) {
      SCOPED_TRACE(std::string(dt.name()) + " dim " + std::to_string(dim));
      expect_thread_invariant(
          [&] { return forward_backward(x, [dim](Tensor v) { return softmax(v, dim); }); });
      expect_thread_invariant(
          [&] { return forward_backward(x, [dim](Tensor v) { return log_softmax(v, dim); }); });
    }
  }
}

// The vectorised non-last-dim path agrees with the last-dim path on a transposed copy, forward
// and backward, to float rounding (they sum in different orders).
TEST(ThreadDeterminism, SoftmaxMiddleDimMatchesLastDimPath) {
  Generator g(6);
  Tensor x = uniform({16, 300, 40}, -5, 5, kFloat32, &g);
  Tensor xt = x.transpose(1, 2).contiguous();
  for (bool log : {false, true}) {
    auto f = [log](int64_t dim) {
      return [log, dim](Tensor v) { return log ? log_softmax(v, dim) : softmax(v, dim); };
    };
    const auto mid = forward_backward(x, f(1));
    Tensor r_t;  // the same upstream gradient, transposed
    {
      Tensor y = f(1)(x);
      Generator g2(7);
      r_t = uniform(y.shape(), -1, 1, kFloat32, &g2).transpose(1, 2).contiguous();
    }
    Tensor xl = xt.detach().clone().requires_grad_();
    Tensor yl = f(-1)(xl);
    yl.backward(r_t);
    const auto a = vals(mid[0]), b = vals(yl.detach().transpose(1, 2).contiguous());
    const auto ga = vals(mid[1]), gb = vals(xl.grad().transpose(1, 2).contiguous());
    for (size_t i = 0; i < a.size(); ++i) {
      ASSERT_NEAR(a[i], b[i], 1e-6 * (1 + std::abs(b[i]))) << "log " << log << " value " << i;
      ASSERT_NEAR(ga[i], gb[i], 2e-6 * (1 + std::abs(gb[i]))) << "log " << log << " grad " << i;
    }
  }
}

TEST(ThreadDeterminism, GeluBackwardBothFormsMatchF64AndAreThreadInvariant) {
  Generator g(8);
  Tensor x = uniform({256, 512}, -6, 6, kFloat32, &g);
  for (const char* form : {"none", "tanh"}) {
    SCOPED_TRACE(form);
    auto f = [form](Tensor v) { return gelu(v, form); };
    expect_thread_invariant([&] { return forward_backward(x, f); });
    const auto low = forward_backward(x, f);
    const auto ref = forward_backward(x.to(kFloat64), f);
    const auto gl = vals(low[1]), gr = vals(ref[1]);
    for (size_t i = 0; i < gl.size(); ++i)
      ASSERT_NEAR(gl[i], gr[i], 2e-6 * (1 + std::abs(gr[i]))) << "element " << i;
  }
  // Reference values: gelu'(x) = Phi(x) + x phi(x) at 0, 1, -2.
  Tensor p = tensor<float>({0.0f, 1.0f, -2.0f}, {3}).requires_grad_();
  gelu(p, "none").backward(ones({3}));
  expect_near_all(vals(p.grad()), {0.5, 1.0833154705876864, -0.0852318975819812}, 1e-6);
}

TEST(ThreadDeterminism, CrossEntropyForwardBackward) {
  Generator g(9);
  Tensor logits = uniform({512, 100}, -3, 3, kFloat32, &g);
  std::vector<int64_t> t(512);
  for (int64_t i = 0; i < 512; ++i) t[i] = (i * 37) % 100;
  Tensor target = tensor<int64_t>(t, {512});
  expect_thread_invariant([&] {
    Tensor x = logits.detach().clone().requires_grad_();
    Tensor loss = cross_entropy(x, target);
    loss.backward();
    return std::vector<Tensor>{loss.detach(), x.grad()};
  });
}

}  // namespace
}  // namespace mantissa

namespace mantissa {
namespace {

TEST(ThreadDeterminism, BatchNormAndPoolingOfACnnLayer) {
  // Batch norm's channel statistics, its chunked gradient sums and row-order passes, and the
  // 2x2 and general pools, in the dtypes of the CNN's precisions.
  for (DType dt : {kFloat32, kBFloat16}) {
    SCOPED_TRACE(dt.name());
    Generator g(10);
    const Tensor x = uniform({24, 8, 14, 14}, -2, 2, dt, &g);  // above kParallelGrain
    const Tensor w = uniform({8}, 0.5, 1.5, kFloat32, &g);
    const Tensor b = uniform({8}, -0.5, 0.5, kFloat32, &g);
    expect_thread_invariant([&] {
      Tensor wl = w.detach().clone().requires_grad_();
      Tensor rm = zeros({8}, kFloat32), rv = ones({8}, kFloat32);
      auto out = forward_backward(x, [&](Tensor v) { return batch_norm(v, rm, rv, wl, b, true); });
      out.push_back(wl.grad());
      out.push_back(rm);
      out.push_back(rv);
      return out;
    });
    expect_thread_invariant([&] {
      return forward_backward(x, [](Tensor v) { return max_pool2d(v, {2, 2}); });
    });
    expect_thread_invariant([&] {
      return forward_backward(x, [](Tensor v) { return max_pool2d(v, {3, 3}, {2, 2}, {1, 1}); });
    });
    expect_thread_invariant([&] {
      return forward_backward(x, [](Tensor v) { return avg_pool2d(v, {2, 2}); });
    });
  }
}

}  // namespace
}  // namespace mantissa
