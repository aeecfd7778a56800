#pragma once
// Precision settings of a run (the --fp8-* flags, e.g. "fp8_format" -> "E4M3"; docs/fp8.md
// "The recipe"): the transformer-engine precisions read them, the others refuse them.
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace mantissa::nn {
class Module;
}

namespace mantissa::recipes {

using PrecisionSettings = std::map<std::string, std::string>;

// The settings that apply to `precision`: all of them for the transformer-engine precisions,
// none for the others. With `strict` (train: one precision), giving a flag to another
// precision throws naming the flag instead of silently ignoring it.
PrecisionSettings settings_for(const std::string& precision, const PrecisionSettings& settings,
                               bool strict = false);

// The settings as the command line gives them, in key order: "--fp8-disable-rht --fp8-recipe
// nvfp4" (a switch's "true" is the flag alone).
std::string settings_as_flags(const PrecisionSettings& settings);

// For the commands that run several precisions (bench, compare): a --fp8-* flag when none of
// `precisions` (canonical names) is a transformer-engine precision throws naming the flag and
// the list, as `train` refuses it with another precision; a flag given to some of the list is
// fine (the others run without it). `command` names the command in the error.
void check_settings_apply_to_some(const std::vector<std::string>& precisions,
                                  const PrecisionSettings& settings, const char* command);

// For the commands that run several precisions: when `settings` has fp8_exclude (and one of
// `precisions` reads it), throws as the transformer-engine plugin's convert_module would if a
// name names no module of `module` (the model as the Trainer sees it), so a typo is refused
// before the first precision trains instead of after it.
// make_module builds that model, only when there is an exclusion list to check.
void check_fp8_exclude_names(const std::vector<std::string>& precisions,
                             const PrecisionSettings& settings,
                             const std::function<std::unique_ptr<nn::Module>()>& make_module);

// --activation-checkpointing with `precisions` (names or aliases): throws naming `command`
// when one has FP8 layers whose recipe (from `settings`, the --fp8-* flags) a checkpoint's
// replay does not reproduce exactly (fp8::Recipe::checkpoint_refusal: mxfp4 with stochastic
// rounding), with the reason. The data and model load later.
void check_activation_checkpointing(const std::vector<std::string>& precisions,
                                    const PrecisionSettings& settings, const char* command);

}  // namespace mantissa::recipes
