#pragma once
// The `precision` option (docs/trainer.md, "Precision plugins"): legacy aliases, canonical names,
// and the plugin each one selects.
#include <memory>
#include <string>
#include <vector>

#include "mantissa/train/precision.h"

namespace mantissa::train {

// The precisions with a plugin, in the order error messages list them.
const std::vector<std::string>& supported_precisions();
// Names Lightning knows whose plugins (FP8, 4/8-bit) are not implemented yet.
const std::vector<std::string>& planned_precisions();

// The canonical name of a precision value: "16" -> "16-mixed", "bf16" -> "bf16-mixed" (each
// with a warning on stderr naming the canonical value), "32" -> "32-true" and "64" -> "64-true"
// silently, canonical names unchanged. A planned name throws "not implemented yet"; anything
// else throws listing every valid value.
std::string normalize_precision(const std::string& value);

// The plugin for a precision value (normalised first). accelerator: "cpu" or "auto" (the
// CPU); "gpu"/"cuda" throw (no CUDA backend yet).
std::unique_ptr<Precision> precision_plugin_from_string(const std::string& value,
                                                        const std::string& accelerator = "cpu");

// Checks an accelerator name: "cpu" and "auto" pass, "gpu"/"cuda"/"mps"/"tpu" throw saying no
// such backend exists yet, anything else throws listing the valid values.
void check_accelerator(const std::string& accelerator);

}  // namespace mantissa::train
