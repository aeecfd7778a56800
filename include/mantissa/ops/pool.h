#pragma once
// 2-D pooling (torch.nn.functional.max_pool2d / avg_pool2d / adaptive_avg_pool2d) on
// [N, C, H, W] inputs. Every floating dtype: f16/bf16 load, compute in fp32 and store RNE; f64
// computes in double. Output and gradients keep the input dtype.
#include "mantissa/core/tensor.h"
#include "mantissa/ops/size2.h"

namespace mantissa {

// Max over each window; padding counts as -inf, NaN propagates. stride {0, 0} means
// kernel_size (PyTorch's default). Backward sends each output gradient to the window's first
// maximal element. H_out = (H + 2 pad - dil (k - 1) - 1) / stride + 1, floored.
Tensor max_pool2d(const Tensor& input, Size2 kernel_size, Size2 stride = {0, 0},
                  Size2 padding = {0, 0}, Size2 dilation = {1, 1});

// Mean over each window. count_include_pad (PyTorch's default) divides by the window size
// clipped to the padded input; otherwise by the number of real input elements in it.
Tensor avg_pool2d(const Tensor& input, Size2 kernel_size, Size2 stride = {0, 0},
                  Size2 padding = {0, 0}, bool count_include_pad = true);

// Mean over windows [floor(i H / H_out), ceil((i + 1) H / H_out)) per output index i (the same
// along W), so any output size works and windows may overlap.
Tensor adaptive_avg_pool2d(const Tensor& input, Size2 output_size);

}  // namespace mantissa
