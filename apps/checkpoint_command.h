#pragma once
#include <CLI/CLI.hpp>

namespace mantissa::app {
// `mantissa checkpoint consolidate IN OUT`: one ordinary checkpoint file from a sharded one
// (docs/distributed.md, "Sharded checkpoints").
void add_checkpoint_command(CLI::App& app);
}  // namespace mantissa::app
