#include "mantissa/recipes/precision_settings.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "mantissa/core/error.h"
#include "mantissa/train/precision_registry.h"
#include "mantissa/train/precisions/transformer_engine_precision.h"

namespace mantissa::recipes {
namespace {

// Whether `precision` (a name or alias) has FP8 layers, which the settings configure.
bool has_fp8_layers(const std::string& precision) { return train::precision_traits(precision).fp8; }

// "fp8_margin" -> "--fp8-margin"
std::string flag_of(std::string key) {
  for (char& c : key)
    if (c == '_') c = '-';
  return "--" + key;
}

}  // namespace

std::string settings_as_flags(const PrecisionSettings& settings) {
  std::vector<std::string> flags;
  for (const auto& [key, value] : settings)
    flags.push_back(value == "true" ? flag_of(key) : flag_of(key) + " " + value);
  return fmt::format("{}", fmt::join(flags, " "));
}

void check_settings_apply_to_some(const std::vector<std::string>& precisions,
                                  const PrecisionSettings& settings, const char* command) {
  if (settings.empty() || std::any_of(precisions.begin(), precisions.end(), has_fp8_layers)) return;
  fail(command,
       "{} applies to the transformer-engine precisions, and --precisions ({}) lists none; add "
       "transformer-engine to the list or leave the flag out",
       flag_of(settings.begin()->first), fmt::join(precisions, ","));
}

PrecisionSettings settings_for(const std::string& precision, const PrecisionSettings& settings,
                               bool strict) {
  if (has_fp8_layers(precision)) return settings;
  if (strict && !settings.empty()) {
    fail("precision", "{} applies to the transformer-engine precisions only, not '{}'",
         flag_of(settings.begin()->first), precision);
  }
  return {};
}

void check_fp8_exclude_names(const std::vector<std::string>& precisions,
                             const PrecisionSettings& settings,
                             const std::function<std::unique_ptr<nn::Module>()>& make_module) {
  if (!settings.count("fp8_exclude") ||
      std::none_of(precisions.begin(), precisions.end(), has_fp8_layers))
    return;
  train::check_fp8_exclude(*make_module(),
                           train::transformer_engine_options_from(settings).exclude);
}

void check_activation_checkpointing(const std::vector<std::string>& precisions,
                                    const PrecisionSettings& settings, const char* command) {
  for (const std::string& p : precisions) {
    if (!has_fp8_layers(p)) continue;
    const fp8::Recipe recipe = train::transformer_engine_options_from(settings).recipe;
    const std::string refusal = recipe.checkpoint_refusal();
    MANTISSA_CHECK(refusal.empty(), command,
                   "--activation-checkpointing cannot be combined with --precision {} under "
                   "--fp8-recipe {}: {} (docs/guide.md, \"Activation checkpointing\")",
                   p, fp8::recipe_kind_name(recipe.kind), refusal);
    return;  // every FP8 precision reads the same settings
  }
}

}  // namespace mantissa::recipes
