#pragma once
// Reading and writing a training module's own checkpoint state (TrainModule::
// on_save_checkpoint's JSON object): number series and counters, checked as they are read, since
// the file may be damaged or hand-edited. `owner` names the module in errors ("ImageClassifier").
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include <nlohmann/json.hpp>

#include "mantissa/core/error.h"

namespace mantissa::models {

// The largest counter a module's state may hold: 2^53, the largest integer a JSON reader keeps
// exactly (the Trainer's own counters have the same bound), far beyond any real run.
inline constexpr int64_t kMaxStateCount = int64_t{1} << 53;

// JSON has no NaN or infinity: non-finite values (a skipped step's loss) are written as null.
nlohmann::json doubles_to_json(const std::vector<double>& v);

// state[key] as numbers (null back to NaN), each in [lo, hi]; anything else throws naming the
// field (a test accuracy of -1 or 9e18 went on into the run's metrics).
std::vector<double> doubles_from_json(const nlohmann::json& state, const char* key,
                                      const std::string& owner, double lo = -HUGE_VAL,
                                      double hi = HUGE_VAL);

// state[key] as a number in [min, max]; anything else throws naming the field. An integral T
// takes JSON integers only: 1e308 or 2^63 for an int64 counter was converted out of range
// (undefined behaviour; in practice INT64_MIN).
template <typename T>
T number_from_json(const nlohmann::json& state, const char* key, T min, const std::string& owner,
                   T max = std::numeric_limits<T>::max()) {
  const auto it = state.find(key);
  bool ok = it != state.end() && it->is_number();
  if constexpr (std::is_integral_v<T>) {
    static_assert(std::is_signed_v<T>, "counters are signed");
    if (ok && it->is_number_unsigned()) {
      ok = it->template get<uint64_t>() <= static_cast<uint64_t>(max) &&
           static_cast<int64_t>(it->template get<uint64_t>()) >= min;
    } else if (ok) {
      ok = it->is_number_integer() && it->template get<int64_t>() >= min &&
           it->template get<int64_t>() <= max;
    }
  } else {
    ok = ok && it->template get<double>() >= min && it->template get<double>() <= max;
  }
  if (max == std::numeric_limits<T>::max()) {
    MANTISSA_CHECK(ok, "checkpoint", "{} state: field 'module.{}' must be a number >= {}", owner,
                   key, min);
  } else {
    MANTISSA_CHECK(ok, "checkpoint", "{} state: field 'module.{}' must be a number in [{}, {}]",
                   owner, key, min, max);
  }
  return it->template get<T>();
}

}  // namespace mantissa::models
