#pragma once
// WeightQuantization: how a quantizing precision stores the weight of each Linear layer it
// replaces: a row of the format table (mantissa/core/format_id.h) and that format's options.
// A quantizing precision's line in the precision registry holds one (nf4-dq:
// {kNf4, double_quant}); the plugin hands it to the layers, which hand its format to the
// kernels, unchanged.
#include "mantissa/core/format_id.h"

namespace mantissa::quant {

struct WeightQuantization {
  FormatId format = FormatId::kNf4;  // kNf4 or kFp4 (Linear4bit), kInt8Rowwise (Linear8bitLt)
  bool double_quant = false;         // 4-bit: the per-block absmax quantized again (QLoRA's "-dq")
  // int8: the weights stay trainable float parameters, quantized only inside the product.
  bool trainable = false;
  bool operator==(const WeightQuantization&) const = default;
};

}  // namespace mantissa::quant
