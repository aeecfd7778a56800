#include "precision_settings.h"

#include "mantissa/core/error.h"

namespace mantissa::recipes {

PrecisionSettings settings_for(const std::string& precision, const PrecisionSettings& settings,
                               bool strict) {
  if (precision.rfind("transformer-engine", 0) == 0) return settings;
  if (strict && !settings.empty()) {
    std::string key = settings.begin()->first;
    for (char& c : key)
      if (c == '_') c = '-';
    fail("precision", "--{} applies to the transformer-engine precisions only, not '{}'", key,
         precision);
  }
  return {};
}

}  // namespace mantissa::recipes
