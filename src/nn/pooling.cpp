#include "mantissa/nn/pooling.h"

#include "mantissa/ops/pool.h"

namespace mantissa::nn {

MaxPool2d::MaxPool2d(Size2 kernel_size, Size2 stride, Size2 padding, Size2 dilation)
    : Module("MaxPool2d"),
      kernel_size_(kernel_size),
      stride_(stride[0] == 0 && stride[1] == 0 ? kernel_size : stride),
      padding_(padding),
      dilation_(dilation) {}

Tensor MaxPool2d::forward(const Tensor& input) {
  return max_pool2d(input, kernel_size_, stride_, padding_, dilation_);
}

std::string MaxPool2d::extra_repr() const {
  return fmt::format("kernel_size=({}, {}), stride=({}, {}), padding=({}, {}), dilation=({}, {})",
                     kernel_size_[0], kernel_size_[1], stride_[0], stride_[1], padding_[0],
                     padding_[1], dilation_[0], dilation_[1]);
}

AvgPool2d::AvgPool2d(Size2 kernel_size, Size2 stride, Size2 padding, bool count_include_pad)
    : Module("AvgPool2d"),
      kernel_size_(kernel_size),
      stride_(stride[0] == 0 && stride[1] == 0 ? kernel_size : stride),
      padding_(padding),
      count_include_pad_(count_include_pad) {}

Tensor AvgPool2d::forward(const Tensor& input) {
  return avg_pool2d(input, kernel_size_, stride_, padding_, count_include_pad_);
}

std::string AvgPool2d::extra_repr() const {
  return fmt::format(
      "kernel_size=({}, {}), stride=({}, {}), padding=({}, {}), "
      "count_include_pad={}",
      kernel_size_[0], kernel_size_[1], stride_[0], stride_[1], padding_[0], padding_[1],
      count_include_pad_);
}

AdaptiveAvgPool2d::AdaptiveAvgPool2d(Size2 output_size)
    : Module("AdaptiveAvgPool2d"), output_size_(output_size) {}

Tensor AdaptiveAvgPool2d::forward(const Tensor& input) {
  return adaptive_avg_pool2d(input, output_size_);
}

std::string AdaptiveAvgPool2d::extra_repr() const {
  return fmt::format("output_size=({}, {})", output_size_[0], output_size_[1]);
}

Flatten::Flatten(int64_t start_dim, int64_t end_dim)
    : Module("Flatten"), start_dim_(start_dim), end_dim_(end_dim) {}

Tensor Flatten::forward(const Tensor& input) { return input.flatten(start_dim_, end_dim_); }

std::string Flatten::extra_repr() const {
  return fmt::format("start_dim={}, end_dim={}", start_dim_, end_dim_);
}

}  // namespace mantissa::nn
