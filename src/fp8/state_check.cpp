#include "mantissa/fp8/state_check.h"

#include <fmt/format.h>

#include <cmath>

#include "mantissa/core/error.h"
#include "mantissa/fp8/linear.h"
#include "mantissa/fp8/recipe.h"

namespace mantissa::fp8 {
namespace {

// "slot 2 (grad_output)" for the three slots of an FP8 layer, else "slot 2".
std::string slot_text(int64_t slot, int64_t slots) {
  if (slots == kNumRoles)
    return fmt::format("slot {} ({})", slot, role_name(static_cast<Role>(slot)));
  return fmt::format("slot {}", slot);
}

constexpr const char* kDamaged =
    "no run writes that: the state was damaged or edited; use an earlier checkpoint";

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0 &&
         (s.size() == suffix.size() || s[s.size() - suffix.size() - 1] == '.');
}

std::vector<float> floats_of(const Tensor& t) {
  return t.cpu().to(kFloat32).contiguous().to_vector<float>();
}

}  // namespace

void check_scales(const std::string& name, const std::vector<float>& scales) {
  const int64_t slots = static_cast<int64_t>(scales.size());
  for (int64_t i = 0; i < slots; ++i) {
    const float s = scales[static_cast<size_t>(i)];
    MANTISSA_CHECK(std::isfinite(s) && s > 0.0f, "fp8",
                   "{} holds the scale {} at {}: an FP8 scale is fp8_max / 2^margin / amax, "
                   "finite and above 0; {}",
                   name, s, slot_text(i, slots), kDamaged);
  }
}

void check_amax_history(const std::string& name, const std::vector<float>& history, int64_t slots) {
  MANTISSA_CHECK(slots > 0 && static_cast<int64_t>(history.size()) % slots == 0, "fp8",
                 "{} holds {} values, not rows of {} slots", name, history.size(), slots);
  for (size_t k = 0; k < history.size(); ++k) {
    const float a = history[k];
    MANTISSA_CHECK(a >= 0.0f, "fp8",
                   "{} holds the amax {} at row {}, {}: an amax is the largest magnitude of a "
                   "step's tensor, 0 or above (+inf included), never negative or NaN; {}",
                   name, a, static_cast<int64_t>(k) / slots,
                   slot_text(static_cast<int64_t>(k) % slots, slots), kDamaged);
  }
}

void check_state_tensors(const nn::StateDict& state) {
  for (const auto& [key, t] : state) {
    if (!t.defined() || !t.is_floating_point()) continue;
    if (ends_with(key, kScaleBufferName)) {
      check_scales(fmt::format("'{}'", key), floats_of(t));
    } else if (ends_with(key, kAmaxHistoryBufferName)) {
      check_amax_history(fmt::format("'{}'", key), floats_of(t), t.dim() == 2 ? t.size(1) : 1);
    }
  }
}

}  // namespace mantissa::fp8
