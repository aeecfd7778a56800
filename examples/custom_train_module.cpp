// A custom TrainModule a user can copy: an MLP classifier for Fashion-MNIST trained by the
// Trainer in bf16 mixed precision (or the precision named on the command line: every one
// trains, 16-true with AdamW's state in float32), with a warm-up + cosine LR schedule, gradient
// clipping, validation metrics and a callback.
// Run: build/example_custom_train_module [max_steps] [precision]
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <vector>

#include "mantissa/mantissa.h"
#include "mantissa/train/trainer.h"

using namespace mantissa;

class FashionClassifier : public train::TrainModule {
 public:
  FashionClassifier(int64_t max_steps) : TrainModule("FashionClassifier"), max_steps_(max_steps) {}

  // Layers are built here so the Trainer's precision plugin decides their dtype (bf16-true
  // creates bf16 weights directly).
  void configure_model() override {
    net_ = register_module("net", std::make_shared<nn::Sequential>());
    net_->push_back(std::make_shared<nn::Linear>(784, 256));
    net_->push_back(std::make_shared<nn::ReLU>());
    net_->push_back(std::make_shared<nn::Dropout>(0.1));
    net_->push_back(std::make_shared<nn::Linear>(256, 10));
  }

  Tensor training_step(const data::Example& batch, int64_t batch_idx) override {
    Tensor loss = cross_entropy(net_->forward(batch.input), batch.target);
    log("train_loss", loss.item(), /*prog_bar=*/true);
    return loss;  // return Tensor() to skip this batch's optimizer step
  }

  void validation_step(const data::Example& batch, int64_t batch_idx) override {
    Tensor logits = net_->forward(batch.input);
    log("val_loss", cross_entropy(logits, batch.target).item());
    log("val_acc", sum(eq(argmax(logits, 1), batch.target)).item() /
                       static_cast<double>(batch.target.numel()));
  }

  train::OptimizerConfig configure_optimizers() override {
    optim::AdamOptions adam = optim::adamw_defaults();
    adam.lr = 2e-3;
    // Under 16-true the parameters are float16, and so would be AdamW's moments by default:
    // float16 cannot hold the small second moments nor eps 1e-8, and the run diverges within a
    // few steps. Keep the moments in float32, as `mantissa train` does (docs/half_precision.md).
    const std::vector<Tensor> params = parameters();
    adam.fp32_state = std::any_of(params.begin(), params.end(),
                                  [](const Tensor& p) { return p.dtype() == kFloat16; });
    auto opt = std::make_shared<optim::AdamW>(params, adam);
    // 10 linear warm-up steps, then a cosine decay to 10% over the rest, stepped per optimizer
    // step. Schedulers use closed forms and do not chain: compose them in one LambdaLR.
    const int64_t total = std::max<int64_t>(max_steps_, 11), warmup = 10;
    auto factor = [total, warmup](int64_t step) {
      if (step < warmup) return 0.1 + 0.9 * static_cast<double>(step) / warmup;
      const double t = static_cast<double>(step - warmup) / static_cast<double>(total - warmup);
      return 0.1 + 0.9 * 0.5 * (1 + std::cos(3.141592653589793 * std::min(t, 1.0)));
    };
    return {opt, {{std::make_shared<optim::LambdaLR>(*opt, factor), "step", 1}}};
  }

 private:
  int64_t max_steps_;
  std::shared_ptr<nn::Sequential> net_;
};

// Prints the loss every 20 steps.
class PrintLoss : public train::Callback {
 public:
  void on_train_batch_end(train::Trainer& trainer, train::TrainModule&, const Tensor& loss,
                          const data::Example&, int64_t) override {
    if (loss.defined() && trainer.global_step() % 20 == 0) {
      fmt::print("step {} loss {:.4f} lr {:.2e}\n", trainer.global_step(), loss.item(),
                 trainer.optimizer()->lr());
    }
  }
};

int main(int argc, char** argv) {
  // Idle OpenMP threads sleep soon, so a busy machine does not slow training down (may start the
  // program again with GOMP_SPINCOUNT set; nothing before this line survives that).
  bound_openmp_spinning(argv);
  const int64_t max_steps = argc > 1 ? std::atoll(argv[1]) : 400;
  try {
    train::TrainerOptions o;
    o.precision = argc > 2 ? argv[2] : "bf16-mixed";
    o.max_steps = max_steps;
    o.gradient_clip_val = 1.0;
    o.seed = 0;
    o.limit_val_batches = train::BatchLimit::batches(4);  // 2,000 test images
    o.enable_checkpointing = false;
    o.callbacks.push_back(std::make_shared<PrintLoss>());
    train::Trainer trainer(o);

    auto train_set = std::make_shared<data::FashionMNIST>("", /*train=*/true);
    auto test_set = std::make_shared<data::FashionMNIST>("", /*train=*/false);
    data::DataLoader train_loader(train_set, 128, /*shuffle=*/true, /*seed=*/0);
    data::DataLoader val_loader(test_set, 500);

    FashionClassifier model(max_steps);
    trainer.fit(model, train_loader, &val_loader);
    const auto metrics = trainer.validate(model, val_loader);
    fmt::print("after {} steps: val_loss {:.4f} val_acc {:.4f}\n", trainer.global_step(),
               metrics.at("val_loss"), metrics.at("val_acc"));
  } catch (const Error& e) {
    fmt::print(stderr, "{}\n", e.what());
    return 1;
  }
  return 0;
}
