#include "mantissa/optim/lr_scheduler.h"

#include <cmath>
#include <numbers>

#include "mantissa/core/error.h"

namespace mantissa::optim {

LRScheduler::LRScheduler(Optimizer& optimizer) : optimizer_(&optimizer) {
  for (size_t g = 0; g < optimizer.num_param_groups(); ++g) base_lrs_.push_back(optimizer.lr(g));
}

void LRScheduler::initial_step() { step(); }

void LRScheduler::step() {
  ++last_epoch_;
  apply();
}

void LRScheduler::apply() {
  last_lr_.resize(base_lrs_.size());
  for (size_t g = 0; g < base_lrs_.size(); ++g) {
    last_lr_[g] = lr_at(g, last_epoch_);
    optimizer_->set_lr(g, last_lr_[g]);
  }
}

nlohmann::json LRScheduler::state_dict() const {
  nlohmann::json j = hyper_json();
  j["name"] = name();
  j["last_epoch"] = last_epoch_;
  j["base_lrs"] = base_lrs_;
  j["_last_lr"] = last_lr_;
  return j;
}

void LRScheduler::load_state_dict(const nlohmann::json& state) {
  const std::string where = name() + ".load_state_dict";
  MANTISSA_CHECK(state.is_object() && state.contains("name") && state.contains("last_epoch") &&
                     state.contains("base_lrs"),
                 where, "expected an object with name, last_epoch and base_lrs, got {}",
                 state.dump());
  MANTISSA_CHECK(state["name"] == name(), where, "the state belongs to a {}, not a {}",
                 state["name"].dump(), name());
  std::vector<double> base, last_lr;
  int64_t last = 0;
  try {
    base = state["base_lrs"].get<std::vector<double>>();
    last = state["last_epoch"].get<int64_t>();
    last_lr = state.value("_last_lr", std::vector<double>{});
  } catch (const nlohmann::json::exception& e) {
    fail(where, "mistyped base_lrs, last_epoch or _last_lr: {}", e.what());
  }
  MANTISSA_CHECK(base.size() == base_lrs_.size() && last_lr.size() == base.size(), where,
                 "the state has {} param groups, the optimizer {}", base.size(), base_lrs_.size());
  base_lrs_ = std::move(base);
  last_epoch_ = last;
  // Like torch, the optimizer's learning rates are not touched: they come back with the
  // optimizer's own state dict (with several schedulers, the one that ran last set them).
  last_lr_ = std::move(last_lr);
}

void LRScheduler::set_base_lrs(std::vector<double> base_lrs) {
  MANTISSA_CHECK(base_lrs.size() == base_lrs_.size(), name() + ".set_base_lrs",
                 "expected {} base lrs (one per param group), got {}", base_lrs_.size(),
                 base_lrs.size());
  base_lrs_ = std::move(base_lrs);
  apply();
}

StepLR::StepLR(Optimizer& optimizer, int64_t step_size, double gamma)
    : LRScheduler(optimizer), step_size_(step_size), gamma_(gamma) {
  MANTISSA_CHECK(step_size > 0, "StepLR", "step_size must be positive, got {}", step_size);
  initial_step();
}

double StepLR::lr_at(size_t group, int64_t epoch) const {
  return base_lrs()[group] * std::pow(gamma_, static_cast<double>(epoch / step_size_));
}

nlohmann::json StepLR::hyper_json() const { return {{"step_size", step_size_}, {"gamma", gamma_}}; }

CosineAnnealingLR::CosineAnnealingLR(Optimizer& optimizer, int64_t t_max, double eta_min)
    : LRScheduler(optimizer), t_max_(t_max), eta_min_(eta_min) {
  MANTISSA_CHECK(t_max > 0, "CosineAnnealingLR", "T_max must be positive, got {}", t_max);
  initial_step();
}

double CosineAnnealingLR::lr_at(size_t group, int64_t epoch) const {
  const double c =
      std::cos(std::numbers::pi * static_cast<double>(epoch) / static_cast<double>(t_max_));
  return eta_min_ + (base_lrs()[group] - eta_min_) * (1 + c) / 2;
}

nlohmann::json CosineAnnealingLR::hyper_json() const {
  return {{"T_max", t_max_}, {"eta_min", eta_min_}};
}

LinearLR::LinearLR(Optimizer& optimizer, double start_factor, double end_factor,
                   int64_t total_iters)
    : LRScheduler(optimizer),
      start_factor_(start_factor),
      end_factor_(end_factor),
      total_iters_(total_iters) {
  // torch's checks: the start factor cannot be 0 (the lr would start at 0 and the recursive
  // form could not recover), both are at most 1.
  MANTISSA_CHECK(start_factor > 0 && start_factor <= 1, "LinearLR",
                 "start_factor must be in (0, 1], got {}", start_factor);
  MANTISSA_CHECK(end_factor >= 0 && end_factor <= 1, "LinearLR",
                 "end_factor must be in [0, 1], got {}", end_factor);
  MANTISSA_CHECK(total_iters > 0, "LinearLR", "total_iters must be positive, got {}", total_iters);
  initial_step();
}

double LinearLR::lr_at(size_t group, int64_t epoch) const {
  const double t = static_cast<double>(std::min(epoch, total_iters_));
  return base_lrs()[group] *
         (start_factor_ + (end_factor_ - start_factor_) * t / static_cast<double>(total_iters_));
}

nlohmann::json LinearLR::hyper_json() const {
  return {
      {"start_factor", start_factor_}, {"end_factor", end_factor_}, {"total_iters", total_iters_}};
}

LambdaLR::LambdaLR(Optimizer& optimizer, std::function<double(int64_t)> lr_lambda)
    : LRScheduler(optimizer), lr_lambda_(std::move(lr_lambda)) {
  MANTISSA_CHECK(static_cast<bool>(lr_lambda_), "LambdaLR", "lr_lambda must be callable");
  initial_step();
}

double LambdaLR::lr_at(size_t group, int64_t epoch) const {
  return base_lrs()[group] * lr_lambda_(epoch);
}

}  // namespace mantissa::optim
