#pragma once
#include <CLI/CLI.hpp>

namespace mantissa::app {
// `mantissa generate`: continues a prompt with a Hugging Face model directory (and a peft
// adapter), printing tokens as they come (mantissa/recipes/generate_run.h).
void add_generate_command(CLI::App& app);
}  // namespace mantissa::app
