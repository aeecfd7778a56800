#pragma once
// Checks of optimizer state read from a file (Optimizer::loaded_buffer and its overrides):
// NaN or inf in a moment, or a negative second moment, comes from a damaged file. Loaded as it
// was, the first step wrote NaN weights and the run failed with advice about the learning rate.
#include <cmath>
#include <string>

#include "mantissa/autograd/grad_mode.h"
#include "mantissa/core/error.h"
#include "mantissa/core/untrusted_text.h"
#include "mantissa/ops/elementwise.h"
#include "mantissa/ops/reduce.h"

namespace mantissa::optim::detail {

// `state`: a floating tensor as loaded; `key`: its name in the state dict.
inline void check_loaded_state_values(const Tensor& state, const std::string& key,
                                      const char* where, bool non_negative) {
  if (state.numel() == 0 || !state.dtype().is_floating_point()) return;
  NoGradGuard no_grad;
  // max |x| is NaN when x holds a NaN, inf when it holds an inf.
  const double largest = max(abs(state)).to(kFloat64).item();
  MANTISSA_CHECK(std::isfinite(largest), where,
                 "tensor {} holds a non-finite value ({}): the file is damaged, or the run that "
                 "wrote it had diverged; use an earlier checkpoint",
                 quote_untrusted(key), largest);
  if (!non_negative) return;
  const double most_negative = max(neg(state)).to(kFloat64).item();
  MANTISSA_CHECK(most_negative <= 0, where,
                 "tensor {} holds a negative value ({}), which a second moment never does: the "
                 "file is damaged; use an earlier checkpoint",
                 quote_untrusted(key), -most_negative);
}

// Second moments: Adam's exp_avg_sq and max_exp_avg_sq.
inline bool is_second_moment(const std::string& buffer) {
  return buffer == "exp_avg_sq" || buffer == "max_exp_avg_sq";
}

}  // namespace mantissa::optim::detail
