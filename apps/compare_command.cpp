#include "compare_command.h"

#include <fmt/format.h>
#include <omp.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "mantissa/core/cpu_features.h"
#include "mantissa/core/error.h"
#include "mantissa/kernels/kernel_paths.h"
#include "mantissa/train/html_report.h"
#include "mantissa/train/precision_registry.h"
#include "mantissa/version.h"
#include "fp8_options.h"
#include "train_loop.h"

namespace mantissa::app {
namespace {

double last(const std::vector<double>& v) { return v.empty() ? NAN : v.back(); }

// Peak memory of the training itself (model, optimizer state, activations), without the data
// set every run holds alike, so the ratios show what the precision changes.
double peak_bytes(const TrainMetrics& m) {
  return static_cast<double>(m.peak_training_memory_bytes);
}

std::string machine_text() {
  return fmt::format("mantissa {}\nthreads: {} (OpenMP)\noneDNN ISA: {}\nCPU features:\n{}",
                     version(), omp_get_max_threads(), onednn_isa_name(), describe_cpu_features());
}

// Written atomically like the other outputs: a reader never sees half a report.
void write_text(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    MANTISSA_CHECK(out.good(), "compare", "cannot write '{}'", tmp);
    out << text;
    MANTISSA_CHECK(out.good(), "compare", "write to '{}' failed", tmp);
  }
  MANTISSA_CHECK(std::rename(tmp.c_str(), path.c_str()) == 0, "compare",
                 "cannot rename '{}' to '{}'", tmp, path);
}

}  // namespace

std::vector<TrainMetrics> run_compare(const CompareOptions& o) {
  MANTISSA_CHECK(!o.precisions.empty(), "compare", "--precisions needs at least one precision");
  std::vector<std::string> names;
  std::set<std::string> seen;
  for (const std::string& p : o.precisions) {  // all names checked before minutes of training
    const std::string c = canonical_precision(p);
    MANTISSA_CHECK(seen.insert(c).second, "compare", "precision '{}' is listed twice ('{}')", c, p);
    names.push_back(c);
  }
  std::vector<TrainMetrics> runs;
  for (size_t i = 0; i < names.size(); ++i) {
    if (!o.quiet) fmt::print("[{}/{}] {}\n", i + 1, names.size(), names[i]);
    TrainOptions t;
    t.model = o.model;
    t.precision = names[i];
    t.precision_options = settings_for(names[i], o.precision_options);
    t.epochs = o.epochs;
    t.batch_size = o.batch_size;
    t.lr = o.lr;
    t.seed = o.seed;  // same seed: same initial weights and batch order for every precision
    t.hidden = o.hidden;
    t.quant = o.quant;
    t.threads = o.threads;
    t.train_subset = o.train_subset;
    t.data_dir = o.data_dir;
    t.quiet = o.quiet;
    runs.push_back(run_training(t));
  }
  return runs;
}

size_t compare_baseline(const std::vector<TrainMetrics>& runs) {
  for (size_t i = 0; i < runs.size(); ++i)
    if (runs[i].precision == "32-true") return i;
  return 0;
}

std::string format_compare_table(const std::vector<TrainMetrics>& runs) {
  if (runs.empty()) return "";
  const TrainMetrics& b = runs[compare_baseline(runs)];
  std::string s =
      fmt::format("{:<12} {:>9} {:>10} {:>10} {:>9} {:>10} {:>9} {:>8}\n", "precision", "test acc",
                  "final loss", "samples/s", "speed-up", "peak MiB", "memory", "skipped");
  for (const TrainMetrics& m : runs) {
    s += fmt::format("{:<12} {:>9.4f} {:>10.4f} {:>10.0f} {:>8.2f}x {:>10.1f} {:>8.2f}x {:>8}\n",
                     m.precision, last(m.test_accuracy), last(m.train_loss), m.samples_per_second,
                     m.samples_per_second / b.samples_per_second, peak_bytes(m) / (1 << 20),
                     peak_bytes(m) / peak_bytes(b),
                     m.skipped_steps ? std::to_string(*m.skipped_steps) : "-");
  }
  return s + fmt::format("(speed-up and memory relative to {}; peak MiB excludes the data set)\n",
                         b.precision);
}

std::string compare_html(const CompareOptions& o, const std::vector<TrainMetrics>& runs) {
  std::vector<train::ReportRun> rows;
  for (const TrainMetrics& m : runs) {
    rows.push_back({.precision = m.precision,
                    .step_losses = m.step_losses,
                    .test_accuracy = last(m.test_accuracy),
                    .final_loss = last(m.train_loss),
                    .samples_per_second = m.samples_per_second,
                    .peak_memory_bytes = peak_bytes(m),
                    .skipped_steps = m.skipped_steps});
  }
  train::ReportInfo info;
  info.title = fmt::format("mantissa compare: {} in {} precisions", o.model, runs.size());
  if (!runs.empty()) info.baseline = runs[compare_baseline(runs)].precision;
  info.settings = {
      {"model", fmt::format("{} (hidden {}, {} parameters)", o.model, o.hidden,
                            runs.empty() ? 0 : runs.front().parameters)},
      {"data", o.train_subset > 0
                   ? fmt::format("Fashion-MNIST, first {} training images", o.train_subset)
                   : std::string("Fashion-MNIST, 60000 training images")},
      {"epochs", std::to_string(o.epochs)},
      {"batch size", std::to_string(o.batch_size)},
      {"optimizer", fmt::format("AdamW, lr {:g}", o.lr)},
      {"seed", std::to_string(o.seed)},
      {"memory", "peak training memory: counting allocator high-water mark less the data set"},
  };
  info.machine = machine_text();
  return train::html_report(rows, info);
}

std::string compare_json(const CompareOptions& o, const std::vector<TrainMetrics>& runs) {
  nlohmann::ordered_json j;
  j["model"] = o.model;
  j["hidden"] = o.hidden;
  j["epochs"] = o.epochs;
  j["batch_size"] = o.batch_size;
  j["seed"] = o.seed;
  j["train_subset"] = o.train_subset;
  const size_t bi = compare_baseline(runs);
  j["baseline"] = runs.empty() ? "" : runs[bi].precision;
  j["runs"] = nlohmann::ordered_json::array();
  for (const TrainMetrics& m : runs) {
    nlohmann::ordered_json r;
    r["precision"] = m.precision;
    r["final_test_accuracy"] = last(m.test_accuracy);
    r["final_train_loss"] = last(m.train_loss);
    r["samples_per_second"] = m.samples_per_second;
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

void add_compare_command(CLI::App& app) {
  auto opts = std::make_shared<CompareOptions>();
  CLI::App* cmd = app.add_subcommand(
      "compare", "Train once per precision on the same data and seed and compare the results");
  cmd->add_option("--model", opts->model, "Model: mlp")->capture_default_str();
  cmd->add_option("--precisions", opts->precisions, "Precisions to compare, comma separated")
      ->delimiter(',')
      ->capture_default_str();
  add_fp8_options(cmd, &opts->precision_options);
  cmd->add_option("--epochs", opts->epochs, "Passes over the training set")->capture_default_str();
  cmd->add_option("--batch-size", opts->batch_size, "Samples per step")->capture_default_str();
  cmd->add_option("--lr", opts->lr, "AdamW learning rate")->capture_default_str();
  cmd->add_option("--seed", opts->seed, "Seed for initialisation and shuffling")
      ->capture_default_str();
  cmd->add_option("--hidden", opts->hidden, "Hidden sizes, comma separated")->capture_default_str();
  cmd->add_option("--threads", opts->threads, "Worker threads (default: all cores)");
  add_quant_options(*cmd, opts->quant);
  cmd->add_option("--train-subset", opts->train_subset,
                  "Train on the first N training images only (quick runs)");
  cmd->add_option("--data-dir", opts->data_dir, "Fashion-MNIST directory (as for train)");
  cmd->add_option("--html", opts->html, "Write an HTML report (inline SVG charts) here");
  cmd->add_option("--json", opts->json, "Write the results as JSON here");
  cmd->add_flag("--quiet", opts->quiet, "Only print the table");
  cmd->callback([opts] {
    const std::vector<TrainMetrics> runs = run_compare(*opts);
    fmt::print("\n{}", format_compare_table(runs));
    if (!opts->html.empty()) {
      write_text(opts->html, compare_html(*opts, runs));
      fmt::print("report written to {}\n", opts->html);
    }
    if (!opts->json.empty()) {
      write_text(opts->json, compare_json(*opts, runs));
      fmt::print("results written to {}\n", opts->json);
    }
  });
}

}  // namespace mantissa::app
