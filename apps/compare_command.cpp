#include "compare_command.h"

#include <fmt/format.h>

#include <algorithm>
#include <memory>

#include "comma_list.h"
#include "distributed_launch.h"
#include "fp8_options.h"
#include "mantissa/core/error.h"
#include "mantissa/core/warning.h"
#include "mantissa/io/output_path.h"
#include "mantissa/recipes/compare_run.h"
#include "mantissa/train/trainer.h"
#include "non_negative.h"
#include "optimizer_options.h"
#include "quant_options.h"
#include "threads_option.h"
#include "untimed_steps_option.h"

namespace mantissa::app {
namespace {

using namespace recipes;

}  // namespace

void add_compare_command(CLI::App& app) {
  auto opts = std::make_shared<CompareOptions>();
  CLI::App* cmd = app.add_subcommand(
      "compare", "Train once per precision on the same data and seed and compare the results");
  cmd->add_option("--model", opts->model, "Model: mlp, cnn or vit")->capture_default_str();
  add_comma_list_option(*cmd, "--precisions", opts->precisions,
                        "Precisions to compare, comma separated", precision_items());
  add_fp8_options(cmd, &opts->precision_options);
  cmd->add_option("--epochs", opts->epochs, "Passes over the training set")->capture_default_str();
  cmd->add_option("--batch-size", opts->batch_size, "Samples per step")->capture_default_str();
  add_optimizer_options(*cmd, opts->optimizer, opts->optim_bits_32);
  cmd->add_option("--lr", opts->lr, "Learning rate")->capture_default_str();
  cmd->add_option("--seed", opts->seed, "Seed for initialisation and shuffling")
      ->check(non_negative())
      ->capture_default_str();
  cmd->add_option("--hidden", opts->hidden, "Hidden sizes, comma separated")
      ->check(comma_list(hidden_size_items()))
      ->capture_default_str();
  cmd->add_option("--accelerator", opts->accelerator,
                  "cpu, gpu (or cuda: the first CUDA GPU) or auto, as in `mantissa train` "
                  "(docs/cuda.md)")
      ->capture_default_str();
  CLI::Option* threads_opt =
      cmd->add_option("--threads", opts->threads, "Worker threads (default: all cores)");
  cmd->add_option("--rounds", opts->timing_rounds,
                  "Timing rounds: each trains every precision in turn; samples/s is the median")
      ->capture_default_str();
  CLI::Option* untimed_alias = add_untimed_steps_option(
      *cmd, &opts->untimed_steps, "Untimed steps at the start of each timed run");
  cmd->add_option("--timed-steps", opts->timed_steps, "Timed steps per precision and round")
      ->capture_default_str();
  add_quant_options(*cmd, opts->quant);
  cmd->add_option("--train-subset", opts->train_subset,
                  "Train on the first N training images only (quick runs)");
  cmd->add_option("--data-dir", opts->data_dir, "Fashion-MNIST directory (as for train)");
  cmd->add_option("--html", opts->html, "Write an HTML report (inline SVG charts) here");
  cmd->add_option("--json", opts->json, "Write the results as JSON here");
  cmd->add_flag("--quiet", opts->quiet, "Only print the table");
  cmd->callback([opts, threads_opt, untimed_alias] {
    refuse_multi_rank_job("compare");
    opts->quant.quant_ignore = quant_ignore_for_model(opts->quant.quant_ignore, opts->model);
    // The reports carry every warning stderr shows for the run (see compare_json).
    const WarningRecorder printed;
    warn_deprecated_untimed_steps_alias(untimed_alias, "compare");
    check_threads_option(threads_opt, opts->threads, "compare");
    // The table and the reports: of every run, or of those that finished before a signal
    // stopped the comparison (marked as interrupted).
    const auto report = [&](const std::vector<TrainMetrics>& runs, const std::string& note) {
      if (!runs.empty()) fmt::print("\n{}", format_compare_table(runs));
      if (!opts->html.empty()) {
        io::write_text_file_atomically(
            opts->html, compare_html(*opts, runs, printed.messages(), note), "compare");
        fmt::print("report written to {}\n", opts->html);
      }
      if (!opts->json.empty()) {
        io::write_text_file_atomically(
            opts->json, compare_json(*opts, runs, printed.messages(), note), "compare");
        fmt::print("results written to {}\n", opts->json);
      }
    };
    std::vector<TrainMetrics> runs;
    try {
      runs = run_compare(*opts);
    } catch (const CompareInterrupted& e) {
      report(e.runs(), e.note());
      throw;  // main.cpp: the message, exit status 128 + the signal
    }
    report(runs, "");
    const bool any_finished = std::any_of(runs.begin(), runs.end(),
                                          [](const TrainMetrics& m) { return m.diverged.empty(); });
    // Exit status 4, as a diverged train run (main.cpp): the reports are written, no precision
    // gave a result.
    if (!any_finished) {
      throw train::TrainingDiverged(
          "[compare] every precision diverged (the table says where); lower --lr, or clip "
          "gradients in `mantissa train`");
    }
  });
}

}  // namespace mantissa::app
