#pragma once
// Pooling and reshaping modules (no parameters): MaxPool2d, AvgPool2d, AdaptiveAvgPool2d,
// Flatten.
#include "mantissa/nn/module.h"
#include "mantissa/ops/size2.h"

namespace mantissa::nn {

class MaxPool2d : public Module {
 public:
  // stride {0, 0}: the kernel size (PyTorch's default).
  explicit MaxPool2d(Size2 kernel_size, Size2 stride = {0, 0}, Size2 padding = {0, 0},
                     Size2 dilation = {1, 1});
  // A square window with the stride of its size, as torch's MaxPool2d(2).
  explicit MaxPool2d(int64_t kernel_size) : MaxPool2d(Size2{kernel_size, kernel_size}) {}
  Tensor forward(const Tensor& input) override;
  std::string extra_repr() const override;

 private:
  Size2 kernel_size_, stride_, padding_, dilation_;
};

class AvgPool2d : public Module {
 public:
  explicit AvgPool2d(Size2 kernel_size, Size2 stride = {0, 0}, Size2 padding = {0, 0},
                     bool count_include_pad = true);
  // A square window with the stride of its size, as torch's AvgPool2d(2).
  explicit AvgPool2d(int64_t kernel_size) : AvgPool2d(Size2{kernel_size, kernel_size}) {}
  Tensor forward(const Tensor& input) override;
  std::string extra_repr() const override;

 private:
  Size2 kernel_size_, stride_, padding_;
  bool count_include_pad_;
};

class AdaptiveAvgPool2d : public Module {
 public:
  explicit AdaptiveAvgPool2d(Size2 output_size);
  Tensor forward(const Tensor& input) override;
  std::string extra_repr() const override;

 private:
  Size2 output_size_;
};

// Flattens dims start_dim..end_dim into one (a view when the input is contiguous).
class Flatten : public Module {
 public:
  explicit Flatten(int64_t start_dim = 1, int64_t end_dim = -1);
  Tensor forward(const Tensor& input) override;
  std::string extra_repr() const override;

 private:
  int64_t start_dim_, end_dim_;
};

}  // namespace mantissa::nn
