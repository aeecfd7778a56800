#include "mantissa/recipes/lr_find_run.h"

#include <fmt/format.h>

#include <cmath>
#include <limits>

#include "mantissa/core/error.h"
#include "mantissa/io/output_path.h"
#include "mantissa/train/early_stopping.h"
#include "mantissa/train/report/html_report.h"

namespace mantissa::recipes {
namespace {

constexpr const char* kWhere = "--lr-find";
// The steps Lightning leaves out of its suggestion: the first ones still carry the
// initialisation's transient, the last one the divergence.
constexpr int64_t kSkipBegin = 10, kSkipEnd = 1;

// "1e-8,1" -> {1e-8, 1}, named as the flag in errors.
std::pair<double, double> parse_range(const std::string& text) {
  const size_t comma = text.find(',');
  double lo = NAN, hi = NAN;
  auto number = [](const std::string& s, double& v) {
    size_t used = 0;
    try {
      v = std::stod(s, &used);
    } catch (const std::logic_error&) {
      return false;
    }
    return used == s.size() && !s.empty();
  };
  const bool ok = comma != std::string::npos && number(text.substr(0, comma), lo) &&
                  number(text.substr(comma + 1), hi);
  MANTISSA_CHECK(
      ok && std::isfinite(lo) && std::isfinite(hi) && lo > 0 && lo < hi, "--lr-find-range",
      "expects MIN,MAX with 0 < MIN < MAX, such as 1e-8,1 (the default), got '{}'", text);
  return {lo, hi};
}

}  // namespace

std::shared_ptr<train::LearningRateFinder> setup_lr_find(const TrainOptions& o,
                                                         train::TrainerOptions& t) {
  if (!o.lr_find) return nullptr;
  MANTISSA_CHECK(o.resume.empty(), kWhere,
                 "a range test starts from the model's weights, not from a run's state: drop "
                 "--resume (to test from a checkpoint's weights, pass it as --init-from)");
  MANTISSA_CHECK(o.checkpoint_dir.empty(), kWhere,
                 "a range test trains the model only to measure its loss at each lr, so nothing "
                 "of it is worth keeping: drop --checkpoint-dir");
  MANTISSA_CHECK(o.fast_dev_run == 0 && o.overfit_batches.empty(), kWhere,
                 "--fast-dev-run and --overfit-batches set their own batches; drop them");
  MANTISSA_CHECK(o.lr_find_steps >= 2 && o.lr_find_steps <= 100000, "--lr-find-steps",
                 "must be a number of optimizer steps from 2 to 100000, got {}", o.lr_find_steps);
  const auto [lo, hi] = parse_range(o.lr_find_range);
  auto finder = std::make_shared<train::LearningRateFinder>(
      train::LRFinderOptions{.min_lr = lo, .max_lr = hi, .num_training_steps = o.lr_find_steps});
  t.max_steps = o.lr_find_steps;
  t.max_epochs.reset();  // as many passes over the data as the sweep needs
  t.min_epochs = 0;
  t.min_steps = 0;
  t.max_time.reset();
  t.num_sanity_val_steps = 0;
  // Nothing is validated, so nothing is monitored (--early-stopping-monitor is named as
  // ignored).
  std::erase_if(t.callbacks, [](const std::shared_ptr<train::Callback>& c) {
    return dynamic_cast<train::EarlyStopping*>(c.get()) != nullptr;
  });
  t.callbacks.push_back(finder);
  return finder;
}

void report_lr_find(const train::LearningRateFinder& finder, const TrainOptions& o,
                    const std::string& model_text, bool is_global_zero, TrainMetrics& m) {
  const train::LRFinderResult& r = finder.result();
  const train::LRFinderOptions& f = finder.options();
  const std::optional<size_t> best = r.suggestion_index(kSkipBegin, kSkipEnd);
  nlohmann::json j;
  j["min_lr"] = f.min_lr;
  j["max_lr"] = f.max_lr;
  j["steps"] = f.num_training_steps;
  j["mode"] = f.mode;
  j["lrs"] = r.lrs;
  j["losses"] = r.losses;  // NaN is written as null
  j["smoothed_losses"] = r.smoothed_losses;
  j["suggested_lr"] = best ? nlohmann::json(r.lrs[*best]) : nlohmann::json(nullptr);
  j["suggested_step"] = best ? nlohmann::json(*best + 1) : nlohmann::json(nullptr);
  j["stop_reason"] = r.stop_reason;
  m.lr_find = j;
  if (!is_global_zero) return;

  // About twenty rows: enough to see the valley and the climb.
  const size_t every = std::max<size_t>(1, (r.lrs.size() + 19) / 20);
  fmt::print("mantissa train --lr-find: {}, {} steps, lr from {:g} to {:g} (exponential)\n",
             model_text, f.num_training_steps, f.min_lr, f.max_lr);
  fmt::print("  {:>5}  {:>10}  {:>10}  {:>10}\n", "step", "lr", "loss", "smoothed");
  for (size_t i = 0; i < r.lrs.size(); ++i) {
    if (i % every != 0 && i + 1 != r.lrs.size() && (!best || i != *best)) continue;
    fmt::print("  {:>5}  {:>10.3e}  {:>10.4f}  {:>10.4f}{}\n", i + 1, r.lrs[i], r.losses[i],
               r.smoothed_losses[i], best && i == *best ? "  <- steepest descent" : "");
  }
  if (!r.stop_reason.empty()) {
    fmt::print("stopped after step {} of {}: {}\n", r.lrs.size(), f.num_training_steps,
               r.stop_reason);
  }
  if (best) {
    fmt::print(
        "suggested learning rate: {:.3g} (step {}: where the smoothed loss falls fastest); train "
        "with --lr {:.3g}, or a few times lower for a long run\n",
        r.lrs[*best], *best + 1, r.lrs[*best]);
  } else {
    fmt::print(
        "no learning rate suggested: fewer than two finite losses after the first {} steps; "
        "raise --lr-find-steps or lower the top of --lr-find-range\n",
        kSkipBegin);
  }
  if (!o.lr_find_plot.empty()) {
    std::vector<double> log_lr;
    for (double lr : r.lrs) log_lr.push_back(std::log10(lr));
    // Ticks at whole powers of ten read "1e-06"; between them, two digits.
    auto lr_text = [](double t) {
      const double lr = std::pow(10.0, t);
      return t == std::round(t) ? fmt::format("{:.0e}", lr) : fmt::format("{:.1e}", lr);
    };
    const std::string svg = train::svg_xy_chart(
        {{"loss", r.losses}, {"smoothed loss", r.smoothed_losses}}, log_lr,
        fmt::format("learning-rate range test: {}", model_text), "learning rate", "loss",
        best ? std::optional<double>(log_lr[*best]) : std::nullopt,
        std::function<std::string(double)>(lr_text));
    io::write_text_file_atomically(o.lr_find_plot, train::svg_document(svg), "--lr-find-plot");
    fmt::print("plot written to {}\n", o.lr_find_plot);
  }
}

}  // namespace mantissa::recipes
