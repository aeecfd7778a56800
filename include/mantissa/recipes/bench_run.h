#pragma once
// What `mantissa bench` runs: end-to-end training throughput and memory of a reference model in
// several precisions, measured in one process so the ratios between them are like for like.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "mantissa/recipes/finetuning.h"
#include "mantissa/recipes/run_metrics.h"

namespace mantissa::recipes {

struct BenchOptions {
  std::string model = "mlp";
  std::vector<std::string> precisions = {"32-true", "bf16-mixed", "16-mixed", "bf16-true"};
  int64_t steps = 100;  // timed optimizer steps per precision and round
  // Untimed steps per precision and round before the timed ones (--untimed-steps; not a
  // learning-rate warm-up, which is what --warmup-steps means in `mantissa train`).
  int64_t untimed_steps = 3;
  // Rounds that each run every precision in the listed order (A B C, A B C, ...), each run
  // `untimed_steps` untimed then `steps` timed steps; the table gives the fastest round.
  int64_t rounds = 3;
  std::string hidden = "1024,1024";
  int64_t batch_size = 0;           // 0: the model's default (mlp/vit 256, cnn 128, gpt 16)
  std::string optimizer = "adamw";  // optim/optimizer_factory.h's names
  std::string optim_bits_32;        // 8-bit optimizers: names that keep 32-bit state
  int threads = 0;                  // 0: OpenMP's default (all cores)
  std::string accelerator = "cpu";  // "cpu", "gpu"/"cuda" or "auto", as `train --accelerator`
  std::string data_dir;
  std::string text;  // gpt: corpus file or directory; "" = the `fortunes` package (gpt_run.h)
  // gpt: its size, as `train --layers/--width/--heads/--context` (the defaults: GptOptions').
  int64_t gpt_layers = 6;
  int64_t gpt_width = 256;
  int64_t gpt_heads = 8;
  int64_t gpt_context = 128;
  bool gpt_activation_checkpointing = false;  // gpt: GptOptions::activation_checkpointing
  std::string json;                           // also write the results here
  std::map<std::string, std::string> precision_options;  // --fp8-* (precision_settings.h)
  QuantOptions quant;  // nf4/fp4/int8 precisions and LoRA (finetuning.h)
};

struct BenchResult {
  std::string precision;                         // canonical name
  TrainMetrics metrics;                          // of the fastest round
  std::vector<double> round_samples_per_second;  // every round's, in order
};

// The median of a result's rounds (samples/s).
double median_samples_per_second(const BenchResult& r);
// How far a result's rounds differ: fastest over slowest, less 1 (0.25: the fastest round was
// 25 % faster than the slowest); 0 with one round.
double round_spread(const BenchResult& r);
// A spread of the rounds above this (10 %) is warned about: one round would have misled.
inline constexpr double kBenchSpreadWarning = 0.10;
// The warning for a result whose rounds differ by more than kBenchSpreadWarning, or nullopt.
std::optional<std::string> bench_spread_warning(const BenchResult& r);

// Runs options.rounds rounds; in each, every precision in order trains options.steps timed
// steps (after options.untimed_steps untimed ones that fill oneDNN's primitive cache and the
// allocator).
// Returns per precision, in order, the fastest round's metrics and every round's samples/s,
// and warns (stderr) for each precision whose rounds differ by more than kBenchSpreadWarning.
std::vector<BenchResult> run_bench(const BenchOptions& options);

// The table `mantissa bench` prints: samples/s of the fastest round and peak training memory,
// each with its ratio to 32-true (or to the first precision when 32-true was not run), the
// median round's samples/s, the rounds' spread and the fastest round's ms/step (last, as
// bench/min_of_rounds.sh reads it).
std::string format_bench_table(const BenchOptions& options, const std::vector<BenchResult>& r);

// The batch `mantissa bench` uses when none is given: mlp/vit 256, cnn 128, gpt 16.
int64_t default_batch_size(const std::string& model);

// Writes the results to options.json (model, shape, CPU, threads, rounds, and per precision
// samples/s and seconds per step of the fastest round, the median and every round's samples/s,
// their spread, peak memory and loss).
void write_bench_json(const BenchOptions& options, const std::vector<BenchResult>& results);

}  // namespace mantissa::recipes
