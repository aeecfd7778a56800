#pragma once
// Precision settings of a run (the --fp8-* flags, e.g. "fp8_format" -> "E4M3"; docs/fp8.md
// "The recipe"): the transformer-engine precisions read them, the others refuse them.
#include <map>
#include <string>

namespace mantissa::recipes {

using PrecisionSettings = std::map<std::string, std::string>;

// The settings that apply to `precision`: all of them for the transformer-engine precisions,
// none for the others. With `strict` (train: one precision), giving a flag to another
// precision throws naming the flag instead of silently ignoring it.
PrecisionSettings settings_for(const std::string& precision, const PrecisionSettings& settings,
                               bool strict = false);

}  // namespace mantissa::recipes
