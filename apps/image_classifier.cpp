#include "image_classifier.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "mantissa/mantissa.h"
#include "mantissa/train/trainer.h"

namespace mantissa::app {
namespace {

int64_t count_correct(const Tensor& logits, const Tensor& target) {
  NoGradGuard no_grad;
  return static_cast<int64_t>(sum(eq(argmax(logits, 1), target)).item());
}

double seconds_between(std::chrono::steady_clock::time_point a,
                       std::chrono::steady_clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

}  // namespace

ImageClassifier::ImageClassifier(std::shared_ptr<nn::Module> net, OptimizerChoice optimizer,
                                 TrainMetrics* metrics,
                                 std::function<double(int64_t)> loss_multiplier, bool quiet,
                                 int64_t cosine_steps)
    : TrainModule("ImageClassifier"),
      optimizer_(std::move(optimizer)),
      metrics_(metrics),
      loss_multiplier_(std::move(loss_multiplier)),
      quiet_(quiet),
      cosine_steps_(cosine_steps) {
  register_module("net", std::move(net));
}

Tensor ImageClassifier::training_step(const data::Example& batch, int64_t batch_idx) {
  Tensor logits = forward(batch.input);
  Tensor loss = cross_entropy(logits, batch.target);
  if (loss_multiplier_) loss = mul(loss, loss_multiplier_(trainer().global_step()));
  const double value = loss.item();
  const int64_t bs = batch.target.numel();
  if (std::isfinite(value)) {
    loss_sum_ += value * static_cast<double>(bs);
    loss_count_ += bs;
  }
  correct_ += count_correct(logits, batch.target);
  seen_ += bs;
  log("train_loss", value);  // the progress bar shows the step loss already
  return loss;
}

void ImageClassifier::validation_step(const data::Example& batch, int64_t batch_idx) {
  Tensor logits = forward(batch.input);
  val_loss_sum_ += cross_entropy(logits, batch.target, {.reduction = Reduction::kSum}).item();
  val_correct_ += count_correct(logits, batch.target);
  val_seen_ += batch.target.numel();
}

train::OptimizerConfig ImageClassifier::configure_optimizers() {
  std::shared_ptr<optim::Optimizer> optimizer = make_optimizer(optimizer_, *child("net"));
  train::OptimizerConfig config{optimizer, {}};
  if (cosine_steps_ > 0) {
    config.lr_schedulers.push_back(
        {std::make_shared<optim::CosineAnnealingLR>(*optimizer, cosine_steps_), "step", 1});
  }
  return config;
}

void ImageClassifier::on_train_epoch_start() {
  loss_sum_ = 0;
  loss_count_ = correct_ = seen_ = 0;
  val_seconds_ = 0;
  epoch_start_ = Clock::now();
}

void ImageClassifier::on_validation_start() {
  val_start_ = Clock::now();
  train_peak_bytes_ = std::max(train_peak_bytes_, max_memory_allocated());
}

void ImageClassifier::on_validation_epoch_start() {
  val_loss_sum_ = 0;
  val_correct_ = val_seen_ = 0;
}

void ImageClassifier::on_validation_epoch_end() {
  if (val_seen_ == 0) return;
  last_val_loss_ = val_loss_sum_ / static_cast<double>(val_seen_);
  last_val_acc_ = static_cast<double>(val_correct_) / static_cast<double>(val_seen_);
  last_val_step_ = trainer().global_step();
  log("val_loss", last_val_loss_, /*prog_bar=*/true);
  log("val_acc", last_val_acc_, /*prog_bar=*/true);
}

void ImageClassifier::on_validation_end() {
  val_seconds_ += seconds_between(val_start_, Clock::now());
  overall_peak_bytes_ = std::max(overall_peak_bytes_, max_memory_allocated());
  reset_peak_memory_stats();  // so training_peak_bytes() sees the training steps only
}

int64_t ImageClassifier::training_peak_bytes() const {
  return std::max(train_peak_bytes_, max_memory_allocated());
}

int64_t ImageClassifier::overall_peak_bytes() const {
  return std::max(overall_peak_bytes_, max_memory_allocated());
}

void ImageClassifier::on_train_epoch_end() {
  if (metrics_ == nullptr || seen_ == 0) return;
  // Epoch time without the validation passes, as the loop before the Trainer measured it.
  const double secs = seconds_between(epoch_start_, Clock::now()) - val_seconds_;
  TrainMetrics& m = *metrics_;
  m.train_loss.push_back(loss_count_ ? loss_sum_ / static_cast<double>(loss_count_) : NAN);
  m.train_accuracy.push_back(static_cast<double>(correct_) / static_cast<double>(seen_));
  m.test_loss.push_back(last_val_loss_);
  m.test_accuracy.push_back(last_val_acc_);
  m.epoch_seconds.push_back(secs);
  m.epoch_samples_per_second.push_back(static_cast<double>(seen_) / secs);
  if (!quiet_) {
    amp::GradScaler* scaler = trainer().precision_plugin().scaler();
    fmt::print(
        "epoch {}/{}  loss {:.4f}  train acc {:.4f}  {:.0f} samples/s  test loss {:.4f}  "
        "test acc {:.4f}{}\n",
        trainer().current_epoch() + 1, m.epochs, m.train_loss.back(), m.train_accuracy.back(),
        m.epoch_samples_per_second.back(), last_val_loss_, last_val_acc_,
        scaler ? fmt::format("  loss scale {:g}  skipped steps {}", scaler->get_scale(),
                             scaler->skipped_steps())
               : "");
    std::fflush(stdout);
  }
}

}  // namespace mantissa::app
