#pragma once
// nn::Conv2d: a 2-D convolution layer with PyTorch's default initialisation.
#include <optional>
#include "mantissa/core/generator.h"
#include "mantissa/nn/module.h"
#include "mantissa/ops/size2.h"

namespace mantissa::nn {

struct Conv2dOptions {
  Size2 stride = {1, 1};
  Size2 padding = {0, 0};
  Size2 dilation = {1, 1};
  int64_t groups = 1;
  bool bias = true;
};

class Conv2d : public Module {
 public:
  // weight [out, in / groups, kH, kW] ~ kaiming_uniform_(a = sqrt(5)), i.e.
  // U(-1/sqrt(fan_in), 1/sqrt(fan_in)) with fan_in = in / groups * kH * kW; bias ~ the same
  // bound. Drawn in double from `gen` (default generator when null), rounded once to `dtype`.
  Conv2d(int64_t in_channels, int64_t out_channels, Size2 kernel_size,
         const Conv2dOptions& options = {}, std::optional<DType> dtype = std::nullopt,
         Generator* gen = nullptr);
  // A square kernel, as torch's Conv2d(1, 8, 3).
  Conv2d(int64_t in_channels, int64_t out_channels, int64_t kernel_size,
         const Conv2dOptions& options = {}, std::optional<DType> dtype = std::nullopt,
         Generator* gen = nullptr)
      : Conv2d(in_channels, out_channels, Size2{kernel_size, kernel_size}, options, dtype, gen) {}

  Tensor forward(const Tensor& input) override;
  std::string extra_repr() const override;
  void reset_parameters(Generator* gen = nullptr);

  const Conv2dOptions& options() const { return options_; }

  Tensor weight;  // [out_channels, in_channels / groups, kH, kW]
  Tensor bias;    // [out_channels], undefined without bias

 private:
  int64_t in_channels_, out_channels_;
  Size2 kernel_size_;
  Conv2dOptions options_;
};

}  // namespace mantissa::nn
