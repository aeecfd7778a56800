#pragma once
// Losses, following torch.nn.functional.
#include <string_view>

#include "mantissa/core/tensor.h"

namespace mantissa {

enum class Reduction : uint8_t { kNone, kMean, kSum };
Reduction reduction_from_string(std::string_view s);  // "none" | "mean" | "sum"

struct CrossEntropyOptions {
  int64_t ignore_index = -100;
  Reduction reduction = Reduction::kMean;
  double label_smoothing = 0.0;
};

// input: (N, C) or (C) logits; target: (N) or () class indices (kInt64). Mean reduction
// divides by the number of non-ignored targets (PyTorch).
Tensor cross_entropy(const Tensor& input, const Tensor& target,
                     const CrossEntropyOptions& options = {});
Tensor nll_loss(const Tensor& log_probs, const Tensor& target,
                const CrossEntropyOptions& options = {});
Tensor mse_loss(const Tensor& input, const Tensor& target, Reduction reduction = Reduction::kMean);

}  // namespace mantissa
