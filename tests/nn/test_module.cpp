// nn::Module: registration order and names, modes, in-place dtype conversion, state dicts,
// printing, and a small MLP checked against a double-precision hand computation.
#include <gtest/gtest.h>

#include <cmath>

#include "mantissa/core/allocator.h"
#include "mantissa/core/generator.h"
#include "mantissa/nn/activation.h"
#include "mantissa/nn/dropout.h"
#include "mantissa/nn/embedding.h"
#include "mantissa/nn/linear.h"
#include "mantissa/nn/module.h"
#include "mantissa/nn/sequential.h"
#include "mantissa/ops/elementwise.h"
#include "mantissa/ops/loss.h"
#include "mantissa/ops/matmul.h"
#include "mantissa/ops/reduce.h"
#include "mantissa/optim/sgd.h"
#include "support/test_util.h"

namespace mantissa {
namespace {

using nn::Linear;
using nn::Module;
using nn::Sequential;
using testing::expect_error;

std::vector<std::string> names(const Module::NamedTensors& nt) {
  std::vector<std::string> out;
  for (const auto& [n, t] : nt) out.push_back(n);
  return out;
}

// A custom module the way users write one: children and a buffer registered in order.
class Net : public Module {
 public:
  Net() : Module("Net") {
    fc1 = register_module("fc1", std::make_shared<Linear>(4, 3));
    steps = register_buffer("steps", zeros({1}, kInt64));
    scale = register_buffer("scale", ones({3}));
    act = register_module("act", std::make_shared<nn::ReLU>());
    fc2 = register_module("fc2", std::make_shared<Linear>(3, 2, /*with_bias=*/false));
    temperature = register_parameter("temperature", ones({1}));
  }
  Tensor forward(const Tensor& x) override { return fc2->forward(act->forward(fc1->forward(x))); }
  std::shared_ptr<Linear> fc1, fc2;
  std::shared_ptr<nn::ReLU> act;
  Tensor steps, scale, temperature;
};

TEST(Module, ParameterNamesOrderAndCounts) {
  Net net;
  EXPECT_EQ(names(net.named_parameters()),
            (std::vector<std::string>{"temperature", "fc1.weight", "fc1.bias", "fc2.weight"}));
  EXPECT_EQ(names(net.named_parameters(/*recurse=*/false)),
            (std::vector<std::string>{"temperature"}));
  EXPECT_EQ(names(net.named_buffers()), (std::vector<std::string>{"steps", "scale"}));
  EXPECT_EQ(net.parameters().size(), 4u);
  EXPECT_EQ(net.parameter_count(), 1 + 12 + 3 + 6);
  EXPECT_EQ(net.children().size(), 3u);
  EXPECT_TRUE(net.parameters()[1].is_same(net.fc1->weight));
  for (const Tensor& p : net.parameters()) EXPECT_TRUE(p.requires_grad());
  EXPECT_FALSE(net.scale.requires_grad());

  Sequential seq{std::make_shared<Linear>(4, 3), std::make_shared<nn::ReLU>(),
                 std::make_shared<Linear>(3, 2)};
  EXPECT_EQ(names(seq.named_parameters()),
            (std::vector<std::string>{"0.weight", "0.bias", "2.weight", "2.bias"}));
  EXPECT_EQ(seq.size(), 3u);
  EXPECT_EQ(seq[1]->name(), "ReLU");
  EXPECT_EQ(seq.at<Linear>(2)->out_features(), 2);
  EXPECT_THROW(seq[3], Error);
  EXPECT_THROW(seq.at<Linear>(1), Error);
}

// A tensor registered under two names (a tied weight, a module in two slots) is one parameter,
// as in PyTorch: parameters() listed it twice, so an optimizer over them threw "parameter 1
// appears twice in the same parameter group" and parameter_count() counted it twice.
// state_dict() keeps every name.
class Tied : public Module {
 public:
  Tied() : Module("Tied") {
    emb = register_module("emb", std::make_shared<nn::Embedding>(10, 4));
    head = register_parameter("head_weight", emb->weight);
    const auto shared = std::make_shared<Linear>(4, 4);
    register_module("a", shared);
    register_module("b", shared);
    running = register_buffer("running", zeros({4}));
    register_buffer("running_alias", running);
  }
  Tensor forward(const Tensor& idx) override {
    return matmul(child("b")->forward(child("a")->forward(emb->forward(idx))), head.t());
  }
  std::shared_ptr<nn::Embedding> emb;
  Tensor head, running;
};

TEST(Module, TiedWeightsAndSharedModulesAreOneParameter) {
  manual_seed(0);
  Tied m;
  EXPECT_EQ(names(m.named_parameters()),
            (std::vector<std::string>{"head_weight", "a.weight", "a.bias"}));
  EXPECT_EQ(m.parameters().size(), 3u);
  EXPECT_EQ(m.parameter_count(), 40 + 16 + 4);
  EXPECT_EQ(names(m.named_buffers()), (std::vector<std::string>{"running"}));
  EXPECT_EQ(m.state_dict().keys(),
            (std::vector<std::string>{"head_weight", "running", "running_alias", "emb.weight",
                                      "a.weight", "a.bias", "b.weight", "b.bias"}));

  // An optimizer takes the list, and the tied weight gets one update from its summed gradient.
  optim::SGD opt(m.parameters(), 0.5);
  const Tensor before = m.head.clone();
  const Tensor idx = tensor_of({1, 2}, {2}, kInt64);
  cross_entropy(m.forward(idx), idx).backward();
  const Tensor expected = sub(before, mul(m.head.grad(), 0.5));
  opt.step();
  EXPECT_EQ(max(abs(sub(m.head, expected))).item(), 0.0);
  EXPECT_TRUE(m.emb->weight.is_same(m.head));
}

TEST(Module, RegistrationErrors) {
  Module m("Custom");
  m.register_parameter("w", zeros({2}));
  EXPECT_THROW(m.register_parameter("w", zeros({2})), Error);    // duplicate
  EXPECT_THROW(m.register_buffer("w", zeros({2})), Error);       // clashes with a parameter
  EXPECT_THROW(m.register_parameter("a.b", zeros({2})), Error);  // dotted
  EXPECT_THROW(m.register_parameter("", zeros({2})), Error);
  EXPECT_THROW(m.register_parameter("i", zeros({2}, kInt64)), Error);  // cannot require grad
  EXPECT_NO_THROW(m.register_parameter("j", zeros({2}, kInt64), /*requires_grad=*/false));
  Tensor leaf = ones({2});
  leaf.requires_grad_();
  EXPECT_THROW(m.register_parameter("nonleaf", leaf.reshape({2, 1})), Error);
  EXPECT_THROW(m.register_module("null", std::shared_ptr<Module>()), Error);
  EXPECT_THROW(m.forward(zeros({2})), Error);  // base forward
}

// A module registered inside itself, or in a module it contains, is refused at registration:
// every walk of the tree (parameters(), state_dict()) recursed until the stack overflowed.
TEST(Module, ACycleOfModulesIsRefusedWhenRegistered) {
  auto a = std::make_shared<Module>("A");
  auto b = std::make_shared<Module>("B");
  auto c = std::make_shared<Module>("C");
  a->register_module("b", b);
  b->register_module("c", c);
  expect_error([&] { a->register_module("self", a); },
               "module \"self\" (A) is the A it is being registered in: a module cannot be its "
               "own descendant");
  expect_error([&] { c->register_module("a", a); },
               "module \"a\" (A) contains the C it is being registered in");
  expect_error([&] { b->replace_child("c", a); }, {"Module::replace_child", "contains the B"});
  // Nothing was added: the tree still walks, and a shared module (a DAG) stays allowed.
  a->register_module("c_again", c);
  c->register_parameter("w", zeros({2}));
  EXPECT_EQ(a->parameters().size(), 1u);
  EXPECT_EQ(a->state_dict().size(), 2u);
}

TEST(Module, TrainEvalPropagates) {
  Sequential inner{std::make_shared<nn::Dropout>(0.5)};
  auto inner_ptr = std::make_shared<Sequential>();
  inner_ptr->push_back(std::make_shared<nn::Dropout>(0.2));
  Sequential outer{std::make_shared<Linear>(2, 2), inner_ptr};
  EXPECT_TRUE(outer.is_training());
  outer.eval();
  EXPECT_FALSE(outer.is_training());
  EXPECT_FALSE(inner_ptr->is_training());
  EXPECT_FALSE((*inner_ptr)[0]->is_training());
  outer.train();
  EXPECT_TRUE((*inner_ptr)[0]->is_training());
  int visited = 0;
  outer.apply([&](Module&) { ++visited; });
  EXPECT_EQ(visited, 4);
}

TEST(Module, DropoutUsesTheTrainingFlag) {
  Generator g(5);
  nn::Dropout drop(0.5, &g);
  Tensor x = ones({1000});
  const auto train_out = drop(x).to_vector<double>();
  int zeros_seen = 0;
  for (double v : train_out) {
    ASSERT_TRUE(v == 0.0 || v == 2.0) << v;
    zeros_seen += v == 0.0;
  }
  EXPECT_GT(zeros_seen, 400);
  EXPECT_LT(zeros_seen, 600);
  drop.eval();
  EXPECT_EQ(drop(x).to_vector<double>(), std::vector<double>(1000, 1.0));
  EXPECT_THROW(nn::Dropout(1.5), Error);
}

TEST(Module, ActivationModulesForwardToTheOps) {
  Tensor x = tensor_of({-1.0, 0.0, 1.0}, {3}, kFloat64);
  EXPECT_EQ(nn::ReLU()(x).to_vector<double>(), (std::vector<double>{0, 0, 1}));
  const auto exact = nn::GELU()(x).to_vector<double>();  // x * Phi(x)
  EXPECT_NEAR(exact[0], -0.15865525393145707, 1e-12);
  EXPECT_EQ(exact[1], 0.0);
  EXPECT_NEAR(exact[2], 0.8413447460685429, 1e-12);
  const auto approx = nn::GELU("tanh")(x).to_vector<double>();
  EXPECT_NEAR(approx[2], 0.8411919906082768, 1e-12);
  const auto th = nn::Tanh()(x).to_vector<double>();
  EXPECT_NEAR(th[0], -0.7615941559557649, 1e-15);
  EXPECT_EQ(th[1], 0.0);
  const auto sg = nn::Sigmoid()(x).to_vector<double>();
  EXPECT_NEAR(sg[0], 0.2689414213699951, 1e-15);
  EXPECT_EQ(sg[1], 0.5);
  // In a Sequential, with their names in the printout, and with a gradient.
  auto net = std::make_shared<nn::Sequential>();
  net->push_back(std::make_shared<nn::Tanh>());
  net->push_back(std::make_shared<nn::Sigmoid>());
  EXPECT_NE(net->to_string().find("Tanh()"), std::string::npos) << net->to_string();
  EXPECT_NE(net->to_string().find("Sigmoid()"), std::string::npos) << net->to_string();
  Tensor xg = x.clone().requires_grad_(true);
  sum((*net)(xg)).backward();
  const double s1 = 1 / (1 + std::exp(-std::tanh(1.0)));  // d/dx sigmoid(tanh(x)) at x = 1
  EXPECT_NEAR(xg.grad().to_vector<double>()[2],
              s1 * (1 - s1) * (1 - std::tanh(1.0) * std::tanh(1.0)), 1e-12);
}

TEST(Module, ToBFloat16HalvesMemoryAndKeepsHandles) {
  auto net = std::make_shared<Sequential>();
  net->push_back(std::make_shared<Linear>(64, 32));
  net->push_back(std::make_shared<Linear>(32, 16));
  const std::vector<Tensor> handles = net->parameters();
  std::vector<std::vector<double>> expected;
  for (const Tensor& p : handles) expected.push_back(p.to(kBFloat16).to_vector<double>());
  const int64_t param_bytes = 4 * net->parameter_count();
  const int64_t before = memory_allocated();
  net->to(kBFloat16);
  EXPECT_EQ(before - memory_allocated(), param_bytes / 2);
  const std::vector<Tensor> after = net->parameters();
  for (size_t i = 0; i < handles.size(); ++i) {
    EXPECT_TRUE(after[i].is_same(handles[i]));
    EXPECT_EQ(handles[i].dtype(), kBFloat16);
    EXPECT_TRUE(handles[i].requires_grad());
    EXPECT_EQ(handles[i].to_vector<double>(), expected[i]);  // one RNE rounding
  }
  // The converted model trains in bf16: gradients arrive in bf16 on the same handles.
  Tensor y = (*net)(ones({3, 64}, kBFloat16));
  y.backward(ones({3, 16}, kBFloat16));
  EXPECT_EQ(handles[0].grad().dtype(), kBFloat16);
  // Existing gradients are converted with their parameter.
  net->to(kFloat32);
  EXPECT_EQ(handles[0].dtype(), kFloat32);
  EXPECT_EQ(handles[0].grad().dtype(), kFloat32);
  EXPECT_THROW(net->to(kInt32), Error);
}

TEST(Module, ZeroGradSetsGradientsToNone) {
  Linear layer(3, 2);
  layer(ones({4, 3})).backward(ones({4, 2}));
  ASSERT_TRUE(layer.weight.grad().defined());
  ASSERT_TRUE(layer.bias.grad().defined());
  layer.zero_grad();
  EXPECT_FALSE(layer.weight.grad().defined());
  EXPECT_FALSE(layer.bias.grad().defined());
}

TEST(Module, StateDictRoundTrip) {
  manual_seed(1);
  Net a;
  a.scale.fill_(3.0);
  a.steps.fill_(42);
  manual_seed(2);
  Net b;
  const nn::StateDict sd = a.state_dict();
  EXPECT_EQ(sd.keys(), (std::vector<std::string>{"temperature", "steps", "scale", "fc1.weight",
                                                 "fc1.bias", "fc2.weight"}));
  for (const auto& [k, t] : sd) EXPECT_FALSE(t.requires_grad()) << k;
  EXPECT_EQ(sd.at("fc1.weight").data_ptr(), a.fc1->weight.data_ptr());  // shares storage
  const Tensor handle = b.fc1->weight;
  auto res = b.load_state_dict(sd);
  EXPECT_TRUE(res.missing_keys.empty());
  EXPECT_TRUE(res.unexpected_keys.empty());
  for (const auto& [k, t] : b.state_dict())
    EXPECT_EQ(t.to_vector<double>(), sd.at(k).to_vector<double>()) << k;
  EXPECT_TRUE(b.fc1->weight.is_same(handle));  // loaded in place
  EXPECT_TRUE(b.fc1->weight.requires_grad());

  // A float64 checkpoint loads into the float32 model, converting.
  nn::StateDict wide;
  for (const auto& [k, t] : sd) wide.insert(k, t.is_floating_point() ? t.to(kFloat64) : t);
  Net c;
  c.load_state_dict(wide);
  EXPECT_EQ(c.fc2->weight.dtype(), kFloat32);
  EXPECT_EQ(c.fc2->weight.to_vector<double>(), a.fc2->weight.to_vector<double>());
}

using mantissa::testing::error_of;

TEST(Module, LoadStateDictStrictErrors) {
  Net net;
  nn::StateDict sd = net.state_dict();
  const std::vector<double> before = net.temperature.to_vector<double>();

  nn::StateDict missing = sd;
  missing.erase("fc1.bias");
  std::string msg = error_of([&] { net.load_state_dict(missing); });
  EXPECT_NE(msg.find("missing keys: \"fc1.bias\""), std::string::npos) << msg;
  auto res = net.load_state_dict(missing, /*strict=*/false);
  EXPECT_EQ(res.missing_keys, (std::vector<std::string>{"fc1.bias"}));

  nn::StateDict extra = sd;
  extra.insert("fc3.weight", zeros({2}));
  msg = error_of([&] { net.load_state_dict(extra); });
  EXPECT_NE(msg.find("unexpected keys: \"fc3.weight\""), std::string::npos) << msg;
  res = net.load_state_dict(extra, /*strict=*/false);
  EXPECT_EQ(res.unexpected_keys, (std::vector<std::string>{"fc3.weight"}));

  nn::StateDict wrong = sd;
  wrong.insert("temperature", full({2}, 5.0));
  wrong.insert("fc2.weight", zeros({3, 3}));
  msg = error_of([&] { net.load_state_dict(wrong, /*strict=*/false); });
  EXPECT_NE(msg.find("size mismatch for \"fc2.weight\""), std::string::npos) << msg;
  EXPECT_NE(msg.find("[3, 3]"), std::string::npos) << msg;
  EXPECT_NE(msg.find("[2, 3]"), std::string::npos) << msg;
  // Nothing was written by the failed load.
  EXPECT_EQ(net.temperature.to_vector<double>(), before);
  EXPECT_THROW(sd.at("nope"), Error);

  // Floating dtypes convert into each other; integer or bool values into a floating
  // parameter (the bytes of a corrupt or foreign file) are refused, nothing written.
  nn::StateDict narrow = sd;
  narrow.insert("fc2.weight", sd.at("fc2.weight").to(kBFloat16));
  net.load_state_dict(narrow);
  for (DType bad : {kInt32, kInt64, kBool}) {
    nn::StateDict ints = sd;
    ints.insert("temperature", full({1}, 7.0).to(bad));
    msg = error_of([&] { net.load_state_dict(ints); });
    EXPECT_NE(msg.find("dtype mismatch for \"temperature\""), std::string::npos) << msg;
    EXPECT_NE(msg.find(std::string(bad.name())), std::string::npos) << msg;
    EXPECT_EQ(net.temperature.to_vector<double>(), before);
  }
  // And floating values into an integer buffer, with the article the kind takes (it read "into
  // a integer tensor").
  nn::StateDict floats = sd;
  floats.insert("steps", full({1}, 7.0));
  EXPECT_NE(error_of([&] { net.load_state_dict(floats); })
                .find("dtype mismatch for \"steps\": checkpoint has float32, the module has int64 "
                      "(floating values cannot be loaded into an integer tensor)"),
            std::string::npos);
}

TEST(Module, PrettyPrinterFollowsPyTorch) {
  Sequential seq{std::make_shared<Linear>(784, 256), std::make_shared<nn::ReLU>(),
                 std::make_shared<nn::Dropout>(0.1), std::make_shared<nn::GELU>("tanh")};
  auto inner = std::make_shared<Sequential>();
  inner->push_back(std::make_shared<Linear>(256, 10, false));
  seq.push_back(inner);
  EXPECT_EQ(seq.to_string(),
            "Sequential(\n"
            "  (0): Linear(in_features=784, out_features=256, bias=true)\n"
            "  (1): ReLU()\n"
            "  (2): Dropout(p=0.1)\n"
            "  (3): GELU(approximate='tanh')\n"
            "  (4): Sequential(\n"
            "    (0): Linear(in_features=256, out_features=10, bias=false)\n"
            "  )\n"
            ")");
  EXPECT_EQ(Sequential().to_string(), "Sequential()");
  EXPECT_THROW(nn::GELU("fast"), Error);
}

// Sequential(Linear(4, 6), ReLU, Linear(6, 3)) forward and backward against the same MLP
// written out in double.
void check_mlp(DType dt, double tol) {
  SCOPED_TRACE(dt.name());
  manual_seed(11);
  Sequential mlp{std::make_shared<Linear>(4, 6, true, dt), std::make_shared<nn::ReLU>(),
                 std::make_shared<Linear>(6, 3, true, dt)};
  const int64_t B = 5;
  Generator g(12);
  Tensor x = uniform({B, 4}, -2.0, 2.0, dt, &g);
  x.requires_grad_();
  Tensor r = uniform({B, 3}, -1.0, 1.0, dt, &g);
  Tensor y = mlp(x);
  y.backward(r);

  auto l1 = mlp.at<Linear>(0), l2 = mlp.at<Linear>(2);
  const auto xv = x.to_vector<double>(), rv = r.to_vector<double>();
  const auto w1 = l1->weight.to_vector<double>(), b1 = l1->bias.to_vector<double>();
  const auto w2 = l2->weight.to_vector<double>(), b2 = l2->bias.to_vector<double>();
  std::vector<double> h(B * 6), a(B * 6), out(B * 3);
  for (int64_t n = 0; n < B; ++n) {
    for (int64_t j = 0; j < 6; ++j) {
      double s = b1[j];
      for (int64_t i = 0; i < 4; ++i) s += xv[n * 4 + i] * w1[j * 4 + i];
      h[n * 6 + j] = s;
      a[n * 6 + j] = s > 0 ? s : 0;
    }
    for (int64_t k = 0; k < 3; ++k) {
      double s = b2[k];
      for (int64_t j = 0; j < 6; ++j) s += a[n * 6 + j] * w2[k * 6 + j];
      out[n * 3 + k] = s;
    }
  }
  std::vector<double> dw2(18, 0), db2(3, 0), dh(B * 6, 0), dw1(24, 0), db1(6, 0), dx(B * 4, 0);
  for (int64_t n = 0; n < B; ++n) {
    for (int64_t k = 0; k < 3; ++k) {
      db2[k] += rv[n * 3 + k];
      for (int64_t j = 0; j < 6; ++j) {
        dw2[k * 6 + j] += rv[n * 3 + k] * a[n * 6 + j];
        dh[n * 6 + j] += rv[n * 3 + k] * w2[k * 6 + j];
      }
    }
    for (int64_t j = 0; j < 6; ++j) {
      if (h[n * 6 + j] <= 0) dh[n * 6 + j] = 0;
      db1[j] += dh[n * 6 + j];
      for (int64_t i = 0; i < 4; ++i) {
        dw1[j * 4 + i] += dh[n * 6 + j] * xv[n * 4 + i];
        dx[n * 4 + i] += dh[n * 6 + j] * w1[j * 4 + i];
      }
    }
  }
  auto expect_close = [&](const Tensor& t, const std::vector<double>& ref, const char* what) {
    ASSERT_TRUE(t.defined()) << what;
    EXPECT_EQ(t.dtype(), dt) << what;
    const auto v = t.to_vector<double>();
    ASSERT_EQ(v.size(), ref.size()) << what;
    for (size_t i = 0; i < v.size(); ++i)
      EXPECT_NEAR(v[i], ref[i], tol * (1 + std::abs(ref[i]))) << what << " " << i;
  };
  expect_close(y, out, "output");
  expect_close(l2->weight.grad(), dw2, "dW2");
  expect_close(l2->bias.grad(), db2, "db2");
  expect_close(l1->weight.grad(), dw1, "dW1");
  expect_close(l1->bias.grad(), db1, "db1");
  expect_close(x.grad(), dx, "dx");
}

TEST(Module, MlpForwardBackwardMatchesDoubleComputation) {
  check_mlp(kFloat64, 1e-13);
  check_mlp(kFloat32, 1e-5);
}

}  // namespace
}  // namespace mantissa
