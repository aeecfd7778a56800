#pragma once
// The message for a command line CLI11 could not place: an unknown command or option, or a
// stray word. mantissa's errors name what is wrong and the likely fix ("did you mean"), where
// CLI11 prints "The following arguments were not expected: ..." and exits 106 or 109.
#include <CLI/CLI.hpp>

#include <optional>
#include <string>

namespace mantissa::app {

// The message for `e` when it is an unknown command, option or argument (or a missing
// command), else nullopt. `app` is the parsed root.
std::optional<std::string> unknown_arguments_message(const CLI::App& app, const CLI::ParseError& e);

}  // namespace mantissa::app
