// Autocast (docs/autocast.md): thread-local state and nesting, output dtypes per policy, casting
// rules, gradients of fp32 parameters, backward without autocast, and the weight-cast cache.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <functional>
#include <memory>
#include <set>
#include <stdexcept>
#include <thread>
#include <tuple>

#include "amp/autocast_dispatch.h"
#include "amp/cast_cache.h"
#include "mantissa/amp/autocast.h"
#include "mantissa/autograd/node.h"
#include "mantissa/core/cuda.h"
#include "mantissa/core/generator.h"
#include "mantissa/core/warning.h"
#include "mantissa/nn/functional.h"
#include "mantissa/nn/linear.h"
#include "mantissa/ops/elementwise.h"
#include "mantissa/ops/loss.h"
#include "mantissa/ops/matmul.h"
#include "mantissa/ops/reduce.h"
#include "mantissa/ops/shape_ops.h"
#include "mantissa/ops/softmax.h"
#include "mantissa/optim/sgd.h"
#include "support/test_util.h"

namespace mantissa {
namespace {

using namespace mantissa::testing;

using amp::autocast;
namespace F = nn::functional;

Tensor param(const Shape& s, uint64_t seed) {
  Tensor t = rnd(s, kFloat32, seed);
  t.requires_grad_(true);
  return t;
}

// An independent leaf with the same values.
Tensor leaf_copy(const Tensor& t) {
  Tensor c = t.detach().clone();
  c.requires_grad_(t.requires_grad());
  return c;
}

std::vector<float> values(const Tensor& t) { return t.detach().to(kFloat32).to_vector<float>(); }

// Same dtype (float32), shape and bit patterns.
bool bits_equal(const Tensor& a, const Tensor& b) {
  if (a.dtype() != kFloat32 || b.dtype() != kFloat32 || a.shape() != b.shape()) return false;
  const std::vector<float> x = a.detach().contiguous().to_vector<float>();
  const std::vector<float> y = b.detach().contiguous().to_vector<float>();
  for (size_t i = 0; i < x.size(); ++i)
    if (std::bit_cast<uint32_t>(x[i]) != std::bit_cast<uint32_t>(y[i])) return false;
  return true;
}

// Nodes named `name` reachable from the roots' grad_fns (each counted once).
int count_nodes(const std::vector<Tensor>& roots, const std::string& name) {
  std::set<autograd::Node*> seen;
  std::vector<autograd::Node*> stack;
  for (const Tensor& t : roots)
    if (t.grad_fn()) stack.push_back(t.grad_fn().get());
  int n = 0;
  while (!stack.empty()) {
    autograd::Node* node = stack.back();
    stack.pop_back();
    if (!seen.insert(node).second) continue;
    if (node->name() == name) ++n;
    for (const auto& next : node->next)
      if (next) stack.push_back(next.get());
  }
  return n;
}

// ---------------------------------------------------------------------------------------
// State and nesting
// ---------------------------------------------------------------------------------------

TEST(Autocast, DefaultsAreOffBf16CacheOn) {
  EXPECT_FALSE(amp::is_autocast_enabled());
  EXPECT_FALSE(amp::is_autocast_enabled(DeviceType::kCUDA));
  EXPECT_EQ(amp::get_autocast_dtype(), kBFloat16);
  EXPECT_EQ(amp::get_autocast_dtype(DeviceType::kCUDA), kFloat16);
  EXPECT_TRUE(amp::is_autocast_cache_enabled());
  EXPECT_EQ(amp::autocast_nesting(), 0);
  EXPECT_EQ(amp::autocast_cache_size(), 0u);
}

TEST(Autocast, NestedRegionsSaveAndRestoreState) {
  {
    autocast outer;
    EXPECT_TRUE(amp::is_autocast_enabled());
    EXPECT_EQ(amp::get_autocast_dtype(), kBFloat16);
    EXPECT_EQ(amp::autocast_nesting(), 1);
    {
      autocast fp16(DeviceType::kCPU, kFloat16, true, false);
      EXPECT_EQ(amp::get_autocast_dtype(), kFloat16);
      EXPECT_FALSE(amp::is_autocast_cache_enabled());
      EXPECT_EQ(amp::autocast_nesting(), 2);
      {
        autocast inherit;  // dtype = nullopt: the current dtype, not the bf16 default
        EXPECT_EQ(inherit.dtype(), kFloat16);
        EXPECT_EQ(amp::get_autocast_dtype(), kFloat16);
        EXPECT_FALSE(amp::is_autocast_cache_enabled());  // inherited too
        EXPECT_EQ(amp::autocast_nesting(), 3);
      }
      EXPECT_EQ(amp::get_autocast_dtype(), kFloat16);
      {
        autocast off(DeviceType::kCPU, std::nullopt, false);
        EXPECT_FALSE(amp::is_autocast_enabled());
        EXPECT_EQ(amp::autocast_nesting(), 3);  // a disabled region still counts
      }
      EXPECT_TRUE(amp::is_autocast_enabled());
    }
    EXPECT_EQ(amp::get_autocast_dtype(), kBFloat16);
    EXPECT_TRUE(amp::is_autocast_cache_enabled());
  }
  EXPECT_FALSE(amp::is_autocast_enabled());
  EXPECT_EQ(amp::autocast_nesting(), 0);
}

// Regions held by unique_ptr and closed outermost first: the thread ends as it began (autocast
// off, bf16, cache on), with a warning; closing the outer one restored its saved state at once,
// and the inner one then restored the outer's settings, leaving fp16 autocast on with no region
// open.
TEST(Autocast, RegionsClosedOutOfOrderRestoreTheStateBeforeThem) {
  forget_warnings_said_once();
  WarningRecorder warnings;
  auto outer = std::make_unique<autocast>(DeviceType::kCPU, kFloat16, true, false);
  auto middle = std::make_unique<autocast>(DeviceType::kCPU, kBFloat16, true, true);
  auto inner = std::make_unique<autocast>(DeviceType::kCPU, std::nullopt, false);
  outer.reset();
  // The regions still open keep their settings; one level fewer.
  EXPECT_FALSE(amp::is_autocast_enabled());
  EXPECT_EQ(amp::get_autocast_dtype(), kBFloat16);
  EXPECT_EQ(amp::autocast_nesting(), 2);
  inner.reset();  // in order again: back to middle's settings
  EXPECT_TRUE(amp::is_autocast_enabled());
  EXPECT_EQ(amp::get_autocast_dtype(), kBFloat16);
  EXPECT_TRUE(amp::is_autocast_cache_enabled());
  middle.reset();
  EXPECT_FALSE(amp::is_autocast_enabled());
  EXPECT_EQ(amp::get_autocast_dtype(), kBFloat16);
  EXPECT_TRUE(amp::is_autocast_cache_enabled());
  EXPECT_EQ(amp::autocast_nesting(), 0);
  ASSERT_EQ(warnings.messages().size(), 1u);
  EXPECT_NE(warnings.messages()[0].find("autocast regions were closed out of order"),
            std::string::npos);

  // Two regions, fp16 outside bf16, closed outer first: autocast off afterwards.
  auto a = std::make_unique<autocast>(DeviceType::kCPU, kFloat16);
  auto b = std::make_unique<autocast>(DeviceType::kCPU, kBFloat16);
  a.reset();
  b.reset();
  EXPECT_FALSE(amp::is_autocast_enabled());
  EXPECT_EQ(amp::get_autocast_dtype(), kBFloat16);
  EXPECT_EQ(amp::autocast_nesting(), 0);
}

TEST(Autocast, ExceptionLeavingTheRegionRestoresStateAndClearsCache) {
  Tensor w = param({4, 3}, 1);
  Tensor x = rnd({2, 3}, kFloat32, 2);
  try {
    autocast ac(DeviceType::kCPU, kFloat16, true, true);
    Tensor y = F::linear(x, w);
    EXPECT_EQ(amp::autocast_cache_size(), 1u);
    throw std::runtime_error("boom");
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "boom");  // not swallowed
  }
  EXPECT_FALSE(amp::is_autocast_enabled());
  EXPECT_EQ(amp::get_autocast_dtype(), kBFloat16);
  EXPECT_EQ(amp::autocast_nesting(), 0);
  EXPECT_EQ(amp::autocast_cache_size(), 0u);
}

TEST(Autocast, UnsupportedCpuDtypeThrowsAndLeavesStateAlone) {
  for (DType dt : {kFloat32, kFloat64, kFloat8_e4m3fn, kInt32}) {
    try {
      autocast ac(DeviceType::kCPU, dt);
      FAIL() << "no error for " << dt.name();
    } catch (const Error& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find("[autocast]"), std::string::npos) << msg;
      EXPECT_NE(msg.find("bfloat16"), std::string::npos) << msg;
      EXPECT_NE(msg.find("float16"), std::string::npos) << msg;
      EXPECT_NE(msg.find(std::string(dt.name())), std::string::npos) << msg;
    }
    EXPECT_FALSE(amp::is_autocast_enabled());
    EXPECT_EQ(amp::autocast_nesting(), 0);
  }
  EXPECT_THROW(amp::set_autocast_dtype(DeviceType::kCPU, kFloat32), Error);
  // "AMP off" spelled with fp32: accepted, and the stored dtype is not replaced.
  {
    autocast off(DeviceType::kCPU, kFloat32, false);
    EXPECT_FALSE(amp::is_autocast_enabled());
    EXPECT_EQ(amp::get_autocast_dtype(), kBFloat16);
    autocast nested;
    EXPECT_EQ(nested.dtype(), kBFloat16);
  }
}

TEST(Autocast, CudaRegionIsDisabledWithoutAGpu) {
  // With a GPU the region is enabled (tests/cuda/test_cuda_amp.cpp); CPU ops stay uncast.
  autocast ac(DeviceType::kCUDA);
  EXPECT_EQ(ac.enabled(), cuda::is_available());
  EXPECT_EQ(amp::is_autocast_enabled(DeviceType::kCUDA), cuda::is_available());
  EXPECT_FALSE(amp::is_autocast_enabled(DeviceType::kCPU));
  EXPECT_EQ(amp::autocast_nesting(), 1);
  EXPECT_EQ(matmul(rnd({2, 2}, kFloat32, 1), rnd({2, 2}, kFloat32, 2)).dtype(), kFloat32);
}

TEST(Autocast, SettersAreThreadLocalState) {
  amp::set_autocast_enabled(DeviceType::kCPU, true);
  amp::set_autocast_dtype(DeviceType::kCPU, kFloat16);
  EXPECT_EQ(matmul(rnd({2, 2}, kFloat32, 1), rnd({2, 2}, kFloat32, 2)).dtype(), kFloat16);
  bool other_thread_enabled = true;
  std::thread([&] { other_thread_enabled = amp::is_autocast_enabled(); }).join();
  EXPECT_FALSE(other_thread_enabled);  // new threads start with autocast off
  amp::set_autocast_enabled(DeviceType::kCPU, false);
  amp::set_autocast_dtype(DeviceType::kCPU, kBFloat16);
  EXPECT_EQ(matmul(rnd({2, 2}, kFloat32, 1), rnd({2, 2}, kFloat32, 2)).dtype(), kFloat32);
}

// ---------------------------------------------------------------------------------------
// Output dtypes and casting rules
// ---------------------------------------------------------------------------------------

TEST(Autocast, LowerPrecisionOpsRunInBf16AndMatchAManualCast) {
  const Tensor a = rnd({3, 5}, kFloat32, 1), b = rnd({5, 4}, kFloat32, 2);
  const Tensor w = rnd({4, 5}, kFloat32, 3), bias = rnd({4}, kFloat32, 4);
  Tensor mm, lin;
  {
    autocast ac;
    mm = matmul(a, b);
    lin = F::linear(a, w, bias);
  }
  EXPECT_EQ(mm.dtype(), kBFloat16);
  EXPECT_EQ(lin.dtype(), kBFloat16);
  EXPECT_EQ(values(mm), values(matmul(a.to(kBFloat16), b.to(kBFloat16))));
  EXPECT_EQ(values(lin), values(F::linear(a.to(kBFloat16), w.to(kBFloat16), bias.to(kBFloat16))));
  // Against f64 within bf16 tolerance (inputs rounded to bf16, fp32 accumulation).
  const auto ref = matmul(a.to(kFloat64), b.to(kFloat64)).to_vector<double>();
  const auto got = values(mm);
  for (size_t i = 0; i < ref.size(); ++i) EXPECT_NEAR(got[i], ref[i], 3e-2) << i;
}

TEST(Autocast, Fp32OpsUpcastLowPrecisionInputs) {
  const Tensor x = rnd({4, 6}, kBFloat16, 5);
  const Tensor target = tensor<int64_t>({0, 5, 2, 1});
  autocast ac;
  EXPECT_EQ(softmax(x, 1).dtype(), kFloat32);
  EXPECT_EQ(log_softmax(x, 1).dtype(), kFloat32);
  EXPECT_EQ(exp(x).dtype(), kFloat32);
  EXPECT_EQ(log(abs(x)).dtype(), kFloat32);
  EXPECT_EQ(sum(x).dtype(), kFloat32);
  EXPECT_EQ(pow(x, 2.0).dtype(), kFloat32);
  EXPECT_EQ((1.0 / x).dtype(), kFloat32);  // rdiv
  const Tensor ce = cross_entropy(x, target);
  EXPECT_EQ(ce.dtype(), kFloat32);
  // Exactly the fp32 computation on the widened inputs.
  EXPECT_EQ(ce.item(), cross_entropy(x.to(kFloat32), target).item());
  EXPECT_EQ(nll_loss(log_softmax(x, 1), target).dtype(), kFloat32);
  EXPECT_EQ(mse_loss(x, rnd({4, 6}, kFloat32, 6)).dtype(), kFloat32);
  // fp32 inputs are left as they are.
  const Tensor f = rnd({4, 6}, kFloat32, 7);
  EXPECT_EQ(softmax(f, 1).dtype(), kFloat32);
}

TEST(Autocast, PromoteOpsMeetInTheWidestInput) {
  const Tensor lo = rnd({2, 3}, kBFloat16, 1), hi = rnd({2, 3}, kFloat32, 2);
  autocast ac;
  EXPECT_EQ(cat({lo, hi}).dtype(), kFloat32);
  EXPECT_EQ(cat({lo, lo}).dtype(), kBFloat16);
  EXPECT_EQ(stack({lo, hi}).dtype(), kFloat32);
  EXPECT_EQ(stack({lo, lo}).dtype(), kBFloat16);
  const Tensor c = gt(hi, 0.0);
  EXPECT_EQ(where(c, lo, hi).dtype(), kFloat32);
  EXPECT_EQ(where(c, lo, lo).dtype(), kBFloat16);
  EXPECT_EQ(values(cat({lo, hi})), values(cat({lo.to(kFloat32), hi})));
}

TEST(Autocast, UnlistedOpsKeepTheirInputDtypes) {
  const Tensor lo = rnd({2, 3}, kBFloat16, 1), hi = rnd({2, 3}, kFloat32, 2);
  autocast ac;
  EXPECT_EQ(relu(lo).dtype(), kBFloat16);
  EXPECT_EQ(relu(hi).dtype(), kFloat32);
  EXPECT_EQ(mean(lo).dtype(), kBFloat16);
  EXPECT_EQ(add(lo, hi).dtype(), kFloat32);  // native promotion, as PyTorch's add
  EXPECT_EQ(mul(lo, lo).dtype(), kBFloat16);
}

TEST(Autocast, Float64AndIntegerTensorsAreNeverCast) {
  const Tensor d = rnd({3, 3}, kFloat64, 1);
  const Tensor i = tensor<int64_t>({1, 2, 3, 4}, {2, 2});
  const Tensor lo = rnd({3, 3}, kBFloat16, 2);
  autocast ac;
  EXPECT_EQ(matmul(d, d).dtype(), kFloat64);
  EXPECT_EQ(softmax(d, 0).dtype(), kFloat64);
  EXPECT_EQ(sum(i).dtype(), kInt64);
  EXPECT_EQ(sum(i).item(), 10.0);
  EXPECT_EQ(add(i, i).dtype(), kInt64);
  // f64 takes no part in promotion: the bf16 input stays bf16, cat promotes natively to f64.
  EXPECT_EQ(cat({d, lo}).dtype(), kFloat64);
  EXPECT_EQ(index_select(lo, 0, tensor<int64_t>({2, 0})).dtype(), kBFloat16);
  // Integer operands are not turned into floats: matmul still rejects them.
  EXPECT_THROW(matmul(i, i), Error);
  // Mixed f64 x f32 is not "fixed" either: the f32 side goes to bf16, the dtypes still differ.
  EXPECT_THROW(matmul(d, rnd({3, 3}, kFloat32, 3)), Error);
}

TEST(Autocast, Float16OnCpu) {
  const Tensor a = rnd({3, 4}, kFloat32, 1), b = rnd({4, 2}, kFloat32, 2);
  const Tensor bf = rnd({3, 4}, kBFloat16, 3);
  autocast ac(DeviceType::kCPU, kFloat16);
  const Tensor y = matmul(a, b);
  EXPECT_EQ(y.dtype(), kFloat16);
  EXPECT_EQ(values(y), values(matmul(a.to(kFloat16), b.to(kFloat16))));
  EXPECT_EQ(matmul(bf, b).dtype(), kFloat16);  // a bf16 input is cast to fp16 too
  EXPECT_EQ(softmax(y, 1).dtype(), kFloat32);
  EXPECT_EQ(cat({y, a}, 1).dtype(), kFloat32);
  // Promote mixes only fp32 and the autocast dtype (PyTorch's prioritize error).
  try {
    cat({y.detach(), bf}, 1);
    FAIL() << "no error";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("cat"), std::string::npos) << msg;
    EXPECT_NE(msg.find("bfloat16"), std::string::npos) << msg;
  }
}

TEST(Autocast, NestedDisabledRegionRunsInFp32) {
  const Tensor a = rnd({2, 3}, kFloat32, 1), b = rnd({3, 2}, kFloat32, 2);
  autocast ac;
  const Tensor low = matmul(a, b);
  EXPECT_EQ(low.dtype(), kBFloat16);
  {
    autocast off(DeviceType::kCPU, std::nullopt, false);
    const Tensor full = matmul(a, b);
    EXPECT_EQ(full.dtype(), kFloat32);
    EXPECT_EQ(values(full), values(matmul(a, b).detach()));
    // Tensors made low precision outside stay so: the user casts back with .to().
    EXPECT_EQ(softmax(low, 1).dtype(), kBFloat16);
  }
  EXPECT_EQ(matmul(a, b).dtype(), kBFloat16);
}

// ---------------------------------------------------------------------------------------
// Gradients and backward
// ---------------------------------------------------------------------------------------

TEST(Autocast, Fp32ParameterGradientsAreFp32AndMatchManualCasts) {
  const Tensor x = rnd({6, 5}, kFloat32, 1);
  const Tensor target = tensor<int64_t>({0, 3, 1, 2, 3, 0});
  Tensor w = param({4, 5}, 2), b = param({4}, 3);
  Tensor loss;
  {
    autocast ac;
    Tensor h = F::linear(x, w, b);
    EXPECT_EQ(h.dtype(), kBFloat16);
    loss = cross_entropy(h, target);
  }
  EXPECT_EQ(loss.dtype(), kFloat32);
  loss.backward();
  ASSERT_TRUE(w.grad().defined() && b.grad().defined());
  EXPECT_EQ(w.grad().dtype(), kFloat32);
  EXPECT_EQ(b.grad().dtype(), kFloat32);

  // The same graph written by hand: identical numbers.
  Tensor w2 = leaf_copy(w), b2 = leaf_copy(b);
  Tensor h2 = F::linear(x.to(kBFloat16), w2.to(kBFloat16), b2.to(kBFloat16));
  Tensor loss2 = cross_entropy(h2.to(kFloat32), target);
  loss2.backward();
  EXPECT_EQ(loss.item(), loss2.item());
  EXPECT_EQ(values(w.grad()), values(w2.grad()));
  EXPECT_EQ(values(b.grad()), values(b2.grad()));

  // And within bf16 tolerance of the f64 computation.
  Tensor w3 = w.detach().to(kFloat64), b3 = b.detach().to(kFloat64);
  w3.requires_grad_(true);
  b3.requires_grad_(true);
  Tensor loss3 = cross_entropy(F::linear(x.to(kFloat64), w3, b3), target);
  loss3.backward();
  EXPECT_NEAR(loss.item(), loss3.item(), 2e-2);
  const auto g = values(w.grad());
  const auto g3 = w3.grad().to_vector<double>();
  for (size_t i = 0; i < g.size(); ++i) EXPECT_NEAR(g[i], g3[i], 2e-2) << i;
}

TEST(Autocast, APermutedTensorIsCastInItsStorageOrderAndKeepsItsStrides) {
  // A tied head's weight.t(): cast without a strided copy, strides as the source's.
  Tensor w = param({6, 5}, 7);
  const Tensor wt = amp::detail::cast_tensor(w.t(), kBFloat16, DeviceType::kCPU);
  EXPECT_EQ(wt.dtype(), kBFloat16);
  EXPECT_EQ(wt.shape(), (Shape{5, 6}));
  EXPECT_EQ(wt.strides(), w.t().strides());
  EXPECT_EQ(values(wt), values(w.to(kBFloat16).t()));
  // A 3-D permutation too; a strided slice (not a permutation of a contiguous tensor) is
  // copied contiguous first.
  const Tensor x = rnd({2, 3, 4}, kFloat32, 8);
  const Tensor xp = amp::detail::cast_tensor(x.permute({2, 0, 1}), kBFloat16, DeviceType::kCPU);
  EXPECT_EQ(xp.strides(), x.permute({2, 0, 1}).strides());
  EXPECT_EQ(values(xp), values(x.to(kBFloat16).permute({2, 0, 1})));
  const Tensor every_other = x.slice(2, 0, 4, 2);
  const Tensor xs = amp::detail::cast_tensor(every_other, kBFloat16, DeviceType::kCPU);
  EXPECT_TRUE(xs.is_contiguous());
  EXPECT_EQ(values(xs), values(every_other.to(kBFloat16)));

  // Under autocast the product and the gradient equal the hand-written casts, bit for bit.
  const Tensor h = rnd({3, 5}, kFloat32, 9);
  Tensor out;
  {
    autocast ac;
    out = matmul(h, w.t());
  }
  Tensor w2 = leaf_copy(w);
  const Tensor out2 = matmul(h.to(kBFloat16), w2.to(kBFloat16).t());
  EXPECT_EQ(values(out), values(out2));
  sum(out.to(kFloat32)).backward();
  sum(out2.to(kFloat32)).backward();
  EXPECT_EQ(w.grad().dtype(), kFloat32);
  EXPECT_EQ(values(w.grad()), values(w2.grad()));
}

TEST(Autocast, BackwardNeverAppliesAutocast) {
  // A node whose backward calls matmul (lower precision) and softmax (fp32) on fp32 and bf16
  // gradients: run inside a region, both keep the dtypes they are given.
  Tensor x = param({2, 2}, 1);
  DType seen_mm = kFloat64, seen_softmax = kFloat64;
  Tensor y = autograd::record(x.detach().clone(), {x}, "Probe", [&](const Tensor& g) {
    seen_mm = matmul(g, g).dtype();
    seen_softmax = softmax(g.to(kBFloat16), 0).dtype();
    return std::vector<Tensor>{g};
  });
  {
    autocast ac;
    y.backward(ones({2, 2}));
    EXPECT_TRUE(amp::is_autocast_enabled());  // restored after backward
  }
  EXPECT_EQ(seen_mm, kFloat32);
  EXPECT_EQ(seen_softmax, kBFloat16);

  // A whole training graph: backward inside or outside the region gives the same bits.
  const Tensor in = rnd({5, 4}, kFloat32, 2);
  Tensor w1 = param({3, 4}, 3), w2 = leaf_copy(w1);
  auto forward = [&](const Tensor& w) {
    return sum(softmax(F::linear(in, w), 1) * rnd({5, 3}, kFloat32, 4));
  };
  {
    autocast ac;
    forward(w1).backward();
  }
  Tensor l2;
  {
    autocast ac;
    l2 = forward(w2);
  }
  l2.backward();
  EXPECT_EQ(w1.grad().dtype(), kFloat32);
  EXPECT_EQ(values(w1.grad()), values(w2.grad()));
}

// ---------------------------------------------------------------------------------------
// The weight-cast cache
// ---------------------------------------------------------------------------------------

TEST(AutocastCache, AWeightUsedTwiceIsCastOnce) {
  Tensor w = param({4, 3}, 1);
  const Tensor x1 = rnd({2, 3}, kFloat32, 2), x2 = rnd({5, 3}, kFloat32, 3);
  Tensor y1, y2;
  {
    autocast ac;
    y1 = F::linear(x1, w);
    y2 = F::linear(x2, w);
    EXPECT_EQ(amp::autocast_cache_size(), 1u);  // the weight; x1, x2 need no grad
    // Both ops read the same cast node.
    EXPECT_EQ(y1.grad_fn()->next[1].get(), y2.grad_fn()->next[1].get());
    EXPECT_EQ(count_nodes({y1, y2}, "ToCopyBackward"), 1);
  }
  EXPECT_EQ(amp::autocast_cache_size(), 0u);  // cleared at the outermost exit
  {
    autocast ac(DeviceType::kCPU, std::nullopt, true, /*cache_enabled=*/false);
    Tensor z = F::linear(x1, w) + F::linear(x1, w);
    EXPECT_EQ(amp::autocast_cache_size(), 0u);
    EXPECT_EQ(count_nodes({z}, "ToCopyBackward"), 2);
  }
  // The gradient through the shared copy is the sum over both uses, in fp32.
  sum(y1).backward();
  sum(y2).backward();  // a second graph through the same cached cast node
  Tensor wm = leaf_copy(w);
  sum(F::linear(x1.to(kBFloat16), wm.to(kBFloat16))).backward();
  sum(F::linear(x2.to(kBFloat16), wm.to(kBFloat16))).backward();
  EXPECT_EQ(w.grad().dtype(), kFloat32);
  EXPECT_EQ(values(w.grad()), values(wm.grad()));
}

// Linear's weight gradient goes to the cached cast's node, which widens it to fp32: it comes
// widened from the GEMM (rounded to bf16/f16 in the epilogue on the AVX2 path, docs/autocast.md)
// with the bits of the bf16/f16 gradient widened, alone and summed with a second use of the weight
// (in bf16/f16, as without widening). Shapes large enough for the native GEMM at the AVX2 level,
// one of them tall enough for its mirrored product.
TEST(AutocastCache, WeightGradientsComeWidenedWithTheBitsOfTheNarrowGradient) {
  for (const DType dt : {kBFloat16, kFloat16}) {
    for (const auto [out, in, rows] :
         {std::tuple<int64_t, int64_t, int64_t>{70, 300, 260}, {200, 48, 300}}) {
      const std::string where = fmt::format("{} out {} in {} rows {}", dt.name(), out, in, rows);
      Tensor w = param({out, in}, 11);
      const Tensor x1 = rnd({rows, in}, kFloat32, 12), x2 = rnd({rows / 2, in}, kFloat32, 13);
      const Tensor r1 = rnd({rows, out}, kFloat32, 14), r2 = rnd({rows / 2, out}, kFloat32, 15);
      Tensor alone, twice;
      {
        autocast ac(DeviceType::kCPU, dt);
        alone = sum(F::linear(x1, w).to(kFloat32) * r1);
      }
      alone.backward();
      const Tensor grad_alone = w.grad().clone();
      w.set_grad(Tensor());
      {
        autocast ac(DeviceType::kCPU, dt);
        twice = sum(F::linear(x1, w).to(kFloat32) * r1) + sum(F::linear(x2, w).to(kFloat32) * r2);
        EXPECT_EQ(count_nodes({twice}, "ToCopyBackward"), 3) << where;  // w's, y1's, y2's
      }
      twice.backward();

      // The gradient of the bf16/f16 copy, computed without autocast, widened at the end.
      Tensor want_alone, want_twice;
      {
        NoGradGuard no_grad;
        const Tensor d1 = matmul(r1.to(dt).t(), x1.to(dt)), d2 = matmul(r2.to(dt).t(), x2.to(dt));
        want_alone = d1.to(kFloat32);
        want_twice = (d1 + d2).to(kFloat32);
      }
      ASSERT_EQ(grad_alone.dtype(), kFloat32) << where;
      EXPECT_TRUE(bits_equal(grad_alone, want_alone)) << where;
      EXPECT_TRUE(bits_equal(w.grad(), want_twice)) << where;
    }
  }
}

// An fp32 activation cast by autocast (a non-leaf: the cast Tensor::to records, not the cache)
// also takes linear's input gradient widened, with the bits of the bf16/f16 gradient widened.
TEST(AutocastCache, ActivationGradientsComeWidenedWithTheBitsOfTheNarrowGradient) {
  // The last case is a narrow product on AVX2 (12 columns: dot products along k, summed in
  // another order than the tiles), with enough outputs and depth that a different order would
  // change some bf16 roundings.
  for (const auto [dt, rows, in, out] :
       {std::tuple<DType, int64_t, int64_t, int64_t>{kBFloat16, 260, 72, 300},
        {kFloat16, 260, 72, 300},
        {kBFloat16, 2048, 12, 2048}}) {
    Tensor x = param({rows, in}, 31), w = param({out, in}, 32);
    const Tensor r = rnd({rows, out}, kFloat32, 33);
    Tensor loss;
    {
      autocast ac(DeviceType::kCPU, dt);
      loss = sum(F::linear(x * 2.0, w).to(kFloat32) * r);
    }
    loss.backward();
    Tensor want;
    {
      NoGradGuard no_grad;
      want = matmul(r.to(dt), w.detach().to(dt)).to(kFloat32) * 2.0;
    }
    EXPECT_TRUE(bits_equal(x.grad(), want)) << dt.name();
  }
}

// The engine offers a widened gradient only for an input whose consumer takes one: the cached
// weight cast and a float32 -> bf16 cast do, a float64 -> bf16 one does not (its gradient is
// conformed to bf16, then widened by it to float64).
TEST(AutocastCache, OnlyCastsFromFloat32TakeAWidenedGradient) {
  Tensor w = param({3, 4}, 21);
  Tensor x = rnd({3, 4}, kFloat64, 22);
  x.requires_grad_(true);
  Tensor wc;
  {
    autocast ac;
    wc = amp::detail::cached_cast(w, kBFloat16);
  }
  EXPECT_TRUE(wc.grad_fn()->takes_widened_gradient());
  EXPECT_TRUE((w * 1.0).to(kBFloat16).grad_fn()->takes_widened_gradient());
  EXPECT_FALSE((w * 1.0).to(kFloat64).grad_fn()->takes_widened_gradient());
  const Tensor xc = x.to(kBFloat16);
  EXPECT_FALSE(xc.grad_fn()->takes_widened_gradient());
  bool offered_x = true, offered_w = false;
  const Tensor widened = rnd({3, 4}, kFloat32, 23).to(kBFloat16).to(kFloat32);
  const Tensor unround = rnd({3, 4}, kFloat32, 24);
  Tensor out = autograd::record((wc.detach() * xc.detach()), {xc, wc}, "Probe", [&](const Tensor&) {
    offered_x = autograd::widened_gradient_wanted(0);
    offered_w = autograd::widened_gradient_wanted(1);
    return std::vector<Tensor>{unround, widened};
  });
  sum(out.to(kFloat32)).backward();
  EXPECT_FALSE(offered_x);
  EXPECT_TRUE(offered_w);
  EXPECT_TRUE(bits_equal(w.grad(), widened));
  // x's fp32 gradient was conformed to bf16 before its cast node widened it to float64.
  ASSERT_EQ(x.grad().dtype(), kFloat64);
  EXPECT_EQ(x.grad().to_vector<double>(), unround.to(kBFloat16).to(kFloat64).to_vector<double>());
  EXPECT_FALSE(autograd::widened_gradient_wanted(1));  // outside any backward function
}

TEST(AutocastCache, OnlyGradRequiringFp32LeavesAreCached) {
  Tensor w = param({3, 3}, 1);
  const Tensor frozen = rnd({3, 3}, kFloat32, 2);  // no grad
  Tensor w64 = rnd({3, 3}, kFloat64, 3);
  w64.requires_grad_(true);
  autocast ac;
  const Tensor activation = matmul(w, w);  // non-leaf (bf16 result)
  EXPECT_EQ(amp::autocast_cache_size(), 1u);
  matmul(frozen, frozen);
  matmul(w64, w64);
  matmul(activation, activation);
  EXPECT_EQ(amp::autocast_cache_size(), 1u);
  // Up-casts (fp32 policy) are never cached.
  Tensor wb = rnd({3, 3}, kBFloat16, 4);
  wb.requires_grad_(true);
  softmax(wb, 0);
  EXPECT_EQ(amp::autocast_cache_size(), 1u);
  amp::clear_autocast_cache();
  EXPECT_EQ(amp::autocast_cache_size(), 0u);
}

TEST(AutocastCache, NothingIsCachedUnderNoGrad) {
  Tensor w = param({4, 3}, 1);
  const Tensor x = rnd({2, 3}, kFloat32, 2);
  autocast ac;
  {
    NoGradGuard no_grad;
    Tensor y = F::linear(x, w);
    EXPECT_EQ(y.dtype(), kBFloat16);
    EXPECT_FALSE(y.requires_grad());
    EXPECT_EQ(amp::autocast_cache_size(), 0u);
  }
  // The first grad-enabled use caches a copy that carries history (PyTorch 2.11 semantics).
  Tensor y = F::linear(x, w);
  EXPECT_EQ(amp::autocast_cache_size(), 1u);
  sum(y).backward();
  ASSERT_TRUE(w.grad().defined());
  EXPECT_EQ(w.grad().dtype(), kFloat32);
}

TEST(AutocastCache, NewWeightsAreUsedAfterAnOptimizerStep) {
  Tensor w = param({4, 3}, 1);
  const Tensor x = rnd({2, 3}, kFloat32, 2);
  optim::SGD opt({w}, 0.5);
  auto manual = [&] { return values(F::linear(x.to(kBFloat16), w.detach().to(kBFloat16))); };

  // The usual pattern: autocast around forward and loss only.
  for (int step = 0; step < 2; ++step) {
    Tensor y;
    {
      autocast ac;
      y = F::linear(x, w);
      EXPECT_EQ(values(y), manual());
    }
    opt.zero_grad();
    sum(y).backward();
    opt.step();
  }
  // Everything inside one region: backward through the cached copy retires it, so the next
  // forward after the step casts the new values.
  autocast ac;
  for (int step = 0; step < 3; ++step) {
    Tensor y = F::linear(x, w);
    EXPECT_EQ(values(y), manual()) << "step " << step;
    opt.zero_grad();
    sum(y).backward();
    opt.step();
  }
}

TEST(AutocastCache, SwappedStorageIsDetected) {
  nn::Linear lin(3, 2, /*with_bias=*/false);
  const Tensor x = rnd({2, 3}, kFloat32, 1);
  autocast ac;
  Tensor y1 = lin.forward(x);
  // Module::to keeps the TensorImpl but replaces its storage.
  lin.to(kFloat64);
  {
    NoGradGuard no_grad;
    lin.weight.fill_(0.25);
  }
  lin.to(kFloat32);
  Tensor y2 = lin.forward(x);
  EXPECT_NE(y1.grad_fn()->next[1].get(), y2.grad_fn()->next[1].get());
  for (float v : values(y2)) EXPECT_NE(v, 0.0f);
  const auto xs = values(x);
  const auto out = values(y2);
  for (int r = 0; r < 2; ++r) {
    const double expect = 0.25 * (double(BFloat16(xs[r * 3])) + double(BFloat16(xs[r * 3 + 1])) +
                                  double(BFloat16(xs[r * 3 + 2])));
    EXPECT_NEAR(out[r * 2], expect, 1e-2);
    EXPECT_EQ(out[r * 2], out[r * 2 + 1]);
  }
}

TEST(AutocastCache, InPlaceWriteWithoutBackwardIsDetected) {
  // No backward between the two forwards: only the storage's version can tell the cache
  // that the weight changed.
  nn::Linear lin(3, 2, /*with_bias=*/false);
  const Tensor x = ones({1, 3});
  autocast ac;
  Tensor y1 = lin.forward(x);
  {
    NoGradGuard no_grad;
    lin.weight.fill_(0.5);
  }
  Tensor y2 = lin.forward(x);
  EXPECT_EQ(values(y2), (std::vector<float>{1.5f, 1.5f}));
  EXPECT_NE(values(y1), values(y2));
}

TEST(AutocastCache, NestedExitKeepsTheCacheOutermostClears) {
  Tensor w = param({3, 3}, 1);
  {
    autocast outer;
    matmul(w, w);
    EXPECT_EQ(amp::autocast_cache_size(), 1u);
    {
      autocast inner(DeviceType::kCPU, std::nullopt, false);
      matmul(w, w);  // fp32, no cast
    }
    EXPECT_EQ(amp::autocast_cache_size(), 1u);
    { autocast inner; }
    EXPECT_EQ(amp::autocast_cache_size(), 1u);
  }
  EXPECT_EQ(amp::autocast_cache_size(), 0u);
}

}  // namespace
}  // namespace mantissa
