#include "mantissa/optim/lr_scheduler.h"

#include <cmath>
#include <numbers>
#include <utility>

#include <fmt/format.h>

#include "mantissa/core/error.h"
#include "mantissa/core/warning.h"
#include "mantissa/io/untrusted_json.h"

namespace mantissa::optim {

LRScheduler::LRScheduler(Optimizer& optimizer) : optimizer_(&optimizer) {
  for (size_t g = 0; g < optimizer.num_param_groups(); ++g) base_lrs_.push_back(optimizer.lr(g));
}

void LRScheduler::initial_step() { advance(); }

void LRScheduler::step() {
  check_step_order();
  advance();
}

void LRScheduler::check_step_order() {
  // torch's check (LRScheduler.step at _step_count 1, once): a scheduler stepped before its
  // optimizer moves the lr on before the optimizer used the value set at construction, so the
  // first value of the schedule is never trained with. As in torch, an optimizer step that a
  // GradScaler skipped does not count: the warning also shows when every step so far was
  // skipped (the Trainer, which steps in the right order by construction, says so with
  // skip_step_order_check).
  if (step_order_checked_) return;
  step_order_checked_ = true;
  if (optimizer_->step_count() > 0) return;
  warn(fmt::format(
      "{}.step() was called before {}.step() ever ran: the optimizer never trains with the "
      "schedule's first learning rate (set when the scheduler was built). Call the optimizer's "
      "step() first, then the scheduler's. (If a GradScaler skipped the first steps over "
      "inf/NaN gradients, the order was right and this can be ignored.)",
      name(), optimizer_->name()));
}

void LRScheduler::step(double metric) {
  fail(name() + ".step", "this scheduler is not driven by a metric; call step() (got {})", metric);
}

void LRScheduler::advance() {
  ++last_epoch_;
  apply();
}

void LRScheduler::apply() {
  last_lr_.resize(base_lrs_.size());
  for (size_t g = 0; g < base_lrs_.size(); ++g) {
    last_lr_[g] = lr_at(g, last_epoch_);
    optimizer_->set_lr(g, last_lr_[g]);
  }
  after_apply(last_epoch_);
}

nlohmann::json LRScheduler::state_dict() const {
  nlohmann::json j = hyper_json();
  j.update(running_state_json());
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
                 io::json_excerpt(state));
  MANTISSA_CHECK(state["name"] == name(), where, "the state belongs to a {}, not a {}",
                 io::json_excerpt(state["name"]), name());
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
  load_hyper(state);  // checks its settings first: a throw leaves the scheduler as it was
  base_lrs_ = std::move(base);
  last_epoch_ = last;
  // As torch's loaded _step_count: a scheduler restored past its first step does not check the
  // order (the restored optimizer has not stepped in this process, but it did before the save).
  if (last > 0) step_order_checked_ = true;
  // Like torch, the optimizer's learning rates are not touched: they come back with the
  // optimizer's own state dict (with several schedulers, the one that ran last set them).
  last_lr_ = std::move(last_lr);
}

void LRScheduler::fail_mistyped(const char* key, const nlohmann::json& value) const {
  fail(name() + ".load_state_dict", "mistyped {}: {}", key, io::json_excerpt(value));
}

void LRScheduler::set_base_lrs(std::vector<double> base_lrs) {
  MANTISSA_CHECK(base_lrs.size() == base_lrs_.size(), name() + ".set_base_lrs",
                 "expected {} base lrs (one per param group), got {}", base_lrs_.size(),
                 base_lrs.size());
  const std::vector<double> old = std::exchange(base_lrs_, std::move(base_lrs));
  base_lrs_changed(old);
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

void StepLR::load_hyper(const nlohmann::json& state) {
  const int64_t step_size = saved_setting(state, "step_size", step_size_);
  MANTISSA_CHECK(step_size > 0, "StepLR.load_state_dict", "step_size must be positive, got {}",
                 step_size);
  step_size_ = step_size;
  gamma_ = saved_setting(state, "gamma", gamma_);
}

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

void CosineAnnealingLR::load_hyper(const nlohmann::json& state) {
  const int64_t t_max = saved_setting(state, "T_max", t_max_);
  MANTISSA_CHECK(t_max > 0, "CosineAnnealingLR.load_state_dict", "T_max must be positive, got {}",
                 t_max);
  t_max_ = t_max;
  eta_min_ = saved_setting(state, "eta_min", eta_min_);
}

LinearLR::LinearLR(Optimizer& optimizer, double start_factor, double end_factor,
                   int64_t total_iters)
    : LRScheduler(optimizer),
      start_factor_(start_factor),
      end_factor_(end_factor),
      total_iters_(total_iters) {
  check_factors(start_factor, end_factor, total_iters);
  initial_step();
}

void LinearLR::check_factors(double start_factor, double end_factor, int64_t total_iters) {
  // torch's checks: the start factor cannot be 0 (the lr would start at 0 and the recursive
  // form could not recover), both are at most 1.
  MANTISSA_CHECK(start_factor > 0 && start_factor <= 1, "LinearLR",
                 "start_factor must be in (0, 1], got {}", start_factor);
  MANTISSA_CHECK(end_factor >= 0 && end_factor <= 1, "LinearLR",
                 "end_factor must be in [0, 1], got {}", end_factor);
  MANTISSA_CHECK(total_iters > 0, "LinearLR", "total_iters must be positive, got {}", total_iters);
}

void LinearLR::load_hyper(const nlohmann::json& state) {
  const double start = saved_setting(state, "start_factor", start_factor_);
  const double end = saved_setting(state, "end_factor", end_factor_);
  const int64_t total = saved_setting(state, "total_iters", total_iters_);
  check_factors(start, end, total);
  start_factor_ = start;
  end_factor_ = end;
  total_iters_ = total;
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

OneCycleLR::OneCycleLR(Optimizer& optimizer, double max_lr, int64_t total_steps, double pct_start,
                       const std::string& anneal_strategy, double div_factor,
                       double final_div_factor, bool cycle_momentum, double base_momentum,
                       double max_momentum)
    : LRScheduler(optimizer),
      max_lr_(max_lr),
      initial_lr_(max_lr / div_factor),
      min_lr_(max_lr / div_factor / final_div_factor),
      total_steps_(total_steps),
      pct_start_(pct_start),
      cosine_(anneal_strategy == "cos"),
      cycle_momentum_(cycle_momentum),
      base_momentum_(base_momentum),
      max_momentum_(max_momentum) {
  MANTISSA_CHECK(std::isfinite(max_lr) && max_lr > 0, "OneCycleLR",
                 "max_lr must be positive, got {}", max_lr);
  MANTISSA_CHECK(total_steps > 0, "OneCycleLR", "total_steps must be positive, got {}",
                 total_steps);
  MANTISSA_CHECK(pct_start >= 0 && pct_start <= 1, "OneCycleLR",
                 "pct_start must be in [0, 1], got {}", pct_start);
  MANTISSA_CHECK(anneal_strategy == "cos" || anneal_strategy == "linear", "OneCycleLR",
                 "anneal_strategy must be 'cos' or 'linear', got '{}'", anneal_strategy);
  MANTISSA_CHECK(div_factor > 0 && final_div_factor > 0, "OneCycleLR",
                 "div_factor and final_div_factor must be positive, got {} and {}", div_factor,
                 final_div_factor);
  if (cycle_momentum) {
    MANTISSA_CHECK(base_momentum >= 0 && base_momentum <= max_momentum && max_momentum < 1,
                   "OneCycleLR",
                   "momenta must satisfy 0 <= base_momentum <= max_momentum < 1, got {} and {}",
                   base_momentum, max_momentum);
    for (size_t g = 0; g < optimizer.num_param_groups(); ++g) {
      const nlohmann::json o = group_options(g);
      MANTISSA_CHECK(o.contains("betas") || o.contains("momentum"), "OneCycleLR",
                     "{} has no momentum or beta1 to cycle; pass cycle_momentum = false",
                     optimizer.name());
    }
  }
  initial_step();
}

std::pair<bool, double> OneCycleLR::phase_at(int64_t step) const {
  // torch's phase ends: the peak at step pct_start * total - 1, the floor at total - 1.
  const double peak_step = pct_start_ * static_cast<double>(total_steps_) - 1;
  const double last_step = static_cast<double>(total_steps_) - 1;
  const double s = static_cast<double>(step);
  if (s <= peak_step) return {false, peak_step > 0 ? s / peak_step : 1.0};  // a peak at 0
  return {true, (s - peak_step) / (last_step - peak_step)};
}

double OneCycleLR::anneal(double start, double end, double pct) const {
  if (cosine_) return end + (start - end) / 2.0 * (std::cos(std::numbers::pi * pct) + 1);
  return (end - start) * pct + start;
}

void OneCycleLR::set_momentum(size_t group, double momentum) {
  nlohmann::json o = group_options(group);
  if (o.contains("betas")) {
    o["betas"][0] = momentum;
  } else {
    o["momentum"] = momentum;
  }
  set_group_options(group, o);
}

void OneCycleLR::after_apply(int64_t step) {
  if (!cycle_momentum_) return;
  const auto [annealing, pct] = phase_at(step);
  const double m = annealing ? anneal(base_momentum_, max_momentum_, pct)
                             : anneal(max_momentum_, base_momentum_, pct);
  for (size_t g = 0; g < optimizer().num_param_groups(); ++g) set_momentum(g, m);
}

double OneCycleLR::lr_at(size_t /*group*/, int64_t step) const {
  MANTISSA_CHECK(step <= total_steps_, "OneCycleLR",
                 "stepped {} times, more than total_steps = {}; raise total_steps (or max_steps)",
                 step, total_steps_);
  const auto [annealing, pct] = phase_at(step);
  return annealing ? anneal(max_lr_, min_lr_, pct) : anneal(initial_lr_, max_lr_, pct);
}

nlohmann::json OneCycleLR::hyper_json() const {
  return {{"max_lr", max_lr_},
          {"initial_lr", initial_lr_},
          {"min_lr", min_lr_},
          {"total_steps", total_steps_},
          {"pct_start", pct_start_},
          {"anneal_strategy", cosine_ ? "cos" : "linear"},
          {"cycle_momentum", cycle_momentum_},
          {"base_momentum", base_momentum_},
          {"max_momentum", max_momentum_}};
}

void OneCycleLR::load_hyper(const nlohmann::json& state) {
  const char* where = "OneCycleLR.load_state_dict";
  const double max_lr = saved_setting(state, "max_lr", max_lr_);
  const double initial = saved_setting(state, "initial_lr", initial_lr_);
  const double min_lr = saved_setting(state, "min_lr", min_lr_);
  const int64_t total = saved_setting(state, "total_steps", total_steps_);
  const double pct = saved_setting(state, "pct_start", pct_start_);
  const std::string strategy =
      saved_setting(state, "anneal_strategy", std::string(cosine_ ? "cos" : "linear"));
  const bool cycle = saved_setting(state, "cycle_momentum", cycle_momentum_);
  const double base_m = saved_setting(state, "base_momentum", base_momentum_);
  const double max_m = saved_setting(state, "max_momentum", max_momentum_);
  MANTISSA_CHECK(std::isfinite(max_lr) && max_lr > 0 && initial > 0 && min_lr >= 0, where,
                 "max_lr, initial_lr and min_lr must be positive, got {}, {} and {}", max_lr,
                 initial, min_lr);
  MANTISSA_CHECK(total > 0 && pct >= 0 && pct <= 1, where,
                 "total_steps must be positive and pct_start in [0, 1], got {} and {}", total, pct);
  MANTISSA_CHECK(strategy == "cos" || strategy == "linear", where,
                 "anneal_strategy must be 'cos' or 'linear', got '{}'", strategy);
  if (cycle) {
    MANTISSA_CHECK(base_m >= 0 && base_m <= max_m && max_m < 1, where,
                   "momenta must satisfy 0 <= base_momentum <= max_momentum < 1, got {} and {}",
                   base_m, max_m);
    for (size_t g = 0; g < optimizer().num_param_groups(); ++g) {
      const nlohmann::json o = group_options(g);
      MANTISSA_CHECK(o.contains("betas") || o.contains("momentum"), where,
                     "the state cycles the momentum, but {} has no momentum or beta1",
                     optimizer().name());
    }
  }
  max_lr_ = max_lr;
  initial_lr_ = initial;
  min_lr_ = min_lr;
  total_steps_ = total;
  pct_start_ = pct;
  cosine_ = strategy == "cos";
  cycle_momentum_ = cycle;
  base_momentum_ = base_m;
  max_momentum_ = max_m;
}

}  // namespace mantissa::optim
