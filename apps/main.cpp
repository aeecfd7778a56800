// The `mantissa` command: train, eval, info, bench, compare, plan.
#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include <new>
#include <optional>
#include <string>

#include "bench_command.h"
#include "compare_command.h"
#include "distributed_launch.h"
#include "eval_command.h"
#include "image_run.h"
#include "info_command.h"
#include "json_config.h"
#include "mantissa/core/error.h"
#include "mantissa/dist/communicator.h"
#include "plan_command.h"
#include "train_command.h"
#include "unknown_arguments.h"
#include "version_text.h"

int main(int argc, char** argv) {
  CLI::App app{"mantissa: train neural networks in every precision"};
  app.require_subcommand(1);
  app.set_version_flag("--version", mantissa::app::version_text(), "Print the version and exit");
  mantissa::app::add_train_command(app);
  mantissa::app::add_info_command(app);
  mantissa::app::add_bench_command(app);
  mantissa::app::add_compare_command(app);
  mantissa::app::add_eval_command(app);
  mantissa::app::add_plan_command(app);
  mantissa::app::add_config_option(app);
  mantissa::app::remember_command_line(argc, argv);
  // Inside an MPI job an error must end every rank, or the others wait for this one forever.
  using mantissa::dist::abort_job_if_distributed;
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (const std::optional<std::string> message = mantissa::app::config_error_message(app, e)) {
      fmt::print(stderr, "mantissa: error: [config] {}\n", *message);
      return 2;
    }
    // A flag's value that does not parse ("--lora-rank abc") or is missing is a bad value like
    // those mantissa's own checks refuse: the same format and exit code 2, not CLI11's own codes
    // (104, 105, 114).
    if (dynamic_cast<const CLI::ConversionError*>(&e) != nullptr ||
        dynamic_cast<const CLI::ValidationError*>(&e) != nullptr ||
        dynamic_cast<const CLI::ArgumentMismatch*>(&e) != nullptr) {  // "--lr" with no value
      fmt::print(stderr, "mantissa: error: [command line] {} (see --help)\n", e.what());
      return 2;
    }
    // An unknown command or option, a stray word: named, with the likely intended name.
    if (const std::optional<std::string> message = mantissa::app::unknown_arguments_message(app, e)) {
      fmt::print(stderr, "mantissa: error: [command line] {}\n", *message);
      return 2;
    }
    return app.exit(e);
  } catch (const mantissa::recipes::TrainingInterrupted& e) {
    fmt::print(stderr, "mantissa: {}\n", e.what());
    return e.exit_code();
  } catch (const mantissa::Error& e) {
    abort_job_if_distributed(e.what(), 2);
    fmt::print(stderr, "mantissa: error: {}\n", e.what());
    return 2;
  } catch (const std::bad_alloc&) {
    // Not a bug of mantissa's: a size given (a batch, a model, a rank) asked for more memory
    // than the machine or the process's limit allows.
    abort_job_if_distributed("out of memory", 2);
    fmt::print(stderr,
               "mantissa: error: out of memory: the run asked for more memory than this machine "
               "(or the process's limit) allows; use a smaller batch, model or rank "
               "(`mantissa plan` finds the largest batch that fits)\n");
    return 2;
  } catch (const std::exception& e) {
    abort_job_if_distributed(std::string("internal error: ") + e.what(), 3);
    fmt::print(stderr, "mantissa: internal error: {}\n", e.what());
    return 3;
  }
  return 0;
}
