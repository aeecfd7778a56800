// nn::ModuleList and nn::ModuleDict: the names their modules' tensors get, iteration, Python-style
// indexing, replacement in place, training through them, and the errors for bad keys and indices.
#include <gtest/gtest.h>

#include "mantissa/core/generator.h"
#include "mantissa/nn/activation.h"
#include "mantissa/nn/linear.h"
#include "mantissa/nn/module_list.h"
#include "mantissa/nn/sequential.h"
#include "mantissa/ops/elementwise.h"
#include "mantissa/ops/loss.h"
#include "mantissa/ops/reduce.h"
#include "mantissa/optim/sgd.h"
#include "support/test_util.h"

namespace mantissa {
namespace {

using nn::Linear;
using nn::Module;
using nn::ModuleDict;
using nn::ModuleList;
using testing::expect_error;

std::vector<std::string> tensor_names(const Module::NamedTensors& nt) {
  std::vector<std::string> out;
  for (const auto& [n, t] : nt) out.push_back(n);
  return out;
}

// A custom model the way a user writes one with the containers: a stack of layers iterated in
// forward, and two heads chosen by key.
class Stack : public Module {
 public:
  explicit Stack(int64_t depth, int64_t width = 16) : Module("Stack") {
    layers = register_module("layers", std::make_shared<ModuleList>());
    for (int64_t i = 0; i < depth; ++i)
      layers->push_back(std::make_shared<Linear>(i == 0 ? 4 : width, width));
    heads = register_module("heads", std::make_shared<ModuleDict>());
    heads->insert("cls", std::make_shared<Linear>(width, 3));
    heads->insert("reg", std::make_shared<Linear>(width, 1, /*bias=*/false));
  }
  Tensor forward(const Tensor& x) override {
    Tensor h = x;
    for (const auto& layer : *layers) h = relu(layer->forward(h));
    return (*heads)["cls"]->forward(h);
  }
  std::shared_ptr<ModuleList> layers;
  std::shared_ptr<ModuleDict> heads;
};

TEST(ModuleContainers, TensorsAreNamedByIndexAndKeyAsInPyTorch) {
  manual_seed(0);
  Stack s(2);
  EXPECT_EQ(tensor_names(s.named_parameters()),
            (std::vector<std::string>{"layers.0.weight", "layers.0.bias", "layers.1.weight",
                                      "layers.1.bias", "heads.cls.weight", "heads.cls.bias",
                                      "heads.reg.weight"}));
  EXPECT_EQ(s.layers->size(), 2u);
  EXPECT_EQ(s.heads->keys(), (std::vector<std::string>{"cls", "reg"}));
  EXPECT_EQ(&s.get_submodule("layers.1"), s.layers->at<Linear>(1).get());
  EXPECT_EQ(&s.get_submodule("heads.reg"), s.heads->at<Linear>("reg").get());
  const std::string printed = s.to_string();
  EXPECT_NE(printed.find("(layers): ModuleList("), std::string::npos) << printed;
  EXPECT_NE(printed.find("(heads): ModuleDict("), std::string::npos) << printed;
  EXPECT_NE(printed.find("(cls): Linear(in_features=16, out_features=3"), std::string::npos)
      << printed;
}

TEST(ModuleContainers, ListIndexesFromEitherEndAndIteratesInOrder) {
  auto a = std::make_shared<Linear>(2, 2);
  auto b = std::make_shared<nn::ReLU>();
  auto c = std::make_shared<Linear>(2, 3);
  ModuleList list{a, b};
  list.extend({c});
  ASSERT_EQ(list.size(), 3u);
  EXPECT_EQ(list[0], a);
  EXPECT_EQ(list[-1], c);
  EXPECT_EQ(list[-3], a);
  std::vector<Module*> seen;
  for (const auto& m : list) seen.push_back(m.get());
  EXPECT_EQ(seen, (std::vector<Module*>{a.get(), b.get(), c.get()}));
  expect_error([&] { (void)list[3]; },
               {"[ModuleList] index 3 is out of range for 3 modules (valid: -3 to 2)"});
  expect_error([&] { (void)list[-4]; }, {"index -4 is out of range"});
  expect_error([&] { (void)list.at<Linear>(1); },
               {"[ModuleList::at] module 1 is a ReLU, not the type this code expects"});
  expect_error([&] { (void)ModuleList()[0]; }, {"index 0 is out of range for 0 modules"});
  // A refused extend adds nothing.
  expect_error(
      [&] {
        list.extend({std::make_shared<nn::ReLU>(), nullptr});
      },
      {"[ModuleList] cannot hold a null module"});
  EXPECT_EQ(list.size(), 3u);
  expect_error(
      [&] {
        list.forward(zeros({1, 2}));
      },
      {"[ModuleList] a ModuleList has no forward", "nn::Sequential"});
}

// nn::Sequential is a module list whose forward chains its modules: range-for, indexing from
// either end, at<M> and the refusal of a null module come with it, its errors naming it.
TEST(ModuleContainers, SequentialIteratesIndexesAndChains) {
  Generator gen(3);
  auto lin = std::make_shared<Linear>(2, 3, true, kFloat32, &gen);
  auto relu = std::make_shared<nn::ReLU>();
  nn::Sequential seq{lin, relu};
  std::vector<Module*> seen;
  for (const auto& m : seq) seen.push_back(m.get());
  EXPECT_EQ(seen, (std::vector<Module*>{lin.get(), relu.get()}));
  EXPECT_EQ(seq[-1], relu);
  EXPECT_EQ(seq.at<Linear>(0), lin);
  EXPECT_FALSE(seq.empty());
  const Tensor x = tensor<float>({1, -2, 3, 0.5f}).reshape({2, 2});
  EXPECT_EQ(seq.forward(x).to_vector<double>(), relu->forward(lin->forward(x)).to_vector<double>());
  expect_error([&] { (void)seq[2]; },
               {"[Sequential] index 2 is out of range for 2 modules (valid: -2 to 1)"});
  expect_error([&] { (void)seq.at<Linear>(1); },
               {"[Sequential::at] module 1 is a ReLU, not the type this code expects"});
  expect_error([&] { seq.push_back(std::shared_ptr<Module>()); },
               {"[Sequential] cannot hold a null module (entry 2 of Sequential)"});
  EXPECT_EQ(seq.size(), 2u);
  EXPECT_TRUE(nn::Sequential().empty());
}

TEST(ModuleContainers, DictKeepsInsertionOrderAndReplacesInPlace) {
  ModuleDict d{{"b", std::make_shared<Linear>(2, 2)}, {"a", std::make_shared<nn::ReLU>()}};
  auto replacement = std::make_shared<Linear>(2, 5);
  EXPECT_EQ(d.insert("b", replacement), replacement);  // replaced, position kept
  d.update({{"c", std::make_shared<nn::GELU>()}});
  EXPECT_EQ(d.keys(), (std::vector<std::string>{"b", "a", "c"}));
  EXPECT_EQ(d["b"], replacement);
  EXPECT_EQ(d.at<Linear>("b")->out_features(), 5);
  EXPECT_TRUE(d.contains("a"));
  EXPECT_FALSE(d.contains("z"));
  ASSERT_EQ(d.values().size(), 3u);
  EXPECT_EQ(d.values()[0], replacement);
  EXPECT_EQ(d.items()[2].first, "c");
  size_t n = 0;
  for (const auto& m : d) n += m != nullptr;
  EXPECT_EQ(n, 3u);
  EXPECT_EQ(tensor_names(d.named_parameters()), (std::vector<std::string>{"b.weight", "b.bias"}));
  expect_error([&] { (void)d["bb"]; },
               {"[ModuleDict] no module under the key \"bb\" (did you mean \"b\"?); the keys are: "
                "\"b\", \"a\", \"c\""});
  expect_error([&] { (void)ModuleDict()["x"]; }, {"the keys are: none"});
  expect_error([&] { d.insert("x.y", std::make_shared<nn::ReLU>()); },
               {"invalid name \"x.y\"", "contain no '.'"});
  expect_error([&] { d.insert("n", std::shared_ptr<Module>()); },
               {"[ModuleDict] cannot hold a null module (key \"n\")"});
  expect_error([&] { (void)d.at<Linear>("a"); }, {"child \"a\" of ModuleDict is a ReLU"});
  expect_error([&] { d.forward(zeros({1, 2})); }, {"[ModuleDict] a ModuleDict has no forward"});
}

TEST(ModuleContainers, ModulesInContainersTrainSaveAndConvert) {
  manual_seed(1);
  Stack s(3);
  Tensor x = randn({8, 4});
  Tensor y = tensor<int64_t>({0, 1, 2, 0, 1, 2, 0, 1}, {8});
  const Tensor w_last = s.layers->at<Linear>(-1)->weight.clone();
  optim::SGD opt(s.parameters(), 0.5);
  Tensor loss0 = cross_entropy(s.forward(x), y);
  loss0.backward();
  // Every layer in the list and the head chosen by key got a gradient; the unused head none.
  for (const auto& layer : *s.layers)
    EXPECT_TRUE(std::static_pointer_cast<Linear>(layer)->weight.grad().defined());
  EXPECT_TRUE(s.heads->at<Linear>("cls")->weight.grad().defined());
  EXPECT_FALSE(s.heads->at<Linear>("reg")->weight.grad().defined());
  opt.step();
  EXPECT_GT(amax(abs(sub(s.layers->at<Linear>(-1)->weight, w_last))).item<double>(), 0.0);
  const double loss1 = cross_entropy(s.forward(x), y).item<double>();
  EXPECT_LT(loss1, loss0.item<double>());

  // The state dict round trip through a second model built the same way.
  manual_seed(2);
  Stack t(3);
  t.load_state_dict(s.state_dict());
  EXPECT_DOUBLE_EQ(cross_entropy(t.forward(x), y).item<double>(), loss1);
  // A model with another depth is refused naming the missing list entry.
  Stack shallow(2);
  expect_error([&] { shallow.load_state_dict(s.state_dict()); }, {"layers.2.weight"});

  t.to(kFloat64);
  EXPECT_EQ(t.layers->at<Linear>(2)->weight.dtype(), kFloat64);
  EXPECT_EQ(t.heads->at<Linear>("reg")->weight.dtype(), kFloat64);
}

}  // namespace
}  // namespace mantissa
