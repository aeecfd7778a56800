#include "mantissa/recipes/multi_precision_flags.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "mantissa/core/error.h"
#include "mantissa/core/warning.h"
#include "mantissa/recipes/model_hparams.h"
#include "mantissa/train/precision_registry.h"

namespace mantissa::recipes {
namespace {

bool quantizes_weights(const std::string& precision) {
  return train::precision_traits(precision).quantized_weights;
}

}  // namespace

namespace {

// The error for --quant-dtype / --quant-ignore (given, or set to another value than the
// default) when none of `precisions` is quantized; `which` says what the precisions were ("not
// to 32-true", "and --precisions ..."). A given flag is an error whatever its value, the default
// "bf16" included, as "fp16" is.
void check_quant_flags(const std::vector<std::string>& precisions, const QuantOptions& q,
                       const char* command, const std::string& which) {
  const bool dtype_set = q.quant_dtype_given || q.quant_dtype != QuantOptions{}.quant_dtype;
  const bool ignore_set = q.quant_ignore_given || !q.quant_ignore.empty();
  if ((!dtype_set && !ignore_set) ||
      std::any_of(precisions.begin(), precisions.end(), quantizes_weights))
    return;
  fail(command,
       "{} applies to the quantized precisions (nf4, nf4-dq, fp4, fp4-dq, int8, int8-training), "
       "{}",
       dtype_set ? "--quant-dtype" : "--quant-ignore", which);
}

}  // namespace

void check_quant_flags_apply(const std::string& precision, const QuantOptions& q,
                             const char* command) {
  check_quant_flags({precision}, q, command, fmt::format("not to {}", precision));
}

void check_quant_options_apply(const std::vector<std::string>& precisions, const QuantOptions& q,
                               const char* command) {
  check_quant_flags(precisions, q, command,
                    fmt::format("and --precisions ({}) lists none", fmt::join(precisions, ",")));
  const QuantOptions defaults;
  if (q.lora_rank == 0) {
    for (const auto& [flag, set] :
         {std::pair{"--lora-alpha", q.lora_alpha != defaults.lora_alpha},
          std::pair{"--lora-dropout", q.lora_dropout != defaults.lora_dropout}}) {
      if (set)
        warn(fmt::format("{} has no effect without --lora-rank (no adapters are added)", flag));
    }
  }
}

void add_finetuning_settings(nlohmann::ordered_json& j, const std::vector<std::string>& precisions,
                             const QuantOptions& q,
                             const std::map<std::string, std::string>& precision_options) {
  if (q.lora_rank > 0) {
    j["lora"] = {{"rank", q.lora_rank}, {"alpha", q.lora_alpha}, {"dropout", q.lora_dropout}};
  }
  if (!q.init_from.empty()) j["init_from"] = q.init_from;
  if (std::any_of(precisions.begin(), precisions.end(), quantizes_weights)) {
    j["quant_dtype"] = q.quant_dtype;
    j["quant_ignore"] = q.quant_ignore;
  }
  // Spelled as a checkpoint's hyper_parameters spell them: "fp8-amax-history-len": 16.
  if (!precision_options.empty()) j["precision_options"] = fp8_settings_json(precision_options);
}

}  // namespace mantissa::recipes
