#pragma once
// Fp8StatsMonitor: what the FP8 casts of a "transformer-engine" run did, sent to the loggers
// (docs/fp8.md, "Watching the scales"). Every every_n_steps optimizer steps (by default the
// Trainer's log_every_n_steps; `--fp8-stats-every` in `mantissa train`) it takes the
// plugin's per-layer statistics (TransformerEnginePrecision::take_stats) and logs, per FP8
// layer and role (input, weight, grad_output), five scalars:
//   fp8/<layer>/<role>/scale               the current scaling factor
//   fp8/<layer>/<role>/amax                the amax that scale was computed from
//   fp8/<layer>/<role>/peak                the largest max|x| * scale / fp8_max of the casts
//   fp8/<layer>/<role>/saturated_fraction  values that hit the format's max in the interval
//   fp8/<layer>/<role>/flushed_fraction    non-zero values that became zero in the interval
// The statistics of the last interval (the one that ended with training) are kept for the
// metrics JSON's "fp8" object. Under any other precision plugin it does nothing.
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "mantissa/train/callback.h"
#include "mantissa/train/precisions/transformer_engine_precision.h"

namespace mantissa::train {

class Fp8StatsMonitor : public Callback {
 public:
  // every_n_steps 0 follows the Trainer's log_every_n_steps; a negative one is refused.
  explicit Fp8StatsMonitor(int64_t every_n_steps = 0);
  std::string state_key() const override { return "Fp8StatsMonitor"; }
  void on_train_start(Trainer& trainer, TrainModule& module) override;
  void on_train_batch_end(Trainer& trainer, TrainModule& module, const Tensor& loss,
                          const data::Example& batch, int64_t batch_idx) override;
  void on_train_end(Trainer& trainer, TrainModule& module) override;
  // A run that stops early (an exception such as a diverged loss, or a signal) keeps the steps
  // since the last full interval as its last one, as on_train_end does.
  void on_exception(Trainer& trainer, TrainModule& module, const std::exception& e) override;
  void on_train_interrupted(Trainer& trainer, TrainModule& module) override;
  // Validation casts are not part of an interval: what training cast before a validation is
  // set aside, and the validation's own counts are dropped.
  void on_validation_start(Trainer& trainer, TrainModule& module) override;
  void on_validation_end(Trainer& trainer, TrainModule& module) override;

  // The last interval's statistics (roles with no cast in it are left out), or nothing
  // before the first one / under a plugin without FP8 layers.
  const std::optional<Fp8Stats>& last() const { return last_; }
  // last() as the metrics JSON's "fp8" object (fp8_stats_json), or nothing.
  std::optional<nlohmann::json> last_json() const;

 private:
  void record(Trainer& trainer, bool to_loggers);

  int64_t every_n_steps_;  // 0: the Trainer's log_every_n_steps
  std::optional<Fp8Stats> last_;
  Fp8Stats pending_;       // training casts of the current interval taken before a validation
  int64_t step_seen_ = 0;  // the global step at the last batch end
};

// `later` added to `earlier`: counts and fractions over both, the later scale and amax where
// `later` cast anything.
void merge_fp8_stats(Fp8Stats& earlier, const Fp8Stats& later);

// The flat logger names and values of one interval's statistics (the scalars above, with
// fp8/<layer>/<role>/amax and .../peak, for every layer and role that cast something).
std::map<std::string, double> fp8_stats_scalars(const Fp8Stats& stats);

// The one line a run prints at its end about its last interval (`fp8` as fp8_stats_json writes
// it) on the layer and role with the largest "peak" (ties: the larger saturated fraction, then
// the first): "FP8: worst-saturating tensor net.0 input: peak 1.032 of the format's max, 0.0122%
// of values saturated; scale 35.84, amax 12.5", or, when that peak is within the fp32 scales'
// rounding of 1 (nothing clipped: the values counted saturated round to the max anyway), "FP8:
// no tensor saturated beyond the scales' rounding; largest peak net.0 input: 1.000 of ...".
// "" when `fp8` names no tensor.
std::string fp8_summary_line(const nlohmann::json& fp8);

}  // namespace mantissa::train
