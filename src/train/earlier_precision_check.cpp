#include "train/earlier_precision_check.h"

#include <fmt/format.h>

#include "mantissa/core/error.h"

namespace mantissa::train {

void check_not_left_in_earlier_precision(const nn::Module& module, const std::string& earlier,
                                         DType earlier_dtype, const Precision& plugin) {
  const DType expected = plugin.param_dtype();
  if (earlier_dtype == kFloat32 || earlier_dtype == expected) return;
  std::string first;
  int64_t count = 0;
  for (const auto& [name, p] : module.named_parameters()) {
    if (p.dtype() != earlier_dtype) continue;
    if (first.empty()) first = name;
    ++count;
  }
  if (count == 0) return;  // converted back (module.to) or by the new plugin
  fail("Trainer",
       "the module's parameters are {} ('{}'{}), left so by an earlier fit or conversion in "
       "precision {}, but this Trainer's precision {} expects {} parameters: its forward would "
       "mix the two dtypes. Call module.to() with {} first, or build a new module",
       earlier_dtype.name(), first,
       count > 1 ? fmt::format(" and {} more", count - 1) : std::string(), earlier,
       plugin.precision(), expected.name(), expected.name());
}

}  // namespace mantissa::train
