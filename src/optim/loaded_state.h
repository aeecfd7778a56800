#pragma once
// Checks of optimizer state read from a file (Optimizer::loaded_buffer and its overrides):
// NaN or inf in a moment, or a negative second moment or 8-bit block absmax, comes from a
// damaged file. Loaded as it is, the first step would write NaN weights and the run would fail
// with advice about the learning rate.
#include <cmath>
#include <string>

#include "mantissa/autograd/grad_mode.h"
#include "mantissa/core/error.h"
#include "mantissa/core/untrusted_text.h"
#include "mantissa/ops/elementwise.h"
#include "mantissa/ops/reduce.h"

namespace mantissa::optim::detail {

// `state`: a floating tensor as loaded; `key`: its name in the state dict; `never_negative`:
// what the tensor holds when no element of it may be negative (non_negative_state), else null.
inline void check_loaded_state_values(const Tensor& state, const std::string& key,
                                      const char* where, const char* never_negative) {
  if (state.numel() == 0 || !state.dtype().is_floating_point()) return;
  NoGradGuard no_grad;
  // max |x| is NaN when x holds a NaN, inf when it holds an inf.
  const double largest = max(abs(state)).to(kFloat64).item();
  MANTISSA_CHECK(std::isfinite(largest), where,
                 "tensor {} holds a non-finite value ({}): the file is damaged, or the run that "
                 "wrote it had diverged; use an earlier checkpoint",
                 quote_untrusted(key), largest);
  if (never_negative == nullptr) return;
  const double most_negative = max(neg(state)).to(kFloat64).item();
  MANTISSA_CHECK(most_negative <= 0, where,
                 "tensor {} holds a negative value ({}), which {} never is: the file is "
                 "damaged; use an earlier checkpoint",
                 quote_untrusted(key), -most_negative, never_negative);
}

// What a state buffer that is never negative holds, or null: Adam's second moments
// (exp_avg_sq, max_exp_avg_sq) and the 8-bit optimizers' block absmax of either moment
// (absmax1, absmax2: max |m| and max v over a block). A negative absmax decoded the block's
// moments with the wrong sign, and the next step wrote NaN weights.
inline const char* non_negative_state(const std::string& buffer) {
  if (buffer == "exp_avg_sq" || buffer == "max_exp_avg_sq") return "a second moment";
  if (buffer == "absmax1" || buffer == "absmax2") return "a block's absmax (its largest magnitude)";
  return nullptr;
}

}  // namespace mantissa::optim::detail
