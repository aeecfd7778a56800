#include "train/parameter_range.h"

#include <cmath>
#include <cstdint>
#include <limits>

#include "mantissa/autograd/grad_mode.h"
#include "mantissa/core/bfloat16.h"
#include "mantissa/core/half.h"
#include "mantissa/ops/elementwise.h"
#include "mantissa/ops/reduce.h"
#include "mantissa/train/precisions/bitsandbytes_precision.h"

namespace mantissa::train {
namespace {

// max |x| over n values read as float by `at`, NaN when one is NaN. No allocation: the Trainer
// runs this over every parameter at each epoch's end, inside the training peak.
template <typename At>
double max_abs_of(int64_t n, At at) {
  float m = 0.0f;
  bool nan = false;
  for (int64_t i = 0; i < n; ++i) {
    const float a = std::fabs(at(i));
    nan |= a != a;
    m = a > m ? a : m;
  }
  return nan ? std::numeric_limits<double>::quiet_NaN() : static_cast<double>(m);
}

double max_abs(const Tensor& p) {
  if (p.is_contiguous() && !p.is_cuda()) {
    const int64_t n = p.numel();
    if (p.dtype() == kFloat32) {
      const float* x = p.data<float>();
      return max_abs_of(n, [x](int64_t i) { return x[i]; });
    }
    if (p.dtype() == kBFloat16 || p.dtype() == kFloat16) {
      const auto* x = static_cast<const uint16_t*>(p.data_ptr());
      if (p.dtype() == kBFloat16)
        return max_abs_of(n, [x](int64_t i) { return bf16_bits_to_float(x[i]); });
      return max_abs_of(n, [x](int64_t i) { return half_bits_to_float(x[i]); });
    }
  }
  // Other dtypes (float64 keeps its range), layouts and devices: through the ops.
  return max(abs(p.detach())).to(kFloat64).item();
}

// Whether none of the n values has an exponent field of all ones (inf or NaN), from the bits
// alone: a vectorized loop, at about memory speed (the loaders check every weight they read,
// and max_abs_of's float conversions cost as much as a bf16 model's load). `omp simd`: -O2's
// cost model left the loop scalar.
template <typename Bits>
bool exponents_all_finite(const Bits* x, int64_t n, Bits exponent) {
  Bits special = 0;
#pragma omp simd reduction(| : special)
  for (int64_t i = 0; i < n; ++i) special |= static_cast<Bits>((x[i] & exponent) == exponent);
  return special == 0;
}

bool finite_by_bits(const Tensor& t) {
  if (!t.is_contiguous() || t.is_cuda()) return false;
  if (t.dtype() == kFloat32)
    return exponents_all_finite(static_cast<const uint32_t*>(t.data_ptr()), t.numel(),
                                uint32_t{0x7f800000});
  if (t.dtype() == kBFloat16)
    return exponents_all_finite(static_cast<const uint16_t*>(t.data_ptr()), t.numel(),
                                uint16_t{0x7f80});
  if (t.dtype() == kFloat16)
    return exponents_all_finite(static_cast<const uint16_t*>(t.data_ptr()), t.numel(),
                                uint16_t{0x7c00});
  return false;  // not known from the bits: max_abs tells
}

}  // namespace

std::optional<double> non_finite_value(const Tensor& t) {
  if (t.numel() == 0 || finite_by_bits(t)) return std::nullopt;
  // The max of |t| is NaN when t holds a NaN and inf when it holds an inf.
  const double m = max_abs(t);
  if (std::isfinite(m)) return std::nullopt;
  return m;
}

ParameterRange parameter_range(const nn::Module& module) {
  NoGradGuard no_grad;
  ParameterRange r;
  for (const auto& [name, p] : module.named_parameters()) {
    if (!p.dtype().is_floating_point() || p.numel() == 0) continue;
    // Released by fsdp between uses: its values are the ranks' slices, and a non-finite one
    // shows in the next forward's loss on every rank.
    if (p.storage() && p.storage()->released()) continue;
    const double m = max_abs(p);
    if (!std::isfinite(m)) {
      if (r.non_finite_name.empty()) {
        r.non_finite_name = name;
        r.non_finite_value = m;
      }
    } else if (m > r.largest) {
      r.largest = m;
      r.largest_name = name;
    }
  }
  return r;
}

NonFiniteTensor non_finite_quantized_state(const nn::Module& module) {
  NoGradGuard no_grad;
  for (const auto& [layer, m] : module.named_modules()) {
    if (!BitsandbytesPrecision::is_quantized_layer(*m)) continue;
    for (const auto& [name, b] : m->named_buffers(/*recurse=*/false)) {
      if (!b.dtype().is_floating_point() || b.numel() == 0) continue;
      const double v = max_abs(b);
      if (!std::isfinite(v)) return {layer.empty() ? name : layer + "." + name, v};
    }
  }
  return {};
}

NonFiniteTensor negative_quantized_scale(const nn::Module& module) {
  NoGradGuard no_grad;
  for (const auto& [layer, m] : module.named_modules()) {
    if (!BitsandbytesPrecision::is_quantized_layer(*m)) continue;
    for (const auto& [name, b] : m->named_buffers(/*recurse=*/false)) {
      if (!b.dtype().is_floating_point() || b.numel() == 0) continue;
      if (!name.ends_with("absmax") && name != "SCB") continue;
      const double least = -max(neg(b)).to(kFloat64).item();  // NaN was refused before
      if (least < 0) return {layer.empty() ? name : layer + "." + name, least};
    }
  }
  return {};
}

}  // namespace mantissa::train
