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

// input: (N, C) or (C) logits; target: (N) or () class indices (any integer dtype; kInt64
// as in PyTorch). Mean reduction divides by the number of non-ignored targets (PyTorch), so
// a batch whose targets are all ignored gives NaN. label_smoothing eps in [0, 1] follows
// PyTorch: (1 - eps) * nll + eps / C * sum_c(-log p_c), ignored rows excluded from both.
// Targets outside [0, C) that are not ignore_index throw. One fused fp32 (f64 for f64) kernel;
// the result has the input's dtype.
Tensor cross_entropy(const Tensor& input, const Tensor& target,
                     const CrossEntropyOptions& options = {});
// Same shapes and options on log-probabilities; options.label_smoothing is ignored (PyTorch's
// nll_loss has no such argument).
Tensor nll_loss(const Tensor& log_probs, const Tensor& target,
                const CrossEntropyOptions& options = {});
// Shapes must match exactly (no broadcasting); mixed float dtypes promote. Differentiable in
// both input and target. Mean over zero elements is NaN (PyTorch).
Tensor mse_loss(const Tensor& input, const Tensor& target, Reduction reduction = Reduction::kMean);

}  // namespace mantissa
