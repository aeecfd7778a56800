#include "mantissa/recipes/bench_run.h"

#include <fmt/format.h>
#include <omp.h>
#include <algorithm>
#include <cstdlib>
#include <numeric>

#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>

#include "mantissa/core/cpu_features.h"
#include "mantissa/core/cpu_identity.h"
#include "mantissa/core/error.h"
#include "mantissa/core/untrusted_text.h"
#include "mantissa/core/warning.h"
#include "mantissa/io/output_path.h"
#include "mantissa/kernels/kernel_paths.h"
#include "mantissa/models/gpt.h"
#include "mantissa/models/image_classifier.h"
#include "mantissa/models/language_model.h"
#include "mantissa/optim/optimizer_factory.h"
#include "mantissa/recipes/compare_run.h"
#include "mantissa/recipes/finetuning.h"
#include "mantissa/recipes/gpt_run.h"
#include "mantissa/recipes/image_run.h"
#include "mantissa/recipes/model_names.h"
#include "mantissa/recipes/multi_precision_flags.h"
#include "mantissa/recipes/precision_settings.h"
#include "mantissa/recipes/thread_count.h"
#include "mantissa/train/precision_registry.h"
#include "mantissa/train/signals.h"

namespace mantissa::recipes {
namespace {

constexpr int64_t kTrainSetSize = 60000;  // Fashion-MNIST's training images

TrainOptions image_train_options(const BenchOptions& o, const std::string& precision,
                                 int64_t steps) {
  TrainOptions t;
  t.model = o.model;
  t.precision = precision;
  t.precision_options = settings_for(precision, o.precision_options);
  t.epochs = 1;
  t.batch_size = o.batch_size;
  t.optimizer = o.optimizer;
  t.optim_bits_32 = o.optim_bits_32;
  t.hidden = o.hidden;
  t.threads = o.threads;
  t.accelerator = o.accelerator;
  // Exactly `steps` full batches: one epoch over the first steps * batch_size images.
  t.train_subset = steps * o.batch_size;
  t.data_dir = o.data_dir;
  t.quiet = true;
  t.quant = o.quant;
  // The bench reports speed and memory of the training steps only: no validation or test pass
  // (on the 10 000 test images it takes longer than the timed steps themselves).
  t.evaluate = false;
  return t;
}

// The GPT's size (--layers, --width, --heads, --context); the rest GptOptions' defaults.
GptOptions bench_gpt_options(const BenchOptions& o) {
  GptOptions g;
  g.layers = o.gpt_layers;
  g.width = o.gpt_width;
  g.heads = o.gpt_heads;
  g.context = o.gpt_context;
  g.activation_checkpointing = o.gpt_activation_checkpointing;
  return g;
}

// Trains an image classifier (mlp, cnn, vit) on Fashion-MNIST for exactly `steps` optimizer
// steps, through the same Trainer as `mantissa train`.
TrainMetrics run_image_classifier(const BenchOptions& o, const std::string& precision,
                                  int64_t steps) {
  MANTISSA_CHECK(steps * o.batch_size <= kTrainSetSize, "bench",
                 "{} steps x --batch-size {} exceed the {} training images (--steps and "
                 "--untimed-steps must each fit them)",
                 steps, o.batch_size, kTrainSetSize);
  return run_training(image_train_options(o, precision, steps));
}

// Trains the byte-level GPT for exactly `steps` optimizer steps on its text corpus (--text),
// through the same Trainer as `mantissa train --model gpt` (one short validation at the end, no
// sample). samples/s counts sequences of 128 bytes.
TrainMetrics run_gpt(const BenchOptions& o, const std::string& precision, int64_t steps) {
  TrainOptions t;
  t.model = "gpt";
  t.precision = precision;
  t.precision_options = settings_for(precision, o.precision_options);
  t.batch_size = o.batch_size;
  t.optimizer = o.optimizer;
  t.optim_bits_32 = o.optim_bits_32;
  t.threads = o.threads;
  t.accelerator = o.accelerator;
  t.quiet = true;
  t.quant = o.quant;
  GptOptions g = bench_gpt_options(o);
  g.text = o.text;
  g.max_steps = steps;
  g.eval_interval = steps;
  g.eval_batches = 1;
  g.sample_tokens = 0;
  return run_gpt_training(t, g);
}

std::string hidden_dashed(std::string hidden) {  // "1024,1024" -> "1024-1024"
  for (char& c : hidden) {
    if (c == ',') c = '-';
  }
  return hidden;
}

// One entry per benchmarkable model: a function that trains it for `steps` optimizer steps in
// `precision` and returns the metrics (samples/s over the timed steps, peak memory). Adding a
// model (cnn, gpt) to `mantissa bench` is adding its runner here.
struct BenchModel {
  const char* name;
  TrainMetrics (*run)(const BenchOptions&, const std::string& precision, int64_t steps);
};
constexpr BenchModel kBenchModels[] = {
    {"mlp", &run_image_classifier},
    {"cnn", &run_image_classifier},
    {"vit", &run_image_classifier},
    {"gpt", &run_gpt},
};

// The batch size a model is benchmarked with when --batch-size is not given (issue #4's
// side-by-side shapes).

std::string model_description(const BenchOptions& o) {
  if (o.model == "mlp") return fmt::format("mlp 784-{}-10", hidden_dashed(o.hidden));
  if (o.model == "gpt")
    return fmt::format("gpt {}x{}, {} heads, context {}{} (a sample is a {}-byte sequence)",
                       o.gpt_layers, o.gpt_width, o.gpt_heads, o.gpt_context,
                       o.gpt_activation_checkpointing ? ", activation checkpointing" : "",
                       o.gpt_context);
  return o.model;
}

const BenchModel& find_model(const std::string& name) {
  std::vector<std::string> valid;
  for (const BenchModel& m : kBenchModels) valid.push_back(m.name);
  check_model_name(name, "bench", valid);  // an unknown name, with the likely meant one
  return *std::find_if(std::begin(kBenchModels), std::end(kBenchModels),
                       [&](const BenchModel& m) { return name == m.name; });
}

size_t baseline_index(const std::vector<BenchResult>& r) {
  for (size_t i = 0; i < r.size(); ++i) {
    if (r[i].precision == "32-true") return i;
  }
  return 0;
}

// The SIMD level mantissa's kernels ran at and oneDNN's ISA, with the MANTISSA_DISABLE_SIMD
// that capped them: a capped run's numbers are told apart from the CPU's native ones.
std::string simd_text() {
  std::string s = fmt::format("SIMD level: {}, oneDNN ISA: {}", simd_level_name(simd_level()),
                              onednn_isa_name());
  if (const char* disabled = std::getenv("MANTISSA_DISABLE_SIMD"))
    s += fmt::format(" (capped by MANTISSA_DISABLE_SIMD={})", escape_untrusted(disabled));
  // Not a cap the user set, but a level below the CPU's features all the same.
  if (avx512_bf16_set_aside())
    s += fmt::format(
        " (AVX-512 BF16 set aside: {}, bf16 widened to fp32; "
        "MANTISSA_USE_AVX512_BF16=1 uses it)",
        kAvx512Bf16SetAsideReason);
  return s;
}

// The run's training seconds: its epochs' (a step-limited run's last one is the part it trained).
double training_seconds(const TrainMetrics& m) {
  return std::accumulate(m.epoch_seconds.begin(), m.epoch_seconds.end(), 0.0);
}

}  // namespace

std::vector<BenchResult> run_bench(const BenchOptions& options) {
  BenchOptions o = options;
  const BenchModel& model = find_model(o.model);
  if (o.batch_size == 0) o.batch_size = default_batch_size(o.model);
  MANTISSA_CHECK(!o.precisions.empty(), "bench", "--precisions needs at least one precision");
  optim::check_optimizer_name(o.optimizer);
  MANTISSA_CHECK(o.steps >= 1 && o.untimed_steps >= 0, "bench",
                 "--steps must be at least 1 and --untimed-steps not negative");
  MANTISSA_CHECK(o.rounds >= 1, "bench", "--rounds must be at least 1, got {}", o.rounds);
  MANTISSA_CHECK(o.batch_size >= 1, "bench", "--batch-size must be at least 1, got {}",
                 o.batch_size);
  // Validate every name before spending time on the first one.
  std::vector<std::string> canonical;
  for (const auto& p : o.precisions) canonical.push_back(train::normalize_precision(p));
  check_no_precision_twice(o.precisions, canonical, "bench");
  check_settings_apply_to_some(canonical, o.precision_options, "bench");
  check_quant_options_apply(canonical, o.quant, "bench");
  MANTISSA_CHECK(o.model == "mlp" || o.hidden == BenchOptions{}.hidden, "bench",
                 "--hidden sizes the MLP; it does not apply to --model {}", o.model);
  const BenchOptions defaults;
  MANTISSA_CHECK(o.model == "gpt" ||
                     (o.gpt_layers == defaults.gpt_layers && o.gpt_width == defaults.gpt_width &&
                      o.gpt_heads == defaults.gpt_heads && o.gpt_context == defaults.gpt_context),
                 "bench",
                 "--layers, --width, --heads and --context size the GPT; they do not "
                 "apply to --model {}",
                 o.model);
  MANTISSA_CHECK(o.model == "gpt" || !o.gpt_activation_checkpointing, "bench",
                 "--activation-checkpointing applies to --model gpt only");
  if (o.gpt_activation_checkpointing)
    check_activation_checkpointing(canonical, o.precision_options, "bench");
  if (o.model == "gpt") {
    // In the flags' names, as train checks them (the GPT would name its own fields).
    MANTISSA_CHECK(o.gpt_layers >= 1 && o.gpt_width >= 1 && o.gpt_heads >= 1 && o.gpt_context >= 1,
                   "bench",
                   "--layers, --width, --heads and --context must be at least 1, got --layers {} "
                   "--width {} --heads {} --context {}",
                   o.gpt_layers, o.gpt_width, o.gpt_heads, o.gpt_context);
    MANTISSA_CHECK(o.gpt_width % o.gpt_heads == 0, "bench",
                   "--width {} must be divisible by --heads {} (each head takes width / heads of "
                   "the embedding)",
                   o.gpt_width, o.gpt_heads);
  }
  MANTISSA_CHECK(o.model == "gpt" || o.text.empty(), "bench",
                 "--text is the GPT's corpus; --model {} trains on Fashion-MNIST (--data-dir)",
                 o.model);
  // --fp8-exclude names checked against the model (as the Trainer converts it) now, not when
  // the transformer-engine run starts after the others ran.
  TrainMetrics unused;
  check_fp8_exclude_names(canonical, o.precision_options, [&]() -> std::unique_ptr<nn::Module> {
    if (o.model == "gpt")
      return std::make_unique<models::LanguageModel>(
          std::make_shared<models::GPT>(gpt_config(bench_gpt_options(o), kFloat32)));
    return std::make_unique<models::ImageClassifier>(
        make_model(image_train_options(o, canonical.front(), 1), kFloat32),
        optim::OptimizerChoice{}, &unused);
  });
  // --quant-ignore too: a typo failed when the first quantized precision started.
  check_quant_ignore_names(canonical, o.quant, [&]() -> std::shared_ptr<nn::Module> {
    if (o.model == "gpt")
      return std::make_shared<models::GPT>(gpt_config(bench_gpt_options(o), kFloat32));
    return make_model(image_train_options(o, canonical.front(), 1), kFloat32);
  });
  // A warning, as `train` gives: the GPT reads its text corpus whatever the image directory.
  if (o.model == "gpt" && !o.data_dir.empty())
    warn(
        "--data-dir is the Fashion-MNIST directory of the image models: --model gpt ignores it "
        "(it trains on its text corpus: --text, by default the Debian package 'fortunes')");

  // A B C, A B C, ...: drift on a shared machine reaches every precision alike, and each
  // precision keeps its fastest round (the least disturbed).
  std::vector<BenchResult> results(canonical.size());
  // Around every run (each installs them too, nested): a signal between two runs stops the next
  // one instead of being forgotten.
  train::InterruptHandlers interrupt_handlers;
  for (int64_t round = 0; round < o.rounds; ++round) {
    // The first round says its warnings; the others would repeat them once per round.
    std::optional<WarningSilencer> repeat;
    if (round > 0) repeat.emplace();
    for (size_t i = 0; i < canonical.size(); ++i) {
      TrainMetrics m;
      try {
        if (o.untimed_steps > 0) model.run(o, canonical[i], o.untimed_steps);
        m = model.run(o, canonical[i], o.steps);
      } catch (const TrainingInterrupted& e) {
        // The training run's advice (--checkpoint-dir, --resume) is no option of bench's: a
        // measurement cannot be resumed.
        throw TrainingInterrupted(
            fmt::format("interrupted by {} in round {} of {} ({}, after step {}); a benchmark "
                        "cannot be resumed, and nothing was reported: run bench again (fewer "
                        "--precisions, --steps or --rounds take less time)",
                        e.signal_name(), round + 1, o.rounds, canonical[i], e.after_step()),
            e.exit_code(), e.after_step());
      }
      BenchResult& r = results[i];
      r.precision = canonical[i];
      r.round_samples_per_second.push_back(m.samples_per_second);
      if (round == 0 || m.samples_per_second > r.metrics.samples_per_second)
        r.metrics = std::move(m);
    }
  }
  for (const BenchResult& r : results)
    if (const std::optional<std::string> w = bench_spread_warning(r)) warn(*w);
  return results;
}

double median_samples_per_second(const BenchResult& r) {
  return median(r.round_samples_per_second);
}

double round_spread(const BenchResult& r) {
  const std::vector<double>& v = r.round_samples_per_second;
  if (v.size() < 2) return 0;
  const auto [slowest, fastest] = std::minmax_element(v.begin(), v.end());
  return *slowest > 0 ? *fastest / *slowest - 1 : 0;
}

std::optional<std::string> bench_spread_warning(const BenchResult& r) {
  const double spread = round_spread(r);
  if (!(spread > kBenchSpreadWarning)) return std::nullopt;
  const auto [slowest, fastest] =
      std::minmax_element(r.round_samples_per_second.begin(), r.round_samples_per_second.end());
  return fmt::format(
      "{}: its {} rounds differ by {:.0f}% ({:.0f} to {:.0f} samples/s): this machine is noisy "
      "(other load, frequency changes), so a single round can mislead; the table gives the "
      "fastest round; rerun with more --rounds or --steps, or on a quiet machine",
      r.precision, r.round_samples_per_second.size(), 100 * spread, *slowest, *fastest);
}

std::string format_bench_table(const BenchOptions& o, const std::vector<BenchResult>& r) {
  if (r.empty()) return "";
  const BenchResult& base = r[baseline_index(r)];
  std::string out = fmt::format(
      "mantissa bench: model {}, batch {}, optimizer {}, {} steps per precision, {} round{}, {} "
      "thread{}\n",
      model_description(o), o.batch_size, o.optimizer, o.steps, o.rounds, o.rounds == 1 ? "" : "s",
      base.metrics.threads, base.metrics.threads == 1 ? "" : "s");
  // The --fp8-* settings the transformer-engine rows ran under (the recipe above all).
  if (!o.precision_options.empty() && std::any_of(r.begin(), r.end(), [](const BenchResult& x) {
        return train::precision_traits(x.precision).fp8;
      })) {
    // Ends in ")", never in a number: bench/min_of_rounds.sh takes such lines as rows.
    out += fmt::format("transformer-engine with {} (its --fp8-* settings)\n",
                       settings_as_flags(o.precision_options));
  }
  out += fmt::format("CPU: {}\n{}\n\n", describe_cpu(), simd_text());
  // The first column as wide as the longest name ("transformer-engine-float16" is 26).
  size_t name_width = std::string("precision").size();
  for (const auto& x : r) name_width = std::max(name_width, x.precision.size());
  const std::string vs = fmt::format("vs {}", base.precision);
  const size_t vs_width = std::max<size_t>(10, vs.size());
  // ms/step stays the last column: bench/min_of_rounds.sh reads it there.
  out += fmt::format("{:<{}} {:>11} {:>{}} {:>11} {:>7} {:>16} {:>{}} {:>10}\n", "precision",
                     name_width, "samples/s", vs, vs_width, "median", "spread", "peak train MiB",
                     vs, vs_width, "ms/step");
  for (const auto& x : r) {
    const double mib = static_cast<double>(x.metrics.peak_training_memory_bytes) / (1 << 20);
    const double mem_ratio = base.metrics.peak_training_memory_bytes > 0
                                 ? static_cast<double>(x.metrics.peak_training_memory_bytes) /
                                       static_cast<double>(base.metrics.peak_training_memory_bytes)
                                 : 0.0;
    // Whole samples/s, but below 100 one decimal (the GPT at a small batch read 1 and 1 for
    // a 0.82 ratio).
    const double sps = x.metrics.samples_per_second;
    const double med = median_samples_per_second(x);
    const std::string spread =
        x.round_samples_per_second.size() < 2 ? "-" : fmt::format("{:.1f}%", 100 * round_spread(x));
    out +=
        fmt::format("{:<{}} {:>11.{}f} {:>{}.2f} {:>11.{}f} {:>7} {:>16.1f} {:>{}.2f} {:>10.2f}\n",
                    x.precision, name_width, sps, sps < 100 ? 1 : 0,
                    x.metrics.samples_per_second / base.metrics.samples_per_second, vs_width, med,
                    med < 100 ? 1 : 0, spread, mib, mem_ratio, vs_width,
                    1e3 * training_seconds(x.metrics) / static_cast<double>(o.steps));
  }
  // No line but the rows ends in a number (bench/min_of_rounds.sh takes such lines for rows).
  out += fmt::format("\nsamples/s, its ratio and ms/step: the fastest of {} round{} per precision",
                     o.rounds, o.rounds == 1 ? "" : "s");
  out +=
      " (the precisions\nin turn, round after round); median: the median round; spread: how much "
      "faster the\nfastest round was than the slowest\n";
  return out;
}

int64_t default_batch_size(const std::string& model) {
  if (model == "cnn") return 128;
  if (model == "gpt") return 16;
  return 256;
}

void write_bench_json(const BenchOptions& o, const std::vector<BenchResult>& results) {
  nlohmann::ordered_json j;
  j["model"] = o.model;
  // The model's size: --hidden is the MLP's only (the GPT's JSON said "hidden": "1024,1024",
  // the MLP default it never used).
  if (o.model == "mlp") j["hidden"] = o.hidden;
  if (o.model == "gpt") {
    j["layers"] = o.gpt_layers;
    j["width"] = o.gpt_width;
    j["heads"] = o.gpt_heads;
    j["context"] = o.gpt_context;
    j["activation_checkpointing"] = o.gpt_activation_checkpointing;
  }
  j["batch_size"] = o.batch_size;
  j["optimizer"] = o.optimizer;
  j["accelerator"] = train::resolve_accelerator(o.accelerator);
  j["steps"] = o.steps;
  j["untimed_steps"] = o.untimed_steps;
  j["rounds"] = o.rounds;
  // What else changes what the runs train (--lora-rank freezes every Linear's weight).
  add_finetuning_settings(j, o.precisions, o.quant, o.precision_options);
  j["cpu"] = describe_cpu();
  // The kernels actually used: a run capped by MANTISSA_DISABLE_SIMD (or ONEDNN_MAX_CPU_ISA)
  // measures another machine than the CPU named above.
  j["simd_level"] = simd_level_name(simd_level());
  j["onednn_isa"] = onednn_isa_name();
  const char* disabled = std::getenv("MANTISSA_DISABLE_SIMD");
  j["mantissa_disable_simd"] = disabled != nullptr ? nlohmann::json(disabled) : nullptr;
  j["avx512_bf16_set_aside"] = avx512_bf16_set_aside();
  j["threads"] = results.empty() ? omp_get_max_threads() : results.front().metrics.threads;
  j["results"] = nlohmann::json::array();
  for (const auto& r : results) {
    // samples_per_second and seconds_per_step: the fastest round's, as the table's.
    nlohmann::ordered_json row = {{"precision", r.precision}};
    if (r.metrics.fp8_recipe) row["fp8_recipe"] = *r.metrics.fp8_recipe;
    row.update(nlohmann::ordered_json{
        {"samples_per_second", r.metrics.samples_per_second},
        {"seconds_per_step", training_seconds(r.metrics) / static_cast<double>(o.steps)},
        {"median_samples_per_second", median_samples_per_second(r)},
        {"round_samples_per_second", r.round_samples_per_second},
        {"round_spread", round_spread(r)},
        {"peak_training_memory_bytes", r.metrics.peak_training_memory_bytes},
        {"peak_memory_bytes", r.metrics.peak_memory_bytes},
        {"optimizer_state_bytes", r.metrics.optimizer_state_bytes},
        {"train_loss", r.metrics.train_loss.front()}});
    j["results"].push_back(row);
  }
  // Whole or not at all, as compare's reports: written in place, a full disk left an empty file
  // behind and the run still exited 0.
  io::write_text_file_atomically(o.json, j.dump(2) + "\n", "--json");
}

}  // namespace mantissa::recipes
