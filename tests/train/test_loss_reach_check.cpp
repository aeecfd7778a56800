// The first training step's check that the loss can train the model (src/train/
// loss_reach_check.h): a forward that calls layers through member pointers, after a precision
// plugin or replace_modules put new modules in their slots, is stopped with the cause instead
// of training nothing; a partly bypassed model is warned about; a model with everything frozen
// is refused; and a loss that also reaches the input (adversarial training) passes.
#include <gtest/gtest.h>

#include "mantissa/core/warning.h"
#include "mantissa/mantissa.h"
#include "mantissa/train/trainer.h"
#include "support/test_util.h"

namespace mantissa::train {
namespace {

using mantissa::testing::expect_error;

// PyTorch-style: the layers are typed members, and forward calls the members, not the slots.
// `slot_for_fc2` makes forward call fc2 through its slot (a model only partly written that way).
class MemberNet : public TrainModule {
 public:
  explicit MemberNet(bool slot_for_fc2 = false, bool input_grad = false)
      : TrainModule("MemberNet"), slot_for_fc2_(slot_for_fc2), input_grad_(input_grad) {
    fc1 = register_module("fc1", std::make_shared<nn::Linear>(64, 64));
    fc2 = register_module("fc2", std::make_shared<nn::Linear>(64, 3));
  }
  Tensor forward(const Tensor& x) override {
    const Tensor h = relu(fc1->forward(x));
    return slot_for_fc2_ ? child("fc2")->forward(h) : fc2->forward(h);
  }
  Tensor training_step(const data::Example& b, int64_t) override {
    Tensor x = b.input;
    if (input_grad_) x = x.detach().set_requires_grad(true);  // an adversarial step's input
    return cross_entropy(forward(x), b.target);
  }
  OptimizerConfig configure_optimizers() override {
    return {std::make_shared<optim::AdamW>(parameters(), 1e-3), {}, {}};
  }
  std::shared_ptr<nn::Linear> fc1, fc2;

 private:
  bool slot_for_fc2_, input_grad_;
};

data::DataLoader loader() {
  Generator gen(3);
  auto set = std::make_shared<data::TensorDataset>(randn({16, 64}, kFloat32, &gen),
                                                   randint(0, 3, {16}, kInt64, &gen));
  return data::DataLoader(set, 8);
}

TrainerOptions options(const std::string& precision) {
  TrainerOptions o;
  o.precision = precision;
  o.max_steps = 2;
  o.enable_progress_bar = false;
  o.enable_checkpointing = false;
  o.enable_model_summary = false;
  return o;
}

// Puts a new Linear of the same shape in every Linear's slot, as a plugin would.
void replace_linears(nn::Module& m) {
  nn::replace_modules(
      m, [](const std::string&, nn::Module& mod) { return mod.name() == "Linear"; },
      [](const std::string&, std::shared_ptr<nn::Module> old) -> std::shared_ptr<nn::Module> {
        const auto& lin = dynamic_cast<const nn::Linear&>(*old);
        return std::make_shared<nn::Linear>(lin.weight.size(1), lin.weight.size(0));
      });
}

TEST(LossReachCheck, AQuantizedModelCalledThroughMembersIsStoppedWithTheCause) {
  // nf4 swaps fc1 and fc2 for Linear4bit in their slots; forward still runs the fp32 Linears,
  // so the loss reaches their weights (outside the model now) and none of the 4-bit layers'
  // trainable biases: every step would have changed nothing.
  MemberNet m;
  Trainer t(options("nf4"));
  auto l = loader();
  expect_error([&] { t.fit(m, l); },
               {"[Trainer] the loss of the first training step (precision 'nf4') depends on none "
                "of the 2 parameters that train (fc1.bias, fc2.bias), but on 4 other tensor(s) "
                "that require grad ([64, 64], ",
                "call the module in the slot (child(\"fc1\")->forward(x))"});
  EXPECT_EQ(t.global_step(), 0);
}

TEST(LossReachCheck, ReplacedModulesCalledThroughMembersAreStoppedIn32True) {
  MemberNet m;
  replace_linears(m);
  Trainer t(options("32-true"));
  auto l = loader();
  expect_error([&] { t.fit(m, l); },
               {"the loss of the first training step depends on none of the 4 parameters that "
                "train (fc1.weight, fc1.bias, fc2.weight, fc2.bias), but on 4 other tensor(s)",
                "member pointers"});
}

TEST(LossReachCheck, APartlyBypassedModelIsWarnedAboutAndTrains) {
  MemberNet m(/*slot_for_fc2=*/true);
  replace_linears(m);
  const WarningRecorder warnings;
  Trainer t(options("32-true"));
  auto l = loader();
  t.fit(m, l);
  EXPECT_EQ(t.global_step(), 2);
  bool found = false;
  for (const std::string& w : warnings.messages())
    found |=
        w.find(
            "depends on none of 2 parameter(s) of the model (fc1.weight, fc1.bias) but "
            "on 2 tensor(s) that require grad outside it ([64, 64], [64])") != std::string::npos;
  EXPECT_TRUE(found) << "no warning naming fc1";
}

TEST(LossReachCheck, FP8LayersBypassedThroughMembersAreStoppedUnderTransformerEngine) {
  // fp8::Linear keeps the old layer's weight tensor, so the loss reaches the parameters; the
  // plugin sees that no FP8 layer ran (the step would have been plain bf16).
  MemberNet m;
  Trainer t(options("transformer-engine"));
  auto l = loader();
  expect_error([&] { t.fit(m, l); },
               {"[TransformerEnginePrecision] none of the 2 FP8 layers ran in the first training "
                "step (fc1, fc2): forward calls the layers they replaced through member pointers",
                "which run in bfloat16 without FP8"});
  EXPECT_EQ(t.global_step(), 0);
}

TEST(LossReachCheck, OneFP8LayerBypassedIsWarnedAbout) {
  MemberNet m(/*slot_for_fc2=*/true);
  const WarningRecorder warnings;
  Trainer t(options("transformer-engine"));
  auto l = loader();
  t.fit(m, l);
  EXPECT_EQ(t.global_step(), 2);
  bool found = false;
  for (const std::string& w : warnings.messages())
    found |= w.find(
                 "TransformerEnginePrecision: 1 of the 2 FP8 layers did not run in the first "
                 "training step (fc1)") != std::string::npos;
  EXPECT_TRUE(found);
}

TEST(LossReachCheck, EverythingFrozenIsRefusedBeforeTheFirstStep) {
  MemberNet m;
  for (Tensor p : m.parameters()) p.requires_grad_(false);
  Trainer t(options("32-true"));
  auto l = loader();
  expect_error([&] { t.fit(m, l); },
               "nothing to train: no parameter of MemberNet and none of the 4 tensors its "
               "optimizer holds requires grad (all frozen)");
}

TEST(LossReachCheck, ALossThatAlsoReachesTheInputTrainsWithoutAWord) {
  MemberNet m(/*slot_for_fc2=*/false, /*input_grad=*/true);
  const WarningRecorder warnings;
  Trainer t(options("32-true"));
  auto l = loader();
  t.fit(m, l);
  EXPECT_EQ(t.global_step(), 2);
  for (const std::string& w : warnings.messages())
    EXPECT_EQ(w.find("first training step"), std::string::npos) << w;
}

}  // namespace
}  // namespace mantissa::train
