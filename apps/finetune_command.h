#pragma once
#include <CLI/CLI.hpp>

namespace mantissa::app {
// `mantissa finetune`: fine-tunes a Hugging Face model directory (LoRA, QLoRA or full) on a data
// file and writes peft adapters or a model directory (mantissa/recipes/finetune_run.h).
void add_finetune_command(CLI::App& app);
}  // namespace mantissa::app
