// The Trainer's divergence checks: a non-finite loss, gradient or weight stops the run with a
// TrainingDiverged that names the step, the batch, the precision and the parameter to blame,
// and says what to try. Kept apart from the loop (trainer_fit.cpp, trainer_step.cpp), which only
// calls them.
#include <fmt/format.h>

#include <cmath>
#include <optional>
#include <string>
#include <utility>

#include "mantissa/autograd/anomaly_mode.h"
#include "mantissa/core/warning.h"
#include "mantissa/ops/elementwise.h"
#include "mantissa/optim/optimizer.h"
#include "mantissa/train/trainer.h"
#include "train/parameter_range.h"

namespace mantissa::train {
namespace {

constexpr double kFp16Max = 65504.0;  // the largest finite float16

// A non-finite loss as people write it ("NaN", "inf", "-inf"; printf gives "-nan" for some NaNs).
std::string non_finite_name(double v) {
  if (std::isnan(v)) return "NaN";
  return v > 0 ? "inf" : "-inf";
}

// Under float16 parameters an Adam-type optimizer keeps its moments in float16 by default (as
// torch does): exp_avg_sq underflows to 0 and eps 1e-8 rounds to 0 there, so an update divides
// by zero and the run turns NaN within a few steps whatever the learning rate. The messages
// below said "lower the learning rate", which does not help; this names the setting that does.
// "" when no optimizer holds float16 state.
// The first optimizer holding a float16 state buffer (of any name, or only `only`), and that
// buffer's name.
std::optional<std::pair<std::string, std::string>> float16_state(
    const std::vector<const optim::Optimizer*>& optimizers, const std::string& only = "") {
  for (const optim::Optimizer* opt : optimizers) {
    if (opt == nullptr) continue;
    for (const Tensor& p : opt->parameters()) {
      const optim::ParamState* st = p.dtype() == kFloat16 ? opt->state(p) : nullptr;
      if (st == nullptr) continue;
      for (const auto& [name, buffer] : st->buffers) {
        if (buffer.defined() && buffer.dtype() == kFloat16 && (only.empty() || name == only))
          return std::make_pair(std::string(opt->name()), name);
      }
    }
  }
  return std::nullopt;
}

std::string fp16_state_hint(const std::vector<const optim::Optimizer*>& optimizers) {
  const auto held = float16_state(optimizers);
  if (!held) return "";
  return fmt::format(
      ". {} keeps its state ({}) in float16, as the parameters: float16 cannot hold Adam's small "
      "second moments nor eps 1e-8, so updates divide by zero; keep the state in float32 "
      "(AdamOptions::fp32_state or master_weights, docs/half_precision.md)",
      held->first, held->second);
}

std::vector<const optim::Optimizer*> all_optimizers(
    const std::shared_ptr<optim::Optimizer>& first,
    const std::vector<std::shared_ptr<optim::Optimizer>>& rest) {
  std::vector<const optim::Optimizer*> optimizers{first.get()};
  for (const auto& o : rest) optimizers.push_back(o.get());
  return optimizers;
}

}  // namespace

void Trainer::warn_once_if_float16_adam_state() {
  if (checked_float16_state_) return;
  checked_float16_state_ = true;
  // The state exists from the first step on. Without a NaN to report (often the loss only
  // jumps to hundreds and stays finite: the updates are garbage, not infinite), this is all
  // that tells why such a run does not learn.
  const auto held =
      float16_state(all_optimizers(config_.optimizer, config_.optimizers), "exp_avg_sq");
  if (!held) return;
  warn_once(fmt::format(
      "{} keeps its second moments ({}) in float16, as its float16 parameters: float16 cannot "
      "hold them (they underflow) nor eps 1e-8, so its updates become far too large and the run "
      "may diverge or stop learning while the loss stays finite. Keep the state in float32: "
      "AdamOptions::fp32_state = true (or master_weights), docs/half_precision.md",
      held->first, held->second));
}

std::string Trainer::position_in_epoch(int64_t batch) const {
  return batch >= 0 ? fmt::format("epoch {}, batch {} of the epoch", epoch_ + 1, batch + 1)
                    : fmt::format("epoch {}", epoch_ + 1);
}

std::string Trainer::loss_diverged_message(double loss, int64_t batch) const {
  const std::string where = position_in_epoch(batch);
  // The previous step's loss was finite; if the weights are not, that step's gradient or update
  // was the first non-finite value, and "the loss became NaN" would blame the wrong step.
  const ParameterRange r = global_step_ > 0 ? parameter_range(*module_) : ParameterRange{};
  const std::string hint = fp16_state_hint(all_optimizers(config_.optimizer, config_.optimizers));
  if (!r.non_finite_name.empty()) {
    return fmt::format(
               "[Trainer] the weights became non-finite in optimizer step {} ({} holds {}), "
               "although "
               "that step's loss was finite: a non-finite gradient (an op whose backward "
               "overflows, such "
               "as sqrt or log at 0) or an overflowing update; the loss of step {} ({}) is then "
               "{}. "
               "Lower the learning rate, clip gradients (gradient_clip_val, --gradient-clip-val) "
               "or use a wider "
               "precision",
               global_step_, r.non_finite_name, r.non_finite_value, global_step_ + 1, where,
               non_finite_name(loss)) +
           hint;
  }
  return fmt::format(
             "[Trainer] the loss became {} in optimizer step {} ({}) in {}; lower the learning "
             "rate, clip gradients (gradient_clip_val, --gradient-clip-val) or use a wider "
             "precision",
             non_finite_name(loss), global_step_ + 1, where, plugin_->precision()) +
         hint;
}

namespace {

// "the batch's input holds 3 NaN / inf values of 784 (the first at flat index 17)", or "" when
// the tensor is finite (or not floating). Only run once a loss is non-finite.
std::string non_finite_data(const Tensor& t, const char* what) {
  if (!t.defined() || !t.is_floating_point()) return "";
  const std::vector<uint8_t> finite = isfinite(t).to(kUInt8).to_vector<uint8_t>();
  int64_t count = 0, first = -1;
  for (size_t i = 0; i < finite.size(); ++i) {
    if (finite[i] != 0) continue;
    if (first < 0) first = static_cast<int64_t>(i);
    ++count;
  }
  if (count == 0) return "";
  return fmt::format(
      "the batch's {} holds {} NaN / inf value(s) of {} (the first at flat index {})", what, count,
      t.numel(), first);
}

}  // namespace

std::string Trainer::loss_divergence(double loss, const data::Example& example,
                                     int64_t batch) const {
  if (std::isfinite(loss)) return "";
  // Data with NaN in it makes any precision's loss NaN; the usual advice (a lower learning
  // rate, a wider precision) would send the user the wrong way.
  std::string data = non_finite_data(example.input, "input");
  if (data.empty()) data = non_finite_data(example.target, "target");
  if (!data.empty()) {
    return fmt::format(
        "[Trainer] the loss became {} in optimizer step {} ({}) because {}: the data, not the "
        "training, is at fault; fix or filter the data set (or its transform) before training",
        non_finite_name(loss), global_step_ + 1, position_in_epoch(batch), data);
  }
  return plugin_->scaler() == nullptr ? loss_diverged_message(loss, batch)
                                      : scaler_divergence_message(loss);
}

void Trainer::stop_if_any_rank_diverged(const std::string& own) {
  // Under ddp a rank's loss is its own shard's: one rank may see NaN while the others go on to
  // backward and wait for its gradients forever (the job was aborted, exit status 2, and no
  // metrics JSON was written). The ranks agree first, and all stop together.
  int from = 0;
  const std::string first = strategy_->first_message_over_ranks(own, &from);
  if (first.empty()) return;
  if (strategy_->world_size() <= 1) throw TrainingDiverged::on_every_rank(first);
  throw TrainingDiverged::on_every_rank(
      fmt::format("{} (found on rank {} of {})", first, from, strategy_->world_size()));
}

void Trainer::throw_gradient_diverged(const optim::NonFiniteGradient& e, int64_t batch) const {
  std::string name = "a parameter outside the module";
  for (const auto& [n, p] : module_->named_parameters())
    if (p.is_same(e.parameter())) name = "'" + n + "'";
  const std::string where = position_in_epoch(batch);
  // The gradients were averaged over the ranks: every rank refuses this step together.
  throw TrainingDiverged::on_every_rank(fmt::format(
      "[Trainer] the gradient of {} became non-finite in optimizer step {} ({}) in {}, although "
      "the loss was finite; the optimizer refused the step and changed nothing. Look for an op "
      "whose backward overflows (sqrt or log at 0, a division by a tiny value), lower the "
      "learning rate or use a wider precision. ({})",
      name, global_step_ + 1, where, plugin_->precision(), e.what()));
}

void Trainer::check_weights_finite_after_step() const {
  if (global_step_ == 0) return;
  const ParameterRange r = parameter_range(*module_);
  if (r.non_finite_name.empty()) return;
  // The weights are the same on every rank: every rank finds this together.
  throw TrainingDiverged::on_every_rank(fmt::format(
      "[Trainer] the weights became non-finite in optimizer step {} (epoch {}) in {} ({} holds "
      "{}), although the step's loss was finite: the update itself overflowed; lower the "
      "learning rate or clip gradients (gradient_clip_val, --gradient-clip-val)",
      global_step_, epoch_ + 1, plugin_->precision(), r.non_finite_name, r.non_finite_value));
}

void Trainer::check_update_under_anomaly() const {
  // Anomaly detection names the first non-finite value in the order it arose. An update is
  // computed outside the graph, so the forward checks see weights it broke only as inputs of
  // the next step ("an input was already non-finite ... check the batch"). Its gradients were
  // checked in backward; an Adam-type step updates its state first and the weights from it, so
  // per parameter the state is looked at before the weight.
  const auto names = module_->named_parameters();
  auto name_of = [&](const Tensor& p) {
    for (const auto& [n, q] : names)
      if (q.is_same(p)) return "'" + n + "'";
    return std::string("a parameter outside the module");
  };
  for (const optim::Optimizer* opt : all_optimizers(config_.optimizer, config_.optimizers)) {
    if (opt == nullptr) continue;
    for (const Tensor& p : opt->parameters()) {
      if (const optim::ParamState* st = opt->state(p)) {
        for (const auto& [buffer_name, buffer] : st->buffers) {
          const std::string bad = autograd::non_finite_summary(buffer);
          if (bad.empty()) continue;
          throw autograd::AnomalyDetected(fmt::format(
              "[detect_anomaly] optimizer step {} ({}) made its state '{}' of parameter {} "
              "non-finite ({}) in {}, although the gradients were finite: the update "
              "overflowed; lower the learning rate, clip gradients (gradient_clip_val, "
              "--gradient-clip-val) or use a "
              "wider precision",
              global_step_, opt->name(), buffer_name, name_of(p), bad, plugin_->precision()));
        }
      }
      const std::string bad = autograd::non_finite_summary(p);
      if (bad.empty()) continue;
      throw autograd::AnomalyDetected(fmt::format(
          "[detect_anomaly] optimizer step {} ({}) made parameter {} non-finite ({}) in {}, "
          "although the gradients were finite: the update overflowed; lower the learning rate, "
          "clip gradients (gradient_clip_val, --gradient-clip-val) or use a wider precision",
          global_step_, opt->name(), name_of(p), bad, plugin_->precision()));
    }
  }
}

std::string Trainer::scaler_divergence_message(double loss) const {
  // Under a loss scaler a non-finite loss does not stop the run: its step is skipped and the
  // scale drops, which cures gradients that overflowed because of the scale. It cannot cure
  // weights that are themselves non-finite, or beyond what fp16 holds (they become inf in
  // every fp16 forward): every later step would be skipped and the run would end with such
  // weights and exit cleanly. Checked only on these steps, so healthy training pays nothing.
  const ParameterRange r = parameter_range(*module_);
  if (!r.non_finite_name.empty()) {
    return fmt::format(
        "[Trainer] the loss became {} in optimizer step {} (epoch {}) in {} and the weights are no "
        "longer finite "
        "({} holds {}): the loss scaler skips such steps but cannot repair the weights; "
        "lower the learning rate or clip gradients (gradient_clip_val, --gradient-clip-val)",
        non_finite_name(loss), global_step_ + 1, epoch_ + 1, plugin_->precision(),
        r.non_finite_name, r.non_finite_value);
  }
  if (r.largest > kFp16Max) {
    return fmt::format(
        "[Trainer] the loss became {} in optimizer step {} (epoch {}) in {} and the weights have "
        "diverged (|{}| reaches {:g}, beyond float16's {}): every float16 forward overflows, so "
        "the loss scaler would skip every later step; lower the learning rate or clip gradients "
        "(gradient_clip_val)",
        non_finite_name(loss), global_step_ + 1, epoch_ + 1, plugin_->precision(), r.largest_name,
        r.largest, kFp16Max);
  }
  return "";
}

}  // namespace mantissa::train
