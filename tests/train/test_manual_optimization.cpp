// Manual optimisation and several optimizers in a TrainModule (Lightning's
// automatic_optimization = False): equal to automatic optimisation when it does the same,
// several optimizers stepped and checkpointed, loss scaling and clipping through the plugin,
// and clear errors for what manual optimisation does not allow.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>

#include "mantissa/optim/grad_scaler.h"
#include "mantissa/train/checkpoint/checkpoint.h"
#include "tiny_module.h"

namespace mantissa::train::testing {
namespace {

namespace fs = std::filesystem;

struct ManualOptions {
  double lr0 = 0.1, lr1 = 0.1;
  bool two_optimizers = false;  // one optimizer per Linear layer
  bool adamw = false;
  double clip = 0;                               // > 0: clip_gradients(norm) before each step
  double loss_multiplier = 1;                    // inf: force a non-finite loss on every step
  std::vector<double>* clipped_norms = nullptr;  // grad norm after clipping, per step
  std::vector<bool>* stepped = nullptr;          // what manual_step returned
  bool epoch_scheduler = false;                  // a StepLR(1, 0.5) at the epoch interval
  bool step_scheduler_by_hand = false;           // ... which on_train_epoch_end steps
  std::vector<double>* epoch_end_lrs = nullptr;  // the lr at each epoch's end, after that
};

// The TinyModule's net, trained by hand: zero_grad, manual_backward, (clip), manual_step.
class ManualModule : public TrainModule {
 public:
  explicit ManualModule(ManualOptions o = {}) : TrainModule("ManualModule"), o_(o) {
    automatic_optimization = false;
  }

  void configure_model() override {
    if (net_) return;
    net_ = std::make_shared<nn::Sequential>();
    net_->push_back(std::make_shared<nn::Linear>(4, 8));
    net_->push_back(std::make_shared<nn::ReLU>());
    net_->push_back(std::make_shared<nn::Linear>(8, 3));
    register_module("net", net_);
  }

  Tensor training_step(const data::Example& batch, int64_t) override {
    Tensor loss = cross_entropy(net_->forward(batch.input), batch.target);
    if (o_.loss_multiplier != 1) loss = mul(loss, o_.loss_multiplier);
    for (const auto& opt : optimizers()) opt->zero_grad();
    manual_backward(loss);
    for (const auto& opt : optimizers()) {
      if (o_.clip > 0) {
        clip_gradients(*opt, o_.clip, "norm");
        if (o_.clipped_norms) o_.clipped_norms->push_back(grad_norm(*opt));
      }
      const bool stepped = manual_step(*opt);
      if (o_.stepped) o_.stepped->push_back(stepped);
    }
    log("train_loss", loss.item());
    return loss;
  }

  void on_train_epoch_end() override {
    if (o_.step_scheduler_by_hand) lr_schedulers()[0].scheduler->step();
    if (o_.epoch_end_lrs) o_.epoch_end_lrs->push_back(optimizers()[0]->lr());
  }

  OptimizerConfig configure_optimizers() override {
    OptimizerConfig c;
    auto make = [&](std::vector<Tensor> params, double lr) -> std::shared_ptr<optim::Optimizer> {
      if (o_.adamw) {
        optim::AdamOptions a = optim::adamw_defaults();
        a.lr = lr;
        return std::make_shared<optim::AdamW>(std::move(params), a);
      }
      return std::make_shared<optim::SGD>(std::move(params), lr);
    };
    if (o_.two_optimizers) {
      c.optimizers = {make(child("net")->child("0")->parameters(), o_.lr0),
                      make(child("net")->child("2")->parameters(), o_.lr1)};
    } else {
      c.optimizer = make(parameters(), o_.lr0);
    }
    if (o_.epoch_scheduler)
      c.lr_schedulers.push_back({std::make_shared<optim::StepLR>(*c.optimizer, 1, 0.5)});
    return c;
  }

  static double grad_norm(const optim::Optimizer& opt) {
    double s = 0;
    for (const auto& p : opt.parameters()) {
      for (float g : p.grad().to(kFloat32).contiguous().to_vector<float>()) s += double(g) * g;
    }
    return std::sqrt(s);
  }

  std::shared_ptr<nn::Sequential> net_;

 private:
  ManualOptions o_;
};

std::vector<float> params_of(const nn::Module& m, const std::string& child) {
  return flat_params(*m.child("net")->child(child));
}

TEST(ManualOptimization, OneOptimizerMatchesAutomaticOptimizationExactly) {
  for (const char* precision : {"32-true", "16-mixed"}) {
    SCOPED_TRACE(precision);
    data::DataLoader loader(tiny_dataset(), 8, /*shuffle=*/true, 7);
    TrainerOptions o = quiet_options(precision);
    o.max_epochs = 2;
    o.seed = 3;
    Trainer automatic(o);
    TinyModule reference;
    automatic.fit(reference, loader);

    Trainer manual(o);
    ManualModule module;
    manual.fit(module, loader);
    EXPECT_EQ(flat_params(module), flat_params(reference));
    EXPECT_EQ(manual.global_step(), automatic.global_step());
    EXPECT_EQ(manual.step_losses(), automatic.step_losses());
  }
}

// As in Lightning, the Trainer steps no scheduler under manual optimisation: the module does
// (were the Trainer to step epoch-interval schedulers too, the second run below would halve
// the lr twice per epoch).
TEST(ManualOptimization, SchedulersAreTheModulesToStep) {
  for (bool by_hand : {false, true}) {
    SCOPED_TRACE(by_hand ? "stepped by the module" : "not stepped");
    data::DataLoader loader(tiny_dataset(), 8);
    TrainerOptions o = quiet_options("32-true");
    o.max_epochs = 3;
    Trainer trainer(o);
    std::vector<double> lrs;
    ManualModule module(
        {.epoch_scheduler = true, .step_scheduler_by_hand = by_hand, .epoch_end_lrs = &lrs});
    trainer.fit(module, loader);
    ASSERT_EQ(lrs.size(), 3u);
    if (by_hand) {
      EXPECT_EQ(lrs, (std::vector<double>{0.05, 0.025, 0.0125}));
    } else {
      EXPECT_EQ(lrs, (std::vector<double>{0.1, 0.1, 0.1}));
    }
  }
}

TEST(ManualOptimization, TwoOptimizersEachStepTheirOwnParameters) {
  data::DataLoader loader(tiny_dataset(), 8);
  TrainerOptions o = quiet_options();
  o.seed = 1;
  Trainer trainer(o);
  // The first optimizer has lr 0: its layer must not move; the second's must.
  ManualModule module({.lr0 = 0.0, .lr1 = 0.5, .two_optimizers = true});
  {
    auto scope = trainer.init_module();
    module.configure_model();
  }
  const auto first_before = params_of(module, "0");
  const auto second_before = params_of(module, "2");
  trainer.fit(module, loader);
  ASSERT_EQ(trainer.optimizers().size(), 2u);
  EXPECT_EQ(params_of(module, "0"), first_before);
  EXPECT_NE(params_of(module, "2"), second_before);
  // Every manual_step is a global step; the history keeps one loss per step.
  EXPECT_EQ(trainer.global_step(), 2 * loader.size());
  ASSERT_EQ(trainer.step_losses().size(), static_cast<size_t>(trainer.global_step()));
  EXPECT_EQ(trainer.step_losses()[0], trainer.step_losses()[1]);
  EXPECT_TRUE(std::isfinite(trainer.step_losses()[0]));
}

TEST(ManualOptimization, TwoOptimizersResumeBitExactFromACheckpoint) {
  const fs::path dir = fs::temp_directory_path() / "mantissa_manual_resume";
  fs::remove_all(dir);
  fs::create_directories(dir);
  data::DataLoader loader(tiny_dataset(), 8, /*shuffle=*/true, 5);
  const ManualOptions mo{.lr0 = 0.01, .lr1 = 0.02, .two_optimizers = true, .adamw = true};
  TrainerOptions o = quiet_options();
  o.seed = 9;
  o.max_epochs = 2;
  Trainer straight(o);
  ManualModule whole(mo);
  straight.fit(whole, loader);

  TrainerOptions first_half = o;
  first_half.max_epochs = 1;
  Trainer first(first_half);
  ManualModule part(mo);
  first.fit(part, loader);
  const std::string path = (dir / "one_epoch.safetensors").string();
  first.save_checkpoint(path);
  // Both optimizers' moments are in the file.
  const CheckpointContents c = load_checkpoint_file(path);
  bool has0 = false, has1 = false;
  for (const auto& [name, t] : c.tensors) {
    has0 |= name.rfind("optimizer.0.state.", 0) == 0;
    has1 |= name.rfind("optimizer.1.state.", 0) == 0;
  }
  EXPECT_TRUE(has0 && has1);

  Trainer second(o);
  ManualModule resumed(mo);
  second.fit(resumed, loader, nullptr, path);
  EXPECT_EQ(flat_params(resumed), flat_params(whole));
  EXPECT_EQ(second.step_losses(), straight.step_losses());

  // A module with one optimizer cannot take that checkpoint.
  Trainer other(o);
  ManualModule single({.adamw = true});
  try {
    other.fit(single, loader, nullptr, path);
    FAIL() << "expected a mismatch error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("2 optimizer(s)"), std::string::npos) << e.what();
  }
  fs::remove_all(dir);
}

TEST(ManualOptimization, ClippingUnderLossScalingSeesTrueGradients) {
  std::vector<double> norms;
  std::vector<bool> stepped;
  data::DataLoader loader(tiny_dataset(), 8);
  Trainer trainer(quiet_options("16-mixed"));
  ManualModule module({.lr0 = 0.1, .clip = 0.01, .clipped_norms = &norms, .stepped = &stepped});
  trainer.fit(module, loader);
  ASSERT_EQ(norms.size(), static_cast<size_t>(loader.size()));
  // The scale is 65536: clipping scaled gradients would leave norms far above 0.01 after
  // unscaling, or (clipped while scaled) far below it.
  for (double n : norms) EXPECT_NEAR(n, 0.01, 1e-5);
  for (bool s : stepped) EXPECT_TRUE(s);
}

TEST(ManualOptimization, NonFiniteGradientsSkipTheStepUnderLossScaling) {
  std::vector<bool> stepped;
  data::DataLoader loader(tiny_dataset(), 8);
  Trainer trainer(quiet_options("16-mixed"));
  ManualModule module({.loss_multiplier = INFINITY, .stepped = &stepped});
  {
    auto scope = trainer.init_module();
    module.configure_model();
  }
  const auto before = flat_params(module);
  trainer.fit(module, loader);
  ASSERT_EQ(stepped.size(), static_cast<size_t>(loader.size()));
  for (bool s : stepped) EXPECT_FALSE(s);
  EXPECT_EQ(flat_params(module), before);
  EXPECT_EQ(trainer.precision_plugin().scaler()->skipped_steps(), loader.size());
  EXPECT_LT(trainer.precision_plugin().scaler()->get_scale(), 65536.0);
}

TEST(ManualOptimization, ClearErrors) {
  data::DataLoader loader(tiny_dataset(), 8);
  auto message_of = [&](TrainerOptions o, TrainModule& m) -> std::string {
    try {
      Trainer t(o);
      t.fit(m, loader);
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  };
  {
    // Several optimizers with automatic optimisation.
    ManualModule m({.two_optimizers = true});
    m.automatic_optimization = true;
    EXPECT_NE(message_of(quiet_options(), m).find("needs manual optimisation"), std::string::npos);
  }
  {
    TrainerOptions o = quiet_options();
    o.accumulate_grad_batches = 2;
    ManualModule m;
    EXPECT_NE(message_of(o, m).find("accumulate_grad_batches=2 is not supported with manual"),
              std::string::npos);
  }
  {
    TrainerOptions o = quiet_options();
    o.gradient_clip_val = 1.0;
    ManualModule m;
    EXPECT_NE(message_of(o, m).find("call clip_gradients(optimizer, value)"), std::string::npos);
  }
  {
    // manual_backward from an automatically optimised module.
    Trainer t(quiet_options());
    TinyModule m;
    t.fit(m, loader);
    try {
      m.manual_backward(scalar_tensor(1.0, kFloat32));
      FAIL() << "expected an error";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("automatic_optimization = false"), std::string::npos)
          << e.what();
    }
  }
  {
    // manual_step outside training_step.
    Trainer t(quiet_options());
    ManualModule m;
    t.fit(m, loader);
    try {
      m.manual_step(*t.optimizer());
      FAIL() << "expected an error";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("only be called inside training_step"),
                std::string::npos)
          << e.what();
    }
  }
}

}  // namespace
}  // namespace mantissa::train::testing
