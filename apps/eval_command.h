#pragma once
#include <CLI/CLI.hpp>

namespace mantissa::app {
// `mantissa eval --checkpoint FILE`: loads a checkpoint of an image model (mlp, cnn, vit) and
// reports its test loss and accuracy, without training (docs/cli.md).
void add_eval_command(CLI::App& app);
}  // namespace mantissa::app
