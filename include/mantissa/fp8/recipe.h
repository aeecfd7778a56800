#pragma once
// The FP8 delayed-scaling recipe (TransformerEngine's DelayedScaling, docs/fp8.md "The
// recipe"): which FP8 format each tensor uses, how long the amax window is, how the amax is
// taken from it, and the margin. Defaults are TransformerEngine's: HYBRID, margin 0, a 1024-step
// history, "max".
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "mantissa/core/dtype.h"

namespace mantissa::fp8 {

// E4M3: every tensor in E4M3. HYBRID: forward tensors (input, weight) in E4M3, gradients in
// E5M2 (more range, less precision). Pure E5M2 training is refused, as TransformerEngine does.
enum class Format { kE4M3, kHybrid };
// "max": the largest amax of the window; "most_recent": the last step's amax only.
enum class AmaxComputeAlgo { kMax, kMostRecent };

// "E4M3" / "HYBRID" (case-insensitive). "E5M2" throws saying pure E5M2 training is not
// supported; anything else throws listing the valid names.
Format format_from_string(const std::string& name);
const char* format_name(Format format);  // "E4M3", "HYBRID"
// "max" / "most_recent" (case-insensitive); anything else throws listing both.
AmaxComputeAlgo amax_compute_algo_from_string(const std::string& name);
const char* amax_compute_algo_name(AmaxComputeAlgo algo);  // "max", "most_recent"

// The three roles an FP8 Linear casts, in slot order (TransformerEngine's forward slots 0 and 1
// and backward slot 0).
enum class Role : int { kInput = 0, kWeight = 1, kGradOutput = 2 };
inline constexpr int kNumRoles = 3;
const char* role_name(Role role);  // "input", "weight", "grad_output"

struct DelayedScaling {
  Format fp8_format = Format::kHybrid;
  // The scale is divided by 2^margin (headroom against growth between updates). Negative
  // values are accepted, as in TransformerEngine, within [-kMaxMargin, kMaxMargin].
  int margin = 0;
  // Steps of amax kept per tensor; at least 1.
  int64_t amax_history_len = 1024;
  AmaxComputeAlgo amax_compute_algo = AmaxComputeAlgo::kMax;
  // All-reduce (MAX) the step's amaxes across processes before updating. mantissa runs one
  // process, where this is a no-op; it is kept so recipes and checkpoints round-trip.
  bool reduce_amax = true;

  // Throws naming the field when amax_history_len is not in [1, kMaxAmaxHistoryLen] or margin
  // not in [-kMaxMargin, kMaxMargin].
  void validate() const;
  static constexpr int64_t kMaxAmaxHistoryLen = int64_t{1} << 20;
  static constexpr int kMaxMargin = 16;
  // The FP8 dtype of a role: E4M3, except gradients under HYBRID (E5M2).
  DType dtype_of(Role role) const;

  nlohmann::json to_json() const;
  // Missing keys keep their defaults; bad values throw (validate()).
  static DelayedScaling from_json(const nlohmann::json& j);
  std::string to_string() const;  // "DelayedScaling(fp8_format=HYBRID, margin=0, ...)"

  friend bool operator==(const DelayedScaling&, const DelayedScaling&) = default;
};

// The largest finite value of an FP8 dtype: 448 (E4M3) or 57344 (E5M2). Throws for others.
float fp8_max(DType dtype);

}  // namespace mantissa::fp8
