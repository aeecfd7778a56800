#pragma once
// ImageClassifier: the TrainModule behind `mantissa train`. It wraps any nn::Module that maps
// a batch of images to class logits, trains it with cross-entropy and the chosen optimizer
// (AdamW by default), and collects the
// per-epoch numbers of TrainMetrics (train loss/accuracy, test loss/accuracy from validation,
// epoch time without validation).
#include <array>
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "mantissa/models/train_metrics.h"
#include "mantissa/optim/optimizer_factory.h"
#include "mantissa/train/train_module.h"

namespace mantissa::models {

class ImageClassifier : public train::TrainModule {
 public:
  // metrics: where per-epoch numbers go (must outlive the module). loss_multiplier: test hook
  // multiplying the loss of global step s (null: none).
  ImageClassifier(std::shared_ptr<nn::Module> net, optim::OptimizerChoice optimizer,
                  TrainMetrics* metrics, std::function<double(int64_t)> loss_multiplier = nullptr,
                  bool quiet = true, int64_t schedule_steps = 0,
                  std::string lr_schedule = "cosine");

  // The metrics it logs during fit (train_loss, val_loss, val_acc; test_* only in a test
  // pass): what a ModelCheckpoint or EarlyStopping monitor may name.
  static const std::vector<std::string>& fit_metric_names();

  // Calls whatever module is in the "net" slot (a precision plugin may have replaced it).
  Tensor forward(const Tensor& input) override { return child("net")->forward(input); }
  Tensor training_step(const data::Example& batch, int64_t batch_idx) override;
  void validation_step(const data::Example& batch, int64_t batch_idx) override;
  train::OptimizerConfig configure_optimizers() override;

  void on_train_epoch_start() override;
  void on_train_epoch_end() override;
  void on_validation_start() override;
  void on_validation_epoch_start() override;
  void on_validation_epoch_end() override;
  void on_validation_end() override;
  // A test pass (Trainer::test): the validation's sums over its batches, logged as test_loss
  // and test_acc (`mantissa train`'s final evaluation when --limit-test-batches reads other
  // batches than a validation, recipes/image_run.cpp).
  void test_step(const data::Example& batch, int64_t batch_idx) override {
    validation_step(batch, batch_idx);
  }
  void on_test_epoch_start() override { on_validation_epoch_start(); }
  void on_test_epoch_end() override;
  void on_test_end() override;
  // The per-epoch history (and the current epoch's running sums) travel in the checkpoint,
  // so a resumed run reports the whole run.
  // Under ddp the saved running sums are the whole job's (summed over the ranks here), and rank
  // 0 alone takes them back on resume, so the epoch's end sums them once.
  void on_before_save_checkpoint() override;
  void on_save_checkpoint(nlohmann::json& state) const override;
  void on_load_checkpoint(const nlohmann::json& state) override;

  const nn::Module& net() const { return *child("net"); }
  // The last validation pass: its global step (unset before the first) and results.
  std::optional<int64_t> last_validation_step() const { return last_val_step_; }
  double last_val_loss() const { return last_val_loss_; }
  double last_val_acc() const { return last_val_acc_; }
  // The last test pass's loss and accuracy (unset before one, or when it read no example).
  std::optional<double> last_test_loss() const { return last_test_loss_; }
  std::optional<double> last_test_acc() const { return last_test_acc_; }
  // The allocator's high-water marks so far: over training steps only, and over everything
  // (validation passes run with batches of 1000 and can exceed a training step's peak).
  int64_t training_peak_bytes() const;
  int64_t overall_peak_bytes() const;
  // The epoch in progress, which no epoch end recorded (a run interrupted inside it): this
  // rank's samples so far and its training seconds (validation passes excluded).
  struct EpochInProgress {
    int64_t samples = 0;
    double seconds = 0;
  };
  EpochInProgress epoch_in_progress() const;

 private:
  using Clock = std::chrono::steady_clock;

  optim::OptimizerChoice optimizer_;
  TrainMetrics* metrics_;
  std::function<double(int64_t)> loss_multiplier_;
  bool quiet_;
  // --lr-schedule: "cosine" / "onecycle" over schedule_steps_ optimizer steps (> 0),
  // "plateau" (ReduceLROnPlateau on val_loss, per epoch), "constant".
  int64_t schedule_steps_;
  std::string lr_schedule_;
  // Training epoch accumulators (finite losses only: 16-mixed may see skipped inf steps).
  double loss_sum_ = 0;
  int64_t loss_count_ = 0, correct_ = 0, seen_ = 0;
  bool epoch_open_ = false;  // between on_train_epoch_start and on_train_epoch_end
  // loss_sum_, loss_count_, correct_, seen_ over every rank, for the checkpoint being saved.
  std::array<double, 4> job_epoch_sums_{};
  // Validation accumulators: summed loss and correct predictions over the whole set.
  double val_loss_sum_ = 0;
  int64_t val_correct_ = 0, val_seen_ = 0;
  double last_val_loss_ = 0, last_val_acc_ = 0;
  std::optional<int64_t> last_val_step_;
  std::optional<double> last_test_loss_, last_test_acc_;
  // Adds the validation accumulators up over the ranks (each validated its own shard).
  void sum_val_over_ranks();
  Clock::time_point epoch_start_, val_start_;
  double val_seconds_ = 0;
  // Set by on_load_checkpoint from a mid-epoch checkpoint: the next on_train_epoch_start
  // continues the restored sums instead of clearing them.
  bool resumed_mid_epoch_ = false;
  // Whether the training epoch in progress has validated (not with check_val_every_n_epoch
  // leaving it out); the epoch's end records its test numbers only then.
  bool validated_in_epoch_ = false;
  // Set by on_load_checkpoint when the history's last entry is the partial epoch the resumed
  // run finishes: the epoch's end replaces it.
  bool replaces_last_epoch_ = false;
  double resumed_epoch_seconds_ = 0;
  // Peaks before each validation pass (which resets the allocator's mark when it ends).
  int64_t train_peak_bytes_ = 0, overall_peak_bytes_ = 0;
};

}  // namespace mantissa::models
