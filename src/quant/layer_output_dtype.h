#pragma once
// The dtype the quantized Linear layers (Linear4bit, Linear8bitLt) return.
#include "mantissa/amp/autocast.h"
#include "mantissa/core/tensor.h"

namespace mantissa::quant {

// Inside an autocast region whose dtype is the layer's compute dtype, the compute dtype, as
// autocast's linear returns it: the activations after the layer (and what backward saves of
// them) then take half the memory, as under bf16-mixed. Elsewhere, and for float64 input
// (which autocast leaves alone), the input's dtype, as bitsandbytes' layers do.
inline DType layer_output_dtype(const Tensor& input, DType compute) {
  if (input.dtype() != kFloat64 && amp::is_autocast_enabled() &&
      amp::get_autocast_dtype() == compute)
    return compute;
  return input.dtype();
}

}  // namespace mantissa::quant
