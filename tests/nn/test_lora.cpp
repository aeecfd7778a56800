// LoRA adapters: identity at initialisation, peft's numbers on a fixed layer, gradients against
// finite differences, merging, apply_lora's targeting and naming, and which parameters train.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "lora_peft_reference.h"
#include "mantissa/amp/autocast.h"
#include "mantissa/autograd/grad_mode.h"
#include "mantissa/autograd/node.h"
#include "mantissa/nn/activation.h"
#include "mantissa/nn/conv.h"
#include "mantissa/nn/lora.h"
#include "mantissa/nn/sequential.h"
#include "mantissa/ops/elementwise.h"
#include "mantissa/ops/reduce.h"
#include "support/test_util.h"

namespace mantissa::nn {
namespace {

using namespace mantissa::testing;
namespace ref = lora_peft_reference;

void expect_close(const std::vector<double>& got, const std::vector<float>& want, double tol,
                  const char* what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i)
    EXPECT_NEAR(got[i], want[i], tol * (1 + std::abs(want[i]))) << what << "[" << i << "]";
}

void set_values(const Tensor& t, const std::vector<float>& v) {
  t.detach().copy_(tensor(v, t.shape()));  // a parameter: written outside the graph
}

std::shared_ptr<LoRALinear> wrap(std::shared_ptr<Linear> base, LoraOptions o) {
  const LinearFeatures f{base->in_features(), base->out_features()};
  return std::make_shared<LoRALinear>(std::move(base), f, o);
}

TEST(LoRALinear, FreshAdapterLeavesTheOutputUnchanged) {
  manual_seed(3);
  auto base = std::make_shared<Linear>(6, 3);
  Generator g(9);
  const Tensor x = uniform({4, 6}, -1, 1, kFloat32, &g);
  const std::vector<double> before = vals(base->forward(x));
  auto lora = wrap(base, {.r = 4, .alpha = 8});
  EXPECT_EQ(vals(lora->forward(x)), before);  // B = 0: bit-identical
  EXPECT_DOUBLE_EQ(lora->scaling(), 2.0);
  for (double b : vals(lora->lora_B()->weight)) EXPECT_EQ(b, 0.0);
  // A ~ kaiming_uniform(a=sqrt(5)) = U(-1/sqrt(in), 1/sqrt(in)), and not all zero.
  const std::vector<double> a = vals(lora->lora_A()->weight);
  ASSERT_EQ(lora->lora_A()->weight.shape(), (Shape{4, 6}));
  double max_abs = 0;
  for (double v : a) max_abs = std::max(max_abs, std::abs(v));
  EXPECT_GT(max_abs, 0.0);
  EXPECT_LE(max_abs, 1.0 / std::sqrt(6.0));
  EXPECT_FALSE(base->weight.requires_grad());
  EXPECT_TRUE(lora->lora_A()->weight.requires_grad());
}

// The adapter's sum: peft's result + h * scaling with h * scaling rounded to h's dtype. A
// power-of-two scaling of at least 1 adds h with alpha in one op (no scaled copy, no cast node),
// a scaling of 1.5 keeps the scaled copy; output and the input and adapter gradients equal the
// composed formula bit for bit either way: under bf16 autocast (bf16 base output and h), and
// with a bf16 adapter on an fp32 base (fp32 result, bf16 h, as on a 4-bit base layer).
TEST(LoRALinear, AdapterSumEqualsPeftsRoundingBitForBit) {
  for (bool bf16_adapter : {false, true})
    for (double alpha : {32.0, 24.0, 16.0}) {
      SCOPED_TRACE("alpha " + std::to_string(alpha) + (bf16_adapter ? " bf16 adapter" : ""));
      manual_seed(5);
      auto lora = wrap(std::make_shared<Linear>(24, 40), {.r = 16, .alpha = alpha});
      {
        NoGradGuard ng;
        lora->lora_B()->weight.copy_(random_input({40, 16}, 21, -2, 2));
      }
      if (bf16_adapter) {
        lora->lora_A()->to(kBFloat16);
        lora->lora_B()->to(kBFloat16);
      }
      const Tensor x = random_input({3, 5, 24}, 22, -3, 3).to(kFloat32).detach();
      const Tensor xa = x.clone().requires_grad_(true), xb = x.clone().requires_grad_(true);
      Tensor ya, yb;
      {
        amp::autocast ac(DeviceType::kCPU, kBFloat16, !bf16_adapter);
        ya = lora->forward(xa);
        const Tensor base = lora->base_layer()->forward(xb);
        const Tensor h =
            lora->lora_B()->forward(lora->lora_A()->forward(xb.to(lora->lora_A()->weight.dtype())));
        yb = add(base, mul(h, lora->scaling()).to(base.dtype()));
      }
      EXPECT_EQ(ya.dtype(), bf16_adapter ? kFloat32 : kBFloat16);
      const bool fused = alpha != 24.0;
      ASSERT_EQ(ya.grad_fn()->name(), "AddBackward");
      EXPECT_EQ(ya.grad_fn()->next[1]->name() == "LinearBackward", fused);
      EXPECT_EQ(vals(ya), vals(yb));
      const Tensor up = random_input(ya.shape(), 23).to(kFloat32);
      lora->zero_grad();
      ya.backward(up);
      const std::vector<double> ga = vals(lora->lora_B()->weight.grad()),
                                gaa = vals(lora->lora_A()->weight.grad());
      lora->zero_grad();
      yb.backward(up);
      EXPECT_EQ(vals(xa.grad()), vals(xb.grad()));
      EXPECT_EQ(ga, vals(lora->lora_B()->weight.grad()));
      EXPECT_EQ(gaa, vals(lora->lora_A()->weight.grad()));
    }
}

TEST(LoRALinear, NamesFollowPeft) {
  auto lora = wrap(std::make_shared<Linear>(5, 4), {.r = 2, .alpha = 6});
  EXPECT_EQ(lora->state_dict().keys(),
            (std::vector<std::string>{"base_layer.weight", "base_layer.bias", "lora_A.weight",
                                      "lora_B.weight"}));
}

// The fixture's layer with peft's adapter values: forward and every gradient match peft.
TEST(LoRALinear, MatchesPeftForwardAndBackward) {
  auto base = std::make_shared<Linear>(5, 4);
  set_values(base->weight, ref::kWeight);
  set_values(base->bias, ref::kBias);
  auto lora = wrap(base, {.r = 2, .alpha = 6});
  set_values(lora->lora_A()->weight, ref::kLoraA);
  set_values(lora->lora_B()->weight, ref::kLoraB);
  Tensor x = tensor(ref::kX, {3, 5});
  x.requires_grad_(true);
  Tensor y = lora->forward(x);
  expect_close(vals(y), ref::kY, 1e-6, "y");
  y.backward(tensor(ref::kG, {3, 4}));
  expect_close(vals(x.grad()), ref::kGradX, 1e-6, "grad x");
  expect_close(vals(lora->lora_A()->weight.grad()), ref::kGradA, 1e-6, "grad lora_A");
  expect_close(vals(lora->lora_B()->weight.grad()), ref::kGradB, 1e-6, "grad lora_B");
  expect_close(vals(base->bias.grad()), ref::kGradBias, 1e-6, "grad bias");
  EXPECT_FALSE(base->weight.grad().defined());
}

TEST(LoRALinear, GradientsMatchFiniteDifferences) {
  manual_seed(5);
  auto base = std::make_shared<Linear>(5, 3, true, kFloat64);
  auto lora = wrap(base, {.r = 2, .alpha = 3});
  ASSERT_EQ(lora->lora_A()->weight.dtype(), kFloat64);
  Generator g(11);
  lora->lora_B()->weight.detach().copy_(uniform({3, 2}, -1, 1, kFloat64, &g));
  Tensor x = random_input({2, 4, 5}, 21);
  expect_gradcheck([&](const std::vector<Tensor>& in) { return lora->forward(in[0]); },
                   {x, lora->lora_A()->weight, lora->lora_B()->weight, base->bias});
}

TEST(LoRALinear, MergeFoldsTheAdapterIntoTheWeight) {
  manual_seed(6);
  auto base = std::make_shared<Linear>(5, 4);
  auto lora = wrap(base, {.r = 2, .alpha = 4});
  Generator g(12);
  lora->lora_B()->weight.detach().copy_(uniform({4, 2}, -1, 1, kFloat32, &g));
  const Tensor x = uniform({3, 5}, -1, 1, kFloat32, &g);
  const std::vector<double> before = vals(base->weight);
  const std::vector<double> y = vals(lora->forward(x));
  lora->merge();
  EXPECT_TRUE(lora->merged());
  const std::vector<double> merged = vals(lora->forward(x));
  for (size_t i = 0; i < y.size(); ++i) EXPECT_NEAR(merged[i], y[i], 1e-5);
  expect_error([&] { lora->merge(); }, "already merged");
  lora->unmerge();
  const std::vector<double> after = vals(base->weight);
  for (size_t i = 0; i < after.size(); ++i) EXPECT_NEAR(after[i], before[i], 1e-6);
  expect_error([&] { lora->unmerge(); }, "not merged");
}

// forward runs the modules in the adapter slots, as every composite module does (module.h): a
// precision plugin that replaced them (the FP8 plugin puts fp8::Linear there) must see its
// layers run. Before, forward used the Linear objects built in the constructor, so a replaced
// adapter never ran and its state was saved but never updated.
TEST(LoRALinear, ForwardRunsTheModulesNowInTheAdapterSlots) {
  manual_seed(8);
  auto base = std::make_shared<Linear>(3, 2);
  auto lora = wrap(base, {.r = 1, .alpha = 2});
  auto b = std::make_shared<Linear>(1, 2, /*with_bias=*/false);
  set_values(b->weight, {1.0f, -2.0f});
  lora->replace_child("lora_B", b);
  set_values(lora->lora_A()->weight, {0.5f, 0.25f, -1.0f});
  const Tensor x = tensor(std::vector<float>{2.0f, 4.0f, 1.0f}, {1, 3});
  const std::vector<double> want_base = vals(base->forward(x));
  // A x = 1 + 1 - 1 = 1; scaling 2; B (1) = (1, -2).
  const std::vector<double> y = vals(lora->forward(x));
  ASSERT_EQ(y.size(), 2u);
  EXPECT_NEAR(y[0], want_base[0] + 2.0, 1e-6);
  EXPECT_NEAR(y[1], want_base[1] - 4.0, 1e-6);
  // merge folds the slot's adapter too.
  lora->merge();
  const std::vector<double> merged = vals(lora->forward(x));
  EXPECT_NEAR(merged[0], y[0], 1e-5);
  EXPECT_NEAR(merged[1], y[1], 1e-5);
}

// peft's merge_and_unload: the adapters folded in and the LoRA layers replaced by their bases,
// so the model's keys are the plain model's again and its state dict loads into one.
TEST(MergeAndUnload, GivesThePlainModelWithTheAdaptersFoldedIn) {
  manual_seed(9);
  auto make = [] {
    return std::make_shared<Sequential>(std::initializer_list<std::shared_ptr<Module>>{
        std::make_shared<Linear>(6, 5), std::make_shared<ReLU>(),
        std::make_shared<Linear>(5, 3, /*with_bias=*/false)});
  };
  auto model = make();
  const std::vector<std::string> plain_keys = model->state_dict().keys();
  apply_lora(*model, LoraConfig{.r = 2, .alpha = 4});
  Generator g(3);
  for (const auto& [name, p] : model->named_parameters())
    if (name.find("lora_B") != std::string::npos)
      p.detach().copy_(uniform(p.shape(), -1, 1, kFloat32, &g));
  model->at<LoRALinear>(2)->merge();  // an already merged layer is unloaded as it is
  const Tensor x = uniform({4, 6}, -1, 1, kFloat32, &g);
  const std::vector<double> y = vals(model->forward(x));
  EXPECT_EQ(merge_and_unload(*model), (std::vector<std::string>{"0", "2"}));
  EXPECT_NE(model->at<Linear>(0), nullptr);
  EXPECT_EQ(model->state_dict().keys(), plain_keys);
  const std::vector<double> merged = vals(model->forward(x));
  for (size_t i = 0; i < y.size(); ++i) EXPECT_NEAR(merged[i], y[i], 1e-5);
  auto plain = make();
  plain->load_state_dict(model->state_dict());
  const std::vector<double> reloaded = vals(plain->forward(x));
  for (size_t i = 0; i < y.size(); ++i) EXPECT_NEAR(reloaded[i], y[i], 1e-5);
  EXPECT_TRUE(merge_and_unload(*plain).empty());  // nothing to unload
}

TEST(LoRALinear, DropoutOnlyWhileTraining) {
  manual_seed(7);
  auto lora = wrap(std::make_shared<Linear>(8, 8), {.r = 2, .alpha = 2, .dropout = 0.5});
  Generator g(13);
  lora->lora_B()->weight.detach().copy_(uniform({8, 2}, -1, 1, kFloat32, &g));
  const Tensor x = uniform({4, 8}, -1, 1, kFloat32, &g);
  lora->eval();
  const std::vector<double> eval_a = vals(lora->forward(x));
  EXPECT_EQ(vals(lora->forward(x)), eval_a);
  lora->train();
  EXPECT_NE(vals(lora->forward(x)), eval_a);
}

TEST(LoRALinear, RejectsBadOptions) {
  expect_error([] { wrap(std::make_shared<Linear>(4, 4), {.r = 0}); }, "rank r must be at least 1");
  expect_error([] { wrap(std::make_shared<Linear>(4, 4), {.r = -2}); }, "at least 1");
  expect_error([] { wrap(std::make_shared<Linear>(4, 4), {.r = 2, .alpha = -1}); }, "alpha");
  // A scaling alpha / r beyond kMaxLoraScaling: 1e30 / 8 made Adam's second moment inf, so the
  // adapters silently never trained. The bound itself is accepted.
  expect_error([] { wrap(std::make_shared<Linear>(4, 4), {.r = 8, .alpha = 1e30}); },
               {"alpha 1e+30 with r 8", "scales the adapters by 1.25e+29", "at most 1000"});
  expect_error([] { wrap(std::make_shared<Linear>(4, 4), {.r = 2, .alpha = 2000.5}); },
               "at most 1000");
  EXPECT_DOUBLE_EQ(wrap(std::make_shared<Linear>(4, 4), {.r = 2, .alpha = 2000})->scaling(),
                   1000.0);
  expect_error([] { wrap(std::make_shared<Linear>(4, 4), {.r = 2, .alpha = 2, .dropout = 1}); },
               "dropout must be in [0, 1)");
  auto seq = std::make_shared<Sequential>(
      std::initializer_list<std::shared_ptr<Module>>{std::make_shared<Linear>(4, 4)});
  LoRALinear odd(seq, {4, 4}, {.r = 1, .alpha = 1});
  expect_error([&] { odd.merge(); },
               "the base (Sequential) keeps no floating-point weight of shape [4, 4] to absorb "
               "the adapter");
}

std::shared_ptr<Sequential> small_mlp() {
  manual_seed(8);
  return std::make_shared<Sequential>(std::initializer_list<std::shared_ptr<Module>>{
      std::make_shared<Linear>(6, 8), std::make_shared<ReLU>(), std::make_shared<Linear>(8, 3)});
}

TEST(ApplyLora, WrapsEveryLinearByDefaultAndKeepsNames) {
  auto mlp = small_mlp();
  const std::vector<std::string> wrapped = apply_lora(*mlp, {.r = 2, .alpha = 4});
  EXPECT_EQ(wrapped, (std::vector<std::string>{"0", "2"}));
  EXPECT_EQ(mlp->state_dict().keys(),
            (std::vector<std::string>{"0.base_layer.weight", "0.base_layer.bias", "0.lora_A.weight",
                                      "0.lora_B.weight", "2.base_layer.weight", "2.base_layer.bias",
                                      "2.lora_A.weight", "2.lora_B.weight"}));
  EXPECT_EQ(lora_state_dict(*mlp).keys(),
            (std::vector<std::string>{"0.lora_A.weight", "0.lora_B.weight", "2.lora_A.weight",
                                      "2.lora_B.weight"}));
  // A second call finds nothing new to wrap (the adapters themselves are never wrapped).
  expect_error([&] { apply_lora(*mlp, {.r = 2, .alpha = 4}); },
               {"every Linear-like layer of the model already has LoRA adapters (2 LoRALinear",
                "called on it before"});
}

// A Linear held in two slots gets one adapter, shared by both slots: apply_lora wrapped it once
// per slot (two adapters, the second wrapping a layer already frozen by the first).
TEST(ApplyLora, ASharedLayerGetsOneAdapter) {
  manual_seed(0);
  Sequential net;
  auto shared = std::make_shared<Linear>(4, 4);
  net.push_back(shared);
  net.push_back(std::make_shared<ReLU>());
  net.push_back(shared);
  const std::vector<std::string> wrapped = apply_lora(net, {.r = 2});
  EXPECT_EQ(wrapped, (std::vector<std::string>{"0"}));
  EXPECT_EQ(net[0], net[2]);
  EXPECT_NE(dynamic_cast<LoRALinear*>(net[2].get()), nullptr);
  // One adapter pair (and the shared bias): two were made, 2 * (2 * 4 + 4 * 2).
  EXPECT_EQ(trainable_parameter_count(net), 2 * 4 + 4 * 2 + 4);
  EXPECT_EQ(mark_only_lora_as_trainable(net), 2 * 4 + 4 * 2);
  EXPECT_EQ(lora_state_dict(net).keys(),
            (std::vector<std::string>{"0.lora_A.weight", "0.lora_B.weight", "2.lora_A.weight",
                                      "2.lora_B.weight"}));
  EXPECT_NO_THROW(net.load_state_dict(net.state_dict()));
}

TEST(ApplyLora, TargetsMatchNameSuffixes) {
  auto mlp = small_mlp();
  EXPECT_EQ(apply_lora(*mlp, {.r = 1, .alpha = 1, .target_modules = {"2"}}),
            (std::vector<std::string>{"2"}));
  EXPECT_NE(dynamic_cast<Linear*>((*mlp)[0].get()), nullptr);
  expect_error([&] { apply_lora(*small_mlp(), {.r = 1, .alpha = 1, .target_modules = {"fc9"}}); },
               {"no layer matched the LoRA targets [fc9]", "[0, 2]"});
}

// A regex target (peft's target_modules as a string) must match a layer's whole name, as
// peft's re.fullmatch: "2" names no layer of "0.0", "0.2", "1.0", "1.2" (the list {"2"} names
// "0.2" and "1.2" by their last part). One that matches no layer is refused naming it, a
// malformed one naming PCRE2's error (the pattern shown escaped, as JSON writes it), and one
// beside a list is refused.
TEST(ApplyLora, ARegexTargetMatchesWholeNames) {
  const auto two_mlps = [] {
    auto net = std::make_shared<Sequential>();
    net->push_back(small_mlp());
    net->push_back(small_mlp());
    return net;
  };
  EXPECT_EQ(apply_lora(*two_mlps(), {.r = 1, .alpha = 1, .target_regex = "\\d\\.2"}),
            (std::vector<std::string>{"0.2", "1.2"}));
  EXPECT_EQ(apply_lora(*two_mlps(), {.r = 1, .alpha = 1, .target_regex = "1\\.(0|2)"}),
            (std::vector<std::string>{"1.0", "1.2"}));
  EXPECT_EQ(apply_lora(*two_mlps(), {.r = 1, .alpha = 1, .target_modules = {"2"}}),
            (std::vector<std::string>{"0.2", "1.2"}));
  expect_error([&] { apply_lora(*two_mlps(), {.r = 1, .alpha = 1, .target_regex = "2"}); },
               {"[apply_lora] no layer matched the LoRA targets '2' (a regular expression that a "
                "layer's whole name must match); the model's Linear-like layers are: [0.0, 0.2, "
                "1.0, 1.2]"});
  expect_error([&] { apply_lora(*two_mlps(), {.r = 1, .alpha = 1, .target_regex = "0\\.("}); },
               {"[apply_lora] the LoRA targets: the regular expression '0\\\\.(' does not compile",
                "missing closing parenthesis"});
  expect_error(
      [&] {
        apply_lora(*two_mlps(),
                   {.r = 1, .alpha = 1, .target_modules = {"2"}, .target_regex = "0\\.2"});
      },
      {"a list of names or one regular expression", "both were given"});
}

// A model with no Linear-like layer at all (convolutions only) says so, rather than listing
// its Linear-like layers as "[]".
TEST(ApplyLora, AModelWithoutLinearLayersSaysSo) {
  Sequential convs;
  convs.push_back(std::make_shared<Conv2d>(1, 4, Size2{3, 3}));
  convs.push_back(std::make_shared<ReLU>());
  expect_error([&] { apply_lora(convs, {.r = 1, .alpha = 1}); },
               {"the model has no Linear-like layer"});
}

// Only the adapters (and, as asked, the biases) receive gradients after freezing.
TEST(ApplyLora, OnlyAdaptersAndBiasesTrain) {
  auto mlp = small_mlp();
  apply_lora(*mlp, {.r = 2, .alpha = 4});
  EXPECT_EQ(mark_only_lora_as_trainable(*mlp, LoraBias::kAll),
            (6 * 2 + 2 * 8 + 8) + (8 * 2 + 2 * 3 + 3));
  Generator g(14);
  Tensor x = uniform({5, 6}, -1, 1, kFloat32, &g);
  sum(mlp->forward(x)).backward();
  for (const auto& [name, p] : mlp->named_parameters()) {
    const bool trains =
        name.find("lora_") != std::string::npos || name.find("bias") != std::string::npos;
    EXPECT_EQ(p.grad().defined(), trains) << name;
  }
  EXPECT_EQ(mark_only_lora_as_trainable(*mlp, LoraBias::kNone), 12 + 16 + 16 + 6);
  EXPECT_EQ(trainable_parameter_count(*mlp), 50);
}

}  // namespace
}  // namespace mantissa::nn
