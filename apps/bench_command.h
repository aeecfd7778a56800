#pragma once
// `mantissa bench`: the command line of mantissa/recipes/bench_run.h (training throughput and peak
// memory of a reference model in several precisions, in one process).
#include <CLI/CLI.hpp>

namespace mantissa::app {

void add_bench_command(CLI::App& app);

}  // namespace mantissa::app
