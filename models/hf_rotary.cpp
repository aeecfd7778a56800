#include "hf_rotary.h"

#include <algorithm>
#include <cmath>
#include <numbers>

namespace mantissa::models {

std::vector<float> rotary_inverse_frequencies(const RopeConfig& rope, int64_t head_dim) {
  // Each step in fp32 as torch runs it: the exponent (2i as float) / dim, theta ** exponent,
  // 1 / that; python scalars meet fp32 tensors as fp32 values.
  const int64_t half = head_dim / 2;
  const float theta = static_cast<float>(rope.theta);
  std::vector<float> inv(static_cast<size_t>(half));
  for (int64_t i = 0; i < half; ++i) {
    const float exponent = static_cast<float>(2 * i) / static_cast<float>(head_dim);
    inv[static_cast<size_t>(i)] = 1.0f / std::pow(theta, exponent);
  }
  const float factor = static_cast<float>(rope.factor);
  if (rope.type == RopeConfig::Type::kLinear) {
    for (float& f : inv) f /= factor;
  } else if (rope.type == RopeConfig::Type::kLlama3) {
    // Wavelengths longer than original_max / low_freq_factor are slowed by `factor`, shorter
    // than original_max / high_freq_factor kept, and those between interpolated smoothly.
    const double old_len = static_cast<double>(rope.original_max_position_embeddings);
    const float low_wavelen = static_cast<float>(old_len / rope.low_freq_factor);
    const float high_wavelen = static_cast<float>(old_len / rope.high_freq_factor);
    const float two_pi = static_cast<float>(2 * std::numbers::pi);
    const float span = static_cast<float>(rope.high_freq_factor - rope.low_freq_factor);
    for (float& f : inv) {
      const float wavelen = two_pi / f;
      const float scaled = wavelen > low_wavelen ? f / factor : f;
      const bool medium = !(wavelen < high_wavelen) && !(wavelen > low_wavelen);
      if (medium) {
        const float smooth =
            (static_cast<float>(old_len) / wavelen - static_cast<float>(rope.low_freq_factor)) /
            span;
        f = (1.0f - smooth) * scaled / factor + smooth * scaled;
      } else {
        f = scaled;
      }
    }
  }
  return inv;
}

RotaryTable::RotaryTable(const RopeConfig& rope, int64_t head_dim)
    : inv_freq_(rotary_inverse_frequencies(rope, head_dim)), head_dim_(head_dim) {}

void RotaryTable::grow(int64_t positions) {
  const int64_t have = cos_.defined() ? cos_.size(0) : 0;
  if (positions <= have) return;
  const int64_t n = std::max<int64_t>(positions, std::max<int64_t>(2 * have, 64));
  Tensor c = empty({n, head_dim_}, kFloat32), s = empty({n, head_dim_}, kFloat32);
  float* pc = c.data<float>();
  float* ps = s.data<float>();
  const int64_t half = head_dim_ / 2;
  for (int64_t p = 0; p < n; ++p) {
    for (int64_t i = 0; i < half; ++i) {
      const float angle = static_cast<float>(p) * inv_freq_[static_cast<size_t>(i)];
      const float cv = std::cos(angle), sv = std::sin(angle);
      pc[p * head_dim_ + i] = pc[p * head_dim_ + half + i] = cv;
      ps[p * head_dim_ + i] = ps[p * head_dim_ + half + i] = sv;
    }
  }
  cos_ = c;
  sin_ = s;
  device_cos_ = Tensor();
  device_sin_ = Tensor();
}

std::pair<Tensor, Tensor> RotaryTable::rows(int64_t offset, int64_t length, const Device& device) {
  grow(offset + length);
  if (device.is_cpu()) return {cos_.narrow(0, offset, length), sin_.narrow(0, offset, length)};
  if (!device_cos_.defined() || device_cos_.device() != device) {
    device_cos_ = cos_.to(device);
    device_sin_ = sin_.to(device);
  }
  return {device_cos_.narrow(0, offset, length), device_sin_.narrow(0, offset, length)};
}

}  // namespace mantissa::models
