// libFuzzer target: bytes as the JSON file of `mantissa train --config FILE` (apps/json_config.h,
// apps/config_source.h, io/untrusted_json.h). The file is read three ways: JsonConfig's reader on
// its own; config_source_path as --config calls it; and a whole parse of `train --config FILE`
// through CLI11, whose options have the kinds of `train`'s flags (text, a choice, whole
// numbers read in decimal, a seed, floats, switches, lists), then the resolved config written
// back (to_config) must be JSON. Rejection is mantissa::Error or CLI11's ParseError (what the
// command turns into its message, config_error_message); anything else is a finding.
// The full `train` command is not linked: it needs the whole library (docs/fuzzing.md).
#include <cstdint>
#include <sstream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "config_source.h"
#include "fuzz_input_file.h"
#include "json_config.h"
#include "mantissa/core/error.h"
#include "whole_number_options.h"

namespace {

struct TrainFlags {
  std::string model = "mlp";
  std::string precision = "32-true";
  std::string monitor;
  int64_t max_steps = -1;
  int epochs = 1;
  uint64_t seed = 42;
  double lr = 1e-3;
  double limit_train_batches = 1.0;
  bool quiet = false;
  bool master_weights = false;
  std::vector<int64_t> hidden;
  std::vector<std::string> fp8_exclude;
};

// `mantissa train --config path`, as main.cpp parses it, the run itself left out.
void parse_train(const std::string& path) {
  TrainFlags flags;
  CLI::App cli{"mantissa"};
  cli.require_subcommand(1);
  CLI::App* train = cli.add_subcommand("train", "train");
  train->add_option("--model", flags.model)->check(CLI::IsMember({"mlp", "cnn", "vit", "gpt"}));
  train->add_option("--precision", flags.precision);
  train->add_option("--early-stopping-monitor", flags.monitor);
  train->add_option("--max-steps", flags.max_steps);
  train->add_option("--epochs", flags.epochs);
  train->add_option("--seed", flags.seed);
  train->add_option("--lr", flags.lr);
  train->add_option("--limit-train-batches", flags.limit_train_batches);
  train->add_flag("--quiet", flags.quiet);
  train->add_flag("--master-weights", flags.master_weights);
  train->add_option("--hidden", flags.hidden)->delimiter(',');
  train->add_option("--fp8-exclude", flags.fp8_exclude);
  mantissa::app::add_config_option(cli);
  mantissa::app::read_whole_numbers_in_decimal(cli);
  train->callback([] {});
  std::vector<std::string> args = {path, "--config", "train"};  // CLI11 takes them reversed
  try {
    cli.parse(args);
  } catch (const CLI::ParseError& e) {
    (void)mantissa::app::config_error_message(cli, e);
    return;
  }
  // What write_resolved_config writes next to the checkpoints must read back as JSON.
  const std::string resolved =
      mantissa::app::JsonConfig().to_config(train, /*default_also=*/true, false, "");
  (void)nlohmann::ordered_json::parse(resolved);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static mantissa::fuzz::InputFile input("run.json");
  const std::string& path = input.write(data, size);
  try {
    std::istringstream in(std::string(reinterpret_cast<const char*>(data), size));
    (void)mantissa::app::JsonConfig("train").from_config(in);
  } catch (const CLI::ParseError&) {
  } catch (const mantissa::Error&) {
  }
  try {
    (void)mantissa::app::config_source_path(path);
  } catch (const CLI::ParseError&) {
  } catch (const mantissa::Error&) {
  }
  try {
    parse_train(path);
  } catch (const mantissa::Error&) {
  }
  return 0;
}
