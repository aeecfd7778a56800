#pragma once
#include <CLI/CLI.hpp>

namespace mantissa::app {
// `mantissa eval --checkpoint FILE`: loads the weights of a checkpoint (or --save-weights file)
// and reports the test loss and accuracy of an image model (mlp, cnn, vit) or the validation
// loss of a GPT, without training and without reading the training set (docs/cli.md).
void add_eval_command(CLI::App& app);
}  // namespace mantissa::app
