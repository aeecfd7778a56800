#include "mantissa/models/image_classifier.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "mantissa/mantissa.h"
#include "mantissa/models/module_state_json.h"
#include "mantissa/train/report/metric_text.h"
#include "mantissa/train/trainer.h"

namespace mantissa::models {
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

const std::vector<std::string>& ImageClassifier::fit_metric_names() {
  // What training_step and on_validation_epoch_end below log.
  static const std::vector<std::string> names = {"train_loss", "val_loss", "val_acc"};
  return names;
}

ImageClassifier::ImageClassifier(std::shared_ptr<nn::Module> net, optim::OptimizerChoice optimizer,
                                 TrainMetrics* metrics,
                                 std::function<double(int64_t)> loss_multiplier, bool quiet,
                                 int64_t schedule_steps, std::string lr_schedule)
    : TrainModule("ImageClassifier"),
      optimizer_(std::move(optimizer)),
      metrics_(metrics),
      loss_multiplier_(std::move(loss_multiplier)),
      quiet_(quiet),
      schedule_steps_(schedule_steps),
      lr_schedule_(std::move(lr_schedule)) {
  register_module("net", std::move(net));
}

Tensor ImageClassifier::training_step(const data::Example& batch, int64_t batch_idx) {
  Tensor logits = precision_forward(batch.input);
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
  Tensor logits = precision_forward(batch.input);
  val_loss_sum_ += cross_entropy(logits, batch.target, {.reduction = Reduction::kSum}).item();
  val_correct_ += count_correct(logits, batch.target);
  val_seen_ += batch.target.numel();
}

train::OptimizerConfig ImageClassifier::configure_optimizers() {
  // Over the whole module, so parameter names (--optim-bits-32) read as in the model summary
  // and the checkpoint: "net.0.weight". The net is its only child with parameters.
  std::shared_ptr<optim::Optimizer> optimizer = optim::make_optimizer(optimizer_, *this);
  train::OptimizerConfig config{optimizer, {}};
  if (lr_schedule_ == "cosine" && schedule_steps_ > 0) {
    config.lr_schedulers.push_back(
        {std::make_shared<optim::CosineAnnealingLR>(*optimizer, schedule_steps_), "step", 1});
  } else if (lr_schedule_ == "onecycle" && schedule_steps_ > 0) {
    // --lr is the peak; the cycle starts at lr / 25 (torch's default div_factor).
    config.lr_schedulers.push_back(
        {std::make_shared<optim::OneCycleLR>(*optimizer, optimizer->lr(), schedule_steps_), "step",
         1});
  } else if (lr_schedule_ == "plateau") {
    // A tenth of the lr after two epochs without a better test loss (strict = false: a run
    // without validation keeps its lr).
    optim::ReduceLROnPlateau::Options p;
    p.patience = 2;
    config.lr_schedulers.push_back(
        {std::make_shared<optim::ReduceLROnPlateau>(*optimizer, p), "epoch", 1, "val_loss", false});
  }
  return config;
}

void ImageClassifier::on_train_epoch_start() {
  epoch_open_ = true;
  val_seconds_ = 0;
  validated_in_epoch_ = false;
  epoch_start_ = Clock::now();
  if (resumed_mid_epoch_) {
    // The epoch's time so far counts (as if this run had trained those batches).
    resumed_mid_epoch_ = false;
    epoch_start_ -= std::chrono::duration_cast<Clock::duration>(
        std::chrono::duration<double>(resumed_epoch_seconds_));
    return;
  }
  loss_sum_ = 0;
  loss_count_ = correct_ = seen_ = 0;
}

namespace {
// Names this module in errors about its checkpoint state.
constexpr const char* kOwner = "ImageClassifier";
}  // namespace

void ImageClassifier::on_before_save_checkpoint() {
  std::vector<double> sums = {loss_sum_, static_cast<double>(loss_count_),
                              static_cast<double>(correct_), static_cast<double>(seen_)};
  trainer().strategy().sum_over_ranks(sums);
  std::copy(sums.begin(), sums.end(), job_epoch_sums_.begin());
}

void ImageClassifier::on_save_checkpoint(nlohmann::json& state) const {
  if (metrics_ != nullptr) {
    const TrainMetrics& m = *metrics_;
    state["train_loss"] = doubles_to_json(m.train_loss);
    state["train_accuracy"] = doubles_to_json(m.train_accuracy);
    state["test_loss"] = doubles_to_json(m.test_loss);
    state["test_accuracy"] = doubles_to_json(m.test_accuracy);
    state["epoch_seconds"] = doubles_to_json(m.epoch_seconds);
    state["epoch_samples_per_second"] = doubles_to_json(m.epoch_samples_per_second);
  }
  // The whole job's running sums of the epoch in progress (a mid-epoch checkpoint), as
  // on_before_save_checkpoint summed them over the ranks (counts are exact in a double).
  state["epoch_loss_sum"] = job_epoch_sums_[0];
  state["epoch_loss_count"] = static_cast<int64_t>(job_epoch_sums_[1]);
  state["epoch_correct"] = static_cast<int64_t>(job_epoch_sums_[2]);
  state["epoch_seen"] = static_cast<int64_t>(job_epoch_sums_[3]);
  state["epoch_seconds_so_far"] = seconds_between(epoch_start_, Clock::now()) - val_seconds_;
}

void ImageClassifier::on_load_checkpoint(const nlohmann::json& state) {
  if (state.empty()) return;  // a checkpoint from before the history was saved
  // Everything is read and checked first; only then does anything change.
  std::vector<std::vector<double>> history;
  // Losses (cross-entropy), times and speeds are >= 0, accuracies in [0, 1]: a damaged value
  // went on into the run's metrics (a test accuracy of -1 in --metrics-json).
  for (const char* key : {"train_loss", "train_accuracy", "test_loss", "test_accuracy",
                          "epoch_seconds", "epoch_samples_per_second"}) {
    const bool accuracy = std::string(key).ends_with("accuracy");
    history.push_back(doubles_from_json(state, key, kOwner, 0.0, accuracy ? 1.0 : HUGE_VAL));
  }
  for (const auto& h : history) {
    MANTISSA_CHECK(h.size() == history[0].size(), "checkpoint",
                   "ImageClassifier state: the per-epoch histories have different lengths");
  }
  const double loss_sum = number_from_json<double>(state, "epoch_loss_sum", 0.0, kOwner);
  const int64_t loss_count = number_from_json<int64_t>(state, "epoch_loss_count", 0, kOwner);
  const int64_t seen = number_from_json<int64_t>(state, "epoch_seen", 0, kOwner);
  const int64_t correct = number_from_json<int64_t>(state, "epoch_correct", 0, kOwner, seen);
  const double seconds = number_from_json<double>(state, "epoch_seconds_so_far", -1e300, kOwner);
  if (metrics_ != nullptr) {
    TrainMetrics& m = *metrics_;
    m.train_loss = history[0];
    m.train_accuracy = history[1];
    m.test_loss = history[2];
    m.test_accuracy = history[3];
    m.epoch_seconds = history[4];
    m.epoch_samples_per_second = history[5];
    // The latest validation (epochs that check_val_every_n_epoch left out have none).
    for (size_t e = m.test_loss.size(); e-- > 0;) {
      if (std::isnan(m.test_loss[e])) continue;
      last_val_loss_ = m.test_loss[e];
      last_val_acc_ = m.test_accuracy[e];
      break;
    }
    // A checkpoint of an epoch that max_steps cut short (or saved after such a fit) already
    // holds that epoch's partial numbers; the resumed run finishes the epoch, whose numbers
    // then replace them (appended a second time, they would count one epoch more than the run
    // had).
    replaces_last_epoch_ = static_cast<int64_t>(m.train_loss.size()) > trainer().current_epoch() &&
                           trainer().batches_in_epoch() > 0 &&
                           trainer().batches_in_epoch() < trainer().num_training_batches();
  }
  // The saved sums are the job's: rank 0 carries them on, the other ranks start from zero, so
  // the epoch's end (a sum over the ranks) counts them once.
  const bool carries = trainer().strategy().is_global_zero();
  loss_sum_ = carries ? loss_sum : 0.0;
  loss_count_ = carries ? loss_count : 0;
  correct_ = carries ? correct : 0;
  seen_ = carries ? seen : 0;
  resumed_mid_epoch_ = trainer().batches_in_epoch() > 0 &&
                       trainer().batches_in_epoch() < trainer().num_training_batches();
  resumed_epoch_seconds_ = std::max(0.0, seconds);
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
  // The sanity check's few batches before training are no validation of the run's weights (the
  // Trainer discards their metrics): a run without steps reported their accuracy as final.
  if (trainer().sanity_checking()) return;
  sum_val_over_ranks();
  if (val_seen_ == 0) return;
  validated_in_epoch_ = true;
  last_val_loss_ = val_loss_sum_ / static_cast<double>(val_seen_);
  last_val_acc_ = static_cast<double>(val_correct_) / static_cast<double>(val_seen_);
  last_val_step_ = trainer().global_step();
  log("val_loss", last_val_loss_, /*prog_bar=*/true);
  log("val_acc", last_val_acc_, /*prog_bar=*/true);
}

void ImageClassifier::sum_val_over_ranks() {
  // Under ddp each rank validated its own part of the set (docs/distributed.md): the job's
  // sums, so every rank reports (and its callbacks monitor) the whole set's loss and accuracy.
  std::vector<double> sums = {val_loss_sum_, static_cast<double>(val_correct_),
                              static_cast<double>(val_seen_)};
  trainer().strategy().sum_over_ranks(sums);
  val_loss_sum_ = sums[0];
  val_correct_ = static_cast<int64_t>(sums[1]);
  val_seen_ = static_cast<int64_t>(sums[2]);
}

void ImageClassifier::on_test_epoch_end() {
  sum_val_over_ranks();
  if (val_seen_ == 0) return;
  last_test_loss_ = val_loss_sum_ / static_cast<double>(val_seen_);
  last_test_acc_ = static_cast<double>(val_correct_) / static_cast<double>(val_seen_);
  log("test_loss", *last_test_loss_);
  log("test_acc", *last_test_acc_);
}

void ImageClassifier::on_test_end() {
  overall_peak_bytes_ = std::max(overall_peak_bytes_, max_memory_allocated());
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

ImageClassifier::EpochInProgress ImageClassifier::epoch_in_progress() const {
  if (!epoch_open_) return {};
  return {seen_, seconds_between(epoch_start_, Clock::now()) - val_seconds_};
}

void ImageClassifier::on_train_epoch_end() {
  epoch_open_ = false;
  if (metrics_ == nullptr) return;
  // The whole job's epoch: under ddp each rank trained its own shard, so the loss sums and
  // counts are summed over the ranks (every rank gets here after the same batches).
  std::vector<double> sums = {loss_sum_, static_cast<double>(loss_count_),
                              static_cast<double>(correct_), static_cast<double>(seen_)};
  trainer().strategy().sum_over_ranks(sums);
  const double loss_count = sums[1];
  const double seen = sums[3];
  if (seen == 0) return;
  // Epoch time without the validation passes, as the loop before the Trainer measured it.
  const double secs = seconds_between(epoch_start_, Clock::now()) - val_seconds_;
  TrainMetrics& m = *metrics_;
  if (replaces_last_epoch_) {
    replaces_last_epoch_ = false;
    for (auto* v : {&m.train_loss, &m.train_accuracy, &m.test_loss, &m.test_accuracy,
                    &m.epoch_seconds, &m.epoch_samples_per_second}) {
      if (!v->empty()) v->pop_back();
    }
  }
  m.train_loss.push_back(loss_count > 0 ? sums[0] / loss_count : NAN);
  m.train_accuracy.push_back(sums[2] / seen);
  // An epoch without validation (check_val_every_n_epoch) has no test numbers: NaN (null in
  // the metrics JSON), not the previous validation's (or 0 before the first).
  m.test_loss.push_back(validated_in_epoch_ ? last_val_loss_ : NAN);
  m.test_accuracy.push_back(validated_in_epoch_ ? last_val_acc_ : NAN);
  m.epoch_seconds.push_back(secs);
  m.epoch_samples_per_second.push_back(seen / secs);  // the whole job's throughput
  if (!quiet_) {
    const auto scaler = trainer().precision_plugin().loss_scale_state();
    fmt::print("epoch {}/{}  loss {}  train acc {:.4f}  {:.0f} samples/s{}{}\n",
               trainer().current_epoch() + 1, m.epochs, train::metric_text(m.train_loss.back()),
               m.train_accuracy.back(), m.epoch_samples_per_second.back(),
               validated_in_epoch_ ? fmt::format("  test loss {}  test acc {:.4f}",
                                                 train::metric_text(last_val_loss_), last_val_acc_)
                                   : "",
               scaler ? fmt::format("  loss scale {:g}  skipped steps {}", scaler->scale,
                                    scaler->skipped_steps)
                      : "");
    std::fflush(stdout);
  }
}

}  // namespace mantissa::models
