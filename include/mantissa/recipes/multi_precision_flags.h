#pragma once
// The flags of the commands that run several precisions in one go (bench, compare) whose
// feature none of the listed precisions has: refused or warned about as `train` does with its
// one precision, instead of being dropped without a word. (The --fp8-* flags:
// check_settings_apply_to_some in precision_settings.h.)
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "mantissa/recipes/finetuning.h"

namespace mantissa::recipes {

// --quant-dtype or --quant-ignore, given (QuantOptions::quant_dtype_given, whatever the value)
// or set to another value than the default, with a `precision` that quantizes nothing throws
// naming the flag and the precision (train, eval). `command` names the command in the message.
// (`mantissa train --config` does not count a default value from the file as given: a run's
// config.json held every default.)
void check_quant_flags_apply(const std::string& precision, const QuantOptions& q,
                             const char* command);

// The same for a list of `precisions` (canonical names; bench, compare: an error when none is
// quantized, naming the list), and --lora-alpha or
// --lora-dropout (by value) without --lora-rank warns that it has no effect. `command` names
// the command in the messages.
void check_quant_options_apply(const std::vector<std::string>& precisions, const QuantOptions& q,
                               const char* command);

// The settings besides the optimizer that change what the runs of bench and compare train,
// for their JSON reports: "lora" {rank, alpha, dropout} with --lora-rank, "init_from",
// "quant_dtype" and "quant_ignore" when one of `precisions` is quantized, "precision_options"
// (the --fp8-* flags, spelled as a checkpoint's hyper_parameters: model_hparams.h's
// fp8_settings_json) when given. Keys that do not apply are left out.
void add_finetuning_settings(nlohmann::ordered_json& j, const std::vector<std::string>& precisions,
                             const QuantOptions& q,
                             const std::map<std::string, std::string>& precision_options);

}  // namespace mantissa::recipes
