#pragma once
// Reading and writing a training module's own checkpoint state (TrainModule::
// on_save_checkpoint's JSON object): number series and counters, checked as they are read, since
// the file may be damaged or hand-edited. `owner` names the module in errors ("ImageClassifier").
#include <cmath>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "mantissa/core/error.h"

namespace mantissa::models {

// JSON has no NaN or infinity: non-finite values (a skipped step's loss) are written as null.
nlohmann::json doubles_to_json(const std::vector<double>& v);

// state[key] as numbers (null back to NaN); anything else throws naming the field.
std::vector<double> doubles_from_json(const nlohmann::json& state, const char* key,
                                      const std::string& owner);

// state[key] as a number no smaller than `min`; anything else throws naming the field.
template <typename T>
T number_from_json(const nlohmann::json& state, const char* key, T min, const std::string& owner) {
  const auto it = state.find(key);
  MANTISSA_CHECK(it != state.end() && it->is_number() && it->get<double>() >= min, "checkpoint",
                 "{} state: field 'module.{}' must be a number >= {}", owner, key, min);
  return it->get<T>();
}

}  // namespace mantissa::models
