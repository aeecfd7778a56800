#pragma once
// `mantissa train` flags that a run ignores: a model's flags with another model (--patch with
// --model mlp), and the settings of a feature that is off (--lora-alpha without --lora-rank,
// --early-stopping-patience without --early-stopping-monitor). Given on the command line they
// are warned about, naming the flag and why it does nothing; a run's config.json leaves them
// out, so that replaying it does not warn.
//
// Warnings, not errors, as for --lora-alpha without --lora-rank: a config.json written before
// held every flag's default, and replaying it must still run. The image models' flags with
// --model gpt (--hidden, --patch, --pool, --train-subset, --data-dir, --lr-schedule) warn the
// same way. What stays an error is a flag whose request the run would silently not carry out:
// --save-weights with an image model (no weights file would be written), --master-weights and
// --stochastic-rounding with the GPT (its weights would train without the fp32 master copy or
// the stochastic rounding asked for: recipes/gpt_run.cpp).
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "mantissa/recipes/image_run.h"

namespace mantissa::app {

struct IgnoredFlag {
  std::string flag;  // "--patch"
  std::string why;   // "applies to --model vit only"
};

// The flags `o` ignores, each with why, whether given or not.
std::vector<IgnoredFlag> ignored_flags(const recipes::TrainOptions& o);

// Warns about each flag of `cmd` that was given and that `o` ignores.
void warn_ignored_flags(const CLI::App& cmd, const recipes::TrainOptions& o);

// The names (without dashes) of the flags `o` ignores, for write_resolved_config's given_only.
std::vector<std::string> ignored_flag_names(const recipes::TrainOptions& o);

}  // namespace mantissa::app
