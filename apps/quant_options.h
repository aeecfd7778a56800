#pragma once
// The command-line flags of 4-/8-bit weights and LoRA (mantissa/recipes/finetuning.h holds what
// they set and what a run does with them).
#include <CLI/CLI.hpp>

#include "mantissa/recipes/finetuning.h"

namespace mantissa::app {

// Adds --lora-rank, --lora-alpha, --quant-ignore, --quant-dtype and, for training,
// --lora-dropout and --init-from (`mantissa eval` rebuilds a fine-tuned model with the first
// four, as trained).
void add_quant_options(CLI::App& cmd, recipes::QuantOptions& q, bool training = true);

}  // namespace mantissa::app
