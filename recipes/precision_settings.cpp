#include "mantissa/recipes/precision_settings.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "mantissa/core/error.h"
#include "mantissa/train/precision_registry.h"
#include "mantissa/train/transformer_engine_precision.h"

namespace mantissa::recipes {
bool is_fp8_precision(const std::string& precision) {
  const train::PrecisionEntry* e = train::find_precision(precision);
  return e != nullptr && e->math == train::PrecisionMath::kFloat8;
}

namespace {

// "fp8_margin" -> "--fp8-margin"
std::string flag_of(std::string key) {
  for (char& c : key)
    if (c == '_') c = '-';
  return "--" + key;
}

}  // namespace

void check_settings_apply_to_some(const std::vector<std::string>& precisions,
                                  const PrecisionSettings& settings, const char* command) {
  if (settings.empty() || std::any_of(precisions.begin(), precisions.end(), is_fp8_precision))
    return;
  fail(command,
       "{} applies to the transformer-engine precisions, and --precisions ({}) lists none; add "
       "transformer-engine to the list or leave the flag out",
       flag_of(settings.begin()->first), fmt::join(precisions, ","));
}

PrecisionSettings settings_for(const std::string& precision, const PrecisionSettings& settings,
                               bool strict) {
  if (is_fp8_precision(precision)) return settings;
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
      std::none_of(precisions.begin(), precisions.end(), is_fp8_precision))
    return;
  train::check_fp8_exclude(*make_module(),
                           train::transformer_engine_options_from(settings).exclude);
}

}  // namespace mantissa::recipes
