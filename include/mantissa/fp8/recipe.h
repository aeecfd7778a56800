#pragma once
// The FP8 recipes (docs/fp8.md "Recipes"): how each tensor's scale is found, and which FP8
// format each tensor uses.
//   delayed: TransformerEngine's DelayedScaling. Scales come from a window of past amaxes
//            (amax_history_len steps, "max" or "most_recent") and a margin; TE's defaults:
//            HYBRID, margin 0, a 1024-step history, "max".
//   current: TransformerEngine 2.x's Float8CurrentScaling. Each cast takes the amax of the
//            tensor it casts and scale = fp8_max / amax (current_scale, current_scaling.h),
//            optionally rounded down to a power of 2; no history.
//   rowwise, rowwise-gw-hp: torchao's float8 ROWWISE and ROWWISE_WITH_GW_HP (rowwise.h,
//            rowwise_linear.h): one scale per row of each GEMM operand along its reduction
//            dimension, every tensor in E4M3; rowwise rounds the scales down to powers of 2,
//            rowwise-gw-hp keeps the weight-gradient product in high precision.
//   block:   TransformerEngine 2.x's Float8BlockScaling (the DeepSeek-V3 recipe;
//            block_scaling.h, block_linear.h): E4M3 everywhere, one scale per 1x128 tile of
//            activations and gradients and per 128x128 block of weights, powers of 2 unless
//            use_fp32_scales; products promote their partial sums every 128 elements of K.
//   mxfp8:   TransformerEngine 2.x's MXFP8BlockScaling (mx_linear.h): one E8M0 scale per 1x32
//            block along each product's K, rounded up; E4M3, gradients E5M2 under HYBRID.
//   mxfp4:   torchao's MX recipe with E2M1 elements (mx_linear.h): E8M0 scales per 1x32 block,
//            floored, in all three products; opt-in, Tseng et al.'s MXFP4 training ("Training
//            LLMs with MXFP4", 2025) for the backward products: stochastic rounding after a 3/4
//            pre-scale, and the 16-point random Hadamard transform along their K.
//   nvfp4:   TransformerEngine 2.x's NVFP4BlockScaling (nvfp4_linear.h): E2M1 codes in 1x16
//            blocks with E4M3 block scales under an fp32 per-tensor scale, 16x16 tiles for
//            weights, stochastic rounding for gradients and a 16-point random Hadamard
//            transform on the weight-gradient product's operands; each switchable off.
#include <cstdint>
#include <set>
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

// The recipe kinds, by their --fp8-recipe names.
enum class RecipeKind {
  kDelayed,
  kCurrent,
  kRowwise,
  kRowwiseGwHp,
  kBlock,
  kMxfp8,
  kMxfp4,
  kNvfp4
};
// "delayed", "current", "rowwise", "rowwise-gw-hp", "block", "mxfp8", "mxfp4", "nvfp4"
// (case-insensitive); anything else throws listing the valid names.
RecipeKind recipe_kind_from_string(const std::string& name);
const char* recipe_kind_name(RecipeKind kind);
// The upstream name of a kind: TransformerEngine's class ("DelayedScaling",
// "Float8CurrentScaling", "Float8BlockScaling", "NVFP4BlockScaling") or torchao's
// Float8LinearRecipeName ("ROWWISE", "ROWWISE_WITH_GW_HP").
const char* recipe_class_name(RecipeKind kind);

struct Recipe {
  RecipeKind kind = RecipeKind::kDelayed;
  Format fp8_format = Format::kHybrid;

  // Delayed scaling only (validate() refuses other values under another kind).
  // The scale is divided by 2^margin (headroom against growth between updates). Negative
  // values are accepted, as in TransformerEngine, within [-kMaxMargin, kMaxMargin].
  int margin = 0;
  // Steps of amax kept per tensor; at least 1.
  int64_t amax_history_len = 1024;
  AmaxComputeAlgo amax_compute_algo = AmaxComputeAlgo::kMax;
  // All-reduce (MAX) the step's amaxes across processes before updating. mantissa runs one
  // process, where this is a no-op; it is kept so recipes and checkpoints round-trip.
  bool reduce_amax = true;

  // Current scaling (TransformerEngine's QParams of Float8CurrentScaling): round each scale
  // down to a power of 2 (TE's power_2_scale, default off; also rowwise-gw-hp's, where torchao
  // leaves it off too; rowwise always rounds), and the floor an amax is raised to before the
  // division (TE's amax_epsilon, default 0; at least 0 and finite; current and block only).
  bool use_power_2_scales = false;
  float amax_epsilon = 0.0f;
  // Block scaling: keep the scales' mantissa bits (TE's use_f32_scales,
  // NVTE_FP8_BLOCK_SCALING_FP32_SCALES=1); by default block scales are powers of 2.
  bool use_fp32_scales = false;
  // NVFP4 only (TransformerEngine's NVFP4BlockScaling fields of the same names): no random
  // Hadamard transform on the weight-gradient operands; round gradients to nearest instead of
  // stochastically; 1x16 blocks for weights too instead of 16x16 tiles.
  bool disable_rht = false;
  bool disable_stochastic_rounding = false;
  bool disable_2d_quantization = false;
  // MXFP4 only (off by default: the recipe is then torchao's, bit for bit): the operands of the
  // two backward products (dy and W^T for dx, dy^T and x^T for dW) are rounded stochastically
  // after a 3/4 pre-scale (unbiased, no element saturates; the products multiply by 16/9), and
  // transformed along their K by the 16-point random Hadamard transform before they are cast.
  bool enable_stochastic_rounding = false;
  bool enable_rht = false;
  // Whether the recipe's casts draw from the stochastic rounding stream (fp8::nvfp4_sr_stream),
  // whose state the plugin seeds and its checkpoint records: nvfp4, and mxfp4 with
  // enable_stochastic_rounding.
  bool uses_sr_stream() const {
    return kind == RecipeKind::kNvfp4 || (kind == RecipeKind::kMxfp4 && enable_stochastic_rounding);
  }
  // Why FP8 layers cannot run inside activation checkpointing (nn::checkpoint) under this
  // recipe, or "" where a checkpoint's replay computes its first forward's values exactly
  // (delayed scaling's replay casts with the scales its first forward used, fp8/autocast.cpp):
  // mxfp4 with stochastic rounding draws the backward copies' random bits in a forward that
  // records a graph only, which a checkpoint's first forward does not.
  std::string checkpoint_refusal() const;
  // Whether scales are rounded down to powers of 2 under this recipe.
  bool power_2_scales() const {
    if (kind == RecipeKind::kBlock) return !use_fp32_scales;
    return kind == RecipeKind::kRowwise || use_power_2_scales;
  }

  // Throws naming the field when amax_history_len is not in [1, kMaxAmaxHistoryLen] or margin
  // not in [-kMaxMargin, kMaxMargin], when a field is not its default under a kind it does not
  // apply to (the delayed ones, use_power_2_scales under delayed, amax_epsilon outside current,
  // fp8_format under the rowwise kinds, the disable_* fields outside nvfp4, the enable_* fields
  // outside mxfp4), or when
  // amax_epsilon is negative or not finite.
  void validate() const;
  // As validate(), where `given` names fields the user set by hand ("fp8_format", "margin",
  // "amax_history_len", "amax_compute_algo"): a kind that does not read one refuses it even at
  // its default value, as the command line refuses "--fp8-margin 0" under current.
  void validate(const std::set<std::string>& given) const;
  // Rows of amax history an FP8 layer holds under this recipe: amax_history_len for delayed, 1
  // otherwise (where row 0 holds the amax of the slot's last cast).
  int64_t history_rows() const;
  static constexpr int64_t kMaxAmaxHistoryLen = int64_t{1} << 20;
  static constexpr int kMaxMargin = 16;
  // The FP8 dtype of a role: E4M3, except gradients under HYBRID (E5M2) with delayed or current
  // scaling (the rowwise and block recipes cast every tensor to E4M3; nvfp4's block scales are
  // E4M3).
  DType dtype_of(Role role) const;

  nlohmann::json to_json() const;
  // Missing keys keep their defaults ("recipe" missing: delayed); bad values throw
  // (validate()). to_json writes "recipe" and the fields of its kind only.
  static Recipe from_json(const nlohmann::json& j);
  // "DelayedScaling(fp8_format=HYBRID, margin=0, ...)",
  // "Float8CurrentScaling(fp8_format=HYBRID, use_power_2_scales=false, amax_epsilon=0)",
  // "ROWWISE(round_scales_to_power_of_2=true)",
  // "Float8BlockScaling(fp8_format=E4M3, power_2_scale=true, amax_epsilon=0, ...)",
  // "NVFP4BlockScaling(fp4_format=E2M1, fp8_format=E4M3, disable_rht=false, ...)",
  // "MXLinearConfig(elem_dtype=float4_e2m1fn_x2, ..., stochastic_rounding=true, rht=false)" (the
  // last two only where one is on).
  std::string to_string() const;

  friend bool operator==(const Recipe&, const Recipe&) = default;
};
// The name the delayed-scaling code and older callers use.
using DelayedScaling = Recipe;

// Why a checkpoint of recipe `saved` does not resume under `live` (they differ), naming both:
// "the checkpoint was trained with the FP8 recipe 'current' (Float8CurrentScaling(...)) but
// this run uses 'delayed' (DelayedScaling(...)); resume with --fp8-recipe current", or, the
// kinds equal, "... with DelayedScaling(...) but this run uses DelayedScaling(...); pass the
// same --fp8-* options to resume".
std::string recipe_mismatch(const Recipe& saved, const Recipe& live);

// The largest finite value of an FP8 dtype: 448 (E4M3) or 57344 (E5M2). Throws for others.
float fp8_max(DType dtype);

}  // namespace mantissa::fp8
