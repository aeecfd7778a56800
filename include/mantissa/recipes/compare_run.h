#pragma once
// What `mantissa compare` runs: trains the same model on the same data and seed once per precision
// and compares accuracy, loss, throughput and memory in a table, a JSON file and an HTML report.
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "mantissa/recipes/finetuning.h"
#include "mantissa/recipes/image_run.h"
#include "mantissa/recipes/run_metrics.h"

namespace mantissa::recipes {

struct CompareOptions {
  std::string model = "mlp";
  std::vector<std::string> precisions = {"32-true", "bf16-mixed", "16-mixed", "bf16-true"};
  int epochs = 2;
  int64_t batch_size = 256;
  std::string optimizer = "adamw";  // optim/optimizer_factory.h's names
  std::string optim_bits_32;        // 8-bit optimizers: names that keep 32-bit state
  double lr = 1e-3;
  uint64_t seed = 0;
  std::string hidden = "256";
  int threads = 0;
  std::string accelerator = "cpu";  // "cpu", "gpu"/"cuda" or "auto", as `train --accelerator`
  int64_t train_subset = 0;
  std::string data_dir;
  std::string html;  // write the report here
  std::string json;  // write the results here
  // Throughput is measured apart from the training runs (whose first precision would pay the
  // process's one-time costs): `timing_rounds` rounds that each train every precision, in the
  // listed order, for `untimed_steps` untimed then `timed_steps` timed steps; samples/s is the
  // median over the rounds. (--untimed-steps; not a learning-rate warm-up.)
  int64_t timing_rounds = 3;
  int64_t untimed_steps = 5;
  int64_t timed_steps = 20;
  std::map<std::string, std::string> precision_options;  // --fp8-* (precision_settings.h)
  bool quiet = false;
  QuantOptions quant;  // nf4/fp4/int8 precisions and LoRA (finetuning.h)
};

// The models compare can train (the image classifiers; the GPT is `mantissa bench --model gpt`).
inline constexpr const char* kCompareModels = "mlp, cnn, vit";

// Checks the options, names and output paths (before any training), then runs every precision
// in order for accuracy, loss and memory, then the interleaved timing rounds for samples/s.
// When the run is not quiet, the training runs print their progress. A SIGINT/SIGTERM stops it
// with CompareInterrupted.
std::vector<TrainMetrics> run_compare(const CompareOptions& options);

// Thrown by run_compare when a signal (Ctrl-C, SIGTERM) stopped one of its runs. A comparison
// cannot be resumed; runs() are the precisions that had finished training (samples_per_second:
// the median of the timing rounds every precision completed, NaN when none was), note() says
// what was cut short, for the reports (compare_json / compare_html), and the message what to
// do. main() prints the message and exits with 128 + the signal, as for `train`.
class CompareInterrupted : public TrainingInterrupted {
 public:
  CompareInterrupted(const std::string& message, int exit_code, std::vector<TrainMetrics> runs,
                     std::string note)
      : TrainingInterrupted(message, exit_code), runs_(std::move(runs)), note_(std::move(note)) {}
  const std::vector<TrainMetrics>& runs() const { return runs_; }
  const std::string& note() const { return note_; }

 private:
  std::vector<TrainMetrics> runs_;
  std::string note_;
};

// The baseline the ratios refer to: 32-true when it ran, else the first precision; a diverged
// run only when every precision diverged, which the table, JSON ("baseline": null) and HTML
// then say instead of naming it.
size_t compare_baseline(const std::vector<TrainMetrics>& runs);

// Fastest over slowest timing round of one precision beyond which compare warns.
inline constexpr double kTimingSpreadWarning = 1.5;
// The warning for a precision whose timing rounds differ by more than that (another load on the
// machine: the median may be either regime), or nullopt.
std::optional<std::string> timing_spread_warning(const TrainMetrics& m);

// The median of the values (the mean of the middle two for an even count); NaN when empty.
double median(std::vector<double> values);

// The printed table (one row per precision), with how samples/s was measured and, when a run
// computed in bf16 on a CPU that emulates it, the warning.
std::string format_compare_table(const std::vector<TrainMetrics>& runs);

// The HTML report and the JSON document for the runs. Their warnings are `printed_warnings`
// (what stderr said while the runs were made: a WarningRecorder's messages, such as an
// unreliable timing or an emulated precision), then those the reports add (bf16 emulated,
// quantized weights without adapters), each once. `interrupted` (CompareInterrupted::note)
// marks a comparison a signal cut short: JSON "interrupted", the HTML's first warning.
std::string compare_html(const CompareOptions& options, const std::vector<TrainMetrics>& runs,
                         const std::vector<std::string>& printed_warnings = {},
                         const std::string& interrupted = "");
std::string compare_json(const CompareOptions& options, const std::vector<TrainMetrics>& runs,
                         const std::vector<std::string>& printed_warnings = {},
                         const std::string& interrupted = "");

}  // namespace mantissa::recipes
