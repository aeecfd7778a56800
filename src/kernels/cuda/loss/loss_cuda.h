#pragma once
// cross_entropy's CUDA branch (loss_cuda.cpp), reached through the GPU kernel table
// (kernels/gpu_kernels.h); the op (src/ops/loss.cpp) has checked the targets (on the host) and
// records the node.
#include "mantissa/core/tensor.h"

namespace mantissa::kernels::gpu {

struct CrossEntropyForward {
  Tensor loss;    // reduced as asked, in the input's dtype
  Tensor x;       // the logits, contiguous, history-free
  Tensor target;  // int64 on the GPU
  Tensor lse;     // per row, fp32 (double for f64)
  Tensor count;   // mean with count < 0: the non-ignored targets, counted on the GPU (0-dim)
};

// input (N, C) or (C) on a GPU, target (N) / 0-dim; reduction 0 none, 1 mean, 2 sum; count is
// the number of targets that are not ignore_index, or -1 when the host could not read the
// targets (inside a CUDA graph capture): the GPU counts them then. A target out of range gives
// its row a NaN loss (the host check, when it runs, refuses it first).
CrossEntropyForward cross_entropy(const Tensor& input, const Tensor& target, int64_t ignore_index,
                                  double label_smoothing, int reduction, int64_t count);
// The logits' gradient in grad's dtype (grad: (N) for none, 0-dim otherwise).
Tensor cross_entropy_backward(const CrossEntropyForward& f, const Tensor& grad,
                              int64_t ignore_index, double label_smoothing, int reduction,
                              int64_t count);

}  // namespace mantissa::kernels::gpu
