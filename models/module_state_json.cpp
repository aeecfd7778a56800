#include "mantissa/models/module_state_json.h"

#include "mantissa/io/untrusted_json.h"

namespace mantissa::models {

nlohmann::json doubles_to_json(const std::vector<double>& v) {
  nlohmann::json j = nlohmann::json::array();
  for (double x : v) j.push_back(std::isfinite(x) ? nlohmann::json(x) : nlohmann::json(nullptr));
  return j;
}

std::vector<double> doubles_from_json(const nlohmann::json& state, const char* key,
                                      const std::string& owner, double lo, double hi) {
  const auto it = state.find(key);
  MANTISSA_CHECK(it != state.end() && it->is_array(), "checkpoint",
                 "{} state: field 'module.{}' must be an array of numbers", owner, key);
  std::vector<double> out;
  for (const auto& x : *it) {
    MANTISSA_CHECK(x.is_number() || x.is_null(), "checkpoint",
                   "{} state: field 'module.{}' must hold numbers, got {}", owner, key,
                   io::json_excerpt(x));
    const double v = x.is_null() ? NAN : x.get<double>();
    MANTISSA_CHECK(std::isnan(v) || (v >= lo && v <= hi), "checkpoint",
                   "{} state: field 'module.{}' holds {}, outside [{}, {}]", owner, key, v, lo, hi);
    out.push_back(v);
  }
  return out;
}

}  // namespace mantissa::models
