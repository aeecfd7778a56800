#include "mantissa/fp8/recipe.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <string>
#include <vector>

#include "mantissa/core/closest_names.h"
#include "mantissa/core/error.h"
#include "mantissa/core/float8.h"

namespace mantissa::fp8 {
namespace {

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

// " (did you mean 'X'?)" for a near miss of one of `valid`, else "".
std::string hint(const std::string& name, const std::vector<std::string>& valid) {
  const std::string meant = likely_meant(name, valid);
  return meant.empty() ? "" : fmt::format(" (did you mean '{}'?)", meant);
}

}  // namespace

Format format_from_string(const std::string& name) {
  const std::string n = lower(name);
  if (n == "e4m3") return Format::kE4M3;
  if (n == "hybrid") return Format::kHybrid;
  if (n == "e5m2") {
    fail("fp8 recipe",
         "fp8_format 'E5M2' is not supported: pure E5M2 training loses too much precision in "
         "the forward pass; use 'HYBRID' (E4M3 forward, E5M2 gradients) or 'E4M3'");
  }
  fail("fp8 recipe", "unknown fp8_format '{}'{}; valid values are: E4M3, HYBRID", name,
       hint(name, {"E4M3", "HYBRID"}));
}

const char* format_name(Format format) { return format == Format::kE4M3 ? "E4M3" : "HYBRID"; }

AmaxComputeAlgo amax_compute_algo_from_string(const std::string& name) {
  const std::string n = lower(name);
  if (n == "max") return AmaxComputeAlgo::kMax;
  if (n == "most_recent") return AmaxComputeAlgo::kMostRecent;
  fail("fp8 recipe", "unknown amax_compute_algo '{}'{}; valid values are: max, most_recent", name,
       hint(name, {"max", "most_recent"}));
}

const char* amax_compute_algo_name(AmaxComputeAlgo algo) {
  return algo == AmaxComputeAlgo::kMax ? "max" : "most_recent";
}

RecipeKind recipe_kind_from_string(const std::string& name) {
  const std::string n = lower(name);
  if (n == "delayed") return RecipeKind::kDelayed;
  if (n == "current") return RecipeKind::kCurrent;
  if (n == "rowwise") return RecipeKind::kRowwise;
  if (n == "rowwise-gw-hp") return RecipeKind::kRowwiseGwHp;
  if (n == "block") return RecipeKind::kBlock;
  if (n == "mxfp8") return RecipeKind::kMxfp8;
  if (n == "mxfp4") return RecipeKind::kMxfp4;
  if (n == "nvfp4") return RecipeKind::kNvfp4;
  fail("fp8 recipe",
       "unknown fp8 recipe '{}'{}; valid recipes are: delayed, current, rowwise, rowwise-gw-hp, "
       "block, mxfp8, mxfp4, nvfp4",
       name,
       hint(name, {"delayed", "current", "rowwise", "rowwise-gw-hp", "block", "mxfp8", "mxfp4",
                   "nvfp4"}));
}

const char* recipe_kind_name(RecipeKind kind) {
  switch (kind) {
    case RecipeKind::kDelayed:
      return "delayed";
    case RecipeKind::kCurrent:
      return "current";
    case RecipeKind::kRowwise:
      return "rowwise";
    case RecipeKind::kRowwiseGwHp:
      return "rowwise-gw-hp";
    case RecipeKind::kBlock:
      return "block";
    case RecipeKind::kMxfp8:
      return "mxfp8";
    case RecipeKind::kMxfp4:
      return "mxfp4";
    case RecipeKind::kNvfp4:
      return "nvfp4";
  }
  return "?";
}

const char* recipe_class_name(RecipeKind kind) {
  switch (kind) {
    case RecipeKind::kDelayed:
      return "DelayedScaling";
    case RecipeKind::kCurrent:
      return "Float8CurrentScaling";
    case RecipeKind::kRowwise:
      return "ROWWISE";
    case RecipeKind::kRowwiseGwHp:
      return "ROWWISE_WITH_GW_HP";
    case RecipeKind::kBlock:
      return "Float8BlockScaling";
    case RecipeKind::kMxfp8:
      return "MXFP8BlockScaling";
    case RecipeKind::kMxfp4:
      return "MXLinearConfig";
    case RecipeKind::kNvfp4:
      return "NVFP4BlockScaling";
  }
  return "?";
}

namespace {
bool is_rowwise(RecipeKind kind) {
  return kind == RecipeKind::kRowwise || kind == RecipeKind::kRowwiseGwHp;
}
bool is_mx(RecipeKind kind) { return kind == RecipeKind::kMxfp8 || kind == RecipeKind::kMxfp4; }
}  // namespace

const char* role_name(Role role) {
  switch (role) {
    case Role::kInput:
      return "input";
    case Role::kWeight:
      return "weight";
    case Role::kGradOutput:
      return "grad_output";
  }
  return "?";
}

namespace {
// The nvfp4 recipe's switches are refused under another kind, naming field and flag.
void check_nvfp4_fields(const Recipe& r) {
  if (r.kind == RecipeKind::kNvfp4) return;
  // mxfp4_on: the mxfp4 flag that turns the technique on there, or null.
  auto only_nvfp4 = [&](bool off, const char* field, const char* flag, const char* mxfp4_on) {
    MANTISSA_CHECK(!off, "fp8 recipe",
                   "{} ({}) applies to the nvfp4 recipe only (TransformerEngine's "
                   "NVFP4BlockScaling), not to {}: leave it out or use --fp8-recipe nvfp4{}",
                   field, flag, recipe_kind_name(r.kind),
                   r.kind == RecipeKind::kMxfp4 && mxfp4_on != nullptr
                       ? fmt::format(" (the mxfp4 recipe has it off unless {})", mxfp4_on)
                       : std::string());
  };
  only_nvfp4(r.disable_rht, "disable_rht", "--fp8-disable-rht", "--fp8-enable-rht");
  only_nvfp4(r.disable_stochastic_rounding, "disable_stochastic_rounding",
             "--fp8-disable-stochastic-rounding", "--fp8-enable-stochastic-rounding");
  only_nvfp4(r.disable_2d_quantization, "disable_2d_quantization", "--fp8-disable-2d-quantization",
             nullptr);
}

// The mxfp4 recipe's opt-in switches are refused under another kind, naming field and flag
// (under nvfp4 both techniques are on unless its --fp8-disable-* flags turn them off).
void check_mxfp4_fields(const Recipe& r) {
  if (r.kind == RecipeKind::kMxfp4) return;
  auto only_mxfp4 = [&](bool on, const char* field, const char* flag, const char* nvfp4_off) {
    MANTISSA_CHECK(
        !on, "fp8 recipe",
        "{} ({}) applies to the mxfp4 recipe only (Tseng et al.'s MXFP4 training), not "
        "to {}: {}",
        field, flag, recipe_kind_name(r.kind),
        r.kind == RecipeKind::kNvfp4
            ? fmt::format("the nvfp4 recipe has it on unless {}; leave {} out", nvfp4_off, flag)
            : fmt::format("leave it out or use --fp8-recipe mxfp4"));
  };
  only_mxfp4(r.enable_stochastic_rounding, "enable_stochastic_rounding",
             "--fp8-enable-stochastic-rounding", "--fp8-disable-stochastic-rounding");
  only_mxfp4(r.enable_rht, "enable_rht", "--fp8-enable-rht", "--fp8-disable-rht");
}

// What the scales of a recipe other than block are, for the refusal of --fp8-fp32-scales.
std::string unrounded_scales_note(RecipeKind kind) {
  switch (kind) {
    case RecipeKind::kRowwise:
      return "the rowwise recipe always rounds its scales down to powers of 2: leave it out";
    case RecipeKind::kMxfp8:
    case RecipeKind::kMxfp4:
      return fmt::format(
          "the {} recipe's E8M0 scales are powers of 2 by their format: leave it out",
          recipe_kind_name(kind));
    case RecipeKind::kNvfp4:
      return "the nvfp4 recipe's block scales are E4M3 codes: leave it out";
    default:
      return fmt::format(
          "the {} recipe leaves its scales unrounded already (--fp8-power-2-scales rounds them)",
          recipe_kind_name(kind));
  }
}

}  // namespace

void Recipe::validate() const { validate({}); }

void Recipe::validate(const std::set<std::string>& given) const {
  check_nvfp4_fields(*this);
  check_mxfp4_fields(*this);
  if (kind != RecipeKind::kDelayed) {
    // The delayed fields would silently do nothing: refused, naming field and flag, at any value
    // the user gave.
    const Recipe defaults;
    const bool format_unset = fp8_format == defaults.fp8_format && !given.contains("fp8_format");
    auto only_delayed = [&](bool is_default, const char* field, const char* flag,
                            const std::string& value) {
      MANTISSA_CHECK(is_default && !given.contains(field), "fp8 recipe",
                     "{} {} applies to the delayed recipe only; the {} recipe takes each scale "
                     "from the amax of the tensor being cast: leave {} out or use --fp8-recipe "
                     "delayed",
                     field, value, recipe_kind_name(kind), flag);
    };
    only_delayed(margin == defaults.margin, "margin", "--fp8-margin", std::to_string(margin));
    only_delayed(amax_history_len == defaults.amax_history_len, "amax_history_len",
                 "--fp8-amax-history-len", std::to_string(amax_history_len));
    only_delayed(amax_compute_algo == defaults.amax_compute_algo, "amax_compute_algo",
                 "--fp8-amax-compute-algo", amax_compute_algo_name(amax_compute_algo));
    if (is_rowwise(kind)) {
      MANTISSA_CHECK(amax_epsilon == 0.0f, "fp8 recipe",
                     "amax_epsilon applies to the current and block recipes only (the {} recipe "
                     "floors each amax at torchao's 1e-12)",
                     recipe_kind_name(kind));
    }
    if (is_rowwise(kind) || kind == RecipeKind::kBlock) {
      MANTISSA_CHECK(format_unset, "fp8 recipe",
                     "fp8_format {} applies to the delayed, current and mxfp8 recipes only; the "
                     "{} recipe casts every tensor to E4M3: leave --fp8-format out",
                     format_name(fp8_format), recipe_kind_name(kind));
    }
    if (kind == RecipeKind::kNvfp4) {
      MANTISSA_CHECK(format_unset, "fp8 recipe",
                     "fp8_format {} applies to the delayed, current and mxfp8 recipes only; the "
                     "nvfp4 recipe casts every tensor to E2M1 with E4M3 block scales: leave "
                     "--fp8-format out",
                     format_name(fp8_format));
      MANTISSA_CHECK(!use_power_2_scales, "fp8 recipe",
                     "use_power_2_scales (--fp8-power-2-scales) applies to the current and "
                     "rowwise-gw-hp recipes only; the nvfp4 recipe's block scales are E4M3");
      MANTISSA_CHECK(amax_epsilon == 0.0f, "fp8 recipe",
                     "amax_epsilon applies to the current and block recipes only; the nvfp4 "
                     "recipe's per-tensor scale is amax / (448 * 6), 1 for an all-zero tensor");
    }
    if (is_mx(kind)) {
      MANTISSA_CHECK(format_unset || kind == RecipeKind::kMxfp8, "fp8 recipe",
                     "fp8_format {} applies to the delayed, current and mxfp8 recipes only; the "
                     "mxfp4 recipe casts every tensor to E2M1: leave --fp8-format out",
                     format_name(fp8_format));
      MANTISSA_CHECK(amax_epsilon == 0.0f, "fp8 recipe",
                     "amax_epsilon applies to the current and block recipes only (the {} recipe "
                     "takes each E8M0 scale from its block's amax)",
                     recipe_kind_name(kind));
      MANTISSA_CHECK(!use_power_2_scales, "fp8 recipe",
                     "use_power_2_scales (--fp8-power-2-scales): the {} recipe's E8M0 scales are "
                     "powers of 2 already; leave it out",
                     recipe_kind_name(kind));
    }
    if (kind == RecipeKind::kRowwise) {
      MANTISSA_CHECK(!use_power_2_scales, "fp8 recipe",
                     "use_power_2_scales (--fp8-power-2-scales): the rowwise recipe rounds its "
                     "scales down to powers of 2 already; leave it out (rowwise-gw-hp takes it)");
    }
    if (kind == RecipeKind::kBlock) {
      MANTISSA_CHECK(!use_power_2_scales, "fp8 recipe",
                     "use_power_2_scales (--fp8-power-2-scales): the block recipe rounds its "
                     "scales to powers of 2 already; leave it out (--fp8-fp32-scales keeps them "
                     "unrounded)");
    }
    MANTISSA_CHECK(!use_fp32_scales || kind == RecipeKind::kBlock, "fp8 recipe",
                   "use_fp32_scales (--fp8-fp32-scales) applies to the block recipe only; {}",
                   unrounded_scales_note(kind));
  } else {
    MANTISSA_CHECK(!use_power_2_scales, "fp8 recipe",
                   "use_power_2_scales (--fp8-power-2-scales) applies to the current and "
                   "rowwise-gw-hp recipes only (delayed scaling computes its scales from the amax "
                   "history): use --fp8-recipe current or leave it out");
    MANTISSA_CHECK(amax_epsilon == 0.0f, "fp8 recipe",
                   "amax_epsilon applies to the current and block recipes only (delayed scaling "
                   "computes its scales from the amax history)");
    MANTISSA_CHECK(!use_fp32_scales, "fp8 recipe",
                   "use_fp32_scales (--fp8-fp32-scales) applies to the block recipe only");
  }
  MANTISSA_CHECK(std::isfinite(amax_epsilon) && amax_epsilon >= 0.0f, "fp8 recipe",
                 "amax_epsilon must be finite and at least 0 (the floor of an amax), got {}",
                 amax_epsilon);
  MANTISSA_CHECK(amax_history_len >= 1, "fp8 recipe",
                 "amax_history_len must be at least 1 (the current step's slot), got {}",
                 amax_history_len);
  MANTISSA_CHECK(amax_history_len <= kMaxAmaxHistoryLen, "fp8 recipe",
                 "amax_history_len {} is more steps than any run keeps (at most {}; "
                 "TransformerEngine's default is 1024): each FP8 tensor holds that many amaxes",
                 amax_history_len, kMaxAmaxHistoryLen);
  // E4M3 spans about 2^17 (2^-9 to 448): dividing the scale by more than 2^16 would flush
  // every value to zero, multiplying it by more would saturate every value.
  MANTISSA_CHECK(margin >= -kMaxMargin && margin <= kMaxMargin, "fp8 recipe",
                 "margin {} is outside [-{}, {}]: the scale is divided by 2^margin, and beyond "
                 "2^{} every value would flush to zero (or, negative, saturate); "
                 "TransformerEngine's default is 0",
                 margin, kMaxMargin, kMaxMargin, kMaxMargin);
}

std::string Recipe::checkpoint_refusal() const {
  if (kind == RecipeKind::kMxfp4 && enable_stochastic_rounding)
    return "mxfp4's stochastic rounding draws the random bits of the backward copies in a "
           "forward that records a graph only, which a checkpoint's first forward does not, so "
           "the stream would not be where it is without checkpointing; leave "
           "--fp8-enable-stochastic-rounding off or train without activation checkpointing";
  return "";
}

int64_t Recipe::history_rows() const { return kind == RecipeKind::kDelayed ? amax_history_len : 1; }

DType Recipe::dtype_of(Role role) const {
  if (is_rowwise(kind) || kind == RecipeKind::kBlock || kind == RecipeKind::kMxfp4 ||
      kind == RecipeKind::kNvfp4)
    return kFloat8_e4m3fn;
  if (role == Role::kGradOutput && fp8_format == Format::kHybrid) return kFloat8_e5m2;
  return kFloat8_e4m3fn;
}

nlohmann::json Recipe::to_json() const {
  if (kind == RecipeKind::kMxfp8)
    return {{"recipe", recipe_kind_name(kind)}, {"fp8_format", format_name(fp8_format)}};
  if (kind == RecipeKind::kMxfp4) {
    return {{"recipe", recipe_kind_name(kind)},
            {"enable_stochastic_rounding", enable_stochastic_rounding},
            {"enable_rht", enable_rht}};
  }
  if (kind == RecipeKind::kNvfp4) {
    return {{"recipe", recipe_kind_name(kind)},
            {"disable_rht", disable_rht},
            {"disable_stochastic_rounding", disable_stochastic_rounding},
            {"disable_2d_quantization", disable_2d_quantization}};
  }
  if (kind == RecipeKind::kBlock) {
    return {{"recipe", recipe_kind_name(kind)},
            {"use_fp32_scales", use_fp32_scales},
            {"amax_epsilon", amax_epsilon}};
  }
  if (is_rowwise(kind))
    return {{"recipe", recipe_kind_name(kind)}, {"use_power_2_scales", use_power_2_scales}};
  if (kind != RecipeKind::kDelayed) {
    return {{"recipe", recipe_kind_name(kind)},
            {"fp8_format", format_name(fp8_format)},
            {"use_power_2_scales", use_power_2_scales},
            {"amax_epsilon", amax_epsilon}};
  }
  return {{"recipe", recipe_kind_name(kind)},
          {"fp8_format", format_name(fp8_format)},
          {"margin", margin},
          {"amax_history_len", amax_history_len},
          {"amax_compute_algo", amax_compute_algo_name(amax_compute_algo)},
          {"reduce_amax", reduce_amax}};
}

Recipe Recipe::from_json(const nlohmann::json& j) {
  Recipe r;
  if (j.contains("recipe")) r.kind = recipe_kind_from_string(j.at("recipe"));
  // Under rowwise the field has no effect (its scales are always powers of 2); files that
  // recorded it still load.
  if (j.contains("use_power_2_scales"))
    r.use_power_2_scales = j.at("use_power_2_scales").get<bool>() && r.kind != RecipeKind::kRowwise;
  if (j.contains("use_fp32_scales")) r.use_fp32_scales = j.at("use_fp32_scales");
  if (j.contains("amax_epsilon")) r.amax_epsilon = j.at("amax_epsilon");
  if (j.contains("fp8_format")) r.fp8_format = format_from_string(j.at("fp8_format"));
  if (j.contains("margin")) r.margin = j.at("margin").get<int>();
  if (j.contains("amax_history_len")) r.amax_history_len = j.at("amax_history_len");
  if (j.contains("amax_compute_algo")) {
    r.amax_compute_algo = amax_compute_algo_from_string(j.at("amax_compute_algo"));
  }
  if (j.contains("reduce_amax")) r.reduce_amax = j.at("reduce_amax");
  if (j.contains("disable_rht")) r.disable_rht = j.at("disable_rht");
  if (j.contains("disable_stochastic_rounding"))
    r.disable_stochastic_rounding = j.at("disable_stochastic_rounding");
  if (j.contains("disable_2d_quantization"))
    r.disable_2d_quantization = j.at("disable_2d_quantization");
  if (j.contains("enable_stochastic_rounding"))
    r.enable_stochastic_rounding = j.at("enable_stochastic_rounding");
  if (j.contains("enable_rht")) r.enable_rht = j.at("enable_rht");
  r.validate();
  return r;
}

std::string Recipe::to_string() const {
  if (kind == RecipeKind::kMxfp8)
    return fmt::format("MXFP8BlockScaling(fp8_format={}, block=1x32, scale=E8M0 rounded up)",
                       format_name(fp8_format));
  if (kind == RecipeKind::kMxfp4) {
    const std::string config =
        "MXLinearConfig(elem_dtype=float4_e2m1fn_x2, block_size=32, scale_calculation_mode=FLOOR";
    if (!enable_stochastic_rounding && !enable_rht) return config + ")";
    return fmt::format("{}, stochastic_rounding={}, rht={})", config, enable_stochastic_rounding,
                       enable_rht);
  }
  if (kind == RecipeKind::kNvfp4) {
    return fmt::format(
        "NVFP4BlockScaling(fp4_format=E2M1, fp8_format=E4M3, disable_rht={}, "
        "disable_stochastic_rounding={}, disable_2d_quantization={})",
        disable_rht, disable_stochastic_rounding, disable_2d_quantization);
  }
  if (kind == RecipeKind::kBlock) {
    return fmt::format(
        "Float8BlockScaling(fp8_format=E4M3, power_2_scale={}, amax_epsilon={}, "
        "x_block_scaling_dim=1, w_block_scaling_dim=2, grad_block_scaling_dim=1)",
        power_2_scales(), amax_epsilon);
  }
  if (is_rowwise(kind))
    return fmt::format("{}(round_scales_to_power_of_2={})", recipe_class_name(kind),
                       power_2_scales());
  if (kind != RecipeKind::kDelayed) {
    return fmt::format("{}(fp8_format={}, use_power_2_scales={}, amax_epsilon={})",
                       recipe_class_name(kind), format_name(fp8_format), use_power_2_scales,
                       amax_epsilon);
  }
  return fmt::format(
      "DelayedScaling(fp8_format={}, margin={}, amax_history_len={}, amax_compute_algo={}, "
      "reduce_amax={})",
      format_name(fp8_format), margin, amax_history_len, amax_compute_algo_name(amax_compute_algo),
      reduce_amax);
}

std::string recipe_mismatch(const Recipe& saved, const Recipe& live) {
  if (saved.kind != live.kind) {
    return fmt::format(
        "the checkpoint was trained with the FP8 recipe '{}' ({}) but this run uses '{}' ({}); "
        "resume with --fp8-recipe {}",
        recipe_kind_name(saved.kind), saved.to_string(), recipe_kind_name(live.kind),
        live.to_string(), recipe_kind_name(saved.kind));
  }
  std::vector<std::string> differ;
  const auto option = [&](bool differs, const char* flag, const std::string& in_file,
                          const std::string& here) {
    if (differs)
      differ.push_back(fmt::format("{} (checkpoint: {}; this run: {})", flag, in_file, here));
  };
  const auto given = [](bool on) { return std::string(on ? "given" : "not given"); };
  const auto flag = [&](bool Recipe::*field, const char* name) {
    option(saved.*field != live.*field, name, given(saved.*field), given(live.*field));
  };
  option(saved.fp8_format != live.fp8_format, "--fp8-format", format_name(saved.fp8_format),
         format_name(live.fp8_format));
  option(saved.margin != live.margin, "--fp8-margin", std::to_string(saved.margin),
         std::to_string(live.margin));
  option(saved.amax_history_len != live.amax_history_len, "--fp8-amax-history-len",
         std::to_string(saved.amax_history_len), std::to_string(live.amax_history_len));
  option(saved.amax_compute_algo != live.amax_compute_algo, "--fp8-amax-compute-algo",
         amax_compute_algo_name(saved.amax_compute_algo),
         amax_compute_algo_name(live.amax_compute_algo));
  option(saved.reduce_amax != live.reduce_amax, "the recipe's reduce_amax",
         saved.reduce_amax ? "true" : "false", live.reduce_amax ? "true" : "false");
  option(saved.amax_epsilon != live.amax_epsilon, "the recipe's amax_epsilon",
         fmt::format("{}", saved.amax_epsilon), fmt::format("{}", live.amax_epsilon));
  flag(&Recipe::use_power_2_scales, "--fp8-power-2-scales");
  flag(&Recipe::use_fp32_scales, "--fp8-fp32-scales");
  flag(&Recipe::disable_rht, "--fp8-disable-rht");
  flag(&Recipe::disable_stochastic_rounding, "--fp8-disable-stochastic-rounding");
  flag(&Recipe::disable_2d_quantization, "--fp8-disable-2d-quantization");
  flag(&Recipe::enable_stochastic_rounding, "--fp8-enable-stochastic-rounding");
  flag(&Recipe::enable_rht, "--fp8-enable-rht");
  return fmt::format(
      "the checkpoint was trained with {} but this run uses {}: {}; resume with the checkpoint's "
      "--fp8-* options",
      saved.to_string(), live.to_string(), fmt::join(differ, ", "));
}

float fp8_max(DType dtype) {
  if (dtype == kFloat8_e4m3fn) return Float8E4M3::kMax;
  if (dtype == kFloat8_e5m2) return Float8E5M2::kMax;
  fail("fp8", "fp8_max: {} is not an FP8 dtype (float8_e4m3fn or float8_e5m2)", dtype.name());
}

}  // namespace mantissa::fp8
