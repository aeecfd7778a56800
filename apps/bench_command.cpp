#include "bench_command.h"

#include <fmt/format.h>

#include <memory>

#include "comma_list.h"
#include "distributed_launch.h"
#include "fp8_options.h"
#include "mantissa/core/error.h"
#include "mantissa/io/output_path.h"
#include "mantissa/recipes/bench_run.h"
#include "optimizer_options.h"
#include "quant_options.h"
#include "threads_option.h"
#include "untimed_steps_option.h"

namespace mantissa::app {

using namespace recipes;

void add_bench_command(CLI::App& app) {
  auto opts = std::make_shared<BenchOptions>();
  CLI::App* cmd = app.add_subcommand(
      "bench", "Training throughput and peak memory of a reference model in several precisions");
  cmd->add_option("--model", opts->model, "Model: mlp, cnn, vit or gpt")->capture_default_str();
  add_comma_list_option(*cmd, "--precisions", opts->precisions,
                        "Precisions to run, comma separated", precision_items());
  add_fp8_options(cmd, &opts->precision_options);
  cmd->add_option("--steps", opts->steps, "Timed training steps per precision and round")
      ->capture_default_str();
  cmd->add_option("--rounds", opts->rounds,
                  "Rounds that each time every precision in turn; the table gives the fastest "
                  "and the median round, and warns when they differ by more than 10%")
      ->capture_default_str();
  CLI::Option* untimed_alias = add_untimed_steps_option(
      *cmd, &opts->untimed_steps, "Untimed steps per precision and round before the timed ones");
  cmd->add_option("--hidden", opts->hidden, "Hidden sizes, comma separated")
      ->check(comma_list(hidden_size_items()))
      ->capture_default_str();
  add_quant_options(*cmd, opts->quant);
  CLI::Option* batch_opt = cmd->add_option(
      "--batch-size", opts->batch_size, "Samples per step (default: mlp/vit 256, cnn 128, gpt 16)");
  add_optimizer_options(*cmd, opts->optimizer, opts->optim_bits_32);
  cmd->add_option("--accelerator", opts->accelerator,
                  "cpu, gpu (or cuda: the first CUDA GPU) or auto, as in `mantissa train` "
                  "(docs/cuda.md)")
      ->capture_default_str();
  CLI::Option* threads_opt =
      cmd->add_option("--threads", opts->threads, "Worker threads (default: all cores)");
  cmd->add_option("--data-dir", opts->data_dir, "Fashion-MNIST directory (as for train)");
  cmd->add_option("--text", opts->text,
                  "gpt: UTF-8 text file or directory (as for train; default: "
                  "/usr/share/games/fortunes, Debian package 'fortunes')");
  cmd->add_option("--layers", opts->gpt_layers, "gpt: transformer blocks (as for train)")
      ->capture_default_str();
  cmd->add_option("--width", opts->gpt_width, "gpt: embedding width")->capture_default_str();
  cmd->add_option("--heads", opts->gpt_heads, "gpt: attention heads")->capture_default_str();
  cmd->add_option("--context", opts->gpt_context, "gpt: context length in bytes")
      ->capture_default_str();
  cmd->add_flag("--activation-checkpointing", opts->gpt_activation_checkpointing,
                "gpt: each block checkpointed (as train's flag)");
  cmd->add_option("--json", opts->json, "Also write the results as JSON to this file");
  cmd->callback([opts, threads_opt, batch_opt, untimed_alias] {
    refuse_multi_rank_job("bench");
    opts->quant.quant_ignore = quant_ignore_for_model(opts->quant.quant_ignore, opts->model);
    warn_deprecated_untimed_steps_alias(untimed_alias, "bench");
    check_threads_option(threads_opt, opts->threads, "bench");
    if (!opts->json.empty()) io::check_output_file(opts->json, "--json");
    // Only an absent flag takes the model's default: "--batch-size 0" is an error, as in train.
    if (batch_opt->count() == 0) {
      opts->batch_size = default_batch_size(opts->model);
    } else {
      MANTISSA_CHECK(opts->batch_size >= 1, "bench", "--batch-size must be at least 1, got {}",
                     opts->batch_size);
    }
    const std::vector<BenchResult> results = run_bench(*opts);
    fmt::print("{}", format_bench_table(*opts, results));
    if (!opts->json.empty()) {
      write_bench_json(*opts, results);
      fmt::print("results written to {}\n", opts->json);
    }
  });
}

}  // namespace mantissa::app
