// The `mantissa` command: train, eval, info, bench, compare, plan, checkpoint.
#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include <cstdio>
#include <new>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "bench_command.h"
#include "checkpoint_command.h"
#include "command_line_errors.h"
#include "compare_command.h"
#include "distributed_launch.h"
#include "eval_command.h"
#include "exit_status.h"
#include "finetune_command.h"
#include "flag_attribution.h"
#include "flag_value_checks.h"
#include "generate_command.h"
#include "info_command.h"
#include "json_config.h"
#include "mantissa/core/error.h"
#include "mantissa/core/openmp_wait.h"
#include "mantissa/dist/communicator.h"
#include "mantissa/recipes/image_run.h"
#include "mantissa/train/trainer.h"
#include "plan_command.h"
#include "repeated_switches.h"
#include "train_command.h"
#include "version_text.h"
#include "whole_number_options.h"

namespace {
// An error or note on stderr after what stdout holds so far: redirected to one file
// (`> log 2>&1`), stdout is fully buffered and its banner and model summary came out after the
// error that followed them.
template <typename... T>
void say(fmt::format_string<T...> format, T&&... args) {
  std::fflush(stdout);
  fmt::print(stderr, format, std::forward<T>(args)...);
}
}  // namespace

int main(int argc, char** argv) {
  mantissa::bound_openmp_spinning(argv);  // may start this program again: keep it first
  // Line by line, as on a terminal, so that stdout's lines and stderr's (warnings, errors) keep
  // their order in a file both are redirected to.
  std::setvbuf(stdout, nullptr, _IOLBF, BUFSIZ);
  CLI::App app{"mantissa: train neural networks in every precision"};
  app.require_subcommand(1);
  app.set_version_flag("--version", mantissa::app::version_text(), "Print the version and exit");
  mantissa::app::add_train_command(app);
  mantissa::app::add_info_command(app);
  mantissa::app::add_bench_command(app);
  mantissa::app::add_compare_command(app);
  mantissa::app::add_eval_command(app);
  mantissa::app::add_plan_command(app);
  mantissa::app::add_finetune_command(app);
  mantissa::app::add_generate_command(app);
  mantissa::app::add_checkpoint_command(app);
  mantissa::app::add_config_option(app);
  mantissa::app::read_whole_numbers_in_decimal(app);  // after every option is added
  mantissa::app::refuse_repeated_switches(app);       // after every option is added
  // Then, so that they run first: no empty values, numbers in decimal only.
  // --sample-prompt '' is a prompt: the GPT's sample then starts from a newline (GPT::sample);
  // generate --prompt '' starts from the model's BOS token (transformers' generate() without
  // input_ids).
  mantissa::app::check_flag_values(app, {"--sample-prompt", "--prompt"});
  mantissa::app::remember_command_line(argc, argv);
  // Inside an MPI job an error must end every rank, or the others wait for this
  // one forever.
  using mantissa::dist::abort_job_if_distributed;
  const std::vector<std::string> args(argv, argv + argc);
  if (const auto error = mantissa::app::switch_with_other_value(app, args)) {
    say("mantissa: error: [{}] {}\n", error->where, error->message);
    return mantissa::app::kErrorExitStatus;
  }
  try {
    try {
      app.parse(argc, argv);
    } catch (const std::invalid_argument&) {
      // CLI11 converts a switch's value ("--quiet=banana", or "banana" in
      // --config) with stoll.
      const mantissa::app::CommandLineError error = mantissa::app::switch_value_message(app, args);
      say("mantissa: error: [{}] {}\n", error.where, error.message);
      return mantissa::app::kErrorExitStatus;
    }
  } catch (const CLI::ParseError& e) {
    // Every command-line or --config mistake is an error as mantissa's own
    // checks report them: named, with the likely fix, exit code 2 (not CLI11's
    // own text and codes 103-114).
    const std::optional<mantissa::app::CommandLineError> error =
        mantissa::app::parse_error_message(app, e, args);
    if (!error) return app.exit(e);  // --help, --version
    say("mantissa: error: [{}] {}\n", error->where, error->message);
    return mantissa::app::kErrorExitStatus;
  } catch (const mantissa::recipes::TrainingInterrupted& e) {
    if (!mantissa::app::is_quiet_rank()) say("mantissa: {}\n", e.what());
    return e.exit_code();
  } catch (const mantissa::train::TrainingDiverged& e) {
    // Its own status: a script tells a run that diverged (its outputs written,
    // no result) from a mistake in the command line or the data (2). Thrown by
    // every rank together (the ranks agreed on it): each returns 4 as one
    // process does, rank 0 alone says why. One rank alone must end the job, or
    // the others would wait.
    if (!e.every_rank()) abort_job_if_distributed(e.what(), mantissa::app::kDivergedExitStatus);
    if (!mantissa::app::is_quiet_rank()) say("mantissa: error: {}\n", e.what());
    return mantissa::app::kDivergedExitStatus;
  } catch (const mantissa::Error& e) {
    // Thrown by every rank together (a checkpoint --checkpoint-dir could not
    // take): each returns 2 as one process does, rank 0 alone says why.
    const auto* agreed = dynamic_cast<const mantissa::train::RankAgreedError*>(&e);
    if (agreed == nullptr || !agreed->every_rank())
      abort_job_if_distributed(e.what(), mantissa::app::kErrorExitStatus);
    if (!mantissa::app::is_quiet_rank())
      say("mantissa: error: {}\n", mantissa::app::name_flag_in_error(app, e.what()));
    return mantissa::app::kErrorExitStatus;
  } catch (const std::bad_alloc&) {
    // Not a bug of mantissa's: a size given (a batch, a model, a rank) asked
    // for more memory than the machine or the process's limit allows.
    abort_job_if_distributed("out of memory", mantissa::app::kErrorExitStatus);
    say("mantissa: error: out of memory: the run asked for more memory than "
        "this machine "
        "(or the process's limit) allows; use a smaller batch, model or rank "
        "(`mantissa plan` finds the largest batch that fits)\n");
    return mantissa::app::kErrorExitStatus;
  } catch (const std::exception& e) {
    abort_job_if_distributed(std::string("internal error: ") + e.what(),
                             mantissa::app::kInternalErrorExitStatus);
    say("mantissa: internal error: {}\n", e.what());
    return mantissa::app::kInternalErrorExitStatus;
  }
  return 0;
}
