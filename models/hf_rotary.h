#pragma once
// The cos/sin tables of rotary embeddings for a config's rope type, computed in fp32 with the
// operations and their order as transformers computes them (inv_freq = 1 / theta^(2i/d) per
// pair, scaled for linear and llama3 rope; cos(p * inv_freq) repeated over both halves), so
// logits agree with transformers' to fp32 rounding.
#include <cstdint>
#include <utility>
#include <vector>

#include "mantissa/core/tensor.h"
#include "mantissa/models/hf_config.h"

namespace mantissa::models {

// The head_dim / 2 inverse frequencies of `rope` (fp32 values).
std::vector<float> rotary_inverse_frequencies(const RopeConfig& rope, int64_t head_dim);

class RotaryTable {
 public:
  RotaryTable(const RopeConfig& rope, int64_t head_dim);
  // cos and sin (length, head_dim) fp32 for positions offset .. offset + length - 1, on
  // `device`. Rows are computed once and kept (grown when a longer sequence asks).
  std::pair<Tensor, Tensor> rows(int64_t offset, int64_t length, const Device& device);

 private:
  void grow(int64_t positions);

  std::vector<float> inv_freq_;
  int64_t head_dim_;
  Tensor cos_, sin_;                // (positions, head_dim) on the CPU
  Tensor device_cos_, device_sin_;  // copies on the last device asked for, when not the CPU
};

}  // namespace mantissa::models
