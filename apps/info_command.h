#pragma once
#include <CLI/CLI.hpp>

namespace mantissa::app {
// `mantissa info`: version, CPU features, and the kernel path each dtype uses.
void add_info_command(CLI::App& app);
}  // namespace mantissa::app
