#pragma once
// The command-line flags of 4-/8-bit weights and LoRA (recipes/finetuning.h holds what they
// set and what a run does with them).
#include <CLI/CLI.hpp>

#include "finetuning.h"

namespace mantissa::app {

// Adds --lora-rank, --lora-alpha, --lora-dropout, --quant-ignore, --quant-dtype, --init-from.
void add_quant_options(CLI::App& cmd, recipes::QuantOptions& q);

}  // namespace mantissa::app
