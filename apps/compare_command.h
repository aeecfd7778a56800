#pragma once
// `mantissa compare`: the command line of mantissa/recipes/compare_run.h (one training run per
// precision, the table, the HTML report and the JSON file).
#include <CLI/CLI.hpp>

namespace mantissa::app {

void add_compare_command(CLI::App& app);

}  // namespace mantissa::app
