#pragma once
// torch.nn.init: in-place initialisers. Values are drawn in double from `gen` (the default
// generator when null) and rounded once to the tensor's dtype, so a seed gives the same
// weights (up to that rounding) in every precision. They run under no_grad and return the
// same tensor handle.
#include <string_view>

#include "mantissa/core/generator.h"
#include "mantissa/core/tensor.h"

namespace mantissa::nn::init {

enum class FanMode { kFanIn, kFanOut };

struct Fans {
  int64_t fan_in;
  int64_t fan_out;
};
// PyTorch's rule: at least 2-D; fan_in = size(1) * receptive field, fan_out = size(0) *
// receptive field, where the receptive field is the product of dims 2 and up.
Fans calculate_fan_in_and_fan_out(const Tensor& tensor);

// Recommended gain: linear/conv*/sigmoid 1, tanh 5/3, relu sqrt(2),
// leaky_relu sqrt(2 / (1 + param^2)), selu 3/4.
double calculate_gain(std::string_view nonlinearity, double param = 0.01);

// While a SkipRandomInit lives on this thread, the random initialisers (uniform_, normal_ and the
// kaiming_* and xavier_* ones built on them) leave their tensor as it is and draw nothing from
// any generator, as transformers' no_init_weights does: for modules whose parameters are about
// to be overwritten (a pretrained model being loaded), where drawing them was most of the
// load's time. Such a tensor holds whatever its storage held until something writes it.
class SkipRandomInit {
 public:
  SkipRandomInit();
  ~SkipRandomInit();
  SkipRandomInit(const SkipRandomInit&) = delete;
  SkipRandomInit& operator=(const SkipRandomInit&) = delete;

 private:
  bool previous_;
};
bool random_init_skipped();

Tensor uniform_(Tensor tensor, double a = 0.0, double b = 1.0, Generator* gen = nullptr);
Tensor normal_(Tensor tensor, double mean = 0.0, double std = 1.0, Generator* gen = nullptr);
Tensor constant_(Tensor tensor, double value);
Tensor zeros_(Tensor tensor);
Tensor ones_(Tensor tensor);

// U(-bound, bound), bound = gain * sqrt(3 / fan). a is the leaky_relu slope (gain's param).
// Linear's default, a = sqrt(5), gives bound = 1 / sqrt(fan_in).
Tensor kaiming_uniform_(Tensor tensor, double a = 0.0, FanMode mode = FanMode::kFanIn,
                        std::string_view nonlinearity = "leaky_relu", Generator* gen = nullptr);
// N(0, std^2), std = gain / sqrt(fan).
Tensor kaiming_normal_(Tensor tensor, double a = 0.0, FanMode mode = FanMode::kFanIn,
                       std::string_view nonlinearity = "leaky_relu", Generator* gen = nullptr);
// U(-bound, bound), bound = gain * sqrt(6 / (fan_in + fan_out)).
Tensor xavier_uniform_(Tensor tensor, double gain = 1.0, Generator* gen = nullptr);
// N(0, std^2), std = gain * sqrt(2 / (fan_in + fan_out)).
Tensor xavier_normal_(Tensor tensor, double gain = 1.0, Generator* gen = nullptr);

}  // namespace mantissa::nn::init
