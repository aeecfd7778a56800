#include "mantissa/recipes/compare_run.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>

#include "mantissa/core/cpu_features.h"
#include "mantissa/core/cpu_identity.h"
#include "mantissa/core/error.h"
#include "mantissa/core/warning.h"
#include "mantissa/io/output_path.h"
#include "mantissa/kernels/kernel_paths.h"
#include "mantissa/models/image_classifier.h"
#include "mantissa/optim/optimizer_factory.h"
#include "mantissa/recipes/finetuning.h"
#include "mantissa/recipes/image_run.h"
#include "mantissa/recipes/model_hparams.h"
#include "mantissa/recipes/model_names.h"
#include "mantissa/recipes/multi_precision_flags.h"
#include "mantissa/recipes/precision_settings.h"
#include "mantissa/recipes/thread_count.h"
#include "mantissa/train/callback.h"
#include "mantissa/train/precision_registry.h"
#include "mantissa/train/report/html_report.h"
#include "mantissa/train/signals.h"
#include "mantissa/train/trainer.h"
#include "mantissa/version.h"

namespace mantissa::recipes {
namespace {

double last(const std::vector<double>& v) { return v.empty() ? NAN : v.back(); }

constexpr int64_t kTrainSetSize = 60000;  // Fashion-MNIST's training images

// The accuracy of the weights a run ended with (the last epoch's when it was not recorded).
double final_accuracy(const TrainMetrics& m) {
  return m.final_test_accuracy ? *m.final_test_accuracy : last(m.test_accuracy);
}

// What the reader of the report must know to read its ratios: bf16 emulated on this CPU.
std::vector<std::string> compare_warnings(const std::vector<TrainMetrics>& runs) {
  for (const TrainMetrics& m : runs) {
    if (m.bf16_emulated) {
      const std::string w = bf16_emulation_warning();
      return {w.empty() ? std::string("bf16 math is emulated through fp32 on this CPU") : w};
    }
  }
  return {};
}

// The reports' warnings: those of compare_warnings, and a quantized precision that froze its
// weights and had no adapters (its accuracy is that of the biases alone; the console says so
// when it runs, and the reports say it too).
std::vector<std::string> report_warnings(const CompareOptions& o,
                                         const std::vector<TrainMetrics>& runs) {
  std::vector<std::string> out = compare_warnings(runs);
  if (o.quant.lora_rank > 0) return out;
  for (const TrainMetrics& m : runs) {
    if (!train::precision_traits(m.precision).stores_codes) continue;
    out.push_back(fmt::format(
        "{} froze its quantized Linear weights and had no adapters (--lora-rank 0): {} of its {} "
        "parameters trained, so its accuracy is not that of full training; add --lora-rank 8 "
        "for QLoRA fine-tuning",
        m.precision, m.trainable_parameters.value_or(m.parameters), m.parameters));
  }
  return out;
}

// The reports' warnings: every one printed while the runs were made, then report_warnings's
// that were not among them. (The reports held only report_warnings: a reader of the HTML or
// JSON never learnt that a speed-up was unreliable or a precision emulated.)
std::vector<std::string> all_warnings(const CompareOptions& o,
                                      const std::vector<TrainMetrics>& runs,
                                      const std::vector<std::string>& printed) {
  std::vector<std::string> out;
  for (const std::vector<std::string>& list : {printed, report_warnings(o, runs)})
    for (const std::string& w : list)
      if (std::find(out.begin(), out.end(), w) == out.end()) out.push_back(w);
  return out;
}

// Peak memory of the training itself (model, optimizer state, activations), without the data
// set every run holds alike, so the ratios show what the precision changes.
double peak_bytes(const TrainMetrics& m) {
  return static_cast<double>(m.peak_training_memory_bytes);
}

std::string machine_text() {
  return fmt::format(
      "mantissa {}\nCPU: {}\nSIMD level: {} (mantissa's kernels)\nthreads: {} (OpenMP)\noneDNN "
      "ISA: {}\nCPU features:\n{}",
      version(), describe_cpu(), simd_level_name(simd_level()), omp_get_max_threads(),
      onednn_isa_name(), describe_cpu_features());
}

// A speed-up from timing rounds far apart (this precision's or the baseline's) can be off many
// times over: the table and the HTML mark it "?".
bool speedup_unreliable(const TrainMetrics& m, const TrainMetrics& baseline) {
  return timing_spread_warning(baseline).has_value() || timing_spread_warning(m).has_value();
}

// What the "?" means, under the console table and the HTML one alike.
std::string unreliable_speedup_note(const std::string& baseline) {
  return fmt::format(
      "?: its timing rounds, or {}'s, differ by more than {:.1f}x: that speed-up is unreliable "
      "(see the warnings; rerun on a quiet machine)",
      baseline, kTimingSpreadWarning);
}

// Written atomically like the other outputs: a reader never sees half a report.
// Records when each training step ends, to time the steps after the untimed ones only.
class StepTimer : public train::Callback {
 public:
  std::string state_key() const override { return "StepTimer"; }
  void on_train_epoch_start(train::Trainer&, train::TrainModule&) override {
    ends_.assign(1, Clock::now());  // ends_[i]: end of step i; ends_[0]: the start
  }
  void on_train_batch_end(train::Trainer&, train::TrainModule&, const Tensor&, const data::Example&,
                          int64_t) override {
    ends_.push_back(Clock::now());
  }
  // Seconds from the end of step `from` to the end of step `to` (0: the epoch's start).
  double seconds(size_t from, size_t to) const {
    MANTISSA_CHECK(to < ends_.size(), "compare", "timed run ended after {} of {} steps",
                   ends_.size() - 1, to);
    return std::chrono::duration<double>(ends_[to] - ends_[from]).count();
  }

 private:
  using Clock = std::chrono::steady_clock;
  std::vector<Clock::time_point> ends_;
};

// The flags besides the optimizer that change what each run trains, as the HTML report lists
// them: read back from the JSON report's keys (add_finetuning_settings), so which ones apply is
// decided in one place. With --lora-rank even 32-true trains the adapters only; the reports
// left these out, so "nf4 vs 32-true with --lora-rank 8" read like full training.
std::vector<std::pair<std::string, std::string>> finetuning_settings(const CompareOptions& o) {
  nlohmann::ordered_json j = nlohmann::ordered_json::object();
  add_finetuning_settings(j, o.precisions, o.quant, o.precision_options);
  std::vector<std::pair<std::string, std::string>> out;
  if (j.contains("lora")) {
    const auto& l = j["lora"];
    out.emplace_back("lora", fmt::format("rank {}, alpha {:g}, dropout {:g} on every Linear "
                                         "(their weights frozen)",
                                         l["rank"].get<int64_t>(), l["alpha"].get<double>(),
                                         l["dropout"].get<double>()));
  }
  if (j.contains("init_from")) out.emplace_back("init from", j["init_from"].get<std::string>());
  if (j.contains("quant_dtype")) {
    const auto ignore = j["quant_ignore"].get<std::string>();
    out.emplace_back("quantized layers",
                     fmt::format("compute dtype {}{}", j["quant_dtype"].get<std::string>(),
                                 ignore.empty() ? std::string() : ", kept as they are: " + ignore));
  }
  if (j.contains("precision_options"))
    for (const auto& [key, value] : j["precision_options"].items())
      out.emplace_back(key, as_flag_value(value));
  return out;
}

TrainOptions train_options(const CompareOptions& o, const std::string& precision) {
  TrainOptions t;
  t.model = o.model;
  t.precision = precision;
  t.precision_options = settings_for(precision, o.precision_options);
  t.epochs = o.epochs;
  t.batch_size = o.batch_size;
  t.optimizer = o.optimizer;
  t.optim_bits_32 = o.optim_bits_32;
  t.lr = o.lr;
  t.seed = o.seed;  // same seed: same initial weights and batch order for every precision
  t.hidden = o.hidden;
  t.quant = o.quant;
  t.threads = o.threads;
  t.accelerator = o.accelerator;
  t.train_subset = o.train_subset;
  t.data_dir = o.data_dir;
  t.quiet = o.quiet;
  return t;
}

// Samples/s of `timed_steps` steps after `untimed_steps` untimed ones, in a fresh run of one
// epoch over exactly that many full batches, without validation.
double timed_samples_per_second(const CompareOptions& o, const std::string& precision) {
  TrainOptions t = train_options(o, precision);
  t.epochs = 1;
  t.train_subset = (o.untimed_steps + o.timed_steps) * o.batch_size;
  t.quiet = true;
  t.evaluate = false;
  auto timer = std::make_shared<StepTimer>();
  t.callbacks.push_back(timer);
  // The training run said its warnings already (a skipping loss scaler's, per epoch of this
  // short run, would come once per round and precision, about "epoch 1" of no epoch shown).
  WarningSilencer silent;
  run_training(t);
  const auto from = static_cast<size_t>(o.untimed_steps);
  const double secs = timer->seconds(from, from + static_cast<size_t>(o.timed_steps));
  return static_cast<double>(o.timed_steps * o.batch_size) / secs;
}

void check_compare_options(const CompareOptions& o) {
  MANTISSA_CHECK(o.model != "gpt", "compare",
                 "compare does not support model 'gpt'; it supports {} (for the GPT's throughput "
                 "per precision, use `mantissa bench --model gpt`)",
                 kCompareModels);
  check_model_name(o.model, "compare", {"mlp", "cnn", "vit"});
  MANTISSA_CHECK(o.timing_rounds >= 1, "compare", "--rounds must be at least 1, got {}",
                 o.timing_rounds);
  MANTISSA_CHECK(o.timed_steps >= 1, "compare", "--timed-steps must be at least 1, got {}",
                 o.timed_steps);
  MANTISSA_CHECK(o.untimed_steps >= 0, "compare", "--untimed-steps must not be negative, got {}",
                 o.untimed_steps);
  MANTISSA_CHECK(o.batch_size >= 1, "compare", "--batch-size must be at least 1, got {}",
                 o.batch_size);
  MANTISSA_CHECK(
      (o.untimed_steps + o.timed_steps) * o.batch_size <= kTrainSetSize, "compare",
      "--untimed-steps {} + --timed-steps {} batches of --batch-size {} exceed the {} training "
      "images",
      o.untimed_steps, o.timed_steps, o.batch_size, kTrainSetSize);
  MANTISSA_CHECK(o.threads >= 0, "compare", "--threads must be at least 1, got {}", o.threads);
  optim::check_optimizer_name(o.optimizer);
}

}  // namespace

double median(std::vector<double> v) {
  if (v.empty()) return NAN;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

std::vector<TrainMetrics> run_compare(const CompareOptions& o) {
  check_compare_options(o);
  MANTISSA_CHECK(!o.precisions.empty(), "compare", "--precisions needs at least one precision");
  std::vector<std::string> names;
  for (const std::string& p : o.precisions)  // all names checked before minutes of training
    names.push_back(train::normalize_precision(p));
  check_no_precision_twice(o.precisions, names, "compare");
  check_settings_apply_to_some(names, o.precision_options, "compare");
  check_quant_options_apply(names, o.quant, "compare");
  // --fp8-exclude names checked against the model (as the Trainer converts it) now, not when
  // the transformer-engine run starts after the others trained.
  TrainMetrics unused;
  check_fp8_exclude_names(names, o.precision_options, [&]() -> std::unique_ptr<nn::Module> {
    return std::make_unique<models::ImageClassifier>(
        make_model(train_options(o, names.front()), kFloat32), optim::OptimizerChoice{}, &unused);
  });
  // --quant-ignore too: a typo failed when the first quantized precision started.
  check_quant_ignore_names(names, o.quant,
                           [&] { return make_model(train_options(o, names.front()), kFloat32); });
  // The reports are written after all the work: check now that they can be.
  if (!o.html.empty()) io::check_output_file(o.html, "--html");
  if (!o.json.empty()) io::check_output_file(o.json, "--json");

  // Around every run (each run_training installs them too, nested): a signal that lands between
  // two runs, or after a run's last look at it, stops the next run instead of being forgotten
  // when the run that received it returns.
  train::InterruptHandlers interrupt_handlers;
  std::vector<TrainMetrics> runs;
  for (size_t i = 0; i < names.size(); ++i) {
    if (!o.quiet) {
      fmt::print("[{}/{}] {}\n", i + 1, names.size(), names[i]);
      std::fflush(stdout);  // progress: seen at once in a log file too
    }
    try {
      TrainOptions t = train_options(o, names[i]);
      // The model's layers are the same in every precision: their table is printed once, before
      // the first run (each run's start line still names its precision and parameters).
      t.model_summary = i == 0;
      runs.push_back(run_training(t));
    } catch (const TrainingInterrupted& e) {
      // No checkpoint to resume from (compare has no --checkpoint-dir): what finished is
      // reported, marked as interrupted; the speeds of the training runs are not the timing
      // rounds', so none is shown.
      for (TrainMetrics& m : runs) m.samples_per_second = NAN;
      const std::string note = fmt::format(
          "interrupted by {} after step {} of the {} run (precision {} of {}): {} finished "
          "training, none was timed",
          e.signal_name(), e.after_step(), names[i], i + 1, names.size(),
          i == 0 ? std::string("no precision") : fmt::format("{} of {}", i, names.size()));
      std::vector<std::string> rest(names.begin() + static_cast<std::ptrdiff_t>(i), names.end());
      throw CompareInterrupted(
          fmt::format("{}; a comparison cannot be resumed: run compare again (`--precisions {}` "
                      "for the precisions that did not finish)",
                      note, fmt::join(rest, ",")),
          e.exit_code(), std::move(runs), note);
    } catch (const train::TrainingDiverged& e) {
      // Which precision still converges is what compare is for: one that diverges is a
      // result (reported in its row), not the end of the comparison.
      TrainMetrics m;
      m.precision = names[i];
      m.model = o.model;
      m.diverged = e.what();
      runs.push_back(m);
      if (!o.quiet) fmt::print("{} diverged: {}\n", names[i], e.what());
    }
  }
  // Throughput: A B C, A B C, ... so that no precision pays the one-time costs (oneDNN
  // primitives, allocator caches, page faults) alone, and drift on a shared machine spreads
  // over all of them; each round starts with untimed steps.
  if (!o.quiet) {
    fmt::print("timing: {} round{} of {} untimed + {} timed steps per precision\n", o.timing_rounds,
               o.timing_rounds == 1 ? "" : "s", o.untimed_steps, o.timed_steps);
    std::fflush(stdout);
  }
  for (int64_t r = 0; r < o.timing_rounds; ++r) {
    for (size_t i = 0; i < names.size(); ++i) {
      if (!runs[i].diverged.empty()) continue;
      try {
        runs[i].timed_samples_per_second.push_back(timed_samples_per_second(o, names[i]));
      } catch (const TrainingInterrupted& e) {
        // Every precision trained: report them with the rounds every precision completed.
        for (size_t k = 0; k < i; ++k)
          if (runs[k].diverged.empty()) runs[k].timed_samples_per_second.pop_back();
        for (TrainMetrics& m : runs) m.samples_per_second = median(m.timed_samples_per_second);
        const std::string note = fmt::format(
            "interrupted by {} in timing round {} of {} ({}): every precision finished "
            "training; {}",
            e.signal_name(), r + 1, o.timing_rounds, names[i],
            r == 0 ? std::string("none was timed")
                   : fmt::format("samples/s is the median of the {} complete round{}", r,
                                 r == 1 ? "" : "s"));
        throw CompareInterrupted(
            fmt::format("{}; a comparison cannot be resumed: run compare again for the full "
                        "timing (--rounds {} takes less time)",
                        note, std::max<int64_t>(r, 1)),
            e.exit_code(), std::move(runs), note);
      } catch (const train::TrainingDiverged& e) {
        // The timing steps train on: a precision that diverges there is reported as one that
        // diverged in training (its row says so), and the others are still timed.
        runs[i].diverged = fmt::format("in the timing steps: {}", e.what());
        runs[i].timed_samples_per_second.clear();
        if (!o.quiet) fmt::print("{} diverged: {}\n", names[i], runs[i].diverged);
      }
    }
  }
  for (TrainMetrics& m : runs) {
    m.samples_per_second = median(m.timed_samples_per_second);
    if (const std::optional<std::string> w = timing_spread_warning(m)) warn(*w);
  }
  return runs;
}

std::optional<std::string> timing_spread_warning(const TrainMetrics& m) {
  const std::vector<double>& t = m.timed_samples_per_second;
  if (t.size() < 2) return std::nullopt;
  const auto [lo, hi] = std::minmax_element(t.begin(), t.end());
  if (!(*lo > 0) || *hi / *lo <= kTimingSpreadWarning) return std::nullopt;
  return fmt::format(
      "{}: its timing rounds differ by {:.1f}x ({:.0f} to {:.0f} samples/s): something else "
      "loaded the machine, so its speed-up is unreliable; rerun on a quiet machine, or with more "
      "--rounds",
      m.precision, *hi / *lo, *lo, *hi);
}

size_t compare_baseline(const std::vector<TrainMetrics>& runs) {
  for (size_t i = 0; i < runs.size(); ++i)
    if (runs[i].precision == "32-true" && runs[i].diverged.empty()) return i;
  for (size_t i = 0; i < runs.size(); ++i)
    if (runs[i].diverged.empty()) return i;
  return 0;
}

std::string format_compare_table(const std::vector<TrainMetrics>& runs) {
  if (runs.empty()) return "";
  const TrainMetrics& b = runs[compare_baseline(runs)];
  // The first column 12 wide, or as wide as the longest name ("transformer-engine-float16"
  // is 26).
  size_t w = 12;
  for (const TrainMetrics& m : runs) w = std::max(w, m.precision.size());
  std::string s = fmt::format("{:<{}} {:>9} {:>10} {:>10} {:>9} {:>10} {:>9} {:>8}\n", "precision",
                              w, "test acc", "final loss", "samples/s", "speed-up", "peak MiB",
                              "memory", "skipped");
  // An unreliable speed-up is marked in its row, not only in a warning below the table.
  bool any_noisy = false;
  for (const TrainMetrics& m : runs) {
    if (!m.diverged.empty()) {
      s += fmt::format("{:<{}} diverged: {}\n", m.precision, w, m.diverged);
      continue;
    }
    const bool noisy = speedup_unreliable(m, b);
    any_noisy |= noisy;
    // An interrupted comparison timed nothing: "-" rather than nan.
    const double speedup = m.samples_per_second / b.samples_per_second;
    s += fmt::format("{:<{}} {:>9.4f} {:>10.4f} {:>10} {:>9}{}{:>10.1f} {:>8.2f}x {:>8}\n",
                     m.precision, w, final_accuracy(m), last(m.train_loss),
                     std::isfinite(m.samples_per_second)
                         ? fmt::format("{:.0f}", m.samples_per_second)
                         : std::string("-"),
                     std::isfinite(speedup) ? fmt::format("{:.2f}x", speedup) : std::string("-"),
                     noisy ? "?" : " ", peak_bytes(m) / (1 << 20), peak_bytes(m) / peak_bytes(b),
                     m.skipped_steps ? std::to_string(*m.skipped_steps) : "-");
  }
  const size_t rounds = b.timed_samples_per_second.size();
  if (rounds > 0) {
    s += fmt::format(
        "(samples/s: median of {} interleaved timing round{} per precision, untimed steps "
        "excluded; ",
        rounds, rounds == 1 ? "" : "s");
  } else {
    s += "(";
  }
  if (!b.diverged.empty()) {
    // Every precision diverged (the baseline is one that converged when any did): ratios to a
    // diverged run are meaningless, so the footer names no precision as the baseline.
    s += "no precision converged, so there is no baseline and no speed-up or memory ratio)\n";
  } else {
    s += fmt::format("speed-up and memory relative to {}; peak MiB excludes the data set)\n",
                     b.precision);
  }
  if (any_noisy) s += unreliable_speedup_note(b.precision) + "\n";
  for (const std::string& w : compare_warnings(runs)) s += "warning: " + w + "\n";
  return s;
}

std::string compare_html(const CompareOptions& o, const std::vector<TrainMetrics>& runs,
                         const std::vector<std::string>& printed_warnings,
                         const std::string& interrupted) {
  std::vector<train::ReportRun> rows;
  const TrainMetrics* base = runs.empty() ? nullptr : &runs[compare_baseline(runs)];
  for (const TrainMetrics& m : runs) {
    if (!m.diverged.empty()) continue;  // listed under the warnings
    rows.push_back({.precision = m.precision,
                    .step_losses = m.step_losses,
                    .test_accuracy = final_accuracy(m),
                    .final_loss = last(m.train_loss),
                    .samples_per_second = m.samples_per_second,
                    .peak_memory_bytes = peak_bytes(m),
                    .skipped_steps = m.skipped_steps,
                    .speedup_unreliable = speedup_unreliable(m, *base)});
  }
  train::ReportInfo info;
  if (base) info.unreliable_speedup_note = unreliable_speedup_note(base->precision);
  info.title = fmt::format("mantissa compare: {} in {} precisions", o.model, runs.size());
  // No baseline when every precision diverged (no row to mark).
  if (!runs.empty() && runs[compare_baseline(runs)].diverged.empty())
    info.baseline = runs[compare_baseline(runs)].precision;
  info.settings = {
      {"model", fmt::format("{} (hidden {}, {} parameters)", o.model, o.hidden,
                            runs.empty() ? 0 : runs.front().parameters)},
      {"data", o.train_subset > 0
                   ? fmt::format("Fashion-MNIST, first {} training images", o.train_subset)
                   : std::string("Fashion-MNIST, 60000 training images")},
      {"epochs", std::to_string(o.epochs)},
      {"batch size", std::to_string(o.batch_size)},
      {"optimizer", fmt::format("{}, lr {:g}", o.optimizer, o.lr)},
      {"seed", std::to_string(o.seed)},
      {"CPU",
       fmt::format("{}; SIMD level {}; {} thread{}", describe_cpu(), simd_level_name(simd_level()),
                   omp_get_max_threads(), omp_get_max_threads() == 1 ? "" : "s")},
      {"memory", "peak training memory: counting allocator high-water mark less the data set"},
  };
  for (auto& kv : finetuning_settings(o)) info.settings.push_back(kv);
  info.settings.push_back(
      {"throughput", fmt::format("samples/s is the median of {} rounds that train the precisions "
                                 "in turn, {} untimed steps then {} timed steps each",
                                 o.timing_rounds, o.untimed_steps, o.timed_steps)});
  info.machine = machine_text();
  info.warnings = all_warnings(o, runs, printed_warnings);
  if (!interrupted.empty()) info.warnings.insert(info.warnings.begin(), interrupted);
  for (const TrainMetrics& m : runs)
    if (!m.diverged.empty()) info.warnings.push_back(m.precision + " diverged: " + m.diverged);
  return train::html_report(rows, info);
}

std::string compare_json(const CompareOptions& o, const std::vector<TrainMetrics>& runs,
                         const std::vector<std::string>& printed_warnings,
                         const std::string& interrupted) {
  nlohmann::ordered_json j;
  if (!interrupted.empty()) j["interrupted"] = interrupted;
  j["model"] = o.model;
  j["hidden"] = o.hidden;
  j["epochs"] = o.epochs;
  j["batch_size"] = o.batch_size;
  j["optimizer"] = o.optimizer;
  j["accelerator"] = train::resolve_accelerator(o.accelerator);
  j["lr"] = o.lr;
  j["seed"] = o.seed;
  j["cpu"] = describe_cpu();
  j["simd_level"] = simd_level_name(simd_level());
  j["train_subset"] = o.train_subset;
  add_finetuning_settings(j, o.precisions, o.quant, o.precision_options);
  j["timing"] = {{"rounds", o.timing_rounds},
                 {"untimed_steps", o.untimed_steps},
                 {"timed_steps", o.timed_steps}};
  j["warnings"] = all_warnings(o, runs, printed_warnings);
  const size_t bi = compare_baseline(runs);
  // null when every precision diverged: there is no run the ratios could refer to.
  if (runs.empty() || runs[bi].diverged.empty()) {
    j["baseline"] = runs.empty() ? "" : runs[bi].precision;
  } else {
    j["baseline"] = nullptr;
  }
  j["runs"] = nlohmann::ordered_json::array();
  for (const TrainMetrics& m : runs) {
    nlohmann::ordered_json r;
    r["precision"] = m.precision;
    if (m.fp8_recipe) r["fp8_recipe"] = *m.fp8_recipe;
    if (!m.diverged.empty()) {
      r["diverged"] = m.diverged;
      j["runs"].push_back(r);
      continue;
    }
    r["final_test_accuracy"] = final_accuracy(m);
    // What each run trained (they differ with quantized precisions or --lora-rank), named and
    // counted as in the metrics JSON: every parameter element, and those the optimizer updates.
    r["parameters"] = m.parameters;
    r["trainable_parameters"] = m.trainable_parameters.value_or(m.parameters);
    r["final_train_loss"] = last(m.train_loss);
    r["samples_per_second"] = m.samples_per_second;
    r["timed_samples_per_second"] = m.timed_samples_per_second;
    r["speedup"] = m.samples_per_second / runs[bi].samples_per_second;
    r["peak_training_memory_bytes"] = m.peak_training_memory_bytes;
    r["peak_memory_bytes"] = m.peak_memory_bytes;
    r["memory_ratio"] = peak_bytes(m) / peak_bytes(runs[bi]);
    if (m.skipped_steps) r["skipped_steps"] = *m.skipped_steps;
    r["train_loss"] = m.train_loss;
    r["test_accuracy"] = m.test_accuracy;
    // NaN is not JSON; overflowed steps become null.
    nlohmann::ordered_json losses = nlohmann::ordered_json::array();
    for (double x : m.step_losses)
      losses.push_back(std::isfinite(x) ? nlohmann::ordered_json(x) : nullptr);
    r["step_losses"] = losses;
    j["runs"].push_back(r);
  }
  return j.dump(2) + "\n";
}

}  // namespace mantissa::recipes
