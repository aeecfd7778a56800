#pragma once
// The --fp8-* flags of train, compare, bench, plan, eval and finetune (docs/fp8.md "The
// recipe"). Each flag given becomes one precision setting (e.g. "fp8_format" -> "E4M3") that the
// transformer-engine precisions read; the other precisions refuse them.
#include "mantissa/recipes/precision_settings.h"

namespace CLI {
class App;
}

namespace mantissa::app {

using recipes::PrecisionSettings;

// Whose module names --fp8-exclude's help and errors give as examples: mantissa's own models'
// (net.0, h0) or, under finetune, a Hugging Face model's (lm_head, model.layers.0.mlp.down_proj).
enum class Fp8ModuleNames { kMantissa, kHuggingFace };

// Adds --fp8-recipe, --fp8-power-2-scales, --fp8-format, --fp8-amax-history-len,
// --fp8-amax-compute-algo, --fp8-margin and --fp8-exclude to `cmd`, writing into *settings.
void add_fp8_options(CLI::App* cmd, PrecisionSettings* settings,
                     Fp8ModuleNames names = Fp8ModuleNames::kMantissa);

}  // namespace mantissa::app
