#pragma once
// The --fp8-* flags of train, compare and bench (docs/fp8.md "The recipe"). Each flag given
// becomes one precision setting (e.g. "fp8_format" -> "E4M3") that the transformer-engine
// precisions read; the other precisions refuse them.
#include <map>
#include <string>

namespace CLI {
class App;
}

namespace mantissa::app {

using PrecisionSettings = std::map<std::string, std::string>;

// Adds --fp8-format, --fp8-amax-history-len, --fp8-amax-compute-algo, --fp8-margin and
// --fp8-exclude to `cmd`, writing into *settings.
void add_fp8_options(CLI::App* cmd, PrecisionSettings* settings);

// The settings that apply to `precision`: all of them for the transformer-engine precisions,
// none for the others. With `strict` (train: one precision), giving a flag to another
// precision throws naming the flag instead of silently ignoring it.
PrecisionSettings settings_for(const std::string& precision, const PrecisionSettings& settings,
                               bool strict = false);

}  // namespace mantissa::app
