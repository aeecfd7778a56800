#include "multi_precision_flags.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "mantissa/core/error.h"
#include "mantissa/core/warning.h"

namespace mantissa::recipes {

void check_quant_options_apply(const std::vector<std::string>& precisions, const QuantOptions& q,
                               const char* command) {
  const QuantOptions defaults;
  const bool dtype_set = q.quant_dtype != defaults.quant_dtype;
  if ((dtype_set || !q.quant_ignore.empty()) &&
      std::none_of(precisions.begin(), precisions.end(), is_quantized_precision)) {
    fail(command,
         "{} applies to the quantized precisions (nf4, nf4-dq, fp4, fp4-dq, int8, int8-training), "
         "and --precisions ({}) lists none",
         dtype_set ? "--quant-dtype" : "--quant-ignore", fmt::join(precisions, ","));
  }
  if (q.lora_rank == 0) {
    for (const auto& [flag, set] :
         {std::pair{"--lora-alpha", q.lora_alpha != defaults.lora_alpha},
          std::pair{"--lora-dropout", q.lora_dropout != defaults.lora_dropout}}) {
      if (set)
        warn(fmt::format("{} has no effect without --lora-rank (no adapters are added)", flag));
    }
  }
}

}  // namespace mantissa::recipes
