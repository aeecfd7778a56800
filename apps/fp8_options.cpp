#include "fp8_options.h"

#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <set>
#include <string>

#include "comma_list.h"
#include "command_line_errors.h"
#include "mantissa/core/error.h"
#include "mantissa/core/untrusted_text.h"
#include "mantissa/train/precisions/transformer_engine_precision.h"

namespace mantissa::app {

namespace {

// The flag's own wording for what the plugin's parser would word by its setting key: a value
// that is not a whole number, as the other integer flags say it (command_line_errors.cpp), and a
// module named twice in --fp8-exclude. "" when the value is for the plugin to check.
std::string flag_level_error(const std::string& key, const std::string& v) {
  const char* default_value = key == "fp8_amax_history_len" ? "1024"
                              : key == "fp8_margin"         ? "0"
                                                            : nullptr;
  if (default_value != nullptr && !is_whole_number(v))
    return fmt::format("'{}' is not an integer (expected a whole number such as {}, the default)",
                       escape_untrusted(v), default_value);
  if (key == "fp8_exclude") {
    // The names as the plugin reads them (spaces trimmed); its own errors (an empty name) are
    // reported by the validator's plugin call.
    std::vector<std::string> names;
    try {
      names = train::transformer_engine_options_from({{key, v}}).exclude;
    } catch (const Error&) {
      return "";
    }
    std::set<std::string> seen;
    for (const std::string& name : names)
      if (!seen.insert(name).second)
        return fmt::format("'{}' is listed twice", escape_untrusted(name));
  }
  return "";
}

}  // namespace

void add_fp8_options(CLI::App* cmd, PrecisionSettings* settings, Fp8ModuleNames names) {
  // Module names of the command's models, for --fp8-exclude's help and errors.
  const std::string examples =
      names == Fp8ModuleNames::kHuggingFace ? "lm_head,model.layers.0.mlp.down_proj" : "net.0,h0";
  // Each flag's value is checked alone by its validator; with --fp8-recipe and the flags given
  // before it (CLI11 runs the callbacks in turn, so the last one sees them all), by the recipe:
  // a flag the recipe does not read is refused, even at its default value ("--fp8-margin 0"
  // under --fp8-recipe current), since the user who gives it expects it to act.
  const auto check_with_recipe = [settings] {
    // Without --fp8-recipe the recipe is the file's under eval, and a flag for the
    // transformer-engine precisions alone is refused naming the precision (settings_for).
    if (!settings->contains("fp8_recipe")) return;
    std::set<std::string> given;
    for (const auto& [k, v] : *settings) given.insert(k);
    train::transformer_engine_options_from(*settings, given);
  };
  const auto set = [settings, check_with_recipe](const char* key, const std::string& value) {
    (*settings)[key] = value;
    check_with_recipe();
  };
  // A switch set by a --config file's false is not given (CLI11 passes the count, -1 or 0).
  const auto switch_to = [settings, set](const char* key) {
    return [settings, set, key](int64_t count) {
      if (count > 0)
        set(key, "true");
      else
        settings->erase(key);
    };
  };
  auto flag = [&](const char* name, const char* key, const std::string& help) {
    CLI::Option* option = cmd->add_option_function<std::string>(
        name, [set, key](const std::string& v) { set(key, v); }, help);
    // A list's empty names are refused as every comma-separated flag's are (comma_list.h),
    // before the plugin's own parser, which words it by its setting key.
    if (std::string(key) == "fp8_exclude") option->check(comma_list(module_name_items(examples)));
    // A bad value is refused while the command line is parsed, naming the flag, by the
    // plugin's own parser and recipe checks (the plugin's message names its setting key).
    option->check(CLI::Validator(
        [key](const std::string& v) -> std::string {
          if (std::string e = flag_level_error(key, v); !e.empty()) return e;
          try {
            train::transformer_engine_options_from({{key, v}});
          } catch (const Error& e) {
            return e.what();
          }
          return "";
        },
        "", ""));
    return option;
  };
  flag("--fp8-recipe", "fp8_recipe",
       "transformer-engine: how scales are found: delayed (amax history; default), current "
       "(each tensor's own amax), rowwise or rowwise-gw-hp (torchao's per-row scales), block "
       "(TransformerEngine's Float8BlockScaling: 1x128 and 128x128 blocks), mxfp8 "
       "(TransformerEngine's MXFP8BlockScaling: 1x32 blocks, E8M0 scales), mxfp4 (E2M1 in "
       "1x32 blocks, E8M0 scales), nvfp4 (TransformerEngine's NVFP4BlockScaling: E2M1 in 1x16 "
       "blocks with E4M3 scales)");
  cmd->add_flag_function(
      "--fp8-power-2-scales", switch_to("fp8_power_2_scales"),
      "transformer-engine, --fp8-recipe current or rowwise-gw-hp: round each scale down to a "
      "power of 2");
  cmd->add_flag_function(
      "--fp8-fp32-scales", switch_to("fp8_fp32_scales"),
      "transformer-engine, --fp8-recipe block: keep the block scales unrounded (fp32) instead of "
      "powers of 2");
  cmd->add_flag_function(
      "--fp8-disable-rht", switch_to("fp8_disable_rht"),
      "transformer-engine, --fp8-recipe nvfp4: no random Hadamard transform on the "
      "weight-gradient product's operands (TransformerEngine's disable_rht)");
  cmd->add_flag_function(
      "--fp8-disable-stochastic-rounding", switch_to("fp8_disable_stochastic_rounding"),
      "transformer-engine, --fp8-recipe nvfp4: round gradients to nearest instead of "
      "stochastically (TransformerEngine's disable_stochastic_rounding)");
  cmd->add_flag_function(
      "--fp8-disable-2d-quantization", switch_to("fp8_disable_2d_quantization"),
      "transformer-engine, --fp8-recipe nvfp4: 1x16 blocks for weights too instead of 16x16 "
      "tiles (TransformerEngine's disable_2d_quantization)");
  cmd->add_flag_function(
      "--fp8-enable-stochastic-rounding", switch_to("fp8_enable_stochastic_rounding"),
      "transformer-engine, --fp8-recipe mxfp4: round the backward products' operands "
      "stochastically after a 3/4 pre-scale (Tseng et al.'s MXFP4 training; off: torchao's "
      "round to nearest)");
  cmd->add_flag_function(
      "--fp8-enable-rht", switch_to("fp8_enable_rht"),
      "transformer-engine, --fp8-recipe mxfp4: a 16-point random Hadamard transform along K on "
      "the backward products' operands (Tseng et al.'s MXFP4 training)");
  flag("--fp8-format", "fp8_format",
       "transformer-engine: E4M3 or HYBRID (E4M3 forward, E5M2 gradients; default)");
  flag("--fp8-amax-history-len", "fp8_amax_history_len",
       "transformer-engine: steps of amax history per tensor (default 1024)")
      ->type_name("INT");
  flag("--fp8-amax-compute-algo", "fp8_amax_compute_algo",
       "transformer-engine: max (default) or most_recent");
  flag("--fp8-margin", "fp8_margin", "transformer-engine: scales are divided by 2^margin")
      ->type_name("INT");
  flag("--fp8-exclude", "fp8_exclude",
       "transformer-engine: module names kept out of FP8 with everything inside them, comma "
       "separated (e.g. " +
           examples + ")");
}

}  // namespace mantissa::app
