// Module replacement: named_modules order, get_submodule / replace_child errors, and in each
// reference model (mlp, cnn, vit, gpt) every Linear swapped for a counting wrapper that keeps
// the parameter names, trains to the same loss bit for bit and is called once per forward.
#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <unordered_set>

#include "mantissa/mantissa.h"
#include "mantissa/models/cnn.h"
#include "mantissa/models/gpt.h"
#include "mantissa/models/mlp.h"
#include "mantissa/models/vit.h"
#include "mantissa/nn/replace.h"
#include "support/test_util.h"

namespace mantissa {
namespace {

using namespace mantissa::testing;
using nn::Linear;
using nn::Module;

std::vector<std::string> module_names(Module& m) {
  std::vector<std::string> out;
  for (const auto& [name, mod] : m.named_modules()) out.push_back(name);
  return out;
}

std::vector<std::string> keys_of(const Module::NamedTensors& nt) {
  std::vector<std::string> out;
  for (const auto& [n, t] : nt) out.push_back(n);
  return out;
}

TEST(ModuleReplace, NamedModulesIsDepthFirstInRegistrationOrder) {
  nn::TransformerBlock block({.embed_dim = 8, .num_heads = 2});
  EXPECT_EQ(module_names(block),
            (std::vector<std::string>{"", "ln1", "attn", "attn.out_proj", "attn_drop", "ln2", "mlp",
                                      "mlp.fc1", "mlp.fc2", "mlp.drop"}));
  EXPECT_EQ(block.named_modules()[0].second, &block);
  EXPECT_EQ(block.named_modules()[3].second, block.attn()->out_proj().get());
  const Module& as_const = block;
  EXPECT_EQ(as_const.named_modules().size(), 10u);

  nn::Sequential seq{std::make_shared<Linear>(2, 2), std::make_shared<nn::ReLU>()};
  EXPECT_EQ(module_names(seq), (std::vector<std::string>{"", "0", "1"}));
}

TEST(ModuleReplace, GetSubmoduleFollowsDottedPaths) {
  manual_seed(0);
  models::GPT gpt({.context = 8, .layers = 2, .width = 16, .heads = 2});
  EXPECT_EQ(&gpt.get_submodule(""), &gpt);
  EXPECT_EQ(&gpt.get_submodule("h1.mlp.fc2"), gpt.block(1)->mlp()->fc2().get());
  EXPECT_EQ(gpt.get_submodule("h0.attn").name(), "MultiheadAttention");
  expect_error([&] { gpt.get_submodule("h0.mlp.fc3"); },
               {"get_submodule", "h0.mlp.fc3", "\"h0.mlp\" (TransformerMLP)", "no child \"fc3\"",
                "\"fc1\", \"fc2\", \"drop\""});
  expect_error([&] { gpt.get_submodule("h7"); }, {"GPT has no child \"h7\"", "\"wte\""});
  expect_error([&] { gpt.get_submodule("h0.mlp.fc1.weight"); },
               {"no child \"weight\"", "it has no children"});
}

TEST(ModuleReplace, ReplaceChildKeepsTheSlotAndRejectsUnknownNames) {
  nn::Sequential seq{std::make_shared<Linear>(3, 4), std::make_shared<nn::ReLU>(),
                     std::make_shared<Linear>(4, 2)};
  const auto before = keys_of(seq.named_parameters());
  auto old = seq.replace_child("0", std::make_shared<Linear>(3, 4));
  EXPECT_EQ(old->name(), "Linear");
  EXPECT_NE(seq[0], old);
  EXPECT_EQ(keys_of(seq.named_parameters()), before);
  EXPECT_EQ(seq.state_dict().keys(), before);
  expect_error([&] { seq.replace_child("5", std::make_shared<nn::ReLU>()); },
               {"replace_child", "no child module \"5\"", "\"0\", \"1\", \"2\""});
  expect_error([&] { seq.replace_child("1", nullptr); }, {"replace_child", "null"});
  expect_error([&] { seq.child("x"); }, {"Module::child", "\"x\""});
  // A typed accessor notices that the slot now holds another type.
  nn::TransformerMLP mlp(4, 8);
  mlp.replace_child("fc1", std::make_shared<nn::ReLU>());
  expect_error([&] { mlp.fc1(); }, {"child_as", "\"fc1\"", "ReLU"});
}

TEST(ModuleReplace, ReplaceModulesSkipsRootExceptionsAndReplacements) {
  auto outer = std::make_shared<nn::Sequential>();
  outer->push_back(std::make_shared<Linear>(2, 2));
  outer->push_back(std::make_shared<nn::Sequential>(std::initializer_list<std::shared_ptr<Module>>{
      std::make_shared<Linear>(2, 2), std::make_shared<Linear>(2, 2)}));
  std::vector<std::string> seen;
  const int n = nn::replace_modules(
      *outer, nn::match_type<Linear>({"1.0"}),
      [&](const std::string& name, std::shared_ptr<Module> old) -> std::shared_ptr<Module> {
        seen.push_back(name);
        // The replacement is itself a Linear: it must not be visited again.
        return std::make_shared<Linear>(2, 2);
      });
  EXPECT_EQ(n, 2);
  EXPECT_EQ(seen, (std::vector<std::string>{"0", "1.1"}));
  // A container name keeps everything inside it ("1" keeps "1.0" and "1.1"); a name that only
  // shares a prefix does not ("1" does not keep "10", were there one).
  seen.clear();
  EXPECT_EQ(nn::replace_modules(*outer, nn::match_type<Linear>({"1"}),
                                [&](const std::string& name, std::shared_ptr<Module>) {
                                  seen.push_back(name);
                                  return std::make_shared<Linear>(2, 2);
                                }),
            1);
  EXPECT_EQ(seen, (std::vector<std::string>{"0"}));
  Linear ten(2, 2);
  EXPECT_TRUE(nn::match_type<Linear>({"1"})("10", ten));
  EXPECT_FALSE(nn::match_type<Linear>({"1"})("1.0", ten));
  // Matching a whole subtree replaces it without looking inside.
  seen.clear();
  EXPECT_EQ(nn::replace_modules(
                *outer, [](const std::string& name, Module&) { return name == "1"; },
                [&](const std::string& name, std::shared_ptr<Module>) -> std::shared_ptr<Module> {
                  seen.push_back(name);
                  return std::make_shared<nn::ReLU>();
                }),
            1);
  EXPECT_EQ(module_names(*outer), (std::vector<std::string>{"", "0", "1"}));
  expect_error(
      [&] {
        nn::replace_modules(*outer, nn::match_type<Linear>(),
                            [](const std::string&, std::shared_ptr<Module>) { return nullptr; });
      },
      {"replace_modules", "no module for \"0\""});
}

// Delegates to the Linear it replaces and counts calls. It registers the wrapped layer's
// weight and bias as its own "weight" and "bias" (the same tensors), so names stay unchanged.
class CountingLinear : public Module {
 public:
  CountingLinear(std::shared_ptr<Linear> inner, int* calls)
      : Module("CountingLinear"), inner_(std::move(inner)), calls_(calls) {
    register_parameter("weight", inner_->weight);
    if (inner_->bias.defined()) register_parameter("bias", inner_->bias);
  }
  Tensor forward(const Tensor& x) override {
    ++*calls_;
    return inner_->forward(x);
  }

 private:
  std::shared_ptr<Linear> inner_;
  int* calls_;
};

// Replaces every Linear of model; counts[qualified name] counts its calls.
int wrap_linears(Module& model, std::map<std::string, int>& counts) {
  return nn::replace_modules(
      model, nn::match_type<Linear>(),
      [&](const std::string& name, std::shared_ptr<Module> old) -> std::shared_ptr<Module> {
        return std::make_shared<CountingLinear>(std::dynamic_pointer_cast<Linear>(old),
                                                &counts[name]);
      });
}

uint64_t bits(double v) {
  uint64_t b;
  std::memcpy(&b, &v, sizeof b);
  return b;
}

// One AdamW step on (x, y) and then the loss after it.
struct StepLosses {
  double first, second;
};
StepLosses train_one_step(Module& model, const Tensor& x, const Tensor& y,
                          const std::function<Tensor(const Tensor&, const Tensor&)>& loss_fn) {
  optim::AdamW opt(model.parameters(), 1e-2);
  Tensor loss = loss_fn(model.forward(x), y);
  opt.zero_grad();
  loss.backward();
  opt.step();
  const double first = loss.item();
  NoGradGuard no_grad;
  return {first, loss_fn(model.forward(x), y).item()};
}

// Builds the model twice from the same seed, wraps every Linear of the second, trains both one
// step and compares.
void check_replacement(const std::function<std::shared_ptr<Module>()>& build, const Tensor& x,
                       const Tensor& y, int expected_linears,
                       const std::function<Tensor(const Tensor&, const Tensor&)>& loss_fn) {
  manual_seed(7);
  std::shared_ptr<Module> plain = build();
  manual_seed(7);
  std::shared_ptr<Module> wrapped = build();
  const auto names = keys_of(wrapped->named_parameters());
  const auto keys = wrapped->state_dict().keys();
  std::map<std::string, int> counts;
  EXPECT_EQ(wrap_linears(*wrapped, counts), expected_linears);
  EXPECT_EQ(counts.size(), static_cast<size_t>(expected_linears));
  EXPECT_EQ(keys_of(wrapped->named_parameters()), names);
  EXPECT_EQ(wrapped->state_dict().keys(), keys);
  for (const auto& [name, m] : wrapped->named_modules())
    EXPECT_EQ(dynamic_cast<Linear*>(m), nullptr) << name << " is still a Linear";

  const StepLosses a = train_one_step(*plain, x, y, loss_fn);
  const StepLosses b = train_one_step(*wrapped, x, y, loss_fn);
  EXPECT_EQ(bits(a.first), bits(b.first)) << a.first << " vs " << b.first;
  EXPECT_EQ(bits(a.second), bits(b.second)) << a.second << " vs " << b.second;
  // Two forwards (the training step and the loss after it): each layer ran twice.
  for (const auto& [name, n] : counts) EXPECT_EQ(n, 2) << name;
}

Tensor classification_loss(const Tensor& logits, const Tensor& y) {
  return cross_entropy(logits, y);
}

// A parameter the user froze stays frozen in the module that replaces its layer (the precision
// plugins gave the replacements fresh trainable tensors: a frozen head trained again).
TEST(ModuleReplace, FrozenParametersStayFrozenInTheReplacement) {
  nn::Sequential net;
  net.push_back(std::make_shared<Linear>(4, 3));
  net.push_back(std::make_shared<Linear>(3, 2));
  net.child("1")->named_parameters().at(1).second.requires_grad_(false);  // "bias" of the head
  for (auto& p : net.child("0")->parameters()) p.requires_grad_(false);   // all of the first
  const int n = nn::replace_modules(
      net, [](const std::string&, const Module& m) { return dynamic_cast<const Linear*>(&m); },
      [](const std::string&, const std::shared_ptr<Module>& old) {
        const auto& l = dynamic_cast<const Linear&>(*old);
        return std::make_shared<Linear>(l.in_features(), l.out_features());  // fresh tensors
      });
  ASSERT_EQ(n, 2);
  std::map<std::string, bool> trainable;
  for (const auto& [name, p] : net.named_parameters()) trainable[name] = p.requires_grad();
  EXPECT_EQ(trainable,
            (std::map<std::string, bool>{
                {"0.weight", false}, {"0.bias", false}, {"1.weight", true}, {"1.bias", false}}));
}

TEST(ModuleReplace, MlpCallsEveryReplacedLinear) {
  Generator gen(1);
  Tensor x = randn({8, 784}, kFloat32, &gen), y = randint(0, 10, {8}, kInt64, &gen);
  check_replacement(
      [] {
        return models::make_mlp(784, {32, 16}, 10);
      },
      x, y, 3, classification_loss);
}

TEST(ModuleReplace, CnnCallsEveryReplacedLinear) {
  Generator gen(2);
  Tensor x = randn({4, 784}, kFloat32, &gen), y = randint(0, 10, {4}, kInt64, &gen);
  check_replacement([] { return models::make_cnn(); }, x, y, 2, classification_loss);
}

TEST(ModuleReplace, VitCallsEveryReplacedLinear) {
  Generator gen(3);
  Tensor x = randn({4, 784}, kFloat32, &gen), y = randint(0, 10, {4}, kInt64, &gen);
  // patch_embed + 2 blocks x (out_proj, fc1, fc2) + head
  check_replacement(
      [] {
        return std::make_shared<models::ViT>(
            models::ViTConfig{.patch = 7, .width = 16, .depth = 2, .heads = 2});
      },
      x, y, 8, classification_loss);
}

TEST(ModuleReplace, GptCallsEveryReplacedLinear) {
  Generator gen(4);
  Tensor x = randint(0, 256, {2, 8}, kInt64, &gen), y = randint(0, 256, {2, 8}, kInt64, &gen);
  // 2 blocks x (in_proj, out_proj, fc1, fc2); the head is tied to the embedding (no Linear).
  check_replacement(
      [] {
        return std::make_shared<models::GPT>(
            models::GPTConfig{.context = 8, .layers = 2, .width = 16, .heads = 2});
      },
      x, y, 8, [](const Tensor& logits, const Tensor& t) { return models::GPT::loss(logits, t); });
}

// One block object in two slots ("enc", "dec") and one Linear in two slots ("proj",
// "proj_again"): shared modules, as weight-tied encoders or repeated layers have them.
class SharedSlots : public Module {
 public:
  SharedSlots() : Module("SharedSlots") {
    auto block = std::make_shared<nn::Sequential>(std::initializer_list<std::shared_ptr<Module>>{
        std::make_shared<Linear>(4, 4), std::make_shared<nn::ReLU>()});
    register_module("enc", block);
    register_module("dec", block);
    auto proj = std::make_shared<Linear>(4, 4);
    register_module("proj", proj);
    register_module("proj_again", proj);
  }
  Tensor forward(const Tensor& x) override {
    Tensor h = child("dec")->forward(child("enc")->forward(x));
    return child("proj_again")->forward(child("proj")->forward(h));
  }
};

// PyTorch lists a module held in two slots once, under its first name (named_modules'
// remove_duplicate, the children memo); the walks listed "dec", "dec.0", "dec.1" and
// "proj_again" too, so the layers built on them counted or converted the module twice.
TEST(ModuleReplace, SharedModuleIsWalkedOnceUnderItsFirstName) {
  manual_seed(0);
  SharedSlots m;
  EXPECT_EQ(module_names(m), (std::vector<std::string>{"", "enc", "enc.0", "enc.1", "proj"}));
  std::vector<std::string> children;
  for (const auto& [name, c] : m.named_children()) children.push_back(name);
  EXPECT_EQ(children, (std::vector<std::string>{"enc", "proj"}));
  EXPECT_EQ(m.children().size(), 2u);
  EXPECT_EQ(m.child_slots().size(), 4u);  // forward chains and lookups still see every slot
  int visited = 0;
  m.apply([&](Module&) { ++visited; });
  EXPECT_EQ(visited, 5);
  // State dicts keep every name, as PyTorch's do, so files written before still load.
  EXPECT_EQ(m.state_dict().keys(),
            (std::vector<std::string>{"enc.0.weight", "enc.0.bias", "dec.0.weight", "dec.0.bias",
                                      "proj.weight", "proj.bias", "proj_again.weight",
                                      "proj_again.bias"}));
  EXPECT_EQ(m.parameter_count(), 2 * (16 + 4));
  // named_modules(false) lists every slot path, as state dict keys do: what user-given layer
  // names are resolved against (--quant-ignore, fp8_exclude), so either name finds the layer.
  std::vector<std::string> every;
  for (const auto& [name, mod] : m.named_modules(/*remove_duplicate=*/false)) every.push_back(name);
  EXPECT_EQ(every, (std::vector<std::string>{"", "enc", "enc.0", "enc.1", "dec", "dec.0", "dec.1",
                                             "proj", "proj_again"}));
  EXPECT_EQ(modules_with_a_name(m, [](const std::string& q) { return q == "dec.0"; }),
            (std::unordered_set<const Module*>{&m.get_submodule("enc.0")}));
}

// A shared module is replaced once and every slot that held it gets the same replacement: the
// factory ran for "proj_again" too (a second wrapper around the same weights, calls split
// between them) and the slots stopped sharing one module.
TEST(ModuleReplace, SharedModuleGetsOneReplacementInEverySlot) {
  manual_seed(0);
  SharedSlots m;
  const Tensor x = randn({3, 4});
  const Tensor before = m.forward(x);
  const auto keys = m.state_dict().keys();
  std::map<std::string, int> counts;
  EXPECT_EQ(wrap_linears(m, counts), 2);
  EXPECT_EQ(counts.size(), 2u);
  EXPECT_TRUE(counts.count("enc.0") == 1 && counts.count("proj") == 1);
  EXPECT_EQ(m.child("proj"), m.child("proj_again"));
  EXPECT_EQ(m.child("enc"), m.child("dec"));
  EXPECT_NE(dynamic_cast<CountingLinear*>(m.child("proj_again").get()), nullptr);
  const Tensor after = m.forward(x);
  EXPECT_EQ(max(abs(sub(after, before))).item(), 0.0);
  EXPECT_EQ(counts["enc.0"], 2);  // the shared block runs twice per forward
  EXPECT_EQ(counts["proj"], 2);
  EXPECT_EQ(m.state_dict().keys(), keys);
  EXPECT_NO_THROW(m.load_state_dict(m.state_dict()));
}

}  // namespace
}  // namespace mantissa
