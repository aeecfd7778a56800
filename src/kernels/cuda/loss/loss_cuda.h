#pragma once
// cross_entropy's CUDA branch (loss_cuda.cpp). Only code under `#if MANTISSA_HAS_CUDA` calls
// these; the op (src/ops/loss.cpp) has checked the targets (on the host) and records the node.
#include "mantissa/core/tensor.h"

namespace mantissa::kernels::gpu {

struct CrossEntropyForward {
  Tensor loss;    // reduced as asked, in the input's dtype
  Tensor x;       // the logits, contiguous, history-free
  Tensor target;  // int64 on the GPU
  Tensor lse;     // per row, fp32 (double for f64)
};

// input (N, C) or (C) on a GPU, target (N) / 0-dim; reduction 0 none, 1 mean, 2 sum; count is
// the number of targets that are not ignore_index.
CrossEntropyForward cross_entropy(const Tensor& input, const Tensor& target, int64_t ignore_index,
                                  double label_smoothing, int reduction, int64_t count);
// The logits' gradient in grad's dtype (grad: (N) for none, 0-dim otherwise).
Tensor cross_entropy_backward(const CrossEntropyForward& f, const Tensor& grad,
                              int64_t ignore_index, double label_smoothing, int reduction,
                              int64_t count);

}  // namespace mantissa::kernels::gpu
