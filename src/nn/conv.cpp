#include "mantissa/nn/conv.h"
#include "mantissa/core/default_dtype.h"

#include <cmath>

#include "mantissa/nn/init.h"
#include "mantissa/ops/conv.h"
#include "nn/layer_error.h"

namespace mantissa::nn {

Conv2d::Conv2d(int64_t in_channels, int64_t out_channels, Size2 kernel_size,
               const Conv2dOptions& options, std::optional<DType> requested_dtype, Generator* gen)
    : Module("Conv2d"),
      in_channels_(in_channels),
      out_channels_(out_channels),
      kernel_size_(kernel_size),
      options_(options) {
  const DType dtype = requested_dtype.value_or(get_default_dtype());
  MANTISSA_CHECK(in_channels >= 1 && out_channels >= 1 && kernel_size[0] >= 1 &&
                     kernel_size[1] >= 1 && options.groups >= 1,
                 "Conv2d",
                 "channels, kernel_size and groups must be positive, got in_channels={} "
                 "out_channels={} kernel_size=({}, {}) groups={}",
                 in_channels, out_channels, kernel_size[0], kernel_size[1], options.groups);
  MANTISSA_CHECK(in_channels % options.groups == 0 && out_channels % options.groups == 0, "Conv2d",
                 "in_channels={} and out_channels={} must be divisible by groups={}", in_channels,
                 out_channels, options.groups);
  MANTISSA_CHECK(dtype.is_floating_point() && !dtype.is_float8(), "Conv2d",
                 "expected a floating dtype (float64, float32, float16, bfloat16), got {}",
                 dtype.name());
  weight = register_parameter(
      "weight",
      empty({out_channels, in_channels / options.groups, kernel_size[0], kernel_size[1]}, dtype));
  if (options.bias) bias = register_parameter("bias", empty({out_channels}, dtype));
  reset_parameters(gen);
}

void Conv2d::reset_parameters(Generator* gen) {
  // kaiming_uniform_(a=sqrt(5)) gives bound 1/sqrt(fan_in), fan_in = size(1) * kH * kW.
  init::kaiming_uniform_(weight, std::sqrt(5.0), init::FanMode::kFanIn, "leaky_relu", gen);
  if (bias.defined()) {
    const double fan_in = static_cast<double>(weight.size(1) * kernel_size_[0] * kernel_size_[1]);
    const double bound = 1.0 / std::sqrt(fan_in);
    init::uniform_(bias, -bound, bound, gen);
  }
}

Tensor Conv2d::forward(const Tensor& input) {
  return detail::forward_in_layer(*this, [&] {
    return conv2d(input, weight, bias, options_.stride, options_.padding, options_.dilation,
                  options_.groups);
  });
}

std::string Conv2d::extra_repr() const {
  std::string s =
      fmt::format("{}, {}, kernel_size=({}, {}), stride=({}, {})", in_channels_, out_channels_,
                  kernel_size_[0], kernel_size_[1], options_.stride[0], options_.stride[1]);
  if (options_.padding != Size2{0, 0})
    s += fmt::format(", padding=({}, {})", options_.padding[0], options_.padding[1]);
  if (options_.dilation != Size2{1, 1})
    s += fmt::format(", dilation=({}, {})", options_.dilation[0], options_.dilation[1]);
  if (options_.groups != 1) s += fmt::format(", groups={}", options_.groups);
  if (!bias.defined()) s += ", bias=False";
  return s;
}

}  // namespace mantissa::nn
