#pragma once
#include <CLI/CLI.hpp>

namespace mantissa::app {
// `mantissa train`: trains a reference model on Fashion-MNIST and reports its metrics.
void add_train_command(CLI::App& app);
}  // namespace mantissa::app
