#pragma once
// `mantissa train --help` lists --config. The option belongs to the main app (CLI11 reads config
// files there) and reaches `train` by fallthrough, so CLI11 printed it only in `mantissa --help`,
// and a user reading the command's own help never learned that it takes a config file.
#include <memory>
#include <string>

#include <CLI/CLI.hpp>

namespace mantissa::app {

// A help formatter for a command that reads the main app's --config: its option list shows
// `config` (the main app's option) right after --help, described by `description`.
std::shared_ptr<CLI::Formatter> formatter_listing_config(const CLI::Option* config,
                                                         std::string description);

}  // namespace mantissa::app
