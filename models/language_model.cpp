#include "mantissa/models/language_model.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <numbers>
#include <utility>
#include <vector>

#include "mantissa/autograd/grad_mode.h"
#include "mantissa/core/error.h"
#include "mantissa/data/token_blocks.h"
#include "mantissa/models/module_state_json.h"
#include "mantissa/ops/elementwise.h"
#include "mantissa/ops/reduce.h"
#include "mantissa/optim/adamw.h"
#include "mantissa/optim/warmup_cosine_lr.h"
#include "mantissa/train/step_items.h"
#include "mantissa/train/trainer.h"

namespace mantissa::models {
namespace {

// Targets that count in the loss (not data::kIgnoreIndex), counted on the host (a batch on a GPU
// is copied back: its few int64 targets).
int64_t trained_targets(const Tensor& target) {
  const Tensor t = (target.is_cuda() ? target.to(kCPU) : target).contiguous();
  const auto* p = t.data<int64_t>();
  return std::count_if(p, p + t.numel(), [](int64_t v) { return v != data::kIgnoreIndex; });
}

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace

const std::vector<std::string>& LanguageModel::fit_metric_names() {
  // What training_step and on_validation_epoch_end below log.
  static const std::vector<std::string> names = {"train_loss", "val_loss", "val_ppl", "val_bpb"};
  return names;
}

LanguageModel::LanguageModel(std::shared_ptr<GPT> gpt, LanguageModelOptions options)
    : LanguageModel(std::shared_ptr<nn::Module>(std::move(gpt)), std::move(options)) {}

LanguageModel::LanguageModel(std::shared_ptr<nn::Module> net, LanguageModelOptions options)
    : TrainModule("LanguageModel"), net_(std::move(net)), options_(std::move(options)) {
  MANTISSA_CHECK(net_ != nullptr, "LanguageModel", "the network is null");
  MANTISSA_CHECK(std::isfinite(options_.lr) && options_.lr > 0, "LanguageModel",
                 "lr must be positive, got {}", options_.lr);
  MANTISSA_CHECK(options_.warmup_steps >= 0 && options_.total_steps >= 0, "LanguageModel",
                 "warmup_steps and total_steps must not be negative, got {} and {}",
                 options_.warmup_steps, options_.total_steps);
  MANTISSA_CHECK(options_.min_lr_ratio >= 0 && options_.min_lr_ratio <= 1, "LanguageModel",
                 "min_lr_ratio must be in [0, 1], got {}", options_.min_lr_ratio);
  // The network's slots become this module's, in its order, under the same names.
  MANTISSA_CHECK(net_->named_buffers(/*recurse=*/false).empty(), "LanguageModel",
                 "the network holds buffers of its own, which LanguageModel cannot share");
  for (const auto& [name, child] : net_->child_slots()) register_module(name, child);
  for (const auto& [name, p] : net_->named_parameters(/*recurse=*/false)) {
    register_parameter(name, p, p.requires_grad());
  }
}

GPT& LanguageModel::gpt() {
  sync_slots();
  auto* gpt = dynamic_cast<GPT*>(net_.get());
  MANTISSA_CHECK(gpt != nullptr, "LanguageModel", "the network is not the byte-level GPT");
  return *gpt;
}

nn::Module& LanguageModel::net() {
  sync_slots();
  return *net_;
}

void LanguageModel::sync_slots() {
  for (const auto& [name, child] : child_slots()) {
    if (net_->child(name) != child) net_->replace_child(name, child);
  }
}

void LanguageModel::train(bool on) {
  nn::Module::train(on);
  net_->train(on);
}

Tensor LanguageModel::forward(const Tensor& tokens) {
  sync_slots();
  return net_->forward(tokens);
}

Tensor LanguageModel::training_step(const data::Example& batch, int64_t batch_idx) {
  if (!options_.token_weighted) {
    Tensor loss = training_loss(batch);
    on_training_loss(loss.item());
    return loss;
  }
  // The batch's share of the step's loss: its summed token losses times world / (the step's
  // trained targets), so the shares of every batch and rank add up to the step's mean.
  const Tensor logits = precision_forward(batch.input);
  const Tensor loss =
      trained_targets(batch.target) == 0
          ? sum(logits) * 0.0
          : GPT::loss(logits, batch.target, Reduction::kSum) * trainer().item_loss_scale();
  step_loss_ += loss.item();
  // The step's loss is known at its last batch: logged then, once a step (under ddp the
  // Trainer's mean of the ranks' sums is the step's token-weighted mean). A step without a
  // trained target has none: its 0 would pull the logged and printed means down.
  if (trainer().batch_ends_step()) {
    if (!train::step_has_no_items(trainer())) on_training_loss(step_loss_);
    step_loss_ = 0;
  }
  return loss;
}

std::optional<int64_t> LanguageModel::loss_items(const data::Example& batch) {
  if (!options_.token_weighted) return std::nullopt;
  return trained_targets(batch.target);
}

Tensor LanguageModel::training_loss(const data::Example& batch) {
  const Tensor logits = precision_forward(batch.input);
  // A batch of ignored targets only (a long prompt of completion-only data) has no mean: its
  // loss is 0 with zero gradients, not the NaN that the divergence check would stop on.
  if (trained_targets(batch.target) == 0) return sum(logits) * 0.0;
  return GPT::loss(logits, batch.target);
}

void LanguageModel::on_training_loss(double value) {
  if (std::isfinite(value)) {
    interval_loss_sum_ += value;
    ++interval_loss_count_;
  }
  // For the loggers: the progress bar shows the epoch's mean of the same losses.
  log("train_loss", value);
}

// Summed over targets, so a smaller last batch weighs by the bytes it holds: the pass's mean
// is the mean over every validation byte.
void LanguageModel::validation_step(const data::Example& batch, int64_t batch_idx) {
  const int64_t n = trained_targets(batch.target);
  if (n == 0) return;
  eval_loss_sum_ +=
      GPT::loss(precision_forward(batch.input), batch.target).item() * static_cast<double>(n);
  eval_targets_ += n;
}

void LanguageModel::test_step(const data::Example& batch, int64_t batch_idx) {
  validation_step(batch, batch_idx);
}

void LanguageModel::on_validation_epoch_start() {
  eval_loss_sum_ = 0;
  eval_targets_ = 0;
}

void LanguageModel::on_test_epoch_start() { on_validation_epoch_start(); }

void LanguageModel::on_validation_epoch_end() {
  // The sanity check's few batches before training are no validation of the run (the Trainer
  // discards their metrics): they became a history record at step 0 (or, resumed, at the
  // checkpoint's step, where it passed for the final validation).
  if (trainer().sanity_checking()) return;
  sum_eval_over_ranks();
  if (eval_targets_ == 0) return;
  const double loss = eval_loss_sum_ / static_cast<double>(eval_targets_);
  log("val_loss", loss, /*prog_bar=*/true);
  log("val_ppl", std::exp(loss));
  log("val_bpb", loss / std::numbers::ln2);
  // The job's train loss over the interval: under ddp each rank's sums cover its own batches
  // (every rank validates, so every rank gets here together).
  std::vector<double> sums = {interval_loss_sum_, static_cast<double>(interval_loss_count_)};
  trainer().strategy().sum_over_ranks(sums);
  const double train_loss = sums[1] > 0 ? sums[0] / sums[1] : NAN;
  history_.push_back({trainer().global_step(), train_loss, loss});
  interval_loss_sum_ = 0;
  interval_loss_count_ = 0;
}

void LanguageModel::sum_eval_over_ranks() {
  // Under ddp each rank evaluated its own windows (docs/distributed.md): the job's sums, the
  // loss of every window the ranks read together.
  std::vector<double> sums = {eval_loss_sum_, static_cast<double>(eval_targets_)};
  trainer().strategy().sum_over_ranks(sums);
  eval_loss_sum_ = sums[0];
  eval_targets_ = static_cast<int64_t>(sums[1]);
}

void LanguageModel::on_test_epoch_end() {
  sum_eval_over_ranks();
  if (eval_targets_ == 0) return;
  const double loss = eval_loss_sum_ / static_cast<double>(eval_targets_);
  log("test_loss", loss);
  log("test_ppl", std::exp(loss));
  log("test_bpb", loss / std::numbers::ln2);
}

namespace {
// Names this module in errors about its checkpoint state.
constexpr const char* kOwner = "LanguageModel";
}  // namespace

void LanguageModel::on_before_save_checkpoint() {
  std::vector<double> sums = {interval_loss_sum_, static_cast<double>(interval_loss_count_)};
  trainer().strategy().sum_over_ranks(sums);
  std::copy(sums.begin(), sums.end(), job_interval_sums_.begin());
  epoch_so_far_at_save_ = {0.0, 0};
  if (epoch_start_seconds_ < 0) return;  // no epoch open
  double seconds = train_seconds_ - epoch_start_seconds_ + epoch_carried_seconds_;
  int64_t samples = train_samples_ - epoch_start_samples_ + epoch_carried_samples_;
  if (batch_open_) {
    seconds += now_seconds() - batch_start_;
    samples += batch_samples_;
  }
  epoch_so_far_at_save_ = {std::max(0.0, seconds), samples};
}

void LanguageModel::on_save_checkpoint(nlohmann::json& state) const {
  std::vector<double> steps, train_losses, val_losses;
  for (const ValidationRecord& r : history_) {
    steps.push_back(static_cast<double>(r.step));
    train_losses.push_back(r.train_loss);
    val_losses.push_back(r.val_loss);
  }
  state["val_steps"] = doubles_to_json(steps);
  state["val_train_loss"] = doubles_to_json(train_losses);
  state["val_loss"] = doubles_to_json(val_losses);
  state["interval_loss_sum"] = job_interval_sums_[0];
  state["interval_loss_count"] = static_cast<int64_t>(job_interval_sums_[1]);
  // The epochs so far, and the open one's part (its entry counts it when a run resumes inside).
  state["epoch_seconds"] = doubles_to_json(epoch_seconds_);
  state["epoch_samples"] = epoch_samples_;
  state["epoch_seconds_so_far"] = epoch_so_far_at_save_.first;
  state["epoch_samples_so_far"] = epoch_so_far_at_save_.second;
}

void LanguageModel::on_load_checkpoint(const nlohmann::json& state) {
  if (state.empty()) return;  // a checkpoint from before the history was saved
  // Everything is read and checked first; only then does anything change. The ranges are those
  // of ImageClassifier's state: a damaged value went on into the run's curves, its metrics JSON
  // and the loss of the next validation's training interval.
  const std::vector<double> steps = doubles_from_json(state, "val_steps", kOwner);
  // Cross-entropy in nats is never negative (null: a validation whose loss was not finite).
  const std::vector<double> train_losses =
      doubles_from_json(state, "val_train_loss", kOwner, 0.0, HUGE_VAL);
  const std::vector<double> val_losses =
      doubles_from_json(state, "val_loss", kOwner, 0.0, HUGE_VAL);
  MANTISSA_CHECK(train_losses.size() == steps.size() && val_losses.size() == steps.size(),
                 "checkpoint", "{} state: the validation histories have different lengths", kOwner);
  for (size_t i = 0; i < steps.size(); ++i) {
    const double step = steps[i];
    MANTISSA_CHECK(step >= 0 && step <= static_cast<double>(trainer().global_step()) &&
                       step == std::floor(step),
                   "checkpoint",
                   "{} state: field 'module.val_steps' holds {}, not a step of this run (0 to {})",
                   kOwner, step, trainer().global_step());
    // In the order the validations ran (two may share a step when gradients accumulate over
    // batches between them): the curves are drawn in this order, and the run's final validation
    // is skipped when the last record is at its last step.
    MANTISSA_CHECK(i == 0 || step >= steps[i - 1], "checkpoint",
                   "{} state: field 'module.val_steps' goes back from step {} to step {}; the file "
                   "is damaged: resume from an earlier checkpoint",
                   kOwner, steps[i - 1], step);
  }
  // Only finite losses are summed, one per training batch since the last validation; a sum
  // without a count would make the next interval's mean loss up.
  const double loss_sum = number_from_json<double>(state, "interval_loss_sum", 0.0, kOwner);
  const int64_t loss_count =
      number_from_json<int64_t>(state, "interval_loss_count", 0, kOwner, kMaxStateCount);
  MANTISSA_CHECK(
      loss_count > 0 || loss_sum == 0, "checkpoint",
      "{} state: field 'module.interval_loss_sum' is {} but 'module.interval_loss_count' "
      "is 0 (a sum of no losses is 0); the file is damaged: resume from an earlier "
      "checkpoint",
      kOwner, loss_sum);
  // The epochs' seconds and samples (a checkpoint that records none: the resumed run's lists
  // start at the resume).
  std::vector<double> epoch_seconds, epoch_samples;
  double so_far_seconds = 0;
  int64_t so_far_samples = 0;
  if (state.contains("epoch_seconds")) {
    epoch_seconds = doubles_from_json(state, "epoch_seconds", kOwner, 0.0, HUGE_VAL);
    epoch_samples =
        doubles_from_json(state, "epoch_samples", kOwner, 1.0, static_cast<double>(kMaxStateCount));
    MANTISSA_CHECK(epoch_samples.size() == epoch_seconds.size(), "checkpoint",
                   "{} state: fields 'module.epoch_seconds' and 'module.epoch_samples' have "
                   "different lengths; the file is damaged: resume from an earlier checkpoint",
                   kOwner);
    for (double n : epoch_samples) {
      MANTISSA_CHECK(n == std::floor(n), "checkpoint",
                     "{} state: field 'module.epoch_samples' holds {}, not a count of samples",
                     kOwner, n);
    }
    for (double t : epoch_seconds) {
      MANTISSA_CHECK(!std::isnan(t), "checkpoint",
                     "{} state: field 'module.epoch_seconds' holds null, not a time", kOwner);
    }
    so_far_seconds = number_from_json<double>(state, "epoch_seconds_so_far", 0.0, kOwner);
    so_far_samples =
        number_from_json<int64_t>(state, "epoch_samples_so_far", 0, kOwner, kMaxStateCount);
  }
  history_.clear();
  for (size_t i = 0; i < steps.size(); ++i)
    history_.push_back({static_cast<int64_t>(steps[i]), train_losses[i], val_losses[i]});
  epoch_seconds_ = epoch_seconds;
  epoch_samples_.clear();
  epoch_samples_per_second_.clear();
  for (size_t e = 0; e < epoch_seconds.size(); ++e) {
    epoch_samples_.push_back(static_cast<int64_t>(epoch_samples[e]));
    epoch_samples_per_second_.push_back(epoch_seconds[e] > 0 ? epoch_samples[e] / epoch_seconds[e]
                                                             : 0.0);
  }
  // A checkpoint of an epoch that was cut short (--max-steps, early stopping; saved after that
  // fit) holds its part as a closed epoch's entry: a resumed run that trains on in that epoch
  // replaces the entry with the whole epoch's (appended a second time, the lists would count one
  // epoch more than the run had).
  const int64_t epoch = trainer().current_epoch();
  const int64_t batches = trainer().batches_in_epoch();
  replaces_last_epoch_ = so_far_samples == 0 && batches > 0 &&
                         batches < trainer().num_training_batches() &&
                         static_cast<int64_t>(epoch_seconds_.size()) > epoch;
  if (replaces_last_epoch_) {
    so_far_seconds = epoch_seconds_.back();
    so_far_samples = epoch_samples_.back();
  }
  resumed_epoch_ = batches > 0 ? epoch : -1;
  resumed_epoch_seconds_ = so_far_seconds;
  resumed_epoch_samples_ = so_far_samples;
  // The job's sums: rank 0 carries them on, so the next validation's sum over the ranks counts
  // them once.
  const bool carries = trainer().strategy().is_global_zero();
  interval_loss_sum_ = carries ? loss_sum : 0.0;
  interval_loss_count_ = carries ? loss_count : 0;
}

void LanguageModel::on_train_epoch_start() {
  step_loss_ = 0;  // a step an earlier epoch's stop cut short
  epoch_start_seconds_ = train_seconds_;
  epoch_start_samples_ = train_samples_;
  // The epoch a checkpoint was saved inside: what it trained before counts (as if this run had
  // trained those batches).
  const bool resumed_inside = resumed_epoch_ >= 0 && resumed_epoch_ == trainer().current_epoch();
  epoch_carried_seconds_ = resumed_inside ? resumed_epoch_seconds_ : 0.0;
  epoch_carried_samples_ = resumed_inside ? resumed_epoch_samples_ : 0;
  if (resumed_inside && replaces_last_epoch_) {
    epoch_seconds_.pop_back();
    epoch_samples_.pop_back();
    epoch_samples_per_second_.pop_back();
  }
  resumed_epoch_ = -1;
  replaces_last_epoch_ = false;
}

void LanguageModel::on_train_epoch_end() { close_open_epoch(); }

void LanguageModel::close_open_epoch() {
  if (epoch_start_seconds_ < 0) return;
  const double seconds = train_seconds_ - epoch_start_seconds_ + epoch_carried_seconds_;
  const int64_t samples = train_samples_ - epoch_start_samples_ + epoch_carried_samples_;
  epoch_start_seconds_ = -1;
  epoch_carried_seconds_ = 0;
  epoch_carried_samples_ = 0;
  if (samples == 0) return;  // nothing trained in it
  epoch_seconds_.push_back(seconds);
  epoch_samples_.push_back(samples);
  epoch_samples_per_second_.push_back(seconds > 0 ? static_cast<double>(samples) / seconds : 0.0);
}

void LanguageModel::on_train_batch_start(const data::Example& batch, int64_t batch_idx) {
  batch_start_ = now_seconds();
  // The whole job's: under ddp every rank trains a batch like this one in the same time.
  batch_samples_ =
      (batch.target.dim() > 0 ? batch.target.size(0) : 0) * trainer().strategy().world_size();
  batch_open_ = true;
}

void LanguageModel::on_train_batch_end(const Tensor& loss, const data::Example& batch,
                                       int64_t batch_idx) {
  train_seconds_ += now_seconds() - batch_start_;
  train_tokens_ += batch.target.numel() * trainer().strategy().world_size();
  train_samples_ += batch_samples_;
  batch_open_ = false;
}

train::OptimizerConfig LanguageModel::configure_optimizers() {
  sync_slots();
  std::shared_ptr<optim::Optimizer> optimizer;
  if (options_.make_optimizer) {
    optimizer = options_.make_optimizer(*net_);
  } else {
    std::vector<Tensor> params;
    for (const Tensor& p : parameters())
      if (p.requires_grad()) params.push_back(p);
    optimizer = std::make_shared<optim::AdamW>(params, options_.lr, std::pair{0.9, 0.999}, 1e-8,
                                               options_.weight_decay);
  }
  MANTISSA_CHECK(optimizer != nullptr, "LanguageModel", "make_optimizer returned no optimizer");
  auto schedule = std::make_shared<optim::WarmupCosineLR>(
      *optimizer, options_.warmup_steps, options_.total_steps, options_.min_lr_ratio);
  return {optimizer, {{schedule, "step", 1}}};
}

}  // namespace mantissa::models
