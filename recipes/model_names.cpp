#include "mantissa/recipes/model_names.h"

#include <fmt/format.h>

#include <algorithm>

#include "mantissa/core/closest_names.h"
#include "mantissa/core/error.h"
#include "mantissa/core/untrusted_text.h"

namespace mantissa::recipes {

const std::vector<std::string>& model_names() {
  static const std::vector<std::string> kNames = {"mlp", "cnn", "vit", "gpt"};
  return kNames;
}

void check_model_name(const std::string& model, const std::string& where,
                      const std::vector<std::string>& valid) {
  const auto is_valid = [&](const std::string& name) {
    return std::find(valid.begin(), valid.end(), name) != valid.end();
  };
  if (is_valid(model)) return;
  // Among all the models, so that "gtp" is not taken for "mlp" where the GPT is not valid.
  std::string meant = likely_meant(model, model_names());
  if (!is_valid(meant)) meant.clear();
  fail(where, "unknown model '{}'{}; valid values are: {}", escape_untrusted(model),
       meant.empty() ? "" : fmt::format(" (did you mean '{}'?)", meant), fmt::join(valid, ", "));
}

void check_vit_patch(int64_t patch, const std::string& where) {
  MANTISSA_CHECK(patch >= 1 && kFashionImageSize % patch == 0, where,
                 "--patch must divide the image size {} (4 or 7 make 49 or 16 patches), got {}",
                 kFashionImageSize, patch);
}

}  // namespace mantissa::recipes
