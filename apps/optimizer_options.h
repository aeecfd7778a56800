#pragma once
// The command-line flags that choose the optimizer (`train`, `compare` and `bench` share them;
// mantissa/optim/optimizer_factory.h builds what they name).
#include <string>

#include <CLI/CLI.hpp>

namespace mantissa::app {

// Adds --optimizer (adamw, adam, sgd, adamw8bit, adam8bit) and --optim-bits-32.
void add_optimizer_options(CLI::App& cmd, std::string& optimizer, std::string& optim_bits_32);

}  // namespace mantissa::app
