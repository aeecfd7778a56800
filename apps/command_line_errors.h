#pragma once
// The messages for command lines CLI11 could not take: mantissa's errors name what is wrong and
// the likely fix ("did you mean"), under `mantissa: error: [command line]` or `[config]` with
// exit code 2, where CLI11 prints its own text ("The following arguments were not expected: ...",
// "At Most 1 required but received 2") and exits with codes 103-114.
#include <CLI/CLI.hpp>

#include <optional>
#include <string>
#include <vector>

namespace mantissa::app {

struct CommandLineError {
  std::string where;  // "command line" or "config"
  std::string message;
};

// Whether `flag` ("--lr") appears in args (argv) as "--flag" or "--flag=value": given on the
// command line, not read from the --config file.
// "12", "-3", "+4": digits with an optional sign (what the whole-number flags take).
bool is_whole_number(const std::string& s);

// What CLI11 reads as a switch's value: its flag words (true, off, yes, ...) and whole numbers
// within int64.
bool is_truth_value(const std::string& v);

bool given_on_command_line(const std::string& flag, const std::vector<std::string>& args);

// The message for `e`, thrown while parsing `args` (argv) into `app`, the root. nullopt for what
// is not an error (--help, --version).
std::optional<CommandLineError> parse_error_message(const CLI::App& app, const CLI::ParseError& e,
                                                    const std::vector<std::string>& args);

// The error for a switch written "--switch=VALUE" with a VALUE other than true or false
// ("--no-progress-bar=2", "--detect-anomaly="), which CLI11 would count or take as on.
std::optional<CommandLineError> switch_with_other_value(const CLI::App& app,
                                                        const std::vector<std::string>& args);

// The message for a switch given a value that is neither true nor false ("--no-progress-bar=x",
// or such a value in the --config file), which CLI11 lets through as a std::invalid_argument.
CommandLineError switch_value_message(const CLI::App& app, const std::vector<std::string>& args);

}  // namespace mantissa::app
