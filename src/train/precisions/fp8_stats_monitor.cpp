#include "mantissa/train/precisions/fp8_stats_monitor.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>

#include "mantissa/core/error.h"
#include "mantissa/train/trainer.h"

namespace mantissa::train {

std::map<std::string, double> fp8_stats_scalars(const Fp8Stats& stats) {
  std::map<std::string, double> out;
  for (const auto& [layer, roles] : stats) {
    for (const auto& [role, s] : roles) {
      if (s.casts == 0) continue;  // e.g. grad_output during validation-only intervals
      const std::string prefix = "fp8/" + layer + "/" + role + "/";
      out[prefix + "scale"] = s.scale;
      out[prefix + "amax"] = s.amax;
      out[prefix + "peak"] = s.peak;
      out[prefix + "saturated_fraction"] = s.saturated_fraction;
      out[prefix + "flushed_fraction"] = s.flushed_fraction;
    }
  }
  return out;
}

void merge_fp8_stats(Fp8Stats& earlier, const Fp8Stats& later) {
  for (const auto& [layer, roles] : later) {
    for (const auto& [role, s] : roles) {
      Fp8RoleStats& e = earlier[layer][role];
      const double n0 = static_cast<double>(e.casts), n1 = static_cast<double>(s.casts);
      if (n0 + n1 > 0) {
        e.saturated_fraction = (e.saturated_fraction * n0 + s.saturated_fraction * n1) / (n0 + n1);
        e.flushed_fraction = (e.flushed_fraction * n0 + s.flushed_fraction * n1) / (n0 + n1);
      }
      // The scale and amax of the interval's last training cast: a later part with no cast
      // (taken after a validation, whose casts are dropped) would bring the validation's amax,
      // which no training cast of the interval had.
      if (s.casts > 0 || e.casts == 0) {
        e.scale = s.scale;
        e.amax = s.amax;
      }
      e.casts += s.casts;
      e.peak = std::max(e.peak, s.peak);
    }
  }
}

namespace {
TransformerEnginePrecision* fp8_plugin(Trainer& trainer) {
  return dynamic_cast<TransformerEnginePrecision*>(&trainer.precision_plugin());
}
}  // namespace

void Fp8StatsMonitor::on_validation_start(Trainer& trainer, TrainModule&) {
  if (auto* te = fp8_plugin(trainer)) merge_fp8_stats(pending_, te->take_stats());
}

void Fp8StatsMonitor::on_validation_end(Trainer& trainer, TrainModule&) {
  if (auto* te = fp8_plugin(trainer)) te->take_stats();
}

Fp8StatsMonitor::Fp8StatsMonitor(int64_t every_n_steps) : every_n_steps_(every_n_steps) {
  MANTISSA_CHECK(every_n_steps >= 0, "Fp8StatsMonitor",
                 "the FP8 statistics' interval (--fp8-stats-every) must be at least 1 optimizer "
                 "step, or 0 to follow --log-every-n-steps; got {}",
                 every_n_steps);
}

void Fp8StatsMonitor::on_train_start(Trainer& trainer, TrainModule&) {
  step_seen_ = trainer.global_step();  // a resumed run counts its intervals from there
  pending_.clear();
  if (auto* te = fp8_plugin(trainer)) te->take_stats();  // casts before training: no interval
}

void Fp8StatsMonitor::on_train_batch_end(Trainer& trainer, TrainModule&, const Tensor&,
                                         const data::Example&, int64_t) {
  // Every every_n_steps_ optimizer steps, by default as the Trainer sends its step metrics.
  const int64_t n = every_n_steps_ > 0 ? every_n_steps_ : trainer.options().log_every_n_steps;
  const int64_t before = step_seen_;
  step_seen_ = trainer.global_step();
  if (step_seen_ / n == before / n) return;
  record(trainer, /*to_loggers=*/true);
}

void Fp8StatsMonitor::on_train_end(Trainer& trainer, TrainModule&) {
  // The steps after the last full interval form the last one, if they cast anything.
  record(trainer, /*to_loggers=*/false);
}

void Fp8StatsMonitor::on_exception(Trainer& trainer, TrainModule&, const std::exception&) {
  record(trainer, /*to_loggers=*/false);
}

void Fp8StatsMonitor::on_train_interrupted(Trainer& trainer, TrainModule&) {
  record(trainer, /*to_loggers=*/false);
}

void Fp8StatsMonitor::record(Trainer& trainer, bool to_loggers) {
  auto* te = fp8_plugin(trainer);
  if (te == nullptr) return;
  Fp8Stats stats = std::move(pending_);
  pending_.clear();
  merge_fp8_stats(stats, te->take_stats());
  // Keep only the roles, and so the layers, that cast something in the interval (under
  // rowwise-gw-hp the first layer's grad_output is never cast: no input gradient is made).
  for (auto it = stats.begin(); it != stats.end();) {
    std::erase_if(it->second, [](const auto& role) { return role.second.casts == 0; });
    it = it->second.empty() ? stats.erase(it) : std::next(it);
  }
  if (stats.empty()) return;
  if (to_loggers) {
    trainer.send_to_loggers(fp8_stats_scalars(stats));
  }
  last_ = std::move(stats);
}

std::optional<nlohmann::json> Fp8StatsMonitor::last_json() const {
  if (!last_) return std::nullopt;
  return fp8_stats_json(*last_);
}

namespace {
// A number of the fp8 JSON; null is how JSON writes a non-finite one (an inf peak).
double number_or_inf(const nlohmann::json& j, const char* key) {
  if (!j.contains(key)) return 0.0;
  const nlohmann::json& v = j.at(key);
  return v.is_number() ? v.get<double>() : std::numeric_limits<double>::infinity();
}

// How far above 1 a peak max|x| * scale / fp8_max goes from an fp32 scale's rounding alone (the
// scale's and the product's, 2^-24 each, with room to spare). It is far below the half step
// between every format's max and the value after it (E4M3 464 / 448, E5M2 61440 / 57344, E2M1
// 7 / 6): the values counted saturated under such a peak round to the max anyway, none clipped.
constexpr double kScaleRoundingTolerance = 1.0 / (1 << 20);

bool peak_within_scale_rounding(double peak) { return peak <= 1.0 + kScaleRoundingTolerance; }
}  // namespace

std::string fp8_summary_line(const nlohmann::json& fp8) {
  if (!fp8.is_object()) return "";
  std::string layer, role;
  const nlohmann::json* worst = nullptr;
  for (const auto& [l, roles] : fp8.items()) {
    for (const auto& [r, s] : roles.items()) {
      if (worst != nullptr) {
        const double p = number_or_inf(s, "peak"), wp = number_or_inf(*worst, "peak");
        const double f = number_or_inf(s, "saturated_fraction");
        const double wf = number_or_inf(*worst, "saturated_fraction");
        if (p < wp || (p == wp && f <= wf)) continue;
      }
      worst = &s;
      layer = l;
      role = r;
    }
  }
  if (worst == nullptr) return "";
  const double peak = number_or_inf(*worst, "peak");
  const double percent = 100.0 * number_or_inf(*worst, "saturated_fraction");
  const double scale = number_or_inf(*worst, "scale"), amax = number_or_inf(*worst, "amax");
  if (peak_within_scale_rounding(peak)) {
    // The values a rounding above the max, when there are any.
    const std::string above =
        percent > 0.0
            ? fmt::format(", {:.4f}% of values a rounding above it (cast to the max)", percent)
            : "";
    return fmt::format(
        "FP8: no tensor saturated beyond the scales' rounding; largest peak {} {}: {:.3f} of the "
        "format's max{}; scale {:.6g}, amax {:.6g}",
        layer, role, peak, above, scale, amax);
  }
  return fmt::format(
      "FP8: worst-saturating tensor {} {}: peak {:.3f} of the format's max, {:.4f}% of values "
      "saturated; scale {:.6g}, amax {:.6g}",
      layer, role, peak, percent, scale, amax);
}

}  // namespace mantissa::train
