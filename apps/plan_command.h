#pragma once
#include <CLI/CLI.hpp>

namespace mantissa::app {
// `mantissa plan --model mlp|cnn|vit|gpt --memory 8GiB`: per precision, the largest batch that
// fits the budget (and for the GPT the largest width and depth at --batch-size), from dry runs
// of one training step with the counting allocator (memory_plan.h, docs/memory_planner.md).
void add_plan_command(CLI::App& app);
}  // namespace mantissa::app
