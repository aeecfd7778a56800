// Saved-tensor version checks (autograd::record with a saved list, src/core/autograd/node.cpp): an
// op whose backward reads a tensor (an input or its own output) refuses to run once that tensor was
// written in place after the forward, as PyTorch does, instead of computing a gradient from the
// new values. A tensor the backward does not read may be written freely.
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "mantissa/mantissa.h"
#include "mantissa/ops/attention.h"
#include "mantissa/ops/embedding.h"
#include "mantissa/ops/layer_norm.h"
#include "mantissa/quant/linear8bit.h"
#include "support/test_util.h"

namespace mantissa {
namespace {

using testing::error_of;
using testing::expect_error;
using testing::expect_gradcheck;
using testing::random_input;
using testing::vals;

constexpr int kOutput = -1;  // SavedCase::victim: the op's output rather than an input

struct SavedCase {
  const char* label;
  // The backward node the refusal names; "" where the backward reads none of the tensors the
  // caller can write (the victim may then be written and the gradient must not change).
  const char* node;
  std::function<std::vector<Tensor>()> inputs;  // fresh leaves (f64 where they need grad)
  testing::OpFn op;
  int victim;  // which input is written in place after the forward, or kOutput
};

Tensor f64_leaf(const Shape& s, uint64_t seed, double lo = -1.0, double hi = 1.0) {
  return random_input(s, seed, lo, hi);
}
Tensor f64_const(const Shape& s, uint64_t seed, double lo = -1.0, double hi = 1.0) {
  return random_input(s, seed, lo, hi).detach();
}

// Changes every element of t in place (through copy_, which bumps the storage's version).
void overwrite(const Tensor& t) {
  Tensor d = t.detach();
  if (d.dtype().is_bool()) {
    d.copy_(eq(d, 0.0));  // flips every element
  } else if (d.dtype().is_integral()) {
    d.copy_(zeros(d.shape(), d.dtype()));  // index 0 is valid for every table below
  } else {
    d.copy_(add(d, 0.5));
  }
}

// The upstream gradient every case uses (fixed values, the output's shape).
Tensor upstream(const Tensor& out) {
  Generator g(99);
  return uniform(out.shape(), -1.0, 1.0, kFloat64, &g);
}

// Gradients of every input that requires grad after one backward of op with upstream().
std::vector<std::vector<double>> gradients(const SavedCase& c, bool write) {
  const std::vector<Tensor> in = c.inputs();
  Tensor y = c.op(in);
  if (write) overwrite(c.victim == kOutput ? y : in[static_cast<size_t>(c.victim)]);
  y.backward(upstream(y));
  std::vector<std::vector<double>> g;
  for (const Tensor& t : in)
    if (t.requires_grad()) g.push_back(vals(t.grad()));
  return g;
}

std::vector<SavedCase> cases() {
  auto one = [](Shape s, double lo = -1.0, double hi = 1.0) {
    return [s, lo, hi] { return std::vector<Tensor>{f64_leaf(s, 1, lo, hi)}; };
  };
  auto two = [](Shape s, bool second_grad, double lo = -1.0, double hi = 1.0) {
    return [s, second_grad, lo, hi] {
      return std::vector<Tensor>{f64_leaf(s, 1),
                                 second_grad ? f64_leaf(s, 2, lo, hi) : f64_const(s, 2, lo, hi)};
    };
  };
  auto conv_in = [] {
    return std::vector<Tensor>{f64_leaf({1, 2, 5, 5}, 1), f64_leaf({3, 2, 3, 3}, 2),
                               f64_leaf({3}, 3)};
  };
  auto ln_in = [] {
    return std::vector<Tensor>{f64_leaf({3, 4}, 1), f64_leaf({4}, 2, 0.5, 1.5), f64_leaf({4}, 3)};
  };
  auto ce_in = [] { return std::vector<Tensor>{f64_leaf({3, 5}, 1), tensor<int64_t>({4, 0, 2})}; };
  auto where_in = [] {
    return std::vector<Tensor>{gt(f64_const({2, 3}, 4), 0.0), f64_leaf({2, 3}, 1),
                               f64_leaf({2, 3}, 2)};
  };
  auto emb_in = [] {
    return std::vector<Tensor>{f64_leaf({5, 3}, 1), tensor<int64_t>({1, 3, 3, 4})};
  };
  auto qkv_in = [] {
    return std::vector<Tensor>{f64_leaf({1, 2, 2, 3}, 1), f64_leaf({1, 2, 2, 3}, 2),
                               f64_leaf({1, 2, 2, 3}, 3)};
  };
  using V = const std::vector<Tensor>&;
  return {
      // Binary ops: div's a-gradient reads b only, so a is saved only when b needs grad.
      {"div (denominator)", "DivBackward", two({2, 3}, true, 0.5, 2.0),
       [](V v) { return div(v[0], v[1]); }, 1},
      {"div (numerator)", "DivBackward", two({2, 3}, true, 0.5, 2.0),
       [](V v) { return div(v[0], v[1]); }, 0},
      {"div (numerator, constant denominator)", "", two({2, 3}, false, 0.5, 2.0),
       [](V v) { return div(v[0], v[1]); }, 0},
      {"rdiv", "RdivBackward", one({2, 3}, 0.5, 2.0), [](V v) { return rdiv(v[0], 3.0); }, 0},
      {"pow (scalar exponent)", "PowBackward", one({2, 3}, 0.5, 2.0),
       [](V v) { return pow(v[0], 3.0); }, 0},
      {"pow (tensor exponent)", "PowBackward", two({2, 3}, true, 0.5, 2.0),
       [](V v) { return pow(abs(v[0]), v[1]); }, 1},
      {"maximum", "MaximumBackward", two({2, 3}, true), [](V v) { return maximum(v[0], v[1]); }, 1},
      {"minimum", "MinimumBackward", two({2, 3}, true), [](V v) { return minimum(v[0], v[1]); }, 0},
      {"where (condition)", "WhereBackward", where_in, [](V v) { return where(v[0], v[1], v[2]); },
       0},
      {"where (branch)", "", where_in, [](V v) { return where(v[0], v[1], v[2]); }, 1},
      {"add", "", two({2, 3}, true), [](V v) { return add(v[0], v[1]); }, 0},
      {"add (second operand)", "", two({2, 3}, true), [](V v) { return add(v[0], v[1]); }, 1},
      // Unary ops: exp, sqrt, rsqrt, tanh and sigmoid read their output, the others their input.
      {"exp", "ExpBackward", one({2, 3}), [](V v) { return exp(v[0]); }, kOutput},
      {"exp (input)", "", one({2, 3}), [](V v) { return exp(v[0]); }, 0},
      {"log", "LogBackward", one({2, 3}, 0.5, 2.0), [](V v) { return log(v[0]); }, 0},
      {"sqrt", "SqrtBackward", one({2, 3}, 0.5, 2.0), [](V v) { return sqrt(v[0]); }, kOutput},
      {"rsqrt", "RsqrtBackward", one({2, 3}, 0.5, 2.0), [](V v) { return rsqrt(v[0]); }, kOutput},
      {"tanh", "TanhBackward", one({2, 3}), [](V v) { return tanh(v[0]); }, kOutput},
      {"sigmoid", "SigmoidBackward", one({2, 3}), [](V v) { return sigmoid(v[0]); }, kOutput},
      {"abs", "AbsBackward", one({2, 3}), [](V v) { return abs(v[0]); }, 0},
      {"clamp", "ClampBackward", one({2, 3}), [](V v) { return clamp(v[0], -0.5, 0.5); }, 0},
      {"relu", "ReluBackward", one({2, 3}), [](V v) { return relu(v[0]); }, 0},
      {"gelu", "GeluBackward", one({2, 3}), [](V v) { return gelu(v[0]); }, 0},
      {"gelu tanh", "GeluBackward", one({2, 3}), [](V v) { return gelu(v[0], "tanh"); }, 0},
      {"softmax", "SoftmaxBackward", one({2, 4}), [](V v) { return softmax(v[0], 1); }, kOutput},
      {"softmax (input)", "", one({2, 4}), [](V v) { return softmax(v[0], 1); }, 0},
      {"log_softmax", "LogSoftmaxBackward", one({2, 4}), [](V v) { return log_softmax(v[0], 1); },
       kOutput},
      // Normalisation and losses.
      {"layer_norm (input)", "LayerNormBackward", ln_in,
       [](V v) { return layer_norm(v[0], {4}, v[1], v[2]); }, 0},
      {"layer_norm (weight)", "LayerNormBackward", ln_in,
       [](V v) { return layer_norm(v[0], {4}, v[1], v[2]); }, 1},
      {"layer_norm (bias)", "", ln_in, [](V v) { return layer_norm(v[0], {4}, v[1], v[2]); }, 2},
      {"batch_norm (input)", "NativeBatchNormBackward", ln_in,
       [](V v) { return batch_norm(v[0], Tensor(), Tensor(), v[1], v[2], /*training=*/true); }, 0},
      {"batch_norm (weight: its values are copied)", "", ln_in,
       [](V v) { return batch_norm(v[0], Tensor(), Tensor(), v[1], v[2], /*training=*/true); }, 1},
      {"cross_entropy", "CrossEntropyBackward", ce_in,
       [](V v) { return cross_entropy(v[0], v[1]); }, 0},
      {"cross_entropy (target: copied)", "", ce_in, [](V v) { return cross_entropy(v[0], v[1]); },
       1},
      {"mse_loss", "MseLossBackward", two({2, 3}, false), [](V v) { return mse_loss(v[0], v[1]); },
       1},
      // Convolution, pooling, reductions, lookups, attention.
      {"conv2d (weight)", "ConvolutionBackward", conv_in,
       [](V v) { return conv2d(v[0], v[1], v[2]); }, 1},
      {"conv2d (input)", "ConvolutionBackward", conv_in,
       [](V v) {
         return conv2d(v[0], v[1], v[2], {2, 2}, {1, 1});
       },
       0},
      {"max_pool2d (winners kept)", "", one({1, 2, 4, 4}),
       [](V v) {
         return max_pool2d(v[0], {2, 2});
       },
       0},
      {"max_pool2d 3x3 (winners kept)", "", one({1, 1, 5, 5}),
       [](V v) {
         return max_pool2d(v[0], {3, 3}, {1, 1}, {1, 1});
       },
       0},
      {"amax", "AmaxBackward", one({3, 4}), [](V v) { return amax(v[0], {1}); }, 0},
      {"amax (output)", "AmaxBackward", one({3, 4}), [](V v) { return amax(v[0], {1}); }, kOutput},
      {"max", "MaxBackward", one({3, 4}), [](V v) { return max(v[0]); }, 0},
      {"embedding (weight)", "", emb_in, [](V v) { return embedding(v[0], v[1]); }, 0},
      {"embedding (indices: copied)", "", emb_in, [](V v) { return embedding(v[0], v[1]); }, 1},
      {"dropout (mask kept)", "", one({2, 8}),
       [](V v) {
         Generator g(7);
         return dropout(v[0], 0.5, true, &g);
       },
       0},
      {"fused attention (value)", "ScaledDotProductAttentionBackward", qkv_in,
       [](V v) { return scaled_dot_product_attention(v[0], v[1], v[2]); }, 2},
      {"fused attention (output)", "ScaledDotProductAttentionBackward", qkv_in,
       [](V v) { return scaled_dot_product_attention(v[0], v[1], v[2]); }, kOutput},
      // mul, matmul and linear were the first (Autograd.InPlaceWriteOfASavedTensorIsRefused).
      {"mul", "MulBackward", two({2, 3}, true), [](V v) { return mul(v[0], v[1]); }, 1},
  };
}

// For every op: without a write the backward gives the finite-difference gradient; after an
// in-place write of a tensor the backward reads, it is refused naming the op's node; after a
// write of a tensor it does not read, it runs and gives the same gradient as without it.
TEST(SavedVersions, EveryOpChecksTheTensorsItsBackwardReads) {
  for (const SavedCase& c : cases()) {
    SCOPED_TRACE(c.label);
    expect_gradcheck(c.op, c.inputs());
    const auto want = gradients(c, /*write=*/false);
    ASSERT_FALSE(want.empty());
    if (*c.node != '\0') {
      expect_error([&] { gradients(c, /*write=*/true); },
                   {std::string("a tensor ") + c.node + " saved for its backward (number ",
                    "was modified in place after the forward (version "});
    } else {
      std::vector<std::vector<double>> got;
      EXPECT_EQ(error_of([&] { got = gradients(c, /*write=*/true); }), "");
      EXPECT_EQ(got, want);
    }
  }
}

// Output-saving ops record the version their forward left: a plain backward runs (with the
// closed-form gradient), and a write of the output after the forward is refused.
TEST(SavedVersions, OutputSavingOpsRecordTheVersionAfterTheirForward) {
  Tensor x = tensor<double>({-1.0, 0.0, 2.0}).requires_grad_();
  Tensor y = exp(x);
  sum(y).backward();
  testing::expect_near_all(vals(x.grad()), {std::exp(-1.0), 1.0, std::exp(2.0)}, 1e-15);

  x.reset_grad();
  Tensor t = tanh(x);
  t.detach().copy_(zeros({3}, kFloat64));
  expect_error([&] { sum(t).backward(); },
               "a tensor TanhBackward saved for its backward (number 0 of its saved tensors) was "
               "modified in place after the forward (version 0, now 1)");
  // The same op with a later write of its input (not read by tanh's backward) is fine.
  Tensor x2 = tensor<double>({0.5}).requires_grad_();
  Tensor h = mul(x2, 1.0);
  Tensor t2 = tanh(h);
  h.detach().fill_(3.0);
  sum(t2).backward();
  testing::expect_near_all(vals(x2.grad()), {1.0 - std::tanh(0.5) * std::tanh(0.5)}, 1e-15);
}

// A tensor saved only for a gradient nobody asked for is not checked: the saved list names it
// as undefined (its number in the message counts the undefined entries too).
TEST(SavedVersions, TensorsSavedOnlyForAnUnneededGradientAreNotChecked) {
  Tensor a = tensor<double>({1.0, 2.0}).requires_grad_();
  Tensor b = tensor<double>({4.0, 8.0});
  Tensor q = div(a, b);  // a's gradient is 1 / b: reads b (number 1), not a
  a.detach().fill_(100.0);
  sum(q).backward();
  EXPECT_EQ(vals(a.grad()), (std::vector<double>{0.25, 0.125}));

  Tensor q2 = div(a, b);
  b.fill_(1.0);
  expect_error([&] { sum(q2).backward(); },
               "a tensor DivBackward saved for its backward (number 1 of its saved tensors)");

  // conv2d: with only the input requiring grad, the input may be written (the weight may not).
  Tensor x = testing::random_input({1, 1, 4, 4}, 3);
  Tensor w = testing::random_input({1, 1, 3, 3}, 4).detach();
  Tensor y = conv2d(x, w);
  x.detach().fill_(0.0);
  EXPECT_EQ(error_of([&] { sum(y).backward(); }), "");
  Tensor y2 = conv2d(x, w);
  w.fill_(0.0);
  expect_error([&] { sum(y2).backward(); }, "a tensor ConvolutionBackward saved for its backward");
}

// max(a, dim) reads the indices it returned: writing them is refused.
TEST(SavedVersions, MaxAlongADimChecksItsIndices) {
  Tensor x = tensor<double>({1, 5, 2, 7, 3, 4}, {2, 3}).requires_grad_();
  ValuesIndices r = max(x, 1);
  r.indices.fill_(0);
  expect_error([&] { sum(r.values).backward(); }, "a tensor MaxBackward saved for its backward");
  ValuesIndices r2 = max(x, 1);
  sum(r2.values).backward();
  EXPECT_EQ(vals(x.grad()), (std::vector<double>{0, 1, 0, 1, 0, 0}));
}

// An optimizer step between the forward and the backward writes the parameters in place: a
// backward reading one is refused; one that reads only its output is not.
TEST(SavedVersions, OptimizerStepBeforeTheBackwardIsRefusedWhereItMatters) {
  Tensor w = tensor<double>({1.0, 2.0}).requires_grad_();
  optim::SGD sgd({w}, 0.1);
  w.set_grad(ones({2}, kFloat64));
  Tensor l = sum(log(w));
  Tensor s = sum(sigmoid(w));
  sgd.step();
  expect_error([&] { l.backward(); }, "a tensor LogBackward saved for its backward");
  w.reset_grad();
  s.backward();
  const double s1 = 1.0 / (1.0 + std::exp(-1.0)), s2 = 1.0 / (1.0 + std::exp(-2.0));
  testing::expect_near_all(vals(w.grad()), {s1 * (1 - s1), s2 * (1 - s2)}, 1e-15);
}

// The int8 training layer checks the input its weight gradient reads, not its bias (whose
// gradient reads nothing) nor its own quantized weight.
TEST(SavedVersions, Int8TrainingLayerChecksItsInput) {
  quant::Linear8bitLt layer(4, 3, true, {quant::Int8Mode::kTraining, 6.0f, kFloat32});
  Tensor x = testing::rnd({2, 4}, kFloat32, 5);
  Tensor y = layer.forward(x);
  x.fill_(1.0);
  expect_error([&] { sum(y).backward(); },
               "a tensor Linear8bitLtBackward saved for its backward (number 0 of its saved "
               "tensors) was modified in place after the forward");
  Tensor y2 = layer.forward(x);  // x is all ones now
  layer.bias.detach().fill_(0.0);
  sum(y2).backward();
  EXPECT_EQ(vals(layer.weight.grad()), std::vector<double>(12, 2.0));  // ones(3, 2) @ x
  EXPECT_EQ(vals(layer.bias.grad()), std::vector<double>(3, 2.0));
}

}  // namespace
}  // namespace mantissa
