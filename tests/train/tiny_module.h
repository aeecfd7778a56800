#pragma once
// A tiny classifier and data set for Trainer tests: 4 features, 3 classes, 32 examples, a
// Linear-ReLU-(Dropout)-Linear net. Knobs let tests skip steps, blow up losses, swap the
// optimizer and record hook calls.
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "mantissa/mantissa.h"
#include "mantissa/optim/adam8bit.h"
#include "mantissa/train/trainer.h"

namespace mantissa::train::testing {

inline std::shared_ptr<data::TensorDataset> tiny_dataset(int64_t n = 32, uint64_t seed = 123) {
  Generator gen(seed);
  return std::make_shared<data::TensorDataset>(randn({n, 4}, kFloat32, &gen),
                                               randint(0, 3, {n}, kInt64, &gen));
}

// The loaders most Trainer tests share: tiny_dataset() in shuffled batches of 8 (4 training
// batches per epoch), and 16 other examples in 2 validation batches.
struct TinyLoaders {
  data::DataLoader train{tiny_dataset(), 8, /*shuffle=*/true, 5};
  data::DataLoader val{tiny_dataset(16, 77), 8};
};

struct TinyOptions {
  double lr = 0.1;
  bool adamw = false;
  bool adamw8bit = false;  // optim::AdamW8bit (refuses a step over a non-finite gradient)
  double dropout = 0;
  // Returns true for batches whose training_step returns no loss.
  std::function<bool(int64_t global_step)> skip;
  // Multiplies the loss of a global step (forced overflow / NaN).
  std::function<double(int64_t global_step)> loss_multiplier;
  // Global steps whose loss stays finite while the first layer's weight gradient is NaN.
  std::function<bool(int64_t global_step)> nan_gradient;
  // Extra schedulers over the optimizer.
  std::function<std::vector<LRSchedulerConfig>(optim::Optimizer&)> schedulers;
  // Builds the optimizer instead of the choices above (a test's own optimizer).
  std::function<std::shared_ptr<optim::Optimizer>(std::vector<Tensor>)> optimizer;
  std::vector<std::string>* events = nullptr;  // hook names, prefixed "module:"
};

class TinyModule : public TrainModule {
 public:
  explicit TinyModule(TinyOptions o = {}) : TrainModule("TinyModule"), o_(std::move(o)) {}

  void configure_model() override {
    if (net_) return;
    net_ = std::make_shared<nn::Sequential>();
    net_->push_back(std::make_shared<nn::Linear>(4, 8));
    net_->push_back(std::make_shared<nn::ReLU>());
    if (o_.dropout > 0) net_->push_back(std::make_shared<nn::Dropout>(o_.dropout));
    net_->push_back(std::make_shared<nn::Linear>(8, 3));
    register_module("net", net_);
    record("configure_model");
  }

  Tensor training_step(const data::Example& batch, int64_t batch_idx) override {
    record("training_step");
    const int64_t step = trainer().global_step();
    if (o_.skip && o_.skip(step)) return Tensor();
    Tensor loss = cross_entropy(net_->forward(batch.input), batch.target);
    if (o_.loss_multiplier) loss = mul(loss, o_.loss_multiplier(step));
    if (o_.nan_gradient && o_.nan_gradient(step)) {
      // 0 * sqrt(w - w) is 0, and its gradient 0 * (1 / (2 sqrt(0))) = 0 * inf is NaN.
      // A copy: named_parameters() returns a temporary list (a reference into it dangled).
      const Tensor w = net_->named_parameters().front().second;
      loss = add(loss, mul(sum(sqrt(sub(w, w.detach()))), 0.0));
    }
    log("train_loss", loss.item());
    return loss;
  }

  void validation_step(const data::Example& batch, int64_t batch_idx) override {
    record("validation_step");
    log("val_loss", cross_entropy(net_->forward(batch.input), batch.target).item());
  }

  void test_step(const data::Example& batch, int64_t batch_idx) override {
    log("test_loss", cross_entropy(net_->forward(batch.input), batch.target).item());
  }

  OptimizerConfig configure_optimizers() override {
    record("configure_optimizers");
    OptimizerConfig c;
    if (o_.optimizer) {
      c.optimizer = o_.optimizer(parameters());
    } else if (o_.adamw8bit) {
      c.optimizer = std::make_shared<optim::AdamW8bit>(parameters());
    } else if (o_.adamw) {
      optim::AdamOptions a = optim::adamw_defaults();
      a.lr = o_.lr;
      c.optimizer = std::make_shared<optim::AdamW>(parameters(), a);
    } else {
      c.optimizer = std::make_shared<optim::SGD>(parameters(), o_.lr);
    }
    if (o_.schedulers) c.lr_schedulers = o_.schedulers(*c.optimizer);
    return c;
  }

  void on_fit_start() override { record("on_fit_start"); }
  void on_fit_end() override { record("on_fit_end"); }
  void on_train_start() override { record("on_train_start"); }
  void on_train_end() override { record("on_train_end"); }
  void on_train_epoch_start() override { record("on_train_epoch_start"); }
  void on_train_epoch_end() override { record("on_train_epoch_end"); }
  void on_train_batch_start(const data::Example&, int64_t) override {
    record("on_train_batch_start");
  }
  void on_train_batch_end(const Tensor&, const data::Example&, int64_t) override {
    record("on_train_batch_end");
  }
  void on_validation_start() override { record("on_validation_start"); }
  void on_validation_end() override { record("on_validation_end"); }
  void on_validation_epoch_start() override { record("on_validation_epoch_start"); }
  void on_validation_epoch_end() override { record("on_validation_epoch_end"); }
  void on_before_zero_grad(optim::Optimizer&) override { record("on_before_zero_grad"); }
  void on_before_backward(const Tensor&) override { record("on_before_backward"); }
  void on_after_backward() override { record("on_after_backward"); }
  void on_before_optimizer_step(optim::Optimizer&) override { record("on_before_optimizer_step"); }

  std::shared_ptr<nn::Sequential> net_;

 private:
  void record(const std::string& hook) {
    if (o_.events) o_.events->push_back("module:" + hook);
  }
  TinyOptions o_;
};

// Records every callback hook as "callback:<name>".
class RecordingCallback : public Callback {
 public:
  explicit RecordingCallback(std::vector<std::string>* events) : events_(events) {}
  void on_fit_start(Trainer&, TrainModule&) override { rec("on_fit_start"); }
  void on_fit_end(Trainer&, TrainModule&) override { rec("on_fit_end"); }
  void on_train_start(Trainer&, TrainModule&) override { rec("on_train_start"); }
  void on_train_end(Trainer&, TrainModule&) override { rec("on_train_end"); }
  void on_train_epoch_start(Trainer&, TrainModule&) override { rec("on_train_epoch_start"); }
  void on_train_epoch_end(Trainer&, TrainModule&) override { rec("on_train_epoch_end"); }
  void on_train_batch_start(Trainer&, TrainModule&, const data::Example&, int64_t) override {
    rec("on_train_batch_start");
  }
  void on_train_batch_end(Trainer&, TrainModule&, const Tensor&, const data::Example&,
                          int64_t) override {
    rec("on_train_batch_end");
  }
  void on_validation_start(Trainer&, TrainModule&) override { rec("on_validation_start"); }
  void on_validation_end(Trainer&, TrainModule&) override { rec("on_validation_end"); }
  void on_validation_epoch_start(Trainer&, TrainModule&) override {
    rec("on_validation_epoch_start");
  }
  void on_validation_epoch_end(Trainer&, TrainModule&) override { rec("on_validation_epoch_end"); }
  void on_before_zero_grad(Trainer&, TrainModule&, optim::Optimizer&) override {
    rec("on_before_zero_grad");
  }
  void on_before_backward(Trainer&, TrainModule&, const Tensor&) override {
    rec("on_before_backward");
  }
  void on_after_backward(Trainer&, TrainModule&) override { rec("on_after_backward"); }
  void on_before_optimizer_step(Trainer&, TrainModule&, optim::Optimizer&) override {
    rec("on_before_optimizer_step");
  }

 private:
  void rec(const std::string& hook) { events_->push_back("callback:" + hook); }
  std::vector<std::string>* events_;
};

// Calls fn at chosen hooks with the trainer (to snapshot state or save checkpoints).
class LambdaCallback : public Callback {
 public:
  std::function<void(Trainer&, int64_t batch_idx)> batch_end;
  std::function<void(Trainer&)> before_optimizer_step;
  std::function<void(Trainer&, const Tensor&)> before_backward;
  std::function<void(Trainer&)> epoch_end;
  void on_train_batch_end(Trainer& t, TrainModule&, const Tensor&, const data::Example&,
                          int64_t b) override {
    if (batch_end) batch_end(t, b);
  }
  void on_before_optimizer_step(Trainer& t, TrainModule&, optim::Optimizer&) override {
    if (before_optimizer_step) before_optimizer_step(t);
  }
  void on_before_backward(Trainer& t, TrainModule&, const Tensor& loss) override {
    if (before_backward) before_backward(t, loss);
  }
  void on_train_epoch_end(Trainer& t, TrainModule&) override {
    if (epoch_end) epoch_end(t);
  }
};

inline TrainerOptions quiet_options(const std::string& precision = "32-true") {
  TrainerOptions o;
  o.precision = precision;
  o.accelerator = "cpu";
  o.max_epochs = 1;
  o.enable_checkpointing = false;
  o.enable_progress_bar = false;
  return o;
}

// Every parameter of a module, in order, widened to float (for exact before/after comparisons).
inline std::vector<float> flat_params(const nn::Module& m) {
  std::vector<float> out;
  for (const auto& p : m.parameters()) {
    auto v = p.to(kFloat32).contiguous().to_vector<float>();
    out.insert(out.end(), v.begin(), v.end());
  }
  return out;
}

}  // namespace mantissa::train::testing
